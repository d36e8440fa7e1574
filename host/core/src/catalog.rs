//! (Long: the real catalog from the bundled data and Karpenter's capacity model read together.)
//! Instance catalogs: Karpenter's synthetic benchmark types, and real EC2 types built from
//! the bundled data (`host/core/data`, see its README for provenance) with Karpenter's AWS
//! capacity and overhead model.
//!
//! AWS model (as Karpenter's AWS provider computes it, `pkg/providers/instancetype/types.go`):
//! - memory capacity = `MemoryInfo.SizeInMiB` (less 64 MiB on arm64, which Graviton reserves)
//!   minus the VM overhead, `ceil(7.5%)` by default;
//! - max pods = the kubelet's `maxPods`, else (AMI families with ENI-limited pod density) the
//!   default network card's ENIs less reserved ones × (IPv4 addresses per ENI − 1) + 2,
//!   else 110; then at most `podsPerCore` × vCPUs where the family honours it;
//! - kube-reserved cpu = 6% of the first core + 1% of the second + 0.5% of the third and
//!   fourth + 0.25% of every further core; kube-reserved memory = 11 MiB × pods + 255 MiB,
//!   pods being the ENI-limited count for AL2023/AL2/Custom and max pods for Bottlerocket;
//!   kube-reserved ephemeral storage = 1 GiB; each overridden by the kubelet's `kubeReserved`;
//! - system-reserved = the kubelet's `systemReserved`;
//! - eviction threshold: memory.available 100 MiB, nodefs.available 10% of the root volume
//!   (20 GiB unless the EC2NodeClass says otherwise), each overridden by `evictionHard` (a
//!   quantity, or a percentage of capacity; 100% disables it). `evictionSoft` reserves nothing.
//!
//! Spot prices are not real data: a spot offering costs [`SPOT_PRICE_MODEL_FACTOR`] × the
//! on-demand price, and every consumer that shows it must say it is a model.

use crate::cloud::{TENANCY_DEDICATED, TENANCY_DEFAULT};
use crate::instancetype::{InstanceType, Offering};
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Read;
use tenon_api::wellknown as wk;
use thiserror::Error;

/// Modelled spot price as a fraction of on-demand (a 60% discount).
pub const SPOT_PRICE_MODEL_FACTOR: f64 = 0.4;
/// Karpenter's default `VM_MEMORY_OVERHEAD_PERCENT`.
pub const DEFAULT_VM_MEMORY_OVERHEAD: f64 = 0.075;
/// Root volume assumed when the NodeClass does not set one.
pub const DEFAULT_ROOT_VOLUME_BYTES: i64 = 20 << 30;

const GIB: i64 = 1 << 30;
const MIB: i64 = 1 << 20;

/// Karpenter's benchmark instance types: type `i` has `i+1` vCPU, `2(i+1)` GiB, `10(i+1)`
/// pods, amd64 Linux, offered on-demand in three zones and spot in two, priced
/// `0.1 × vCPU + 0.1 × GB` as Karpenter's fake provider prices them.
pub fn synthetic(count: usize) -> Vec<InstanceType> {
    (0..count)
        .map(|i| {
            let n = i as i64 + 1;
            let capacity = Resources::new(n * 1000, 2 * n * GIB, 10 * n);
            let price = 0.1 * n as f64 + 0.1 * (2 * n * GIB) as f64 / 1e9;
            let mut offerings = Vec::new();
            for (ct, zones) in [
                ("spot", &["test-zone-1", "test-zone-2"][..]),
                ("on-demand", &["test-zone-1", "test-zone-2", "test-zone-3"][..]),
            ] {
                for z in zones {
                    offerings.push(Offering {
                        zone_id: None,
                        zone: z.to_string(),
                        capacity_type: ct.into(),
                        price,
                        available: true,
                    });
                }
            }
            let name = format!("fake-it-{i}");
            let reqs = Requirements::from_iter([
                Requirement::in_values(wk::LABEL_INSTANCE_TYPE, [name.clone()]),
                Requirement::in_values(wk::LABEL_ARCH, ["amd64"]),
                Requirement::in_values(wk::LABEL_OS, ["linux"]),
                Requirement::in_values(wk::LABEL_INSTANCE_CPU, [n.to_string()]),
                Requirement::in_values(wk::LABEL_INSTANCE_TENANCY, [TENANCY_DEFAULT, TENANCY_DEDICATED]),
            ]);
            InstanceType::new(&name, reqs, capacity, Resources::new(100, 10 * MIB, 0), offerings)
        })
        .collect()
}

