//! Karpenter's `pkg/controllers/provisioning/scheduling/suite_test.go`, ported: each test
//! names the cases it accounts for (tests/conformance/karpenter.tsv). The suite's NodePool
//! allows every capacity type; the catalog is Karpenter's fake one.
//!
//! Karpenter's suite repeats its "Custom Constraints" contexts; a test here ports every copy
//! of a case at once.

use crate::support;

use std::sync::Arc;
use support::GIB;
use support::karpenter::*;
use tenon_core::instancetype::InstanceType;

const ZONE: &str = "topology.kubernetes.io/zone";
const TYPE: &str = "node.kubernetes.io/instance-type";
const ARCH: &str = "kubernetes.io/arch";
const OS: &str = "kubernetes.io/os";
const CAPACITY: &str = "karpenter.sh/capacity-type";

/// The suite's NodePool (`Scheduling` BeforeEach) with template `labels` (YAML map body).
fn cluster(labels: &str) -> Cluster {
    let mut c = Cluster::new(default_types());
    c.nodepool(
        "default",
        &format!(
            "  template:\n    metadata:\n      labels: {{{labels}}}\n    spec:\n      requirements:\n        - {{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand, reserved]}}\n"
        ),
    );
    c
}

/// The suite's NodePool with its requirements replaced by `reqs` (each from [`expr`]),
/// launching from `catalog`.
fn pool_requiring_from(catalog: Arc<Vec<InstanceType>>, reqs: &[String]) -> Cluster {
    let mut c = Cluster::new(catalog);
    let items: String = reqs.iter().map(|r| format!("        - {r}\n")).collect();
    c.nodepool("default", &format!("  template:\n    spec:\n      requirements:\n{items}"));
    c
}

/// The suite's NodePool with its requirements replaced by `reqs`, on the default catalog.
fn pool_requiring(reqs: &[String]) -> Cluster {
    pool_requiring_from(default_types(), reqs)
}

/// A node selector requirement (`matchExpressions` item) in YAML flow style.
fn expr(key: &str, op: &str, values: &[&str]) -> String {
    if values.is_empty() {
        format!("{{key: {key}, operator: {op}}}")
    } else {
        format!("{{key: {key}, operator: {op}, values: [{}]}}", values.join(", "))
    }
}

/// Pod spec lines for `test.PodOptions{NodeSelector, NodeRequirements, NodePreferences}`: the
/// requirements are one required term, the preferences one preferred term of weight 1.
fn constraints(selector: &[(&str, &str)], required: &[String], preferred: &[String]) -> String {
    let mut spec = String::new();
    if !selector.is_empty() {
        let pairs: Vec<String> = selector.iter().map(|(k, v)| format!("{k}: {v}")).collect();
        spec += &format!("  nodeSelector: {{{}}}\n", pairs.join(", "));
    }
    let mut affinity = Vec::new();
    if !required.is_empty() {
        affinity.push(format!(
            "requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{}]}}]}}",
            required.join(", ")
        ));
    }
    if !preferred.is_empty() {
        affinity.push(format!(
            "preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 1, preference: {{matchExpressions: [{}]}}}}]",
            preferred.join(", ")
        ));
    }
    if !affinity.is_empty() {
        spec += &format!("  affinity: {{nodeAffinity: {{{}}}}}\n", affinity.join(", "));
    }
    spec
}

/// Pod spec lines for a node selector.
fn selecting(selector: &[(&str, &str)]) -> String {
    constraints(selector, &[], &[])
}

/// Pod spec lines for one required node affinity term.
fn requiring(required: &[String]) -> String {
    constraints(&[], required, &[])
}

/// Pod spec lines for a container requesting `requests` (YAML map body).
fn requesting(requests: &str) -> String {
    format!("  containers: [{{name: app, image: app, resources: {{requests: {{{requests}}}}}}}]\n")
}

/// The label `key` of the node pod `pod` launches on.
fn label(d: &Decision, pod: &str, key: &str) -> Option<String> {
    d.node_labels(pod).get(key).cloned()
}

/// `ExpectNotScheduled`: the pod gets no place, and the plan says why. `case` names the
/// table row on failure.
fn not_scheduled(d: &Decision, pod: &str, case: impl std::fmt::Display) {
    assert!(!d.scheduled(pod) && d.unschedulable(pod).is_some(), "{case}: {}", d.plan.render(&d.snap));
}

