//! Checks shared by the three kinds: label keys and values, requirements, taints,
//! durations, quantities and the NodeClass reference.

use super::{FieldPath, Report};
use crate::common::{NodeClassReference, NodeSelectorRequirementWithMinValues, ResourceList, Taint};
use crate::duration::{duration_hint, parse_duration, parse_nillable_duration};
use crate::quantity::parse_milli;
use crate::wellknown::{
    AWS_GROUP, LABEL_CAPACITY_TYPE, LABEL_HOSTNAME, LABEL_NODEPOOL, WELL_KNOWN_AWS_LABELS, WELL_KNOWN_KUBERNETES_LABELS,
};

pub const OPERATORS: &[&str] = &["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"];
const MAX_REQUIREMENTS: usize = 100;

fn is_dns1123_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 subdomain: dot-separated lowercase labels, at most 253 characters.
pub fn is_dns1123_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

fn is_label_name(s: &str) -> bool {
    let b = s.as_bytes();
    !s.is_empty()
        && s.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Why `key` is not a Kubernetes qualified name (`[prefix/]name`), if it is not.
pub fn qualified_name_error(key: &str) -> Option<String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && !is_dns1123_subdomain(p)
    {
        return Some(format!("prefix {p:?} of {key:?} is not a lowercase DNS subdomain"));
    }
    if !is_label_name(name) {
        return Some(format!(
            "{key:?} is not a qualified name: the name part must be 1-63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric"
        ));
    }
    None
}

/// Checks a label value (empty, or 1-63 alphanumerics, '-', '_', '.', alphanumeric at both ends).
pub fn check_label_value(r: &mut Report, path: &FieldPath, value: &str) {
    if !value.is_empty() && !is_label_name(value) {
        r.error(
            path,
            format!("{value:?} is not a valid label value"),
            "use at most 63 characters: letters, digits, '-', '_' or '.', beginning and ending with a letter or digit",
        );
    }
}

fn domain(key: &str) -> &str {
    key.split_once('/').map_or("", |(d, _)| d)
}

/// Why a label key may not be set or constrained by a NodePool/NodeClaim, if it may not.
/// `nodepool_scoped` adds the rule that a NodePool may not name `karpenter.sh/nodepool`
/// (Karpenter sets it).
pub fn restricted_label(key: &str, nodepool_scoped: bool) -> Option<(String, String)> {
    let hint_custom = "use a well-known label, or a custom label outside the karpenter.sh and karpenter.k8s.aws domains (e.g. example.com/pool)";
    if key == LABEL_HOSTNAME {
        return Some((
            format!("label {key:?} is restricted"),
            "Karpenter assigns the hostname; remove this key".into(),
        ));
    }
    if nodepool_scoped && key == LABEL_NODEPOOL {
        return Some((
            format!("label {key:?} is restricted"),
            "Karpenter sets karpenter.sh/nodepool to the NodePool's name; remove this key".into(),
        ));
    }
    if WELL_KNOWN_KUBERNETES_LABELS.contains(&key) {
        return None;
    }
    // Karpenter v1 restricts only its own domains; kubernetes.io and k8s.io labels are
    // allowed (the kubelet cannot set most of them, so registration does, see user data).
    let d = domain(key);
    let restricted =
        |dom: &str| Some((format!("label domain {dom:?} is restricted ({key:?})"), hint_custom.to_string()));
    if d.ends_with("karpenter.sh") && key != LABEL_CAPACITY_TYPE && key != LABEL_NODEPOOL {
        return restricted("karpenter.sh");
    }
    if d.ends_with(AWS_GROUP) && !WELL_KNOWN_AWS_LABELS.contains(&key) {
        return Some((
            format!("label domain \"karpenter.k8s.aws\" is restricted ({key:?} is not a well-known instance label)"),
            format!("use one of {}", WELL_KNOWN_AWS_LABELS.join(", ")),
        ));
    }
    None
}