#[derive(Debug, Error)]
pub enum CatalogError {
    #[error("reading bundled data {0}: {1}")]
    Data(&'static str, String),
    #[error("no offerings bundled for region {0:?} (have us-east-1, us-west-2)")]
    Region(String),
}

const TYPES_GZ: &[u8] = include_bytes!("../data/ec2-instance-types.json.gz");
const OFFERINGS_US_EAST_1: &[u8] = include_bytes!("../data/ec2-offerings-az-us-east-1.json.gz");
const OFFERINGS_US_WEST_2: &[u8] = include_bytes!("../data/ec2-offerings-az-us-west-2.json.gz");
const PRICES_US_EAST_1: &str = include_str!("../data/ec2-on-demand-prices-us-east-1.csv");

fn gunzip(name: &'static str, bytes: &[u8]) -> Result<Value, CatalogError> {
    let mut s = String::new();
    flate2::read::GzDecoder::new(bytes).read_to_string(&mut s).map_err(|e| CatalogError::Data(name, e.to_string()))?;
    serde_json::from_str(&s).map_err(|e| CatalogError::Data(name, e.to_string()))
}

/// On-demand prices bundled for us-east-1 (USD/hour by type).
pub fn us_east_1_prices() -> BTreeMap<String, f64> {
    PRICES_US_EAST_1
        .lines()
        .skip(1)
        .filter_map(|l| {
            let (name, price) = l.split_once(',')?;
            Some((name.to_string(), price.trim().parse().ok()?))
        })
        .collect()
}

/// How an AMI family shapes capacity (Karpenter's `FeatureFlags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AmiFamilyFlags {
    /// Kube-reserved memory counts the ENI-limited pods, whatever `maxPods` says.
    pub eni_limited_memory_overhead: bool,
    pub pods_per_core_enabled: bool,
    /// Without `maxPods`, pods are ENI-limited (else 110).
    pub eni_limited_pod_density: bool,
}

impl AmiFamilyFlags {
    /// AL2023, AL2 and Custom.
    pub const DEFAULT: AmiFamilyFlags = AmiFamilyFlags {
        eni_limited_memory_overhead: true,
        pods_per_core_enabled: true,
        eni_limited_pod_density: true,
    };
    pub const BOTTLEROCKET: AmiFamilyFlags = AmiFamilyFlags {
        eni_limited_memory_overhead: false,
        pods_per_core_enabled: false,
        eni_limited_pod_density: true,
    };

    /// The flags of an EC2NodeClass' AMI family (`EC2NodeClass::ami_family`).
    pub fn of(family: &str) -> AmiFamilyFlags {
        if family.eq_ignore_ascii_case("Bottlerocket") { Self::BOTTLEROCKET } else { Self::DEFAULT }
    }
}

/// The kubelet settings of an EC2NodeClass that shape capacity and overhead. Values are as
/// written (quantities; eviction thresholds may be percentages); the API validates them, and
/// one that cannot be read here is left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KubeletModel {
    pub max_pods: Option<i64>,
    pub pods_per_core: Option<i64>,
    pub kube_reserved: BTreeMap<String, String>,
    pub system_reserved: BTreeMap<String, String>,
    pub eviction_hard: BTreeMap<String, String>,
    /// Carried for completeness: a soft threshold only warns, it reserves nothing.
    pub eviction_soft: BTreeMap<String, String>,
}

/// Options for building the EC2 catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct AwsCatalogOptions {
    pub region: String,
    pub root_volume_bytes: i64,
    /// Offer spot (at the modelled price) where the type supports it.
    pub spot: bool,
    pub kubelet: KubeletModel,
    pub ami_family: AmiFamilyFlags,
    /// ENIs the CNI keeps for itself (Karpenter's `RESERVED_ENIS`).
    pub reserved_enis: i64,
    /// Memory the hypervisor keeps, as a fraction (Karpenter's `VM_MEMORY_OVERHEAD_PERCENT`).
    pub vm_memory_overhead: f64,
}

impl Default for AwsCatalogOptions {
    fn default() -> Self {
        AwsCatalogOptions {
            region: "us-east-1".into(),
            root_volume_bytes: DEFAULT_ROOT_VOLUME_BYTES,
            spot: true,
            kubelet: KubeletModel::default(),
            ami_family: AmiFamilyFlags::DEFAULT,
            reserved_enis: 0,
            vm_memory_overhead: DEFAULT_VM_MEMORY_OVERHEAD,
        }
    }
}

