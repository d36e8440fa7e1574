//! Builders for small, readable scheduling scenarios.
#![allow(dead_code)]

pub mod karpenter;

use std::collections::BTreeMap;
use std::sync::Arc;
use tenon_core::instancetype::{InstanceType, Offering};
use tenon_core::model::{
    AffinityTerm, ClusterSnapshot, Node, NodePoolTemplate, Pod, SpreadConstraint, WhenUnsatisfiable,
};
use tenon_core::requirements::{Operator, Requirement, Requirements};
use tenon_core::resources::Resources;
use tenon_core::selector::LabelSelector;

pub const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
pub const GIB: i64 = 1 << 30;

/// Types `small` (2 cpu), `medium` (4), `large` (8), `xlarge` (16) in three zones, on-demand
/// and spot, priced by size; `arm` variants are arm64 and 10% cheaper.
pub fn catalog() -> Arc<Vec<InstanceType>> {
    let mut out = Vec::new();
    for (i, size) in ["small", "medium", "large", "xlarge"].iter().enumerate() {
        let cpus = 2i64 << i;
        for (arch, factor, family) in [("amd64", 1.0, "gp"), ("arm64", 0.9, "arm")] {
            let name = format!("{family}.{size}");
            let price = cpus as f64 * 0.05 * factor;
            let offerings = ZONES
                .iter()
                .flat_map(|z| {
                    [("on-demand", price), ("spot", price * 0.4)].map(|(ct, p)| Offering {
                        zone_id: None,
                        zone: z.to_string(),
                        capacity_type: ct.into(),
                        price: p,
                        available: true,
                    })
                })
                .collect();
            let reqs = Requirements::from_iter([
                Requirement::in_values("node.kubernetes.io/instance-type", [name.clone()]),
                Requirement::in_values("kubernetes.io/arch", [arch]),
                Requirement::in_values("kubernetes.io/os", ["linux"]),
                Requirement::in_values("karpenter.k8s.aws/instance-family", [family]),
                Requirement::in_values("karpenter.k8s.aws/instance-cpu", [cpus.to_string()]),
            ]);
            out.push(InstanceType::new(
                &name,
                reqs,
                Resources::new(cpus * 1000, cpus * 4 * GIB, 32),
                Resources::new(100, GIB / 2, 0),
                offerings,
            ));
        }
    }
    Arc::new(out)
}

pub fn pool(name: &str) -> NodePoolTemplate {
    NodePoolTemplate {
        name: name.into(),
        weight: 0,
        requirements: Requirements::from_iter([Requirement::in_values("karpenter.sh/nodepool", [name])]),
        labels: BTreeMap::new(),
        taints: vec![],
        startup_taints: vec![],
        limits: BTreeMap::new(),
        instance_types: catalog(),
        disruption: tenon_core::model::DisruptionSettings::default(),
        expire_after: Some(720 * 3600),
        termination_grace_period: None,
        hash: "0".into(),
        replicas: None,
        unavailable: None,
    }
}

pub fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
    Requirement::new(key, op, values.iter().copied())
}

pub fn reqs(list: &[Requirement]) -> Requirements {
    Requirements::from_iter(list.iter().cloned())
}

pub fn pod(name: &str, cpu_milli: i64, mem_gib: i64) -> Pod {
    Pod {
        namespace: "default".into(),
        name: name.into(),
        uid: name.into(),
        requests: Resources::new(cpu_milli, mem_gib * GIB, 1),
        ..Default::default()
    }
}

pub fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

pub fn spread(key: &str, app: &str, soft: bool) -> SpreadConstraint {
    SpreadConstraint {
        key: key.into(),
        max_skew: 1,
        when_unsatisfiable: if soft { WhenUnsatisfiable::ScheduleAnyway } else { WhenUnsatisfiable::DoNotSchedule },
        selector: LabelSelector::from_labels(&labels(&[("app", app)])),
        min_domains: None,
        honor_node_affinity: true,
        honor_node_taints: false,
    }
}

