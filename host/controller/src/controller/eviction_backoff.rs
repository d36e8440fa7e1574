//! Per-pod backoff for evictions the API server refused (a PDB's 429, several PDBs): the pod
//! is asked for again after 1 s, then 2, 4, … up to a minute, as Karpenter's eviction queue
//! requeues it, rather than on every pass; an eviction that went through, or a pod gone,
//! clears it.

use std::collections::BTreeMap;
use std::sync::Mutex;

const FIRST_SECS: i64 = 1;
const MAX_SECS: i64 = 60;

#[derive(Default)]
pub struct EvictionBackoff {
    /// pod UID → (when it may be asked for again, the delay that led there), seconds.
    refused: Mutex<BTreeMap<String, (i64, i64)>>,
}

impl EvictionBackoff {
    /// Whether the pod's eviction may be asked for at `now`.
    pub fn ready(&self, uid: &str, now: i64) -> bool {
        self.refused.lock().map(|m| m.get(uid).is_none_or(|(at, _)| now >= *at)).unwrap_or(true)
    }

    /// The pod's eviction was refused at `now`.
    pub fn refused(&self, uid: &str, now: i64) {
        if let Ok(mut m) = self.refused.lock() {
            let delay = m.get(uid).map_or(FIRST_SECS, |(_, d)| (d * 2).min(MAX_SECS));
            m.insert(uid.to_string(), (now + delay, delay));
        }
    }

    pub fn done(&self, uid: &str) {
        if let Ok(mut m) = self.refused.lock() {
            m.remove(uid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_back_off_doubling_to_a_minute_and_success_clears() {
        let b = EvictionBackoff::default();
        assert!(b.ready("p", 0));
        b.refused("p", 0);
        assert!(!b.ready("p", 0) && b.ready("p", 1));
        b.refused("p", 1);
        assert!(!b.ready("p", 2) && b.ready("p", 3), "2 s after the second refusal");
        for t in 0..10 {
            b.refused("p", 100 + t);
        }
        assert!(!b.ready("p", 109 + 59) && b.ready("p", 109 + 60), "capped at a minute");
        assert!(b.ready("q", 0), "per pod");
        b.done("p");
        assert!(b.ready("p", 0));
    }
}
