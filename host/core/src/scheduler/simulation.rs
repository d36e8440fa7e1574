//! Re-simulation for disruption: "if these nodes went away, where would their pods go?"
//!
//! The expensive parts (NodePool catalogs filtered and price-ordered, every existing node as a
//! place, topology counts of every running pod) are built once per decision; each question
//! forks that state, takes the candidates out, and places only their pods (and any pending
//! pods and pods of nodes being disrupted), so a candidate costs in proportion to its own pods, not the cluster.

use super::bins::{RankedOptions, Scheduler};
use super::pods::PodState;
use super::{queue_order, run_queue};
use crate::model::{ClusterSnapshot, Pod};
use crate::plan::{NewNodeClaim, Unschedulable};
use crate::scorer::Scorer;
use std::borrow::Cow;
use std::cmp::Ordering;
use std::collections::BTreeMap;

/// What happens to the pods of removed nodes.
#[derive(Clone, Debug)]
pub struct SimOutcome {
    /// New NodeClaims the pods need.
    pub nodeclaims: Vec<NewNodeClaim>,
    /// Pods that could not be placed anywhere.
    pub unschedulable: Vec<Unschedulable>,
    /// Pods placed on remaining nodes: pod index → snapshot node index.
    pub moved_to: BTreeMap<usize, usize>,
    /// Some new NodeClaim had more options than a NodeClaim may carry, so the scorer's
    /// order decided which it kept.
    pub cut_types: bool,
    /// How many new NodeClaims the pods need: `nodeclaims.len()`, unless `Needs::claims_up_to`
    /// left them unbuilt.
    pub claims_needed: usize,
    /// False when the simulation stopped at `Needs::refused_if_on`: other pods than the
    /// watched ones may be neither placed nor unschedulable, and no NodeClaim is built.
    pub complete: bool,
}

/// What a question needs to know beyond where the removed nodes' pods go; a simulation
/// skips what is not needed. The default needs everything.
#[derive(Clone, Copy, Default)]
pub struct Needs<'q> {
    /// `(pods, nodes)`: the question is answered once all of `pods` are placed and one of them
    /// is on a node `nodes` marks (by snapshot index). A placed pod stays where it is, so
    /// the pods still queued cannot change that answer (consolidation's "relies on a node
    /// not Initialized yet", while thousands of pods are pending).
    pub refused_if_on: Option<(&'q [usize], &'q [bool])>,
    /// New NodeClaims' options are worked out only when at most this many are needed.
    pub claims_up_to: Option<usize>,
    /// Pods of the removed nodes that are not placed anywhere: they cannot be moved now
    /// (Karpenter simulates only currently reschedulable pods) and go with their node.
    pub stays: &'q [usize],
    /// A consolidation's question: the removed nodes' pods may not go to a node still within
    /// its NodePool's consolidateAfter (pending pods may).
    pub consolidation: bool,
}

/// Ranks `nc`, simulated with [`PriceScorer`](crate::scorer::PriceScorer) and no options
/// cut (`SimOutcome::cut_types` false), as simulating with `scorer` would have: the same
/// options, in `scorer`'s order. Consolidation simulates many removals and keeps few plans;
/// only their replacements need the NodePool's scorer.
pub fn rank_options(nc: &mut NewNodeClaim, snap: &ClusterSnapshot, scorer: &dyn Scorer) {
    let ranked = RankedOptions::of(snap, nc.nodepool, &nc.requests, nc.pods.len(), &nc.offerings, scorer);
    nc.instance_types = ranked.types;
    nc.offerings = ranked.offerings;
}

pub struct Simulator<'a> {
    snap: &'a ClusterSnapshot,
    base: Scheduler<'a>,
    /// Placement state of each pod that can move, in snapshot order.
    states: Vec<PodState>,
    /// Snapshot pod index → its position in `states`.
    state_of: Vec<Option<usize>>,
    /// Pods bound to each node (snapshot node name → pod indices).
    on_node: BTreeMap<&'a str, Vec<usize>>,
    /// Pending pods and pods of nodes being disrupted (positions in `states`), in
    /// `queue_order`: every question places them, so they are ordered once.
    pending: Vec<usize>,
}

/// Pods a drain would reschedule (Karpenter's `IsReschedulable`): not DaemonSet or mirror
/// pods; not already terminating, unless of a StatefulSet (it comes back under the same
/// name, so its place is still needed).
pub fn reschedulable(p: &Pod) -> bool {
    let stateful = p.owner_kind.as_deref() == Some("StatefulSet");
    !p.is_daemon() && !p.is_mirror() && (p.deleted_at.is_none() || stateful)
}

