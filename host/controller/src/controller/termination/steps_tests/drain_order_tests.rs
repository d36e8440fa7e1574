//! Karpenter's drain-order, grace-period and volume cases of the node termination suite:
//! which pods a step evicts or deletes, read back from the API (deletion timestamps, the
//! grace a deletion was given, conditions) until the Node is gone.

use super::{World, condition_of, drained, node_name, now};
use crate::controller::termination::NodeProgress;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use tenon_api::wellknown::{self as wk, condition};

impl World {
    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), "default")
    }

    /// Whether pod `name` is being deleted (or gone).
    async fn deleting(&self, name: &str) -> bool {
        self.evicted(name).await
    }

    /// NodeClaim `nc` (instance `i-1`) with a terminationGracePeriod of `tgp`, its pods
    /// `pods` (name, grace seconds, extra fields), then deleted: the termination stamped on
    /// the NodeClaim and its Node deleted, as the NodeClaim's first termination step does.
    /// The time the grace period started.
    async fn deleted_with_grace(&self, tgp: &str, pods: &[(&str, i64, serde_json::Value)]) -> i64 {
        self.registered_node("nc", "i-1", Some(tgp)).await;
        for (name, grace, extra) in pods {
            self.pod(name, &node_name("i-1"), *grace, extra.clone()).await;
        }
        self.claims().delete("nc", &DeleteParams::default()).await.unwrap();
        let t0 = now();
        self.claim_step("nc", t0).await.unwrap();
        let nc = self.get_claim("nc").await.unwrap();
        assert!(
            nc.metadata.annotations.unwrap_or_default().contains_key(wk::ANNOTATION_NODECLAIM_TERMINATION_TIME),
            "the NodeClaim's termination is stamped"
        );
        t0
    }
}

fn do_not_disrupt() -> serde_json::Value {
    json!({"metadata": {"annotations": {wk::ANNOTATION_DO_NOT_DISRUPT: "true"}}})
}

