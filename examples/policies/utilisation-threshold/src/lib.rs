//! Consolidate only what is worth the churn (kubernetes-sigs/karpenter#1117, #1440): a node
//! is moved only while its requested CPU and memory are both below a threshold, and a plan is
//! carried out only when it saves at least a set amount per hour. Karpenter replaces a
//! 70 %-used node to save a few cents and restarts its pods to do it.
//!
//! `tenon.dev/consolidation-config`: `{"maxUtilisationPercent": 50, "minSavingsPerHour": 0.05}`
//! (`maxUtilisationPercent` required, 0-100; `minSavingsPerHour` USD, default 0). Emptiness
//! plans skip the utilisation test (DaemonSet pods are all that is left) but not the savings
//! test. Drift and expiration are not cost decisions: always approved. Order is unchanged.

use serde::Deserialize;
use tenon_policy_sdk::consolidator::{ConsolidationInput, Guest, Method, Plan, PlanReview, Verdict};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    max_utilisation_percent: f64,
    #[serde(default)]
    min_savings_per_hour: f64,
}

impl Config {
    fn validate(self) -> Result<Self, String> {
        if !(0.0..=100.0).contains(&self.max_utilisation_percent) {
            return Err(format!(
                "config: maxUtilisationPercent must be between 0 and 100, got {}",
                self.max_utilisation_percent
            ));
        }
        tenon_policy_sdk::non_negative("minSavingsPerHour", self.min_savings_per_hour, "USD amount")?;
        Ok(self)
    }

    /// Why `plan` is not worth carrying out, if it is not.
    fn objection(&self, plan: &Plan) -> Option<String> {
        if matches!(plan.method, Method::Drift | Method::Expiration) {
            return None;
        }
        if plan.savings_per_hour < self.min_savings_per_hour {
            return Some(format!(
                "saves ${:.4}/h, below minSavingsPerHour ${:.4}/h",
                plan.savings_per_hour, self.min_savings_per_hour
            ));
        }
        if plan.method == Method::Emptiness {
            return None;
        }
        let limit = self.max_utilisation_percent / 100.0;
        let busy = plan.candidates.iter().find(|c| c.cpu_utilisation >= limit || c.memory_utilisation >= limit)?;
        Some(format!(
            "{} has {:.0} % of its CPU and {:.0} % of its memory requested; consolidating needs both below {:.0} %",
            busy.node,
            busy.cpu_utilisation * 100.0,
            busy.memory_utilisation * 100.0,
            self.max_utilisation_percent
        ))
    }
}

struct UtilisationThreshold;

impl tenon_policy_sdk::Config for UtilisationThreshold {
    fn validate_config(config: &str) -> Result<(), String> {
        tenon_policy_sdk::config::<Config>(config)?.validate().map(drop)
    }
}

impl Guest for UtilisationThreshold {
    fn review(input: ConsolidationInput) -> Result<PlanReview, String> {
        let cfg = tenon_policy_sdk::config::<Config>(&input.nodepool.config)?.validate()?;
        Ok(PlanReview {
            order: (0..input.plans.len() as u32).collect(),
            verdicts: input
                .plans
                .iter()
                .map(|p| match cfg.objection(p) {
                    None => Verdict { approve: true, reason: String::new() },
                    Some(reason) => Verdict { approve: false, reason },
                })
                .collect(),
        })
    }
}

tenon_policy_sdk::export_consolidator!(UtilisationThreshold);
