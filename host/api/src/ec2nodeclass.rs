//! `karpenter.k8s.aws/v1` EC2NodeClass.

use crate::common::{Condition, no_default, require};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How nodes launched for a NodePool join the cluster on EC2: network, image, identity, disks.
// Each printcolumn(...) repeats `type_ = "string"`; clippy reads that as a duplicate attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "karpenter.k8s.aws",
    version = "v1",
    kind = "EC2NodeClass",
    plural = "ec2nodeclasses",
    status = "EC2NodeClassStatus",
    derive = "PartialEq",
    category = "karpenter",
    shortname = "ec2nc",
    shortname = "ec2ncs",
    doc = "EC2NodeClass is the Schema for the EC2NodeClass API",
    printcolumn(name = "Ready", type_ = "string", json_path = ".status.conditions[?(@.type==\"Ready\")].status"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    printcolumn(name = "Role", type_ = "string", json_path = ".spec.role", priority = "1")
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "(has(self.role) && !has(self.instanceProfile)) || (!has(self.role) && has(self.instanceProfile))", "message": "must specify exactly one of ['role', 'instanceProfile']"},
    {"rule": "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2') : true)", "message": "if set, amiFamily must be 'AL2' or 'Custom' when using an AL2 alias"},
    {"rule": "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'al2023') ? (self.amiFamily == 'Custom' || self.amiFamily == 'AL2023') : true)", "message": "if set, amiFamily must be 'AL2023' or 'Custom' when using an AL2023 alias"},
    {"rule": "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'bottlerocket') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Bottlerocket') : true)", "message": "if set, amiFamily must be 'Bottlerocket' or 'Custom' when using a Bottlerocket alias"},
    {"rule": "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2019') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2019') : true)", "message": "if set, amiFamily must be 'Windows2019' or 'Custom' when using a Windows2019 alias"},
    {"rule": "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2022') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2022') : true)", "message": "if set, amiFamily must be 'Windows2022' or 'Custom' when using a Windows2022 alias"},
    {"rule": "!has(self.amiFamily) || (self.amiSelectorTerms.exists(x, has(x.alias) && x.alias.find('^[^@]+') == 'windows2025') ? (self.amiFamily == 'Custom' || self.amiFamily == 'Windows2025') : true)", "message": "if set, amiFamily must be 'Windows2025' or 'Custom' when using a Windows2025 alias"},
    {"rule": "self.amiSelectorTerms.exists(x, has(x.alias)) ? true : has(self.amiFamily)", "message": "must specify amiFamily if amiSelectorTerms does not contain an alias"},
]))]
#[schemars(transform = |s: &mut schemars::Schema| {
    require(s, &["amiSelectorTerms", "securityGroupSelectorTerms", "subnetSelectorTerms"])
})]
pub struct EC2NodeClassSpec {
    /// Subnet selector terms, ORed. Required.
    #[serde(default)]
    #[schemars(length(max = 30), transform = no_default)]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.size() != 0", "message": "subnetSelectorTerms cannot be empty"},
        {"rule": "self.all(x, has(x.tags) || has(x.id))", "message": "expected at least one, got none, ['tags', 'id']"},
        {"rule": "!self.all(x, has(x.id) && has(x.tags))", "message": "'id' is mutually exclusive, cannot be set with a combination of other fields in a subnet selector term"},
    ]))]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Security group selector terms, ORed. Required.
    #[serde(default)]
    #[schemars(length(max = 30), transform = no_default)]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.size() != 0", "message": "securityGroupSelectorTerms cannot be empty"},
        {"rule": "self.all(x, has(x.tags) || has(x.id) || has(x.name))", "message": "expected at least one, got none, ['tags', 'id', 'name']"},
        {"rule": "!self.all(x, has(x.id) && (has(x.tags) || has(x.name)))", "message": "'id' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
        {"rule": "!self.all(x, has(x.name) && (has(x.tags) || has(x.id)))", "message": "'name' is mutually exclusive, cannot be set with a combination of other fields in a security group selector term"},
    ]))]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 30))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.all(x, has(x.tags) || has(x.id) || has(x.instanceMatchCriteria))", "message": "expected at least one, got none, ['tags', 'id', 'instanceMatchCriteria']"},
        {"rule": "!self.all(x, has(x.id) && (has(x.tags) || has(x.ownerID) || has(x.instanceMatchCriteria)))", "message": "'id' is mutually exclusive, cannot be set along with other fields in a capacity reservation selector term"},
    ]))]
    pub capacity_reservation_selector_terms: Vec<CapacityReservationSelectorTerm>,
    #[serde(default, rename = "associatePublicIPAddress", skip_serializing_if = "Option::is_none")]
    pub associate_public_ip_address: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub ip_prefix_count: Option<i32>,
    /// AMI selector terms, ORed. Required.
    #[serde(default, rename = "amiSelectorTerms")]
    #[schemars(length(min = 1, max = 30), transform = no_default)]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.all(x, has(x.tags) || has(x.id) || has(x.name) || has(x.alias) || has(x.ssmParameter))", "message": "expected at least one, got none, ['tags', 'id', 'name', 'alias', 'ssmParameter']"},
        {"rule": "!self.exists(x, has(x.id) && (has(x.alias) || has(x.tags) || has(x.name) || has(x.owner)))", "message": "'id' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
        {"rule": "!self.exists(x, has(x.alias) && (has(x.id) || has(x.tags) || has(x.name) || has(x.owner)))", "message": "'alias' is mutually exclusive, cannot be set with a combination of other fields in amiSelectorTerms"},
        {"rule": "!(self.exists(x, has(x.alias)) && self.size() != 1)", "message": "'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms"},
    ]))]
    pub ami_selector_terms: Vec<AMISelectorTerm>,
    /// AL2, AL2023, Bottlerocket, Custom, Windows2019, Windows2022 or Windows2025; inferred from
    /// an alias.
    #[serde(default, rename = "amiFamily", skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"]))]
    pub ami_family: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// IAM role for the nodes; Tenon manages an instance profile for it. Exclusive with
    /// `instanceProfile`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self != ''", "message": "role cannot be empty"},
    ]))]
    pub role: Option<String>,
    /// An existing instance profile. Exclusive with `role`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self != ''", "message": "instanceProfile cannot be empty"},
    ]))]
    pub instance_profile: Option<String>,
    /// Tags for instances, volumes, launch templates.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.all(k, k != '')", "message": "empty tag keys aren't supported"},
        {"rule": "self.all(k, k !='eks:eks-cluster-name')", "message": "tag contains a restricted tag matching eks:eks-cluster-name"},
        {"rule": "self.all(k, !k.startsWith('kubernetes.io/cluster') )", "message": "tag contains a restricted tag matching kubernetes.io/cluster/"},
        {"rule": "self.all(k, k != 'karpenter.sh/nodepool')", "message": "tag contains a restricted tag matching karpenter.sh/nodepool"},
        {"rule": "self.all(k, k !='karpenter.sh/nodeclaim')", "message": "tag contains a restricted tag matching karpenter.sh/nodeclaim"},
        {"rule": "self.all(k, k !='karpenter.k8s.aws/ec2nodeclass')", "message": "tag contains a restricted tag matching karpenter.k8s.aws/ec2nodeclass"},
    ]))]
    pub tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.filter(x, has(x.rootVolume)?x.rootVolume==true:false).size() <= 1", "message": "must have only one blockDeviceMappings with rootVolume"},
    ]))]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// RAID0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["RAID0"]))]
    pub instance_store_policy: Option<String>,
    /// The nodes' network interfaces, replacing the default primary (or EFA) ones; with any,
    /// one must be the primary `interface` on network card 0, device 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 150))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.size() == 0 || self.exists(x, x.deviceIndex == 0 && x.networkCardIndex == 0 && x.interfaceType == 'interface')", "message": "networkInterfaces must include a primary interface with interfaceType='interface'"},
        {"rule": "self.all(x, self.filter(y, x.networkCardIndex == y.networkCardIndex && x.deviceIndex == y.deviceIndex).size() == 1 && (x.interfaceType != 'efa-only' || self.filter(y, x.networkCardIndex == y.networkCardIndex && y.interfaceType == 'efa-only').size() == 1))", "message": "networkInterfaces must not have duplicate networkCardIndex and deviceIndex pairs, and can have at most one efa device per network card"},
    ]))]
    pub network_interfaces: Vec<NetworkInterface>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    #[serde(default = "default_metadata_options", skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
    /// Idle connection tracking timeouts for the nodes' interfaces (EFA-only ones excluded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "has(self.tcpEstablishedTimeout) || has(self.udpStreamTimeout) || has(self.udpTimeout)", "message": "at least one of tcpEstablishedTimeout, udpStreamTimeout, or udpTimeout must be set"},
    ]))]
    pub connection_tracking: Option<ConnectionTracking>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enclave_options: Option<EnclaveOptions>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// The placement group the nodes launch into, by name or id. Tenon refuses it at
    /// validation for now (docs/karpenter-differences.md); it is in the schema so that
    /// installing Tenon's CRDs never prunes it from existing objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "has(self.name) || has(self.id)", "message": "expected at least one, got none, ['name', 'id']"},
        {"rule": "!(has(self.name) && has(self.id))", "message": "'name' and 'id' are mutually exclusive"},
    ]))]
    pub placement_group_selector: Option<PlacementGroupSelector>,
    /// CPU options of the nodes' instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_options: Option<CpuOptions>,
}

