//! (Long: the scheduler's one placement loop and the bins it fills; the parts share its
//! per-pass state.)
//! The places a pod can go: existing nodes, in-flight NodeClaims, and NodeClaims this pass
//! creates; and the checks, cheapest first, that decide whether it fits.

use super::MAX_INSTANCE_TYPES;
use super::daemons::{self, DaemonOverhead};
use super::pods::PodState;
use super::topology::{Placement, Topology};
use crate::instancetype::InstanceType;
use crate::model::{ClusterSnapshot, HostPort, NodePoolTemplate, Pod};
use crate::plan::{NewNodeClaim, Unschedulable};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::{NODES, Resources, format_amount};
use crate::scorer::{Candidate, Scorer, ScoringInput, normalise_ranking};
use crate::taints::{Taint, untolerated};
use crate::volume_usage::{self, Volumes};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use tenon_api::wellknown::{LABEL_CAPACITY_TYPE, LABEL_HOSTNAME, LABEL_ZONE};

/// An available offering: (price, catalog index, zone index, capacity-type index, offering
/// index within the instance type).
type PriceEntry = (f64, u32, u8, u8, u16);

#[derive(Clone)]
pub(crate) struct Pool<'a> {
    pub(crate) snap_idx: usize,
    pub(crate) tpl: &'a NodePoolTemplate,
    /// The DaemonSet pods a new node runs, by instance type.
    daemons: Rc<DaemonOverhead>,
    /// Per catalog index: its allocatable less its DaemonSets' requests, what pods may use.
    room: Rc<Vec<Resources>>,
    /// Catalog indices compatible with the NodePool and able to hold their DaemonSets.
    types: Rc<Vec<u32>>,
    /// Largest and smallest room of `types`: a new NodeClaim's while the limits leave
    /// every type (worked out once, not per NodeClaim).
    types_max: Resources,
    types_min: Resources,
    /// Largest capacity of `types`: limits that leave this much leave every type.
    types_capacity: Resources,
    /// Limits left: limit minus existing, in-flight and newly planned capacity.
    remaining: BTreeMap<String, i64>,
    /// (price, type, zone index, capacity type index) for every available offering of
    /// `types`, cheapest first: a NodeClaim's candidates are a filtered walk of it.
    price_order: Rc<Vec<PriceEntry>>,
    zones: Rc<Vec<String>>,
    capacity_types: Rc<Vec<String>>,
    /// Per catalog index: bit `zone × |capacity types| + capacity type` set for each available
    /// offering, so zone and capacity-type changes are judged with one AND. Empty when the
    /// combinations do not fit 64 bits (then offerings are checked by name).
    offer_masks: Rc<Vec<u64>>,
}

#[derive(Clone, Copy)]
enum Place {
    Node(usize),
    Claim(usize),
}

#[derive(Clone)]
struct Bin {
    place: Place,
    hostname: String,
    /// Shared with the forks of this scheduler until a placement changes them.
    reqs: Rc<Requirements>,
    requests: Resources,
    /// Largest allocatable among the bin's options (or the node's allocatable): a pod that
    /// does not fit here fits nowhere in the bin.
    cap_max: Resources,
    /// Smallest allocatable among the options: requests within it keep every option.
    cap_min: Resources,
    types: Vec<u32>,
    pods: Vec<usize>,
    ports: Vec<HostPort>,
    /// The claims its pods attach, by driver (checked against a node's attach limits).
    volumes: Volumes,
    /// A real node (not in flight): its labels are final, absent keys are absent.
    real: bool,
    /// Taken out of a simulation (a consolidation candidate).
    disabled: bool,
}

struct Joined {
    /// `None`: the bin's requirements are unchanged.
    reqs: Option<Requirements>,
    requests: Resources,
    /// `None`: the options are unchanged.
    types: Option<Vec<u32>>,
    cap_max: Resources,
    cap_min: Resources,
}

#[derive(Clone)]
pub(crate) struct Scheduler<'a> {
    snap: &'a ClusterSnapshot,
    pools: Vec<Pool<'a>>,
    pool_taints: Vec<&'a [Taint]>,
    bins: Vec<Bin>,
    existing: Vec<usize>,
    /// New NodeClaims by (pod count, creation order): Karpenter tries the emptiest first.
    order: BTreeSet<(usize, usize)>,
    topo: Topology,
    /// (snapshot node index, pod index) for each pod placed on an existing node.
    pub(crate) nominations: Vec<(usize, usize)>,
    /// Spread minimum per group for the pod being placed (computed once per attempt).
    spread_mins: Vec<i32>,
    /// Snapshot node index → its bin, for nodes that are places (schedulable).
    node_bin: Vec<Option<usize>>,
    turned_away: TurnedAway,
    /// Per entry of `existing`: its node is still within its NodePool's consolidateAfter
    /// (no pod event for that long yet).
    under_consolidate_after: Vec<bool>,
    /// Pods (sorted snapshot indices) a consolidation moves: they may not go to a node in
    /// `under_consolidate_after` (Karpenter's `IsUnderConsolidateAfter`).
    guarded: Vec<usize>,
}

/// The bins that turned away the last pod without topology constraints, and what it asked.
/// They turn away the next pod asking the same: for such a pod a bin only ever gets less
/// able to take it (fuller, narrower, disabled), so first fit may skip them (the pending
/// replicas of a Deployment, thousands of them in consolidation's simulations).
#[derive(Clone, Default)]
struct TurnedAway {
    /// The pod (snapshot index) whose ask is remembered, and its requirements, untolerated
    /// NodePool taints and PreferNoSchedule relaxation.
    asked: Option<(usize, Requirements, Vec<Option<String>>, bool)>,
    /// Existing nodes are tried in a fixed order, so those that turned it away are the
    /// ones before this position.
    existing_from: usize,
    /// New NodeClaims that turned it away (tried in an order that changes).
    bins: Vec<bool>,
    listed: Vec<usize>,
}

