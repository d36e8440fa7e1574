//! A launch says whether its NodePool's scoring policy ranked its options (the AWS provider
//! then asks EC2 to honour their order).

use super::World;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tenon_api::NodePool;
use tenon_api::wellknown as wk;

/// Not a Karpenter case (issue 47).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_is_ranked_only_when_its_nodepool_names_a_scoring_policy() {
    let w = World::new().await;
    w.launched("on-demand").await;
    assert_eq!(w.cloud.launches(), [("default-abcde".to_string(), false)], "the built-in price order");

    let w = World::new().await;
    w.pool_with(serde_json::json!({})).await;
    let named = serde_json::json!({"metadata": {"annotations": {wk::ANNOTATION_SCORING_POLICY: "cheapest-first"}}});
    let pools: Api<NodePool> = Api::all(w.client.clone());
    let written = pools.patch("default", &PatchParams::default(), &Patch::Merge(&named)).await.unwrap();
    w.until("the annotated NodePool in the cache", |c| {
        c.stores.nodepools.state().iter().any(|p| p.metadata.resource_version == written.metadata.resource_version)
    })
    .await;
    w.launched("on-demand").await;
    assert_eq!(w.cloud.launches(), [("default-abcde".to_string(), true)], "the policy's order");
}
