//! A Pod as the controller's cache keeps it: the fields some decision, series or drain reads,
//! under k8s-openapi's names and types, and nothing else. The cache holds every pod of the
//! cluster, and k8s-openapi's `Pod` carries every field of the API inline (2 KiB a pod, 2 KiB
//! a container, before any value); reading into this type never allocates the rest. Anything
//! that needs a field not here fails to compile rather than reading an absent value.
//!
//! Nothing writes a cached pod back (every write is a patch), so what it leaves out stays on
//! the server.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pod {
    #[serde(default)]
    pub metadata: ObjectMeta,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<PodSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<PodStatus>,
}

impl k8s_openapi::Resource for Pod {
    const API_VERSION: &'static str = "v1";
    const GROUP: &'static str = "";
    const KIND: &'static str = "Pod";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "pods";
    type Scope = k8s_openapi::NamespaceResourceScope;
}

impl k8s_openapi::ListableResource for Pod {
    const LIST_KIND: &'static str = "PodList";
}

impl k8s_openapi::Metadata for Pod {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodSpec {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affinity: Option<core::Affinity>,
    pub containers: Vec<Container>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub init_containers: Option<Vec<Container>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub overhead: Option<BTreeMap<String, Quantity>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preemption_policy: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_claims: Option<Vec<core::PodResourceClaim>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<core::ResourceRequirements>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scheduling_gates: Option<Vec<core::PodSchedulingGate>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub termination_grace_period_seconds: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<core::Toleration>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<core::TopologySpreadConstraint>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volumes: Option<Vec<Volume>>,
}

/// What scheduling reads of a container: its requests, host ports, and whether it is a
/// sidecar (an init container that keeps running).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Container {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<core::ContainerPort>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<core::ResourceRequirements>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
}

/// A volume's claim, if it has one: a `persistentVolumeClaim` or an `ephemeral` volume's
/// (boxed: every pod has volumes, few have ephemeral ones, and the source is 0.7 KiB inline).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Volume {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub persistent_volume_claim: Option<core::PersistentVolumeClaimVolumeSource>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ephemeral: Option<Box<core::EphemeralVolumeSource>>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct PodStatus {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<core::PodCondition>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nominated_node_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
}

/// The same pod as the cache would keep it (tests, the simulator, and anything else that
/// builds pods as k8s-openapi's type).
impl From<core::Pod> for Pod {
    fn from(p: core::Pod) -> Pod {
        Pod { metadata: p.metadata, spec: p.spec.map(PodSpec::from), status: p.status.map(PodStatus::from) }
    }
}

impl From<core::PodSpec> for PodSpec {
    fn from(s: core::PodSpec) -> PodSpec {
        let containers = |cs: Vec<core::Container>| cs.into_iter().map(Container::from).collect();
        PodSpec {
            affinity: s.affinity,
            containers: containers(s.containers),
            init_containers: s.init_containers.map(containers),
            node_name: s.node_name,
            node_selector: s.node_selector,
            overhead: s.overhead,
            priority: s.priority,
            priority_class_name: s.priority_class_name,
            preemption_policy: s.preemption_policy,
            resource_claims: s.resource_claims,
            resources: s.resources,
            scheduler_name: s.scheduler_name,
            scheduling_gates: s.scheduling_gates,
            termination_grace_period_seconds: s.termination_grace_period_seconds,
            tolerations: s.tolerations,
            topology_spread_constraints: s.topology_spread_constraints,
            volumes: s.volumes.map(|vs| vs.into_iter().map(Volume::from).collect()),
        }
    }
}

impl From<core::Container> for Container {
    fn from(c: core::Container) -> Container {
        Container {
            name: c.name,
            image: c.image,
            ports: c.ports,
            resources: c.resources,
            restart_policy: c.restart_policy,
        }
    }
}

impl From<core::Volume> for Volume {
    fn from(v: core::Volume) -> Volume {
        Volume {
            name: v.name,
            persistent_volume_claim: v.persistent_volume_claim,
            ephemeral: v.ephemeral.map(Box::new),
        }
    }
}

