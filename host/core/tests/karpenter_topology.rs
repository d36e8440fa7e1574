//! (Long: Karpenter's topology suite, case by case.)
//! Karpenter's `pkg/controllers/provisioning/scheduling/topology_test.go`, ported: each test
//! names the cases it accounts for (tests/conformance/karpenter.tsv). The suite's NodePool
//! allows any capacity type; the catalog is Karpenter's fake one. Cases that provision in
//! several rounds launch each round's NodeClaims as Nodes (the fake cloud provider's labels)
//! and bind their pods before deciding again, as Karpenter's `ExpectProvisioned` does.

use crate::support;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::{BTreeMap, BTreeSet};
use support::karpenter::*;

const ZONE: &str = "topology.kubernetes.io/zone";
const HOST: &str = "kubernetes.io/hostname";
const CT: &str = "karpenter.sh/capacity-type";
const ARCH: &str = "kubernetes.io/arch";
/// The suite's pod labels (`test: test`), as a YAML map body.
const TEST: &str = "test: test";
/// The suite's NodePool requirement: any capacity type.
const ANY_CT: &str = "{key: karpenter.sh/capacity-type, operator: Exists}";

// ---- set-up -------------------------------------------------------------------------------

/// A NodePool spec (indented for `Cluster::nodepool`) with `requirements` (flow YAML items),
/// template `labels` (map body), and any further template-spec `extra` lines (e.g. taints).
fn pool_spec(requirements: &[&str], labels: &str, extra: &[&str]) -> String {
    let mut s = String::from("  template:\n");
    if !labels.is_empty() {
        s += &format!("    metadata:\n      labels: {{{labels}}}\n");
    }
    s += &format!("    spec:\n      requirements: [{}]\n", requirements.join(", "));
    for e in extra {
        s += &format!("      {e}\n");
    }
    s
}

/// Replaces (or adds) NodePool `name`.
fn set_pool(c: &mut Cluster, name: &str, spec: &str) {
    c.objects.nodepools.retain(|np| np.metadata.name.as_deref() != Some(name));
    c.nodepool(name, spec);
}

/// The `Topology` suite's cluster: the fake catalog and NodePool `default` allowing any
/// capacity type.
fn cluster() -> Cluster {
    let mut c = Cluster::new(default_types());
    c.nodepool("default", &pool_spec(&[ANY_CT], "", &[]));
    c
}

/// A pod spec (the YAML under `spec:`) from `key: value` lines.
fn spec(lines: &[String]) -> String {
    lines.iter().map(|l| format!("  {l}\n")).collect()
}

/// A topology spread constraint: `selector` is a matchLabels body (`None`: no selector).
fn tsc(key: &str, max_skew: i32, anyway: bool, selector: Option<&str>) -> String {
    let when = if anyway { "ScheduleAnyway" } else { "DoNotSchedule" };
    let sel = selector.map(|s| format!(", labelSelector: {{matchLabels: {{{s}}}}}")).unwrap_or_default();
    format!("{{topologyKey: {key}, maxSkew: {max_skew}, whenUnsatisfiable: {when}{sel}}}")
}

/// The suite's usual constraint: `key`, DoNotSchedule, selecting `test: test`.
fn spread(key: &str, max_skew: i32) -> String {
    tsc(key, max_skew, false, Some(TEST))
}

fn tscs(cs: &[String]) -> String {
    format!("topologySpreadConstraints: [{}]", cs.join(", "))
}

/// A container requesting `cpu`.
fn cpu(q: &str) -> String {
    format!("containers: [{{name: c, image: pause, resources: {{requests: {{cpu: \"{q}\"}}}}}}]")
}

fn node_selector(body: &str) -> String {
    format!("nodeSelector: {{{body}}}")
}

/// A node selector requirement.
fn expr(key: &str, op: &str, values: &[&str]) -> String {
    format!("{{key: {key}, operator: {op}, values: [{}]}}", values.join(", "))
}

/// A pod affinity term on `key` selecting labels `selector` (a matchLabels body), with any
/// `extra` fields (e.g. `namespaces: [x]`).
fn term(key: &str, selector: &str, extra: &str) -> String {
    let extra = if extra.is_empty() { String::new() } else { format!(", {extra}") };
    format!("{{topologyKey: {key}, labelSelector: {{matchLabels: {{{selector}}}}}{extra}}}")
}

fn weighted(term: &str) -> String {
    format!("{{weight: 50, podAffinityTerm: {term}}}")
}

/// `affinity:` from its parts (`nodeAffinity: …`, `podAffinity: …`, `podAntiAffinity: …`).
fn affinity(parts: &[String]) -> String {
    format!("affinity: {{{}}}", parts.join(", "))
}

fn node_required(exprs: &[String]) -> String {
    format!(
        "nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{}]}}]}}}}",
        exprs.join(", ")
    )
}

fn pod_affinity(required: &[String], preferred: &[String]) -> String {
    pod_terms("podAffinity", required, preferred)
}

fn pod_anti_affinity(required: &[String], preferred: &[String]) -> String {
    pod_terms("podAntiAffinity", required, preferred)
}

fn pod_terms(kind: &str, required: &[String], preferred: &[String]) -> String {
    let mut parts = Vec::new();
    if !required.is_empty() {
        parts.push(format!("requiredDuringSchedulingIgnoredDuringExecution: [{}]", required.join(", ")));
    }
    if !preferred.is_empty() {
        let w: Vec<String> = preferred.iter().map(|t| weighted(t)).collect();
        parts.push(format!("preferredDuringSchedulingIgnoredDuringExecution: [{}]", w.join(", ")));
    }
    format!("{kind}: {{{}}}", parts.join(", "))
}

fn tolerations(ts: &[&str]) -> String {
    format!("tolerations: [{}]", ts.join(", "))
}

/// `n` pending pods named `{prefix}-{i}` with `labels` and `lines` as their spec.
fn pods(c: &mut Cluster, n: usize, prefix: &str, labels: &str, lines: &[String]) {
    c.pending_n(n, prefix, labels, &spec(lines));
}

/// A test node (`test.Node`): Ready, with `labels`, `taints` (flow YAML) and `cpu` allocatable.
fn test_node(c: &mut Cluster, name: &str, labels: &str, taints: &str, cpu: Option<&str>) {
    let alloc = cpu.map(|q| format!("allocatable: {{cpu: {q}}}, capacity: {{cpu: {q}}}, ")).unwrap_or_default();
    c.node(&format!(
        "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}, labels: {{{labels}}}}}\nspec: {{taints: [{taints}]}}\nstatus: {{{alloc}conditions: [{{type: Ready, status: \"True\"}}]}}\n"
    ));
}

// ---- rounds -------------------------------------------------------------------------------

