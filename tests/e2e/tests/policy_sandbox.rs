//! The policy sandbox in the controller: a policy that blocks in a WASI call (an hour's
//! `std::thread::sleep`) on one NodePool holds up nothing, on its NodePool or any other.

use k8s_openapi::api::core::v1::Pod;
use std::time::{Duration, Instant};
use tenon_e2e::scenario::{INFLATE_NS, apply_lab_general, nodeclass_ready, scale_inflate, unschedulable};
use tenon_e2e::{Cluster, eventually, has_condition, label};

const SLEEPY: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: sleepy
  annotations:
    tenon.dev/scoring-policy: sleepy-scorer
    tenon.dev/policy-config: '{"mode": "sleep"}'
spec:
  template:
    metadata:
      labels:
        capacity.example.io/pool: sleepy
    spec:
      requirements:
        - key: karpenter.sh/capacity-type
          operator: In
          values: ["on-demand"]
        - key: karpenter.k8s.aws/instance-category
          operator: In
          values: ["c", "m"]
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: lab-general
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: sleepy
  namespace: karpenter-lab
spec:
  replicas: 2
  selector:
    matchLabels: {app: sleepy}
  template:
    metadata:
      labels: {app: sleepy}
    spec:
      nodeSelector:
        capacity.example.io/pool: sleepy
      terminationGracePeriodSeconds: 0
      containers:
        - name: pause
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.10
          resources:
            requests: {cpu: "1", memory: 256Mi}
"#;

/// Pods of `app` marked Unschedulable.
fn unschedulable_of(pods: &[Pod], app: &str) -> usize {
    let mine: Vec<Pod> = pods.iter().filter(|p| label(&p.metadata.labels, "app") == Some(app)).cloned().collect();
    unschedulable(&mine)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_policy_on_one_nodepool_does_not_hold_up_another() {
    let mut c = Cluster::start("sleepy-policy").await;
    let store = c.policy_store(&[("hostile_scorer.wasm", "sleepy-scorer.wasm")]);
    c.controller_env.push(("TENON_POLICY_DIR".into(), store.display().to_string()));
    apply_lab_general(&c);
    c.apply_yaml("sleepy", SLEEPY);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;

    // The sleepy NodePool's pods wait for a decision that calls its sleeping scorer.
    eventually(Duration::from_secs(20), "the sleepy pods marked Unschedulable", || async {
        (unschedulable_of(&c.pods(INFLATE_NS).await, "sleepy") == 2).then_some(())
    })
    .await;
    scale_inflate(&c, 8);
    let pending = eventually(Duration::from_secs(20), "8 inflate pods marked Unschedulable", || async {
        (unschedulable_of(&c.pods(INFLATE_NS).await, "inflate") == 8).then(Instant::now)
    })
    .await;
    // lab-general provisions within 10 s, as it would without the sleepy NodePool.
    eventually(Duration::from_secs(10), "a Launched lab-general NodeClaim within 10 s", || async {
        c.nodeclaims()
            .await
            .iter()
            .any(|nc| {
                label(&nc.metadata.labels, "karpenter.sh/nodepool") == Some("lab-general")
                    && has_condition(nc, "Launched")
            })
            .then_some(())
    })
    .await;
    let took = pending.elapsed();
    // The sleepy NodePool is served too: its scorer's hour-long sleep took no time.
    eventually(Duration::from_secs(30), "a Launched sleepy NodeClaim", || async {
        c.nodeclaims()
            .await
            .iter()
            .any(|nc| {
                label(&nc.metadata.labels, "karpenter.sh/nodepool") == Some("sleepy") && has_condition(nc, "Launched")
            })
            .then_some(())
    })
    .await;
    // (Whether each call's answer was used is host/policy's hostile suite's to prove: on a
    // loaded 2-core machine a call over ~3,000 offerings can overrun its 50 ms in CPU alone.)
    let calls = c.metric(r#"tenon_policy_calls_total{policy="sleepy-scorer",hook="scoring"}"#).await;
    assert!(calls.is_some_and(|n| n >= 1.0), "the sleeping scorer was called: {calls:?}");
    c.assert_controller_running();
    eprintln!("lab-general launched {took:?} after its pods were marked Unschedulable");
}
