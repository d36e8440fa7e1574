//! (Long: tests only, one per disruption behaviour the seed's runbooks name.)
//! Disruption decisions: the seed's scale-to-zero, each method, budgets, blockers, drain order.

use crate::support;

use support::*;
use tenon_core::disruption::budgets::{BudgetContext, BudgetRule, KarpenterBudgets};
use tenon_core::disruption::consolidator::{Consolidator, PlanView, Review, Verdict};
use tenon_core::disruption::drain::{DrainAction, drain_order};
use tenon_core::disruption::{DefaultPolicies, DisruptionDecision, Method, PolicySet, disrupt};
use tenon_core::model::{Budget, BudgetNodes, ClusterSnapshot, DisruptionReason, PodDisruptionBudget};
use tenon_core::orchestration::expiration;
use tenon_core::selector::LabelSelector;

const T0: i64 = 1_795_996_800; // 2026-11-30T00:00:00Z, a Monday
const MIN: i64 = 60;

fn decide(s: &ClusterSnapshot) -> DisruptionDecision {
    disrupt(s, &DefaultPolicies)
}

/// One on-demand NodePool, `general`, consolidating after 10m.
fn cluster(now: i64) -> ClusterSnapshot {
    let mut p = pool("general");
    p.requirements.add(req("karpenter.sh/capacity-type", tenon_core::requirements::Operator::In, &["on-demand"]));
    p.disruption.consolidate_after = Some(10 * MIN);
    ClusterSnapshot { now, nodepools: vec![p], ..Default::default() }
}

#[test]
fn scaled_to_zero_nodes_go_after_consolidate_after_not_before() {
    // The seed: inflate scaled to 0 leaves its nodes empty; consolidateAfter is 10m.
    let mut s = cluster(T0 + 9 * MIN);
    for i in 0..3 {
        s.nodes.push(managed(&format!("n{i}"), "general", "gp.large", "zone-a", T0));
    }
    assert!(decide(&s).plan.is_none(), "9 minutes after the last pod left: too early");
    s.now = T0 + 10 * MIN;
    let d = decide(&s);
    let plan = d.plan.expect("10 minutes after: empty nodes are removed");
    assert_eq!(plan.method, Method::Emptiness);
    // The default budget is 10% of 3 nodes, rounded up: one node at a time.
    assert_eq!(plan.candidates.len(), 1);
    assert!(plan.savings_per_hour > 0.0);
}

#[test]
fn consolidate_after_never_keeps_empty_nodes() {
    let mut s = cluster(T0 + 100 * MIN);
    s.nodepools[0].disruption.consolidate_after = None;
    s.nodes.push(managed("n0", "general", "gp.large", "zone-a", T0));
    assert!(decide(&s).plan.is_none());
}

/// Three xlarge nodes with a 1-CPU pod each, a budget letting all of them go.
fn three_underused_nodes() -> ClusterSnapshot {
    let mut s = cluster(T0 + 60 * MIN);
    s.nodepools[0].disruption.budgets = vec![Budget { nodes: BudgetNodes::Percent(100), reasons: None, window: None }];
    for i in 0..3 {
        let n = format!("n{i}");
        s.nodes.push(managed(&n, "general", "gp.xlarge", "zone-a", T0));
        s.pods.push(bound(&format!("p{i}"), &n, 1000, 1));
    }
    s
}

#[test]
fn multi_node_consolidation_replaces_three_underused_nodes_with_one_cheaper() {
    let s = three_underused_nodes();
    let d = decide(&s);
    let plan = d.plan.expect("a plan");
    assert_eq!(plan.method, Method::MultiNodeConsolidation);
    assert_eq!(plan.candidates.len(), 3);
    assert_eq!(plan.replacements.len(), 1, "three 1-cpu pods fit one smaller node");
    assert_eq!(plan.pods.len(), 3);
    let three_xlarge: f64 = (0..3).map(|i| s.nodes[i].claim.as_ref().unwrap().price).sum();
    assert!(plan.savings_per_hour > 0.0 && plan.savings_per_hour < three_xlarge);
}

/// Ranks offerings most expensive first and counts its calls.
#[derive(Default)]
struct Reversing(std::cell::Cell<usize>);

impl tenon_core::scorer::Scorer for Reversing {
    fn rank(&self, input: &tenon_core::scorer::ScoringInput<'_>) -> Vec<usize> {
        self.0.set(self.0.get() + 1);
        (0..input.candidates.len()).rev().collect()
    }
    fn name(&self) -> &str {
        "reversing"
    }
}

impl PolicySet for Reversing {
    fn scorer(&self) -> &dyn tenon_core::scorer::Scorer {
        self
    }
    fn consolidator(&self, _: &str) -> &dyn Consolidator {
        &tenon_core::disruption::consolidator::ApproveAll
    }
    fn budget_rule(&self, _: &str) -> &dyn BudgetRule {
        &KarpenterBudgets
    }
}

/// Consolidation simulates in price order and has the NodePool's scorer rank only a
/// would-be replacement: the plan's replacement still carries the scorer's order over the
/// same options.
#[test]
fn the_scorer_ranks_a_plans_replacement() {
    let s = three_underused_nodes();
    let by_price = disrupt(&s, &DefaultPolicies).plan.expect("a plan");
    let reversing = Reversing::default();
    let d = disrupt(&s, &reversing);
    let plan = d.plan.expect("the same plan");
    assert_eq!((plan.method, &plan.candidates), (by_price.method, &by_price.candidates));
    let (r, p) = (&plan.replacements[0], &by_price.replacements[0]);
    let reversed: Vec<u32> = p.instance_types.iter().rev().copied().collect();
    assert!(p.instance_types.len() > 1, "{:?}", p.instance_types);
    assert_eq!(r.instance_types, reversed, "the replacement's options, most expensive first");
    assert!(reversing.0.get() >= 1, "the scorer ranked it");
}

