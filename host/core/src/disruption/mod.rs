//! (Long: one round, in Karpenter's order, over every method; each method is a function of
//! the round's shared simulation and budgets, so splitting them would pass that state around.)
//! Disruption decisions: which nodes to remove or replace now, and why.
//!
//! One round, in Karpenter's order: emptiness, drift, multi-node consolidation, single-node
//! consolidation; the first method with an approved plan wins. Expiration is not a round's
//! (`orchestration::expiration`).

pub mod balanced;
pub mod budgets;
pub mod candidates;
pub mod claim_conditions;
pub mod consolidator;
pub mod drain;

use crate::model::{ClusterSnapshot, DisruptionReason};
use crate::plan::NewNodeClaim;
use crate::requirements::{Requirement, Requirements};
use crate::scheduler::min_values_problem;
use crate::scheduler::{Needs, SimOutcome, Simulator, rank_options};
use crate::scorer::{PriceScorer, Scorer};
use budgets::{Allowance, BudgetContext, BudgetRule, KarpenterBudgets};
use candidates::{Blocked, Candidate, currently_reschedulable, pdb_problem};
use consolidator::{ApproveAll, CandidateView, Consolidator, PlanView, Verdict};
use std::collections::{BTreeMap, BTreeSet};
use tenon_api::wellknown as wk;

/// A spot node is replaced by spot (SpotToSpotConsolidation) only when at least this many
/// cheaper types could launch, and the replacement launches only the cheapest this many:
/// the new node is then among them and not itself replaced at once (Karpenter's).
pub const MIN_SPOT_TO_SPOT_TYPES: usize = 15;

/// Karpenter considers at most this many candidates in one multi-node consolidation.
pub const MAX_MULTI_NODE_CANDIDATES: usize = 100;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    Emptiness,
    Drift,
    MultiNodeConsolidation,
    SingleNodeConsolidation,
    Expiration,
}

impl Method {
    pub fn as_str(&self) -> &'static str {
        match self {
            Method::Emptiness => "emptiness",
            Method::Drift => "drift",
            Method::MultiNodeConsolidation => "multi-node-consolidation",
            Method::SingleNodeConsolidation => "single-node-consolidation",
            Method::Expiration => "expiration",
        }
    }

    /// The budget reason; expiration is outside budgets.
    pub fn reason(&self) -> Option<DisruptionReason> {
        match self {
            Method::Emptiness => Some(DisruptionReason::Empty),
            Method::Drift => Some(DisruptionReason::Drifted),
            Method::MultiNodeConsolidation | Method::SingleNodeConsolidation => Some(DisruptionReason::Underutilized),
            Method::Expiration => None,
        }
    }

    /// The `DisruptionReason` condition's reason and the metrics' `reason` (lower-cased):
    /// Karpenter's names, `Expired` for expiration.
    pub fn reason_name(&self) -> &'static str {
        self.reason().map_or("Expired", |r| r.as_str())
    }

    /// The method's place in Karpenter's pass (emptiness, drift, multi-node, single-node);
    /// expiration is outside it.
    fn pass_order(&self) -> Option<u8> {
        match self {
            Method::Emptiness => Some(0),
            Method::Drift => Some(1),
            Method::MultiNodeConsolidation => Some(2),
            Method::SingleNodeConsolidation => Some(3),
            Method::Expiration => None,
        }
    }

    /// Whether a pass that goes on after `failed` (a method whose command failed
    /// validation) still tries this method.
    fn tried_after(&self, failed: Option<Method>) -> bool {
        match failed.and_then(|f| f.pass_order()) {
            None => true,
            Some(f) => self.pass_order().is_some_and(|m| m > f),
        }
    }

    /// Karpenter's `consolidation_type` metric label: `multi`, `single`, `empty`, or empty
    /// for drift and expiration.
    pub fn consolidation_type(&self) -> &'static str {
        match self {
            Method::MultiNodeConsolidation => "multi",
            Method::SingleNodeConsolidation => "single",
            Method::Emptiness => "empty",
            Method::Drift | Method::Expiration => "",
        }
    }
}

