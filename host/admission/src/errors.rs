//! Field errors as the API server words them (`k8s.io/apimachinery/pkg/util/validation/field`).

use serde_json::{Value, json};

/// One field's error: its path (`spec.template.metadata.labels`), the kind of error as the
/// `Status` cause reason (`FieldValueInvalid`…), and the whole message after the path.
#[derive(Clone, Debug, PartialEq)]
pub struct FieldError {
    pub field: String,
    pub reason: &'static str,
    pub detail: String,
}

impl FieldError {
    pub fn required(field: &str) -> Self {
        FieldError { field: field.into(), reason: "FieldValueRequired", detail: "Required value".into() }
    }

    pub fn invalid(field: &str, value: &Value, message: impl AsRef<str>) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueInvalid",
            detail: format!("Invalid value: {}: {}", shown(value), message.as_ref()),
        }
    }

    pub fn unsupported(field: &str, value: &Value, allowed: &[Value]) -> Self {
        let allowed: Vec<String> = allowed.iter().map(|v| v.to_string()).collect();
        FieldError {
            field: field.into(),
            reason: "FieldValueNotSupported",
            detail: format!("Unsupported value: {}: supported values: {}", value, allowed.join(", ")),
        }
    }

    pub fn too_many(field: &str, actual: usize, max: u64, what: &str) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueTooMany",
            detail: format!("Too many: {actual}: must have at most {max} {what}"),
        }
    }

    pub fn too_long(field: &str, max: u64) -> Self {
        FieldError {
            field: field.into(),
            reason: "FieldValueTooLong",
            detail: format!("Too long: may not be more than {max} bytes"),
        }
    }

    pub fn duplicate(field: &str, value: &Value) -> Self {
        FieldError { field: field.into(), reason: "FieldValueDuplicate", detail: format!("Duplicate value: {value}") }
    }

    /// `spec.x: Required value`, as the API server prints it.
    pub fn line(&self) -> String {
        if self.field.is_empty() { self.detail.clone() } else { format!("{}: {}", self.field, self.detail) }
    }
}

/// The API server shows strings quoted, numbers as they are, and objects and lists by type.
fn shown(v: &Value) -> String {
    match v {
        Value::Object(_) => "\"object\"".into(),
        Value::Array(_) => "\"array\"".into(),
        other => other.to_string(),
    }
}

/// A refused write: the `422 Invalid` `Status` the API server answers with.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct Invalid {
    pub message: String,
    pub details: Value,
}

impl Invalid {
    /// `NodePool.karpenter.sh "x" is invalid: spec.y: Required value` (errors in brackets
    /// when there are several).
    pub fn new(kind: &str, group: &str, name: &str, errors: &[FieldError]) -> Self {
        let qualified = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let lines: Vec<String> = errors.iter().map(FieldError::line).collect();
        let list = if lines.len() == 1 { lines[0].clone() } else { format!("[{}]", lines.join(", ")) };
        let causes: Vec<Value> =
            errors.iter().map(|e| json!({"reason": e.reason, "message": e.detail, "field": e.field})).collect();
        Invalid {
            message: format!("{qualified} \"{name}\" is invalid: {list}"),
            details: json!({"name": name, "group": group, "kind": kind, "causes": causes}),
        }
    }
}
