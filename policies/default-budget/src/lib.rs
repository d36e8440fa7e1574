//! Karpenter's budgets: the most restrictive active budget that applies to the reason,
//! percentages rounded up, minus nodes already disrupting; anything invalid allows nothing.

use tenon_policy_sdk::budget::{Allowance, BudgetInput, Guest, karpenter};

struct KarpenterBudgets;

impl Guest for KarpenterBudgets {
    fn allowed(input: BudgetInput) -> Result<Allowance, String> {
        Ok(karpenter(&input))
    }
}

tenon_policy_sdk::export_budget!(KarpenterBudgets);
