//! (Long: one part of Karpenter's consolidation suite, case by case.)
//! Karpenter's consolidation suite (`pkg/controllers/disruption/consolidation_test.go`), its
//! cases from line 2041 on (the last Replace cases, then Delete, TTL, Multi-NodeClaim, Node
//! Lifetime, Topology, Parallelization, Preferences and MinValuesPolicy), decided from
//! Kubernetes objects as the controller reads them (`convert::snapshot`, then `disrupt`) and
//! carried out through the orchestration's command state machine (`orchestration::command`):
//! decided, validated [`VALIDATION_MS`] later over the objects as they are then (Karpenter's
//! consolidation TTL), executed (its replacements launched and Initialized, Karpenter's
//! `ExpectMakeNewNodeClaimsReady`), then its candidates deleted with their pods
//! (`ExpectNodeClaimsCascadeDeletion`). What the controller shell does around these (taints,
//! API writes, Events) is said in comments.
//!
//! The suite's `BeforeEach` turns the SpotToSpotConsolidation feature gate on: every snapshot
//! here has `spot_to_spot`. Karpenter's `Consolidatable` condition, which its cases set True
//! by hand, is in Tenon the fact it records: consolidateAfter has passed since the NodeClaim's
//! last pod event (as in karpenter_emptiness.rs).

use crate::support;

use k8s_openapi::jiff::Timestamp;
use std::collections::BTreeMap;
use std::sync::Arc;
use support::karpenter::{Cluster, NOW, assorted, fake, launched_labels, offering_labels};
use tenon_api::NodeClaim;
use tenon_core::disruption::{DefaultPolicies, DisruptionDecision, DisruptionPlan, Method, disrupt, disrupt_after};
use tenon_core::model::ClusterSnapshot;
use tenon_core::orchestration::command::{Command, Replacement, Step, VALIDATION_MS, validate_keeping};
use tenon_core::plan::NewNodeClaim;

/// `leastExpensiveInstance` of Karpenter's suite (`fake.InstanceTypesAssorted()`), with its
/// one offering; `mostExpensiveInstance` and the spot ones likewise.
const LEAST_EXPENSIVE: &str = "1-cpu-1-mem-amd64-linux-test-zone-1-on-demand";
const LEAST_EXPENSIVE_SPOT: &str = "1-cpu-1-mem-amd64-linux-test-zone-1-spot";
const MOST_EXPENSIVE: &str = "64-cpu-128-mem-amd64-linux-test-zone-1-on-demand";
const MOST_EXPENSIVE_SPOT: &str = "64-cpu-128-mem-amd64-linux-test-zone-1-spot";
/// The NodeClaims' allocatable in the suite's `BeforeEach` (`nodeClaim`, `spotNodeClaim`).
const CPU_32: &str = "{cpu: \"32\"}";
/// The NodeClaims' allocatable in the Delete, TTL and Multi-NodeClaim contexts.
const CPU_32_PODS_100: &str = "{cpu: \"32\", pods: \"100\"}";
/// When the cases' nodes were initialized; decisions are made an hour later.
const INITIALIZED: i64 = NOW;
const HOUR: i64 = 3600;
const DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";

fn ts(secs: i64) -> String {
    Timestamp::from_second(secs).expect("a time").to_string()
}

/// Karpenter's suite catalog, decided an hour after the nodes were initialized.
fn suite() -> Cluster {
    let mut c = Cluster::new(assorted());
    c.now = INITIALIZED + HOUR;
    c
}

/// A NodePool `name` consolidating WhenEmptyOrUnderutilized after `after`, every node allowed
/// to go, with `requirements` (flow YAML) and `template` (more YAML under `template.spec`,
/// indented 6).
fn nodepool_with(c: &mut Cluster, name: &str, after: &str, requirements: &str, template: &str) {
    c.nodepool(
        name,
        &format!(
            "  template:\n    spec:\n      requirements: {requirements}\n{template}  disruption:\n    consolidateAfter: {after}\n    consolidationPolicy: WhenEmptyOrUnderutilized\n    budgets: [{{nodes: \"100%\"}}]\n"
        ),
    );
}

/// The suite's `nodePool` (`default`, consolidateAfter 0s).
fn default_nodepool(c: &mut Cluster) {
    nodepool_with(c, "default", "0s", "[]", "");
}

/// The labels Karpenter gives a NodeClaim launched as `it`'s offering (`ct`, `zone`).
fn offer(pool: &str, it: &str, ct: &str, zone: &str) -> BTreeMap<String, String> {
    offering_labels(pool, it, ct, zone)
}

/// A NodeClaim `name` with `labels` (its NodePool, instance type, capacity type and zone at
/// least) created and initialized at `at`, and its Node `name`, registered, initialized and
/// Ready (`test.NodeClaimAndNode` then `ExpectMakeNodesAndNodeClaimsInitializedAndStateUpdated`).
fn add_node(c: &mut Cluster, name: &str, labels: &BTreeMap<String, String>, allocatable: &str, at: i64) {
    add_node_as(c, name, labels, allocatable, at, true);
}

/// As [`add_node`]; not `initialized`: registered only (no Initialized condition, no
/// `karpenter.sh/initialized` label, not Ready), as a node Karpenter's cases leave
/// uninitialized.
fn add_node_as(
    c: &mut Cluster,
    name: &str,
    labels: &BTreeMap<String, String>,
    allocatable: &str,
    at: i64,
    initialized: bool,
) {
    c.launched_node(name, labels, allocatable, at, initialized);
}

/// A node `name` of NodePool `pool` launched as catalog type `it` (its first offering's
/// capacity type and zone), initialized at [`INITIALIZED`].
fn node(c: &mut Cluster, name: &str, pool: &str, it: &str, allocatable: &str) {
    c.initialized_node(name, pool, it, allocatable, INITIALIZED);
}

fn claim_mut<'a>(c: &'a mut Cluster, name: &str) -> &'a mut NodeClaim {
    c.objects.nodeclaims.iter_mut().find(|n| n.metadata.name.as_deref() == Some(name)).expect("NodeClaim")
}

fn node_mut<'a>(c: &'a mut Cluster, name: &str) -> &'a mut k8s_openapi::api::core::v1::Node {
    c.objects.nodes.iter_mut().find(|n| n.metadata.name.as_deref() == Some(name)).expect("Node")
}

/// Sets NodeClaim `name`'s last pod event `ago` seconds before now (Karpenter's pod events
/// controller records a pod bound or gone there).
fn pod_event(c: &mut Cluster, name: &str, ago: i64) {
    let t = serde_yaml::from_str(&format!("\"{}\"", ts(c.now - ago))).expect("time");
    claim_mut(c, name).status.as_mut().expect("status").last_pod_event_time = Some(t);
}

/// An owner reference to ReplicaSet `rs` (uid `rs-uid`), as Karpenter's cases set it.
const OWNED: &str = "ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: rs-uid, controller: true, blockOwnerDeletion: true}]";

/// A pod spec requesting `cpu`.
fn cpu(cpu: &str) -> String {
    format!("  containers: [{{name: app, image: app, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]\n")
}

/// The suite's ReplicaSet `rs` and pods `names` of it (labels `app: test`), bound to
/// `nodes` in turn, with `spec` (YAML under `spec:`).
fn rs_pods(c: &mut Cluster, placed: &[(&str, &str)], spec: &str) {
    if c.objects.replica_sets.is_empty() {
        c.replica_set("rs", "{matchLabels: {app: test}}");
    }
    for (name, node) in placed {
        c.bound(&format!("{{name: {name}, labels: {{app: test}}, {OWNED}}}"), node, spec);
    }
}

fn pod_mut<'a>(c: &'a mut Cluster, name: &str) -> &'a mut tenon_core::cached_pod::Pod {
    c.objects.pods.iter_mut().find(|p| p.metadata.name.as_deref() == Some(name)).expect("Pod")
}

fn annotate_pod(c: &mut Cluster, name: &str, key: &str, value: &str) {
    pod_mut(c, name).metadata.annotations.get_or_insert_default().insert(key.into(), value.into());
}

