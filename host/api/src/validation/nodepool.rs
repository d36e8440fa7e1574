//! NodePool rules.

use super::rules::{
    check_duration, check_label_value, check_nillable_duration, check_node_class_ref, check_requirements,
    check_resource_list, check_taints, qualified_name_error, restricted_label,
};
use super::{FieldPath, Problem, Report};
use crate::cron::CronSchedule;
use crate::duration::parse_budget_duration;
use crate::nodepool::{
    Budget, CONSOLIDATION_BALANCED, CONSOLIDATION_WHEN_EMPTY, CONSOLIDATION_WHEN_EMPTY_OR_UNDERUTILIZED,
    DISRUPTION_REASONS, NodePool,
};
use crate::policy::NodePoolPolicies;

/// Validates a NodePool, returning every problem.
pub fn validate_nodepool(np: &NodePool) -> Vec<Problem> {
    let mut r = Report::default();
    let spec = FieldPath::root("spec");
    let s = &np.spec;

    let annotations = np.metadata.annotations.clone().unwrap_or_default();
    let (_, problems) = NodePoolPolicies::from_annotations(&annotations);
    let ann_path = FieldPath::root("metadata").field("annotations");
    for p in problems {
        if p.warning {
            r.warning(&ann_path.key(&p.key), p.message, p.hint);
        } else {
            r.error(&ann_path.key(&p.key), p.message, p.hint);
        }
    }

    if let Some(w) = s.weight
        && !(1..=100).contains(&w)
    {
        r.error(
            &spec.field("weight"),
            format!("weight {w} is outside 1-100"),
            "set weight between 1 and 100, or remove it (absent counts as 0)",
        );
    }
    if let Some(n) = s.replicas {
        if n < 0 {
            r.error(&spec.field("replicas"), "replicas may not be negative", "set replicas to 0 or more");
        }
        if s.weight.is_some() {
            r.error(
                &spec.field("weight"),
                "'weight' is not supported on static NodePools",
                "remove weight, or remove replicas",
            );
        }
        if s.limits.keys().any(|k| k != "nodes") {
            r.error(
                &spec.field("limits"),
                "only 'limits.nodes' is supported on static NodePools",
                "keep only limits.nodes, or remove replicas",
            );
        }
    }
    check_resource_list(&mut r, &spec.field("limits"), &s.limits);

    let tpl = spec.field("template");
    let labels_path = tpl.field("metadata").field("labels");
    for (k, v) in &s.template.metadata.labels {
        let p = labels_path.key(k);
        if let Some(e) = qualified_name_error(k) {
            r.error(&p, e, "use a label key such as example.com/pool");
        } else if let Some((msg, hint)) = restricted_label(k, true) {
            r.error(&p, msg, hint);
        }
        check_label_value(&mut r, &p, v);
    }
    let ts = tpl.field("spec");
    let t = &s.template.spec;
    check_requirements(&mut r, &ts.field("requirements"), &t.requirements, true);
    check_taints(&mut r, &ts.field("taints"), &t.taints);
    check_taints(&mut r, &ts.field("startupTaints"), &t.startup_taints);
    check_node_class_ref(&mut r, &ts.field("nodeClassRef"), t.node_class_ref.as_ref());
    check_nillable_duration(&mut r, &ts.field("expireAfter"), &t.expire_after);
    if let Some(tgp) = &t.termination_grace_period {
        check_duration(&mut r, &ts.field("terminationGracePeriod"), tgp);
    }
    check_label_requirement_conflicts(&mut r, np, &ts.field("requirements"));

    let d = spec.field("disruption");
    // Absent means 0s, as Karpenter's CRD defaults it.
    if let Some(v) = &s.disruption.consolidate_after {
        check_nillable_duration(&mut r, &d.field("consolidateAfter"), v);
    }
    let policy = s.disruption.consolidation_policy.as_str();
    if ![CONSOLIDATION_WHEN_EMPTY, CONSOLIDATION_WHEN_EMPTY_OR_UNDERUTILIZED, CONSOLIDATION_BALANCED].contains(&policy)
    {
        r.error(
            &d.field("consolidationPolicy"),
            format!("unsupported consolidationPolicy {policy:?}"),
            "use WhenEmpty, WhenEmptyOrUnderutilized or Balanced (WhenUnderutilized was renamed in v1)",
        );
    }
    if let Some(w) = &s.disruption.consolidate_when
        && !matches!(w.as_str(), "WhenEmpty" | "WhenEmptyOrUnderutilized" | "WhenCostJustifiesDisruption")
    {
        r.error(
            &d.field("consolidateWhen"),
            format!("unsupported consolidateWhen {w:?}"),
            "use WhenEmpty, WhenEmptyOrUnderutilized or WhenCostJustifiesDisruption",
        );
    }
    if let Some(t) = s.disruption.decision_ratio_threshold
        && !(t > 0.0 && t.is_finite())
    {
        r.error(
            &d.field("decisionRatioThreshold"),
            "decisionRatioThreshold must be greater than 0",
            "use e.g. 1.0 (break-even)",
        );
    }
    let budgets = d.field("budgets");
    if s.disruption.budgets.len() > 50 {
        r.error(&budgets, format!("{} budgets, at most 50 are allowed", s.disruption.budgets.len()), "merge budgets");
    }
    for (i, b) in s.disruption.budgets.iter().enumerate() {
        check_budget(&mut r, &budgets.index(i), b);
    }
    r.into_problems()
}

