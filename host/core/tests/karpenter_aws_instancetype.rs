//! (Long: tests only, one per ported Karpenter instance-type case, with the fake EC2 types they share.)
//! The AWS provider's `pkg/providers/instancetype/suite_test.go`, ported: the capacity and
//! overhead model of real EC2 instance types (Tenon's bundled DescribeInstanceTypes data)
//! under an EC2NodeClass' kubelet settings and AMI family. Each test names the cases it
//! accounts for (tests/conformance/karpenter.tsv).
//!
//! Tenon keeps one overhead per type (kube-reserved + system-reserved + eviction threshold);
//! where a case checks one component, the test fixes the others at their defaults and
//! checks the sum, or compares two catalogs that differ only in that component.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use support::GIB;
use support::karpenter::{Cluster, Decision};
use tenon_api::wellknown as wk;
use tenon_core::catalog::{AmiFamilyFlags, AwsCatalogOptions, KubeletModel, aws, instance_type_from_info};
use tenon_core::cloud::UnavailableOffering;
use tenon_core::instancetype::{InstanceType, Offering};
use tenon_core::orchestration::ice::UnavailableOfferings;
use tenon_core::requirements::Requirements;

const MIB: i64 = 1 << 20;

fn catalog(kubelet: KubeletModel, family: AmiFamilyFlags) -> Vec<InstanceType> {
    aws(&AwsCatalogOptions { kubelet, ami_family: family, ..AwsCatalogOptions::default() }).unwrap()
}

fn with(f: impl FnOnce(&mut AwsCatalogOptions)) -> Vec<InstanceType> {
    let mut o = AwsCatalogOptions::default();
    f(&mut o);
    aws(&o).unwrap()
}

