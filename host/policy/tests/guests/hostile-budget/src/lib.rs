//! A budget rule that misbehaves on request.

use serde::Deserialize;
use tenon_policy_sdk::budget::{Allowance, BudgetInput, Guest};

#[derive(Deserialize)]
struct Config {
    mode: String,
}

struct Hostile;

impl Guest for Hostile {
    fn allowed(input: BudgetInput) -> Result<Allowance, String> {
        let cfg: Config = tenon_policy_sdk::config(&input.nodepool.config)?;
        match cfg.mode.as_str() {
            "trap" => {
                let v: Vec<u32> = Vec::new();
                Ok(Allowance { allowed: v[input.total_nodes as usize + 1], reason: String::new() })
            }
            "all" => Ok(Allowance { allowed: input.total_nodes, reason: "everything".into() }),
            other => Err(format!("unknown mode {other:?}")),
        }
    }
}

tenon_policy_sdk::export_budget!(Hostile);
