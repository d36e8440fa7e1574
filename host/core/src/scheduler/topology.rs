//! Topology groups: pod counts per domain for spread constraints and pod (anti-)affinity,
//! with Karpenter's rules for which domains a pod may take next.
//!
//! Lookups are shaped so that a finite node domain (a hostname, a chosen zone) costs a map
//! lookup, not a walk over every domain: that walk is what makes Karpenter's scheduler
//! quadratic on hostname anti-affinity.

use crate::model::{AffinityTerm, ClusterSnapshot, Pod, SpreadConstraint};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::selector::LabelSelector;
use crate::taints::{Toleration, untolerated};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use tenon_api::wellknown::LABEL_HOSTNAME;

/// Where a pod is (or was) placed, as topology counting needs it.
pub(crate) struct Placement<'p> {
    pub(crate) reqs: &'p Requirements,
    pub(crate) taints: &'p [crate::taints::Taint],
    /// The scheduler bin, for per-bin hostname counts.
    pub(crate) bin: Option<usize>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Spread {
        max_skew: i32,
        min_domains: Option<i32>,
    },
    Affinity,
    AntiAffinity,
    /// Domains of pods that *own* an anti-affinity term; applies to pods the term selects.
    InverseAntiAffinity,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Namespaces {
    all: bool,
    names: BTreeSet<String>,
    selector: Option<LabelSelector>,
}

impl Namespaces {
    fn of_term(term: &AffinityTerm, owner_ns: &str) -> Self {
        let mut names: BTreeSet<String> = term.namespaces.iter().cloned().collect();
        let selector = term.namespace_selector.clone().filter(|s| !s.expressions.is_empty());
        let all = term.all_namespaces || term.namespace_selector.as_ref().is_some_and(|s| s.expressions.is_empty());
        if names.is_empty() && term.namespace_selector.is_none() {
            names.insert(owner_ns.to_string());
        }
        Namespaces { all, names, selector }
    }

    fn only(ns: &str) -> Self {
        Namespaces { all: false, names: [ns.to_string()].into(), selector: None }
    }

