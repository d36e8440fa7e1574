//! A pending pod's effective constraints, and Karpenter's preference relaxation: preferences
//! start out as requirements and are dropped one at a time while the pod cannot be placed.

use super::topology::Topology;
use crate::model::{ClusterSnapshot, Pod, WhenUnsatisfiable};
use crate::requirements::Requirements;
use crate::taints::{Taint, untolerated};

#[derive(Clone, Debug, Default)]
pub(crate) struct Relaxation {
    /// Index of the ORed required node-affinity term in use.
    node_term: usize,
    /// Index of the ORed volume alternative in use.
    volume_alt: usize,
    preferred_node_dropped: usize,
    preferred_affinity_dropped: usize,
    preferred_anti_dropped: usize,
    schedule_anyway_dropped: bool,
    pub(crate) tolerate_prefer_no_schedule: bool,
}

#[derive(Clone)]
pub(crate) struct PodState {
    pub(crate) idx: usize,
    pub(crate) relax: Relaxation,
    /// Node requirements in force now.
    pub(crate) reqs: Requirements,
    /// The same without the volumes' zones: the domains a spread constraint counts (a
    /// volume narrows where the pod goes, not which domains its spread is measured over).
    pub(crate) filter_reqs: Requirements,
    /// Topology groups in force now (own constraints and inverse anti-affinity).
    pub(crate) groups: Vec<usize>,
    /// (group, limit) for hostname-keyed groups in force: a bin holding more than `limit`
    /// pods of the group is out, decided by one lookup.
    pub(crate) hostname_limits: Vec<(usize, i32)>,
    /// Inverse groups of this pod's required anti-affinity terms: where it lands is recorded there.
    pub(crate) owned_inverse: Vec<usize>,
    spread: Vec<(usize, bool)>,
    affinity: Vec<usize>,
    preferred_affinity: Vec<usize>,
    anti: Vec<usize>,
    preferred_anti: Vec<usize>,
    inverse: Vec<usize>,
    /// Per NodePool (scheduler order): a template taint the pod does not tolerate.
    pub(crate) pool_taint: Vec<Option<String>>,
}

fn sorted_by_weight<T: Clone>(items: &[(i32, T)]) -> Vec<T> {
    let mut v: Vec<(i32, T)> = items.to_vec();
    v.sort_by_key(|t| std::cmp::Reverse(t.0));
    v.into_iter().map(|(_, t)| t).collect()
}

impl PodState {
    /// Registers every topology group the pod may need; all groups exist before scheduling
    /// starts so counts are complete.
    pub(crate) fn register(idx: usize, pod: &Pod, topo: &mut Topology) -> PodState {
        let spread = pod
            .spread
            .iter()
            .map(|c| (topo.spread_group(pod, c), c.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway))
            .collect();
        let affinity = pod.affinity.iter().map(|t| topo.affinity_group(pod, t, false)).collect();
        let preferred_affinity =
            sorted_by_weight(&pod.preferred_affinity).iter().map(|t| topo.affinity_group(pod, t, false)).collect();
        let anti = pod.anti_affinity.iter().map(|t| topo.affinity_group(pod, t, true)).collect();
        let preferred_anti =
            sorted_by_weight(&pod.preferred_anti_affinity).iter().map(|t| topo.affinity_group(pod, t, true)).collect();
        let owned_inverse = pod.anti_affinity.iter().map(|t| topo.inverse_group(pod, t)).collect();
        PodState {
            idx,
            relax: Relaxation::default(),
            reqs: Requirements::new(),
            filter_reqs: Requirements::new(),
            groups: Vec::new(),
            hostname_limits: Vec::new(),
            owned_inverse,
            spread,
            affinity,
            preferred_affinity,
            anti,
            preferred_anti,
            inverse: Vec::new(),
            pool_taint: Vec::new(),
        }
    }

