//! The series operatorpkg's status controller publishes for each kind Karpenter registers it
//! for (NodeClaim, NodePool, Node, EC2NodeClass): every condition's presence and age, its
//! transitions and how long the previous status lasted, and how long a deleted object has been
//! terminating. Also the transitions themselves, which Karpenter announces as Events. Kept
//! from one pass to the next: a transition is a change between two passes' observations.

use super::catalog::{DEPRECATED_STATUS, StatusFamilies};
use super::cluster::Gauges;
use super::{Labels, Metrics};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use std::collections::BTreeMap;
use tenon_api::common::Condition;
use tenon_api::wellknown as wk;

/// One condition as observed.
#[derive(Debug, Clone, PartialEq)]
pub struct Cond {
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    /// Its lastTransitionTime, seconds since the epoch.
    pub since: i64,
}

/// One object as observed this pass.
#[derive(Debug, Clone)]
pub struct Tracked {
    pub name: String,
    pub conditions: Vec<Cond>,
    /// Its deletionTimestamp, seconds since the epoch.
    pub deleting_since: Option<i64>,
    /// The kind's extra labels (Karpenter's `WithLabels`: object labels, `/.-` as `_`).
    pub labels: Labels,
    pub finalizers: Vec<String>,
}

/// What operatorpkg announces in an Event on the object: a condition whose status changed
/// between two passes (reason the condition type), or a finalizer removed (`Finalized`).
#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub name: String,
    /// The Event's reason.
    pub type_: String,
    pub message: String,
}

/// One kind's series for one pass. The gauges are complete (replace the family with them);
/// the rest is what happened since the last pass.
#[derive(Debug, Default)]
pub struct KindSeries {
    pub count: Gauges,
    pub current_status_seconds: Gauges,
    pub terminating_seconds: Gauges,
    /// One increment each of `transitions_total`.
    pub transitions: Vec<Labels>,
    /// Observations of `transition_seconds`: how long the previous status lasted.
    pub transition_seconds: Vec<(Labels, f64)>,
    /// Observations of `termination_duration_seconds`: objects gone after being deleted.
    pub terminated: Vec<(Labels, f64)>,
    pub events: Vec<Transition>,
}

#[derive(Debug, Default)]
struct Seen {
    conditions: BTreeMap<String, Cond>,
    deleting_since: Option<i64>,
    labels: Labels,
    finalizers: Vec<String>,
}

/// What each kind's objects looked like at the last pass.
#[derive(Debug, Default)]
pub struct StatusTracker {
    kinds: BTreeMap<&'static str, BTreeMap<String, Seen>>,
}

fn with(mut base: Labels, extra: &Labels) -> Labels {
    base.extend(extra.iter().cloned());
    base
}

