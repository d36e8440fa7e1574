//! Which nodes may be disrupted at all, what disrupting each would cost, and why the others
//! may not.

use crate::model::{ClusterSnapshot, ConsolidationPolicy, Node, Pod, PodDisruptionBudget};
use crate::scheduler::reschedulable;
use std::collections::BTreeMap;
use tenon_api::duration::parse_duration;
use tenon_api::hash::NODEPOOL_HASH_VERSION;
use tenon_api::wellknown::{ANNOTATION_DO_NOT_DISRUPT, ANNOTATION_POD_DELETION_COST};

/// A managed, initialized node that is not already going away.
#[derive(Clone, Debug)]
pub struct Candidate {
    /// Index into `ClusterSnapshot::nodes`.
    pub node: usize,
    /// Index into `ClusterSnapshot::nodepools`.
    pub nodepool: usize,
    /// Pods a drain would reschedule.
    pub pods: Vec<usize>,
    /// Karpenter's disruption cost: rescheduling cost × lifetime remaining.
    pub cost: f64,
    /// Karpenter v1.14's `RescheduleDisruptionCost`: 1 (draining at all) plus each pod's
    /// positive eviction cost. Consolidation prefers the highest `price / reschedule_cost`.
    pub reschedule_cost: f64,
    pub price: f64,
    /// No pod with a positive eviction cost (Karpenter v1.14's `IsEmpty`).
    pub empty: bool,
    /// consolidateAfter has passed since the last pod event.
    pub consolidatable: bool,
    pub consolidation_policy: ConsolidationPolicy,
    pub drifted: Option<String>,
    pub expired: bool,
    /// A pod that may not be evicted now (do-not-disrupt, a PDB): graceful methods skip the node.
    pub blocked: Option<String>,
    pub spot: bool,
}

/// A node that could not even be a candidate, with why (for `DisruptionBlocked` events).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Blocked {
    pub node: usize,
    pub reason: String,
}

impl Blocked {
    /// The `DisruptionBlocked` Event's message: the reason as a sentence (Karpenter's
    /// `pretty.Sentence`, which capitalises the error it publishes).
    pub fn event_message(&self) -> String {
        let mut chars = self.reason.chars();
        chars.next().map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
    }
}

/// Karpenter's eviction cost of one pod: 1, moved by `controller.kubernetes.io/pod-deletion-cost`
/// and priority, clamped to [-10, 10].
pub fn eviction_cost(p: &Pod) -> f64 {
    let mut cost = 1.0;
    if let Some(c) = p.annotations.get(ANNOTATION_POD_DELETION_COST).and_then(|v| v.parse::<f64>().ok()) {
        cost += c / 2f64.powi(27);
    }
    cost += f64::from(p.priority) / 2f64.powi(25);
    cost.clamp(-10.0, 10.0)
}

/// Karpenter v1.14's `RescheduleDisruptionCost` of draining pods: 1 plus each pod's
/// positive eviction cost.
fn rescheduling<'p>(pods: impl Iterator<Item = &'p Pod>) -> f64 {
    1.0 + pods.map(|p| eviction_cost(p).max(0.0)).sum::<f64>()
}

/// [`rescheduling`] of the pods a drain of snapshot node `n` would reschedule.
pub fn reschedule_cost(snap: &ClusterSnapshot, n: usize) -> f64 {
    let name = snap.nodes[n].name.as_str();
    rescheduling(snap.pods.iter().filter(|p| p.node_name.as_deref() == Some(name) && reschedulable(p)))
}

/// Share of the node's lifetime left before it expires, 0..1 (1 when it never expires).
pub fn lifetime_remaining(created: i64, expire_after: Option<i64>, now: i64) -> f64 {
    match expire_after {
        Some(total) if total > 0 => ((total - (now - created)) as f64 / total as f64).clamp(0.0, 1.0),
        _ => 1.0,
    }
}

/// Whether a pod's `karpenter.sh/do-not-disrupt` holds at `now`: `"true"`, or a positive
/// duration counted from the pod's start (`status.startTime`) that has not yet passed; a
/// pod not started yet stays protected. An invalid value is ignored, as Karpenter does.
pub fn do_not_disrupt(p: &Pod, now: i64) -> bool {
    match do_not_disrupt_state(p, now) {
        Some(DoNotDisrupt::Always | DoNotDisrupt::Until(_) | DoNotDisrupt::NotStarted) => true,
        Some(DoNotDisrupt::Elapsed | DoNotDisrupt::Invalid(_)) | None => false,
    }
}

/// Where a pod's `karpenter.sh/do-not-disrupt` stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DoNotDisrupt {
    Always,
    /// A duration not yet elapsed: disruptable from this time (seconds since the epoch).
    Until(i64),
    /// A duration, and the pod has not started: protected until it has.
    NotStarted,
    Elapsed,
    /// Not `"true"` nor a positive duration: ignored (why).
    Invalid(String),
}