/// Launches the decision's NodeClaims as Nodes (labelled as Karpenter's fake cloud provider
/// labels them, tainted with their NodePool's taints, allocatable of the launched type) and
/// binds every pod the decision placed, on new or existing capacity.
fn launch(c: &mut Cluster, d: &Decision) {
    let mut binds: Vec<(usize, String)> = Vec::new();
    for nc in &d.plan.nodeclaims {
        let name = format!("launched-{}", c.objects.nodes.len());
        let mut labels = launched_labels(&d.snap, nc);
        labels.insert(HOST.into(), name.clone());
        let it = d.snap.nodepools[nc.nodepool]
            .instance_types
            .iter()
            .find(|it| Some(&it.name) == labels.get("node.kubernetes.io/instance-type"))
            .expect("the launched type");
        let a = it.allocatable();
        let mut res: BTreeMap<String, Quantity> = BTreeMap::from([
            ("cpu".into(), Quantity(format!("{}m", a.cpu))),
            ("memory".into(), Quantity(a.memory.to_string())),
            ("pods".into(), Quantity(a.pods.to_string())),
        ]);
        for (k, v) in &a.extended {
            res.insert(k.clone(), Quantity(v.to_string()));
        }
        let pool = c
            .objects
            .nodepools
            .iter()
            .find(|np| np.metadata.name.as_deref() == Some(nc.nodepool_name.as_str()))
            .expect("the NodePool");
        let taints: Vec<core::Taint> = pool
            .spec
            .template
            .spec
            .taints
            .iter()
            .map(|t| core::Taint {
                key: t.key.clone(),
                value: t.value.clone(),
                effect: t.effect.clone(),
                time_added: None,
            })
            .collect();
        c.objects.nodes.push(core::Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.clone()),
                labels: Some(labels),
                ..Default::default()
            },
            spec: Some(core::NodeSpec { taints: Some(taints), ..Default::default() }),
            status: Some(core::NodeStatus {
                allocatable: Some(res.clone()),
                capacity: Some(res),
                conditions: Some(vec![core::NodeCondition {
                    type_: "Ready".into(),
                    status: "True".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        });
        binds.extend(nc.pods.iter().map(|&p| (p, name.clone())));
    }
    binds.extend(d.plan.nominations.iter().map(|n| (n.pod, n.node.clone())));
    for (p, node) in binds {
        let (ns, name) = (&d.snap.pods[p].namespace, &d.snap.pods[p].name);
        let pod = c
            .objects
            .pods
            .iter_mut()
            .find(|o| o.metadata.namespace.as_ref() == Some(ns) && o.metadata.name.as_ref() == Some(name))
            .expect("the placed pod");
        pod.spec.as_mut().expect("spec").node_name = Some(node);
        pod.status = Some(tenon_core::cached_pod::PodStatus { phase: Some("Running".into()), ..Default::default() });
    }
}

/// Decides, then launches what was decided (`ExpectProvisioned`).
fn provision(c: &mut Cluster) -> Decision {
    let d = c.decide();
    launch(c, &d);
    d
}

// ---- expectations -------------------------------------------------------------------------

/// Where each placed or bound pod is, by pod name: (node or NodeClaim identity, its labels).
fn placements(d: &Decision) -> BTreeMap<String, (String, BTreeMap<String, String>)> {
    let mut out = BTreeMap::new();
    let node_labels = |n: &str| d.snap.nodes.iter().find(|x| x.name == n).map(|x| x.labels.clone()).unwrap_or_default();
    for (i, p) in d.snap.pods.iter().enumerate() {
        if p.deleted_at.is_some() {
            continue;
        }
        let at = if let Some(n) = &p.node_name {
            Some((n.clone(), node_labels(n)))
        } else if let Some(n) = d.plan.nominations.iter().find(|n| n.pod == i) {
            Some((n.node.clone(), node_labels(&n.node)))
        } else {
            d.plan
                .nodeclaims
                .iter()
                .find(|nc| nc.pods.contains(&i))
                .map(|nc| (nc.hostname.clone(), launched_labels(&d.snap, nc)))
        };
        if let Some(at) = at {
            out.insert(p.name.clone(), at);
        }
    }
    out
}

/// `ExpectSkew`: pods of namespace `default` matching `selector` (`k=v` pairs; empty: all)
/// that are placed, counted per domain of `key` (hostname: per node), sorted.
fn skew(d: &Decision, key: &str, selector: &[(&str, &str)]) -> Vec<usize> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let places = placements(d);
    for p in
        d.snap.pods.iter().filter(|p| selector.iter().all(|(k, v)| p.labels.get(*k).map(String::as_str) == Some(*v)))
    {
        let Some((node, labels)) = places.get(&p.name).filter(|_| p.namespace == "default") else { continue };
        let domain = if key == HOST { Some(node.clone()) } else { labels.get(key).cloned() };
        if let Some(dom) = domain {
            *counts.entry(dom).or_default() += 1;
        }
    }
    let mut v: Vec<usize> = counts.into_values().collect();
    v.sort();
    v
}

const SEL: &[(&str, &str)] = &[("test", "test")];

#[track_caller]
fn expect_skew(d: &Decision, key: &str, selector: &[(&str, &str)], want: &[usize]) {
    let mut want = want.to_vec();
    want.sort();
    assert_eq!(skew(d, key, selector), want, "skew on {key}\n{}", d.plan.render(&d.snap));
}

/// `ExpectMaxSkew`: the largest count minus the smallest over domains holding pods.
fn max_skew(d: &Decision, key: &str) -> usize {
    let s = skew(d, key, SEL);
    s.last().copied().unwrap_or(0) - s.first().copied().unwrap_or(0)
}

/// The node or NodeClaim a pod is on (`ExpectScheduled`), and its labels.
#[track_caller]
fn on(d: &Decision, pod: &str) -> (String, BTreeMap<String, String>) {
    placements(d).remove(pod).unwrap_or_else(|| panic!("{pod} is not scheduled\n{}", d.plan.render(&d.snap)))
}

#[track_caller]
fn not_scheduled(d: &Decision, pod: &str) {
    assert!(!d.scheduled(pod), "{pod} should not be scheduled\n{}", d.plan.render(&d.snap));
}

/// The distinct places the named pods are on; each must be scheduled.
#[track_caller]
fn hosts(d: &Decision, names: &[String]) -> BTreeSet<String> {
    names.iter().map(|n| on(d, n).0).collect()
}

fn names(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}

// ---- the cases ----------------------------------------------------------------------------

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:61
#[test]
fn spread_on_a_key_no_node_has_leaves_the_pod_pending_but_not_others() {
    let mut c = cluster();
    c.pending("{name: spread, labels: {test: test}}", &spec(&[tscs(&[tsc("unknown", 1, false, Some(TEST))])]));
    c.pending("{name: plain}", "");
    let d = c.decide();
    not_scheduled(&d, "spread");
    assert!(d.scheduled("plain"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:95
#[test]
fn spread_without_a_selector_counts_nothing_and_does_not_spread() {
    let mut c = cluster();
    pods(&mut c, 2, "p", TEST, &[tscs(&[tsc(ZONE, 1, false, None)])]);
    let d = c.decide();
    expect_skew(&d, ZONE, &[], &[2]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:111
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:124
#[test]
fn zonal_spread_balances_pods_by_match_labels_or_expressions() {
    let by_expression = tsc(ZONE, 1, false, None).replace(
        "whenUnsatisfiable: DoNotSchedule",
        "whenUnsatisfiable: DoNotSchedule, labelSelector: {matchExpressions: [{key: test, operator: In, values: [test]}]}",
    );
    for constraint in [spread(ZONE, 1), by_expression] {
        let mut c = cluster();
        pods(&mut c, 4, "p", TEST, &[tscs(std::slice::from_ref(&constraint))]);
        expect_skew(&c.decide(), ZONE, SEL, &[1, 1, 2]);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:145
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:160
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:176
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:191
#[test]
fn zonal_spread_only_counts_zones_the_nodepool_can_launch_in() {
    let zones3 = expr(ZONE, "In", &["test-zone-1", "test-zone-2", "test-zone-3"]);
    let zones2 = expr(ZONE, "In", &["test-zone-1", "test-zone-2"]);
    let cases: [(Vec<&str>, &str, &[usize]); 4] = [
        (vec![&zones3], "", &[1, 1, 2]),
        (vec![&zones2], "", &[2, 2]),
        (vec![ANY_CT], "topology.kubernetes.io/zone: test-zone-1", &[4]),
        (vec![&zones2], "topology.kubernetes.io/zone: test-zone-1", &[4]),
    ];
    for (reqs, labels, want) in cases {
        let mut c = Cluster::new(default_types());
        c.nodepool("default", &pool_spec(&reqs, labels, &[]));
        pods(&mut c, 4, "p", TEST, &[tscs(&[spread(ZONE, 1)])]);
        expect_skew(&c.decide(), ZONE, SEL, want);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:207
#[test]
fn zonal_spread_balances_across_nodepools_pinned_to_different_zones() {
    let mut c = Cluster::new(default_types());
    c.nodepool(
        "default",
        &pool_spec(
            &[&expr(ZONE, "In", &["test-zone-1", "test-zone-2"])],
            "topology.kubernetes.io/zone: test-zone-1",
            &[],
        ),
    );
    c.nodepool("second", &pool_spec(&[], "topology.kubernetes.io/zone: test-zone-2", &[]));
    pods(&mut c, 4, "p", TEST, &[tscs(&[spread(ZONE, 1)])]);
    expect_skew(&c.decide(), ZONE, SEL, &[2, 2]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:235
#[test]
fn a_pod_in_a_zone_the_nodepool_no_longer_offers_still_bounds_the_skew() {
    let mut c = cluster();
    c.pending(
        "{name: first, labels: {test: test}}",
        &spec(&[cpu("1.1"), node_selector("topology.kubernetes.io/zone: test-zone-3")]),
    );
    let d = provision(&mut c);
    on(&d, "first");
    set_pool(&mut c, "default", &pool_spec(&[&expr(ZONE, "In", &["test-zone-1", "test-zone-2"])], "", &[]));
    pods(&mut c, 6, "p", TEST, &[cpu("1.1"), tscs(&[spread(ZONE, 1)])]);
    expect_skew(&c.decide(), ZONE, SEL, &[1, 2, 2]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:269
#[test]
fn a_non_minimum_zone_takes_pods_up_to_max_skew_when_it_is_the_only_one() {
    let mut c = Cluster::new(default_types());
    let constraint = [cpu("1.1"), tscs(&[spread(ZONE, 5)])];
    let rounds: [(&str, usize, &[usize]); 3] =
        [("test-zone-1", 1, &[1]), ("test-zone-2", 1, &[1, 1]), ("test-zone-3", 10, &[1, 1, 6])];
    for (i, (zone, n, want)) in rounds.into_iter().enumerate() {
        set_pool(&mut c, "default", &pool_spec(&[&expr(ZONE, "In", &[zone])], "", &[]));
        pods(&mut c, n, &format!("r{i}"), TEST, &constraint);
        let d = provision(&mut c);
        expect_skew(&d, ZONE, SEL, want);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:311
#[test]
fn pods_go_to_the_emptiest_zones_when_the_skew_is_already_violated() {
    let mut c = cluster();
    let lines = [cpu("1.1"), tscs(&[spread(ZONE, 1)])];
    pods(&mut c, 9, "a", TEST, &lines);
    let d = provision(&mut c);
    expect_skew(&d, ZONE, SEL, &[3, 3, 3]);
    // Only the pods in test-zone-1 stay.
    let keep: BTreeSet<String> = placements(&d)
        .into_iter()
        .filter(|(_, (_, l))| l.get(ZONE).map(String::as_str) == Some("test-zone-1"))
        .map(|(p, _)| p)
        .collect();
    c.objects.pods.retain(|p| keep.contains(p.metadata.name.as_deref().unwrap_or("")));
    expect_skew(&c.decide(), ZONE, SEL, &[3]);
    pods(&mut c, 3, "b", TEST, &lines);
    expect_skew(&provision(&mut c), ZONE, SEL, &[3, 1, 2]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:350
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:383
#[test]
fn do_not_schedule_holds_max_skew_against_a_zone_the_nodepool_left() {
    for first_has_spread in [true, false] {
        let mut c = Cluster::new(default_types());
        set_pool(&mut c, "default", &pool_spec(&[&expr(ZONE, "In", &["test-zone-1"])], "", &[]));
        let constraint = tscs(&[spread(ZONE, 1)]);
        let first = if first_has_spread { vec![cpu("1.1"), constraint.clone()] } else { vec![cpu("1.1")] };
        pods(&mut c, 1, "first", TEST, &first);
        let d = provision(&mut c);
        if first_has_spread {
            expect_skew(&d, ZONE, SEL, &[1]);
        }
        set_pool(&mut c, "default", &pool_spec(&[&expr(ZONE, "In", &["test-zone-2", "test-zone-3"])], "", &[]));
        pods(&mut c, 10, "p", TEST, &[cpu("1.1"), constraint]);
        expect_skew(&provision(&mut c), ZONE, SEL, &[1, 2, 2]);
    }
}

/// The count-filtering set-up of the Zonal and CapacityType contexts: nodes `first` and
/// `second` with `first_label`/`second_label`, `third` without; pods that must not count
/// (unlabelled, pending, on `third`, another namespace, terminating, Failed, Succeeded); and
/// pods that must (two on `first`, one on `second`); then two pending pods spread on `key`.
fn counting_cluster(key: &str, first_label: &str, second_label: &str) -> Cluster {
    let mut c = cluster();
    test_node(&mut c, "first", first_label, "", None);
    test_node(&mut c, "second", second_label, "", None);
    test_node(&mut c, "third", "", "", None);
    c.namespace("{apiVersion: v1, kind: Namespace, metadata: {name: wrong-namespace}}");
    c.bound("{name: unlabelled}", "first", "");
    c.pending("{name: not-tried, labels: {test: test}}", "");
    c.objects.pods.last_mut().expect("pod").status =
        Some(tenon_core::cached_pod::PodStatus { phase: Some("Pending".into()), ..Default::default() });
    c.bound("{name: domainless, labels: {test: test}}", "third", "");
    c.bound("{name: elsewhere, namespace: wrong-namespace, labels: {test: test}}", "first", "");
    c.pending("{name: terminating, labels: {test: test}, deletionTimestamp: \"2026-01-01T00:00:00Z\"}", "");
    for phase in ["Failed", "Succeeded"] {
        c.bound(&format!("{{name: {}, labels: {{test: test}}}}", phase.to_lowercase()), "first", "");
        c.objects.pods.last_mut().expect("pod").status =
            Some(tenon_core::cached_pod::PodStatus { phase: Some(phase.into()), ..Default::default() });
    }
    c.bound("{name: counted-1, labels: {test: test}}", "first", "");
    c.bound("{name: counted-2, labels: {test: test}}", "first", "");
    c.bound("{name: counted-3, labels: {test: test}}", "second", "");
    pods(&mut c, 2, "p", TEST, &[tscs(&[spread(key, 1)])]);
    c
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:415
#[test]
fn zonal_spread_counts_only_running_selected_same_namespace_pods_on_zoned_nodes() {
    let c =
        counting_cluster(ZONE, "topology.kubernetes.io/zone: test-zone-1", "topology.kubernetes.io/zone: test-zone-2");
    expect_skew(&c.decide(), ZONE, SEL, &[2, 2, 1]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:750
#[test]
fn capacity_type_spread_counts_only_running_selected_same_namespace_pods_on_labelled_nodes() {
    let c = counting_cluster(CT, "karpenter.sh/capacity-type: spot", "karpenter.sh/capacity-type: on-demand");
    expect_skew(&c.decide(), CT, SEL, &[2, 3]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:448
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:783
#[test]
fn an_unconstrained_pod_lands_in_one_zone_and_one_capacity_type() {
    let mut c = cluster();
    c.pending("{name: p}", "");
    let d = c.decide();
    expect_skew(&d, ZONE, &[], &[1]);
    expect_skew(&d, CT, &[], &[1]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:460
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:795
#[test]
fn pods_not_selected_by_their_own_hostname_spread_pack_onto_one_node() {
    let mut c = cluster();
    pods(&mut c, 5, "p", "", &[tscs(&[spread(HOST, 1)])]);
    let d = c.decide();
    assert_eq!(hosts(&d, &names("p", 5)).len(), 1, "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:485
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:505
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:525
#[test]
fn min_domains_treats_missing_zones_as_empty() {
    let cases: [(&[&str], i32, usize, &[usize]); 3] = [
        (&["test-zone-1", "test-zone-2"], 3, 3, &[1, 1]),
        (&["test-zone-1", "test-zone-2", "test-zone-3"], 3, 11, &[4, 4, 3]),
        (&["test-zone-1", "test-zone-2", "test-zone-3"], 2, 11, &[4, 4, 3]),
    ];
    for (zones, min_domains, n, want) in cases {
        let mut c = Cluster::new(default_types());
        c.nodepool("default", &pool_spec(&[&expr(ZONE, "In", zones)], "", &[]));
        let constraint = spread(ZONE, 1).replace("maxSkew: 1", &format!("maxSkew: 1, minDomains: {min_domains}"));
        pods(&mut c, n, "p", TEST, &[tscs(&[constraint])]);
        expect_skew(&c.decide(), ZONE, SEL, want);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:548
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:561
#[test]
fn hostname_spread_puts_up_to_max_skew_pods_on_a_node() {
    for (max_skew, want) in [(1, &[1usize, 1, 1, 1][..]), (4, &[4][..])] {
        let mut c = cluster();
        pods(&mut c, 4, "p", TEST, &[tscs(&[spread(HOST, max_skew)])]);
        expect_skew(&c.decide(), HOST, SEL, want);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:574
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:610
#[test]
fn hostname_spreads_of_two_deployments_share_nodes_unless_their_arch_differs() {
    for (archs, nodes) in [([None, None], 2), ([Some("amd64"), Some("arm64")], 4)] {
        let mut c = cluster();
        for (app, arch) in ["app1", "app2"].into_iter().zip(archs) {
            let mut lines = vec![tscs(&[tsc(HOST, 1, false, Some(&format!("app: {app}")))])];
            if let Some(a) = arch {
                lines.push(affinity(&[node_required(&[expr(ARCH, "In", &[a])])]));
            }
            pods(&mut c, 2, app, &format!("app: {app}"), &lines);
        }
        let d = c.decide();
        let all: Vec<String> = names("app1", 2).into_iter().chain(names("app2", 2)).collect();
        hosts(&d, &all);
        assert_eq!(d.plan.nodeclaims.len(), nodes, "{}", d.plan.render(&d.snap));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:656
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:669
#[test]
fn capacity_type_spread_balances_pods() {
    for reqs in [ANY_CT.to_string(), expr(CT, "In", &["spot", "on-demand"])] {
        let mut c = Cluster::new(default_types());
        c.nodepool("default", &pool_spec(&[&reqs], "", &[]));
        pods(&mut c, 4, "p", TEST, &[tscs(&[spread(CT, 1)])]);
        expect_skew(&c.decide(), CT, SEL, &[2, 2]);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:684
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:719
#[test]
fn capacity_type_spread_holds_max_skew_unless_schedule_anyway() {
    for (anyway, want) in [(false, [1usize, 2]), (true, [1, 5])] {
        let mut c = Cluster::new(default_types());
        let lines = [cpu("1.1"), tscs(&[tsc(CT, 1, anyway, Some(TEST))])];
        set_pool(&mut c, "default", &pool_spec(&[&expr(CT, "In", &["spot"])], "", &[]));
        pods(&mut c, 1, "first", TEST, &lines);
        expect_skew(&provision(&mut c), CT, SEL, &[1]);
        set_pool(&mut c, "default", &pool_spec(&[&expr(CT, "In", &["on-demand"])], "", &[]));
        pods(&mut c, 5, "p", TEST, &lines);
        expect_skew(&provision(&mut c), CT, SEL, &want);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:818
#[test]
fn capacity_type_spread_ignores_pods_on_nodes_outside_the_pods_node_affinity() {
    let mut c = cluster();
    let first = [affinity(&[node_required(&[expr(ZONE, "In", &["test-zone-1"]), expr(CT, "In", &["on-demand"])])])];
    pods(&mut c, 1, "first", TEST, &first);
    on(&provision(&mut c), "first-0");
    let lines = [
        affinity(&[node_required(&[expr(ZONE, "In", &["test-zone-2"]), expr(CT, "In", &["spot"])])]),
        tscs(&[spread(CT, 1)]),
    ];
    pods(&mut c, 5, "p", TEST, &lines);
    expect_skew(&provision(&mut c), CT, SEL, &[1, 5]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:855
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:898
#[test]
fn an_existing_node_in_a_domain_the_nodepool_left_bounds_the_skew() {
    for (key, first_value, pool_value) in [(CT, "on-demand", "spot"), (ARCH, "amd64", "arm64")] {
        let mut c = cluster();
        let first = [
            node_selector("node.kubernetes.io/instance-type: single-pod-instance-type"),
            affinity(&[node_required(&[expr(key, "In", &[first_value])])]),
        ];
        pods(&mut c, 1, "first", TEST, &first);
        on(&provision(&mut c), "first-0");
        set_pool(&mut c, "default", &pool_spec(&[&expr(key, "In", &[pool_value])], "", &[]));
        pods(&mut c, 5, "p", TEST, &[cpu("2"), tscs(&[spread(key, 1)])]);
        expect_skew(&provision(&mut c), key, SEL, &[1, 2]);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:944
#[test]
fn zonal_and_hostname_spreads_hold_together_over_rounds() {
    let mut c = cluster();
    let lines = [tscs(&[spread(ZONE, 1), spread(HOST, 3)])];
    let rounds: [(usize, &[usize]); 4] = [(2, &[1, 1]), (3, &[2, 2, 1]), (5, &[4, 3, 3]), (11, &[7, 7, 7])];
    for (i, (n, want)) in rounds.into_iter().enumerate() {
        pods(&mut c, n, &format!("r{i}"), TEST, &lines);
        let d = provision(&mut c);
        expect_skew(&d, ZONE, SEL, want);
        assert!(skew(&d, HOST, SEL).iter().all(|&n| n <= 3), "{:?}", skew(&d, HOST, SEL));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:984
#[test]
fn spread_on_a_nodepool_requirement_key_balances_across_nodepools() {
    const KEY: &str = "capacity.spread.4-1";
    let mut c = Cluster::new(default_types());
    c.nodepool("spot", &pool_spec(&[&expr(CT, "In", &["spot"]), &expr(KEY, "In", &["2", "3", "4", "5"])], "", &[]));
    c.nodepool("on-demand", &pool_spec(&[&expr(CT, "In", &["on-demand"]), &expr(KEY, "In", &["1"])], "", &[]));
    pods(&mut c, 20, "p", TEST, &[tscs(&[spread(KEY, 1)])]);
    let d = c.decide();
    hosts(&d, &names("p", 20));
    expect_skew(&d, KEY, SEL, &[4, 4, 4, 4, 4]);
    expect_skew(&d, CT, SEL, &[4, 16]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1052
#[test]
fn a_zone_only_a_nodepool_without_capacity_offers_still_bounds_the_zonal_skew() {
    let mut c = Cluster::new(default_types());
    c.nodepool("default", &pool_spec(&[&expr(ZONE, "In", &["test-zone-1", "test-zone-2"])], "", &[]));
    c.nodepool(
        "disabled",
        &format!("  limits: {{cpu: \"0\"}}\n{}", pool_spec(&[&expr(ZONE, "In", &["test-zone-3"])], "", &[])),
    );
    pods(&mut c, 10, "p", TEST, &[tscs(&[spread(ZONE, 1), tsc(HOST, 1, true, Some(TEST))])]);
    let d = c.decide();
    expect_skew(&d, ZONE, SEL, &[1, 1]);
    expect_skew(&d, HOST, SEL, &[1, 1]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1093
#[test]
fn capacity_type_and_hostname_spreads_hold_together_over_rounds() {
    let mut c = cluster();
    let lines = [tscs(&[spread(CT, 1), spread(HOST, 3)])];
    let rounds: [(usize, &[usize]); 4] = [(2, &[1, 1]), (3, &[3, 2]), (5, &[5, 5]), (11, &[11, 10])];
    for (i, (n, want)) in rounds.into_iter().enumerate() {
        pods(&mut c, n, &format!("r{i}"), TEST, &lines);
        let d = provision(&mut c);
        expect_skew(&d, CT, SEL, want);
        assert!(skew(&d, HOST, SEL).iter().all(|&n| n <= 3), "{:?}", skew(&d, HOST, SEL));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1142
#[test]
fn match_label_keys_split_a_spread_by_the_pods_own_label_values() {
    let mut c = cluster();
    let constraint = spread(HOST, 1).replace("maxSkew: 1", "maxSkew: 1, matchLabelKeys: [test-label]");
    pods(&mut c, 2, "a", "test: test, test-label: value-a", &[tscs(std::slice::from_ref(&constraint))]);
    pods(&mut c, 2, "b", "test: test, test-label: value-b", &[tscs(&[constraint])]);
    expect_skew(&c.decide(), HOST, SEL, &[2, 2]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1171
#[test]
fn match_label_keys_the_pods_lack_are_ignored() {
    let mut c = cluster();
    let constraint = spread(HOST, 1).replace("maxSkew: 1", "maxSkew: 1, matchLabelKeys: [test-label]");
    pods(&mut c, 4, "p", TEST, &[tscs(&[constraint])]);
    expect_skew(&c.decide(), HOST, SEL, &[1, 1, 1, 1]);
}

const SPREAD_LABEL: &str = "fake-label";
const NO_SCHEDULE: &str = "{key: taintname, value: taintvalue, effect: NoSchedule}";

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1199
#[test]
fn tainted_nodes_are_domains_when_node_taints_policy_is_ignore() {
    let mut c = Cluster::new(default_types());
    c.nodepool("default", &pool_spec(&[ANY_CT], "fake-label: baz", &[]));
    test_node(&mut c, "foo", "fake-label: foo", NO_SCHEDULE, Some("100m"));
    test_node(&mut c, "bar", "fake-label: bar", NO_SCHEDULE, Some("100m"));
    let constraint = spread(SPREAD_LABEL, 1).replace("maxSkew: 1", "maxSkew: 1, nodeTaintsPolicy: Ignore");
    pods(&mut c, 5, "p", TEST, &[cpu("1"), tscs(&[constraint])]);
    expect_skew(&c.decide(), SPREAD_LABEL, SEL, &[1]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1339
#[test]
fn an_untolerated_nodepools_domain_counts_when_node_taints_policy_is_ignore() {
    let mut c = Cluster::new(default_types());
    c.nodepool("default", &pool_spec(&[ANY_CT, &expr(SPREAD_LABEL, "In", &["foo"])], "", &[]));
    c.nodepool(
        "tainted",
        &pool_spec(
            &[ANY_CT, &expr(SPREAD_LABEL, "In", &["bar"])],
            "",
            &["taints: [{key: taint-key, value: taint-value, effect: NoSchedule}]"],
        ),
    );
    let constraint = spread(SPREAD_LABEL, 1).replace("maxSkew: 1", "maxSkew: 1, nodeTaintsPolicy: Ignore");
    pods(&mut c, 2, "p", TEST, &[tscs(&[constraint])]);
    expect_skew(&c.decide(), SPREAD_LABEL, SEL, &[1]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1532
#[test]
fn nodes_outside_the_pods_node_selector_are_domains_when_node_affinity_policy_is_ignore() {
    let mut c = Cluster::new(default_types());
    c.nodepool("default", &pool_spec(&[ANY_CT], "fake-label: baz, selector: value", &[]));
    test_node(&mut c, "foo", "fake-label: foo, selector: mismatch", "", Some("100m"));
    test_node(&mut c, "bar", "fake-label: bar, selector: mismatch", "", Some("100m"));
    let constraint = spread(SPREAD_LABEL, 1).replace("maxSkew: 1", "maxSkew: 1, nodeAffinityPolicy: Ignore");
    pods(&mut c, 5, "p", TEST, &[cpu("1"), node_selector("selector: value"), tscs(&[constraint])]);
    expect_skew(&c.decide(), SPREAD_LABEL, SEL, &[1]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1665
#[test]
fn capacity_type_and_zonal_spreads_hold_together_over_rounds() {
    let mut c = cluster();
    let lines = [tscs(&[spread(CT, 1), spread(ZONE, 1)])];
    for (i, (n, ct_max, zone_max)) in [(2, 1, 1), (3, 3, 2), (3, 5, 4), (11, 11, 7)].into_iter().enumerate() {
        pods(&mut c, n, &format!("r{i}"), TEST, &lines);
        let d = provision(&mut c);
        let (ct, zone) = (skew(&d, CT, SEL), skew(&d, ZONE, SEL));
        assert!(ct.iter().all(|&x| x <= ct_max) && zone.iter().all(|&x| x <= zone_max), "round {i}: {ct:?} {zone:?}");
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1705
#[test]
fn capacity_type_zonal_and_hostname_spreads_hold_together_over_rounds() {
    let mut c = Cluster::new(assorted());
    c.nodepool("default", &pool_spec(&[ANY_CT], "", &[]));
    let lines = [tscs(&[spread(CT, 1), spread(ZONE, 2), spread(HOST, 3)])];
    for i in 1..15 {
        pods(&mut c, i, &format!("r{i}"), TEST, &lines);
        let d = provision(&mut c);
        hosts(&d, &names(&format!("r{i}"), i));
        assert!(max_skew(&d, CT) <= 1, "round {i}: {:?}", skew(&d, CT, SEL));
        assert!(max_skew(&d, ZONE) <= 2, "round {i}: {:?}", skew(&d, ZONE, SEL));
        assert!(max_skew(&d, HOST) <= 3, "round {i}: {:?}", skew(&d, HOST, SEL));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1743
#[test]
fn node_selectors_limit_each_pods_zonal_domains() {
    let mut c = cluster();
    let constraint = tscs(&[spread(ZONE, 1)]);
    pods(&mut c, 5, "a", TEST, &[constraint.clone(), node_selector("topology.kubernetes.io/zone: test-zone-1")]);
    pods(&mut c, 10, "b", TEST, &[constraint, node_selector("topology.kubernetes.io/zone: test-zone-2")]);
    expect_skew(&c.decide(), ZONE, SEL, &[5, 10]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1769
#[test]
fn required_node_affinity_limits_zonal_domains() {
    let mut c = cluster();
    let lines =
        [tscs(&[spread(ZONE, 1)]), affinity(&[node_required(&[expr(ZONE, "In", &["test-zone-1", "test-zone-2"])])])];
    pods(&mut c, 10, "p", TEST, &lines);
    expect_skew(&c.decide(), ZONE, SEL, &[5, 5]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1791
#[test]
fn zonal_domains_follow_each_rounds_node_affinity() {
    let mut c = cluster();
    let constraint = tscs(&[spread(ZONE, 1)]);
    let zones = |z: &[&str]| affinity(&[node_required(&[expr(ZONE, "In", z)])]);
    pods(&mut c, 6, "a", TEST, &[constraint.clone(), zones(&["test-zone-1", "test-zone-2"])]);
    expect_skew(&provision(&mut c), ZONE, SEL, &[3, 3]);
    set_pool(
        &mut c,
        "default",
        &pool_spec(&[&expr(ZONE, "In", &["test-zone-1", "test-zone-2", "test-zone-3"])], "", &[]),
    );
    pods(&mut c, 1, "b", TEST, &[constraint.clone(), zones(&["test-zone-2", "test-zone-3"])]);
    expect_skew(&provision(&mut c), ZONE, SEL, &[3, 3, 1]);
    pods(&mut c, 5, "c", TEST, &[constraint]);
    expect_skew(&provision(&mut c), ZONE, SEL, &[4, 4, 4]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1860
#[test]
fn node_selectors_limit_each_pods_capacity_type_domains() {
    let mut c = cluster();
    let constraint = tscs(&[tsc(CT, 1, true, Some(TEST))]);
    pods(&mut c, 5, "a", TEST, &[constraint.clone(), node_selector("karpenter.sh/capacity-type: spot")]);
    pods(&mut c, 5, "b", TEST, &[constraint, node_selector("karpenter.sh/capacity-type: on-demand")]);
    expect_skew(&c.decide(), CT, SEL, &[5, 5]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1884
#[test]
fn capacity_type_domains_follow_each_rounds_node_affinity() {
    let mut c = cluster();
    let constraint = tscs(&[spread(CT, 1)]);
    let cts = |v: &[&str]| affinity(&[node_required(&[expr(CT, "In", v)])]);
    pods(&mut c, 3, "a", TEST, &[constraint.clone(), cts(&["spot"])]);
    expect_skew(&provision(&mut c), CT, SEL, &[3]);
    pods(&mut c, 1, "b", TEST, &[constraint.clone(), cts(&["on-demand", "spot"])]);
    expect_skew(&provision(&mut c), CT, SEL, &[3, 1]);
    pods(&mut c, 5, "c", TEST, &[constraint]);
    expect_skew(&provision(&mut c), CT, SEL, &[5, 4]);
}

const S2: &str = "security: s2";

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1929
#[test]
fn empty_pod_affinity_and_anti_affinity_lists_do_not_block_scheduling() {
    let mut c = cluster();
    c.pending(
        "{name: p}",
        &spec(&["affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: []}, podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: []}}".into()]),
    );
    on(&c.decide(), "p");
}

/// Ten pods spread one per node on hostname (the suite's usual filler).
fn spread_filler(c: &mut Cluster) {
    pods(c, 10, "filler", TEST, &[tscs(&[spread(HOST, 1)])]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1939
#[test]
fn hostname_pod_affinity_puts_the_follower_on_its_targets_node() {
    let mut c = cluster();
    spread_filler(&mut c);
    c.pending("{name: target, labels: {security: s2}}", "");
    c.pending("{name: follower}", &spec(&[affinity(&[pod_affinity(&[term(HOST, S2, "")], &[])])]));
    let d = c.decide();
    assert_eq!(on(&d, "target").0, on(&d, "follower").0);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:1973
#[test]
fn arch_pod_affinity_shares_the_arch_but_not_the_node_under_hostname_spread() {
    let mut c = cluster();
    let constraint = tscs(&[tsc(HOST, 1, false, Some(S2))]);
    c.pending(
        "{name: target, labels: {security: s2}}",
        &spec(&[constraint.clone(), cpu("2"), node_selector("kubernetes.io/arch: arm64")]),
    );
    c.pending(
        "{name: follower, labels: {security: s2}}",
        &spec(&[constraint, cpu("1"), affinity(&[pod_affinity(&[term(ARCH, S2, "")], &[])])]),
    );
    let d = c.decide();
    let (target, follower) = (on(&d, "target"), on(&d, "follower"));
    assert_eq!(target.1.get(ARCH), follower.1.get(ARCH));
    assert_ne!(target.0, follower.0);
}

fn self_affine(key: &str) -> String {
    affinity(&[pod_affinity(&[term(key, S2, "")], &[])])
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2016
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2126
#[test]
fn self_affine_pods_share_one_node_by_hostname_or_zone() {
    for key in [HOST, ZONE] {
        let mut c = cluster();
        pods(&mut c, 3, "p", S2, &[self_affine(key)]);
        let d = c.decide();
        assert_eq!(hosts(&d, &names("p", 3)).len(), 1, "{key}\n{}", d.plan.render(&d.snap));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2040
#[test]
fn self_hostname_affinity_fills_only_the_first_node() {
    let mut c = cluster();
    pods(&mut c, 10, "a", S2, &[self_affine(HOST)]);
    let d = provision(&mut c);
    let places = placements(&d);
    let placed: Vec<&String> = names("a", 10).iter().filter_map(|n| places.get(n).map(|p| &p.0)).collect();
    assert_eq!(placed.len(), 5, "{}", d.plan.render(&d.snap));
    assert_eq!(placed.iter().collect::<BTreeSet<_>>().len(), 1);
    pods(&mut c, 10, "b", S2, &[self_affine(HOST)]);
    let d = provision(&mut c);
    for p in names("b", 10) {
        not_scheduled(&d, &p);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2082
#[test]
fn self_hostname_affinity_counts_pods_outside_the_pods_own_zones() {
    let mut c = cluster();
    c.pending(
        "{name: first, labels: {security: s2}}",
        &spec(&[node_selector("topology.kubernetes.io/zone: test-zone-1"), self_affine(HOST)]),
    );
    provision(&mut c);
    pods(
        &mut c,
        10,
        "p",
        S2,
        &[affinity(&[
            node_required(&[expr(ZONE, "In", &["test-zone-2", "test-zone-3"])]),
            pod_affinity(&[term(HOST, S2, "")], &[]),
        ])],
    );
    let d = provision(&mut c);
    for p in names("p", 10) {
        not_scheduled(&d, &p);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2150
#[test]
fn self_zone_affinity_respects_the_pods_zone_requirement() {
    let mut c = cluster();
    let lines =
        [affinity(&[node_required(&[expr(ZONE, "In", &["test-zone-3"])]), pod_affinity(&[term(ZONE, S2, "")], &[])])];
    pods(&mut c, 3, "p", S2, &lines);
    let d = c.decide();
    assert_eq!(hosts(&d, &names("p", 3)).len(), 1);
    for p in names("p", 3) {
        assert_eq!(on(&d, &p).1.get(ZONE).map(String::as_str), Some("test-zone-3"));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2181
#[test]
fn self_zone_affine_pods_with_disjoint_zones_get_a_node_each() {
    let mut c = cluster();
    for (name, zone) in [("a", "test-zone-2"), ("b", "test-zone-3")] {
        let lines = [affinity(&[
            node_required(&[expr(ZONE, "In", &[zone])]),
            pod_affinity(&[term(ZONE, "security: s1", "")], &[]),
        ])];
        c.pending(&format!("{{name: {name}, labels: {{security: s1}}}}"), &spec(&lines));
    }
    let d = c.decide();
    let (a, b) = (on(&d, "a"), on(&d, "b"));
    assert_eq!(a.1.get(ZONE).map(String::as_str), Some("test-zone-2"));
    assert_eq!(b.1.get(ZONE).map(String::as_str), Some("test-zone-3"));
    assert_ne!(a.0, b.0);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2234
#[test]
fn a_preferred_pod_affinity_to_no_pod_is_relaxed() {
    let mut c = cluster();
    spread_filler(&mut c);
    c.pending("{name: p}", &spec(&[affinity(&[pod_affinity(&[], &[term(HOST, S2, "")])])]));
    on(&c.decide(), "p");
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2267
#[test]
fn a_preferred_zonal_anti_affinity_is_relaxed_when_every_zone_is_taken() {
    let mut c = cluster();
    pods(&mut c, 10, "anti", "", &[affinity(&[pod_anti_affinity(&[], &[term(ZONE, TEST, "")])])]);
    pods(&mut c, 3, "spread", TEST, &[tscs(&[spread(ZONE, 1)])]);
    let d = c.decide();
    hosts(&d, &names("anti", 10));
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2300
#[test]
fn hostname_anti_affinity_separates_pods_round_after_round() {
    let mut c = cluster();
    for i in 0..10 {
        c.pending(&format!("{{name: anti-{i}}}"), &spec(&[affinity(&[pod_anti_affinity(&[term(HOST, S2, "")], &[])])]));
        c.pending(&format!("{{name: s2-{i}, labels: {{security: s2}}}}"), "");
        let d = provision(&mut c);
        assert_ne!(on(&d, &format!("s2-{i}")).0, on(&d, &format!("anti-{i}")).0, "round {i}");
    }
}

/// Three 2-CPU pods pinned one per zone with `lines`, named `zone-{1,2,3}`.
fn one_per_zone(c: &mut Cluster, labels: &str, lines: &[String]) {
    for z in 1..=3 {
        let mut l = vec![cpu("2"), node_selector(&format!("topology.kubernetes.io/zone: test-zone-{z}"))];
        l.extend(lines.iter().cloned());
        c.pending(&format!("{{name: zone-{z}, labels: {{{labels}}}}}"), &spec(&l));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2322
#[test]
fn zonal_anti_affinity_blocks_a_pod_when_every_zone_has_a_selected_pod() {
    let mut c = cluster();
    one_per_zone(&mut c, S2, &[]);
    c.pending("{name: anti}", &spec(&[affinity(&[pod_anti_affinity(&[term(ZONE, S2, "")], &[])])]));
    let d = c.decide();
    for z in 1..=3 {
        on(&d, &format!("zone-{z}"));
    }
    not_scheduled(&d, "anti");
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2383
#[test]
fn arch_anti_affinity_puts_the_pods_on_different_archs() {
    let mut c = cluster();
    let constraint = tscs(&[tsc(HOST, 1, false, Some(S2))]);
    c.pending(
        "{name: target, labels: {security: s2}}",
        &spec(&[constraint.clone(), cpu("2"), node_selector("kubernetes.io/arch: arm64")]),
    );
    c.pending(
        "{name: anti, labels: {security: s2}}",
        &spec(&[constraint, cpu("1"), affinity(&[pod_anti_affinity(&[term(ARCH, S2, "")], &[])])]),
    );
    let d = c.decide();
    assert_ne!(on(&d, "target").1.get(ARCH), on(&d, "anti").1.get(ARCH));
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2426
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2466
#[test]
fn zonal_anti_affinity_of_placed_pods_repels_the_pods_it_selects_only_when_required() {
    for required in [false, true] {
        let mut c = cluster();
        let terms = [term(ZONE, S2, "")];
        let anti = if required { pod_anti_affinity(&terms, &[]) } else { pod_anti_affinity(&[], &terms) };
        one_per_zone(&mut c, "", &[affinity(&[anti])]);
        c.pending("{name: target, labels: {security: s2}}", "");
        let d = c.decide();
        for z in 1..=3 {
            on(&d, &format!("zone-{z}"));
        }
        assert_eq!(d.scheduled("target"), !required, "required: {required}\n{}", d.plan.render(&d.snap));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2533
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2583
#[test]
fn zonal_anti_affinity_of_running_pods_repels_the_pods_it_selects_only_when_required() {
    for required in [false, true] {
        let mut c = cluster();
        let terms = [term(ZONE, S2, "")];
        let anti = if required { pod_anti_affinity(&terms, &[]) } else { pod_anti_affinity(&[], &terms) };
        one_per_zone(&mut c, "", &[affinity(&[anti])]);
        let d = provision(&mut c);
        for z in 1..=3 {
            on(&d, &format!("zone-{z}"));
        }
        c.pending("{name: target, labels: {security: s2}}", "");
        let d = provision(&mut c);
        assert_eq!(d.scheduled("target"), !required, "required: {required}\n{}", d.plan.render(&d.snap));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2633
#[test]
fn a_preferred_pod_affinity_yields_to_a_required_hostname_spread() {
    let mut c = cluster();
    c.pending("{name: target, labels: {security: s2}}", "");
    pods(&mut c, 3, "p", TEST, &[tscs(&[spread(HOST, 1)]), affinity(&[pod_affinity(&[], &[term(HOST, S2, "")])])]);
    let d = c.decide();
    on(&d, "target");
    hosts(&d, &names("p", 3));
    expect_skew(&d, HOST, SEL, &[1, 1, 1]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2713
#[test]
fn zonal_affinity_to_a_pod_that_does_not_exist_schedules_nothing() {
    let mut c = cluster();
    pods(&mut c, 10, "p", "", &[affinity(&[pod_affinity(&[term(ZONE, S2, "")], &[])])]);
    let d = c.decide();
    for p in names("p", 10) {
        not_scheduled(&d, &p);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2730
#[test]
fn zonal_affinity_to_an_unpinned_target_waits_for_its_zone() {
    let mut c = cluster();
    pods(&mut c, 10, "p", "", &[affinity(&[pod_affinity(&[term(ZONE, S2, "")], &[])])]);
    c.pending("{name: target, labels: {security: s2}}", "");
    let d = provision(&mut c);
    for p in names("p", 10) {
        not_scheduled(&d, &p);
    }
    expect_skew(&d, ZONE, &[], &[1]);
    let d = provision(&mut c);
    hosts(&d, &names("p", 10));
    expect_skew(&d, ZONE, &[], &[11]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2763
#[test]
fn zonal_affinity_to_a_pinned_target_joins_its_zone() {
    let mut c = cluster();
    pods(&mut c, 10, "p", "", &[affinity(&[pod_affinity(&[term(ZONE, S2, "")], &[])])]);
    c.pending(
        "{name: target, labels: {security: s2}}",
        &spec(&[affinity(&[node_required(&[expr(ZONE, "In", &["test-zone-1"])])])]),
    );
    expect_skew(&c.decide(), ZONE, &[], &[11]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2792
#[test]
fn a_chain_of_hostname_affinities_schedules_in_any_creation_order() {
    let chain = [
        ("db", ""),
        ("web", "type: db, spread: spread"),
        ("cache", "type: web, spread: spread"),
        ("ui", "type: cache, spread: spread"),
    ];
    // Every creation order (Karpenter repeats the case for its map order).
    let mut orders: Vec<Vec<usize>> = vec![vec![]];
    for _ in 0..chain.len() {
        let mut next = Vec::new();
        for o in &orders {
            for i in (0..chain.len()).filter(|i| !o.contains(i)) {
                next.push([o.clone(), vec![i]].concat());
            }
        }
        orders = next;
    }
    assert_eq!(orders.len(), 24);
    for order in orders {
        let mut c = cluster();
        for &i in &order {
            let (name, target) = chain[i];
            let lines = if target.is_empty() {
                vec![]
            } else {
                vec![affinity(&[pod_affinity(&[term(HOST, target, "")], &[])])]
            };
            c.pending(&format!("{{name: {name}, labels: {{type: {name}, spread: spread}}}}"), &spec(&lines));
        }
        let d = c.decide();
        for (name, _) in chain {
            assert!(d.scheduled(name), "{name} in order {order:?}\n{}", d.plan.render(&d.snap));
        }
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2827
#[test]
fn a_hostname_affinity_to_a_missing_pod_is_unschedulable() {
    let mut c = cluster();
    c.pending(
        "{name: db, labels: {type: db, spread: spread}}",
        &spec(&[affinity(&[pod_affinity(&[term(HOST, "type: web, spread: spread", "")], &[])])]),
    );
    not_scheduled(&c.decide(), "db");
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2843
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2881
/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2920
#[test]
fn pod_affinity_selects_other_namespaces_only_when_the_term_names_them() {
    let cases = [
        ("other-ns-no-match", "{}", "", false),
        ("other-ns-list", "{}", "namespaces: [other-ns-list]", true),
        ("empty-ns-selector", "{foo: bar}", "namespaceSelector: {matchLabels: {}}", true),
    ];
    for (ns, ns_labels, extra, joins) in cases {
        let mut c = cluster();
        c.namespace(&format!("{{apiVersion: v1, kind: Namespace, metadata: {{name: {ns}, labels: {ns_labels}}}}}"));
        spread_filler(&mut c);
        c.pending(&format!("{{name: target, namespace: {ns}, labels: {{security: s2}}}}"), "");
        c.pending("{name: follower}", &spec(&[affinity(&[pod_affinity(&[term(HOST, S2, extra)], &[])])]));
        let d = c.decide();
        let target = on(&d, "target");
        if joins {
            assert_eq!(on(&d, "follower").0, target.0, "{ns}");
        } else {
            not_scheduled(&d, "follower");
        }
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3130
#[test]
fn without_default_constraints_owned_pods_share_a_node() {
    let mut c = cluster();
    for i in 0..3 {
        c.pending(
            &format!(
                "{{name: p-{i}, labels: {{test: test}}, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: rs-uid, controller: true}}]}}"
            ),
            "",
        );
    }
    let d = c.decide();
    assert_eq!(hosts(&d, &names("p", 3)).len(), 1);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3280
#[test]
fn nodes_carry_the_nodepools_taints() {
    let mut c = Cluster::new(default_types());
    c.nodepool("default", &pool_spec(&[ANY_CT], "", &["taints: [{key: test, value: bar, effect: NoSchedule}]"]));
    c.pending("{name: p}", &spec(&[tolerations(&["{effect: NoSchedule, operator: Exists}"])]));
    let taints = c.decide().created("p").spec.taints;
    assert!(
        taints.iter().any(|t| t.key == "test" && t.value.as_deref() == Some("bar") && t.effect == "NoSchedule"),
        "{taints:?}"
    );
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3325
#[test]
fn a_pods_tolerations_generate_no_taints() {
    let mut c = cluster();
    c.pending("{name: p}", &spec(&[tolerations(&["{key: test-key, operator: Exists, effect: NoExecute}"])]));
    let nc = c.decide().created("p");
    // The node registers with only the karpenter.sh/unregistered taint its bootstrap adds.
    assert!(nc.spec.taints.is_empty() && nc.spec.startup_taints.is_empty(), "{:?}", nc.spec);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3290
#[test]
fn only_pods_tolerating_the_nodepool_taint_schedule() {
    let mut c = Cluster::new(default_types());
    c.nodepool(
        "default",
        &pool_spec(&[ANY_CT], "", &["taints: [{key: test-key, value: test-value, effect: NoSchedule}]"]),
    );
    c.pending("{name: exists}", &spec(&[tolerations(&["{key: test-key, operator: Exists, effect: NoSchedule}"])]));
    c.pending(
        "{name: equal}",
        &spec(&[tolerations(&["{key: test-key, value: test-value, operator: Equal, effect: NoSchedule}"])]),
    );
    let d = provision(&mut c);
    on(&d, "exists");
    on(&d, "equal");
    c.pending("{name: none}", "");
    c.pending("{name: other-key}", &spec(&[tolerations(&["{key: invalid, operator: Exists}"])]));
    c.pending("{name: no-value}", &spec(&[tolerations(&["{key: test-key, operator: Equal, effect: NoSchedule}"])]));
    let d = provision(&mut c);
    for p in ["none", "other-key", "no-value"] {
        not_scheduled(&d, p);
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3317
#[test]
fn a_startup_taint_needs_no_toleration() {
    let mut c = Cluster::new(default_types());
    c.nodepool(
        "default",
        &pool_spec(
            &[ANY_CT],
            "",
            &["startupTaints: [{key: ignore-me, value: nothing-to-see-here, effect: NoSchedule}]"],
        ),
    );
    c.pending("{name: p}", "");
    on(&c.decide(), "p");
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2361
#[test]
fn zonal_anti_affinity_waits_while_the_avoided_pods_zone_is_undecided() {
    let mut c = cluster();
    c.pending("{name: avoided, labels: {security: s2}}", &spec(&[cpu("2")]));
    c.pending("{name: anti}", &spec(&[affinity(&[pod_anti_affinity(&[term(ZONE, S2, "")], &[])])]));
    let d = c.decide();
    on(&d, "avoided");
    // Its node may land in any zone: no zone is safe for the anti-affine pod yet.
    not_scheduled(&d, "anti");
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2668
#[test]
fn zonal_anti_affinity_among_replicas_settles_one_zone_per_round() {
    let mut c = cluster();
    let zone = ZONE.to_string();
    let mut want = Vec::new();
    for round in 0..4 {
        let anti = affinity(&[pod_anti_affinity(&[term(ZONE, S2, "")], &[])]);
        pods(&mut c, 3, &format!("r{round}"), S2, &[anti]);
        let d = provision(&mut c);
        // One pod per zone for three rounds; then every zone is taken and nothing schedules.
        if round < 3 {
            want.push(1);
        } else {
            for i in 0..3 {
                not_scheduled(&d, &format!("r{round}-{i}"));
            }
        }
        expect_skew(&d, &zone, &[("security", "s2")], &want);
        // Karpenter's suite deletes the pods left pending before the next round.
        c.objects.pods.retain(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some()));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:2502
#[test]
fn a_pod_avoided_by_an_undecided_zone_waits_a_round_then_takes_another_zone() {
    let mut c = cluster();
    c.pending("{name: anywhere}", &spec(&[cpu("2"), affinity(&[pod_anti_affinity(&[term(ZONE, S2, "")], &[])])]));
    c.pending("{name: avoided, labels: {security: s2}}", "");
    let d = provision(&mut c);
    let (_, first) = on(&d, "anywhere");
    not_scheduled(&d, "avoided");
    // The second round sees the first pod's node in its zone.
    let d = provision(&mut c);
    let (_, second) = on(&d, "avoided");
    assert_ne!(first.get(ZONE), second.get(ZONE), "the avoided pod shares the anti-affine pod's zone");
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3359
#[test]
fn a_volume_zone_narrows_placement_not_the_spread_domains() {
    let mut c = Cluster::new(default_types());
    c.nodepool(
        "default",
        &pool_spec(&["{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}"], "", &[]),
    );
    let constraint = format!(
        "topologySpreadConstraints: [{{topologyKey: {ZONE}, maxSkew: 1, minDomains: 3, whenUnsatisfiable: DoNotSchedule, labelSelector: {{matchLabels: {{app: test}}}}}}]"
    );
    pods(&mut c, 3, "initial", "app: test", std::slice::from_ref(&constraint));
    let d = provision(&mut c);
    expect_skew(&d, ZONE, &[("app", "test")], &[1, 1, 1]);
    c.volume("{metadata: {name: test-pv}, spec: {csi: {driver: test.driver, volumeHandle: h}, accessModes: [ReadWriteOnce], capacity: {storage: 1Gi}, nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]}]}}}}");
    c.claim("{metadata: {name: test-pvc, namespace: default, annotations: {pv.kubernetes.io/bind-completed: \"yes\"}}, spec: {volumeName: test-pv, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}");
    c.pending(
        "{name: with-pvc, labels: {app: test}}",
        &spec(&[
            constraint,
            "containers: [{name: c, image: i}]".into(),
            "volumes: [{name: v, persistentVolumeClaim: {claimName: test-pvc}}]".into(),
        ]),
    );
    let d = provision(&mut c);
    let (_, labels) = on(&d, "with-pvc");
    assert_eq!(labels.get(ZONE).map(String::as_str), Some("test-zone-1"));
    expect_skew(&d, ZONE, &[("app", "test")], &[1, 1, 2]);
}

// ---- DefaultConstraints (SCHEDULER_CONFIG) --------------------------------------------------

/// `SCHEDULER_CONFIG` with these default constraints (flow YAML items, no selector).
fn defaults(c: &mut Cluster, constraints: &[&str]) {
    c.scheduler_config(&format!("podTopologySpread: {{defaultConstraints: [{}]}}", constraints.join(", ")));
}

const ZONE_DEFAULT: &str = "{topologyKey: topology.kubernetes.io/zone, maxSkew: 1, whenUnsatisfiable: DoNotSchedule}";
const HOST_DEFAULT: &str = "{topologyKey: kubernetes.io/hostname, maxSkew: 1, whenUnsatisfiable: DoNotSchedule}";

/// The suite's cluster with ReplicaSet `rs` selecting `test: test`.
fn owned_cluster() -> Cluster {
    let mut c = cluster();
    c.replica_set("rs", "{matchLabels: {test: test}}");
    c
}

/// `n` pending pods named `{prefix}-{i}` labelled `labels`, controlled by ReplicaSet `rs`.
fn owned_pods(c: &mut Cluster, n: usize, prefix: &str, labels: &str, rs: &str, spec: &str) -> Vec<String> {
    (0..n)
        .map(|i| {
            let name = format!("{prefix}-{i}");
            c.pending(
                &format!(
                    "{{name: {name}, labels: {{{labels}}}, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: {rs}, uid: {rs}-uid, controller: true}}]}}"
                ),
                spec,
            );
            name
        })
        .collect()
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3009
#[test]
fn default_zonal_spread_applies_to_a_pod_without_constraints_of_its_own() {
    let mut c = owned_cluster();
    defaults(&mut c, &[ZONE_DEFAULT]);
    owned_pods(&mut c, 4, "p", TEST, "rs", "");
    let d = provision(&mut c);
    expect_skew(&d, ZONE, SEL, &[1, 1, 2]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3015
#[test]
fn default_hostname_spread_puts_each_pod_on_its_own_node() {
    let mut c = owned_cluster();
    defaults(&mut c, &[HOST_DEFAULT]);
    owned_pods(&mut c, 3, "p", TEST, "rs", "");
    let d = provision(&mut c);
    expect_skew(&d, HOST, SEL, &[1, 1, 1]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3027
#[test]
fn a_pods_own_constraints_replace_the_default() {
    let mut c = owned_cluster();
    defaults(&mut c, &[HOST_DEFAULT]);
    let pods = owned_pods(&mut c, 3, "p", TEST, "rs", &spec(&[tscs(&[spread(HOST, 3)])]));
    let d = provision(&mut c);
    assert_eq!(hosts(&d, &pods).len(), 1, "{}", d.plan.render(&d.snap));
}

/// The suite's NodePool limited to `zones`.
fn zones_only(c: &mut Cluster, zones: &str) {
    set_pool(
        c,
        "default",
        &pool_spec(&[ANY_CT, &format!("{{key: {ZONE}, operator: In, values: [{zones}]}}")], "", &[]),
    );
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3051
#[test]
fn min_domains_is_carried_through_a_default() {
    let mut c = owned_cluster();
    zones_only(&mut c, "test-zone-1, test-zone-2");
    defaults(
        &mut c,
        &["{topologyKey: topology.kubernetes.io/zone, maxSkew: 1, whenUnsatisfiable: DoNotSchedule, minDomains: 3}"],
    );
    owned_pods(&mut c, 3, "p", TEST, "rs", "");
    let d = provision(&mut c);
    expect_skew(&d, ZONE, SEL, &[1, 1]);
}

fn single_zone_min_domains(action: &str) -> Cluster {
    let mut c = owned_cluster();
    zones_only(&mut c, "test-zone-1");
    defaults(
        &mut c,
        &[&format!(
            "{{topologyKey: topology.kubernetes.io/zone, maxSkew: 1, whenUnsatisfiable: {action}, minDomains: 3}}"
        )],
    );
    c
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3086
#[test]
fn an_unsatisfiable_do_not_schedule_default_is_not_scheduled_past() {
    let mut c = single_zone_min_domains("DoNotSchedule");
    let pods = owned_pods(&mut c, 3, "p", TEST, "rs", "");
    let d = c.decide();
    let placed = pods.iter().filter(|p| d.scheduled(p)).count();
    assert_eq!(placed, 1, "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3103
#[test]
fn an_unsatisfiable_schedule_anyway_default_is_relaxed() {
    let mut c = single_zone_min_domains("ScheduleAnyway");
    let pods = owned_pods(&mut c, 3, "p", TEST, "rs", "");
    let d = c.decide();
    for p in &pods {
        assert!(d.scheduled(p), "{p}\n{}", d.plan.render(&d.snap));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3137
#[test]
fn a_pod_with_no_owner_and_no_service_gets_no_default() {
    let mut c = cluster();
    defaults(&mut c, &[HOST_DEFAULT]);
    c.pending_n(3, "p", TEST, "");
    let d = provision(&mut c);
    let pods: Vec<String> = (0..3).map(|i| format!("p-{i}")).collect();
    assert_eq!(hosts(&d, &pods).len(), 1, "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3146
#[test]
fn pods_already_running_count_through_the_deduced_selector() {
    let mut c = owned_cluster();
    zones_only(&mut c, "test-zone-1, test-zone-2");
    defaults(&mut c, &[ZONE_DEFAULT]);
    test_node(&mut c, "existing", &format!("{ZONE}: test-zone-1, {HOST}: existing"), "", Some("100"));
    for i in 0..2 {
        c.bound(
            &format!(
                "{{name: old-{i}, labels: {{{TEST}}}, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: rs-uid, controller: true}}]}}"
            ),
            "existing",
            "",
        );
    }
    let pods = owned_pods(&mut c, 2, "new", TEST, "rs", "");
    let d = provision(&mut c);
    for p in &pods {
        assert_eq!(on(&d, p).1.get(ZONE).map(String::as_str), Some("test-zone-2"), "{p}");
    }
    expect_skew(&d, ZONE, SEL, &[2, 2]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3188
#[test]
fn each_workload_spreads_on_its_own() {
    let mut c = owned_cluster();
    defaults(&mut c, &[ZONE_DEFAULT]);
    c.replica_set("other", "{matchLabels: {test: other}}");
    let mut pods = owned_pods(&mut c, 3, "a", TEST, "rs", "");
    pods.extend(owned_pods(&mut c, 3, "b", "test: other", "other", ""));
    let d = provision(&mut c);
    for p in &pods {
        on(&d, p);
    }
    expect_skew(&d, ZONE, SEL, &[1, 1, 1]);
    expect_skew(&d, ZONE, &[("test", "other")], &[1, 1, 1]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3213
#[test]
fn each_deployment_revision_spreads_on_its_own() {
    let mut c = cluster();
    defaults(&mut c, &[ZONE_DEFAULT]);
    c.replica_set("old", "{matchLabels: {test: test, pod-template-hash: old}}");
    c.replica_set("new", "{matchLabels: {test: test, pod-template-hash: new}}");
    let mut pods = owned_pods(&mut c, 3, "o", "test: test, pod-template-hash: old", "old", "");
    pods.extend(owned_pods(&mut c, 3, "n", "test: test, pod-template-hash: new", "new", ""));
    let d = provision(&mut c);
    for p in &pods {
        on(&d, p);
    }
    expect_skew(&d, ZONE, &[("pod-template-hash", "old")], &[1, 1, 1]);
    expect_skew(&d, ZONE, &[("pod-template-hash", "new")], &[1, 1, 1]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/topology_test.go:3244
#[test]
fn a_service_gives_a_selector_to_a_pod_with_no_supported_owner() {
    let mut c = cluster();
    defaults(&mut c, &[ZONE_DEFAULT]);
    c.service("web", &format!("{{{TEST}}}"));
    for i in 0..4 {
        c.pending(
            &format!(
                "{{name: p-{i}, labels: {{{TEST}}}, ownerReferences: [{{apiVersion: batch/v1, kind: Job, name: job, uid: job-uid, controller: true}}]}}"
            ),
            "",
        );
    }
    let d = provision(&mut c);
    expect_skew(&d, ZONE, SEL, &[1, 1, 2]);
}
