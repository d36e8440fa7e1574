//! What the cloud offers and what the cluster's NodeClaims cost, as Karpenter publishes them:
//! each instance type's vCPUs and memory, each offering's availability and price estimate,
//! and each NodePool's hourly cost. Pure functions over the instance types of every
//! EC2NodeClass.

use super::cluster::Gauges;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tenon_api::wellknown as wk;
use tenon_api::{NodeClaim, NodePool};
use tenon_core::instancetype::InstanceType;

const LABEL_INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
/// MiB, as EC2 describes the instance type.
const LABEL_INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";

#[derive(Debug, Default)]
pub struct OfferingSeries {
    pub cpu_cores: Gauges,
    pub memory_bytes: Gauges,
    pub available: Gauges,
    pub price: Gauges,
}

/// The series of every instance type of every catalog. An offering listed by several
/// catalogs is available if any says so. With `reserved` (the ReservedCapacity gate), each
/// zone of a type with no reserved offering there gets an unavailable one at price 0, as
/// Karpenter's provider reports it.
pub fn offerings<'a>(catalogs: impl IntoIterator<Item = &'a [InstanceType]>, reserved: bool) -> OfferingSeries {
    let mut facts: BTreeMap<&str, (Option<f64>, Option<f64>)> = BTreeMap::new();
    let mut offers: BTreeMap<(&str, &str, &str), (bool, f64)> = BTreeMap::new();
    for t in catalogs.into_iter().flatten() {
        let number = |k: &str| t.label(k).and_then(|v| v.parse::<f64>().ok());
        facts.insert(&t.name, (number(LABEL_INSTANCE_CPU), number(LABEL_INSTANCE_MEMORY).map(|mib| mib * 1048576.0)));
        let mut zones = BTreeSet::new();
        for o in &t.offerings {
            let entry = offers.entry((&t.name, &o.capacity_type, &o.zone)).or_insert((false, o.price));
            entry.0 |= o.available;
            entry.1 = o.price;
            zones.insert(o.zone.as_str());
        }
        if reserved {
            for zone in zones {
                offers.entry((&t.name, wk::CAPACITY_TYPE_RESERVED, zone)).or_insert((false, 0.0));
            }
        }
    }
    let mut out = OfferingSeries::default();
    for (name, (cpu, memory)) in facts {
        let labels = vec![("instance_type", name.to_string())];
        out.cpu_cores.extend(cpu.map(|v| (labels.clone(), v)));
        out.memory_bytes.extend(memory.map(|v| (labels, v)));
    }
    for ((name, capacity_type, zone), (available, price)) in offers {
        let labels = vec![
            ("instance_type", name.to_string()),
            ("capacity_type", capacity_type.to_string()),
            ("zone", zone.to_string()),
        ];
        out.available.push((labels.clone(), if available { 1.0 } else { 0.0 }));
        out.price.push((labels, price));
    }
    out
}

/// Offering prices by EC2NodeClass, instance type, zone and capacity type: built when the
/// instance types are read (once a minute), looked up every pass.
#[derive(Debug, Default)]
pub struct Prices(BTreeMap<(String, String, String, String), f64>);

impl Prices {
    pub fn new(catalogs: &BTreeMap<String, std::sync::Arc<Vec<InstanceType>>>) -> Prices {
        let mut out = BTreeMap::new();
        for (class, types) in catalogs {
            for t in types.iter() {
                for o in &t.offerings {
                    let key = (class.clone(), t.name.clone(), o.zone.clone(), o.capacity_type.clone());
                    out.entry(key).or_insert(o.price);
                }
            }
        }
        Prices(out)
    }

    fn get(&self, class: &str, instance_type: &str, zone: &str, capacity_type: &str) -> Option<f64> {
        let key = (class.to_string(), instance_type.to_string(), zone.to_string(), capacity_type.to_string());
        self.0.get(&key).copied()
    }
}

