//! The circuit breaker around one policy hook: after [`TRIP_AFTER`] failures in a row the
//! policy is skipped (its fallback decides) for a backoff that starts at [`FIRST_BACKOFF`]
//! seconds and doubles up to [`MAX_BACKOFF`]; then one call is tried again. A success closes
//! the breaker. Time is the decisions' own (`now`, seconds), so a simulation in virtual time
//! behaves as the controller does in real time.

use crate::error::FailureKind;
use std::collections::BTreeMap;

pub const TRIP_AFTER: u32 = 5;
pub const FIRST_BACKOFF: i64 = 30;
pub const MAX_BACKOFF: i64 = 600;

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Breaker {
    /// Failures since the last success.
    pub consecutive: u32,
    /// Those failures by kind.
    pub by_kind: BTreeMap<FailureKind, u32>,
    /// Skipped until this time, while open.
    pub open_until: Option<i64>,
    /// The backoff of the last trip, seconds.
    pub backoff: i64,
    /// Calls skipped while open, since the last success.
    pub skipped: u64,
}

impl Breaker {
    /// Whether a call at `now` goes ahead (false: skip it, the fallback decides).
    pub fn admit(&mut self, now: i64) -> bool {
        match self.open_until {
            Some(until) if now < until => {
                self.skipped += 1;
                false
            }
            _ => true,
        }
    }

    /// Records a call's outcome; true when this failure opened the breaker.
    pub fn record(&mut self, now: i64, failure: Option<FailureKind>) -> bool {
        let Some(kind) = failure else {
            *self = Breaker::default();
            return false;
        };
        self.consecutive += 1;
        *self.by_kind.entry(kind).or_default() += 1;
        // A failed trial after a backoff opens it again at once, for twice as long.
        let trial = self.open_until.is_some();
        if trial || self.consecutive >= TRIP_AFTER {
            self.backoff = if trial { (self.backoff * 2).min(MAX_BACKOFF) } else { FIRST_BACKOFF };
            self.open_until = Some(now + self.backoff);
            return true;
        }
        false
    }

    pub fn is_open(&self, now: i64) -> bool {
        self.open_until.is_some_and(|u| now < u)
    }

    /// "5 in a row (timeout ×3, trap ×2)".
    pub fn counts(&self) -> String {
        let kinds: Vec<String> = self.by_kind.iter().map(|(k, n)| format!("{} ×{n}", k.as_str())).collect();
        format!("{} in a row ({})", self.consecutive, kinds.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trips_after_repeated_failures_backs_off_and_closes_on_success() {
        let mut b = Breaker::default();
        for i in 0..TRIP_AFTER - 1 {
            assert!(b.admit(i as i64));
            assert!(!b.record(i as i64, Some(FailureKind::Timeout)));
        }
        assert!(b.admit(10));
        assert!(b.record(10, Some(FailureKind::Trap)), "the fifth failure trips it");
        assert_eq!(b.counts(), "5 in a row (timeout ×4, trap ×1)");
        assert!(!b.admit(10 + FIRST_BACKOFF - 1), "skipped during the backoff");
        assert_eq!(b.skipped, 1);
        assert!(b.admit(10 + FIRST_BACKOFF), "one trial after it");
        assert!(b.record(10 + FIRST_BACKOFF, Some(FailureKind::Timeout)), "a failed trial reopens it");
        assert_eq!(b.backoff, 2 * FIRST_BACKOFF);
        assert!(b.is_open(10 + FIRST_BACKOFF + 59));
        let later = 10 + 3 * FIRST_BACKOFF;
        assert!(b.admit(later));
        assert!(!b.record(later, None));
        assert_eq!(b, Breaker::default(), "a success closes it and forgets");
    }

    #[test]
    fn the_backoff_is_capped() {
        let mut b = Breaker::default();
        let mut now = 0;
        for _ in 0..40 {
            if b.admit(now) {
                b.record(now, Some(FailureKind::Trap));
            }
            now += MAX_BACKOFF;
        }
        assert_eq!(b.backoff, MAX_BACKOFF);
    }
}
