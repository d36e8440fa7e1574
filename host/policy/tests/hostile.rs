//! Hostile policies: each misbehaviour gives its typed failure within the deadline and the
//! safe fallback, and the host carries on. Issue 18's holes each have a test here, named
//! after what now holds (sleeping guests, shadow mode, loosened budgets, wrong slots,
//! planted cache entries, unbounded strings, endless failures, panic messages).

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::*;
use tenon_api::policy::PolicyRef;
use tenon_core::catalog::synthetic;
use tenon_core::disruption::budgets::{BudgetContext, BudgetRule, KarpenterBudgets};
use tenon_core::disruption::consolidator::{ApproveAll, CandidateView, Consolidator, PlanView, Verdict};
use tenon_core::disruption::{Method, PolicySet, disrupt};
use tenon_core::instancetype::InstanceType;
use tenon_core::model::{
    Budget, BudgetNodes, ClaimInfo, ClusterSnapshot, DisruptionReason, DisruptionSettings, Node, NodePoolTemplate,
};
use tenon_core::resources::Resources;
use tenon_core::scorer::{Candidate, Scorer, ScoringInput};
use tenon_policy::adapters::{Bound, Mode, NodePoolContext, WasmBudgetRule, WasmConsolidator, WasmScorer};
use tenon_policy::cluster::{ClusterPolicies, NodePoolInfo};
use tenon_policy::engine::LoadPath;
use tenon_policy::error::MAX_TEXT;
use tenon_policy::metrics::Metrics;
use tenon_policy::{FailureKind, Limits, PolicyEngine, PolicyError, PolicyStore};

fn engine(deadline_ms: u64) -> PolicyEngine {
    PolicyEngine::new(Limits { deadline_ms, ..Limits::default() }, Some(cache_dir())).unwrap()
}

/// A fresh, empty precompile cache directory for one test.
fn fresh_cache(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tenon-hostile-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
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
    let scorer = WasmScorer::new(bound(engine, hostile_dir(), "hostile-scorer", mode, false, &metrics));
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
fn a_panic_is_a_trap_that_carries_the_guests_panic_message() {
    let e = engine(1000);
    let metrics = Arc::new(Metrics::default());
    let scorer = WasmScorer::new(bound(&e, hostile_dir(), "hostile-scorer", "panic", false, &metrics));
    let types = types();
    assert_eq!(scorer.rank(&input(&types)), price_order());
    let f = scorer.0.last_failure().unwrap();
    assert_eq!(f.kind, FailureKind::Trap);
    assert!(f.message.contains("deliberate panic"), "the guest's panic text, not only the backtrace: {}", f.message);
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
    let scorer = WasmScorer::new(bound(&e, hostile_dir(), "hostile-scorer", "error", false, &metrics));
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
    let shadow = WasmScorer::new(bound(&e, hostile_dir(), "hostile-scorer", "reverse", true, &metrics));
    let types = types();
    assert_eq!(shadow.rank(&input(&types)), price_order(), "shadow: the default decides");
    assert_eq!(metrics.disagreements("hostile-scorer", "scoring"), 1);
}

/// A call is a function of its input, so an identical question at the same decision time
/// is answered from the first answer; another time, or another question, calls again. A
/// failure is never kept.
#[test]
fn the_same_question_at_the_same_time_is_answered_once() {
    let e = engine(1000);
    let metrics = Arc::new(Metrics::default());
    let scorer = WasmScorer::new(bound(&e, hostile_dir(), "hostile-scorer", "reverse", false, &metrics));
    let types = types();
    let first = scorer.rank(&input(&types));
    assert_eq!(scorer.rank(&input(&types)), first);
    assert_eq!(metrics.calls("hostile-scorer", "scoring"), 1, "asked twice, called once");
    let mut bigger = input(&types);
    bigger.pod_count = 2;
    scorer.rank(&bigger);
    let mut later = input(&types);
    later.now += 1;
    assert_eq!(scorer.rank(&later), first);
    assert_eq!(metrics.calls("hostile-scorer", "scoring"), 3, "another question, another time: called");

    let failing = WasmScorer::new(bound(&e, hostile_dir(), "hostile-scorer", "error", false, &metrics));
    failing.rank(&input(&types));
    failing.rank(&input(&types));
    assert_eq!(metrics.calls("hostile-scorer", "scoring"), 5, "a failure is asked again");
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
    assert!(store.resolve(&PolicyRef { name: name.into(), sha256: Some(sha.clone()), oci: None }).is_ok());
    let wrong = PolicyRef { name: name.into(), sha256: Some("0".repeat(64)), oci: None };
    match store.resolve(&wrong) {
        Err(PolicyError::DigestMismatch { found, .. }) => assert_eq!(found, sha),
        other => panic!("expected a digest mismatch, got {:?}", other.map(|p| p.name.clone())),
    }
    assert!(matches!(
        store.resolve(&PolicyRef { name: "nope".into(), sha256: None, oci: None }),
        Err(PolicyError::NotFound { .. })
    ));
}

// ---- Issue 18, hole 1: a guest blocking in a WASI call ----

/// A deadline that a call doing little work meets even on a loaded machine.
const SLEEP_DEADLINE_MS: u64 = 500;

/// Each world's hostile guest in `mode`, with a [`SLEEP_DEADLINE_MS`] deadline.
fn all_three(mode: &str) -> (WasmScorer, WasmConsolidator, WasmBudgetRule) {
    let e = engine(SLEEP_DEADLINE_MS);
    let metrics = Arc::new(Metrics::default());
    (
        WasmScorer::new(bound(&e, hostile_dir(), "hostile-scorer", mode, false, &metrics)),
        WasmConsolidator(bound(&e, hostile_dir(), "hostile-consolidator", mode, false, &metrics)),
        WasmBudgetRule(bound(&e, hostile_dir(), "hostile-budget", mode, false, &metrics)),
    )
}

fn budget_ctx(budgets: &[Budget]) -> BudgetContext<'_> {
    BudgetContext {
        nodepool: "general",
        reason: DisruptionReason::Underutilized,
        now: 1_795_996_800,
        total_nodes: 10,
        disrupting: 0,
        budgets,
    }
}

