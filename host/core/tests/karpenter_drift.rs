//! (Long: Karpenter's drift suites, case by case, with their shared cluster builders.)
//! Karpenter's drift suites: the disruption controller's Drift method
//! (`pkg/controllers/disruption/drift_test.go`), and the NodeClaim disruption controller that
//! records each NodeClaim's `Drifted` and `Consolidatable` conditions
//! (`pkg/controllers/nodeclaim/disruption/{drift,consolidation,suite}_test.go`), decided from
//! Kubernetes objects as the controller reads them (`convert::snapshot`, then `disrupt`) and
//! carried out through the orchestration's command state machine.
//!
//! Tenon has no NodeClaim disruption controller of its own: each disruption round decides
//! whether a candidate is drifted (`Candidate::drifted`: NodePoolDrifted by the template hash
//! under today's hash version, RequirementsDrifted by the node's labels, or the reason the
//! cloud provider or the NodeClass hash reported, `ClaimInfo::drift`) and consolidatable
//! (`Candidate::consolidatable`: consolidateAfter passed since the last pod event), and the
//! controller writes those as the conditions of the candidates' NodeClaims
//! (`claim_conditions`: each set while it holds and removed once it does not; a NodeClaim not
//! initialized, or not launched, loses Consolidatable, or Drifted). The round looks cloud drift up afresh and overwrites
//! `ClaimInfo::drift` with it ([`round`] does the same), so a recorded `Drifted` condition is
//! never an input of its own. Candidates are initialized NodeClaims with a Node: the cases'
//! NodeClaims are given one (Karpenter's NodeClaim disruption controller also judges NodeClaims
//! that are only Launched).

use crate::support;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::collections::BTreeMap;
use std::sync::Arc;
use support::GIB;
use support::karpenter::{Cluster, NOW, assorted, fake, launched_labels};
use tenon_api::NodeClaim;
use tenon_api::hash::NODEPOOL_HASH_VERSION;
use tenon_core::disruption::candidates::Candidate;
use tenon_core::disruption::claim_conditions;
use tenon_core::disruption::{DefaultPolicies, DisruptionDecision, DisruptionPlan, Method, disrupt, drift_eligible};
use tenon_core::instancetype::InstanceType;
use tenon_core::model::{ClusterSnapshot, DisruptionReason};
use tenon_core::orchestration::command::{self, Command, Replacement, Step, VALIDATION_MS, stale_marks};
use tenon_core::plan::NewNodeClaim;

/// `mostExpensiveInstance` of Karpenter's disruption suite (`fake.InstanceTypesAssorted()`):
/// the priciest on-demand type, with its one offering.
const MOST_EXPENSIVE: &str = "64-cpu-128-mem-amd64-linux-test-zone-1-on-demand";
/// The NodeClaims' allocatable in the drift suite's `BeforeEach`.
const ALLOCATABLE: &str = "{cpu: \"32\", pods: \"100\"}";
const MINUTE: i64 = 60;
const HOUR: i64 = 3600;
/// When the nodes of these cases were launched and initialized (two hours after `NOW`, so
/// that earlier events can be written too).
const INITIALIZED: i64 = NOW + 2 * HOUR;
/// The NodeClaim disruption suite's instance type `it`.
const IT: &str = "it-instance-type";
const ZONE_1A: &str = "test-zone-1a";
/// A ReplicaSet-owned pod (Karpenter's `test.Pod` with the suite's ReplicaSet owner).
const RS_OWNED: &str =
    "ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: rs-uid, controller: true}]";

/// `t` (seconds since the epoch, within a day after `NOW`) in RFC 3339.
fn at(t: i64) -> String {
    let secs = t - NOW;
    assert!((0..86_400).contains(&secs), "{t} is outside the day these cases run in");
    format!("2026-11-30T{:02}:{:02}:{:02}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

fn time<T: serde::de::DeserializeOwned>(t: i64) -> T {
    serde_yaml::from_str(&format!("\"{}\"", at(t))).expect("time")
}

fn condition(kind: &str, status: &str, reason: &str, t: i64) -> String {
    format!(
        "{{type: {kind}, status: \"{status}\", reason: {reason}, message: \"\", lastTransitionTime: \"{}\"}}",
        at(t)
    )
}

/// The snapshot the controller decides from now, and its decision.
fn decide(c: &Cluster) -> (ClusterSnapshot, DisruptionDecision) {
    let snap = c.snapshot();
    let d = disrupt(&snap, &DefaultPolicies);
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

fn claim_mut<'a>(c: &'a mut Cluster, name: &str) -> &'a mut NodeClaim {
    c.objects.nodeclaims.iter_mut().find(|n| n.metadata.name.as_deref() == Some(name)).expect("NodeClaim")
}

fn node_mut<'a>(c: &'a mut Cluster, name: &str) -> &'a mut core::Node {
    c.objects.nodes.iter_mut().find(|n| n.metadata.name.as_deref() == Some(name)).expect("Node")
}

/// The names of the plan's candidates.
fn names(snap: &ClusterSnapshot, plan: &DisruptionPlan) -> Vec<String> {
    let mut v: Vec<String> = plan.candidates.iter().map(|&n| snap.nodes[n].name.clone()).collect();
    v.sort();
    v
}

// ---------------------------------------------------------------------------------------
// disruption/drift_test.go: the Drift method.
// ---------------------------------------------------------------------------------------

/// Karpenter's disruption suite catalog, a minute after the nodes were initialized (the
/// suite's consolidateAfter of 1h has not passed: no node is consolidatable).
fn suite() -> Cluster {
    let mut c = Cluster::new(assorted());
    c.now = INITIALIZED + MINUTE;
    c
}

/// NodePool `name`: consolidateAfter `after`, one budget of `budget`, `spec` more lines
/// under `template.spec` (indented 6).
fn nodepool(c: &mut Cluster, name: &str, after: &str, budget: &str, spec: &str) {
    c.nodepool(
        name,
        &format!(
            "  template:\n    spec:\n      requirements: []\n{spec}  disruption:\n    consolidateAfter: {after}\n    budgets: [{{nodes: \"{budget}\"}}]\n"
        ),
    );
}

/// The drift suite's `nodePool`: consolidateAfter 1h, every node may go.
fn default_nodepool(c: &mut Cluster) {
    nodepool(c, "default", "1h", "100%", "");
}

/// A NodeClaim `name` of NodePool `pool` launched as catalog type `it` (its first offering's
/// zone and capacity type), and its Node `name`, registered, initialized and Ready
/// (`test.NodeClaimAndNode` then `ExpectMakeNodesAndNodeClaimsInitializedAndStateUpdated`).
fn node(c: &mut Cluster, name: &str, pool: &str, it: &str, allocatable: &str) {
    c.initialized_node(name, pool, it, allocatable, INITIALIZED);
}

/// `node` of the suite's `mostExpensiveInstance` with the suite's allocatable.
fn expensive(c: &mut Cluster, name: &str, pool: &str) {
    node(c, name, pool, MOST_EXPENSIVE, ALLOCATABLE);
}

/// Records NodeClaim `name` as drifted since `since` (`StatusConditions().SetTrue(Drifted)`).
fn drifted(c: &mut Cluster, name: &str, since: i64) {
    let cond = serde_yaml::from_str(&condition("Drifted", "True", "Drifted", since)).expect("condition");
    claim_mut(c, name).status.as_mut().expect("status").conditions.push(cond);
}

fn annotate_node(c: &mut Cluster, name: &str, key: &str, value: &str) {
    node_mut(c, name).metadata.annotations.get_or_insert_default().insert(key.into(), value.into());
}

/// How many nodes Karpenter's Drift method finds eligible (its `EligibleNodes{reason="drifted"}`
/// gauge): drifted, and disruptable now or under a terminationGracePeriod.
fn eligible_drifted(snap: &ClusterSnapshot, d: &DisruptionDecision) -> usize {
    d.candidates.iter().filter(|c| drift_eligible(snap, c)).count()
}

/// Creates a replacement as the command's execution does: a NodeClaim launched as the
/// cheapest option (Karpenter's fake `Create`), then registered and initialized
/// (`ExpectMakeNewNodeClaimsReady`).
fn launch(c: &mut Cluster, snap: &ClusterSnapshot, nc: &NewNodeClaim) -> String {
    let n = c
        .objects
        .nodeclaims
        .iter()
        .filter(|x| x.metadata.name.as_deref().is_some_and(|n| n.starts_with("replacement-")))
        .count();
    let name = format!("replacement-{n}");
    let labels = launched_labels(snap, nc);
    let it = labels["node.kubernetes.io/instance-type"].clone();
    let catalog = c.catalog.clone();
    let a = catalog.iter().find(|t| t.name == it).expect("launched type").allocatable().clone();
    let alloc = format!("{{cpu: \"{}m\", memory: \"{}\", pods: \"{}\"}}", a.cpu, a.memory, a.pods);
    node(c, &name, &nc.nodepool_name, &it, &alloc);
    name
}

