//! Wasm policies behind the decision core's traits, failing safe: a scoring failure falls back to price order, a consolidation failure skips the plans, a
//! budget failure allows zero disruptions. Every call is counted; every failure is kept for
//! the NodePool's `PolicyHealthy` condition and logged for whoever shows them; a policy that
//! keeps failing is skipped for a while (breaker.rs). In shadow mode the policy runs, its
//! disagreements are counted, and the default decides, whatever the policy does.

use crate::bindings::{budget as wb, consolidator as wc, scorer as ws};
use crate::breaker::Breaker;
use crate::error::{Failure, FailureKind};
use crate::metrics::Metrics;
use crate::policy::{LoadedPolicy, World};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tenon_core::disruption::Method;
use tenon_core::disruption::budgets::{Allowance, BudgetContext, BudgetRule, KarpenterBudgets, is_active};
use tenon_core::disruption::consolidator::{ApproveAll, Consolidator, PlanView, Review, Verdict};
use tenon_core::model::{BudgetNodes, DisruptionReason};
use tenon_core::policy_failure::PolicyFailure;
use tenon_core::resources::Resources;
use tenon_core::scorer::{Scorer, ScoringInput};

/// The NodePool a policy instance decides for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodePoolContext {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The hook's configuration, a JSON object: its own annotation
    /// (`tenon.dev/scoring-config`, …), else `tenon.dev/policy-config`, else `{}`.
    pub config: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Enforce,
    Shadow,
}

/// The decision a policy makes for its NodePool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Hook {
    Scoring,
    Consolidation,
    Budget,
}

impl Hook {
    pub fn as_str(&self) -> &'static str {
        match self {
            Hook::Scoring => "scoring",
            Hook::Consolidation => "consolidation",
            Hook::Budget => "budget",
        }
    }

    /// The world a policy for this hook implements.
    pub fn world(&self) -> World {
        match self {
            Hook::Scoring => World::Scorer,
            Hook::Consolidation => World::Consolidator,
            Hook::Budget => World::DisruptionBudget,
        }
    }

    /// The hook as the NodePool's annotations name it.
    pub fn annotated(&self) -> tenon_api::policy::PolicyHook {
        match self {
            Hook::Scoring => tenon_api::policy::PolicyHook::Scoring,
            Hook::Consolidation => tenon_api::policy::PolicyHook::Consolidation,
            Hook::Budget => tenon_api::policy::PolicyHook::Disruption,
        }
    }

    /// The hook an annotation names.
    pub fn named(hook: tenon_api::policy::PolicyHook) -> Hook {
        match hook {
            tenon_api::policy::PolicyHook::Scoring => Hook::Scoring,
            tenon_api::policy::PolicyHook::Consolidation => Hook::Consolidation,
            tenon_api::policy::PolicyHook::Disruption => Hook::Budget,
        }
    }

    pub fn of(world: World) -> Hook {
        match world {
            World::Scorer => Hook::Scoring,
            World::Consolidator => Hook::Consolidation,
            World::DisruptionBudget => Hook::Budget,
        }
    }

    /// What decides when the policy does not.
    pub fn fallback(&self, mode: Mode) -> &'static str {
        match (mode, self) {
            (Mode::Shadow, _) => "the default (shadow mode)",
            (Mode::Enforce, Hook::Scoring) => "price order",
            (Mode::Enforce, Hook::Consolidation) => "no plans",
            (Mode::Enforce, Hook::Budget) => "zero disruptions",
        }
    }
}

/// The failures of a cluster's policies, for the simulator's timeline and the controller's
/// log. Bounded: past [`FailureLog::CAP`] entries the oldest are dropped.
#[derive(Default)]
pub struct FailureLog(Mutex<std::collections::VecDeque<PolicyFailure>>);

impl FailureLog {
    pub const CAP: usize = 1000;

    pub fn push(&self, f: PolicyFailure) {
        let mut q = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if q.len() == Self::CAP {
            q.pop_front();
        }
        q.push_back(f);
    }

    /// Everything logged since the last take.
    pub fn take(&self) -> Vec<PolicyFailure> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).drain(..).collect()
    }
}

#[derive(Default)]
struct Record {
    last_failure: Option<Failure>,
    breaker: Breaker,
}