#[test]
fn single_node_consolidation_deletes_when_pods_fit_elsewhere() {
    let mut s = cluster(T0 + 60 * MIN);
    s.nodes.push(managed("big", "general", "arm.xlarge", "zone-a", T0));
    s.nodes.push(managed("small", "general", "arm.small", "zone-a", T0));
    // Big saves more per disruption and is tried first, but `a` needs all of it: nothing
    // cheaper holds it. Small's pod fits on big.
    s.pods.push(bound("a", "big", 15_000, 4));
    s.pods.push(bound("b", "small", 500, 1));
    // Budget of one node (10% of 2 rounded up): multi-node cannot take two.
    let plan = decide(&s).plan.expect("a plan");
    assert_eq!(plan.method, Method::SingleNodeConsolidation);
    assert_eq!(s.nodes[plan.candidates[0]].name, "small");
    assert!(plan.replacements.is_empty(), "b fits on big");
}

#[test]
fn no_consolidation_to_a_pricier_node() {
    let mut s = cluster(T0 + 60 * MIN);
    s.nodes.push(managed("n", "general", "arm.small", "zone-a", T0));
    s.pods.push(bound("a", "n", 1500, 2));
    assert!(decide(&s).plan.is_none(), "arm.small is already the cheapest fit");
}

#[test]
fn do_not_disrupt_and_pdbs_block_consolidation() {
    let mut s = cluster(T0 + 60 * MIN);
    s.nodes.push(managed("n", "general", "gp.xlarge", "zone-a", T0));
    let mut p = bound("guarded", "n", 100, 1);
    p.annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    s.pods.push(p);
    let d = decide(&s);
    assert!(d.plan.is_none());
    assert!(d.blocked[0].reason.contains("do-not-disrupt"), "{:?}", d.blocked);

    // The duration form counts from the pod's start (Karpenter's status.startTime), not
    // its creation, and protects a pod not started yet.
    s.pods[0].annotations.insert("karpenter.sh/do-not-disrupt".into(), "30m".into());
    s.pods[0].created = T0;
    assert!(decide(&s).plan.is_none(), "not started: still protected");
    s.pods[0].started = Some(T0 + 45 * MIN);
    assert!(decide(&s).plan.is_none(), "created an hour ago, started 15m ago: protected");
    s.pods[0].started = Some(T0);
    assert!(decide(&s).plan.is_some(), "30m after its start the annotation no longer holds");

    s.pods[0].annotations.clear();
    s.pods[0].labels = labels(&[("app", "db")]);
    s.pdbs.push(PodDisruptionBudget {
        namespace: "default".into(),
        name: "db".into(),
        selector: LabelSelector::from_labels(&labels(&[("app", "db")])),
        disruptions_allowed: 0,
        unhealthy_always_allow: false,
        fully_blocking: false,
    });
    let d = decide(&s);
    assert!(d.plan.is_none());
    assert!(d.blocked[0].reason.contains("PodDisruptionBudget=[default/db]"), "{:?}", d.blocked);
}

#[test]
fn drift_from_a_template_change_replaces_the_node() {
    let mut s = cluster(T0 + 60 * MIN);
    s.nodepools[0].hash = "new".into();
    s.nodes.push(managed("n", "general", "gp.large", "zone-a", T0));
    s.pods.push(bound("a", "n", 3000, 2));
    let plan = decide(&s).plan.expect("drift plan");
    assert_eq!(plan.method, Method::Drift);
    assert!(plan.reason.contains("NodePoolDrifted"), "{}", plan.reason);
    assert_eq!(plan.replacements.len(), 1);
    // Another tool's hash version is re-stamped, not drift.
    s.nodes[0].claim.as_mut().unwrap().nodepool_hash_version = Some("v3".into());
    assert!(decide(&s).plan.is_none_or(|p| p.method != Method::Drift));
}

#[test]
fn drift_from_requirements_and_the_cloud() {
    let mut s = cluster(T0);
    s.nodepools[0].requirements.add(req("kubernetes.io/arch", tenon_core::requirements::Operator::In, &["arm64"]));
    s.nodes.push(managed("n", "general", "gp.large", "zone-a", T0));
    let plan = decide(&s).plan.expect("drift plan");
    assert!(plan.reason.contains("RequirementsDrifted"), "{}", plan.reason);
    let mut s = cluster(T0);
    s.nodes.push(managed("n", "general", "gp.large", "zone-a", T0));
    s.nodes[0].claim.as_mut().unwrap().drift = Some("AMIDrift".into());
    assert!(decide(&s).plan.unwrap().reason.contains("AMIDrift"));
}

#[test]
fn budgets_scope_by_reason_and_schedule() {
    let mut s = cluster(T0);
    s.nodepools[0].hash = "new".into();
    s.nodepools[0].disruption.consolidate_after = None;
    s.nodes.push(managed("n", "general", "gp.large", "zone-a", T0));
    // No drift on weekdays 09:00-17:00 UTC; it is Monday 00:00.
    let window = tenon_api::cron::CronSchedule::parse("0 9 * * mon-fri").unwrap();
    s.nodepools[0].disruption.budgets = vec![
        Budget { nodes: BudgetNodes::Percent(10), reasons: None, window: None },
        Budget {
            nodes: BudgetNodes::Count(0),
            reasons: Some(vec![DisruptionReason::Drifted]),
            window: Some(Ok((window, 8 * 3600))),
        },
    ];
    assert!(decide(&s).plan.is_some(), "outside the window drift proceeds");
    s.now = T0 + 10 * 3600;
    let d = decide(&s);
    assert!(d.plan.is_none(), "inside the window nothing drifts");
    assert_eq!(d.allowed[&("general".to_string(), DisruptionReason::Drifted)].allowed, 0);
    assert_eq!(
        d.allowed[&("general".to_string(), DisruptionReason::Empty)].allowed,
        1,
        "other reasons keep their budget"
    );
}

