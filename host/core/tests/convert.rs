//! Reading Kubernetes objects: the numbers and constraints a user wrote mean what they mean
//! to kube-scheduler.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;
use tenon_core::cached_pod;
use tenon_core::convert;

fn yaml<T: serde::de::DeserializeOwned>(s: &str) -> T {
    serde_yaml::from_str(s).unwrap()
}

#[test]
fn pod_requests_count_sidecars_init_containers_and_overhead() {
    let p: cached_pod::Pod = yaml(
        r#"
metadata: {name: p, namespace: default}
spec:
  overhead: {cpu: 100m}
  initContainers:
    - {name: sidecar, restartPolicy: Always, resources: {requests: {cpu: 500m, memory: 64Mi}}}
    - {name: migrate, resources: {requests: {cpu: "2", memory: 1Gi}}}
  containers:
    - {name: app, resources: {requests: {cpu: "1", memory: 256Mi}}}
    - {name: log, resources: {requests: {cpu: 250m}}}
"#,
    );
    let pod = convert::pod(&p).unwrap();
    // max(app+log+sidecar = 1.75, sidecar+migrate = 2.5) + overhead 0.1
    assert_eq!(pod.requests.cpu, 2600);
    // max(256Mi + 64Mi, 64Mi + 1Gi)
    assert_eq!(pod.requests.memory, (64 << 20) + (1 << 30));
    assert_eq!(pod.requests.pods, 1);
}

#[test]
fn bad_quantities_are_errors_naming_the_field() {
    let p: cached_pod::Pod = yaml(
        "metadata: {name: bad, namespace: ns}\nspec:\n  containers:\n    - {name: c, resources: {requests: {cpu: lots}}}\n",
    );
    let e = convert::pod(&p).unwrap_err();
    assert!(e.to_string().contains("Pod ns/bad") && e.to_string().contains("cpu"), "{e}");
}

#[test]
fn volume_zones_come_from_bound_volumes_and_storage_classes() {
    let p: cached_pod::Pod = yaml(
        r#"
metadata: {name: db, namespace: data}
spec:
  containers: [{name: c}]
  volumes:
    - {name: a, persistentVolumeClaim: {claimName: bound}}
    - {name: b, persistentVolumeClaim: {claimName: pending}}
"#,
    );
    let claims: Vec<core::PersistentVolumeClaim> = vec![
        yaml("metadata: {name: bound, namespace: data}\nspec: {volumeName: pv-1}"),
        yaml("metadata: {name: pending, namespace: data}\nspec: {storageClassName: zonal}"),
    ];
    let pv: core::PersistentVolume = yaml(
        r#"
metadata: {name: pv-1}
spec:
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: topology.ebs.csi.aws.com/zone, operator: In, values: [us-east-1b]}]
"#,
    );
    let sc: storage::StorageClass = yaml(
        r#"
metadata: {name: zonal}
provisioner: ebs.csi.aws.com
allowedTopologies:
  - matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [us-east-1a, us-east-1b]}]
"#,
    );
    let claims = convert::shared(claims);
    let reqs = convert::volume_requirements(&p, &claims, &convert::shared([pv.clone()]), &convert::shared([sc]));
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(reqs[0].get("topology.kubernetes.io/zone").unwrap().values(), ["us-east-1b"]);
    // Volumes no zone serves together leave the pod one impossible alternative.
    let only_a: storage::StorageClass = yaml(
        "metadata: {name: zonal}\nprovisioner: ebs.csi.aws.com\nallowedTopologies: [{matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [us-east-1a]}]}]\n",
    );
    let reqs = convert::volume_requirements(&p, &claims, &convert::shared([pv]), &convert::shared([only_a]));
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert!(reqs[0].get("topology.kubernetes.io/zone").unwrap().is_empty(), "{reqs:?}");
}

#[test]
fn spread_and_affinity_read_kubernetes_defaults() {
    let p: cached_pod::Pod = yaml(
        r#"
metadata: {name: w, namespace: default, labels: {app: web, rev: "7"}}
spec:
  containers: [{name: c}]
  topologySpreadConstraints:
    - {maxSkew: 2, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}, matchLabelKeys: [rev]}
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - {weight: 10, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: web}}}}
        - {weight: 90, podAffinityTerm: {topologyKey: topology.kubernetes.io/zone, labelSelector: {matchLabels: {app: web}}}}
