//! Karpenter's NodePool registration health: each NodePool keeps the outcomes of its last
//! [`BUFFER`] NodeClaims (registered, or given up by liveness). `NodeRegistrationHealthy`
//! turns False when half of those slots are failures and True again only when a success
//! leaves fewer than half; it is Unknown, and the record empty, after the NodePool or its
//! NodeClass changes. A NodePool is known by its UID, so a NodePool recreated under the
//! same name starts afresh and the old one's NodeClaims do not count.

use std::collections::{BTreeMap, VecDeque};

/// How many outcomes a NodePool keeps.
pub const BUFFER: usize = 4;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Health {
    Unknown,
    Healthy,
    Unhealthy,
}

/// The condition a NodePool's `NodeRegistrationHealthy` is to be set to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub healthy: bool,
    pub reason: String,
    pub message: String,
}

#[derive(Clone, Debug, Default)]
struct Outcomes(VecDeque<bool>);

impl Outcomes {
    fn push(&mut self, ok: bool) {
        if self.0.len() == BUFFER {
            self.0.pop_front();
        }
        self.0.push_back(ok);
    }

    fn health(&self) -> Health {
        if self.0.is_empty() {
            return Health::Unknown;
        }
        // Failures over the whole buffer, not over what it holds: two failures are enough.
        let failed = self.0.iter().filter(|ok| !**ok).count();
        if failed * 2 >= BUFFER { Health::Unhealthy } else { Health::Healthy }
    }

    fn with(&self, ok: bool) -> Outcomes {
        let mut o = self.clone();
        o.push(ok);
        o
    }
}

/// Every NodePool's record, by NodePool UID.
#[derive(Clone, Debug, Default)]
pub struct RegistrationHealth {
    pools: BTreeMap<String, Outcomes>,
}

impl RegistrationHealth {
    pub fn health(&self, pool_uid: &str) -> Health {
        self.pools.get(pool_uid).map_or(Health::Unknown, Outcomes::health)
    }

    /// A NodeClaim of the pool was given up. `condition` is the pool's condition now (None:
    /// Unknown); `why` the reason and message to set it False with. The verdict, when the
    /// condition is to change.
    pub fn failed(&mut self, pool_uid: &str, condition: Option<bool>, why: (&str, &str)) -> Option<Verdict> {
        let outcomes = self.pools.entry(pool_uid.to_string()).or_default();
        let verdict = (outcomes.with(false).health() == Health::Unhealthy && condition != Some(false))
            .then(|| Verdict { healthy: false, reason: why.0.into(), message: why.1.into() });
        outcomes.push(false);
        verdict
    }

    /// A NodeClaim of the pool registered. The verdict, when the condition is to change.
    pub fn registered(&mut self, pool_uid: &str, condition: Option<bool>) -> Option<Verdict> {
        let outcomes = self.pools.entry(pool_uid.to_string()).or_default();
        let verdict = (outcomes.with(true).health() == Health::Healthy && condition != Some(true)).then(|| Verdict {
            healthy: true,
            reason: "NodeRegistrationHealthy".into(),
            message: String::new(),
        });
        outcomes.push(true);
        verdict
    }

    /// After a restart, an empty record takes the pool's condition as its history: True as
    /// one success, False as enough failures to stay False.
    pub fn hydrate(&mut self, pool_uid: &str, condition: Option<bool>) {
        if self.health(pool_uid) != Health::Unknown {
            return;
        }
        let outcomes = self.pools.entry(pool_uid.to_string()).or_default();
        match condition {
            Some(true) => outcomes.push(true),
            Some(false) => (0..BUFFER / 2).for_each(|_| outcomes.push(false)),
            None => {}
        }
    }

    /// The pool or its NodeClass changed: its history no longer says anything.
    pub fn reset(&mut self, pool_uid: &str) {
        self.pools.remove(pool_uid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WHY: (&str, &str) = ("RegistrationFailed", "Failed to register node");

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:304
    #[test]
    fn two_failures_turn_a_healthy_pool_unhealthy() {
        let mut h = RegistrationHealth::default();
        h.hydrate("np", Some(true));
        assert_eq!(h.failed("np", Some(true), WHY), None, "one failure next to a success is not enough");
        let v = h.failed("np", Some(true), WHY).expect("the second failure flips it");
        assert_eq!((v.healthy, v.reason.as_str(), v.message.as_str()), (false, WHY.0, WHY.1));
        assert_eq!(h.health("np"), Health::Unhealthy);
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:354
    #[test]
    fn two_failures_turn_an_unknown_pool_unhealthy_and_a_false_one_is_not_rewritten() {
        let mut h = RegistrationHealth::default();
        assert_eq!(h.failed("np", None, WHY), None);
        assert!(h.failed("np", None, WHY).is_some_and(|v| !v.healthy));
        assert_eq!(h.failed("np", Some(false), WHY), None, "already False");
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:495
    #[test]
    fn a_registration_turns_a_false_pool_true_once_failures_are_under_half() {
        let mut h = RegistrationHealth::default();
        h.hydrate("np", Some(false));
        assert_eq!(h.health("np"), Health::Unhealthy);
        // [F, F] + T = 2 of 4 failed: still unhealthy; + T again = [F, F, T, T]: still 2 of 4.
        assert_eq!(h.registered("np", Some(false)), None);
        assert_eq!(h.registered("np", Some(false)), None);
        // The third success pushes the first failure out.
        assert!(h.registered("np", Some(false)).is_some_and(|v| v.healthy));
        // Karpenter's case: False on the NodePool, nothing recorded (a restart): healthy at once.
        let mut fresh = RegistrationHealth::default();
        assert!(fresh.registered("np", Some(false)).is_some_and(|v| v.healthy));
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:531
    #[test]
    fn one_success_after_two_failures_leaves_the_pool_unhealthy() {
        let mut h = RegistrationHealth::default();
        h.failed("np", None, WHY);
        h.failed("np", None, WHY);
        assert_eq!(h.registered("np", Some(false)), None);
        assert_eq!(h.health("np"), Health::Unhealthy);
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:616
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:403
    #[test]
    fn pools_are_kept_by_uid_and_a_reset_forgets() {
        let mut h = RegistrationHealth::default();
        h.failed("old-uid", None, WHY);
        h.failed("old-uid", None, WHY);
        assert_eq!(h.health("new-uid"), Health::Unknown, "a NodePool recreated under the same name starts afresh");
        h.reset("old-uid");
        assert_eq!(h.health("old-uid"), Health::Unknown);
    }
}