/// What adapters share: the policy, its NodePool, the mode, metrics, the failure log, and
/// the record of its calls.
pub struct Bound {
    pub policy: Arc<LoadedPolicy>,
    pub nodepool: NodePoolContext,
    pub mode: Mode,
    pub metrics: Arc<Metrics>,
    hook: Hook,
    log: Arc<FailureLog>,
    record: Mutex<Record>,
}

impl Bound {
    pub fn new(policy: Arc<LoadedPolicy>, nodepool: NodePoolContext, mode: Mode, metrics: Arc<Metrics>) -> Self {
        let hook = Hook::of(policy.world);
        Bound { policy, nodepool, mode, metrics, hook, log: Arc::default(), record: Mutex::default() }
    }

    /// Logs failures into `log` (one log for a whole cluster).
    pub fn with_log(mut self, log: Arc<FailureLog>) -> Self {
        self.log = log;
        self
    }

    fn record(&self) -> std::sync::MutexGuard<'_, Record> {
        self.record.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The most recent failure, if the last call failed.
    pub fn last_failure(&self) -> Option<Failure> {
        self.record().last_failure.clone()
    }

    /// Why this policy is unhealthy, for `PolicyHealthy=False`; `None` when its last call
    /// succeeded (or it was never called). The text changes only when the failure does, or
    /// when the breaker trips again.
    pub fn health(&self) -> Option<String> {
        let r = self.record();
        let f = r.last_failure.as_ref()?;
        let who = format!("policy {} ({})", self.policy.name, self.hook.as_str());
        let instead = self.hook.fallback(self.mode);
        Some(if r.breaker.open_until.is_some() {
            format!(
                "{who} failed {}, last {f}; skipped for {}s at a time until a call succeeds, {instead} decides meanwhile",
                r.breaker.counts(),
                r.breaker.backoff
            )
        } else {
            format!("{who} failed: {f}; {instead} decided instead")
        })
    }

    fn log(&self, now: i64, kind: FailureKind, message: String) {
        self.log.push(PolicyFailure {
            at: now,
            nodepool: self.nodepool.name.clone(),
            policy: self.policy.name.clone(),
            hook: self.hook.as_str().into(),
            kind: kind.as_str().into(),
            message,
            fallback: self.hook.fallback(self.mode).into(),
        });
    }

    /// One call, unless the breaker skips it; counted, recorded and logged.
    fn run<T>(&self, now: i64, call: impl FnOnce() -> Result<T, Failure>) -> Result<T, Failure> {
        let (name, hook) = (&self.policy.name, self.hook.as_str());
        {
            let mut r = self.record();
            if !r.breaker.admit(now) {
                self.metrics.skipped(name, hook);
                let message = format!("skipped after failing {}", r.breaker.counts());
                return Err(Failure::new(FailureKind::CircuitOpen, message));
            }
        }
        let start = Instant::now();
        let out = call();
        let failure = out.as_ref().err();
        self.metrics.observe(name, hook, start.elapsed(), failure.map(|f| f.kind));
        let mut r = self.record();
        let tripped = r.breaker.record(now, failure.map(|f| f.kind));
        r.last_failure = failure.cloned();
        if let Some(f) = failure {
            self.log(now, f.kind, f.message.clone());
            if tripped {
                let message = format!("failed {}: skipped for {}s", r.breaker.counts(), r.breaker.backoff);
                self.log(now, FailureKind::CircuitOpen, message);
            }
        }
        out
    }

    fn wit_nodepool<L>(&self, label: impl Fn(String, String) -> L) -> (String, Vec<L>, String) {
        let config =
            if self.nodepool.config.trim().is_empty() { "{}".to_string() } else { self.nodepool.config.clone() };
        (
            self.nodepool.name.clone(),
            self.nodepool.labels.iter().map(|(k, v)| label(k.clone(), v.clone())).collect(),
            config,
        )
    }
}

fn resources(r: &Resources) -> ws::Resources {
    ws::Resources {
        cpu_millis: r.cpu,
        memory_bytes: r.memory,
        pods: r.pods,
        ephemeral_storage_bytes: r.ephemeral_storage,
        extended: r.extended.clone(),
    }
}

