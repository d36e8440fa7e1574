//! Prefer newer instance generations unless they cost more than a set premium over the
//! cheapest offering (aws/karpenter-provider-aws#6721): newer generations are usually faster
//! per vCPU, so a few percent more per hour buys more than it costs.
//!
//! `tenon.dev/scoring-config`: `{"maxPremiumPercent": 10}` (required, ≥ 0). Offerings within
//! the premium rank newest generation first (then by price); the rest follow by price. Types
//! without `karpenter.k8s.aws/instance-generation` count as generation 0.

use serde::Deserialize;
use tenon_policy_sdk::non_negative;
use tenon_policy_sdk::scorer::{Guest, ScoringInput};

const GENERATION: &str = "karpenter.k8s.aws/instance-generation";

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
        let Some(cheapest) = input.offerings.iter().map(|o| o.price).reduce(f64::min) else {
            return Ok(Vec::new());
        };
        let ceiling = cheapest * (1.0 + cfg.max_premium_percent / 100.0);
        // Scores: tier (0 within the premium, 1 beyond) dominates, then generation (newest
        // first) within the premium, then price. Prices are below 1e3 $/h; generations below 1e3.
        Ok(input
            .offerings
            .iter()
            .map(|o| {
                if o.price <= ceiling {
                    let generation: f64 =
                        input.label(o.instance_type, GENERATION).and_then(|g| g.parse().ok()).unwrap_or(0.0);
                    (1000.0 - generation) * 1000.0 + o.price
                } else {
                    1e7 + o.price
                }
            })
            .collect())
    }
}

tenon_policy_sdk::export_scorer!(PreferGeneration);