/// A placement group, by name or by id.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PlacementGroupSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^pg-[0-9a-z]+$"))]
    pub id: Option<String>,
}

/// CPU options of the nodes' instances.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuOptions {
    /// enabled or disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["enabled", "disabled"]))]
    pub nested_virtualization: Option<String>,
}

/// Tags to match; `*` as a value matches any value of the key.
pub type SelectorTags = BTreeMap<String, String>;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubnetSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.all(k, k != '' && self[k] != '')", "message": "empty tag keys or values aren't supported"},
    ]))]
    pub tags: Option<SelectorTags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "subnet-[0-9a-z]+"))]
    pub id: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroupSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.all(k, k != '' && self[k] != '')", "message": "empty tag keys or values aren't supported"},
    ]))]
    pub tags: Option<SelectorTags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "sg-[0-9a-z]+"))]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservationSelectorTerm {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.all(k, k != '' && self[k] != '')", "message": "empty tag keys or values aren't supported"},
    ]))]
    pub tags: Option<SelectorTags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^cr-[0-9a-z]+$"))]
    pub id: Option<String>,
    #[serde(default, rename = "ownerID", skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]{12}$"))]
    pub owner_id: Option<String>,
    /// open or targeted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["open", "targeted"]))]
    pub instance_match_criteria: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AMISelectorTerm {
    /// An EKS-optimized AMI as `family@version` (`al2023@v20260304`, `bottlerocket@latest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 30))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.matches('^[a-zA-Z0-9]+@.+$')", "message": "'alias' is improperly formatted, must match the format 'family@version'"},
        {"rule": "self.split('@')[0] in ['al2','al2023','bottlerocket','windows2019','windows2022','windows2025']", "message": "family is not supported, must be one of the following: 'al2', 'al2023', 'bottlerocket', 'windows2019', 'windows2022', 'windows2025'"},
        {"rule": "self.split('@')[0] in ['windows2019','windows2022','windows2025'] ? self.split('@')[1] == 'latest' : true", "message": "windows families may only specify version 'latest'"},
    ]))]
    pub alias: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = 20))]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.all(k, k != '' && self[k] != '')", "message": "empty tag keys or values aren't supported"},
    ]))]
    pub tags: Option<SelectorTags>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = "ami-[0-9a-z]+"))]
    pub id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

