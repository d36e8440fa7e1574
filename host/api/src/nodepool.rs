//! `karpenter.sh/v1` NodePool.

use crate::common::{
    Condition, NodeClassReference, NodeSelectorRequirementWithMinValues, ResourceList, Taint, TemplateMetadata,
    default_expire_after, no_default, require, requirement_rules,
};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A NodePool: which nodes may be launched for pending pods, how many, and when they may be
/// disrupted.
// Each printcolumn(...) repeats `type_ = "string"`; clippy reads that as a duplicate attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "karpenter.sh",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    status = "NodePoolStatus",
    derive = "PartialEq",
    category = "karpenter",
    shortname = "np",
    shortname = "nps",
    doc = "NodePool is the Schema for the NodePools API",
    scale = r#"{"specReplicasPath":".spec.replicas","statusReplicasPath":".status.nodes"}"#,
    printcolumn(name = "NodeClass", type_ = "string", json_path = ".spec.template.spec.nodeClassRef.name"),
    printcolumn(name = "Nodes", type_ = "string", json_path = ".status.nodes"),
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Weight", type_ = "integer", json_path = ".spec.weight", priority = "1"),
    printcolumn(name = "CPU", type_ = "string", json_path = ".status.resources.cpu", priority = "1"),
    printcolumn(name = "Memory", type_ = "string", json_path = ".status.resources.memory", priority = "1")
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "has(self.replicas) == has(oldSelf.replicas)",
     "message": "Cannot transition NodePool between static (replicas set) and dynamic (replicas unset) provisioning modes"},
    {"rule": "!has(self.replicas) || (!has(self.limits) || size(self.limits) == 0 || (size(self.limits) == 1 && 'nodes' in self.limits))",
     "message": "only 'limits.nodes' is supported on static NodePools"},
    {"rule": "!has(self.replicas) || !has(self.weight)", "message": "'weight' is not supported on static NodePools"},
]))]
pub struct NodePoolSpec {
    /// The template NodeClaims launched from this NodePool start from.
    pub template: NodeClaimTemplate,
    /// When and how fast nodes of this NodePool may be disrupted.
    #[serde(default)]
    pub disruption: Disruption,
    /// Upper bounds on the total capacity of this NodePool (any resource, and `nodes`).
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub limits: ResourceList,
    /// Priority among compatible NodePools; higher goes first. Absent means 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i64>,
    /// Static capacity (alpha): keep exactly this many nodes instead of following demand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i64>,
}

/// The NodeClaim template of a NodePool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimTemplate {
    #[serde(default, skip_serializing_if = "is_default_metadata")]
    pub metadata: TemplateMetadata,
    pub spec: NodeClaimTemplateSpec,
}

fn is_default_metadata(m: &TemplateMetadata) -> bool {
    m.labels.is_empty() && m.annotations.is_empty()
}

/// The NodeClaim spec a NodePool stamps out, without resource requests.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = |s: &mut schemars::Schema| require(s, &["nodeClassRef", "requirements"]))]
pub struct NodeClaimTemplateSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints expected to be removed shortly after start-up (by a DaemonSet); pods need not
    /// tolerate them to be provisioned for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    #[serde(default)]
    #[schemars(length(max = 100), transform = no_default, transform = requirement_rules)]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.all(x, x.key != \"karpenter.sh/nodepool\")", "message": "label \"karpenter.sh/nodepool\" is restricted"},
    ]))]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// Required; `None` only so validation can say so by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.group == oldSelf.group", "message": "nodeClassRef.group is immutable"},
        {"rule": "self.kind == oldSelf.kind", "message": "nodeClassRef.kind is immutable"},
    ]))]
    pub node_class_ref: Option<NodeClassReference>,
    /// How long a draining node may wait for its pods before they are deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub termination_grace_period: Option<String>,
    /// Node lifetime before it is replaced, or `Never`.
    #[serde(default = "default_expire_after")]
    #[schemars(regex(pattern = r"^(([0-9]+(s|m|h))+|Never)$"))]
    pub expire_after: String,
}

