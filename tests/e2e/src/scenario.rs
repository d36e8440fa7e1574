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
    apply_lab(c, "karpenter-positive.yaml");
}

/// The lab-general EC2NodeClass and NodePool and one of the runbook's workload files.
pub fn apply_lab(c: &Cluster, workload: &str) {
    c.kubectl(&[
        "apply",
        "-f",
        &format!("{LAB}/ec2nodeclass-lab-general.yaml"),
        "-f",
        &format!("{LAB}/nodepool-lab-general.yaml"),
        "-f",
        &format!("{LAB}/{workload}"),
    ]);
}

/// inflate's pods get `secs` of termination grace (they take that long to go).
pub fn inflate_grace(c: &Cluster, secs: u32) {
    let patch = format!(r#"{{"spec":{{"template":{{"spec":{{"terminationGracePeriodSeconds":{secs}}}}}}}}}"#);
    c.kubectl(&["patch", "deployment", "inflate", "-n", INFLATE_NS, "--type", "merge", "-p", &patch]);
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

/// Pods the scheduler marked `PodScheduled=False/Unschedulable` (what Tenon provisions for).
pub fn unschedulable(pods: &[Pod]) -> usize {
    pods.iter()
        .filter(|p| {
            p.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
                cs.iter().any(|c| c.type_ == "PodScheduled" && c.reason.as_deref() == Some("Unschedulable"))
            })
        })
        .count()
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

/// A JSON merge patch (or, with `json`, a JSON patch) of NodePool `name`.
pub fn patch_nodepool(c: &Cluster, name: &str, patch: &str, json: bool) {
    let kind = if json { "json" } else { "merge" };
    c.kubectl(&["patch", "nodepool", name, "--type", kind, "-p", patch]);
}

/// A JSON merge patch of EC2NodeClass `name`.
pub fn patch_nodeclass(c: &Cluster, name: &str, patch: &str) {
    c.kubectl(&["patch", "ec2nodeclass", name, "--type", "merge", "-p", patch]);
}

/// The reason of the first `Drifted=True` condition on a NodeClaim, waited for up to 60 s.
pub async fn drifted_reason(c: &Cluster, what: &str) -> String {
    crate::eventually(Duration::from_secs(60), what, || async {
        c.nodeclaims().await.into_iter().find_map(|nc| {
            let cond = nc.status?.conditions.into_iter().find(|x| x.type_ == "Drifted" && x.status == "True")?;
            Some(cond.reason)
        })
    })
    .await
}

/// lab-general narrowed to 4-vCPU types (three 1-CPU inflate pods per node) and
/// consolidating after 5 s: several small nodes in seconds.
pub fn small_nodes_quick_consolidation(c: &Cluster) {
    patch_nodepool(
        c,
        "lab-general",
        r#"[{"op":"add","path":"/spec/template/spec/requirements/-","value":{"key":"karpenter.k8s.aws/instance-cpu","operator":"In","values":["4"]}}]"#,
        true,
    );
    patch_nodepool(c, "lab-general", r#"{"spec":{"disruption":{"consolidateAfter":"5s"}}}"#, false);
}

/// NodeClaims being disrupted now: deleting, or their node tainted `karpenter.sh/disrupted`.
pub async fn disrupting(c: &Cluster) -> usize {
    use k8s_openapi::api::core::v1::Node;
    let nodes: Vec<Node> =
        Api::<Node>::all(c.client.clone()).list(&Default::default()).await.map(|l| l.items).unwrap_or_default();
    c.nodeclaims()
        .await
        .iter()
        .filter(|nc| {
            let node = nc.status.as_ref().and_then(|s| s.node_name.as_deref());
            let tainted = nodes.iter().filter(|n| n.metadata.name.as_deref() == node).any(|n| {
                n.spec
                    .as_ref()
                    .and_then(|s| s.taints.as_ref())
                    .is_some_and(|ts| ts.iter().any(|t| t.key == "karpenter.sh/disrupted"))
            });
            nc.metadata.deletion_timestamp.is_some() || tainted
        })
        .count()
}

/// A Deployment `name` of `replicas` pause pods (500m CPU, 256 MiB) in the lab namespace,
/// on lab-general's nodes.
pub fn small_deployment(c: &Cluster, name: &str, replicas: u32) {
    c.apply_yaml(
        name,
        &format!(
            r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: karpenter-lab}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      nodeSelector: {{capacity.example.io/pool: lab-general}}
      terminationGracePeriodSeconds: 0
      containers:
        - name: pause
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.10
          resources: {{requests: {{cpu: 500m, memory: 256Mi}}}}
"#
        ),
    );
}

/// lab-general narrowed to 4-vCPU types: three 1-CPU inflate pods per node.
pub fn four_vcpu_nodes(c: &Cluster) {
    patch_nodepool(
        c,
        "lab-general",
        r#"[{"op":"add","path":"/spec/template/spec/requirements/-","value":{"key":"karpenter.k8s.aws/instance-cpu","operator":"In","values":["4"]}}]"#,
        true,
    );
}

/// Whether a `Nominated` Event names a NodeClaim for a pod of Deployment `app`.
pub async fn nominated(c: &Cluster, app: &str) -> bool {
    let pods = c.pods(INFLATE_NS).await;
    for p in pods.iter().filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with(&format!("{app}-")))) {
        let events = c.events_for(p.metadata.name.as_deref().unwrap_or_default()).await;
        if events.iter().any(|e| e.reason.as_deref() == Some("Nominated")) {
            return true;
        }
    }
    false
}

