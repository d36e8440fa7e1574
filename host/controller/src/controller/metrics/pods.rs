//! Karpenter's per-pod latency series: how long pods wait to be bound and to start, from
//! their creation and from when the provisioner first decided they could schedule, and how
//! long the provisioner took to decide at all. Times are seconds since the epoch; what the
//! provisioner saw and decided is remembered here until the pod has started or gone.

use super::Labels;
use super::SeriesLabels;
use super::cluster::SharedGauges;
use k8s_openapi::api::core::v1::PodCondition;
use std::collections::{BTreeMap, BTreeSet};
use tenon_core::cached_pod::Pod;

/// The gauges of one pass (complete: replace the families) and the durations observed since
/// the last one. A pod's series share its name and namespace (one copy for its five).
#[derive(Debug, Default)]
pub struct PodSeries {
    pub unstarted: SharedGauges,
    pub unbound: SharedGauges,
    pub provisioning_unstarted: SharedGauges,
    pub provisioning_unbound: SharedGauges,
    pub undecided: SharedGauges,
    /// Creation to Ready, for pods seen Pending.
    pub startup: Vec<f64>,
    /// Schedulable (as the provisioner decided) to Ready.
    pub provisioning_startup: Vec<f64>,
    /// Creation to bound.
    pub bound: Vec<f64>,
    /// Schedulable to bound.
    pub provisioning_bound: Vec<f64>,
}

#[derive(Debug, Default)]
pub struct PodTimes {
    /// When the provisioner first saw each pod waiting for capacity.
    acked: BTreeMap<String, f64>,
    /// Pods a provisioning decision has looked at.
    attempted: BTreeSet<String>,
    /// When a decision first found a place for each pod (forgotten when one finds none).
    schedulable: BTreeMap<String, f64>,
    /// Pods seen Pending: their start is measured.
    pending: BTreeSet<String>,
    /// Pods seen Pending: their binding is measured.
    unbound: BTreeSet<String>,
}

fn key(p: &Pod) -> String {
    tenon_core::convert::pod_key(p)
}

fn condition<'a>(p: &'a Pod, type_: &str) -> Option<&'a PodCondition> {
    p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

fn since(c: &PodCondition) -> Option<f64> {
    Some(c.last_transition_time.as_ref()?.0.as_second() as f64)
}

fn named(p: &Pod) -> Labels {
    vec![
        ("name", p.metadata.name.clone().unwrap_or_default()),
        ("namespace", p.metadata.namespace.clone().unwrap_or_default()),
    ]
}

