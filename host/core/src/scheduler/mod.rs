//! Scheduling simulation: which pending pods fit existing and in-flight capacity, and which
//! new NodeClaims (NodePool, requirements, ranked instance types) the rest need.
//!
//! Karpenter's semantics: pods in descending CPU then memory order; each tries existing nodes,
//! then NodeClaims created earlier in this pass (fewest pods first), then a new NodeClaim per
//! NodePool by descending weight; preferences are relaxed one at a time on failure; a pod that
//! failed is retried while other pods still make progress.

mod bins;
mod pods;
mod topology;

use crate::model::ClusterSnapshot;
use crate::plan::{Nomination, ProvisioningPlan, Unschedulable};
use crate::scorer::Scorer;
use bins::Scheduler;
use std::collections::VecDeque;

/// Karpenter truncates a NodeClaim's instance type options to this many.
pub const MAX_INSTANCE_TYPES: usize = 600;

/// Plans capacity for every pending pod of `snapshot`.
pub fn schedule(snapshot: &ClusterSnapshot, scorer: &dyn Scorer) -> ProvisioningPlan {
    let mut s = Scheduler::new(snapshot);
    let mut order: Vec<usize> = (0..s.pods.len()).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&snapshot.pods[s.pods[a].idx], &snapshot.pods[s.pods[b].idx]);
        pb.requests
            .cpu
            .cmp(&pa.requests.cpu)
            .then(pb.requests.memory.cmp(&pa.requests.memory))
            .then(pa.created.cmp(&pb.created))
            .then(pa.uid.cmp(&pb.uid))
            .then(pa.namespace.cmp(&pb.namespace))
            .then(pa.name.cmp(&pb.name))
    });
    let mut queue: VecDeque<(usize, Option<usize>)> = order.into_iter().map(|p| (p, None)).collect();
    let mut placed = 0usize;
    let mut unschedulable = Vec::new();
    while let Some((p, failed_at)) = queue.pop_front() {
        if failed_at == Some(placed) {
            // Nothing was placed since this pod last failed: nothing can change for it.
            unschedulable.push(p);
            continue;
        }
        loop {
            match s.try_place(p) {
                Ok(()) => {
                    placed += 1;
                    break;
                }
                Err(reason) => {
                    s.pods[p].last_reason = reason;
                    if !s.relax(p) {
                        queue.push_back((p, Some(placed)));
                        break;
                    }
                }
            }
        }
    }
    let mut plan = ProvisioningPlan::default();
    for (node, pod) in s.nominations.drain(..) {
        plan.nominations.push(Nomination { pod, node });
    }
    plan.nominations.sort_by_key(|n| n.pod);
    unschedulable.sort_by_key(|&p| s.pods[p].idx);
    for p in unschedulable {
        plan.unschedulable.push(Unschedulable { pod: s.pods[p].idx, reason: s.pods[p].last_reason.clone() });
    }
    plan.nodeclaims = s.finish(scorer);
    plan
}
