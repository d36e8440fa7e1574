//! Karpenter's NodeClaim disruption conditions through the disruption reconciler: after a
//! round, `Drifted` and `Consolidatable` read back from the NodeClaim as written — set while
//! they hold, removed (not written False) once they do not.

use super::World;
use crate::controller::disruption::Disruption;
use crate::controller::runner::Reconciler;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tenon_api::wellknown::{self as wk, condition};
use tenon_api::{EC2NodeClass, NodeClaim, NodePool};

/// A condition as written: its status and reason.
type Written = Option<(String, String)>;

impl World {
    /// Condition `t` of NodeClaim `default-abcde`, read from the API.
    async fn written(&self, t: &str) -> Written {
        let nc = Api::<NodeClaim>::all(self.client.clone()).get("default-abcde").await.unwrap();
        let conditions = nc.status.map(|s| s.conditions).unwrap_or_default();
        conditions.into_iter().find(|c| c.type_ == t).map(|c| (c.status, c.reason))
    }

    /// One disruption round; then condition `t` as written.
    async fn after_a_round(&self, t: &str) -> Written {
        Disruption::new(self.ctx.clone()).reconcile().await.unwrap();
        self.written(t).await
    }

    /// Conditions `types` recorded True on NodeClaim `default-abcde` (as an earlier round
    /// would have left them), once cached.
    async fn recorded(&self, types: &[&str]) {
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        let mut nc = claims.get("default-abcde").await.unwrap();
        let status = nc.status.get_or_insert_with(Default::default);
        for t in types {
            crate::controller::conditions::set_condition(&mut status.conditions, t, true, t, "", None);
        }
        let st = serde_json::json!({"status": {"conditions": status.conditions}});
        let written = claims.patch_status("default-abcde", &PatchParams::default(), &Patch::Merge(&st)).await.unwrap();
        self.cached(&written).await;
    }

    /// NodeClaim `default-abcde`'s condition `t` written with `status` (`Unknown`, `False`).
    async fn claim_condition_is(&self, t: &str, status: &str) {
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        let mut nc = claims.get("default-abcde").await.unwrap();
        let conditions = &mut nc.status.get_or_insert_with(Default::default).conditions;
        let c = conditions.iter_mut().find(|c| c.type_ == t).expect("the condition");
        c.status = status.into();
        c.reason = "NotYet".into();
        let st = serde_json::json!({"status": {"conditions": conditions}});
        let written = claims.patch_status("default-abcde", &PatchParams::default(), &Patch::Merge(&st)).await.unwrap();
        self.cached(&written).await;
    }

    /// NodePool `default`'s `spec.template` merged with `template` (JSON), once cached.
    async fn template_is(&self, template: serde_json::Value) {
        let patch = serde_json::json!({"spec": {"template": template}});
        let pools: Api<NodePool> = Api::all(self.client.clone());
        let written = pools.patch("default", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        self.until("the NodePool's change in the cache", |c| {
            c.stores.nodepools.state().iter().any(|p| p.metadata.resource_version == written.metadata.resource_version)
        })
        .await;
    }

    /// NodePool `default` requiring `requirements` (JSON list), once cached.
    async fn requires(&self, requirements: serde_json::Value) {
        self.template_is(serde_json::json!({"spec": {"requirements": requirements}})).await;
    }

    /// The EC2NodeClass now selects other images: every instance launched from it has
    /// drifted, as the cloud provider sees it.
    async fn cloud_drifts(&self) {
        let classes: Api<EC2NodeClass> = Api::all(self.client.clone());
        let mut status = classes.get("default").await.unwrap().status.expect("resolved");
        for ami in &mut status.amis {
            ami.id = format!("{}-newer", ami.id);
        }
        let st = serde_json::json!({"status": {"amis": status.amis}});
        let written = classes.patch_status("default", &PatchParams::default(), &Patch::Merge(&st)).await.unwrap();
        self.until("the new images in the cache", |c| {
            c.stores
                .nodeclasses
                .state()
                .iter()
                .any(|n| n.metadata.resource_version == written.metadata.resource_version)
        })
        .await;
    }

    /// Label `key: value` on NodeClaim `default-abcde` and Node `node-a`, once cached.
    async fn labelled(&self, key: &str, value: &str) {
        let patch = serde_json::json!({"metadata": {"labels": {key: value}}});
        let params = PatchParams::default();
        Api::<Node>::all(self.client.clone()).patch("node-a", &params, &Patch::Merge(&patch)).await.unwrap();
        let written = Api::<NodeClaim>::all(self.client.clone())
            .patch("default-abcde", &params, &Patch::Merge(&patch))
            .await
            .unwrap();
        self.cached(&written).await;
        self.until("the Node's label in the cache", |c| {
            c.stores.nodes.state().iter().any(|n| n.metadata.labels.as_ref().is_some_and(|l| l.get(key).is_some()))
        })
        .await;
    }

    /// The first round stamps the NodeClaim with its NodePool's hash (it was created without
    /// one; the stamp's write leaves that round's condition writes stale, so they are
    /// refused and written by the next round); waits until the cache shows the stamp.
    async fn stamped(&self) {
        Disruption::new(self.ctx.clone()).reconcile().await.unwrap();
        let nc = Api::<NodeClaim>::all(self.client.clone()).get("default-abcde").await.unwrap();
        let version = nc.metadata.annotations.as_ref().and_then(|a| a.get(wk::ANNOTATION_NODEPOOL_HASH_VERSION));
        assert_eq!(version.map(String::as_str), Some(tenon_api::hash::NODEPOOL_HASH_VERSION));
        self.cached(&nc).await;
    }
}

fn is_true(reason: &str) -> Written {
    Some(("True".into(), reason.into()))
}

/// A node with a pod, under a NodePool with `disruption`, its NodeClaim stamped with the
/// NodePool's hash (as Karpenter's suites create theirs).
async fn stamped_world(disruption: serde_json::Value) -> World {
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "", "").await;
    w.pool_disruption(disruption).await;
    w.stamped().await;
    w
}