/// The annotation's state at `now`; `None` without the annotation.
pub fn do_not_disrupt_state(p: &Pod, now: i64) -> Option<DoNotDisrupt> {
    let value = p.annotations.get(ANNOTATION_DO_NOT_DISRUPT)?;
    if value == "true" {
        return Some(DoNotDisrupt::Always);
    }
    let d = match parse_duration(value) {
        Ok(d) if !d.is_zero() => d.as_secs() as i64,
        Ok(_) => return Some(DoNotDisrupt::Invalid(format!("duration {value:?} must be positive"))),
        Err(e) => return Some(DoNotDisrupt::Invalid(e.to_string())),
    };
    Some(match p.started {
        None => DoNotDisrupt::NotStarted,
        Some(s) if now < s + d => DoNotDisrupt::Until(s + d),
        Some(_) => DoNotDisrupt::Elapsed,
    })
}

/// Karpenter's Event about a pod's duration-valued or invalid do-not-disrupt, at `now`:
/// (type, reason, message).
pub fn do_not_disrupt_event(p: &Pod, now: i64) -> Option<(&'static str, &'static str, String)> {
    match do_not_disrupt_state(p, now)? {
        DoNotDisrupt::Invalid(why) => Some((
            "Warning",
            "InvalidDoNotDisruptAnnotation",
            format!("Invalid karpenter.sh/do-not-disrupt annotation: {why}, ignoring annotation"),
        )),
        DoNotDisrupt::Until(at) => {
            let at = k8s_openapi::jiff::Timestamp::from_second(at).map_or_else(|_| at.to_string(), |t| t.to_string());
            Some((
                "Normal",
                "DoNotDisruptUntil",
                format!("The karpenter.sh/do-not-disrupt grace period will elapse at {at}"),
            ))
        }
        DoNotDisrupt::Elapsed => Some((
            "Normal",
            "DoNotDisruptGracePeriodElapsed",
            "The karpenter.sh/do-not-disrupt grace period has elapsed, pod is now disruptable".to_string(),
        )),
        DoNotDisrupt::Always | DoNotDisrupt::NotStarted => None,
    }
}

/// Whether a drain would call the eviction API for this (running) pod: not a mirror pod,
/// not one that tolerates the disruption taint (it stays).
fn evictable(p: &Pod) -> bool {
    let disrupted = crate::taints::Taint {
        key: tenon_api::wellknown::TAINT_DISRUPTED.into(),
        value: String::new(),
        effect: crate::taints::Effect::NoSchedule,
    };
    !p.is_mirror() && !p.tolerations.iter().any(|t| t.tolerates(&disrupted))
}

/// PDBs selecting a pod in its namespace.
/// Karpenter's `IsCurrentlyReschedulable`: whether a drain could move pod `p` now. Not an
/// active pod whose `karpenter.sh/do-not-disrupt` is in force, nor an active evictable pod
/// under more than one PodDisruptionBudget or under one that allows no disruption at all
/// (unless it lets unready pods go and this one is unready).
pub fn currently_reschedulable(p: &Pod, snap: &ClusterSnapshot) -> bool {
    let active = p.deleted_at.is_none();
    if active && do_not_disrupt(p, snap.now) {
        return false;
    }
    if !(active && evictable(p)) {
        return true;
    }
    match pdbs_for(p, &snap.pdbs).as_slice() {
        [] => true,
        [b] => !b.fully_blocking || (b.unhealthy_always_allow && p.unready),
        _ => false,
    }
}

pub fn pdbs_for<'a>(p: &Pod, pdbs: &'a [PodDisruptionBudget]) -> Vec<&'a PodDisruptionBudget> {
    pdbs.iter().filter(|b| b.namespace == p.namespace && b.selector.matches(&p.labels)).collect()
}

/// Why `pods` cannot all be evicted now, if they cannot: the eviction API refuses a pod
/// under more than one PDB, or under a PDB whose allowance the pods would exceed.
pub fn pdb_problem(pods: &[usize], snap: &ClusterSnapshot) -> Option<String> {
    let mut used: BTreeMap<(&str, &str), i32> = BTreeMap::new();
    for &p in pods {
        let pod = &snap.pods[p];
        let matching = pdbs_for(pod, &snap.pdbs);
        if matching.len() > 1 {
            let names: Vec<String> = matching.iter().map(|b| format!("{}/{}", b.namespace, b.name)).collect();
            return Some(format!(
                "eviction does not support multiple PDBs (PodDisruptionBudget(s)=[{}])",
                names.join(" ")
            ));
        }
        if let Some(b) = matching.first() {
            if b.unhealthy_always_allow && pod.unready {
                continue;
            }
            let n = used.entry((b.namespace.as_str(), b.name.as_str())).or_default();
            *n += 1;
            if *n > b.disruptions_allowed {
                return Some(format!("pdb prevents pod evictions (PodDisruptionBudget=[{}/{}])", b.namespace, b.name));
            }
        }
    }
    None
}

