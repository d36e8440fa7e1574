//! A budget rule that misbehaves on request.

use serde::Deserialize;
use std::time::Duration;
use tenon_policy_sdk::budget::{Allowance, BudgetInput, Guest};

#[derive(Deserialize)]
struct Config {
    mode: String,
}

struct Hostile;

impl Guest for Hostile {
    fn allowed(input: BudgetInput) -> Result<Allowance, String> {
        let cfg: Config = tenon_policy_sdk::config(&input.nodepool.config)?;
        let allow = |allowed: u32| Ok(Allowance { allowed, reason: format!("mode {}", cfg.mode) });
        match cfg.mode.as_str() {
            "trap" => {
                let v: Vec<u32> = Vec::new();
                Ok(Allowance { allowed: v[input.total_nodes as usize + 1], reason: String::new() })
            }
            "all" => allow(input.total_nodes),
            // Attempts to loosen the NodePool's budgets.
            "max" => allow(u32::MAX),
            "billions" => allow(4_000_000_000),
            "wrapped" => allow((-3i32) as u32),
            "long-reason" => Ok(Allowance { allowed: 0, reason: "b".repeat(8 << 20) }),
            // An hour's sleep, then everything allowed.
            "sleep" => {
                std::thread::sleep(Duration::from_secs(3600));
                allow(input.total_nodes)
            }
            other => Err(format!("unknown mode {other:?}")),
        }
    }
}

tenon_policy_sdk::export_budget!(Hostile);
