//! Karpenter's emptiness suite (`pkg/controllers/disruption/emptiness_test.go`) and its
//! single-node consolidation ordering cases (`singlenodeconsolidation_test.go`), decided from
//! Kubernetes objects as the controller reads them (`convert::snapshot`, then `disrupt`), and
//! carried out through the orchestration's command state machine.
//!
//! Karpenter's `Consolidatable` NodeClaim condition is an input of its disruption methods,
//! set by another controller once `consolidateAfter` has passed since the last pod event.
//! Tenon decides from the same facts directly (a candidate's `consolidatable`): a case that
//! sets the condition True is a NodeClaim whose `consolidateAfter` has passed; one without
//! it, or with it False, is a NodeClaim whose last pod event is more recent.

use crate::support;

use k8s_openapi::api::core::v1 as core;
use support::karpenter::{Cluster, NOW, assorted, fake};
use tenon_api::NodeClaim;
use tenon_core::disruption::candidates::eviction_cost;
use tenon_core::disruption::{DefaultPolicies, DisruptionDecision, DisruptionPlan, Method, disrupt};
use tenon_core::model::{ClusterSnapshot, DisruptionReason};
use tenon_core::orchestration::command::{Command, Step, VALIDATION_MS, still_invalid};
use tenon_core::scheduler::reschedulable;

/// `leastExpensiveInstance` of Karpenter's suite (`fake.InstanceTypesAssorted()`): the cheapest
/// on-demand type, with its one offering.
const LEAST_EXPENSIVE: &str = "1-cpu-1-mem-amd64-linux-test-zone-1-on-demand";
/// `leastExpensiveSpotInstance`.
const LEAST_EXPENSIVE_SPOT: &str = "1-cpu-1-mem-amd64-linux-test-zone-1-spot";
/// The NodeClaims' allocatable in the suite's `BeforeEach`.
const ALLOCATABLE: &str = "{cpu: \"32\", pods: \"100\"}";
/// When every node of these cases was initialized; decisions are made an hour later.
const INITIALIZED: i64 = NOW;
const HOUR: i64 = 3600;

/// `NOW + secs` in RFC 3339 (`NOW` is 2026-11-30T00:00:00Z; `secs` under a day).
fn at(secs: i64) -> String {
    assert!((0..86_400).contains(&secs));
    format!("2026-11-30T{:02}:{:02}:{:02}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Karpenter's suite catalog, decided an hour after the nodes were initialized.
fn suite() -> Cluster {
    let mut c = Cluster::new(assorted());
    c.now = INITIALIZED + HOUR;
    c
}

/// A NodePool `name` with no requirements and the given disruption settings.
fn nodepool(c: &mut Cluster, name: &str, consolidate_after: &str, policy: &str, budget: &str) {
    c.nodepool(
        name,
        &format!(
            "  template:\n    spec:\n      requirements: []\n  disruption:\n    consolidateAfter: {consolidate_after}\n    consolidationPolicy: {policy}\n    budgets: [{{nodes: \"{budget}\"}}]\n"
        ),
    );
}

/// The suite's `nodePool`: consolidateAfter 0s, WhenEmpty, every node may go.
fn default_nodepool(c: &mut Cluster) {
    nodepool(c, "default", "0s", "WhenEmpty", "100%");
}

/// A NodeClaim `name` of NodePool `pool` launched as catalog type `it` (its one offering's
/// zone and capacity type), and its Node `name`, registered, initialized and Ready
/// (`test.NodeClaimsAndNodes` then `ExpectMakeNodesAndNodeClaimsInitializedAndStateUpdated`).
fn node(c: &mut Cluster, name: &str, pool: &str, it: &str, allocatable: &str) {
    c.initialized_node(name, pool, it, allocatable, INITIALIZED);
}

fn claim_mut<'a>(c: &'a mut Cluster, name: &str) -> &'a mut NodeClaim {
    c.objects.nodeclaims.iter_mut().find(|n| n.metadata.name.as_deref() == Some(name)).expect("NodeClaim")
}

fn node_mut<'a>(c: &'a mut Cluster, name: &str) -> &'a mut core::Node {
    c.objects.nodes.iter_mut().find(|n| n.metadata.name.as_deref() == Some(name)).expect("Node")
}