/// The labels of the `karpenter_voluntary_disruption_decisions_total` sample a command of
/// `method` adds one to when it starts (`replaces`: it launches replacements); with each of
/// its candidates' NodePools, the `..._by_nodepool_total` samples.
pub fn decision_labels(method: Method, replaces: bool) -> [(&'static str, String); 3] {
    let reason = method.reason_name().to_lowercase();
    let decision = if replaces { "replace" } else { "delete" };
    [("decision", decision.into()), ("reason", reason), ("consolidation_type", method.consolidation_type().into())]
}

/// A disruption to carry out.
#[derive(Clone, Debug)]
pub struct DisruptionPlan {
    pub method: Method,
    /// Human-readable: why these nodes, why now.
    pub reason: String,
    /// Indices into `ClusterSnapshot::nodes`.
    pub candidates: Vec<usize>,
    /// NodeClaims to launch (and see Initialized) before the candidates are drained.
    pub replacements: Vec<NewNodeClaim>,
    /// Pods that will be rescheduled (indices into `ClusterSnapshot::pods`).
    pub pods: Vec<usize>,
    /// Candidates' price minus the cheapest replacement option's, USD/hour.
    pub savings_per_hour: f64,
}

impl DisruptionPlan {
    /// The instance type names each replacement may launch as.
    pub fn replacement_types(&self, snap: &ClusterSnapshot) -> Vec<Vec<String>> {
        self.replacements.iter().map(|r| r.instance_type_names(snap).into_iter().map(String::from).collect()).collect()
    }
}

/// The policies of a decision, per NodePool.
pub trait PolicySet {
    /// Ranks replacement instance types.
    fn scorer(&self) -> &dyn Scorer;
    fn consolidator(&self, nodepool: &str) -> &dyn Consolidator;
    fn budget_rule(&self, nodepool: &str) -> &dyn BudgetRule;
    /// The failures of the set's policies since the last call (the defaults never fail).
    fn take_failures(&self) -> Vec<crate::policy_failure::PolicyFailure> {
        Vec::new()
    }
}

/// Karpenter's behaviour throughout.
#[derive(Clone, Copy, Debug, Default)]
pub struct DefaultPolicies;

impl PolicySet for DefaultPolicies {
    fn scorer(&self) -> &dyn Scorer {
        &crate::scorer::PriceScorer
    }
    fn consolidator(&self, _: &str) -> &dyn Consolidator {
        &ApproveAll
    }
    fn budget_rule(&self, _: &str) -> &dyn BudgetRule {
        &KarpenterBudgets
    }
}

/// A consolidation plan a consolidator turned down.
#[derive(Clone, Debug)]
pub struct Rejection {
    pub method: Method,
    pub candidates: Vec<usize>,
    pub consolidator: String,
    pub reason: String,
}

/// Everything one round decided.
#[derive(Clone, Debug, Default)]
pub struct DisruptionDecision {
    /// The voluntary disruption to carry out now, if any.
    pub plan: Option<DisruptionPlan>,
    pub rejected: Vec<Rejection>,
    /// Managed nodes that cannot be disrupted, and why.
    pub blocked: Vec<Blocked>,
    /// Allowed disruptions per (NodePool, reason) this round.
    pub allowed: BTreeMap<(String, DisruptionReason), Allowance>,
    /// NodePools with nodes whose budget allows no disruption at all for a reason (not
    /// counting nodes already disrupting): Karpenter's NodePool `DisruptionBlocked` Event.
    pub budget_blocked: Vec<(String, DisruptionReason)>,
    /// A budget held back a node that could otherwise have been disrupted: the same cluster
    /// may decide differently once the budget changes (a window closes, a node finishes).
    pub budget_constrained: bool,
    /// Of those budgets, one can change with time alone (a scheduled window, or a budget
    /// policy, which sees the clock): the same cluster, unchanged, may decide differently
    /// later. Otherwise only a change to the cluster can.
    pub budget_varies_with_time: bool,
    /// Candidates whose removal was simulated.
    pub evaluated: usize,
    /// Every node considered, as the round saw it (for the `Consolidatable`/`Drifted` record).
    pub candidates: Vec<Candidate>,
    /// Nodes (indices into the snapshot's nodes) consolidation looked at and could not
    /// consolidate, with Karpenter's `Unconsolidatable` message.
    pub unconsolidatable: Vec<(usize, String)>,
    /// The consolidation moves scored this round, as Karpenter's balanced evaluator counts
    /// them: each single-node one tried, and the multi-node one found (or the last one
    /// refused when none was). Single-node moves are left out when a multi-node one was
    /// found, as Karpenter then tries none.
    pub moves: Vec<balanced::Move>,
}

struct Round<'a> {
    snap: &'a ClusterSnapshot,
    policies: &'a dyn PolicySet,
    sim: Simulator<'a>,
    evaluated: usize,
    /// Nodes not Initialized yet (in-flight NodeClaims included), by snapshot index.
    uninitialized: Vec<bool>,
    /// Totals of the Balanced NodePools, by index (empty when there are none).
    balanced: BTreeMap<usize, balanced::Totals>,
    /// Why single candidates could not be consolidated (Karpenter reports only those).
    unconsolidatable: Vec<(usize, String)>,
    moves: Vec<balanced::Move>,
}

/// Decides this round's disruptions.
pub fn disrupt(snap: &ClusterSnapshot, policies: &dyn PolicySet) -> DisruptionDecision {
    disrupt_after(snap, policies, None)
}

/// A round that goes on where a pass stopped: Karpenter tries its methods in order within
/// one pass, and when a command fails validation the pass moves on to the next method (a
/// multi-node consolidation that no longer holds falls back to single-node). `failed`: the
/// method whose command just failed validation; it and the methods before it are not tried.
pub fn disrupt_after(snap: &ClusterSnapshot, policies: &dyn PolicySet, failed: Option<Method>) -> DisruptionDecision {
    crate::work::count(|w| w.disruption_rounds += 1);
    let (all, blocked) = candidates::candidates(snap);
    let mut decision = decide(snap, policies, &all, blocked, failed);
    decision.candidates = all;
    decision
}

