//! Policy metrics in Prometheus text format: calls, failures by kind, call latency,
//! shadow-mode disagreements and calls skipped by the breaker.

use crate::error::FailureKind;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

/// Histogram buckets in seconds, from 10 µs: policy calls are expected to take microseconds.
pub const BUCKETS: [f64; 14] =
    [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];

#[derive(Default, Clone, Debug)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

type Key = (String, String);

#[derive(Default, Debug)]
struct Inner {
    calls: BTreeMap<Key, u64>,
    failures: BTreeMap<(String, String, FailureKind), u64>,
    latency: BTreeMap<Key, Histogram>,
    disagreements: BTreeMap<Key, u64>,
    skipped: BTreeMap<Key, u64>,
}

#[derive(Default, Debug)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

impl Metrics {
    /// Records one call of `policy` for `hook` (`scoring`, `consolidation`, `budget`).
    pub fn observe(&self, policy: &str, hook: &str, elapsed: Duration, failure: Option<FailureKind>) {
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let key = (policy.to_string(), hook.to_string());
        *m.calls.entry(key.clone()).or_default() += 1;
        if let Some(kind) = failure {
            *m.failures.entry((key.0.clone(), key.1.clone(), kind)).or_default() += 1;
        }
        let h = m.latency.entry(key).or_default();
        let secs = elapsed.as_secs_f64();
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += secs;
    }

    /// Records that a shadowed policy decided differently from the default.
    pub fn disagreed(&self, policy: &str, hook: &str) {
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *m.disagreements.entry((policy.to_string(), hook.to_string())).or_default() += 1;
    }

    /// Records a call skipped because the policy's breaker is open.
    pub fn skipped(&self, policy: &str, hook: &str) {
        let mut m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        *m.skipped.entry((policy.to_string(), hook.to_string())).or_default() += 1;
    }

    pub fn skips(&self, policy: &str, hook: &str) -> u64 {
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        m.skipped.get(&(policy.to_string(), hook.to_string())).copied().unwrap_or(0)
    }

    pub fn calls(&self, policy: &str, hook: &str) -> u64 {
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        m.calls.get(&(policy.to_string(), hook.to_string())).copied().unwrap_or(0)
    }

    pub fn failures(&self, policy: &str, hook: &str, kind: FailureKind) -> u64 {
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        m.failures.get(&(policy.to_string(), hook.to_string(), kind)).copied().unwrap_or(0)
    }

    pub fn disagreements(&self, policy: &str, hook: &str) -> u64 {
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        m.disagreements.get(&(policy.to_string(), hook.to_string())).copied().unwrap_or(0)
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        let m = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut s = String::new();
        let _ = writeln!(s, "# HELP tenon_policy_calls_total Policy calls.\n# TYPE tenon_policy_calls_total counter");
        for ((p, h), v) in &m.calls {
            let _ = writeln!(s, "tenon_policy_calls_total{{policy=\"{p}\",hook=\"{h}\"}} {v}");
        }
        let _ = writeln!(
            s,
            "# HELP tenon_policy_failures_total Policy calls that failed, by kind.\n# TYPE tenon_policy_failures_total counter"
        );
        for ((p, h, k), v) in &m.failures {
            let _ =
                writeln!(s, "tenon_policy_failures_total{{policy=\"{p}\",hook=\"{h}\",kind=\"{}\"}} {v}", k.as_str());
        }
        let _ = writeln!(
            s,
            "# HELP tenon_policy_call_duration_seconds Policy call latency, including a fresh store.\n# TYPE tenon_policy_call_duration_seconds histogram"
        );
        for ((p, h), hist) in &m.latency {
            for (i, b) in BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "tenon_policy_call_duration_seconds_bucket{{policy=\"{p}\",hook=\"{h}\",le=\"{b}\"}} {}",
                    hist.counts[i]
                );
            }
            let _ = writeln!(
                s,
                "tenon_policy_call_duration_seconds_bucket{{policy=\"{p}\",hook=\"{h}\",le=\"+Inf\"}} {}",
                hist.count
            );
            let _ = writeln!(s, "tenon_policy_call_duration_seconds_sum{{policy=\"{p}\",hook=\"{h}\"}} {}", hist.sum);
            let _ =
                writeln!(s, "tenon_policy_call_duration_seconds_count{{policy=\"{p}\",hook=\"{h}\"}} {}", hist.count);
        }
        let _ = writeln!(
            s,
            "# HELP tenon_policy_shadow_disagreements_total Shadow-mode decisions that differed from the default.\n# TYPE tenon_policy_shadow_disagreements_total counter"
        );
        for ((p, h), v) in &m.disagreements {
            let _ = writeln!(s, "tenon_policy_shadow_disagreements_total{{policy=\"{p}\",hook=\"{h}\"}} {v}");
        }
        let _ = writeln!(
            s,
            "# HELP tenon_policy_skipped_calls_total Calls not made because the policy kept failing (its fallback decided).\n# TYPE tenon_policy_skipped_calls_total counter"
        );
        for ((p, h), v) in &m.skipped {
            let _ = writeln!(s, "tenon_policy_skipped_calls_total{{policy=\"{p}\",hook=\"{h}\"}} {v}");
        }
        s
    }
}