/// The snapshot the controller decides from now, and its decision.
fn decide(c: &Cluster) -> (ClusterSnapshot, DisruptionDecision) {
    let snap = c.snapshot();
    let d = disrupt(&snap, &DefaultPolicies);
    (snap, d)
}

fn nodeclaims(c: &Cluster) -> Vec<String> {
    c.objects.nodeclaims.iter().filter_map(|n| n.metadata.name.clone()).collect()
}

fn node_names(c: &Cluster) -> Vec<String> {
    c.objects.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect()
}

/// The names of the plan's candidates.
fn names(snap: &ClusterSnapshot, plan: &DisruptionPlan) -> Vec<String> {
    let mut v: Vec<String> = plan.candidates.iter().map(|&n| snap.nodes[n].name.clone()).collect();
    v.sort();
    v
}

/// How many nodes Karpenter's Emptiness method finds eligible (its `EligibleNodes` gauge,
/// reason `empty`): empty, consolidatable, not blocked.
fn eligible_empty(d: &DisruptionDecision) -> usize {
    d.candidates.iter().filter(|c| c.empty && c.consolidatable && c.blocked.is_none()).count()
}

/// `karpenter_nodepools_allowed_disruptions` of `pool` for every reason (the cases' budgets
/// name no reason, so all agree).
fn allowance(d: &DisruptionDecision, pool: &str) -> usize {
    let per: Vec<usize> = [DisruptionReason::Empty, DisruptionReason::Drifted, DisruptionReason::Underutilized]
        .iter()
        .map(|r| d.allowed[&(pool.to_string(), *r)].allowed)
        .collect();
    assert!(per.iter().all(|a| *a == per[0]), "{pool}: {per:?}");
    per[0]
}

/// Carries `plan` out as the orchestration queue does (`ExpectObjectReconciled(queue, …)`):
/// decided at the cluster's time, re-checked [`VALIDATION_MS`] later over the objects as they
/// are then, executed, and (with no replacement to wait for) its candidates deleted, their
/// NodeClaims and Nodes removed with their pods (`ExpectNodeClaimsCascadeDeletion`). Returns
/// the NodeClaims deleted.
fn carry_out(c: &mut Cluster, snap: &ClusterSnapshot, plan: &DisruptionPlan) -> Vec<String> {
    assert!(plan.replacements.is_empty(), "a deletion, not a replacement: {plan:?}");
    let candidates: Vec<(String, String)> = plan
        .candidates
        .iter()
        .map(|&n| (snap.nodes[n].claim.as_ref().expect("managed").nodeclaim.clone(), snap.nodes[n].name.clone()))
        .collect();
    let decided = c.now * 1000;
    let mut cmd: Command<()> =
        Command::new(plan.method, plan.reason.clone(), plan.savings_per_hour, candidates.clone(), vec![], decided);
    assert_eq!(cmd.step(decided + VALIDATION_MS - 1, &[]), Step::Wait, "not validated before the TTL");
    c.now += VALIDATION_MS / 1000;
    let now = c.now * 1000;
    assert_eq!(cmd.step(now, &[]), Step::Validate);
    if let Some(why) = still_invalid(&c.snapshot(), plan.method, &candidates) {
        panic!("the command was abandoned at validation: {why}");
    }
    cmd.execute(vec![], now);
    assert_eq!(cmd.step(now, &[]), Step::Delete);
    remove(c, &candidates.iter().map(|(_, n)| n.clone()).collect::<Vec<_>>());
    candidates.into_iter().map(|(nc, _)| nc).collect()
}

/// Deletes nodes `gone`, their NodeClaims and the pods bound to them.
fn remove(c: &mut Cluster, gone: &[String]) {
    let on = |n: Option<&String>| n.is_some_and(|n| gone.contains(n));
    c.objects.nodeclaims.retain(|nc| !on(nc.status.as_ref().and_then(|s| s.node_name.as_ref())));
    c.objects.nodes.retain(|n| !on(n.metadata.name.as_ref()));
    c.objects.pods.retain(|p| !on(p.spec.as_ref().and_then(|s| s.node_name.as_ref())));
}