fn decide(
    snap: &ClusterSnapshot,
    policies: &dyn PolicySet,
    all: &[Candidate],
    mut blocked: Vec<Blocked>,
    failed: Option<Method>,
) -> DisruptionDecision {
    let tried = |m: Method| m.tried_after(failed);
    let (allowed, budget_blocked) = allowances(snap, policies);
    let mut decision = DisruptionDecision { allowed, budget_blocked, ..Default::default() };
    let mut round = Round::new(snap, policies);

    // Karpenter's nominated nodes: where pending pods and the pods of nodes being disrupted
    // would go as the cluster stands. Such a node is about to be used, so not a candidate
    // (an emptied node waiting for the pods a finished command moves is not "empty").
    let nominated = round.nominated();
    for c in all.iter().filter(|c| nominated.contains(snap.nodes[c.node].name.as_str())) {
        blocked.push(Blocked { node: c.node, reason: "node is nominated for a pending pod".into() });
    }
    // Expired nodes are expiration's (orchestration::expiration), deleted outside rounds.
    let live: Vec<&Candidate> =
        all.iter().filter(|c| !c.expired && !nominated.contains(snap.nodes[c.node].name.as_str())).collect();
    for c in &live {
        if let Some(r) = &c.blocked {
            let tgp = snap.nodepools[c.nodepool].termination_grace_period.is_some();
            // A drifted node under a terminationGracePeriod still goes: the drain forces it in time.
            if !(c.drifted.is_some() && tgp) {
                blocked.push(Blocked { node: c.node, reason: r.clone() });
            }
        }
    }
    decision.blocked = blocked;
    let constrained = budget_constrained(snap, &live, &decision.allowed);
    decision.budget_constrained = !constrained.is_empty();
    decision.budget_varies_with_time = constrained.iter().any(|&pool| {
        let tpl = &snap.nodepools[pool];
        tpl.disruption.budgets.iter().any(|b| b.window.is_some()) || policies.budget_rule(&tpl.name).varies_with_time()
    });
    decision.unconsolidatable = live
        .iter()
        .filter(|c| c.blocked.is_none() && snap.nodepools[c.nodepool].replicas.is_none())
        .filter_map(|c| not_consolidatable(c, snap).map(|why| (c.node, why)))
        .collect();

    let budget = |method: Method| -> BTreeMap<usize, usize> {
        let reason = method.reason().expect("voluntary method");
        snap.nodepools
            .iter()
            .enumerate()
            .map(|(i, t)| (i, decision.allowed.get(&(t.name.clone(), reason)).map_or(0, |a| a.allowed)))
            .collect()
    };

    // 1. Emptiness: one plan per NodePool, so that each NodePool's consolidator judges only
    // its own empty nodes; the approved ones go together, as Karpenter's one command.
    // A static NodePool (spec.replicas) keeps its node count: never consolidated.
    let dynamic = |c: &Candidate| snap.nodepools[c.nodepool].replicas.is_none();
    let empty: Vec<&Candidate> =
        live.iter().copied().filter(|c| c.empty && c.consolidatable && c.blocked.is_none() && dynamic(c)).collect();
    let plans = if tried(Method::Emptiness) { emptiness(&empty, budget(Method::Emptiness), snap) } else { vec![] };
    if let Some(p) = round.review_all(plans, &mut decision.rejected) {
        decision.plan = Some(p);
        decision.evaluated = round.evaluated;
        return decision;
    }
    // 2. Drift.
    let drifted: Vec<&Candidate> = if tried(Method::Drift) {
        live.iter().copied().filter(|c| drift_eligible(snap, c)).collect()
    } else {
        Vec::new()
    };
    if let Some(plan) = round.drift(&drifted, budget(Method::Drift)) {
        decision.plan = Some(plan);
        decision.evaluated = round.evaluated;
        return decision;
    }
    // 3 and 4. Consolidation.
    let mut consolidatable: Vec<&Candidate> = live
        .iter()
        .copied()
        .filter(|c| c.consolidatable && c.blocked.is_none() && dynamic(c) && c.consolidation_policy.underutilized())
        .collect();
    // Karpenter v1.14: the most saving per unit of disruption first.
    let ratio = |c: &Candidate| c.price / c.reschedule_cost;
    consolidatable.sort_by(|a, b| ratio(b).total_cmp(&ratio(a)).then(a.node.cmp(&b.node)));
    let left = budget(Method::MultiNodeConsolidation);
    let within = within_budget(&consolidatable, left.clone());
    // Single-node takes one node: every candidate of a NodePool with room is tried in turn
    // (Karpenter's loop goes on past a candidate that cannot be consolidated).
    let open: Vec<&Candidate> =
        consolidatable.iter().copied().filter(|c| left.get(&c.nodepool).is_some_and(|&n| n > 0)).collect();
    let mut plans = Vec::new();
    let multi = if tried(Method::MultiNodeConsolidation) { round.multi_node(&within) } else { None };
    let multi_moves = round.moves.len();
    let found_multi = multi.is_some();
    plans.extend(multi);
    if tried(Method::SingleNodeConsolidation) {
        plans.extend(round.single_node(&open));
    }
    if found_multi {
        round.moves.truncate(multi_moves);
    }
    decision.plan = round.review(plans, &mut decision.rejected);
    decision.evaluated = round.evaluated;
    decision.moves = std::mem::take(&mut round.moves);
    for (node, why) in std::mem::take(&mut round.unconsolidatable) {
        if !decision.unconsolidatable.iter().any(|(n, _)| *n == node) {
            decision.unconsolidatable.push((node, why));
        }
    }
    decision
}

/// Why consolidation will not consider candidate `c` at all, in Karpenter's words (its
/// consolidation's candidate checks): an unknown instance type, a missing capacity-type or
/// zone label, consolidation disabled, or a WhenEmpty NodePool's node that is not empty.
fn not_consolidatable(c: &Candidate, snap: &ClusterSnapshot) -> Option<String> {
    let node = &snap.nodes[c.node];
    let pool = &snap.nodepools[c.nodepool];
    let label = |k: &str| node.labels.get(k).filter(|v| !v.is_empty());
    let instance_type = label(wk::LABEL_INSTANCE_TYPE).map_or("", String::as_str);
    if !pool.instance_types.iter().any(|t| t.name == instance_type) {
        return Some(format!("Instance Type {instance_type:?} not found"));
    }
    for key in [wk::LABEL_CAPACITY_TYPE, wk::LABEL_ZONE] {
        if label(key).is_none() {
            return Some(format!("Node does not have label {key:?}"));
        }
    }
    if pool.disruption.consolidate_after.is_none() {
        return Some(format!("NodePool {:?} has consolidation disabled", pool.name));
    }
    if c.consolidatable && !c.empty && !c.consolidation_policy.underutilized() {
        return Some(format!("NodePool {:?} has consolidation policy WhenEmpty, but node is not empty", pool.name));
    }
    None
}

