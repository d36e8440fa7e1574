//! A pod's volume pins it to a zone: the controller reads PersistentVolumeClaims,
//! PersistentVolumes and StorageClasses, launches where the volume lives though another
//! zone is cheaper, and consolidation never moves the pod away from its volume.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use std::time::{Duration, Instant};
use tenon_e2e::scenario::{INFLATE_NS, apply_lab_general, nodeclass_ready};
use tenon_e2e::{Cluster, eventually, has_condition, label};

/// Spot in both zones (us-east-1b is the cheaper one, see tests/moto/account.py), consolidating
/// two seconds after a change.
const ZONAL: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: zonal}
spec:
  template:
    metadata:
      labels: {capacity.example.io/pool: zonal}
    spec:
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [spot]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m]}
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: lab-general}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 2s
    budgets: [{nodes: "100%"}]
"#;

/// A gp3 volume that exists in us-east-1a only, bound to the claim `data`.
const VOLUME: &str = r#"apiVersion: v1
kind: PersistentVolume
metadata: {name: data-1a}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  storageClassName: gp3
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0a1b2c3d4e5f60718}
  claimRef: {namespace: karpenter-lab, name: data}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
# The annotation is what Kubernetes' PV controller adds once it binds a pre-bound claim;
# the emulator runs no PV controller, and without it the claim counts as unbound.
metadata: {name: data, namespace: karpenter-lab, annotations: {pv.kubernetes.io/bind-completed: "yes"}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: gp3
  volumeName: data-1a
  resources: {requests: {storage: 10Gi}}
"#;

/// A pod using a claim that does not exist.
const ORPHAN: &str = r#"apiVersion: v1
kind: Pod
metadata: {name: orphan, namespace: karpenter-lab}
spec:
  nodeSelector: {capacity.example.io/pool: zonal}
  containers:
    - name: pause
      image: public.ecr.aws/eks-distro/kubernetes/pause:3.10
      resources: {requests: {cpu: "1", memory: 512Mi}}
      volumeMounts: [{name: data, mountPath: /data}]
  volumes: [{name: data, persistentVolumeClaim: {claimName: missing}}]
"#;

fn deployment(name: &str, volume: bool) -> String {
    let (mounts, volumes) = if volume {
        (
            "\n          volumeMounts: [{name: data, mountPath: /data}]",
            "\n      volumes: [{name: data, persistentVolumeClaim: {claimName: data}}]",
        )
    } else {
        ("", "")
    };
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: karpenter-lab}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      nodeSelector: {{capacity.example.io/pool: zonal}}
      terminationGracePeriodSeconds: 0
      containers:
        - name: pause
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.10
          resources: {{requests: {{cpu: "1", memory: 512Mi}}}}{mounts}{volumes}
"#
    )
}

/// The zone of the node pod `app` runs on, once it is bound.
async fn zone_of(c: &Cluster, app: &str) -> Option<String> {
    let pods: Vec<Pod> = c.pods(INFLATE_NS).await;
    let node = pods.iter().find(|p| label(&p.metadata.labels, "app") == Some(app))?.spec.as_ref()?.node_name.clone()?;
    let node: Node = Api::<Node>::all(c.client.clone()).get(&node).await.ok()?;
    label(&node.metadata.labels, "topology.kubernetes.io/zone").map(str::to_string)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pod_follows_its_volume_to_its_zone_and_consolidation_keeps_it_there() {
    let mut c = Cluster::start("volume-zone").await;
    apply_lab_general(&c);
    c.apply_yaml("zonal", ZONAL);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;

    // Without a volume, the pod gets the cheaper zone.
    c.apply_yaml("free", &deployment("free", false));
    let free = eventually(Duration::from_secs(60), "the free pod bound", || async { zone_of(&c, "free").await }).await;
    assert_eq!(free, "us-east-1b", "spot in us-east-1b is the cheaper offering");

    // A pod whose claim does not exist gets nothing launched for it, and is told why.
    let before = c.nodeclaims().await.len();
    c.apply_yaml("orphan", ORPHAN);
    let event = eventually(Duration::from_secs(60), "a FailedScheduling Event on the orphan", || async {
        c.events_for("orphan").await.into_iter().find(|e| e.reason.as_deref() == Some("FailedScheduling"))
    })
    .await;
    let message = event.message.unwrap_or_default();
    assert!(
        message.contains("spec.volumes[0].persistentVolumeClaim.claimName")
            && message.contains("PersistentVolumeClaim karpenter-lab/missing not found"),
        "{message}"
    );
    c.reconciled("provisioner", 8).await;
    assert_eq!(c.nodeclaims().await.len(), before, "nothing launched for the orphan pod");

    // With its volume in us-east-1a, the pod gets a node there, though b is cheaper and the
    // free pod's node in b has room for it.
    c.apply_yaml("volume", VOLUME);
    c.apply_yaml("vol", &deployment("vol", true));
    let zone =
        eventually(Duration::from_secs(60), "the volume's pod bound", || async { zone_of(&c, "vol").await }).await;
    assert_eq!(zone, "us-east-1a", "the pod's volume lives in us-east-1a");
    // Its volume is attached to its node (the attacher stand-in), as a CSI driver would.
    let vas = Api::<k8s_openapi::api::storage::v1::VolumeAttachment>::all(c.client.clone());
    eventually(Duration::from_secs(10), "the volume attached", || async {
        let list = vas.list(&Default::default()).await.ok()?;
        list.items.iter().any(|va| va.spec.source.persistent_volume_name.as_deref() == Some("data-1a")).then_some(())
    })
    .await;
    let unbound: Vec<Pod> = c.pods(INFLATE_NS).await;
    let orphan = unbound.iter().find(|p| p.metadata.name.as_deref() == Some("orphan")).expect("the orphan pod");
    assert!(orphan.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none(), "the orphan pod has no place");
    let claims = c.nodeclaims().await;
    assert!(
        claims.iter().any(|nc| label(&nc.metadata.labels, "topology.kubernetes.io/zone") == Some("us-east-1a")
            && has_condition(nc, "Launched")),
        "a NodeClaim launched in us-east-1a: {:?}",
        claims.iter().map(|nc| label(&nc.metadata.labels, "topology.kubernetes.io/zone")).collect::<Vec<_>>()
    );

    // Two under-used nodes, consolidating after 2 s: whatever consolidation does, the pod
    // stays in us-east-1a (its volume cannot follow it to b).
    let (rounds, watch) = (c.disruption_rounds().await, Instant::now());
    while c.disruption_rounds().await < rounds + 3.0 {
        assert!(watch.elapsed() < Duration::from_secs(120), "three disruption rounds in two minutes");
        if let Some(z) = zone_of(&c, "vol").await {
            assert_eq!(z, "us-east-1a", "consolidation moved the pod away from its volume");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let zone =
        eventually(Duration::from_secs(30), "the volume's pod bound", || async { zone_of(&c, "vol").await }).await;
    assert_eq!(zone, "us-east-1a");
    c.assert_controller_running();
}
