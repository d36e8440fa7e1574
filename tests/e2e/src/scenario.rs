//! Steps the runbooks take, shared by the end-to-end tests.

use super::{Cluster, eventually};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use std::time::{Duration, Instant};
use tenon_api::EC2NodeClass;

pub const LAB: &str = "examples/seeds/lab-general";
pub const INFLATE_NS: &str = "karpenter-lab";

/// The lab-general EC2NodeClass and NodePool and the (scaled-to-zero) inflate Deployment.
pub fn apply_lab_general(c: &Cluster) {
    c.kubectl(&[
        "apply",
        "-f",
        &format!("{LAB}/ec2nodeclass-lab-general.yaml"),
        "-f",
        &format!("{LAB}/nodepool-lab-general.yaml"),
        "-f",
        &format!("{LAB}/karpenter-positive.yaml"),
    ]);
}

pub fn scale_inflate(c: &Cluster, replicas: u32) {
    c.kubectl(&["scale", "deployment", "inflate", "-n", INFLATE_NS, "--replicas", &replicas.to_string()]);
}

pub async fn nodeclass_ready(c: &Cluster, name: &str) {
    let api: Api<EC2NodeClass> = Api::all(c.client.clone());
    eventually(Duration::from_secs(60), &format!("EC2NodeClass {name} Ready"), || async {
        let nc = api.get(name).await.ok()?;
        nc.status?.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "True").then_some(())
    })
    .await;
}

pub fn bound(pods: &[Pod]) -> usize {
    pods.iter().filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some())).count()
}

/// Waits until `namespace` holds exactly `n` pods, all bound; returns when that was seen.
pub async fn all_bound(c: &Cluster, namespace: &str, n: usize, timeout: Duration) -> Instant {
    eventually(timeout, &format!("{n} pods bound in {namespace}"), || async {
        let pods = c.pods(namespace).await;
        (pods.len() == n && bound(&pods) == n).then(Instant::now)
    })
    .await
}

/// lab-general with `replicas` inflate pods running on Tenon's nodes.
pub async fn lab_general_running(c: &mut Cluster, replicas: u32) {
    apply_lab_general(c);
    c.start_controller();
    nodeclass_ready(c, "lab-general").await;
    scale_inflate(c, replicas);
    all_bound(c, INFLATE_NS, replicas as usize, Duration::from_secs(90)).await;
}