/// Starts `plan`, decided over `snap`, as the orchestration queue does: re-checked
/// [`VALIDATION_MS`] later over the objects as they are then (the commands under way, `cmds`,
/// held), then executed: its candidates marked, its replacements created.
fn start(c: &mut Cluster, cmds: &[Command<()>], snap: &ClusterSnapshot, plan: &DisruptionPlan) -> Command<()> {
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
    );
    c.now += VALIDATION_MS / 1000;
    let now = c.now * 1000;
    assert_eq!(cmd.step(now, &[]), Step::Validate);
    let mut then = c.snapshot();
    command::hold(&mut then, &command::held(cmds));
    let types = plan.replacement_types(snap);
    if let Some(why) = command::validate(&then, &DefaultPolicies, plan.method, &candidates, &types) {
        panic!("the command was abandoned at validation: {why}");
    }
    let created = plan.replacements.iter().map(|nc| launch(c, snap, nc)).collect();
    cmd.execute(created, now);
    cmd
}

/// Finishes a started command: its replacements Initialized, its candidates deleted with
/// their pods (`ExpectNodeClaimsCascadeDeletion`). Returns the NodeClaims deleted.
fn finish(c: &mut Cluster, cmd: &Command<()>) -> Vec<String> {
    let ready = vec![Replacement::Initialized; cmd.replacements.len()];
    assert_eq!(cmd.step(c.now * 1000, &ready), Step::Delete);
    let gone: Vec<String> = cmd.candidates.iter().map(|(_, n)| n.clone()).collect();
    let on = |n: Option<&String>| n.is_some_and(|n| gone.contains(n));
    c.objects.nodeclaims.retain(|nc| !on(nc.status.as_ref().and_then(|s| s.node_name.as_ref())));
    c.objects.nodes.retain(|n| !on(n.metadata.name.as_ref()));
    c.objects.pods.retain(|p| !on(p.spec.as_ref().and_then(|s| s.node_name.as_ref())));
    cmd.candidates.iter().map(|(nc, _)| nc.clone()).collect()
}

/// [`start`] then [`finish`].
fn carry_out(c: &mut Cluster, snap: &ClusterSnapshot, plan: &DisruptionPlan) -> Vec<String> {
    let cmd = start(c, &[], snap, plan);
    finish(c, &cmd)
}

/// `n` reconciles of the disruption controller, each starting the command it decides (the
/// commands under way held in the next rounds).
fn reconcile(c: &mut Cluster, n: usize) -> Vec<Command<()>> {
    let mut cmds = Vec::new();
    for _ in 0..n {
        let mut s = c.snapshot();
        command::hold(&mut s, &command::held(&cmds));
        let d = disrupt(&s, &DefaultPolicies);
        if let Some(plan) = d.plan {
            let cmd = start(c, &cmds, &s, &plan);
            cmds.push(cmd);
        }
    }
    cmds
}

/// karpenter:pkg/controllers/disruption/drift_test.go:79
#[test]
fn eligible_drifted_nodes_are_those_drifted_and_disruptable() {
    let mut c = suite();
    default_nodepool(&mut c);
    expensive(&mut c, "node-1", "default");
    c.bound("{name: p, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}", "node-1", "");
    // The `EligibleNodes{reason="drifted"}` gauge is the controller's; the decision's part is
    // which nodes Drift may take.
    let (snap, d) = decide(&c);
    assert_eq!(eligible_drifted(&snap, &d), 0);
    assert_eq!(d.evaluated, 0);
    assert!(d.plan.is_none());

    c.objects.pods[0].metadata.annotations = None;
    drifted(&mut c, "node-1", INITIALIZED);
    let (snap, d) = decide(&c);
    assert_eq!(eligible_drifted(&snap, &d), 1);
    assert_eq!(d.plan.expect("drift takes it").method, Method::Drift);
}

/// Ten drifted nodes of `default` (budget 30%), the first `with_pods` with a 1-CPU pod each.
fn ten_drifted_nodes(c: &mut Cluster, drifted_count: usize, with_pods: usize) {
    nodepool(c, "default", "1h", "30%", "");
    for i in 0..10 {
        let name = format!("node-{i}");
        expensive(c, &name, "default");
        if i < drifted_count {
            drifted(c, &name, INITIALIZED);
        }
        if i < with_pods {
            let spec = "  containers: [{name: c, image: i, resources: {requests: {cpu: \"1\"}}}]\n";
            c.bound(&format!("{{name: p-{i}, labels: {{app: test}}, {RS_OWNED}}}"), &name, spec);
        }
    }
}

/// karpenter:pkg/controllers/disruption/drift_test.go:121
#[test]
fn a_30_percent_budget_allows_three_of_ten_drifted_nodes() {
    let mut c = suite();
    ten_drifted_nodes(&mut c, 10, 0);
    let (snap, d) = decide(&c);
    // `NodePoolAllowedDisruptions{reason="drifted"}` and `NodePoolNodesConsumingBudgets`.
    assert_eq!(d.allowed[&("default".to_string(), DisruptionReason::Drifted)].allowed, 3);
    let consuming = snap.nodes.iter().filter_map(|n| n.claim.as_ref()).filter(|c| c.disrupting || !c.ready).count();
    assert_eq!(consuming, 0);
    // One candidate a command, as Karpenter's Drift.ComputeCommands; the budget allows three.
    let plan = d.plan.expect("drift");
    assert_eq!((plan.method, plan.candidates.len()), (Method::Drift, 1));
}

