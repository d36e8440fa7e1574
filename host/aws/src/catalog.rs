//! The EC2 instance catalog of a region: DescribeInstanceTypes, DescribeInstanceTypeOfferings,
//! DescribeSpotPriceHistory and the Price List API, turned into the core's instance types with
//! Karpenter's capacity and overhead model (`tenon_core::catalog`).
//!
//! On-demand prices come from the Price List API; when it cannot be reached (or an emulator
//! lacks it) the bundled us-east-1 table (`host/core/data`, with its provenance) is the
//! fallback. Spot prices are the latest DescribeSpotPriceHistory price per type and zone; a
//! zone without one has no spot offering, and only when the history is empty altogether is
//! spot priced with the core's stated model.

use crate::error::api;
use aws_sdk_ec2::types::{InstanceTypeInfo, LocationType};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use tenon_core::catalog::{AwsCatalogOptions, SPOT_PRICE_MODEL_FACTOR, instance_type_from_info, us_east_1_prices};
use tenon_core::cloud::CloudError;
use tenon_core::instancetype::InstanceType;

/// What a NodeClass does with an instance type's local NVMe disks (`spec.instanceStorePolicy`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InstanceStore {
    /// Left alone: pods' ephemeral storage is on the root volume.
    #[default]
    Unused,
    /// Striped into one RAID0 array that holds the pods' ephemeral storage.
    Raid0,
}

impl InstanceStore {
    pub fn of(nc: &tenon_api::EC2NodeClass) -> InstanceStore {
        match nc.spec.instance_store_policy.as_deref() {
            Some("RAID0") => InstanceStore::Raid0,
            _ => InstanceStore::Unused,
        }
    }
}

/// What the APIs said, before it is shaped into instance types.
#[derive(Clone, Debug, Default)]
pub struct RawCatalog {
    /// Type name → its DescribeInstanceTypes entry in the API's JSON shape.
    pub types: BTreeMap<String, Value>,
    /// Type name → zones offering it.
    pub zones: BTreeMap<String, Vec<String>>,
    /// (type, zone) → latest spot price.
    pub spot: BTreeMap<(String, String), f64>,
    /// Type → on-demand USD/hour.
    pub on_demand: BTreeMap<String, f64>,
    /// Where the on-demand prices came from: `pricing-api` or `bundled-us-east-1`.
    pub on_demand_source: &'static str,
}

impl RawCatalog {
    /// Instance types offered in `zones` (all zones when empty).
    pub fn instance_types(&self, zones: &[String], opts: &AwsCatalogOptions) -> Vec<InstanceType> {
        self.shape(self.types.iter(), zones, opts, InstanceStore::Unused)
    }

    /// As [`RawCatalog::instance_types`], with the NodeClass' use of instance storage.
    pub fn instance_types_with(
        &self,
        zones: &[String],
        opts: &AwsCatalogOptions,
        store: InstanceStore,
    ) -> Vec<InstanceType> {
        self.shape(self.types.iter(), zones, opts, store)
    }

    /// The named instance types, in every zone offering them.
    pub fn instance_types_named(
        &self,
        names: &std::collections::BTreeSet<&str>,
        opts: &AwsCatalogOptions,
        store: InstanceStore,
    ) -> Vec<InstanceType> {
        self.shape(self.types.iter().filter(|(n, _)| names.contains(n.as_str())), &[], opts, store)
    }

    fn shape<'a>(
        &self,
        types: impl Iterator<Item = (&'a String, &'a Value)>,
        zones: &[String],
        opts: &AwsCatalogOptions,
        store: InstanceStore,
    ) -> Vec<InstanceType> {
        let mut out = Vec::new();
        for (name, info) in types {
            // Striped instance storage holds the pods' ephemeral storage: its size, in the GB
            // (10^9 bytes) EC2 states it in, replaces the root volume's.
            let raid0 = info["InstanceStorageInfo"]["TotalSizeInGB"].as_i64().filter(|_| store == InstanceStore::Raid0);
            let opts = &match raid0 {
                Some(gb) => AwsCatalogOptions { root_volume_bytes: gb * 1_000_000_000, ..opts.clone() },
                None => opts.clone(),
            };
            let Some(price) = self.on_demand.get(name) else { continue };
            let zs: Vec<&str> = self
                .zones
                .get(name)
                .into_iter()
                .flatten()
                .filter(|z| zones.is_empty() || zones.contains(z))
                .map(String::as_str)
                .collect();
            if zs.is_empty() {
                continue;
            }
            // With no spot price history at all, every zone is priced with the model; with
            // history, a zone without a price for the type has no spot offering (Karpenter's).
            let spot = |z: &str| match self.spot.is_empty() {
                true => Some(price * SPOT_PRICE_MODEL_FACTOR),
                false => self.spot.get(&(name.clone(), z.to_string())).copied(),
            };
            if let Some(it) = instance_type_from_info(name, info, *price, &zs, &spot, opts) {
                out.push(it);
            }
        }
        out
    }
}

