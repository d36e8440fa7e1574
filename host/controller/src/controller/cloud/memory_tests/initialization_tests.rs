//! A registered NodeClaim is not initialized while its Node is NotReady or carries a taint
//! that says it is not ready yet (a startup taint, the kubelet's, the cloud provider's, a
//! readiness rule's): read from the NodeClaim's conditions as the lifecycle reconciler
//! writes them.

use super::{World, condition_status};
use crate::controller::nodeclaim::lifecycle::Lifecycle;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tenon_api::wellknown::condition;

/// NodeClaim `default-abcde` (with `spec`) launched, its Node registered with `taints` (YAML
/// flow mappings) and reporting Ready with capacity; the conditions after a few lifecycle
/// passes, then those once every taint is removed from the Node.
async fn initialized_once_untainted(spec: &str, taints: &[&str]) {
    let w = World::new().await;
    let nc = w.launched_with("on-demand", spec).await;
    let mut all: Vec<String> = taints.iter().map(|t| t.to_string()).collect();
    all.push("{key: karpenter.sh/unregistered, effect: NoExecute}".into());
    w.kubelet_registers(nc, &all).await;
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    w.lifecycle_until(&mut lifecycle, condition::REGISTERED).await;
    w.kubelet_reports(Some(serde_json::json!({"cpu": "2", "memory": "4Gi", "pods": "20"}))).await;
    let conditions = w.conditions_after_passes(&mut lifecycle).await;
    assert_eq!(condition_status(&conditions, condition::REGISTERED).as_deref(), Some("True"), "{taints:?}");
    assert_eq!(condition_status(&conditions, condition::INITIALIZED).as_deref(), Some("Unknown"), "{taints:?}");
    let nodes: Api<Node> = Api::all(w.client.clone());
    let untainted = serde_json::json!({"spec": {"taints": []}});
    nodes.patch("node-a", &PatchParams::default(), &Patch::Merge(&untainted)).await.unwrap();
    let initialized = w.lifecycle_until(&mut lifecycle, condition::INITIALIZED).await;
    let conditions = initialized.status.unwrap_or_default().conditions;
    assert_eq!(condition_status(&conditions, condition::REGISTERED).as_deref(), Some("True"));
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:508
/// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:578
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_ephemeral_taints_hold_initialization_until_removed() {
    let startup = "  startupTaints: [{key: custom-startup-taint, effect: NoSchedule}, {key: other-custom-startup-taint, effect: NoExecute}]\n";
    let ephemeral = [
        "{key: node.kubernetes.io/not-ready, effect: NoSchedule}",
        "{key: node.kubernetes.io/unreachable, effect: NoSchedule}",
        "{key: node.cloudprovider.kubernetes.io/uninitialized, value: \"true\", effect: NoSchedule}",
    ];
    initialized_once_untainted(startup, &ephemeral).await;
    // Without startup taints (which hold initialization too), the ephemeral ones alone.
    initialized_once_untainted("", &ephemeral).await;
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:658
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readiness_taint_holds_initialization_until_removed() {
    initialized_once_untainted("", &["{key: readiness.k8s.io/some-rule, effect: NoSchedule}"]).await;
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:368
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_taints_synced_at_registration_hold_initialization() {
    let w = World::new().await;
    let startup = "  startupTaints: [{key: custom-startup-taint, effect: NoSchedule}, {key: other-custom-startup-taint, effect: NoExecute}]\n";
    let nc = w.launched_with("on-demand", startup).await;
    w.kubelet_registers(nc, &["{key: karpenter.sh/unregistered, effect: NoExecute}".to_string()]).await;
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    w.lifecycle_until(&mut lifecycle, condition::REGISTERED).await;
    w.kubelet_reports(Some(serde_json::json!({"cpu": "2", "memory": "4Gi", "pods": "20"}))).await;
    let conditions = w.conditions_after_passes(&mut lifecycle).await;
    assert_eq!(condition_status(&conditions, condition::REGISTERED).as_deref(), Some("True"));
    assert_eq!(condition_status(&conditions, condition::INITIALIZED).as_deref(), Some("Unknown"));
    let node = Api::<Node>::all(w.client.clone()).get("node-a").await.unwrap();
    let keys = super::taint_keys(&node);
    for k in ["custom-startup-taint", "other-custom-startup-taint"] {
        assert!(keys.iter().any(|t| t == k), "registration put {k} on the Node: {keys:?}");
    }
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:209
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_not_ready_is_not_initialized() {
    let w = World::new().await;
    let nc = w.launched("on-demand").await;
    w.kubelet_registers(nc, &["{key: karpenter.sh/unregistered, effect: NoExecute}".to_string()]).await;
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    w.lifecycle_until(&mut lifecycle, condition::REGISTERED).await;
    let capacity = serde_json::json!({"cpu": "2", "memory": "4Gi", "pods": "20"});
    let status = serde_json::json!({"status": {"capacity": capacity, "allocatable": capacity,
        "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": ""}]}});
    let nodes: Api<Node> = Api::all(w.client.clone());
    let written = nodes.patch_status("node-a", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    w.until("the NotReady Node in the cache", |c| {
        c.stores.nodes.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
    })
    .await;
    let conditions = w.conditions_after_passes(&mut lifecycle).await;
    assert_eq!(condition_status(&conditions, condition::REGISTERED).as_deref(), Some("True"));
    assert_eq!(condition_status(&conditions, condition::INITIALIZED).as_deref(), Some("Unknown"), "NotReady");
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/suite_test.go:389
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requested_dra_drivers_do_not_hold_initialization() {
    let w = World::new().await;
    let nc = w.launched("on-demand").await;
    // Tenon, like Karpenter with DRA requests ignored, waits for no driver's resource pool.
    let annotated = serde_json::json!({"metadata": {"annotations": {"karpenter.sh/requested-dra-drivers": "driver-a.example.com"}}});
    let claims: Api<tenon_api::NodeClaim> = Api::all(w.client.clone());
    let written = claims.patch("default-abcde", &PatchParams::default(), &Patch::Merge(&annotated)).await.unwrap();
    w.until("the annotated NodeClaim in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
    })
    .await;
    w.kubelet_registers(nc, &["{key: karpenter.sh/unregistered, effect: NoExecute}".to_string()]).await;
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    w.lifecycle_until(&mut lifecycle, condition::REGISTERED).await;
    w.kubelet_reports(Some(serde_json::json!({"cpu": "2", "memory": "4Gi", "pods": "20"}))).await;
    let initialized = w.lifecycle_until(&mut lifecycle, condition::INITIALIZED).await;
    let conditions = initialized.status.unwrap_or_default().conditions;
    assert_eq!(condition_status(&conditions, condition::INITIALIZED).as_deref(), Some("True"));
    let node = Api::<Node>::all(w.client.clone()).get("node-a").await.unwrap();
    let labels = node.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("karpenter.sh/initialized").map(String::as_str), Some("true"));
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:113
/// karpenter:pkg/controllers/nodeclaim/lifecycle/suite_test.go:127
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeclaim_of_another_nodeclass_is_not_initialized() {
    // Launched and registered, its Node Ready with capacity and untainted: everything
    // initialization waits for, but not ours to initialize.
    let w = World::new().await;
    w.ready_nodeclass().await;
    w.create::<tenon_api::NodeClaim>(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: other}\nspec:\n  nodeClassRef: {group: karpenter.test.sh, kind: TestNodeClass, name: default}\n  requirements: []\n",
    )
    .await;
    let now = "2026-12-06T00:00:00Z";
    let status = serde_json::json!({"status": {"providerID": "test:///other", "nodeName": "other", "conditions": [
        {"type": "Launched", "status": "True", "reason": "Launched", "message": "", "lastTransitionTime": now},
        {"type": "Registered", "status": "True", "reason": "Registered", "message": "", "lastTransitionTime": now}]}});
    let claims: Api<tenon_api::NodeClaim> = Api::all(w.client.clone());
    claims.patch_status("other", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    w.create::<Node>("apiVersion: v1\nkind: Node\nmetadata: {name: other}\nspec: {providerID: \"test:///other\"}\n")
        .await;
    let capacity = serde_json::json!({"cpu": "2", "memory": "4Gi", "pods": "20"});
    let ready = serde_json::json!({"status": {"capacity": capacity, "allocatable": capacity,
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": ""}]}});
    let nodes: Api<Node> = Api::all(w.client.clone());
    let written = nodes.patch_status("other", &PatchParams::default(), &Patch::Merge(&ready)).await.unwrap();
    w.until("the Ready Node and the registered NodeClaim in the cache", |c| {
        c.stores.nodes.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
            && c.stores.nodeclaims.state().iter().any(|n| n.status.as_ref().is_some_and(|s| s.node_name.is_some()))
    })
    .await;
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    for _ in 0..3 {
        crate::controller::runner::Reconciler::reconcile(&mut lifecycle).await.unwrap();
    }
    let other = claims.get("other").await.unwrap();
    assert!(other.metadata.finalizers.unwrap_or_default().is_empty(), "no finalizer added to another's NodeClaim");
    let conditions = other.status.unwrap_or_default().conditions;
    assert_eq!(condition_status(&conditions, condition::INITIALIZED), None, "not ours to initialize");
    let labels = nodes.get("other").await.unwrap().metadata.labels.unwrap_or_default();
    assert!(!labels.contains_key("karpenter.sh/initialized"), "{labels:?}");
}