impl StatusTracker {
    /// Observes every object of `kind` at `now` (seconds since the epoch).
    pub fn observe(&mut self, kind: &'static str, objects: Vec<Tracked>, now: i64) -> KindSeries {
        let before = self.kinds.remove(kind).unwrap_or_default();
        let mut out = KindSeries::default();
        let mut after = BTreeMap::new();
        for o in objects {
            let seen = before.get(&o.name);
            for c in &o.conditions {
                let labels = with(
                    vec![
                        ("namespace", String::new()),
                        ("name", o.name.clone()),
                        ("type", c.type_.clone()),
                        ("status", c.status.clone()),
                        ("reason", c.reason.clone()),
                    ],
                    &o.labels,
                );
                out.count.push((labels.clone(), 1.0));
                out.current_status_seconds.push((labels, (now - c.since).max(0) as f64));
                let old = seen.and_then(|s| s.conditions.get(&c.type_));
                if old.is_some_and(|old| old.status == c.status) {
                    continue;
                }
                let status = ("status", c.status.clone());
                out.transitions
                    .push(with(vec![("type", c.type_.clone()), status, ("reason", c.reason.clone())], &o.labels));
                // A condition first seen by this process counts as a transition, but nothing
                // is known of how long the state before it lasted.
                let Some(old) = old else { continue };
                let lasted = (c.since - old.since).max(0) as f64;
                out.transition_seconds
                    .push((with(vec![("type", c.type_.clone()), ("status", old.status.clone())], &o.labels), lasted));
                let message = if c.message.is_empty() { String::new() } else { format!(", Message: {}", c.message) };
                out.events.push(Transition {
                    name: o.name.clone(),
                    type_: c.type_.clone(),
                    message: format!(
                        "Status condition transitioned, Type: {}, Status: {} -> {}, Reason: {}{message}",
                        c.type_, old.status, c.status, c.reason
                    ),
                });
            }
            if let Some(since) = o.deleting_since {
                let labels = with(vec![("namespace", String::new()), ("name", o.name.clone())], &o.labels);
                out.terminating_seconds.push((labels, (now - since).max(0) as f64));
            }
            if let Some(seen) = seen {
                finalized(&mut out, &o.name, seen.finalizers.iter().filter(|f| !o.finalizers.contains(f)));
            }
            let conditions = o.conditions.into_iter().map(|c| (c.type_.clone(), c)).collect();
            let (deleting_since, labels, finalizers) = (o.deleting_since, o.labels, o.finalizers);
            after.insert(o.name, Seen { conditions, deleting_since, labels, finalizers });
        }
        for (name, seen) in before {
            if after.contains_key(&name) {
                continue;
            }
            finalized(&mut out, &name, seen.finalizers.iter());
            if let Some(since) = seen.deleting_since {
                out.terminated.push((seen.labels, (now - since).max(0) as f64));
            }
        }
        self.kinds.insert(kind, after);
        out
    }
}

/// operatorpkg's `Finalized` Event for each finalizer removed from `name`.
fn finalized<'a>(out: &mut KindSeries, name: &str, removed: impl Iterator<Item = &'a String>) {
    for f in removed {
        out.events.push(Transition {
            name: name.to_string(),
            type_: "Finalized".into(),
            message: format!("Finalized {f}"),
        });
    }
}

fn seconds(t: &Time) -> i64 {
    t.0.as_second()
}

fn label(meta: &ObjectMeta, name: &'static str, key: &str) -> (&'static str, String) {
    (name, meta.labels.as_ref().and_then(|l| l.get(key)).cloned().unwrap_or_default())
}

