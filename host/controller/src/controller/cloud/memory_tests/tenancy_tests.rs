//! A NodeClaim's tenancy: asked of the cloud at launch and labelled on the NodeClaim, as
//! Karpenter's launch and its cloud provider's labels do.

use super::World;
use kube::Api;
use tenon_api::NodeClaim;
use tenon_api::wellknown::{self as wk, condition};

/// NodeClaim `default-abcde` of NodePool `default` requiring `tenancy` (a YAML flow list, or
/// nothing), launched by the lifecycle reconciler; the NodeClaim then.
async fn launched_requiring(w: &World, tenancy: Option<&str>) -> NodeClaim {
    w.pool_with(serde_json::json!({})).await;
    let requirement = tenancy
        .map(|t| format!("  - {{key: {}, operator: In, values: {t}}}\n", wk::LABEL_INSTANCE_TENANCY))
        .unwrap_or_default();
    w.create::<NodeClaim>(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: default-abcde, labels: {{karpenter.sh/nodepool: default}}}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements:\n  - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}\n{requirement}  resources: {{requests: {{cpu: 500m}}}}\n"
    ))
    .await;
    w.until("the NodeClaim in the cache", |c| !c.stores.nodeclaims.state().is_empty()).await;
    w.lifecycle_until(&mut crate::controller::nodeclaim::lifecycle::Lifecycle::new(w.ctx.clone()), condition::LAUNCHED)
        .await;
    Api::<NodeClaim>::all(w.client.clone()).get("default-abcde").await.unwrap()
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2899
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2906
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2934
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeclaim_is_launched_and_labelled_with_the_tenancy_it_requires() {
    for (required, launched) in
        [(None, "default"), (Some("[default, dedicated]"), "default"), (Some("[dedicated]"), "dedicated")]
    {
        let w = World::new().await;
        let nc = launched_requiring(&w, required).await;
        let instances = w.cloud.instances();
        assert_eq!(instances.len(), 1, "{required:?}");
        assert_eq!(instances[0].tenancy, launched, "asked of the cloud, requiring {required:?}");
        let labels = nc.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get(wk::LABEL_INSTANCE_TENANCY).map(String::as_str), Some(launched), "{required:?}");
    }
}