/// Kubelet settings: those Karpenter interprets (typed below), and any other kubelet
/// configuration field, which an AL2023 node's kubelet takes as written.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = open_kubelet)]
pub struct KubeletConfiguration {
    #[serde(default, rename = "clusterDNS", skip_serializing_if = "Vec::is_empty")]
    pub cluster_dns: Vec<String>,
    #[serde(default, deserialize_with = "integer_max_pods", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_pods: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub pods_per_core: Option<i32>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system_reserved: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kube_reserved: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_hard: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    #[serde(default, rename = "imageGCHighThresholdPercent", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_high_threshold_percent: Option<i32>,
    #[serde(default, rename = "imageGCLowThresholdPercent", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_low_threshold_percent: Option<i32>,
    #[serde(default, rename = "cpuCFSQuota", skip_serializing_if = "Option::is_none")]
    pub cpu_cfs_quota: Option<bool>,
    /// Every other field, by its kubelet configuration name (Karpenter's open map): passed to
    /// AL2023's nodeadm as written; other AMI families refuse them (validation).
    #[serde(flatten, default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(skip)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

/// `maxPods` as an integer. Karpenter also takes a string there, a CEL expression over the
/// instance type, but only behind its NodeClassCEL feature gate (off by default), which Tenon
/// does not implement; the error says so rather than "expected i32".
fn integer_max_pods<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    use serde::de::Error;
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(s)) => Err(D::Error::custom(format!(
            "maxPods {s:?} is a string (a CEL expression); Karpenter evaluates those only with its NodeClassCEL feature gate, which Tenon does not implement: use an integer"
        ))),
        Some(v) => v
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| D::Error::custom(format!("maxPods {v} is not an integer"))),
    }
}

