//! Hostile policies: each misbehaviour gives its typed failure within the deadline and the
//! safe fallback, and the host carries on.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;
use tenon_api::policy::PolicyRef;
use tenon_core::catalog::synthetic;
use tenon_core::disruption::Method;
use tenon_core::disruption::budgets::{BudgetContext, BudgetRule};
use tenon_core::disruption::consolidator::{CandidateView, Consolidator, PlanView, Verdict};
use tenon_core::instancetype::InstanceType;
use tenon_core::model::{Budget, BudgetNodes, DisruptionReason};
use tenon_core::resources::Resources;
use tenon_core::scorer::{Candidate, Scorer, ScoringInput};
use tenon_policy::adapters::{Bound, Mode, NodePoolContext, WasmBudgetRule, WasmConsolidator, WasmScorer};
use tenon_policy::metrics::Metrics;
use tenon_policy::{FailureKind, Limits, PolicyEngine, PolicyError, PolicyStore};

fn engine(deadline_ms: u64) -> PolicyEngine {
    PolicyEngine::new(Limits { deadline_ms, ..Limits::default() }, Some(cache_dir())).unwrap()
}

fn bound(
    engine: &PolicyEngine,
    dir: &std::path::Path,
    name: &str,
    mode: &str,
    shadow: bool,
    metrics: &Arc<Metrics>,
) -> Bound {
    let (policy, _) = engine.load(name, &wasm(dir, name)).unwrap();
    let ctx = NodePoolContext {
        name: "general".into(),
        labels: Default::default(),
        config: format!("{{\"mode\": \"{mode}\"}}"),
    };
    Bound::new(Arc::new(policy), ctx, if shadow { Mode::Shadow } else { Mode::Enforce }, metrics.clone())
}

fn types() -> Vec<InstanceType> {
    synthetic(10)
}

fn input(types: &[InstanceType]) -> ScoringInput<'_> {
    let mut candidates: Vec<Candidate> = types
        .iter()
        .flat_map(|t| t.offerings.iter().map(move |o| Candidate { instance_type: t, offering: o }))
        .collect();
    candidates.sort_by(|a, b| a.offering.price.total_cmp(&b.offering.price));
    ScoringInput { nodepool: "general", now: 1_795_996_800, requests: &REQUESTS, pod_count: 1, candidates }
}

static REQUESTS: Resources =
    Resources { cpu: 500, memory: 1 << 30, pods: 1, ephemeral_storage: 0, extended: Vec::new() };

/// Calls a hostile scorer in `mode`; returns the ranking, the failure kind recorded, and the time taken.
fn score(engine: &PolicyEngine, mode: &str) -> (Vec<usize>, Option<FailureKind>, Duration) {
    let metrics = Arc::new(Metrics::default());
    let scorer = WasmScorer(bound(engine, hostile_dir(), "hostile-scorer", mode, false, &metrics));
    let types = types();
    let start = Instant::now();
    let ranking = scorer.rank(&input(&types));
    (ranking, scorer.0.last_failure().map(|f| f.kind), start.elapsed())
}

fn price_order() -> Vec<usize> {
    (0..input(&types()).candidates.len()).collect()
}

#[test]
fn an_infinite_loop_is_stopped_within_twice_its_deadline() {
    let e = engine(100);
    let (ranking, kind, took) = score(&e, "loop");
    assert_eq!(kind, Some(FailureKind::Timeout));
    assert_eq!(ranking, price_order(), "falls back to price order");
    assert!(took < Duration::from_millis(200), "stopped after {took:?}, deadline 100ms");
}

#[test]
fn a_memory_bomb_hits_the_cap() {
    let (ranking, kind, _) = score(&engine(2000), "oom");
    assert_eq!(kind, Some(FailureKind::OutOfMemory));
    assert_eq!(ranking, price_order());
}

#[test]
fn a_panic_is_a_trap() {
    let (ranking, kind, _) = score(&engine(1000), "panic");
    assert_eq!(kind, Some(FailureKind::Trap));
    assert_eq!(ranking, price_order());
}

#[test]
fn a_panic_inside_a_tokio_runtime_is_a_trap_not_a_host_panic() {
    // The controller calls policies from its tokio runtime; a guest's panic message goes to
    // stderr through wasmtime-wasi's blocking bindings, which must not block_on there.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
    let (ranking, kind, _) = rt.block_on(async { score(&engine(1000), "panic") });
    assert_eq!(kind, Some(FailureKind::Trap));
    assert_eq!(ranking, price_order());
}

#[test]
fn answers_that_do_not_fit_are_invalid_output() {
    let e = engine(2000);
    for mode in ["nan", "short", "huge"] {
        let (ranking, kind, _) = score(&e, mode);
        assert_eq!(kind, Some(FailureKind::InvalidOutput), "{mode}");
        assert_eq!(ranking, price_order(), "{mode}");
    }
}

