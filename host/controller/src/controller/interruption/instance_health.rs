//! Karpenter's instance health checks, with or without an interruption queue: every minute
//! EC2's status checks are read (`Cloud::instance_statuses`); an instance a NodeClaim owns
//! that `tenon_core::orchestration::instance_health` finds unhealthy is handled like an
//! interruption message (failed reachability checks: terminated without waiting for its
//! drain; a scheduled event: drained and replaced). Each unhealthy episode is counted once.

use super::Interruption;
use crate::controller::metrics::catalog::INSTANCE_STATUS_UNHEALTHY;
use std::time::Duration;
use tenon_core::orchestration::instance_health::{self, CHECK_EVERY_MS, UnhealthySeen};
use tenon_core::orchestration::interruption::InterruptionKind;

impl Interruption {
    /// Runs forever: one check a minute.
    pub async fn check_health(self) {
        let mut seen = UnhealthySeen::default();
        loop {
            tokio::time::sleep(Duration::from_millis(CHECK_EVERY_MS as u64)).await;
            if self.leadership.may_act() {
                self.check_once(&mut seen).await;
            }
        }
    }

    /// One check: EC2's status checks read, each unhealthy instance a NodeClaim owns handled.
    pub async fn check_once(&self, seen: &mut UnhealthySeen) {
        let statuses = match self.cloud.instance_statuses().await {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "instance health: could not read EC2's status checks (ec2:DescribeInstanceStatus); retrying in a minute");
                return;
            }
        };
        let now_ms = crate::controller::conditions::now_time().0.as_millisecond();
        let mut owned = Vec::new();
        for (id, categories) in instance_health::unhealthy(&statuses, now_ms) {
            for category in categories {
                match self.act(&InterruptionKind::Unhealthy(category), std::slice::from_ref(&id)).await {
                    Ok(true) => owned.push((id.clone(), category)),
                    Ok(false) => {}
                    Err(e) => {
                        tracing::warn!(instance = %id, error = %e, "instance health: handling failed; tried again next minute");
                        owned.push((id.clone(), category));
                    }
                }
            }
        }
        for (id, category) in seen.record(owned) {
            tracing::info!(instance = %id, category = category.as_str(), "unhealthy instance owned by the cluster");
            self.metrics.add(INSTANCE_STATUS_UNHEALTHY, &[("category", category.as_str())], 1);
        }
    }
}
