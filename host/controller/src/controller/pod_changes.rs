//! When the pods on each node last changed, as the pod watch delivered the change. The
//! `pod.events` reconciler writes `status.lastPodEventTime` after the change, and the write
//! reaches the cache later still: a disruption round between the two would see a node's pods
//! gone with an old event time and consolidate it before `consolidateAfter` has passed.
//! Recorded here, in the same step that puts the pod in the cache, no snapshot sees one
//! without the other.

use kube::runtime::watcher::Event;
use std::collections::{BTreeMap, HashMap};
use tenon_core::cached_pod::Pod;
use tenon_core::convert::{is_active, is_daemon, pod_key};

/// How long a change is remembered: by then `lastPodEventTime` says as much.
const REMEMBERED_FOR: i64 = 600;
/// How often forgotten changes are dropped, seconds.
const PRUNE_EVERY: i64 = 60;

#[derive(Default)]
pub struct PodChanges {
    /// Each pod that counts ([`counted_on`]), by `namespace/name`, and its node.
    on: HashMap<String, String>,
    /// The list under way after a (re)start of the watch.
    relisting: Option<HashMap<String, String>>,
    /// Whether a first list has completed (a first list changes nothing: it is the start).
    listed: bool,
    /// Node name → when its pods last changed, Unix seconds.
    changed: BTreeMap<String, i64>,
    /// When forgotten changes were last dropped (not on every event: a wave is thousands).
    pruned_at: i64,
}

/// The node `p` counts on, if it counts: bound, neither finished nor terminating (Karpenter
/// counts a pod's deletion as its event), not a DaemonSet's.
fn counted_on(p: &Pod) -> Option<String> {
    let node = p.spec.as_ref()?.node_name.as_ref()?;
    (!is_daemon(p) && is_active(p) && p.metadata.deletion_timestamp.is_none()).then(|| node.clone())
}

impl PodChanges {
    /// Takes in one watch event, seen at `now` (Unix seconds).
    pub fn observe(&mut self, event: &Event<Pod>, now: i64) {
        match event {
            Event::Init => self.relisting = Some(HashMap::new()),
            Event::InitApply(p) => {
                if let (Some(list), Some(node)) = (self.relisting.as_mut(), counted_on(p)) {
                    list.insert(pod_key(p), node);
                }
            }
            Event::InitDone => {
                let list = self.relisting.take().unwrap_or_default();
                let before = std::mem::replace(&mut self.on, list);
                if std::mem::replace(&mut self.listed, true) {
                    // A watch restarted: what changed while it was down changed now.
                    let touched: Vec<String> = before
                        .iter()
                        .filter(|(k, n)| self.on.get(*k) != Some(n))
                        .map(|(_, n)| n.clone())
                        .chain(self.on.iter().filter(|(k, n)| before.get(*k) != Some(n)).map(|(_, n)| n.clone()))
                        .collect();
                    for n in touched {
                        self.changed.insert(n, now);
                    }
                }
            }
            Event::Apply(p) | Event::Delete(p) => {
                let key = pod_key(p);
                let after = if matches!(event, Event::Delete(_)) { None } else { counted_on(p) };
                let before = match &after {
                    Some(n) => self.on.insert(key, n.clone()),
                    None => self.on.remove(&key),
                };
                if before != after {
                    for n in before.into_iter().chain(after) {
                        self.changed.insert(n, now);
                    }
                }
            }
        }
        if now - self.pruned_at >= PRUNE_EVERY {
            self.pruned_at = now;
            self.changed.retain(|_, t| now - *t < REMEMBERED_FOR);
        }
    }

    /// Node name → when its pods last changed (Unix seconds), for the changes still
    /// remembered.
    pub fn times(&self) -> BTreeMap<String, i64> {
        self.changed.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>) -> Pod {
        let mut p = Pod::default();
        p.metadata.namespace = Some("default".into());
        p.metadata.name = Some(name.into());
        p.spec = Some(tenon_core::cached_pod::PodSpec { node_name: node.map(String::from), ..Default::default() });
        p
    }

    fn listed(pods: &[Pod]) -> PodChanges {
        let mut c = PodChanges::default();
        c.observe(&Event::Init, 0);
        for p in pods {
            c.observe(&Event::InitApply(p.clone()), 0);
        }
        c.observe(&Event::InitDone, 0);
        c
    }

    #[test]
    fn the_first_list_is_no_change() {
        assert!(listed(&[pod("a", Some("n1"))]).times().is_empty());
    }

    #[test]
    fn a_binding_a_deletion_and_a_terminating_pod_are_changes_a_status_update_is_not() {
        let mut c = listed(&[pod("a", Some("n1")), pod("b", Some("n2"))]);
        c.observe(&Event::Apply(pod("a", Some("n1"))), 10);
        assert!(c.times().is_empty(), "the same pod on the same node: no change");
        c.observe(&Event::Apply(pod("c", None)), 11);
        assert!(c.times().is_empty(), "a pending pod changes no node");
        c.observe(&Event::Apply(pod("c", Some("n3"))), 12);
        let mut terminating = pod("b", Some("n2"));
        terminating.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        c.observe(&Event::Apply(terminating.clone()), 13);
        c.observe(&Event::Delete(terminating), 14);
        c.observe(&Event::Delete(pod("a", Some("n1"))), 15);
        assert_eq!(c.times(), BTreeMap::from([("n1".into(), 15), ("n2".into(), 13), ("n3".into(), 12)]));
    }

    #[test]
    fn a_relist_counts_what_changed_while_the_watch_was_down() {
        let mut c = listed(&[pod("a", Some("n1")), pod("b", Some("n2"))]);
        c.observe(&Event::Init, 20);
        c.observe(&Event::InitApply(pod("b", Some("n2"))), 20);
        c.observe(&Event::InitApply(pod("c", Some("n3"))), 20);
        c.observe(&Event::InitDone, 21);
        assert_eq!(c.times(), BTreeMap::from([("n1".into(), 21), ("n3".into(), 21)]));
    }

    #[test]
    fn a_change_is_forgotten_once_the_status_has_long_caught_up() {
        let mut c = listed(&[]);
        c.observe(&Event::Apply(pod("a", Some("n1"))), 100);
        c.observe(&Event::Apply(pod("b", None)), 100 + REMEMBERED_FOR);
        assert!(c.times().is_empty());
    }
}