#[test]
fn a_policy_error_is_reported_and_falls_back() {
    let e = engine(1000);
    let metrics = Arc::new(Metrics::default());
    let scorer = WasmScorer(bound(&e, hostile_dir(), "hostile-scorer", "error", false, &metrics));
    let types = types();
    assert_eq!(scorer.rank(&input(&types)), price_order());
    let f = scorer.0.last_failure().unwrap();
    assert_eq!(f.kind, FailureKind::PolicyError);
    assert!(f.message.contains("mode=error"), "{}", f.message);
    assert_eq!(metrics.failures("hostile-scorer", "scoring", FailureKind::PolicyError), 1);
    assert_eq!(metrics.calls("hostile-scorer", "scoring"), 1);
    assert!(
        metrics.render().contains(
            "tenon_policy_failures_total{policy=\"hostile-scorer\",hook=\"scoring\",kind=\"policy_error\"} 1"
        )
    );
}

#[test]
fn a_working_policy_decides_and_shadow_mode_only_counts() {
    let e = engine(1000);
    let (ranking, kind, _) = score(&e, "reverse");
    assert_eq!(kind, None);
    assert_ne!(ranking, price_order(), "enforced: the policy's order");
    let metrics = Arc::new(Metrics::default());
    let shadow = WasmScorer(bound(&e, hostile_dir(), "hostile-scorer", "reverse", true, &metrics));
    let types = types();
    assert_eq!(shadow.rank(&input(&types)), price_order(), "shadow: the default decides");
    assert_eq!(metrics.disagreements("hostile-scorer", "scoring"), 1);
}

fn plans() -> Vec<PlanView> {
    let c = CandidateView {
        node: "n1".into(),
        nodepool: "general".into(),
        instance_type: "m6a.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: "on-demand".into(),
        price: 0.0864,
        age_seconds: 3600,
        cpu_utilisation: 0.1,
        memory_utilisation: 0.1,
        pods: 1,
        disruption_cost: 1.0,
    };
    vec![PlanView {
        method: Method::SingleNodeConsolidation,
        candidates: vec![c],
        replacement: None,
        savings_per_hour: 0.0864,
        now: 0,
    }]
}

#[test]
fn a_consolidator_naming_unknown_plans_skips_them() {
    let e = engine(1000);
    let metrics = Arc::new(Metrics::default());
    let c = WasmConsolidator(bound(&e, hostile_dir(), "hostile-consolidator", "unknown-ids", false, &metrics));
    let review = c.review(&plans());
    assert!(matches!(&review.verdicts[0], Verdict::Reject(r) if r.contains("invalid_output")), "{:?}", review.verdicts);
    let c = WasmConsolidator(bound(&e, hostile_dir(), "hostile-consolidator", "reject", false, &metrics));
    assert_eq!(c.review(&plans()).verdicts, vec![Verdict::Reject("not today".into())]);
}

#[test]
fn a_trapping_budget_allows_nothing() {
    let e = engine(1000);
    let metrics = Arc::new(Metrics::default());
    let rule = WasmBudgetRule(bound(&e, hostile_dir(), "hostile-budget", "trap", false, &metrics));
    let budgets = [Budget { nodes: BudgetNodes::Percent(100), reasons: None, window: None }];
    let ctx = BudgetContext {
        nodepool: "general",
        reason: DisruptionReason::Underutilized,
        now: 0,
        total_nodes: 10,
        disrupting: 0,
        budgets: &budgets,
    };
    let a = rule.allowed(&ctx);
    assert_eq!(a.allowed, 0);
    assert!(a.why.contains("failed"), "{}", a.why);
    assert_eq!(rule.0.last_failure().unwrap().kind, FailureKind::Trap);
}

#[test]
fn a_component_of_another_world_cannot_score() {
    let e = engine(1000);
    let (policy, _) = e.load("default-budget", &wasm(bundle_dir(), "default-budget")).unwrap();
    let types = types();
    let wit = tenon_policy::adapters::scoring_input(&input(&types), ("p".into(), vec![], "{}".into()));
    let f = policy.rank(&wit, 0).unwrap_err();
    assert_eq!(f.kind, FailureKind::LoadError);
    assert!(f.message.contains("disruption-budget"), "{}", f.message);
}

#[test]
fn bytes_that_are_not_a_component_are_refused() {
    let e = engine(1000);
    let core_module = b"\0asm\x01\0\0\0";
    assert!(matches!(e.load("core", core_module), Err(PolicyError::NotComponent)));
    let whole = wasm(bundle_dir(), "default-scoring");
    let truncated = &whole[..whole.len() / 2];
    assert!(matches!(e.load("truncated", truncated), Err(PolicyError::Load(_))));
    assert!(matches!(e.load("text", b"hello, world"), Err(PolicyError::Load(_))));
}

#[test]
fn pinned_digests_must_match() {
    let store = PolicyStore::new(bundle_dir(), engine(1000));
    let sha = tenon_policy::engine::sha256_hex(&wasm(bundle_dir(), "default-scoring"));
    // Files in the store are named as built (default_scoring.wasm): reference by that name.
    let name = "default_scoring";
    assert!(store.resolve(&PolicyRef { name: name.into(), sha256: Some(sha.clone()) }).is_ok());
    let wrong = PolicyRef { name: name.into(), sha256: Some("0".repeat(64)) };
    match store.resolve(&wrong) {
        Err(PolicyError::DigestMismatch { found, .. }) => assert_eq!(found, sha),
        other => panic!("expected a digest mismatch, got {:?}", other.map(|p| p.name.clone())),
    }
    assert!(matches!(
        store.resolve(&PolicyRef { name: "nope".into(), sha256: None }),
        Err(PolicyError::NotFound { .. })
    ));
}
