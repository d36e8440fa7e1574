//! A NodeClaim given up past its registration timeout counts against the NodePool that owns
//! it by UID: a NodePool deleted and recreated under the same name is not charged for it.

use super::{World, condition_status};
use crate::controller::nodepool::status::NodePoolStatusReconciler;
use crate::controller::runner::Reconciler;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tenon_api::wellknown::condition;
use tenon_api::{NodeClaim, NodePool};

/// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:403
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_nodepool_is_not_charged_for_its_predecessors_nodeclaim() {
    let w = World::new().await;
    let nc = w.owned_and_launched().await;
    let pools: Api<NodePool> = Api::all(w.client.clone());
    let old_uid = pools.get("default").await.unwrap().metadata.uid;
    pools.delete("default", &Default::default()).await.unwrap();
    w.until("the NodePool gone from the cache", |c| c.stores.nodepools.state().is_empty()).await;
    w.pool_named("default", serde_json::json!({})).await;
    let uid = pools.get("default").await.unwrap().metadata.uid.unwrap();
    assert_ne!(Some(&uid), old_uid.as_ref(), "a new NodePool");
    let health = |p: NodePool| {
        condition_status(&p.status.map(|s| s.conditions).unwrap_or_default(), condition::NODE_REGISTRATION_HEALTHY)
    };
    NodePoolStatusReconciler::new(w.ctx.clone()).reconcile().await.unwrap();
    assert_eq!(health(pools.get("default").await.unwrap()).as_deref(), Some("Unknown"));
    w.until("the NodePool's status in the cache", |c| {
        c.stores.nodepools.state().iter().any(|p| p.status.as_ref().is_some_and(|s| !s.conditions.is_empty()))
    })
    .await;
    // One failure of the new NodePool's own: a second would make it unhealthy, so the test
    // fails if the old NodeClaim's is charged to it.
    w.ctx.cluster().registration.failed(&uid, None, ("RegistrationFailed", "Failed to register node"));

    // Launched at the start of the year and never registered: past its registration timeout
    // (as Karpenter's case steps its clock by 20 minutes).
    let mut conditions = nc.status.clone().unwrap_or_default().conditions;
    for c in conditions.iter_mut() {
        c.last_transition_time = serde_json::from_value(serde_json::json!("2026-01-01T00:00:00Z")).unwrap();
    }
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    let status = serde_json::json!({"status": {"conditions": conditions}});
    let written = claims.patch_status("default-abcde", &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    w.until("the backdated NodeClaim in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
    })
    .await;
    w.lifecycle_until_deleted().await;

    NodePoolStatusReconciler::new(w.ctx.clone()).reconcile().await.unwrap();
    assert_eq!(health(pools.get("default").await.unwrap()).as_deref(), Some("Unknown"), "not charged");
    assert!(
        claims.get_opt("default-abcde").await.unwrap().is_none_or(|n| n.metadata.deletion_timestamp.is_some()),
        "the NodeClaim is given up"
    );
}
