//! Karpenter's consolidation Replace cases whose pods sit under a PodDisruptionBudget that
//! does not hold them, through the disruption reconciler: the node is replaced all the same.

use super::World;
use super::consolidation_tests::UNDERUTILIZED_ANY_NUMBER;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};

impl World {
    /// A PDB `maxUnavailable: 0` over pods labelled `test: value` in `namespace` (no
    /// disruption allowed now), with `spec` merged in.
    async fn pdb_in(&self, namespace: &str, spec: serde_json::Value) {
        let mut pdb = serde_json::json!({
            "metadata": {"name": "pdb", "namespace": namespace},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"test": "value"}}},
        });
        if let (Some(s), Some(extra)) = (pdb["spec"].as_object_mut(), spec.as_object()) {
            s.extend(extra.clone());
        }
        if namespace != "default" {
            let ns = serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}})).unwrap();
            Api::<k8s_openapi::api::core::v1::Namespace>::all(self.client.clone())
                .create(&PostParams::default(), &ns)
                .await
                .unwrap();
        }
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), namespace);
        pdbs.create(&PostParams::default(), &serde_json::from_value(pdb).unwrap()).await.unwrap();
        let status = serde_json::json!({"status": {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 3, "expectedPods": 3}});
        pdbs.patch_status("pdb", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
        self.until("the PDB in the cache", |c| c.stores.pdbs.state().iter().any(|p| p.status.is_some())).await;
    }

    /// Pod `name` (namespace default) labelled `test: value`, and not Ready when `unready`.
    async fn selected(&self, name: &str, unready: bool) {
        self.pod_meta(name, serde_json::json!({"labels": {"test": "value"}})).await;
        if unready {
            let pods: Api<Pod> = Api::namespaced(self.client.clone(), "default");
            let status = serde_json::json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
            let written = pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
            self.until("the pod's readiness in the cache", |c| {
                c.stores.pods.state().iter().any(|p| p.metadata.resource_version == written.metadata.resource_version)
            })
            .await;
        }
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1977
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unready_pods_under_a_pdb_that_always_allows_unhealthy_evictions_do_not_hold_a_replace() {
    let w = World::new().await;
    w.pool_with(UNDERUTILIZED_ANY_NUMBER.clone()).await;
    w.running("node-0", "fake-it-3", "on-demand", &[("web-0", 100), ("web-1", 100), ("web-2", 100)]).await;
    w.pdb_in("default", serde_json::json!({"unhealthyPodEvictionPolicy": "AlwaysAllow"})).await;
    for pod in ["web-0", "web-1", "web-2"] {
        w.selected(pod, true).await;
    }
    w.replaced_by_a_cheaper_one().await;
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2040
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdb_of_another_namespace_does_not_hold_a_replace() {
    let w = World::new().await;
    w.pool_with(UNDERUTILIZED_ANY_NUMBER.clone()).await;
    w.running("node-0", "fake-it-3", "on-demand", &[("web-0", 100)]).await;
    w.pdb_in("other", serde_json::json!({})).await;
    w.selected("web-0", false).await;
    w.replaced_by_a_cheaper_one().await;
}