impl<'a> Simulator<'a> {
    pub fn new(snap: &'a ClusterSnapshot) -> Self {
        let (mut base, states) = Scheduler::new(snap, &reschedulable);
        let mut on_node: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        let mut pending = Vec::new();
        let leaving: BTreeMap<&str, usize> = snap
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.claim.as_ref().is_some_and(|c| c.disrupting))
            .map(|(i, n)| (n.name.as_str(), i))
            .collect();
        for (i, p) in snap.pods.iter().enumerate() {
            match &p.node_name {
                // Karpenter's deleting-node pods: they need a place as much as pending ones.
                Some(n) if leaving.contains_key(n.as_str()) && reschedulable(p) => pending.push(i),
                Some(n) => on_node.entry(n.as_str()).or_default().push(i),
                None if reschedulable(p) => pending.push(i),
                None => {}
            }
        }
        let mut state_of = vec![None; snap.pods.len()];
        for (i, st) in states.iter().enumerate() {
            state_of[st.idx] = Some(i);
        }
        // They leave their node: no longer counted there.
        for &p in &pending {
            if let Some(&n) = snap.pods[p].node_name.as_deref().and_then(|n| leaving.get(n)) {
                base.forget(p, n, state_of[p].map_or(&[][..], |i| states[i].owned_inverse.as_slice()));
            }
        }
        let mut pending: Vec<usize> = pending.into_iter().filter_map(|p| state_of[p]).collect();
        pending.sort_by(|&a, &b| queue_order(snap, states[a].idx, states[b].idx));
        Simulator { snap, base, states, state_of, on_node, pending }
    }

    /// Takes `nodes` (snapshot node indices) out and places their reschedulable pods, every
    /// pending pod and every pod of a node being disrupted, on what remains plus new
    /// NodeClaims.
    pub fn remove(&self, nodes: &[usize], scorer: &dyn Scorer) -> SimOutcome {
        self.ask(nodes, scorer, &Needs::default())
    }

    /// [`remove`](Self::remove), simulating only what `needs` asks for.
    pub fn ask(&self, nodes: &[usize], scorer: &dyn Scorer, needs: &Needs) -> SimOutcome {
        crate::work::count(|w| w.removal_simulations += 1);
        let mut s = self.base.clone();
        let mut removed: Vec<&PodState> = Vec::new();
        for &n in nodes {
            let node = &self.snap.nodes[n];
            s.take_out(n);
            for &p in self.on_node.get(node.name.as_str()).into_iter().flatten() {
                let state = self.state_of[p].map(|i| &self.states[i]);
                s.forget(p, n, state.map_or(&[][..], |st| st.owned_inverse.as_slice()));
                if !needs.stays.contains(&p) {
                    removed.extend(state);
                }
            }
        }
        if needs.consolidation {
            let mut moved: Vec<usize> = removed.iter().map(|st| st.idx).collect();
            moved.sort_unstable();
            s.guard(moved);
        }
        removed.sort_by(|a, b| queue_order(self.snap, a.idx, b.idx));
        // Merged into the ordered pending pods; on a tie the removed node's pod goes first,
        // as a stable sort of the two, removed first, would have it.
        let mut moving: Vec<Cow<PodState>> = Vec::with_capacity(removed.len() + self.pending.len());
        let mut pending = self.pending.iter().map(|&i| &self.states[i]).peekable();
        for st in removed {
            while let Some(p) = pending.next_if(|p| queue_order(self.snap, p.idx, st.idx) == Ordering::Less) {
                moving.push(Cow::Borrowed(p));
            }
            moving.push(Cow::Borrowed(st));
        }
        moving.extend(pending.map(Cow::Borrowed));
        // Watched pods not placed yet; none are watched unless every one is queued.
        let (watched, marked) = needs.refused_if_on.unwrap_or_default();
        let mut watched = watched.to_vec();
        watched.sort_unstable();
        watched.dedup();
        let queued = moving.iter().filter(|ps| watched.binary_search(&ps.idx).is_ok()).count();
        if queued < watched.len() {
            watched.clear();
        }
        let mut unplaced = watched.len();
        let mut relied = false;
        let mut settled = |s: &Scheduler, pod: usize| {
            if unplaced > 0 && watched.binary_search(&pod).is_ok() {
                unplaced -= 1;
                relied |= s.nominations.last().is_some_and(|&(n, p)| p == pod && marked[n]);
            }
            unplaced == 0 && relied
        };
        let mut unschedulable = run_queue(&mut s, &mut moving, &mut settled);
        let complete = !(unplaced == 0 && relied);
        let moved_to = s.nominations.drain(..).map(|(node, pod)| (pod, node)).collect();
        let unbuilt = match (complete, needs.claims_up_to) {
            (false, _) => Some(0),
            (true, Some(most)) => s.claims_without_finish().filter(|&n| n > most),
            (true, None) => None,
        };
        if let Some(claims_needed) = unbuilt {
            return SimOutcome {
                nodeclaims: vec![],
                unschedulable,
                moved_to,
                cut_types: false,
                claims_needed,
                complete,
            };
        }
        let (nodeclaims, cut, cut_types) = s.finish(scorer);
        unschedulable.extend(cut);
        SimOutcome { claims_needed: nodeclaims.len(), nodeclaims, unschedulable, moved_to, cut_types, complete }
    }
}
