//! The policies of a whole cluster: each NodePool's scoring, consolidation and budget
//! policies, resolved from its `tenon.dev/*` annotations (or an override for every NodePool,
//! as `tenon simulate --compare` uses), behind the core's `Scorer` and `PolicySet`.

use crate::adapters::{Bound, Mode, NodePoolContext, WasmBudgetRule, WasmConsolidator, WasmScorer};
use crate::error::{Failure, PolicyError};
use crate::metrics::Metrics;
use crate::policy::World;
use crate::store::PolicyStore;
use std::collections::BTreeMap;
use std::sync::Arc;
use tenon_api::policy::{NodePoolPolicies, PolicyMode, PolicyRef};
use tenon_core::disruption::PolicySet;
use tenon_core::disruption::budgets::{BudgetRule, KarpenterBudgets};
use tenon_core::disruption::consolidator::{ApproveAll, Consolidator};
use tenon_core::scorer::{PriceScorer, Scorer, ScoringInput};

#[derive(Default)]
struct PoolPolicies {
    scorer: Option<WasmScorer>,
    consolidator: Option<WasmConsolidator>,
    budget: Option<WasmBudgetRule>,
}

/// A NodePool as policies need it.
#[derive(Clone, Debug, Default)]
pub struct NodePoolInfo {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// Every NodePool's policies; NodePools without one get Karpenter's behaviour.
#[derive(Default)]
pub struct ClusterPolicies {
    pools: BTreeMap<String, PoolPolicies>,
    pub metrics: Arc<Metrics>,
}

impl ClusterPolicies {
    /// Resolves each NodePool's annotations, or `overrides` (policy references, any world)
    /// for every NodePool when given. Returns the problems per NodePool; a NodePool whose
    /// policies cannot be resolved keeps the defaults (never a half-applied set).
    pub fn resolve(
        store: &PolicyStore,
        pools: &[NodePoolInfo],
        overrides: Option<&[PolicyRef]>,
    ) -> (Self, Vec<(String, String)>) {
        Self::resolve_into(store, pools, overrides, Arc::new(Metrics::default()))
    }

    /// As [`ClusterPolicies::resolve`], counting into `metrics` (a controller keeps one set
    /// of counters across reloads).
    pub fn resolve_into(
        store: &PolicyStore,
        pools: &[NodePoolInfo],
        overrides: Option<&[PolicyRef]>,
        metrics: Arc<Metrics>,
    ) -> (Self, Vec<(String, String)>) {
        let mut out = ClusterPolicies { pools: BTreeMap::new(), metrics: metrics.clone() };
        let mut problems = Vec::new();
        for pool in pools {
            let (parsed, annotation_problems) = NodePoolPolicies::from_annotations(&pool.annotations);
            if let Some(p) = annotation_problems.iter().find(|p| !p.warning) {
                problems.push((pool.name.clone(), format!("{}: {}", p.key, p.message)));
                continue;
            }
            let refs: Vec<PolicyRef> = match overrides {
                Some(o) => o.to_vec(),
                None => [parsed.scoring.clone(), parsed.consolidation.clone(), parsed.disruption.clone()]
                    .into_iter()
                    .flatten()
                    .collect(),
            };
            let ctx = NodePoolContext {
                name: pool.name.clone(),
                labels: pool.labels.clone(),
                config: parsed.config.clone().unwrap_or_else(|| "{}".into()),
            };
            let mode = if parsed.mode == PolicyMode::Shadow { Mode::Shadow } else { Mode::Enforce };
            match build(store, &refs, &ctx, mode, &metrics) {
                Ok(p) => {
                    out.pools.insert(pool.name.clone(), p);
                }
                Err(e) => problems.push((pool.name.clone(), e.to_string())),
            }
        }
        (out, problems)
    }

    /// The policies of `pool` whose last call failed: (policy name, failure).
    pub fn failures(&self, pool: &str) -> Vec<(String, Failure)> {
        let Some(p) = self.pools.get(pool) else { return Vec::new() };
        let bound =
            [p.scorer.as_ref().map(|s| &s.0), p.consolidator.as_ref().map(|c| &c.0), p.budget.as_ref().map(|b| &b.0)];
        bound.into_iter().flatten().filter_map(|b| Some((b.policy.name.clone(), b.last_failure()?))).collect()
    }
}

fn build(
    store: &PolicyStore,
    refs: &[PolicyRef],
    ctx: &NodePoolContext,
    mode: Mode,
    metrics: &Arc<Metrics>,
) -> Result<PoolPolicies, PolicyError> {
    let mut p = PoolPolicies::default();
    for r in refs {
        let policy = store.resolve(r)?;
        let bound = Bound::new(policy.clone(), ctx.clone(), mode, metrics.clone());
        match policy.world {
            World::Scorer => p.scorer = Some(WasmScorer(bound)),
            World::Consolidator => p.consolidator = Some(WasmConsolidator(bound)),
            World::DisruptionBudget => p.budget = Some(WasmBudgetRule(bound)),
        }
    }
    Ok(p)
}

impl Scorer for ClusterPolicies {
    fn rank(&self, input: &ScoringInput<'_>) -> Vec<usize> {
        match self.pools.get(input.nodepool).and_then(|p| p.scorer.as_ref()) {
            Some(s) => s.rank(input),
            None => PriceScorer.rank(input),
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
        match self.pools.get(nodepool).and_then(|p| p.consolidator.as_ref()) {
            Some(c) => c,
            None => &ApproveAll,
        }
    }

    fn budget_rule(&self, nodepool: &str) -> &dyn BudgetRule {
        match self.pools.get(nodepool).and_then(|p| p.budget.as_ref()) {
            Some(b) => b,
            None => &KarpenterBudgets,
        }
    }
}