impl TurnedAway {
    /// Starts remembering for `ps` unless it asks what the remembered pod asked; `false`
    /// when `ps` has topology constraints (then nothing is remembered).
    fn begin(&mut self, snap: &ClusterSnapshot, ps: &PodState) -> bool {
        let pod = &snap.pods[ps.idx];
        let plain = ps.groups.is_empty() && ps.hostname_limits.is_empty();
        let same = plain
            && self.asked.as_ref().is_some_and(|(prev, reqs, taints, prefer)| {
                let p = &snap.pods[*prev];
                p.requests == pod.requests
                    && p.tolerations == pod.tolerations
                    && p.host_ports == pod.host_ports
                    && p.volumes == pod.volumes
                    && *reqs == ps.reqs
                    && *taints == ps.pool_taint
                    && *prefer == ps.relax.tolerate_prefer_no_schedule
            });
        if !same {
            for &b in &self.listed {
                self.bins[b] = false;
            }
            self.listed.clear();
            self.existing_from = 0;
            self.asked =
                plain.then(|| (ps.idx, ps.reqs.clone(), ps.pool_taint.clone(), ps.relax.tolerate_prefer_no_schedule));
        }
        plain
    }

    fn has(&self, b: usize) -> bool {
        self.bins.get(b).copied().unwrap_or(false)
    }

    fn add(&mut self, b: usize) {
        if self.bins.len() <= b {
            self.bins.resize(b + 1, false);
        }
        self.bins[b] = true;
        self.listed.push(b);
    }
}

/// Whether type `it`, with `room` for pods, holds `requests` and suits `reqs` (on `keys`,
/// and its offerings if `offerings`).
fn type_fits(
    it: &InstanceType,
    room: &Resources,
    reqs: &Requirements,
    keys: &[String],
    requests: &Resources,
    offerings: bool,
) -> bool {
    requests.fits_in(room)
        && keys.iter().all(|k| match (it.requirements.get(k), reqs.get(k)) {
            (Some(a), Some(b)) => a.agrees_with(b),
            _ => true,
        })
        && (!offerings || it.compatible_offerings(reqs).next().is_some())
}

/// Whether every requirement on `key` only forbids values (NotIn, DoesNotExist): then no
/// value in common means the label must be absent, not a conflict (Karpenter's rule).
fn only_forbidden(key: &str, sets: &[&Requirements], extra: &[Requirement]) -> bool {
    let forbids = |r: &Requirement| matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist);
    sets.iter().filter_map(|s| s.get(key)).all(forbids) && extra.iter().filter(|r| r.key == key).all(forbids)
}