/// The snapshot the controller decides from now (the SpotToSpotConsolidation gate on).
fn snapshot(c: &Cluster) -> ClusterSnapshot {
    let mut s = c.snapshot();
    s.spot_to_spot = true;
    s.ignore_preferences = c.ignore_preferences;
    s
}

fn decide(c: &Cluster) -> (ClusterSnapshot, DisruptionDecision) {
    decide_after(c, None)
}

/// The round that goes on after a command of `failed` failed validation.
fn decide_after(c: &Cluster, failed: Option<Method>) -> (ClusterSnapshot, DisruptionDecision) {
    let snap = snapshot(c);
    let d = disrupt_after(&snap, &DefaultPolicies, failed);
    (snap, d)
}

fn nodeclaims(c: &Cluster) -> Vec<String> {
    let mut v: Vec<String> = c.objects.nodeclaims.iter().filter_map(|n| n.metadata.name.clone()).collect();
    v.sort();
    v
}

fn node_names(c: &Cluster) -> Vec<String> {
    let mut v: Vec<String> = c.objects.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect();
    v.sort();
    v
}

/// The names of the plan's candidates, sorted.
fn names(snap: &ClusterSnapshot, plan: &DisruptionPlan) -> Vec<String> {
    let mut v: Vec<String> = plan.candidates.iter().map(|&n| snap.nodes[n].name.clone()).collect();
    v.sort();
    v
}

/// Deletes nodes `gone`, their NodeClaims and the pods bound to them.
fn remove(c: &mut Cluster, gone: &[String]) {
    let on = |n: Option<&String>| n.is_some_and(|n| gone.contains(n));
    c.objects.nodeclaims.retain(|nc| !on(nc.status.as_ref().and_then(|s| s.node_name.as_ref())));
    c.objects.nodes.retain(|n| !on(n.metadata.name.as_ref()));
    c.objects.pods.retain(|p| !on(p.spec.as_ref().and_then(|s| s.node_name.as_ref())));
}

/// Launches planned NodeClaim `nc` as Karpenter's fake cloud provider does (its cheapest
/// option's cheapest compatible offering) as NodeClaim and Node `name`, and makes it
/// Initialized now (`ExpectMakeNewNodeClaimsReady`).
fn launch(c: &mut Cluster, snap: &ClusterSnapshot, nc: &NewNodeClaim, name: &str) {
    let mut labels = launched_labels(snap, nc);
    labels.retain(|k, _| !k.starts_with("kubernetes.io/"));
    let it = labels["node.kubernetes.io/instance-type"].clone();
    let catalog = c.catalog.clone();
    let t = catalog.iter().find(|t| t.name == it).expect("a catalog type");
    let a = t.allocatable();
    let allocatable = format!("{{cpu: \"{}m\", memory: \"{}\", pods: \"{}\"}}", a.cpu, a.memory, a.pods);
    add_node(c, name, &labels, &allocatable, c.now);
}

/// Carries `plan` out as the orchestration queue does: decided at the cluster's time; while
/// the command waits out its TTL, `meanwhile` changes the cluster; [`VALIDATION_MS`] after the
/// decision it is validated over the objects as they are then (Karpenter's real validator),
/// then executed: its replacements launched (`replacement-0`…) and Initialized, its
/// candidates deleted. Returns the replacements' names, or why validation abandoned it.
fn run(
    c: &mut Cluster,
    snap: &ClusterSnapshot,
    plan: &DisruptionPlan,
    meanwhile: impl FnOnce(&mut Cluster),
) -> Result<Vec<String>, String> {
    let candidates: Vec<(String, String)> = plan
        .candidates
        .iter()
        .map(|&n| (snap.nodes[n].claim.as_ref().expect("managed").nodeclaim.clone(), snap.nodes[n].name.clone()))
        .collect();
    let decided = c.now * 1000;
    let mut cmd: Command<()> = Command::new(
        plan.method,
        plan.reason.clone(),
        plan.savings_per_hour,
        candidates.clone(),
        vec![(); plan.replacements.len()],
        decided,
    )
    .expecting(plan.replacement_types(snap));
    // During the TTL the command waits and its candidates stay.
    assert_eq!(cmd.step(decided + VALIDATION_MS - 1, &[]), Step::Wait, "not validated before the TTL");
    let before = nodeclaims(c);
    assert!(candidates.iter().all(|(nc, _)| before.contains(nc)));
    meanwhile(c);
    c.now += VALIDATION_MS / 1000;
    let now = c.now * 1000;
    assert_eq!(cmd.step(now, &[]), Step::Validate);
    cmd.candidates =
        validate_keeping(&snapshot(c), &DefaultPolicies, plan.method, &candidates, &cmd.replacement_types)?;
    let created: Vec<String> = (0..plan.replacements.len()).map(|i| format!("replacement-{i}")).collect();
    for (nc, name) in plan.replacements.iter().zip(&created) {
        launch(c, snap, nc, name);
    }
    cmd.execute(created.clone(), now);
    assert_eq!(cmd.step(now, &vec![Replacement::Initialized; created.len()]), Step::Delete);
    remove(c, &cmd.candidates.iter().map(|(_, n)| n.clone()).collect::<Vec<_>>());
    Ok(created)
}

/// The round's one command, carried out with nothing changing during its TTL.
fn consolidate(c: &mut Cluster) -> (Vec<String>, DisruptionPlan) {
    let (snap, d) = decide(c);
    let plan = d.plan.unwrap_or_else(|| panic!("no command: {:?}", d.blocked));
    let candidates = names(&snap, &plan);
    run(c, &snap, &plan, |_| {}).unwrap_or_else(|why| panic!("abandoned at validation: {why}"));
    (candidates, plan)
}

/// A pod that is neither bound nor pending (applied, not yet tried by kube-scheduler):
/// Karpenter's cases apply such pods without binding them.
fn unbound(c: &mut Cluster, meta: &str) {
    let mut p: tenon_core::cached_pod::Pod =
        serde_yaml::from_str(&format!("metadata: {meta}\nspec: {{containers: [{{name: app, image: app}}]}}"))
            .expect("Pod YAML");
    p.metadata.namespace = Some("default".into());
    c.objects.pods.push(p);
}

/// Binds pod `name` (already applied, or new with `meta`) to `node` (`ExpectManualBinding`).
fn bind(c: &mut Cluster, name: &str, node: &str) {
    let p = pod_mut(c, name);
    p.spec.get_or_insert_default().node_name = Some(node.into());
    p.status = Some(serde_yaml::from_str("{phase: Running}").expect("status"));
}

/// Pod `name` created and started at `at` (`Status.StartTime`, which a duration-based
/// do-not-disrupt counts from).
fn started(c: &mut Cluster, name: &str, at: i64) {
    let t: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
        serde_yaml::from_str(&format!("\"{}\"", ts(at))).expect("time");
    let p = pod_mut(c, name);
    p.metadata.creation_timestamp = Some(t.clone());
    p.status.get_or_insert_default().start_time = Some(t);
}

/// `test.PodDisruptionBudget` selecting `app: test` in `namespace` with `maxUnavailable: 0`;
/// `observed`: with the status Karpenter's cases give it (no disruption allowed), else none
/// yet (the controller counts none allowed either).
fn blocking_pdb(c: &mut Cluster, namespace: &str, observed: bool) {
    let status = if observed {
        "status: {observedGeneration: 1, disruptionsAllowed: 0, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1}\n"
    } else {
        ""
    };
    c.pdb(&format!(
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: pdb, namespace: {namespace}}}\nspec: {{maxUnavailable: 0, selector: {{matchLabels: {{app: test}}}}}}\n{status}"
    ));
}

fn annotate_claim(c: &mut Cluster, name: &str, key: &str, value: &str) {
    claim_mut(c, name).metadata.annotations.get_or_insert_default().insert(key.into(), value.into());
}

/// Whether the round leaves every node where it is.
fn no_command(c: &Cluster) -> DisruptionDecision {
    let (_, d) = decide(c);
    assert!(d.plan.is_none(), "{:?}", d.plan);
    d
}

