//! A launch first looks for an instance an earlier attempt launched, unless this process
//! created the NodeClaim and has not launched it yet (nothing can carry its tag then).

use super::World;
use crate::controller::error::Failures;
use crate::controller::nodeclaim::lifecycle::Lifecycle;
use crate::controller::provisioning::create_nodeclaim;
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
