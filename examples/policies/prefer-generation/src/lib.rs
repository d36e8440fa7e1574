//! Prefer newer instance generations unless they cost more than a set premium over the
//! cheapest offering (aws/karpenter-provider-aws#6721): newer generations are usually faster
//! per vCPU, so a few percent more per hour buys more than it costs.
//!
//! `tenon.dev/scoring-config`: `{"maxPremiumPercent": 10}` (required, ≥ 0). Offerings within
//! the premium rank newest generation first (then by price); the rest follow by price. Types
//! without `karpenter.k8s.aws/instance-generation` count as generation 0.

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

struct PreferGeneration;

impl tenon_policy_sdk::Config for PreferGeneration {
    fn validate_config(config: &str) -> Result<(), String> {
        settings(config).map(drop)
    }
}

impl Guest for PreferGeneration {
    fn rank(input: ScoringInput) -> Result<Vec<f64>, String> {
        let cfg = settings(&input.nodepool.config)?;
        let Some(cheapest) = input.cheapest() else { return Ok(Vec::new()) };
        let within = |o: &Offering| o.price <= cheapest * (1.0 + cfg.max_premium_percent / 100.0);
        // Within the premium first, newest generation first among them; then price.
        let newest_first = |o: &Offering| if within(o) { u64::MAX - input.generation(o).unwrap_or(0) } else { 0 };
        Ok(input.ranking().prefer(within).then_by(newest_first).scores())
    }
}

tenon_policy_sdk::export_scorer!(PreferGeneration);
