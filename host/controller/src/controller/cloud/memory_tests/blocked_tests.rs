//! Karpenter's disruption suite's blocked candidates through the disruption reconciler: a
//! node held by a PDB or by `karpenter.sh/do-not-disrupt` gets the DisruptionBlocked Event
//! on its Node and NodeClaim, and neither is tainted or deleted; a node consolidation cannot
//! take says why with Unconsolidatable.

use super::World;
use crate::controller::disruption::Disruption;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tenon_api::NodeClaim;

impl World {
    /// PDB `name` over pods labelled `test: value` that allows no disruption now.
    pub(super) async fn blocking_pdb(&self, name: &str) {
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

    /// Pod `name` on `node-a`, controlled by a `kind` (DaemonSet, Node: a mirror pod), with
    /// `metadata` merged in; once cached.
    async fn pod_owned_by(&self, name: &str, kind: &str, metadata: serde_json::Value) {
        let api_version = if kind == "Node" { "v1" } else { "apps/v1" };
        let mut pod = serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "ownerReferences": [
                {"apiVersion": api_version, "kind": kind, "name": "owner", "uid": "00000000-0000-0000-0000-000000000002", "controller": true}]},
            "spec": {"nodeName": "node-a", "containers": [{"name": "app", "image": "app"}]},
            "status": {"phase": "Running"},
        });
        if let (Some(meta), Some(extra)) = (pod["metadata"].as_object_mut(), metadata.as_object()) {
            meta.extend(extra.clone());
        }
        let pod: Pod = serde_json::from_value(pod).unwrap();
        Api::<Pod>::namespaced(self.client.clone(), "default").create(&PostParams::default(), &pod).await.unwrap();
        self.until(&format!("pod {name} in the cache"), |c| {
            c.stores.pods.state().iter().any(|p| p.metadata.name.as_deref() == Some(name))
        })
        .await;
    }

    /// NodeClaim `name` annotated `karpenter.sh/do-not-disrupt: "true"`, once cached.
    pub(super) async fn claim_held(&self, name: &str) {
        let held = serde_json::json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}});
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        let written = claims.patch(name, &PatchParams::default(), &Patch::Merge(&held)).await.unwrap();
        self.until("the annotation in the cache", |c| {
            c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
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
    w.pod_owned_by("agent", "DaemonSet", serde_json::json!({"labels": {"test": "value"}})).await;
    w.disruption_says("DisruptionBlocked", "Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])").await;
    w.not_disrupted().await;
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1291
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn do_not_disrupt_on_the_nodeclaim_blocks_it() {
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "", "").await;
    w.claim_held("default-abcde").await;
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

/// karpenter:pkg/controllers/disruption/suite_test.go:957
/// karpenter:pkg/controllers/disruption/suite_test.go:995
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_do_not_disrupt_mirror_or_daemonset_pod_blocks_its_node() {
    for kind in ["Node", "DaemonSet"] {
        let w = World::new().await;
        w.initialized_with_pod("on-demand", "", "").await;
        let held = serde_json::json!({"annotations": {"karpenter.sh/do-not-disrupt": "true"}});
        w.pod_owned_by("held", kind, held).await;
        let why = "Pod has \"karpenter.sh/do-not-disrupt\" annotation (Pod=default/held)";
        w.disruption_says("DisruptionBlocked", why).await;
        w.not_disrupted().await;
    }
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1095
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_do_not_disrupt_pod_blocks_graceful_disruption_under_a_grace_period() {
    let w = World::new().await;
    let held = "annotations: {karpenter.sh/do-not-disrupt: \"true\"},";
    w.initialized_with_pod("on-demand", "  terminationGracePeriod: 300s\n", held).await;
    let why = "Pod has \"karpenter.sh/do-not-disrupt\" annotation (Pod=default/web)";
    w.disruption_says("DisruptionBlocked", why).await;
    w.not_disrupted().await;
}

/// A node with a pod, consolidating at once under `policy`; its NodeClaim and Node without
/// label `drop` (when given).
async fn unconsolidatable_world(policy: &str, drop: Option<&str>) -> World {
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "", "").await;
    w.pool_disruption(serde_json::json!({"consolidationPolicy": policy, "consolidateAfter": "0s"})).await;
    if let Some(key) = drop {
        let patch = serde_json::json!({"metadata": {"labels": {key: null}}});
        let params = PatchParams::default();
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(w.client.clone());
        nodes.patch("node-a", &params, &Patch::Merge(&patch)).await.unwrap();
        let claims: Api<NodeClaim> = Api::all(w.client.clone());
        let written = claims.patch("default-abcde", &params, &Patch::Merge(&patch)).await.unwrap();
        w.until("the labels gone from the cache", |c| {
            c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
                && c.stores
                    .nodes
                    .state()
                    .iter()
                    .all(|n| n.metadata.labels.as_ref().is_none_or(|l| !l.contains_key(key)))
        })
        .await;
    }
    w
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:114
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_when_empty_nodepools_node_with_a_pod_says_it_is_not_empty() {
    let w = unconsolidatable_world("WhenEmpty", None).await;
    let why = "NodePool \"default\" has consolidation policy WhenEmpty, but node is not empty";
    w.disruption_says("Unconsolidatable", why).await;
    w.not_disrupted().await;
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:137
/// karpenter:pkg/controllers/disruption/consolidation_test.go:150
/// karpenter:pkg/controllers/disruption/consolidation_test.go:163
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_missing_a_well_known_label_says_why_it_is_not_consolidated() {
    for (key, why) in [
        ("node.kubernetes.io/instance-type", "Instance Type \"\" not found"),
        ("karpenter.sh/capacity-type", "Node does not have label \"karpenter.sh/capacity-type\""),
        ("topology.kubernetes.io/zone", "Node does not have label \"topology.kubernetes.io/zone\""),
    ] {
        let w = unconsolidatable_world("WhenEmptyOrUnderutilized", Some(key)).await;
        w.disruption_says("Unconsolidatable", why).await;
    }
}

/// A drifted node under a terminationGracePeriod holding a pod (`pod_meta`) that may not be
/// evicted (do-not-disrupt, or a PDB allowing nothing when `pdb`): ten disruption rounds
/// create no replacement (the pod could not move to one) and the NodeClaim is still there.
async fn drifted_under_a_grace_period_gets_no_replacement(pod_meta: &str, pdb: bool) {
    let w = World::new().await;
    if pdb {
        w.blocking_pdb("pdb").await;
    }
    w.initialized_with_pod("on-demand", "  terminationGracePeriod: 300s\n", pod_meta).await;
    w.web_drifted().await;
    let mut disruption = Disruption::new(w.ctx.clone());
    w.rounds(&mut disruption, 10).await;
    let claims = w.claims_deleting().await;
    assert_eq!(claims.len(), 1, "pdb {pdb}: no replacement created: {claims:?}");
    assert_eq!(claims[0].0, "default-abcde", "pdb {pdb}: the NodeClaim is still there");
}

/// karpenter:pkg/controllers/disruption/drift_test.go:521
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_node_with_a_do_not_disrupt_pod_under_a_grace_period_is_not_replaced() {
    drifted_under_a_grace_period_gets_no_replacement("annotations: {karpenter.sh/do-not-disrupt: \"true\"},", false)
        .await;
}

/// karpenter:pkg/controllers/disruption/drift_test.go:543
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_node_with_a_pdb_blocked_pod_under_a_grace_period_is_not_replaced() {
    drifted_under_a_grace_period_gets_no_replacement("labels: {test: value},", true).await;
}
