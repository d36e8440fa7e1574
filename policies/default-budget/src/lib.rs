//! Karpenter's budgets: the most restrictive active budget that applies to the reason,
//! percentages rounded up, minus nodes already disrupting; anything invalid allows nothing.

use tenon_policy_sdk::budget::{Allowance, BudgetInput, BudgetNodes, Guest};

struct KarpenterBudgets;

impl Guest for KarpenterBudgets {
    fn allowed(input: BudgetInput) -> Result<Allowance, String> {
        let mut allowed = u32::MAX;
        let mut why = String::from("no budget applies");
        for (i, b) in input.budgets.iter().enumerate() {
            if b.reasons.as_ref().is_some_and(|rs| !rs.contains(&input.reason)) {
                continue;
            }
            if !b.valid {
                return Ok(Allowance { allowed: 0, reason: format!("budget {i} is invalid: no disruption allowed") });
            }
            if !b.active {
                continue;
            }
            let value = match b.nodes {
                BudgetNodes::Count(n) => n,
                BudgetNodes::Percent(p) => (u64::from(input.total_nodes) * u64::from(p)).div_ceil(100) as u32,
                BudgetNodes::Invalid => {
                    return Ok(Allowance {
                        allowed: 0,
                        reason: format!("budget {i} has an invalid nodes value: no disruption allowed"),
                    });
                }
            };
            if value < allowed {
                allowed = value;
                why = format!("budget {i} allows {value}");
            }
        }
        if allowed == u32::MAX {
            return Ok(Allowance { allowed, reason: why });
        }
        Ok(Allowance {
            allowed: allowed.saturating_sub(input.disrupting),
            reason: format!("{why}, {} already disrupting", input.disrupting),
        })
    }
}

tenon_policy_sdk::export_budget!(KarpenterBudgets);
