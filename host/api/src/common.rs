//! Types shared by NodePool, NodeClaim and EC2NodeClass.
//!
//! Fields whose values have rules (operators, durations, effects) are plain strings here so a
//! bad value reaches validation, which can name the field and the fix, instead of failing
//! deserialization with a bare type error.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A resource name → quantity map (`cpu: "64"`, `memory: 256Gi`, `nodes: 10`).
pub type ResourceList = BTreeMap<String, Quantity>;

/// A node selector requirement with Karpenter's `minValues`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeSelectorRequirementWithMinValues {
    /// The label key that the selector applies to.
    #[schemars(length(max = 316))]
    pub key: String,
    /// In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte.
    #[schemars(extend("enum" = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]))]
    pub operator: String,
    /// Values for In/NotIn (one or more), Gt/Lt/Gte/Lte (exactly one integer), none otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The minimum number of distinct values this key must keep across the instance types a
    /// NodeClaim may launch as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub min_values: Option<i64>,
}

/// A node taint.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// NoSchedule, PreferNoSchedule or NoExecute.
    #[schemars(extend("enum" = ["NoSchedule", "PreferNoSchedule", "NoExecute"]))]
    pub effect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<Time>,
}

/// Reference from a NodePool or NodeClaim to its provider NodeClass.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClassReference {
    /// API group of the NodeClass, `karpenter.k8s.aws` for EC2NodeClass.
    #[serde(default)]
    pub group: String,
    /// Kind of the NodeClass, `EC2NodeClass`.
    #[serde(default)]
    pub kind: String,
    /// Name of the NodeClass.
    #[serde(default)]
    pub name: String,
}

/// A status condition, as Karpenter's `operatorpkg/status.Condition`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    /// True, False or Unknown.
    #[schemars(extend("enum" = ["True", "False", "Unknown"]))]
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    pub last_transition_time: Time,
    /// A CamelCase reason for the condition's last transition.
    pub reason: String,
    /// A human readable message with details about the transition.
    #[schemars(length(max = 32768))]
    pub message: String,
}

impl Condition {
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }
}

/// Finds a condition by type in a status' condition list.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Labels and annotations of a NodePool's NodeClaim template.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMetadata {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Karpenter's default for `expireAfter`.
pub const DEFAULT_EXPIRE_AFTER: &str = "720h";

pub(crate) fn default_expire_after() -> String {
    DEFAULT_EXPIRE_AFTER.to_string()
}
