//! Karpenter's emptiness cases through the disruption reconciler: an empty node's NodeClaim
//! deleted in the API, without a replacement.

use super::World;
use crate::controller::disruption::Disruption;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use tenon_api::NodeClaim;
use tenon_api::wellknown as wk;

/// karpenter:pkg/controllers/disruption/emptiness_test.go:433
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_node_annotated_do_not_disrupt_false_is_deleted() {
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "", "").await;
    // Its one pod goes, and the Node says `karpenter.sh/do-not-disrupt: "false"`.
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    pods.delete("web", &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).await.unwrap();
    let annotated = serde_json::json!({"metadata": {"annotations": {wk::ANNOTATION_DO_NOT_DISRUPT: "false"}}});
    Api::<Node>::all(w.client.clone())
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&annotated))
        .await
        .unwrap();
    w.until("the empty, annotated Node in the cache", |c| {
        c.stores.pods.state().is_empty()
            && c.stores.nodes.state().iter().any(|n| n.metadata.annotations.as_ref().is_some_and(|a| !a.is_empty()))
    })
    .await;
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    let mut disruption = Disruption::new(w.ctx.clone());
    w.disruption_until(&mut disruption, "the empty node's NodeClaim deleted", || async {
        claims.get("default-abcde").await.unwrap().metadata.deletion_timestamp.is_some()
    })
    .await;
    let all = claims.list(&Default::default()).await.unwrap().items;
    assert_eq!(all.len(), 1, "no replacement: {:?}", all.iter().map(|c| c.metadata.name.clone()).collect::<Vec<_>>());
    let node = Api::<Node>::all(w.client.clone()).get("node-a").await.unwrap();
    assert!(
        node.spec.and_then(|s| s.taints).unwrap_or_default().iter().any(|t| t.key == wk::TAINT_DISRUPTED),
        "the Node is tainted for its disruption"
    );
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:557
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_running_only_a_daemonset_pod_is_empty() {
    use kube::api::PostParams;
    let w = World::new().await;
    w.pool_with(super::consolidation_tests::when_empty("100%")).await;
    w.running("node-0", "fake-it-0", "on-demand", &[]).await;
    let daemon: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "agent", "namespace": "default", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "00000000-0000-0000-0000-000000000002", "controller": true}]},
        "spec": {"nodeName": "node-0", "containers": [{"name": "agent", "image": "agent"}]},
        "status": {"phase": "Running"},
    }))
    .unwrap();
    Api::<Pod>::namespaced(w.client.clone(), "default").create(&PostParams::default(), &daemon).await.unwrap();
    w.until("the DaemonSet pod in the cache", |c| !c.stores.pods.state().is_empty()).await;
    let mut disruption = Disruption::new(w.ctx.clone());
    w.disruption_until(&mut disruption, "the node deleted", || async {
        w.claims_deleting().await == [("node-0".to_string(), true)]
    })
    .await;
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:606
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_pods_are_all_terminating_is_empty() {
    let w = World::new().await;
    w.pool_with(super::consolidation_tests::when_empty("100%")).await;
    let pods = [("web-1", 100), ("web-2", 100), ("web-3", 100)];
    w.running("node-0", "fake-it-0", "on-demand", &pods).await;
    // Evicted, and held terminating by a finalizer.
    let api: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    let held = serde_json::json!({"metadata": {"finalizers": ["test.tenon.dev/hold"]}});
    for (pod, _) in pods {
        api.patch(pod, &PatchParams::default(), &Patch::Merge(&held)).await.unwrap();
        api.delete(pod, &DeleteParams::default()).await.unwrap();
    }
    w.until("the terminating pods in the cache", |c| {
        let all = c.stores.pods.state();
        all.len() == 3 && all.iter().all(|p| p.metadata.deletion_timestamp.is_some())
    })
    .await;
    let mut disruption = Disruption::new(w.ctx.clone());
    w.disruption_until(&mut disruption, "the node deleted", || async {
        w.claims_deleting().await == [("node-0".to_string(), true)]
    })
    .await;
}
