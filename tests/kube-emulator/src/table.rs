//! Server-side printing (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), which
//! `kubectl get` asks for: NAME, a CRD's `additionalPrinterColumns`, AGE.

use crate::registry::ResourceType;
use crate::store::rfc3339;
use serde_json::{Value, json};

/// Evaluates the JSONPath subset CRD printer columns use: `.a.b`, `.a[0]`, and
/// `.a[?(@.type=="Ready")].status`.
pub fn jsonpath<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let mut cur = obj;
    let mut rest = path.trim().trim_start_matches('{').trim_end_matches('}').trim_start_matches('$');
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            // A key ends at an unescaped `.` or `[` (`\.` is a dot inside a label key).
            let mut end = r.len();
            let bytes = r.as_bytes();
            for (i, &b) in bytes.iter().enumerate() {
                if (b == b'.' || b == b'[') && (i == 0 || bytes[i - 1] != b'\\') {
                    end = i;
                    break;
                }
            }
            cur = cur.get(r[..end].replace("\\.", ".").as_str())?;
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = &r[..end];
            rest = &r[end + 1..];
            if let Some(f) = inner.strip_prefix("?(@.").and_then(|f| f.strip_suffix(')')) {
                let (field, want) = f.split_once("==")?;
                let want = want.trim().trim_matches('"').trim_matches('\'');
                cur = cur.as_array()?.iter().find(|e| e.get(field.trim()).and_then(Value::as_str) == Some(want))?;
            } else {
                cur = cur.get(inner.parse::<usize>().ok()?)?;
            }
        } else {
            return None;
        }
    }
    Some(cur)
}

fn age(created: &str, now: i64) -> String {
    let Some(t) = parse_time(created) else { return "<unknown>".into() };
    let d = (now - t).max(0);
    match d {
        0..120 => format!("{d}s"),
        120..7200 => format!("{}m", d / 60),
        7200..172_800 => format!("{}h", d / 3600),
        _ => format!("{}d", d / 86_400),
    }
}

fn parse_time(s: &str) -> Option<i64> {
    let (date, time) = s.trim_end_matches('Z').split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':').map(|x| x.split('.').next().and_then(|v| v.parse::<i64>().ok()));
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    let (y2, m2) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * m2 + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    (rfc3339(secs) == format!("{date}T{hh:02}:{mm:02}:{ss:02}Z")).then_some(secs)
}

fn cell(v: Option<&Value>, ty: &str, now: i64) -> Value {
    match (v, ty) {
        (None | Some(Value::Null), _) => json!("<none>"),
        (Some(Value::String(s)), "date") => json!(age(s, now)),
        (Some(v @ (Value::Number(_) | Value::Bool(_))), _) => v.clone(),
        (Some(Value::String(s)), _) => json!(s),
        (Some(other), _) => json!(other.to_string()),
    }
}

pub fn table(t: &ResourceType, objects: &[Value], resource_version: &str, now: i64) -> Value {
    let mut columns =
        vec![json!({"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0})];
    for c in &t.printer_columns {
        columns.push(json!({
            "name": c["name"], "type": c["type"], "format": c["format"].as_str().unwrap_or(""),
            "description": c["description"].as_str().unwrap_or(""), "priority": c["priority"].as_i64().unwrap_or(0),
        }));
    }
    let has_age = t.printer_columns.iter().any(|c| c["jsonPath"].as_str() == Some(".metadata.creationTimestamp"));
    if !has_age {
        columns.push(
            json!({"name": "Age", "type": "string", "format": "", "description": "CreationTimestamp", "priority": 0}),
        );
    }
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut cells = vec![o["metadata"]["name"].clone()];
            for c in &t.printer_columns {
                let path = c["jsonPath"].as_str().unwrap_or_default();
                cells.push(cell(jsonpath(o, path), c["type"].as_str().unwrap_or("string"), now));
            }
            if !has_age {
                cells.push(json!(age(o["metadata"]["creationTimestamp"].as_str().unwrap_or_default(), now)));
            }
            json!({"cells": cells, "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": o["metadata"]}})
        })
        .collect();
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns, "rows": rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printer_column_paths() {
        let o = json!({"spec": {"template": {"spec": {"nodeClassRef": {"name": "default"}}}}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        assert_eq!(jsonpath(&o, ".spec.template.spec.nodeClassRef.name"), Some(&json!("default")));
        assert_eq!(jsonpath(&o, ".status.conditions[?(@.type==\"Ready\")].status"), Some(&json!("True")));
        assert_eq!(jsonpath(&o, ".status.conditions[0].type"), Some(&json!("Ready")));
        assert_eq!(jsonpath(&o, ".status.missing"), None);
        let l = json!({"metadata": {"labels": {"node.kubernetes.io/instance-type": "c6a.4xlarge"}}});
        assert_eq!(jsonpath(&l, ".metadata.labels.node\\.kubernetes\\.io/instance-type"), Some(&json!("c6a.4xlarge")));
    }

    #[test]
    fn ages_read_like_kubectl() {
        assert_eq!(parse_time("2026-11-30T13:04:05Z"), Some(1796043845));
        assert_eq!(age("2026-11-30T13:04:05Z", 1796043845 + 300), "5m");
        assert_eq!(age("garbage", 0), "<unknown>");
    }
}