/// Of `candidates` (the keys a pod or its topology constrain), those whose requirement
/// differs between two sets: only they can rule out an instance type.
fn changed_keys<'k>(old: &Requirements, new: &Requirements, candidates: impl Iterator<Item = &'k str>) -> Vec<String> {
    let mut keys: Vec<String> = candidates.filter(|k| old.get(k) != new.get(k)).map(str::to_string).collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The options that survive, with their largest and smallest room, in one pass.
fn filter_types(
    types: &[u32],
    cat: &[InstanceType],
    room: &[Resources],
    keep: impl Fn(u32, &InstanceType) -> bool,
) -> (Vec<u32>, Resources, Resources) {
    let mut out = Vec::with_capacity(types.len());
    let (mut max, mut min): (Resources, Option<Resources>) = (Resources::default(), None);
    for &t in types {
        let it = &cat[t as usize];
        if keep(t, it) {
            out.push(t);
            let a = &room[t as usize];
            max.max_with(a);
            match &mut min {
                None => min = Some(a.clone()),
                Some(m) => m.min_with(a),
            }
        }
    }
    (out, max, min.unwrap_or_default())
}

fn has_min_values(reqs: &Requirements) -> bool {
    reqs.iter().any(|r| r.min_values.is_some())
}

pub(crate) fn min_values_problem(types: &[u32], cat: &[InstanceType], reqs: &Requirements) -> Option<String> {
    for r in reqs.iter().filter(|r| r.min_values.is_some()) {
        let min = r.min_values.unwrap_or(0) as usize;
        let seen = values_offered(types, cat, r);
        if seen < min {
            return Some(format!("minValues {min} for {} cannot be met ({seen} values available)", r.key));
        }
    }
    None
}

/// How many of `r`'s values `types` offer between them.
fn values_offered(types: &[u32], cat: &[InstanceType], r: &Requirement) -> usize {
    let mut seen: BTreeSet<&str> = BTreeSet::new();
    for &t in types {
        if let Some(tr) = cat[t as usize].requirements.get(&r.key) {
            seen.extend(tr.values().iter().filter(|v| r.has(v)).map(String::as_str));
        }
    }
    seen.len()
}

/// `reqs` with each minValues `types` cannot meet lowered to what they offer (Karpenter's
/// BestEffort `MinValuesPolicy`).
fn relaxed_min_values(types: &[u32], cat: &[InstanceType], reqs: &Requirements) -> Requirements {
    reqs.iter()
        .map(|r| match r.min_values.map(|min| (min, values_offered(types, cat, r))) {
            Some((min, offered)) if offered < min as usize => r.clone().with_min_values(Some(offered as u32)),
            _ => r.clone(),
        })
        .collect()
}

fn max_room(types: &[u32], room: &[Resources]) -> Resources {
    let mut m = Resources::default();
    for &t in types {
        m.max_with(&room[t as usize]);
    }
    m
}

fn min_room(types: &[u32], cat: &[InstanceType], room: &[Resources]) -> Resources {
    filter_types(types, cat, room, |_, _| true).2
}

impl<'a> Scheduler<'a> {
    /// The scheduler over `snap`, and a placement state for every pod `movable` selects
    /// (pending pods to provision; for consolidation, every pod that could be rescheduled).
    pub(crate) fn new(snap: &'a ClusterSnapshot, movable: &dyn Fn(&Pod) -> bool) -> (Self, Vec<PodState>) {
        let mut order: Vec<usize> = (0..snap.nodepools.len()).collect();
        order.sort_by(|&a, &b| {
            snap.nodepools[b]
                .weight
                .cmp(&snap.nodepools[a].weight)
                .then(snap.nodepools[a].name.cmp(&snap.nodepools[b].name))
        });
        let pools: Vec<Pool> = order.into_iter().map(|i| Pool::new(snap, i)).collect();
        let pool_taints: Vec<&[Taint]> = pools.iter().map(|p| p.tpl.taints.as_slice()).collect();

        // Topology domains: what NodePools can launch and what nodes already have, for every
        // key a pod to place names (pending, or bound and moving in a consolidation).
        let mut universe: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let moving = snap.pods.iter().filter(|p| p.node_name.is_some() && movable(p));
        let keys: BTreeSet<String> = snap
            .pending_pods()
            .map(|(_, p)| p)
            .chain(moving)
            .flat_map(|p| {
                p.spread
                    .iter()
                    .map(|c| c.key.clone())
                    .chain(p.affinity.iter().chain(p.anti_affinity.iter()).map(|t| t.key.clone()))
                    .chain(
                        p.preferred_affinity.iter().chain(p.preferred_anti_affinity.iter()).map(|(_, t)| t.key.clone()),
                    )
            })
            .filter(|k| k != LABEL_HOSTNAME)
            .collect();
        for key in &keys {
            let set = universe.entry(key.clone()).or_default();
            for pool in &pools {
                let allowed = pool.tpl.requirements.get(key);
                for &t in pool.types.iter() {
                    if let Some(r) = pool.tpl.instance_types[t as usize].requirements.get(key) {
                        set.extend(r.values().iter().filter(|v| allowed.is_none_or(|a| a.has(v))).cloned());
                    } else if let Some(a) = allowed.filter(|a| a.operator() == Operator::In) {
                        set.extend(a.values().iter().cloned());
                    }
                }
            }
            set.extend(snap.nodes.iter().filter_map(|n| n.labels.get(key).cloned()));
        }
        let mut topo = Topology::new(universe);

        let mut pods: Vec<PodState> = snap
            .pods
            .iter()
            .enumerate()
            .filter(|(_, p)| movable(p))
            .map(|(i, p)| PodState::register(i, p, &mut topo))
            .collect();
        // Anti-affinity of pods already running repels pods they select (indexed by pod).
        let existing_owners: Vec<Vec<usize>> = snap
            .pods
            .iter()
            .map(|p| match p.node_name {
                Some(_) => p.anti_affinity.iter().map(|t| topo.inverse_group(p, t)).collect(),
                None => Vec::new(),
            })
            .collect();

        let mut s = Scheduler {
            snap,
            pools,
            pool_taints,
            bins: Vec::new(),
            existing: Vec::new(),
            order: BTreeSet::new(),
            topo,
            nominations: Vec::new(),
            spread_mins: Vec::new(),
            node_bin: vec![None; snap.nodes.len()],
            turned_away: TurnedAway::default(),
            under_consolidate_after: Vec::new(),
            guarded: Vec::new(),
        };
        s.add_existing_nodes(&existing_owners);
        for ps in &mut pods {
            ps.prepare(&snap.pods[ps.idx], &s.topo, snap, &s.pool_taints);
        }
        (s, pods)
    }

    /// NodePools whose requirements leave none of their instance types (Karpenter's
    /// `NoCompatibleInstanceTypes`), in the order they are tried.
    pub(crate) fn incompatible_nodepools(&self) -> Vec<String> {
        self.pools
            .iter()
            .filter(|p| p.tpl.unavailable.is_none() && p.tpl.replicas.is_none())
            .filter(|p| !p.tpl.instance_types.is_empty() && p.types.is_empty())
            .map(|p| p.tpl.name.clone())
            .collect()
    }

    fn add_existing_nodes(&mut self, owners: &[Vec<usize>]) {
        let snap = self.snap;
        let mut by_node: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (i, p) in snap.pods.iter().enumerate() {
            if let Some(n) = &p.node_name {
                by_node.entry(n.as_str()).or_default().push(i);
            }
        }
        // Initialized nodes first, then by name (Karpenter's sortExistingNodes): a pod goes
        // where it can run now before a node still coming up.
        let uninitialized = |n: &crate::model::Node| n.in_flight || n.claim.as_ref().is_some_and(|c| !c.initialized);
        let mut nodes: Vec<usize> = (0..snap.nodes.len()).collect();
        nodes.sort_by(|&a, &b| {
            let (a, b) = (&snap.nodes[a], &snap.nodes[b]);
            uninitialized(a).cmp(&uninitialized(b)).then(a.name.cmp(&b.name))
        });
        for n in nodes {
            let node = &snap.nodes[n];
            let bound = by_node.get(node.name.as_str()).cloned().unwrap_or_default();
            let hostname = node.labels.get(LABEL_HOSTNAME).cloned().unwrap_or_else(|| node.name.clone());
            let mut reqs = node.requirements.clone();
            if !reqs.has(LABEL_HOSTNAME) {
                reqs.add(Requirement::in_values(LABEL_HOSTNAME, [hostname.clone()]));
            }
            let bin = (!node.unschedulable).then_some(self.bins.len());
            for &p in &bound {
                let inverse = owners[p].as_slice();
                self.topo.record(
                    &snap.pods[p],
                    &Placement { reqs: &reqs, taints: &node.taints, bin },
                    snap,
                    inverse,
                    1,
                );
            }
            if node.unschedulable {
                continue;
            }
            let mut requests = Resources::default();
            let mut ports = Vec::new();
            let mut volumes = Volumes::new();
            for &p in &bound {
                requests.add(&snap.pods[p].requests);
                ports.extend(snap.pods[p].host_ports.iter().cloned());
                volume_usage::add(&mut volumes, &snap.pods[p].volumes);
            }
            if node.in_flight {
                // DaemonSet pods will land on it too.
                for ds in snap.daemonsets.iter().filter(|ds| daemons::runs_on(&ds.pod, &reqs, &node.taints)) {
                    requests.add(&ds.pod.requests);
                }
            }
            let b = self.bins.len();
            self.node_bin[n] = Some(b);
            self.bins.push(Bin {
                place: Place::Node(n),
                hostname,
                reqs: Rc::new(reqs),
                requests,
                cap_max: node.allocatable.clone(),
                cap_min: node.allocatable.clone(),
                types: Vec::new(),
                pods: Vec::new(),
                ports,
                volumes,
                real: !node.in_flight,
                disabled: false,
            });
            self.existing.push(b);
            self.under_consolidate_after.push(under_consolidate_after(snap, node));
        }
    }

    /// Consolidation's pods `moved` (sorted) may not land on a node under its consolidateAfter.
    pub(crate) fn guard(&mut self, moved: Vec<usize>) {
        self.guarded = moved;
    }

    /// Topology as it stands: before any placement, what is already running.
    pub(crate) fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Takes snapshot node `n` out of consideration (a disruption candidate).
    pub(crate) fn take_out(&mut self, n: usize) {
        if let Some(b) = self.node_bin[n] {
            self.bins[b].disabled = true;
        }
    }

    /// Uncounts pod `p`, running on node `n`, from every topology group: it is about to move.
    pub(crate) fn forget(&mut self, p: usize, n: usize, owned_inverse: &[usize]) {
        let node = &self.snap.nodes[n];
        let reqs = match self.node_bin[n] {
            Some(b) => Rc::clone(&self.bins[b].reqs),
            // As the pod was recorded (add_existing_nodes): hostname included.
            None => {
                let mut reqs = node.requirements.clone();
                if !reqs.has(LABEL_HOSTNAME) {
                    let hostname = node.labels.get(LABEL_HOSTNAME).cloned().unwrap_or_else(|| node.name.clone());
                    reqs.add(Requirement::in_values(LABEL_HOSTNAME, [hostname]));
                }
                Rc::new(reqs)
            }
        };
        let at = Placement { reqs: &reqs, taints: &node.taints, bin: self.node_bin[n] };
        self.topo.record(&self.snap.pods[p], &at, self.snap, owned_inverse, -1);
    }

    pub(crate) fn relax(&self, ps: &mut PodState) -> bool {
        let pod = &self.snap.pods[ps.idx];
        ps.relax(pod, &self.pool_taints, &self.topo, self.snap)
    }

    /// Whether pod `p` fits bin `b`, cheapest checks first; the new state of the bin if so.
    fn check(&self, b: usize, ps: &PodState) -> Option<Joined> {
        let bin = &self.bins[b];
        if bin.disabled {
            return None;
        }
        let pod = &self.snap.pods[ps.idx];
        if ps.hostname_limits.iter().any(|&(g, limit)| self.topo.bin_count(g, b) > limit) {
            return None;
        }
        if !bin.requests.sum_fits_in(&pod.requests, &bin.cap_max) {
            return None;
        }
        match bin.place {
            Place::Node(n) => {
                if untolerated(&self.snap.nodes[n].taints, &pod.tolerations, !ps.relax.tolerate_prefer_no_schedule)
                    .is_some()
                {
                    return None;
                }
                // Most pods attach nothing: no lookup for them.
                if !pod.volumes.is_empty()
                    && let Some(limits) = self.snap.volume_limits.get(&self.snap.nodes[n].name)
                    && volume_usage::exceeds(&bin.volumes, &pod.volumes, limits)
                {
                    return None;
                }
            }
            Place::Claim(pool) => {
                if ps.pool_taint[pool].is_some() {
                    return None;
                }
            }
        }
        if pod.host_ports.iter().any(|hp| bin.ports.iter().any(|o| o.conflicts(hp))) {
            return None;
        }
        let fits_labels = if bin.real {
            ps.reqs.iter().all(|r| match bin.reqs.get(&r.key) {
                Some(have) => have.overlaps(r),
                None => matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist),
            })
        } else {
            bin.reqs.is_compatible(&ps.reqs)
        };
        if !fits_labels {
            return None;
        }
        let mut topo_reqs: Vec<Requirement> = Vec::new();
        for &g in &ps.groups {
            let key = self.topo.key(g);
            let pod_dom = ps.reqs.get(key);
            if let Some(d) = bin
                .reqs
                .get(key)
                .filter(|r| r.operator() == Operator::In && r.values().len() == 1)
                .and_then(Requirement::any)
            {
                // The bin's domain is settled: a yes/no, and no new requirement.
                if !self.topo.admits(g, pod, self.snap, d, pod_dom, self.spread_mins[g]) {
                    return None;
                }
                continue;
            }
            let owned;
            let node_dom = match (bin.reqs.get(key), pod_dom) {
                (Some(a), Some(b)) => {
                    owned = a.intersection(b);
                    Some(&owned)
                }
                (a, b) => a.or(b),
            };
            if bin.real && bin.reqs.get(key).is_none() {
                return None;
            }
            let allowed = self.topo.allowed(g, pod, self.snap, pod_dom, node_dom, ps.filter_reqs.get(key));
            if allowed.is_empty() || node_dom.is_some_and(|n| !n.overlaps(&allowed)) {
                return None;
            }
            topo_reqs.push(allowed);
        }
        let requests = bin.requests.plus(&pod.requests);
        // A running node's labels are single values the pod already overlaps: joining would
        // only copy them (the hot path of consolidation's re-placement).
        if bin.real
            && topo_reqs.is_empty()
            && ps
                .reqs
                .iter()
                .all(|r| bin.reqs.get(&r.key).is_some_and(|h| h.operator() == Operator::In && h.values().len() == 1))
        {
            return Some(Joined {
                reqs: None,
                requests,
                types: None,
                cap_max: bin.cap_max.clone(),
                cap_min: bin.cap_min.clone(),
            });
        }
        // A pod whose requirements the bin already meets (every pending replica of a
        // Deployment after the first) leaves them as they are: no copy.
        let unchanged =
            topo_reqs.is_empty() && ps.reqs.iter().all(|r| bin.reqs.get(&r.key).is_some_and(|h| h.absorbs(r)));
        let merged = (!unchanged).then(|| {
            let mut reqs = (*bin.reqs).clone();
            reqs.add_all(&ps.reqs);
            for r in &topo_reqs {
                reqs.add(r.clone());
            }
            reqs
        });
        let reqs: &Requirements = merged.as_ref().unwrap_or(&bin.reqs);
        if reqs.iter().any(|r| r.is_empty() && !only_forbidden(&r.key, &[&bin.reqs, &ps.reqs], &topo_reqs)) {
            return None;
        }
        match bin.place {
            Place::Node(_) => Some(Joined {
                reqs: merged,
                requests,
                types: None,
                cap_max: bin.cap_max.clone(),
                cap_min: bin.cap_min.clone(),
            }),
            Place::Claim(pool) => {
                let cat = &self.pools[pool].tpl.instance_types;
                let candidates =
                    ps.reqs.iter().map(|r| r.key.as_str()).chain(ps.groups.iter().map(|&g| self.topo.key(g)));
                let keys = changed_keys(&bin.reqs, reqs, candidates);
                let pl = &self.pools[pool];
                // A host port some types' DaemonSets take rules those types out.
                let ports_vary = !pod.host_ports.is_empty() && pl.daemons.has_ports();
                let port_free = |t: u32| !ports_vary || !pl.daemons.takes_port(t, &pod.host_ports);
                if keys.is_empty() && !ports_vary && requests.fits_in(&bin.cap_min) {
                    return Some(Joined {
                        reqs: merged,
                        requests,
                        types: None,
                        cap_max: bin.cap_max.clone(),
                        cap_min: bin.cap_min.clone(),
                    });
                }
                let zone_or_ct_only = keys.iter().all(|k| k == LABEL_ZONE || k == LABEL_CAPACITY_TYPE);
                let room = &pl.room;
                let (types, cap_max, cap_min) = if keys.is_empty() {
                    // Only the requests grew: a resource comparison per option.
                    filter_types(&bin.types, cat, room, |t, _| requests.fits_in(&room[t as usize]) && port_free(t))
                } else if let Some(allowed) = pl.offering_mask(reqs).filter(|_| zone_or_ct_only) {
                    // Only zone or capacity type narrowed: one AND per option.
                    filter_types(&bin.types, cat, room, |t, _| {
                        pl.offer_masks[t as usize] & allowed != 0 && requests.fits_in(&room[t as usize]) && port_free(t)
                    })
                } else {
                    let offerings = keys.iter().any(|k| k == LABEL_ZONE || k == LABEL_CAPACITY_TYPE);
                    filter_types(&bin.types, cat, room, |t, it| {
                        type_fits(it, &room[t as usize], reqs, &keys, &requests, offerings) && port_free(t)
                    })
                };
                let strict = !self.snap.min_values_best_effort;
                if types.is_empty()
                    || (strict && has_min_values(reqs) && min_values_problem(&types, cat, reqs).is_some())
                {
                    return None;
                }
                Some(Joined { reqs: merged, requests, types: Some(types), cap_max, cap_min })
            }
        }
    }

    fn commit(&mut self, b: usize, ps: &PodState, j: Joined) {
        let pod_idx = ps.idx;
        let pod = &self.snap.pods[pod_idx];
        let bin = &mut self.bins[b];
        let before = bin.pods.len();
        if let Some(reqs) = j.reqs {
            bin.reqs = Rc::new(reqs);
        }
        bin.requests = j.requests;
        bin.cap_max = j.cap_max;
        bin.cap_min = j.cap_min;
        if let Some(types) = j.types {
            bin.types = types;
        }
        if matches!(bin.place, Place::Claim(_)) {
            self.order.remove(&(before, b));
            self.order.insert((before + 1, b));
        }
        bin.pods.push(pod_idx);
        bin.ports.extend(pod.host_ports.iter().cloned());
        volume_usage::add(&mut bin.volumes, &pod.volumes);
        if let Place::Node(n) = bin.place {
            self.nominations.push((n, pod_idx));
        }
        let snap = self.snap;
        let bin = &self.bins[b];
        let taints = match bin.place {
            Place::Node(n) => &snap.nodes[n].taints,
            Place::Claim(p) => &self.pools[p].tpl.taints,
        };
        let at = Placement { reqs: &bin.reqs, taints, bin: Some(b) };
        self.topo.record(&snap.pods[pod_idx], &at, snap, &ps.owned_inverse, 1);
    }

    pub(crate) fn try_place(&mut self, ps: &PodState) -> Result<(), String> {
        if self.snap.pods[ps.idx].resource_claims {
            return Err(
                "it uses Dynamic Resource Allocation (resource claims), which Tenon does not provision for".into()
            );
        }
        self.spread_mins.resize(self.topo.groups.len(), 0);
        for &g in &ps.groups {
            self.spread_mins[g] = self.topo.spread_min(g, ps.filter_reqs.get(self.topo.key(g)));
        }
        let mut remember = self.turned_away.begin(self.snap, ps);
        let guarded = self.guarded.binary_search(&ps.idx).is_ok();
        for i in self.turned_away.existing_from..self.existing.len() {
            let b = self.existing[i];
            if guarded && self.under_consolidate_after[i] {
                // Skipped for this pod only: what follows is no longer what its ask meets.
                remember = false;
                continue;
            }
            match self.check(b, ps) {
                Some(j) => {
                    self.commit(b, ps, j);
                    return Ok(());
                }
                None if remember => self.turned_away.existing_from = i + 1,
                None => {}
            }
        }
        let mut found = None;
        let mut turned = Vec::new();
        for &(_, b) in &self.order {
            if self.turned_away.has(b) {
                continue;
            }
            match self.check(b, ps) {
                Some(j) => {
                    found = Some((b, j));
                    break;
                }
                None if remember => turned.push(b),
                None => {}
            }
        }
        for b in turned {
            self.turned_away.add(b);
        }
        if let Some((b, j)) = found {
            self.commit(b, ps, j);
            return Ok(());
        }
        let mut reasons = Vec::new();
        for pool in 0..self.pools.len() {
            if let Some(why) = &self.pools[pool].tpl.unavailable {
                reasons.push(format!("nodepool {}: {why}", self.pools[pool].tpl.name));
                continue;
            }
            if self.pools[pool].tpl.replicas.is_some() {
                reasons.push(format!(
                    "nodepool {}: static (spec.replicas): it keeps a fixed number of nodes",
                    self.pools[pool].tpl.name
                ));
                continue;
            }
            match self.open(pool, ps) {
                Ok(()) => return Ok(()),
                Err(r) => reasons.push(format!("nodepool {}: {r}", self.pools[pool].tpl.name)),
            }
        }
        if reasons.is_empty() {
            return Err("no NodePool exists to launch capacity".to_string());
        }
        Err(format!("incompatible with every NodePool: {}", reasons.join("; ")))
    }

    /// Opens a new NodeClaim from NodePool `pool` for pod `p`, or says why it cannot.
    fn open(&mut self, pool: usize, ps: &PodState) -> Result<(), String> {
        if let Some(t) = &ps.pool_taint[pool] {
            return Err(format!("did not tolerate taint {t}"));
        }
        let pl = &self.pools[pool];
        if let Err(c) = pl.tpl.requirements.compatible(&ps.reqs) {
            return Err(c.to_string());
        }
        if pl.types.is_empty() {
            return Err(
                "no instance type of its NodeClass satisfies the NodePool's requirements and DaemonSet overhead".into(),
            );
        }
        let types = pl.within_limits();
        if types.is_empty() {
            return Err(pl.limit_message());
        }
        // The NodePool's own minValues, over what it can launch at all (BestEffort lowers
        // them when the NodeClaim is made).
        if !self.snap.min_values_best_effort
            && let Some(m) = min_values_problem(&types, &pl.tpl.instance_types, &pl.tpl.requirements)
        {
            return Err(m);
        }
        let hostname = format!("hostname-placeholder-{:04}", self.bins.len());
        let mut reqs = pl.tpl.requirements.clone();
        reqs.add(Requirement::in_values(LABEL_HOSTNAME, [hostname.clone()]));
        let (cap_max, cap_min) = if types.len() == pl.types.len() {
            (pl.types_max.clone(), pl.types_min.clone())
        } else {
            (max_room(&types, &pl.room), min_room(&types, &pl.tpl.instance_types, &pl.room))
        };
        let b = self.bins.len();
        self.bins.push(Bin {
            place: Place::Claim(pool),
            hostname,
            reqs: Rc::new(reqs),
            requests: Resources::default(),
            cap_max,
            cap_min,
            types,
            pods: Vec::new(),
            ports: Vec::new(),
            volumes: Volumes::new(),
            real: false,
            disabled: false,
        });
        match self.check(b, ps) {
            Some(j) => {
                self.order.insert((0, b));
                let types = j.types.as_deref().unwrap_or(&self.bins[b].types);
                self.pools[pool].subtract_max(types);
                self.commit(b, ps, j);
                Ok(())
            }
            None => {
                let reason = self.explain(b, ps);
                self.bins.pop();
                Err(reason)
            }
        }
    }

    /// Why pod `p` does not fit the fresh NodeClaim `b`.
    fn explain(&self, b: usize, ps: &PodState) -> String {
        let bin = &self.bins[b];
        let pod = &self.snap.pods[ps.idx];
        let Place::Claim(pool) = bin.place else { return "does not fit".into() };
        let cat = &self.pools[pool].tpl.instance_types;
        let room = &self.pools[pool].room;
        if pod.host_ports.iter().any(|hp| bin.ports.iter().any(|o| o.conflicts(hp))) {
            return "host port conflict".into();
        }
        let daemons = &self.pools[pool].daemons;
        if !pod.host_ports.is_empty()
            && !bin.types.is_empty()
            && bin.types.iter().all(|&t| daemons.takes_port(t, &pod.host_ports))
        {
            return "host port conflict with a DaemonSet's pod on every instance type".into();
        }
        for &g in &ps.groups {
            let key = self.topo.key(g);
            let allowed =
                self.topo.allowed(g, pod, self.snap, ps.reqs.get(key), bin.reqs.get(key), ps.filter_reqs.get(key));
            if allowed.is_empty() {
                return format!("topology constraint on {key} cannot be satisfied");
            }
        }
        let mut reqs = (*bin.reqs).clone();
        reqs.add_all(&ps.reqs);
        if let Some(r) = reqs.iter().find(|r| r.is_empty() && !only_forbidden(&r.key, &[&bin.reqs, &ps.reqs], &[])) {
            return format!("requirements on {} cannot all be met", r.key);
        }
        let requests = bin.requests.plus(&pod.requests);
        let keys: Vec<String> = reqs.iter().map(|r| r.key.clone()).collect();
        let by_reqs: Vec<u32> = bin
            .types
            .iter()
            .copied()
            .filter(|&t| type_fits(&cat[t as usize], &room[t as usize], &reqs, &keys, &Resources::default(), true))
            .collect();
        if by_reqs.is_empty() {
            return format!("no instance type satisfies {}", ps.reqs);
        }
        let by_size: Vec<u32> = by_reqs.iter().copied().filter(|&t| requests.fits_in(&room[t as usize])).collect();
        if by_size.is_empty() {
            let largest = max_room(&by_reqs, room);
            let (name, want, have) = requests.first_excess(&largest).unwrap_or_default();
            return format!(
                "no instance type has room for the pod and DaemonSet overhead ({name}: needs {}, largest compatible allocatable {})",
                format_amount(&name, want),
                format_amount(&name, have)
            );
        }
        if let Some(m) = min_values_problem(&by_size, cat, &reqs) {
            return m;
        }
        "no instance type satisfies every constraint at once".into()
    }

    /// How many NodeClaims `finish` would create, and whether that count is exact without
    /// it: a NodeClaim is dropped there only when the cut of its options breaks a minValues
    /// requirement, so with none the count is the claims that hold a pod.
    pub(crate) fn claims_without_finish(&self) -> Option<usize> {
        let mut count = 0;
        for bin in self.bins.iter().filter(|b| matches!(b.place, Place::Claim(_)) && !b.pods.is_empty()) {
            if has_min_values(&bin.reqs) && !self.snap.min_values_best_effort {
                return None;
            }
            count += 1;
        }
        Some(count)
    }

    /// The NodeClaims to create, each with its options ranked by `scorer` and cut to the
    /// snapshot's limit; a NodeClaim whose minValues the cut breaks is not created and its
    /// pods are unschedulable (Karpenter's `TruncateInstanceTypes`). Also whether the cut
    /// dropped any option (only then can the ranking change which NodeClaims there are).
    pub(crate) fn finish(&self, scorer: &dyn Scorer) -> (Vec<NewNodeClaim>, Vec<Unschedulable>, bool) {
        let limit = self.snap.max_instance_types.unwrap_or(MAX_INSTANCE_TYPES);
        let mut out = Vec::new();
        let mut unschedulable = Vec::new();
        let mut cut_any = false;
        for bin in &self.bins {
            let Place::Claim(pool) = bin.place else { continue };
            if bin.pods.is_empty() {
                continue;
            }
            let pl = &self.pools[pool];
            let cat = &pl.tpl.instance_types;
            let mut member = vec![false; cat.len()];
            for &t in &bin.types {
                member[t as usize] = true;
            }
            let zone_ok: Vec<bool> =
                pl.zones.iter().map(|z| bin.reqs.get(LABEL_ZONE).is_none_or(|r| r.has(z))).collect();
            let ct_ok: Vec<bool> =
                pl.capacity_types.iter().map(|c| bin.reqs.get(LABEL_CAPACITY_TYPE).is_none_or(|r| r.has(c))).collect();
            let compatible: Vec<(u32, u32)> = pl
                .price_order
                .iter()
                .filter(|&&(_, t, z, c, _)| member[t as usize] && zone_ok[z as usize] && ct_ok[c as usize])
                .map(|&(_, t, _, _, o)| (t, u32::from(o)))
                .collect();
            // Its pods, and the least any of its types' DaemonSets ask (Karpenter's
            // `addDaemonRequests`).
            let requests = bin.requests.plus(&pl.daemons.min_requests(&bin.types));
            let options = RankedOptions::of(self.snap, pl.snap_idx, &requests, bin.pods.len(), &compatible, scorer);
            cut_any |= options.cut;
            let mut requirements = (*bin.reqs).clone();
            let mut min_values_relaxed = false;
            if let Some(m) = min_values_problem(&options.types, cat, &bin.reqs) {
                if !self.snap.min_values_best_effort {
                    let reason = format!("{m} among the {limit} cheapest instance types a NodeClaim may carry");
                    unschedulable.extend(bin.pods.iter().map(|&pod| Unschedulable { pod, reason: reason.clone() }));
                    continue;
                }
                requirements = relaxed_min_values(&options.types, cat, &bin.reqs);
                min_values_relaxed = true;
            }
            out.push(NewNodeClaim {
                nodepool: pl.snap_idx,
                nodepool_name: pl.tpl.name.clone(),
                hostname: bin.hostname.clone(),
                requirements,
                instance_types: options.types,
                offerings: options.offerings,
                requests,
                pods: bin.pods.clone(),
                min_values_relaxed,
            });
        }
        (out, unschedulable, cut_any)
    }
}

