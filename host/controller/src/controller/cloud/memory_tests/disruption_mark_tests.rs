//! The disruption taint and `DisruptionReason` condition through the disruption reconciler:
//! written on a command's candidates, removed when the command fails or when nothing owns
//! them, read back from the API as Karpenter's disruption suite reads them.

use super::{World, condition_status, taint_keys};
use crate::controller::disruption::Disruption;
use crate::controller::runner::Reconciler;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tenon_api::wellknown::{self as wk, condition};
use tenon_api::{NodeClaim, NodePool};

impl World {
    /// NodePool `default`'s `spec.disruption` merged with `disruption` (JSON), once cached.
    pub(super) async fn pool_disruption(&self, disruption: serde_json::Value) {
        let patch = serde_json::json!({"spec": {"disruption": disruption}});
        let pools: Api<NodePool> = Api::all(self.client.clone());
        let written = pools.patch("default", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        self.until("the NodePool's change in the cache", |c| {
            c.stores.nodepools.state().iter().any(|p| p.metadata.resource_version == written.metadata.resource_version)
        })
        .await;
    }

    /// Whether Node `node-a` carries the disruption taint and NodeClaim `default-abcde` the
    /// `DisruptionReason` condition (its status, if any), as written.
    async fn marks(&self) -> (bool, Option<String>) {
        let node = Api::<Node>::all(self.client.clone()).get("node-a").await.unwrap();
        let nc = Api::<NodeClaim>::all(self.client.clone()).get("default-abcde").await.unwrap();
        let conditions = nc.status.map(|s| s.conditions).unwrap_or_default();
        (
            taint_keys(&node).iter().any(|t| t == wk::TAINT_DISRUPTED),
            condition_status(&conditions, condition::DISRUPTION_REASON),
        )
    }

    /// NodeClaims other than `default-abcde` (replacements).
    async fn replacements(&self) -> Vec<NodeClaim> {
        let all = Api::<NodeClaim>::all(self.client.clone()).list(&Default::default()).await.unwrap().items;
        all.into_iter().filter(|nc| nc.metadata.name.as_deref() != Some("default-abcde")).collect()
    }
}

/// karpenter:pkg/controllers/disruption/suite_test.go:598
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marks_left_by_an_earlier_disruption_are_removed() {
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "", "").await;
    w.pool_disruption(serde_json::json!({"consolidateAfter": "Never"})).await;
    // A disruption that did not finish (a restart) left its taint and condition.
    let taint = serde_json::json!({"spec": {"taints": [{"key": wk::TAINT_DISRUPTED, "effect": "NoSchedule"}]}});
    Api::<Node>::all(w.client.clone()).patch("node-a", &PatchParams::default(), &Patch::Merge(&taint)).await.unwrap();
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    let mut nc = claims.get("default-abcde").await.unwrap();
    let status = nc.status.get_or_insert_with(Default::default);
    crate::controller::conditions::set_condition(
        &mut status.conditions,
        condition::DISRUPTION_REASON,
        true,
        "Underutilized",
        "",
        nc.metadata.generation,
    );
    let st = serde_json::json!({"status": {"conditions": status.conditions}});
    claims.patch_status("default-abcde", &PatchParams::default(), &Patch::Merge(&st)).await.unwrap();
    assert_eq!(w.marks().await, (true, Some("True".into())));
    w.until("the marks in the cache", |c| {
        c.stores.nodes.state().iter().any(|n| taint_keys(n).iter().any(|t| t == wk::TAINT_DISRUPTED))
            && c.stores.nodeclaims.state().iter().any(|n| {
                n.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == condition::DISRUPTION_REASON))
            })
    })
    .await;
    Disruption::new(w.ctx.clone()).reconcile().await.unwrap();
    assert_eq!(w.marks().await, (false, None), "no command owns them: both removed");
}

impl World {
    /// Runs disruption rounds until a replacement for `default-abcde` is created (asserting
    /// the candidate marked), deletes that replacement, and runs rounds until the candidate
    /// is unmarked (asserting it stays).
    async fn marked_until_its_replacement_goes(&self) {
        let mut disruption = Disruption::new(self.ctx.clone());
        self.disruption_until(&mut disruption, "a replacement", || async { !self.replacements().await.is_empty() })
            .await;
        assert_eq!(self.marks().await, (true, Some("True".into())), "the candidate is marked while it is replaced");
        // The provisioner's pass sees the replacement in the cache (it runs beside the
        // disruption reconciler in the controller) and takes it off the not-yet-seen list.
        self.until("the replacement in the cache", |c| c.stores.nodeclaims.state().len() == 2).await;
        self.ctx.cluster().forget_seen(&self.ctx.objects());
        // The replacement fails: it is deleted before it is initialized.
        let replacement = self.replacements().await.remove(0).metadata.name.unwrap();
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        claims.delete(&replacement, &Default::default()).await.unwrap();
        let no_finalizer = serde_json::json!({"metadata": {"finalizers": null}});
        let _ = claims.patch(&replacement, &PatchParams::default(), &Patch::Merge(&no_finalizer)).await;
        self.until("the replacement gone from the cache", |c| {
            c.stores.nodeclaims.state().iter().all(|n| n.metadata.name.as_deref() == Some("default-abcde"))
        })
        .await;
        self.disruption_until(&mut disruption, "the candidate unmarked", || async {
            self.marks().await == (false, None)
        })
        .await;
        let nc = claims.get("default-abcde").await.unwrap();
        assert!(nc.metadata.deletion_timestamp.is_none(), "the candidate stays");
    }
}

/// karpenter:pkg/controllers/disruption/suite_test.go:625
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_candidate_is_marked_and_unmarked_when_its_replacement_goes() {
    let w = World::new().await;
    // A 2-CPU node holding 100m: a smaller on-demand node would do.
    w.initialized_with_pod("on-demand", "", "").await;
    w.marked_until_its_replacement_goes().await;
}

/// karpenter:pkg/controllers/disruption/drift_test.go:920
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drifted_node_is_unmarked_when_its_replacement_goes() {
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "", "").await;
    // Launched from a NodePool template that has changed since.
    w.pool_disruption(serde_json::json!({"consolidateAfter": "Never"})).await;
    let stale = serde_json::json!({"metadata": {"annotations": {
        wk::ANNOTATION_NODEPOOL_HASH: "launched-from-an-older-template",
        wk::ANNOTATION_NODEPOOL_HASH_VERSION: tenon_api::hash::NODEPOOL_HASH_VERSION,
    }}});
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    let written = claims.patch("default-abcde", &PatchParams::default(), &Patch::Merge(&stale)).await.unwrap();
    w.until("the drifted NodeClaim in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
    })
    .await;
    w.marked_until_its_replacement_goes().await;
    let nc = claims.get("default-abcde").await.unwrap();
    let conditions = nc.status.map(|s| s.conditions).unwrap_or_default();
    assert_eq!(condition_status(&conditions, condition::DRIFTED).as_deref(), Some("True"), "still drifted");
}