/// Each NodePool's hourly cost: the price of the offering each of its NodeClaims was
/// launched on (those labelled with instance type, zone and capacity type), priced from its
/// EC2NodeClass' instance types. Every NodePool has a series, 0 without NodeClaims.
pub fn nodepool_costs(pools: &[Arc<NodePool>], nodeclaims: &[Arc<NodeClaim>], prices: &Prices) -> Gauges {
    let mut cost: BTreeMap<&str, f64> = pools.iter().filter_map(|p| Some((p.metadata.name.as_deref()?, 0.0))).collect();
    let class_of: BTreeMap<&str, &str> = pools
        .iter()
        .filter_map(|p| {
            Some((p.metadata.name.as_deref()?, p.spec.template.spec.node_class_ref.as_ref()?.name.as_str()))
        })
        .collect();
    for nc in nodeclaims {
        let label = |k: &str| nc.metadata.labels.as_ref().and_then(|l| l.get(k)).map(String::as_str);
        let (Some(pool), Some(it), Some(zone), Some(ct)) = (
            label(wk::LABEL_NODEPOOL),
            label(wk::LABEL_INSTANCE_TYPE),
            label(wk::LABEL_ZONE),
            label(wk::LABEL_CAPACITY_TYPE),
        ) else {
            continue;
        };
        let Some(total) = cost.get_mut(pool) else { continue };
        let price = class_of.get(pool).and_then(|class| prices.get(class, it, zone, ct));
        *total += price.unwrap_or(0.0);
    }
    cost.into_iter().map(|(pool, v)| (vec![("nodepool", pool.to_string())], v)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tenon_core::convert::shared;
    use tenon_core::instancetype::Offering;
    use tenon_core::requirements::{Requirement, Requirements};
    use tenon_core::resources::Resources;

    fn offering(zone: &str, ct: &str, price: f64, available: bool) -> Offering {
        Offering { zone_id: None, zone: zone.into(), capacity_type: ct.into(), price, available }
    }

    fn m5_large(offerings: Vec<Offering>) -> InstanceType {
        let reqs = Requirements::from_iter([
            Requirement::in_values(LABEL_INSTANCE_CPU, ["2".to_string()]),
            Requirement::in_values(LABEL_INSTANCE_MEMORY, ["8192".to_string()]),
        ]);
        InstanceType::new("m5.large", reqs, Resources::default(), Resources::default(), offerings)
    }

    fn value(g: &Gauges, pairs: &[(&str, &str)]) -> Option<f64> {
        g.iter().find(|(l, _)| pairs.iter().all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))).map(|(_, v)| *v)
    }

    #[test]
    fn instance_types_and_offerings_with_reserved_placeholders() {
        let a = vec![m5_large(vec![offering("z1", "spot", 0.03, false), offering("z1", "on-demand", 0.096, true)])];
        let b = vec![m5_large(vec![offering("z1", "spot", 0.03, true)])];
        let s = offerings([a.as_slice(), b.as_slice()], true);
        assert_eq!(value(&s.cpu_cores, &[("instance_type", "m5.large")]), Some(2.0));
        assert_eq!(value(&s.memory_bytes, &[("instance_type", "m5.large")]), Some(8192.0 * 1048576.0));
        let spot = [("instance_type", "m5.large"), ("capacity_type", "spot"), ("zone", "z1")];
        assert_eq!(value(&s.available, &spot), Some(1.0), "available if any catalog says so");
        assert_eq!(value(&s.price, &spot), Some(0.03));
        let reserved = [("capacity_type", "reserved"), ("zone", "z1")];
        assert_eq!((value(&s.available, &reserved), value(&s.price, &reserved)), (Some(0.0), Some(0.0)));
        assert_eq!(value(&offerings([a.as_slice()], false).available, &reserved), None, "only with the gate");
    }

    #[test]
    fn a_nodepool_costs_the_offerings_its_nodeclaims_were_launched_on() {
        let pool = |name: &str| -> NodePool {
            serde_json::from_value(
                json!({"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
                "spec": {"template": {"spec": {"requirements": [],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}}}}),
            )
            .unwrap()
        };
        let claim = |labels: serde_json::Value| -> NodeClaim {
            serde_json::from_value(json!({"apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
                "metadata": {"name": "x", "labels": labels},
                "spec": {"requirements": [], "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}}))
            .unwrap()
        };
        let launched = json!({"karpenter.sh/nodepool": "a", "node.kubernetes.io/instance-type": "m5.large",
            "topology.kubernetes.io/zone": "z1", "karpenter.sh/capacity-type": "on-demand"});
        let catalogs = BTreeMap::from([(
            "d".to_string(),
            std::sync::Arc::new(vec![m5_large(vec![offering("z1", "on-demand", 0.096, false)])]),
        )]);
        let claims = vec![claim(launched.clone()), claim(launched), claim(json!({"karpenter.sh/nodepool": "a"}))];
        let costs = nodepool_costs(&shared([pool("a"), pool("b")]), &shared(claims), &Prices::new(&catalogs));
        let a = value(&costs, &[("nodepool", "a")]).unwrap();
        assert!((a - 0.192).abs() < 1e-12, "two launched NodeClaims, the unlaunched one costs nothing: {a}");
        assert_eq!(value(&costs, &[("nodepool", "b")]), Some(0.0));
    }
}