"#,
    );
    let pod = convert::pod(&p).unwrap();
    let c = &pod.spread[0];
    assert!(
        c.honor_node_affinity && !c.honor_node_taints,
        "nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore by default"
    );
    assert_eq!(c.when_unsatisfiable, tenon_core::model::WhenUnsatisfiable::ScheduleAnyway);
    // matchLabelKeys narrows the selector to this revision.
    let mut other_rev = pod.labels.clone();
    other_rev.insert("rev".into(), "6".into());
    assert!(c.selector.matches(&pod.labels) && !c.selector.matches(&other_rev));
    assert_eq!(pod.preferred_anti_affinity[0].0, 90, "heaviest preference first");
}

#[test]
fn a_pod_preempting_its_way_onto_a_node_is_not_provisioned_for() {
    // kube-scheduler nominated a node for it (it is evicting lower-priority pods there):
    // Karpenter's IsProvisionable leaves such a pod alone.
    let p: cached_pod::Pod = yaml(
        r#"
metadata: {name: high, namespace: default}
spec: {containers: [{name: c}]}
status:
  phase: Pending
  nominatedNodeName: ip-10-0-1-2.ec2.internal
  conditions: [{type: PodScheduled, status: "False", reason: Unschedulable}]
"#,
    );
    assert!(!convert::is_provisionable(&p));
    let mut waiting = p.clone();
    waiting.status.as_mut().unwrap().nominated_node_name = None;
    assert!(convert::is_provisionable(&waiting));
}

#[test]
fn a_pod_change_the_watch_saw_restarts_consolidate_after_before_the_status_says_so() {
    // The NodeClaim's lastPodEventTime is an hour old, but the pod watch saw the node's pods
    // change 10 s ago (the status write has not reached the cache yet): not consolidatable.
    use crate::support::karpenter::{Cluster, NOW, assorted};
    let mut c = Cluster::new(assorted());
    c.now = NOW + 3600;
    c.nodepool(
        "default",
        "  template:\n    spec:\n      requirements: []\n  disruption:\n    consolidateAfter: 30s\n    consolidationPolicy: WhenEmpty\n",
    );
    c.initialized_node("node-1", "default", "1-cpu-1-mem-amd64-linux-test-zone-1-on-demand", "{cpu: \"32\"}", NOW);
    let consolidatable = |c: &Cluster| {
        let snap = c.snapshot();
        let d = tenon_core::disruption::disrupt(&snap, &tenon_core::disruption::DefaultPolicies);
        d.candidates.iter().map(|k| k.consolidatable).collect::<Vec<_>>()
    };
    assert_eq!(consolidatable(&c), [true], "an hour after the last pod event");
    c.objects.pod_changes.insert("node-1".into(), c.now - 10);
    assert_eq!(consolidatable(&c), [false], "10 s after a change the watch saw");
    c.objects.pod_changes.insert("node-1".into(), c.now - 30);
    assert_eq!(consolidatable(&c), [true], "consolidateAfter has passed since that change");
}

/// Karpenter's `StateNode.Taints`: only a node a NodeClaim manages has its ephemeral taints
/// (`karpenter.sh/unregistered`, not-ready…) ignored until it is initialized. A Node that
/// carries a NodePool's label but that no NodeClaim claims (an instance launched by a
/// CreateFleet whose answer was lost) keeps them: pods were nominated to it forever while
/// kube-scheduler, honouring the taint, never placed them.
#[test]
fn only_a_managed_node_has_its_ephemeral_taints_ignored_until_initialized() {
    let node: core::Node = yaml(
        "metadata: {name: n1, labels: {karpenter.sh/nodepool: default, kubernetes.io/hostname: n1}}
spec:
  providerID: aws:///us-east-1a/i-1
  taints: [{key: karpenter.sh/unregistered, effect: NoExecute}]
status: {allocatable: {cpu: '4', memory: 8Gi, pods: '58'}}",
    );
    let claim: tenon_api::NodeClaim = yaml(
        "apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: default-a, labels: {karpenter.sh/nodepool: default}}
spec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}
status: {providerID: aws:///us-east-1a/i-1, nodeName: n1}",
    );
    let taints = |claims: Vec<tenon_api::NodeClaim>| {
        let objects = convert::ClusterObjects {
            nodes: convert::shared(vec![node.clone()]),
            nodeclaims: convert::shared(claims),
            ..Default::default()
        };
        let (snap, errors) = convert::snapshot(&objects, &|_| std::sync::Arc::new(vec![]), 1_800_000_000);
        assert!(errors.is_empty(), "{errors:?}");
        snap.nodes[0].taints.iter().map(|t| t.key.clone()).collect::<Vec<_>>()
    };
    assert_eq!(taints(vec![]), ["karpenter.sh/unregistered"], "no NodeClaim: the taint holds pods off");
    assert!(taints(vec![claim]).is_empty(), "its NodeClaim's node: passing until initialized");
}