/// karpenter:pkg/controllers/disruption/drift_test.go:159
#[test]
fn commands_under_way_count_against_the_budget() {
    let mut c = suite();
    ten_drifted_nodes(&mut c, 5, 5);
    // Five reconciles: each starts one command (one non-empty node each) until the budget
    // of 3 is spent.
    let cmds = reconcile(&mut c, 5);
    // Three nodes marked (tainted karpenter.sh/disrupted by the shell).
    assert_eq!(cmds.len(), 3);
    assert!(cmds.iter().all(|cmd| cmd.candidates.len() == 1 && cmd.replacements.is_empty()));
    for cmd in &cmds {
        finish(&mut c, cmd);
    }
    assert_eq!(nodeclaims(&c).len(), 7);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:232
#[test]
fn budgets_of_several_nodepools_are_each_respected() {
    let mut c = suite();
    default_nodepool(&mut c);
    let pools: Vec<String> = (0..10).map(|i| format!("np-{i}")).collect();
    for p in &pools {
        nodepool(&mut c, p, "Never", "1", "      expireAfter: Never\n");
        for i in 0..3 {
            let name = format!("{p}-node-{i}");
            expensive(&mut c, &name, p);
            drifted(&mut c, &name, INITIALIZED);
            if i < 2 {
                let spec = "  containers: [{name: c, image: i, resources: {requests: {cpu: \"1\"}}}]\n";
                c.bound(&format!("{{name: {name}-pod, labels: {{app: test}}, {RS_OWNED}}}"), &name, spec);
            }
        }
    }
    let (_, d) = decide(&c);
    for p in &pools {
        assert_eq!(d.allowed[&(p.clone(), DisruptionReason::Drifted)].allowed, 1, "{p}");
    }
    let cmds = reconcile(&mut c, 30);
    let mut deleted = Vec::new();
    for cmd in &cmds {
        deleted.extend(finish(&mut c, cmd));
    }
    assert_eq!(nodeclaims(&c).len(), 20);
    for p in &pools {
        assert_eq!(deleted.iter().filter(|nc| nc.starts_with(&format!("{p}-"))).count(), 1, "{p}");
    }
    // Ten decisions (`DecisionsPerformedTotal{reason="drifted"}`), one per NodePool.
    assert_eq!(cmds.len(), 10);
    assert!(cmds.iter().all(|cmd| cmd.candidates.len() == 1));
}

/// The Drift context's `BeforeEach`: `nodePool`, and NodeClaim `node-1`, drifted.
fn drift_context() -> Cluster {
    let mut c = suite();
    default_nodepool(&mut c);
    expensive(&mut c, "node-1", "default");
    drifted(&mut c, "node-1", INITIALIZED);
    c
}

/// karpenter:pkg/controllers/disruption/drift_test.go:345
#[test]
fn drift_moves_on_when_the_first_drifted_nodes_pods_cannot_move() {
    let mut c = drift_context();
    // 150 CPUs: no instance type can take it.
    c.bound("{name: big}", "node-1", "  containers: [{name: c, image: i, resources: {requests: {cpu: \"150\"}}}]\n");
    node(&mut c, "node-2", "default", MOST_EXPENSIVE, "{cpu: \"1\", pods: \"100\"}");
    drifted(&mut c, "node-2", INITIALIZED);
    c.bound("{name: small}", "node-2", "  containers: [{name: c, image: i, resources: {requests: {cpu: \"1\"}}}]\n");
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("one command");
    assert_eq!(plan.method, Method::Drift);
    assert_eq!(names(&snap, &plan), ["node-2"]);
    assert_eq!(carry_out(&mut c, &snap, &plan), ["node-2"]);
    assert_eq!(nodeclaims(&c), ["node-1", "replacement-0"]);
    assert_eq!(node_names(&c).len(), 2);
}

/// Whether the round leaves `node-1` where it is, creating nothing.
fn keeps_the_node(c: &Cluster) -> DisruptionDecision {
    let (_, d) = decide(c);
    assert!(d.plan.is_none(), "{:?}", d.plan);
    assert_eq!(nodeclaims(c), ["node-1"]);
    d
}

/// karpenter:pkg/controllers/disruption/drift_test.go:404
#[test]
fn a_node_without_the_drifted_condition_is_left_alone() {
    let mut c = suite();
    default_nodepool(&mut c);
    expensive(&mut c, "node-1", "default");
    let d = keeps_the_node(&c);
    assert_eq!(d.candidates[0].drifted, None);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:416
#[test]
fn a_node_with_the_drifted_condition_false_is_left_alone() {
    let mut c = suite();
    default_nodepool(&mut c);
    expensive(&mut c, "node-1", "default");
    let cond = serde_yaml::from_str(&condition("Drifted", "False", "NotDrifted", INITIALIZED)).expect("condition");
    claim_mut(&mut c, "node-1").status.as_mut().expect("status").conditions.push(cond);
    let d = keeps_the_node(&c);
    assert_eq!(d.candidates[0].drifted, None);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:428
#[test]
fn a_drifted_node_with_do_not_disrupt_is_left_alone() {
    let mut c = drift_context();
    annotate_node(&mut c, "node-1", "karpenter.sh/do-not-disrupt", "true");
    let d = keeps_the_node(&c);
    assert_eq!(node_names(&c), ["node-1"]);
    assert!(d.blocked.iter().any(|b| b.reason.contains("do-not-disrupt")), "{:?}", d.blocked);
}

/// `node-1` (drifted, with a ReplicaSet pod `p`) and `node-2` (not drifted) of the suite's
/// type: drift deletes `node-1`, its pod fitting on `node-2`.
fn deletes_node_1_whose_pod_fits_on_node_2(c: &mut Cluster) {
    expensive(c, "node-2", "default");
    let (snap, d) = decide(c);
    let plan = d.plan.expect("drift");
    assert_eq!(plan.method, Method::Drift);
    assert_eq!(names(&snap, &plan), ["node-1"]);
    assert!(plan.replacements.is_empty(), "its pod fits on node-2");
    assert_eq!(carry_out(c, &snap, &plan), ["node-1"]);
    assert_eq!(nodeclaims(c), ["node-2"]);
    assert_eq!(node_names(c), ["node-2"]);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:442
#[test]
fn a_drifted_node_with_do_not_disrupt_false_is_deleted() {
    let mut c = drift_context();
    annotate_node(&mut c, "node-1", "karpenter.sh/do-not-disrupt", "false");
    c.bound(&format!("{{name: p, labels: {{app: test}}, {RS_OWNED}}}"), "node-1", "");
    deletes_node_1_whose_pod_fits_on_node_2(&mut c);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:500
#[test]
fn a_do_not_disrupt_pod_keeps_its_drifted_node_without_a_replacement() {
    let mut c = drift_context();
    c.bound("{name: p, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}", "node-1", "");
    let d = keeps_the_node(&c);
    assert!(d.blocked.iter().any(|b| b.reason.contains("do-not-disrupt")), "{:?}", d.blocked);
}

/// A drift decision under a terminationGracePeriod of 5m: whatever it decides for `node-1`,
/// it launches nothing for pods that cannot be evicted now, and deletes nothing yet.
fn no_replacement_under_a_grace_period(c: &Cluster) {
    let (_, d) = decide(c);
    if let Some(plan) = &d.plan {
        assert!(plan.replacements.is_empty(), "a replacement for pods that cannot move: {plan:?}");
    }
    assert_eq!(nodeclaims(c), ["node-1"]);
}

/// The Drift context under a NodePool terminationGracePeriod of 5m (stamped on the NodeClaim).
fn drift_context_with_grace_period() -> Cluster {
    let mut c = suite();
    nodepool(&mut c, "default", "1h", "100%", "      terminationGracePeriod: 5m\n");
    expensive(&mut c, "node-1", "default");
    drifted(&mut c, "node-1", INITIALIZED);
    claim_mut(&mut c, "node-1").spec.termination_grace_period = Some("5m".into());
    c
}

/// karpenter:pkg/controllers/disruption/drift_test.go:521
#[test]
fn no_replacement_for_a_do_not_disrupt_pod_under_a_grace_period() {
    // Karpenter's case names the NodePool's terminationGracePeriod (its body leaves it unset,
    // which is case :500): here it is set.
    let mut c = drift_context_with_grace_period();
    c.bound("{name: p, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}", "node-1", "");
    no_replacement_under_a_grace_period(&c);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:543
#[test]
fn no_replacement_for_a_pdb_blocked_pod_under_a_grace_period() {
    let mut c = drift_context_with_grace_period();
    c.bound("{name: p, labels: {test: value}}", "node-1", "");
    c.pdb("metadata: {name: pdb, namespace: default}\nspec: {selector: {matchLabels: {test: value}}, maxUnavailable: 0}\nstatus: {disruptionsAllowed: 0, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1}");
    no_replacement_under_a_grace_period(&c);
}

/// A pod bound to `node` with `karpenter.sh/do-not-disrupt: <value>`, created and started
/// at `started`.
fn do_not_disrupt_for(c: &mut Cluster, name: &str, node: &str, value: &str, started: i64) {
    c.bound(
        &format!(
            "{{name: {name}, creationTimestamp: \"{}\", annotations: {{karpenter.sh/do-not-disrupt: \"{value}\"}}}}",
            at(started)
        ),
        node,
        "",
    );
    c.objects.pods.last_mut().unwrap().status.as_mut().unwrap().start_time = Some(time(started));
}

/// karpenter:pkg/controllers/disruption/drift_test.go:569
#[test]
fn an_active_do_not_disrupt_duration_holds_drift_until_it_passes() {
    let mut c = drift_context();
    let started = c.now;
    do_not_disrupt_for(&mut c, "p", "node-1", "2m", started);
    keeps_the_node(&c);
    c.now = started + 3 * MINUTE;
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("the grace period has passed");
    assert_eq!((plan.method, names(&snap, &plan)), (Method::Drift, vec!["node-1".to_string()]));
    // A replacement for the pod: two NodeClaims.
    let cmd = start(&mut c, &[], &snap, &plan);
    assert_eq!(cmd.replacements.len(), 1);
    assert_eq!(nodeclaims(&c).len(), 2);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:599
#[test]
fn an_invalid_do_not_disrupt_value_does_not_hold_drift() {
    let mut c = drift_context();
    c.bound(
        &format!("{{name: p, labels: {{app: test}}, annotations: {{karpenter.sh/do-not-disrupt: invalid-format}}, {RS_OWNED}}}"),
        "node-1",
        "",
    );
    deletes_node_1_whose_pod_fits_on_node_2(&mut c);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:656
#[test]
fn the_longest_do_not_disrupt_duration_holds_drift() {
    let mut c = drift_context();
    let started = c.now;
    do_not_disrupt_for(&mut c, "p-1", "node-1", "1m", started);
    do_not_disrupt_for(&mut c, "p-2", "node-1", "3m", started);
    keeps_the_node(&c);
    c.now = started + 2 * MINUTE;
    let d = keeps_the_node(&c);
    assert!(d.blocked.iter().any(|b| b.reason.contains("default/p-2")), "{:?}", d.blocked);
    c.now = started + 4 * MINUTE;
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("every grace period has passed");
    let cmd = start(&mut c, &[], &snap, &plan);
    assert_eq!(cmd.replacements.len(), 1);
    assert_eq!(nodeclaims(&c).len(), 2);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:703
#[test]
fn a_drifted_node_is_replaced() {
    let mut c = drift_context();
    c.bound(&format!("{{name: p, labels: {{app: test}}, {RS_OWNED}}}"), "node-1", "");
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("one command");
    assert_eq!(plan.method, Method::Drift);
    assert_eq!(plan.replacements.len(), 1);
    assert_eq!(carry_out(&mut c, &snap, &plan), ["node-1"]);
    // A new NodeClaim and Node, not the original.
    assert_eq!(nodeclaims(&c), ["replacement-0"]);
    assert_eq!(node_names(&c), ["replacement-0"]);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:752
#[test]
fn a_drifted_node_is_deleted_when_its_pods_fit_elsewhere() {
    let mut c = drift_context();
    c.bound(&format!("{{name: p, labels: {{app: test}}, {RS_OWNED}}}"), "node-1", "");
    deletes_node_1_whose_pod_fits_on_node_2(&mut c);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:809
#[test]
fn an_empty_drifted_node_is_deleted_when_consolidation_is_disabled() {
    let mut c = suite();
    nodepool(&mut c, "default", "Never", "100%", "");
    expensive(&mut c, "node-1", "default");
    drifted(&mut c, "node-1", INITIALIZED);
    let (snap, d) = decide(&c);
    assert_eq!(eligible_drifted(&snap, &d), 1);
    let plan = d.plan.expect("drift deletes it");
    assert_eq!(plan.method, Method::Drift);
    assert!(plan.replacements.is_empty());
    assert_eq!(carry_out(&mut c, &snap, &plan), ["node-1"]);
    assert!(nodeclaims(&c).is_empty() && node_names(&c).is_empty());
}

/// karpenter:pkg/controllers/disruption/drift_test.go:830
#[test]
fn empty_drifted_nodes_go_before_non_empty_ones() {
    let mut c = suite();
    nodepool(&mut c, "default", "Never", "100%", "");
    expensive(&mut c, "node-1", "default");
    drifted(&mut c, "node-1", INITIALIZED);
    c.bound(&format!("{{name: p, labels: {{app: test}}, {RS_OWNED}}}"), "node-1", "");
    expensive(&mut c, "node-2", "default");
    drifted(&mut c, "node-2", INITIALIZED);
    let (snap, d) = decide(&c);
    assert_eq!(eligible_drifted(&snap, &d), 2);
    // One decision (`DecisionsPerformedTotal{reason="drifted"}` 1): the empty node.
    let plan = d.plan.expect("drift");
    assert_eq!(plan.method, Method::Drift);
    assert_eq!(names(&snap, &plan), ["node-2"]);
    assert_eq!(carry_out(&mut c, &snap, &plan), ["node-2"]);
    assert_eq!(nodeclaims(&c), ["node-1"]);
    assert_eq!(node_names(&c), ["node-1"]);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:899
#[test]
fn an_empty_drifted_consolidatable_node_is_deleted() {
    // Consolidatable: consolidateAfter (1h) has passed since the node was initialized. Tenon's
    // Emptiness, which runs before Drift (as Karpenter's does), takes it; either way the
    // node goes without a replacement.
    let mut c = drift_context();
    c.now = INITIALIZED + HOUR;
    let (snap, d) = decide(&c);
    assert!(d.candidates[0].consolidatable);
    assert_eq!(eligible_drifted(&snap, &d), 1);
    let plan = d.plan.expect("deleted");
    assert!(plan.replacements.is_empty());
    assert_eq!(carry_out(&mut c, &snap, &plan), ["node-1"]);
    assert!(nodeclaims(&c).is_empty() && node_names(&c).is_empty());
}

/// karpenter:pkg/controllers/disruption/drift_test.go:920
#[test]
fn a_drifted_node_is_unmarked_when_its_replacement_is_deleted() {
    let mut c = drift_context();
    c.bound(&format!("{{name: p, labels: {{app: test}}, {RS_OWNED}}}"), "node-1", "");
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a replace");
    assert_eq!(plan.replacements.len(), 1);
    let cmd = start(&mut c, &[], &snap, &plan);
    assert_eq!(nodeclaims(&c), ["node-1", "replacement-0"]);
    // The replacement is deleted: the command is abandoned and its candidate unmarked (the
    // shell removes the karpenter.sh/disrupted taint).
    let step = cmd.step(c.now * 1000 + 1000, &[Replacement::Gone]);
    assert!(matches!(step, Step::Abandon { marked: true, .. }), "{step:?}");
    // With the command dropped, a mark left on node-1 would be swept as stale.
    assert_eq!(stale_marks([("node-1", "node-1")], &[] as &[Command<()>]), [("node-1", "node-1")]);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:968
#[test]
fn a_drifted_node_may_be_replaced_by_several_nodes() {
    let current = fake("current-on-demand").offerings(&[("on-demand", ZONE_1A, 0.5, false)]).build();
    let f = fake("replacement-on-demand").resources(3, 4 * GIB, 5);
    let replacement = f.offerings(&[("on-demand", ZONE_1A, 0.3, true)]).build();
    let mut c = Cluster::new(Arc::new(vec![current, replacement]));
    c.now = INITIALIZED + MINUTE;
    default_nodepool(&mut c);
    node(&mut c, "node-1", "default", "current-on-demand", "{cpu: \"8\"}");
    drifted(&mut c, "node-1", INITIALIZED);
    for i in 0..3 {
        let spec = "  containers: [{name: c, image: i, resources: {requests: {cpu: \"2\"}}}]\n";
        c.bound(&format!("{{name: p-{i}, labels: {{app: test}}, {RS_OWNED}}}"), "node-1", spec);
    }
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a replace");
    assert_eq!(plan.method, Method::Drift);
    // One replacement per pod: a 3-CPU type holds one 2-CPU pod.
    assert_eq!(plan.replacements.len(), 3);
    assert_eq!(carry_out(&mut c, &snap, &plan), ["node-1"]);
    assert_eq!(nodeclaims(&c).len(), 3);
    assert_eq!(node_names(&c).len(), 3);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:1052
#[test]
fn non_empty_drifted_nodes_go_one_at_a_time_earliest_drift_first() {
    let mut c = drift_context();
    let spec = "  containers: [{name: c, image: i, resources: {requests: {cpu: \"30\"}}}]\n";
    c.bound(&format!("{{name: p-1, labels: {{app: test}}, {RS_OWNED}}}"), "node-1", spec);
    node(&mut c, "node-2", "default", MOST_EXPENSIVE, "{cpu: \"32\"}");
    // Drifted an hour before node-1.
    drifted(&mut c, "node-2", INITIALIZED - HOUR);
    c.bound(&format!("{{name: p-2, labels: {{app: test}}, {RS_OWNED}}}"), "node-2", spec);
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("one command");
    assert_eq!(names(&snap, &plan), ["node-2"]);
    assert_eq!(carry_out(&mut c, &snap, &plan), ["node-2"]);
    assert_eq!(nodeclaims(&c), ["node-1", "replacement-0"]);
}

/// karpenter:pkg/controllers/disruption/drift_test.go:1129
#[test]
fn static_nodepool_nodes_are_not_drifted_away() {
    let mut c = suite();
    c.nodepool("static", "  replicas: 2\n  template:\n    spec:\n      requirements: []\n");
    for name in ["static-1", "static-2"] {
        node(&mut c, name, "static", MOST_EXPENSIVE, "{cpu: \"10\", memory: 1000Mi, pods: \"2\"}");
        drifted(&mut c, name, INITIALIZED);
    }
    let (snap, d) = decide(&c);
    assert_eq!(eligible_drifted(&snap, &d), 0);
    assert!(d.plan.is_none(), "{:?}", d.plan);
}

// ---------------------------------------------------------------------------------------
// nodeclaim/disruption: the Drifted and Consolidatable conditions.
// ---------------------------------------------------------------------------------------

/// The suite's instance type `it`: 100 CPU, 100Gi, arch `arch`, linux, spot and on-demand in
/// test-zone-1a at its resource price.
fn it() -> Arc<Vec<InstanceType>> {
    let f = fake(IT).resources(100, 100 * GIB, 5).arch("arch").os(&["linux"]);
    let p = f.price();
    Arc::new(vec![f.offerings(&[("spot", ZONE_1A, p, true), ("on-demand", ZONE_1A, p, true)]).build()])
}

/// A cluster of the suite's catalog, ten minutes after the NodeClaims were initialized.
fn claims_suite(catalog: Arc<Vec<InstanceType>>) -> Cluster {
    let mut c = Cluster::new(catalog);
    c.now = INITIALIZED + 10 * MINUTE;
    c
}

/// A NodeClaim (with its Node) as the NodeClaim disruption suite builds it.
struct Claim<'a> {
    name: &'a str,
    /// Labels of the NodeClaim and its Node, over the suite's (`karpenter.sh/nodepool:
    /// default`, `it`, test-zone-1a, spot); an empty value drops the label.
    labels: Vec<(&'a str, &'a str)>,
    annotations: Vec<(&'a str, &'a str)>,
    /// The `Launched` and `Initialized` conditions' status (`None`: absent).
    launched: Option<&'a str>,
    initialized: Option<&'a str>,
    /// Conditions recorded True on the NodeClaim by an earlier reconcile.
    recorded: Vec<&'a str>,
    last_pod_event: Option<i64>,
    node_class: &'a str,
}

fn claim(name: &str) -> Claim<'_> {
    Claim {
        name,
        labels: vec![],
        annotations: vec![],
        launched: Some("True"),
        initialized: Some("True"),
        recorded: vec![],
        last_pod_event: None,
        node_class: "{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}",
    }
}

fn flow(map: &BTreeMap<String, String>) -> String {
    map.iter().map(|(k, v)| format!("{k}: \"{v}\"")).collect::<Vec<_>>().join(", ")
}

fn add(c: &mut Cluster, k: Claim) {
    let mut labels: BTreeMap<String, String> = [
        ("karpenter.sh/nodepool", "default"),
        ("node.kubernetes.io/instance-type", IT),
        ("topology.kubernetes.io/zone", ZONE_1A),
        ("karpenter.sh/capacity-type", "spot"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for (key, v) in &k.labels {
        if v.is_empty() {
            labels.remove(*key);
        } else {
            labels.insert(key.to_string(), v.to_string());
        }
    }
    let annotations: BTreeMap<String, String> =
        k.annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    let mut conds = Vec::new();
    if let Some(s) = k.launched {
        conds.push(condition("Launched", s, "Launched", INITIALIZED));
    }
    if let Some(s) = k.initialized {
        conds.push(condition("Initialized", s, "Initialized", INITIALIZED));
    }
    for r in &k.recorded {
        conds.push(condition(r, "True", r, INITIALIZED));
    }
    let event = k.last_pod_event.map_or(String::new(), |t| format!(", lastPodEventTime: \"{}\"", at(t)));
    let (name, created) = (k.name, at(INITIALIZED));
    let alloc = "{cpu: \"100\", memory: 100Gi, pods: \"5\"}";
    c.objects.nodeclaims.push(
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: {name}, creationTimestamp: \"{created}\", labels: {{{}}}, annotations: {{{}}}}}\nspec: {{requirements: [], nodeClassRef: {}}}\nstatus: {{nodeName: {name}, providerID: fake://{name}, allocatable: {alloc}, capacity: {alloc}, conditions: [{}]{event}}}\n",
            flow(&labels),
            flow(&annotations),
            k.node_class,
            conds.join(", ")
        ))
        .expect("NodeClaim YAML"),
    );
    labels.insert("kubernetes.io/hostname".into(), name.into());
    if k.initialized == Some("True") {
        labels.insert("karpenter.sh/initialized".into(), "true".into());
    }
    c.node(&format!(
        "metadata: {{name: {name}, creationTimestamp: \"{created}\", labels: {{{}}}}}\nspec: {{providerID: fake://{name}}}\nstatus: {{allocatable: {alloc}, capacity: {alloc}, conditions: [{{type: Ready, status: \"True\"}}]}}\n",
        flow(&labels)
    ));
}

/// The template hash of NodePool `pool` as decisions compare it.
fn pool_hash(c: &Cluster, pool: &str) -> String {
    c.snapshot().nodepools.iter().find(|t| t.name == pool).expect("NodePool").hash.clone()
}

/// One disruption round as the controller runs it: the snapshot, each NodeClaim's cloud
/// drift looked up afresh (`cloud`: the NodeClaims the cloud provider reports drifted, and
/// why; none else), and the decision whose candidates' conditions it writes.
fn round(c: &Cluster, cloud: &[(&str, &str)]) -> (ClusterSnapshot, DisruptionDecision) {
    let mut snap = c.snapshot();
    for claim in snap.nodes.iter_mut().filter_map(|n| n.claim.as_mut()) {
        claim.drift = cloud.iter().find(|(nc, _)| *nc == claim.nodeclaim).map(|(_, why)| why.to_string());
    }
    let d = disrupt(&snap, &DefaultPolicies);
    (snap, d)
}

/// The candidate of NodeClaim `nodeclaim` (whose conditions the controller writes), if any.
fn candidate<'a>(snap: &ClusterSnapshot, d: &'a DisruptionDecision, nodeclaim: &str) -> Option<&'a Candidate> {
    d.candidates.iter().find(|c| snap.nodes[c.node].claim.as_ref().is_some_and(|x| x.nodeclaim == nodeclaim))
}

/// The Drifted condition's reason the round gives NodeClaim `nodeclaim` (`None`: removed).
fn drift_of(c: &Cluster, cloud: &[(&str, &str)], nodeclaim: &str) -> Option<String> {
    let (snap, d) = round(c, cloud);
    candidate(&snap, &d, nodeclaim).unwrap_or_else(|| panic!("{nodeclaim} is no candidate")).drifted.clone()
}

/// Whether the round finds NodeClaim `nodeclaim` consolidatable.
fn consolidatable(c: &Cluster, nodeclaim: &str) -> bool {
    let (snap, d) = round(c, &[]);
    candidate(&snap, &d, nodeclaim).unwrap_or_else(|| panic!("{nodeclaim} is no candidate")).consolidatable
}

/// NodeClaim `nodeclaim`'s conditions (type, status) once the round's `Consolidatable` and
/// `Drifted` are written (`claim_conditions::changed`, as the controller writes them).
fn written(c: &Cluster, cloud: &[(&str, &str)], nodeclaim: &str) -> Vec<(String, String)> {
    written_conditions(c, cloud, nodeclaim).into_iter().map(|c| (c.type_, c.status)).collect()
}

/// NodeClaim `nodeclaim`'s conditions, whole, once the round's are written.
fn written_conditions(c: &Cluster, cloud: &[(&str, &str)], nodeclaim: &str) -> Vec<tenon_api::common::Condition> {
    let (snap, d) = round(c, cloud);
    let now = Time(k8s_openapi::jiff::Timestamp::from_second(c.now).expect("now"));
    let nc = c.objects.nodeclaims.iter().find(|nc| nc.metadata.name.as_deref() == Some(nodeclaim)).expect("NodeClaim");
    claim_conditions::changed([nc], &snap, &d.candidates, &now)
        .pop()
        .map_or_else(|| nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default(), |(_, c)| c)
}

/// The reason of NodeClaim `nodeclaim`'s `Drifted` condition once the round writes, if True.
fn drifted_reason(c: &Cluster, cloud: &[(&str, &str)], nodeclaim: &str) -> Option<String> {
    written_conditions(c, cloud, nodeclaim)
        .into_iter()
        .find(|c| c.type_ == "Drifted" && c.status == "True")
        .map(|c| c.reason)
}

/// Whether NodeClaim `nodeclaim` has condition `t` True after the round writes.
fn has(c: &Cluster, cloud: &[(&str, &str)], nodeclaim: &str, t: &str) -> bool {
    written(c, cloud, nodeclaim).iter().any(|(ty, st)| ty == t && st == "True")
}

/// Whether NodeClaim `nodeclaim` has condition `t` at all (any status) after the round.
fn present(c: &Cluster, cloud: &[(&str, &str)], nodeclaim: &str, t: &str) -> bool {
    written(c, cloud, nodeclaim).iter().any(|(ty, _)| ty == t)
}

/// Whether NodeClaim `nodeclaim` is a candidate at all (the controller writes no condition
/// of a NodeClaim that is not).
fn is_candidate(c: &Cluster, cloud: &[(&str, &str)], nodeclaim: &str) -> bool {
    let (snap, d) = round(c, cloud);
    candidate(&snap, &d, nodeclaim).is_some()
}

/// The drift suite: `test.NodePool()` and its NodeClaim `nodeclaim`, stamped with the
/// NodePool's hash (no hash version).
fn drift_suite(catalog: Arc<Vec<InstanceType>>) -> Cluster {
    let mut c = claims_suite(catalog);
    c.default_nodepool();
    let hash = pool_hash(&c, "default");
    add(&mut c, Claim { annotations: vec![("karpenter.sh/nodepool-hash", &hash)], ..claim("nodeclaim") });
    c
}

const CLOUD_DRIFTED: [(&str, &str); 1] = [("nodeclaim", "drifted")];

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:83
#[test]
fn cloud_provider_drift_marks_the_nodeclaim_drifted() {
    let c = drift_suite(it());
    assert_eq!(drift_of(&c, &CLOUD_DRIFTED, "nodeclaim").as_deref(), Some("drifted"));
    assert_eq!(drifted_reason(&c, &CLOUD_DRIFTED, "nodeclaim").as_deref(), Some("drifted"), "Drifted=True written");
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:84
#[test]
fn nodeclaims_of_another_nodeclass_are_not_judged_for_drift() {
    let mut c = claims_suite(it());
    c.default_nodepool();
    let hash = pool_hash(&c, "default");
    add(
        &mut c,
        Claim {
            annotations: vec![("karpenter.sh/nodepool-hash", &hash)],
            node_class: "{group: karpenter.test.sh, kind: UnmanagedNodeClass, name: default}",
            ..claim("nodeclaim")
        },
    );
    assert!(!is_candidate(&c, &CLOUD_DRIFTED, "nodeclaim"));
    assert!(!present(&c, &CLOUD_DRIFTED, "nodeclaim", "Drifted"), "no Drifted condition written");
}

/// Karpenter's InstanceTypeNotFound drift, two hours after launch.
fn instance_type_not_found(mut c: Cluster) {
    c.now = INITIALIZED + 2 * HOUR;
    // The condition's reason is the part before ": " (the controller's split).
    let drift = drift_of(&c, &[], "nodeclaim");
    assert_eq!(drift.as_deref().and_then(|d| d.split(": ").next()), Some("InstanceTypeNotFound"), "{drift:?}");
    assert_eq!(drifted_reason(&c, &[], "nodeclaim").as_deref(), Some("InstanceTypeNotFound"), "Drifted=True written");
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:86
#[test]
fn a_nodeclaim_without_an_instance_type_label_is_drifted() {
    let mut c = claims_suite(it());
    c.default_nodepool();
    let hash = pool_hash(&c, "default");
    add(
        &mut c,
        Claim {
            labels: vec![("node.kubernetes.io/instance-type", "")],
            annotations: vec![("karpenter.sh/nodepool-hash", &hash)],
            ..claim("nodeclaim")
        },
    );
    instance_type_not_found(c);
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:95
#[test]
fn a_nodeclaim_of_a_vanished_instance_type_is_drifted() {
    // Karpenter's case lists no instance types at all; Tenon reads an empty catalog as one
    // that could not be listed and drifts nothing then, so the type is gone from a catalog
    // that still lists another.
    let f = fake("another-instance-type").resources(100, 100 * GIB, 5).arch("arch").os(&["linux"]);
    let p = f.price();
    let other = f.offerings(&[("spot", ZONE_1A, p, true), ("on-demand", ZONE_1A, p, true)]);
    instance_type_not_found(drift_suite(Arc::new(vec![other.build()])));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:104
#[test]
fn a_nodeclaim_of_an_instance_type_without_offerings_is_drifted() {
    let f = fake(IT).resources(100, 100 * GIB, 5).arch("arch").os(&["linux"]);
    instance_type_not_found(drift_suite(Arc::new(vec![f.offerings(&[]).build()])));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:116
#[test]
fn a_nodeclaim_without_a_compatible_offering_is_drifted() {
    let f = fake(IT).resources(100, 100 * GIB, 5).arch("arch").os(&["linux"]);
    let p = f.price();
    let other = f.offerings(&[("spot", "some-other-zone", p, true), ("on-demand", "some-other-zone", p, true)]);
    instance_type_not_found(drift_suite(Arc::new(vec![other.build()])));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:134
#[test]
fn static_drift_is_reported_before_cloud_provider_drift() {
    let mut c = claims_suite(it());
    c.default_nodepool();
    // Karpenter's NodePool hash annotation; Tenon computes the NodePool's hash from its spec,
    // which "test-123" is not either.
    c.objects.nodepools[0].metadata.annotations = Some(
        [
            ("karpenter.sh/nodepool-hash", "test-123456789"),
            ("karpenter.sh/nodepool-hash-version", NODEPOOL_HASH_VERSION),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    add(
        &mut c,
        Claim {
            annotations: vec![
                ("karpenter.sh/nodepool-hash", "test-123"),
                ("karpenter.sh/nodepool-hash-version", NODEPOOL_HASH_VERSION),
            ],
            ..claim("nodeclaim")
        },
    );
    assert_eq!(drift_of(&c, &CLOUD_DRIFTED, "nodeclaim").as_deref(), Some("NodePoolDrifted"));
    assert_eq!(drifted_reason(&c, &CLOUD_DRIFTED, "nodeclaim").as_deref(), Some("NodePoolDrifted"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:151
#[test]
fn requirement_drift_is_reported_before_cloud_provider_drift() {
    let mut c = claims_suite(it());
    c.nodepool(
        "default",
        "  template:\n    spec:\n      requirements: [{key: node.kubernetes.io/instance-type, operator: DoesNotExist}]\n",
    );
    let hash = pool_hash(&c, "default");
    add(&mut c, Claim { annotations: vec![("karpenter.sh/nodepool-hash", &hash)], ..claim("nodeclaim") });
    assert_eq!(drift_of(&c, &CLOUD_DRIFTED, "nodeclaim").as_deref(), Some("RequirementsDrifted"));
    assert_eq!(drifted_reason(&c, &CLOUD_DRIFTED, "nodeclaim").as_deref(), Some("RequirementsDrifted"));
}

/// A drifted-recorded NodeClaim whose `Launched` condition is `launched`, not initialized.
fn not_launched(launched: &str) -> Cluster {
    let mut c = claims_suite(it());
    c.default_nodepool();
    let hash = pool_hash(&c, "default");
    add(
        &mut c,
        Claim {
            annotations: vec![("karpenter.sh/nodepool-hash", &hash)],
            launched: Some(launched),
            initialized: None,
            recorded: vec!["Drifted"],
            ..claim("nodeclaim")
        },
    );
    c
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:166
#[test]
fn a_nodeclaim_not_yet_launched_is_not_drifted() {
    // The cloud would call it drifted; a NodeClaim not launched (so not initialized) is no
    // candidate, so nothing drifts it, and a recorded Drifted condition is removed.
    let c = not_launched("Unknown");
    assert!(!is_candidate(&c, &CLOUD_DRIFTED, "nodeclaim"));
    assert!(!present(&c, &CLOUD_DRIFTED, "nodeclaim", "Drifted"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:178
#[test]
fn a_nodeclaim_whose_launch_failed_is_not_drifted() {
    // As :166.
    let c = not_launched("False");
    assert!(!is_candidate(&c, &CLOUD_DRIFTED, "nodeclaim"));
    assert!(!present(&c, &CLOUD_DRIFTED, "nodeclaim", "Drifted"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:190
#[test]
fn a_nodeclaim_of_a_missing_nodepool_is_not_drifted() {
    let mut c = claims_suite(it());
    add(&mut c, claim("nodeclaim"));
    assert!(!is_candidate(&c, &CLOUD_DRIFTED, "nodeclaim"));
    assert!(!present(&c, &CLOUD_DRIFTED, "nodeclaim", "Drifted"), "no Drifted condition written");
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:198
#[test]
fn a_nodeclaim_no_longer_drifted_loses_its_drifted_condition() {
    let mut c = claims_suite(it());
    c.default_nodepool();
    let hash = pool_hash(&c, "default");
    add(
        &mut c,
        Claim {
            annotations: vec![("karpenter.sh/nodepool-hash", &hash)],
            recorded: vec!["Drifted"],
            ..claim("nodeclaim")
        },
    );
    // The recorded condition is what the snapshot reads; the round looks drift up afresh.
    assert!(c.snapshot().nodes[0].claim.as_ref().unwrap().drift.is_some());
    assert_eq!(drift_of(&c, &[], "nodeclaim"), None);
    assert!(!present(&c, &[], "nodeclaim", "Drifted"));
}

/// NodeRequirement Drift: NodeClaim `nodeclaim` with `labels` under NodePool requirements
/// `old` (flow YAML), then `new`: its drift under each.
fn requirement_drift(old: &str, new: &str, labels: &[(&str, &str)]) -> (Option<String>, Option<String>) {
    let mut c = claims_suite(it());
    c.nodepool("default", &format!("  template:\n    spec:\n      requirements: {old}\n"));
    let hash = pool_hash(&c, "default");
    add(
        &mut c,
        Claim {
            labels: labels.to_vec(),
            annotations: vec![("karpenter.sh/nodepool-hash", &hash)],
            ..claim("nodeclaim")
        },
    );
    // The reason the round judges, and the Drifted condition it writes on the NodeClaim
    // (Karpenter's cases read the condition).
    let judged = |c: &Cluster| {
        let drift = drift_of(c, &[], "nodeclaim");
        assert_eq!(has(c, &[], "nodeclaim", "Drifted"), drift.is_some(), "Drifted written as judged: {drift:?}");
        drift
    };
    let before = judged(&c);
    c.objects.nodepools[0].spec.template.spec.requirements = serde_yaml::from_str(new).expect("requirements");
    (before, judged(&c))
}

fn assert_requirement_drift(old: &str, new: &str, labels: &[(&str, &str)], drifted: bool) {
    let (before, after) = requirement_drift(old, new, labels);
    assert_eq!(before, None, "drifted under the old requirements");
    if drifted {
        assert_eq!(after.as_deref(), Some("RequirementsDrifted"));
    } else {
        assert_eq!(after, None);
    }
}

const ON_DEMAND: (&str, &str) = ("karpenter.sh/capacity-type", "on-demand");
const LINUX: (&str, &str) = ("kubernetes.io/os", "linux");
const OD: &str = "{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}";

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:228
#[test]
fn a_changed_requirement_drifts_the_nodeclaim() {
    assert_requirement_drift(
        &format!(
            "[{OD}, {{key: kubernetes.io/arch, operator: In, values: [amd64]}}, {{key: kubernetes.io/os, operator: In, values: [linux]}}]"
        ),
        "[{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]",
        &[ON_DEMAND, ("kubernetes.io/arch", "amd64"), LINUX],
        true,
    );
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:244
#[test]
fn an_added_requirement_drifts_the_nodeclaim() {
    assert_requirement_drift(
        &format!("[{OD}, {{key: kubernetes.io/os, operator: In, values: [linux]}}]"),
        &format!(
            "[{OD}, {{key: kubernetes.io/os, operator: In, values: [linux]}}, {{key: kubernetes.io/arch, operator: In, values: [amd64]}}]"
        ),
        &[ON_DEMAND, LINUX],
        true,
    );
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:261
#[test]
fn a_narrowed_requirement_drifts_the_nodeclaim() {
    assert_requirement_drift(
        &format!("[{OD}, {{key: kubernetes.io/os, operator: In, values: [linux, windows]}}]"),
        &format!("[{OD}, {{key: kubernetes.io/os, operator: In, values: [windows]}}]"),
        &[ON_DEMAND, LINUX],
        true,
    );
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:277
#[test]
fn a_widened_requirement_does_not_drift_the_nodeclaim() {
    assert_requirement_drift(
        &format!("[{OD}, {{key: kubernetes.io/os, operator: In, values: [linux]}}]"),
        &format!("[{OD}, {{key: kubernetes.io/os, operator: In, values: [linux, windows]}}]"),
        &[ON_DEMAND, LINUX],
        false,
    );
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:293
#[test]
fn a_requirement_widened_to_exists_does_not_drift_the_nodeclaim() {
    assert_requirement_drift(
        &format!("[{OD}, {{key: kubernetes.io/os, operator: In, values: [linux]}}]"),
        &format!("[{OD}, {{key: kubernetes.io/os, operator: Exists}}]"),
        &[ON_DEMAND, LINUX],
        false,
    );
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:309
#[test]
fn a_requirement_set_to_does_not_exist_drifts_the_nodeclaim() {
    assert_requirement_drift(
        &format!("[{OD}, {{key: kubernetes.io/os, operator: In, values: [linux]}}]"),
        &format!("[{OD}, {{key: kubernetes.io/os, operator: DoesNotExist}}]"),
        &[ON_DEMAND, LINUX],
        true,
    );
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:325
#[test]
fn a_raised_gt_bound_above_the_label_drifts_the_nodeclaim() {
    assert_requirement_drift(
        &format!("[{OD}, {{key: test-label, operator: Gt, values: [\"2\"]}}]"),
        &format!("[{OD}, {{key: test-label, operator: Gt, values: [\"10\"]}}]"),
        &[ON_DEMAND, ("test-label", "5")],
        true,
    );
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:341
#[test]
fn a_lowered_lt_bound_below_the_label_drifts_the_nodeclaim() {
    assert_requirement_drift(
        &format!("[{OD}, {{key: test-label, operator: Lt, values: [\"5\"]}}]"),
        &format!("[{OD}, {{key: test-label, operator: Lt, values: [\"1\"]}}]"),
        &[ON_DEMAND, ("test-label", "2")],
        true,
    );
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:358
#[test]
fn only_nodeclaims_outside_the_updated_requirements_drift() {
    let mut c = claims_suite(it());
    c.nodepool(
        "default",
        &format!("  template:\n    spec:\n      requirements: [{OD}, {{key: kubernetes.io/os, operator: In, values: [linux, windows]}}]\n"),
    );
    let hash = pool_hash(&c, "default");
    let annotations = vec![("karpenter.sh/nodepool-hash", hash.as_str())];
    add(&mut c, Claim { labels: vec![ON_DEMAND, LINUX], annotations: annotations.clone(), ..claim("nodeclaim") });
    add(
        &mut c,
        Claim { labels: vec![ON_DEMAND, ("kubernetes.io/os", "windows")], annotations, ..claim("nodeclaim-two") },
    );
    assert_eq!(drift_of(&c, &[], "nodeclaim"), None);
    assert_eq!(drift_of(&c, &[], "nodeclaim-two"), None);
    // Windows removed.
    c.objects.nodepools[0].spec.template.spec.requirements =
        serde_yaml::from_str(&format!("[{OD}, {{key: kubernetes.io/os, operator: In, values: [linux]}}]")).unwrap();
    assert_eq!(drift_of(&c, &[], "nodeclaim"), None);
    assert_eq!(drift_of(&c, &[], "nodeclaim-two").as_deref(), Some("RequirementsDrifted"));
    assert!(!present(&c, &[], "nodeclaim", "Drifted"));
    assert_eq!(drifted_reason(&c, &[], "nodeclaim-two").as_deref(), Some("RequirementsDrifted"));
}

/// The static drift context's NodePool (Karpenter's, its NodeClass Tenon's EC2NodeClass) and
/// a NodeClaim launched from it: the template's labels, `annotations` on the NodeClaim.
fn static_drift_suite(annotations: &[(&str, &str)]) -> Cluster {
    let mut c = claims_suite(it());
    c.nodepool(
        "default",
        "  template:\n    metadata:\n      annotations: {keyAnnotation: valueAnnotation, keyAnnotation2: valueAnnotation2}\n      labels: {keyLabel: valueLabel, keyLabel2: valueLabel2}\n    spec:\n      requirements: []\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      taints: [{key: keyvalue1, effect: NoExecute}]\n      startupTaints: [{key: startupkeyvalue1, effect: NoExecute}]\n      expireAfter: 5m\n      terminationGracePeriod: 5m\n",
    );
    add(
        &mut c,
        Claim {
            labels: vec![("keyLabel", "valueLabel"), ("keyLabel2", "valueLabel2")],
            annotations: annotations.to_vec(),
            ..claim("nodeclaim")
        },
    );
    c
}

/// A NodeClaim stamped with its NodePool's hash under today's version (the hash controller's
/// stamp) is not drifted; after `change` to the NodePool it is, NodePoolDrifted.
fn static_field_drift(change: impl FnOnce(&mut tenon_api::NodePool)) {
    let mut c = static_drift_suite(&[]);
    let hash = pool_hash(&c, "default");
    let stamp = claim_mut(&mut c, "nodeclaim").metadata.annotations.get_or_insert_default();
    stamp.insert("karpenter.sh/nodepool-hash".into(), hash);
    stamp.insert("karpenter.sh/nodepool-hash-version".into(), NODEPOOL_HASH_VERSION.into());
    assert_eq!(drift_of(&c, &[], "nodeclaim"), None);
    assert!(!present(&c, &[], "nodeclaim", "Drifted"), "no Drifted condition written");
    change(&mut c.objects.nodepools[0]);
    assert_eq!(drift_of(&c, &[], "nodeclaim").as_deref(), Some("NodePoolDrifted"));
    assert!(has(&c, &[], "nodeclaim", "Drifted"), "Drifted=True written");
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:474
#[test]
fn a_new_template_annotation_drifts_the_nodeclaim() {
    static_field_drift(|np| {
        np.spec.template.metadata.annotations.insert("keyAnnotationTest".into(), "valueAnnotationTest".into());
    });
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:475
#[test]
fn a_new_template_label_drifts_the_nodeclaim() {
    static_field_drift(|np| {
        np.spec.template.metadata.labels.insert("keyLabelTest".into(), "valueLabelTest".into());
    });
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:476
#[test]
fn changed_taints_drift_the_nodeclaim() {
    static_field_drift(|np| {
        np.spec.template.spec.taints = serde_yaml::from_str("[{key: keytest2taint, effect: NoExecute}]").unwrap();
    });
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:477
#[test]
fn changed_startup_taints_drift_the_nodeclaim() {
    static_field_drift(|np| {
        np.spec.template.spec.startup_taints =
            serde_yaml::from_str("[{key: keytest2taint, effect: NoExecute}]").unwrap();
    });
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:478
#[test]
fn a_changed_nodeclass_name_drifts_the_nodeclaim() {
    static_field_drift(|np| {
        np.spec.template.spec.node_class_ref.as_mut().expect("nodeClassRef").name = "testName".into();
    });
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:479
#[test]
fn a_changed_expire_after_drifts_the_nodeclaim() {
    static_field_drift(|np| np.spec.template.spec.expire_after = "100m".into());
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:480
#[test]
fn a_changed_termination_grace_period_drifts_the_nodeclaim() {
    static_field_drift(|np| np.spec.template.spec.termination_grace_period = Some("100m".into()));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:482
#[test]
fn no_static_drift_without_a_hash_on_the_nodepool() {
    // Karpenter's NodePool carries no hash annotation; Tenon reads none (it hashes the spec
    // each round). The NodeClaim carries the hash but no hash version: not drifted.
    let mut c = static_drift_suite(&[]);
    let hash = pool_hash(&c, "default");
    c.objects.nodepools[0].metadata.annotations = Some(BTreeMap::new());
    claim_mut(&mut c, "nodeclaim")
        .metadata
        .annotations
        .get_or_insert_default()
        .insert("karpenter.sh/nodepool-hash".into(), hash);
    assert_eq!(drift_of(&c, &[], "nodeclaim"), None);
    assert!(!present(&c, &[], "nodeclaim", "Drifted"), "no Drifted condition written");
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:489
#[test]
fn no_static_drift_without_a_hash_on_the_nodeclaim() {
    let c = static_drift_suite(&[("karpenter.sh/nodepool-hash-version", NODEPOOL_HASH_VERSION)]);
    assert_eq!(drift_of(&c, &[], "nodeclaim"), None);
    assert!(!present(&c, &[], "nodeclaim", "Drifted"), "no Drifted condition written");
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:498
#[test]
fn no_static_drift_across_hash_versions() {
    let mut c = static_drift_suite(&[
        ("karpenter.sh/nodepool-hash", "test-hash-2"),
        ("karpenter.sh/nodepool-hash-version", "test-version-2"),
    ]);
    c.objects.nodepools[0].metadata.annotations = Some(
        [("karpenter.sh/nodepool-hash", "test-hash-1"), ("karpenter.sh/nodepool-hash-version", "test-version-1")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    );
    assert_eq!(drift_of(&c, &[], "nodeclaim"), None);
    assert!(!present(&c, &[], "nodeclaim", "Drifted"), "no Drifted condition written");
}

/// karpenter:pkg/controllers/nodeclaim/disruption/drift_test.go:512
#[test]
fn no_static_drift_without_a_hash_version_on_the_nodeclaim() {
    let c = static_drift_suite(&[("karpenter.sh/nodepool-hash", "test-hash-111111111")]);
    assert_eq!(drift_of(&c, &[], "nodeclaim"), None);
    assert!(!present(&c, &[], "nodeclaim", "Drifted"), "no Drifted condition written");
}

// consolidation_test.go: Underutilized.

/// The Underutilized suite: WhenEmptyOrUnderutilized, consolidateAfter `after`.
fn underutilized(after: &str) -> Cluster {
    let mut c = claims_suite(it());
    c.nodepool(
        "default",
        &format!(
            "  template:\n    spec:\n      requirements: []\n  disruption:\n    consolidationPolicy: WhenEmptyOrUnderutilized\n    consolidateAfter: {after}\n"
        ),
    );
    c
}

/// karpenter:pkg/controllers/nodeclaim/disruption/consolidation_test.go:52
#[test]
fn nodeclaims_of_another_nodeclass_are_not_judged_consolidatable() {
    let mut c = underutilized("1m");
    let now = c.now;
    add(
        &mut c,
        Claim {
            node_class: "{group: karpenter.test.sh, kind: UnmanagedNodeClass, name: default}",
            last_pod_event: Some(now),
            ..claim("unmanaged")
        },
    );
    assert!(!is_candidate(&c, &[], "unmanaged"));
    c.now += MINUTE;
    assert!(!is_candidate(&c, &[], "unmanaged"));
    assert!(!present(&c, &[], "unmanaged", "Consolidatable"), "no Consolidatable condition written");
}

/// karpenter:pkg/controllers/nodeclaim/disruption/consolidation_test.go:85
#[test]
fn a_nodeclaim_becomes_consolidatable_once_consolidate_after_passes() {
    let mut c = underutilized("1m");
    let now = c.now;
    add(&mut c, Claim { last_pod_event: Some(now), ..claim("nodeclaim") });
    assert!(!consolidatable(&c, "nodeclaim"));
    assert!(!present(&c, &[], "nodeclaim", "Consolidatable"));
    c.now += MINUTE;
    assert!(consolidatable(&c, "nodeclaim"));
    assert!(has(&c, &[], "nodeclaim", "Consolidatable"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/consolidation_test.go:99
#[test]
fn without_pod_events_consolidate_after_counts_from_initialization() {
    let mut c = underutilized("1m");
    add(&mut c, claim("nodeclaim"));
    c.now = INITIALIZED;
    assert!(!consolidatable(&c, "nodeclaim"));
    assert!(!has(&c, &[], "nodeclaim", "Consolidatable"));
    c.now += MINUTE;
    assert!(consolidatable(&c, "nodeclaim"));
    assert!(has(&c, &[], "nodeclaim", "Consolidatable"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/consolidation_test.go:116
#[test]
fn a_recent_pod_event_makes_a_nodeclaim_not_consolidatable() {
    let mut c = underutilized("1m");
    let now = c.now;
    add(&mut c, Claim { last_pod_event: Some(now), recorded: vec!["Consolidatable"], ..claim("nodeclaim") });
    assert!(!consolidatable(&c, "nodeclaim"));
    assert!(!present(&c, &[], "nodeclaim", "Consolidatable"), "removed, as Karpenter's Clear does");
}

/// karpenter:pkg/controllers/nodeclaim/disruption/consolidation_test.go:125
#[test]
fn consolidate_after_never_makes_a_nodeclaim_not_consolidatable() {
    let mut c = underutilized("Never");
    add(&mut c, Claim { last_pod_event: Some(INITIALIZED), recorded: vec!["Consolidatable"], ..claim("nodeclaim") });
    assert!(!consolidatable(&c, "nodeclaim"));
    assert!(!present(&c, &[], "nodeclaim", "Consolidatable"), "removed, as Karpenter's Clear does");
}

/// karpenter:pkg/controllers/nodeclaim/disruption/consolidation_test.go:134
#[test]
fn a_nodeclaim_whose_initialization_is_unknown_is_not_consolidatable() {
    // No candidate: never consolidated; a recorded Consolidatable condition is removed.
    let mut c = underutilized("1m");
    add(
        &mut c,
        Claim {
            initialized: Some("Unknown"),
            last_pod_event: Some(INITIALIZED),
            recorded: vec!["Consolidatable"],
            ..claim("nodeclaim")
        },
    );
    assert!(!is_candidate(&c, &[], "nodeclaim"));
    assert!(round(&c, &[]).1.plan.is_none());
    assert!(!present(&c, &[], "nodeclaim", "Consolidatable"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/consolidation_test.go:143
#[test]
fn a_nodeclaim_not_initialized_is_not_consolidatable() {
    // As :134.
    let mut c = underutilized("1m");
    add(
        &mut c,
        Claim {
            initialized: Some("False"),
            last_pod_event: Some(INITIALIZED),
            recorded: vec!["Consolidatable"],
            ..claim("nodeclaim")
        },
    );
    assert!(!is_candidate(&c, &[], "nodeclaim"));
    assert!(round(&c, &[]).1.plan.is_none());
    assert!(!present(&c, &[], "nodeclaim", "Consolidatable"));
}

// suite_test.go: both conditions at once.

/// NodeClaim `nodeclaim` of NodePool `default` (`spec` under `spec:`), its last pod event
/// five minutes before `c.now`.
fn both_conditions(spec: &str, recorded: Vec<&'static str>) -> Cluster {
    let mut c = claims_suite(it());
    c.nodepool("default", spec);
    let event = c.now - 5 * MINUTE;
    add(&mut c, Claim { last_pod_event: Some(event), recorded, ..claim("nodeclaim") });
    c
}

const WHEN_EMPTY_30S: &str = "  template:\n    spec:\n      requirements: []\n  disruption:\n    consolidationPolicy: WhenEmpty\n    consolidateAfter: 30s\n";

/// karpenter:pkg/controllers/nodeclaim/disruption/suite_test.go:125
#[test]
fn drifted_and_consolidatable_are_set_together() {
    let mut c = both_conditions(WHEN_EMPTY_30S, vec![]);
    c.now += MINUTE;
    let (snap, d) = round(&c, &CLOUD_DRIFTED);
    let cand = candidate(&snap, &d, "nodeclaim").expect("candidate");
    assert_eq!(cand.drifted.as_deref(), Some("drifted"));
    assert!(cand.consolidatable);
    assert!(has(&c, &CLOUD_DRIFTED, "nodeclaim", "Drifted") && has(&c, &CLOUD_DRIFTED, "nodeclaim", "Consolidatable"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/suite_test.go:140
#[test]
fn a_static_nodepools_nodeclaim_is_drifted_but_not_consolidatable() {
    let mut c = both_conditions(&format!("  replicas: 1\n{WHEN_EMPTY_30S}"), vec![]);
    c.now += MINUTE;
    let (snap, d) = round(&c, &CLOUD_DRIFTED);
    let cand = candidate(&snap, &d, "nodeclaim").expect("candidate");
    assert_eq!(cand.drifted.as_deref(), Some("drifted"));
    assert!(!cand.consolidatable);
    assert!(has(&c, &CLOUD_DRIFTED, "nodeclaim", "Drifted") && !has(&c, &CLOUD_DRIFTED, "nodeclaim", "Consolidatable"));
}

/// karpenter:pkg/controllers/nodeclaim/disruption/suite_test.go:170
#[test]
fn drifted_and_consolidatable_are_cleared_together() {
    let c = both_conditions(
        "  template:\n    spec:\n      requirements: []\n  disruption:\n    consolidateAfter: Never\n",
        vec!["Drifted", "Consolidatable"],
    );
    let (snap, d) = round(&c, &[]);
    let cand = candidate(&snap, &d, "nodeclaim").expect("candidate");
    assert_eq!(cand.drifted, None);
    assert!(!cand.consolidatable);
    assert!(!present(&c, &[], "nodeclaim", "Drifted"));
    assert!(!present(&c, &[], "nodeclaim", "Consolidatable"));
}
