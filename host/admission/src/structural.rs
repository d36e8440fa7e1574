//! The structural part of admission: pruning, defaulting and the OpenAPI keywords a CRD
//! schema may use (type, enum, pattern, lengths, bounds, sizes, required, list types).

use crate::errors::FieldError;
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::HashMap;

fn flag(s: &Value, key: &str) -> bool {
    s.get(key).and_then(Value::as_bool).unwrap_or(false)
}

fn properties(s: &Value) -> Option<&Map<String, Value>> {
    s.get("properties").and_then(Value::as_object)
}

/// `additionalProperties` when it is a schema (a map's values).
fn additional(s: &Value) -> Option<&Value> {
    s.get("additionalProperties").filter(|a| a.is_object())
}

/// Drops fields the schema does not declare (unless it preserves unknown fields) and nulls
/// of fields that are not nullable. At the root, `apiVersion`, `kind` and `metadata` stay.
pub fn prune(s: &Value, v: &mut Value, root: bool) {
    match v {
        Value::Object(m) => {
            let preserve = flag(s, "x-kubernetes-preserve-unknown-fields");
            if let Some(props) = properties(s) {
                m.retain(|k, val| {
                    let Some(ps) = props.get(k) else {
                        return preserve || (root && matches!(k.as_str(), "apiVersion" | "kind" | "metadata"));
                    };
                    !val.is_null() || flag(ps, "nullable")
                });
                for (k, val) in m.iter_mut() {
                    if let Some(ps) = props.get(k) {
                        prune(ps, val, false);
                    }
                }
            } else if let Some(a) = additional(s) {
                m.retain(|_, val| !val.is_null() || flag(a, "nullable"));
                for val in m.values_mut() {
                    prune(a, val, false);
                }
            } else if !preserve && s.get("type").and_then(Value::as_str) == Some("object") && !root {
                m.clear();
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for i in items {
                    prune(is, i, false);
                }
            }
        }
        _ => {}
    }
}

/// Fills in the schema's `default` for every absent property, inside defaulted values too.
pub fn default(s: &Value, v: &mut Value) {
    match v {
        Value::Object(m) => {
            if let Some(props) = properties(s) {
                for (k, ps) in props {
                    if !m.contains_key(k)
                        && let Some(d) = ps.get("default")
                    {
                        m.insert(k.clone(), d.clone());
                    }
                }
                for (k, val) in m.iter_mut() {
                    if let Some(ps) = props.get(k) {
                        default(ps, val);
                    }
                }
            } else if let Some(a) = additional(s) {
                for val in m.values_mut() {
                    default(a, val);
                }
            }
        }
        Value::Array(items) => {
            if let Some(is) = s.get("items") {
                for i in items {
                    default(is, i);
                }
            }
        }
        _ => {}
    }
}

thread_local! {
    static PATTERNS: RefCell<HashMap<String, Option<regex::Regex>>> = RefCell::new(HashMap::new());
}

/// `pattern` compiled once per thread (schema patterns and CEL's `find` share the cache);
/// `None` when it does not compile.
pub fn regex(pattern: &str) -> Option<regex::Regex> {
    PATTERNS
        .with(|c| c.borrow_mut().entry(pattern.to_string()).or_insert_with(|| regex::Regex::new(pattern).ok()).clone())
}

/// Whether `text` matches the schema pattern (a pattern that does not compile matches nothing).
fn matches(pattern: &str, text: &str) -> bool {
    regex(pattern).is_some_and(|r| r.is_match(text))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Whether `v` is of the schema's declared type (`x-kubernetes-int-or-string` and `anyOf`
/// branches included); `None` when the schema declares none.
fn of_type(s: &Value, v: &Value) -> Option<bool> {
    if flag(s, "x-kubernetes-int-or-string") {
        return Some(v.is_string() || v.is_i64() || v.is_u64());
    }
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        let actual = type_name(v);
        return Some(actual == t || (t == "number" && actual == "integer") || (v.is_null() && flag(s, "nullable")));
    }
    let branches = s.get("anyOf").and_then(Value::as_array)?;
    Some(branches.iter().any(|b| of_type(b, v).unwrap_or(true)))
}

pub fn child(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_string() } else { format!("{path}.{key}") }
}

/// Checks `v` against `s` at `path` (empty at the root), pushing every error found.
pub fn validate(s: &Value, v: &Value, errors: &mut Vec<FieldError>) {
    check(s, v, "", errors);
}

