//! Generated workloads for benchmarks and property tests, deterministic for a seed.
//!
//! [`scheduling_benchmark`] is Karpenter's scheduling benchmark shape: pods split evenly into
//! generic, zonal topology spread, hostname topology spread, zonal self-affinity and hostname
//! anti-affinity, each requesting one of 100m/250m/500m/1/1.5 CPU and
//! 100Mi/256Mi/512Mi/1Gi/2Gi/4Gi memory, against one NodePool with no requirements.

use crate::instancetype::InstanceType;
use crate::model::{AffinityTerm, ClusterSnapshot, NodePoolTemplate, Pod, SpreadConstraint, WhenUnsatisfiable};
use crate::requirements::{Requirement, Requirements};
use crate::resources::Resources;
use crate::selector::LabelSelector;
use std::collections::BTreeMap;
use std::sync::Arc;
use tenon_api::wellknown::{LABEL_HOSTNAME, LABEL_NODEPOOL, LABEL_ZONE};

/// A small deterministic generator (SplitMix64); no dependency, same sequence everywhere.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A NodePool with no requirements beyond its name, over `catalog`.
pub fn open_nodepool(name: &str, catalog: Arc<Vec<InstanceType>>) -> NodePoolTemplate {
    NodePoolTemplate {
        name: name.into(),
        weight: 0,
        requirements: Requirements::from_iter([Requirement::in_values(LABEL_NODEPOOL, [name])]),
        labels: BTreeMap::new(),
        taints: vec![],
        startup_taints: vec![],
        limits: BTreeMap::new(),
        instance_types: catalog,
        disruption: crate::model::DisruptionSettings::default(),
        expire_after: Some(720 * 3600),
        termination_grace_period: None,
        hash: "0".into(),
        replicas: None,
        unavailable: None,
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Karpenter's diverse benchmark pods.
pub fn scheduling_benchmark(pods: usize, catalog: Arc<Vec<InstanceType>>, seed: u64) -> ClusterSnapshot {
    let mut rng = Rng::new(seed);
    let cpus = [100, 250, 500, 1000, 1500];
    let mems = [100, 256, 512, 1024, 2048, 4096];
    let values = ["a", "b", "c", "d", "e", "f", "g"];
    let per = pods / 5;
    let mut out = Vec::with_capacity(pods);
    for i in 0..pods {
        let kind = if i < 5 * per { i / per } else { 0 };
        let mut pod = Pod {
            namespace: "default".into(),
            name: format!("pod-{i:06}"),
            uid: format!("{i:08x}"),
            requests: Resources::new(*rng.pick(&cpus), *rng.pick(&mems) << 20, 1),
            ..Default::default()
        };
        match kind {
            1 | 2 => {
                let v = *rng.pick(&values);
                pod.labels = labels(&[("my-label", v)]);
                pod.spread.push(SpreadConstraint {
                    key: if kind == 1 { LABEL_ZONE } else { LABEL_HOSTNAME }.into(),
                    max_skew: 1,
                    when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
                    selector: LabelSelector::from_labels(&pod.labels),
                    min_domains: None,
                    honor_node_affinity: true,
                    honor_node_taints: false,
                });
            }
            3 => {
                let v = *rng.pick(&values);
                pod.labels = labels(&[("my-affinity", v)]);
                pod.affinity.push(AffinityTerm {
                    key: LABEL_ZONE.into(),
                    selector: LabelSelector::from_labels(&pod.labels),
                    namespaces: vec![],
                    all_namespaces: false,
                    namespace_selector: None,
                });
            }
            4 => {
                pod.labels = labels(&[("app", "nginx")]);
                pod.anti_affinity.push(AffinityTerm {
                    key: LABEL_HOSTNAME.into(),
                    selector: LabelSelector::from_labels(&pod.labels),
                    namespaces: vec![],
                    all_namespaces: false,
                    namespace_selector: None,
                });
            }
            _ => {}
        }
        out.push(pod);
    }
    ClusterSnapshot { now: 0, nodepools: vec![open_nodepool("default", catalog)], pods: out, ..Default::default() }
}

/// Types the consolidation benchmark's nodes are drawn from (all in the bundled catalog).
pub const CONSOLIDATION_TYPES: &[&str] = &[
    "m6a.large",
    "m6a.xlarge",
    "m6a.2xlarge",
    "m6i.2xlarge",
    "c6a.2xlarge",
    "c6i.4xlarge",
    "r6a.xlarge",
    "m7i.4xlarge",
];

/// A cluster for `tenon bench consolidation`: `nodes` on-demand nodes of mixed types, about
/// ten pods each (at least one) from 100 Deployments; about 30% of nodes are underutilised
/// (10-30% of CPU requested), the rest 60-90%; PDBs on five Deployments (one allowing no
/// disruption) and 1% of pods marked `karpenter.sh/do-not-disrupt`. Every node is past
/// consolidateAfter, none is empty, so a pass runs every consolidation method.
pub fn consolidation_benchmark(nodes: usize, catalog: Arc<Vec<InstanceType>>, seed: u64) -> ClusterSnapshot {
    use crate::model::{ClaimInfo, Node, PodDisruptionBudget};
    use tenon_api::wellknown as wk;
    let mut rng = Rng::new(seed);
    let now = 1_795_996_800;
    let mut pool = open_nodepool("default", catalog.clone());
    pool.requirements.add(Requirement::in_values(wk::LABEL_CAPACITY_TYPE, [wk::CAPACITY_TYPE_ON_DEMAND]));
    pool.requirements.add(Requirement::in_values(wk::LABEL_ARCH, ["amd64"]));
    pool.requirements.add(Requirement::in_values(wk::LABEL_INSTANCE_CATEGORY, ["c", "m", "r"]));
    let zones = ["us-east-1a", "us-east-1b", "us-east-1c"];
    let cpus = [100i64, 250, 500, 750];
    let mut snap = ClusterSnapshot { now, nodepools: vec![pool], ..Default::default() };
    for i in 0..nodes {
        let ty = *rng.pick(CONSOLIDATION_TYPES);
        let it = catalog.iter().find(|t| t.name == ty).expect("benchmark type in catalog");
        let zone = *rng.pick(&zones);
        let name = format!("node-{i:05}");
        let mut labels = it.labels();
        for (k, v) in [
            (wk::LABEL_ZONE, zone),
            (wk::LABEL_CAPACITY_TYPE, wk::CAPACITY_TYPE_ON_DEMAND),
            (LABEL_NODEPOOL, "default"),
            (LABEL_HOSTNAME, name.as_str()),
        ] {
            labels.insert(k.to_string(), v.to_string());
        }
        let price = it
            .offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == wk::CAPACITY_TYPE_ON_DEMAND)
            .map_or(0.0, |o| o.price);
        let underused = rng.below(10) < 3;
        let target =
            it.allocatable().cpu * if underused { 10 + rng.below(20) as i64 } else { 60 + rng.below(30) as i64 } / 100;
        let mut used = 0;
        for j in 0..14 {
            let cpu = *rng.pick(&cpus);
            if j > 0 && used + cpu > target {
                break;
            }
            used += cpu;
            let app = rng.below(100);
            let mut pod = Pod {
                namespace: "default".into(),
                name: format!("{name}-pod-{j}"),
                uid: format!("{i:05}-{j}"),
                labels: labels_of(&[("app", &format!("app-{app:02}"))]),
                requests: Resources::new(cpu, (cpu * 2) << 20, 1),
                node_name: Some(name.clone()),
                created: now - 7200,
                owner_kind: Some("ReplicaSet".into()),
                owner_name: Some(format!("app-{app:02}")),
                ..Default::default()
            };
            if rng.below(100) == 0 {
                pod.annotations.insert(wk::ANNOTATION_DO_NOT_DISRUPT.into(), "true".into());
            }
            snap.pods.push(pod);
        }
        snap.nodes.push(Node {
            name: name.clone(),
            nodepool: Some("default".into()),
            requirements: labels.iter().map(|(k, v)| Requirement::in_values(k, [v.clone()])).collect(),
            labels,
            allocatable: it.allocatable().clone(),
            capacity: it.capacity.clone(),
            claim: Some(ClaimInfo {
                nodeclaim: format!("{name}-claim"),
                created: now - 7200,
                initialized: true,
                ready: true,
                last_pod_event: Some(now - 3600),
                instance_type: ty.into(),
                zone: zone.into(),
                capacity_type: wk::CAPACITY_TYPE_ON_DEMAND.into(),
                price,
                ..Default::default()
            }),
            ..Default::default()
        });
    }
    for app in 0..5 {
        snap.pdbs.push(PodDisruptionBudget {
            namespace: "default".into(),
            name: format!("app-{app:02}"),
            selector: LabelSelector::from_labels(&labels_of(&[("app", &format!("app-{app:02}"))])),
            disruptions_allowed: if app == 0 { 0 } else { 2 },
            unhealthy_always_allow: false,
            fully_blocking: false,
        });
    }
    snap
}

fn labels_of(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    labels(pairs)
}
