//! The controller as reconcilers: a concern that waits on a slow AWS call or a slow
//! eviction holds up no other, and one that fails is counted while the others go on.

use std::time::{Duration, Instant};
use tenon_e2e::scenario::{
    INFLATE_NS, a_new_pod_is_nominated_within_5s, all_bound, apply_lab_general, nodeclass_ready, nominated,
    scale_inflate, two_nodes_under_one_pdb,
};
use tenon_e2e::{CONTROLLER_TOKEN, Cluster, eventually};

/// A subnet tag value only the hanging EC2NodeClass selects by: its DescribeSubnets is the
/// one request that names it.
const HANGS: &str = "resolution-hangs-here";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeclass_whose_resolution_hangs_holds_up_no_other_nodepool() {
    let mut c = Cluster::start("hung-resolution").await;
    // EC2 as the controller sees it: DescribeSubnets naming HANGS answers after a minute.
    let ec2 = tenon_fault_proxy::slow_matching(&c.moto.url, HANGS, Duration::from_secs(60)).await;
    c.controller_env.push(("AWS_ENDPOINT_URL".into(), ec2.url.clone()));
    apply_lab_general(&c);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    c.apply_yaml(
        "hangs",
        &format!(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: hangs}}\nspec:\n  role: KarpenterNodeRole-lab-cluster\n  amiSelectorTerms: [{{alias: al2023@v20260304}}]\n  subnetSelectorTerms: [{{tags: {{tenon.test/hang: {HANGS}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: lab-cluster}}}}]\n---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: hangs}}\nspec:\n  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: hangs}}\n      requirements: [{{key: kubernetes.io/arch, operator: In, values: [amd64]}}]\n"
        ),
    );
    eventually(Duration::from_secs(30), "the hanging EC2NodeClass' DescribeSubnets under way", || async {
        (ec2.seen.load(std::sync::atomic::Ordering::SeqCst) > 0).then_some(())
    })
    .await;
    scale_inflate(&c, 1);
    let asked = Instant::now();
    eventually(Duration::from_secs(5), "a NodeClaim nominated for inflate within 5 s", || async {
        nominated(&c, "inflate").await.then_some(())
    })
    .await;
    eprintln!("e2e timing (hung resolution): nominated {:.1}s after the scale", asked.elapsed().as_secs_f64());
    let claims = c.nodeclaims().await;
    assert!(
        claims.iter().all(|nc| nc.spec.node_class_ref.as_ref().is_some_and(|r| r.name == "lab-general")),
        "only the healthy EC2NodeClass launches: {claims:#?}"
    );
    assert!(
        ec2.seen.load(std::sync::atomic::Ordering::SeqCst) > 0 && !nodeclass_is_ready(&c, "hangs").await,
        "the hanging resolution is still under way"
    );
    c.assert_controller_running();
}

async fn nodeclass_is_ready(c: &Cluster, name: &str) -> bool {
    let api: kube::Api<tenon_api::EC2NodeClass> = kube::Api::all(c.client.clone());
    let Ok(nc) = api.get(name).await else { return false };
    nc.status.is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_drain_and_a_slow_eviction_hold_up_no_provisioning() {
    let mut c = Cluster::start("slow-eviction").await;
    // One node's drain is held by the PDB while the other's one allowed eviction is slow.
    let claims = two_nodes_under_one_pdb(&mut c).await;
    // The API server takes 20 s to answer each eviction (a slow admission webhook).
    c.emu.delay_next("create", "pods/eviction", Duration::from_secs(20), 100);
    for nc in &claims {
        c.kubectl(&["delete", "nodeclaim", nc.metadata.name.as_deref().unwrap(), "--wait=false"]);
    }
    eventually(Duration::from_secs(30), "an eviction under way", || async {
        (c.emu.call_count(CONTROLLER_TOKEN, "pods/eviction", "create") > 0).then_some(())
    })
    .await;
    a_new_pod_is_nominated_within_5s(&c, "slow eviction").await;
    assert_eq!(
        c.metric_sum("karpenter_pods_eviction_requests_total", &[]).await,
        0.0,
        "no eviction has been answered yet: the drain is still waiting on it"
    );
    c.assert_controller_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_reconciler_is_counted_and_the_others_go_on() {
    let mut c = Cluster::start("failing-reconciler").await;
    // Every NodePool status write is refused.
    c.emu.fail_next("patch", "nodepools/status", 500, 10_000);
    apply_lab_general(&c);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 2);
    all_bound(&c, INFLATE_NS, 2, Duration::from_secs(90)).await;
    let errors = eventually(Duration::from_secs(30), "nodepool.status errors counted", || async {
        let n = c.metric("controller_runtime_reconcile_errors_total{controller=\"nodepool.status\"}").await?;
        (n >= 1.0).then_some(n)
    })
    .await;
    let by_kind = c
        .metric("tenon_controller_reconcile_errors_total{controller=\"nodepool.status\",error=\"kube\"}")
        .await
        .unwrap_or(0.0);
    assert!(by_kind >= 1.0, "counted as a Kubernetes API error: {by_kind}");
    let failed = c
        .metric("controller_runtime_reconcile_total{controller=\"nodepool.status\",result=\"error\"}")
        .await
        .unwrap_or(0.0);
    assert!(failed >= errors, "each failed reconcile is an error result: {failed} < {errors}");
    // The others went on: provisioning and the NodeClaim lifecycle, without errors.
    for other in ["provisioner", "nodeclaim.lifecycle"] {
        let errors = c.metric(&format!("controller_runtime_reconcile_errors_total{{controller=\"{other}\"}}")).await;
        assert_eq!(errors, Some(0.0), "{other} failed nothing");
    }
    c.assert_controller_running();
}