/// The WIT input of a scoring decision: instance types once each, offerings referring to them.
pub fn scoring_input(input: &ScoringInput<'_>, pool: (String, Vec<ws::Label>, String)) -> ws::ScoringInput {
    let mut types: Vec<ws::InstanceType> = Vec::new();
    let mut index: BTreeMap<&str, u32> = BTreeMap::new();
    let (mut zones, mut capacity_types): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    let position = |list: &mut Vec<String>, v: &str| match list.iter().position(|x| x == v) {
        Some(i) => i as u32,
        None => {
            list.push(v.to_string());
            list.len() as u32 - 1
        }
    };
    let mut label_keys: Vec<String> = Vec::new();
    let mut key_index: BTreeMap<&str, u32> = BTreeMap::new();
    let mut offerings = Vec::with_capacity(input.candidates.len());
    for c in &input.candidates {
        let it = c.instance_type;
        let i = *index.entry(it.name.as_str()).or_insert_with(|| {
            types.push(ws::InstanceType {
                name: it.name.clone(),
                labels: it
                    .requirements
                    .iter()
                    .filter(|r| r.values().len() == 1 && !r.is_complement())
                    .map(|r| {
                        let key = *key_index.entry(r.key.as_str()).or_insert_with(|| {
                            label_keys.push(r.key.clone());
                            label_keys.len() as u32 - 1
                        });
                        ws::TypeLabel { key, value: r.values()[0].clone() }
                    })
                    .collect(),
                capacity: resources(&it.capacity),
                allocatable: resources(it.allocatable()),
            });
            types.len() as u32 - 1
        });
        let zone = position(&mut zones, &c.offering.zone);
        let capacity_type = position(&mut capacity_types, &c.offering.capacity_type);
        offerings.push(ws::Offering { instance_type: i, zone, capacity_type, price: c.offering.price });
    }
    ws::ScoringInput {
        nodepool: ws::Nodepool { name: pool.0, labels: pool.1, config: pool.2 },
        now: input.now,
        requests: resources(input.requests),
        pod_count: input.pod_count as u32,
        instance_types: types,
        label_keys,
        zones,
        capacity_types,
        offerings,
    }
}

/// A ranking from scores: exactly one finite score per offering, lower first, stable.
pub fn ranking_from_scores(scores: &[f64], n: usize) -> Result<Vec<usize>, Failure> {
    if scores.len() != n {
        return Err(Failure::new(
            FailureKind::InvalidOutput,
            format!("returned {} scores for {n} offerings", scores.len()),
        ));
    }
    if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
        return Err(Failure::new(FailureKind::InvalidOutput, format!("score {i} is {}", scores[i])));
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    Ok(order)
}

/// A scoring policy as the core's [`Scorer`]. A call is a function of its input alone (the
/// sandbox's clock is the decision's time, its randomness seeded, each call a fresh
/// instance), so the rankings of the current decision time are kept and an identical
/// question is answered from them: consolidation asks the same of many alike candidates.
pub struct WasmScorer(pub Bound, Mutex<Answers>);

/// Rankings the policy gave at one decision time, by what was asked.
#[derive(Default)]
struct Answers {
    now: i64,
    given: Vec<(u64, Asked, Vec<usize>)>,
}

impl Answers {
    /// Rankings kept per decision time; past it the oldest goes.
    const CAP: usize = 64;
}

/// What a scorer call is asked, by identity: the offerings are the snapshot's own objects,
/// alive for the whole decision.
#[derive(Hash, PartialEq, Eq)]
struct Asked {
    requests: Resources,
    pod_count: usize,
    offerings: Vec<(usize, usize, u64)>,
}

impl Asked {
    fn of(input: &ScoringInput<'_>) -> (u64, Asked) {
        use std::hash::{Hash, Hasher};
        let asked = Asked {
            requests: input.requests.clone(),
            pod_count: input.pod_count,
            offerings: input
                .candidates
                .iter()
                .map(|c| {
                    let (t, o) = (c.instance_type as *const _ as usize, c.offering as *const _ as usize);
                    (t, o, c.offering.price.to_bits())
                })
                .collect(),
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        asked.hash(&mut h);
        (h.finish(), asked)
    }
}

impl WasmScorer {
    pub fn new(bound: Bound) -> Self {
        WasmScorer(bound, Mutex::default())
    }