/// A new NodeClaim's options as a scorer ranks them: its instance types best first, cut to
/// the snapshot's limit, and their offerings in ranked order.
pub(crate) struct RankedOptions {
    pub types: Vec<u32>,
    pub offerings: Vec<(u32, u32)>,
    /// The cut dropped some type.
    pub cut: bool,
}

impl RankedOptions {
    /// Ranks `compatible` (every available offering of NodePool `pool` the NodeClaim is
    /// compatible with, in the pool's price order) for a NodeClaim of `pods` pods
    /// requesting `requests`.
    pub(crate) fn of(
        snap: &ClusterSnapshot,
        pool: usize,
        requests: &Resources,
        pods: usize,
        compatible: &[(u32, u32)],
        scorer: &dyn Scorer,
    ) -> RankedOptions {
        let limit = snap.max_instance_types.unwrap_or(MAX_INSTANCE_TYPES);
        let tpl = &snap.nodepools[pool];
        let cat = &tpl.instance_types;
        let input = ScoringInput {
            nodepool: &tpl.name,
            now: snap.now,
            requests,
            pod_count: pods,
            candidates: compatible
                .iter()
                .map(|&(t, o)| {
                    let it = &cat[t as usize];
                    Candidate { instance_type: it, offering: &it.offerings[o as usize] }
                })
                .collect(),
        };
        crate::work::count(|w| w.scorer_calls += 1);
        let ranking = normalise_ranking(&scorer.rank(&input), input.candidates.len());
        let mut seen = vec![false; cat.len()];
        let mut types: Vec<u32> = Vec::new();
        for &i in &ranking {
            let t = compatible[i].0;
            if !seen[t as usize] {
                seen[t as usize] = true;
                types.push(t);
            }
        }
        let cut = types.len() > limit;
        types.truncate(limit);
        let mut kept = vec![false; cat.len()];
        for &t in &types {
            kept[t as usize] = true;
        }
        let offerings = ranking.iter().map(|&i| compatible[i]).filter(|&(t, _)| kept[t as usize]).collect();
        RankedOptions { types, offerings, cut }
    }
}