fn priority_class(name: &str) -> serde_json::Value {
    json!({"spec": {"priorityClassName": name}})
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:350
#[tokio::test]
async fn a_deleted_nodeclaim_with_a_grace_period_is_stamped_while_its_node_is_deleted() {
    let w = World::new().await;
    w.deleted_with_grace("300s", &[]).await;
    let node = w.get_node("i-1").await.expect("the Node is being deleted, not gone");
    assert!(node.metadata.deletion_timestamp.is_some());
    assert!(w.get_claim("nc").await.is_some(), "the NodeClaim waits for its Node");
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:373
#[tokio::test]
async fn a_recorded_termination_time_is_kept_as_it_was() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", Some("300s")).await;
    let stamped =
        json!({"metadata": {"annotations": {wk::ANNOTATION_NODECLAIM_TERMINATION_TIME: "2024-04-01T12:00:00-05:00"}}});
    w.claims().patch("nc", &PatchParams::default(), &Patch::Merge(&stamped)).await.unwrap();
    w.claims().delete("nc", &DeleteParams::default()).await.unwrap();
    w.claim_step("nc", now()).await.unwrap();
    let node = w.get_node("i-1").await.expect("the Node is being deleted, not gone");
    assert!(node.metadata.deletion_timestamp.is_some(), "the NodeClaim's deletion deletes its Node");
    let annotations = w.get_claim("nc").await.expect("the NodeClaim waits for its Node").metadata.annotations;
    assert_eq!(
        annotations.unwrap_or_default(),
        std::collections::BTreeMap::from([(
            wk::ANNOTATION_NODECLAIM_TERMINATION_TIME.to_string(),
            "2024-04-01T12:00:00-05:00".to_string()
        )])
    );
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:485
#[tokio::test]
async fn non_critical_pods_are_evicted_before_critical_ones() {
    let w = World::new().await;
    let pods = [
        ("app", json!({})),
        ("node-critical", priority_class("system-node-critical")),
        ("cluster-critical", priority_class("system-cluster-critical")),
    ];
    assert_eq!(drained(&w, &pods).await, [true, false, false], "the critical pods wait for the others");
    // The evicted pod (no grace) is gone: the next step evicts the critical ones.
    let t = now();
    assert!(matches!(w.node_step("i-1", t + 1).await, NodeProgress::Draining(_) | NodeProgress::Waiting));
    assert!(w.deleting("node-critical").await && w.deleting("cluster-critical").await);
    w.drained_and_gone("i-1").await;
}

/// A DaemonSet's pod, with `extra` fields merged in.
fn of_daemonset(extra: serde_json::Value) -> serde_json::Value {
    let mut v = json!({"metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds",
        "uid": "00000000-0000-0000-0000-0000000000d5", "controller": true}]}});
    if let Some(spec) = extra.get("spec") {
        v["spec"] = spec.clone();
    }
    v
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:415
#[tokio::test]
async fn pods_leave_tier_by_tier_each_waiting_for_the_one_before() {
    let w = World::new().await;
    let tiers: [&[(&str, serde_json::Value)]; 4] = [
        &[("app", json!({}))],
        &[("ds", of_daemonset(json!({})))],
        &[
            ("node-critical", priority_class("system-node-critical")),
            ("cluster-critical", priority_class("system-cluster-critical")),
        ],
        &[
            ("ds-node-critical", of_daemonset(priority_class("system-node-critical"))),
            ("ds-cluster-critical", of_daemonset(priority_class("system-cluster-critical"))),
        ],
    ];
    let all: Vec<(&str, serde_json::Value)> = tiers.iter().flat_map(|t| t.iter().cloned()).collect();
    let evicted = drained(&w, &all).await;
    assert_eq!(evicted, [true, false, false, false, false, false], "the plain pod first");
    // Each step: the tier before is gone (evicted without grace), the next one goes.
    let t0 = now();
    for (i, tier) in tiers.iter().enumerate().skip(1) {
        assert!(matches!(w.node_step("i-1", t0 + i as i64).await, NodeProgress::Draining(_) | NodeProgress::Waiting));
        for (name, _) in tier.iter() {
            assert!(w.deleting(name).await, "tier {i}: {name} evicted");
        }
        for later in &tiers[i + 1..] {
            for (name, _) in later.iter() {
                assert!(!w.deleting(name).await, "tier {i}: {name} waits");
            }
        }
    }
    w.drained_and_gone("i-1").await;
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:675
#[tokio::test]
async fn a_pod_stuck_terminating_past_its_grace_period_does_not_hold_the_node() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    // Its kubelet never finishes it (the emulator holds it for its grace period).
    w.pod("stuck", &node_name("i-1"), 30, json!({})).await;
    w.nodes().delete(&node_name("i-1"), &DeleteParams::default()).await.unwrap();
    let t0 = now();
    assert!(matches!(w.node_step("i-1", t0).await, NodeProgress::Draining(_)));
    assert!(w.deleting("stuck").await, "evicted");
    assert!(w.get_node("i-1").await.is_some(), "held while it terminates");
    // A minute and a half later it is still there, past its grace period: no longer waited for.
    w.node_until_released("i-1", t0 + 90, 8).await;
    assert!(w.get_node("i-1").await.is_none(), "the Node is gone");
    assert!(w.pods().get_opt("stuck").await.unwrap().is_some(), "the stuck pod is still there");
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:751
#[tokio::test]
async fn a_pod_whose_grace_would_outlast_the_node_s_is_deleted_at_once() {
    let w = World::new().await;
    let t0 = w.deleted_with_grace("300s", &[("db", 300, do_not_disrupt())]).await;
    w.node_step("i-1", t0 + 10).await;
    assert!(w.get_node("i-1").await.is_some());
    let pod = w.pods().get("db").await.expect("deleting, not gone");
    assert!(pod.metadata.deletion_timestamp.is_some(), "deleted despite do-not-disrupt");
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:777
#[tokio::test]
async fn a_past_deadline_critical_pod_is_not_gated_behind_a_non_critical_one() {
    let w = World::new().await;
    let pods = [("web", 30, json!({})), ("agent", 600, priority_class("system-node-critical"))];
    let t0 = w.deleted_with_grace("300s", &pods).await;
    w.node_step("i-1", t0 + 10).await;
    let agent = w.pods().get("agent").await.expect("deleting, not gone");
    assert!(agent.metadata.deletion_timestamp.is_some(), "its 600 s would outlast the node's 290 s");
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:810
#[tokio::test]
async fn a_pod_is_deleted_only_once_its_grace_would_outlast_the_node_s() {
    let w = World::new().await;
    let t0 = w.deleted_with_grace("300s", &[("db", 60, do_not_disrupt())]).await;
    assert!(matches!(w.node_step("i-1", t0 + 90).await, NodeProgress::Draining(_)));
    assert!(super::tainted(&w.get_node("i-1").await.unwrap()), "the Node is tainted while it drains");
    let nc = w.get_claim("nc").await.unwrap();
    assert_eq!(condition_of(&nc, condition::DRAINED), Some(("Unknown".into(), "Draining".into())));
    assert!(w.get_node("i-1").await.is_some());
    assert!(w.pods().get("db").await.unwrap().metadata.deletion_timestamp.is_none(), "210 s left, 60 s needed");
    w.node_step("i-1", t0 + 265).await;
    assert!(w.pods().get("db").await.unwrap().metadata.deletion_timestamp.is_some(), "35 s left, 60 s needed");
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:845
#[tokio::test]
async fn a_pod_terminating_past_the_node_s_deadline_is_deleted_again_with_the_time_left() {
    let w = World::new().await;
    let t0 = w.deleted_with_grace("300s", &[("db", 6000, do_not_disrupt())]).await;
    // Already terminating, with a grace period ending long after the node's.
    w.pods().delete("db", &DeleteParams::default()).await.unwrap();
    assert_eq!(w.pods().get("db").await.unwrap().metadata.deletion_grace_period_seconds, Some(6000));
    w.node_step("i-1", t0 + 90).await;
    assert!(w.get_node("i-1").await.is_some());
    let nc = w.get_claim("nc").await.unwrap();
    assert_eq!(condition_of(&nc, condition::DRAINED), Some(("Unknown".into(), "Draining".into())));
    let grace = w.pods().get("db").await.unwrap().metadata.deletion_grace_period_seconds.expect("deleting");
    assert!((195..=225).contains(&grace), "about the node's 210 s left: {grace}");
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:935
#[tokio::test]
async fn only_volume_attachments_of_drainable_pods_hold_the_instance() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    let vas: Api<VolumeAttachment> = Api::all(w.client.clone());
    for (name, volume) in [("va-foo", "foo"), ("va-bar", "bar")] {
        let va: VolumeAttachment = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node_name("i-1"), "source": {"persistentVolumeName": volume}},
        }))
        .unwrap();
        vas.create(&PostParams::default(), &va).await.unwrap();
    }
    let pvc: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"volumeName": "bar", "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }))
    .unwrap();
    Api::<PersistentVolumeClaim>::namespaced(w.client.clone(), "default")
        .create(&PostParams::default(), &pvc)
        .await
        .unwrap();
    // A pod the drain leaves (it tolerates the disruption taint) uses volume `bar`.
    let stays = json!({"spec": {
        "tolerations": [{"key": wk::TAINT_DISRUPTED, "operator": "Exists"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
    }});
    w.pod("stays", &node_name("i-1"), 30, stays).await;
    w.nodes().delete(&node_name("i-1"), &DeleteParams::default()).await.unwrap();
    let t0 = now();
    // Tainted and drained (the pod that stays is not waited for), then the volumes.
    for s in [0, 6, 7] {
        assert_eq!(w.node_step("i-1", t0 + s).await, NodeProgress::Waiting);
    }
    assert!(w.get_node("i-1").await.is_some());
    let nc = w.get_claim("nc").await.unwrap();
    assert_eq!(
        condition_of(&nc, condition::VOLUMES_DETACHED),
        Some(("Unknown".into(), "AwaitingVolumeDetachment".into()))
    );
    vas.delete("va-foo", &DeleteParams::default()).await.unwrap();
    assert_eq!(w.node_step("i-1", t0 + 8).await, NodeProgress::Waiting);
    assert!(w.get_node("i-1").await.is_some());
    assert_eq!(condition_of(&w.get_claim("nc").await.unwrap(), condition::VOLUMES_DETACHED).unwrap().0, "True");
    w.drained_and_gone("i-1").await;
}

/// A pod two PodDisruptionBudgets select is not sent to the eviction API (which refuses it
/// with a 500): the drain waits and says why on the Node (see docs/karpenter-differences.md,
/// "A pod under two PodDisruptionBudgets is not evicted").
#[tokio::test]
async fn a_pod_two_pdbs_select_is_not_evicted_and_the_node_says_why() {
    use k8s_openapi::api::core::v1::Event;
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    w.pod("web", &node_name("i-1"), 1, json!({"metadata": {"labels": {"app": "web"}}})).await;
    w.pdb("web", 1).await;
    w.pdb_named("web-too", "web", 1).await;
    w.nodes().delete(&node_name("i-1"), &DeleteParams::default()).await.unwrap();
    let step = w.node_step("i-1", now()).await;
    let NodeProgress::Draining(Some(message)) = step else { panic!("the drain waits: {step:?}") };
    assert!(message.contains("more than one PodDisruptionBudget"), "{message}");
    assert!(!w.deleting("web").await, "not evicted");
    assert!(!w.metrics.render().contains("karpenter_pods_eviction_requests_total{"), "no eviction was asked for");
    let events = Api::<Event>::all(w.client.clone()).list(&Default::default()).await.unwrap().items;
    let said = events.iter().find(|e| e.reason.as_deref() == Some("FailedDraining")).expect("a FailedDraining Event");
    assert_eq!(said.involved_object.name.as_deref(), Some(node_name("i-1").as_str()));
    assert_eq!(said.message.as_deref(), Some(message.as_str()));
}
