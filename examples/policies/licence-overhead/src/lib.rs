//! Add a fixed per-node cost — a security agent or monitoring licence billed per node — to
//! every offering before comparing them (aws/karpenter-provider-aws#7572). Offerings are
//! ranked by (price + licence) per allocatable vCPU: the licence is paid once per node, so
//! larger nodes amortise it and win when that is cheaper overall; with no licence this is
//! price per vCPU.
//!
//! `tenon.dev/scoring-config`: `{"perNodeHourly": 0.05}` (USD per node-hour, required, ≥ 0).

use serde::Deserialize;
use tenon_policy_sdk::scorer::{Guest, ScoringInput};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    per_node_hourly: f64,
}

fn settings(json: &str) -> Result<Config, String> {
    let cfg: Config = tenon_policy_sdk::config(json)?;
    tenon_policy_sdk::non_negative("perNodeHourly", cfg.per_node_hourly, "number of USD")?;
    Ok(cfg)
}

struct LicenceOverhead;

impl tenon_policy_sdk::Config for LicenceOverhead {
    fn validate_config(config: &str) -> Result<(), String> {
        settings(config).map(drop)
    }
}

impl Guest for LicenceOverhead {
    fn rank(input: ScoringInput) -> Result<Vec<f64>, String> {
        let cfg = settings(&input.nodepool.config)?;
        input
            .offerings
            .iter()
            .map(|o| {
                let it =
                    input.instance_type(o).ok_or("an offering refers to an instance type the input does not have")?;
                let vcpus = it.allocatable.cpu_millis as f64 / 1000.0;
                let cost = o.price + cfg.per_node_hourly;
                Ok(if vcpus > 0.0 { cost / vcpus } else { f64::MAX / 2.0 + cost })
            })
            .collect()
    }
}

tenon_policy_sdk::export_scorer!(LicenceOverhead);