/// Checks a list of requirements with minValues.
pub fn check_requirements(
    r: &mut Report,
    path: &FieldPath,
    reqs: &[NodeSelectorRequirementWithMinValues],
    nodepool_scoped: bool,
) {
    if reqs.len() > MAX_REQUIREMENTS {
        r.error(
            path,
            format!("{} requirements, at most {MAX_REQUIREMENTS} are allowed", reqs.len()),
            "merge requirements on the same key",
        );
    }
    for (i, req) in reqs.iter().enumerate() {
        check_requirement(r, &path.index(i), req, nodepool_scoped);
    }
}

fn check_requirement(
    r: &mut Report,
    path: &FieldPath,
    req: &NodeSelectorRequirementWithMinValues,
    nodepool_scoped: bool,
) {
    let key_path = path.field("key");
    if let Some(e) = qualified_name_error(&req.key) {
        r.error(&key_path, e, "use a label key such as kubernetes.io/arch or example.com/team");
    } else if let Some((msg, hint)) = restricted_label(&req.key, nodepool_scoped) {
        r.error(&key_path, msg, hint);
    }
    let op = req.operator.as_str();
    let values_path = path.field("values");
    let n = req.values.len();
    match op {
        "In" if n == 0 => r.error(
            &values_path,
            "requirements with operator 'In' must have a value defined",
            "list at least one value, or use operator Exists",
        ),
        "NotIn" if n == 0 => r.warning(
            &values_path,
            "operator 'NotIn' with no values excludes nothing",
            "list the values to exclude, or remove the requirement",
        ),
        "Exists" | "DoesNotExist" if n > 0 => r.warning(
            &values_path,
            format!("values are ignored with operator '{op}'"),
            "remove values, or use In/NotIn",
        ),
        "Gt" | "Lt" | "Gte" | "Lte" => {
            let ok = n == 1 && req.values[0].parse::<u64>().is_ok();
            if !ok {
                r.error(
                    &values_path,
                    format!("requirements operator '{op}' must have a single positive integer value"),
                    format!("give exactly one non-negative integer, e.g. values: [\"4\"], found {:?}", req.values),
                );
            }
        }
        _ if !OPERATORS.contains(&op) => r.error(
            &path.field("operator"),
            format!("unsupported operator {op:?}"),
            format!("use one of {}", OPERATORS.join(", ")),
        ),
        _ => {}
    }
    if matches!(op, "In" | "NotIn") {
        for (j, v) in req.values.iter().enumerate() {
            check_label_value(r, &values_path.index(j), v);
        }
    }
    if let Some(min) = req.min_values {
        let min_path = path.field("minValues");
        if !(1..=50).contains(&min) {
            r.error(&min_path, format!("minValues {min} is outside 1-50"), "set minValues between 1 and 50");
        } else if op == "In" && (n as i64) < min {
            r.error(
                &min_path,
                format!("requirements with 'minValues' must have at least that many values specified in the 'values' field ({n} values, minValues {min})"),
                format!("list at least {min} values or lower minValues to {n}"),
            );
        }
    }
}

/// Checks a taint list: keys, values, effects and duplicates.
pub fn check_taints(r: &mut Report, path: &FieldPath, taints: &[Taint]) {
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (i, t) in taints.iter().enumerate() {
        let p = path.index(i);
        if t.key.is_empty() {
            r.error(&p.field("key"), "taint key is required", "set key, e.g. example.com/dedicated");
        } else if let Some(e) = qualified_name_error(&t.key) {
            r.error(&p.field("key"), e, "use a qualified name such as example.com/dedicated");
        }
        if let Some(v) = &t.value {
            check_label_value(r, &p.field("value"), v);
        }
        if !matches!(t.effect.as_str(), "NoSchedule" | "PreferNoSchedule" | "NoExecute") {
            r.error(
                &p.field("effect"),
                format!("unsupported taint effect {:?}", t.effect),
                "use NoSchedule, PreferNoSchedule or NoExecute",
            );
        }
        if seen.contains(&(t.key.as_str(), t.effect.as_str())) {
            r.error(&p, format!("duplicate taint {}:{}", t.key, t.effect), "keep one taint per key and effect");
        }
        seen.push((&t.key, &t.effect));
    }
}

/// Checks a `Never`-able duration (expireAfter, consolidateAfter).
pub fn check_nillable_duration(r: &mut Report, path: &FieldPath, value: &str) {
    if let Err(e) = parse_nillable_duration(value) {
        r.error(path, e.to_string(), duration_hint(value, true));
    }
}

