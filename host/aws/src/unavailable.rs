//! The unavailable-offerings cache the provider keeps (`tenon_core::orchestration::ice`,
//! the simulator's too) behind a lock, on a monotonic clock: an offering that just failed
//! for capacity is left out of instance types and launches for 3 minutes; so is a subnet
//! that ran out of addresses (while its zone has another), and a zone whose every subnet
//! did.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tenon_core::cloud::UnavailableOffering;
use tenon_core::orchestration::ice;

pub const TTL: Duration = Duration::from_millis(ice::TTL_MS as u64);

#[derive(Debug)]
pub struct UnavailableOfferings {
    epoch: Instant,
    cache: Mutex<ice::UnavailableOfferings>,
    /// Subnets out of free addresses, until when (ms from `epoch`).
    subnets: Mutex<BTreeMap<String, i64>>,
}

impl Default for UnavailableOfferings {
    fn default() -> Self {
        UnavailableOfferings { epoch: Instant::now(), cache: Mutex::default(), subnets: Mutex::default() }
    }
}

impl UnavailableOfferings {
    fn ms(&self, at: Instant) -> i64 {
        at.saturating_duration_since(self.epoch).as_millis() as i64
    }

    pub fn mark(&self, o: UnavailableOffering, now: Instant) {
        let now = self.ms(now);
        if let Ok(mut c) = self.cache.lock() {
            c.mark(o, now);
        }
    }

    /// Drops `o`'s entry, as its TTL running out would.
    pub fn forget(&self, o: &UnavailableOffering) {
        if let Ok(mut c) = self.cache.lock() {
            c.forget(o);
        }
    }

    pub fn is_unavailable(&self, instance_type: &str, zone: &str, capacity_type: &str, now: Instant) -> bool {
        let now = self.ms(now);
        self.cache.lock().map(|c| c.is_unavailable(instance_type, zone, capacity_type, now)).unwrap_or(false)
    }

    /// Subnet `id` has no free address (EC2's `InsufficientFreeAddressesInSubnet`).
    pub fn mark_subnet(&self, id: &str, now: Instant) {
        let until = self.ms(now) + ice::TTL_MS;
        if let Ok(mut s) = self.subnets.lock() {
            s.insert(id.to_string(), until);
        }
    }

    pub fn is_subnet_unavailable(&self, id: &str, now: Instant) -> bool {
        let now = self.ms(now);
        self.subnets.lock().map(|s| s.get(id).is_some_and(|&until| until > now)).unwrap_or(false)
    }

    /// Entries still in force (expired ones are dropped).
    pub fn current(&self, now: Instant) -> Vec<UnavailableOffering> {
        let now = self.ms(now);
        self.cache.lock().map(|mut c| c.current(now)).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_subnet_comes_back_after_three_minutes() {
        let c = UnavailableOfferings::default();
        let t0 = Instant::now();
        c.mark_subnet("subnet-a", t0);
        assert!(c.is_subnet_unavailable("subnet-a", t0 + Duration::from_secs(179)));
        assert!(!c.is_subnet_unavailable("subnet-b", t0));
        assert!(!c.is_subnet_unavailable("subnet-a", t0 + TTL));
    }

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
