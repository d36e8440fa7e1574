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
