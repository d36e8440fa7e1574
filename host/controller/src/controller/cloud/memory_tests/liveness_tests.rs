//! Karpenter's liveness through the lifecycle reconciler: a NodeClaim not launched within
//! five minutes, or not registered within fifteen, is deleted; each clock runs from its
//! condition's transition.

use super::{World, condition_status};
use crate::controller::nodeclaim::lifecycle::Lifecycle;
use crate::controller::nodepool::status::NodePoolStatusReconciler;
use crate::controller::runner::Reconciler;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tenon_api::wellknown::condition;
use tenon_api::{NodeClaim, NodePool};

impl World {
    /// NodeClaim `name`'s conditions moved to the start of the year (as Karpenter's cases
    /// step their clock past the timeouts); once cached.
    pub(super) async fn backdated(&self, name: &str) {
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        let nc = claims.get(name).await.unwrap();
        let mut conditions = nc.status.unwrap_or_default().conditions;
        assert!(!conditions.is_empty(), "{name} has conditions to backdate");
        for c in conditions.iter_mut() {
            c.last_transition_time = serde_json::from_value(serde_json::json!("2026-01-01T00:00:00Z")).unwrap();
        }
        let status = serde_json::json!({"status": {"conditions": conditions}});
        let written = claims.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
        self.until("the backdated NodeClaim in the cache", |c| {
            c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
        })
        .await;
    }

    /// Three lifecycle passes; whether NodeClaim `name` is then deleted (or being deleted).
    async fn given_up_after_passes(&self, name: &str) -> bool {
        let mut lifecycle = Lifecycle::new(self.ctx.clone());
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        for _ in 0..3 {
            lifecycle.reconcile().await.unwrap();
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        claims.get_opt(name).await.unwrap().is_none_or(|n| n.metadata.deletion_timestamp.is_some())
    }
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:97
/// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:264
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launched_nodeclaim_not_registered_in_fifteen_minutes_is_given_up() {
    let w = World::new().await;
    w.owned_and_launched().await;
    // Created now; launched and awaiting registration since the start of the year.
    assert!(!w.given_up_after_passes("default-abcde").await, "within its registration timeout");
    w.backdated("default-abcde").await;
    assert!(w.given_up_after_passes("default-abcde").await, "past it");
    NodePoolStatusReconciler::new(w.ctx.clone()).reconcile().await.unwrap();
    let pool = Api::<NodePool>::all(w.client.clone()).get("default").await.unwrap();
    let health = condition_status(&pool.status.unwrap_or_default().conditions, condition::NODE_REGISTRATION_HEALTHY);
    assert_eq!(health.as_deref(), Some("Unknown"), "one failure does not make its NodePool unhealthy");
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:100
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_nodeclaim_is_kept_past_its_registration_timeout() {
    let w = World::new().await;
    let nc = w.owned_and_launched().await;
    w.kubelet_registers(nc, &["{key: karpenter.sh/unregistered, effect: NoExecute}".to_string()]).await;
    w.lifecycle_until(&mut Lifecycle::new(w.ctx.clone()), condition::REGISTERED).await;
    w.backdated("default-abcde").await;
    assert!(!w.given_up_after_passes("default-abcde").await, "registered: kept");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(w.client.clone());
    assert!(nodes.get_opt("node-a").await.unwrap().is_some_and(|n| n.metadata.deletion_timestamp.is_none()));
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/launch_test.go:105
/// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:130
/// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:159
/// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:224
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeclaim_not_launched_in_five_minutes_is_given_up() {
    let w = World::new().await;
    w.pool_with(serde_json::json!({})).await;
    w.cloud.fail_launches(Some("RequestLimitExceeded"));
    w.create::<NodeClaim>(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: default-abcde, labels: {karpenter.sh/nodepool: default}}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n  requirements: []\n",
    )
    .await;
    w.until("the NodeClaim in the cache", |c| !c.stores.nodeclaims.state().is_empty()).await;
    assert!(!w.given_up_after_passes("default-abcde").await, "within its launch timeout");
    let nc = Api::<NodeClaim>::all(w.client.clone()).get("default-abcde").await.unwrap();
    let conditions = nc.status.unwrap_or_default().conditions;
    let launched = conditions.iter().find(|c| c.type_ == condition::LAUNCHED).expect("a Launched condition");
    // The launch error's reason and message, as Karpenter writes a CreateError's.
    assert_eq!(
        (launched.status.as_str(), launched.reason.as_str(), launched.message.as_str()),
        ("Unknown", "RequestLimitExceeded", "RequestLimitExceeded: the cloud failed")
    );
    assert!(w.cloud.instances().is_empty());
    // Created now, its launch failing since the start of the year: the condition's clock.
    w.backdated("default-abcde").await;
    assert!(w.given_up_after_passes("default-abcde").await, "past its launch timeout");
}