#[test]
fn karpenter_budget_arithmetic() {
    let ctx = |budgets: &[Budget], total, disrupting, now| {
        KarpenterBudgets
            .allowed(&BudgetContext {
                nodepool: "p",
                reason: DisruptionReason::Underutilized,
                now,
                total_nodes: total,
                disrupting,
                budgets,
            })
            .allowed
    };
    let pct = |p| Budget { nodes: BudgetNodes::Percent(p), reasons: None, window: None };
    let count = |n| Budget { nodes: BudgetNodes::Count(n), reasons: None, window: None };
    assert_eq!(ctx(&[pct(10)], 10, 0, T0), 1);
    assert_eq!(ctx(&[pct(10)], 11, 0, T0), 2, "percentages round up");
    assert_eq!(ctx(&[pct(50), count(3)], 10, 0, T0), 3, "the most restrictive wins");
    assert_eq!(ctx(&[pct(50)], 10, 4, T0), 1, "nodes already disrupting count against it");
    assert_eq!(ctx(&[pct(10)], 10, 5, T0), 0);
    assert_eq!(ctx(&[], 10, 0, T0), usize::MAX, "no budget, no limit");
    assert_eq!(ctx(&[Budget { nodes: BudgetNodes::Invalid, reasons: None, window: None }], 10, 0, T0), 0);
    let bad = Budget { nodes: BudgetNodes::Percent(100), reasons: None, window: Some(Err("bad cron".into())) };
    assert_eq!(ctx(&[bad], 10, 0, T0), 0, "an unparsable schedule fails closed");
    let reasoned =
        Budget { nodes: BudgetNodes::Count(0), reasons: Some(vec![DisruptionReason::Drifted]), window: None };
    assert_eq!(ctx(&[pct(100), reasoned], 4, 0, T0), 4, "a budget for another reason does not apply");
}

#[test]
fn expiration_ignores_budgets() {
    let mut s = cluster(T0 + 721 * 3600);
    s.nodepools[0].disruption.budgets = vec![Budget { nodes: BudgetNodes::Count(0), reasons: None, window: None }];
    s.nodes.push(managed("old", "general", "gp.large", "zone-a", T0));
    let mut p = bound("guarded", "old", 100, 1);
    p.annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    s.pods.push(p);
    let d = decide(&s);
    assert!(d.plan.is_none(), "an expired node is not a disruption round's");
    let c = s.nodes[0].claim.as_ref().unwrap();
    let lifetime = expiration::Lifetime {
        nodeclaim: &c.nodeclaim,
        created: c.created,
        expire_after: c.expire_after,
        deleting: false,
        managed: true,
    };
    assert_eq!(expiration::due(&[lifetime], s.now), vec!["old-claim"], "expiration deletes it, budgets or not");
    // The drain still honours do-not-disrupt until terminationGracePeriod runs out.
    let deadline = s.now + 3600;
    assert!(matches!(drain_order(&s, "old", Some(deadline)).steps[0].1, DrainAction::Wait(_)));
    s.now = deadline - 30;
    assert!(
        matches!(drain_order(&s, "old", Some(deadline)).steps[0].1, DrainAction::Wait(_)),
        "not yet: strictly after"
    );
    s.now = deadline - 29;
    assert_eq!(drain_order(&s, "old", Some(deadline)).steps[0].1, DrainAction::Delete { grace: 29 });
}

struct RejectAll;
impl Consolidator for RejectAll {
    fn review(&self, plans: &[PlanView]) -> Review {
        Review {
            order: vec![],
            verdicts: plans
                .iter()
                .map(|p| Verdict::Reject(format!("{} saves only ${:.3}/h", p.method.as_str(), p.savings_per_hour)))
                .collect(),
        }
    }
    fn name(&self) -> &str {
        "reject-all"
    }
}
struct Rejecting;
impl PolicySet for Rejecting {
    fn scorer(&self) -> &dyn tenon_core::scorer::Scorer {
        &tenon_core::scorer::PriceScorer
    }
    fn consolidator(&self, _: &str) -> &dyn Consolidator {
        &RejectAll
    }
    fn budget_rule(&self, _: &str) -> &dyn BudgetRule {
        &KarpenterBudgets
    }
}

#[test]
fn a_consolidator_that_rejects_everything_stops_consolidation_and_says_why() {
    let mut s = cluster(T0 + 60 * MIN);
    s.nodes.push(managed("n", "general", "gp.large", "zone-a", T0));
    let d = disrupt(&s, &Rejecting);
    assert!(d.plan.is_none());
    // Emptiness first, then the consolidation plans for the same node: all turned down.
    assert!(!d.rejected.is_empty());
    assert!(d.rejected.iter().all(|r| r.consolidator == "reject-all"));
    assert!(d.rejected[0].reason.contains("emptiness saves"), "{}", d.rejected[0].reason);
    assert!(disrupt(&s, &DefaultPolicies).plan.is_some(), "the default approves the same plan");
}

