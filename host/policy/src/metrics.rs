//! Policy metrics, kept in prometheus-client families and rendered in the Prometheus text
//! format: calls, failures by kind, call latency, shadow-mode disagreements and calls skipped
//! by the breaker, each by policy and hook.

use crate::error::FailureKind;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Duration;

/// Histogram buckets in seconds, from 10 µs: policy calls are expected to take microseconds.
pub const BUCKETS: [f64; 14] =
    [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];

/// `policy` and `hook` (`scoring`, `consolidation`, `budget`).
type ByHook = Vec<(&'static str, String)>;

fn by_hook(policy: &str, hook: &str) -> ByHook {
    vec![("policy", policy.to_string()), ("hook", hook.to_string())]
}

fn latency_histogram() -> Histogram {
    Histogram::new(BUCKETS)
}

#[derive(Debug)]
pub struct Metrics {
    calls: Family<ByHook, Counter>,
    failures: Family<ByHook, Counter>,
    latency: Family<ByHook, Histogram, fn() -> Histogram>,
    disagreements: Family<ByHook, Counter>,
    skipped: Family<ByHook, Counter>,
    registry: Registry,
}

impl Default for Metrics {
    fn default() -> Self {
        let calls = Family::default();
        let failures = Family::default();
        let latency = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        let disagreements = Family::default();
        let skipped = Family::default();
        let mut registry = Registry::default();
        registry.register("tenon_policy_calls", "Policy calls, by policy and hook", calls.clone());
        registry.register(
            "tenon_policy_failures",
            "Policy calls that failed, by policy, hook and kind (timeout, out_of_memory, trap, invalid_output, load_error, policy_error, circuit_open)",
            failures.clone(),
        );
        registry.register(
            "tenon_policy_call_duration_seconds",
            "Policy call latency, including a fresh store and instantiation, by policy and hook",
            latency.clone(),
        );
        registry.register(
            "tenon_policy_shadow_disagreements",
            "Shadow-mode decisions that differed from the default's, by policy and hook",
            disagreements.clone(),
        );
        registry.register(
            "tenon_policy_skipped_calls",
            "Calls not made because the policy kept failing (its fallback decided), by policy and hook",
            skipped.clone(),
        );
        Metrics { calls, failures, latency, disagreements, skipped, registry }
    }
}

impl Metrics {
    /// Records one call of `policy` for `hook` (`scoring`, `consolidation`, `budget`).
    pub fn observe(&self, policy: &str, hook: &str, elapsed: Duration, failure: Option<FailureKind>) {
        let key = by_hook(policy, hook);
        self.calls.get_or_create(&key).inc();
        if let Some(kind) = failure {
            let mut with_kind = key.clone();
            with_kind.push(("kind", kind.as_str().to_string()));
            self.failures.get_or_create(&with_kind).inc();
        }
        self.latency.get_or_create(&key).observe(elapsed.as_secs_f64());
    }

    /// Records that a shadowed policy decided differently from the default.
    pub fn disagreed(&self, policy: &str, hook: &str) {
        self.disagreements.get_or_create(&by_hook(policy, hook)).inc();
    }

    /// Records a call skipped because the policy's breaker is open.
    pub fn skipped(&self, policy: &str, hook: &str) {
        self.skipped.get_or_create(&by_hook(policy, hook)).inc();
    }

    pub fn skips(&self, policy: &str, hook: &str) -> u64 {
        self.skipped.get(&by_hook(policy, hook)).map_or(0, |c| c.get())
    }

    pub fn calls(&self, policy: &str, hook: &str) -> u64 {
        self.calls.get(&by_hook(policy, hook)).map_or(0, |c| c.get())
    }

    pub fn failures(&self, policy: &str, hook: &str, kind: FailureKind) -> u64 {
        let mut key = by_hook(policy, hook);
        key.push(("kind", kind.as_str().to_string()));
        self.failures.get(&key).map_or(0, |c| c.get())
    }

    pub fn disagreements(&self, policy: &str, hook: &str) -> u64 {
        self.disagreements.get(&by_hook(policy, hook)).map_or(0, |c| c.get())
    }

    /// Prometheus text exposition (version 0.0.4).
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        prometheus_text::encode(&mut out, &self.registry).map_or_else(|_| String::new(), |()| out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_have_help_type_and_labels() {
        let m = Metrics::default();
        m.observe("p", "scoring", Duration::from_micros(30), Some(FailureKind::Timeout));
        m.observe("p", "scoring", Duration::from_micros(5), None);
        m.disagreed("p", "scoring");
        let text = m.render();
        for line in [
            "# HELP tenon_policy_calls_total Policy calls, by policy and hook.",
            "# TYPE tenon_policy_calls_total counter",
            "tenon_policy_calls_total{policy=\"p\",hook=\"scoring\"} 2",
            "tenon_policy_failures_total{policy=\"p\",hook=\"scoring\",kind=\"timeout\"} 1",
            "# TYPE tenon_policy_call_duration_seconds histogram",
            "tenon_policy_call_duration_seconds_bucket{policy=\"p\",hook=\"scoring\",le=\"1e-05\"} 1",
            "tenon_policy_call_duration_seconds_bucket{policy=\"p\",hook=\"scoring\",le=\"5e-05\"} 2",
            "tenon_policy_call_duration_seconds_count{policy=\"p\",hook=\"scoring\"} 2",
            "tenon_policy_shadow_disagreements_total{policy=\"p\",hook=\"scoring\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} missing from\n{text}");
        }
        assert_eq!(m.calls("p", "scoring"), 2);
        assert_eq!(m.failures("p", "scoring", FailureKind::Timeout), 1);
        assert_eq!(m.skips("p", "scoring"), 0);
    }
}
