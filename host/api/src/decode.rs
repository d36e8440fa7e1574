//! Turns one parsed manifest document into a typed Tenon object, reporting unknown fields,
//! type errors and retired API versions as problems with field paths.

use crate::ec2nodeclass::EC2NodeClass;
use crate::nodeclaim::NodeClaim;
use crate::nodepool::NodePool;
use crate::validation::{FieldPath, Problem, Report, validate_ec2nodeclass, validate_nodeclaim, validate_nodepool};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A decoded document.
#[derive(Debug, Clone)]
pub enum Object {
    NodePool(Box<NodePool>),
    NodeClaim(Box<NodeClaim>),
    EC2NodeClass(Box<EC2NodeClass>),
    /// A kind Tenon does not own (Deployment, Kustomization, …): not checked.
    Other {
        api_version: String,
        kind: String,
    },
}

/// The outcome of decoding one document.
#[derive(Debug, Clone)]
pub struct Decoded {
    /// `None` when the document could not be turned into its type.
    pub object: Option<Object>,
    pub kind: String,
    pub name: String,
    pub problems: Vec<Problem>,
}

const RETIRED: &[(&str, &str, &str)] = &[
    ("karpenter.sh/v1beta1", "NodePool", "karpenter.sh/v1 NodePool"),
    ("karpenter.sh/v1beta1", "NodeClaim", "karpenter.sh/v1 NodeClaim"),
    ("karpenter.k8s.aws/v1beta1", "EC2NodeClass", "karpenter.k8s.aws/v1 EC2NodeClass"),
    ("karpenter.sh/v1alpha5", "Provisioner", "karpenter.sh/v1 NodePool"),
    ("karpenter.sh/v1alpha5", "Machine", "karpenter.sh/v1 NodeClaim"),
    ("karpenter.k8s.aws/v1alpha1", "AWSNodeTemplate", "karpenter.k8s.aws/v1 EC2NodeClass"),
];

/// Decodes and validates one document: structure, types and unknown fields first, then, if
/// the object could be built, every semantic rule.
pub fn decode_and_validate(doc: Value) -> Decoded {
    let mut r = Report::default();
    let root = FieldPath::root("");
    let Value::Object(map) = &doc else {
        r.error(
            &FieldPath::root("(document)"),
            "a manifest must be a mapping with apiVersion and kind",
            "check the indentation of this document",
        );
        return Decoded { object: None, kind: String::new(), name: String::new(), problems: r.into_problems() };
    };
    let text = |k: &str| map.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let (api_version, kind) = (text("apiVersion"), text("kind"));
    let name = map.get("metadata").and_then(|m| m.get("name")).and_then(Value::as_str).unwrap_or_default().to_string();
    if api_version.is_empty() {
        r.error(&root.field("apiVersion"), "apiVersion is required", "e.g. apiVersion: karpenter.sh/v1");
    }
    if kind.is_empty() {
        r.error(&root.field("kind"), "kind is required", "e.g. kind: NodePool");
    }
    if api_version.is_empty() || kind.is_empty() {
        return Decoded { object: None, kind, name, problems: r.into_problems() };
    }
    if let Some((_, _, to)) = RETIRED.iter().find(|(v, k, _)| *v == api_version && *k == kind) {
        r.error(
            &root.field("apiVersion"),
            format!("{api_version} {kind} was removed from Karpenter v1"),
            format!("migrate to {to} (Karpenter's v1 migration guide lists the field changes)"),
        );
        return Decoded { object: None, kind, name, problems: r.into_problems() };
    }
    let object = match (api_version.as_str(), kind.as_str()) {
        ("karpenter.sh/v1", "NodePool") => {
            typed::<NodePool>(doc, &mut r, validate_nodepool).map(|o| Object::NodePool(Box::new(o)))
        }
        ("karpenter.sh/v1", "NodeClaim") => {
            typed::<NodeClaim>(doc, &mut r, validate_nodeclaim).map(|o| Object::NodeClaim(Box::new(o)))
        }
        ("karpenter.k8s.aws/v1", "EC2NodeClass") => {
            typed::<EC2NodeClass>(doc, &mut r, validate_ec2nodeclass).map(|o| Object::EC2NodeClass(Box::new(o)))
        }
        (v, k @ ("NodePool" | "NodeClaim" | "EC2NodeClass")) => {
            let want = if k == "EC2NodeClass" { "karpenter.k8s.aws/v1" } else { "karpenter.sh/v1" };
            r.error(
                &root.field("apiVersion"),
                format!("{k} is served as {want}, not {v:?}"),
                format!("set apiVersion: {want}"),
            );
            None
        }
        _ => Some(Object::Other { api_version: api_version.clone(), kind: kind.clone() }),
    };
    if matches!(object, Some(Object::NodePool(_) | Object::NodeClaim(_) | Object::EC2NodeClass(_))) && name.is_empty() {
        r.error(&root.field("metadata").field("name"), "metadata.name is required", "name the object");
    }
    Decoded { object, kind, name, problems: r.into_problems() }
}

fn typed<T: DeserializeOwned>(doc: Value, r: &mut Report, validate: fn(&T) -> Vec<Problem>) -> Option<T> {
    let mut unknown = Vec::new();
    let mut record = |path: serde_ignored::Path<'_>| unknown.push(render_path(&path));
    let de = serde_ignored::Deserializer::new(doc, &mut record);
    let result: Result<T, _> = serde_path_to_error::deserialize(de);
    for path in unknown.into_iter().filter(|p| p != "apiVersion" && p != "kind") {
        let field = path.rsplit(['.', '[']).next().unwrap_or(&path).trim_end_matches(']').to_string();
        r.error(&FieldPath::root(&path), format!("unknown field {field:?}"), "check the spelling and indentation against the Karpenter v1 API; unknown fields are rejected by kubectl's strict validation");
    }
    match result {
        Ok(obj) => {
            r.problems.extend(validate(&obj));
            Some(obj)
        }
        Err(e) => {
            let path = e.path().to_string();
            let path = if path == "." { "(document)".to_string() } else { path };
            r.error(
                &FieldPath::root(&path),
                e.into_inner().to_string(),
                "fix the value's type (strings in quotes, numbers bare, lists with '-')",
            );
            None
        }
    }
}

pub(crate) fn render_path(path: &serde_ignored::Path<'_>) -> String {
    use serde_ignored::Path;
    match path {
        Path::Root => String::new(),
        Path::Seq { parent, index } => format!("{}[{index}]", render_path(parent)),
        Path::Map { parent, key } => {
            let p = render_path(parent);
            if p.is_empty() { key.to_string() } else { format!("{p}.{key}") }
        }
        Path::Some { parent } | Path::NewtypeStruct { parent } | Path::NewtypeVariant { parent } => render_path(parent),
    }
}
