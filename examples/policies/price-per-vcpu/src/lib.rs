//! Rank offerings by price per vCPU (or per GiB of memory) instead of absolute price
//! (aws/karpenter-provider-aws#1944): a bigger node that costs less per unit of capacity wins,
//! leaving headroom for the next pods instead of another small node.
//!
//! `tenon.dev/scoring-config`: `{"per": "cpu"}` (default) or `{"per": "memory"}`.

use serde::Deserialize;
use tenon_policy_sdk::scorer::{Guest, ScoringInput};

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum Per {
    #[default]
    Cpu,
    Memory,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Config {
    #[serde(default)]
    per: Per,
}

const GIB: f64 = (1u64 << 30) as f64;

struct PricePerUnit;

impl tenon_policy_sdk::Config for PricePerUnit {
    fn validate_config(config: &str) -> Result<(), String> {
        tenon_policy_sdk::config::<Config>(config).map(drop)
    }
}

impl Guest for PricePerUnit {
    fn rank(input: ScoringInput) -> Result<Vec<f64>, String> {
        let cfg: Config = tenon_policy_sdk::config(&input.nodepool.config)?;
        input
            .offerings
            .iter()
            .map(|o| {
                let it =
                    input.instance_type(o).ok_or("an offering refers to an instance type the input does not have")?;
                let units = match cfg.per {
                    Per::Cpu => it.allocatable.cpu_millis as f64 / 1000.0,
                    Per::Memory => it.allocatable.memory_bytes as f64 / GIB,
                };
                // A type without the unit cannot be compared on it: last, by price.
                Ok(if units > 0.0 { o.price / units } else { f64::MAX / 2.0 + o.price })
            })
            .collect()
    }
}

tenon_policy_sdk::export_scorer!(PricePerUnit);