impl<'a> Pool<'a> {
    fn new(snap: &'a ClusterSnapshot, i: usize) -> Self {
        let tpl = &snap.nodepools[i];
        let daemons = DaemonOverhead::of(tpl, &snap.daemonsets);
        let room: Vec<Resources> = (0..tpl.instance_types.len() as u32)
            .map(|t| {
                let mut r = tpl.instance_types[t as usize].allocatable().clone();
                r.sub(daemons.requests(t));
                r
            })
            .collect();
        let keys: Vec<String> = tpl.requirements.iter().map(|r| r.key.clone()).collect();
        let one_pod = Resources::new(0, 0, 1);
        let types: Vec<u32> = (0..tpl.instance_types.len() as u32)
            .filter(|&t| {
                type_fits(&tpl.instance_types[t as usize], &room[t as usize], &tpl.requirements, &keys, &one_pod, true)
            })
            .collect();
        // Usage of existing and in-flight nodes of this NodePool counts against its limits.
        let mut remaining = tpl.limits.clone();
        for node in snap.nodes.iter().filter(|n| n.nodepool.as_deref() == Some(tpl.name.as_str())) {
            for (res, left) in remaining.iter_mut() {
                *left -= if res == NODES { 1 } else { node.capacity.get(res) };
            }
        }
        let mut zones: Vec<String> = Vec::new();
        let mut cts: Vec<String> = Vec::new();
        for &t in &types {
            for o in &tpl.instance_types[t as usize].offerings {
                if !zones.contains(&o.zone) {
                    zones.push(o.zone.clone());
                }
                if !cts.contains(&o.capacity_type) {
                    cts.push(o.capacity_type.clone());
                }
            }
        }
        zones.sort();
        cts.sort();
        let mut price_order = Vec::new();
        let bitmaps = zones.len() * cts.len() <= 64;
        let mut offer_masks = if bitmaps { vec![0u64; tpl.instance_types.len()] } else { Vec::new() };
        for &t in &types {
            let it = &tpl.instance_types[t as usize];
            for (oi, o) in it.offerings.iter().enumerate() {
                if !o.available {
                    continue;
                }
                let z = zones.iter().position(|x| *x == o.zone).unwrap_or(0);
                let c = cts.iter().position(|x| *x == o.capacity_type).unwrap_or(0);
                if bitmaps {
                    offer_masks[t as usize] |= 1 << (z * cts.len() + c);
                }
                let allowed = tpl.requirements.get(LABEL_ZONE).is_none_or(|r| r.has(&o.zone))
                    && tpl.requirements.get(LABEL_CAPACITY_TYPE).is_none_or(|r| r.has(&o.capacity_type));
                if allowed {
                    price_order.push((o.price, t, z as u8, c as u8, oi as u16));
                }
            }
        }
        price_order.sort_by(|a, b| {
            a.0.total_cmp(&b.0)
                .then_with(|| tpl.instance_types[a.1 as usize].name.cmp(&tpl.instance_types[b.1 as usize].name))
                .then(a.2.cmp(&b.2))
                .then(a.3.cmp(&b.3))
        });
        let (types_max, types_min) = (max_room(&types, &room), min_room(&types, &tpl.instance_types, &room));
        let mut types_capacity = Resources::default();
        for &t in &types {
            types_capacity.max_with(&tpl.instance_types[t as usize].capacity);
        }
        Pool {
            snap_idx: i,
            tpl,
            daemons: Rc::new(daemons),
            room: Rc::new(room),
            types: Rc::new(types),
            types_max,
            types_min,
            types_capacity,
            remaining,
            price_order: Rc::new(price_order),
            zones: Rc::new(zones),
            capacity_types: Rc::new(cts),
            offer_masks: Rc::new(offer_masks),
        }
    }

