//! Karpenter's NodeClaim liveness: a NodeClaim that is not Launched within
//! [`LAUNCH_TIMEOUT_MS`] of its creation, or whose launched instance has not registered a
//! Node within [`REGISTRATION_TIMEOUT_MS`] of it, is deleted (its instance, if any, is
//! terminated) and its pods get a new decision.

pub const LAUNCH_TIMEOUT_MS: i64 = 5 * 60_000;
pub const REGISTRATION_TIMEOUT_MS: i64 = 15 * 60_000;

/// A NodeClaim's progress as far as liveness goes (times in ms).
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub created: i64,
    /// When it was Launched, if it was.
    pub launched: Option<i64>,
    pub registered: bool,
}

/// Why the NodeClaim is to be deleted now, if it is: Karpenter's metric reason
/// (`launch_timeout`, `registration_timeout`) and a message for its Event.
pub fn expired(p: Progress, now: i64) -> Option<(&'static str, String)> {
    match p.launched {
        None if now - p.created >= LAUNCH_TIMEOUT_MS => {
            Some(("launch_timeout", format!("not launched within {}m of creation", LAUNCH_TIMEOUT_MS / 60_000)))
        }
        Some(at) if !p.registered && now - at >= REGISTRATION_TIMEOUT_MS => Some((
            "registration_timeout",
            format!("no Node registered within {}m of launch", REGISTRATION_TIMEOUT_MS / 60_000),
        )),
        _ => None,
    }
}

/// When [`expired`] would next change its answer (ms), for a shell that sleeps until then.
pub fn due(p: Progress) -> Option<i64> {
    match p.launched {
        None => Some(p.created + LAUNCH_TIMEOUT_MS),
        Some(at) if !p.registered => Some(at + REGISTRATION_TIMEOUT_MS),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nodeclaim_not_launched_in_five_minutes_is_given_up() {
        let p = Progress { created: 0, launched: None, registered: false };
        assert_eq!(expired(p, 299_999), None);
        assert_eq!(expired(p, 300_000).map(|e| e.0), Some("launch_timeout"));
        assert_eq!(due(p), Some(300_000));
    }

    #[test]
    fn a_launched_nodeclaim_gets_fifteen_minutes_to_register() {
        let p = Progress { created: 0, launched: Some(10_000), registered: false };
        assert_eq!(expired(p, 909_999), None);
        assert_eq!(expired(p, 910_000).map(|e| e.0), Some("registration_timeout"));
        let joined = Progress { registered: true, ..p };
        assert_eq!(expired(joined, 10_000_000), None);
        assert_eq!(due(joined), None);
    }
}
