//! Per-NodePool policies: each NodePool's `tenon.dev/*` annotations resolved through the
//! policy store, reloaded when annotations change. A NodePool whose policy cannot be loaded
//! or last failed is reported (`PolicyHealthy=False` + Event) and decided with the fallbacks
//! (price order, no consolidation plans, no disruptions), the same in both cases; other
//! NodePools are unaffected.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tenon_api::NodePool;
use tenon_policy::cache::PrecompileCache;
use tenon_policy::cluster::{ClusterPolicies, NodePoolInfo};
use tenon_policy::metrics::Metrics;
use tenon_policy::{Limits, PolicyEngine, PolicyStore};

/// A NodePool as its policies see it: name, template labels, `tenon.dev/*` annotations.
type PolicyInput = (String, BTreeMap<String, String>, BTreeMap<String, String>);

pub struct Policies {
    store: Option<PolicyStore>,
    /// Shared with the decisions, which run off the control loop's thread.
    pub active: Arc<ClusterPolicies>,
    /// The NodePool inputs `active` was resolved from.
    resolved_from: Vec<PolicyInput>,
    /// NodePool → why its policies could not be loaded.
    problems: BTreeMap<String, String>,
    pub metrics: Arc<Metrics>,
}

impl Policies {
    /// Without a directory, NodePools naming a policy are reported and fail safe, never
    /// silently ignored.
    pub fn new(dir: Option<&Path>, deadline_ms: u64) -> anyhow::Result<Policies> {
        let store = match dir {
            Some(d) => {
                let limits = Limits { deadline_ms, ..Limits::default() };
                let engine = PolicyEngine::new(limits, PrecompileCache::default_dir())?;
                if let Some(why) = engine.cache_refused() {
                    tracing::warn!(%why, "policy precompile cache not used; policies are compiled at every start");
                }
                Some(PolicyStore::new(d, engine))
            }
            None => None,
        };
        Ok(Policies {
            store,
            active: Arc::default(),
            resolved_from: Vec::new(),
            problems: BTreeMap::new(),
            metrics: Arc::new(Metrics::default()),
        })
    }

    /// Re-resolves when any NodePool's name, template labels or annotations changed.
    pub fn refresh(&mut self, pools: &[Arc<NodePool>]) {
        let mut inputs: Vec<PolicyInput> = pools
            .iter()
            .filter(|np| np.metadata.deletion_timestamp.is_none())
            .map(|np| {
                let annotations: BTreeMap<String, String> = np
                    .metadata
                    .annotations
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|(k, _)| k.starts_with("tenon.dev/"))
                    .collect();
                (np.metadata.name.clone().unwrap_or_default(), np.spec.template.metadata.labels.clone(), annotations)
            })
            .collect();
        inputs.sort();
        if inputs == self.resolved_from {
            return;
        }
        let infos: Vec<NodePoolInfo> = inputs
            .iter()
            .map(|(name, labels, annotations)| NodePoolInfo {
                name: name.clone(),
                labels: labels.clone(),
                annotations: annotations.clone(),
            })
            .collect();
        self.problems.clear();
        let (active, problems) = ClusterPolicies::resolve_into(self.store.as_ref(), &infos, None, self.metrics.clone());
        // Load problems are reported below and by the NodePool's condition.
        let _ = tenon_core::disruption::PolicySet::take_failures(&active);
        self.active = Arc::new(active);
        for (pool, problem) in problems {
            let all = self.problems.entry(pool).or_default();
            if !all.is_empty() {
                all.push_str("; ");
            }
            all.push_str(&problem);
        }
        for (pool, problem) in &self.problems {
            tracing::warn!(nodepool = %pool, %problem, "NodePool policy unavailable; its fail-safe applies");
        }
        tracing::info!(nodepools = inputs.len(), problems = self.problems.len(), "NodePool policies resolved");
        self.resolved_from = inputs;
    }

    /// Why `pool`'s policies are unhealthy: a load problem, or its policies' last failures.
    pub fn unhealthy(&self, pool: &str) -> Option<(&'static str, String)> {
        if let Some(p) = self.problems.get(pool) {
            return Some(("PolicyUnavailable", p.clone()));
        }
        let failing = self.active.health(pool);
        (!failing.is_empty()).then(|| ("PolicyFailed", failing.join("; ")))
    }

    /// Logs the policy failures since the last pass.
    pub fn log_failures(&self) {
        use tenon_core::disruption::PolicySet;
        for f in self.active.take_failures() {
            tracing::warn!(nodepool = %f.nodepool, policy = %f.policy, hook = %f.hook, kind = %f.kind, message = %f.message, fallback = %f.fallback, "policy failed");
        }
    }
}
