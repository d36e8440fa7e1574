//! Karpenter's "invalidated commands" metric cases: a command decided by the disruption
//! reconciler, the cluster changed before it is validated (its budget closed, a pod bound to
//! a candidate, a candidate nominated for a pending pod), and
//! `karpenter_voluntary_disruption_failed_validations_total` read back.

use super::World;
use crate::controller::disruption::Disruption;
use crate::controller::metrics::catalog::VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS;
use crate::controller::runner::Reconciler;
use kube::Api;
use kube::api::{Patch, PatchParams};
use std::time::Duration;
use tenon_api::NodePool;

/// What changes between a command's decision and its validation.
#[derive(Clone, Copy, Debug)]
enum Change {
    /// The NodePool's budget goes to 0%.
    BudgetClosed,
    /// A pod is bound to the first candidate (and, for consolidation, a pending pod nominates
    /// it, as Karpenter's case does).
    Churn,
    /// A pending pod nominates a candidate.
    Nominated,
}

impl World {
    /// Decides a command, applies `change`, validates; the failed validations counted for
    /// `consolidation_type`.
    async fn invalidated(&self, change: Change, consolidation_type: &str) -> Option<f64> {
        let mut disruption = Disruption::new(self.ctx.clone());
        disruption.reconcile().await.unwrap();
        assert!(self.claims_deleting().await.iter().all(|(_, deleting)| !deleting), "decided, not carried out");
        match change {
            Change::BudgetClosed => {
                let patch = serde_json::json!({"spec": {"disruption": {"budgets": [{"nodes": "0%"}]}}});
                let pools: Api<NodePool> = Api::all(self.client.clone());
                let written = pools.patch("default", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
                self.until("the closed budget in the cache", |c| {
                    c.stores
                        .nodepools
                        .state()
                        .iter()
                        .any(|p| p.metadata.resource_version == written.metadata.resource_version)
                })
                .await;
            }
            Change::Churn => {
                self.started(super::nodes::web_pod("churn", "node-0", 100)).await;
                if consolidation_type != "empty" {
                    self.pending_pod("nominating", 3000).await;
                }
            }
            Change::Nominated => self.pending_pod("nominating", 3000).await,
        }
        self.ctx.advance(Duration::from_secs(16));
        disruption.reconcile().await.unwrap();
        // Dropped, not carried out (Karpenter's case: no command left in the queue).
        self.nothing_disrupted().await;
        self.ctx.metrics.value(VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS, &[("consolidation_type", consolidation_type)])
    }
}

/// One empty node under WhenEmpty: an emptiness command.
async fn empty_node() -> World {
    let w = World::new().await;
    w.pool_with(super::consolidation_tests::when_empty("100%")).await;
    w.running("node-0", "fake-it-3", "on-demand", &[]).await;
    w
}

/// Two of the dearest nodes with a small pod each: a multi-node command.
async fn two_underused_nodes() -> World {
    let w = World::new().await;
    w.pool_with(super::consolidation_tests::UNDERUTILIZED_ANY_NUMBER.clone()).await;
    w.running("node-0", "fake-it-3", "on-demand", &[("web-0", 100)]).await;
    w.running("node-1", "fake-it-3", "on-demand", &[("web-1", 100)]).await;
    w
}

/// One of the dearest nodes with a small pod: a single-node command.
async fn one_underused_node() -> World {
    let w = World::new().await;
    w.pool_with(super::consolidation_tests::UNDERUTILIZED_ANY_NUMBER.clone()).await;
    w.running("node-0", "fake-it-3", "on-demand", &[("web-0", 100)]).await;
    w
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:230
/// karpenter:pkg/controllers/disruption/consolidation_test.go:231
/// karpenter:pkg/controllers/disruption/consolidation_test.go:232
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalidated_emptiness_command_counts_its_candidate() {
    for change in [Change::BudgetClosed, Change::Churn, Change::Nominated] {
        let w = empty_node().await;
        assert_eq!(w.invalidated(change, "empty").await, Some(1.0), "{change:?}");
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:288
/// karpenter:pkg/controllers/disruption/consolidation_test.go:289
/// karpenter:pkg/controllers/disruption/consolidation_test.go:290
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalidated_multi_node_command_counts_its_candidates() {
    for change in [Change::BudgetClosed, Change::Churn, Change::Nominated] {
        let w = two_underused_nodes().await;
        assert_eq!(w.invalidated(change, "multi").await, Some(2.0), "{change:?}");
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:331
/// karpenter:pkg/controllers/disruption/consolidation_test.go:332
/// karpenter:pkg/controllers/disruption/consolidation_test.go:333
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalidated_single_node_command_counts_its_candidate() {
    for change in [Change::BudgetClosed, Change::Churn, Change::Nominated] {
        let w = one_underused_node().await;
        assert_eq!(w.invalidated(change, "single").await, Some(1.0), "{change:?}");
    }
}
