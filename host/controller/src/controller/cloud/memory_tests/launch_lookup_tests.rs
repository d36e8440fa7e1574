//! A launch first looks for an instance an earlier attempt launched, unless this process
//! created the NodeClaim and has not launched it yet (nothing can carry its tag then).

use super::World;
use crate::controller::error::Failures;
use crate::controller::nodeclaim::lifecycle::Lifecycle;
use crate::controller::provisioning::create_nodeclaim;
use crate::controller::runner::Reconciler;
use kube::Api;
use kube::api::{Patch, PatchParams};
use tenon_api::NodeClaim;
use tenon_api::wellknown::condition;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_nodeclaim_created_here_and_never_launched_launches_without_a_lookup() {
    let w = World::new().await;
    // Created by another process (a replica before a restart): its launch looks first.
    w.launched("on-demand").await;
    assert_eq!(w.cloud.lookups(), 1);

    let nc: NodeClaim = serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: default-fghij, labels: {karpenter.sh/nodepool: default}}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n  requirements:\n  - {key: node.kubernetes.io/instance-type, operator: In, values: [fake-it-1]}\n  resources: {requests: {cpu: 500m}}\n",
    )
    .unwrap();
    let name = create_nodeclaim(&w.ctx, &nc, "provisioning", &mut Failures::default()).await.expect("created");
    w.until("the created NodeClaim in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|n| n.metadata.name.as_deref() == Some(name.as_str()))
    })
    .await;
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    let launched = w.lifecycle_until_for(&mut lifecycle, &name, condition::LAUNCHED).await;
    assert_eq!(w.cloud.lookups(), 1, "created here, never launched: no lookup");
    assert_eq!(w.cloud.instances().len(), 2);

    // Its Launched record lost (a crash between the launch and the write): launched again,
    // it looks, finds its instance and launches no second one.
    let forget = serde_json::json!({"status": {"conditions": [], "providerID": null}});
    let api: Api<NodeClaim> = Api::all(w.client.clone());
    let written = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&forget)).await.unwrap();
    w.until("the forgotten launch in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
    })
    .await;
    let again = w.lifecycle_until_for(&mut lifecycle, &name, condition::LAUNCHED).await;
    assert_eq!(w.cloud.lookups(), 2);
    assert_eq!(w.cloud.instances().len(), 2, "{:?}", w.cloud.instances());
    assert_eq!(again.status.unwrap().provider_id, launched.status.unwrap().provider_id);
}

/// Karpenter keeps what a launch created (by NodeClaim UID) so a pass over a cache that does
/// not show the launch yet does not launch again. Here the NodeClaims watch stalls after the
/// launch is written: passes over the stale cache launch nothing more (each such repeat cost
/// an instance lookup; 10,000-pod runs logged 1,100 launches for 1,000 NodeClaims).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_over_a_cache_that_does_not_show_the_launch_yet_launches_nothing_more() {
    let w = World::new().await;
    w.pool_with(serde_json::json!({})).await;
    // Created with what the lifecycle adds before a launch (finalizer, NodeClass label,
    // lifecycle conditions), so its passes write nothing else the stale cache could refuse.
    let created = w
        .create::<NodeClaim>(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: default-abcde, finalizers: [karpenter.sh/termination], labels: {karpenter.sh/nodepool: default, karpenter.k8s.aws/ec2nodeclass: default}}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n  requirements:\n  - {key: node.kubernetes.io/instance-type, operator: In, values: [fake-it-1]}\n  resources: {requests: {cpu: 500m}}\n",
        )
        .await;
    let conditions = crate::controller::conditions::with_lifecycle_conditions(&created).expect("none yet");
    let st = serde_json::json!({"status": {"conditions": conditions}});
    let api: Api<NodeClaim> = Api::all(w.client.clone());
    let nc = api.patch_status("default-abcde", &PatchParams::default(), &Patch::Merge(&st)).await.unwrap();
    w.until("the NodeClaim in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == nc.metadata.resource_version)
    })
    .await;
    w.emulator.silence_watches("nodeclaims", std::time::Duration::from_secs(4));
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    let launched = w.lifecycle_until(&mut lifecycle, condition::LAUNCHED).await;
    assert_eq!(w.cloud.lookups(), 1, "created elsewhere: its first launch looks");
    let stale = w.ctx.stores.nodeclaims.state();
    assert!(stale.iter().all(|c| c.metadata.resource_version == nc.metadata.resource_version), "the watch is stalled");
    for _ in 0..20 {
        lifecycle.reconcile().await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(w.cloud.lookups(), 1, "launched again over the stale cache");
    assert_eq!(w.cloud.instances().len(), 1);
    // Once the watch delivers, the NodeClaim moves on from what was written.
    w.until("the launch in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|n| n.status.as_ref().is_some_and(|s| s.provider_id.is_some()))
    })
    .await;
    lifecycle.reconcile().await.unwrap();
    assert_eq!(w.cloud.lookups(), 1);
    assert_eq!(launched.status.unwrap().provider_id, Some(w.cloud.instances()[0].provider_id.clone()));
}