/// Messages joined into one sentence (Karpenter's `pretty.Sentence`).
fn sentence(parts: &[String]) -> String {
    match parts {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// Karpenter's validation of a decided command, over a snapshot of now in which the other
/// commands under way are held (`orchestration::command::hold`): why it no longer holds, if
/// it does not. Its candidates must fit their NodePools' budgets, none may be nominated for
/// a pending pod, and a consolidation is simulated afresh: its candidates' pods must all
/// land, on Initialized nodes, needing no new node if none was planned, else exactly one
/// whose instance types include every planned one (`replacement_types`, by name) — a
/// cluster that changed so that the saving is gone is not acted on.
pub fn revalidate(
    snap: &ClusterSnapshot,
    policies: &dyn PolicySet,
    method: Method,
    candidates: &[usize],
    replacement_types: &[Vec<String>],
) -> Option<String> {
    let reason = method.reason()?;
    let (allowed, _) = allowances(snap, policies);
    let mut per_pool: BTreeMap<&str, usize> = BTreeMap::new();
    for &c in candidates {
        *per_pool.entry(snap.nodes[c].nodepool.as_deref().unwrap_or_default()).or_default() += 1;
    }
    for (pool, n) in per_pool {
        let left = allowed.get(&(pool.to_string(), reason)).map_or(0, |a| a.allowed);
        if n > left {
            return Some(format!("NodePool {pool}'s budget allows {left} {} disruption(s) now", reason.as_str()));
        }
    }
    let mut round = Round::new(snap, policies);
    let nominated = round.nominated();
    if let Some(&c) = candidates.iter().find(|&&c| nominated.contains(snap.nodes[c].name.as_str())) {
        return Some(format!("{} is nominated for a pending pod", snap.nodes[c].name));
    }
    if !matches!(method, Method::SingleNodeConsolidation | Method::MultiNodeConsolidation) {
        return None;
    }
    let (cands, _) = candidates::candidates(snap);
    let pods: Vec<usize> =
        cands.iter().filter(|c| candidates.contains(&c.node)).flat_map(|c| c.pods.iter().copied()).collect();
    // The options as a set: their ranking plays no part.
    let (out, _) = round.simulate(candidates, &pods, &[], Some(1), true);
    if out.unschedulable.iter().any(|u| pods.contains(&u.pod)) {
        return Some("their pods no longer all fit".into());
    }
    if round.relies_on_uninitialized(&out, &pods) {
        return Some("their pods would wait on a node not Initialized yet".into());
    }
    let changed = || Some("a fresh simulation needs other capacity than was decided".to_string());
    if out.claims_needed > 1 {
        return changed();
    }
    match (out.nodeclaims.as_slice(), replacement_types) {
        ([], []) => None,
        ([new], [planned]) => {
            let now: BTreeSet<&str> = new.instance_type_names(snap).into_iter().collect();
            if planned.iter().all(|t| now.contains(t.as_str())) { None } else { changed() }
        }
        _ => changed(),
    }
}

/// Karpenter's emptiness validation, over a snapshot of now (other commands held): of the
/// empty `candidates` still valid, those to delete — each candidate not nominated for a
/// pending pod, within what its NodePool's budget allows now (in order). The rest are
/// dropped from the command, not the command abandoned.
pub fn revalidate_emptiness(snap: &ClusterSnapshot, policies: &dyn PolicySet, candidates: &[usize]) -> Vec<usize> {
    let (allowed, _) = allowances(snap, policies);
    let mut left: BTreeMap<&str, usize> = BTreeMap::new();
    for ((pool, reason), a) in &allowed {
        if *reason == DisruptionReason::Empty {
            left.insert(pool, a.allowed);
        }
    }
    let nominated = Round::new(snap, policies).nominated();
    let mut kept = Vec::new();
    for &c in candidates.iter().filter(|&&c| !nominated.contains(snap.nodes[c].name.as_str())) {
        let pool = snap.nodes[c].nodepool.as_deref().unwrap_or_default();
        if let Some(n) = left.get_mut(pool).filter(|n| **n > 0) {
            *n -= 1;
            kept.push(c);
        }
    }
    kept
}

/// The NodePools (indices) with more nodes that could be disrupted for a reason than their
/// budget allows.
fn budget_constrained(
    snap: &ClusterSnapshot,
    live: &[&Candidate],
    allowed: &BTreeMap<(String, DisruptionReason), Allowance>,
) -> BTreeSet<usize> {
    let mut want: BTreeMap<(usize, DisruptionReason), usize> = BTreeMap::new();
    for c in live.iter().filter(|c| c.blocked.is_none()) {
        let underused = c.consolidatable && c.consolidation_policy.underutilized();
        for (reason, eligible) in [
            (DisruptionReason::Empty, c.empty && c.consolidatable),
            (DisruptionReason::Drifted, drift_eligible(snap, c)),
            (DisruptionReason::Underutilized, underused),
        ] {
            if eligible {
                *want.entry((c.nodepool, reason)).or_default() += 1;
            }
        }
    }
    want.into_iter()
        .filter(|((pool, reason), n)| {
            allowed.get(&(snap.nodepools[*pool].name.clone(), *reason)).is_none_or(|a| a.allowed < *n)
        })
        .map(|((pool, _), _)| pool)
        .collect()
}

/// Each NodePool's allowance per reason, and the (NodePool, reason) pairs whose budget
/// allows nothing even before counting nodes already disrupting.
type Allowances = (BTreeMap<(String, DisruptionReason), Allowance>, Vec<(String, DisruptionReason)>);

fn allowances(snap: &ClusterSnapshot, policies: &dyn PolicySet) -> Allowances {
    let mut out = BTreeMap::new();
    let mut blocked = Vec::new();
    for tpl in &snap.nodepools {
        let nodes = budgeted(snap, &tpl.name);
        let disrupting = nodes.iter().filter(|c| c.disrupting || !c.ready).count();
        for reason in [DisruptionReason::Empty, DisruptionReason::Drifted, DisruptionReason::Underutilized] {
            let ctx = BudgetContext {
                nodepool: &tpl.name,
                reason,
                now: snap.now,
                total_nodes: nodes.len(),
                disrupting,
                budgets: &tpl.disruption.budgets,
            };
            let rule = policies.budget_rule(&tpl.name);
            let own = KarpenterBudgets.allowed(&ctx);
            crate::work::count(|w| w.budget_calls += 1);
            let allowance = budgets::tightened(rule.allowed(&ctx), own, rule.name());
            let none_at_all = KarpenterBudgets.allowed(&BudgetContext { disrupting: 0, ..ctx }).allowed == 0
                || (disrupting == 0 && allowance.allowed == 0);
            if !nodes.is_empty() && none_at_all {
                blocked.push((tpl.name.clone(), reason));
            }
            out.insert((tpl.name.clone(), reason), allowance);
        }
    }
    (out, blocked)
}

/// The NodeClaims a NodePool's budgets count: its Initialized ones.
fn budgeted<'s>(snap: &'s ClusterSnapshot, pool: &str) -> Vec<&'s crate::model::ClaimInfo> {
    snap.nodes
        .iter()
        .filter(|n| n.nodepool.as_deref() == Some(pool))
        .filter_map(|n| n.claim.as_ref())
        .filter(|c| c.initialized)
        .collect()
}

/// Nodes consuming each NodePool's budgets: counted ones being disrupted or not Ready.
pub fn consuming_budgets(snap: &ClusterSnapshot) -> BTreeMap<String, usize> {
    snap.nodepools
        .iter()
        .map(|t| (t.name.clone(), budgeted(snap, &t.name).iter().filter(|c| c.disrupting || !c.ready).count()))
        .collect()
}