    /// The (zone, capacity type) combinations `reqs` allow, as an offering bit mask.
    fn offering_mask(&self, reqs: &Requirements) -> Option<u64> {
        if self.offer_masks.is_empty() {
            return None;
        }
        let (zone, ct) = (reqs.get(LABEL_ZONE), reqs.get(LABEL_CAPACITY_TYPE));
        let mut mask = 0u64;
        for (zi, z) in self.zones.iter().enumerate() {
            if zone.is_none_or(|r| r.has(z)) {
                for (ci, c) in self.capacity_types.iter().enumerate() {
                    if ct.is_none_or(|r| r.has(c)) {
                        mask |= 1 << (zi * self.capacity_types.len() + ci);
                    }
                }
            }
        }
        Some(mask)
    }

    /// Types whose capacity fits what the limits leave (and a node slot, if `nodes` is limited).
    fn within_limits(&self) -> Vec<u32> {
        let fits = |cap: &Resources| {
            self.remaining.iter().all(|(res, left)| if res == NODES { *left >= 1 } else { cap.get(res) <= *left })
        };
        if fits(&self.types_capacity) {
            return self.types.to_vec();
        }
        self.types.iter().copied().filter(|&t| fits(&self.tpl.instance_types[t as usize].capacity)).collect()
    }

