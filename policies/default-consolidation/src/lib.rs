//! Karpenter's behaviour: every consolidation plan approved, tried in the order produced.

use tenon_policy_sdk::consolidator::{ConsolidationInput, Guest, PlanReview, Verdict};

struct ApproveAll;

impl Guest for ApproveAll {
    fn review(input: ConsolidationInput) -> Result<PlanReview, String> {
        let n = input.plans.len() as u32;
        Ok(PlanReview {
            order: (0..n).collect(),
            verdicts: (0..n).map(|_| Verdict { approve: true, reason: String::new() }).collect(),
        })
    }
}

tenon_policy_sdk::export_consolidator!(ApproveAll);