    fn answers(&self) -> std::sync::MutexGuard<'_, Answers> {
        self.1.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The policy's ranking of `input`, from the kept answers or a call (a failure is not kept).
    fn ranking(&self, input: &ScoringInput<'_>) -> Result<Vec<usize>, Failure> {
        let n = input.candidates.len();
        let (hash, asked) = Asked::of(input);
        {
            let mut answers = self.answers();
            if answers.now != input.now {
                *answers = Answers { now: input.now, given: Vec::new() };
            }
            if let Some((_, _, r)) = answers.given.iter().find(|(h, a, _)| *h == hash && *a == asked) {
                return Ok(r.clone());
            }
        }
        let wit = scoring_input(input, self.0.wit_nodepool(|key, value| ws::Label { key, value }));
        let ranking =
            self.0.run(input.now, || self.0.policy.rank(&wit, input.now).and_then(|s| ranking_from_scores(&s, n)))?;
        let mut answers = self.answers();
        if answers.now == input.now {
            if answers.given.len() == Answers::CAP {
                answers.given.remove(0);
            }
            answers.given.push((hash, asked, ranking.clone()));
        }
        Ok(ranking)
    }
}

impl Scorer for WasmScorer {
    fn rank(&self, input: &ScoringInput<'_>) -> Vec<usize> {
        let default: Vec<usize> = (0..input.candidates.len()).collect();
        match (self.ranking(input), self.0.mode) {
            (Ok(r), Mode::Enforce) => r,
            (Ok(r), Mode::Shadow) => {
                if r != default {
                    self.0.metrics.disagreed(&self.0.policy.name, "scoring");
                }
                default
            }
            (Err(_), _) => default,
        }
    }

    fn name(&self) -> &str {
        &self.0.policy.name
    }
}

fn method(m: Method) -> wc::Method {
    match m {
        Method::Emptiness => wc::Method::Emptiness,
        Method::Drift => wc::Method::Drift,
        Method::MultiNodeConsolidation => wc::Method::MultiNodeConsolidation,
        Method::SingleNodeConsolidation => wc::Method::SingleNodeConsolidation,
        Method::Expiration => wc::Method::Expiration,
    }
}

/// The WIT input of a consolidation round.
pub fn consolidation_input(
    plans: &[PlanView],
    pool: (String, Vec<wc::Label>, String),
    now: i64,
) -> wc::ConsolidationInput {
    wc::ConsolidationInput {
        nodepool: wc::Nodepool { name: pool.0, labels: pool.1, config: pool.2 },
        now,
        plans: plans
            .iter()
            .map(|p| wc::Plan {
                method: method(p.method),
                candidates: p
                    .candidates
                    .iter()
                    .map(|c| wc::Candidate {
                        node: c.node.clone(),
                        nodepool: c.nodepool.clone(),
                        instance_type: c.instance_type.clone(),
                        zone: c.zone.clone(),
                        capacity_type: c.capacity_type.clone(),
                        price: c.price,
                        age_seconds: c.age_seconds,
                        cpu_utilisation: c.cpu_utilisation,
                        memory_utilisation: c.memory_utilisation,
                        pods: c.pods as u32,
                        disruption_cost: c.disruption_cost,
                    })
                    .collect(),
                replacement: p
                    .replacement
                    .as_ref()
                    .map(|(t, price)| wc::Replacement { instance_type: t.clone(), price: *price }),
                savings_per_hour: p.savings_per_hour,
            })
            .collect(),
    }
}

/// Checks a review against its plans: one verdict per plan, known plan indices at most once.
pub fn review_from_wit(r: wc::PlanReview, n: usize) -> Result<Review, Failure> {
    if r.verdicts.len() != n {
        return Err(Failure::new(
            FailureKind::InvalidOutput,
            format!("returned {} verdicts for {n} plans", r.verdicts.len()),
        ));
    }
    let mut seen = vec![false; n];
    for &i in &r.order {
        let i = i as usize;
        if i >= n {
            return Err(Failure::new(FailureKind::InvalidOutput, format!("order names plan {i}, there are {n}")));
        }
        if std::mem::replace(&mut seen[i], true) {
            return Err(Failure::new(FailureKind::InvalidOutput, format!("order names plan {i} twice")));
        }
    }
    Ok(Review {
        order: r.order.into_iter().map(|i| i as usize).collect(),
        verdicts: r
            .verdicts
            .into_iter()
            .map(|v| if v.approve { Verdict::Approve } else { Verdict::Reject(v.reason) })
            .collect(),
    })
}

/// A consolidation policy as the core's [`Consolidator`].
pub struct WasmConsolidator(pub Bound);

impl Consolidator for WasmConsolidator {
    fn review(&self, plans: &[PlanView]) -> Review {
        let now = plans.first().map_or(0, |p| p.now);
        let default = ApproveAll.review(plans);
        if plans.is_empty() {
            return default;
        }
        let wit = consolidation_input(plans, self.0.wit_nodepool(|key, value| wc::Label { key, value }), now);
        let out = self.0.run(now, || self.0.policy.review(&wit, now).and_then(|r| review_from_wit(r, plans.len())));
        match (out, self.0.mode) {
            (Ok(r), Mode::Enforce) => r,
            (Ok(r), Mode::Shadow) => {
                if r.verdicts != default.verdicts {
                    self.0.metrics.disagreed(&self.0.policy.name, "consolidation");
                }
                default
            }
            (Err(_), Mode::Shadow) => default,
            // Fail safe: no disruption on the policy's account.
            (Err(f), Mode::Enforce) => Review {
                order: default.order,
                verdicts: vec![
                    Verdict::Reject(format!(
                        "consolidation policy {} failed ({f}); skipping the plan",
                        self.0.policy.name
                    ));
                    plans.len()
                ],
            },
        }
    }

