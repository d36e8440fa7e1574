//! The default bundle decides exactly as the native defaults do, on generated inputs, and
//! the decision core runs through a Wasm policy end to end.

use crate::support;

use std::sync::Arc;
use support::*;
use tenon_core::catalog::{AwsCatalogOptions, aws, synthetic};
use tenon_core::disruption::Method;
use tenon_core::disruption::budgets::{BudgetContext, BudgetRule, KarpenterBudgets};
use tenon_core::disruption::consolidator::{ApproveAll, CandidateView, Consolidator, PlanView};
use tenon_core::instancetype::InstanceType;
use tenon_core::model::{Budget, BudgetNodes, DisruptionReason};
use tenon_core::resources::Resources;
use tenon_core::scorer::{Candidate, PriceScorer, Scorer, ScoringInput};
use tenon_core::workload::Rng;
use tenon_policy::adapters::{Bound, Mode, NodePoolContext, WasmBudgetRule, WasmConsolidator, WasmScorer};
use tenon_policy::metrics::Metrics;
use tenon_policy::{Limits, PolicyEngine};

const CASES: usize = 1000;

fn bound(name: &str, config: &str) -> Bound {
    // These cases compare decisions, not speed: a loaded CI machine must not turn a slow call
    // into a fallback (the deadline itself is tested in hostile.rs).
    let engine = PolicyEngine::new(Limits { deadline_ms: 5_000, ..Limits::default() }, Some(cache_dir())).unwrap();
    let (policy, _) = engine.load(name, &wasm(bundle_dir(), name)).unwrap();
    Bound::new(
        Arc::new(policy),
        NodePoolContext { name: "general".into(), config: config.into(), ..Default::default() },
        Mode::Enforce,
        Arc::new(Metrics::default()),
    )
}

#[test]
fn default_scoring_matches_price_order() {
    let wasm = WasmScorer::new(bound("default-scoring", "{}"));
    let catalogs: [Vec<InstanceType>; 2] =
        [synthetic(60), aws(&AwsCatalogOptions::default()).unwrap().into_iter().take(200).collect()];
    let mut rng = Rng::new(7);
    let requests = Resources::new(1000, 1 << 30, 1);
    for case in 0..CASES {
        let cat = &catalogs[case % 2];
        let picked: Vec<&InstanceType> = (0..1 + rng.below(40)).map(|_| rng.pick(cat)).collect();
        let mut candidates: Vec<Candidate> = picked
            .iter()
            .flat_map(|t| t.offerings.iter().map(move |o| Candidate { instance_type: t, offering: o }))
            .collect();
        // The scheduler hands candidates over in price order (ties by name, zone, capacity type).
        candidates.sort_by(|a, b| {
            a.offering
                .price
                .total_cmp(&b.offering.price)
                .then_with(|| a.instance_type.name.cmp(&b.instance_type.name))
                .then_with(|| a.offering.zone.cmp(&b.offering.zone))
        });
        candidates.dedup_by(|a, b| a.instance_type.name == b.instance_type.name && a.offering == b.offering);
        let input = ScoringInput { nodepool: "general", now: 0, requests: &requests, pod_count: 1, candidates };
        assert_eq!(wasm.rank(&input), PriceScorer.rank(&input), "case {case}");
        assert!(wasm.0.last_failure().is_none(), "{:?}", wasm.0.last_failure());
    }
}