#[test]
fn sleeping_guests_in_all_three_worlds_return_within_the_deadline() {
    // Each sleeps an hour in wasi:clocks (subscribe + poll), then answers.
    let (scorer, consolidator, budget) = all_three("sleep");
    let types = types();
    let margin = Duration::from_millis(SLEEP_DEADLINE_MS + 50);

    let start = Instant::now();
    let ranking = scorer.rank(&input(&types));
    assert!(start.elapsed() < margin, "the scorer took {:?}", start.elapsed());
    assert_eq!(scorer.0.last_failure(), None, "a sleep is no failure: virtual time passes at once");
    assert_ne!(ranking, price_order(), "its answer (reverse price order) was used");

    let start = Instant::now();
    let review = consolidator.review(&plans());
    assert!(start.elapsed() < margin, "the consolidator took {:?}", start.elapsed());
    assert_eq!(consolidator.0.last_failure(), None);
    assert_eq!(review.verdicts, vec![Verdict::Approve]);

    let budgets = [Budget { nodes: BudgetNodes::Percent(100), reasons: None, window: None }];
    let start = Instant::now();
    let a = budget.allowed(&budget_ctx(&budgets));
    assert!(start.elapsed() < margin, "the budget policy took {:?}", start.elapsed());
    assert_eq!(budget.0.last_failure(), None);
    assert_eq!(a.allowed, 10);
}

#[test]
fn a_sleeping_guest_inside_a_tokio_runtime_returns_too() {
    // The controller's decisions run on tokio's blocking threads.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).build().unwrap();
    let took = rt.block_on(async {
        tokio::task::spawn_blocking(|| {
            let (scorer, _, _) = all_three("sleep");
            let types = types();
            let start = Instant::now();
            scorer.rank(&input(&types));
            start.elapsed()
        })
        .await
        .unwrap()
    });
    assert!(took < Duration::from_millis(SLEEP_DEADLINE_MS + 50), "{took:?}");
}

