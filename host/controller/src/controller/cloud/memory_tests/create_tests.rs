//! NodeClaims the provisioner creates, counted as Karpenter counts them.

use super::World;
use crate::controller::error::Failures;
use crate::controller::metrics::catalog::NODECLAIMS_CREATED;
use crate::controller::provisioning::{PROVISIONED, Provisioner, create_nodeclaim};
use crate::controller::runner::Reconciler;
use kube::Api;
use tenon_api::NodeClaim;

/// A NodeClaim of NodePool `default` saying whether its minValues were relaxed.
fn claim(name: &str, relaxed: Option<&str>) -> NodeClaim {
    let mut nc: NodeClaim = serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: {name}, labels: {{karpenter.sh/nodepool: default}}}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements: []\n"
    ))
    .unwrap();
    if let Some(v) = relaxed {
        let annotations = nc.metadata.annotations.get_or_insert_default();
        annotations.insert(tenon_api::wellknown::ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED.into(), v.into());
    }
    nc
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2962
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_nodeclaims_are_counted_by_whether_their_min_values_were_relaxed() {
    let w = World::new().await;
    let mut failures = Failures::default();
    for (name, relaxed) in [("relaxed", Some("true")), ("strict", Some("false")), ("unsaid", None)] {
        let created = create_nodeclaim(&w.ctx, &claim(name, relaxed), PROVISIONED, &mut failures).await;
        assert_eq!(created.as_deref(), Some(name));
    }
    let count = |relaxed: &str| {
        let labels = [("reason", "provisioned"), ("nodepool", "default"), ("min_values_relaxed", relaxed)];
        w.ctx.metrics.value(NODECLAIMS_CREATED, &labels)
    };
    assert_eq!(count("true"), Some(1.0));
    assert_eq!(count("false"), Some(2.0), "not relaxed, or not said");
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2962
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provisioner_counts_what_it_creates_as_provisioned() {
    let w = World::new().await;
    w.pool_with(serde_json::json!({})).await;
    w.pending_pod("waiting", 100).await;
    let mut provisioner = Provisioner::new(w.ctx.clone());
    let claims: Api<NodeClaim> = Api::all(w.client.clone());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while claims.list(&Default::default()).await.unwrap().items.is_empty() {
        assert!(std::time::Instant::now() < deadline, "no NodeClaim created within 10 s");
        provisioner.reconcile().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let labels = [("reason", "provisioned"), ("nodepool", "default"), ("min_values_relaxed", "false")];
    assert_eq!(w.ctx.metrics.value(NODECLAIMS_CREATED, &labels), Some(1.0));
}