pub(crate) async fn fetch(clients: &crate::Clients, region: &str) -> Result<RawCatalog, CloudError> {
    let mut raw = RawCatalog::default();
    let mut pages = clients.ec2.describe_instance_types().into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| api("DescribeInstanceTypes", e))?;
        for t in page.instance_types() {
            if let Some(name) = t.instance_type() {
                raw.types.insert(name.as_str().to_string(), info_json(t));
            }
        }
    }
    let mut pages = clients
        .ec2
        .describe_instance_type_offerings()
        .location_type(LocationType::AvailabilityZone)
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| api("DescribeInstanceTypeOfferings", e))?;
        for o in page.instance_type_offerings() {
            if let (Some(t), Some(z)) = (o.instance_type(), o.location()) {
                raw.zones.entry(t.as_str().to_string()).or_default().push(z.to_string());
            }
        }
    }
    for zs in raw.zones.values_mut() {
        zs.sort();
        zs.dedup();
    }
    let mut pages = clients
        .ec2
        .describe_spot_price_history()
        // VPC instances report either description; Karpenter asks for both.
        .product_descriptions("Linux/UNIX")
        .product_descriptions("Linux/UNIX (Amazon VPC)")
        .start_time(aws_smithy_types::DateTime::from_secs(crate::now_secs()))
        .into_paginator()
        .send();
    let mut seen: BTreeMap<(String, String), i64> = BTreeMap::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| api("DescribeSpotPriceHistory", e))?;
        for p in page.spot_price_history() {
            let (Some(t), Some(z), Some(price)) = (p.instance_type(), p.availability_zone(), p.spot_price()) else {
                continue;
            };
            let Ok(price) = price.parse::<f64>() else { continue };
            let at = p.timestamp().map_or(0, |t| t.secs());
            let key = (t.as_str().to_string(), z.to_string());
            if seen.get(&key).is_none_or(|&s| at >= s) {
                seen.insert(key.clone(), at);
                raw.spot.insert(key, price);
            }
        }
    }
    match on_demand_prices(clients, region).await {
        Ok(prices) if !prices.is_empty() => {
            raw.on_demand = prices;
            raw.on_demand_source = "pricing-api";
        }
        outcome => {
            if let Err(e) = outcome {
                tracing::warn!(error = %e, "on-demand prices from the Price List API failed; using the bundled us-east-1 table");
            }
            raw.on_demand = us_east_1_prices();
            raw.on_demand_source = "bundled-us-east-1";
        }
    }
    Ok(raw)
}

/// The Price List API region code for an EC2 region's products: GetProducts filters on
/// `regionCode` (the API's own field) so no location-name table is needed.
async fn on_demand_prices(clients: &crate::Clients, region: &str) -> Result<BTreeMap<String, f64>, CloudError> {
    use aws_sdk_pricing::types::{Filter as PFilter, FilterType};
    let term = |k: &str, v: &str| PFilter::builder().r#type(FilterType::TermMatch).field(k).value(v).build();
    let mut req = clients.pricing.get_products().service_code("AmazonEC2");
    for (k, v) in [
        ("regionCode", region),
        ("operatingSystem", "Linux"),
        ("tenancy", "Shared"),
        ("preInstalledSw", "NA"),
        ("capacitystatus", "Used"),
        ("licenseModel", "No License required"),
    ] {
        req = req.filters(term(k, v).map_err(|e| CloudError::InvalidRequest(e.to_string()))?);
    }
    let mut prices = BTreeMap::new();
    let mut pages = req.into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| api("GetProducts", e))?;
        for doc in page.price_list() {
            if let Some((t, p)) = parse_price_document(doc) {
                prices.insert(t, p);
            }
        }
    }
    Ok(prices)
}