#[test]
fn guests_cannot_tell_real_time() {
    // Wall clock, the time a 5 ms sleep took, and spins on a 1 ms timer pollable.
    let e = engine(1000);
    let (policy, _) = e.load("hostile-scorer", &wasm(hostile_dir(), "hostile-scorer")).unwrap();
    let types = types();
    let ctx = ("general".to_string(), vec![], r#"{"mode": "clock"}"#.to_string());
    let wit = tenon_policy::adapters::scoring_input(&input(&types), ctx);
    let now = 1_795_996_800;
    let first = policy.rank(&wit, now).unwrap();
    assert_eq!(first[0], now as f64, "the wall clock reads the decision's time");
    assert_eq!(first[1], 0.0, "a sleep takes no monotonic time");
    assert_eq!(first[2], 0.0, "a timer pollable is ready at once: no spinning to count real time");
    std::thread::sleep(Duration::from_millis(5));
    assert_eq!(policy.rank(&wit, now).unwrap(), first, "same input, same answer");
}

// ---- Hole 2: shadow mode must not change behaviour ----

#[test]
fn shadow_failures_leave_decisions_as_the_default() {
    let e = engine(1000);
    let metrics = Arc::new(Metrics::default());
    let shadow = WasmConsolidator(bound(&e, hostile_dir(), "hostile-consolidator", "panic", true, &metrics));
    let review = shadow.review(&plans());
    assert_eq!(review.verdicts, ApproveAll.review(&plans()).verdicts, "the default approves");
    assert_eq!(shadow.0.last_failure().map(|f| f.kind), Some(FailureKind::Trap), "the failure is still recorded");

    let rule = WasmBudgetRule(bound(&e, hostile_dir(), "hostile-budget", "trap", true, &metrics));
    let budgets = [Budget { nodes: BudgetNodes::Count(3), reasons: None, window: None }];
    let ctx = budget_ctx(&budgets);
    assert_eq!(rule.allowed(&ctx), KarpenterBudgets.allowed(&ctx));
    assert_eq!(rule.0.last_failure().map(|f| f.kind), Some(FailureKind::Trap));
}

// ---- Hole 3: a budget policy can only tighten ----

const NOW: i64 = 1_795_996_800;

/// NodePool `general` (budget `nodes`) with one empty on-demand node, empty for an hour.
fn one_empty_node(nodes: BudgetNodes) -> ClusterSnapshot {
    let types = Arc::new(synthetic(4));
    let it = &types[1];
    let offering = &it.offerings[0];
    let labels: BTreeMap<String, String> = [
        ("karpenter.sh/nodepool", "general"),
        ("node.kubernetes.io/instance-type", it.name.as_str()),
        ("topology.kubernetes.io/zone", offering.zone.as_str()),
        ("karpenter.sh/capacity-type", offering.capacity_type.as_str()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let node = Node {
        name: "n1".into(),
        nodepool: Some("general".into()),
        labels,
        allocatable: it.allocatable().clone(),
        capacity: it.capacity.clone(),
        claim: Some(ClaimInfo {
            nodeclaim: "n1".into(),
            created: NOW - 3600,
            initialized: true,
            ready: true,
            last_pod_event: Some(NOW - 3600),
            instance_type: it.name.clone(),
            zone: offering.zone.clone(),
            capacity_type: offering.capacity_type.clone(),
            price: offering.price,
            ..Default::default()
        }),
        ..Default::default()
    };
    let pool = NodePoolTemplate {
        name: "general".into(),
        weight: 0,
        requirements: Default::default(),
        labels: BTreeMap::new(),
        taints: vec![],
        startup_taints: vec![],
        limits: BTreeMap::new(),
        instance_types: types.clone(),
        disruption: DisruptionSettings {
            budgets: vec![Budget { nodes, reasons: None, window: None }],
            ..Default::default()
        },
        expire_after: None,
        termination_grace_period: None,
        hash: "h".into(),
        replicas: None,
        unavailable: None,
    };
    ClusterSnapshot { now: NOW, nodepools: vec![pool], nodes: vec![node], ..Default::default() }
}

fn pool_info(annotations: &[(&str, &str)]) -> Vec<NodePoolInfo> {
    vec![NodePoolInfo {
        name: "general".into(),
        labels: BTreeMap::new(),
        annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    }]
}

fn hostile_store() -> PolicyStore {
    PolicyStore::new(hostile_dir(), engine(1000))
}

#[test]
fn a_budget_policy_cannot_loosen_nodes_zero() {
    let store = hostile_store();
    let snap = one_empty_node(BudgetNodes::Count(0));
    assert!(disrupt(&snap, &tenon_core::disruption::DefaultPolicies).plan.is_none(), "nodes: 0 blocks the default");
    for mode in ["max", "billions", "wrapped"] {
        let config = format!(r#"{{"mode": "{mode}"}}"#);
        let (set, problems) = ClusterPolicies::resolve(
            &store,
            &pool_info(&[("tenon.dev/disruption-policy", "hostile-budget"), ("tenon.dev/policy-config", &config)]),
            None,
        );
        assert!(problems.is_empty(), "{problems:?}");
        let d = disrupt(&snap, &set);
        assert!(d.plan.is_none(), "{mode}: the policy's answer cannot exceed nodes: \"0\"");
        let a = &d.allowed[&("general".to_string(), DisruptionReason::Empty)];
        assert_eq!(a.allowed, 0, "{mode}");
        assert!(a.why.contains("can only tighten"), "{mode}: {}", a.why);
    }
    // Where the NodePool allows it, the policy's answer still counts: it may tighten.
    let open = one_empty_node(BudgetNodes::Percent(100));
    assert!(disrupt(&open, &tenon_core::disruption::DefaultPolicies).plan.is_some());
    let (set, _) = ClusterPolicies::resolve(
        &store,
        &pool_info(&[
            ("tenon.dev/disruption-policy", "hostile-budget"),
            ("tenon.dev/policy-config", r#"{"mode": "long-reason"}"#),
        ]),
        None,
    );
    assert!(disrupt(&open, &set).plan.is_none(), "an answer of 0 tightens 100% to nothing");
}

// ---- Hole 5: wrong slots and unloadable policies ----

#[test]
fn a_component_named_for_another_hook_is_an_error_and_fails_safe() {
    let store = hostile_store();
    let snap = one_empty_node(BudgetNodes::Percent(100));
    // A scorer named as the disruption policy: refused, and the budget hook fails closed.
    let (set, problems) = ClusterPolicies::resolve(
        &store,
        &pool_info(&[
            ("tenon.dev/disruption-policy", "hostile-scorer"),
            ("tenon.dev/policy-config", r#"{"mode": "reverse"}"#),
        ]),
        None,
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    let why = &problems[0].1;
    assert!(
        why.contains(
            "tenon.dev/disruption-policy names hostile-scorer, which implements scorer, not disruption-budget"
        ),
        "{why}"
    );
    assert!(why.contains("tenon.dev/scoring-policy instead"), "names the fix: {why}");
    assert_eq!(set.scorer().name(), "per-nodepool");
    let types = types();
    assert_eq!(set.rank(&input(&types)), price_order(), "the scorer did not become the NodePool's scorer");
    assert!(disrupt(&snap, &set).plan.is_none(), "the budget hook fails closed, as at run time");
    assert_eq!(set.budget_rule("general").allowed(&budget_ctx(&[])).allowed, 0);
    let failures = set.take_failures();
    assert_eq!(failures.len(), 1);
    assert_eq!((failures[0].kind.as_str(), failures[0].fallback.as_str()), ("load_error", "zero disruptions"));

    // A consolidation policy that is not there: no plans, reported the same way.
    let (set, problems) =
        ClusterPolicies::resolve(&store, &pool_info(&[("tenon.dev/consolidation-policy", "no-such-policy")]), None);
    assert!(problems[0].1.contains("no-such-policy") && problems[0].1.contains("no plans decides"), "{problems:?}");
    let d = disrupt(&snap, &set);
    assert!(d.plan.is_none());
    assert!(d.rejected.iter().any(|r| r.reason.contains("unavailable")), "{:?}", d.rejected);

    // A bad config annotation spoils the policies it configures; in shadow mode the default decides.
    let (set, problems) = ClusterPolicies::resolve(
        &store,
        &pool_info(&[
            ("tenon.dev/disruption-policy", "hostile-budget"),
            ("tenon.dev/policy-config", "{not json"),
            ("tenon.dev/policy-mode", "shadow"),
        ]),
        None,
    );
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(disrupt(&snap, &set).plan.is_some(), "shadow mode: the default decides");
}

#[test]
fn a_component_that_imports_sockets_does_not_load() {
    let e = engine(1000);
    match e.load("hostile-network", &wasm(hostile_dir(), "hostile-network")) {
        Err(PolicyError::Load(m)) => {
            assert!(m.contains("wasi:sockets/") && m.contains("a policy may import only"), "{m}")
        }
        other => panic!("expected a load error, got {:?}", other.map(|(p, _)| p.name)),
    }
}

#[test]
fn files_and_environment_are_not_there() {
    let e = engine(1000);
    let metrics = Arc::new(Metrics::default());
    let types = types();
    for (mode, says) in [("read-file", "read-file:"), ("env", "env: empty")] {
        let scorer = WasmScorer::new(bound(&e, hostile_dir(), "hostile-scorer", mode, false, &metrics));
        scorer.rank(&input(&types));
        let f = scorer.0.last_failure().expect("the guest reports it");
        assert_eq!(f.kind, FailureKind::PolicyError, "{mode}");
        assert!(f.message.contains(says), "{mode}: {}", f.message);
    }
}

// ---- Hole 6: the precompile cache ----

#[test]
fn a_planted_cache_entry_is_not_loaded() {
    let dir = fresh_cache("planted");
    let e = PolicyEngine::new(Limits::default(), Some(dir.clone())).unwrap();
    assert_eq!(e.cache_refused(), None);
    let (budget_bytes, scorer_bytes) = (wasm(bundle_dir(), "default-budget"), wasm(bundle_dir(), "default-scoring"));
    assert_eq!(e.load("default-budget", &budget_bytes).unwrap().1, LoadPath::Compiled);
    assert_eq!(e.load("default-scoring", &scorer_bytes).unwrap().1, LoadPath::Compiled);
    let entry = |bytes: &[u8]| {
        let sha = tenon_policy::engine::sha256_hex(bytes);
        dir.join(format!("{sha}-{}.cwasm", e.compatibility_hash()))
    };
    // Another policy's native code copied over the scorer's entry.
    std::fs::copy(entry(&budget_bytes), entry(&scorer_bytes)).unwrap();
    let again = PolicyEngine::new(Limits::default(), Some(dir.clone())).unwrap();
    let (policy, path) = again.load("default-scoring", &scorer_bytes).unwrap();
    assert!(matches!(&path, LoadPath::Recompiled(why) if why.contains("authentication")), "{path:?}");
    assert_eq!(policy.world, tenon_policy::World::Scorer, "the scorer's own code runs");
    // Recompiled and replaced: the next start loads it from the cache again.
    let third = PolicyEngine::new(Limits::default(), Some(dir.clone())).unwrap();
    assert_eq!(third.load("default-scoring", &scorer_bytes).unwrap().1, LoadPath::FromCache);
    // Garbage in an entry's place is refused the same way.
    std::fs::write(entry(&budget_bytes), b"TENONPC1 planted native code").unwrap();
    let (_, path) = third.load("default-budget", &budget_bytes).unwrap();
    assert!(matches!(path, LoadPath::Recompiled(_)), "{path:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cache_directory_others_can_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let dir = fresh_cache("shared");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = PolicyEngine::new(Limits::default(), Some(dir.clone())).unwrap();
    let why = e.cache_refused().expect("refused");
    assert!(why.contains("chmod 700"), "{why}");
    let (_, path) = e.load("default-budget", &wasm(bundle_dir(), "default-budget")).unwrap();
    assert_eq!(path, LoadPath::Compiled, "compiled in memory");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0, "nothing written there");
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- Hole 7: unbounded strings ----

#[test]
fn an_8_mib_reason_or_error_is_truncated() {
    let e = engine(2000);
    let metrics = Arc::new(Metrics::default());
    let c = WasmConsolidator(bound(&e, hostile_dir(), "hostile-consolidator", "long-reason", false, &metrics));
    let Verdict::Reject(reason) = &c.review(&plans()).verdicts[0] else { panic!("rejected") };
    assert!(reason.len() <= MAX_TEXT + 64, "{} bytes kept", reason.len());
    assert!(
        reason.ends_with(&format!("[truncated: {} bytes in all]", 8 << 20)),
        "marked: …{}",
        &reason[reason.len() - 40..]
    );

    let scorer = WasmScorer::new(bound(&e, hostile_dir(), "hostile-scorer", "long-error", false, &metrics));
    let types = types();
    scorer.rank(&input(&types));
    let f = scorer.0.last_failure().unwrap();
    assert_eq!(f.kind, FailureKind::PolicyError);
    assert!(f.message.len() <= MAX_TEXT + 64 && f.message.contains("[truncated:"), "{}", f.message.len());

    let rule = WasmBudgetRule(bound(&e, hostile_dir(), "hostile-budget", "long-reason", false, &metrics));
    let a = rule.allowed(&budget_ctx(&[]));
    assert!(a.why.len() <= MAX_TEXT + 64 && a.why.contains("[truncated:"), "{}", a.why.len());
}

// ---- Hole 8: a policy that always fails ----

#[test]
fn a_policy_that_keeps_failing_is_skipped_for_a_while_then_tried_again() {
    let e = engine(20);
    let metrics = Arc::new(Metrics::default());
    let scorer = WasmScorer::new(bound(&e, hostile_dir(), "hostile-scorer", "loop", false, &metrics));
    let types = types();
    let mut at = input(&types);
    let start = Instant::now();
    for _ in 0..50 {
        assert_eq!(scorer.rank(&at), price_order());
    }
    let took = start.elapsed();
    assert_eq!(metrics.calls("hostile-scorer", "scoring"), 5, "five timeouts, then skipped");
    assert_eq!(metrics.skips("hostile-scorer", "scoring"), 45);
    assert!(took < Duration::from_millis(5 * 40 + 200), "50 decisions took {took:?}");
    let health = scorer.0.health().unwrap();
    assert!(health.contains("5 in a row (timeout ×5)") && health.contains("skipped for 30s"), "{health}");
    // After the backoff (decision time), one trial call.
    at.now += 30;
    scorer.rank(&at);
    assert_eq!(metrics.calls("hostile-scorer", "scoring"), 6);
    assert!(scorer.0.health().unwrap().contains("6 in a row"), "{:?}", scorer.0.health());
}
