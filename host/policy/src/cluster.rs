//! The policies of a whole cluster: each NodePool's scoring, consolidation and budget
//! policies, resolved from its `tenon.dev/*` annotations (or an override for every NodePool,
//! as `tenon simulate --compare` uses), behind the core's `Scorer` and `PolicySet`.
//!
//! Each hook stands on its own: a policy named for a hook runs there only if it implements
//! that hook's world; one that cannot be used (missing, digest mismatch, another world, a
//! bad annotation) gets the same fail-safe as one failing at run time — price order, no
//! plans, zero disruptions — and is reported. Shadow mode keeps the defaults in every case.

use crate::adapters::{Bound, FailureLog, Hook, Mode, NodePoolContext, WasmBudgetRule, WasmConsolidator, WasmScorer};
use crate::error::FailureKind;
use crate::metrics::Metrics;
use crate::policy::LoadedPolicy;
use crate::store::PolicyStore;
use std::collections::BTreeMap;
use std::sync::Arc;
use tenon_api::policy::{NodePoolPolicies, PolicyMode, PolicyRef};
use tenon_api::wellknown::{ANNOTATION_POLICY_CONFIG, ANNOTATION_POLICY_MODE};
use tenon_core::disruption::PolicySet;
use tenon_core::disruption::budgets::{Allowance, BudgetContext, BudgetRule, KarpenterBudgets};
use tenon_core::disruption::consolidator::{ApproveAll, Consolidator, PlanView, Review, Verdict};
use tenon_core::policy_failure::PolicyFailure;
use tenon_core::scorer::{PriceScorer, Scorer, ScoringInput};

/// The fail-safe of a hook whose policy cannot be used: every plan rejected, zero disruptions.
pub struct FailSafe {
    policy: String,
    why: String,
}

impl Consolidator for FailSafe {
    fn review(&self, plans: &[PlanView]) -> Review {
        let reason = format!("consolidation policy {} is unavailable ({}); skipping the plan", self.policy, self.why);
        Review { order: vec![], verdicts: vec![Verdict::Reject(reason); plans.len()] }
    }
    fn name(&self) -> &str {
        &self.policy
    }
}

impl BudgetRule for FailSafe {
    fn allowed(&self, _: &BudgetContext<'_>) -> Allowance {
        let why =
            format!("disruption-budget policy {} is unavailable ({}): no disruption allowed", self.policy, self.why);
        Allowance { allowed: 0, why }
    }
    fn name(&self) -> &str {
        &self.policy
    }
}

#[derive(Default)]
enum Slot<T> {
    /// Karpenter's behaviour.
    #[default]
    Default,
    Active(T),
    Unavailable(FailSafe),
}

#[derive(Default)]
struct PoolPolicies {
    scorer: Slot<WasmScorer>,
    consolidator: Slot<WasmConsolidator>,
    budget: Slot<WasmBudgetRule>,
}

/// A NodePool as policies need it.
#[derive(Clone, Debug, Default)]
pub struct NodePoolInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// A previous set, and which of its NodePools to keep as they are.
type Reuse<'a> = (&'a ClusterPolicies, &'a dyn Fn(&str) -> bool);

/// Every NodePool's policies; NodePools without one get Karpenter's behaviour.
#[derive(Default)]
pub struct ClusterPolicies {
    /// Shared with the set a re-resolution builds, for the NodePools it keeps.
    pools: BTreeMap<String, Arc<PoolPolicies>>,
    pub metrics: Arc<Metrics>,
    log: Arc<FailureLog>,
}

/// The annotation that names the policy of `hook`.
pub fn annotation(hook: Hook) -> &'static str {
    hook.annotated().policy_annotation()
}

/// Why `policy` cannot serve `hook`: it implements another world.
/// Why `policy` refuses the configuration it would be given (`from`: the annotation it comes
/// from, `None` when there is none), asked through its `validate-config` (contract 0.2.0).
pub fn refused_config(policy: &LoadedPolicy, config: &str, from: Option<&str>) -> Option<String> {
    let e = policy.validate_config(config, 0).err()?;
    let source = from.unwrap_or("no configuration annotation");
    Some(match e.kind {
        FailureKind::PolicyError => {
            format!("{source}: policy {} refuses its configuration: {}", policy.name, e.message)
        }
        _ => format!("{source}: policy {}'s validate-config failed ({}): {}", policy.name, e.kind.as_str(), e.message),
    })
}

pub fn wrong_world(hook: Hook, policy: &LoadedPolicy) -> Option<String> {
    let found = Hook::of(policy.world);
    (found != hook).then(|| {
        format!(
            "{} names {}, which implements {}, not {}: name it in {} instead",
            annotation(hook),
            policy.name,
            policy.world.as_str(),
            hook.world().as_str(),
            annotation(found)
        )
    })
}

impl ClusterPolicies {
    /// Resolves each NodePool's annotations, or `overrides` (policy references, any world,
    /// each placed by the world it implements) for every NodePool when given. Returns the
    /// problems per NodePool; a hook with a problem fails safe (see the module docs).
    pub fn resolve(
        store: &PolicyStore,
        pools: &[NodePoolInfo],
        overrides: Option<&[PolicyRef]>,
    ) -> (Self, Vec<(String, String)>) {
        Self::resolve_into(Some(store), pools, overrides, Arc::new(Metrics::default()))
    }