    fn name(&self) -> &str {
        &self.0.policy.name
    }
}

fn reason(r: DisruptionReason) -> wb::Reason {
    match r {
        DisruptionReason::Underutilized => wb::Reason::Underutilized,
        DisruptionReason::Empty => wb::Reason::Empty,
        DisruptionReason::Drifted => wb::Reason::Drifted,
    }
}

/// The WIT input of a budget question; windows are evaluated here, with the core's rules.
pub fn budget_input(ctx: &BudgetContext<'_>, pool: (String, Vec<wb::Label>, String)) -> wb::BudgetInput {
    wb::BudgetInput {
        nodepool: wb::Nodepool { name: pool.0, labels: pool.1, config: pool.2 },
        reason: reason(ctx.reason),
        now: ctx.now,
        total_nodes: ctx.total_nodes as u32,
        disrupting: ctx.disrupting as u32,
        budgets: ctx
            .budgets
            .iter()
            .map(|b| {
                let active = is_active(b, ctx.now);
                let (schedule, duration) = match &b.window {
                    Some(Ok((_, d))) => (None, Some(*d)),
                    _ => (None, None),
                };
                wb::Budget {
                    nodes: match b.nodes {
                        BudgetNodes::Count(n) => wb::BudgetNodes::Count(n),
                        BudgetNodes::Percent(p) => wb::BudgetNodes::Percent(p),
                        BudgetNodes::Invalid => wb::BudgetNodes::Invalid,
                    },
                    reasons: b.reasons.as_ref().map(|rs| rs.iter().map(|r| reason(*r)).collect()),
                    schedule,
                    duration_seconds: duration,
                    active: *active.as_ref().unwrap_or(&false),
                    valid: active.is_ok(),
                }
            })
            .collect(),
    }
}

/// A budget policy as the core's [`BudgetRule`].
pub struct WasmBudgetRule(pub Bound);

impl BudgetRule for WasmBudgetRule {
    /// The policy's answer; the decision core then takes the smaller of it and the
    /// NodePool's own budgets (a policy can only tighten them).
    fn allowed(&self, ctx: &BudgetContext<'_>) -> Allowance {
        let wit = budget_input(ctx, self.0.wit_nodepool(|key, value| wb::Label { key, value }));
        let out = self.0.run(ctx.now, || self.0.policy.allowed(&wit, ctx.now));
        let to_core = |a: wb::Allowance| Allowance {
            allowed: if a.allowed == u32::MAX { usize::MAX } else { a.allowed as usize },
            why: a.reason,
        };
        match (out, self.0.mode) {
            (Ok(a), Mode::Enforce) => to_core(a),
            (Ok(a), Mode::Shadow) => {
                let default = KarpenterBudgets.allowed(ctx);
                if to_core(a).allowed.min(default.allowed) != default.allowed {
                    self.0.metrics.disagreed(&self.0.policy.name, "budget");
                }
                default
            }
            (Err(_), Mode::Shadow) => KarpenterBudgets.allowed(ctx),
            // Fail closed.
            (Err(f), Mode::Enforce) => Allowance {
                allowed: 0,
                why: format!("disruption-budget policy {} failed ({f}): no disruption allowed", self.0.policy.name),
            },
        }
    }

    fn name(&self) -> &str {
        &self.0.policy.name
    }
}