/// A Karpenter object (NodeClaim, NodePool, EC2NodeClass) as the tracker observes it, with
/// the object labels Karpenter adds to its kind's series (`extra`: label name, object label).
pub fn tracked(meta: &ObjectMeta, conditions: &[Condition], extra: &[(&'static str, &str)]) -> Tracked {
    Tracked {
        name: meta.name.clone().unwrap_or_default(),
        conditions: conditions
            .iter()
            .map(|c| Cond {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
                since: seconds(&c.last_transition_time),
            })
            .collect(),
        deleting_since: meta.deletion_timestamp.as_ref().map(seconds),
        labels: extra.iter().map(|(name, key)| label(meta, name, key)).collect(),
        finalizers: meta.finalizers.clone().unwrap_or_default(),
    }
}

/// The labels Karpenter adds to a NodeClaim's series.
pub const NODECLAIM_LABELS: &[(&str, &str)] =
    &[("karpenter_k8s_aws_ec2nodeclass", wk::LABEL_NODECLASS), ("karpenter_sh_nodepool", wk::LABEL_NODEPOOL)];

/// A Node as the tracker observes it, with the labels Karpenter adds to its series.
pub fn tracked_node(node: &Node) -> Tracked {
    let extra: &[(&'static str, &str)] = &[
        ("karpenter_k8s_aws_ec2nodeclass", wk::LABEL_NODECLASS),
        ("karpenter_sh_nodepool", wk::LABEL_NODEPOOL),
        ("karpenter_sh_initialized", wk::LABEL_INITIALIZED),
    ];
    let conditions = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    Tracked {
        name: node.metadata.name.clone().unwrap_or_default(),
        conditions: conditions
            .into_iter()
            .flatten()
            .map(|c| Cond {
                type_: c.type_.clone(),
                status: c.status.clone(),
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
                since: c.last_transition_time.as_ref().map_or(0, seconds),
            })
            .collect(),
        deleting_since: node.metadata.deletion_timestamp.as_ref().map(seconds),
        labels: extra.iter().map(|(name, key)| label(&node.metadata, name, key)).collect(),
        finalizers: node.metadata.finalizers.clone().unwrap_or_default(),
    }
}

/// The deprecated kind-less gauges, gathered over the kinds of one pass.
#[derive(Debug, Default)]
pub struct Deprecated {
    count: Gauges,
    current: Gauges,
    terminating: Gauges,
}

impl Deprecated {
    pub fn publish(self, metrics: &Metrics) {
        metrics.replace(DEPRECATED_STATUS.count, self.count);
        metrics.replace(DEPRECATED_STATUS.current, self.current);
        metrics.replace(DEPRECATED_STATUS.terminating, self.terminating);
    }
}

/// Writes one kind's series into its families (and, for the kinds Karpenter still writes
/// them for, into the deprecated ones, without the kind's extra labels but with its group
/// and kind). `extra`: how many extra labels the kind's series end with.
pub fn publish(metrics: &Metrics, f: &StatusFamilies, extra: usize, s: KindSeries, dep: &mut Deprecated) {
    let plain = |l: &Labels| -> Labels {
        let (group, kind) = f.deprecated.unwrap_or_default();
        let mut out: Labels = l[..l.len().saturating_sub(extra)].to_vec();
        out.extend([("group", group.to_string()), ("kind", kind.to_string())]);
        out
    };
    if f.deprecated.is_some() {
        let plain_all = |g: &Gauges| g.iter().map(|(l, v)| (plain(l), *v)).collect::<Gauges>();
        dep.count.extend(plain_all(&s.count));
        dep.current.extend(plain_all(&s.current_status_seconds));
        dep.terminating.extend(plain_all(&s.terminating_seconds));
        for l in &s.transitions {
            metrics.add_labelled(DEPRECATED_STATUS.transitions, plain(l), 1);
        }
        for (l, v) in &s.transition_seconds {
            metrics.observe_labelled(DEPRECATED_STATUS.transition_seconds, plain(l), *v);
        }
        for (l, v) in &s.terminated {
            metrics.observe_labelled(DEPRECATED_STATUS.terminated, plain(l), *v);
        }
    }
    metrics.replace(f.count, s.count);
    metrics.replace(f.current, s.current_status_seconds);
    metrics.replace(f.terminating, s.terminating_seconds);
    for l in s.transitions {
        metrics.add_labelled(f.transitions, l, 1);
    }
    for (l, v) in s.transition_seconds {
        metrics.observe_labelled(f.transition_seconds, l, v);
    }
    for (l, v) in s.terminated {
        metrics.observe_labelled(f.terminated, l, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(type_: &str, status: &str, reason: &str, since: i64) -> Cond {
        Cond { type_: type_.into(), status: status.into(), reason: reason.into(), message: String::new(), since }
    }

    fn tracked(name: &str, conditions: Vec<Cond>, deleting_since: Option<i64>) -> Tracked {
        Tracked {
            name: name.into(),
            conditions,
            deleting_since,
            labels: vec![("karpenter_sh_nodepool", "p".into())],
            finalizers: vec![],
        }
    }

    fn has(l: &Labels, k: &str, v: &str) -> bool {
        l.iter().any(|(lk, lv)| *lk == k && lv == v)
    }

    #[test]
    fn conditions_are_counted_with_their_age() {
        let mut t = StatusTracker::default();
        let s = t.observe("nodeclaim", vec![tracked("a", vec![cond("Launched", "True", "Launched", 100)], None)], 130);
        assert_eq!(s.count.len(), 1);
        let (labels, age) = &s.current_status_seconds[0];
        assert_eq!(*age, 30.0);
        for (k, v) in [("name", "a"), ("type", "Launched"), ("status", "True"), ("karpenter_sh_nodepool", "p")] {
            assert!(has(labels, k, v), "{k}={v} missing from {labels:?}");
        }
    }

    #[test]
    fn a_status_change_is_one_transition_with_how_long_the_old_status_lasted() {
        let mut t = StatusTracker::default();
        let first = t.observe(
            "nodeclaim",
            vec![tracked("a", vec![cond("Ready", "Unknown", "AwaitingReconciliation", 100)], None)],
            100,
        );
        assert_eq!(first.transitions.len(), 1, "first seen counts");
        assert!(first.transition_seconds.is_empty() && first.events.is_empty(), "but has no previous state");
        let same = t.observe(
            "nodeclaim",
            vec![tracked("a", vec![cond("Ready", "Unknown", "AwaitingReconciliation", 100)], None)],
            110,
        );
        assert!(same.transitions.is_empty());
        let mut ready = cond("Ready", "True", "Ready", 145);
        ready.message = "all good".into();
        let changed = t.observe("nodeclaim", vec![tracked("a", vec![ready], None)], 150);
        assert_eq!(changed.transitions.len(), 1);
        assert!(has(&changed.transitions[0], "status", "True") && has(&changed.transitions[0], "reason", "Ready"));
        let (labels, lasted) = &changed.transition_seconds[0];
        assert_eq!(*lasted, 45.0);
        assert!(has(labels, "status", "Unknown"), "labelled with the status that ended: {labels:?}");
        assert_eq!(
            changed.events,
            vec![Transition {
                name: "a".into(),
                type_: "Ready".into(),
                message: "Status condition transitioned, Type: Ready, Status: Unknown -> True, Reason: Ready, Message: all good"
                    .into()
            }]
        );
    }

    #[test]
    fn a_deleted_object_is_timed_until_it_is_gone() {
        let mut t = StatusTracker::default();
        let s = t.observe("nodepool", vec![tracked("a", vec![], Some(200))], 230);
        assert_eq!(s.terminating_seconds[0].1, 30.0);
        assert!(has(&s.terminating_seconds[0].0, "name", "a"));
        let s = t.observe("nodepool", vec![], 260);
        assert!(s.terminating_seconds.is_empty());
        assert_eq!(s.terminated, vec![(vec![("karpenter_sh_nodepool", "p".to_string())], 60.0)]);
        let s = t.observe("nodepool", vec![], 270);
        assert!(s.terminated.is_empty(), "observed once");
        assert!(t.observe("nodepool", vec![tracked("b", vec![], None)], 280).terminated.is_empty());
        assert!(t.observe("nodepool", vec![], 290).terminated.is_empty(), "gone without deletion seen: not timed");
    }

    #[test]
    fn each_finalizer_removed_is_announced_once_gone_or_not() {
        let mut t = StatusTracker::default();
        let with_finalizers = |names: &[&str]| {
            let mut o = tracked("a", vec![], Some(100));
            o.finalizers = names.iter().map(|f| f.to_string()).collect();
            o
        };
        let fin = |s: &KindSeries| s.events.iter().map(|e| (e.type_.clone(), e.message.clone())).collect::<Vec<_>>();
        assert!(t.observe("nodeclaim", vec![with_finalizers(&["x/a", "x/b"])], 100).events.is_empty());
        let s = t.observe("nodeclaim", vec![with_finalizers(&["x/b"])], 101);
        assert_eq!(fin(&s), vec![("Finalized".to_string(), "Finalized x/a".to_string())]);
        let s = t.observe("nodeclaim", vec![], 102);
        assert_eq!(fin(&s), vec![("Finalized".to_string(), "Finalized x/b".to_string())], "gone with it");
    }
}
