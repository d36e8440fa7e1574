//! Karpenter's drift cases (and emptiness's drifted node) through the disruption
//! reconciler: drifted NodeClaims (launched from a NodePool template since changed)
//! deleted or kept, and the eligible-nodes gauge and decision counter read back.

use super::World;
use crate::controller::disruption::Disruption;
use crate::controller::metrics::catalog::{
    NODEPOOLS_ALLOWED_DISRUPTIONS, NODEPOOLS_NODES_CONSUMING_BUDGETS, VOLUNTARY_DISRUPTION_ELIGIBLE_NODES,
};
use crate::controller::runner::Reconciler;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tenon_api::NodeClaim;
use tenon_api::wellknown as wk;

impl World {
    /// NodeClaim `name` launched from an older NodePool template (a stale hash): drifted.
    pub(super) async fn drifted(&self, name: &str) {
        let stale = serde_json::json!({"metadata": {"annotations": {
            wk::ANNOTATION_NODEPOOL_HASH: "launched-from-an-older-template",
            wk::ANNOTATION_NODEPOOL_HASH_VERSION: tenon_api::hash::NODEPOOL_HASH_VERSION,
        }}});
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        let written = claims.patch(name, &PatchParams::default(), &Patch::Merge(&stale)).await.unwrap();
        self.until("the drifted NodeClaim in the cache", |c| {
            c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
        })
        .await;
    }