/// Candidates in order, at most the budget of each NodePool.
/// Whether drift may disrupt candidate `c` (Karpenter's `Drift.ShouldDisrupt`): drifted, of
/// a NodePool that is not static (its `Drifted` condition is still written), and not held by
/// a pod unless a terminationGracePeriod bounds the wait.
pub fn drift_eligible(snap: &ClusterSnapshot, c: &Candidate) -> bool {
    let pool = &snap.nodepools[c.nodepool];
    c.drifted.is_some() && pool.replicas.is_none() && (c.blocked.is_none() || pool.termination_grace_period.is_some())
}

fn within_budget<'c>(cands: &[&'c Candidate], mut left: BTreeMap<usize, usize>) -> Vec<&'c Candidate> {
    cands
        .iter()
        .copied()
        .filter(|c| {
            let l = left.entry(c.nodepool).or_default();
            if *l == 0 {
                return false;
            }
            *l -= 1;
            true
        })
        .collect()
}

/// Empty candidates within budget, most expensive first, as one plan per NodePool.
fn emptiness(empty: &[&Candidate], left: BTreeMap<usize, usize>, snap: &ClusterSnapshot) -> Vec<DisruptionPlan> {
    let mut sorted = empty.to_vec();
    sorted.sort_by(|a, b| b.price.total_cmp(&a.price).then(a.node.cmp(&b.node)));
    let chosen = within_budget(&sorted, left);
    let mut by_pool: BTreeMap<usize, Vec<&Candidate>> = BTreeMap::new();
    for c in chosen {
        by_pool.entry(c.nodepool).or_default().push(c);
    }
    let after = |c: &Candidate| snap.nodepools[c.nodepool].disruption.consolidate_after.unwrap_or(0);
    by_pool
        .into_values()
        .map(|chosen| DisruptionPlan {
            method: Method::Emptiness,
            reason: format!("empty for at least {}", humanize(chosen.iter().map(|c| after(c)).min().unwrap_or(0))),
            candidates: chosen.iter().map(|c| c.node).collect(),
            replacements: vec![],
            pods: vec![],
            savings_per_hour: chosen.iter().map(|c| c.price).sum(),
        })
        .collect()
}

