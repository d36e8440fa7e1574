//! AMD first in one NodePool (the second runbook's intent without a weighted fallback pool):
//! AMD instance types rank first unless none is offered or the cheapest AMD offering costs
//! more than a set premium over the cheapest offering of any manufacturer. Within AMD, and
//! within the rest, price order holds.
//!
//! `tenon.dev/scoring-config`: `{"maxPremiumPercent": 10}` (required, ≥ 0; 0 prefers AMD only
//! when it is at least as cheap). Types without `karpenter.k8s.aws/instance-cpu-manufacturer`
//! are not AMD.

use serde::Deserialize;
use tenon_policy_sdk::non_negative;
use tenon_policy_sdk::scorer::{Guest, Offering, ScoringInput};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    max_premium_percent: f64,
}

fn settings(json: &str) -> Result<Config, String> {
    let cfg: Config = tenon_policy_sdk::config(json)?;
    non_negative("maxPremiumPercent", cfg.max_premium_percent, "percentage")?;
    Ok(cfg)
}

struct AmdFirst;

impl tenon_policy_sdk::Config for AmdFirst {
    fn validate_config(config: &str) -> Result<(), String> {
        settings(config).map(drop)
    }
}

impl Guest for AmdFirst {
    fn rank(input: ScoringInput) -> Result<Vec<f64>, String> {
        let cfg = settings(&input.nodepool.config)?;
        let amd = |o: &Offering| input.manufacturer(o) == Some("amd");
        let cheapest_amd = input.offerings.iter().filter(|o| amd(o)).map(|o| o.price).reduce(f64::min);
        // AMD leads only when its cheapest offering is within the premium of the cheapest.
        let amd_leads = match (input.cheapest(), cheapest_amd) {
            (Some(c), Some(a)) => a <= c * (1.0 + cfg.max_premium_percent / 100.0),
            _ => false,
        };
        Ok(input.ranking().prefer(|o| !amd_leads || amd(o)).scores())
    }
}

tenon_policy_sdk::export_scorer!(AmdFirst);