// ---------------------------------------------------------------------------------------
// Replace
// ---------------------------------------------------------------------------------------

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2041
#[test]
fn a_spot_node_is_replaced_when_the_blocking_pdb_is_in_another_namespace() {
    let mut c = suite();
    default_nodepool(&mut c);
    node(&mut c, "node", "default", MOST_EXPENSIVE_SPOT, CPU_32);
    rs_pods(&mut c, &[("p", "node")], "");
    c.namespace("metadata: {name: other}");
    blocking_pdb(&mut c, "other", true);
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a command");
    assert_eq!(plan.method, Method::SingleNodeConsolidation);
    assert_eq!(names(&snap, &plan), ["node"]);
    assert_eq!(plan.replacements.len(), 1, "a cheaper spot node");
    assert_eq!(launched_labels(&snap, &plan.replacements[0])["karpenter.sh/capacity-type"], "spot");
    let created = run(&mut c, &snap, &plan, |_| {}).expect("validated");
    assert_eq!(nodeclaims(&c), created);
    assert_eq!(node_names(&c), created);
    // The same PDB in the pod's own namespace blocks it.
    let mut same = suite();
    default_nodepool(&mut same);
    node(&mut same, "node", "default", MOST_EXPENSIVE_SPOT, CPU_32);
    rs_pods(&mut same, &[("p", "node")], "");
    blocking_pdb(&mut same, "default", true);
    no_command(&same);
}

