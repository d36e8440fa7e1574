//! EC2's status checks (DescribeInstanceStatus) as `tenon_core::orchestration::instance_health`
//! reads them: each instance's failed instance and system reachability checks with the time
//! they started failing, and its scheduled events. Attached-EBS checks are read by nobody
//! (Karpenter does not act on them either).

use crate::error::api;
use aws_sdk_ec2::types::{InstanceStatus, InstanceStatusSummary, StatusType};
use tenon_core::cloud::CloudError;
use tenon_core::orchestration::instance_health::{Check, InstanceChecks};
use tenon_core::orchestration::interruption::HealthCategory;

/// The status checks of every running instance in the account and region that reports
/// anything but `ok` (the caller keeps those a NodeClaim owns).
pub async fn list(ec2: &aws_sdk_ec2::Client) -> Result<Vec<InstanceChecks>, CloudError> {
    let mut out = Vec::new();
    let mut pages = ec2.describe_instance_status().max_results(1000).into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| api("DescribeInstanceStatus", e))?;
        out.extend(page.instance_statuses().iter().map(checks).filter(|c| !c.checks.is_empty()));
    }
    Ok(out)
}

/// One instance's status: its failed or impaired details and its scheduled events.
pub fn checks(s: &InstanceStatus) -> InstanceChecks {
    let mut checks = Vec::new();
    let mut summary = |summary: Option<&InstanceStatusSummary>, category| {
        for d in summary.map(|s| s.details()).unwrap_or_default() {
            checks.push(Check {
                category,
                failed: d.status() == Some(&StatusType::Failed),
                impaired_since_ms: d
                    .impaired_since()
                    .map(|t| t.secs() * 1000 + i64::from(t.subsec_nanos() / 1_000_000)),
            });
        }
    };
    summary(s.instance_status(), HealthCategory::InstanceStatus);
    summary(s.system_status(), HealthCategory::SystemStatus);
    for _ in s.events() {
        checks.push(Check { category: HealthCategory::EventStatus, failed: true, impaired_since_ms: None });
    }
    checks.retain(|c| c.failed);
    InstanceChecks { instance_id: s.instance_id().unwrap_or_default().to_string(), checks }
}
