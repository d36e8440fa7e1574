//! Karpenter's consolidation cases about where a candidate's pods may go, through the
//! lifecycle and disruption reconcilers: not onto a node inside its `consolidateAfter`, nor
//! one not initialized; onto what is left when a multi-node command stopped holding; into
//! the zone a topology spread needs. The NodeClaims deleted and created are read back.

use super::World;
use super::consolidation_tests::UNDERUTILIZED_ANY_NUMBER;
use super::nodes::web_pod;
use crate::controller::disruption::Disruption;
use crate::controller::metrics::catalog::VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS;
use crate::controller::runner::Reconciler;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use std::collections::BTreeMap;
use std::time::Duration;
use tenon_api::NodeClaim;
use tenon_api::wellknown::{LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE};

impl World {
    /// NodeClaim `name`'s `lastPodEventTime` set to the decisions' now, as the
    /// `pod.events` reconciler writes it after a pod change on its node.
    async fn pod_event_now(&self, name: &str) {
        let now = k8s_openapi::jiff::Timestamp::from_second(self.ctx.unix_now()).unwrap();
        let patch = serde_json::json!({"status": {"lastPodEventTime": now.to_string()}});
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let written = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        self.cached(&written).await;
    }

    /// The NodeClaims not being deleted, by name.
    async fn not_deleting(&self) -> Vec<String> {
        self.claims_deleting().await.into_iter().filter(|(_, deleting)| !deleting).map(|(n, _)| n).collect()
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3050
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_are_not_consolidated_onto_a_node_under_its_consolidate_after() {
    let w = World::new().await;
    let disruption = serde_json::json!({"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "1m", "budgets": [{"nodes": "100%"}]});
    w.pool_with(disruption).await;
    // Two of the cheapest nodes (no cheaper replacement): the only consolidation is deleting
    // node-1 and moving its pod onto node-0.
    w.running("node-0", "fake-it-0", "on-demand", &[("web-1", 100), ("web-2", 100)]).await;
    w.running("node-1", "fake-it-0", "on-demand", &[("web-3", 100)]).await;
    let mut disruption = Disruption::new(w.ctx.clone());
    // Both inside their minute: 50 s of rounds decide nothing.
    w.rounds(&mut disruption, 10).await;
    assert_eq!(w.claims_deleting().await, [("node-0".into(), false), ("node-1".into(), false)]);
    // node-1 past its minute, but node-0, the only destination, had a pod event just now
    // (Karpenter's case marks node-1 Consolidatable while node-0 is still inside its window).
    w.ctx.advance(Duration::from_secs(60));
    w.pod_event_now("node-0").await;
    w.rounds(&mut disruption, 10).await;
    assert_eq!(w.claims_deleting().await, [("node-0".into(), false), ("node-1".into(), false)]);
    let nodes = Api::<Node>::all(w.client.clone()).list(&Default::default()).await.unwrap().items;
    assert_eq!(nodes.len(), 2);
    // Two minutes on, node-0 is past its window too: node-1 goes, without a replacement.
    w.ctx.advance(Duration::from_secs(120));
    w.disruption_until(&mut disruption, "node-1 deleted", || async {
        w.claims_deleting().await.contains(&("node-1".into(), true))
    })
    .await;
    assert_eq!(w.claims_deleting().await, [("node-0".into(), false), ("node-1".into(), true)]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3245
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialized_nodes_are_considered_before_uninitialized_ones() {
    // Karpenter's case has 100 nodes of 3 CPUs with a 2-CPU pod each, one initialized (at
    // random). Here 3-CPU nodes with a 2.5-CPU pod each (the catalog has a 2-CPU type a
    // 2-CPU pod would be moved to), the initialized one last by name.
    const DEFAULT_NODES: usize = 20;
    let w = World::new().await;
    w.pool_with(UNDERUTILIZED_ANY_NUMBER.clone()).await;
    let default_type = [(LABEL_INSTANCE_TYPE, "fake-it-2"), (LABEL_CAPACITY_TYPE, "on-demand")];
    for i in 0..DEFAULT_NODES {
        let name = format!("node-{i:02}");
        w.claimed("default", &name, &default_type, i == DEFAULT_NODES - 1).await;
        w.started(web_pod(&format!("p-{i:02}"), &name, 2500)).await;
    }
    // The small node's pod fits in any default node's spare half CPU; only one is initialized.
    w.running("consolidatable", "fake-it-0", "on-demand", &[("small-pod", 500)]).await;
    let mut disruption = Disruption::new(w.ctx.clone());
    w.disruption_until(&mut disruption, "the small node deleted", || async {
        w.claims_deleting().await.contains(&("consolidatable".into(), true))
    })
    .await;
    let kept = w.not_deleting().await;
    assert_eq!(kept.len(), DEFAULT_NODES, "only the small node goes, no replacement: {kept:?}");
    assert!(kept.iter().all(|n| n.starts_with("node-")), "{kept:?}");
}

/// Karpenter's "continue to single nodeclaim consolidation when multi-nodeclaim
/// consolidation fails validation": three dear nodes with a small pod each are one
/// multi-node command; two nodes gain a 1-CPU pod before it is validated; single-node
/// consolidation then deletes the third.
async fn single_node_follows_a_failed_multi_node(capacity_type: &str) {
    let w = World::new().await;
    w.pool_with(UNDERUTILIZED_ANY_NUMBER.clone()).await;
    for i in 0..3 {
        w.running(&format!("node-{i}"), "fake-it-3", capacity_type, &[(&format!("web-{i}"), 100)]).await;
    }
    let mut disruption = Disruption::new(w.ctx.clone());
    disruption.reconcile().await.unwrap();
    assert_eq!(w.not_deleting().await.len(), 3, "decided, waiting to validate");
    w.started(web_pod("extra-0", "node-0", 1000)).await;
    w.started(web_pod("extra-1", "node-1", 1000)).await;
    w.disruption_until(&mut disruption, "node-2 deleted", || async {
        w.claims_deleting().await.contains(&("node-2".into(), true))
    })
    .await;
    let failed = w.ctx.metrics.value(VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS, &[("consolidation_type", "multi")]);
    // Counted per candidate: two or three, as the command deleted or replaced.
    assert!(failed.is_some_and(|n| n >= 2.0), "{capacity_type}: the multi-node command stopped holding: {failed:?}");
    assert_eq!(
        w.claims_deleting().await,
        [("node-0".into(), false), ("node-1".into(), false), ("node-2".into(), true)],
        "{capacity_type}: node-2 deleted, nothing created"
    );
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4396
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_node_consolidation_follows_a_failed_on_demand_multi_node_validation() {
    single_node_follows_a_failed_multi_node("on-demand").await;
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4397
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_node_consolidation_follows_a_failed_spot_multi_node_validation() {
    single_node_follows_a_failed_multi_node("spot").await;
}

impl World {
    /// Running pods of app `test-zonal-spread` per zone of their Node (read from the API).
    async fn spread(&self) -> BTreeMap<String, usize> {
        let nodes = Api::<Node>::all(self.client.clone()).list(&Default::default()).await.unwrap().items;
        let zone: BTreeMap<String, String> = nodes
            .into_iter()
            .filter_map(|n| Some((n.metadata.name?, n.metadata.labels?.get(LABEL_ZONE)?.clone())))
            .collect();
        let pods = Api::<Pod>::namespaced(self.client.clone(), "default").list(&Default::default()).await.unwrap();
        let mut out = BTreeMap::new();
        for p in pods.items {
            if let Some(z) = p.spec.and_then(|s| s.node_name).and_then(|n| zone.get(&n).cloned()) {
                *out.entry(z).or_insert(0) += 1;
            }
        }
        out
    }

    /// A 1-CPU pod of app `test-zonal-spread` (zonal spread, max skew 1) on Node `node`.
    async fn spread_pod(&self, name: &str, node: &str) {
        let mut pod = web_pod(name, node, 1000);
        pod["metadata"]["labels"] = serde_json::json!({"app": "test-zonal-spread"});
        pod["spec"]["topologySpreadConstraints"] = serde_json::json!([{"maxSkew": 1,
            "topologyKey": LABEL_ZONE, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "test-zonal-spread"}}}]);
        self.started(pod).await;
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4525
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_is_replaced_keeping_the_zonal_spread() {
    let w = World::new().await;
    w.pool_with(UNDERUTILIZED_ANY_NUMBER.clone()).await;
    // The cheapest type in zones 1 and 3, the dearest in zone 2; a 1-CPU pod on each.
    for (i, (zone, it)) in [("test-zone-1", "fake-it-0"), ("test-zone-2", "fake-it-3"), ("test-zone-3", "fake-it-0")]
        .into_iter()
        .enumerate()
    {
        let name = format!("node-{i}");
        let requirements = [(LABEL_INSTANCE_TYPE, it), (LABEL_CAPACITY_TYPE, "on-demand"), (LABEL_ZONE, zone)];
        w.claimed("default", &name, &requirements, true).await;
        w.spread_pod(&format!("web-{i}"), &name).await;
    }
    let one_each: BTreeMap<String, usize> =
        ["test-zone-1", "test-zone-2", "test-zone-3"].into_iter().map(|z| (z.to_string(), 1)).collect();
    assert_eq!(w.spread().await, one_each);
    let mut disruption = Disruption::new(w.ctx.clone());
    let replacement = w.replaced_through(&mut disruption, 4, "node-1").await;
    let mut kept = w.not_deleting().await;
    kept.sort();
    let mut want = vec!["node-0".to_string(), "node-2".into(), replacement.clone()];
    want.sort();
    assert_eq!(kept, want, "node-1 replaced, the others kept");
    let nc = Api::<NodeClaim>::all(w.client.clone()).get(&replacement).await.unwrap();
    let labels = nc.metadata.labels.unwrap_or_default();
    assert_ne!(labels[LABEL_INSTANCE_TYPE], "fake-it-3", "a cheaper node");
    // node-1's drain evicts its pod; the ReplicaSet's new pod goes to the replacement.
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    pods.delete("web-1", &DeleteParams { grace_period_seconds: Some(0), ..Default::default() }).await.unwrap();
    w.spread_pod("web-3", &replacement).await;
    assert_eq!(w.spread().await, one_each, "the replacement is in node-1's zone");
}