    /// No NodePools yet, counting into `metrics`.
    pub fn empty(metrics: Arc<Metrics>) -> Self {
        ClusterPolicies { pools: BTreeMap::new(), metrics, log: Arc::default() }
    }

    /// As [`ClusterPolicies::resolve`], counting into `metrics` (a controller keeps one set
    /// of counters across reloads). Without a store every named policy is unavailable.
    pub fn resolve_into(
        store: Option<&PolicyStore>,
        pools: &[NodePoolInfo],
        overrides: Option<&[PolicyRef]>,
        metrics: Arc<Metrics>,
    ) -> (Self, Vec<(String, String)>) {
        Self::build(store, pools, overrides, Self::empty(metrics), None)
    }

    /// Resolves `pools` again, keeping this set's policies, with their call records, for the
    /// NodePools `keep` names: a NodePool whose annotations and policy files did not change
    /// keeps its breaker and last failure. Problems are returned for the others only.
    pub fn re_resolve(
        &self,
        store: Option<&PolicyStore>,
        pools: &[NodePoolInfo],
        keep: &dyn Fn(&str) -> bool,
    ) -> (Self, Vec<(String, String)>) {
        let out = ClusterPolicies { pools: BTreeMap::new(), metrics: self.metrics.clone(), log: self.log.clone() };
        Self::build(store, pools, None, out, Some((self, keep)))
    }

    fn build(
        store: Option<&PolicyStore>,
        pools: &[NodePoolInfo],
        overrides: Option<&[PolicyRef]>,
        mut out: ClusterPolicies,
        previous: Option<Reuse<'_>>,
    ) -> (Self, Vec<(String, String)>) {
        let load = |r: &PolicyRef| -> Result<Arc<LoadedPolicy>, String> {
            let store = store.ok_or(
                "there is no policy store (set TENON_POLICY_DIR or --policy-dir; the Helm chart mounts the default bundle there)",
            )?;
            store.resolve(r).map_err(|e| e.to_string())
        };
        let mut problems = Vec::new();
        for pool in pools {
            if let Some((before, keep)) = previous
                && keep(&pool.name)
                && let Some(p) = before.pools.get(&pool.name)
            {
                out.pools.insert(pool.name.clone(), p.clone());
                continue;
            }
            let (parsed, annotation_problems) = NodePoolPolicies::from_annotations(&pool.annotations);
            let errors: Vec<_> = annotation_problems.iter().filter(|p| !p.warning).collect();
            let ctx = |hook: Hook| NodePoolContext {
                name: pool.name.clone(),
                labels: pool.labels.clone(),
                config: parsed.config_for(hook.annotated()).0.to_string(),
            };
            let mode = if parsed.mode == PolicyMode::Shadow { Mode::Shadow } else { Mode::Enforce };
            let mut p = PoolPolicies::default();
            let mut unusable = |hook: Hook, policy: String, why: String| {
                problems.push((pool.name.clone(), format!("{why}; {} decides", hook.fallback(mode))));
                out.log.push(PolicyFailure {
                    at: 0,
                    nodepool: pool.name.clone(),
                    policy: policy.clone(),
                    hook: hook.as_str().into(),
                    kind: FailureKind::LoadError.as_str().into(),
                    message: why.clone(),
                    fallback: hook.fallback(mode).into(),
                });
                FailSafe { policy, why }
            };
            if let Some(refs) = overrides {
                for r in refs {
                    match load(r) {
                        Ok(policy) => {
                            let hook = Hook::of(policy.world);
                            p.set(hook, out.bind(policy, &ctx(hook), mode));
                        }
                        Err(e) => problems.push((pool.name.clone(), e)),
                    }
                }
                out.pools.insert(pool.name.clone(), Arc::new(p));
                continue;
            }
            // A bad mode spoils every policy of the NodePool; a bad configuration, the policies
            // that would get it: a hook's own, or the shared one where a hook has none.
            let mode_error = errors.iter().find(|e| e.key == ANNOTATION_POLICY_MODE);
            let shared_error = errors.iter().find(|e| e.key == ANNOTATION_POLICY_CONFIG);
            for (hook, named) in [
                (Hook::Scoring, &parsed.scoring),
                (Hook::Consolidation, &parsed.consolidation),
                (Hook::Budget, &parsed.disruption),
            ] {
                let key = annotation(hook);
                let Some(written) = pool.annotations.get(key) else { continue };
                let own = errors.iter().find(|e| e.key == key);
                let own_config = hook.annotated().config_annotation();
                let config_error = match errors.iter().find(|e| e.key == own_config) {
                    Some(e) => Some(e),
                    None if !pool.annotations.contains_key(own_config) => shared_error,
                    None => None,
                };
                let used = match (own.or(mode_error).or(config_error), named) {
                    (Some(e), _) => Err(format!("{}: {} ({})", e.key, e.message, e.hint)),
                    (None, None) => Err(format!("{key}: cannot read {written:?}")),
                    (None, Some(r)) => load(r)
                        .map_err(|e| format!("{key}: {e}"))
                        .and_then(|policy| wrong_world(hook, &policy).map_or(Ok(policy), Err))
                        .and_then(|policy| {
                            let (config, from) = parsed.config_for(hook.annotated());
                            refused_config(&policy, config, from).map_or(Ok(policy), Err)
                        }),
                };
                match used {
                    Ok(policy) => p.set(hook, out.bind(policy, &ctx(hook), mode)),
                    Err(why) => {
                        let name = named.as_ref().map_or_else(|| written.clone(), |r| r.name.clone());
                        let safe = unusable(hook, name, why);
                        if mode == Mode::Enforce {
                            p.fail_safe(hook, safe);
                        }
                    }
                }
            }
            out.pools.insert(pool.name.clone(), Arc::new(p));
        }
        (out, problems)
    }

