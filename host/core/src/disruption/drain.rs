//! The order a node's pods leave: Karpenter's four tiers, PDB allowances, do-not-disrupt,
//! and the terminationGracePeriod deadline after which nothing blocks.

use super::candidates::{do_not_disrupt, pdbs_for};
use crate::model::ClusterSnapshot;
use std::collections::BTreeMap;

/// Priority of `system-cluster-critical`; at or above it a pod is critical.
pub const CRITICAL_PRIORITY: i32 = 2_000_000_000;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DrainAction {
    /// Through the Eviction API (honours PDBs).
    Evict,
    /// Delete outright: the deadline leaves no room for the pod's grace period.
    Delete,
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
    pub fn is_done(&self) -> bool {
        self.steps.is_empty() && self.later.is_empty()
    }

    /// Nothing left that holds the node's termination: no pods, or only DaemonSet pods from
    /// the DaemonSet tier on (they would come straight back).
    pub fn finished(&self, snap: &ClusterSnapshot) -> bool {
        self.is_done() || (self.tier >= 1 && self.steps.iter().all(|(p, _)| snap.pods[*p].is_daemon()))
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

fn tier(daemon: bool, critical: bool) -> u8 {
    u8::from(daemon) + 2 * u8::from(critical)
}

/// The drain step for `node` at the snapshot's time. `deadline` is when the node's
/// terminationGracePeriod runs out (seconds since the epoch), if it has one.
pub fn drain_order(snap: &ClusterSnapshot, node: &str, deadline: Option<i64>) -> DrainPlan {
    let now = snap.now;
    let mut by_tier: BTreeMap<u8, Vec<usize>> = BTreeMap::new();
    for (i, p) in snap.pods.iter().enumerate() {
        // Mirror pods belong to the node; terminating pods are already leaving.
        if p.node_name.as_deref() != Some(node) || p.deleting || p.owner_kind.as_deref() == Some("Node") {
            continue;
        }
        by_tier.entry(tier(p.is_daemon(), p.priority >= CRITICAL_PRIORITY)).or_default().push(i);
    }
    let Some((&current, pods)) = by_tier.iter().next() else { return DrainPlan::default() };
    let later: Vec<usize> = by_tier.iter().skip(1).flat_map(|(_, v)| v.iter().copied()).collect();
    let mut allowance: BTreeMap<(String, String), i32> = BTreeMap::new();
    let mut steps = Vec::new();
    for &p in pods {
        let pod = &snap.pods[p];
        if let Some(d) = deadline
            && now >= d - pod.termination_grace_seconds
        {
            steps.push((p, DrainAction::Delete));
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
            let left = allowance.entry((b.namespace.clone(), b.name.clone())).or_insert(b.disruptions_allowed);
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
