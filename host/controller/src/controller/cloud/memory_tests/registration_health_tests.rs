//! A NodeClaim given up past its registration timeout counts against the NodePool that owns
//! it by UID: a NodePool deleted and recreated under the same name is not charged for it.

use super::{World, condition_status};
use crate::controller::nodeclaim::lifecycle::Lifecycle;
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
    w.owned_and_launched().await;
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

    // Launched at the start of the year and never registered: past its registration timeout.
    w.backdated("default-abcde").await;
    w.lifecycle_until_deleted().await;

    NodePoolStatusReconciler::new(w.ctx.clone()).reconcile().await.unwrap();
    assert_eq!(health(pools.get("default").await.unwrap()).as_deref(), Some("Unknown"), "not charged");
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    assert!(
        claims.get_opt("default-abcde").await.unwrap().is_none_or(|n| n.metadata.deletion_timestamp.is_some()),
        "the NodeClaim is given up"
    );
}

/// NodeClaim `name` of NodePool `default` (UID `uid`) whose launch has failed since the start
/// of the year: past its launch timeout. Once cached.
async fn overdue(w: &World, name: &str, uid: &str) {
    let nc: NodeClaim = serde_json::from_value(serde_json::json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
        "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": "default"}, "ownerReferences": [
            {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "default", "uid": uid, "blockOwnerDeletion": true}]},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
    }))
    .unwrap();
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    claims.create(&Default::default(), &nc).await.unwrap();
    let launched = serde_json::json!({"status": {"conditions": [{"type": condition::LAUNCHED, "status": "False",
        "reason": "InsufficientCapacity", "message": "no capacity", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    let written = claims.patch_status(name, &PatchParams::default(), &Patch::Merge(&launched)).await.unwrap();
    w.until("the overdue NodeClaim in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
    })
    .await;
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:304
/// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:354
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodeclaims_given_up_make_their_nodepool_unhealthy() {
    for before in ["True", "Unknown"] {
        let w = World::new().await;
        w.pool_with(serde_json::json!({})).await;
        let pools: Api<NodePool> = Api::all(w.client.clone());
        NodePoolStatusReconciler::new(w.ctx.clone()).reconcile().await.unwrap();
        if before == "True" {
            // Said of the generations it was observed with (else it is reset).
            let class = Api::<tenon_api::EC2NodeClass>::all(w.client.clone()).get("default").await.unwrap();
            let healthy = serde_json::json!({"status": {"nodeClassObservedGeneration": class.metadata.generation,
                "conditions": [{"type": condition::NODE_REGISTRATION_HEALTHY,
                "status": "True", "reason": "NodeRegistrationHealthy", "message": "", "observedGeneration": 1,
                "lastTransitionTime": "2026-11-30T00:00:00Z"}]}});
            pools.patch_status("default", &PatchParams::default(), &Patch::Merge(&healthy)).await.unwrap();
        }
        let health = |p: NodePool| {
            condition_status(&p.status.map(|s| s.conditions).unwrap_or_default(), condition::NODE_REGISTRATION_HEALTHY)
        };
        let pool = pools.get("default").await.unwrap();
        let rv = pool.metadata.resource_version.clone();
        assert_eq!(health(pool.clone()).as_deref(), Some(before));
        w.until("the NodePool's status in the cache", |c| {
            c.stores.nodepools.state().iter().any(|p| p.metadata.resource_version == rv)
        })
        .await;
        let uid = pool.metadata.uid.unwrap();
        for name in ["first", "second"] {
            overdue(&w, name, &uid).await;
        }
        until_given_up(&w, &["first", "second"]).await;
        NodePoolStatusReconciler::new(w.ctx.clone()).reconcile().await.unwrap();
        let pool = pools.get("default").await.unwrap();
        let said = pool.status.unwrap_or_default().conditions;
        let said = said.iter().find(|c| c.type_ == condition::NODE_REGISTRATION_HEALTHY).expect("the condition");
        assert_eq!(
            (said.status.as_str(), said.reason.as_str()),
            ("False", "InsufficientCapacity"),
            "was {before}: the launch's failure"
        );
    }
}

/// NodePool `default`'s `NodeRegistrationHealthy` status, as the status reconciler writes it.
async fn health_written(w: &World) -> Option<String> {
    NodePoolStatusReconciler::new(w.ctx.clone()).reconcile().await.unwrap();
    let pool = Api::<NodePool>::all(w.client.clone()).get("default").await.unwrap();
    condition_status(&pool.status.unwrap_or_default().conditions, condition::NODE_REGISTRATION_HEALTHY)
}

/// Runs the lifecycle reconciler until NodeClaims `names` are all given up (10 s at most).
async fn until_given_up(w: &World, names: &[&str]) {
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        lifecycle.reconcile().await.unwrap();
        let mut left = 0;
        for name in names {
            if claims.get_opt(name).await.unwrap().is_some_and(|n| n.metadata.deletion_timestamp.is_none()) {
                left += 1;
            }
        }
        if left == 0 {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{left} NodeClaims not given up within 10 s");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:531
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_registration_after_two_failures_leaves_the_nodepool_unhealthy() {
    let w = World::new().await;
    w.pool_with(serde_json::json!({})).await;
    let uid = Api::<NodePool>::all(w.client.clone()).get("default").await.unwrap().metadata.uid.unwrap();
    // As the controller does on its creation (a NodePool without the condition is reset).
    assert_eq!(health_written(&w).await.as_deref(), Some("Unknown"));
    w.until("the NodePool's status in the cache", |c| {
        c.stores.nodepools.state().iter().any(|p| p.status.as_ref().is_some_and(|s| !s.conditions.is_empty()))
    })
    .await;
    for name in ["first", "second"] {
        overdue(&w, name, &uid).await;
    }
    until_given_up(&w, &["first", "second"]).await;
    assert_eq!(health_written(&w).await.as_deref(), Some("False"));
    w.until("the unhealthy NodePool in the cache", |c| {
        c.stores.nodepools.state().iter().any(|p| {
            p.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| c.type_ == condition::NODE_REGISTRATION_HEALTHY && c.status == "False")
            })
        })
    })
    .await;
    let nc = w.owned_and_launched().await;
    w.kubelet_registers(nc, &["{key: karpenter.sh/unregistered, effect: NoExecute}".to_string()]).await;
    let registered = w.lifecycle_until(&mut Lifecycle::new(w.ctx.clone()), condition::REGISTERED).await;
    assert_eq!(registered.status.and_then(|s| s.node_name).as_deref(), Some("node-a"));
    assert_eq!(health_written(&w).await.as_deref(), Some("False"), "one success of three is not healthy");
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:616
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_nodepool_is_not_credited_with_its_predecessors_registration() {
    let w = World::new().await;
    let nc = w.owned_and_launched().await;
    let pools: Api<NodePool> = Api::all(w.client.clone());
    pools.delete("default", &Default::default()).await.unwrap();
    w.until("the NodePool gone from the cache", |c| c.stores.nodepools.state().is_empty()).await;
    w.pool_named("default", serde_json::json!({})).await;
    assert_eq!(health_written(&w).await.as_deref(), Some("Unknown"));
    w.until("the NodePool's status in the cache", |c| {
        c.stores.nodepools.state().iter().any(|p| p.status.as_ref().is_some_and(|s| !s.conditions.is_empty()))
    })
    .await;
    w.kubelet_registers(nc, &["{key: karpenter.sh/unregistered, effect: NoExecute}".to_string()]).await;
    let registered = w.lifecycle_until(&mut Lifecycle::new(w.ctx.clone()), condition::REGISTERED).await;
    assert_eq!(registered.status.and_then(|s| s.node_name).as_deref(), Some("node-a"), "it registers");
    assert_eq!(health_written(&w).await.as_deref(), Some("Unknown"), "not credited to the new NodePool");
}
