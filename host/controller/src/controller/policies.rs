//! Per-NodePool policies: each NodePool's `tenon.dev/*` annotations resolved through the
//! policy store, reloaded when annotations change. A NodePool whose policies cannot be loaded
//! or whose policy last failed is reported (`PolicyHealthy=False` + Event) and decided with the
//! design.md §5 fallbacks; other NodePools are unaffected.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use tenon_api::NodePool;
use tenon_policy::cluster::{ClusterPolicies, NodePoolInfo};
use tenon_policy::metrics::Metrics;
use tenon_policy::{Limits, PolicyEngine, PolicyStore};

/// A NodePool as its policies see it: name, template labels, `tenon.dev/*` annotations.
type PolicyInput = (String, BTreeMap<String, String>, BTreeMap<String, String>);

pub struct Policies {
    store: Option<PolicyStore>,
    pub active: ClusterPolicies,
    /// The NodePool inputs `active` was resolved from.
    resolved_from: Vec<PolicyInput>,
    /// NodePool → why its policies could not be loaded.
    problems: BTreeMap<String, String>,
    pub metrics: Arc<Metrics>,
}

impl Policies {
    /// Without a directory, NodePools naming a policy are reported, never silently ignored.
    pub fn new(dir: Option<&Path>) -> anyhow::Result<Policies> {
        let store = match dir {
            Some(d) => {
                let cache = std::env::temp_dir().join("tenon-policy-cache");
                Some(PolicyStore::new(d, PolicyEngine::new(Limits::default(), Some(cache))?))
            }
            None => None,
        };
        Ok(Policies {
            store,
            active: ClusterPolicies::default(),
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
        match &self.store {
            Some(store) => {
                let (active, problems) = ClusterPolicies::resolve_into(store, &infos, None, self.metrics.clone());
                self.active = active;
                self.problems = problems.into_iter().collect();
            }
            None => {
                self.active = ClusterPolicies::default();
                for info in infos.iter().filter(|i| !i.annotations.is_empty()) {
                    self.problems.insert(
                        info.name.clone(),
                        "names a policy but the controller has no policy store (set TENON_POLICY_DIR / --policy-dir; the Helm chart mounts the default bundle there)".into(),
                    );
                }
            }
        }
        for (pool, problem) in &self.problems {
            tracing::warn!(nodepool = %pool, %problem, "NodePool policies not loaded; Karpenter's defaults apply");
        }
        tracing::info!(nodepools = inputs.len(), problems = self.problems.len(), "NodePool policies resolved");
        self.resolved_from = inputs;
    }

    /// Why `pool`'s policies are unhealthy: a load problem, or its policies' last failures.
    pub fn unhealthy(&self, pool: &str) -> Option<(&'static str, String)> {
        if let Some(p) = self.problems.get(pool) {
            return Some(("PolicyUnavailable", p.clone()));
        }
        let failures = self.active.failures(pool);
        if failures.is_empty() {
            return None;
        }
        let text: Vec<String> = failures.iter().map(|(name, f)| format!("policy {name}: {f}")).collect();
        Some(("PolicyFailed", format!("{}; the built-in fallback decided instead", text.join("; "))))
    }
}
