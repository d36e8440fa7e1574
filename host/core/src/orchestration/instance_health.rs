//! Karpenter's instance health checks: every minute EC2's status checks
//! (DescribeInstanceStatus) are read; an instance whose instance or system reachability
//! check has failed for two minutes, or that has a scheduled event, is handled like an
//! interruption message of kind [`InterruptionKind::Unhealthy`] (failed checks terminate
//! it forcefully, an event drains it). Each unhealthy episode of an instance is counted
//! once in `karpenter_interruption_instance_status_unhealthy_total`.

use super::interruption::HealthCategory;
#[cfg(doc)]
use super::interruption::InterruptionKind;
use std::collections::{BTreeMap, BTreeSet};

/// How often the checks are read.
pub const CHECK_EVERY_MS: i64 = 60_000;
/// How long a status check must have failed before the instance counts as unhealthy.
pub const UNHEALTHY_AFTER_MS: i64 = 120_000;

/// One detail of an instance's status as EC2 reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub category: HealthCategory,
    /// `failed` (EC2's `StatusType`); a scheduled event always counts as failed.
    pub failed: bool,
    /// When the check started failing (milliseconds); events have none and count at once.
    pub impaired_since_ms: Option<i64>,
}

/// An instance's status checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstanceChecks {
    pub instance_id: String,
    pub checks: Vec<Check>,
}

/// The instances that are unhealthy at `now_ms`, with the categories that make them so:
/// failed checks past [`UNHEALTHY_AFTER_MS`], scheduled events at once.
pub fn unhealthy(statuses: &[InstanceChecks], now_ms: i64) -> BTreeMap<String, BTreeSet<HealthCategory>> {
    let mut out: BTreeMap<String, BTreeSet<HealthCategory>> = BTreeMap::new();
    for s in statuses {
        for c in s.checks.iter().filter(|c| c.failed) {
            let due = match c.category {
                HealthCategory::EventStatus => true,
                _ => c.impaired_since_ms.is_some_and(|t| now_ms - t >= UNHEALTHY_AFTER_MS),
            };
            if due {
                out.entry(s.instance_id.clone()).or_default().insert(c.category);
            }
        }
    }
    out
}

/// Which unhealthy (instance, category) pairs were already counted: a pair is counted once
/// while it stays unhealthy, and again after it has recovered.
#[derive(Clone, Debug, Default)]
pub struct UnhealthySeen {
    seen: BTreeSet<(String, HealthCategory)>,
}

impl UnhealthySeen {
    /// Records this check's unhealthy pairs (those of instances a NodeClaim owns) and
    /// returns those not counted yet; pairs no longer unhealthy are forgotten.
    pub fn record(&mut self, now: impl IntoIterator<Item = (String, HealthCategory)>) -> Vec<(String, HealthCategory)> {
        let now: BTreeSet<(String, HealthCategory)> = now.into_iter().collect();
        let fresh = now.difference(&self.seen).cloned().collect();
        self.seen = now;
        fresh
    }
}