/// Karpenter's order: the NodePool's static fields, its requirements, the instance type
/// gone, then what the cloud provider reports.
fn drift_reason(node: &Node, snap: &ClusterSnapshot, pool: usize) -> Option<String> {
    let claim = node.claim.as_ref()?;
    let tpl = &snap.nodepools[pool];
    if claim.nodepool_hash_version.as_deref() == Some(NODEPOOL_HASH_VERSION)
        && claim.nodepool_hash.as_deref().is_some_and(|h| h != tpl.hash)
    {
        return Some("NodePoolDrifted".into());
    }
    let labels = |k: &str| node.labels.get(k).cloned();
    if !tpl.requirements.matches_labels(&labels) {
        return Some("RequirementsDrifted".into());
    }
    // An empty catalog is one that could not be read, not one every type left: nothing drifts.
    if !tpl.instance_types.is_empty() {
        let offered = tpl.instance_types.iter().find(|t| t.name == claim.instance_type).is_some_and(|t| {
            // A label the node lacks constrains nothing (Karpenter's label requirements).
            t.offerings.iter().any(|o| {
                (claim.zone.is_empty() || o.zone == claim.zone)
                    && (claim.capacity_type.is_empty() || o.capacity_type == claim.capacity_type)
            })
        });
        if !offered {
            return Some(format!(
                "InstanceTypeNotFound: {} in {} ({}) is no longer offered",
                claim.instance_type, claim.zone, claim.capacity_type
            ));
        }
    }
    claim.drift.clone()
}

/// Every node that may be considered for disruption, and the managed nodes that may not.
pub fn candidates(snap: &ClusterSnapshot) -> (Vec<Candidate>, Vec<Blocked>) {
    let now = snap.now;
    let mut on_node: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in snap.pods.iter().enumerate() {
        if let Some(n) = &p.node_name {
            on_node.entry(n).or_default().push(i);
        }
    }
    let mut out = Vec::new();
    let mut blocked = Vec::new();
    for (n, node) in snap.nodes.iter().enumerate() {
        let (Some(claim), Some(pool_name)) = (&node.claim, &node.nodepool) else { continue };
        let Some(pool) = snap.nodepools.iter().position(|t| &t.name == pool_name) else { continue };
        if !claim.initialized || claim.disrupting || node.in_flight {
            continue;
        }
        if claim.annotations.get(ANNOTATION_DO_NOT_DISRUPT).is_some_and(|v| v == "true") {
            blocked.push(Blocked {
                node: n,
                reason: format!("disruption is blocked through the \"{ANNOTATION_DO_NOT_DISRUPT}\" annotation"),
            });
            continue;
        }
        let tpl = &snap.nodepools[pool];
        let on: &[usize] = on_node.get(node.name.as_str()).map_or(&[], Vec::as_slice);
        let pods: Vec<usize> = on.iter().copied().filter(|&p| reschedulable(&snap.pods[p])).collect();
        // Karpenter's checks: do-not-disrupt on any running pod (DaemonSet and mirror pods
        // too), PDBs over the pods a drain would evict.
        let active = |p: usize| snap.pods[p].deleted_at.is_none();
        let mut reason = on
            .iter()
            .find(|&&p| active(p) && do_not_disrupt(&snap.pods[p], now))
            .map(|&p| format!("pod has \"{ANNOTATION_DO_NOT_DISRUPT}\" annotation (Pod={})", snap.pods[p].key()));
        if reason.is_none() {
            let evicted: Vec<usize> = on.iter().copied().filter(|&p| active(p) && evictable(&snap.pods[p])).collect();
            reason = pdb_problem(&evicted, snap);
        }
        let last = claim.last_pod_event.unwrap_or(claim.created);
        // A static NodePool's nodes are never consolidated.
        let consolidatable =
            tpl.replicas.is_none() && tpl.disruption.consolidate_after.is_some_and(|after| now >= last + after);
        let cost: f64 = pods.iter().map(|&p| eviction_cost(&snap.pods[p])).sum::<f64>()
            * lifetime_remaining(claim.created, claim.expire_after, now);
        let reschedule_cost = rescheduling(pods.iter().map(|&p| &snap.pods[p]));
        out.push(Candidate {
            node: n,
            nodepool: pool,
            empty: reschedule_cost <= 1.0,
            reschedule_cost,
            cost,
            price: claim.price,
            consolidatable,
            consolidation_policy: tpl.disruption.consolidation_policy,
            drifted: drift_reason(node, snap, pool),
            expired: claim.expire_after.is_some_and(|e| now >= claim.created + e),
            blocked: reason,
            spot: claim.capacity_type == tenon_api::wellknown::CAPACITY_TYPE_SPOT,
            pods,
        });
    }
    (out, blocked)
}