/// Karpenter's kubelet schema is open: the API server keeps any field, and validation (not
/// admission) refuses what the kubelet would not take.
fn open_kubelet(schema: &mut schemars::Schema) {
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("properties");
        obj.insert("type".into(), serde_json::json!("object"));
        obj.insert("additionalProperties".into(), serde_json::json!({"x-kubernetes-preserve-unknown-fields": true}));
        obj.insert("x-kubernetes-preserve-unknown-fields".into(), serde_json::json!(true));
    }
}

/// A network interface of the nodes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkInterface {
    #[schemars(range(min = 0))]
    pub network_card_index: i32,
    #[schemars(range(min = 0))]
    pub device_index: i32,
    /// `interface` (ENA) or `efa-only`.
    #[schemars(extend("enum" = ["interface", "efa-only"]))]
    pub interface_type: String,
}

/// Idle connection tracking timeouts, in seconds; EC2's defaults where unset.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionTracking {
    /// Idle established TCP connections: 60 to 432000.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 432000))]
    pub tcp_established_timeout: Option<i32>,
    /// Idle UDP flows seen in both directions more than once: 60 to 180.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 60, max = 180))]
    pub udp_stream_timeout: Option<i32>,
    /// Other idle UDP flows: 30 to 60.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 60))]
    pub udp_timeout: Option<i32>,
}

/// Instance Metadata Service exposure.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataOptions {
    /// enabled or disabled.
    #[serde(default = "enabled", rename = "httpEndpoint")]
    #[schemars(extend("enum" = ["enabled", "disabled"]))]
    pub http_endpoint: String,
    /// enabled or disabled.
    #[serde(default = "disabled", rename = "httpProtocolIPv6")]
    #[schemars(extend("enum" = ["enabled", "disabled"]))]
    pub http_protocol_ipv6: String,
    /// 1..64.
    #[serde(default = "one", rename = "httpPutResponseHopLimit")]
    #[schemars(range(min = 1, max = 64))]
    pub http_put_response_hop_limit: i64,
    /// required or optional.
    #[serde(default = "required", rename = "httpTokens")]
    #[schemars(extend("enum" = ["required", "optional"]))]
    pub http_tokens: String,
}

fn enabled() -> String {
    "enabled".into()
}
fn disabled() -> String {
    "disabled".into()
}
fn required() -> String {
    "required".into()
}
fn one() -> i64 {
    1
}

