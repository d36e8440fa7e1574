//! `spec.kubelet` rules, as Karpenter's runtime validation has them: every field must be one
//! the kubelet's own configuration type declares, with that type's shape (the API server
//! cannot check this, the schema is open), and the values the kubelet would silently ignore
//! or misread are refused.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::Value;

use super::{FieldPath, Report};
use crate::ec2nodeclass::KubeletConfiguration;
use crate::quantity::parse_milli;

const EVICTION_SIGNALS: &[&str] = &[
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "pid.available",
];
const RESERVED_KEYS: &[&str] = &["cpu", "memory", "ephemeral-storage", "pid"];
/// Fields Tenon writes itself: a value here would be overwritten on the way to the node.
const SET_BY_TENON: &[(&str, &str)] = &[(
    "registerWithTaints",
    "Tenon sets it from the NodeClaim's taints, so the node registers unschedulable until it is ready",
)];

/// The upstream field tree (`kubelet_fields.json`), parsed once.
fn upstream() -> &'static serde_json::Map<String, Value> {
    static TREE: OnceLock<serde_json::Map<String, Value>> = OnceLock::new();
    TREE.get_or_init(|| {
        let doc: Value = serde_json::from_str(include_str!("../kubelet_fields.json")).expect("kubelet_fields.json");
        doc["root"].as_object().cloned().expect("kubelet_fields.json has a root object")
    })
}

/// Every rule for `k`; `family` is the NodeClass's resolved AMI family.
pub(super) fn check_kubelet(r: &mut Report, p: &FieldPath, k: &KubeletConfiguration, family: &str) {
    for (key, value) in &k.extra {
        let kp = p.field(key);
        match upstream().get(key) {
            None => r.error(
                &kp,
                format!("unknown field {key:?}: the kubelet's configuration (v1beta1) has no such field"),
                "remove it, or check its spelling (field names are case-sensitive)",
            ),
            Some(ty) => conform(r, &kp, ty, value),
        }
        if let Some((_, why)) = SET_BY_TENON.iter().find(|(f, _)| f == key) {
            r.error(&kp, format!("{key} can't be set: {why}"), "remove it; taint the NodePool's template instead");
        }
        // Only nodeadm (AL2023) takes arbitrary kubelet configuration; elsewhere a field
        // Karpenter does not map would be silently dropped, so it is refused, as Karpenter does.
        if family != "AL2023" {
            r.error(
                &kp,
                format!("{key} is not a kubelet setting Karpenter maps, and only AL2023 passes other fields to the kubelet (this NodeClass is {family})"),
                if family == "Bottlerocket" {
                    "remove it, or set its Bottlerocket setting in spec.userData under [settings.kubernetes]"
                } else {
                    "remove it, or check the spelling against the kubelet settings Karpenter maps"
                },
            );
        }
    }
    check_reservations(r, p, k);
    check_eviction(r, p, k);
    check_numbers(r, p, k);
}

fn check_reservations(r: &mut Report, p: &FieldPath, k: &KubeletConfiguration) {
    for (field, map) in [("kubeReserved", &k.kube_reserved), ("systemReserved", &k.system_reserved)] {
        for (key, v) in map {
            let kp = p.field(field).key(key);
            if !RESERVED_KEYS.contains(&key.as_str()) {
                r.error(
                    &kp,
                    format!("{key:?} isn't a reservable resource, must be one of cpu, memory, ephemeral-storage, pid"),
                    format!("remove {key:?}"),
                );
            }
            if v.starts_with('-') {
                r.error(&kp, format!("{v:?} can't be a negative resource quantity"), "use a quantity of zero or more");
            } else if parse_milli(v).is_err() {
                r.error(
                    &kp,
                    format!("{v:?} is not a quantity; if it is a CEL expression, Karpenter evaluates those only with its NodeClassCEL feature gate, which Tenon does not implement"),
                    "use a quantity, e.g. 100m or 512Mi",
                );
            }
        }
    }
}