    /// This set with `pools` failing safe on every hook they name a policy for, as while
    /// their policies are being loaded off the control loop: price order, no consolidation
    /// plans, no disruptions; the other NodePools keep theirs, call records and all.
    pub fn pending(&self, pools: &[NodePoolInfo], why: &str) -> Self {
        let mut out =
            ClusterPolicies { pools: self.pools.clone(), metrics: self.metrics.clone(), log: self.log.clone() };
        for pool in pools {
            let mut p = PoolPolicies::default();
            for hook in [Hook::Scoring, Hook::Consolidation, Hook::Budget] {
                if let Some(named) = pool.annotations.get(annotation(hook)) {
                    p.fail_safe(hook, FailSafe { policy: named.clone(), why: why.to_string() });
                }
            }
            out.pools.insert(pool.name.clone(), Arc::new(p));
        }
        out
    }

    fn bind(&self, policy: Arc<LoadedPolicy>, ctx: &NodePoolContext, mode: Mode) -> Bound {
        Bound::new(policy, ctx.clone(), mode, self.metrics.clone()).with_log(self.log.clone())
    }

    /// The sha256 of every component a NodePool uses.
    pub fn digests(&self) -> std::collections::BTreeSet<String> {
        self.pools.values().flat_map(|p| p.bound()).map(|b| b.policy.sha256.clone()).collect()
    }

    /// Why `pool`'s policies are unhealthy: one line per policy whose last call failed.
    pub fn health(&self, pool: &str) -> Vec<String> {
        let Some(p) = self.pools.get(pool) else { return Vec::new() };
        p.bound().filter_map(Bound::health).collect()
    }
}

impl PoolPolicies {
    /// The policies that decide for the NodePool (not defaults or fail-safes).
    fn bound(&self) -> impl Iterator<Item = &Bound> {
        let scorer = match &self.scorer {
            Slot::Active(s) => Some(&s.0),
            _ => None,
        };
        let consolidator = match &self.consolidator {
            Slot::Active(c) => Some(&c.0),
            _ => None,
        };
        let budget = match &self.budget {
            Slot::Active(b) => Some(&b.0),
            _ => None,
        };
        [scorer, consolidator, budget].into_iter().flatten()
    }

    fn set(&mut self, hook: Hook, bound: Bound) {
        match hook {
            Hook::Scoring => self.scorer = Slot::Active(WasmScorer::new(bound)),
            Hook::Consolidation => self.consolidator = Slot::Active(WasmConsolidator(bound)),
            Hook::Budget => self.budget = Slot::Active(WasmBudgetRule(bound)),
        }
    }

    fn fail_safe(&mut self, hook: Hook, safe: FailSafe) {
        match hook {
            // Price order is also the default.
            Hook::Scoring => self.scorer = Slot::Default,
            Hook::Consolidation => self.consolidator = Slot::Unavailable(safe),
            Hook::Budget => self.budget = Slot::Unavailable(safe),
        }
    }
}

impl Scorer for ClusterPolicies {
    fn rank(&self, input: &ScoringInput<'_>) -> Vec<usize> {
        match self.pools.get(input.nodepool).map(|p| &p.scorer) {
            Some(Slot::Active(s)) => s.rank(input),
            _ => PriceScorer.rank(input),
        }
    }

    fn name(&self) -> &str {
        "per-nodepool"
    }
}

impl PolicySet for ClusterPolicies {
    fn scorer(&self) -> &dyn Scorer {
        self
    }

    fn consolidator(&self, nodepool: &str) -> &dyn Consolidator {
        match self.pools.get(nodepool).map(|p| &p.consolidator) {
            Some(Slot::Active(c)) => c,
            Some(Slot::Unavailable(f)) => f,
            _ => &ApproveAll,
        }
    }

    fn budget_rule(&self, nodepool: &str) -> &dyn BudgetRule {
        match self.pools.get(nodepool).map(|p| &p.budget) {
            Some(Slot::Active(b)) => b,
            Some(Slot::Unavailable(f)) => f,
            _ => &KarpenterBudgets,
        }
    }

    fn take_failures(&self) -> Vec<PolicyFailure> {
        self.log.take()
    }
}