fn check_budget(r: &mut Report, p: &FieldPath, b: &Budget) {
    let nodes = b.nodes.as_str();
    let nodes_ok = match nodes.strip_suffix('%') {
        Some(pct) => {
            !pct.is_empty()
                && pct.len() <= 3
                && pct.bytes().all(|c| c.is_ascii_digit())
                && pct.parse::<u32>().is_ok_and(|v| v <= 100)
        }
        None => !nodes.is_empty() && nodes.bytes().all(|c| c.is_ascii_digit()),
    };
    if !nodes_ok {
        r.error(
            &p.field("nodes"),
            format!("nodes {nodes:?} must be a whole number or a percentage up to 100%"),
            "write e.g. \"10%\", \"0\" or \"5\"",
        );
    }
    if let Some(reasons) = &b.reasons {
        for (j, reason) in reasons.iter().enumerate() {
            if !DISRUPTION_REASONS.contains(&reason.as_str()) {
                r.error(
                    &p.field("reasons").index(j),
                    format!("unsupported disruption reason {reason:?}"),
                    format!("use {}", DISRUPTION_REASONS.join(", ")),
                );
            }
        }
    }
    match (&b.schedule, &b.duration) {
        (Some(_), None) | (None, Some(_)) => {
            let missing = if b.schedule.is_some() { "duration" } else { "schedule" };
            r.error(
                &p.field(missing),
                "'schedule' must be set with 'duration'",
                format!("add {missing}, e.g. schedule: \"0 9 * * mon-fri\" with duration: 8h"),
            );
        }
        _ => {}
    }
    if let Some(sched) = &b.schedule
        && let Err(e) = CronSchedule::parse(sched)
    {
        r.error(
            &p.field("schedule"),
            format!("invalid cron schedule {sched:?}: {e}"),
            "use five fields in UTC: minute hour day-of-month month day-of-week, e.g. \"0 9 * * mon-fri\", or @daily",
        );
    }
    if let Some(dur) = &b.duration
        && let Err(e) = parse_budget_duration(dur)
    {
        r.error(
            &p.field("duration"),
            e.to_string(),
            "budget durations are hours and minutes only, e.g. 8h, 30m or 1h30m",
        );
    }
}

/// A template label that contradicts a requirement on the same key would make every launch
/// fail; Karpenter rejects the NodePool at admission for that, so does Tenon.
fn check_label_requirement_conflicts(r: &mut Report, np: &NodePool, reqs_path: &FieldPath) {
    let t = &np.spec.template;
    for (i, req) in t.spec.requirements.iter().enumerate() {
        let Some(label) = t.metadata.labels.get(&req.key) else { continue };
        let conflict = match req.operator.as_str() {
            "In" => !req.values.contains(label),
            "NotIn" => req.values.contains(label),
            "DoesNotExist" => true,
            _ => false,
        };
        if conflict {
            r.error(
                &reqs_path.index(i),
                format!(
                    "requirement {} {} {:?} conflicts with template label {}={label}",
                    req.key, req.operator, req.values, req.key
                ),
                "make the label value satisfy the requirement, or drop one of them",
            );
        }
    }
}