/// The suite's `BeforeEach`: `nodePool`, and NodeClaims `node-1` and `node-2` of
/// `leastExpensiveSpotInstance` (only those a case applies are added here).
fn before_each(c: &mut Cluster, nodes: &[&str]) {
    default_nodepool(c);
    for n in nodes {
        node(c, n, "default", LEAST_EXPENSIVE_SPOT, ALLOCATABLE);
    }
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:86
#[test]
fn emptiness_counts_a_node_eligible_once_its_pod_is_gone() {
    let mut c = suite();
    before_each(&mut c, &["node-1"]);
    c.bound("{name: p}", "node-1", "");
    let (_, d) = decide(&c);
    // The `karpenter_voluntary_disruption_eligible_nodes{reason="empty"}` gauge is the
    // controller's; the decision's part is which nodes Emptiness may take.
    assert_eq!(eligible_empty(&d), 0, "the node has a pod");
    assert!(d.plan.is_none());

    c.objects.pods.clear();
    let (snap, d) = decide(&c);
    assert_eq!(eligible_empty(&d), 1, "the pod is gone: the node is empty");
    let plan = d.plan.expect("Emptiness claims it");
    assert_eq!(plan.method, Method::Emptiness);
    assert_eq!(names(&snap, &plan), ["node-1"]);
}

/// `n` NodeClaims `node-0`… of `leastExpensiveInstance` in NodePool `pool`.
fn nodes_of(c: &mut Cluster, pool: &str, n: usize) {
    for i in 0..n {
        node(c, &format!("{pool}-node-{i}"), pool, LEAST_EXPENSIVE, ALLOCATABLE);
    }
}

/// Ten empty nodes of `default` under budget `budget`: the allowance, and the NodeClaims left
/// once the round's command is carried out.
fn ten_empty_nodes_under(budget: &str) -> (usize, usize) {
    let mut c = suite();
    nodepool(&mut c, "default", "0s", "WhenEmpty", budget);
    nodes_of(&mut c, "default", 10);
    let (snap, d) = decide(&c);
    let allowed = allowance(&d, "default");
    match &d.plan {
        // One command (`queue.GetCommands()` has one) for every node it takes.
        Some(plan) => {
            assert_eq!(plan.method, Method::Emptiness);
            let deleted = carry_out(&mut c, &snap, plan);
            assert_eq!(deleted.len(), allowed.min(10));
        }
        None => assert_eq!(allowed, 0, "no command although the budget allows {allowed}"),
    }
    assert_eq!(node_names(&c).len(), nodeclaims(&c).len());
    (allowed, nodeclaims(&c).len())
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:111
#[test]
fn a_100_percent_budget_lets_every_empty_node_go_in_one_command() {
    assert_eq!(ten_empty_nodes_under("100%"), (10, 0));
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:153
#[test]
fn a_0_percent_budget_lets_no_empty_node_go() {
    assert_eq!(ten_empty_nodes_under("0%"), (0, 10));
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:194
#[test]
fn a_30_percent_budget_lets_three_of_ten_empty_nodes_go() {
    assert_eq!(ten_empty_nodes_under("30%"), (3, 7));
}

/// Ten NodePools `np-0`… (consolidateAfter 30s, WhenEmpty, budget `budget`) of three empty
/// nodes each, besides the suite's `nodePool`: each NodePool's allowance, and the NodeClaims
/// deleted per NodePool and left once the round's one command is carried out.
fn ten_nodepools_of_three_under(budget: &str) -> (Vec<usize>, Vec<usize>, usize) {
    let mut c = suite();
    default_nodepool(&mut c);
    let pools: Vec<String> = (0..10).map(|i| format!("np-{i}")).collect();
    for p in &pools {
        nodepool(&mut c, p, "30s", "WhenEmpty", budget);
        nodes_of(&mut c, p, 3);
    }
    let (snap, d) = decide(&c);
    let allowed: Vec<usize> = pools.iter().map(|p| allowance(&d, p)).collect();
    let plan = d.plan.expect("one command");
    assert_eq!(plan.method, Method::Emptiness);
    let deleted = carry_out(&mut c, &snap, &plan);
    let per_pool: Vec<usize> =
        pools.iter().map(|p| deleted.iter().filter(|nc| nc.starts_with(&format!("{p}-"))).count()).collect();
    (allowed, per_pool, nodeclaims(&c).len())
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:236
#[test]
fn a_50_percent_budget_of_three_nodes_rounds_up_to_two_per_nodepool() {
    let (allowed, deleted, left) = ten_nodepools_of_three_under("50%");
    assert_eq!(allowed, [2; 10], "1.5 nodes round up to 2");
    assert_eq!(deleted, [2; 10]);
    assert_eq!(left, 10);
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:302
#[test]
fn a_100_percent_budget_lets_every_nodepools_empty_nodes_go_together() {
    let (allowed, deleted, left) = ten_nodepools_of_three_under("100%");
    assert_eq!(allowed, [3; 10]);
    assert_eq!(deleted, [3; 10]);
    assert_eq!(left, 0);
}

/// The one node the round deletes, carried out: the NodeClaims and Nodes left.
fn delete_the_empty_node(c: &mut Cluster) -> (Vec<String>, Vec<String>) {
    let (snap, d) = decide(c);
    let plan = d.plan.expect("the empty node goes");
    assert_eq!(names(&snap, &plan), ["node-1"]);
    assert_eq!(carry_out(c, &snap, &plan), ["node-1"]);
    (nodeclaims(c), node_names(c))
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:369
#[test]
fn an_empty_node_is_deleted() {
    let mut c = suite();
    before_each(&mut c, &["node-1"]);
    let (snap, d) = decide(&c);
    let plan = d.plan.as_ref().expect("a plan");
    assert_eq!(plan.method, Method::Emptiness);
    assert!(plan.replacements.is_empty());
    assert_eq!(names(&snap, plan), ["node-1"]);
    assert_eq!(delete_the_empty_node(&mut c), (vec![], vec![]));
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:385
#[test]
fn an_empty_drifted_node_is_deleted_without_a_replacement() {
    let mut c = suite();
    before_each(&mut c, &["node-1"]);
    let drifted = serde_yaml::from_str(&format!(
        "{{type: Drifted, status: \"True\", reason: NodePoolDrifted, message: \"\", lastTransitionTime: \"{}\"}}",
        at(60)
    ))
    .expect("condition");
    claim_mut(&mut c, "node-1").status.as_mut().expect("status").conditions.push(drifted);
    let (_, d) = decide(&c);
    // `EligibleNodes{reason="drifted"}` is the controller's gauge; the decision records the
    // node as drifted.
    assert_eq!(d.candidates.iter().filter(|c| c.drifted.is_some()).count(), 1);
    let plan = d.plan.expect("a plan");
    assert!(plan.replacements.is_empty(), "an empty node needs no replacement");
    assert_eq!(delete_the_empty_node(&mut c), (vec![], vec![]));
}

/// Whether the round leaves `node-1` where it is.
fn keeps_the_node(c: &Cluster) -> DisruptionDecision {
    let (_, d) = decide(c);
    assert!(d.plan.is_none(), "{:?}", d.plan);
    assert_eq!(nodeclaims(c), ["node-1"]);
    assert_eq!(node_names(c), ["node-1"]);
    d
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:405
#[test]
fn a_node_not_yet_consolidatable_is_ignored() {
    // No Consolidatable condition yet: consolidateAfter (here 30s) has not passed since the
    // node was initialized, 10s ago.
    let mut c = suite();
    nodepool(&mut c, "default", "30s", "WhenEmpty", "100%");
    node(&mut c, "node-1", "default", LEAST_EXPENSIVE_SPOT, ALLOCATABLE);
    c.now = INITIALIZED + 10;
    let d = keeps_the_node(&c);
    assert!(!d.candidates[0].consolidatable);
    c.now = INITIALIZED + 30;
    assert!(decide(&c).1.plan.is_some(), "consolidatable once consolidateAfter has passed");
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:419
#[test]
fn a_node_with_do_not_disrupt_is_ignored() {
    let mut c = suite();
    before_each(&mut c, &["node-1"]);
    node_mut(&mut c, "node-1")
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    let d = keeps_the_node(&c);
    assert!(d.blocked.iter().any(|b| b.reason.contains("do-not-disrupt")), "{:?}", d.blocked);
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:433
#[test]
fn a_node_with_do_not_disrupt_false_is_deleted() {
    let mut c = suite();
    before_each(&mut c, &["node-1"]);
    node_mut(&mut c, "node-1")
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("karpenter.sh/do-not-disrupt".into(), "false".into());
    assert_eq!(delete_the_empty_node(&mut c), (vec![], vec![]));
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:450
#[test]
fn a_node_with_a_pod_is_not_empty() {
    let mut c = suite();
    before_each(&mut c, &["node-1"]);
    c.bound("{name: p}", "node-1", "");
    let d = keeps_the_node(&c);
    assert!(!d.candidates[0].empty);
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:465
#[test]
fn a_node_whose_pods_changed_within_consolidate_after_is_ignored() {
    // Consolidatable False (NotEmpty): a pod event 10s ago, consolidateAfter 30s.
    let mut c = suite();
    nodepool(&mut c, "default", "30s", "WhenEmpty", "100%");
    node(&mut c, "node-1", "default", LEAST_EXPENSIVE_SPOT, ALLOCATABLE);
    let event = serde_yaml::from_str(&format!("\"{}\"", at(c.now - 10 - NOW))).expect("time");
    claim_mut(&mut c, "node-1").status.as_mut().expect("status").last_pod_event_time = Some(event);
    let d = keeps_the_node(&c);
    assert!(!d.candidates[0].consolidatable);
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:479
#[test]
fn several_empty_nodes_go_in_one_command() {
    let mut c = suite();
    before_each(&mut c, &["node-1", "node-2"]);
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("one command");
    assert_eq!(plan.method, Method::Emptiness);
    assert_eq!(names(&snap, &plan), ["node-1", "node-2"]);
    let mut deleted = carry_out(&mut c, &snap, &plan);
    deleted.sort();
    assert_eq!(deleted, ["node-1", "node-2"]);
    assert!(nodeclaims(&c).is_empty() && node_names(&c).is_empty());
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:499
#[test]
fn a_large_node_a_pending_pod_needs_is_kept() {
    // The cheapest type of at least 64 CPU, running a 1-CPU pod; a 62-CPU pod is pending.
    let mut c = suite();
    default_nodepool(&mut c);
    let large = "64-cpu-1-mem-amd64-linux-test-zone-1-on-demand";
    node(&mut c, "node-1", "default", large, "{cpu: \"64\", pods: \"5\"}");
    let one_cpu = "  containers: [{name: app, image: app, resources: {requests: {cpu: \"1\"}}}]\n";
    c.bound("{name: p}", "node-1", one_cpu);
    c.pending("{name: unsched}", "  containers: [{name: app, image: app, resources: {requests: {cpu: \"62\"}}}]\n");
    let d = keeps_the_node(&c);
    assert_eq!(eligible_empty(&d), 0);
}

/// A node of `leastExpensiveInstance` ("so we don't get a replacement").
fn cheapest_node(c: &mut Cluster) {
    default_nodepool(c);
    node(c, "node-1", "default", LEAST_EXPENSIVE, ALLOCATABLE);
}

/// An owner reference to `kind` `name` (uid `<name>-uid`), as the controller sets it.
fn owned_by(kind: &str, name: &str) -> String {
    format!(
        "ownerReferences: [{{apiVersion: apps/v1, kind: {kind}, name: {name}, uid: {name}-uid, controller: true, blockOwnerDeletion: true}}]"
    )
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:557
#[test]
fn a_node_with_only_a_daemonset_pod_is_empty() {
    let mut c = suite();
    cheapest_node(&mut c);
    c.daemonset(
        "metadata: {name: ds, namespace: default, uid: ds-uid}\nspec: {selector: {matchLabels: {app: ds}}, template: {metadata: {labels: {app: ds}}, spec: {containers: [{name: app, image: app}]}}}\n",
    );
    c.bound(&format!("{{name: ds-pod, labels: {{app: ds}}, {}}}", owned_by("DaemonSet", "ds")), "node-1", "");
    let (_, d) = decide(&c);
    assert_eq!(eligible_empty(&d), 1);
    assert_eq!(delete_the_empty_node(&mut c), (vec![], vec![]));
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:606
#[test]
fn a_node_whose_deployment_pods_are_terminating_is_empty() {
    let mut c = suite();
    cheapest_node(&mut c);
    c.replica_set("rs", "{matchLabels: {app: web}}");
    // Evicted: a deletion timestamp (now plus the pods' 30s grace), not yet gone.
    let deleting = at(c.now + 30 - NOW);
    for i in 0..3 {
        c.bound(
            &format!(
                "{{name: web-{i}, labels: {{app: web}}, deletionTimestamp: \"{deleting}\", {}}}",
                owned_by("ReplicaSet", "rs")
            ),
            "node-1",
            "",
        );
    }
    let (_, d) = decide(&c);
    assert_eq!(eligible_empty(&d), 1);
    assert_eq!(delete_the_empty_node(&mut c), (vec![], vec![]));
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:664
#[test]
fn a_node_with_a_terminating_statefulset_pod_is_not_empty() {
    let mut c = suite();
    cheapest_node(&mut c);
    c.stateful_set("ss", "{matchLabels: {app: db}}");
    let deleting = at(c.now + 30 - NOW);
    c.bound(
        &format!(
            "{{name: db-0, labels: {{app: db}}, deletionTimestamp: \"{deleting}\", {}}}",
            owned_by("StatefulSet", "ss")
        ),
        "node-1",
        "",
    );
    let d = keeps_the_node(&c);
    assert_eq!(eligible_empty(&d), 0);
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:720
#[test]
fn an_empty_node_is_deleted_only_after_the_validation_ttl() {
    let mut c = suite();
    before_each(&mut c, &["node-1"]);
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a plan");
    let candidates = vec![("node-1".to_string(), "node-1".to_string())];
    let decided = c.now * 1000;
    let cmd: Command<()> =
        Command::new(plan.method, plan.reason.clone(), plan.savings_per_hour, candidates, vec![], decided);
    // During the TTL the command waits and the node stays.
    assert_eq!(cmd.step(decided, &[]), Step::Wait);
    assert_eq!(cmd.step(decided + VALIDATION_MS - 1, &[]), Step::Wait);
    assert_eq!(nodeclaims(&c), ["node-1"]);
    // Once it has passed, the command is validated, executed, and the node deleted.
    assert_eq!(carry_out(&mut c, &snap, &plan), ["node-1"]);
    assert!(nodeclaims(&c).is_empty() && node_names(&c).is_empty());
}

/// karpenter:pkg/controllers/disruption/emptiness_test.go:758
#[test]
fn static_nodepool_nodes_are_not_consolidated() {
    let mut c = suite();
    // `test.StaticNodePool`: replicas 2, default disruption (consolidateAfter 0s, 10%).
    c.nodepool("static", "  replicas: 2\n  template:\n    spec:\n      requirements: []\n");
    let alloc = "{cpu: \"10\", memory: 1000Mi, pods: \"2\"}";
    node(&mut c, "static-1", "static", LEAST_EXPENSIVE, alloc);
    node(&mut c, "static-2", "static", LEAST_EXPENSIVE, alloc);
    let (_, d) = decide(&c);
    assert!(d.plan.is_none(), "emptiness took static nodes: {:?}", d.plan);
    // Nor, with a pod each that the other node could take, single- or multi-node
    // consolidation.
    c.bound("{name: a}", "static-1", "");
    c.bound("{name: b}", "static-2", "");
    let (_, d) = decide(&c);
    assert!(d.plan.is_none(), "consolidation took static nodes: {:?}", d.plan);
}

// Single-node consolidation's candidate order. Karpenter's cases sort candidates directly;
// Tenon's order shows in which node a round consolidates. One NodePool with a budget of one
// node (so multi-node consolidation has no pair to take and Karpenter's single-node loop
// consolidates its first valid candidate), every candidate deletable (its pods fit on
// `sink`, a node Karpenter does not manage); each round's node is deleted before the next.

/// `types` as one on-demand offering each in test-zone-1, 4 CPU, 8 GiB, 10 pods.
fn priced(types: &[(&str, f64)]) -> Cluster {
    let cat = types
        .iter()
        .map(|(name, price)| {
            fake(name).resources(4, 8 << 30, 10).offerings(&[("on-demand", "test-zone-1", *price, true)]).build()
        })
        .collect();
    let mut c = Cluster::new(std::sync::Arc::new(cat));
    c.now = INITIALIZED + HOUR;
    nodepool(&mut c, "default", "0s", "WhenEmptyOrUnderutilized", "1");
    c.node(
        "metadata: {name: sink, labels: {kubernetes.io/hostname: sink, kubernetes.io/arch: amd64, kubernetes.io/os: linux, topology.kubernetes.io/zone: test-zone-1}}\nstatus: {allocatable: {cpu: \"100\", memory: 100Gi, pods: \"200\"}, capacity: {cpu: \"100\", memory: 100Gi, pods: \"200\"}, conditions: [{type: Ready, status: \"True\"}]}\n",
    );
    c
}

const NODE_ALLOCATABLE: &str = "{cpu: \"4\", memory: 8Gi, pods: \"10\"}";

/// Karpenter's `SavingsRatio`: price / (1 + Σ of the reschedulable pods' positive eviction
/// costs).
fn savings_ratio(snap: &ClusterSnapshot, n: usize) -> f64 {
    let node = &snap.nodes[n];
    let cost: f64 = snap
        .pods
        .iter()
        .filter(|p| p.node_name.as_deref() == Some(node.name.as_str()) && reschedulable(p))
        .map(|p| eviction_cost(p).max(0.0))
        .sum();
    node.claim.as_ref().expect("managed").price / (1.0 + cost)
}

/// Runs rounds until none consolidates: each round's node and its savings ratio, in order.
fn consolidation_order(c: &mut Cluster) -> Vec<(String, f64)> {
    let mut order = Vec::new();
    loop {
        let (snap, d) = decide(c);
        let Some(plan) = d.plan else { break };
        assert_eq!(plan.method, Method::SingleNodeConsolidation, "{plan:?}");
        assert_eq!(plan.candidates.len(), 1);
        let n = plan.candidates[0];
        order.push((snap.nodes[n].name.clone(), savings_ratio(&snap, n)));
        remove(c, &[snap.nodes[n].name.clone()]);
    }
    order
}

/// karpenter:pkg/controllers/disruption/singlenodeconsolidation_test.go:104
#[test]
fn single_node_consolidation_takes_candidates_by_savings_ratio_descending() {
    // Nine nodes of one pod each at nine prices: the ratio falls with the price.
    let types: Vec<(String, f64)> = (1..=9).map(|i| (format!("t-{i}"), 0.1 * i as f64)).collect();
    let refs: Vec<(&str, f64)> = types.iter().map(|(n, p)| (n.as_str(), *p)).collect();
    let mut c = priced(&refs);
    for (i, (t, _)) in types.iter().enumerate() {
        let n = format!("node-{i}");
        node(&mut c, &n, "default", t, NODE_ALLOCATABLE);
        c.bound(&format!("{{name: p-{i}}}"), &n, "");
    }
    let order = consolidation_order(&mut c);
    assert_eq!(order.len(), 9, "{order:?}");
    for w in order.windows(2) {
        assert!(w[0].1 >= w[1].1, "{order:?}");
    }
    assert_eq!(order[0].0, "node-8", "the most expensive first");
}

/// karpenter:pkg/controllers/disruption/singlenodeconsolidation_test.go:130
#[test]
fn single_node_consolidation_takes_the_least_disruptive_first_at_equal_prices() {
    // Equal prices; three nodes whose pods cost 1 to evict, three at 5, three at 2 × 10.
    let mut c = priced(&[("t", 1.0)]);
    let p = 1 << 25;
    for (class, priorities) in [("high", vec![9 * p, 9 * p]), ("low", vec![0]), ("mid", vec![4 * p])] {
        for i in 0..3 {
            let n = format!("{class}-{i}");
            node(&mut c, &n, "default", "t", NODE_ALLOCATABLE);
            for (j, prio) in priorities.iter().enumerate() {
                c.bound(&format!("{{name: {n}-p{j}}}"), &n, &format!("  priority: {prio}\n"));
            }
        }
    }
    let order = consolidation_order(&mut c);
    let classes: Vec<&str> = order.iter().map(|(n, _)| n.split('-').next().unwrap()).collect();
    assert_eq!(classes, ["low", "low", "low", "mid", "mid", "mid", "high", "high", "high"], "{order:?}");
}

/// Karpenter's savings ratio weighs price against disruption: a node twice as dear with two
/// pods (ratio 0.9/3) goes before a cheap one with one (0.4/2). Not one of Karpenter's cases
/// (its two sort cases vary one of the two only), but what their sort does.
#[test]
fn single_node_consolidation_weighs_price_against_disruption() {
    let mut c = priced(&[("cheap", 0.4), ("dear", 0.9)]);
    node(&mut c, "dear-node", "default", "dear", NODE_ALLOCATABLE);
    c.bound("{name: d0}", "dear-node", "");
    c.bound("{name: d1}", "dear-node", "");
    node(&mut c, "cheap-node", "default", "cheap", NODE_ALLOCATABLE);
    c.bound("{name: c0}", "cheap-node", "");
    let order = consolidation_order(&mut c);
    assert_eq!(order.first().map(|(n, _)| n.as_str()), Some("dear-node"), "{order:?}");
}