    fn contains(&self, ns: &str, snapshot: &ClusterSnapshot) -> bool {
        self.all
            || self.names.contains(ns)
            || self
                .selector
                .as_ref()
                .is_some_and(|s| snapshot.namespaces.get(ns).is_some_and(|labels| s.matches(labels)))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct GroupKey {
    kind: Kind,
    key: String,
    selector: LabelSelector,
    namespaces: Namespaces,
    /// Spread with nodeAffinityPolicy Honor: ORed node requirement terms a node must match to count.
    node_filter: Option<Vec<Requirements>>,
    /// Spread with nodeTaintsPolicy Honor: tolerations a node's taints must satisfy to count.
    taint_filter: Option<Vec<TolerationKey>>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TolerationKey(Toleration);

#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub(crate) k: GroupKey,
    /// Pod count per domain; absent means zero.
    counts: BTreeMap<String, i32>,
}

#[derive(Clone)]
pub(crate) struct Topology {
    pub(crate) groups: Vec<Group>,
    /// For hostname-keyed groups: pod count per scheduler bin, so a bin is judged by an array
    /// lookup instead of a hostname string search.
    by_bin: Vec<Vec<i32>>,
    index: HashMap<GroupKey, usize>,
    /// Known domains per topology key (not hostnames: every node is its own).
    universe: BTreeMap<String, BTreeSet<String>>,
}

/// A pod's view of a group: whether the pod is counted by it.
impl Group {
    fn selects(&self, pod: &Pod, snapshot: &ClusterSnapshot) -> bool {
        self.k.namespaces.contains(&pod.namespace, snapshot) && self.k.selector.matches(&pod.labels)
    }

    /// Whether a pod placed on a node with `reqs`/`taints` is counted (spread filters).
    fn counts_node(&self, reqs: &Requirements, taints: &[crate::taints::Taint]) -> bool {
        if let Some(filter) = &self.k.node_filter
            && !filter.iter().any(|t| reqs.is_compatible(t))
        {
            return false;
        }
        if let Some(tols) = &self.k.taint_filter {
            let tols: Vec<Toleration> = tols.iter().map(|t| t.0.clone()).collect();
            if untolerated(taints, &tols, false).is_some() {
                return false;
            }
        }
        true
    }

    fn count(&self, domain: &str) -> i32 {
        self.counts.get(domain).copied().unwrap_or(0)
    }
}

/// The node filter of a spread constraint with nodeAffinityPolicy Honor: the pod's node
/// selector and required affinity. Its volumes' zones narrow where it goes, not which
/// domains the spread counts (kube-scheduler's filter reads only the pod's own terms).
fn node_filter(pod: &Pod) -> Vec<Requirements> {
    let base = pod.node_selector.clone();
    if pod.required_node_affinity.is_empty() {
        vec![base]
    } else {
        pod.required_node_affinity
            .iter()
            .map(|t| {
                let mut r = base.clone();
                r.add_all(t);
                r
            })
            .collect()
    }
}

impl Topology {
    pub(crate) fn new(universe: BTreeMap<String, BTreeSet<String>>) -> Self {
        Topology { groups: Vec::new(), by_bin: Vec::new(), index: HashMap::new(), universe }
    }

    fn intern(&mut self, k: GroupKey) -> usize {
        if let Some(&i) = self.index.get(&k) {
            return i;
        }
        let i = self.groups.len();
        self.index.insert(k.clone(), i);
        self.groups.push(Group { k, counts: BTreeMap::new() });
        self.by_bin.push(Vec::new());
        i
    }

    pub(crate) fn spread_group(&mut self, pod: &Pod, c: &SpreadConstraint) -> usize {
        self.intern(GroupKey {
            kind: Kind::Spread { max_skew: c.max_skew, min_domains: c.min_domains },
            key: c.key.clone(),
            selector: c.selector.clone(),
            namespaces: Namespaces::only(&pod.namespace),
            node_filter: c.honor_node_affinity.then(|| node_filter(pod)),
            taint_filter: c.honor_node_taints.then(|| pod.tolerations.iter().cloned().map(TolerationKey).collect()),
        })
    }

    pub(crate) fn affinity_group(&mut self, pod: &Pod, term: &AffinityTerm, anti: bool) -> usize {
        self.intern(GroupKey {
            kind: if anti { Kind::AntiAffinity } else { Kind::Affinity },
            key: term.key.clone(),
            selector: term.selector.clone(),
            namespaces: Namespaces::of_term(term, &pod.namespace),
            node_filter: None,
            taint_filter: None,
        })
    }

    pub(crate) fn inverse_group(&mut self, owner: &Pod, term: &AffinityTerm) -> usize {
        self.intern(GroupKey {
            kind: Kind::InverseAntiAffinity,
            key: term.key.clone(),
            selector: term.selector.clone(),
            namespaces: Namespaces::of_term(term, &owner.namespace),
            node_filter: None,
            taint_filter: None,
        })
    }

    /// Inverse anti-affinity groups whose term selects `pod`.
    pub(crate) fn inverse_groups_selecting(&self, pod: &Pod, snapshot: &ClusterSnapshot) -> Vec<usize> {
        (0..self.groups.len())
            .filter(|&g| self.groups[g].k.kind == Kind::InverseAntiAffinity && self.groups[g].selects(pod, snapshot))
            .collect()
    }

    /// For a hostname-keyed group, the most pods of the group a bin may already hold for
    /// `pod` to join it; `None` when the group is not hostname-keyed or not monotonic.
    pub(crate) fn hostname_limit(&self, g: usize, pod: &Pod, snapshot: &ClusterSnapshot) -> Option<i32> {
        let group = &self.groups[g];
        if group.k.key != LABEL_HOSTNAME {
            return None;
        }
        match group.k.kind {
            // The minimum over hostnames is always 0: a new node is an empty domain.
            Kind::Spread { max_skew, .. } => Some(max_skew - i32::from(group.selects(pod, snapshot))),
            Kind::AntiAffinity | Kind::InverseAntiAffinity => Some(0),
            Kind::Affinity => None,
        }
    }

    pub(crate) fn bin_count(&self, g: usize, bin: usize) -> i32 {
        self.by_bin[g].get(bin).copied().unwrap_or(0)
    }

    pub(crate) fn key(&self, g: usize) -> &str {
        &self.groups[g].k.key
    }

    /// The global minimum a spread group compares against, over the domains `filter_domains`
    /// (the pod's own node terms) allow.
    pub(crate) fn spread_min(&self, g: usize, filter_domains: Option<&Requirement>) -> i32 {
        let group = &self.groups[g];
        let Kind::Spread { min_domains, .. } = group.k.kind else { return 0 };
        if group.k.key == LABEL_HOSTNAME {
            return 0;
        }
        let mut n = 0;
        let mut min = i32::MAX;
        for d in
            self.universe.get(&group.k.key).into_iter().flatten().filter(|d| filter_domains.is_none_or(|r| r.has(d)))
        {
            n += 1;
            min = min.min(group.count(d));
        }
        if n == 0 || min_domains.is_some_and(|m| n < m) { 0 } else { min }
    }

    /// Whether a node whose domain for the group's key is already `domain` admits `pod`:
    /// the common case, answered without building a requirement. `min` is [`Self::spread_min`].
    pub(crate) fn admits(
        &self,
        g: usize,
        pod: &Pod,
        snapshot: &ClusterSnapshot,
        domain: &str,
        pod_domains: Option<&Requirement>,
        min: i32,
    ) -> bool {
        let group = &self.groups[g];
        if pod_domains.is_some_and(|r| !r.has(domain)) && !matches!(group.k.kind, Kind::Spread { .. }) {
            return false;
        }
        match group.k.kind {
            Kind::Spread { max_skew, .. } => {
                group.count(domain) + i32::from(group.selects(pod, snapshot)) - min <= max_skew
            }
            Kind::Affinity => {
                group.count(domain) > 0
                    || (group.selects(pod, snapshot)
                        && !group.counts.iter().any(|(d, c)| *c > 0 && pod_domains.is_none_or(|r| r.has(d))))
            }
            Kind::AntiAffinity | Kind::InverseAntiAffinity => group.count(domain) == 0,
        }
    }

    /// The requirement on the group's key that `pod` must satisfy next, given what the pod
    /// itself allows (`pod_domains`), what the node allows (`node_domains`) and, for a
    /// spread, the domains it counts (`filter_domains`, the pod's own node terms). `None`
    /// means unconstrained (`Exists`).
    pub(crate) fn allowed(
        &self,
        g: usize,
        pod: &Pod,
        snapshot: &ClusterSnapshot,
        pod_domains: Option<&Requirement>,
        node_domains: Option<&Requirement>,
        filter_domains: Option<&Requirement>,
    ) -> Requirement {
        let group = &self.groups[g];
        let key = group.k.key.as_str();
        let pod_has = |d: &str| pod_domains.is_none_or(|r| r.has(d));
        let node_has = |d: &str| node_domains.is_none_or(|r| r.has(d));
        let finite_node: Option<&[String]> = node_domains.filter(|r| r.operator() == Operator::In).map(|r| r.values());
        let universe = self.universe.get(key);
        let none = || Requirement::new(key, Operator::DoesNotExist, Vec::<String>::new());
        match &group.k.kind {
            Kind::Spread { max_skew, min_domains } => {
                let min = if key == LABEL_HOSTNAME {
                    0
                } else {
                    let counted = |d: &str| filter_domains.is_none_or(|r| r.has(d));
                    let eligible: Vec<i32> =
                        universe.into_iter().flatten().filter(|d| counted(d)).map(|d| group.count(d)).collect();
                    if min_domains.is_some_and(|m| (eligible.len() as i32) < m) {
                        0
                    } else {
                        eligible.into_iter().min().unwrap_or(0)
                    }
                };
                let self_count = i32::from(group.selects(pod, snapshot));
                let candidates: Box<dyn Iterator<Item = &String>> = match finite_node {
                    Some(vals) => Box::new(vals.iter()),
                    None => Box::new(universe.into_iter().flatten().filter(|d| node_has(d))),
                };
                // The least-loaded admissible domain; ties go to the first in name order.
                let mut best: Option<(&String, i32)> = None;
                for d in candidates {
                    let c = group.count(d) + self_count;
                    if c - min <= *max_skew && best.is_none_or(|(_, bc)| c < bc) {
                        best = Some((d, c));
                    }
                }
                match best {
                    Some((d, _)) => Requirement::in_values(key, [d.clone()]),
                    None => none(),
                }
            }
            Kind::Affinity => {
                let mut options: Vec<&String> =
                    group.counts.iter().filter(|(d, c)| **c > 0 && pod_has(d)).map(|(d, _)| d).collect();
                if options.is_empty() && group.selects(pod, snapshot) {
                    // Bootstrap: the first self-affine pod picks a domain, the node's own if it has one.
                    let pick = match finite_node {
                        Some(vals) => vals.iter().find(|d| pod_has(d)),
                        None => universe.into_iter().flatten().find(|d| pod_has(d) && node_has(d)),
                    };
                    options.extend(pick);
                }
                if options.is_empty() { none() } else { Requirement::in_values(key, options.into_iter().cloned()) }
            }
            Kind::AntiAffinity | Kind::InverseAntiAffinity => match finite_node {
                Some(vals) => {
                    let ok: Vec<&String> = vals.iter().filter(|d| pod_has(d) && group.count(d) == 0).collect();
                    if ok.is_empty() { none() } else { Requirement::in_values(key, ok.into_iter().cloned()) }
                }
                None => Requirement::new(
                    key,
                    Operator::NotIn,
                    group.counts.iter().filter(|(_, c)| **c > 0).map(|(d, _)| d.clone()),
                ),
            },
        }
    }

    /// Every known domain of the group's key `pod` could take next on a node not yet tied to
    /// one (Karpenter's valid domains): for a spread, those within max skew of the minimum
    /// over the domains `pod_domains` (the pod's own node terms) allows; for an affinity,
    /// those `pod_domains` allows holding a selected pod, or, when none does and the pod
    /// selects itself, every one it allows; for an anti-affinity, those `pod_domains` allows
    /// holding none.
    pub(crate) fn valid_domains(
        &self,
        g: usize,
        pod: &Pod,
        snapshot: &ClusterSnapshot,
        pod_domains: Option<&Requirement>,
    ) -> BTreeSet<String> {
        let group = &self.groups[g];
        let pod_has = |d: &str| pod_domains.is_none_or(|r| r.has(d));
        let known = self.universe.get(&group.k.key).into_iter().flatten();
        match group.k.kind {
            Kind::Spread { max_skew, .. } => {
                let min = self.spread_min(g, pod_domains);
                let self_count = i32::from(group.selects(pod, snapshot));
                known.filter(|d| group.count(d) + self_count - min <= max_skew).cloned().collect()
            }
            Kind::Affinity => {
                let held: BTreeSet<String> =
                    group.counts.iter().filter(|(d, c)| **c > 0 && pod_has(d)).map(|(d, _)| d.clone()).collect();
                if held.is_empty() && group.selects(pod, snapshot) {
                    known.filter(|d| pod_has(d)).cloned().collect()
                } else {
                    held
                }
            }
            Kind::AntiAffinity | Kind::InverseAntiAffinity => {
                known.filter(|d| pod_has(d) && group.count(d) == 0).cloned().collect()
            }
        }
    }

    /// Counts `pod` now placed on a node with requirements `reqs` in every group that cares.
    pub(crate) fn record(
        &mut self,
        pod: &Pod,
        at: &Placement<'_>,
        snapshot: &ClusterSnapshot,
        owned_inverse: &[usize],
        delta: i32,
    ) {
        let (reqs, taints, bin) = (at.reqs, at.taints, at.bin);
        let universe = &self.universe;
        for (i, group) in self.groups.iter_mut().enumerate() {
            let inverse = group.k.kind == Kind::InverseAntiAffinity;
            let counted = if inverse {
                owned_inverse.contains(&i)
            } else {
                group.selects(pod, snapshot) && group.counts_node(reqs, taints)
            };
            if !counted {
                continue;
            }
            let all = matches!(group.k.kind, Kind::AntiAffinity | Kind::InverseAntiAffinity);
            // Anti-affinity blocks every domain the pod may land in: where the place has
            // not settled its domain yet (`Exists`, `NotIn`), every known domain it allows.
            let domains: Vec<String> = match reqs.get(&group.k.key) {
                Some(d) if !d.is_complement() => d.values().to_vec(),
                Some(d) if all => {
                    universe.get(&group.k.key).into_iter().flatten().filter(|v| d.has(v)).cloned().collect()
                }
                _ => continue,
            };
            if all || domains.len() == 1 {
                for d in &domains {
                    *group.counts.entry(d.clone()).or_default() += delta;
                }
                if let Some(b) = bin.filter(|_| group.k.key == LABEL_HOSTNAME) {
                    let counts = &mut self.by_bin[i];
                    if counts.len() <= b {
                        counts.resize(b + 1, 0);
                    }
                    counts[b] += delta;
                }
            }
        }
    }
}
