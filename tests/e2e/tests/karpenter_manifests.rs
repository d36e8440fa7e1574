//! Manifests written for Karpenter v1.14 apply unchanged and mean the same: a NodePool with
//! the Balanced policy, a label in the kubernetes.io domain and no consolidateAfter is admitted
//! (consolidateAfter defaulted to 0s by the CRD), validates, and provisions. An EC2NodeClass
//! the API server admits but validation refuses says so on its status and in an Event.

use kube::Api;
use std::time::Duration;
use tenon_api::{EC2NodeClass, NodePool};
use tenon_e2e::scenario::{INFLATE_NS, LAB, all_bound, nodeclass_ready, scale_inflate};
use tenon_e2e::{Cluster, eventually};

const WORKERS: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: workers
spec:
  template:
    metadata:
      labels:
        node-role.kubernetes.io/worker: ""
        capacity.example.io/pool: lab-general
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: lab-general
  disruption:
    consolidationPolicy: Balanced
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_karpenter_1_14_nodepool_applies_validates_and_provisions() {
    let mut c = Cluster::start("karpenter-manifests").await;
    c.kubectl(&[
        "apply",
        "-f",
        &format!("{LAB}/ec2nodeclass-lab-general.yaml"),
        "-f",
        &format!("{LAB}/karpenter-positive.yaml"),
    ]);
    c.apply_yaml("workers", WORKERS);
    let api: Api<NodePool> = Api::all(c.client.clone());
    let stored = api.get("workers").await.expect("admitted");
    assert_eq!(stored.spec.disruption.consolidate_after.as_deref(), Some("0s"), "defaulted by the CRD");
    assert_eq!(stored.spec.disruption.consolidation_policy, "Balanced");
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    eventually(Duration::from_secs(30), "ValidationSucceeded=True on workers", || async {
        let np = api.get("workers").await.ok()?;
        let conds = np.status?.conditions;
        let v = conds.iter().find(|x| x.type_ == "ValidationSucceeded")?;
        assert_eq!(v.status, "True", "{}: {}", v.reason, v.message);
        Some(())
    })
    .await;
    scale_inflate(&c, 3);
    all_bound(&c, INFLATE_NS, 3, Duration::from_secs(90)).await;
    let claims = c.nodeclaims().await;
    assert!(!claims.is_empty());
    for nc in claims {
        assert_eq!(tenon_e2e::label(&nc.metadata.labels, "karpenter.sh/nodepool"), Some("workers"));
        assert_eq!(tenon_e2e::label(&nc.metadata.labels, "node-role.kubernetes.io/worker"), Some(""));
    }
    // Admitted (Karpenter's CRD has the field) but refused: Tenon does not launch into
    // placement groups yet.
    let placed = std::fs::read_to_string(tenon_e2e::repo().join(LAB).join("ec2nodeclass-lab-general.yaml"))
        .expect("the lab EC2NodeClass")
        .replace("name: lab-general", "name: placed")
        .replace("spec:\n", "spec:\n  placementGroupSelector: {name: my-placement-group}\n");
    c.apply_yaml("placed", &placed);
    let classes: Api<EC2NodeClass> = Api::all(c.client.clone());
    let message = eventually(Duration::from_secs(30), "ValidationSucceeded=False on placed", || async {
        let nc = classes.get("placed").await.ok()?;
        let conds = nc.status?.conditions;
        let v = conds.iter().find(|x| x.type_ == "ValidationSucceeded" && x.status == "False")?;
        let ready = conds.iter().find(|x| x.type_ == "Ready")?;
        assert_eq!(ready.status, "False");
        Some(v.message.clone())
    })
    .await;
    assert!(message.contains("spec.placementGroupSelector"), "{message}");
    eventually(Duration::from_secs(30), "a ValidationFailed Event on placed", || async {
        let events = c.events_for("placed").await;
        events.into_iter().find(|e| e.reason.as_deref() == Some("ValidationFailed")).and_then(|e| e.message)
    })
    .await;
    c.assert_controller_running();
}
