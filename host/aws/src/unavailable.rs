//! Karpenter's unavailable-offerings cache: an offering that just failed for capacity is
//! left out of decisions for a while (3 minutes), so the next launch goes elsewhere instead
//! of failing the same way.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tenon_core::cloud::UnavailableOffering;

pub const TTL: Duration = Duration::from_secs(180);

#[derive(Debug, Default)]
pub struct UnavailableOfferings {
    until: Mutex<BTreeMap<UnavailableOffering, Instant>>,
}

impl UnavailableOfferings {
    pub fn mark(&self, o: UnavailableOffering, now: Instant) {
        if let Ok(mut m) = self.until.lock() {
            m.insert(o, now + TTL);
        }
    }

    pub fn is_unavailable(&self, instance_type: &str, zone: &str, capacity_type: &str, now: Instant) -> bool {
        let key = UnavailableOffering {
            instance_type: instance_type.to_string(),
            zone: zone.to_string(),
            capacity_type: capacity_type.to_string(),
        };
        self.until.lock().map(|m| m.get(&key).is_some_and(|&t| now < t)).unwrap_or(false)
    }

    /// Entries still in force (expired ones are dropped).
    pub fn current(&self, now: Instant) -> Vec<UnavailableOffering> {
        let Ok(mut m) = self.until.lock() else { return Vec::new() };
        m.retain(|_, t| now < *t);
        m.keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offerings_come_back_after_three_minutes() {
        let c = UnavailableOfferings::default();
        let t0 = Instant::now();
        c.mark(
            UnavailableOffering {
                instance_type: "m6a.large".into(),
                zone: "us-east-1a".into(),
                capacity_type: "spot".into(),
            },
            t0,
        );
        assert!(c.is_unavailable("m6a.large", "us-east-1a", "spot", t0 + Duration::from_secs(179)));
        assert!(!c.is_unavailable("m6a.large", "us-east-1b", "spot", t0), "other zones are unaffected");
        assert!(!c.is_unavailable("m6a.large", "us-east-1a", "on-demand", t0), "other capacity types too");
        assert!(!c.is_unavailable("m6a.large", "us-east-1a", "spot", t0 + TTL));
        assert!(c.current(t0 + TTL).is_empty());
    }
}
