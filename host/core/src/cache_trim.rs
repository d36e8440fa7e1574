//! What the controller's caches may drop: any object's managedFields and last-applied
//! copy, and the fields of Pods and Nodes that no decision, series or drain reads
//! (commands, environments, probes, mounts, container statuses, a node's image list). A
//! real pod's spec and status are mostly these; the cache holds every pod of the cluster.
//! Nothing writes a cached object back whole (every write is a patch), so what the cache
//! drops stays on the server.

use k8s_openapi::api::core::v1::{Container, Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// kubectl's copy of the last applied manifest.
pub const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Drops what nothing reads of any object's metadata: managedFields and kubectl's
/// last-applied copy, most of a typical object's bytes.
pub fn meta(m: &mut ObjectMeta) {
    m.managed_fields = None;
    if let Some(a) = m.annotations.as_mut() {
        a.remove(LAST_APPLIED);
    }
}

/// Drops what nothing reads of `p`.
pub fn pod(p: &mut Pod) {
    if let Some(spec) = p.spec.as_mut() {
        spec.containers.iter_mut().for_each(container);
        spec.init_containers.iter_mut().flatten().for_each(container);
        // Debug containers request nothing the scheduler counts.
        spec.ephemeral_containers = None;
        spec.image_pull_secrets = None;
        spec.dns_config = None;
        spec.host_aliases = None;
        spec.security_context = None;
    }
    if let Some(status) = p.status.as_mut() {
        status.container_statuses = None;
        status.init_container_statuses = None;
        status.ephemeral_container_statuses = None;
        status.pod_ips = None;
        status.host_ips = None;
    }
}

/// A container keeps its name, image, resources, ports and restart policy.
fn container(c: &mut Container) {
    c.command = None;
    c.args = None;
    c.env = None;
    c.env_from = None;
    c.liveness_probe = None;
    c.readiness_probe = None;
    c.startup_probe = None;
    c.lifecycle = None;
    c.volume_mounts = None;
    c.volume_devices = None;
    c.security_context = None;
    c.working_dir = None;
    c.termination_message_path = None;
    c.termination_message_policy = None;
}

/// Drops what nothing reads of `n`: the images it holds, what it runs, its volumes in use
/// (termination reads VolumeAttachments).
pub fn node(n: &mut Node) {
    if let Some(status) = n.status.as_mut() {
        status.images = None;
        status.node_info = None;
        status.volumes_in_use = None;
        status.volumes_attached = None;
        status.daemon_endpoints = None;
        status.config = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::{ClusterObjects, shared, snapshot};
    use serde_json::json;
    use std::sync::Arc;

    fn realistic_container(name: &str) -> serde_json::Value {
        json!({
            "name": name, "image": "registry.example/app:1.2.3", "command": ["/app"], "args": ["--serve"],
            "env": (0..40).map(|i| json!({"name": format!("VAR_{i}"), "value": "x".repeat(40)})).collect::<Vec<_>>(),
            "envFrom": [{"configMapRef": {"name": "app"}}],
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
            "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
            "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            "securityContext": {"runAsNonRoot": true}
        })
    }

    fn pod(name: &str, node: Option<&str>) -> Pod {
        let mut spec = json!({
            "containers": [realistic_container("app")],
            "initContainers": [realistic_container("init")],
            "tolerations": [{"key": "dedicated", "operator": "Exists"}],
            "nodeSelector": {"kubernetes.io/arch": "amd64"},
            "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "a"}}}]}},
            "volumes": [{"name": "data", "emptyDir": {}}],
            "imagePullSecrets": [{"name": "pull"}],
            "securityContext": {"fsGroup": 1000}
        });
        let status = match node {
            Some(n) => {
                spec["nodeName"] = json!(n);
                json!({"phase": "Running", "hostIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.9"}],
                    "conditions": [{"type": "Ready", "status": "True"}],
                    "containerStatuses": [{"name": "app", "image": "app", "imageID": "sha256:abc", "ready": true, "restartCount": 0}]})
            }
            None => json!({"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}),
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name, "labels": {"app": "a"},
                "creationTimestamp": "2026-12-01T00:00:00Z",
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a-1", "uid": "rs", "controller": true}]},
            "spec": spec, "status": status
        }))
        .unwrap()
    }

    fn node() -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a", "karpenter.sh/nodepool": "default"}},
            "spec": {"providerID": "aws:///us-east-1a/i-1", "taints": [{"key": "dedicated", "effect": "NoSchedule"}]},
            "status": {
                "capacity": {"cpu": "4", "memory": "16Gi", "pods": "58"},
                "allocatable": {"cpu": "3900m", "memory": "15Gi", "pods": "58"},
                "conditions": [{"type": "Ready", "status": "True"}],
                "images": (0..50).map(|i| json!({"names": [format!("registry.example/img-{i}:latest")], "sizeBytes": 1000})).collect::<Vec<_>>(),
                "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.1", "osImage": "AL2023",
                    "containerRuntimeVersion": "containerd://1.7", "kubeletVersion": "v1.33.0", "kubeProxyVersion": "",
                    "operatingSystem": "linux", "architecture": "amd64"},
                "volumesInUse": ["kubernetes.io/csi/ebs^vol-1"]
            }
        }))
        .unwrap()
    }

    fn objects(trimmed: bool) -> ClusterObjects {
        let mut pods = vec![pod("bound", Some("node-a")), pod("pending", None)];
        let mut nodes = vec![node()];
        if trimmed {
            pods.iter_mut().for_each(super::pod);
            nodes.iter_mut().for_each(super::node);
        }
        ClusterObjects { pods: shared(pods), nodes: shared(nodes), ..Default::default() }
    }

    #[test]
    fn a_decision_sees_the_same_snapshot_with_the_dropped_fields_gone() {
        let full = objects(false);
        let trimmed = objects(true);
        let size =
            |o: &ClusterObjects| o.pods.iter().map(|p| serde_json::to_string(&**p).unwrap().len()).sum::<usize>();
        assert!(size(&trimmed) * 3 < size(&full), "{} → {} bytes of pods", size(&full), size(&trimmed));
        let snap = |o: &ClusterObjects| {
            let (snap, errors) = snapshot(o, &|_| Arc::new(vec![]), 1_800_000_000);
            assert!(errors.is_empty(), "{errors:?}");
            assert_eq!((snap.pods.len(), snap.nodes.len()), (2, 1));
            assert!(snap.pods.iter().all(|p| p.host_ports.len() == 2 && p.requests.cpu == 500), "{snap:?}");
            format!("{snap:?}")
        };
        assert_eq!(snap(&trimmed), snap(&full));
        let c = &trimmed.pods[0].spec.as_ref().unwrap().containers[0];
        assert!(c.env.is_none() && c.liveness_probe.is_none() && c.resources.is_some() && c.ports.is_some());
        assert!(trimmed.nodes[0].status.as_ref().unwrap().images.is_none());
    }
}