pub fn term(key: &str, app: &str) -> AffinityTerm {
    AffinityTerm {
        key: key.into(),
        selector: LabelSelector::from_labels(&labels(&[("app", app)])),
        namespaces: vec![],
        all_namespaces: false,
        namespace_selector: None,
    }
}

pub fn node(name: &str, pool: &str, zone: &str, cpu_milli: i64) -> Node {
    let l = labels(&[
        ("karpenter.sh/nodepool", pool),
        ("topology.kubernetes.io/zone", zone),
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/arch", "amd64"),
        ("kubernetes.io/os", "linux"),
    ]);
    Node {
        name: name.into(),
        nodepool: Some(pool.into()),
        requirements: Requirements::from_iter(l.iter().map(|(k, v)| Requirement::in_values(k, [v.clone()]))),
        labels: l,
        allocatable: Resources::new(cpu_milli, 64 * GIB, 110),
        capacity: Resources::new(cpu_milli, 64 * GIB, 110),
        ..Default::default()
    }
}

pub fn snapshot(nodepools: Vec<NodePoolTemplate>, pods: Vec<Pod>) -> ClusterSnapshot {
    ClusterSnapshot { nodepools, pods, ..Default::default() }
}

/// The single zone a NodeClaim was pinned to, if any.
pub fn zone_of(reqs: &Requirements) -> Option<String> {
    reqs.get("topology.kubernetes.io/zone")
        .filter(|r| r.operator() == Operator::In && r.values().len() == 1)
        .map(|r| r.values()[0].clone())
}

/// A managed, initialized, Ready node of `pool` launched as catalog type `it` in `zone`
/// (on-demand), created at `created`, last pod event at `created`.
pub fn managed(name: &str, pool: &str, it: &str, zone: &str, created: i64) -> Node {
    let cat = catalog();
    let t = cat.iter().find(|t| t.name == it).expect("catalog type");
    let price = t.offerings.iter().find(|o| o.zone == zone && o.capacity_type == "on-demand").unwrap().price;
    let arch = t.label("kubernetes.io/arch").unwrap().to_string();
    let l = labels(&[
        ("karpenter.sh/nodepool", pool),
        ("topology.kubernetes.io/zone", zone),
        ("kubernetes.io/hostname", name),
        ("kubernetes.io/arch", &arch),
        ("kubernetes.io/os", "linux"),
        ("node.kubernetes.io/instance-type", it),
        ("karpenter.sh/capacity-type", "on-demand"),
        ("karpenter.k8s.aws/instance-family", t.label("karpenter.k8s.aws/instance-family").unwrap()),
        ("karpenter.k8s.aws/instance-cpu", t.label("karpenter.k8s.aws/instance-cpu").unwrap()),
    ]);
    Node {
        name: name.into(),
        nodepool: Some(pool.into()),
        requirements: Requirements::from_iter(l.iter().map(|(k, v)| Requirement::in_values(k, [v.clone()]))),
        labels: l,
        allocatable: t.allocatable().clone(),
        capacity: t.capacity.clone(),
        claim: Some(tenon_core::model::ClaimInfo {
            nodeclaim: format!("{name}-claim"),
            created,
            // Stamped from the NodePool default at launch.
            expire_after: Some(720 * 3600),
            initialized: true,
            ready: true,
            last_pod_event: Some(created),
            instance_type: it.into(),
            zone: zone.into(),
            capacity_type: "on-demand".into(),
            price,
            nodepool_hash: Some("0".into()),
            nodepool_hash_version: Some(tenon_api::hash::NODEPOOL_HASH_VERSION.into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A pod bound to `node`.
pub fn bound(name: &str, node: &str, cpu_milli: i64, mem_gib: i64) -> Pod {
    let mut p = pod(name, cpu_milli, mem_gib);
    p.node_name = Some(node.into());
    p
}
