//! Whether AWS answers: every attempt of every SDK call is seen by an interceptor, which
//! records per operation when an attempt last timed out and when one was last answered (an
//! error answer counts: AWS answered). An operation whose attempts time out and that has
//! not been answered since is hung, and the controller's `/healthz` says so (Karpenter's
//! liveness probe likewise fails while its cloud provider is stuck).

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

/// Per operation (`service:Operation`): since when its attempts have been timing out
/// without an answer in between.
#[derive(Debug, Default)]
pub struct CallHealth {
    hung_since: Mutex<BTreeMap<String, Instant>>,
}

impl CallHealth {
    /// An attempt of `operation` ended at `now`: timed out, or answered.
    pub fn attempt(&self, operation: &str, timed_out: bool, now: Instant) {
        let Ok(mut m) = self.hung_since.lock() else { return };
        if timed_out {
            m.entry(operation.to_string()).or_insert(now);
        } else {
            m.remove(operation);
        }
    }

    /// `Err` naming every operation whose attempts time out, with since when.
    pub fn check(&self, now: Instant) -> Result<(), String> {
        let m = self.hung_since.lock().map(|m| m.clone()).unwrap_or_default();
        if m.is_empty() {
            return Ok(());
        }
        let hung: Vec<String> = m
            .iter()
            .map(|(op, since)| format!("{op} (for {:.0}s)", now.duration_since(*since).as_secs_f64()))
            .collect();
        Err(format!("AWS is not answering: every attempt of {} has timed out since", hung.join(", ")))
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
    fn an_operation_is_hung_from_its_first_timeout_until_it_is_answered() {
        let h = CallHealth::default();
        let t0 = Instant::now();
        assert!(h.check(t0).is_ok());
        h.attempt("ec2:CreateFleet", true, t0);
        h.attempt("ec2:CreateFleet", true, t0 + Duration::from_secs(30));
        h.attempt("ec2:DescribeInstances", false, t0);
        let e = h.check(t0 + Duration::from_secs(40)).unwrap_err();
        assert!(e.contains("ec2:CreateFleet (for 40s)") && !e.contains("DescribeInstances"), "{e}");
        h.attempt("ec2:CreateFleet", false, t0 + Duration::from_secs(41));
        assert!(h.check(t0 + Duration::from_secs(42)).is_ok(), "answered again");
    }
}