/// Karpenter's `ENILimitedPods`: the VPC CNI uses the default network card only.
pub fn eni_limited_pods(net: &Value, reserved_enis: i64) -> Option<i64> {
    let card = net["DefaultNetworkCardIndex"].as_i64().unwrap_or(0);
    let enis = net["NetworkCards"]
        .as_array()
        .and_then(|cards| {
            cards
                .iter()
                .find(|c| c["NetworkCardIndex"].as_i64().unwrap_or(0) == card)
                .and_then(|c| c["MaximumNetworkInterfaces"].as_i64())
        })
        .or_else(|| net["MaximumNetworkInterfaces"].as_i64())?;
    let usable = (enis - reserved_enis).max(0);
    if usable == 0 {
        return Some(0);
    }
    Some(usable * (net["Ipv4AddressesPerInterface"].as_i64()? - 1) + 2)
}

/// An eviction threshold: a quantity, or a percentage of `capacity` rounded up (100% is
/// "disabled", so 0).
fn eviction_signal(value: &str, capacity: i64) -> Option<i64> {
    match value.trim().strip_suffix('%') {
        Some(p) => {
            let p: f64 = p.trim().parse().ok()?;
            let p = if p == 100.0 { 0.0 } else { p };
            Some((capacity as f64 / 100.0 * p).ceil() as i64)
        }
        None => i64::try_from(tenon_api::quantity::parse_units(value).ok()?).ok(),
    }
}

/// `kubeReserved`/`systemReserved`-style overrides onto `r` (cpu, memory, ephemeral-storage).
fn set_reserved(r: &mut Resources, values: &BTreeMap<String, String>) {
    for (k, v) in values {
        let units = || tenon_api::quantity::parse_units(v).ok().and_then(|u| i64::try_from(u).ok());
        match k.as_str() {
            "cpu" => {
                if let Some(m) = tenon_api::quantity::parse_milli(v).ok().and_then(|m| i64::try_from(m).ok()) {
                    r.cpu = m;
                }
            }
            "memory" => r.memory = units().unwrap_or(r.memory),
            "ephemeral-storage" => r.ephemeral_storage = units().unwrap_or(r.ephemeral_storage),
            _ => {}
        }
    }
}

