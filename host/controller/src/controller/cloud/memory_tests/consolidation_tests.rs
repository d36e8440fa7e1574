//! Karpenter's consolidation and emptiness cases with several nodes, through the lifecycle
//! and disruption reconcilers: NodeClaims launched in the in-memory cloud, their Nodes
//! registered as a kubelet would, pods bound; then the NodeClaims kept, created and deleted
//! read back from the API. The orchestration clock is moved on past validation waits.

use super::World;
use crate::controller::disruption::Disruption;
use crate::controller::metrics::catalog::NODEPOOLS_ALLOWED_DISRUPTIONS;
use crate::controller::runner::Reconciler;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use tenon_api::NodeClaim;

/// Karpenter's consolidation suite's NodePool: consolidation at once, any number of nodes.
pub(super) static UNDERUTILIZED_ANY_NUMBER: std::sync::LazyLock<serde_json::Value> =
    std::sync::LazyLock::new(|| consolidating("WhenEmptyOrUnderutilized", "100%"));

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3570
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_empty_node_is_deleted_only_after_the_validation_wait() {
    let w = World::new().await;
    w.pool_with(UNDERUTILIZED_ANY_NUMBER.clone()).await;
    // Two of the cheapest nodes: the second's one pod fits beside the first's two.
    w.running("node-0", "fake-it-0", "on-demand", &[("web-1", 100), ("web-2", 100)]).await;
    w.running("node-1", "fake-it-0", "on-demand", &[("web-3", 100)]).await;
    let mut disruption = Disruption::new(w.ctx.clone());
    disruption.reconcile().await.unwrap();
    // Decided, and waiting to validate: nothing is deleted yet.
    assert_eq!(w.claims_deleting().await, [("node-0".into(), false), ("node-1".into(), false)]);
    w.disruption_until(&mut disruption, "node-1's NodeClaim deleted", || async {
        w.claims_deleting().await.contains(&("node-1".into(), true))
    })
    .await;
    assert_eq!(
        w.claims_deleting().await,
        [("node-0".into(), false), ("node-1".into(), true)],
        "node-1 is deleted, without a replacement"
    );
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4235
/// karpenter:pkg/controllers/disruption/consolidation_test.go:4236
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_underused_nodes_are_replaced_by_one_after_the_validation_wait() {
    // Karpenter's table swaps its node lists: its "on-demand" entry runs spot nodes (with
    // spot-to-spot on), its "spot" entry on-demand ones. Both are run here.
    for (capacity_type, spot_to_spot) in [("on-demand", false), ("spot", true)] {
        let w = World::new_with(spot_to_spot).await;
        w.pool_with(UNDERUTILIZED_ANY_NUMBER.clone()).await;
        // Two of the dearest nodes, three small pods: one small node holds them all.
        w.running("node-0", "fake-it-3", capacity_type, &[("web-1", 100), ("web-2", 100)]).await;
        w.running("node-1", "fake-it-3", capacity_type, &[("web-3", 100)]).await;
        let mut disruption = Disruption::new(w.ctx.clone());
        disruption.reconcile().await.unwrap();
        let waiting = [("node-0".into(), false), ("node-1".into(), false)];
        assert_eq!(w.claims_deleting().await, waiting, "{capacity_type}: waiting to validate");
        w.disruption_until(&mut disruption, "a replacement", || async { w.claims_deleting().await.len() == 3 }).await;
        let replacement = w.replacement().await;
        w.replacement_up(&replacement).await;
        w.disruption_until(&mut disruption, "both candidates deleted", || async {
            w.claims_deleting().await.iter().filter(|(_, deleting)| *deleting).count() == 2
        })
        .await;
        let left: Vec<(String, bool)> =
            w.claims_deleting().await.into_iter().filter(|(_, deleting)| !deleting).collect();
        assert_eq!(left, [(replacement.clone(), false)], "{capacity_type}: one NodeClaim left, the replacement");
        let nc = Api::<NodeClaim>::all(w.client.clone()).get(&replacement).await.unwrap();
        let labels = nc.metadata.labels.unwrap_or_default();
        assert_eq!(labels["node.kubernetes.io/instance-type"], "fake-it-0", "{capacity_type}: a smaller node");
        if capacity_type == "spot" {
            assert_eq!(labels["karpenter.sh/capacity-type"], "spot", "spot replaced by spot");
        }
    }
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:111
/// karpenter:pkg/controllers/disruption/consolidation_test.go:388
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_percent_budget_lets_every_empty_node_go_at_once() {
    // Emptiness takes empty nodes under either policy (the emptiness and consolidation suites).
    for policy in ["WhenEmpty", "WhenEmptyOrUnderutilized"] {
        let (w, mut disruption, allowed) = ten_empty_nodes(policy, "100%").await;
        assert_eq!(allowed, Some(10.0), "{policy}: {}", w.ctx.metrics.render());
        w.disruption_until(&mut disruption, "every empty node deleted", || async {
            w.claims_deleting().await.iter().all(|(_, deleting)| *deleting)
        })
        .await;
        assert_eq!(w.claims_deleting().await.len(), 10, "{policy}: no replacement");
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4298
/// karpenter:pkg/controllers/disruption/consolidation_test.go:4299
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn several_empty_nodes_are_all_deleted_without_a_replacement() {
    for capacity_type in ["on-demand", "spot"] {
        let w = World::new().await;
        w.pool_with(UNDERUTILIZED_ANY_NUMBER.clone()).await;
        for name in ["node-0", "node-1", "node-2"] {
            w.running(name, "fake-it-3", capacity_type, &[]).await;
        }
        let mut disruption = Disruption::new(w.ctx.clone());
        w.disruption_until(&mut disruption, "every empty node deleted", || async {
            w.claims_deleting().await.iter().all(|(_, deleting)| *deleting)
        })
        .await;
        assert_eq!(w.claims_deleting().await.len(), 3, "{capacity_type}: no replacement");
    }
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:86
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_counts_eligible_for_emptiness_once_its_pod_is_gone() {
    use crate::controller::metrics::catalog::VOLUNTARY_DISRUPTION_ELIGIBLE_NODES;
    let w = World::new().await;
    w.pool_with(serde_json::json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"})).await;
    w.running("node-0", "fake-it-0", "on-demand", &[("web-1", 100)]).await;
    let eligible = || w.ctx.metrics.value(VOLUNTARY_DISRUPTION_ELIGIBLE_NODES, &[("reason", "empty")]);
    let mut disruption = Disruption::new(w.ctx.clone());
    disruption.reconcile().await.unwrap();
    assert_eq!(eligible(), Some(0.0), "a node with a pod is not empty");
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    let now = kube::api::DeleteParams { grace_period_seconds: Some(0), ..Default::default() };
    pods.delete("web-1", &now).await.unwrap();
    w.until("the pod gone from the cache", |c| c.stores.pods.state().is_empty()).await;
    // The pod's going is a pod event: Consolidatable is written again, then read.
    w.disruption_until(&mut disruption, "the empty node counted eligible", || async { eligible() == Some(1.0) }).await;
}

/// A NodePool consolidating at once under `policy`, `budget` of its nodes at a time.
fn consolidating(policy: &str, budget: &str) -> serde_json::Value {
    serde_json::json!({"consolidationPolicy": policy, "consolidateAfter": "0s", "budgets": [{"nodes": budget}]})
}

/// Karpenter's emptiness suite's NodePool: empty nodes at once, `budget` of them.
pub(super) fn when_empty(budget: &str) -> serde_json::Value {
    consolidating("WhenEmpty", budget)
}

/// Ten empty nodes of the cheapest type under `policy` and `budget`, after one disruption
/// round; that round's allowed-disruptions gauge for empty nodes.
async fn ten_empty_nodes(policy: &str, budget: &str) -> (World, Disruption, Option<f64>) {
    let w = World::new().await;
    w.pool_with(consolidating(policy, budget)).await;
    for i in 0..10 {
        w.running(&format!("node-{i}"), "fake-it-0", "on-demand", &[]).await;
    }
    let mut disruption = Disruption::new(w.ctx.clone());
    disruption.reconcile().await.unwrap();
    let allowed = w.ctx.metrics.value(NODEPOOLS_ALLOWED_DISRUPTIONS, &[("nodepool", "default"), ("reason", "Empty")]);
    (w, disruption, allowed)
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:369
/// karpenter:pkg/controllers/disruption/emptiness_test.go:720
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_node_is_deleted_after_the_validation_wait() {
    let w = World::new().await;
    w.pool_with(when_empty("100%")).await;
    w.running("node-0", "fake-it-0", "on-demand", &[]).await;
    let mut disruption = Disruption::new(w.ctx.clone());
    disruption.reconcile().await.unwrap();
    assert_eq!(w.claims_deleting().await, [("node-0".into(), false)], "decided, waiting to validate");
    w.disruption_until(&mut disruption, "the empty node deleted", || async {
        w.claims_deleting().await == [("node-0".to_string(), true)]
    })
    .await;
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:194
/// karpenter:pkg/controllers/disruption/consolidation_test.go:366
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_30_percent_budget_lets_three_of_ten_empty_nodes_go() {
    for policy in ["WhenEmpty", "WhenEmptyOrUnderutilized"] {
        let (w, mut disruption, allowed) = ten_empty_nodes(policy, "30%").await;
        assert_eq!(allowed, Some(3.0), "{policy}");
        let deleting = || async { w.claims_deleting().await.iter().filter(|(_, d)| *d).count() };
        w.disruption_until(&mut disruption, "three empty nodes deleted", || async { deleting().await >= 3 }).await;
        assert_eq!(deleting().await, 3, "{policy}: the budget allows three at once");
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:125
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodepool_with_consolidation_disabled_says_so_on_its_node() {
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "", "").await;
    w.pool_disruption(serde_json::json!({"consolidateAfter": "Never"})).await;
    w.disruption_says("Unconsolidatable", "NodePool \"default\" has consolidation disabled").await;
    w.not_disrupted().await;
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1058
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_underused_dear_node_is_replaced_by_a_cheaper_one() {
    let w = World::new().await;
    w.pool_with(UNDERUTILIZED_ANY_NUMBER.clone()).await;
    w.running("node-0", "fake-it-3", "on-demand", &[("web-0", 100)]).await;
    w.replaced_by_a_cheaper_one().await;
    // Counted under its command's reason, as Karpenter's queue creates replacements.
    let labels = [("reason", "underutilized"), ("nodepool", "default"), ("min_values_relaxed", "false")];
    let created = w.ctx.metrics.value(crate::controller::metrics::catalog::NODECLAIMS_CREATED, &labels);
    assert_eq!(created, Some(1.0));
}

impl World {
    /// Runs rounds until `node-0` (of the dearest type) is replaced: a replacement of a
    /// cheaper type created, brought up, and `node-0` deleted after it.
    pub(super) async fn replaced_by_a_cheaper_one(&self) {
        let mut disruption = Disruption::new(self.ctx.clone());
        let replacement = self.replaced_through(&mut disruption, 2, "node-0").await;
        let nc = Api::<NodeClaim>::all(self.client.clone()).get(&replacement).await.unwrap();
        let types: Vec<String> = nc
            .spec
            .requirements
            .iter()
            .filter(|r| r.key == "node.kubernetes.io/instance-type")
            .flat_map(|r| r.values.clone())
            .collect();
        assert!(!types.is_empty() && !types.contains(&"fake-it-3".to_string()), "not the dearest type: {types:?}");
        assert_eq!(self.claims_deleting().await, [(replacement, false), ("node-0".into(), true)]);
    }
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:153
/// karpenter:pkg/controllers/disruption/consolidation_test.go:411
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_0_percent_budget_lets_no_empty_node_go() {
    for policy in ["WhenEmpty", "WhenEmptyOrUnderutilized"] {
        let (w, mut disruption, allowed) = ten_empty_nodes(policy, "0%").await;
        assert_eq!(allowed, Some(0.0), "{policy}: exported, and 0");
        w.rounds(&mut disruption, 5).await;
        let claims = w.claims_deleting().await;
        assert!(claims.len() == 10 && claims.iter().all(|(_, deleting)| !deleting), "{policy}: {claims:?}");
    }
}
