//! The controller's view carries each node's attach limits from its CSINode, so provisioning
//! and consolidation do not count on a node kube-scheduler would refuse for a pod's volumes.

use super::World;
use std::sync::Arc;
use tenon_core::convert::snapshot;

/// Not a Karpenter case (issue 47): the CSINode watch behind the ported VolumeUsage cases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodes_csinode_limits_reach_the_decisions() {
    let w = World::new().await;
    let nc = w.owned_and_launched().await;
    w.kubelet_registers(nc, &[]).await;
    w.create::<k8s_openapi::api::storage::v1::CSINode>(
        "apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: node-a}\nspec:\n  drivers:\n  - {name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 25}}\n  - {name: efs.csi.aws.com, nodeID: i-1}\n",
    )
    .await;
    w.until("the CSINode in the cache", |c| !c.stores.csi_nodes.state().is_empty()).await;
    let (snap, _) = snapshot(&w.ctx.stores.objects(), &|_| Arc::new(Vec::new()), 0);
    let limits = snap.volume_limits.get("node-a").cloned().unwrap_or_default();
    assert_eq!(limits.into_iter().collect::<Vec<_>>(), [("ebs.csi.aws.com".to_string(), 25)], "EFS has no limit");
}