impl From<core::PodStatus> for PodStatus {
    fn from(s: core::PodStatus) -> PodStatus {
        PodStatus {
            conditions: s.conditions,
            nominated_node_name: s.nominated_node_name,
            phase: s.phase,
            start_time: s.start_time,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn container(name: &str) -> serde_json::Value {
        json!({
            "name": name, "image": "registry.example/app:1.2.3", "command": ["/app"], "args": ["--serve"],
            "env": (0..40).map(|i| json!({"name": format!("VAR_{i}"), "value": "x".repeat(40)})).collect::<Vec<_>>(),
            "envFrom": [{"configMapRef": {"name": "app"}}],
            "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"memory": "1Gi"}},
            "ports": [{"containerPort": 8080, "hostPort": 8080, "protocol": "TCP"}],
            "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}},
            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
            "securityContext": {"runAsNonRoot": true}
        })
    }

    /// A pod with every field the cached type keeps set, and a real pod's bulk beside them.
    fn pod() -> serde_json::Value {
        let mut sidecar = container("proxy");
        sidecar["restartPolicy"] = json!("Always");
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "app-1", "namespace": "default", "uid": "u", "labels": {"app": "a"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a-1", "uid": "rs", "controller": true}]},
            "spec": {
                "containers": [container("app")],
                "initContainers": [container("init"), sidecar],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"app": "a"}}}]}},
                "nodeName": "node-a", "nodeSelector": {"kubernetes.io/arch": "amd64"},
                "overhead": {"cpu": "100m"}, "priority": 1000, "priorityClassName": "high",
                "preemptionPolicy": "Never", "resourceClaims": [{"name": "gpu", "resourceClaimName": "gpu-1"}],
                "resources": {"requests": {"cpu": "2"}}, "schedulerName": "default-scheduler",
                "schedulingGates": [{"name": "wait"}], "terminationGracePeriodSeconds": 30,
                "tolerations": [{"key": "dedicated", "operator": "Exists"}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "a"}}}],
                "volumes": [
                    {"name": "data", "persistentVolumeClaim": {"claimName": "data-1"}},
                    {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {"accessModes": ["ReadWriteOnce"]}}}},
                    {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
                ],
                "imagePullSecrets": [{"name": "pull"}], "securityContext": {"fsGroup": 1000}
            },
            "status": {"phase": "Running", "nominatedNodeName": "node-b", "startTime": "2026-12-01T00:00:00Z",
                "hostIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.9"}],
                "conditions": [{"type": "Ready", "status": "True"}],
                "containerStatuses": [{"name": "app", "image": "app", "imageID": "sha256:abc", "ready": true, "restartCount": 0}]}
        })
    }

    /// k8s-openapi's type is the oracle for the API's field names: the cached pod read from
    /// the API's JSON is the full pod with the rest left out, field for field.
    #[test]
    fn the_cached_pod_reads_the_fields_it_keeps_as_the_full_pod_does() {
        let full: core::Pod = serde_json::from_value(pod()).unwrap();
        let cached: Pod = serde_json::from_value(pod()).unwrap();
        assert_eq!(cached, Pod::from(full.clone()));
        let spec = cached.spec.as_ref().unwrap();
        assert!(spec.affinity.is_some() && spec.overhead.is_some() && spec.resource_claims.is_some());
        assert!(spec.scheduling_gates.is_some() && spec.topology_spread_constraints.is_some());
        assert!(spec.preemption_policy.is_some() && spec.resources.is_some());
        let init = spec.init_containers.as_ref().unwrap();
        assert_eq!(init[1].restart_policy.as_deref(), Some("Always"));
        assert!(init[0].ports.is_some() && init[0].resources.is_some());
        let volumes = spec.volumes.as_ref().unwrap();
        assert!(volumes[0].persistent_volume_claim.is_some() && volumes[1].ephemeral.is_some());
        let status = cached.status.as_ref().unwrap();
        assert!(status.nominated_node_name.is_some() && status.start_time.is_some() && status.conditions.is_some());
        let size = |v: String| v.len();
        let (full_size, cached_size) =
            (size(serde_json::to_string(&full).unwrap()), size(serde_json::to_string(&cached).unwrap()));
        assert!(cached_size * 3 < full_size, "{full_size} → {cached_size} bytes");
    }

    #[test]
    fn a_cached_pod_is_a_fraction_of_k8s_openapis_in_memory() {
        assert!(std::mem::size_of::<Pod>() * 2 < std::mem::size_of::<core::Pod>());
        assert!(std::mem::size_of::<Container>() * 8 < std::mem::size_of::<core::Container>());
        assert!(std::mem::size_of::<Volume>() * 4 < std::mem::size_of::<core::Volume>());
    }
}
