//! Scheduling simulation: which pending pods fit existing and in-flight capacity, and which
//! new NodeClaims (NodePool, requirements, ranked instance types) the rest need.
//!
//! Karpenter's semantics: pods in descending CPU then memory order; each tries existing nodes,
//! then NodeClaims created earlier in this pass (fewest pods first), then a new NodeClaim per
//! NodePool by descending weight; preferences are relaxed one at a time on failure; a pod that
//! failed is retried while other pods still make progress.

mod bins;
mod daemons;
mod pods;
pub mod simulation;
mod topology;
mod zones;

pub use simulation::{Needs, SimOutcome, Simulator, rank_options, reschedulable};

use crate::model::{ClusterSnapshot, Pod};
use crate::plan::{Nomination, PendingZone, ProvisioningPlan, Unschedulable};
use crate::scorer::Scorer;
use bins::Scheduler;
pub(crate) use bins::min_values_problem;
use pods::PodState;
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};

/// Karpenter truncates a NodeClaim's instance type options to this many.
pub const MAX_INSTANCE_TYPES: usize = 600;

fn is_pending(p: &Pod) -> bool {
    p.node_name.is_none() && !p.is_daemon() && p.deleted_at.is_none()
}

/// Plans capacity for every pending pod of `snapshot`.
pub fn schedule(snapshot: &ClusterSnapshot, scorer: &dyn Scorer) -> ProvisioningPlan {
    crate::work::count(|w| w.scheduling_passes += 1);
    let (mut s, pods) = Scheduler::new(snapshot, &is_pending);
    // Judged before anything is placed: where each pod could go, not where it went.
    let mut pending_zones: Vec<PendingZone> = pods
        .iter()
        .map(|ps| PendingZone { pod: ps.idx, zone: zones::effective_zone(ps, s.topology(), snapshot) })
        .collect();
    pending_zones.sort_by_key(|z| z.pod);
    let mut plan =
        ProvisioningPlan { pending_zones, incompatible_nodepools: s.incompatible_nodepools(), ..Default::default() };
    let mut pods: Vec<Cow<PodState>> = pods.into_iter().map(Cow::Owned).collect();
    pods.sort_by(|a, b| queue_order(snapshot, a.idx, b.idx));
    let unschedulable = run_queue(&mut s, &mut pods, &mut |_, _| false);
    for (node, pod) in s.nominations.drain(..) {
        plan.nominations.push(Nomination { pod, node: snapshot.nodes[node].name.clone() });
    }
    plan.nominations.sort_by_key(|n| n.pod);
    let (nodeclaims, cut, _) = s.finish(scorer);
    plan.nodeclaims = nodeclaims;
    plan.unschedulable = unschedulable;
    plan.unschedulable.extend(cut);
    plan.unschedulable.sort_by_key(|u| u.pod);
    plan
}

/// Karpenter's queue order of pods (snapshot indices): descending CPU, then descending
/// memory, then oldest first; uid, namespace and name break the remaining ties.
pub(crate) fn queue_order(snapshot: &ClusterSnapshot, a: usize, b: usize) -> Ordering {
    let (pa, pb) = (&snapshot.pods[a], &snapshot.pods[b]);
    pb.requests
        .cpu
        .cmp(&pa.requests.cpu)
        .then(pb.requests.memory.cmp(&pa.requests.memory))
        .then(pa.created.cmp(&pb.created))
        .then(pa.uid.cmp(&pb.uid))
        .then(pa.namespace.cmp(&pb.namespace))
        .then(pa.name.cmp(&pb.name))
}

/// Places `pods`, given in `queue_order`, relaxing preferences and retrying while others make
/// progress. Returns the pods that could not be placed, with why. A pod's state is copied
/// only if a preference of it is relaxed: consolidation's simulations share the pending
/// pods' states. `settled` hears of each placement (the scheduler, the pod's snapshot
/// index); when it answers true the rest of the queue is left unplaced.
fn run_queue(
    s: &mut Scheduler<'_>,
    pods: &mut [Cow<PodState>],
    settled: &mut dyn FnMut(&Scheduler<'_>, usize) -> bool,
) -> Vec<Unschedulable> {
    let mut queue: VecDeque<(usize, Option<usize>)> = (0..pods.len()).map(|p| (p, None)).collect();
    let mut placed = 0usize;
    let mut failed = Vec::new();
    let mut last_reason: BTreeMap<usize, String> = BTreeMap::new();
    while let Some((p, failed_at)) = queue.pop_front() {
        if failed_at == Some(placed) {
            // Nothing was placed since this pod last failed: nothing can change for it.
            failed.push(p);
            continue;
        }
        loop {
            let tried = s.try_place(&pods[p]);
            crate::work::count(|w| {
                w.placements_tried += 1;
                w.pods_placed += u64::from(tried.is_ok());
            });
            match tried {
                Ok(()) => {
                    placed += 1;
                    if settled(s, pods[p].idx) {
                        queue.clear();
                    }
                    break;
                }
                Err(reason) => {
                    last_reason.insert(p, reason);
                    if !s.relax(pods[p].to_mut()) {
                        queue.push_back((p, Some(placed)));
                        break;
                    }
                }
            }
        }
    }
    let mut out: Vec<Unschedulable> = failed
        .into_iter()
        .map(|p| Unschedulable { pod: pods[p].idx, reason: last_reason.remove(&p).unwrap_or_default() })
        .collect();
    out.sort_by_key(|u| u.pod);
    out
}