/// Checks a duration that may not be `Never` (terminationGracePeriod).
pub fn check_duration(r: &mut Report, path: &FieldPath, value: &str) {
    if let Err(e) = parse_duration(value) {
        r.error(path, e.to_string(), duration_hint(value, false));
    }
}

/// Checks every quantity of a resource list parses and is not negative.
pub fn check_resource_list(r: &mut Report, path: &FieldPath, list: &ResourceList) {
    for (name, q) in list {
        let p = path.key(name);
        if let Some(e) = qualified_name_error(name) {
            r.error(
                &p,
                format!("resource name: {e}"),
                "use a resource name such as cpu, memory, nodes or nvidia.com/gpu",
            );
        }
        match parse_milli(&q.0) {
            Err(e) => r.error(&p, e.to_string(), "write a Kubernetes quantity such as 64, 500m, 256Gi or 1.5"),
            Ok(v) if v < 0 => r.error(&p, format!("{:?} is negative", q.0), "use a quantity of zero or more"),
            Ok(_) => {}
        }
    }
}

/// Checks a NodeClass reference: present, complete, and naming a kind Tenon can launch.
pub fn check_node_class_ref(r: &mut Report, path: &FieldPath, ncr: Option<&NodeClassReference>) {
    let Some(ncr) = ncr else {
        r.error(
            path,
            "nodeClassRef is required",
            "add nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: <your EC2NodeClass>}",
        );
        return;
    };
    for (field, value, example) in [
        ("group", &ncr.group, "karpenter.k8s.aws"),
        ("kind", &ncr.kind, "EC2NodeClass"),
        ("name", &ncr.name, "default"),
    ] {
        if value.is_empty() {
            r.error(&path.field(field), format!("{field} may not be empty"), format!("set {field}, e.g. {example}"));
        }
    }
    if !ncr.group.is_empty() && ncr.group != AWS_GROUP {
        r.error(
            &path.field("group"),
            format!("NodeClass group {:?} is not supported", ncr.group),
            "Tenon launches on EC2: use group karpenter.k8s.aws",
        );
    }
    if !ncr.kind.is_empty() && ncr.kind != "EC2NodeClass" {
        r.error(
            &path.field("kind"),
            format!("NodeClass kind {:?} is not supported", ncr.kind),
            "use kind EC2NodeClass",
        );
    }
    if !ncr.name.is_empty() && !is_dns1123_subdomain(&ncr.name) {
        r.error(
            &path.field("name"),
            format!("{:?} is not a valid object name", ncr.name),
            "object names are lowercase letters, digits, '-' and '.'",
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricted_domains_follow_karpenter() {
        assert!(restricted_label("kubernetes.io/arch", true).is_none());
        assert!(restricted_label("node.kubernetes.io/instance-type", true).is_none());
        assert!(restricted_label("example.node.kubernetes.io/x", true).is_none());
        assert!(restricted_label("kops.k8s.io/instancegroup", true).is_none());
        assert!(restricted_label("karpenter.k8s.aws/instance-family", true).is_none());
        assert!(restricted_label("capacity.example.io/pool", true).is_none());
        assert!(restricted_label("kubernetes.io/hostname", false).is_some());
        assert!(restricted_label("karpenter.sh/nodepool", true).is_some());
        assert!(restricted_label("karpenter.sh/nodepool", false).is_none());
        assert!(restricted_label("karpenter.sh/custom", false).is_some());
        // Karpenter v1 allows the kubernetes.io and k8s.io domains.
        assert!(restricted_label("k8s.io/foo", false).is_none());
        assert!(restricted_label("foo.kubernetes.io/bar", false).is_none());
        assert!(restricted_label("node-role.kubernetes.io/worker", true).is_none());
        assert!(restricted_label("karpenter.k8s.aws/instance-colour", false).is_some());
    }

    #[test]
    fn qualified_names() {
        assert!(qualified_name_error("kubernetes.io/arch").is_none());
        assert!(qualified_name_error("simple").is_none());
        assert!(qualified_name_error("Bad_Prefix/x").is_some());
        assert!(qualified_name_error("a/-x").is_some());
        assert!(qualified_name_error("").is_some());
    }
}