    /// The topology groups the pod must satisfy whatever is relaxed: its DoNotSchedule
    /// spreads and required pod affinity and anti-affinity.
    pub(crate) fn required_groups(&self) -> impl Iterator<Item = usize> + '_ {
        let hard_spread = self.spread.iter().filter(|(_, soft)| !soft).map(|(g, _)| *g);
        hard_spread.chain(self.affinity.iter().copied()).chain(self.anti.iter().copied())
    }

    /// Resolves which inverse groups select the pod (after every group is registered) and
    /// computes the constraints in force.
    pub(crate) fn prepare(&mut self, pod: &Pod, topo: &Topology, snapshot: &ClusterSnapshot, pool_taints: &[&[Taint]]) {
        self.inverse = topo.inverse_groups_selecting(pod, snapshot);
        if snapshot.ignore_preferences {
            let r = &mut self.relax;
            r.preferred_affinity_dropped = self.preferred_affinity.len();
            r.preferred_anti_dropped = self.preferred_anti.len();
            r.preferred_node_dropped = pod.preferred_node_affinity.len();
            r.schedule_anyway_dropped = true;
        }
        self.rebuild(pod, pool_taints, topo, snapshot);
    }

    fn rebuild(&mut self, pod: &Pod, pool_taints: &[&[Taint]], topo: &Topology, snapshot: &ClusterSnapshot) {
        let r = &self.relax;
        let mut reqs = pod.node_selector.clone();
        if let Some(term) = pod.required_node_affinity.get(r.node_term) {
            reqs.add_all(term);
        }
        let preferred = sorted_by_weight(&pod.preferred_node_affinity);
        if let Some(term) = preferred.get(r.preferred_node_dropped) {
            reqs.add_all(term);
        }
        self.filter_reqs = reqs.clone();
        if let Some(alt) = pod.volume_requirements.get(r.volume_alt) {
            reqs.add_all(alt);
        }
        self.reqs = reqs;
        let mut groups: Vec<usize> =
            self.spread.iter().filter(|(_, soft)| !(*soft && r.schedule_anyway_dropped)).map(|(g, _)| *g).collect();
        groups.extend(&self.affinity);
        groups.extend(self.preferred_affinity.iter().skip(r.preferred_affinity_dropped));
        groups.extend(&self.anti);
        groups.extend(self.preferred_anti.iter().skip(r.preferred_anti_dropped));
        groups.extend(&self.inverse);
        groups.dedup();
        self.hostname_limits =
            groups.iter().filter_map(|&g| topo.hostname_limit(g, pod, snapshot).map(|l| (g, l))).collect();
        self.groups = groups;
        let strict = !r.tolerate_prefer_no_schedule;
        self.pool_taint = pool_taints
            .iter()
            .map(|taints| untolerated(taints, &pod.tolerations, strict).map(|t| t.to_string()))
            .collect();
    }

    /// Drops the next preference in Karpenter's order; false when nothing is left to relax.
    pub(crate) fn relax(
        &mut self,
        pod: &Pod,
        pool_taints: &[&[Taint]],
        topo: &Topology,
        snapshot: &ClusterSnapshot,
    ) -> bool {
        let r = &mut self.relax;
        let relaxed = if r.volume_alt + 1 < pod.volume_requirements.len() {
            r.volume_alt += 1;
            true
        } else if r.node_term + 1 < pod.required_node_affinity.len() {
            r.node_term += 1;
            r.volume_alt = 0;
            true
        } else if r.preferred_affinity_dropped < self.preferred_affinity.len() {
            r.preferred_affinity_dropped += 1;
            true
        } else if r.preferred_anti_dropped < self.preferred_anti.len() {
            r.preferred_anti_dropped += 1;
            true
        } else if r.preferred_node_dropped < pod.preferred_node_affinity.len() {
            r.preferred_node_dropped += 1;
            true
        } else if !r.schedule_anyway_dropped && self.spread.iter().any(|(_, soft)| *soft) {
            r.schedule_anyway_dropped = true;
            true
        } else if !r.tolerate_prefer_no_schedule {
            r.tolerate_prefer_no_schedule = true;
            true
        } else {
            false
        };
        if relaxed {
            self.rebuild(pod, pool_taints, topo, snapshot);
        }
        relaxed
    }
}