fn find<'a>(cat: &'a [InstanceType], name: &str) -> &'a InstanceType {
    cat.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{name} in the bundled catalog"))
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// m5.xlarge under default settings: 4 vCPU, 16384 MiB, 58 pods (4 ENIs × 14 + 2).
const M5_XLARGE_MEMORY: i64 = (16384 - 1229) * MIB; // 16384 MiB less ceil(7.5%)

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:972
#[test]
fn without_max_pods_al2023_pods_are_eni_limited_never_the_flat_110() {
    let cat = catalog(KubeletModel::default(), AmiFamilyFlags::DEFAULT);
    assert!(cat.iter().all(|t| t.capacity.pods != 110), "a type has 110 pods without maxPods");
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1088
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1144
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1477
#[test]
fn default_overhead_of_m5_xlarge_is_karpenters() {
    let cat = catalog(KubeletModel::default(), AmiFamilyFlags::DEFAULT);
    let m5 = find(&cat, "m5.xlarge");
    assert_eq!((m5.capacity.cpu, m5.capacity.memory, m5.capacity.pods), (4000, M5_XLARGE_MEMORY, 58));
    // kube-reserved cpu 80m, memory 11 × 58 + 255 = 893Mi, ephemeral 1Gi; no system-reserved;
    // eviction: memory 100Mi, nodefs 10% of the 20Gi root volume.
    assert_eq!(m5.overhead.cpu, 80);
    assert_eq!(m5.overhead.memory, 893 * MIB + 100 * MIB);
    assert_eq!(m5.overhead.ephemeral_storage, GIB + (20 * GIB) / 10);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1112
#[test]
fn system_reserved_is_added_as_written() {
    let base = catalog(KubeletModel::default(), AmiFamilyFlags::DEFAULT);
    let kubelet = KubeletModel {
        system_reserved: map(&[("cpu", "2"), ("memory", "20Gi"), ("ephemeral-storage", "10Gi")]),
        ..KubeletModel::default()
    };
    let reserved = catalog(kubelet, AmiFamilyFlags::DEFAULT);
    let (b, r) = (find(&base, "m5.xlarge"), find(&reserved, "m5.xlarge"));
    assert_eq!(r.overhead.cpu - b.overhead.cpu, 2000);
    assert_eq!(r.overhead.memory - b.overhead.memory, 20 * GIB);
    assert_eq!(r.overhead.ephemeral_storage - b.overhead.ephemeral_storage, 10 * GIB);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1168
#[test]
fn kube_reserved_values_replace_the_computed_ones() {
    let kubelet = KubeletModel {
        kube_reserved: map(&[("cpu", "2"), ("memory", "10Gi"), ("ephemeral-storage", "2Gi")]),
        ..KubeletModel::default()
    };
    let cat = catalog(kubelet, AmiFamilyFlags::DEFAULT);
    let m5 = find(&cat, "m5.xlarge");
    // Eviction stays at its defaults (memory 100Mi, nodefs 2Gi); no system-reserved.
    assert_eq!(m5.overhead.cpu, 2000);
    assert_eq!(m5.overhead.memory, 10 * GIB + 100 * MIB);
    assert_eq!(m5.overhead.ephemeral_storage, 2 * GIB + 2 * GIB);
}

/// The eviction memory threshold of m5.xlarge under `kubelet` (its kube-reserved taken out).
fn eviction_memory(kubelet: KubeletModel, family: AmiFamilyFlags, vm_overhead: f64) -> i64 {
    let cat = with(|o| {
        o.kubelet = kubelet;
        o.ami_family = family;
        o.vm_memory_overhead = vm_overhead;
    });
    let m5 = find(&cat, "m5.xlarge");
    // 11 × 58 + 255: without maxPods, m5.xlarge counts its 58 ENI-limited pods on every family.
    let kube_reserved = 893 * MIB;
    m5.overhead.memory - kube_reserved
}

fn hard(memory: &str) -> KubeletModel {
    KubeletModel { eviction_hard: map(&[("memory.available", memory)]), ..KubeletModel::default() }
}

fn soft_and_hard(soft: Option<&str>, hard: Option<&str>) -> KubeletModel {
    let threshold = |v: Option<&str>| v.map(|v| map(&[("memory.available", v)])).unwrap_or_default();
    KubeletModel { eviction_soft: threshold(soft), eviction_hard: threshold(hard), ..KubeletModel::default() }
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1211
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1243
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1275
#[test]
fn eviction_hard_memory_is_a_quantity_or_a_share_of_capacity_and_100_percent_disables_it() {
    let d = AmiFamilyFlags::DEFAULT;
    assert_eq!(eviction_memory(hard("500Mi"), d, 0.0), 500 * MIB);
    // 10% of 16384Mi (no VM overhead), rounded up.
    assert_eq!(eviction_memory(hard("10%"), d, 0.0), ((16384 * MIB) as f64 * 0.1).ceil() as i64);
    assert_eq!(eviction_memory(hard("100%"), d, 0.0), 0);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1307
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1341
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1373
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1408
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1501
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1537
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1573
#[test]
fn only_eviction_hard_reserves_memory_soft_thresholds_never_do() {
    let d = AmiFamilyFlags::DEFAULT;
    let capacity = M5_XLARGE_MEMORY as f64;
    for (soft, hard, want) in [
        (Some("50Mi"), None, 100 * MIB),
        (Some("500Mi"), None, 100 * MIB),
        (Some("100%"), None, 100 * MIB),
        (Some("10%"), Some("5%"), (capacity * 0.05).ceil() as i64),
        (Some("3Gi"), Some("1Gi"), GIB),
        (Some("2%"), Some("5%"), (capacity * 0.05).ceil() as i64),
        (Some("10%"), Some("1Gi"), GIB),
    ] {
        let got = eviction_memory(soft_and_hard(soft, hard), d, tenon_core::catalog::DEFAULT_VM_MEMORY_OVERHEAD);
        assert_eq!(got, want, "evictionSoft {soft:?}, evictionHard {hard:?}");
    }
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1440
#[test]
fn bottlerocket_takes_eviction_hard_too() {
    let got = eviction_memory(soft_and_hard(Some("10Gi"), Some("1Gi")), AmiFamilyFlags::BOTTLEROCKET, 0.075);
    assert_eq!(got, GIB);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1610
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1942
#[test]
fn max_pods_count_the_default_network_cards_enis_only() {
    for kubelet in [KubeletModel::default(), KubeletModel { pods_per_core: Some(0), ..KubeletModel::default() }] {
        let cat = catalog(kubelet, AmiFamilyFlags::DEFAULT);
        assert_eq!(find(&cat, "t3.large").capacity.pods, 35, "3 ENIs × 11 + 2");
        // Two network cards of 8 ENIs: the CNI uses the default card's, 8 × 49 + 2.
        assert_eq!(find(&cat, "m6idn.32xlarge").capacity.pods, 394);
        assert_eq!(find(&cat, "m6in.32xlarge").capacity.pods, 394);
    }
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1658
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1735
#[test]
fn max_pods_sets_every_types_pods() {
    let cat = catalog(KubeletModel { max_pods: Some(10), ..KubeletModel::default() }, AmiFamilyFlags::DEFAULT);
    assert!(cat.iter().all(|t| t.capacity.pods == 10));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1727
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1728
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1729
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1733
#[test]
fn kube_reserved_memory_counts_eni_limited_pods_except_on_bottlerocket() {
    let max10 = || KubeletModel { max_pods: Some(10), ..KubeletModel::default() };
    // AL2, AL2023 and Custom share the default flags: 11 × 35 + 255 = 640Mi.
    for family in ["AL2", "AL2023", "Custom"] {
        let cat = catalog(max10(), AmiFamilyFlags::of(family));
        let t3 = find(&cat, "t3.large");
        assert_eq!(t3.capacity.pods, 10, "{family}");
        assert_eq!(t3.overhead.memory, 640 * MIB + 100 * MIB, "{family}");
    }
    // Bottlerocket: 11 × 10 + 255 = 365Mi.
    let cat = catalog(max10(), AmiFamilyFlags::of("Bottlerocket"));
    let t3 = find(&cat, "t3.large");
    assert_eq!(t3.capacity.pods, 10);
    assert_eq!(t3.overhead.memory, 365 * MIB + 100 * MIB);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1806
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1807
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1808
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1812
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1814
#[test]
fn reserved_enis_take_pods_away_and_never_below_zero() {
    for (family, kube_reserved_mib) in [("AL2", 640), ("AL2023", 640), ("Bottlerocket", 11 * 24 + 255), ("Custom", 640)]
    {
        let cat = with(|o| {
            o.reserved_enis = 1;
            o.ami_family = AmiFamilyFlags::of(family);
        });
        let t3 = find(&cat, "t3.large");
        assert_eq!(t3.capacity.pods, 24, "{family}: 2 ENIs × 11 + 2");
        assert_eq!(t3.overhead.memory, kube_reserved_mib * MIB + 100 * MIB, "{family}");
    }
    let cat = with(|o| o.reserved_enis = 1_000_000);
    assert_eq!(find(&cat, "t3.large").capacity.pods, 0, "no usable ENI: no pods, not 2");
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1853
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1883
#[test]
fn pods_per_core_caps_pods_by_vcpus() {
    let eni = catalog(KubeletModel::default(), AmiFamilyFlags::DEFAULT);
    let per_core = catalog(KubeletModel { pods_per_core: Some(1), ..KubeletModel::default() }, AmiFamilyFlags::DEFAULT);
    for t in &per_core {
        let vcpus = t.capacity.cpu / 1000;
        assert_eq!(t.capacity.pods, vcpus.min(find(&eni, &t.name).capacity.pods), "{}", t.name);
    }
    let both = catalog(
        KubeletModel { pods_per_core: Some(4), max_pods: Some(20), ..KubeletModel::default() },
        AmiFamilyFlags::DEFAULT,
    );
    for t in &both {
        assert_eq!(t.capacity.pods, 20.min(4 * t.capacity.cpu / 1000), "{}", t.name);
    }
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1912
#[test]
fn bottlerocket_ignores_pods_per_core() {
    // The bundled DescribeInstanceTypes answers, by type (Karpenter's case reads the fake's).
    let mut text = String::new();
    let gz: &[u8] = include_bytes!("../data/ec2-instance-types.json.gz");
    std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(gz), &mut text).unwrap();
    let info: serde_json::Value = serde_json::from_str(&text).unwrap();
    let per_core =
        catalog(KubeletModel { pods_per_core: Some(1), ..KubeletModel::default() }, AmiFamilyFlags::BOTTLEROCKET);
    assert!(per_core.len() > 100, "{} types", per_core.len());
    for t in &per_core {
        let eni_limited = tenon_core::catalog::eni_limited_pods(&info[&t.name]["NetworkInfo"], 0).expect("ENI data");
        assert_eq!(t.capacity.pods, eni_limited, "{}: ENI-limited, not one per core", t.name);
    }
    // 4 ENIs × (15 addresses − 1) + 2, where one per core would be 4.
    assert_eq!(find(&per_core, "m5.xlarge").capacity.pods, 58);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1992
#[test]
fn allocatable_never_exceeds_what_the_kubelet_reports() {
    let cat = catalog(KubeletModel::default(), AmiFamilyFlags::DEFAULT);
    // What a running node's kubelet reports (Karpenter's measurements).
    for (name, memory_ki, cpu_milli) in [
        ("t4g.small", 1_408_312, 1930),
        ("t4g.medium", 3_377_496, 1930),
        ("t4g.xlarge", 15_136_012, 3920),
        ("m5.large", 7_220_184, 1930),
    ] {
        let t = find(&cat, name);
        let a = t.allocatable();
        assert!(a.memory <= memory_ki * 1024, "{name}: allocatable memory {} > kubelet's {}Ki", a.memory, memory_ki);
        assert!(a.cpu <= cpu_milli, "{name}: allocatable cpu {}m > kubelet's {cpu_milli}m", a.cpu);
    }
}

// ----- Scheduling onto the fake EC2's types -----

/// The instance types of the AWS provider's fake EC2 (`pkg/fake`), as the bundled
/// DescribeInstanceTypes data describes them; g4ad.16xlarge, which the bundled data lacks,
/// is a stand-in with its published shape.
fn fake_ec2() -> Arc<Vec<InstanceType>> {
    const NAMES: &[&str] = &[
        "c6g.large",
        "g4dn.8xlarge",
        "g5.12xlarge",
        "inf2.24xlarge",
        "inf2.xlarge",
        "m5.large",
        "m5.metal",
        "m5.xlarge",
        "m5.2xlarge",
        "m5.4xlarge",
        "m5.8xlarge",
        "m6idn.32xlarge",
        "m7i-flex.large",
        "p5.48xlarge",
        "t3.large",
        "t4g.medium",
        "t4g.small",
        "t4g.xlarge",
        "trn1.2xlarge",
    ];
    let mut types: Vec<InstanceType> = catalog(KubeletModel::default(), AmiFamilyFlags::DEFAULT)
        .into_iter()
        .filter(|t| NAMES.contains(&t.name.as_str()))
        .collect();
    assert_eq!(types.len(), NAMES.len(), "every fake type is in the bundled catalog");
    types.push(g4ad_16xlarge(serde_json::json!({})));
    Arc::new(types)
}

/// g4ad.16xlarge (4 AMD Radeon Pro V520), with `extra` fields merged into its description.
fn g4ad_16xlarge(extra: serde_json::Value) -> InstanceType {
    let mut info = serde_json::json!({
        "InstanceType": "g4ad.16xlarge",
        "Hypervisor": "nitro",
        "VCpuInfo": {"DefaultVCpus": 64},
        "MemoryInfo": {"SizeInMiB": 262144},
        "ProcessorInfo": {"Manufacturer": "AMD", "SupportedArchitectures": ["x86_64"], "SustainedClockSpeedInGhz": 3.0},
        "GpuInfo": {"Gpus": [{"Name": "Radeon Pro V520", "Manufacturer": "AMD", "Count": 4, "MemoryInfo": {"SizeInMiB": 8192}}]},
        "NetworkInfo": {
            "DefaultNetworkCardIndex": 0,
            "Ipv4AddressesPerInterface": 30,
            "MaximumNetworkInterfaces": 8,
            "EncryptionInTransitSupported": true,
            "NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 8, "BaselineBandwidthInGbps": 25.0}]
        },
        "SupportedUsageClasses": ["on-demand", "spot"],
        "NitroEnclavesSupport": "supported"
    });
    for (k, v) in extra.as_object().into_iter().flatten() {
        info[k] = v.clone();
    }
    let name = info["InstanceType"].as_str().unwrap().to_string();
    instance_type_from_info(
        &name,
        &info,
        3.468,
        &["us-east-1a", "us-east-1b"],
        &|_| None,
        &AwsCatalogOptions::default(),
    )
    .expect("a launchable type")
}

/// The suite's NodePool: on-demand only, `extra` more requirements (flow sequence items).
fn fake_cluster(extra: &str) -> Cluster {
    let mut c = Cluster::new(fake_ec2());
    c.nodepool(
        "default",
        &format!(
            "  template:\n    spec:\n      requirements: [{{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}{extra}]\n"
        ),
    );
    c
}

/// A pod requesting (and limited to) `n` of `resource`.
fn requesting(c: &mut Cluster, pod: &str, resource: &str, n: u32) {
    c.pending(
        &format!("{{name: {pod}}}"),
        &format!(
            "  containers: [{{name: c, image: i, resources: {{requests: {{{resource}: \"{n}\"}}, limits: {{{resource}: \"{n}\"}}}}}}]\n"
        ),
    );
}

/// Every pod lands on `instance_type`, on `nodes` NodeClaims in all.
fn assert_all_on(d: &Decision, pods: &[&str], instance_type: &str, nodes: usize) {
    let mut claims = BTreeSet::new();
    for p in pods {
        let labels = d.node_labels(p);
        assert_eq!(labels.get("node.kubernetes.io/instance-type").map(String::as_str), Some(instance_type), "{p}");
        let nc = d.nodeclaim_of(p).unwrap();
        claims.insert(d.plan.nodeclaims.iter().position(|x| std::ptr::eq(x, nc)).unwrap());
    }
    assert_eq!(claims.len(), nodes, "{}", d.plan.render(&d.snap));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:765
#[test]
fn nvidia_gpu_requests_pack_onto_the_type_that_holds_them() {
    let mut c = fake_cluster("");
    for (p, n) in [("a", 5), ("b", 2), ("c", 5)] {
        requesting(&mut c, p, "nvidia.com/gpu", n);
    }
    assert_all_on(&c.decide(), &["a", "b", "c"], "p5.48xlarge", 2);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:798
#[test]
fn neuron_device_requests_pack_onto_inf2_24xlarge() {
    let mut c = fake_cluster("");
    for (p, n) in [("a", 2), ("b", 2), ("c", 4)] {
        requesting(&mut c, p, "aws.amazon.com/neuron", n);
    }
    assert_all_on(&c.decide(), &["a", "b", "c"], "inf2.24xlarge", 2);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:831
#[test]
fn a_neuron_device_request_launches_trn1() {
    let mut c = fake_cluster(", {key: node.kubernetes.io/instance-type, operator: In, values: [trn1.2xlarge]}");
    requesting(&mut c, "a", "aws.amazon.com/neuron", 1);
    assert_all_on(&c.decide(), &["a"], "trn1.2xlarge", 1);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:857
#[test]
fn neuron_core_requests_count_the_cores_of_each_device() {
    let mut c = fake_cluster(", {key: node.kubernetes.io/instance-type, operator: In, values: [inf2.xlarge]}");
    requesting(&mut c, "a", "aws.amazon.com/neuroncore", 2);
    assert_all_on(&c.decide(), &["a"], "inf2.xlarge", 1);
    // inf2.xlarge has one Inferentia2 device of two cores: three do not fit.
    let mut c = fake_cluster(", {key: node.kubernetes.io/instance-type, operator: In, values: [inf2.xlarge]}");
    requesting(&mut c, "a", "aws.amazon.com/neuroncore", 3);
    assert!(!c.decide().scheduled("a"));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:884
#[test]
fn efa_requests_share_one_p5() {
    let mut c = fake_cluster(", {key: node.kubernetes.io/instance-type, operator: In, values: [p5.48xlarge]}");
    requesting(&mut c, "a", "vpc.amazonaws.com/efa", 1);
    requesting(&mut c, "b", "vpc.amazonaws.com/efa", 2);
    assert_all_on(&c.decide(), &["a", "b"], "p5.48xlarge", 1);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:916
#[test]
fn amd_gpu_requests_pack_onto_g4ad() {
    let mut c = fake_cluster("");
    for (p, n) in [("a", 1), ("b", 2), ("c", 4)] {
        requesting(&mut c, p, "amd.com/gpu", n);
    }
    let d = c.decide();
    assert_all_on(&d, &["a", "b", "c"], "g4ad.16xlarge", 2);
    // EC2's "Radeon Pro V520" becomes a label value.
    assert_eq!(
        d.node_labels("a").get("karpenter.k8s.aws/instance-gpu-name").map(String::as_str),
        Some("radeon-pro-v520")
    );
}

const FLEX: &str = "karpenter.k8s.aws/instance-capability-flex";

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:655
#[test]
fn a_pod_selecting_flex_gets_a_flex_type() {
    let mut c = fake_cluster("");
    c.pending("{name: p}", &format!("  nodeSelector: {{{FLEX}: \"true\"}}\n"));
    let labels = c.decide().node_labels("p");
    assert_eq!(labels.get(FLEX).map(String::as_str), Some("true"));
    assert!(labels["node.kubernetes.io/instance-type"].contains("flex"), "{labels:?}");
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:667
#[test]
fn a_nodepool_disallowing_flex_does_not_schedule_a_flex_pod() {
    let mut c = fake_cluster(&format!(", {{key: {FLEX}, operator: NotIn, values: [\"true\"]}}"));
    c.pending("{name: p}", &format!("  nodeSelector: {{{FLEX}: \"true\"}}\n"));
    assert!(!c.decide().scheduled("p"));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:682
#[test]
fn a_pod_refusing_flex_gets_a_non_flex_type() {
    let mut c = fake_cluster("");
    c.pending("{name: p}", &format!("  nodeSelector: {{{FLEX}: \"false\"}}\n"));
    let labels = c.decide().node_labels("p");
    assert_eq!(labels.get(FLEX).map(String::as_str), Some("false"));
    assert!(!labels["node.kubernetes.io/instance-type"].contains("flex"), "{labels:?}");
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:3500
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:3517
#[test]
fn nitro_enclaves_support_becomes_a_label() {
    for (support, value) in [("supported", "true"), ("unsupported", "false")] {
        let t = g4ad_16xlarge(serde_json::json!({"InstanceType": "m5.large", "NitroEnclavesSupport": support}));
        assert_eq!(t.label("karpenter.k8s.aws/instance-nitro-enclaves-supported"), Some(value), "{support}");
    }
}

// ----- What a launch asks EC2 for -----

/// The offerings the launch of `pod`'s NodeClaim may use, best first (the plan's ranking
/// by price, narrowed as the launch narrows it): what CreateFleet's overrides are drawn from.
fn launch_offerings(d: &Decision, pod: &str) -> Vec<(String, String, f64)> {
    use tenon_core::orchestration::launch;
    let nc = d.nodeclaim_of(pod).unwrap_or_else(|| panic!("{pod} scheduled: {}", d.plan.render(&d.snap)));
    let types = &d.snap.nodepools[nc.nodepool].instance_types;
    launch::options(&launch::ranking(nc, &d.snap), &nc.requirements, types)
        .into_iter()
        .map(|o| (o.instance_type, o.capacity_type, o.price))
        .collect()
}

fn one_cpu_pod(c: &mut Cluster) {
    c.pending(
        "{name: p}",
        "  containers: [{name: c, image: i, resources: {requests: {cpu: \"1\"}, limits: {cpu: \"1\"}}}]\n",
    );
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:581
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:600
#[test]
fn a_launch_leaves_out_metal_and_gpu_types_while_a_generic_one_fits() {
    let mut c = fake_cluster("");
    one_cpu_pod(&mut c);
    let offered = launch_offerings(&c.decide(), "p");
    assert!(!offered.is_empty());
    for (t, _, _) in &offered {
        assert!(!t.contains("metal") && !t.starts_with('g') && !t.starts_with("p5") && !t.starts_with("inf"), "{t}");
    }
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:546
#[test]
fn min_values_keep_metal_in_the_launch() {
    let mut c = Cluster::new(fake_ec2());
    c.nodepool(
        "default",
        "  template:\n    spec:\n      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot], minValues: 1}]\n",
    );
    one_cpu_pod(&mut c);
    let offered = launch_offerings(&c.decide(), "p");
    assert!(offered.iter().any(|(t, _, _)| t.contains("metal")), "{offered:?}");
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:476
#[test]
fn flexible_capacity_launches_only_spot_cheaper_than_the_cheapest_on_demand() {
    let mut c = Cluster::new(fake_ec2());
    c.nodepool(
        "default",
        "  template:\n    spec:\n      requirements: [{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}]\n",
    );
    one_cpu_pod(&mut c);
    let offered = launch_offerings(&c.decide(), "p");
    let cheapest_on_demand =
        offered.iter().filter(|(_, ct, _)| ct == "on-demand").map(|(_, _, p)| *p).fold(f64::MAX, f64::min);
    let spot: Vec<_> = offered.iter().filter(|(_, ct, _)| ct == "spot").collect();
    assert!(!spot.is_empty() && cheapest_on_demand < f64::MAX, "{offered:?}");
    for (t, _, price) in spot {
        assert!(*price < cheapest_on_demand, "{t} spot at {price} is not cheaper than on-demand {cheapest_on_demand}");
    }
}

// ----- The fake EC2's zones: offerings, capacity types, insufficient capacity -----

const ZONE_1A: &str = "test-zone-1a";
const ZONE_1B: &str = "test-zone-1b";
const ZONE_1C: &str = "test-zone-1c";
const LOCAL_ZONE: &str = "test-zone-1a-local";
/// The zones of the suite's EC2NodeClass subnets.
const SUBNET_ZONES: [&str; 3] = [ZONE_1A, ZONE_1B, ZONE_1C];

/// The zones the fake EC2's DescribeInstanceTypeOfferings reports for a type.
fn fake_offered_zones(name: &str) -> &'static [&'static str] {
    match name {
        "m5.large" => &[ZONE_1A, ZONE_1B, ZONE_1C, LOCAL_ZONE],
        "m6idn.32xlarge" => &[ZONE_1A, ZONE_1B, ZONE_1C],
        "g4ad.16xlarge" | "g4dn.8xlarge" | "g5.12xlarge" | "m5.metal" | "m5.xlarge" | "p5.48xlarge" | "t3.large" => {
            &[ZONE_1A, ZONE_1B]
        }
        _ => &[ZONE_1A],
    }
}

/// The fake EC2's types as an EC2NodeClass with subnets in `subnet_zones` sees them: offered
/// in each of the type's zones that has a subnet, on-demand and (where the type has spot)
/// spot, at the catalog's prices.
fn fake_ec2_in(subnet_zones: &[&str]) -> Vec<InstanceType> {
    fake_ec2()
        .iter()
        .filter_map(|t| {
            let price = |ct: &str| t.offerings.iter().find(|o| o.capacity_type == ct).map(|o| o.price);
            let offerings: Vec<Offering> = fake_offered_zones(&t.name)
                .iter()
                .filter(|z| subnet_zones.contains(z))
                .flat_map(|z| {
                    ["on-demand", "spot"].into_iter().filter_map(move |ct| {
                        price(ct).map(|price| Offering {
                            zone_id: None,
                            zone: z.to_string(),
                            capacity_type: ct.into(),
                            price,
                            available: true,
                        })
                    })
                })
                .collect();
            if offerings.is_empty() {
                return None;
            }
            let reqs = Requirements::from_iter(
                t.requirements.iter().filter(|r| r.key != wk::LABEL_ZONE && r.key != wk::LABEL_CAPACITY_TYPE).cloned(),
            );
            Some(InstanceType::new(&t.name, reqs, t.capacity.clone(), t.overhead.clone(), offerings))
        })
        .collect()
}

/// The catalog the unavailable-offerings cache gives after launches of `ice` (type, zone,
/// capacity type) failed for capacity: the cache the AWS provider marks on such a failure.
fn after_ice(mut types: Vec<InstanceType>, ice: &[(&str, &str, &str)]) -> Vec<InstanceType> {
    let mut cache = UnavailableOfferings::default();
    for (t, z, ct) in ice {
        assert!(
            types.iter().any(|i| i.name == *t && i.offerings.iter().any(|o| o.zone == *z && o.capacity_type == *ct)),
            "{t} offered {ct} in {z}"
        );
        let o =
            UnavailableOffering { instance_type: t.to_string(), zone: z.to_string(), capacity_type: ct.to_string() };
        cache.mark(o, 0);
    }
    cache.apply(&mut types, 0);
    types
}

/// The suite's NodePool over `types` (subnets in the suite's zones unless the types say
/// otherwise): `requirements` in flow form, Karpenter's on-demand one by default.
fn cluster_on(types: Vec<InstanceType>, requirements: &str) -> Cluster {
    let mut c = Cluster::new(Arc::new(types));
    c.nodepool("default", &format!("  template:\n    spec:\n      requirements: [{requirements}]\n"));
    c
}

const ON_DEMAND: &str = "{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}";

/// The decision on the fake EC2 before the offerings in `ice` failed for capacity, and the
/// one after, when the unavailable-offerings cache has them (Karpenter's next reconcile).
fn before_and_after_ice(
    requirements: &str,
    ice: &[(&str, &str, &str)],
    pods: impl Fn(&mut Cluster),
) -> (Decision, Decision) {
    let decide = |types: Vec<InstanceType>| {
        let mut c = cluster_on(types, requirements);
        pods(&mut c);
        c.decide()
    };
    (decide(fake_ec2_in(&SUBNET_ZONES)), decide(after_ice(fake_ec2_in(&SUBNET_ZONES), ice)))
}

fn label<'a>(labels: &'a BTreeMap<String, String>, key: &str) -> Option<&'a str> {
    labels.get(key).map(String::as_str)
}

/// A pod with `selector` (flow map entries) requesting and limited to `resources` (flow map
/// entries), with `affinity` (flow YAML, empty for none).
fn pod(c: &mut Cluster, name: &str, selector: &str, resources: &str, affinity: &str) {
    let mut spec = format!(
        "  nodeSelector: {{{selector}}}\n  containers: [{{name: c, image: i, resources: {{requests: {{{resources}}}, limits: {{{resources}}}}}}}]\n"
    );
    if !affinity.is_empty() {
        spec.push_str(&format!("  affinity: {affinity}\n"));
    }
    c.pending(&format!("{{name: {name}}}"), &spec);
}

fn prefers_zone(zone: &str) -> String {
    format!(
        "{{nodeAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 1, preference: {{matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [{zone}]}}]}}}}]}}}}"
    )
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2081
#[test]
fn an_unavailable_large_type_splits_the_pods_onto_smaller_ones_of_its_kind() {
    let (before, after) =
        before_and_after_ice(ON_DEMAND, &[("inf2.24xlarge", ZONE_1A, "on-demand")], |c: &mut Cluster| {
            for p in ["a", "b"] {
                pod(c, p, &format!("{}: {ZONE_1A}", wk::LABEL_ZONE), "aws.amazon.com/neuron: \"1\"", "");
            }
        });
    // First both pods share one inf2.24xlarge (the launch that fails for capacity).
    assert_all_on(&before, &["a", "b"], "inf2.24xlarge", 1);
    // With it cached as unavailable, each gets an Inferentia2 node of its own.
    let mut claims = BTreeSet::new();
    for p in ["a", "b"] {
        let labels = after.node_labels(p);
        assert_eq!(label(&labels, wk::LABEL_INSTANCE_ACCELERATOR_NAME), Some("inferentia2"), "{p}: {labels:?}");
        assert_ne!(label(&labels, wk::LABEL_INSTANCE_TYPE), Some("inf2.24xlarge"), "{p}");
        claims.insert(after.plan.nodeclaims.iter().position(|x| std::ptr::eq(x, after.nodeclaim_of(p).unwrap())));
    }
    assert_eq!(claims.len(), 2, "{}", after.plan.render(&after.snap));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2114
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2192
#[test]
fn an_unavailable_preferred_zone_is_given_up_for_the_next_one() {
    for (t, resource) in [("g5.12xlarge", "nvidia.com/gpu"), ("p5.48xlarge", "nvidia.com/gpu")] {
        let (before, after) = before_and_after_ice(ON_DEMAND, &[(t, ZONE_1A, "on-demand")], |c: &mut Cluster| {
            pod(
                c,
                "p",
                &format!("{}: {t}", wk::LABEL_INSTANCE_TYPE),
                &format!("{resource}: \"1\""),
                &prefers_zone(ZONE_1A),
            )
        });
        let labels = before.node_labels("p");
        assert_eq!((label(&labels, wk::LABEL_INSTANCE_TYPE), label(&labels, wk::LABEL_ZONE)), (Some(t), Some(ZONE_1A)));
        let labels = after.node_labels("p");
        assert_eq!((label(&labels, wk::LABEL_INSTANCE_TYPE), label(&labels, wk::LABEL_ZONE)), (Some(t), Some(ZONE_1B)));
    }
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2141
#[test]
fn an_unavailable_larger_type_gives_way_to_smaller_ones() {
    let requirements =
        format!("{ON_DEMAND}, {{key: {}, operator: In, values: [m5.large, m5.xlarge]}}", wk::LABEL_INSTANCE_TYPE);
    let (before, after) = before_and_after_ice(
        &requirements,
        &[("m5.xlarge", ZONE_1A, "on-demand")],
        |c: &mut Cluster| {
            for p in ["a", "b"] {
                c.pending(
                    &format!("{{name: {p}}}"),
                    &format!(
                        "  nodeSelector: {{{}: {ZONE_1A}}}\n  containers: [{{name: c, image: i, resources: {{requests: {{cpu: \"1\"}}}}}}]\n",
                        wk::LABEL_ZONE
                    ),
                );
            }
        },
    );
    assert_all_on(&before, &["a", "b"], "m5.xlarge", 1);
    assert_all_on(&after, &["a", "b"], "m5.large", 2);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2173
#[test]
fn an_offering_comes_back_when_the_cache_entry_expires() {
    let pods = |c: &mut Cluster| {
        pod(c, "p", &format!("{}: inf2.24xlarge", wk::LABEL_INSTANCE_TYPE), "aws.amazon.com/neuron: \"2\"", "")
    };
    let (expired, cached) = before_and_after_ice(ON_DEMAND, &[("inf2.24xlarge", ZONE_1A, "on-demand")], pods);
    // Cached: inf2.24xlarge is offered in test-zone-1a only, so the pod waits.
    assert!(!cached.scheduled("p"), "{}", cached.plan.render(&cached.snap));
    // Expired: the same pod launches on it.
    assert_all_on(&expired, &["p"], "inf2.24xlarge", 1);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2219
#[test]
fn flexible_capacity_falls_back_to_on_demand_when_spot_is_unavailable_in_the_zone() {
    let requirements = format!(
        "{{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}}, {{key: {}, operator: In, values: [{ZONE_1A}]}}",
        wk::LABEL_ZONE
    );
    // Every type offered spot in test-zone-1a fails for capacity there.
    let types = fake_ec2_in(&SUBNET_ZONES);
    let ice: Vec<(&str, &str, &str)> = types
        .iter()
        .filter(|t| t.offerings.iter().any(|o| o.zone == ZONE_1A && o.capacity_type == "spot"))
        .map(|t| (t.name.as_str(), ZONE_1A, "spot"))
        .collect();
    assert!(!ice.is_empty());
    let (before, after) = before_and_after_ice(&requirements, &ice, |c: &mut Cluster| {
        c.pending("{name: p}", "");
    });
    assert_eq!(label(&before.node_labels("p"), wk::LABEL_CAPACITY_TYPE), Some("spot"));
    assert_eq!(label(&after.node_labels("p"), wk::LABEL_CAPACITY_TYPE), Some("on-demand"));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2430
#[test]
fn an_on_demand_nodepool_launches_on_demand() {
    let mut c = cluster_on(fake_ec2_in(&SUBNET_ZONES), ON_DEMAND);
    c.pending("{name: p}", "");
    assert_eq!(label(&c.decide().node_labels("p"), wk::LABEL_CAPACITY_TYPE), Some("on-demand"));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2437
#[test]
fn a_nodepool_flexible_to_both_capacity_types_launches_spot() {
    let mut c = cluster_on(
        fake_ec2_in(&SUBNET_ZONES),
        "{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}",
    );
    c.pending("{name: p}", "");
    assert_eq!(label(&c.decide().node_labels("p"), wk::LABEL_CAPACITY_TYPE), Some("spot"));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1054
#[test]
fn a_local_zone_subnet_launches_in_the_local_zone() {
    let types = fake_ec2_in(&[LOCAL_ZONE]);
    assert!(!types.is_empty());
    let mut c = cluster_on(types, ON_DEMAND);
    c.pending(
        "{name: p}",
        &format!(
            "  affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{{key: {}, operator: In, values: [{LOCAL_ZONE}]}}]}}]}}}}}}\n",
            wk::LABEL_ZONE
        ),
    );
    let d = c.decide();
    assert_eq!(label(&d.node_labels("p"), wk::LABEL_ZONE), Some(LOCAL_ZONE));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:619
#[test]
fn a_pod_selecting_metal_launches_on_metal() {
    let mut c = cluster_on(
        fake_ec2_in(&SUBNET_ZONES),
        &format!("{ON_DEMAND}, {{key: {}, operator: Exists}}", wk::LABEL_INSTANCE_TYPE),
    );
    pod(&mut c, "p", &format!("{}: metal", wk::LABEL_INSTANCE_SIZE), "cpu: \"1\"", "");
    let labels = c.decide().node_labels("p");
    assert_eq!(label(&labels, wk::LABEL_INSTANCE_SIZE), Some("metal"), "{labels:?}");
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:949
#[test]
fn ephemeral_storage_beyond_the_root_volume_is_not_scheduled() {
    let mut c = cluster_on(fake_ec2_in(&SUBNET_ZONES), ON_DEMAND);
    c.pending("{name: p}", "  containers: [{name: c, image: i, resources: {requests: {ephemeral-storage: 5000Gi}}}]\n");
    let d = c.decide();
    assert!(!d.scheduled("p"), "{}", d.plan.render(&d.snap));
    // The same pod asking for what a 20Gi root volume holds is scheduled.
    let mut c = cluster_on(fake_ec2_in(&SUBNET_ZONES), ON_DEMAND);
    c.pending("{name: p}", "  containers: [{name: c, image: i, resources: {requests: {ephemeral-storage: 10Gi}}}]\n");
    assert!(c.decide().scheduled("p"));
}

// ----- Tenancy -----

const TENANCY: &str = wk::LABEL_INSTANCE_TENANCY;

fn tenancy_of(requirements: &str, selector: Option<&str>) -> Option<String> {
    let mut c = cluster_on(fake_ec2_in(&SUBNET_ZONES), requirements);
    match selector {
        Some(t) => c.pending("{name: p}", &format!("  nodeSelector: {{{TENANCY}: {t}}}\n")),
        None => c.pending("{name: p}", ""),
    };
    let d = c.decide();
    d.scheduled("p").then(|| d.node_labels("p")[TENANCY].clone())
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2899
#[test]
fn without_a_tenancy_requirement_nodes_have_default_tenancy() {
    assert_eq!(tenancy_of(ON_DEMAND, None).as_deref(), Some("default"));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2906
#[test]
fn a_nodepool_allowing_both_tenancies_launches_default() {
    let np = format!("{{key: {TENANCY}, operator: In, values: [default, dedicated]}}");
    assert_eq!(tenancy_of(&np, None).as_deref(), Some("default"));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2923
#[test]
fn a_pod_requiring_default_tenancy_gets_it() {
    assert_eq!(tenancy_of(ON_DEMAND, Some("default")).as_deref(), Some("default"));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2934
#[test]
fn a_pod_requiring_dedicated_tenancy_gets_it() {
    assert_eq!(tenancy_of(ON_DEMAND, Some("dedicated")).as_deref(), Some("dedicated"));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2964
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2965
#[test]
fn a_pod_never_gets_a_tenancy_its_nodepool_forbids() {
    for (nodepool, pod) in [("dedicated", "default"), ("default", "dedicated")] {
        let np = format!("{{key: {TENANCY}, operator: In, values: [{nodepool}]}}");
        assert_eq!(tenancy_of(&np, Some(pod)), None, "NodePool {nodepool}, pod {pod}");
        // Agreeing, they schedule: each NodePool can launch its own tenancy.
        assert_eq!(tenancy_of(&np, Some(nodepool)).as_deref(), Some(nodepool), "NodePool {nodepool}");
    }
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:431
#[test]
fn a_launch_offers_only_the_cheapest_types() {
    // Karpenter's `MakeInstances`: every priced type but a1 (AL2023 cannot boot it), all of one
    // shape, offered in test-zone-1a.
    let info = serde_json::json!({
        "VCpuInfo": {"DefaultVCpus": 2},
        "MemoryInfo": {"SizeInMiB": 8192},
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
        "NetworkInfo": {
            "DefaultNetworkCardIndex": 0,
            "Ipv4AddressesPerInterface": 10,
            "NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 3}]
        },
        "SupportedUsageClasses": ["on-demand", "spot"]
    });
    let opts = AwsCatalogOptions::default();
    let types: Vec<InstanceType> = tenon_core::catalog::us_east_1_prices()
        .into_iter()
        .filter(|(name, _)| !name.starts_with("a1."))
        .filter_map(|(name, price)| instance_type_from_info(&name, &info, price, &[ZONE_1A], &|_| None, &opts))
        .collect();
    assert!(types.len() > 200, "{} types", types.len());
    let mut c = cluster_on(types.clone(), ON_DEMAND);
    pod(&mut c, "p", "", "cpu: \"1\"", "");
    let d = c.decide();
    // What CreateFleet is asked for: the ranked offerings' types, at most 60.
    let mut requested: Vec<String> = Vec::new();
    for (t, _, _) in launch_offerings(&d, "p") {
        if requested.len() < 60 && !requested.contains(&t) {
            requested.push(t);
        }
    }
    assert_eq!(requested.len(), 60);
    // The NodePool's 100 cheapest types, by cheapest compatible offering (ties by name).
    let np = Requirements::from_iter([tenon_core::requirements::Requirement::in_values(
        wk::LABEL_CAPACITY_TYPE,
        ["on-demand"],
    )]);
    let mut by_price: Vec<(f64, &str)> =
        types.iter().filter_map(|t| t.cheapest(&np).map(|o| (o.price, t.name.as_str()))).collect();
    by_price.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
    let cheapest: BTreeSet<&str> = by_price[..100].iter().map(|(_, n)| *n).collect();
    for t in &requested {
        assert!(cheapest.contains(t.as_str()), "{t} is not among the 100 cheapest types");
    }
}

// ----- An EC2NodeClass whose kubelet block cannot be read -----

fn nodeclass_with_cluster_dns(cluster_dns: serde_json::Value) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "default"},
        "spec": {
            "role": "KarpenterNodeRole-test",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
            "securityGroupSelectorTerms": [{"tags": {"karpenter.sh/discovery": "test"}}],
            "kubelet": {"clusterDNS": cluster_dns}
        }
    })
}

/// The instance types an EC2NodeClass manifest resolves to, under its kubelet block and AMI
/// family; when the manifest cannot be read, why not.
fn instance_types_of(manifest: serde_json::Value) -> Result<Vec<InstanceType>, Vec<String>> {
    use tenon_api::decode::{Object, decode_and_validate};
    let decoded = decode_and_validate(manifest);
    let Some(Object::EC2NodeClass(nc)) = decoded.object else {
        return Err(decoded.problems.iter().map(|p| format!("{}: {}", p.path, p.message)).collect());
    };
    let k = nc.spec.kubelet.clone().unwrap_or_default();
    let kubelet = KubeletModel {
        max_pods: k.max_pods.map(i64::from),
        pods_per_core: k.pods_per_core.map(i64::from),
        kube_reserved: k.kube_reserved,
        system_reserved: k.system_reserved,
        eviction_hard: k.eviction_hard,
        eviction_soft: k.eviction_soft,
    };
    Ok(catalog(kubelet, AmiFamilyFlags::of(&nc.ami_family())))
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:3590
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:3595
#[test]
fn an_unreadable_kubelet_block_resolves_no_instance_types() {
    // clusterDNS is a list: a bare string cannot be read.
    let got = instance_types_of(nodeclass_with_cluster_dns(serde_json::json!("10.0.0.10")));
    let problems = got.as_ref().expect_err("no instance types from defaults");
    assert!(problems.iter().any(|p| p.starts_with("spec.kubelet")), "{problems:?}");
    // Nor any single one of them.
    assert!(got.ok().and_then(|types| types.into_iter().find(|t| t.name == "m5.large")).is_none());
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:3600
#[test]
fn a_corrected_kubelet_block_resolves_again() {
    assert!(instance_types_of(nodeclass_with_cluster_dns(serde_json::json!("10.0.0.10"))).is_err());
    let types = instance_types_of(nodeclass_with_cluster_dns(serde_json::json!(["10.0.0.10"]))).unwrap();
    assert!(types.iter().any(|t| t.name == "m5.large"), "{} types", types.len());
}

// ----- kubelet.maxPods: 110, as Karpenter plans it -----

fn max_pods_110() -> Vec<InstanceType> {
    catalog(KubeletModel { max_pods: Some(110), ..KubeletModel::default() }, AmiFamilyFlags::DEFAULT)
}

/// Karpenter's allocatable (AL2023, default settings but `maxPods: 110`) for three families,
/// arm64 included, worked out by hand from its formulas: memory less 7.5% (Graviton first
/// keeps 64 MiB), kube-reserved memory 11 × the ENI-limited pods + 255 MiB (AL2023 counts
/// ENI-limited pods, not maxPods), 100 MiB eviction, kube-reserved CPU by bands.
#[test]
fn max_pods_110_gives_karpenters_allocatable_for_three_families_arm64_included() {
    let cat = max_pods_110();
    // (type, allocatable millicores, allocatable MiB): m5.large 2 vCPU 8192 MiB 29 ENI pods;
    // r5.xlarge 4 vCPU 32768 MiB 58; c6g.large (arm64) 2 vCPU 4096 MiB 29.
    for (name, cpu, mib) in [
        ("m5.large", 2000 - 70, 8192 - 615 - (11 * 29 + 255) - 100),
        ("r5.xlarge", 4000 - 80, 32768 - 2458 - (11 * 58 + 255) - 100),
        ("c6g.large", 2000 - 70, 4096 - 64 - 303 - (11 * 29 + 255) - 100),
    ] {
        let a = find(&cat, name).allocatable();
        assert_eq!((a.cpu, a.memory, a.pods), (cpu, mib * MIB, 110), "{name}");
    }
}

/// 220 pods of 1m CPU and 1 MiB on a NodePool of one type: two NodeClaims of 110 pods each,
/// on an amd64 and an arm64 type alike.
#[test]
fn max_pods_110_plans_110_pods_per_node() {
    for ty in ["m5.large", "c6g.large"] {
        let mut c = Cluster::new(Arc::new(max_pods_110()));
        c.nodepool(
            "default",
            &format!(
                "  template:\n    spec:\n      requirements: [{{key: node.kubernetes.io/instance-type, operator: In, values: [{ty}]}}]\n"
            ),
        );
        c.pending_n(
            220,
            "p",
            "app: tiny",
            "  containers: [{name: c, image: i, resources: {requests: {cpu: 1m, memory: 1Mi}}}]\n",
        );
        let d = c.decide();
        assert_eq!(d.pods_per_nodeclaim(), [110, 110], "{ty}: {}", d.plan.render(&d.snap));
    }
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:3632 (a departure:
/// Karpenter fails the whole list when one type cannot be resolved; Tenon leaves that type
/// out and lists the rest.)
#[test]
fn a_type_that_cannot_be_modelled_is_left_out_of_the_list() {
    let opts = AwsCatalogOptions::default();
    let good = serde_json::json!({
        "InstanceType": "m5.large",
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
        "VCpuInfo": {"DefaultVCpus": 2},
        "MemoryInfo": {"SizeInMiB": 8192},
        "NetworkInfo": {"DefaultNetworkCardIndex": 0, "Ipv4AddressesPerInterface": 10,
            "NetworkCards": [{"NetworkCardIndex": 0, "MaximumNetworkInterfaces": 3}]},
        "SupportedUsageClasses": ["on-demand", "spot"]
    });
    // An i386-only type (no architecture Tenon launches), and one with no network data.
    let mut i386 = good.clone();
    i386["InstanceType"] = "t1.micro".into();
    i386["ProcessorInfo"]["SupportedArchitectures"] = serde_json::json!(["i386"]);
    let mut no_network = good.clone();
    no_network["InstanceType"] = "x9.large".into();
    no_network["NetworkInfo"] = serde_json::Value::Null;
    let listed: Vec<String> = [&good, &i386, &no_network]
        .into_iter()
        .filter_map(|info| {
            let name = info["InstanceType"].as_str().unwrap();
            instance_type_from_info(name, info, 0.1, &[ZONE_1A], &|_| None, &opts)
        })
        .map(|t| t.name)
        .collect();
    assert_eq!(listed, ["m5.large"], "the others are left out, the list is not refused");
}
