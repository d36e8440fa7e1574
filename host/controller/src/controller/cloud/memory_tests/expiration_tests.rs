//! Karpenter's NodeClaim expiration suite through the expiration reconciler: NodeClaims past
//! their `expireAfter` deleted in the API and counted in Karpenter's metrics; the others
//! (not yet due, `Never`, another provider's) left as they are.

use super::World;
use crate::controller::metrics::catalog::PODS_DISRUPTION_INITIATED;
use crate::controller::nodeclaim::expiration::Expiration;
use crate::controller::runner::Reconciler;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::PostParams;
use std::time::{Duration, Instant};
use tenon_api::NodeClaim;
use tenon_api::wellknown::condition;

/// A NodeClaim of NodePool `default` that is only an object (never launched).
fn bare(name: &str, expire_after: &str, group: &str) -> String {
    format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: {name}, labels: {{karpenter.sh/nodepool: default}}}}\nspec:\n  expireAfter: {expire_after}\n  nodeClassRef: {{group: {group}, kind: EC2NodeClass, name: default}}\n  requirements: []\n"
    )
}

impl World {
    /// Runs the expiration reconciler until NodeClaim `name` is deleted (being deleted, or
    /// gone), 10 s at most; how many passes that took.
    async fn expired(&self, name: &str) -> usize {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let mut expiration = Expiration::new(self.ctx.clone());
        let deadline = Instant::now() + Duration::from_secs(10);
        for pass in 1.. {
            expiration.reconcile().await.unwrap();
            if api.get_opt(name).await.unwrap().is_none_or(|nc| nc.metadata.deletion_timestamp.is_some()) {
                return pass;
            }
            assert!(Instant::now() < deadline, "{name} not expired within 10 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        unreachable!()
    }

    /// Whether NodeClaim `name` is there and not being deleted.
    async fn kept(&self, name: &str) -> bool {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        api.get_opt(name).await.unwrap().is_some_and(|nc| nc.metadata.deletion_timestamp.is_none())
    }

    /// `karpenter_pods_disruption_initiated_total` for expiration of an on-demand NodeClaim
    /// of NodePool `default`.
    fn pods_disrupted_by_expiration(&self) -> Option<f64> {
        let labels = [
            ("reason", "expired"),
            ("nodepool", "default"),
            ("capacity_type", "on-demand"),
            ("consolidation_policy", ""),
            ("termination_mode", "graceful"),
        ];
        self.ctx.metrics.value(PODS_DISRUPTION_INITIATED, &labels)
    }
}

/// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:90
/// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:185
/// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:186
/// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:189
/// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:195
/// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:201
/// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:221
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_nodeclaim_is_deleted_and_counted_once_and_no_other() {
    let w = World::new().await;
    // Expired whatever its Node (it has none): only the NodeClaim's own age counts.
    w.launched_with("on-demand", "  expireAfter: 1s\n").await;
    for (name, expire_after, group) in [
        ("not-due", "200s", "karpenter.k8s.aws"),
        ("never", "Never", "karpenter.k8s.aws"),
        ("another-provider", "1s", "karpenter.test.sh"),
    ] {
        w.create::<NodeClaim>(&bare(name, expire_after, group)).await;
    }
    w.until("the NodeClaims in the cache", |c| c.stores.nodeclaims.state().len() == 4).await;
    w.expired("default-abcde").await;
    assert_eq!(w.disrupted("expired", "on-demand"), Some(1.0));
    assert_eq!(w.pods_disrupted_by_expiration(), Some(0.0), "no pods on it");
    // Another provider's NodeClaim two seconds past its expireAfter is still not expired.
    w.ctx.advance(Duration::from_secs(2));
    let mut expiration = Expiration::new(w.ctx.clone());
    expiration.reconcile().await.unwrap();
    for name in ["not-due", "never", "another-provider"] {
        assert!(w.kept(name).await, "{name} is not expired");
    }
    // Passes after that, with the deletion in the cache, count it no more.
    w.until("the deletion in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|nc| nc.metadata.deletion_timestamp.is_some())
    })
    .await;
    for _ in 0..3 {
        expiration.reconcile().await.unwrap();
    }
    assert_eq!(w.disrupted("expired", "on-demand"), Some(1.0));
}

/// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:106
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_spot_nodeclaim_is_counted_as_spot() {
    let w = World::new().await;
    w.launched_with("spot", "  expireAfter: 1s\n").await;
    w.expired("default-abcde").await;
    assert_eq!(w.disrupted("expired", "spot"), Some(1.0));
}

/// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:122
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_nodeclaim_counts_its_reschedulable_pods() {
    use crate::controller::nodeclaim::lifecycle::Lifecycle;
    let w = World::new().await;
    let nc = w.launched_with("on-demand", "  expireAfter: 2s\n").await;
    w.kubelet_registers(nc, &["{key: karpenter.sh/unregistered, effect: NoExecute}".to_string()]).await;
    w.lifecycle_until(&mut Lifecycle::new(w.ctx.clone()), condition::REGISTERED).await;
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    let daemon = "ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: ds, uid: ds-uid, controller: true}]";
    for (name, owner) in [("web-1", ""), ("web-2", ""), ("agent", daemon)] {
        let pod: Pod = serde_yaml::from_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, {owner}}}\nspec:\n  nodeName: node-a\n  containers: [{{name: app, image: app}}]\nstatus: {{phase: Running}}\n"
        ))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    w.until("the registered NodeClaim and the pods in the cache", |c| {
        c.stores.pods.state().len() == 3
            && c.stores.nodeclaims.state().iter().any(|n| n.status.as_ref().is_some_and(|s| s.node_name.is_some()))
    })
    .await;
    w.expired("default-abcde").await;
    assert_eq!(w.disrupted("expired", "on-demand"), Some(1.0));
    assert_eq!(w.pods_disrupted_by_expiration(), Some(2.0), "the DaemonSet's pod is not counted");
}

/// karpenter:pkg/controllers/nodeclaim/expiration/suite_test.go:212
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reconciler_looks_again_when_the_next_nodeclaim_expires() {
    let w = World::new().await;
    w.ready_nodeclass().await;
    w.create::<NodeClaim>(&bare("soon", "50s", "karpenter.k8s.aws")).await;
    w.until("the NodeClaim in the cache", |c| !c.stores.nodeclaims.state().is_empty()).await;
    let mut expiration = Expiration::new(w.ctx.clone());
    let next = |e: &Expiration| e.next_pass().as_secs();
    expiration.reconcile().await.unwrap();
    assert!((48..=50).contains(&next(&expiration)), "{}s", next(&expiration));
    // Twenty seconds on, thirty are left.
    w.ctx.advance(Duration::from_secs(20));
    expiration.reconcile().await.unwrap();
    assert!((28..=30).contains(&next(&expiration)), "{}s", next(&expiration));
    // A NodeClaim further out than a minute is looked at within the minute every idle
    // reconciler waits at most (Karpenter requeues for the whole wait; the expiry is as timely).
    let w = World::new().await;
    w.ready_nodeclass().await;
    w.create::<NodeClaim>(&bare("later", "100s", "karpenter.k8s.aws")).await;
    w.until("the NodeClaim in the cache", |c| !c.stores.nodeclaims.state().is_empty()).await;
    let mut expiration = Expiration::new(w.ctx.clone());
    expiration.reconcile().await.unwrap();
    assert_eq!(next(&expiration), crate::controller::runner::IDLE.as_secs());
}