/// `node` (two 2-CPU pods) beside `node-2` (5 CPU, one 2-CPU pod) that do-not-disrupt
/// protects (on its NodeClaim when `on_node`, else on its pod), both of the most expensive
/// type (spot when `spot`): `node` alone is replaced.
fn replaced_beside_a_protected_node(spot: bool, on_node: bool) {
    let mut c = suite();
    default_nodepool(&mut c);
    let it = if spot { MOST_EXPENSIVE_SPOT } else { MOST_EXPENSIVE };
    node(&mut c, "node", "default", it, CPU_32);
    node(&mut c, "node-2", "default", it, "{cpu: \"5\", pods: \"100\"}");
    rs_pods(&mut c, &[("p0", "node"), ("p1", "node"), ("p2", "node-2")], &cpu("2"));
    if on_node {
        annotate_claim(&mut c, "node-2", DO_NOT_DISRUPT, "true");
    } else {
        annotate_pod(&mut c, "p2", DO_NOT_DISRUPT, "true");
    }
    let (snap, d) = decide(&c);
    assert!(d.blocked.iter().any(|b| snap.nodes[b.node].name == "node-2"), "{:?}", d.blocked);
    let plan = d.plan.expect("a command");
    assert_eq!(names(&snap, &plan), ["node"]);
    assert_eq!(plan.replacements.len(), 1, "its pods do not fit beside p2: a cheaper node");
    let created = run(&mut c, &snap, &plan, |_| {}).expect("validated");
    let kept = ["node-2".to_string(), created[0].clone()];
    assert_eq!(nodeclaims(&c), kept);
    assert_eq!(node_names(&c), kept);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2130
#[test]
fn an_on_demand_node_is_replaced_beside_a_do_not_disrupt_node() {
    replaced_beside_a_protected_node(false, true);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2131
#[test]
fn a_spot_node_is_replaced_beside_a_do_not_disrupt_node() {
    replaced_beside_a_protected_node(true, true);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2219
#[test]
fn an_on_demand_node_is_replaced_beside_a_node_with_a_do_not_disrupt_pod() {
    replaced_beside_a_protected_node(false, false);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2220
#[test]
fn a_spot_node_is_replaced_beside_a_node_with_a_do_not_disrupt_pod() {
    replaced_beside_a_protected_node(true, false);
}

/// A cluster of `types` whose NodePool `default` has `requirements`, with node `node` of
/// `current-on-demand` (on-demand in test-zone-1a at 0.5) running a pod.
fn priced_against_current(types: Vec<tenon_core::instancetype::InstanceType>, requirements: &str) -> Cluster {
    let current = fake("current-on-demand").offerings(&[("on-demand", "test-zone-1a", 0.5, false)]).build();
    let mut cat = vec![current];
    cat.extend(types);
    let mut c = Cluster::new(Arc::new(cat));
    c.now = INITIALIZED + HOUR;
    nodepool_with(&mut c, "default", "0s", requirements, "");
    add_node(&mut c, "node", &offer("default", "current-on-demand", "on-demand", "test-zone-1a"), CPU_32, INITIALIZED);
    rs_pods(&mut c, &[("p", "node")], "");
    c
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2222
#[test]
fn an_on_demand_node_is_not_replaced_if_any_spot_replacement_is_dearer() {
    let replacement = fake("potential-spot-replacement")
        .offerings(&[
            ("spot", "test-zone-1a", 1.0, true),
            ("spot", "test-zone-1b", 0.2, true),
            ("spot", "test-zone-1c", 0.4, true),
        ])
        .build();
    let c = priced_against_current(vec![replacement], "[]");
    no_command(&c);
    assert_eq!(nodeclaims(&c), ["node"]);
    assert_eq!(node_names(&c), ["node"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2301
#[test]
fn an_on_demand_node_is_not_replaced_by_a_dearer_on_demand_one() {
    let replacement = fake("on-demand-replacement")
        .offerings(&[
            ("on-demand", "test-zone-1a", 0.6, true),
            ("on-demand", "test-zone-1b", 0.6, true),
            ("spot", "test-zone-1b", 0.2, true),
            ("spot", "test-zone-1c", 0.3, true),
        ])
        .build();
    // The NodePool requires on-demand.
    let c = priced_against_current(
        vec![replacement],
        "[{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]",
    );
    no_command(&c);
    assert_eq!(nodeclaims(&c), ["node"]);
    assert_eq!(node_names(&c), ["node"]);
}

// ---------------------------------------------------------------------------------------
// Delete
// ---------------------------------------------------------------------------------------

/// The Delete context's `BeforeEach`: `node-0` and `node-1` of `leastExpensiveInstance`.
fn delete_context(c: &mut Cluster) {
    default_nodepool(c);
    node(c, "node-0", "default", LEAST_EXPENSIVE, CPU_32_PODS_100);
    node(c, "node-1", "default", LEAST_EXPENSIVE, CPU_32_PODS_100);
}

/// Two pods on `node-0`, one on `node-1` (the Delete cases' usual placement).
fn two_and_one(c: &mut Cluster) {
    rs_pods(c, &[("p0", "node-0"), ("p1", "node-0"), ("p2", "node-1")], "");
}

/// The round deletes `gone` without a replacement; the other of `node-0`/`node-1` stays.
fn deletes_only(c: &mut Cluster, gone: &str) {
    let (candidates, plan) = consolidate(c);
    assert!(plan.replacements.is_empty(), "we don't need a new node: {plan:?}");
    assert_eq!(candidates, [gone]);
    let kept = if gone == "node-0" { "node-1" } else { "node-0" };
    assert_eq!(nodeclaims(c), [kept]);
    assert_eq!(node_names(c), [kept]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2421
#[test]
fn can_delete_nodes() {
    let mut c = suite();
    delete_context(&mut c);
    two_and_one(&mut c);
    // Multi-node consolidation would replace both with one node of their own type: not a
    // saving over deleting node-1 (Karpenter's filterOutSameInstanceType).
    deletes_only(&mut c, "node-1");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2462
#[test]
fn emptiness_deletes_the_nodes_without_pod_churn_during_validation() {
    let mut c = suite();
    delete_context(&mut c);
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a command");
    assert_eq!(plan.method, Method::Emptiness);
    assert_eq!(names(&snap, &plan), ["node-0", "node-1"]);
    // During validation a pod binds to node-0 (and node-0 is nominated for it).
    let result = run(&mut c, &snap, &plan, |c| {
        rs_pods(c, &[("churn", "node-0")], &cpu("100m"));
    });
    // The command goes ahead with node-1 alone, a deletion.
    assert_eq!(result, Ok(vec![]));
    assert_eq!(nodeclaims(&c), ["node-0"]);
    assert_eq!(node_names(&c), ["node-0"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2496
#[test]
fn can_delete_nodes_beside_a_nodepool_without_a_node_class() {
    let mut c = suite();
    delete_context(&mut c);
    two_and_one(&mut c);
    // Another NodePool whose template names no NodeClass (Karpenter's case builds one but
    // never applies it; here it exists).
    let mut np: tenon_api::NodePool = serde_yaml::from_str(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: no-class}\nspec: {template: {spec: {requirements: []}}}\n",
    )
    .expect("NodePool YAML");
    np.spec.template.spec.node_class_ref = None;
    c.objects.nodepools.push(np);
    deletes_only(&mut c, "node-1");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2539
#[test]
fn can_delete_nodes_when_unmanaged_capacity_fits_their_pods() {
    let mut c = suite();
    default_nodepool(&mut c);
    node(&mut c, "node-0", "default", LEAST_EXPENSIVE, CPU_32_PODS_100);
    c.node(
        "metadata: {name: unmanaged, labels: {kubernetes.io/hostname: unmanaged, kubernetes.io/arch: amd64, kubernetes.io/os: linux}}\nspec: {providerID: fake://unmanaged}\nstatus: {allocatable: {cpu: \"32\", pods: \"100\"}, capacity: {cpu: \"32\", pods: \"100\"}, conditions: [{type: Ready, status: \"True\"}]}\n",
    );
    rs_pods(&mut c, &[("p0", "node-0"), ("p1", "node-0"), ("p2", "node-0")], "");
    let (candidates, plan) = consolidate(&mut c);
    assert!(plan.replacements.is_empty(), "{plan:?}");
    assert_eq!(candidates, ["node-0"]);
    assert!(nodeclaims(&c).is_empty());
    assert_eq!(node_names(&c), ["unmanaged"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2587
#[test]
fn can_delete_nodes_considering_a_pdb() {
    let mut c = suite();
    delete_context(&mut c);
    c.replica_set("rs", "{matchLabels: {app: test}}");
    // Only p2 (on node-1) is covered by the PDB, which allows no disruption.
    for (name, node) in [("p0", "node-0"), ("p1", "node-0")] {
        c.bound(&format!("{{name: {name}, {OWNED}}}"), node, "");
    }
    c.bound(&format!("{{name: p2, labels: {{app: test}}, {OWNED}}}"), "node-1", "");
    blocking_pdb(&mut c, "default", true);
    // node-0, with more pods, goes: node-1's pod may not be evicted.
    deletes_only(&mut c, "node-0");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2644
#[test]
fn can_delete_nodes_considering_do_not_disrupt_on_nodes() {
    let mut c = suite();
    delete_context(&mut c);
    two_and_one(&mut c);
    annotate_claim(&mut c, "node-1", DO_NOT_DISRUPT, "true");
    node_mut(&mut c, "node-1")
        .metadata
        .annotations
        .get_or_insert_default()
        .insert(DO_NOT_DISRUPT.into(), "true".into());
    deletes_only(&mut c, "node-0");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2686
#[test]
fn can_delete_nodes_considering_do_not_disrupt_on_pods() {
    let mut c = suite();
    delete_context(&mut c);
    two_and_one(&mut c);
    annotate_pod(&mut c, "p2", DO_NOT_DISRUPT, "true");
    deletes_only(&mut c, "node-0");
}

/// The Delete context's nodes with a terminationGracePeriod of 300s on their NodeClaims.
fn with_termination_grace_period(c: &mut Cluster) {
    for n in ["node-0", "node-1"] {
        claim_mut(c, n).spec.termination_grace_period = Some("300s".into());
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2729
#[test]
fn do_not_disrupt_pods_block_consolidation_under_a_termination_grace_period() {
    let mut c = suite();
    delete_context(&mut c);
    two_and_one(&mut c);
    for p in ["p0", "p1", "p2"] {
        annotate_pod(&mut c, p, DO_NOT_DISRUPT, "true");
    }
    with_termination_grace_period(&mut c);
    let d = no_command(&c);
    assert_eq!(d.blocked.len(), 2, "{:?}", d.blocked);
    assert_eq!(nodeclaims(&c).len(), 2);
    assert_eq!(node_names(&c).len(), 2);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2776
#[test]
fn blocking_pdbs_block_consolidation_under_a_termination_grace_period() {
    let mut c = suite();
    delete_context(&mut c);
    two_and_one(&mut c);
    blocking_pdb(&mut c, "default", false);
    with_termination_grace_period(&mut c);
    let d = no_command(&c);
    assert_eq!(d.blocked.len(), 2, "{:?}", d.blocked);
    assert_eq!(nodeclaims(&c).len(), 2);
    assert_eq!(node_names(&c).len(), 2);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2824
#[test]
fn an_active_duration_do_not_disrupt_protects_its_node() {
    let mut c = suite();
    delete_context(&mut c);
    two_and_one(&mut c);
    // A 2m do-not-disrupt on p2, started now.
    annotate_pod(&mut c, "p2", DO_NOT_DISRUPT, "2m");
    let now = c.now;
    started(&mut c, "p2", now);
    deletes_only(&mut c, "node-0");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2867
#[test]
fn nodes_consolidate_once_a_duration_do_not_disrupt_expires() {
    let mut c = suite();
    delete_context(&mut c);
    two_and_one(&mut c);
    let now = c.now;
    for p in ["p0", "p1", "p2"] {
        annotate_pod(&mut c, p, DO_NOT_DISRUPT, "2m");
        started(&mut c, p, now);
    }
    let d = no_command(&c);
    assert_eq!(d.blocked.len(), 2, "{:?}", d.blocked);
    assert_eq!(nodeclaims(&c).len(), 2);
    // Three minutes later the protection has run out.
    c.now += 180;
    let (_, d) = decide(&c);
    assert!(d.plan.is_some(), "{:?}", d.blocked);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2916
#[test]
fn an_invalid_do_not_disrupt_value_does_not_block() {
    let mut c = suite();
    delete_context(&mut c);
    two_and_one(&mut c);
    annotate_pod(&mut c, "p2", DO_NOT_DISRUPT, "invalid-format");
    deletes_only(&mut c, "node-1");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2956
#[test]
fn can_delete_nodes_evicting_a_pod_without_an_owner() {
    let mut c = suite();
    delete_context(&mut c);
    c.replica_set("rs", "{matchLabels: {app: test}}");
    for (name, node) in [("p0", "node-0"), ("p1", "node-0")] {
        c.bound(&format!("{{name: {name}, {OWNED}}}"), node, "");
    }
    // p2 is a stand-alone pod: it will not come back, and still does not hold its node.
    c.bound("{name: p2}", "node-1", "");
    deletes_only(&mut c, "node-1");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3004
#[test]
fn a_node_is_not_deleted_if_its_pods_would_land_on_an_uninitialized_node() {
    let mut c = suite();
    default_nodepool(&mut c);
    let catalog = c.catalog.clone();
    let o = &catalog.iter().find(|t| t.name == LEAST_EXPENSIVE).expect("type").offerings[0];
    let labels = offer("default", LEAST_EXPENSIVE, &o.capacity_type, &o.zone);
    add_node_as(&mut c, "node-0", &labels, CPU_32_PODS_100, INITIALIZED, false);
    node(&mut c, "node-1", "default", LEAST_EXPENSIVE, CPU_32_PODS_100);
    two_and_one(&mut c);
    let d = no_command(&c);
    assert_eq!(node_names(&c).len(), 2);
    // node-1 is a candidate; its pod would only schedule against the uninitialized node-0
    // (Karpenter's Unconsolidatable events say so; the shell publishes them).
    let snap = snapshot(&c);
    let n1 = snap.nodes.iter().position(|n| n.name == "node-1").expect("node-1");
    let cand = d.candidates.iter().find(|x| x.node == n1).expect("node-1 is a candidate");
    assert!(cand.consolidatable && cand.blocked.is_none());
    let out = tenon_core::scheduler::Simulator::new(&snap).remove(&[n1], &tenon_core::scorer::PriceScorer);
    let p2 = snap.pods.iter().position(|p| p.name == "p2").expect("p2");
    assert_eq!(out.moved_to.get(&p2).map(|&n| snap.nodes[n].name.as_str()), Some("node-0"));
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3050
#[test]
fn pods_are_not_consolidated_onto_a_node_under_its_consolidate_after() {
    let mut c = suite();
    nodepool_with(&mut c, "default", "1m", "[]", "");
    node(&mut c, "node-0", "default", LEAST_EXPENSIVE, CPU_32_PODS_100);
    node(&mut c, "node-1", "default", LEAST_EXPENSIVE, CPU_32_PODS_100);
    two_and_one(&mut c);
    // Both nodes within their 1m consolidateAfter: nothing happens.
    pod_event(&mut c, "node-0", 10);
    pod_event(&mut c, "node-1", 10);
    no_command(&c);
    // Karpenter's case marks both NodeClaims Consolidatable by hand while node-0 is still
    // under consolidateAfter as a destination; in Tenon's terms node-1 (the source) is past
    // its consolidateAfter, node-0 not. Deleting node-1 would move p2 onto node-0: refused.
    pod_event(&mut c, "node-1", 120);
    no_command(&c);
    // Two minutes later node-0 is past its window too: node-1 goes.
    c.now += 120;
    deletes_only(&mut c, "node-1");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3121
#[test]
fn pods_are_consolidated_onto_a_node_whose_consolidate_after_is_never() {
    let mut c = suite();
    default_nodepool(&mut c);
    nodepool_with(&mut c, "destination", "Never", "[]", "");
    node(&mut c, "node-0", "default", LEAST_EXPENSIVE, CPU_32_PODS_100);
    node(&mut c, "destination", "destination", LEAST_EXPENSIVE, CPU_32_PODS_100);
    rs_pods(&mut c, &[("p", "node-0")], "");
    // Both just initialized: the destination is never under consolidateAfter.
    c.now = INITIALIZED;
    let (candidates, plan) = consolidate(&mut c);
    assert!(plan.replacements.is_empty(), "{plan:?}");
    assert_eq!(candidates, ["node-0"]);
    assert_eq!(nodeclaims(&c), ["destination"]);
    assert_eq!(node_names(&c), ["destination"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3192
#[test]
fn a_node_is_replaced_by_a_cheaper_one_whatever_the_destinations_consolidate_after() {
    let mut c = suite();
    nodepool_with(&mut c, "default", "1m", "[]", "");
    node(&mut c, "node", "default", MOST_EXPENSIVE, CPU_32);
    rs_pods(&mut c, &[("p", "node")], "");
    // Two minutes after initialization: the source is past its consolidateAfter.
    c.now = INITIALIZED + 120;
    let (candidates, plan) = consolidate(&mut c);
    assert_eq!(candidates, ["node"]);
    assert_eq!(plan.replacements.len(), 1);
    assert_eq!(nodeclaims(&c), ["replacement-0"]);
    assert_eq!(node_names(&c), ["replacement-0"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3245
#[test]
fn initialized_nodes_are_considered_before_uninitialized_ones() {
    let default_type = fake("default-instance-type").resources(3, 3 << 30, 110).build();
    let small_type = fake("small-instance-type").resources(1, 1 << 30, 10).build();
    let mut c = Cluster::new(Arc::new(vec![default_type.clone(), small_type.clone()]));
    c.now = INITIALIZED + HOUR;
    default_nodepool(&mut c);
    c.replica_set("rs", "{matchLabels: {app: test}}");
    // 100 nodes of the default type with a 2-CPU pod each; only one (Karpenter picks it at
    // random) is initialized.
    let o = &default_type.offerings[0];
    let labels = offer("default", "default-instance-type", &o.capacity_type, &o.zone);
    let two = "  containers: [{name: app, image: app, resources: {requests: {cpu: \"2\", memory: 2Gi}}}]\n";
    for i in 0..100 {
        let n = format!("node-{i:02}");
        add_node_as(&mut c, &n, &labels, "{cpu: \"3\", memory: 3Gi, pods: \"100\"}", INITIALIZED, i == 57);
        c.bound(&format!("{{name: p-{i:02}, labels: {{app: test}}, {OWNED}}}"), &n, two);
    }
    // The small node with a 1-CPU pod that fits on the initialized node.
    let o = &small_type.offerings[0];
    let labels = offer("default", "small-instance-type", &o.capacity_type, &o.zone);
    add_node(&mut c, "consolidatable", &labels, "{cpu: \"1\", memory: 1Gi, pods: \"100\"}", INITIALIZED);
    let one = "  containers: [{name: app, image: app, resources: {requests: {cpu: \"1\", memory: 1Gi}}}]\n";
    c.bound(&format!("{{name: small-pod, labels: {{app: test}}, {OWNED}}}"), "consolidatable", one);
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a command");
    assert_eq!(names(&snap, &plan), ["consolidatable"]);
    assert!(plan.replacements.is_empty(), "{plan:?}");
    run(&mut c, &snap, &plan, |_| {}).expect("validated");
    assert_eq!(nodeclaims(&c).len(), 100);
    assert_eq!(node_names(&c).len(), 100);
    assert!(!node_names(&c).contains(&"consolidatable".to_string()));
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3390
#[test]
fn can_delete_nodes_beside_a_permanently_pending_pod() {
    let mut c = suite();
    delete_context(&mut c);
    two_and_one(&mut c);
    c.pending("{name: pending}", "  nodeSelector: {non-existent: node-label}\n");
    deletes_only(&mut c, "node-1");
    // The pending pod is still pending.
    let pending = pod_mut(&mut c, "pending");
    assert!(pending.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none());
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3442
#[test]
fn nodes_are_not_deleted_if_a_running_pod_would_go_pending() {
    let mut c = suite();
    delete_context(&mut c);
    for (n, v) in [("node-0", "1"), ("node-1", "2")] {
        node_mut(&mut c, n).metadata.labels.get_or_insert_default().insert("foo".into(), v.into());
    }
    let on = |v: &str| format!("  nodeSelector: {{foo: \"{v}\"}}\n");
    rs_pods(&mut c, &[("p0", "node-0"), ("p1", "node-0")], &on("1"));
    rs_pods(&mut c, &[("p2", "node-1")], &on("2"));
    no_command(&c);
    assert_eq!(nodeclaims(&c).len(), 2);
    assert_eq!(node_names(&c).len(), 2);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3482
#[test]
fn can_delete_nodes_while_an_invalid_nodepool_exists() {
    let mut c = suite();
    delete_context(&mut c);
    two_and_one(&mut c);
    c.nodepool(
        "bad-nodepool",
        "  template:\n    spec:\n      requirements: []\n      nodeClassRef: {group: karpenter.test.sh, kind: TestNodeClass, name: non-existent}\n",
    );
    // Its instance types cannot be fetched: it has none.
    let catalog = c.catalog.clone();
    let types = move |np: &tenon_api::NodePool| {
        if np.metadata.name.as_deref() == Some("bad-nodepool") { Arc::new(vec![]) } else { catalog.clone() }
    };
    let (mut snap, ignored) = tenon_core::convert::snapshot(&c.objects.shared(), &types, c.now);
    assert!(ignored.is_empty(), "{ignored:?}");
    snap.spot_to_spot = true;
    let d = disrupt(&snap, &DefaultPolicies);
    let plan = d.plan.expect("a command");
    assert!(plan.replacements.is_empty(), "{plan:?}");
    assert_eq!(names(&snap, &plan), ["node-1"]);
    run(&mut c, &snap, &plan, |_| {}).expect("validated");
    assert_eq!(nodeclaims(&c), ["node-0"]);
    assert_eq!(node_names(&c), ["node-0"]);
}

// ---------------------------------------------------------------------------------------
// TTL (Karpenter's real validator)
// ---------------------------------------------------------------------------------------

/// The TTL context's `BeforeEach`: `node-0` and `node-1` of `mostExpensiveInstance` (only
/// `nodes` of them are applied).
fn ttl_context(c: &mut Cluster, nodes: &[&str]) {
    default_nodepool(c);
    for n in nodes {
        node(c, n, "default", MOST_EXPENSIVE, CPU_32_PODS_100);
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3570
#[test]
fn non_empty_nodes_are_consolidated_only_after_the_ttl() {
    let mut c = suite();
    default_nodepool(&mut c);
    node(&mut c, "node-0", "default", LEAST_EXPENSIVE, CPU_32_PODS_100);
    node(&mut c, "node-1", "default", LEAST_EXPENSIVE, CPU_32_PODS_100);
    two_and_one(&mut c);
    // `run` checks that the command waits out the TTL with both nodes in place.
    deletes_only(&mut c, "node-1");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3657
#[test]
fn a_replacement_is_abandoned_if_other_instance_types_are_needed_after_the_ttl() {
    let mut c = suite();
    ttl_context(&mut c, &["node-0"]);
    rs_pods(&mut c, &[("p", "node-0")], &cpu("1"));
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a command");
    assert_eq!(plan.replacements.len(), 1);
    // A second 1-CPU pod binds to the node during the TTL: the cheap types no longer fit.
    let result = run(&mut c, &snap, &plan, |c| rs_pods(c, &[("p2", "node-0")], &cpu("1")));
    assert!(result.is_err(), "{result:?}");
    assert_eq!(nodeclaims(&c), ["node-0"]);
    assert_eq!(node_names(&c), ["node-0"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3741
#[test]
fn a_command_is_abandoned_if_it_becomes_invalid_during_the_ttl() {
    let mut c = suite();
    ttl_context(&mut c, &["node-0"]);
    unbound(&mut c, "{name: p, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}");
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a command");
    assert_eq!(plan.method, Method::Emptiness);
    // The do-not-disrupt pod binds to the node during the TTL.
    let result = run(&mut c, &snap, &plan, |c| bind(c, "p", "node-0"));
    assert!(result.is_err(), "{result:?}");
    assert_eq!(nodeclaims(&c), ["node-0"]);
    assert_eq!(node_names(&c), ["node-0"]);
}

/// The suite's `node` (most expensive, on-demand) with a pod: its replacement is decided,
/// then `meanwhile` changes the cluster during the TTL; the command must be abandoned.
fn replacement_abandoned_when(meanwhile: impl FnOnce(&mut Cluster)) {
    let mut c = suite();
    default_nodepool(&mut c);
    node(&mut c, "node", "default", MOST_EXPENSIVE, CPU_32);
    c.bound("{name: p}", "node", "");
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a command");
    assert_eq!(plan.replacements.len(), 1, "we would normally replace the node");
    let result = run(&mut c, &snap, &plan, meanwhile);
    assert!(result.is_err(), "{result:?}");
    assert_eq!(nodeclaims(&c), ["node"]);
    assert_eq!(node_names(&c), ["node"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3785
#[test]
fn a_replacement_is_abandoned_if_a_do_not_disrupt_pod_schedules_during_the_ttl() {
    replacement_abandoned_when(|c| {
        c.bound("{name: do-not-disrupt, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}", "node", "");
    });
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3820
#[test]
fn a_replacement_is_abandoned_if_a_pod_with_a_blocking_pdb_schedules_during_the_ttl() {
    replacement_abandoned_when(|c| {
        c.bound("{name: blocking, labels: {app: test}}", "node", "");
        blocking_pdb(c, "default", false);
    });
}

/// `node-0` and `node-1` (most expensive) with a pod each: their consolidation is decided,
/// then `meanwhile` changes the cluster during the TTL; the command must be abandoned.
fn deletion_abandoned_when(meanwhile: impl FnOnce(&mut Cluster)) {
    let mut c = suite();
    ttl_context(&mut c, &["node-0", "node-1"]);
    c.bound("{name: p0}", "node-0", "");
    c.bound("{name: p1}", "node-1", "");
    let (_, d) = decide(&c);
    let plan = d.plan.as_ref().expect("a command");
    assert_eq!(plan.candidates.len(), 2, "we would normally consolidate down to a single node");
    let snap = snapshot(&c);
    let result = run(&mut c, &snap, plan, meanwhile);
    assert!(result.is_err(), "{result:?}");
    assert_eq!(nodeclaims(&c), ["node-0", "node-1"]);
    assert_eq!(node_names(&c), ["node-0", "node-1"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3857
#[test]
fn a_consolidation_is_abandoned_if_do_not_disrupt_pods_schedule_during_the_ttl() {
    deletion_abandoned_when(|c| {
        for (p, n) in [("dnd-0", "node-0"), ("dnd-1", "node-1")] {
            c.bound(&format!("{{name: {p}, annotations: {{karpenter.sh/do-not-disrupt: \"true\"}}}}"), n, "");
        }
    });
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:3895
#[test]
fn a_consolidation_is_abandoned_if_pods_with_a_blocking_pdb_schedule_during_the_ttl() {
    deletion_abandoned_when(|c| {
        for (p, n) in [("blocking-0", "node-0"), ("blocking-1", "node-1")] {
            c.bound(&format!("{{name: {p}, labels: {{app: test}}}}"), n, "");
        }
        blocking_pdb(c, "default", false);
    });
}

// ---------------------------------------------------------------------------------------
// Multi-NodeClaim
// ---------------------------------------------------------------------------------------

/// The Multi-NodeClaim context's nodes `node-0`… of `types` (one each), 32 CPU, 100 pods.
fn multi_context(c: &mut Cluster, types: &[&str]) {
    default_nodepool(c);
    for (i, it) in types.iter().enumerate() {
        node(c, &format!("node-{i}"), "default", it, CPU_32_PODS_100);
    }
}

/// Three nodes of `types` with a pod each are merged into one.
fn merges_three_into_one(types: [&str; 3]) {
    let mut c = suite();
    multi_context(&mut c, &types);
    rs_pods(&mut c, &[("p0", "node-0"), ("p1", "node-1"), ("p2", "node-2")], "");
    let (candidates, plan) = consolidate(&mut c);
    assert_eq!(plan.method, Method::MultiNodeConsolidation);
    assert_eq!(candidates, ["node-0", "node-1", "node-2"]);
    assert_eq!(plan.replacements.len(), 1);
    assert_eq!(nodeclaims(&c), ["replacement-0"]);
    assert_eq!(node_names(&c), ["replacement-0"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4027
#[test]
fn three_on_demand_nodes_merge_into_one() {
    merges_three_into_one([MOST_EXPENSIVE; 3]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4028
#[test]
fn three_spot_nodes_merge_into_one() {
    merges_three_into_one([MOST_EXPENSIVE_SPOT; 3]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4030
#[test]
fn spot_and_on_demand_nodes_merge_into_one() {
    merges_three_into_one([MOST_EXPENSIVE, MOST_EXPENSIVE, MOST_EXPENSIVE_SPOT]);
}

/// Two nodes of the cheapest type `it` (one pod, two pods): the one with fewer pods is
/// deleted rather than both replaced by one node of their own type.
fn two_nodes_not_merged_into_one_of_their_type(it: &str) {
    let mut c = suite();
    multi_context(&mut c, &[it, it]);
    rs_pods(&mut c, &[("p0", "node-0"), ("p1", "node-1"), ("p2", "node-1")], "");
    deletes_only(&mut c, "node-0");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4163
#[test]
fn two_spot_nodes_are_not_merged_into_one_of_their_type() {
    // Karpenter's entry "if the candidate is on-demand node" (false) picks its spot nodes.
    two_nodes_not_merged_into_one_of_their_type(LEAST_EXPENSIVE_SPOT);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4164
#[test]
fn two_on_demand_nodes_are_not_merged_into_one_of_their_type() {
    two_nodes_not_merged_into_one_of_their_type(LEAST_EXPENSIVE);
}

/// Two nodes of `it` (two pods, one pod) are merged into one smaller node once the TTL has
/// passed.
fn multi_node_waits_for_the_ttl(it: &str) {
    let mut c = suite();
    multi_context(&mut c, &[it, it]);
    two_and_one(&mut c);
    let (candidates, plan) = consolidate(&mut c);
    assert_eq!(plan.method, Method::MultiNodeConsolidation);
    assert_eq!(candidates, ["node-0", "node-1"]);
    assert_eq!(nodeclaims(&c), ["replacement-0"]);
    assert_eq!(node_names(&c), ["replacement-0"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4235
#[test]
fn multi_node_consolidation_of_spot_nodes_waits_for_the_ttl() {
    // The entry for false picks the spot nodes.
    multi_node_waits_for_the_ttl(MOST_EXPENSIVE_SPOT);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4236
#[test]
fn multi_node_consolidation_of_on_demand_nodes_waits_for_the_ttl() {
    multi_node_waits_for_the_ttl(MOST_EXPENSIVE);
}

/// Three empty nodes of `it` go in one command after the TTL.
fn empty_nodes_go_together(it: &str) {
    let mut c = suite();
    multi_context(&mut c, &[it, it, it]);
    // The case's pods are applied but never bound (nor pending).
    for i in 0..3 {
        unbound(&mut c, &format!("{{name: p{i}, labels: {{app: test}}}}"));
    }
    let (candidates, plan) = consolidate(&mut c);
    assert!(plan.replacements.is_empty());
    assert_eq!(candidates, ["node-0", "node-1", "node-2"]);
    assert!(nodeclaims(&c).is_empty());
    assert!(node_names(&c).is_empty());
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4298
#[test]
fn empty_spot_nodes_go_in_one_command() {
    empty_nodes_go_together(MOST_EXPENSIVE_SPOT);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4299
#[test]
fn empty_on_demand_nodes_go_in_one_command() {
    empty_nodes_go_together(MOST_EXPENSIVE);
}

/// Three nodes of `it` with a pod each: their merge is decided, then 1-CPU pods bind to
/// node-0 and node-1 during the TTL; the merge is abandoned and single-node consolidation
/// deletes node-2.
fn single_node_follows_a_failed_multi_node(it: &str) {
    let mut c = suite();
    multi_context(&mut c, &[it, it, it]);
    rs_pods(&mut c, &[("p0", "node-0"), ("p1", "node-1"), ("p2", "node-2")], "");
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a command");
    assert_eq!(plan.method, Method::MultiNodeConsolidation);
    let result = run(&mut c, &snap, &plan, |c| {
        c.bound("{name: extra-0}", "node-0", &cpu("1"));
        c.bound("{name: extra-1}", "node-1", &cpu("1"));
    });
    assert!(result.is_err(), "{result:?}");
    // Karpenter goes on to single-node consolidation in the same pass.
    let (snap, d) = decide_after(&c, Some(Method::MultiNodeConsolidation));
    let plan = d.plan.expect("a single-node command");
    assert_eq!(plan.method, Method::SingleNodeConsolidation);
    assert_eq!(names(&snap, &plan), ["node-2"]);
    run(&mut c, &snap, &plan, |_| {}).expect("validated");
    assert!(plan.replacements.is_empty());
    assert_eq!(nodeclaims(&c), ["node-0", "node-1"]);
    assert_eq!(node_names(&c), ["node-0", "node-1"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4397
#[test]
fn single_node_consolidation_follows_a_failed_spot_multi_node_validation() {
    single_node_follows_a_failed_multi_node(MOST_EXPENSIVE_SPOT);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4396
#[test]
fn single_node_consolidation_follows_a_failed_on_demand_multi_node_validation() {
    single_node_follows_a_failed_multi_node(MOST_EXPENSIVE);
}

// ---------------------------------------------------------------------------------------
// Node Lifetime Consideration, Topology Consideration
// ---------------------------------------------------------------------------------------

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4429
#[test]
fn the_node_with_the_best_savings_ratio_is_consolidated_first() {
    let mut c = suite();
    nodepool_with(&mut c, "default", "0s", "[]", "      expireAfter: 3s\n");
    let catalog = c.catalog.clone();
    let o = &catalog.iter().find(|t| t.name == LEAST_EXPENSIVE).expect("type").offerings[0];
    let labels = offer("default", LEAST_EXPENSIVE, &o.capacity_type, &o.zone);
    // node-0 is the older (two seconds), both expire 3s after creation.
    add_node(&mut c, "node-0", &labels, CPU_32_PODS_100, INITIALIZED);
    add_node(&mut c, "node-1", &labels, CPU_32_PODS_100, INITIALIZED + 2);
    for n in ["node-0", "node-1"] {
        claim_mut(&mut c, n).spec.expire_after = "3s".into();
    }
    two_and_one(&mut c);
    c.now = INITIALIZED + 2;
    // node-1 has fewer pods (a lower reschedule cost), so the better price / disruption ratio.
    deletes_only(&mut c, "node-1");
}

/// The Topology context's nodes: `node-0` (zone 1, cheapest there), `node-1` (zone 2, most
/// expensive there), `node-2` (zone 3, cheapest there); 1 CPU allocatable.
fn topology_context(c: &mut Cluster, zone_2: &str) {
    default_nodepool(c);
    for (i, (zone, it)) in [
        ("test-zone-1", "1-cpu-1-mem-amd64-linux-test-zone-1-on-demand"),
        ("test-zone-2", zone_2),
        ("test-zone-3", "1-cpu-1-mem-amd64-linux-test-zone-3-on-demand"),
    ]
    .into_iter()
    .enumerate()
    {
        add_node(c, &format!("node-{i}"), &offer("default", it, "on-demand", zone), "{cpu: \"1\"}", INITIALIZED);
    }
}

/// Pods per zone of their nodes, zones in order.
fn per_zone(c: &Cluster, app: &str) -> Vec<usize> {
    let snap = snapshot(c);
    let mut count: BTreeMap<String, usize> = BTreeMap::new();
    for p in snap.pods.iter().filter(|p| p.labels.get("app").map(String::as_str) == Some(app)) {
        let Some(n) = snap.nodes.iter().find(|n| Some(&n.name) == p.node_name.as_ref()) else { continue };
        *count.entry(n.labels["topology.kubernetes.io/zone"].clone()).or_default() += 1;
    }
    count.into_values().collect()
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4525
#[test]
fn a_node_is_replaced_keeping_the_zonal_spread() {
    let mut c = suite();
    topology_context(&mut c, "64-cpu-128-mem-amd64-linux-test-zone-2-on-demand");
    let spec = "  containers: [{name: app, image: app, resources: {requests: {cpu: \"1\"}}}]\n  topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {app: test-zonal-spread}}}]\n";
    c.replica_set("rs", "{matchLabels: {app: test-zonal-spread}}");
    for i in 0..3 {
        c.bound(&format!("{{name: p{i}, labels: {{app: test-zonal-spread}}, {OWNED}}}"), &format!("node-{i}"), spec);
    }
    assert_eq!(per_zone(&c, "test-zonal-spread"), [1, 1, 1]);
    let (candidates, plan) = consolidate(&mut c);
    assert_eq!(candidates, ["node-1"]);
    assert_eq!(plan.replacements.len(), 1, "a cheaper node can hold the pod");
    assert_eq!(nodeclaims(&c), ["node-0", "node-2", "replacement-0"]);
    assert_eq!(node_names(&c), ["node-0", "node-2", "replacement-0"]);
    // The ReplicaSet's new pod lands on the new node: the new node is in zone 2.
    c.bound(&format!("{{name: p3, labels: {{app: test-zonal-spread}}, {OWNED}}}"), "replacement-0", spec);
    assert_eq!(per_zone(&c, "test-zonal-spread"), [1, 1, 1]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4599
#[test]
fn a_node_is_not_deleted_if_it_would_violate_pod_anti_affinity() {
    let mut c = suite();
    topology_context(&mut c, "1-cpu-1-mem-amd64-linux-test-zone-2-on-demand");
    let spec = "  containers: [{name: app, image: app, resources: {requests: {cpu: \"1\"}}}]\n  affinity: {podAntiAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: test}}}]}}\n";
    rs_pods(&mut c, &[("p0", "node-0"), ("p1", "node-1"), ("p2", "node-2")], spec);
    // Already the cheapest, so no replacement; deleting one would break the anti-affinity.
    no_command(&c);
    assert_eq!(nodeclaims(&c), ["node-0", "node-1", "node-2"]);
    assert_eq!(node_names(&c), ["node-0", "node-1", "node-2"]);
}

// ---------------------------------------------------------------------------------------
// Parallelization
// ---------------------------------------------------------------------------------------

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4660
#[test]
fn a_pending_pod_during_consolidation_needs_no_additional_node() {
    let mut c = suite();
    default_nodepool(&mut c);
    node(&mut c, "node", "default", MOST_EXPENSIVE, CPU_32);
    rs_pods(&mut c, &[("p", "node")], "");
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a command");
    assert_eq!(plan.replacements.len(), 1);
    // Executed, its replacement made ready; the candidate is marked (tainted
    // karpenter.sh/disrupted by the shell) and not yet deleted.
    launch(&mut c, &snap, &plan.replacements[0], "replacement-0");
    node_mut(&mut c, "node").spec.get_or_insert_default().taints =
        Some(vec![serde_yaml::from_str("{key: karpenter.sh/disrupted, effect: NoSchedule}").expect("taint")]);
    assert_eq!(nodeclaims(&c).len(), 2);
    // A new pending pod is provisioned onto the replacement: no new NodeClaim.
    c.pending("{name: new}", "");
    let decision = c.decide();
    assert!(decision.plan.nodeclaims.is_empty(), "{}", decision.plan.render(&decision.snap));
    assert_eq!(decision.nominated("new"), Some("replacement-0"));
    assert_eq!(nodeclaims(&c).len(), 2);
    assert_eq!(node_names(&c).len(), 2);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4706
#[test]
fn a_node_launched_for_the_pods_of_a_deleting_node_is_not_consolidated() {
    let mut c = suite();
    default_nodepool(&mut c);
    c.replica_set("rs", "{matchLabels: {app: test}}");
    let one = cpu("1");
    for i in 0..5 {
        c.pending(&format!("{{name: p{i}, labels: {{app: test}}, {OWNED}}}"), &one);
    }
    // Provisioned without binding: one NodeClaim, its Node registered.
    let first = c.decide();
    assert_eq!(first.plan.nodeclaims.len(), 1);
    launch(&mut c, &first.snap, &first.plan.nodeclaims[0], "first");
    // The node is marked for deletion; provisioning again launches another for the pods.
    let deleting: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
        serde_yaml::from_str(&format!("\"{}\"", ts(c.now))).expect("time");
    claim_mut(&mut c, "first").metadata.deletion_timestamp = Some(deleting.clone());
    node_mut(&mut c, "first").metadata.deletion_timestamp = Some(deleting);
    let second = c.decide();
    assert_eq!(second.plan.nodeclaims.len(), 1, "{}", second.plan.render(&second.snap));
    launch(&mut c, &second.snap, &second.plan.nodeclaims[0], "second");
    // Two of the pods are re-created and bound to the new node; three are still pending.
    c.objects.pods.retain(|p| !matches!(p.metadata.name.as_deref(), Some("p0" | "p1")));
    for i in 0..2 {
        c.bound(&format!("{{name: again-{i}, labels: {{app: test}}, {OWNED}}}"), "second", &one);
    }
    // Consolidation takes no action: the new node is where the pending pods go.
    let (snap, d) = decide(&c);
    assert!(d.plan.is_none(), "{:?}", d.plan);
    let n = snap.nodes.iter().position(|n| n.name == "second").expect("second");
    assert!(d.blocked.iter().any(|b| b.node == n), "{:?}", d.blocked);
}

// ---------------------------------------------------------------------------------------
// Preferences, MinValuesPolicy, Static NodePool
// ---------------------------------------------------------------------------------------

/// karpenter:pkg/controllers/disruption/consolidation_test.go:4952
#[test]
fn a_node_is_deleted_ignoring_preferences() {
    let mut c = suite();
    c.ignore_preferences = true;
    default_nodepool(&mut c);
    node(&mut c, "node-0", "default", LEAST_EXPENSIVE, "{cpu: \"5\", pods: \"100\"}");
    node(&mut c, "node-1", "default", LEAST_EXPENSIVE, "{cpu: \"5\", pods: \"100\"}");
    let spec = "  containers: [{name: app, image: app}]\n  affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app: foo}}}}]}}\n";
    for (p, n) in [("p0", "node-0"), ("p1", "node-0"), ("p2", "node-1")] {
        c.bound(&format!("{{name: {p}, labels: {{app: foo}}}}"), n, spec);
    }
    deletes_only(&mut c, "node-1");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:5017
#[test]
fn a_node_is_replaced_ignoring_preferences() {
    let mut c = suite();
    c.ignore_preferences = true;
    default_nodepool(&mut c);
    node(&mut c, "node", "default", MOST_EXPENSIVE, CPU_32);
    let spec = format!(
        "  containers: [{{name: app, image: app}}]\n  affinity: {{nodeAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 1, preference: {{matchExpressions: [{{key: node.kubernetes.io/instance-type, operator: In, values: [{MOST_EXPENSIVE}]}}]}}}}]}}}}\n"
    );
    c.bound("{name: p, labels: {app: foo}}", "node", &spec);
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a command");
    assert_eq!(plan.replacements.len(), 1);
    // The NodeClaim the shell creates names instance types, not the preferred one.
    let created = tenon_core::nodeclaim::nodeclaim(&plan.replacements[0], &c.objects.nodepools[0], &snap);
    let types = created
        .spec
        .requirements
        .iter()
        .find(|r| r.key == "node.kubernetes.io/instance-type")
        .expect("an instance-type requirement");
    assert!(!types.values.contains(&MOST_EXPENSIVE.to_string()), "{types:?}");
    run(&mut c, &snap, &plan, |_| {}).expect("validated");
    assert_eq!(nodeclaims(&c), ["replacement-0"]);
    assert_eq!(node_names(&c), ["replacement-0"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:5100
#[test]
fn consolidation_does_not_relax_min_values() {
    // Tenon has no MinValuesPolicy: minValues are always strict, as Karpenter's consolidation
    // keeps them under BestEffort. The catalog is the least and most expensive types only,
    // so instance-type minValues 3 cannot be met.
    let assorted = assorted();
    let pick = |name: &str| assorted.iter().find(|t| t.name == name).expect("type").clone();
    let with_min_values = |min: &str| {
        let mut c = Cluster::new(Arc::new(vec![pick(LEAST_EXPENSIVE), pick(MOST_EXPENSIVE)]));
        c.now = INITIALIZED + HOUR;
        let names = format!("[{LEAST_EXPENSIVE}, {MOST_EXPENSIVE}]");
        nodepool_with(
            &mut c,
            "min-values",
            "0s",
            &format!("[{{key: node.kubernetes.io/instance-type, operator: In, values: {names}{min}}}]"),
            "",
        );
        node(&mut c, "node", "min-values", MOST_EXPENSIVE, "{cpu: \"5\", pods: \"100\"}");
        c.bound("{name: p}", "node", "");
        c
    };
    let c = with_min_values(", minValues: 3");
    no_command(&c);
    assert_eq!(nodeclaims(&c), ["node"]);
    assert_eq!(node_names(&c), ["node"]);
    // Why (Karpenter's Unconsolidatable events): its pod cannot reschedule under minValues.
    let snap = snapshot(&c);
    let out = tenon_core::scheduler::Simulator::new(&snap).remove(&[0], &tenon_core::scorer::PriceScorer);
    assert!(out.unschedulable.iter().any(|u| u.reason.contains("minValues")), "{:?}", out.unschedulable);
    // Without minValues the pod would reschedule onto a new node.
    let snap = snapshot(&with_min_values(""));
    let out = tenon_core::scheduler::Simulator::new(&snap).remove(&[0], &tenon_core::scorer::PriceScorer);
    assert!(out.unschedulable.is_empty() && out.nodeclaims.len() == 1, "{:?}", out.unschedulable);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:5269
#[test]
fn static_nodepool_nodes_are_not_consolidated() {
    let mut c = suite();
    c.nodepool("static", "  replicas: 2\n  template:\n    spec:\n      requirements: []\n");
    let alloc = "{cpu: \"10\", memory: 1000Mi, pods: \"2\"}";
    node(&mut c, "static-0", "static", LEAST_EXPENSIVE, alloc);
    node(&mut c, "static-1", "static", LEAST_EXPENSIVE, alloc);
    no_command(&c);
}
