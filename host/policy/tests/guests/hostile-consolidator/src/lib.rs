//! A consolidator that misbehaves on request.

use serde::Deserialize;
use tenon_policy_sdk::consolidator::{ConsolidationInput, Guest, PlanReview, Verdict};

#[derive(Deserialize)]
struct Config {
    mode: String,
}

struct Hostile;

impl Guest for Hostile {
    fn review(input: ConsolidationInput) -> Result<PlanReview, String> {
        let cfg: Config = tenon_policy_sdk::config(&input.nodepool.config)?;
        let n = input.plans.len() as u32;
        let approve = |n: u32| (0..n).map(|_| Verdict { approve: true, reason: String::new() }).collect();
        match cfg.mode.as_str() {
            "unknown-ids" => Ok(PlanReview { order: vec![n + 7], verdicts: approve(n) }),
            "short" => Ok(PlanReview { order: vec![], verdicts: approve(n.saturating_sub(1)) }),
            "reject" => Ok(PlanReview {
                order: vec![],
                verdicts: (0..n).map(|_| Verdict { approve: false, reason: "not today".into() }).collect(),
            }),
            "panic" => panic!("deliberate panic"),
            other => Err(format!("unknown mode {other:?}")),
        }
    }
}

tenon_policy_sdk::export_consolidator!(Hostile);
