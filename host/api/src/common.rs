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
    #[schemars(
        length(max = 316),
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
        )
    )]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !self.find(\"^([^/]+)\").endsWith(\"karpenter.sh\")",
         "message": "label domain \"karpenter.sh\" is restricted"},
        {"rule": "self != \"kubernetes.io/hostname\"", "message": "label \"kubernetes.io/hostname\" is restricted"},
    ]))]
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
    #[schemars(
        length(min = 1),
        regex(
            pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
        )
    )]
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
    ))]
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
#[schemars(transform = |s: &mut schemars::Schema| require(s, &["group", "kind", "name"]))]
pub struct NodeClassReference {
    /// API group of the NodeClass, `karpenter.k8s.aws` for EC2NodeClass.
    #[serde(default)]
    #[schemars(transform = no_default, regex(pattern = r"^[^/]*$"))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != ''", "message": "group may not be empty"}]))]
    pub group: String,
    /// Kind of the NodeClass, `EC2NodeClass`.
    #[serde(default)]
    #[schemars(transform = no_default)]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != ''", "message": "kind may not be empty"}]))]
    pub kind: String,
    /// Name of the NodeClass.
    #[serde(default)]
    #[schemars(transform = no_default)]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != ''", "message": "name may not be empty"}]))]
    pub name: String,
}

/// Label values as Kubernetes takes them.
fn label_values(schema: &mut schemars::Schema) {
    if let Some(obj) = schema.as_object_mut() {
        obj.insert(
            "additionalProperties".into(),
            serde_json::json!({"type": "string", "maxLength": 63, "pattern": r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$"}),
        );
    }
}

/// Marks fields required in an object's schema. Serde defaults (kept so validation can name
/// a missing field) would otherwise leave them optional for the API server.
pub(crate) fn require(schema: &mut schemars::Schema, fields: &[&str]) {
    let Some(obj) = schema.as_object_mut() else { return };
    let list = obj.entry("required").or_insert_with(|| serde_json::json!([]));
    if let Some(list) = list.as_array_mut() {
        for f in fields {
            if !list.iter().any(|x| x == f) {
                list.push(serde_json::json!(f));
            }
        }
    }
}

/// Serde's default lets validation name a missing field; the API server must still refuse it.
pub(crate) fn no_default(schema: &mut schemars::Schema) {
    schema.remove("default");
}

/// The requirement rules Karpenter's CRDs put on NodePool and NodeClaim requirement lists.
pub(crate) fn requirement_rules(schema: &mut schemars::Schema) {
    let rules = serde_json::json!([
        {"rule": "self.all(x, x.operator == 'In' ? x.values.size() != 0 : true)",
         "message": "requirements with operator 'In' must have a value defined"},
        {"rule": "self.all(x, (x.operator == 'Gt' || x.operator == 'Lt' || x.operator == 'Gte' || x.operator == 'Lte') ? (x.values.size() == 1 && int(x.values[0]) >= 0) : true)",
         "message": "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value"},
        {"rule": "self.all(x, (x.operator == 'In' && has(x.minValues)) ? x.values.size() >= x.minValues : true)",
         "message": "requirements with 'minValues' must have at least that many values specified in the 'values' field"},
    ]);
    add_rules(schema, rules);
}

/// Appends CEL rules to a schema's `x-kubernetes-validations`.
pub(crate) fn add_rules(schema: &mut schemars::Schema, rules: serde_json::Value) {
    let Some(obj) = schema.as_object_mut() else { return };
    let list = obj.entry("x-kubernetes-validations").or_insert_with(|| serde_json::json!([]));
    if let (Some(list), Some(new)) = (list.as_array_mut(), rules.as_array()) {
        list.extend(new.iter().cloned());
    }
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
    #[schemars(transform = label_values, extend("maxProperties" = 100))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.all(x, x in [\"karpenter.sh/capacity-type\", \"karpenter.sh/nodepool\"] || !x.find(\"^([^/]+)\").endsWith(\"karpenter.sh\"))",
         "message": "label domain \"karpenter.sh\" is restricted"},
        {"rule": "self.all(x, x != \"karpenter.sh/nodepool\")", "message": "label \"karpenter.sh/nodepool\" is restricted"},
        {"rule": "self.all(x, x != \"kubernetes.io/hostname\")", "message": "label \"kubernetes.io/hostname\" is restricted"},
    ]))]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// Karpenter's default for `expireAfter`.
pub const DEFAULT_EXPIRE_AFTER: &str = "720h";

pub(crate) fn default_expire_after() -> String {
    DEFAULT_EXPIRE_AFTER.to_string()
}