/// The real EC2 catalog of a region from the bundled data, priced with the bundled
/// us-east-1 on-demand table (types without a price are left out, as Karpenter leaves out
/// types it cannot price).
pub fn aws(opts: &AwsCatalogOptions) -> Result<Vec<InstanceType>, CatalogError> {
    let types = gunzip("ec2-instance-types.json.gz", TYPES_GZ)?;
    let offerings = match opts.region.as_str() {
        "us-east-1" => gunzip("ec2-offerings-az-us-east-1.json.gz", OFFERINGS_US_EAST_1)?,
        "us-west-2" => gunzip("ec2-offerings-az-us-west-2.json.gz", OFFERINGS_US_WEST_2)?,
        r => return Err(CatalogError::Region(r.to_string())),
    };
    let mut zones: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for o in offerings.as_array().into_iter().flatten() {
        if let (Some(t), Some(z)) = (o["InstanceType"].as_str(), o["Location"].as_str()) {
            zones.entry(t).or_default().push(z);
        }
    }
    let prices = us_east_1_prices();
    let mut out = Vec::new();
    for (name, info) in types.as_object().into_iter().flatten() {
        let (Some(price), Some(zs)) = (prices.get(name), zones.get(name.as_str())) else { continue };
        let model = |_: &str| Some(price * SPOT_PRICE_MODEL_FACTOR);
        if let Some(it) = instance_type_from_info(name, info, *price, zs, &model, opts) {
            out.push(it);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// EC2's names as label values: lower case, spaces as dashes (`Radeon Pro V520`).
fn kebab(s: &str) -> String {
    s.to_ascii_lowercase().replace(' ', "-")
}

/// Karpenter's kube-reserved CPU in millicores for `vcpus` cores.
pub fn kube_reserved_cpu_milli(vcpus: i64) -> i64 {
    let cores = vcpus * 1000;
    let band = |lo: i64, hi: i64, per_mille10: i64| (cores.min(hi) - lo).max(0) * per_mille10 / 1000;
    // 6%, 1%, 0.5%, 0.25% expressed in tenths of a percent.
    band(0, 1000, 60) + band(1000, 2000, 10) + band(2000, 4000, 5) + (cores - 4000).max(0) * 25 / 10_000
}

/// One instance type from its `DescribeInstanceTypes` entry (`info`, in the API's JSON
/// shape), its on-demand price, the zones offering it and a spot price per zone (`None`: no
/// spot offering there). `None` when the type cannot run Kubernetes nodes (no x86_64/arm64,
/// no usable usage class).
pub fn instance_type_from_info(
    name: &str,
    info: &Value,
    price: f64,
    zones: &[&str],
    spot_price: &dyn Fn(&str) -> Option<f64>,
    opts: &AwsCatalogOptions,
) -> Option<InstanceType> {
    let arch =
        info["ProcessorInfo"]["SupportedArchitectures"].as_array()?.iter().filter_map(Value::as_str).find_map(|a| {
            match a {
                "x86_64" => Some("amd64"),
                "arm64" => Some("arm64"),
                _ => None,
            }
        })?;
    let vcpus = info["VCpuInfo"]["DefaultVCpus"].as_i64()?;
    let mem_mib = info["MemoryInfo"]["SizeInMiB"].as_i64()?;
    let net = &info["NetworkInfo"];
    // Graviton keeps 64 MiB (CMA) from the OS (Karpenter looks at the first architecture).
    let first_arch = info["ProcessorInfo"]["SupportedArchitectures"][0].as_str();
    let usable_mib = if first_arch == Some("arm64") { mem_mib - 64 } else { mem_mib };
    let vm_overhead_mib = (usable_mib as f64 * opts.vm_memory_overhead).ceil() as i64;
    let memory = (usable_mib - vm_overhead_mib) * MIB;
    let (kubelet, flags) = (&opts.kubelet, opts.ami_family);
    let eni_pods = eni_limited_pods(net, opts.reserved_enis)?;
    let mut max_pods = match kubelet.max_pods {
        Some(n) => n,
        None if flags.eni_limited_pod_density => eni_pods,
        None => 110,
    };
    if let Some(per_core) = kubelet.pods_per_core.filter(|p| *p > 0)
        && flags.pods_per_core_enabled
    {
        max_pods = max_pods.min(per_core * vcpus);
    }
    let mut capacity = Resources::new(vcpus * 1000, memory, max_pods);
    capacity.ephemeral_storage = opts.root_volume_bytes;

    let (family, size) = name.split_once('.')?;
    let category: String = family.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
    let generation: String = family[category.len()..].chars().take_while(char::is_ascii_digit).collect();
    let flex = family.contains("-flex");
    let mut labels: Vec<(&str, String)> = vec![
        (wk::LABEL_INSTANCE_TYPE, name.to_string()),
        (wk::LABEL_ARCH, arch.to_string()),
        (wk::LABEL_OS, "linux".to_string()),
        (wk::LABEL_REGION, opts.region.clone()),
        (wk::LABEL_INSTANCE_CATEGORY, category),
        (wk::LABEL_INSTANCE_FAMILY, family.to_string()),
        (wk::LABEL_INSTANCE_SIZE, size.to_string()),
        (wk::LABEL_INSTANCE_CPU, vcpus.to_string()),
        (wk::LABEL_INSTANCE_CPU_MANUFACTURER, kebab(info["ProcessorInfo"]["Manufacturer"].as_str().unwrap_or(""))),
        (wk::LABEL_INSTANCE_MEMORY, mem_mib.to_string()),
        (wk::LABEL_INSTANCE_HYPERVISOR, info["Hypervisor"].as_str().unwrap_or("").to_string()),
        (
            wk::LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT,
            net["EncryptionInTransitSupported"].as_bool().unwrap_or(false).to_string(),
        ),
        (wk::LABEL_INSTANCE_NITRO_ENCLAVES, (info["NitroEnclavesSupport"].as_str() == Some("supported")).to_string()),
        (wk::LABEL_INSTANCE_CAPABILITY_FLEX, flex.to_string()),
    ];
    if !generation.is_empty() {
        labels.push((wk::LABEL_INSTANCE_GENERATION, generation));
    }
    if let Some(ghz) = info["ProcessorInfo"]["SustainedClockSpeedInGhz"].as_f64() {
        labels.push((wk::LABEL_INSTANCE_CPU_CLOCK_MHZ, ((ghz * 1000.0).round() as i64).to_string()));
    }
    if let Some(gbps) = net["NetworkCards"][0]["BaselineBandwidthInGbps"].as_f64() {
        labels.push((wk::LABEL_INSTANCE_NETWORK_BANDWIDTH, ((gbps * 1000.0).round() as i64).to_string()));
    }
    // Only EBS-optimized-by-default types publish a bandwidth, as Karpenter's do.
    if let Some(mbps) = info["EbsInfo"]["EbsOptimizedInfo"]["MaximumBandwidthInMbps"].as_i64()
        && info["EbsInfo"]["EbsOptimizedSupport"].as_str() == Some("default")
    {
        labels.push((wk::LABEL_INSTANCE_EBS_BANDWIDTH, mbps.to_string()));
    }
    if let Some(gb) = info["InstanceStorageInfo"]["TotalSizeInGB"].as_i64()
        && info["InstanceStorageInfo"]["NvmeSupport"].as_str() != Some("unsupported")
    {
        labels.push((wk::LABEL_INSTANCE_LOCAL_NVME, gb.to_string()));
    }
    let gpus = info["GpuInfo"]["Gpus"].as_array().map(Vec::as_slice).unwrap_or_default();
    // GPU labels describe a type with one kind of GPU; capacity counts every kind.
    if let [gpu] = gpus {
        labels.push((wk::LABEL_INSTANCE_GPU_NAME, kebab(gpu["Name"].as_str().unwrap_or(""))));
        labels.push((wk::LABEL_INSTANCE_GPU_MANUFACTURER, kebab(gpu["Manufacturer"].as_str().unwrap_or(""))));
        labels.push((wk::LABEL_INSTANCE_GPU_COUNT, gpu["Count"].as_i64().unwrap_or(0).to_string()));
        labels.push((wk::LABEL_INSTANCE_GPU_MEMORY, gpu["MemoryInfo"]["SizeInMiB"].as_i64().unwrap_or(0).to_string()));
    }
    for (maker, resource) in
        [("NVIDIA", wk::RESOURCE_NVIDIA_GPU), ("AMD", wk::RESOURCE_AMD_GPU), ("Habana", wk::RESOURCE_HABANA_GAUDI)]
    {
        let count: i64 =
            gpus.iter().filter(|g| g["Manufacturer"].as_str() == Some(maker)).filter_map(|g| g["Count"].as_i64()).sum();
        if count > 0 {
            capacity.set(resource, count);
        }
    }
    let neuron = info["NeuronInfo"]["NeuronDevices"].as_array().map(Vec::as_slice).unwrap_or_default();
    let inference = info["InferenceAcceleratorInfo"]["Accelerators"].as_array().map(Vec::as_slice).unwrap_or_default();
    // Accelerator labels: a single Neuron device kind, else a single inference accelerator.
    let accelerator = match (neuron, inference) {
        ([device], _) => Some((device["Name"].as_str().unwrap_or(""), "aws", device["Count"].as_i64().unwrap_or(0))),
        ([], [a]) => Some((
            a["Name"].as_str().unwrap_or(""),
            a["Manufacturer"].as_str().unwrap_or(""),
            a["Count"].as_i64().unwrap_or(0),
        )),
        _ => None,
    };
    if let Some((accel, maker, count)) = accelerator {
        labels.push((wk::LABEL_INSTANCE_ACCELERATOR_NAME, kebab(accel)));
        labels.push((wk::LABEL_INSTANCE_ACCELERATOR_MANUFACTURER, kebab(maker)));
        labels.push((wk::LABEL_INSTANCE_ACCELERATOR_COUNT, count.to_string()));
    }
    let devices: i64 = neuron.iter().filter_map(|d| d["Count"].as_i64()).sum();
    if devices > 0 {
        capacity.set(wk::RESOURCE_AWS_NEURON, devices);
        // Cores as Karpenter counts them: the first device kind's cores per device.
        let cores_per_device = neuron[0]["CoreInfo"]["Count"].as_i64().unwrap_or(0);
        capacity.set(wk::RESOURCE_AWS_NEURON_CORE, neuron[0]["Count"].as_i64().unwrap_or(0) * cores_per_device);
    }
    if let Some(efa) = net["EfaInfo"]["MaximumEfaInterfaces"].as_i64().filter(|n| *n > 0) {
        capacity.set(wk::RESOURCE_EFA, efa);
    }
    let mut reqs = Requirements::from_iter(labels.into_iter().map(|(k, v)| Requirement::in_values(k, [v])));
    // Every type launches either way: the tenancy is the launch's choice (`launch_tenancy`).
    reqs.add(Requirement::in_values(wk::LABEL_INSTANCE_TENANCY, [TENANCY_DEFAULT, TENANCY_DEDICATED]));
    let reqs = reqs.compact();

    // Overhead = kube-reserved + system-reserved + the eviction threshold.
    let reserved_pods = if flags.eni_limited_memory_overhead { eni_limited_pods(net, 0)? } else { max_pods };
    let mut overhead = Resources::new(kube_reserved_cpu_milli(vcpus), (11 * reserved_pods + 255) * MIB, 0);
    overhead.ephemeral_storage = GIB;
    set_reserved(&mut overhead, &kubelet.kube_reserved);
    let mut system = Resources::default();
    set_reserved(&mut system, &kubelet.system_reserved);
    overhead.add(&system);
    let hard = |signal: &str, capacity: i64, default: i64| {
        kubelet.eviction_hard.get(signal).and_then(|v| eviction_signal(v, capacity)).unwrap_or(default)
    };
    overhead.memory += hard("memory.available", memory, 100 * MIB);
    overhead.ephemeral_storage +=
        hard("nodefs.available", opts.root_volume_bytes, (opts.root_volume_bytes as f64 / 100.0 * 10.0).ceil() as i64);

    let classes: Vec<&str> = info["SupportedUsageClasses"].as_array()?.iter().filter_map(Value::as_str).collect();
    let mut offerings = Vec::new();
    for z in zones {
        if classes.contains(&"on-demand") {
            offerings.push(Offering {
                zone_id: None,
                zone: z.to_string(),
                capacity_type: wk::CAPACITY_TYPE_ON_DEMAND.into(),
                price,
                available: true,
            });
        }
        if opts.spot
            && classes.contains(&"spot")
            && let Some(spot) = spot_price(z)
        {
            offerings.push(Offering {
                zone_id: None,
                zone: z.to_string(),
                capacity_type: wk::CAPACITY_TYPE_SPOT.into(),
                price: spot,
                available: true,
            });
        }
    }
    if offerings.is_empty() {
        return None;
    }
    Some(InstanceType::new(name, reqs, capacity, overhead, offerings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kube_reserved_cpu_matches_karpenter() {
        assert_eq!(kube_reserved_cpu_milli(1), 60);
        assert_eq!(kube_reserved_cpu_milli(2), 70);
        assert_eq!(kube_reserved_cpu_milli(4), 80);
        assert_eq!(kube_reserved_cpu_milli(8), 90);
        assert_eq!(kube_reserved_cpu_milli(96), 310);
    }

    #[test]
    fn real_catalog_has_karpenter_labels_and_overheads() {
        let cat = aws(&AwsCatalogOptions::default()).unwrap();
        assert!(cat.len() > 700, "{} types", cat.len());
        let m6a = cat.iter().find(|t| t.name == "m6a.2xlarge").unwrap();
        assert_eq!(m6a.label(wk::LABEL_INSTANCE_CATEGORY), Some("m"));
        assert_eq!(m6a.label(wk::LABEL_INSTANCE_FAMILY), Some("m6a"));
        assert_eq!(m6a.label(wk::LABEL_INSTANCE_GENERATION), Some("6"));
        assert_eq!(m6a.label(wk::LABEL_INSTANCE_CPU_MANUFACTURER), Some("amd"));
        assert_eq!(m6a.label(wk::LABEL_ARCH), Some("amd64"));
        assert_eq!(m6a.capacity.cpu, 8000);
        assert_eq!(m6a.capacity.pods, 4 * 14 + 2, "58 pods from 4 ENIs × 15 IPs");
        assert_eq!(m6a.allocatable().cpu, 8000 - 90);
        let od = m6a.offerings.iter().find(|o| o.capacity_type == "on-demand").unwrap();
        assert!((od.price - 0.3456).abs() < 1e-9, "bundled us-east-1 price, got {}", od.price);
        let p4d = cat.iter().find(|t| t.name == "p4d.24xlarge").unwrap();
        assert_eq!(p4d.capacity.get("nvidia.com/gpu"), 8);
    }

    #[test]
    fn synthetic_matches_the_benchmark_shape() {
        let s = synthetic(400);
        assert_eq!(s.len(), 400);
        assert_eq!((s[0].capacity.cpu, s[0].capacity.memory, s[0].capacity.pods), (1000, 2 * GIB, 10));
        assert_eq!((s[399].capacity.cpu, s[399].capacity.pods), (400_000, 4000));
    }
}
