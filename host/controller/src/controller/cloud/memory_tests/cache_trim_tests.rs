//! The caches keep only what is read: a pod as `tenon_core::cached_pod::Pod` (no
//! environment, probes or container statuses), a node without its image list
//! (`tenon_core::cache_trim`).

use super::World;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_caches_drop_what_nothing_reads_and_keep_what_is_read() {
    let w = World::new().await;
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "app", "namespace": "default"},
        "spec": {"containers": [{"name": "app", "image": "app:1",
            "env": [{"name": "VAR", "value": "a"}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
            "resources": {"requests": {"cpu": "1"}}, "ports": [{"containerPort": 8080, "hostPort": 8080}]}]}
    }))
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    pods.create(&PostParams::default(), &pod).await.unwrap();
    let status = serde_json::json!({"status": {"phase": "Running", "hostIP": "10.0.0.1",
        "containerStatuses": [{"name": "app", "image": "app:1", "imageID": "x", "ready": true, "restartCount": 0}]}});
    let written = pods.patch_status("app", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    w.until("the pod's status in the cache", |c| {
        c.stores.pods.state().iter().any(|p| p.metadata.resource_version == written.metadata.resource_version)
    })
    .await;
    let cached = w.ctx.stores.pods.state().into_iter().find(|p| p.metadata.name.as_deref() == Some("app")).unwrap();
    let c = &cached.spec.as_ref().unwrap().containers[0];
    assert!(c.resources.is_some() && c.ports.is_some(), "{c:?}");
    assert_eq!(cached.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    let json = serde_json::to_string(&*cached).unwrap();
    assert!(!json.contains("livenessProbe") && !json.contains("containerStatuses") && !json.contains("VAR"), "{json}");
    // The server still has them: the cache is never written back.
    let stored = pods.get("app").await.unwrap();
    assert!(stored.spec.unwrap().containers[0].env.is_some());

    let node: Node = serde_json::from_value(serde_json::json!({"metadata": {"name": "node-x"}})).unwrap();
    let nodes: Api<Node> = Api::all(w.client.clone());
    nodes.create(&PostParams::default(), &node).await.unwrap();
    let status =
        serde_json::json!({"status": {"allocatable": {"cpu": "4"}, "images": [{"names": ["app:1"], "sizeBytes": 10}]}});
    let written = nodes.patch_status("node-x", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    w.until("the node's status in the cache", |c| {
        c.stores.nodes.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
    })
    .await;
    let cached = w.ctx.stores.nodes.state().into_iter().find(|n| n.metadata.name.as_deref() == Some("node-x")).unwrap();
    let st = cached.status.as_ref().unwrap();
    assert!(st.images.is_none() && st.allocatable.is_some(), "{st:?}");
}
