//! Termination with pods that take their time, end to end: the emulator honours each pod's
//! grace period, so an instance terminated under still-terminating pods would show. Node
//! deletion by hand, critical pods, pods that tolerate everything, volumes still attached,
//! and a weighted fallback when spot capacity runs out.

use std::time::{Duration, Instant};
use tenon_e2e::scenario::{INFLATE_NS, all_bound, inflate_grace, lab_general_running, scale_inflate};
use tenon_e2e::{Cluster, eventually};

/// The one NodeClaim: (name, node, instance id).
async fn the_nodeclaim(c: &Cluster) -> (String, String, String) {
    let claims = c.nodeclaims().await;
    assert_eq!(claims.len(), 1, "one NodeClaim");
    let st = claims[0].status.clone().expect("status");
    let id = st.provider_id.as_deref().and_then(|p| p.rsplit('/').next()).expect("a providerID").to_string();
    (claims[0].metadata.name.clone().unwrap(), st.node_name.expect("registered"), id)
}

async fn running(c: &Cluster, id: &str) -> bool {
    c.instances().await.iter().any(|i| i.id == id)
}

/// Pods bound to `node` in `namespace`.
async fn on_node(c: &Cluster, namespace: &str, node: &str) -> usize {
    c.pods(namespace)
        .await
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node))
        .count()
}

