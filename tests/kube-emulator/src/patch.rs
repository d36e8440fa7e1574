//! PATCH bodies: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and the strategic merge
//! patch kubectl sends for built-in types.
//!
//! Strategic merge is implemented for what kubectl and the controller send: maps merge,
//! `null` deletes, lists with a known merge key (`name` for containers, volumes and env,
//! `containerPort`, `mountPath`, `type` for conditions, `uid` for owner references) merge
//! element by element, other lists (tolerations, taints, finalizers) replace, and the
//! directives `$patch: delete|replace`, `$retainKeys` and `$deleteFromPrimitiveList/…` are
//! honoured; `$setElementOrder/…` is dropped (order is kept as stored).

use serde_json::{Map, Value};

#[derive(Debug, PartialEq)]
pub enum PatchError {
    Unsupported(String),
    Invalid(String),
}

pub fn apply(content_type: &str, target: &Value, body: &[u8]) -> Result<Value, PatchError> {
    let ct = content_type.split(';').next().unwrap_or_default().trim();
    let patch: Value =
        serde_json::from_slice(body).map_err(|e| PatchError::Invalid(format!("patch body is not JSON: {e}")))?;
    match ct {
        "application/merge-patch+json" => {
            let mut out = target.clone();
            json_patch::merge(&mut out, &patch);
            Ok(out)
        }
        "application/json-patch+json" => {
            let ops: json_patch::Patch =
                serde_json::from_value(patch).map_err(|e| PatchError::Invalid(format!("invalid JSON patch: {e}")))?;
            let mut out = target.clone();
            json_patch::patch(&mut out, &ops).map_err(|e| PatchError::Invalid(format!("JSON patch failed: {e}")))?;
            Ok(out)
        }
        "application/strategic-merge-patch+json" => Ok(strategic(target, &patch)),
        "application/apply-patch+yaml" | "application/apply-patch+cbor" => Err(PatchError::Unsupported(
            "server-side apply is not implemented by the emulator; use a merge, JSON or strategic merge patch".into(),
        )),
        other => Err(PatchError::Unsupported(format!(
            "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json (got {other:?})"
        ))),
    }
}

/// The merge key of list field `field`, if it merges element-wise.
fn merge_key(field: &str) -> Option<&'static str> {
    match field {
        "containers" | "initContainers" | "ephemeralContainers" | "volumes" | "env" | "imagePullSecrets" => {
            Some("name")
        }
        "ports" => Some("containerPort"),
        "volumeMounts" => Some("mountPath"),
        "volumeDevices" => Some("devicePath"),
        "conditions" => Some("type"),
        "ownerReferences" => Some("uid"),
        _ => None,
    }
}

pub fn strategic(target: &Value, patch: &Value) -> Value {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => Value::Object(merge_map(t, p)),
        (_, p) => strip(p),
    }
}

/// A patch value with directives removed (for values that replace).
fn strip(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(k, _)| !k.starts_with('$')).map(|(k, v)| (k.clone(), strip(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(strip).collect()),
        other => other.clone(),
    }
}

fn merge_map(target: &Map<String, Value>, patch: &Map<String, Value>) -> Map<String, Value> {
    if patch.get("$patch").and_then(Value::as_str) == Some("replace") {
        return strip(&Value::Object(patch.clone())).as_object().cloned().unwrap_or_default();
    }
    let mut out = target.clone();
    if let Some(keep) = patch.get("$retainKeys").and_then(Value::as_array) {
        let keep: Vec<&str> = keep.iter().filter_map(Value::as_str).collect();
        out.retain(|k, _| keep.contains(&k.as_str()));
    }
    for (k, pv) in patch {
        if let Some(field) = k.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Some(del)) = (out.get_mut(field), pv.as_array()) {
                list.retain(|x| !del.contains(x));
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        match pv {
            Value::Null => {
                out.remove(k);
            }
            Value::Object(pm) => {
                let merged = match out.get(k) {
                    Some(Value::Object(tm)) => merge_map(tm, pm),
                    _ => merge_map(&Map::new(), pm),
                };
                out.insert(k.clone(), Value::Object(merged));
            }
            Value::Array(pa) => {
                let merged = match (merge_key(k), out.get(k)) {
                    (Some(key), Some(Value::Array(ta))) => merge_list(ta, pa, key),
                    _ => strip(pv),
                };
                out.insert(k.clone(), merged);
            }
            other => {
                out.insert(k.clone(), other.clone());
            }
        }
    }
    out
}

fn merge_list(target: &[Value], patch: &[Value], key: &str) -> Value {
    let mut out: Vec<Value> = target.to_vec();
    for pe in patch {
        let Some(pk) = pe.get(key) else {
            out.push(strip(pe));
            continue;
        };
        let pos = out.iter().position(|t| t.get(key) == Some(pk));
        let delete = pe.get("$patch").and_then(Value::as_str) == Some("delete");
        match (pos, delete) {
            (Some(i), true) => {
                out.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => out[i] = strategic(&out[i], pe),
            (None, false) => out.push(strip(pe)),
        }
    }
    Value::Array(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strategic_merges_containers_by_name_and_deletes_with_null() {
        let pod = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "spec": {"containers": [{"name": "app", "image": "v1"}, {"name": "side", "image": "s1"}]}});
        let patch = json!({"metadata": {"labels": {"b": null, "c": "3"}}, "spec": {"$setElementOrder/containers": [{"name": "app"}, {"name": "side"}], "containers": [{"name": "app", "image": "v2"}]}});
        let out = strategic(&pod, &patch);
        assert_eq!(out["metadata"]["labels"], json!({"a": "1", "c": "3"}));
        assert_eq!(out["spec"]["containers"], json!([{"name": "app", "image": "v2"}, {"name": "side", "image": "s1"}]));
        assert!(out["spec"].get("$setElementOrder/containers").is_none());
        let del = strategic(&out, &json!({"spec": {"containers": [{"name": "side", "$patch": "delete"}]}}));
        assert_eq!(del["spec"]["containers"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn merge_and_json_patches() {
        let o = json!({"spec": {"replicas": 1, "x": [1, 2]}});
        let m = apply("application/merge-patch+json", &o, br#"{"spec":{"replicas":3,"x":[3]}}"#).unwrap();
        assert_eq!(m, json!({"spec": {"replicas": 3, "x": [3]}}));
        let j = apply("application/json-patch+json", &o, br#"[{"op":"replace","path":"/spec/replicas","value":5}]"#)
            .unwrap();
        assert_eq!(j["spec"]["replicas"], 5);
        assert!(matches!(apply("application/apply-patch+yaml", &o, b"{}"), Err(PatchError::Unsupported(_))));
        assert!(matches!(
            apply("application/json-patch+json", &o, br#"[{"op":"test","path":"/spec/replicas","value":9}]"#),
            Err(PatchError::Invalid(_))
        ));
    }
}