/// Disruption settings of a NodePool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Disruption {
    /// Wait after the last pod event before a node counts as consolidatable, or `Never`;
    /// `0s` when not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(([0-9]+(s|m|h))+|Never)$"), extend("default" = "0s"))]
    pub consolidate_after: Option<String>,
    /// WhenEmpty, WhenEmptyOrUnderutilized or Balanced (a move must save at least half as
    /// large a share of the NodePool's cost as the share of its disruption it causes).
    #[serde(default = "default_consolidation_policy")]
    #[schemars(extend("enum" = ["WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"]))]
    pub consolidation_policy: String,
    /// WhenEmpty, WhenEmptyOrUnderutilized or WhenCostJustifiesDisruption (newer Karpenter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["WhenEmpty", "WhenEmptyOrUnderutilized", "WhenCostJustifiesDisruption"]))]
    pub consolidate_when: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_ratio_threshold: Option<f64>,
    /// The most restrictive active budget wins.
    #[serde(default = "default_budgets")]
    #[schemars(length(max = 50))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.all(x, has(x.schedule) == has(x.duration))", "message": "'schedule' must be set with 'duration'"},
    ]))]
    pub budgets: Vec<Budget>,
}

/// A limit on how many of a NodePool's nodes may be disrupting at once.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Budget {
    /// Underutilized, Empty and/or Drifted; absent means every reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 50), transform = budget_reasons)]
    pub reasons: Option<Vec<String>>,
    /// A node count (`5`) or a percentage of the NodePool's nodes (`10%`, rounded up).
    #[serde(default = "default_budget_nodes")]
    #[schemars(regex(pattern = r"^((100|[0-9]{1,2})%|[0-9]+)$"))]
    pub nodes: String,
    /// Cron schedule (UTC) at which the budget becomes active; needs `duration`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(
        pattern = r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
    ))]
    pub schedule: Option<String>,
    /// How long the budget stays active after each schedule hit (hours and minutes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$"))]
    pub duration: Option<String>,
}

pub const CONSOLIDATION_WHEN_EMPTY: &str = "WhenEmpty";
pub const CONSOLIDATION_WHEN_EMPTY_OR_UNDERUTILIZED: &str = "WhenEmptyOrUnderutilized";
pub const CONSOLIDATION_BALANCED: &str = "Balanced";
pub const DISRUPTION_REASONS: &[&str] = &["Underutilized", "Empty", "Drifted"];

fn default_consolidation_policy() -> String {
    CONSOLIDATION_WHEN_EMPTY_OR_UNDERUTILIZED.to_string()
}

fn default_budget_nodes() -> String {
    "10%".to_string()
}

fn default_budgets() -> Vec<Budget> {
    vec![Budget { reasons: None, nodes: default_budget_nodes(), schedule: None, duration: None }]
}

impl Default for Disruption {
    fn default() -> Self {
        Disruption {
            consolidate_after: Some("0s".to_string()),
            consolidation_policy: default_consolidation_policy(),
            consolidate_when: None,
            decision_ratio_threshold: None,
            budgets: default_budgets(),
        }
    }
}

/// Observed state of a NodePool.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// Total capacity of the NodePool's nodes, including `nodes`.
    #[serde(default, skip_serializing_if = "ResourceList::is_empty")]
    pub resources: ResourceList,
    /// Number of nodes of this NodePool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodes: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl NodePool {
    /// The scheduling weight; Karpenter treats an absent weight as 0.
    pub fn weight(&self) -> i64 {
        self.spec.weight.unwrap_or(0)
    }
}

/// Budget reasons: a set of Underutilized, Empty and Drifted.
fn budget_reasons(schema: &mut schemars::Schema) {
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("x-kubernetes-list-type".into(), serde_json::json!("set"));
        obj.insert(
            "items".into(),
            serde_json::json!({"type": "string", "enum": ["Underutilized", "Empty", "Drifted"]}),
        );
    }
}