/// Whether two pods share one new NodeClaim (Karpenter: the same node).
fn same_node(d: &Decision, a: &str, b: &str) -> bool {
    match (d.nodeclaim_of(a), d.nodeclaim_of(b)) {
        (Some(x), Some(y)) => std::ptr::eq(x, y),
        _ => false,
    }
}

/// `fake.InstanceTypes(n)`: `fake-it-i` with i+1 CPUs, 2(i+1) GiB and 10(i+1) pods.
fn fake_its(n: i64) -> Vec<Fake> {
    (0..n).map(|i| fake(&format!("fake-it-{i}")).resources(i + 1, 2 * (i + 1) * GIB, 10 * (i + 1))).collect()
}

/// The built catalog of the fake `types`.
fn catalog(types: Vec<Fake>) -> Arc<Vec<InstanceType>> {
    Arc::new(types.into_iter().map(Fake::build).collect())
}

/// The suite's NodePool launching from the fake `types` (e.g. `fake.InstanceTypes(5)`).
fn fake_its_cluster(types: Vec<Fake>) -> Cluster {
    pool_requiring_from(catalog(types), &[expr(CAPACITY, "In", &["spot", "on-demand", "reserved"])])
}

// ----- Custom Constraints > NodePool with Labels -----

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:155
#[test]
fn template_labels_land_on_nodes_of_unconstrained_pods() {
    let mut c = cluster("test-key: test-value");
    c.pending("{name: p}", "");
    let d = c.decide();
    assert_eq!(d.node_labels("p").get("test-key").map(String::as_str), Some("test-value"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:163
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:172
#[test]
fn node_selectors_that_conflict_or_name_undefined_keys_do_not_schedule() {
    let mut c = cluster("test-key: test-value");
    c.pending("{name: p}", "  nodeSelector: {test-key: different-value}\n");
    not_scheduled(&c.decide(), "p", "a conflicting node selector");
    let mut c = cluster("");
    c.pending("{name: p}", "  nodeSelector: {test-key: test-value}\n");
    not_scheduled(&c.decide(), "p", "a node selector on a key no NodePool defines");
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:180
#[test]
fn matching_required_node_affinity_schedules_with_the_template_label() {
    let mut c = cluster("test-key: test-value");
    c.pending(
        "{name: p}",
        "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: test-key, operator: In, values: [test-value, another-value]}]}]}}}\n",
    );
    let d = c.decide();
    assert_eq!(d.node_labels("p").get("test-key").map(String::as_str), Some("test-value"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:192
#[test]
fn required_affinity_conflicting_with_a_template_label_does_not_schedule() {
    let mut c = cluster("test-key: test-value");
    c.pending("{name: p}", &requiring(&[expr("test-key", "In", &["another-value"])]));
    not_scheduled(&c.decide(), "p", "");
}

// ----- Custom Constraints > Well Known Labels -----

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:205
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:679
#[test]
fn nodepool_zone_requirement_picks_the_zone() {
    let mut c = pool_requiring(&[expr(ZONE, "In", &["test-zone-2"])]);
    c.pending("{name: p}", "");
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-2"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:214
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:688
#[test]
fn zone_node_selector_narrows_the_nodepool_zones() {
    let mut c = pool_requiring(&[expr(ZONE, "In", &["test-zone-1", "test-zone-2"])]);
    c.pending("{name: p}", &selecting(&[(ZONE, "test-zone-2")]));
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-2"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:225
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:699
#[test]
fn hostname_node_selector_does_not_schedule() {
    let mut c = cluster("");
    c.pending("{name: p}", &selecting(&[("kubernetes.io/hostname", "red-node")]));
    not_scheduled(&c.decide(), "p", "");
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:233
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:707
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:243
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:717
#[test]
fn zone_node_selector_outside_the_nodepool_zones_does_not_schedule() {
    for zone in ["unknown", "test-zone-2"] {
        let mut c = pool_requiring(&[expr(ZONE, "In", &["test-zone-1"])]);
        c.pending("{name: p}", &selecting(&[(ZONE, zone)]));
        not_scheduled(&c.decide(), "p", format!("zone {zone}"));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:253
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:727
#[test]
fn required_zone_in_picks_the_zone() {
    let mut c = cluster("");
    c.pending("{name: p}", &requiring(&[expr(ZONE, "In", &["test-zone-3"])]));
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-3"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:264
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:738
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:273
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:747
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:282
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:291
#[test]
fn numeric_nodepool_requirements_pick_the_cpu_count() {
    for (op, bound, cpus) in [("Gt", "8", "16"), ("Lt", "8", "2"), ("Gte", "16", "16"), ("Lte", "2", "2")] {
        let mut c = pool_requiring(&[expr(CPU, op, &[bound])]);
        c.pending("{name: p}", "");
        assert_eq!(label(&c.decide(), "p", CPU).as_deref(), Some(cpus), "{op} {bound}");
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:300
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:756
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:321
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:777
#[test]
fn required_zones_no_offering_has_do_not_schedule() {
    for req in
        [expr(ZONE, "In", &["unknown"]), expr(ZONE, "NotIn", &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"])]
    {
        let mut c = cluster("");
        c.pending("{name: p}", &requiring(std::slice::from_ref(&req)));
        not_scheduled(&c.decide(), "p", &req);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:310
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:766
#[test]
fn required_zone_not_in_leaves_the_remaining_zone() {
    let mut c = cluster("");
    c.pending("{name: p}", &requiring(&[expr(ZONE, "NotIn", &["test-zone-1", "test-zone-2", "unknown"])]));
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-3"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:332
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:788
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:359
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:815
#[test]
fn compatible_zone_preferences_are_honoured() {
    let all = expr(ZONE, "In", &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"]);
    for pref in [expr(ZONE, "In", &["test-zone-2", "unknown"]), expr(ZONE, "NotIn", &["test-zone-1", "test-zone-3"])] {
        let mut c = cluster("");
        c.pending("{name: p}", &constraints(&[], std::slice::from_ref(&all), std::slice::from_ref(&pref)));
        assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-2"), "{pref}");
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:346
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:802
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:373
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:829
#[test]
fn unsatisfiable_zone_preferences_are_dropped() {
    let all = expr(ZONE, "In", &["test-zone-1", "test-zone-2", "test-zone-3", "unknown"]);
    for pref in [expr(ZONE, "In", &["unknown"]), expr(ZONE, "NotIn", &["test-zone-1", "test-zone-2", "test-zone-3"])] {
        let mut c = cluster("");
        c.pending("{name: p}", &constraints(&[], std::slice::from_ref(&all), std::slice::from_ref(&pref)));
        assert!(c.decide().scheduled("p"), "{pref}");
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:386
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:842
#[test]
fn node_selector_requirements_and_preferences_combine_on_zone() {
    let zones = expr(ZONE, "In", &["test-zone-1", "test-zone-2", "test-zone-3"]);
    let mut c = cluster("");
    c.pending(
        "{name: p}",
        &constraints(&[(ZONE, "test-zone-3")], std::slice::from_ref(&zones), std::slice::from_ref(&zones)),
    );
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-3"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:401
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:857
#[test]
fn node_selector_requirements_and_preferences_combine_across_keys() {
    let mut c = cluster("");
    c.pending(
        "{name: p}",
        &constraints(
            &[(ZONE, "test-zone-3"), (TYPE, "arm-instance-type")],
            &[
                expr(ZONE, "In", &["test-zone-1", "test-zone-3"]),
                expr(TYPE, "In", &["default-instance-type", "arm-instance-type"]),
            ],
            &[expr(ZONE, "NotIn", &["unknown"]), expr(TYPE, "NotIn", &["unknown"])],
        ),
    );
    let d = c.decide();
    assert_eq!(label(&d, "p", ZONE).as_deref(), Some("test-zone-3"));
    assert_eq!(label(&d, "p", TYPE).as_deref(), Some("arm-instance-type"));
}

// ----- Custom Constraints > Constraints Validation -----

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:882
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:442
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:893
#[test]
fn requirements_on_restricted_labels_and_domains_do_not_schedule() {
    // Karpenter's restricted labels (kubernetes.io/hostname) and domains (karpenter.sh).
    for key in ["kubernetes.io/hostname", "karpenter.sh/test"] {
        let mut c = cluster("");
        c.pending("{name: p}", &requiring(&[expr(key, "In", &["test"])]));
        not_scheduled(&c.decide(), "p", key);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:481
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:932
#[test]
fn node_selectors_on_well_known_labels_schedule() {
    let mut c = cluster("");
    let selectors =
        [(ZONE, "test-zone-1"), (TYPE, "default-instance-type"), (ARCH, "arm64"), (OS, "linux"), (CAPACITY, "spot")];
    for (i, s) in selectors.iter().enumerate() {
        c.pending(&format!("{{name: p{i}}}"), &selecting(&[*s]));
    }
    let d = c.decide();
    for (i, s) in selectors.iter().enumerate() {
        assert!(d.scheduled(&format!("p{i}")), "{s:?}: {}", d.plan.render(&d.snap));
    }
}

// ----- Custom Constraints > Scheduling Logic -----

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:509
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:953
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:528
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:972
#[test]
fn positive_requirements_on_an_undefined_key_do_not_schedule() {
    for req in [expr("test-key", "In", &["test-value"]), expr("test-key", "Exists", &[])] {
        let mut c = cluster("");
        c.pending("{name: p}", &requiring(std::slice::from_ref(&req)));
        not_scheduled(&c.decide(), "p", &req);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:518
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:962
#[test]
fn not_in_on_an_undefined_key_schedules_without_the_value() {
    let mut c = cluster("");
    c.pending("{name: p}", &requiring(&[expr("test-key", "NotIn", &["test-value"])]));
    assert_ne!(label(&c.decide(), "p", "test-key").as_deref(), Some("test-value"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:547
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:991
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:556
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1000
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:614
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1058
#[test]
fn custom_nodepool_requirement_value_lands_on_compatible_pods_nodes() {
    for spec in [
        String::new(),
        requiring(&[expr("test-key", "In", &["test-value"])]),
        requiring(&[expr("test-key", "NotIn", &["another-value"])]),
    ] {
        let mut c = pool_requiring(&[expr("test-key", "In", &["test-value"])]);
        c.pending("{name: p}", &spec);
        assert_eq!(label(&c.decide(), "p", "test-key").as_deref(), Some("test-value"), "{spec}");
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:579
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1023
#[test]
fn exists_on_a_nodepool_defined_key_schedules() {
    let mut c = pool_requiring(&[expr("test-key", "In", &["test-value"])]);
    c.pending("{name: p}", &requiring(&[expr("test-key", "Exists", &[])]));
    assert!(c.decide().scheduled("p"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:568
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1012
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:591
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1035
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:603
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1047
#[test]
fn requirements_excluding_the_nodepool_value_do_not_schedule() {
    for req in [
        expr("test-key", "NotIn", &["test-value"]),
        expr("test-key", "DoesNotExist", &[]),
        expr("test-key", "In", &["another-value"]),
    ] {
        let mut c = pool_requiring(&[expr("test-key", "In", &["test-value"])]);
        c.pending("{name: p}", &requiring(std::slice::from_ref(&req)));
        not_scheduled(&c.decide(), "p", &req);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:626
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1070
#[test]
fn pods_agreeing_on_a_custom_value_share_a_node() {
    let mut c = pool_requiring(&[expr("test-key", "In", &["test-value", "another-value"])]);
    c.pending("{name: a}", &requiring(&[expr("test-key", "In", &["test-value"])]));
    c.pending("{name: b}", &requiring(&[expr("test-key", "NotIn", &["another-value"])]));
    let d = c.decide();
    assert_eq!(label(&d, "a", "test-key").as_deref(), Some("test-value"));
    assert_eq!(label(&d, "b", "test-key").as_deref(), Some("test-value"));
    assert!(same_node(&d, "a", "b"), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:646
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1090
#[test]
fn pods_disagreeing_on_a_custom_value_get_separate_nodes() {
    let mut c = pool_requiring(&[expr("test-key", "In", &["test-value", "another-value"])]);
    c.pending("{name: a}", &requiring(&[expr("test-key", "In", &["test-value"])]));
    c.pending("{name: b}", &requiring(&[expr("test-key", "In", &["another-value"])]));
    let d = c.decide();
    assert_eq!(label(&d, "a", "test-key").as_deref(), Some("test-value"));
    assert_eq!(label(&d, "b", "test-key").as_deref(), Some("another-value"));
    assert!(!same_node(&d, "a", "b"), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:666
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1111
#[test]
fn exists_does_not_widen_an_unknown_zone_requirement() {
    let mut c = cluster("");
    c.pending("{name: p}", &requiring(&[expr(ZONE, "In", &["non-existent-zone"]), expr(ZONE, "Exists", &[])]));
    not_scheduled(&c.decide(), "p", "");
}

// ----- Preferential Fallback -----

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1128
#[test]
fn the_last_required_term_is_never_relaxed() {
    let mut c = pool_requiring(&[expr(ZONE, "In", &["test-zone-1"]), expr(TYPE, "In", &["default-instance-type"])]);
    c.pending("{name: p}", &requiring(&[expr(ZONE, "In", &["invalid"])]));
    not_scheduled(&c.decide(), "p", "");
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1144
#[test]
fn required_terms_are_tried_in_order_until_one_fits() {
    let terms: Vec<String> = ["invalid", "invalid", "test-zone-1", "test-zone-2"]
        .iter()
        .map(|z| format!("{{matchExpressions: [{}]}}", expr(ZONE, "In", &[z])))
        .collect();
    let mut c = cluster("");
    c.pending(
        "{name: p}",
        &format!(
            "  affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{}]}}}}}}\n",
            terms.join(", ")
        ),
    );
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-1"));
}

/// Pod spec lines with weighted preferred node terms, one expression each.
fn preferring(terms: &[(i32, String)]) -> String {
    let terms: Vec<String> =
        terms.iter().map(|(w, e)| format!("{{weight: {w}, preference: {{matchExpressions: [{e}]}}}}")).collect();
    format!(
        "  affinity: {{nodeAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{}]}}}}\n",
        terms.join(", ")
    )
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1168
#[test]
fn every_unsatisfiable_preference_is_relaxed() {
    let mut c = cluster("");
    c.pending("{name: p}", &preferring(&[(1, expr(ZONE, "In", &["invalid"])), (1, expr(TYPE, "In", &["invalid"]))]));
    assert!(c.decide().scheduled("p"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1187
#[test]
fn relaxation_falls_back_to_the_next_heaviest_preference() {
    let mut c = pool_requiring(&[expr(ZONE, "In", &["test-zone-1", "test-zone-2"])]);
    c.pending(
        "{name: p}",
        &preferring(&[
            (100, expr(TYPE, "In", &["test-zone-3"])),
            (50, expr(ZONE, "In", &["test-zone-2"])),
            (1, expr(ZONE, "In", &["test-zone-1"])),
        ]),
    );
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-2"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1214
#[test]
fn a_preference_conflicting_with_the_requirement_gives_way() {
    let mut c = cluster("");
    c.pending(
        "{name: p}",
        &format!(
            "  affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{}]}}]}}, preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 1, preference: {{matchExpressions: [{}]}}}}]}}}}\n",
            expr(ZONE, "In", &["test-zone-3"]),
            expr(ZONE, "NotIn", &["test-zone-3"])
        ),
    );
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-3"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1235
#[test]
fn a_self_contradicting_preference_gives_way() {
    let mut c = cluster("");
    c.pending(
        "{name: p}",
        &constraints(&[], &[], &[expr(ZONE, "In", &["invalid"]), expr(ZONE, "NotIn", &["invalid"])]),
    );
    assert!(c.decide().scheduled("p"));
}

// ----- Instance Type Compatibility -----

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1248
#[test]
fn requests_beyond_every_instance_type_do_not_schedule() {
    let mut c = cluster("");
    c.pending("{name: p}", &requesting("cpu: \"512\""));
    not_scheduled(&c.decide(), "p", "");
}

/// Two pods with the node selectors `selectors` (one each), under a NodePool allowing both
/// architectures, land on two different new nodes.
fn assert_split(selectors: [(&str, &str); 2]) {
    let mut c = pool_requiring(&[expr(ARCH, "In", &["arm64", "amd64"])]);
    c.pending("{name: a}", &selecting(&[selectors[0]]));
    c.pending("{name: b}", &selecting(&[selectors[1]]));
    let d = c.decide();
    assert!(d.nodeclaim_of("a").is_some() && d.nodeclaim_of("b").is_some(), "{}", d.plan.render(&d.snap));
    assert!(!same_node(&d, "a", "b"), "{selectors:?}: {}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1259
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1342
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1392
#[test]
fn pods_selecting_different_arch_os_or_zone_get_separate_nodes() {
    assert_split([(ARCH, "amd64"), (ARCH, "arm64")]);
    assert_split([(OS, "linux"), (OS, "windows")]);
    assert_split([(ZONE, "test-zone-1"), (ZONE, "test-zone-2")]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1367
#[test]
fn the_deprecated_instance_type_label_means_the_stable_one() {
    assert_split([("beta.kubernetes.io/instance-type", "small-instance-type"), (TYPE, "default-instance-type")]);
    // Selecting by the alias picks that type.
    let mut c = pool_requiring(&[]);
    c.pending("{name: p}", &selecting(&[("beta.kubernetes.io/instance-type", "small-instance-type")]));
    let d = c.decide();
    assert_eq!(d.node_labels("p").get(TYPE).map(String::as_str), Some("small-instance-type"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1284
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1305
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1327
#[test]
fn only_arm_types_fitting_an_amd64_nodepool_do_not_schedule() {
    for spec in [
        requiring(&[expr(TYPE, "In", &["arm-instance-type"])]),
        requiring(&[expr(OS, "In", &["ios"])]),
        // A CPU limit without a request: the API server defaults the request to the limit.
        "  containers: [{name: app, image: app, resources: {limits: {cpu: \"14\"}, requests: {cpu: \"14\"}}}]\n".into(),
    ] {
        let mut c = pool_requiring(&[expr(ARCH, "In", &["amd64"])]);
        c.pending("{name: p}", &spec);
        not_scheduled(&c.decide(), "p", &spec);
    }
}

/// `fake.InstanceTypes(5)` with 25 `karpenter.sh/super-great-gpu` on the first type and 25
/// `karpenter.sh/even-better-gpu` on the second.
fn split_gpu_types() -> Vec<Fake> {
    let mut types = fake_its(5);
    types[0].extended.push(("karpenter.sh/super-great-gpu".into(), 25));
    types[1].extended.push(("karpenter.sh/even-better-gpu".into(), 25));
    types
}

/// Pod spec lines for a container limiting (and so, defaulted, requesting) `limits`.
fn limiting(limits: &str) -> String {
    format!("  containers: [{{name: app, image: app, resources: {{limits: {{{limits}}}, requests: {{{limits}}}}}}}]\n")
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1417
#[test]
fn resources_no_single_type_has_together_split_pods_across_nodes() {
    let mut c = fake_its_cluster(split_gpu_types());
    c.pending("{name: a}", &limiting("karpenter.sh/super-great-gpu: \"1\""));
    c.pending("{name: b}", &limiting("karpenter.sh/even-better-gpu: \"1\""));
    let d = c.decide();
    assert!(d.nodeclaim_of("a").is_some() && d.nodeclaim_of("b").is_some(), "{}", d.plan.render(&d.snap));
    assert!(!same_node(&d, "a", "b"), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1446
#[test]
fn a_pod_needing_resources_no_single_type_has_does_not_schedule() {
    let mut c = fake_its_cluster(split_gpu_types());
    c.pending("{name: p}", &limiting("karpenter.sh/super-great-gpu: \"1\", karpenter.sh/even-better-gpu: \"1\""));
    not_scheduled(&c.decide(), "p", "");
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1465
#[test]
fn provider_size_label_selects_the_instance_type() {
    let mut c = fake_its_cluster(fake_its(5));
    c.pending("{name: large}", &selecting(&[(SIZE, "large")]));
    c.pending("{name: small}", &selecting(&[(SIZE, "small")]));
    let d = c.decide();
    assert_eq!(label(&d, "large", TYPE).as_deref(), Some("fake-it-4"));
    assert_eq!(label(&d, "small", TYPE).as_deref(), Some("fake-it-0"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1478
#[test]
fn provider_size_label_contradicting_the_instance_type_does_not_schedule() {
    let mut c = fake_its_cluster(fake_its(5));
    c.pending("{name: a}", &selecting(&[(SIZE, "large"), (TYPE, "fake-it-0")]));
    c.pending("{name: b}", &selecting(&[(SIZE, "small"), (TYPE, "fake-it-4")]));
    let d = c.decide();
    not_scheduled(&d, "a", "");
    not_scheduled(&d, "b", "");
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1495
#[test]
fn requiring_an_optional_label_picks_the_type_that_has_it() {
    let mut c = fake_its_cluster(fake_its(5));
    c.pending("{name: p}", &requiring(&[expr(EXOTIC, "Exists", &[])]));
    let d = c.decide();
    assert!(label(&d, "p", EXOTIC).is_some(), "{:?}", d.node_labels("p"));
    assert_eq!(label(&d, "p", TYPE).as_deref(), Some("fake-it-4"));
}

// ----- Binpacking -----

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1522
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1534
#[test]
fn small_pods_land_on_the_smallest_type() {
    for memory in ["100M", "2000M"] {
        let mut c = cluster("");
        c.pending("{name: p}", &requesting(&format!("memory: {memory}")));
        assert_eq!(label(&c.decide(), "p", TYPE).as_deref(), Some("small-instance-type"), "{memory}");
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1546
#[test]
fn runtime_class_overhead_counts_toward_the_pods_size() {
    // The RuntimeClass admission plugin copies the class's 2 CPU pod overhead into the pod.
    let mut c = cluster("");
    c.pending(
        "{name: p}",
        &format!("  runtimeClassName: my-runtime-class\n  overhead: {{cpu: \"2\"}}\n{}", requesting("cpu: \"1\"")),
    );
    assert_eq!(label(&c.decide(), "p", TYPE).as_deref(), Some("default-instance-type"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1574
#[test]
fn several_small_pods_share_one_smallest_node() {
    let mut c = cluster("");
    c.pending_n(5, "p", "", &requesting("memory: 10M"));
    let d = c.decide();
    assert_eq!(d.pods_per_nodeclaim(), vec![5], "{}", d.plan.render(&d.snap));
    for i in 0..5 {
        assert_eq!(label(&d, &format!("p-{i}"), TYPE).as_deref(), Some("small-instance-type"));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:537
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:981
#[test]
fn does_not_exist_on_an_undefined_key_schedules_without_the_label() {
    let mut c = cluster("");
    c.pending("{name: p}", &requiring(&[expr("test-key", "DoesNotExist", &[])]));
    let d = c.decide();
    assert!(d.nodeclaim_of("p").is_some(), "{}", d.plan.render(&d.snap));
    assert_eq!(label(&d, "p", "test-key"), None);
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1507
#[test]
fn does_not_exist_on_an_optional_label_launches_a_type_without_it() {
    let mut c = fake_its_cluster(fake_its(5));
    c.pending("{name: p}", &requiring(&[expr(EXOTIC, "DoesNotExist", &[])]));
    let d = c.decide();
    assert!(d.nodeclaim_of("p").is_some(), "{}", d.plan.render(&d.snap));
    assert_eq!(label(&d, "p", EXOTIC), None);
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:502
#[test]
fn a_nodepool_that_is_not_ready_schedules_nothing() {
    let mut c = cluster("");
    c.objects.nodepools[0].status = Some(
        serde_yaml::from_str(
            "conditions: [{type: Ready, status: \"False\", reason: NodePoolNotReady, message: Node Pool Not Ready, lastTransitionTime: \"2026-11-30T00:00:00Z\"}]",
        )
        .unwrap(),
    );
    c.pending("{name: p}", "");
    let d = c.decide();
    not_scheduled(&d, "p", "NodePool Ready=False");
    assert!(d.unschedulable("p").is_some_and(|r| r.contains("not Ready")), "{:?}", d.unschedulable("p"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:453
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:467
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:904
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:918
#[test]
fn requirements_on_kubernetes_domain_labels_are_valid_and_label_the_node() {
    for prefix in ["", "subdomain."] {
        let reqs: Vec<String> = ["kubernetes.io", "k8s.io"]
            .iter()
            .map(|d| expr(&format!("{prefix}{d}/test"), "In", &["test-value"]))
            .collect();
        let c = pool_requiring(&reqs);
        let problems = tenon_api::validation::validate_nodepool(&c.objects.nodepools[0]);
        assert!(
            problems.iter().all(|p| p.severity != tenon_api::validation::Severity::Error),
            "Karpenter accepts the NodePool: {problems:?}"
        );
        for domain in ["kubernetes.io", "k8s.io"] {
            let mut c = pool_requiring(&reqs);
            c.pending("{name: p}", "");
            let labels = c.decide().created("p").metadata.labels.unwrap();
            assert_eq!(labels.get(&format!("{prefix}{domain}/test")).map(String::as_str), Some("test-value"));
        }
    }
}