impl PodTimes {
    /// The provisioner saw these pods waiting for capacity at `now` (only the first time counts).
    pub fn ack<'a>(&mut self, pods: impl IntoIterator<Item = &'a str>, now: f64) {
        for p in pods {
            self.acked.entry(p.to_string()).or_insert(now);
        }
    }

    /// A provisioning decision at `now` found a place for `placed` and none for `failed`;
    /// returns, for pods decided on for the first time, the seconds since they were first seen.
    pub fn decided(&mut self, placed: &[String], failed: &[String], now: f64) -> Vec<f64> {
        let mut first = Vec::new();
        for (p, fits) in placed.iter().map(|p| (p, true)).chain(failed.iter().map(|p| (p, false))) {
            if fits {
                self.schedulable.entry(p.clone()).or_insert(now);
            } else {
                self.schedulable.remove(p);
            }
            if self.attempted.insert(p.clone())
                && let Some(ack) = self.acked.get(p)
            {
                first.push((now - ack).max(0.0));
            }
        }
        first
    }

    fn forget(&mut self, k: &str) {
        self.acked.remove(k);
        self.attempted.remove(k);
        self.schedulable.remove(k);
    }

    /// This pass's series over every pod, at `now`.
    pub fn observe(&mut self, pods: &[std::sync::Arc<Pod>], now: f64) -> PodSeries {
        let mut out = PodSeries::default();
        let mut live = BTreeSet::new();
        // Nothing remembered (a settled cluster): only a Pending pod has anything to time,
        // and the others need not even be named.
        let remembering = !(self.acked.is_empty()
            && self.attempted.is_empty()
            && self.schedulable.is_empty()
            && self.pending.is_empty()
            && self.unbound.is_empty());
        for p in pods {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
            if !remembering && phase != "Pending" {
                continue;
            }
            let k = key(p);
            live.insert(k.clone());
            let created = p.metadata.creation_timestamp.as_ref().map_or(now, |t| t.0.as_second() as f64);
            let scheduled = condition(p, "PodScheduled").filter(|c| c.status == "True");
            let schedulable = self.schedulable.get(&k).copied();
            let pod_labels = std::cell::OnceCell::new();
            let series = || SeriesLabels::new(pod_labels.get_or_init(|| std::sync::Arc::new(named(p))), vec![]);
            if !self.attempted.contains(&k)
                && scheduled.is_none()
                && let Some(ack) = self.acked.get(&k)
            {
                out.undecided.push((series(), (now - ack).max(0.0)));
            }
            // Binding.
            if phase == "Pending" {
                if scheduled.is_none() {
                    out.unbound.push((series(), (now - created).max(0.0)));
                    if let Some(s) = schedulable {
                        out.provisioning_unbound.push((series(), (now - s).max(0.0)));
                    }
                }
                self.unbound.insert(k.clone());
            } else if let Some(at) = scheduled.and_then(since).filter(|_| self.unbound.remove(&k)) {
                out.bound.push((at - created).max(0.0));
                if let Some(s) = schedulable {
                    out.provisioning_bound.push((at - s).max(0.0));
                }
            }
            // Start.
            let unstarted = |out: &mut PodSeries| {
                out.unstarted.push((series(), (now - created).max(0.0)));
                if let Some(s) = schedulable {
                    out.provisioning_unstarted.push((series(), (now - s).max(0.0)));
                }
            };
            if phase == "Pending" {
                unstarted(&mut out);
                self.pending.insert(k);
            } else if self.pending.contains(&k) {
                match condition(p, "Ready").filter(|c| c.status == "True") {
                    Some(ready) => {
                        if let Some(at) = since(ready) {
                            out.startup.push((at - created).max(0.0));
                            if let Some(s) = schedulable {
                                out.provisioning_startup.push((at - s).max(0.0));
                            }
                        }
                        self.pending.remove(&k);
                        self.forget(&k);
                    }
                    // Terminal without ever being Ready: not a startup.
                    None if matches!(phase, "Succeeded" | "Failed") => {
                        self.pending.remove(&k);
                        self.forget(&k);
                    }
                    None => unstarted(&mut out),
                }
            }
        }
        self.pending.retain(|k| live.contains(k));
        self.unbound.retain(|k| live.contains(k));
        self.acked.retain(|k, _| live.contains(k));
        self.attempted.retain(|k| live.contains(k));
        self.schedulable.retain(|k, _| live.contains(k));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tenon_core::convert::shared;

    const T0: i64 = 1_767_225_600;

    fn at(s: i64) -> String {
        k8s_openapi::jiff::Timestamp::from_second(T0 + s).unwrap().to_string()
    }

    fn pod(status: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "a", "namespace": "default", "creationTimestamp": at(0)},
            "spec": {"containers": []},
            "status": status
        }))
        .unwrap()
    }

    fn value(g: &SharedGauges) -> Option<f64> {
        g.first().map(|(_, v)| *v)
    }

    #[test]
    fn a_pod_is_timed_from_creation_and_from_the_decision_until_bound_and_started() {
        let mut t = PodTimes::default();
        let pending = pod(json!({"phase": "Pending"}));
        let s = t.observe(&shared([pending.clone()]), (T0 + 2) as f64);
        assert_eq!(value(&s.unbound), Some(2.0));
        assert_eq!(value(&s.unstarted), Some(2.0));
        assert!(s.undecided.is_empty(), "not seen by the provisioner yet");
        t.ack(["default/a"], (T0 + 3) as f64);
        let s = t.observe(&shared([pending.clone()]), (T0 + 5) as f64);
        assert_eq!(value(&s.undecided), Some(2.0));
        assert!(s.provisioning_unbound.is_empty(), "no decision yet");
        assert_eq!(t.decided(&["default/a".into()], &[], (T0 + 6) as f64), vec![3.0]);
        assert!(t.decided(&["default/a".into()], &[], (T0 + 7) as f64).is_empty(), "the first decision only");
        let s = t.observe(&shared([pending.clone()]), (T0 + 10) as f64);
        assert!(s.undecided.is_empty());
        assert_eq!(value(&s.provisioning_unbound), Some(4.0));
        assert_eq!(value(&s.provisioning_unstarted), Some(4.0));
        assert_eq!(s.unbound[0].0, vec![("name", "a".to_string()), ("namespace", "default".to_string())].into());
        // One copy of the pod's labels for its series.
        assert!(std::sync::Arc::ptr_eq(&s.unbound[0].0.shared, &s.unstarted[0].0.shared));

        let bound = pod(json!({"phase": "Pending", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": at(20)}]}));
        let s = t.observe(&shared([bound.clone()]), (T0 + 21) as f64);
        assert!(s.unbound.is_empty(), "bound");
        assert!(s.bound.is_empty(), "measured once it leaves Pending, as Karpenter does");
        assert_eq!(value(&s.unstarted), Some(21.0));

        let running = pod(json!({"phase": "Running", "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": at(20)},
            {"type": "Ready", "status": "True", "lastTransitionTime": at(30)}]}));
        let s = t.observe(&shared([running.clone()]), (T0 + 31) as f64);
        assert_eq!((s.bound, s.provisioning_bound), (vec![20.0], vec![14.0]));
        assert_eq!((s.startup, s.provisioning_startup), (vec![30.0], vec![24.0]));
        assert!(s.unstarted.is_empty());
        let s = t.observe(&shared([running]), (T0 + 40) as f64);
        assert!(s.startup.is_empty() && s.bound.is_empty(), "counted once");
    }

    #[test]
    fn a_decision_finding_no_place_forgets_when_the_pod_was_schedulable() {
        let mut t = PodTimes::default();
        let pending = pod(json!({"phase": "Pending"}));
        t.ack(["default/a"], T0 as f64);
        t.decided(&["default/a".into()], &[], (T0 + 1) as f64);
        t.decided(&[], &["default/a".into()], (T0 + 2) as f64);
        let s = t.observe(&shared([pending]), (T0 + 5) as f64);
        assert!(s.provisioning_unbound.is_empty() && s.undecided.is_empty());
        assert_eq!(value(&s.unbound), Some(5.0));
    }

    #[test]
    fn pods_seen_running_first_and_terminal_pods_are_not_startups() {
        let mut t = PodTimes::default();
        let running = pod(json!({"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": at(30)}]}));
        assert!(t.observe(&shared([running]), (T0 + 31) as f64).startup.is_empty());
        let mut t = PodTimes::default();
        t.observe(&shared([pod(json!({"phase": "Pending"}))]), (T0 + 1) as f64);
        let s = t.observe(&shared([pod(json!({"phase": "Failed"}))]), (T0 + 2) as f64);
        assert!(s.startup.is_empty() && s.unstarted.is_empty());
    }

    #[test]
    fn gone_pods_are_forgotten() {
        let mut t = PodTimes::default();
        t.ack(["default/a"], T0 as f64);
        t.observe(&shared([pod(json!({"phase": "Pending"}))]), (T0 + 1) as f64);
        t.observe(&[], (T0 + 2) as f64);
        assert!(t.acked.is_empty() && t.pending.is_empty() && t.unbound.is_empty());
    }
}