    /// Pod `name` (namespace default) merged with `metadata` (JSON), once cached.
    pub(super) async fn pod_meta(&self, pod: &str, metadata: serde_json::Value) {
        let patch = serde_json::json!({"metadata": metadata});
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        let written = pods.patch(pod, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        self.until("the pod's change in the cache", |c| {
            c.stores.pods.state().iter().any(|p| p.metadata.resource_version == written.metadata.resource_version)
        })
        .await;
    }

    /// Pod `name`'s `karpenter.sh/do-not-disrupt` annotation set (`Some`) or removed.
    pub(super) async fn do_not_disrupt(&self, pod: &str, value: Option<&str>) {
        self.pod_meta(pod, serde_json::json!({"annotations": {wk::ANNOTATION_DO_NOT_DISRUPT: value}})).await;
    }

    /// `karpenter_voluntary_disruption_eligible_nodes{reason}`.
    fn eligible(&self, reason: &str) -> Option<f64> {
        self.ctx.metrics.value(VOLUNTARY_DISRUPTION_ELIGIBLE_NODES, &[("reason", reason)])
    }

    /// The sum of `karpenter_voluntary_disruption_decisions_total` samples of `reason`.
    fn decisions(&self, reason: &str) -> f64 {
        self.samples("karpenter_voluntary_disruption_decisions_total", &[("reason", reason)])
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:181
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_counts_eligible_for_consolidation_once_its_pod_may_be_disrupted() {
    let w = World::new().await;
    w.pool_with(super::consolidation_tests::UNDERUTILIZED_ANY_NUMBER.clone()).await;
    w.running("node-0", "fake-it-3", "on-demand", &[("web-0", 100)]).await;
    w.do_not_disrupt("web-0", Some("true")).await;
    let mut disruption = Disruption::new(w.ctx.clone());
    disruption.reconcile().await.unwrap();
    assert_eq!(w.eligible("underutilized"), Some(0.0), "its pod may not be disrupted");
    w.do_not_disrupt("web-0", None).await;
    w.disruption_until(&mut disruption, "eligible", || async { w.eligible("underutilized") == Some(1.0) }).await;
}

/// karpenter:pkg/controllers/disruption/drift_test.go:79
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_node_counts_eligible_once_its_pod_may_be_disrupted() {
    let w = World::new().await;
    w.pool_with(serde_json::json!({"consolidateAfter": "Never"})).await;
    w.running("node-0", "fake-it-3", "on-demand", &[("web-0", 100)]).await;
    w.do_not_disrupt("web-0", Some("true")).await;
    let mut disruption = Disruption::new(w.ctx.clone());
    disruption.reconcile().await.unwrap();
    assert_eq!(w.eligible("drifted"), Some(0.0), "not drifted, and its pod may not be disrupted");
    w.do_not_disrupt("web-0", None).await;
    w.drifted("node-0").await;
    w.disruption_until(&mut disruption, "eligible", || async { w.eligible("drifted") == Some(1.0) }).await;
}

/// An empty drifted node under `disruption`: deleted, counted eligible for drift; `by_drift`:
/// the drift method deletes it. (With consolidation on, emptiness takes it first, as in
/// Karpenter's controller; its suite orders drift first, but these cases read only the
/// deletion and the gauge.)
async fn an_empty_drifted_node_goes(disruption: serde_json::Value, by_drift: bool) {
    let w = World::new().await;
    w.pool_with(disruption).await;
    w.running("node-0", "fake-it-3", "on-demand", &[]).await;
    w.drifted("node-0").await;
    let mut rounds = Disruption::new(w.ctx.clone());
    rounds.reconcile().await.unwrap();
    assert_eq!(w.eligible("drifted"), Some(1.0), "the round that decides counts it");
    w.disruption_until(&mut rounds, "the drifted node deleted", || async {
        w.claims_deleting().await == [("node-0".to_string(), true)]
    })
    .await;
    if by_drift {
        assert_eq!(w.decisions("drifted"), 1.0, "{}", w.ctx.metrics.render());
    }
}

/// karpenter:pkg/controllers/disruption/drift_test.go:809
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_drifted_node_is_deleted_when_consolidation_is_disabled() {
    an_empty_drifted_node_goes(serde_json::json!({"consolidateAfter": "Never"}), true).await;
}

/// karpenter:pkg/controllers/disruption/drift_test.go:899
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_drifted_consolidatable_node_is_deleted() {
    an_empty_drifted_node_goes(super::consolidation_tests::UNDERUTILIZED_ANY_NUMBER.clone(), false).await;
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:385
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_drifted_node_under_when_empty_is_deleted() {
    an_empty_drifted_node_goes(
        serde_json::json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "0s"}),
        false,
    )
    .await;
}

/// karpenter:pkg/controllers/disruption/drift_test.go:830
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_drifted_node_goes_before_a_busy_one() {
    let w = World::new().await;
    w.pool_with(serde_json::json!({"consolidateAfter": "Never"})).await;
    w.running("node-0", "fake-it-3", "on-demand", &[("web-0", 100)]).await;
    w.running("node-1", "fake-it-3", "on-demand", &[]).await;
    w.drifted("node-0").await;
    w.drifted("node-1").await;
    let mut disruption = Disruption::new(w.ctx.clone());
    disruption.reconcile().await.unwrap();
    assert_eq!(w.eligible("drifted"), Some(2.0), "the round that decides counts both");
    w.disruption_until(&mut disruption, "a drifted node deleted", || async {
        w.claims_deleting().await.iter().any(|(_, deleting)| *deleting)
    })
    .await;
    assert_eq!(
        w.claims_deleting().await,
        [("node-0".to_string(), false), ("node-1".to_string(), true)],
        "the empty one first (the 10% budget of two nodes allows one)"
    );
    assert_eq!(w.decisions("drifted"), 1.0);
}

/// Karpenter's drift suite's NodePool, with `budget`: consolidation after an hour.
fn drift_pool(budget: &str) -> serde_json::Value {
    serde_json::json!({"consolidateAfter": "1h", "budgets": [{"nodes": budget}]})
}

impl World {
    /// How many Nodes carry the disruption taint.
    async fn tainted_nodes(&self) -> usize {
        let nodes =
            Api::<k8s_openapi::api::core::v1::Node>::all(self.client.clone()).list(&Default::default()).await.unwrap();
        nodes.items.iter().filter(|n| super::taint_keys(n).iter().any(|t| t == wk::TAINT_DISRUPTED)).count()
    }
}

/// karpenter:pkg/controllers/disruption/drift_test.go:121
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_30_percent_budget_allows_three_of_ten_drifted_nodes() {
    use crate::controller::metrics::catalog::{NODEPOOLS_ALLOWED_DISRUPTIONS, NODEPOOLS_NODES_CONSUMING_BUDGETS};
    let w = World::new().await;
    w.pool_with(drift_pool("30%")).await;
    for i in 0..10 {
        let name = format!("node-{i}");
        w.running(&name, "fake-it-3", "on-demand", &[]).await;
        w.drifted(&name).await;
    }
    Disruption::new(w.ctx.clone()).reconcile().await.unwrap();
    let labels = [("nodepool", "default"), ("reason", "Drifted")];
    assert_eq!(w.ctx.metrics.value(NODEPOOLS_ALLOWED_DISRUPTIONS, &labels), Some(3.0));
    assert_eq!(w.ctx.metrics.value(NODEPOOLS_NODES_CONSUMING_BUDGETS, &labels), Some(0.0));
}

/// karpenter:pkg/controllers/disruption/drift_test.go:159
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_under_way_count_against_the_drift_budget() {
    let w = World::new().await;
    w.pool_with(drift_pool("30%")).await;
    for i in 0..10 {
        let name = format!("node-{i}");
        // The first five drifted, each running a 1-CPU pod (one command each).
        let pod = format!("web-{i}");
        let pods: Vec<(&str, i64)> = if i < 5 { vec![(pod.as_str(), 1000)] } else { vec![] };
        w.running(&name, "fake-it-3", "on-demand", &pods).await;
        if i < 5 {
            w.drifted(&name).await;
        }
    }
    let mut disruption = Disruption::new(w.ctx.clone());
    w.disruption_until(&mut disruption, "three drifted nodes tainted", || async { w.tainted_nodes().await == 3 }).await;
    // More rounds take no fourth: the three under way use the budget up.
    w.disruption_until(&mut disruption, "the three deleted", || async {
        assert!(w.tainted_nodes().await <= 3, "the budget allows three");
        w.claims_deleting().await.iter().filter(|(_, deleting)| *deleting).count() == 3
    })
    .await;
    let left = w.claims_deleting().await.iter().filter(|(_, deleting)| !deleting).count();
    assert_eq!(left, 7, "three drifted NodeClaims deleted, no replacement (their pods fit elsewhere)");
}

/// karpenter:pkg/controllers/disruption/drift_test.go:752
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_node_is_deleted_when_its_pod_fits_elsewhere() {
    let w = World::new().await;
    w.pool_with(drift_pool("100%")).await;
    w.running("node-0", "fake-it-3", "on-demand", &[("web-0", 100)]).await;
    w.running("node-1", "fake-it-3", "on-demand", &[("web-1", 100)]).await;
    w.drifted("node-0").await;
    let mut disruption = Disruption::new(w.ctx.clone());
    w.disruption_until(&mut disruption, "the drifted node deleted", || async {
        w.claims_deleting().await.contains(&("node-0".to_string(), true))
    })
    .await;
    assert_eq!(w.claims_deleting().await, [("node-0".into(), true), ("node-1".into(), false)], "no replacement");
    assert_eq!(w.decisions("drifted"), 1.0);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:703
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_node_is_replaced_when_its_pod_fits_nowhere_else() {
    let w = World::new().await;
    w.pool_with(drift_pool("100%")).await;
    w.running("node-0", "fake-it-1", "on-demand", &[("web-0", 1500)]).await;
    w.drifted("node-0").await;
    let mut disruption = Disruption::new(w.ctx.clone());
    w.disruption_until(&mut disruption, "a replacement", || async { w.claims_deleting().await.len() == 2 }).await;
    let replacement = w.replacement().await;
    assert_eq!(
        w.claims_deleting().await,
        [(replacement.clone(), false), ("node-0".into(), false)],
        "replacement first"
    );
    w.replacement_up(&replacement).await;
    w.disruption_until(&mut disruption, "the drifted node deleted", || async {
        w.claims_deleting().await.contains(&("node-0".to_string(), true))
    })
    .await;
    assert_eq!(w.claims_deleting().await, [(replacement, false), ("node-0".into(), true)]);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:442
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_node_annotated_do_not_disrupt_false_is_deleted() {
    use k8s_openapi::api::core::v1::Node;
    let w = World::new().await;
    w.pool_with(drift_pool("100%")).await;
    w.running("node-0", "fake-it-3", "on-demand", &[]).await;
    w.drifted("node-0").await;
    let annotated = serde_json::json!({"metadata": {"annotations": {wk::ANNOTATION_DO_NOT_DISRUPT: "false"}}});
    let written = Api::<Node>::all(w.client.clone())
        .patch("node-0", &PatchParams::default(), &Patch::Merge(&annotated))
        .await
        .unwrap();
    w.until("the annotated Node in the cache", |c| {
        c.stores.nodes.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
    })
    .await;
    let mut disruption = Disruption::new(w.ctx.clone());
    w.disruption_until(&mut disruption, "the drifted node deleted", || async {
        w.claims_deleting().await == [("node-0".to_string(), true)]
    })
    .await;
}

impl World {
    /// NodeClaim `name` drifted (a stale hash) with its `Drifted` condition set `ago` ago.
    async fn drifted_since(&self, name: &str, ago: std::time::Duration) {
        self.drifted(name).await;
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        let nc = claims.get(name).await.unwrap();
        let mut conditions: Vec<serde_json::Value> = nc
            .status
            .map(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.type_ != tenon_api::wellknown::condition::DRIFTED)
            .map(|c| serde_json::to_value(c).unwrap())
            .collect();
        let at = k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::try_from(ago).unwrap();
        conditions.push(serde_json::json!({"type": "Drifted", "status": "True", "reason": "NodePoolDrifted",
            "message": "NodePoolDrifted", "lastTransitionTime": at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()}));
        let st = serde_json::json!({"status": {"conditions": conditions}});
        let written = claims.patch_status(name, &PatchParams::default(), &Patch::Merge(&st)).await.unwrap();
        self.until("the drift time in the cache", |c| {
            c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
        })
        .await;
    }
}

/// karpenter:pkg/controllers/disruption/drift_test.go:1052
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_empty_drifted_nodes_go_one_at_a_time_earliest_drift_first() {
    use k8s_openapi::api::core::v1::Node;
    let w = World::new().await;
    w.pool_with(drift_pool("100%")).await;
    // Each pod fits only on a node of its own.
    w.running("node-0", "fake-it-3", "on-demand", &[("web-0", 3000)]).await;
    w.running("node-1", "fake-it-3", "on-demand", &[("web-1", 3000)]).await;
    w.drifted_since("node-0", std::time::Duration::ZERO).await;
    w.drifted_since("node-1", std::time::Duration::from_secs(3600)).await;
    let mut disruption = Disruption::new(w.ctx.clone());
    disruption.reconcile().await.unwrap();
    let nodes: Api<Node> = Api::all(w.client.clone());
    let tainted = |n: Node| super::taint_keys(&n).iter().any(|t| t == wk::TAINT_DISRUPTED);
    assert!(tainted(nodes.get("node-1").await.unwrap()), "the earliest drift goes first");
    assert!(!tainted(nodes.get("node-0").await.unwrap()), "one non-empty node at a time");
    w.replaced_through(&mut disruption, 3, "node-1").await;
    assert!(w.claims_deleting().await.contains(&("node-0".to_string(), false)), "node-0 is still there");
}

/// karpenter:pkg/controllers/disruption/drift_test.go:232
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budgets_of_several_nodepools_are_each_respected() {
    let w = World::new().await;
    let one_at_a_time = serde_json::json!({"consolidateAfter": "Never", "budgets": [{"nodes": "1"}]});
    // Karpenter's suite NodePool, without nodes, and ten more of three drifted nodes each.
    w.pool_with(one_at_a_time.clone()).await;
    let pools: Vec<String> = (0..10).map(|p| format!("pool-{p}")).collect();
    let dear = [(wk::LABEL_INSTANCE_TYPE, "fake-it-3"), (wk::LABEL_CAPACITY_TYPE, "on-demand")];
    for pool in &pools {
        w.pool_named(pool, one_at_a_time.clone()).await;
        for i in 0..3 {
            let name = format!("{pool}-node-{i}");
            w.claimed(pool, &name, &dear, true).await;
            // Two of the three run a 1-CPU pod.
            if i < 2 {
                w.started(super::nodes::web_pod(&format!("{pool}-web-{i}"), &name, 1000)).await;
            }
            w.drifted(&name).await;
        }
    }
    let mut disruption = Disruption::new(w.ctx.clone());
    disruption.reconcile().await.unwrap();
    for pool in &pools {
        let allowed = w.ctx.metrics.value(NODEPOOLS_ALLOWED_DISRUPTIONS, &[("nodepool", pool), ("reason", "Drifted")]);
        assert_eq!(allowed, Some(1.0), "{pool}");
    }
    let deleting = || async { w.claims_deleting().await.iter().filter(|(_, d)| *d).count() };
    w.disruption_until(&mut disruption, "a node of each NodePool deleted", || async { deleting().await >= 10 }).await;
    // The deleted nodes hold their budgets (nothing terminates them here): no more go.
    w.rounds(&mut disruption, 10).await;
    let claims = w.claims_deleting().await;
    assert_eq!(claims.len(), 30, "nothing created: {claims:?}");
    assert_eq!(deleting().await, 10, "one per NodePool: {claims:?}");
    assert_eq!(w.decisions("drifted"), 10.0, "ten commands");
    for pool in &pools {
        let by_pool = [("nodepool", pool.as_str()), ("reason", "drifted")];
        assert_eq!(w.samples("karpenter_voluntary_disruption_decisions_by_nodepool_total", &by_pool), 1.0, "{pool}");
        let gone = claims.iter().filter(|(n, d)| *d && n.starts_with(&format!("{pool}-"))).count();
        assert_eq!(gone, 1, "{pool}: {claims:?}");
    }
    let consuming =
        w.ctx.metrics.value(NODEPOOLS_NODES_CONSUMING_BUDGETS, &[("nodepool", "default"), ("reason", "Drifted")]);
    assert_eq!(consuming, Some(0.0));
}

/// karpenter:pkg/controllers/nodepool/hash/suite_test.go:163
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodeclaims_stamped_under_another_hash_version_are_restamped() {
    let w = World::new().await;
    w.pool_with(serde_json::json!({"consolidateAfter": "Never"})).await;
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    for name in ["node-0", "node-1"] {
        w.running(name, "fake-it-0", "on-demand", &[]).await;
        let old = serde_json::json!({"metadata": {"annotations": {
            wk::ANNOTATION_NODEPOOL_HASH: "123456", wk::ANNOTATION_NODEPOOL_HASH_VERSION: "test"}}});
        let written = claims.patch(name, &PatchParams::default(), &Patch::Merge(&old)).await.unwrap();
        w.cached(&written).await;
    }
    Disruption::new(w.ctx.clone()).reconcile().await.unwrap();
    let pool = Api::<tenon_api::NodePool>::all(w.client.clone()).get("default").await.unwrap();
    for name in ["node-0", "node-1"] {
        let annotations = claims.get(name).await.unwrap().metadata.annotations.unwrap_or_default();
        assert_eq!(annotations.get(wk::ANNOTATION_NODEPOOL_HASH), Some(&pool.template_hash()), "{name}");
        let version = annotations.get(wk::ANNOTATION_NODEPOOL_HASH_VERSION).map(String::as_str);
        assert_eq!(version, Some(tenon_api::hash::NODEPOOL_HASH_VERSION), "{name}");
    }
}
