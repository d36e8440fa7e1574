//! Karpenter's disruption suite's blocked candidates through the disruption reconciler: a
//! node held by a PDB or by `karpenter.sh/do-not-disrupt` gets the DisruptionBlocked Event
//! on its Node and NodeClaim, and neither is tainted or deleted.

use super::World;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tenon_api::NodeClaim;

impl World {
    /// PDB `name` over pods labelled `test: value` that allows no disruption now.
    async fn blocking_pdb(&self, name: &str) {
        let pdbs: Api<PodDisruptionBudget> = Api::namespaced(self.client.clone(), "default");
        let pdb: PodDisruptionBudget = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"test": "value"}}},
        }))
        .unwrap();
        pdbs.create(&PostParams::default(), &pdb).await.unwrap();
        let status = serde_json::json!({"status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}});
        pdbs.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
        self.until(&format!("PDB {name} in the cache"), |c| {
            c.stores.pdbs.state().iter().any(|p| p.metadata.name.as_deref() == Some(name) && p.status.is_some())
        })
        .await;
    }

    /// Pod `web`'s NodeClaim launched from a NodePool template since changed: drifted, an
    /// eventual disruption (none of these NodePools sets a terminationGracePeriod).
    async fn web_drifted(&self) {
        self.pool_disruption(serde_json::json!({"consolidateAfter": "Never"})).await;
        self.drifted("default-abcde").await;
    }
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1364
/// karpenter:pkg/controllers/disruption/suite_test.go:1524
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fully_blocking_pdb_without_a_grace_period_blocks_its_node() {
    let w = World::new().await;
    w.blocking_pdb("pdb").await;
    w.initialized_with_pod("on-demand", "", "labels: {test: value},").await;
    w.disruption_says("DisruptionBlocked", "Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])").await;
    w.not_disrupted().await;
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1314
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_under_two_pdbs_blocks_its_node_and_both_are_named() {
    let w = World::new().await;
    w.blocking_pdb("pdb-1").await;
    w.blocking_pdb("pdb-2").await;
    w.initialized_with_pod("on-demand", "", "labels: {test: value},").await;
    let why = "Eviction does not support multiple PDBs (PodDisruptionBudget(s)=[default/pdb-1 default/pdb-2])";
    w.disruption_says("DisruptionBlocked", why).await;
    w.not_disrupted().await;
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1400
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fully_blocking_pdb_over_a_daemonset_pod_blocks_its_node() {
    let w = World::new().await;
    w.blocking_pdb("pdb").await;
    w.initialized_with_pod("on-demand", "", "").await;
    let daemon: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "agent", "namespace": "default", "labels": {"test": "value"}, "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": "00000000-0000-0000-0000-000000000002", "controller": true}]},
        "spec": {"nodeName": "node-a", "containers": [{"name": "agent", "image": "agent"}]},
        "status": {"phase": "Running"},
    }))
    .unwrap();
    Api::<Pod>::namespaced(w.client.clone(), "default").create(&PostParams::default(), &daemon).await.unwrap();
    w.until("the DaemonSet pod in the cache", |c| c.stores.pods.state().len() == 2).await;
    w.disruption_says("DisruptionBlocked", "Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])").await;
    w.not_disrupted().await;
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1291
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn do_not_disrupt_on_the_nodeclaim_blocks_it() {
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "", "").await;
    let held = serde_json::json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}});
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    let written = claims.patch("default-abcde", &PatchParams::default(), &Patch::Merge(&held)).await.unwrap();
    w.until("the annotation in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
    })
    .await;
    let why = "Disruption is blocked through the \"karpenter.sh/do-not-disrupt\" annotation";
    w.disruption_says("DisruptionBlocked", why).await;
    w.not_disrupted().await;
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1160
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_do_not_disrupt_pod_without_a_grace_period_blocks_drift() {
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "", "annotations: {karpenter.sh/do-not-disrupt: \"true\"},").await;
    w.web_drifted().await;
    let why = "Pod has \"karpenter.sh/do-not-disrupt\" annotation (Pod=default/web)";
    w.disruption_says("DisruptionBlocked", why).await;
    w.not_disrupted().await;
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1188
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdb_blocked_pod_without_a_grace_period_blocks_drift() {
    let w = World::new().await;
    w.blocking_pdb("pdb").await;
    w.initialized_with_pod("on-demand", "", "labels: {test: value},").await;
    w.web_drifted().await;
    w.disruption_says("DisruptionBlocked", "Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])").await;
    w.not_disrupted().await;
}