fn humanize(secs: i64) -> String {
    match secs {
        s if s % 3600 == 0 && s > 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 && s > 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// The cheapest available price among a NodeClaim's options.
fn cheapest(nc: &NewNodeClaim, snap: &ClusterSnapshot) -> Option<(String, f64)> {
    let cat = &snap.nodepools[nc.nodepool].instance_types;
    nc.instance_types
        .iter()
        .filter_map(|&t| {
            let it = &cat[t as usize];
            it.cheapest(&nc.requirements).map(|o| (it.name.clone(), o.price))
        })
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

impl<'a> Round<'a> {
    /// What every decision over `snap` shares: the simulator, the uninitialized nodes and
    /// the Balanced NodePools' totals, built once.
    fn new(snap: &'a ClusterSnapshot, policies: &'a dyn PolicySet) -> Self {
        let uninitialized =
            snap.nodes.iter().map(|n| n.in_flight || n.claim.as_ref().is_some_and(|c| !c.initialized)).collect();
        let balanced = balanced::totals(snap);
        Round {
            snap,
            policies,
            sim: Simulator::new(snap),
            evaluated: 0,
            uninitialized,
            balanced,
            moves: Vec::new(),
            unconsolidatable: Vec::new(),
        }
    }

    /// The removal of `nodes` simulated, and whether its new NodeClaims are ranked by the
    /// NodePools' scorer yet. They are in price order unless the option cut made the scorer's
    /// order matter to the simulation itself: most simulations are thrown away, and a scoring
    /// policy is called only for the replacement of a plan (`rank_options`).
    ///
    /// Every caller refuses a plan whose `pods` (the candidates') would wait on a node not
    /// Initialized yet, once they all land, so the simulation stops there; new NodeClaims
    /// are built only up to `claims_up_to`.
    /// Removes `nodes` and places their pods but `stays` (see `Needs::stays`); for a
    /// `consolidation`, not onto a node within its consolidateAfter (drift may).
    fn simulate(
        &mut self,
        nodes: &[usize],
        pods: &[usize],
        stays: &[usize],
        claims_up_to: Option<usize>,
        consolidation: bool,
    ) -> (SimOutcome, bool) {
        self.evaluated += nodes.len();
        let needs = Needs { refused_if_on: Some((pods, &self.uninitialized)), claims_up_to, stays, consolidation };
        let out = self.sim.ask(nodes, &PriceScorer, &needs);
        if out.cut_types { (self.sim.ask(nodes, self.policies.scorer(), &needs), true) } else { (out, false) }
    }

    /// Existing nodes that pending pods, or pods of nodes being disrupted, would be placed on
    /// (the ranking of new NodeClaims plays no part).
    fn nominated(&self) -> BTreeSet<String> {
        let moved_to = self.sim.remove(&[], &PriceScorer).moved_to;
        moved_to.into_values().map(|n| self.snap.nodes[n].name.clone()).collect()
    }

    /// Karpenter's rule: a plan may not count on a node that is not Initialized yet (its
    /// pods would wait there, or it may never come up). Pods of nodes already being
    /// disrupted may (they go there whatever this plan decides).
    fn relies_on_uninitialized(&self, out: &SimOutcome, pods: &[usize]) -> bool {
        pods.iter().any(|p| out.moved_to.get(p).is_some_and(|&n| self.uninitialized[n]))
    }

    /// Whether removing `cands` is a valid consolidation: every pod of theirs lands, at most
    /// one new node, strictly cheaper than what it replaces.
    fn consolidate(&mut self, cands: &[&Candidate], method: Method) -> Option<DisruptionPlan> {
        let nodes: Vec<usize> = cands.iter().map(|c| c.node).collect();
        let pods: Vec<usize> = cands.iter().flat_map(|c| c.pods.iter().copied()).collect();
        // Karpenter says why a single candidate cannot be consolidated.
        let single = (cands.len() == 1).then(|| cands[0].node);
        let unconsolidatable = |round: &mut Self, why: String| {
            if let Some(n) = single {
                round.unconsolidatable.push((n, why));
            }
        };
        if pdb_problem(&pods, self.snap).is_some() {
            return None;
        }
        let (out, ranked) = self.simulate(&nodes, &pods, &[], Some(1), true);
        let stranded: Vec<String> = out
            .unschedulable
            .iter()
            .filter(|u| pods.contains(&u.pod))
            .map(|u| {
                let p = &self.snap.pods[u.pod];
                format!("pod {}/{} would not schedule: {}", p.namespace, p.name, u.reason)
            })
            .collect();
        if !stranded.is_empty() {
            unconsolidatable(self, sentence(&stranded));
            return None;
        }
        if self.relies_on_uninitialized(&out, &pods) {
            return None;
        }
        // Every new NodeClaim counts, pending pods' included (Karpenter's `NewNodeClaims`):
        // a consolidation must not take the room a pending pod was about to get.
        if out.claims_needed > 1 {
            unconsolidatable(self, format!("Can't remove without creating {} candidates", out.claims_needed));
            return None;
        }
        let mut needed: Vec<NewNodeClaim> = out.nodeclaims;
        let price: f64 = cands.iter().map(|c| c.price).sum();
        let snap = self.snap;
        let names: Vec<String> = nodes.iter().map(|&n| snap.nodes[n].name.clone()).collect();
        match needed.pop() {
            None => Some(DisruptionPlan {
                method,
                reason: format!("{} can be deleted: their pods fit on other nodes", names.join(", ")),
                candidates: nodes,
                replacements: vec![],
                pods,
                savings_per_hour: price,
            }),
            Some(mut nc) => {
                if !ranked {
                    rank_options(&mut nc, snap, self.policies.scorer());
                }
                let ct = wk::LABEL_CAPACITY_TYPE;
                let allows = |nc: &NewNodeClaim, v: &str| nc.requirements.get(ct).is_none_or(|r| r.has(v));
                let spot_to_spot = cands.iter().all(|c| c.spot) && allows(&nc, wk::CAPACITY_TYPE_SPOT);
                if spot_to_spot {
                    // Off unless the SpotToSpotConsolidation feature gate is on: spot nodes are
                    // then only deleted.
                    if !snap.spot_to_spot {
                        let why = "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node";
                        unconsolidatable(self, why.into());
                        return None;
                    }
                    nc.requirements.add(Requirement::in_values(ct, [wk::CAPACITY_TYPE_SPOT]));
                }
                let cat = &snap.nodepools[nc.nodepool].instance_types;
                let price_of = |t: u32, reqs: &Requirements| cat[t as usize].cheapest(reqs).map(|o| o.price);
                let reqs = nc.requirements.clone();
                // Karpenter keeps a type only if even its dearest launch would be cheaper, and
                // what is left must still meet the NodePool's minValues
                // (`RemoveInstanceTypeOptionsByPriceAndMinValues`).
                nc.instance_types.retain(|&t| cat[t as usize].worst_launch_price(&reqs).is_some_and(|p| p < price));
                if let Some(m) = min_values_problem(&nc.instance_types, cat, &nc.requirements) {
                    unconsolidatable(self, format!("Filtering by price: {m}"));
                    return None;
                }
                if spot_to_spot && nodes.len() == 1 {
                    if nc.instance_types.len() < MIN_SPOT_TO_SPOT_TYPES {
                        let why = format!(
                            "SpotToSpotConsolidation requires {MIN_SPOT_TO_SPOT_TYPES} cheaper instance type options than the current candidate to consolidate, got {}",
                            nc.instance_types.len()
                        );
                        unconsolidatable(self, why);
                        return None;
                    }
                    let mut by_price: Vec<(u32, f64)> =
                        nc.instance_types.iter().filter_map(|&t| price_of(t, &reqs).map(|p| (t, p))).collect();
                    by_price.sort_by(|a, b| a.1.total_cmp(&b.1));
                    let ordered: Vec<u32> = by_price.into_iter().map(|(t, _)| t).collect();
                    // Enough types for the NodePool's minValues, and never fewer than the minimum.
                    let keep = (1..=ordered.len())
                        .find(|&k| min_values_problem(&ordered[..k], cat, &nc.requirements).is_none())
                        .unwrap_or(ordered.len())
                        .max(MIN_SPOT_TO_SPOT_TYPES);
                    let kept: std::collections::BTreeSet<u32> = ordered.into_iter().take(keep).collect();
                    nc.instance_types.retain(|t| kept.contains(t));
                } else if !spot_to_spot
                    && allows(&nc, wk::CAPACITY_TYPE_SPOT)
                    && allows(&nc, wk::CAPACITY_TYPE_ON_DEMAND)
                {
                    // The cheaper types were chosen at their spot price: a replacement that
                    // fell back to on-demand could cost more than the node it replaces.
                    nc.requirements.add(Requirement::in_values(ct, [wk::CAPACITY_TYPE_SPOT]));
                }
                let allowed: Vec<u32> = nc.instance_types.clone();
                nc.offerings.retain(|&(t, o)| {
                    allowed.contains(&t)
                        && nc
                            .requirements
                            .get(ct)
                            .is_none_or(|r| r.has(&cat[t as usize].offerings[o as usize].capacity_type))
                });
                let Some((name, new_price)) = cheapest(&nc, snap) else {
                    unconsolidatable(self, "Can't replace with a cheaper node".into());
                    return None;
                };
                Some(DisruptionPlan {
                    method,
                    reason: format!(
                        "{} can be replaced by a cheaper {name} (${new_price:.4}/h instead of ${price:.4}/h)",
                        names.join(", ")
                    ),
                    candidates: nodes,
                    replacements: vec![nc],
                    pods,
                    savings_per_hour: price - new_price,
                })
            }
        }
    }

    /// The largest prefix of candidates that can go together, by binary search.
    fn multi_node(&mut self, cands: &[&Candidate]) -> Option<DisruptionPlan> {
        let cands = &cands[..cands.len().min(MAX_MULTI_NODE_CANDIDATES)];
        if cands.len() < 2 {
            return None;
        }
        let (mut lo, mut hi) = (1usize, cands.len());
        let mut best = None;
        let mut refused = None;
        while lo <= hi {
            let mid = (lo + hi) / 2;
            let plan = self.consolidate(&cands[..mid], Method::MultiNodeConsolidation);
            let plan = plan.and_then(|p| self.without_same_type(p, &cands[..mid]));
            match plan {
                Some(p) if balanced::approves(&p, self.snap, &self.balanced) => {
                    best = Some(p);
                    lo = mid + 1;
                }
                Some(p) => {
                    refused = Some(p);
                    hi = mid - 1;
                }
                None => hi = mid - 1,
            }
        }
        let best = best.filter(|p| p.candidates.len() > 1);
        match (&best, refused) {
            (Some(p), _) => self.moves.extend(balanced::multi_moves(p, self.snap, &self.balanced, true)),
            (None, Some(p)) => self.moves.extend(balanced::multi_moves(&p, self.snap, &self.balanced, false)),
            (None, None) => {}
        }
        best
    }

    /// Karpenter's `filterOutSameInstanceType`: a multi-node replacement that may be one of
    /// the candidates' own types must be cheaper than the cheapest such candidate, or keeping
    /// that candidate and deleting the others is the same move with fewer pods moved. `None`
    /// when no option is left.
    fn without_same_type(&self, mut plan: DisruptionPlan, cands: &[&Candidate]) -> Option<DisruptionPlan> {
        let snap = self.snap;
        let Some(nc) = plan.replacements.first_mut() else { return Some(plan) };
        let mut existing: BTreeMap<&str, f64> = BTreeMap::new();
        for c in cands {
            let Some(claim) = snap.nodes[c.node].claim.as_ref() else { continue };
            let p = existing.entry(claim.instance_type.as_str()).or_insert(f64::MAX);
            *p = p.min(c.price);
        }
        let cat = &snap.nodepools[nc.nodepool].instance_types;
        let max_price = nc
            .instance_types
            .iter()
            .filter_map(|&t| existing.get(cat[t as usize].name.as_str()))
            .fold(f64::MAX, |a, &b| a.min(b));
        if max_price == f64::MAX {
            return Some(plan);
        }
        let reqs = nc.requirements.clone();
        nc.instance_types.retain(|&t| cat[t as usize].worst_launch_price(&reqs).is_some_and(|p| p < max_price));
        if nc.instance_types.is_empty() || min_values_problem(&nc.instance_types, cat, &reqs).is_some() {
            return None;
        }
        let kept = nc.instance_types.clone();
        nc.offerings.retain(|(t, _)| kept.contains(t));
        let (name, new_price) = cheapest(nc, snap)?;
        let price: f64 = cands.iter().map(|c| c.price).sum();
        let names: Vec<&str> = plan.candidates.iter().map(|&n| snap.nodes[n].name.as_str()).collect();
        plan.reason = format!(
            "{} can be replaced by a cheaper {name} (${new_price:.4}/h instead of ${price:.4}/h)",
            names.join(", ")
        );
        plan.savings_per_hour = price - new_price;
        Some(plan)
    }

    /// Per NodePool, its first candidate that can be deleted or replaced by one cheaper node
    /// (Karpenter's first valid candidate is the first of these): each NodePool's
    /// consolidator then has a plan of its own to decide, whatever another vetoes.
    fn single_node(&mut self, cands: &[&Candidate]) -> Vec<DisruptionPlan> {
        let pools: std::collections::BTreeSet<usize> = cands.iter().map(|c| c.nodepool).collect();
        let mut found: BTreeMap<usize, DisruptionPlan> = BTreeMap::new();
        let mut order = Vec::new();
        for c in cands {
            if found.len() == pools.len() {
                break;
            }
            if found.contains_key(&c.nodepool) {
                continue;
            }
            let Some(p) = self.consolidate(std::slice::from_ref(c), Method::SingleNodeConsolidation) else { continue };
            let m = balanced::single_move(&p, self.snap, &self.balanced);
            let approved = m.as_ref().is_none_or(|m| m.approved);
            self.moves.extend(m);
            if approved {
                order.push(c.nodepool);
                found.insert(c.nodepool, p);
            }
        }
        order.into_iter().filter_map(|pool| found.remove(&pool)).collect()
    }

    /// Karpenter's drift: the earliest drifted first, empty ones before the others, one
    /// candidate a command; a NodePool whose budget is spent is skipped.
    fn drift(&mut self, cands: &[&Candidate], left: BTreeMap<usize, usize>) -> Option<DisruptionPlan> {
        let snap = self.snap;
        let since = |c: &Candidate| snap.nodes[c.node].claim.as_ref().and_then(|x| x.drifted_since).unwrap_or(snap.now);
        let mut sorted = cands.to_vec();
        sorted.sort_by(|a, b| since(a).cmp(&since(b)).then(a.cost.total_cmp(&b.cost)).then(a.node.cmp(&b.node)));
        // Empty ones first: pods moved off a drifted node should not land on an empty one
        // drift removes next (stable, so each group keeps the drift order).
        sorted.sort_by_key(|c| !c.pods.is_empty());
        let reason =
            |c: &Candidate| format!("{} drifted: {}", snap.nodes[c.node].name, c.drifted.as_deref().unwrap_or(""));
        let chosen = sorted.into_iter().filter(|c| left.get(&c.nodepool).is_some_and(|&n| n > 0));
        for c in chosen {
            if c.pods.is_empty() {
                return Some(DisruptionPlan {
                    method: Method::Drift,
                    reason: reason(c),
                    candidates: vec![c.node],
                    replacements: vec![],
                    pods: vec![],
                    savings_per_hour: 0.0,
                });
            }
            // A pod that cannot be moved now (under the terminationGracePeriod that lets drift
            // go ahead anyway) gets no replacement: it goes when the grace period ends.
            let (moving, stays): (Vec<usize>, Vec<usize>) =
                c.pods.iter().partition(|&&p| currently_reschedulable(&snap.pods[p], snap));
            let (out, ranked) = self.simulate(&[c.node], &moving, &stays, None, false);
            if out.unschedulable.iter().any(|u| moving.contains(&u.pod)) || self.relies_on_uninitialized(&out, &moving)
            {
                continue;
            }
            let mut replacements: Vec<NewNodeClaim> =
                out.nodeclaims.into_iter().filter(|nc| nc.pods.iter().any(|p| moving.contains(p))).collect();
            if !ranked {
                for nc in &mut replacements {
                    rank_options(nc, snap, self.policies.scorer());
                }
            }
            let new_price: f64 = replacements.iter().filter_map(|nc| cheapest(nc, snap)).map(|(_, p)| p).sum();
            return Some(DisruptionPlan {
                method: Method::Drift,
                reason: reason(c),
                candidates: vec![c.node],
                pods: moving,
                savings_per_hour: c.price - new_price,
                replacements,
            });
        }
        None
    }

    /// Asks each involved NodePool's consolidator about the plans that touch its NodePool,
    /// and only those; a plan goes ahead only if every involved consolidator approves it.
    /// The approved plans in order: Karpenter's, except that the plans touching one NodePool
    /// only are reordered among their own places by that NodePool's consolidator.
    fn approve(&mut self, plans: &[DisruptionPlan], rejected: &mut Vec<Rejection>) -> Vec<usize> {
        let snap = self.snap;
        let pools_of = |p: &DisruptionPlan| -> Vec<&str> {
            let mut v: Vec<&str> = p.candidates.iter().filter_map(|&n| snap.nodes[n].nodepool.as_deref()).collect();
            v.sort();
            v.dedup();
            v
        };
        let involved: Vec<Vec<&str>> = plans.iter().map(pools_of).collect();
        let mut pools: Vec<&str> = involved.iter().flatten().copied().collect();
        pools.sort();
        pools.dedup();
        let views: Vec<PlanView> = plans.iter().map(|p| self.view(p)).collect();
        let mut approved = vec![true; plans.len()];
        let mut order: Vec<usize> = (0..plans.len()).collect();
        for pool in pools {
            let consolidator = self.policies.consolidator(pool);
            let mine: Vec<usize> = (0..plans.len()).filter(|&i| involved[i].contains(&pool)).collect();
            let shown: Vec<PlanView> = mine.iter().map(|&i| views[i].clone()).collect();
            crate::work::count(|w| w.consolidator_calls += 1);
            let review = consolidator.review(&shown);
            for (j, &i) in mine.iter().enumerate() {
                if let Some(Verdict::Reject(why)) = review.verdicts.get(j) {
                    if approved[i] {
                        rejected.push(Rejection {
                            method: plans[i].method,
                            candidates: plans[i].candidates.clone(),
                            consolidator: consolidator.name().into(),
                            reason: why.clone(),
                        });
                    }
                    approved[i] = false;
                }
            }
            // This NodePool's own plans, in its preferred order, into the places they hold.
            let own = |i: usize| involved[i].len() == 1;
            let preferred: Vec<usize> = crate::scorer::normalise_ranking(&review.order, mine.len())
                .into_iter()
                .map(|j| mine[j])
                .filter(|&i| own(i))
                .collect();
            let places: Vec<usize> =
                (0..order.len()).filter(|&k| own(order[k]) && involved[order[k]][0] == pool).collect();
            for (k, i) in places.into_iter().zip(preferred) {
                order[k] = i;
            }
        }
        order.into_iter().filter(|&i| approved[i]).collect()
    }

    /// The first approved plan.
    fn review(&mut self, plans: Vec<DisruptionPlan>, rejected: &mut Vec<Rejection>) -> Option<DisruptionPlan> {
        let pick = *self.approve(&plans, rejected).first()?;
        plans.into_iter().nth(pick)
    }

    /// Every approved plan, as one (emptiness: nodes that can go independently).
    fn review_all(&mut self, plans: Vec<DisruptionPlan>, rejected: &mut Vec<Rejection>) -> Option<DisruptionPlan> {
        let approved = self.approve(&plans, rejected);
        let mut plans: Vec<Option<DisruptionPlan>> = plans.into_iter().map(Some).collect();
        let mut merged: Option<DisruptionPlan> = None;
        for i in approved {
            let Some(p) = plans[i].take() else { continue };
            match &mut merged {
                None => merged = Some(p),
                Some(m) => {
                    m.candidates.extend(p.candidates);
                    m.pods.extend(p.pods);
                    m.savings_per_hour += p.savings_per_hour;
                }
            }
        }
        merged
    }

    fn view(&self, p: &DisruptionPlan) -> PlanView {
        let snap = self.snap;
        let candidates = p
            .candidates
            .iter()
            .map(|&n| {
                let node = &snap.nodes[n];
                let claim = node.claim.clone().unwrap_or_default();
                let mut used = crate::resources::Resources::default();
                let pods: Vec<&crate::model::Pod> =
                    snap.pods.iter().filter(|x| x.node_name.as_deref() == Some(node.name.as_str())).collect();
                for x in &pods {
                    used.add(&x.requests);
                }
                let ratio = |u: i64, a: i64| if a > 0 { u as f64 / a as f64 } else { 0.0 };
                let cost = pods
                    .iter()
                    .filter(|x| crate::scheduler::reschedulable(x))
                    .map(|x| candidates::eviction_cost(x))
                    .sum::<f64>()
                    * candidates::lifetime_remaining(claim.created, claim.expire_after, snap.now);
                CandidateView {
                    node: node.name.clone(),
                    nodepool: node.nodepool.clone().unwrap_or_default(),
                    instance_type: claim.instance_type.clone(),
                    zone: claim.zone.clone(),
                    capacity_type: claim.capacity_type.clone(),
                    price: claim.price,
                    age_seconds: snap.now - claim.created,
                    cpu_utilisation: ratio(used.cpu, node.allocatable.cpu),
                    memory_utilisation: ratio(used.memory, node.allocatable.memory),
                    pods: pods.len(),
                    disruption_cost: cost,
                }
            })
            .collect();
        PlanView {
            method: p.method,
            candidates,
            replacement: p.replacements.first().and_then(|nc| cheapest(nc, snap)),
            savings_per_hour: p.savings_per_hour,
            now: snap.now,
        }
    }
}