fn check_eviction(r: &mut Report, p: &FieldPath, k: &KubeletConfiguration) {
    let minimum_reclaim = string_map(k.extra.get("evictionMinimumReclaim")).unwrap_or_default();
    let thresholds = [
        ("evictionHard", &k.eviction_hard),
        ("evictionSoft", &k.eviction_soft),
        ("evictionSoftGracePeriod", &k.eviction_soft_grace_period),
        ("evictionMinimumReclaim", &minimum_reclaim),
    ];
    for (field, map) in thresholds {
        for (signal, v) in map {
            let kp = p.field(field).key(signal);
            if !EVICTION_SIGNALS.contains(&signal.as_str()) {
                r.error(
                    &kp,
                    format!("{signal:?} isn't a valid eviction signal, must be one of {}", EVICTION_SIGNALS.join(", ")),
                    format!("remove {signal:?}"),
                );
            }
            if field == "evictionSoftGracePeriod" {
                match go_duration_sign(v) {
                    None => r.error(&kp, format!("{v:?} must be a duration"), "e.g. 1m30s"),
                    Some(true) => r.error(&kp, format!("{v:?} can't be a negative duration"), "use 0s or more"),
                    Some(false) => {}
                }
            } else {
                check_threshold(r, &kp, v);
            }
        }
    }
    for key in k.eviction_soft.keys().filter(|key| !k.eviction_soft_grace_period.contains_key(*key)) {
        r.error(
            &p.field("evictionSoft").key(key),
            "has no matching evictionSoftGracePeriod (the kubelet ignores a soft threshold without one)",
            format!("add evictionSoftGracePeriod.{key}, e.g. 1m"),
        );
    }
    for key in k.eviction_soft_grace_period.keys().filter(|key| !k.eviction_soft.contains_key(*key)) {
        r.error(
            &p.field("evictionSoftGracePeriod").key(key),
            "has no matching evictionSoft",
            format!("add evictionSoft.{key}, or remove this grace period"),
        );
    }
}

/// An eviction threshold: a percentage from 0 to 100, or a quantity of zero or more.
fn check_threshold(r: &mut Report, p: &FieldPath, v: &str) {
    let ok = match v.strip_suffix('%') {
        Some(pct) => pct.parse::<f64>().is_ok_and(|x| (0.0..=100.0).contains(&x)),
        None => match parse_milli(v) {
            Ok(q) if q < 0 => {
                return r.error(p, format!("{v:?} can't be a negative resource quantity"), "use zero or more");
            }
            Ok(_) => true,
            Err(_) => false,
        },
    };
    if !ok {
        r.error(p, format!("{v:?} must be a percentage or a resource quantity"), "e.g. 10% or 500Mi");
    }
}

fn check_numbers(r: &mut Report, p: &FieldPath, k: &KubeletConfiguration) {
    for (field, v) in [
        ("imageGCHighThresholdPercent", k.image_gc_high_threshold_percent),
        ("imageGCLowThresholdPercent", k.image_gc_low_threshold_percent),
    ] {
        if let Some(v) = v
            && !(0..=100).contains(&v)
        {
            r.error(&p.field(field), format!("{v} must be between 0 and 100"), "use a percentage");
        }
    }
    for (field, v) in [
        ("podsPerCore", k.pods_per_core),
        ("evictionMaxPodGracePeriod", k.eviction_max_pod_grace_period),
        ("maxPods", k.max_pods),
    ] {
        if let Some(v) = v
            && v < 0
        {
            r.error(&p.field(field), format!("{v} can't be negative"), "use 0 or more");
        }
    }
    if let (Some(hi), Some(lo)) = (k.image_gc_high_threshold_percent, k.image_gc_low_threshold_percent)
        && hi <= lo
    {
        r.error(
            &p.field("imageGCHighThresholdPercent"),
            format!("imageGCHighThresholdPercent ({hi}) must be greater than imageGCLowThresholdPercent ({lo})"),
            format!("raise it above {lo}: the kubelet collects above the high threshold down to the low one"),
        );
    }
}

/// `value` as a map of strings, when it is one (its shape is checked against the tree).
fn string_map(value: Option<&Value>) -> Option<BTreeMap<String, String>> {
    let map = value?.as_object()?;
    map.iter().map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect()
}

