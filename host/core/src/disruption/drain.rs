//! How a node drains, as Karpenter's terminator drains it. The pods waiting to leave are the
//! node's pods except mirror pods, pods that tolerate `karpenter.sh/disrupted:NoSchedule`
//! (they would come straight back) and pods stuck terminating a minute past their deletion
//! time. Of those, a pod whose grace period would outlast the node's terminationGracePeriod
//! deadline is deleted now, with the grace cut to the time left, whatever tier it is in; the
//! rest leave tier by tier (non-critical pods, non-critical DaemonSet pods, critical pods,
//! critical DaemonSet pods), each tier only once the earlier ones are gone — gone, not
//! merely terminating. Within a tier a pod is evicted through the Eviction API unless it is
//! terminating already, carries `karpenter.sh/do-not-disrupt`, or its PDB allows no more.

use super::candidates::{do_not_disrupt, pdbs_for};
use crate::model::{ClusterSnapshot, Pod};
use crate::taints::{Effect, Taint, untolerated};
use std::collections::BTreeMap;
use tenon_api::wellknown::TAINT_DISRUPTED;

/// Priority of `system-cluster-critical`; at or above it a pod is critical.
pub const CRITICAL_PRIORITY: i32 = 2_000_000_000;
/// A terminating pod this long past its deletion time no longer holds the node.
pub const STUCK_TERMINATING_SECONDS: i64 = 60;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DrainAction {
    /// Through the Eviction API (honours PDBs).
    Evict,
    /// Delete now with this grace period (seconds): the node's deadline leaves no room for
    /// the pod's own.
    Delete { grace: i64 },
    /// Not yet, and why.
    Wait(String),
}

/// What to do now for one node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DrainPlan {
    /// The tier being drained: 0 non-critical pods, 1 non-critical DaemonSet pods, 2 critical
    /// pods, 3 critical DaemonSet pods. Later tiers wait until earlier ones are gone.
    pub tier: u8,
    pub steps: Vec<(usize, DrainAction)>,
    /// Pods of later tiers, untouched for now.
    pub later: Vec<usize>,
}

impl DrainPlan {
    /// No pod is left that holds the node: it may be terminated.
    pub fn finished(&self) -> bool {
        self.steps.is_empty() && self.later.is_empty()
    }

    /// Karpenter's `FailedDraining` message when pods must wait, naming the first reason.
    pub fn waiting_message(&self) -> Option<String> {
        let waiting: Vec<&String> = self
            .steps
            .iter()
            .filter_map(|(_, a)| match a {
                DrainAction::Wait(why) => Some(why),
                _ => None,
            })
            .collect();
        let first = waiting.first()?;
        Some(format!("Failed to drain node, {} pods are waiting to be evicted: {first}", waiting.len()))
    }
}

fn tier(p: &Pod) -> u8 {
    u8::from(p.is_daemon()) + 2 * u8::from(p.critical || p.priority >= CRITICAL_PRIORITY)
}

fn disrupted_taint() -> Taint {
    Taint { key: TAINT_DISRUPTED.into(), value: String::new(), effect: Effect::NoSchedule }
}

/// Whether the drain waits for `p` at `now`: not a mirror pod, not one that tolerates the
/// disruption taint, not stuck terminating.
pub fn is_drainable(p: &Pod, now: i64) -> bool {
    let tolerates = untolerated(&[disrupted_taint()], &p.tolerations, true).is_none();
    let stuck = p.deleted_at.is_some_and(|t| now > t + STUCK_TERMINATING_SECONDS);
    p.owner_kind.as_deref() != Some("Node") && !tolerates && !stuck
}

/// Whether `p` must be deleted now for the node to go by `deadline`: a terminating pod whose
/// deletion time falls after it, or another pod whose grace period would.
fn needs_force_delete(p: &Pod, deadline: Option<i64>, now: i64) -> bool {
    let Some(d) = deadline else { return false };
    match p.deleted_at {
        Some(t) => t > d,
        None => now > d - p.termination_grace_seconds,
    }
}

/// PDB allowances left in one drain pass, shared by every node drained in it (the Eviction
/// API counts a budget across nodes, not per node).
#[derive(Clone, Debug, Default)]
pub struct PdbAllowance(BTreeMap<(String, String), i32>);

/// The drain step for `node` at the snapshot's time. `deadline` is when the node's
/// terminationGracePeriod runs out (seconds since the epoch), if it has one.
pub fn drain_order(snap: &ClusterSnapshot, node: &str, deadline: Option<i64>) -> DrainPlan {
    drain_order_with(snap, node, deadline, &mut PdbAllowance::default())
}

/// As [`drain_order`], spending PDB allowance from `allowance` (for several nodes in one pass).
pub fn drain_order_with(
    snap: &ClusterSnapshot,
    node: &str,
    deadline: Option<i64>,
    allowance: &mut PdbAllowance,
) -> DrainPlan {
    let now = snap.now;
    let mut steps = Vec::new();
    let mut by_tier: BTreeMap<u8, Vec<usize>> = BTreeMap::new();
    for (i, p) in snap.pods.iter().enumerate() {
        if p.node_name.as_deref() != Some(node) || !is_drainable(p, now) {
            continue;
        }
        if needs_force_delete(p, deadline, now) {
            let grace = deadline.map_or(1, |d| (d - now).max(1));
            steps.push((i, DrainAction::Delete { grace }));
        } else {
            by_tier.entry(tier(p)).or_default().push(i);
        }
    }
    let Some((&current, pods)) = by_tier.iter().next() else { return DrainPlan { tier: 0, steps, later: Vec::new() } };
    let later: Vec<usize> = by_tier.iter().skip(1).flat_map(|(_, v)| v.iter().copied()).collect();
    for &p in pods {
        let pod = &snap.pods[p];
        if pod.deleted_at.is_some() {
            steps.push((p, DrainAction::Wait(format!("pod {} is terminating", pod.key()))));
            continue;
        }
        if do_not_disrupt(pod, now) {
            steps.push((p, DrainAction::Wait(format!("pod {} has karpenter.sh/do-not-disrupt", pod.key()))));
            continue;
        }
        let pdbs = pdbs_for(pod, &snap.pdbs);
        if pdbs.len() > 1 {
            steps.push((
                p,
                DrainAction::Wait(format!("pod {} is selected by more than one PodDisruptionBudget", pod.key())),
            ));
            continue;
        }
        if let Some(b) = pdbs.first() {
            let left = allowance.0.entry((b.namespace.clone(), b.name.clone())).or_insert(b.disruptions_allowed);
            if *left <= 0 {
                steps.push((
                    p,
                    DrainAction::Wait(format!(
                        "PodDisruptionBudget {}/{} allows no more disruptions",
                        b.namespace, b.name
                    )),
                ));
                continue;
            }
            *left -= 1;
        }
        steps.push((p, DrainAction::Evict));
    }
    DrainPlan { tier: current, steps, later }
}