#[test]
fn drain_goes_tier_by_tier_and_honours_pdbs_until_the_deadline() {
    let mut s = cluster(T0);
    s.nodes.push(managed("n", "general", "gp.xlarge", "zone-a", T0));
    let mut critical = bound("dns", "n", 100, 1);
    critical.priority = 2_000_000_000;
    let mut daemon = bound("agent", "n", 100, 1);
    daemon.owner_kind = Some("DaemonSet".into());
    let mut web: Vec<_> = (0..3).map(|i| bound(&format!("web{i}"), "n", 100, 1)).collect();
    for w in &mut web {
        w.labels = labels(&[("app", "web")]);
    }
    s.pods = vec![critical, daemon];
    s.pods.extend(web);
    s.pdbs.push(PodDisruptionBudget {
        namespace: "default".into(),
        name: "web".into(),
        selector: LabelSelector::from_labels(&labels(&[("app", "web")])),
        disruptions_allowed: 1,
        unhealthy_always_allow: false,
        fully_blocking: false,
    });
    let plan = drain_order(&s, "n", Some(T0 + 3600));
    assert_eq!(plan.tier, 0, "non-critical, non-daemon pods first");
    assert_eq!(plan.later.len(), 2, "the DaemonSet pod and the critical pod wait");
    let evict = plan.steps.iter().filter(|(_, a)| *a == DrainAction::Evict).count();
    let wait = plan
        .steps
        .iter()
        .filter(|(_, a)| matches!(a, DrainAction::Wait(w) if w.contains("PodDisruptionBudget default/web")))
        .count();
    assert_eq!((evict, wait), (1, 2), "the PDB allows one eviction");
    // Past deadline minus the pods' 30s grace: delete, whatever the PDB says, in every tier,
    // with the grace cut to the time left.
    s.now = T0 + 3600 - 29;
    let plan = drain_order(&s, "n", Some(T0 + 3600));
    assert_eq!(plan.steps.len(), 5);
    assert!(plan.steps.iter().all(|(_, a)| *a == DrainAction::Delete { grace: 29 }));
    // Once tier 0 is gone, the DaemonSet pod is next.
    s.pods.retain(|p| !p.name.starts_with("web"));
    let plan = drain_order(&s, "n", None);
    assert_eq!(plan.tier, 1);
}

/// A consolidator that records the plans it was shown, and approves or rejects them all
/// (preferring them in reverse order).
struct Recording {
    name: &'static str,
    approve: bool,
    seen: std::cell::RefCell<Vec<Vec<String>>>,
}

impl Recording {
    fn new(name: &'static str, approve: bool) -> Self {
        Recording { name, approve, seen: Default::default() }
    }
    /// The NodePools of the candidates of every plan it saw.
    fn pools_seen(&self) -> Vec<Vec<String>> {
        self.seen.borrow().clone()
    }
}

impl Consolidator for Recording {
    fn review(&self, plans: &[PlanView]) -> Review {
        for p in plans {
            self.seen.borrow_mut().push(p.candidates.iter().map(|c| c.nodepool.clone()).collect());
        }
        let verdict = if self.approve { Verdict::Approve } else { Verdict::Reject(format!("{} says no", self.name)) };
        Review { order: (0..plans.len()).rev().collect(), verdicts: vec![verdict; plans.len()] }
    }
    fn name(&self) -> &str {
        self.name
    }
}

/// NodePool `a` decided by one consolidator, `b` by another.
struct TwoPools {
    a: Recording,
    b: Recording,
}

impl PolicySet for TwoPools {
    fn scorer(&self) -> &dyn tenon_core::scorer::Scorer {
        &tenon_core::scorer::PriceScorer
    }
    fn consolidator(&self, pool: &str) -> &dyn Consolidator {
        if pool == "a" { &self.a } else { &self.b }
    }
    fn budget_rule(&self, _: &str) -> &dyn BudgetRule {
        &KarpenterBudgets
    }
}

/// NodePools `a` and `b`, every budget 100%, consolidating at once.
fn two_pools(now: i64) -> ClusterSnapshot {
    let mut pools = Vec::new();
    for name in ["a", "b"] {
        let mut p = pool(name);
        p.disruption.budgets = vec![Budget { nodes: BudgetNodes::Percent(100), reasons: None, window: None }];
        p.disruption.consolidate_after = Some(0);
        pools.push(p);
    }
    ClusterSnapshot { now, nodepools: pools, ..Default::default() }
}

#[test]
fn each_nodepools_consolidator_sees_and_decides_only_its_own_empty_nodes() {
    let mut s = two_pools(T0 + 60 * MIN);
    s.nodes.push(managed("a-empty", "a", "gp.large", "zone-a", T0));
    s.nodes.push(managed("b-empty", "b", "gp.large", "zone-a", T0));
    let policies = TwoPools { a: Recording::new("a-policy", false), b: Recording::new("b-policy", true) };
    let d = disrupt(&s, &policies);
    let plan = d.plan.expect("b's empty node goes");
    assert_eq!(plan.method, Method::Emptiness);
    let names: Vec<&str> = plan.candidates.iter().map(|&n| s.nodes[n].name.as_str()).collect();
    assert_eq!(names, ["b-empty"], "a's policy vetoes a's node only");
    assert!(policies.a.pools_seen().iter().all(|p| p.iter().all(|x| x == "a")), "{:?}", policies.a.pools_seen());
    assert!(policies.b.pools_seen().iter().all(|p| p.iter().all(|x| x == "b")), "{:?}", policies.b.pools_seen());
    assert!(d.rejected.iter().all(|r| r.consolidator == "a-policy"));
    // Both approving: one command removes both, as Karpenter's emptiness does.
    let both = TwoPools { a: Recording::new("a-policy", true), b: Recording::new("b-policy", true) };
    assert_eq!(disrupt(&s, &both).plan.unwrap().candidates.len(), 2);
}