/// lab-general on 4-vCPU nodes with the controller running, inflate at six pods that take a
/// minute to go (two nodes of three), and a PDB allowing one inflate pod down at a time: the
/// two NodeClaims. Draining both, the one eviction the PDB allows keeps it exhausted.
pub async fn two_nodes_under_one_pdb(c: &mut Cluster) -> Vec<tenon_api::NodeClaim> {
    apply_lab_general(c);
    four_vcpu_nodes(c);
    c.start_controller();
    nodeclass_ready(c, "lab-general").await;
    inflate_grace(c, 60);
    scale_inflate(c, 6);
    all_bound(c, INFLATE_NS, 6, Duration::from_secs(120)).await;
    let claims = c.nodeclaims().await;
    assert_eq!(claims.len(), 2, "two nodes of three pods");
    c.apply_yaml(
        "pdb",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: inflate, namespace: karpenter-lab}\nspec:\n  maxUnavailable: 1\n  selector: {matchLabels: {app: inflate}}\n",
    );
    claims
}

/// A pod no node of lab-general can take (every node is in us-east-1a) is created, and a
/// NodeClaim is nominated for it within 5 s; `case` names the test in the timing line.
pub async fn a_new_pod_is_nominated_within_5s(c: &Cluster, case: &str) {
    c.apply_yaml(
        "fresh",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: fresh-0, namespace: karpenter-lab}\nspec:\n  nodeSelector: {capacity.example.io/pool: lab-general, topology.kubernetes.io/zone: us-east-1b}\n  containers: [{name: pause, image: public.ecr.aws/eks-distro/kubernetes/pause:3.10, resources: {requests: {cpu: 500m}}}]\n",
    );
    let asked = Instant::now();
    eventually(Duration::from_secs(5), "a NodeClaim nominated for the new pod within 5 s", || async {
        nominated(c, "fresh").await.then_some(())
    })
    .await;
    eprintln!("e2e timing ({case}): new pod nominated {:.1}s after it was created", asked.elapsed().as_secs_f64());
}

/// A NodePool of lab-general's class with `annotations` (a flow-map body) and disruption
/// `budgets` (a flow-sequence body), for pods labelled `capacity.example.io/pool: NAME`.
pub fn tagged_pool(name: &str, annotations: &str, budgets: &str) -> String {
    format!(
        r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: {name}
  annotations: {{{annotations}}}
spec:
  template:
    metadata:
      labels:
        capacity.example.io/pool: {name}
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: lab-general
  disruption:
    budgets: [{budgets}]
"#
    )
}
