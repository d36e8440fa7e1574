//! The resource types the emulator serves: built-in ones, and those CRDs register. Also the
//! discovery documents kubectl and kube-rs read.

use serde_json::{Value, json};

#[derive(Clone, Debug, PartialEq)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// `status`, `scale`, `binding`, `eviction`.
    pub subresources: Vec<String>,
    /// A CRD's `additionalPrinterColumns` for the served version.
    pub printer_columns: Vec<Value>,
    /// A CRD's `openAPIV3Schema` for the served version: writes are admitted against it.
    pub schema: Option<Value>,
}

impl ResourceType {
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    pub fn has_status(&self) -> bool {
        self.subresources.iter().any(|s| s == "status")
    }
}

fn builtin(
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespaced: bool,
    short: &[&str],
    subs: &[&str],
) -> ResourceType {
    ResourceType {
        group: group.into(),
        version: version.into(),
        kind: kind.into(),
        plural: plural.into(),
        singular: kind.to_ascii_lowercase(),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: vec![],
        subresources: subs.iter().map(|s| s.to_string()).collect(),
        printer_columns: vec![],
        schema: None,
    }
}

pub fn builtins() -> Vec<ResourceType> {
    vec![
        builtin("", "v1", "Pod", "pods", true, &["po"], &["status", "binding", "eviction"]),
        builtin("", "v1", "Node", "nodes", false, &["no"], &["status"]),
        builtin("", "v1", "Namespace", "namespaces", false, &["ns"], &["status"]),
        builtin("", "v1", "Event", "events", true, &["ev"], &[]),
        builtin("", "v1", "ConfigMap", "configmaps", true, &["cm"], &[]),
        builtin("", "v1", "ServiceAccount", "serviceaccounts", true, &["sa"], &[]),
        builtin("", "v1", "Service", "services", true, &["svc"], &["status"]),
        builtin("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", true, &["pvc"], &["status"]),
        builtin("", "v1", "PersistentVolume", "persistentvolumes", false, &["pv"], &["status"]),
        builtin("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false, &[], &[]),
        builtin("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", "clusterrolebindings", false, &[], &[]),
        builtin("rbac.authorization.k8s.io", "v1", "Role", "roles", true, &[], &[]),
        builtin("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true, &[], &[]),
        builtin("apps", "v1", "Deployment", "deployments", true, &["deploy"], &["status", "scale"]),
        builtin("apps", "v1", "DaemonSet", "daemonsets", true, &["ds"], &["status"]),
        builtin("apps", "v1", "ReplicaSet", "replicasets", true, &["rs"], &["status", "scale"]),
        builtin("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", true, &["pdb"], &["status"]),
        builtin("coordination.k8s.io", "v1", "Lease", "leases", true, &[], &[]),
        builtin("events.k8s.io", "v1", "Event", "events", true, &["ev"], &[]),
        builtin("storage.k8s.io", "v1", "CSINode", "csinodes", false, &[], &[]),
        builtin("storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", false, &[], &["status"]),
        builtin("storage.k8s.io", "v1", "StorageClass", "storageclasses", false, &["sc"], &[]),
        builtin(
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            false,
            &["crd", "crds"],
            &["status"],
        ),
    ]
}

/// The served versions of a CRD as resource types.
pub fn from_crd(crd: &Value) -> Vec<ResourceType> {
    let spec = &crd["spec"];
    let names = &spec["names"];
    let strs = |v: &Value| {
        v.as_array().into_iter().flatten().filter_map(Value::as_str).map(str::to_string).collect::<Vec<_>>()
    };
    spec["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["served"].as_bool().unwrap_or(true))
        .map(|v| {
            let mut subs = Vec::new();
            if v["subresources"].get("status").is_some() {
                subs.push("status".to_string());
            }
            if v["subresources"].get("scale").is_some() {
                subs.push("scale".to_string());
            }
            ResourceType {
                group: spec["group"].as_str().unwrap_or_default().into(),
                version: v["name"].as_str().unwrap_or_default().into(),
                kind: names["kind"].as_str().unwrap_or_default().into(),
                plural: names["plural"].as_str().unwrap_or_default().into(),
                singular: names["singular"]
                    .as_str()
                    .map_or_else(|| names["kind"].as_str().unwrap_or_default().to_ascii_lowercase(), str::to_string),
                namespaced: spec["scope"].as_str() == Some("Namespaced"),
                short_names: strs(&names["shortNames"]),
                categories: strs(&names["categories"]),
                subresources: subs,
                printer_columns: v["additionalPrinterColumns"].as_array().cloned().unwrap_or_default(),
                schema: v["schema"].get("openAPIV3Schema").cloned(),
            }
        })
        .collect()
}

const VERBS: &[&str] = &["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"];

/// `APIResourceList` for one group version.
pub fn resource_list(types: &[ResourceType], group: &str, version: &str) -> Option<Value> {
    let mut resources = Vec::new();
    for t in types.iter().filter(|t| t.group == group && t.version == version) {
        resources.push(json!({
            "name": t.plural, "singularName": t.singular, "namespaced": t.namespaced, "kind": t.kind,
            "verbs": VERBS, "shortNames": t.short_names, "categories": t.categories,
        }));
        for s in &t.subresources {
            let (kind, verbs): (&str, &[&str]) = match s.as_str() {
                "status" => (&t.kind, &["get", "patch", "update"]),
                "scale" => ("Scale", &["get", "patch", "update"]),
                "binding" => ("Binding", &["create"]),
                "eviction" => ("Eviction", &["create"]),
                _ => continue,
            };
            let group_fields = if s == "eviction" { json!({"group": "policy", "version": "v1"}) } else { json!({}) };
            let mut r = json!({"name": format!("{}/{s}", t.plural), "singularName": "", "namespaced": t.namespaced, "kind": kind, "verbs": verbs});
            if let (Some(o), Some(g)) = (r.as_object_mut(), group_fields.as_object()) {
                o.extend(g.clone());
            }
            resources.push(r);
        }
    }
    if resources.is_empty() {
        return None;
    }
    let gv = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}))
}