#[test]
fn default_consolidation_approves_like_karpenter() {
    let wasm = WasmConsolidator(bound("default-consolidation", "{}"));
    let mut rng = Rng::new(11);
    let methods = [Method::Emptiness, Method::MultiNodeConsolidation, Method::SingleNodeConsolidation];
    for case in 0..CASES {
        let plans: Vec<PlanView> = (0..1 + rng.below(3))
            .map(|i| PlanView {
                method: *rng.pick(&methods),
                candidates: (0..1 + rng.below(4))
                    .map(|j| CandidateView {
                        node: format!("n{i}{j}"),
                        nodepool: "general".into(),
                        instance_type: "m6a.large".into(),
                        zone: "us-east-1a".into(),
                        capacity_type: "on-demand".into(),
                        price: rng.below(100) as f64 / 100.0,
                        age_seconds: rng.below(100_000) as i64,
                        cpu_utilisation: rng.below(100) as f64 / 100.0,
                        memory_utilisation: rng.below(100) as f64 / 100.0,
                        pods: rng.below(20),
                        disruption_cost: rng.below(50) as f64,
                    })
                    .collect(),
                replacement: (rng.below(2) == 0).then(|| ("m6a.large".to_string(), 0.0864)),
                savings_per_hour: rng.below(100) as f64 / 10.0,
                now: 1_795_996_800,
            })
            .collect();
        let (a, b) = (wasm.review(&plans), ApproveAll.review(&plans));
        assert_eq!((a.order, a.verdicts), (b.order, b.verdicts), "case {case}");
    }
}

#[test]
fn default_budget_matches_karpenter_budgets() {
    let wasm = WasmBudgetRule(bound("default-budget", "{}"));
    let mut rng = Rng::new(13);
    let reasons = [DisruptionReason::Underutilized, DisruptionReason::Empty, DisruptionReason::Drifted];
    let window = |spec: &str, d| Some(Ok((tenon_api::cron::CronSchedule::parse(spec).unwrap(), d)));
    for case in 0..CASES {
        let budgets: Vec<Budget> = (0..rng.below(4))
            .map(|_| Budget {
                nodes: match rng.below(5) {
                    0 => BudgetNodes::Invalid,
                    1 | 2 => BudgetNodes::Count(rng.below(5) as u32),
                    _ => BudgetNodes::Percent(*rng.pick(&[0u32, 10, 25, 50, 100])),
                },
                reasons: (rng.below(2) == 0).then(|| vec![*rng.pick(&reasons)]),
                window: match rng.below(6) {
                    0 => Some(Err("bad schedule".into())),
                    1 => window("0 9 * * mon-fri", 8 * 3600),
                    2 => window("@daily", 3600),
                    _ => None,
                },
            })
            .collect();
        let total = rng.below(50);
        let ctx = BudgetContext {
            nodepool: "general",
            reason: *rng.pick(&reasons),
            now: 1_795_996_800 + rng.below(7 * 86_400) as i64,
            total_nodes: total,
            disrupting: rng.below(total + 1),
            budgets: &budgets,
        };
        assert_eq!(wasm.allowed(&ctx).allowed, KarpenterBudgets.allowed(&ctx).allowed, "case {case}: {budgets:?}");
        assert!(wasm.0.last_failure().is_none(), "{:?}", wasm.0.last_failure());
    }
}

#[test]
fn the_scheduler_ranks_through_a_wasm_policy() {
    use tenon_core::workload::{open_nodepool, scheduling_benchmark};
    let cat = Arc::new(synthetic(20));
    let mut snap = scheduling_benchmark(10, cat.clone(), 3);
    snap.nodepools = vec![open_nodepool("default", cat)];
    let native = tenon_core::schedule(&snap, &PriceScorer);
    let engine = PolicyEngine::new(Limits::default(), Some(cache_dir())).unwrap();
    let (policy, _) = engine.load("hostile-scorer", &wasm(hostile_dir(), "hostile-scorer")).unwrap();
    let reverse = WasmScorer::new(Bound::new(
        Arc::new(policy),
        NodePoolContext { name: "default".into(), config: r#"{"mode": "reverse"}"#.into(), ..Default::default() },
        Mode::Enforce,
        Arc::new(Metrics::default()),
    ));
    let via_wasm = tenon_core::schedule(&snap, &reverse);
    assert_eq!(native.nodeclaims.len(), via_wasm.nodeclaims.len(), "the policy ranks, it does not change placement");
    for (a, b) in native.nodeclaims.iter().zip(&via_wasm.nodeclaims) {
        let (a, b) = (a.instance_type_names(&snap), b.instance_type_names(&snap));
        assert_eq!(a.first(), b.last(), "most expensive first under the reversing policy");
    }
    assert!(reverse.0.metrics.calls("hostile-scorer", "scoring") >= native.nodeclaims.len() as u64);
}
