//! What the controller's caches may drop: any object's managedFields and last-applied
//! copy, and the fields of a Node that no decision, series or drain reads (its image list,
//! what it runs). Pods are cached as [`crate::cached_pod::Pod`], which never reads the rest.
//! Nothing writes a cached object back whole (every write is a patch), so what the cache
//! drops stays on the server.

use k8s_openapi::api::core::v1::Node;
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

    fn node() -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "node-a", "labels": {"kubernetes.io/hostname": "node-a", "karpenter.sh/nodepool": "default"},
                "annotations": {LAST_APPLIED: "{\"kind\": \"Node\"}", "kept": "yes"},
                "managedFields": [{"manager": "kubelet", "operation": "Update"}]},
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

    #[test]
    fn a_decision_sees_the_same_snapshot_with_the_dropped_fields_gone() {
        let full = node();
        let mut trimmed = node();
        meta(&mut trimmed.metadata);
        super::node(&mut trimmed);
        let size = |n: &Node| serde_json::to_string(n).unwrap().len();
        assert!(size(&trimmed) * 3 < size(&full), "{} → {} bytes", size(&full), size(&trimmed));
        let snap = |n: Node| {
            let objects = ClusterObjects { nodes: shared(vec![n]), ..Default::default() };
            let (snap, errors) = snapshot(&objects, &|_| Arc::new(vec![]), 1_800_000_000);
            assert!(errors.is_empty(), "{errors:?}");
            assert_eq!(snap.nodes.len(), 1);
            format!("{snap:?}")
        };
        assert_eq!(snap(trimmed.clone()), snap(full));
        assert!(trimmed.status.as_ref().unwrap().images.is_none());
        assert!(trimmed.metadata.managed_fields.is_none());
        let annotations = trimmed.metadata.annotations.unwrap();
        assert_eq!(annotations.keys().collect::<Vec<_>>(), ["kept"]);
    }
}