/// `APIGroupList` of every non-core group.
pub fn group_list(types: &[ResourceType]) -> Value {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for t in types.iter().filter(|t| !t.group.is_empty()) {
        match groups.iter_mut().find(|(g, _)| *g == t.group) {
            Some((_, vs)) if !vs.contains(&t.version) => vs.push(t.version.clone()),
            Some(_) => {}
            None => groups.push((t.group.clone(), vec![t.version.clone()])),
        }
    }
    let groups: Vec<Value> = groups
        .into_iter()
        .map(|(g, vs)| {
            let versions: Vec<Value> =
                vs.iter().map(|v| json!({"groupVersion": format!("{g}/{v}"), "version": v})).collect();
            json!({"name": g, "versions": versions, "preferredVersion": versions[0]})
        })
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// A fingerprint of one group version's types (for OpenAPI cache URLs).
pub fn gv_hash(types: &[ResourceType], group: &str, version: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for t in types.iter().filter(|t| t.group == group && t.version == version) {
        (&t.kind, &t.plural, t.namespaced, &t.subresources).hash(&mut h);
    }
    h.finish()
}

/// An OpenAPI v3 document for one group version: the paths with their operations, enough for
/// kubectl to see that the server validates fields itself (`fieldValidation`) and to find
/// each kind's endpoints. Schemas are open (`x-kubernetes-preserve-unknown-fields`): the
/// emulator does not validate objects.
pub fn openapi_v3(types: &[ResourceType], group: &str, version: &str) -> Value {
    let mut paths = serde_json::Map::new();
    let mut schemas = serde_json::Map::new();
    for t in types.iter().filter(|t| t.group == group && t.version == version) {
        let gvk = json!([{"group": t.group, "version": t.version, "kind": t.kind}]);
        let schema_name = format!("{}.{}.{}", if t.group.is_empty() { "core" } else { &t.group }, t.version, t.kind);
        schemas.insert(
            schema_name.clone(),
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "x-kubernetes-group-version-kind": gvk}),
        );
        let op = |action: &str| {
            json!({
                "x-kubernetes-action": action,
                "x-kubernetes-group-version-kind": {"group": t.group, "version": t.version, "kind": t.kind},
                "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}, {"name": "dryRun", "in": "query", "schema": {"type": "string"}}],
                "requestBody": {"content": {"application/json": {"schema": {"$ref": format!("#/components/schemas/{schema_name}")}}}},
                "responses": {"200": {"description": "OK"}},
            })
        };
        let prefix =
            if t.group.is_empty() { format!("/api/{}", t.version) } else { format!("/apis/{}/{}", t.group, t.version) };
        let base = if t.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", t.plural)
        } else {
            format!("{prefix}/{}", t.plural)
        };
        paths.insert(base.clone(), json!({"post": op("post"), "get": op("list")}));
        paths.insert(
            format!("{base}/{{name}}"),
            json!({"get": op("get"), "put": op("put"), "patch": op("patch"), "delete": op("delete")}),
        );
    }
    json!({"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": paths, "components": {"schemas": schemas}})
}