fn default_metadata_options() -> Option<MetadataOptions> {
    Some(MetadataOptions {
        http_endpoint: enabled(),
        http_protocol_ipv6: disabled(),
        http_put_response_hop_limit: one(),
        http_tokens: required(),
    })
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDeviceMapping {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "has(self.snapshotID) || has(self.volumeSize)", "message": "snapshotID or volumeSize must be defined"},
        {"rule": "!has(self.volumeInitializationRate) || (has(self.snapshotID) && self.snapshotID != '')", "message": "snapshotID must be set when volumeInitializationRate is set"},
    ]))]
    pub ebs: Option<BlockDevice>,
    /// This device is the kubelet root volume; at most one may be.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub root_volume: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BlockDevice {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    #[serde(default, rename = "iops", skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    #[serde(default, rename = "kmsKeyID", skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    #[serde(default, rename = "snapshotID", skip_serializing_if = "Option::is_none")]
    pub snapshot_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 300))]
    pub volume_initialization_rate: Option<i32>,
    /// Size in Gi, G, Ti or T (`80Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = volume_size)]
    pub volume_size: Option<Quantity>,
    /// standard, io1, io2, gp2, sc1, st1 or gp3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["standard", "io1", "io2", "gp2", "sc1", "st1", "gp3"]))]
    pub volume_type: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EnclaveOptions {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Resolved state of an EC2NodeClass.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EC2NodeClassStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<Subnet>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<SecurityGroup>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservations: Vec<CapacityReservation>,
    #[serde(default, rename = "amis", skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<Ami>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Subnet {
    pub id: String,
    pub zone: String,
    #[serde(default, rename = "zoneID", skip_serializing_if = "Option::is_none")]
    pub zone_id: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecurityGroup {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A resolved AMI and the instance-type requirements it fits (architecture, GPU, …).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Ami {
    pub id: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deprecated: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default)]
    pub requirements: Vec<AmiRequirement>,
}

/// A plain node selector requirement (no minValues), as AMI status carries.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct AmiRequirement {
    pub key: String,
    pub operator: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityReservation {
    pub availability_zone: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    pub id: String,
    /// open or targeted.
    pub instance_match_criteria: String,
    pub instance_type: String,
    #[serde(rename = "ownerID")]
    pub owner_id: String,
    /// default or capacity-block.
    #[serde(default = "default_reservation_type")]
    pub reservation_type: String,
    /// active or expiring.
    #[serde(default = "default_reservation_state")]
    pub state: String,
    /// Whether EC2 may interrupt the reservation's instances.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interruptible: Option<bool>,
}

/// Karpenter's volume sizes: a string in Gi, G, Ti or T within EBS's limits.
fn volume_size(schema: &mut schemars::Schema) {
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("x-kubernetes-int-or-string");
        obj.insert("type".into(), serde_json::json!("string"));
        obj.insert(
            "pattern".into(),
            serde_json::json!(
                r"^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$"
            ),
        );
    }
}

fn default_reservation_type() -> String {
    "default".into()
}
fn default_reservation_state() -> String {
    "active".into()
}

/// AMI families an alias may name.
pub const ALIAS_FAMILIES: &[&str] = &["al2", "al2023", "bottlerocket", "windows2019", "windows2022", "windows2025"];
/// Values of `spec.amiFamily`.
pub const AMI_FAMILIES: &[&str] =
    &["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2019", "Windows2022", "Windows2025"];

/// A parsed `family@version` alias.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AmiAlias {
    pub family: String,
    pub version: String,
}

impl EC2NodeClass {
    /// The alias term's family and version, if the AMI is chosen by alias.
    pub fn alias(&self) -> Option<AmiAlias> {
        self.spec.ami_selector_terms.iter().find_map(|t| {
            let (family, version) = t.alias.as_deref()?.split_once('@')?;
            Some(AmiAlias { family: family.to_string(), version: version.to_string() })
        })
    }

    /// The AMI family: `spec.amiFamily`, else the alias' family in its canonical spelling.
    pub fn ami_family(&self) -> String {
        if let Some(f) = &self.spec.ami_family {
            return f.clone();
        }
        self.alias()
            .and_then(|a| AMI_FAMILIES.iter().find(|f| f.eq_ignore_ascii_case(&a.family)))
            .map_or_else(|| "Custom".to_string(), |f| f.to_string())
    }
}
