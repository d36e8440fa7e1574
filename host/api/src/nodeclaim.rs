//! `karpenter.sh/v1` NodeClaim.

use crate::common::{
    Condition, NodeClassReference, NodeSelectorRequirementWithMinValues, ResourceList, Taint, default_expire_after,
    no_default, require, requirement_rules,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A NodeClaim: one request for one node, from launch to termination.
// Each printcolumn(...) repeats `type_ = "string"`; clippy reads that as a duplicate attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    status = "NodeClaimStatus",
    derive = "PartialEq",
    category = "karpenter",
    shortname = "nc",
    shortname = "ncs",
    doc = "NodeClaim is the Schema for the NodeClaims API",
    printcolumn(name = "Type", type_ = "string", json_path = ".metadata.labels.node\\.kubernetes\\.io/instance-type"),
    printcolumn(name = "Capacity", type_ = "string", json_path = ".metadata.labels.karpenter\\.sh/capacity-type"),
    printcolumn(name = "Zone", type_ = "string", json_path = ".metadata.labels.topology\\.kubernetes\\.io/zone"),
    printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "ImageID", type_ = "string", json_path = ".status.imageID", priority = "1"),
    printcolumn(name = "ID", type_ = "string", json_path = ".status.providerID", priority = "1"),
    printcolumn(
        name = "NodePool",
        type_ = "string",
        json_path = ".metadata.labels.karpenter\\.sh/nodepool",
        priority = "1"
    ),
    printcolumn(name = "NodeClass", type_ = "string", json_path = ".spec.nodeClassRef.name", priority = "1"),
    printcolumn(
        name = "Drifted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Drifted\")].status",
        priority = "1"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "spec is immutable"}]))]
#[schemars(transform = |s: &mut schemars::Schema| require(s, &["nodeClassRef", "requirements"]))]
pub struct NodeClaimSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    #[serde(default)]
    #[schemars(length(max = 100), transform = no_default, transform = requirement_rules)]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    #[serde(default, skip_serializing_if = "ResourceRequirements::is_empty")]
    pub resources: ResourceRequirements,
    /// Required; `None` only so validation can say so by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_ref: Option<NodeClassReference>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub termination_grace_period: Option<String>,
    #[serde(default = "default_expire_after")]
    #[schemars(regex(pattern = r"^(([0-9]+(s|m|h))+|Never)$"))]
    pub expire_after: String,
}

/// The resources a NodeClaim must provide.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceRequirements {
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub requests: ResourceList,
}

impl ResourceRequirements {
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }
}

/// Observed state of a NodeClaim.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    #[serde(default, rename = "providerID", skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    #[serde(default, rename = "imageID", skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub capacity: ResourceList,
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub allocatable: ResourceList,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Last time a pod was bound to or removed from the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_pod_event_time: Option<Time>,
}
