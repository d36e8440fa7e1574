//! Karpenter's provisioning batcher. A pending pod triggers a batch when first seen and
//! again every [`REQUEUE_MS`] while it stays pending (Karpenter's pod controller requeues it
//! that often); a batch closes `idle` after its last trigger or `max` after its first, and
//! the decision runs then. A pod triggers a batch once: a pod already in the open batch
//! does not extend it.

use std::collections::{BTreeMap, BTreeSet};

/// How often a pod that stays pending triggers provisioning again.
pub const REQUEUE_MS: i64 = 10_000;

#[derive(Clone, Debug, Default)]
pub struct Batcher {
    /// Each pending pod, and when it triggers next.
    next_trigger: BTreeMap<String, i64>,
    /// The open batch: (first trigger, last trigger), and the pods in it.
    window: Option<(i64, i64)>,
    members: BTreeSet<String>,
}

impl Batcher {
    /// Feeds the pods pending at `now` (ms); true when a batch closes: decide now.
    pub fn observe(&mut self, now: i64, pending: &BTreeSet<String>, idle_ms: i64, max_ms: i64) -> bool {
        self.next_trigger.retain(|k, _| pending.contains(k));
        for pod in pending {
            let due = self.next_trigger.get(pod).is_none_or(|&t| now >= t);
            if !due {
                continue;
            }
            self.next_trigger.insert(pod.clone(), now + REQUEUE_MS);
            if self.members.insert(pod.clone()) {
                self.window = Some(self.window.map_or((now, now), |(first, _)| (first, now)));
            }
        }
        match self.window {
            Some((first, last)) if now - last >= idle_ms || now - first >= max_ms => {
                self.window = None;
                self.members.clear();
                true
            }
            _ => false,
        }
    }

    /// A batch is collecting pods.
    pub fn open(&self) -> bool {
        self.window.is_some()
    }

    /// When the next thing happens without a new pod: the open batch closes or a pending
    /// pod triggers again (ms), for a shell that sleeps until then.
    pub fn next_event(&self, idle_ms: i64, max_ms: i64) -> Option<i64> {
        let close = self.window.map(|(first, last)| (last + idle_ms).min(first + max_ms));
        close.into_iter().chain(self.next_trigger.values().copied()).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: i64 = 1_000;
    const MAX: i64 = 10_000;

    fn pods(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    /// The times (ms, stepping by 100) at which `b` decides while `pending(t)` is pending.
    fn decisions(b: &mut Batcher, until: i64, pending: impl Fn(i64) -> BTreeSet<String>) -> Vec<i64> {
        (0..=until).step_by(100).filter(|&t| b.observe(t, &pending(t), IDLE, MAX)).collect()
    }

    #[test]
    fn a_batch_closes_after_the_idle_window() {
        let mut b = Batcher::default();
        assert_eq!(decisions(&mut b, 1_500, |_| pods(&["a"])), vec![1_000]);
    }

    #[test]
    fn a_new_pod_extends_the_window_the_same_pod_does_not() {
        let mut b = Batcher::default();
        // b arrives at 0.8 s: the batch closes 1 s after it.
        let d = decisions(&mut b, 2_500, |t| if t < 800 { pods(&["a"]) } else { pods(&["a", "b"]) });
        assert_eq!(d, vec![1_800]);
    }

    #[test]
    fn a_steady_stream_of_new_pods_is_cut_at_the_max_window() {
        let mut b = Batcher::default();
        let d = decisions(&mut b, 10_500, |t| (0..=t / 500).map(|i| format!("p{i}")).collect());
        assert_eq!(d, vec![10_000]);
    }

    #[test]
    fn a_pod_left_pending_triggers_again_ten_seconds_after_it_last_did() {
        let mut b = Batcher::default();
        // Triggered at 0 and decided at 1 s; triggers again at 10 s, decided at 11 s; …
        assert_eq!(decisions(&mut b, 22_000, |_| pods(&["stuck"])), vec![1_000, 11_000, 21_000]);
        assert!(!b.open());
    }

    #[test]
    fn nothing_pending_nothing_decided() {
        let mut b = Batcher::default();
        assert!(decisions(&mut b, 30_000, |_| pods(&[])).is_empty());
        assert_eq!(b.next_event(IDLE, MAX), None);
    }

    #[test]
    fn the_next_event_is_the_close_or_the_next_requeue() {
        let mut b = Batcher::default();
        b.observe(0, &pods(&["a"]), IDLE, MAX);
        assert_eq!(b.next_event(IDLE, MAX), Some(1_000));
        assert!(b.observe(1_000, &pods(&["a"]), IDLE, MAX));
        assert_eq!(b.next_event(IDLE, MAX), Some(10_000));
    }
}