fn check(s: &Value, v: &Value, path: &str, errors: &mut Vec<FieldError>) {
    let at = if path.is_empty() { "body" } else { path };
    if of_type(s, v) == Some(false) {
        let t = s.get("type").and_then(Value::as_str).unwrap_or("integer or string");
        errors.push(FieldError::invalid(
            path,
            &Value::String(type_name(v).into()),
            format!("{at} in body must be of type {t}: \"{}\"", type_name(v)),
        ));
        return;
    }
    if let Some(allowed) = s.get("enum").and_then(Value::as_array)
        && !allowed.contains(v)
    {
        errors.push(FieldError::unsupported(path, v, allowed));
    }
    let num = |k: &str| s.get(k).and_then(Value::as_u64);
    match v {
        Value::String(text) => {
            let len = text.chars().count() as u64;
            if let Some(max) = num("maxLength")
                && len > max
            {
                errors.push(FieldError::too_long(path, max));
            }
            if let Some(min) = num("minLength")
                && len < min
            {
                errors.push(FieldError::invalid(path, v, format!("{at} in body should be at least {min} chars long")));
            }
            if let Some(p) = s.get("pattern").and_then(Value::as_str)
                && !matches(p, text)
            {
                errors.push(FieldError::invalid(path, v, format!("{at} in body should match '{p}'")));
            }
        }
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or_default();
            if let Some(min) = s.get("minimum").and_then(Value::as_f64) {
                let exclusive = flag(s, "exclusiveMinimum");
                if x < min || (exclusive && x == min) {
                    let rel = if exclusive { "greater than" } else { "greater than or equal to" };
                    errors.push(FieldError::invalid(path, v, format!("{at} in body should be {rel} {min}")));
                }
            }
            if let Some(max) = s.get("maximum").and_then(Value::as_f64) {
                let exclusive = flag(s, "exclusiveMaximum");
                if x > max || (exclusive && x == max) {
                    let rel = if exclusive { "less than" } else { "less than or equal to" };
                    errors.push(FieldError::invalid(path, v, format!("{at} in body should be {rel} {max}")));
                }
            }
        }
        Value::Array(items) => {
            if let Some(max) = num("maxItems")
                && items.len() as u64 > max
            {
                errors.push(FieldError::too_many(path, items.len(), max, "items"));
            }
            if let Some(min) = num("minItems")
                && (items.len() as u64) < min
            {
                errors.push(FieldError::invalid(
                    path,
                    &Value::from(items.len()),
                    format!("{at} in body should have at least {min} items"),
                ));
            }
            match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("set") => {
                    for (i, item) in items.iter().enumerate() {
                        if items[..i].contains(item) {
                            errors.push(FieldError::duplicate(&format!("{path}[{i}]"), item));
                        }
                    }
                }
                Some("map") => {
                    let keys: Vec<&str> = s
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    let key_of = |item: &Value| keys.iter().map(|k| item.get(*k).cloned()).collect::<Vec<_>>();
                    for (i, item) in items.iter().enumerate() {
                        if items[..i].iter().any(|o| key_of(o) == key_of(item)) {
                            let shown: Map<String, Value> =
                                keys.iter().filter_map(|k| Some((k.to_string(), item.get(*k)?.clone()))).collect();
                            errors.push(FieldError::duplicate(&format!("{path}[{i}]"), &Value::Object(shown)));
                        }
                    }
                }
                _ => {}
            }
            if let Some(is) = s.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(is, item, &format!("{path}[{i}]"), errors);
                }
            }
        }
        Value::Object(m) => {
            for r in s.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                if !m.contains_key(r) {
                    errors.push(FieldError::required(&child(path, r)));
                }
            }
            if let Some(max) = num("maxProperties")
                && m.len() as u64 > max
            {
                errors.push(FieldError::too_many(path, m.len(), max, "items"));
            }
            if let Some(min) = num("minProperties")
                && (m.len() as u64) < min
            {
                errors.push(FieldError::invalid(
                    path,
                    &Value::from(m.len()),
                    format!("{at} in body should have at least {min} properties"),
                ));
            }
            if let Some(props) = properties(s) {
                for (k, val) in m {
                    // The API server checks metadata itself, not through the CRD schema.
                    if path.is_empty() && k == "metadata" {
                        continue;
                    }
                    if let Some(ps) = props.get(k) {
                        check(ps, val, &child(path, k), errors);
                    }
                }
            } else if let Some(a) = additional(s) {
                for (k, val) in m {
                    check(a, val, &format!("{path}[{k}]"), errors);
                }
            }
        }
        _ => {}
    }
}
