//! Karpenter's unavailable-offerings cache: an offering that just failed for capacity is
//! left out of decisions and launches for [`TTL_MS`], so the next attempt goes elsewhere
//! instead of failing the same way; then it is tried again.

use crate::cloud::UnavailableOffering;
use crate::instancetype::InstanceType;
use std::collections::BTreeMap;

pub const TTL_MS: i64 = 180_000;

#[derive(Clone, Debug, Default)]
pub struct UnavailableOfferings {
    until: BTreeMap<UnavailableOffering, i64>,
}

impl UnavailableOfferings {
    /// `o` failed for capacity at `now` (ms).
    pub fn mark(&mut self, o: UnavailableOffering, now: i64) {
        self.until.insert(o, now + TTL_MS);
    }

    /// Drops `o`'s entry, as its TTL running out would (Karpenter's cache `Delete`).
    pub fn forget(&mut self, o: &UnavailableOffering) {
        self.until.remove(o);
    }

    pub fn is_unavailable(&self, instance_type: &str, zone: &str, capacity_type: &str, now: i64) -> bool {
        let key = UnavailableOffering {
            instance_type: instance_type.to_string(),
            zone: zone.to_string(),
            capacity_type: capacity_type.to_string(),
        };
        self.until.get(&key).is_some_and(|&t| now < t)
    }

    /// Entries still in force; expired ones are dropped.
    pub fn current(&mut self, now: i64) -> Vec<UnavailableOffering> {
        self.until.retain(|_, t| now < *t);
        self.until.keys().cloned().collect()
    }

    /// `types` with the offerings in force here marked unavailable (the catalog a decision sees).
    pub fn apply(&mut self, types: &mut [InstanceType], now: i64) {
        let current = self.current(now);
        if current.is_empty() {
            return;
        }
        for it in types.iter_mut() {
            for o in &mut it.offerings {
                let key = UnavailableOffering {
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type.clone(),
                };
                if self.until.contains_key(&key) {
                    o.available = false;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offering(t: &str, z: &str, c: &str) -> UnavailableOffering {
        UnavailableOffering { instance_type: t.into(), zone: z.into(), capacity_type: c.into() }
    }

    #[test]
    fn an_offering_is_unavailable_for_three_minutes_then_tried_again() {
        let mut c = UnavailableOfferings::default();
        c.mark(offering("m5.large", "us-east-1a", "spot"), 1_000);
        assert!(c.is_unavailable("m5.large", "us-east-1a", "spot", 1_000));
        assert!(c.is_unavailable("m5.large", "us-east-1a", "spot", 180_999));
        assert!(!c.is_unavailable("m5.large", "us-east-1a", "spot", 181_000));
        assert!(!c.is_unavailable("m5.large", "us-east-1b", "spot", 1_000), "only that zone");
        assert!(!c.is_unavailable("m5.large", "us-east-1a", "on-demand", 1_000), "only that capacity type");
        assert_eq!(c.current(1_000).len(), 1);
        assert!(c.current(181_000).is_empty());
    }
}