/// A pod bound to `node` directly (as a DaemonSet or a static pod would be), `extra` spec lines.
fn bound_pod(c: &Cluster, name: &str, node: &str, meta: &str, extra: &str) {
    c.apply_yaml(
        name,
        &format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: {INFLATE_NS}{meta}}}\nspec:\n  nodeName: {node}\n  terminationGracePeriodSeconds: 0\n  containers: [{{name: pause, image: public.ecr.aws/eks-distro/kubernetes/pause:3.10}}]\n{extra}"
        ),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_outlives_its_pods_grace_and_its_attached_volumes() {
    let mut c = Cluster::start("termination-grace").await;
    lab_general_running(&mut c, 0).await;
    inflate_grace(&c, 20);
    scale_inflate(&c, 2);
    all_bound(&c, INFLATE_NS, 2, Duration::from_secs(90)).await;
    let (name, node, id) = the_nodeclaim(&c).await;
    c.apply_yaml(
        "va",
        &format!("apiVersion: storage.k8s.io/v1\nkind: VolumeAttachment\nmetadata: {{name: va-1}}\nspec: {{attacher: ebs.csi.aws.com, nodeName: {node}, source: {{persistentVolumeName: pv-1}}}}\n"),
    );
    // The workload leaves; its pods take 20 s to go.
    scale_inflate(&c, 0);
    c.kubectl(&["delete", "nodeclaim", &name, "--wait=false"]);
    let start = Instant::now();
    let pods_gone = loop {
        assert!(start.elapsed() < Duration::from_secs(60), "the pods were not gone within 60 s");
        let left = on_node(&c, INFLATE_NS, &node).await;
        assert!(running(&c, &id).await || left == 0, "the instance was terminated under {left} terminating pod(s)");
        if left == 0 {
            break Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let waited = pods_gone.duration_since(start);
    assert!(waited >= Duration::from_secs(15), "the pods were gone after {waited:?}: their 20 s grace was cut");
    // Drained, but a volume is still attached: the controller says it waits for it, looks
    // again, and the instance stays.
    eventually(Duration::from_secs(30), "VolumesDetached=Unknown (AwaitingVolumeDetachment)", || async {
        let claims = c.nodeclaims().await;
        let nc = claims.iter().find(|nc| nc.metadata.name.as_deref() == Some(name.as_str()))?;
        let conds = &nc.status.as_ref()?.conditions;
        conds
            .iter()
            .any(|k| k.type_ == "VolumesDetached" && k.status == "Unknown" && k.reason == "AwaitingVolumeDetachment")
            .then_some(())
    })
    .await;
    c.reconciled("node.termination", 8).await;
    assert!(running(&c, &id).await, "the instance was terminated with a volume still attached");
    c.kubectl(&["delete", "volumeattachment", "va-1"]);
    eventually(Duration::from_secs(30), "the instance terminated once the volume detached", || async {
        (!running(&c, &id).await).then_some(())
    })
    .await;
    eventually(Duration::from_secs(30), "the NodeClaim released", || async {
        c.nodeclaims().await.is_empty().then_some(())
    })
    .await;
    c.assert_controller_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_critical_pod_is_evicted_before_the_instance_goes_and_a_tolerant_one_holds_nothing() {
    let mut c = Cluster::start("termination-critical").await;
    lab_general_running(&mut c, 1).await;
    let (name, node, id) = the_nodeclaim(&c).await;
    bound_pod(
        &c,
        "agent",
        &node,
        ", ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: agent, uid: agent-uid, controller: true}]",
        "",
    );
    bound_pod(&c, "dns", &node, "", "  priorityClassName: system-cluster-critical\n  priority: 2000000000\n");
    bound_pod(&c, "everywhere", &node, "", "  tolerations: [{operator: Exists}]\n");
    c.kubectl(&["delete", "nodeclaim", &name, "--wait=false"]);
    let start = Instant::now();
    let mut dns_gone: Option<Instant> = None;
    loop {
        assert!(start.elapsed() < Duration::from_secs(60), "the NodeClaim was not released within 60 s");
        let names: Vec<String> = c.pods(INFLATE_NS).await.into_iter().filter_map(|p| p.metadata.name).collect();
        if !names.iter().any(|n| n == "dns") {
            dns_gone.get_or_insert_with(Instant::now);
        }
        if !running(&c, &id).await {
            assert!(dns_gone.is_some(), "the instance was terminated before the critical pod was evicted");
        }
        if !c.nodeclaims().await.iter().any(|nc| nc.metadata.name.as_deref() == Some(name.as_str())) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!running(&c, &id).await);
    let left: Vec<String> = c.pods(INFLATE_NS).await.into_iter().filter_map(|p| p.metadata.name).collect();
    assert!(left.iter().any(|n| n == "everywhere"), "the pod tolerating everything was not evicted: {left:?}");
    assert!(!left.iter().any(|n| n == "agent"), "the DaemonSet pod was drained: {left:?}");
    c.assert_controller_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_node_by_hand_deletes_its_nodeclaim_and_terminates_its_instance() {
    let mut c = Cluster::start("termination-node").await;
    lab_general_running(&mut c, 1).await;
    let (_, node, id) = the_nodeclaim(&c).await;
    c.kubectl(&["delete", "node", &node, "--wait=false"]);
    eventually(Duration::from_secs(60), "the instance terminated and the NodeClaim gone", || async {
        let claims = c.nodeclaims().await;
        let original_gone =
            claims.iter().all(|nc| nc.status.as_ref().and_then(|s| s.node_name.as_deref()) != Some(node.as_str()));
        (original_gone && !running(&c, &id).await).then_some(())
    })
    .await;
    let nodes = c.kubectl(&["get", "nodes", "-o", "name"]);
    assert!(!nodes.contains(&node), "the Node is gone: {nodes}");
    // Its pod found a new home.
    all_bound(&c, INFLATE_NS, 1, Duration::from_secs(90)).await;
    c.assert_controller_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_pool_out_of_capacity_falls_back_to_its_on_demand_pool() {
    let mut c = Cluster::start("termination-spot-fallback").await;
    tenon_e2e::scenario::apply_lab_general(&c);
    let pool = |name: &str, weight: u32, ct: &str| {
        format!(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n  weight: {weight}\n  template:\n    metadata: {{labels: {{capacity.example.io/pool: lab-general}}}}\n    spec:\n      requirements:\n        - {{key: karpenter.sh/capacity-type, operator: In, values: [{ct}]}}\n        - {{key: karpenter.k8s.aws/instance-family, operator: In, values: [c6a, m6a]}}\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: lab-general}}\n"
        )
    };
    c.kubectl(&["delete", "nodepool", "lab-general"]);
    c.apply_yaml("spot", &pool("spot", 100, "spot"));
    c.apply_yaml("fallback", &pool("fallback", 1, "on-demand"));
    c.moto.exhaust(&[("*".into(), None, Some("spot".into()))]);
    c.start_controller();
    tenon_e2e::scenario::nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 2);
    all_bound(&c, INFLATE_NS, 2, Duration::from_secs(60)).await;
    let claims = c.nodeclaims().await;
    assert!(!claims.is_empty());
    for nc in &claims {
        let l = nc.metadata.labels.clone().unwrap_or_default();
        assert_eq!(l.get("karpenter.sh/nodepool").map(String::as_str), Some("fallback"), "{l:?}");
    }
    let events = kube::Api::<k8s_openapi::api::core::v1::Event>::all(c.client.clone())
        .list(&Default::default())
        .await
        .expect("events")
        .items;
    let failed = events.iter().find(|e| e.reason.as_deref() == Some("InsufficientCapacityError"));
    let failed = failed.expect("the spot NodeClaim failed with InsufficientCapacityError");
    let spot = failed.involved_object.name.clone().unwrap_or_default();
    assert!(spot.starts_with("spot-"), "{spot}");
    assert!(!claims.iter().any(|nc| nc.metadata.name.as_deref() == Some(spot.as_str())), "{spot} was deleted");
    c.assert_controller_running();
}