    fn limit_message(&self) -> String {
        let smallest = |res: &str| {
            self.types.iter().map(|&t| self.tpl.instance_types[t as usize].capacity.get(res)).min().unwrap_or(0)
        };
        let hit =
            self.remaining.iter().find(|(res, left)| if *res == NODES { **left < 1 } else { smallest(res) > **left });
        match hit {
            Some((res, _)) => format!("limit {res}={} reached", format_amount(res, self.tpl.limits[res])),
            None => "limits reached".into(),
        }
    }

    /// Karpenter's conservative accounting: a planned NodeClaim uses the largest capacity it may launch with.
    fn subtract_max(&mut self, types: &[u32]) {
        for (res, left) in self.remaining.iter_mut() {
            *left -= if res == NODES {
                1
            } else {
                types.iter().map(|&t| self.tpl.instance_types[t as usize].capacity.get(res)).max().unwrap_or(0)
            };
        }
    }
}

/// Karpenter's `IsUnderConsolidateAfter`: an initialized node whose NodePool has a non-zero
/// consolidateAfter that has not passed since its last pod event (or its initialization).
fn under_consolidate_after(snap: &ClusterSnapshot, node: &crate::model::Node) -> bool {
    let Some(claim) = node.claim.as_ref().filter(|c| c.initialized) else { return false };
    let pool = node.nodepool.as_ref().and_then(|p| snap.nodepools.iter().find(|t| &t.name == p));
    let Some(after) = pool.and_then(|p| p.disruption.consolidate_after).filter(|&a| a > 0) else { return false };
    snap.now < claim.last_pod_event.unwrap_or(claim.created) + after
}