#[test]
fn a_plan_spanning_nodepools_goes_ahead_only_if_every_involved_policy_approves() {
    // Three under-used nodes in a, three in b: multi-node consolidation spans both pools.
    let mut s = two_pools(T0 + 60 * MIN);
    for (pool, i) in [("a", 0), ("b", 1), ("a", 2), ("b", 3), ("a", 4), ("b", 5)] {
        let n = format!("{pool}{i}");
        s.nodes.push(managed(&n, pool, "gp.xlarge", "zone-a", T0));
        s.pods.push(bound(&format!("p{i}"), &n, 1000, 1));
    }
    let agree = TwoPools { a: Recording::new("a-policy", true), b: Recording::new("b-policy", true) };
    let plan = disrupt(&s, &agree).plan.expect("a plan");
    let spanning = |plan: &tenon_core::disruption::DisruptionPlan| {
        let pools: std::collections::BTreeSet<&str> =
            plan.candidates.iter().filter_map(|&n| s.nodes[n].nodepool.as_deref()).collect();
        pools.len() > 1
    };
    assert!(spanning(&plan), "with both approving, the multi-node plan spans both: {plan:?}");
    assert!(agree.a.pools_seen().iter().any(|p| p.contains(&"b".to_string())), "a sees the plan that touches it");

    let veto = TwoPools { a: Recording::new("a-policy", false), b: Recording::new("b-policy", true) };
    let d = disrupt(&s, &veto);
    let plan = d.plan.expect("b's own plans still go");
    assert!(!spanning(&plan), "a's veto stops the spanning plan: {plan:?}");
    assert!(plan.candidates.iter().all(|&n| s.nodes[n].nodepool.as_deref() == Some("b")));
    assert!(veto.b.pools_seen().iter().all(|p| p.contains(&"b".to_string())), "b never sees a's own plans");
}

/// A budget rule answering `allowed` whatever the budgets say.
struct Answers(usize);

impl BudgetRule for Answers {
    fn allowed(&self, _: &BudgetContext<'_>) -> tenon_core::disruption::budgets::Allowance {
        tenon_core::disruption::budgets::Allowance { allowed: self.0, why: format!("answers {}", self.0) }
    }
    fn name(&self) -> &str {
        "answers"
    }
}

struct WithRule(Answers);

impl PolicySet for WithRule {
    fn scorer(&self) -> &dyn tenon_core::scorer::Scorer {
        &tenon_core::scorer::PriceScorer
    }
    fn consolidator(&self, _: &str) -> &dyn Consolidator {
        &tenon_core::disruption::consolidator::ApproveAll
    }
    fn budget_rule(&self, _: &str) -> &dyn BudgetRule {
        &self.0
    }
}

#[test]
fn a_budget_rule_only_tightens_the_nodepools_budgets() {
    let mut s = cluster(T0 + 60 * MIN);
    s.nodes.push(managed("n", "general", "gp.large", "zone-a", T0));
    s.nodepools[0].disruption.budgets = vec![Budget { nodes: BudgetNodes::Count(0), reasons: None, window: None }];
    for answer in [usize::MAX, 4_000_000_000, u32::MAX as usize, 1] {
        let d = disrupt(&s, &WithRule(Answers(answer)));
        assert!(d.plan.is_none(), "{answer} cannot loosen nodes: \"0\"");
        let a = &d.allowed[&("general".to_string(), DisruptionReason::Empty)];
        assert_eq!(a.allowed, 0);
        assert!(a.why.contains("answers allowed") && a.why.contains("only tighten"), "{}", a.why);
    }
    s.nodepools[0].disruption.budgets = vec![Budget { nodes: BudgetNodes::Percent(100), reasons: None, window: None }];
    assert!(disrupt(&s, &WithRule(Answers(1))).plan.is_some());
    assert!(disrupt(&s, &WithRule(Answers(0))).plan.is_none(), "a rule may tighten");
}

#[test]
fn consolidation_does_not_take_the_room_a_pending_pod_needs() {
    // Node `a` (old, under-used) runs a 6-CPU pod; node `b` came up moments ago, empty, for
    // the pending 5-CPU pod. Deleting `a` would put its pod on `b` and leave the pending pod
    // a new node as dear as `a`: Karpenter counts that NodeClaim too, so no plan.
    let mut s = cluster(T0 + 60 * MIN);
    // amd64 only: the cheaper arm64 large is no option.
    s.nodepools[0].requirements.add(req("kubernetes.io/arch", tenon_core::requirements::Operator::In, &["amd64"]));
    s.nodes.push(managed("a", "general", "gp.large", "zone-a", T0));
    let mut fresh = managed("b", "general", "gp.large", "zone-a", T0 + 60 * MIN);
    fresh.claim.as_mut().unwrap().last_pod_event = Some(T0 + 60 * MIN);
    s.nodes.push(fresh);
    s.pods.push(bound("on-a", "a", 6000, 1));
    s.pods.push(pod("pending", 5000, 1));
    let d = decide(&s);
    assert!(d.plan.is_none(), "consolidation took the pending pod's room: {:?}", d.plan);
}

/// `n` amd64 types `t00`…, 2 CPU each, `t00` cheapest; spot at 40% of on-demand, in zone-a.
fn flat_catalog(n: usize) -> std::sync::Arc<Vec<tenon_core::instancetype::InstanceType>> {
    use tenon_core::instancetype::{InstanceType, Offering};
    use tenon_core::requirements::{Requirement, Requirements};
    use tenon_core::resources::Resources;
    let types = (0..n)
        .map(|i| {
            let name = format!("t{i:02}");
            let price = 0.10 + 0.01 * i as f64;
            let offerings = [("on-demand", price), ("spot", price * 0.4)]
                .map(|(ct, p)| Offering {
                    zone_id: None,
                    zone: "zone-a".into(),
                    capacity_type: ct.into(),
                    price: p,
                    available: true,
                })
                .to_vec();
            let reqs = Requirements::from_iter([
                Requirement::in_values("node.kubernetes.io/instance-type", [name.clone()]),
                Requirement::in_values("kubernetes.io/arch", ["amd64"]),
                Requirement::in_values("kubernetes.io/os", ["linux"]),
            ]);
            InstanceType::new(
                &name,
                reqs,
                Resources::new(2000, 8 * GIB, 32),
                Resources::new(100, GIB / 2, 0),
                offerings,
            )
        })
        .collect();
    std::sync::Arc::new(types)
}