/// [`stamped_world`] under a NodePool that never consolidates (drift alone is judged).
async fn drift_world() -> World {
    stamped_world(serde_json::json!({"consolidateAfter": "Never"})).await
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:83
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_the_cloud_provider_sees_is_written() {
    let w = drift_world().await;
    assert_eq!(w.after_a_round(condition::DRIFTED).await, None);
    w.cloud_drifts().await;
    assert_eq!(w.after_a_round(condition::DRIFTED).await, is_true("AMIDrift"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:134
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn static_drift_is_written_before_cloud_drift() {
    let w = drift_world().await;
    w.cloud_drifts().await;
    w.drifted("default-abcde").await;
    assert_eq!(w.after_a_round(condition::DRIFTED).await, is_true("NodePoolDrifted"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:151
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requirement_drift_is_written_before_cloud_drift() {
    let w = drift_world().await;
    w.cloud_drifts().await;
    w.requires(serde_json::json!([{"key": "node.kubernetes.io/instance-type", "operator": "DoesNotExist"}])).await;
    assert_eq!(w.after_a_round(condition::DRIFTED).await, is_true("RequirementsDrifted"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:198
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drifted_is_removed_once_no_longer_drifted() {
    let w = drift_world().await;
    w.recorded(&[condition::DRIFTED]).await;
    assert_eq!(w.written(condition::DRIFTED).await, is_true(condition::DRIFTED));
    assert_eq!(w.after_a_round(condition::DRIFTED).await, None, "removed, not written False");
}

/// Karpenter's NodeRequirement Drift table: the NodePool requires `before`, then `after`;
/// whether the node (labelled as launched, plus `labels`) has drifted.
async fn requirement_drift(before: serde_json::Value, after: serde_json::Value, labels: &[(&str, &str)]) -> Written {
    let w = drift_world().await;
    for (k, v) in labels {
        w.labelled(k, v).await;
    }
    w.requires(before).await;
    assert_eq!(w.after_a_round(condition::DRIFTED).await, None, "not drifted under the first requirements");
    w.requires(after).await;
    w.after_a_round(condition::DRIFTED).await
}

fn req(key: &str, operator: &str, values: &[&str]) -> serde_json::Value {
    serde_json::json!({"key": key, "operator": operator, "values": values})
}

const CT: &str = "karpenter.sh/capacity-type";
const OS: &str = "kubernetes.io/os";

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:228
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_requirement_drifts_the_node() {
    let before = serde_json::json!([
        req(CT, "In", &["on-demand"]),
        req("kubernetes.io/arch", "In", &["amd64"]),
        req(OS, "In", &["linux"])
    ]);
    let after = serde_json::json!([req(CT, "In", &["spot"])]);
    assert_eq!(requirement_drift(before, after, &[]).await, is_true("RequirementsDrifted"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:261
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reduced_requirement_drifts_the_node() {
    let before = serde_json::json!([req(CT, "In", &["on-demand"]), req(OS, "In", &["linux", "windows"])]);
    let after = serde_json::json!([req(CT, "In", &["on-demand"]), req(OS, "In", &["windows"])]);
    assert_eq!(requirement_drift(before, after, &[]).await, is_true("RequirementsDrifted"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:309
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requirement_set_to_does_not_exist_drifts_the_node() {
    let before = serde_json::json!([req(CT, "In", &["on-demand"]), req(OS, "In", &["linux"])]);
    let after = serde_json::json!([req(CT, "In", &["on-demand"]), req(OS, "DoesNotExist", &[])]);
    assert_eq!(requirement_drift(before, after, &[]).await, is_true("RequirementsDrifted"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:325
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_raised_lower_bound_drifts_the_node() {
    let before = serde_json::json!([req(CT, "In", &["on-demand"]), req("test-label", "Gt", &["2"])]);
    let after = serde_json::json!([req(CT, "In", &["on-demand"]), req("test-label", "Gt", &["10"])]);
    assert_eq!(requirement_drift(before, after, &[("test-label", "5")]).await, is_true("RequirementsDrifted"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:341
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lowered_upper_bound_drifts_the_node() {
    let before = serde_json::json!([req(CT, "In", &["on-demand"]), req("test-label", "Lt", &["5"])]);
    let after = serde_json::json!([req(CT, "In", &["on-demand"]), req("test-label", "Lt", &["1"])]);
    assert_eq!(requirement_drift(before, after, &[("test-label", "2")]).await, is_true("RequirementsDrifted"));
}

/// Karpenter's NodePool Static Drift table: the NodeClaim stamped with its NodePool's hash,
/// then the template changed by `template` (JSON merge).
async fn static_drift(template: serde_json::Value) {
    let w = drift_world().await;
    assert_eq!(w.after_a_round(condition::DRIFTED).await, None, "not drifted under the stamped template");
    w.template_is(template.clone()).await;
    assert_eq!(w.after_a_round(condition::DRIFTED).await, is_true("NodePoolDrifted"), "{template}");
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:474
/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:475
/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:476
/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:477
/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:479
/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:480
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_to_a_static_template_field_drifts_the_node() {
    for template in [
        serde_json::json!({"metadata": {"annotations": {"keyAnnotationTest": "valueAnnotationTest"}}}),
        serde_json::json!({"metadata": {"labels": {"keyLabelTest": "valueLabelTest"}}}),
        serde_json::json!({"spec": {"taints": [{"key": "keytest2taint", "effect": "NoExecute"}]}}),
        serde_json::json!({"spec": {"startupTaints": [{"key": "keytest2taint", "effect": "NoExecute"}]}}),
        serde_json::json!({"spec": {"expireAfter": "100m"}}),
        serde_json::json!({"spec": {"terminationGracePeriod": "100s"}}),
    ] {
        static_drift(template).await;
    }
}

/// karpenter:pkg/controllers/nodeclaim/disruption/consolidation_test.go:125
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consolidatable_is_removed_when_consolidate_after_is_never() {
    let w = drift_world().await;
    w.recorded(&[condition::CONSOLIDATABLE]).await;
    assert_eq!(w.after_a_round(condition::CONSOLIDATABLE).await, None, "removed, not written False");
}

/// karpenter:pkg/controllers/nodeclaim/disruption/consolidation_test.go:134
/// karpenter:pkg/controllers/nodeclaim/disruption/consolidation_test.go:143
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consolidatable_is_removed_from_a_nodeclaim_not_initialized() {
    for status in ["Unknown", "False"] {
        let w = stamped_world(serde_json::json!({"consolidateAfter": "0s"})).await;
        w.recorded(&[condition::CONSOLIDATABLE]).await;
        w.claim_condition_is(condition::INITIALIZED, status).await;
        assert_eq!(w.after_a_round(condition::CONSOLIDATABLE).await, None, "Initialized {status}");
    }
}

/// karpenter:pkg/controllers/nodeclaim/disruption/suite_test.go:125
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drifted_and_consolidatable_are_written_together() {
    let w = stamped_world(serde_json::json!({"consolidateAfter": "0s"})).await;
    w.drifted("default-abcde").await;
    // Drift is acted on before consolidation: both conditions are written by the same round.
    Disruption::new(w.ctx.clone()).reconcile().await.unwrap();
    assert_eq!(w.written(condition::DRIFTED).await, is_true("NodePoolDrifted"));
    assert_eq!(w.written(condition::CONSOLIDATABLE).await, is_true("Consolidatable"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/suite_test.go:170
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drifted_and_consolidatable_are_removed_together() {
    let w = drift_world().await;
    w.recorded(&[condition::DRIFTED, condition::CONSOLIDATABLE]).await;
    Disruption::new(w.ctx.clone()).reconcile().await.unwrap();
    assert_eq!(w.written(condition::DRIFTED).await, None);
    assert_eq!(w.written(condition::CONSOLIDATABLE).await, None);
}
