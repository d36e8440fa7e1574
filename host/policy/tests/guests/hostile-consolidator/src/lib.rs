//! A consolidator that misbehaves on request.

use serde::Deserialize;
use std::time::Duration;
use tenon_policy_sdk::consolidator::{ConsolidationInput, Guest, PlanReview, Verdict};

#[derive(Deserialize)]
struct Config {
    mode: String,
}

struct Hostile;

fn reject_all(n: u32, reason: &str) -> PlanReview {
    PlanReview { order: vec![], verdicts: (0..n).map(|_| Verdict { approve: false, reason: reason.into() }).collect() }
}

impl Guest for Hostile {
    fn review(input: ConsolidationInput) -> Result<PlanReview, String> {
        let cfg: Config = tenon_policy_sdk::config(&input.nodepool.config)?;
        let n = input.plans.len() as u32;
        let approve = |n: u32| (0..n).map(|_| Verdict { approve: true, reason: String::new() }).collect();
        match cfg.mode.as_str() {
            "unknown-ids" => Ok(PlanReview { order: vec![n + 7], verdicts: approve(n) }),
            "short" => Ok(PlanReview { order: vec![], verdicts: approve(n.saturating_sub(1)) }),
            "reject" => Ok(reject_all(n, "not today")),
            // Rejects every plan with an 8 MiB reason.
            "long-reason" => Ok(reject_all(n, &"r".repeat(8 << 20))),
            "panic" => panic!("deliberate panic"),
            // An hour's sleep, then every plan approved, the last first.
            "sleep" => {
                std::thread::sleep(Duration::from_secs(3600));
                Ok(PlanReview { order: (0..n).rev().collect(), verdicts: approve(n) })
            }
            other => Err(format!("unknown mode {other:?}")),
        }
    }
}

tenon_policy_sdk::export_consolidator!(Hostile);
