//! Karpenter's NodeClaim liveness: a NodeClaim not Launched within [`LAUNCH_TIMEOUT_MS`], or
//! not Registered within [`REGISTRATION_TIMEOUT_MS`], is deleted (its instance, if any, is
//! terminated) and its pods get a new decision. Both clocks run from the last transition of
//! the condition in question (Unknown from the NodeClaim's first reconcile), so a launch retry
//! does not restart them and a long launch eats into the registration window, as in Karpenter.

pub const LAUNCH_TIMEOUT_MS: i64 = 5 * 60_000;
pub const REGISTRATION_TIMEOUT_MS: i64 = 15 * 60_000;

/// A NodeClaim's progress as far as liveness goes (times in ms).
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub launched: bool,
    /// The Launched condition's last transition (its creation without one).
    pub launched_since: i64,
    pub registered: bool,
    /// The Registered condition's last transition (its creation without one).
    pub registered_since: i64,
}

impl Progress {
    /// A NodeClaim created at `created` that has no conditions yet.
    pub fn new(created: i64) -> Progress {
        Progress { launched: false, launched_since: created, registered: false, registered_since: created }
    }
}

/// Why the NodeClaim is to be deleted now, if it is: Karpenter's metric reason
/// (`launch_timeout`, `registration_timeout`) and a message for its Event.
pub fn expired(p: Progress, now: i64) -> Option<(&'static str, String)> {
    if p.registered {
        return None;
    }
    if !p.launched {
        return (now - p.launched_since >= LAUNCH_TIMEOUT_MS)
            .then(|| ("launch_timeout", format!("not launched within {}m", LAUNCH_TIMEOUT_MS / 60_000)));
    }
    (now - p.registered_since >= REGISTRATION_TIMEOUT_MS)
        .then(|| ("registration_timeout", format!("no Node registered within {}m", REGISTRATION_TIMEOUT_MS / 60_000)))
}

/// When [`expired`] would next change its answer (ms), for a shell that sleeps until then.
pub fn due(p: Progress) -> Option<i64> {
    match (p.launched, p.registered) {
        (_, true) => None,
        (false, _) => Some(p.launched_since + LAUNCH_TIMEOUT_MS),
        (true, false) => Some(p.registered_since + REGISTRATION_TIMEOUT_MS),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = 60_000;

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:130
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:159
    #[test]
    fn a_nodeclaim_not_launched_in_five_minutes_is_given_up() {
        let p = Progress::new(0);
        assert_eq!(expired(p, 5 * MIN - 1), None);
        assert_eq!(expired(p, MIN), None);
        assert_eq!(expired(p, 5 * MIN).map(|e| e.0), Some("launch_timeout"));
        assert_eq!(due(p), Some(5 * MIN));
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:97
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:100
    #[test]
    fn a_launched_nodeclaim_gets_fifteen_minutes_to_register() {
        let p = Progress { launched: true, launched_since: 10_000, ..Progress::new(0) };
        assert_eq!(expired(p, 15 * MIN - 1), None);
        assert_eq!(expired(p, 15 * MIN).map(|e| e.0), Some("registration_timeout"));
        let joined = Progress { registered: true, ..p };
        assert_eq!(expired(joined, 10_000_000), None);
        assert_eq!(due(joined), None);
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:224
    #[test]
    fn the_launch_clock_is_the_launched_conditions_transition_not_creation() {
        // Created at 0, Launched (Unknown) since 10 m: at 12 m it has had 2 of its 5 minutes.
        let p = Progress { launched_since: 10 * MIN, ..Progress::new(0) };
        assert_eq!(expired(p, 12 * MIN), None);
        assert_eq!(due(p), Some(15 * MIN));
        assert_eq!(expired(p, 15 * MIN).map(|e| e.0), Some("launch_timeout"));
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:264
    #[test]
    fn the_registration_clock_is_the_registered_conditions_transition_not_creation() {
        let p = Progress { launched: true, launched_since: 10 * MIN, registered: false, registered_since: 10 * MIN };
        assert_eq!(expired(p, 16 * MIN), None);
        assert_eq!(due(p), Some(25 * MIN));
        assert_eq!(expired(p, 25 * MIN).map(|e| e.0), Some("registration_timeout"));
    }
}
