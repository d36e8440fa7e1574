//! The snapshot the decision core sees, lent from the world's own objects (copying ~10,000
//! pods per decision was a third of a day-long run) and given back afterwards.

use super::World;
use super::objects::{PdbBound, Phase, SimPod};
use std::collections::BTreeMap;
use tenon_core::model::{ClaimInfo, ClusterSnapshot, Node, PodDisruptionBudget};

impl World<'_> {
    /// The snapshot the decision core sees now. `ready_only` is kube-scheduler's view.
    ///
    /// The pods are lent, not copied (copying and freeing ~10,000 pods per decision was a
    /// third of a day-long run): until `give_back`, the world's own pod objects are empty.
    pub(super) fn lend_snapshot(&mut self, ready_only: bool) -> ClusterSnapshot {
        self.lent_nodes.clear();
        let lent = &mut self.lent_nodes;
        let nodes = self
            .nodes
            .iter_mut()
            .enumerate()
            .filter(|(_, n)| !ready_only || n.phase == Phase::Ready)
            .map(|(i, n)| {
                lent.push(i);
                (i, n)
            })
            .map(|(_, n)| Node {
                name: n.name.clone(),
                nodepool: Some(n.nodepool.clone()),
                requirements: std::mem::take(&mut n.requirements),
                labels: std::mem::take(&mut n.labels),
                // Karpenter plans against a NodeClaim's taints without its startup taints and
                // without karpenter.sh/unregistered; kube-scheduler sees only initialized nodes.
                taints: n.pool_taints.clone(),
                allocatable: n.allocatable.clone(),
                capacity: n.capacity.clone(),
                in_flight: n.phase != Phase::Ready,
                unschedulable: n.disrupted || n.draining.is_some(),
                claim: Some(ClaimInfo {
                    nodeclaim: n.name.clone(),
                    created: n.created,
                    expire_after: n.expire_after,
                    initialized: n.phase == Phase::Ready,
                    ready: n.phase == Phase::Ready,
                    disrupting: n.disrupted || n.draining.is_some(),
                    last_pod_event: Some(n.last_pod_event),
                    annotations: BTreeMap::new(),
                    instance_type: n.instance_type.clone(),
                    zone: n.zone.clone(),
                    capacity_type: n.capacity_type.clone(),
                    price: n.price,
                    nodepool_hash: Some(n.hash.clone()),
                    nodepool_hash_version: Some(tenon_api::hash::NODEPOOL_HASH_VERSION.into()),
                    drift: None,
                    drifted_since: None,
                }),
            })
            .collect();
        let pdbs = self
            .pdbs
            .iter()
            .map(|b| {
                let matching: Vec<&SimPod> = self
                    .pods
                    .iter()
                    .filter(|p| p.pod.namespace == b.namespace && b.selector.matches(&p.pod.labels))
                    .collect();
                let healthy =
                    matching.iter().filter(|p| p.pod.node_name.as_ref().is_some_and(|n| self.node_ready(n))).count()
                        as i32;
                let expected = matching.len() as i32;
                let allowed = match (b.min_available, b.max_unavailable) {
                    (Some(min), _) => healthy - min.scaled(expected),
                    (None, Some(max)) => max.scaled(expected) - (expected - healthy),
                    (None, None) => healthy,
                };
                PodDisruptionBudget {
                    namespace: b.namespace.clone(),
                    name: b.name.clone(),
                    selector: b.selector.clone(),
                    disruptions_allowed: allowed.max(0),
                    unhealthy_always_allow: false,
                    fully_blocking: matches!(b.max_unavailable, Some(PdbBound::Count(0) | PdbBound::Percent(0)))
                        || matches!(b.min_available, Some(PdbBound::Percent(100))),
                }
            })
            .collect();
        ClusterSnapshot {
            now: self.now,
            nodepools: if ready_only {
                vec![]
            } else {
                self.nodepools.iter().filter(|p| !self.not_ready.contains(&p.name)).cloned().collect()
            },
            nodes,
            pods: self.pods.iter_mut().map(|p| std::mem::take(&mut p.pod)).collect(),
            daemonsets: self.daemonsets.clone(),
            pdbs,
            namespaces: BTreeMap::new(),
            max_instance_types: None,
            ignore_preferences: false,
            spot_to_spot: self.settings.spot_to_spot_consolidation,
            // The simulator models MIN_VALUES_POLICY=Strict only.
            min_values_best_effort: false,
            // The simulator models no CSI drivers: nothing limits attaches.
            volume_limits: BTreeMap::new(),
        }
    }

    /// Returns what `lend_snapshot` lent; `snap.pods` is empty afterwards and its nodes have
    /// no labels or requirements.
    pub(super) fn give_back(&mut self, snap: &mut ClusterSnapshot) {
        debug_assert_eq!(snap.pods.len(), self.pods.len());
        for (sp, pod) in self.pods.iter_mut().zip(snap.pods.drain(..)) {
            sp.pod = pod;
        }
        for (&i, node) in self.lent_nodes.iter().zip(snap.nodes.iter_mut()) {
            self.nodes[i].labels = std::mem::take(&mut node.labels);
            self.nodes[i].requirements = std::mem::take(&mut node.requirements);
        }
    }

    pub(super) fn node_ready(&self, name: &str) -> bool {
        self.nodes.iter().any(|n| n.name == name && n.phase == Phase::Ready)
    }
}
