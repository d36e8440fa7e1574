//! Whether AWS answers: every attempt of every SDK call is seen by an interceptor, which
//! records per operation when its attempts started timing out, when one last did, and
//! clears that when one is answered (an error answer counts: AWS answered).
//!
//! `/healthz` should fail only when the process cannot recover by itself: a restart drops
//! the batcher, the unavailable-offerings cache and every launch in flight, so it must not
//! follow one timed-out attempt of a rarely called operation (a pricing refresh, a template
//! deletion), which its own retry recovers from. It fails when an operation launching needs
//! (CreateFleet, DescribeInstances) has been timing out for longer than [`HUNG_FOR`] and is
//! still being tried; the rest are named in the report only.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::FinalizerInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long after its `failures`th failure in a row something AWS refused (a catalog refresh,
/// a NodeClass resolution) is tried again: 1 s doubling to 5 minutes.
pub fn retry_after(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.saturating_sub(1).min(9)).min(Duration::from_secs(300))
}

/// The operations launching needs: hung, they mean no capacity for pending pods.
pub const LAUNCH_CRITICAL: [&str; 2] = ["CreateFleet", "DescribeInstances"];
/// How long after its first timed-out attempt (30 s each) a launch-critical operation still
/// without an answer makes `/healthz` fail: about 45 s from the call.
pub const HUNG_FOR: Duration = Duration::from_secs(15);
/// A streak whose last timeout is older than this is not evidence of anything now (nothing
/// has tried the operation since): two attempt timeouts and a retry's backoff.
pub const STALE_AFTER: Duration = Duration::from_secs(75);

/// One operation's attempts timing out, without an answer in between.
#[derive(Clone, Copy, Debug)]
struct Streak {
    since: Instant,
    last: Instant,
    timeouts: u32,
}

/// Per operation (`service:Operation`): its current streak of timed-out attempts.
#[derive(Debug, Default)]
pub struct CallHealth {
    streaks: Mutex<BTreeMap<String, Streak>>,
}

/// Whether `operation` (`service:Name`) is one launching needs.
fn launch_critical(operation: &str) -> bool {
    let name = operation.rsplit(':').next().unwrap_or(operation);
    LAUNCH_CRITICAL.contains(&name)
}

impl CallHealth {
    /// An attempt of `operation` ended at `now`: timed out, or answered.
    pub fn attempt(&self, operation: &str, timed_out: bool, now: Instant) {
        let Ok(mut m) = self.streaks.lock() else { return };
        if timed_out {
            let s = m.entry(operation.to_string()).or_insert(Streak { since: now, last: now, timeouts: 0 });
            s.last = now;
            s.timeouts += 1;
        } else {
            m.remove(operation);
        }
    }

    /// `Err` naming the launch-critical operations that have been timing out for more than
    /// [`HUNG_FOR`] and are still tried; `Ok` with what else times out, if anything.
    pub fn check(&self, now: Instant) -> Result<Option<String>, String> {
        let m = self.streaks.lock().map(|m| m.clone()).unwrap_or_default();
        let describe = |(op, s): (&String, &Streak)| {
            format!("{op} ({} attempts, for {:.0}s)", s.timeouts, now.duration_since(s.since).as_secs_f64())
        };
        let live = |s: &Streak| now.duration_since(s.last) <= STALE_AFTER;
        let hung: Vec<String> = m
            .iter()
            .filter(|(op, s)| launch_critical(op) && live(s) && now.duration_since(s.since) >= HUNG_FOR)
            .map(describe)
            .collect();
        if !hung.is_empty() {
            return Err(format!(
                "AWS is not answering what launching needs: every attempt of {} has timed out since",
                hung.join(", ")
            ));
        }
        let slow: Vec<String> = m.iter().filter(|(_, s)| live(s)).map(describe).collect();
        Ok((!slow.is_empty()).then(|| format!("timing out, retried: {}", slow.join(", "))))
    }
}

/// The SDK interceptor feeding a [`CallHealth`].
#[derive(Clone, Debug)]
pub(crate) struct Watch(pub Arc<CallHealth>);

impl Intercept for Watch {
    fn name(&self) -> &'static str {
        "TenonCallHealth"
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let op = cfg.load::<Metadata>().map_or("unknown".to_string(), |m| format!("{}:{}", m.service(), m.name()));
        match context.output_or_error() {
            Some(Err(e)) if e.is_timeout_error() => self.0.attempt(&op, true, Instant::now()),
            // A connection that could not be made is not a hung call (and says so itself).
            Some(Err(e)) if e.is_connector_error() => {}
            Some(_) => self.0.attempt(&op, false, Instant::now()),
            None => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_back_off_doubling_to_five_minutes() {
        let secs: Vec<u64> = (1..=12).map(|n| retry_after(n).as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
    }

    #[test]
    fn a_launch_critical_operation_is_hung_once_it_has_timed_out_for_its_bound_until_answered() {
        let h = CallHealth::default();
        let t0 = Instant::now();
        assert_eq!(h.check(t0), Ok(None));
        h.attempt("EC2:CreateFleet", true, t0);
        assert!(h.check(t0 + Duration::from_secs(10)).is_ok(), "one timeout, within the bound");
        h.attempt("EC2:CreateFleet", true, t0 + Duration::from_secs(30));
        h.attempt("EC2:DescribeInstances", false, t0);
        let e = h.check(t0 + Duration::from_secs(40)).unwrap_err();
        assert!(e.contains("EC2:CreateFleet (2 attempts, for 40s)") && !e.contains("DescribeInstances"), "{e}");
        h.attempt("EC2:CreateFleet", false, t0 + Duration::from_secs(41));
        assert_eq!(h.check(t0 + Duration::from_secs(42)), Ok(None), "answered again");
    }

    #[test]
    fn a_timed_out_pricing_or_template_call_never_fails_the_probe() {
        let h = CallHealth::default();
        let t0 = Instant::now();
        h.attempt("Pricing:GetProducts", true, t0);
        h.attempt("EC2:DeleteLaunchTemplate", true, t0);
        for later in [30, 60, 600] {
            let checked = h.check(t0 + Duration::from_secs(later));
            assert!(checked.is_ok(), "{later}s: {checked:?}");
        }
        let reported = h.check(t0 + Duration::from_secs(30)).unwrap().unwrap();
        assert!(reported.contains("Pricing:GetProducts"), "still named: {reported}");
    }

    #[test]
    fn a_streak_nothing_retries_any_more_is_not_evidence() {
        let h = CallHealth::default();
        let t0 = Instant::now();
        h.attempt("EC2:DescribeInstances", true, t0);
        assert!(h.check(t0 + HUNG_FOR).is_err());
        assert_eq!(h.check(t0 + STALE_AFTER + Duration::from_secs(1)), Ok(None));
    }
}