/// A spot node of type `it` (in `flat_catalog`) carrying one small pod, in a NodePool that
/// allows spot and on-demand.
fn spot_node_on(it: &str, types: usize, spot_to_spot: bool) -> ClusterSnapshot {
    let mut s = cluster(T0 + 60 * MIN);
    let cat = flat_catalog(types);
    s.nodepools[0].requirements =
        tenon_core::requirements::Requirements::from_iter([tenon_core::requirements::Requirement::in_values(
            "karpenter.sh/nodepool",
            ["general"],
        )]);
    s.nodepools[0].instance_types = cat.clone();
    s.spot_to_spot = spot_to_spot;
    let mut n = managed("n", "general", "gp.small", "zone-a", T0);
    let t = cat.iter().find(|t| t.name == it).unwrap();
    n.labels.insert("node.kubernetes.io/instance-type".into(), it.into());
    n.labels.insert("karpenter.sh/capacity-type".into(), "spot".into());
    n.labels.remove("karpenter.k8s.aws/instance-family");
    n.labels.remove("karpenter.k8s.aws/instance-cpu");
    n.requirements = tenon_core::requirements::Requirements::from_iter(
        n.labels.iter().map(|(k, v)| tenon_core::requirements::Requirement::in_values(k, [v.clone()])),
    );
    n.allocatable = t.allocatable().clone();
    n.capacity = t.capacity.clone();
    let c = n.claim.as_mut().unwrap();
    c.instance_type = it.into();
    c.capacity_type = "spot".into();
    c.price = t.offerings.iter().find(|o| o.capacity_type == "spot").unwrap().price;
    s.nodes.push(n);
    s.pods.push(bound("a", "n", 500, 1));
    s
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1136
#[test]
fn spot_is_not_replaced_by_spot_without_the_feature_gate() {
    let s = spot_node_on("t19", 20, false);
    let d = decide(&s);
    assert!(d.plan.is_none(), "SpotToSpotConsolidation is off: a lone spot node is only ever deleted");
    let why: Vec<&str> = d.unconsolidatable.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(why, ["SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node"]);
    let s = spot_node_on("t19", 20, true);
    assert!(decide(&s).plan.is_some(), "with the gate on, 19 cheaper spot types make a replacement");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1061
#[test]
fn spot_to_spot_needs_fifteen_cheaper_types() {
    // t10 has ten cheaper types: not enough flexibility to replace it.
    let d = decide(&spot_node_on("t10", 20, true));
    assert!(d.plan.is_none());
    let why: Vec<&str> = d.unconsolidatable.iter().map(|(_, w)| w.as_str()).collect();
    assert_eq!(
        why,
        [
            "SpotToSpotConsolidation requires 15 cheaper instance type options than the current candidate to consolidate, got 10"
        ]
    );
    assert!(decide(&spot_node_on("t15", 20, true)).plan.is_some(), "fifteen cheaper types");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1177
/// karpenter:pkg/controllers/disruption/consolidation_test.go:1247
#[test]
fn spot_to_spot_launches_only_the_fifteen_cheapest_types_as_spot() {
    let s = spot_node_on("t19", 20, true);
    let plan = decide(&s).plan.expect("a spot-to-spot replacement");
    let r = &plan.replacements[0];
    let cat = &s.nodepools[0].instance_types;
    let mut names: Vec<&str> = r.instance_types.iter().map(|&t| cat[t as usize].name.as_str()).collect();
    names.sort();
    let cheapest: Vec<String> = (0..15).map(|i| format!("t{i:02}")).collect();
    assert_eq!(names, cheapest, "the 15 cheapest, ordered by price before truncation");
    let ct = r.requirements.get("karpenter.sh/capacity-type").expect("pinned");
    assert_eq!(ct.values(), ["spot"]);
    assert!(r.offerings.iter().all(|&(t, o)| cat[t as usize].offerings[o as usize].capacity_type == "spot"));
    // A node among the 15 cheapest is never replaced right away: fewer than 15 are cheaper.
    assert!(decide(&spot_node_on("t14", 20, true)).plan.is_none());
}

#[test]
fn an_on_demand_node_replaced_where_spot_is_allowed_is_replaced_by_spot_only() {
    let mut s = spot_node_on("t19", 20, false);
    let n = &mut s.nodes[0];
    n.labels.insert("karpenter.sh/capacity-type".into(), "on-demand".into());
    n.requirements = tenon_core::requirements::Requirements::from_iter(
        n.labels.iter().map(|(k, v)| tenon_core::requirements::Requirement::in_values(k, [v.clone()])),
    );
    let c = n.claim.as_mut().unwrap();
    c.capacity_type = "on-demand".into();
    c.price = 0.29;
    let plan = decide(&s).plan.expect("a cheaper replacement");
    let r = &plan.replacements[0];
    let ct = r.requirements.get("karpenter.sh/capacity-type").expect("pinned");
    assert_eq!(ct.values(), ["spot"], "priced as spot, so launched as spot or not at all");
}

/// Karpenter's rule: a consolidation may not count on a node that is not Initialized yet
/// (its pods would wait there, or it may never come up); once it is, the plan goes ahead.
#[test]
fn a_consolidation_that_needs_an_uninitialized_node_waits_for_it() {
    let mut s = cluster(T0 + 60 * MIN);
    s.nodes.push(managed("old", "general", "gp.xlarge", "zone-a", T0));
    // Past its consolidateAfter, so a consolidation may move pods onto it (Karpenter's
    // IsUnderConsolidateAfter); do-not-disrupt, so it is no candidate itself.
    s.nodes.push(managed("fresh", "general", "gp.xlarge", "zone-a", T0 + 15 * MIN));
    s.nodes[1].claim.as_mut().unwrap().annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    s.pods.push(bound("a", "old", 1000, 1));
    s.pods.push(bound("b", "fresh", 1000, 1));
    s.nodes[1].claim.as_mut().unwrap().initialized = false;
    assert!(decide(&s).plan.is_none(), "old's pod would wait on the uninitialized node");
    s.nodes[1].claim.as_mut().unwrap().initialized = true;
    let plan = decide(&s).plan.expect("fresh is Initialized: old can go");
    assert_eq!(plan.candidates, [0]);
    assert!(plan.replacements.is_empty());
}

/// Pods of a node being deleted need a place as much as pending pods do (Karpenter's
/// deleting-node pods): a consolidation may not take the room they are about to use, and the
/// node they would go to is nominated, not a candidate.
#[test]
fn a_consolidation_leaves_room_for_the_pods_of_nodes_being_deleted() {
    let mut s = cluster(T0 + 60 * MIN);
    // Existing nodes are tried by name: the leaving pod goes to a-target.
    for n in ["a-target", "leaving", "spare"] {
        s.nodes.push(managed(n, "general", "gp.large", "zone-a", T0));
    }
    s.pods.push(bound("t", "a-target", 4000, 1));
    s.pods.push(bound("l", "leaving", 3000, 1));
    s.pods.push(bound("s", "spare", 3000, 1));
    s.nodes[1].claim.as_mut().unwrap().disrupting = true;
    s.nodes[1].unschedulable = true;
    let d = decide(&s);
    assert!(d.blocked.iter().any(|b| b.node == 0 && b.reason.contains("nominated")), "{:?}", d.blocked);
    if let Some(plan) = d.plan {
        assert!(!plan.candidates.contains(&0), "the nominated node is no candidate");
        assert_eq!(plan.replacements.len(), 1, "spare's pod cannot take the leaving pod's room: {plan:?}");
    }
}

/// Karpenter's validation re-simulates: a delete is dropped once its pods no longer fit
/// elsewhere, a replace once a fresh simulation needs other instance types, and either once
/// the budget no longer allows it.
#[test]
fn validation_re_simulates_and_re_checks_the_budget() {
    use tenon_core::orchestration::command::validate;
    let mut s = cluster(T0 + 60 * MIN);
    s.nodes.push(managed("old", "general", "gp.xlarge", "zone-a", T0));
    // Past its consolidateAfter, so a consolidation may move pods onto it (Karpenter's
    // IsUnderConsolidateAfter); do-not-disrupt, so it is no candidate itself.
    s.nodes.push(managed("fresh", "general", "gp.xlarge", "zone-a", T0 + 15 * MIN));
    s.nodes[1].claim.as_mut().unwrap().annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    s.pods.push(bound("a", "old", 1000, 1));
    let plan = decide(&s).plan.expect("old can go");
    let cands = vec![("old-claim".to_string(), "old".to_string())];
    assert_eq!(validate(&s, &DefaultPolicies, plan.method, &cands, &[]), None);
    let mut filled = s.clone();
    filled.pods.push(bound("b", "fresh", 15_000, 1));
    let why = validate(&filled, &DefaultPolicies, plan.method, &cands, &[]).expect("a's place is taken");
    assert!(why.contains("other capacity"), "{why}");
    let mut closed = s.clone();
    closed.nodepools[0].disruption.budgets = vec![Budget { nodes: BudgetNodes::Count(0), reasons: None, window: None }];
    let why = validate(&closed, &DefaultPolicies, plan.method, &cands, &[]).expect("the budget closed");
    assert!(why.contains("budget"), "{why}");

    // A replace: its planned types must still be among what a fresh simulation allows.
    let s = three_underused_nodes();
    let plan = decide(&s).plan.expect("a replace");
    assert_eq!(plan.replacements.len(), 1);
    let cands: Vec<(String, String)> = (0..3).map(|i| (format!("n{i}-claim"), format!("n{i}"))).collect();
    let types = plan.replacement_types(&s);
    assert_eq!(validate(&s, &DefaultPolicies, plan.method, &cands, &types), None);
    let mut grown = s.clone();
    grown.pods.push(bound("big", "n0", 7_000, 1));
    let why = validate(&grown, &DefaultPolicies, plan.method, &cands, &types);
    assert!(why.is_some(), "the planned small types no longer hold the pods");
}

/// Karpenter's `filterOutSameInstanceType`: three underused nodes of the cheapest type are
/// not replaced by one more of that type; two are deleted and their pods join the third.
#[test]
fn multi_node_consolidation_deletes_rather_than_replace_with_a_candidates_own_type() {
    let mut s = cluster(T0 + 60 * MIN);
    s.nodepools[0].disruption.budgets = vec![Budget { nodes: BudgetNodes::Percent(100), reasons: None, window: None }];
    for i in 0..3 {
        let n = format!("n{i}");
        s.nodes.push(managed(&n, "general", "arm.small", "zone-a", T0));
        s.pods.push(bound(&format!("p{i}"), &n, 100, 0));
    }
    let plan = decide(&s).plan.expect("a plan");
    assert_eq!(plan.method, Method::MultiNodeConsolidation);
    assert_eq!(plan.candidates.len(), 2, "{}", plan.reason);
    assert!(plan.replacements.is_empty(), "{}", plan.reason);
}

/// Karpenter's `Balanced` policy: a replacement that saves little while moving many pods is
/// not worth it (WhenEmptyOrUnderutilized takes it); deleting a node whose one pod fits
/// elsewhere is.
/// Four gp.xlarge nodes: n0 with ten small pods (a cheaper arm.xlarge would hold them, saving
/// 10%), the others one big pod each.
fn four_xlarge_nodes() -> ClusterSnapshot {
    let mut s = cluster(T0 + 60 * MIN);
    for i in 0..4 {
        s.nodes.push(managed(&format!("n{i}"), "general", "gp.xlarge", "zone-a", T0));
    }
    for p in 0..10 {
        s.pods.push(bound(&format!("small-{p}"), "n0", 1000, 1));
    }
    for i in 1..4 {
        s.pods.push(bound(&format!("big-{i}"), &format!("n{i}"), 15_000, 1));
    }
    s
}

#[test]
fn a_balanced_nodepool_takes_only_moves_worth_their_disruption() {
    let mut s = four_xlarge_nodes();
    let plan = decide(&s).plan.expect("WhenEmptyOrUnderutilized replaces n0");
    assert_eq!(plan.replacements.len(), 1, "{}", plan.reason);
    s.nodepools[0].disruption.consolidation_policy = tenon_core::model::ConsolidationPolicy::Balanced;
    assert!(decide(&s).plan.is_none(), "Balanced: 10% of n0's price for 11/17 of the pool's disruption");

    // A node whose one small pod fits on n1: a quarter of the cost for a quarter of the
    // disruption.
    let mut s = cluster(T0 + 60 * MIN);
    s.nodepools[0].disruption.consolidation_policy = tenon_core::model::ConsolidationPolicy::Balanced;
    for i in 0..4 {
        s.nodes.push(managed(&format!("n{i}"), "general", "gp.xlarge", "zone-a", T0));
    }
    s.pods.push(bound("small", "n0", 100, 1));
    for i in 1..4 {
        s.pods.push(bound(&format!("big-{i}"), &format!("n{i}"), 15_000, 1));
    }
    let plan = decide(&s).plan.expect("Balanced approves the delete");
    assert_eq!(plan.candidates, [0]);
    assert!(plan.replacements.is_empty());
}

#[test]
fn a_do_not_disrupt_duration_says_when_it_elapses_and_a_bad_one_is_ignored() {
    use tenon_core::disruption::candidates::{do_not_disrupt, do_not_disrupt_event};
    let mut p = bound("guarded", "n", 100, 1);
    p.started = Some(T0);
    let at = |v: &str, now: i64| {
        let mut p = p.clone();
        p.annotations.insert("karpenter.sh/do-not-disrupt".into(), v.into());
        (do_not_disrupt(&p, now), do_not_disrupt_event(&p, now))
    };
    let (held, event) = at("5m", T0 + 60);
    assert!(held);
    assert_eq!(
        event,
        Some((
            "Normal",
            "DoNotDisruptUntil",
            "The karpenter.sh/do-not-disrupt grace period will elapse at 2026-11-30T00:05:00Z".to_string()
        ))
    );
    let (held, event) = at("5m", T0 + 300);
    assert!(!held);
    assert_eq!(event.map(|e| e.1), Some("DoNotDisruptGracePeriodElapsed"));
    for bad in ["soon", "0s"] {
        let (held, event) = at(bad, T0);
        assert!(!held, "{bad}: ignored, as if absent");
        let (kind, reason, message) = event.unwrap();
        assert_eq!((kind, reason), ("Warning", "InvalidDoNotDisruptAnnotation"));
        assert!(
            message.starts_with("Invalid karpenter.sh/do-not-disrupt annotation: ")
                && message.ends_with(", ignoring annotation"),
            "{message}"
        );
    }
    assert_eq!(at("true", T0).1, None, "nothing to say about an unconditional one");
}

/// Karpenter's `nodes_consuming_budgets`: Initialized nodes being disrupted or not Ready.
#[test]
fn nodes_consuming_a_nodepools_budget_are_the_disrupting_and_the_not_ready() {
    let mut s = cluster(T0);
    for n in ["a", "b", "c", "d"] {
        s.nodes.push(managed(n, "general", "gp.large", "zone-a", T0));
    }
    let claims: Vec<_> = s.nodes.iter_mut().filter_map(|n| n.claim.as_mut()).collect();
    let [a, b, c, _] = <[_; 4]>::try_from(claims).unwrap();
    a.disrupting = true;
    b.ready = false;
    c.ready = false;
    c.initialized = false;
    let consuming = tenon_core::disruption::consuming_budgets(&s);
    assert_eq!(consuming.get("general"), Some(&2), "the uninitialized node counts against nothing");
}

/// Karpenter's balanced evaluator counts each consolidation move it scores: a single-node
/// move refused by a Balanced NodePool is "rejected" with its score, an approved one
/// "approved"; a WhenEmptyOrUnderutilized NodePool's moves count unscored.
#[test]
fn each_scored_consolidation_move_is_reported_with_its_decision_and_score() {
    use tenon_core::model::ConsolidationPolicy;
    let mut s = four_xlarge_nodes();
    let d = decide(&s);
    assert!(!d.moves.is_empty());
    for m in &d.moves {
        assert!(m.approved && m.score.is_none(), "{m:?}");
        assert_eq!((m.nodepool.as_str(), m.policy), ("general", "WhenEmptyOrUnderutilized"));
    }

    s.nodepools[0].disruption.consolidation_policy = ConsolidationPolicy::Balanced;
    let d = decide(&s);
    let n0 = d.moves.iter().find(|m| m.node == Some(0)).expect("n0's replacement was scored");
    let score = n0.score.expect("a Balanced NodePool scores");
    assert!(!n0.approved && !score.approved() && score.value() < score.threshold(), "{n0:?}");
    assert_eq!(n0.policy, "Balanced");
    assert!(d.moves.iter().all(|m| !m.approved), "nothing was worth it: {:?}", d.moves);

    // n0's one small pod fits on n1: deleting n0 is worth it.
    s.pods.retain(|p| !p.name.starts_with("small-"));
    s.pods.push(bound("small", "n0", 100, 1));
    let d = decide(&s);
    let approved = d.moves.iter().find(|m| m.approved).expect("an approved move");
    assert_eq!(approved.node, Some(0));
    assert!(approved.score.is_some_and(|s| s.approved()), "{approved:?}");
}
