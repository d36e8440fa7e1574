//! Label and field selectors as the API server parses them.

use serde_json::Value;
use std::collections::BTreeSet;

/// A field selector term: (field, equals?, value).
pub type FieldReq = (String, bool, String);

#[derive(Clone, Debug, PartialEq)]
pub enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    NotExists(String),
}

/// Splits on commas outside parentheses.
fn terms(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    out.push(cur);
    out.into_iter().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()).collect()
}

fn set(values: &str) -> Result<BTreeSet<String>, String> {
    let inner = values
        .trim()
        .strip_prefix('(')
        .and_then(|v| v.strip_suffix(')'))
        .ok_or_else(|| format!("expected (values) in {values:?}"))?;
    Ok(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
}

pub fn parse_labels(s: &str) -> Result<Vec<LabelReq>, String> {
    terms(s)
        .into_iter()
        .map(|t| {
            if let Some(k) = t.strip_prefix('!') {
                return Ok(LabelReq::NotExists(k.trim().to_string()));
            }
            if let Some((k, v)) = t.split_once("!=") {
                return Ok(LabelReq::NotEq(k.trim().into(), v.trim().into()));
            }
            if let Some((k, v)) = t.split_once("==") {
                return Ok(LabelReq::Eq(k.trim().into(), v.trim().into()));
            }
            if let Some((k, v)) = t.split_once('=') {
                return Ok(LabelReq::Eq(k.trim().into(), v.trim().into()));
            }
            if let Some((k, v)) = t.split_once(" notin ") {
                return Ok(LabelReq::NotIn(k.trim().into(), set(v)?));
            }
            if let Some((k, v)) = t.split_once(" in ") {
                return Ok(LabelReq::In(k.trim().into(), set(v)?));
            }
            if t.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c)) {
                return Ok(LabelReq::Exists(t));
            }
            Err(format!("unable to parse requirement: {t:?}"))
        })
        .collect()
}

pub fn labels_match(reqs: &[LabelReq], obj: &Value) -> bool {
    let labels = &obj["metadata"]["labels"];
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    reqs.iter().all(|r| match r {
        LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
        LabelReq::NotEq(k, v) => get(k) != Some(v.as_str()),
        LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.contains(x)),
        LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| !vs.contains(x)),
        LabelReq::Exists(k) => get(k).is_some(),
        LabelReq::NotExists(k) => get(k).is_none(),
    })
}

/// `field=value`, `field==value`, `field!=value`, comma-separated; the fields Tenon and
/// kubectl use.
pub fn parse_fields(s: &str) -> Result<Vec<FieldReq>, String> {
    terms(s)
        .into_iter()
        .map(|t| {
            let (k, eq, v) = if let Some((k, v)) = t.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = t.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = t.split_once('=') {
                (k, true, v)
            } else {
                return Err(format!("invalid field selector term {t:?}"));
            };
            let k = k.trim();
            if ![
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "status.phase",
                "involvedObject.name",
                "involvedObject.kind",
                "spec.unschedulable",
            ]
            .contains(&k)
            {
                return Err(format!("field label not supported: {k}"));
            }
            Ok((k.to_string(), eq, v.trim().to_string()))
        })
        .collect()
}

pub fn fields_match(reqs: &[FieldReq], obj: &Value) -> bool {
    reqs.iter().all(|(k, eq, v)| {
        let mut cur = obj;
        for part in k.split('.') {
            cur = &cur[part];
        }
        let actual = match cur {
            Value::String(s) => s.clone(),
            Value::Bool(b) => b.to_string(),
            Value::Null => String::new(),
            other => other.to_string(),
        };
        (actual == *v) == *eq
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_label_operator() {
        let o = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        for (sel, want) in [
            ("app=web", true),
            ("app==web,tier=front", true),
            ("app!=web", false),
            ("app in (web, api)", true),
            ("app notin (web)", false),
            ("tier", true),
            ("!tier", false),
            ("!missing,app in (web)", true),
        ] {
            assert_eq!(labels_match(&parse_labels(sel).unwrap(), &o), want, "{sel}");
        }
        assert!(parse_labels("app in web").is_err());
    }

    #[test]
    fn field_selectors() {
        let pod = json!({"metadata": {"name": "a", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        assert!(fields_match(&parse_fields("spec.nodeName=n1,status.phase!=Failed").unwrap(), &pod));
        assert!(!fields_match(&parse_fields("metadata.name=b").unwrap(), &pod));
        assert!(fields_match(&parse_fields("spec.nodeName=").unwrap(), &json!({"spec": {}})));
        assert!(parse_fields("spec.containers=x").unwrap_err().contains("not supported"));
    }
}