/// One Price List product document → (instance type, on-demand USD/hour). The document is a
/// JSON string: `product.attributes.instanceType` and `terms.OnDemand.*.priceDimensions.*.
/// pricePerUnit.USD`.
pub fn parse_price_document(doc: &str) -> Option<(String, f64)> {
    let v: Value = serde_json::from_str(doc).ok()?;
    let t = v["product"]["attributes"]["instanceType"].as_str()?.to_string();
    let term = v["terms"]["OnDemand"].as_object()?.values().next()?;
    let dim = term["priceDimensions"].as_object()?.values().next()?;
    let usd: f64 = dim["pricePerUnit"]["USD"].as_str()?.parse().ok()?;
    (usd > 0.0).then_some((t, usd))
}

/// An SDK instance type as the DescribeInstanceTypes JSON the core's model reads.
pub fn info_json(t: &InstanceTypeInfo) -> Value {
    let mut m = Map::new();
    if let Some(p) = t.processor_info() {
        m.insert(
            "ProcessorInfo".into(),
            json!({
                "SupportedArchitectures": p.supported_architectures().iter().map(|a| a.as_str()).collect::<Vec<_>>(),
                "Manufacturer": p.manufacturer(),
            }),
        );
    }
    if let Some(v) = t.v_cpu_info() {
        m.insert("VCpuInfo".into(), json!({ "DefaultVCpus": v.default_v_cpus() }));
    }
    if let Some(mem) = t.memory_info() {
        m.insert("MemoryInfo".into(), json!({ "SizeInMiB": mem.size_in_mib() }));
    }
    if let Some(n) = t.network_info() {
        m.insert(
            "NetworkInfo".into(),
            json!({
                "MaximumNetworkInterfaces": n.maximum_network_interfaces(),
                "DefaultNetworkCardIndex": n.default_network_card_index(),
                "Ipv4AddressesPerInterface": n.ipv4_addresses_per_interface(),
                "EncryptionInTransitSupported": n.encryption_in_transit_supported(),
                "EfaInfo": {"MaximumEfaInterfaces": n.efa_info().and_then(|e| e.maximum_efa_interfaces())},
                "NetworkCards": n.network_cards().iter().map(|c| json!({
                    "NetworkCardIndex": c.network_card_index(),
                    "MaximumNetworkInterfaces": c.maximum_network_interfaces(),
                    "BaselineBandwidthInGbps": c.baseline_bandwidth_in_gbps(),
                })).collect::<Vec<_>>(),
            }),
        );
    }
    if let Some(h) = t.hypervisor() {
        m.insert("Hypervisor".into(), json!(h.as_str()));
    }
    if let Some(ebs) = t.ebs_info() {
        m.insert(
            "EbsInfo".into(),
            json!({
                "EbsOptimizedSupport": ebs.ebs_optimized_support().map(|s| s.as_str()),
                "EbsOptimizedInfo": {
                    "MaximumBandwidthInMbps": ebs.ebs_optimized_info().and_then(|o| o.maximum_bandwidth_in_mbps()),
                },
            }),
        );
    }
    if let Some(n) = t.nitro_enclaves_support() {
        m.insert("NitroEnclavesSupport".into(), json!(n.as_str()));
    }
    if let Some(s) = t.instance_storage_info() {
        m.insert(
            "InstanceStorageInfo".into(),
            json!({"TotalSizeInGB": s.total_size_in_gb(), "NvmeSupport": s.nvme_support().map(|n| n.as_str())}),
        );
    }
    if let Some(g) = t.gpu_info() {
        m.insert(
            "GpuInfo".into(),
            json!({"Gpus": g.gpus().iter().map(|d| json!({
                "Count": d.count(),
                "Manufacturer": d.manufacturer(),
                "Name": d.name(),
                "MemoryInfo": {"SizeInMiB": d.memory_info().and_then(|x| x.size_in_mib())},
            })).collect::<Vec<_>>()}),
        );
    }
    m.insert(
        "SupportedUsageClasses".into(),
        json!(t.supported_usage_classes().iter().map(|c| c.as_str()).collect::<Vec<_>>()),
    );
    Value::Object(m)
}
