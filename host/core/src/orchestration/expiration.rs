//! NodeClaim expiration as Karpenter's own controller does it: each NodeClaim expires at its
//! creation plus its own `spec.expireAfter` (stamped from the NodePool at launch, so editing
//! the NodePool later moves no existing node's date) and is then deleted, outside disruption
//! budgets and whatever its node's state, annotations or pods; termination drains it.

/// What expiration reads of one NodeClaim. Times in seconds since the epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lifetime<'a> {
    pub nodeclaim: &'a str,
    pub created: i64,
    /// `spec.expireAfter`; `None` is `Never`.
    pub expire_after: Option<i64>,
    /// Already being deleted: expiring it again would count it twice.
    pub deleting: bool,
    /// Of this controller's cloud provider (its NodeClass group): others are left alone.
    pub managed: bool,
}

impl Lifetime<'_> {
    fn expires_at(&self) -> Option<i64> {
        if self.deleting || !self.managed {
            return None;
        }
        self.expire_after.map(|e| self.created.saturating_add(e))
    }
}

/// What the `Expired` Event on an expired NodeClaim says.
pub fn reason(expire_after: Option<i64>) -> String {
    match expire_after {
        Some(s) if s % 3600 == 0 && s > 0 => format!("expired after {}h", s / 3600),
        Some(s) if s % 60 == 0 && s > 0 => format!("expired after {}m", s / 60),
        Some(s) => format!("expired after {s}s"),
        None => "expired".into(),
    }
}

/// The NodeClaims to delete at `now`.
pub fn due<'a>(claims: &[Lifetime<'a>], now: i64) -> Vec<&'a str> {
    claims.iter().filter(|c| c.expires_at().is_some_and(|at| now >= at)).map(|c| c.nodeclaim).collect()
}

/// The next time one of `claims` expires after `now` (when to look again).
pub fn next(claims: &[Lifetime<'_>], now: i64) -> Option<i64> {
    claims.iter().filter_map(Lifetime::expires_at).filter(|&at| at > now).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(expire_after: Option<i64>) -> Lifetime<'static> {
        Lifetime { nodeclaim: "nc", created: 1_000, expire_after, deleting: false, managed: true }
    }

    /// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:185
    /// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:201
    #[test]
    fn a_nodeclaim_past_its_expire_after_is_deleted_whatever_its_node() {
        // 30 s expireAfter, 60 s later; nothing about a Node is read.
        assert_eq!(due(&[claim(Some(30))], 1_060), vec!["nc"]);
        assert_eq!(due(&[claim(Some(30))], 1_030), vec!["nc"], "due at the instant it expires");
    }

    /// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:186
    #[test]
    fn a_nodeclaim_of_another_provider_is_left_alone() {
        let other = Lifetime { managed: false, ..claim(Some(30)) };
        assert!(due(&[other], 1_060).is_empty());
        assert_eq!(next(&[other], 1_000), None);
    }

    /// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:189
    #[test]
    fn expire_after_never_never_expires() {
        assert!(due(&[claim(None)], i64::MAX).is_empty());
        assert_eq!(next(&[claim(None)], 0), None);
    }

    /// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:195
    #[test]
    fn a_nodeclaim_inside_its_expire_after_stays() {
        assert!(due(&[claim(Some(200))], 1_000).is_empty());
        assert!(due(&[claim(Some(200))], 1_199).is_empty());
    }

    /// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:212
    #[test]
    fn the_next_look_is_when_the_nodeclaim_expires() {
        // 200 s expireAfter, 100 s in: 100 s to go.
        assert_eq!(next(&[claim(Some(200))], 1_100).map(|at| at - 1_100), Some(100));
        let sooner = Lifetime { nodeclaim: "b", created: 1_050, ..claim(Some(100)) };
        assert_eq!(next(&[claim(Some(200)), sooner], 1_100), Some(1_150));
    }

    /// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:221
    #[test]
    fn a_nodeclaim_being_deleted_is_not_expired_again() {
        let deleting = Lifetime { deleting: true, ..claim(Some(30)) };
        assert!(due(&[deleting], 1_060).is_empty());
    }

    #[test]
    fn each_nodeclaim_keeps_its_own_expire_after() {
        // An older NodeClaim stamped with 720h, a newer one with 1h: lowering the NodePool's
        // value touches neither; each goes at its own time.
        let old = Lifetime { nodeclaim: "old", created: 0, ..claim(Some(720 * 3600)) };
        let new = Lifetime { nodeclaim: "new", created: 7_200, ..claim(Some(3600)) };
        assert!(due(&[old, new], 7_200).is_empty());
        assert_eq!(due(&[old, new], 10_800), vec!["new"]);
        assert_eq!(due(&[old, new], 720 * 3600), vec!["old", "new"]);
    }
}