/// Whether `value` has the shape upstream type `ty` decodes (null stands for "unset").
fn conform(r: &mut Report, p: &FieldPath, ty: &Value, value: &Value) {
    if value.is_null() {
        return;
    }
    let expected = match ty {
        Value::String(name) => {
            if scalar_fits(name, value) {
                return;
            }
            name.clone()
        }
        Value::Object(shape) => {
            if let Some(item) = shape.get("list") {
                if let Some(items) = value.as_array() {
                    return items.iter().enumerate().for_each(|(i, v)| conform(r, &p.index(i), item, v));
                }
                "a list".to_string()
            } else if let Some(item) = shape.get("map") {
                if let Some(map) = value.as_object() {
                    return map.iter().for_each(|(k, v)| conform(r, &p.key(k), item, v));
                }
                "a map".to_string()
            } else if let Some(Value::Object(fields)) = shape.get("object") {
                let Some(map) = value.as_object() else {
                    return r.error(p, format!("{value} is not an object"), "give this field an object");
                };
                for (k, v) in map {
                    match fields.get(k) {
                        Some(ty) => conform(r, &p.field(k), ty, v),
                        None => r.error(
                            &p.field(k),
                            format!("unknown field {k:?}: the kubelet's configuration has no such field here"),
                            "remove it, or check its spelling (field names are case-sensitive)",
                        ),
                    }
                }
                return;
            } else {
                return;
            }
        }
        _ => return,
    };
    r.error(p, format!("{value} is not {}", article(&expected)), format!("give this field {}", article(&expected)));
}

fn article(ty: &str) -> String {
    match ty {
        "a list" | "a map" => ty.to_string(),
        "int32" | "int64" | "uint32" | "uint64" => format!("an integer ({ty})"),
        "float64" => "a number".into(),
        "quantity" => "a quantity (e.g. 100Mi)".into(),
        "duration" => "a duration (e.g. 1m30s)".into(),
        other => format!("a {other}"),
    }
}

fn scalar_fits(ty: &str, v: &Value) -> bool {
    let int_in = |lo: i128, hi: i128| {
        let n = v.as_i64().map(i128::from).or_else(|| v.as_u64().map(i128::from));
        n.is_some_and(|n| (lo..=hi).contains(&n))
    };
    match ty {
        "string" => v.is_string(),
        "bool" => v.is_boolean(),
        "int32" => int_in(i32::MIN.into(), i32::MAX.into()),
        "int64" => int_in(i64::MIN.into(), i64::MAX.into()),
        "uint32" => int_in(0, u32::MAX.into()),
        "uint64" => int_in(0, u64::MAX.into()),
        "float64" => v.is_number(),
        "quantity" => v.is_number() || v.as_str().is_some_and(|s| parse_milli(s).is_ok()),
        // The one duration that also takes nanoseconds (logging.flushFrequency) is the rare
        // case; a number is accepted for every duration rather than mis-refused for that one.
        "duration" => v.is_i64() || v.as_str().is_some_and(|s| go_duration_sign(s).is_some()),
        _ => true,
    }
}

/// Parses a Go duration (`300ms`, `-1.5h`, `1m30s`, `0`): `Some(negative)`, or `None`
/// when it is not one.
fn go_duration_sign(s: &str) -> Option<bool> {
    let (negative, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(false);
    }
    if rest.is_empty() {
        return None;
    }
    let mut nonzero = false;
    while !rest.is_empty() {
        let number_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number = &rest[..number_end];
        if number.is_empty() || number == "." || number.matches('.').count() > 1 {
            return None;
        }
        nonzero |= number.chars().any(|c| matches!(c, '1'..='9'));
        rest = &rest[number_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        if !matches!(&rest[..unit_end], "ns" | "us" | "µs" | "μs" | "ms" | "s" | "m" | "h") {
            return None;
        }
        rest = &rest[unit_end..];
    }
    Some(negative && nonzero)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse_as_go_parses_them() {
        for (s, negative) in [("1m", false), ("300ms", false), ("1.5h", false), ("1m30s", false), ("0", false)] {
            assert_eq!(go_duration_sign(s), Some(negative), "{s}");
        }
        assert_eq!(go_duration_sign("-1m"), Some(true));
        assert_eq!(go_duration_sign("-0s"), Some(false), "minus zero is not negative");
        assert_eq!(go_duration_sign("2µs"), Some(false));
        for bad in ["", "soon", "5x", "1", "m", "1..5s", "1d", "-", ".s", "1m 30s"] {
            assert_eq!(go_duration_sign(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_upstream_tree_knows_nested_fields() {
        let tree = upstream();
        assert!(tree.contains_key("serializeImagePulls") && tree.contains_key("logging"));
        assert_eq!(tree["logging"]["object"]["options"]["object"]["json"]["object"]["infoBufferSize"], "quantity");
    }
}
