//! (Long: one part of Karpenter's consolidation suite, case by case.)
//! Karpenter's consolidation suite (`pkg/controllers/disruption/consolidation_test.go`), its
//! Events, Metrics, Budgets and first Replace cases, decided from Kubernetes objects as the
//! controller reads them (`convert::snapshot`, then `disrupt`) and carried out through the
//! orchestration's command state machine (`orchestration::command`).
//!
//! The suite's `BeforeEach` turns the SpotToSpotConsolidation feature gate on: every snapshot
//! here has `spot_to_spot` set. Karpenter's `Consolidatable` NodeClaim condition (set True by
//! the suite) is, in Tenon, a NodeClaim whose `consolidateAfter` has passed since its last pod
//! event: the nodes here were initialized an hour before the decisions.
//!
//! Karpenter's `mostExpensiveInstance` is whichever of the twelve equally priced
//! 64-CPU/128-GiB on-demand types its unstable sort puts last; these cases take the linux/amd64
//! one in test-zone-1 (and likewise for spot).

use crate::support;

use support::GIB;
use support::karpenter::{Cluster, NOW, assorted, fake};
use tenon_api::NodeClaim;
use tenon_core::convert;
use tenon_core::disruption::{DefaultPolicies, DisruptionDecision, DisruptionPlan, Method, disrupt};
use tenon_core::instancetype::InstanceType;
use tenon_core::model::{ClusterSnapshot, ConsolidationPolicy, DisruptionReason};
use tenon_core::orchestration::command::{self as command, Command, Replacement, Step, VALIDATION_MS, hold, validate};

/// `mostExpensiveInstance` of the suite (`fake.InstanceTypesAssorted()`).
const MOST_EXPENSIVE: &str = "64-cpu-128-mem-amd64-linux-test-zone-1-on-demand";
/// `mostExpensiveSpotInstance`.
const MOST_EXPENSIVE_SPOT: &str = "64-cpu-128-mem-amd64-linux-test-zone-1-spot";
/// The allocatable of the suite's `nodeClaim` and `spotNodeClaim` (no pods resource).
const CPU_32: &str = "{cpu: \"32\"}";
/// The allocatable of the Budgets context's NodeClaims.
const CPU_32_PODS: &str = "{cpu: \"32\", pods: \"100\"}";
/// When every node of these cases was initialized; decisions are made an hour later.
const INITIALIZED: i64 = NOW;
const HOUR: i64 = 3600;
/// A NodePool annotated so is given no instance types (`InstanceTypesForNodePool[name] = nil`).
const NO_TYPES: &str = "test.tenon.dev/no-instance-types";

/// `NOW + secs` in RFC 3339 (`NOW` is 2026-11-30T00:00:00Z; `secs` under a day).
fn at(secs: i64) -> String {
    assert!((0..86_400).contains(&secs));
    format!("2026-11-30T{:02}:{:02}:{:02}Z", secs / 3600, secs / 60 % 60, secs % 60)
}

/// Karpenter's suite catalog, decided an hour after the nodes were initialized.
fn suite() -> Cluster {
    with_catalog(assorted())
}

fn with_catalog(catalog: std::sync::Arc<Vec<InstanceType>>) -> Cluster {
    let mut c = Cluster::new(catalog);
    c.now = INITIALIZED + HOUR;
    c
}

/// A NodePool `name` with the given disruption settings and template requirements (flow
/// YAML list).
fn nodepool(c: &mut Cluster, name: &str, consolidate_after: &str, policy: &str, budget: &str, requirements: &str) {
    c.nodepool(
        name,
        &format!(
            "  template:\n    spec:\n      requirements: {requirements}\n  disruption:\n    consolidateAfter: {consolidate_after}\n    consolidationPolicy: {policy}\n    budgets: [{{nodes: \"{budget}\"}}]\n"
        ),
    );
}

/// The suite's `nodePool`: WhenEmptyOrUnderutilized, consolidateAfter 0s, every node may go.
fn default_nodepool(c: &mut Cluster) {
    nodepool(c, "default", "0s", "WhenEmptyOrUnderutilized", "100%", "[]");
}

fn set_budget(c: &mut Cluster, pool: &str, budget: &str) {
    let np = c.objects.nodepools.iter_mut().find(|np| np.metadata.name.as_deref() == Some(pool)).expect("NodePool");
    np.spec.disruption.budgets = serde_yaml::from_str(&format!("[{{nodes: \"{budget}\"}}]")).expect("budgets");
}

/// A NodeClaim `name` of NodePool `pool` launched as catalog type `it` (its first offering's
/// zone and capacity type), and its Node `name`, registered, initialized and Ready
/// (`test.NodeClaimAndNode` then `ExpectMakeNodesAndNodeClaimsInitializedAndStateUpdated`).
fn node(c: &mut Cluster, name: &str, pool: &str, it: &str, allocatable: &str) {
    c.initialized_node(name, pool, it, allocatable, INITIALIZED);
}

/// Removes label `key` from NodeClaim and Node `name`.
fn drop_label(c: &mut Cluster, name: &str, key: &str) {
    let nc = c.objects.nodeclaims.iter_mut().find(|n| n.metadata.name.as_deref() == Some(name)).expect("NodeClaim");
    nc.metadata.labels.as_mut().expect("labels").remove(key);
    let n = c.objects.nodes.iter_mut().find(|n| n.metadata.name.as_deref() == Some(name)).expect("Node");
    n.metadata.labels.as_mut().expect("labels").remove(key);
}

/// The suite's ReplicaSet (`test.ReplicaSet()`), selecting `app: test`.
fn replica_set(c: &mut Cluster) {
    c.replica_set("rs", "{matchLabels: {app: test}}");
}

const OWNED: &str = "labels: {app: test}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: rs-uid, controller: true, blockOwnerDeletion: true}]";

/// A pod of the suite's ReplicaSet bound to `node`, requesting `cpu` (`""`: nothing).
fn rs_pod(c: &mut Cluster, name: &str, node: &str, cpu: &str) {
    c.bound(&format!("{{name: {name}, {OWNED}}}"), node, &requests(cpu));
}

fn requests(cpu: &str) -> String {
    if cpu.is_empty() {
        String::new()
    } else {
        format!("  containers: [{{name: app, image: app, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}]\n")
    }
}

/// The snapshot the controller decides from now, the SpotToSpotConsolidation gate on;
/// NodePools annotated [`NO_TYPES`] get no instance types.
fn snapshot(c: &Cluster) -> ClusterSnapshot {
    let catalog = c.catalog.clone();
    let types = move |np: &tenon_api::NodePool| {
        if np.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(NO_TYPES)) {
            std::sync::Arc::new(Vec::new())
        } else {
            catalog.clone()
        }
    };
    let (mut snap, ignored) = convert::snapshot(&c.objects.shared(), &types, c.now);
    assert!(ignored.is_empty(), "objects the controller could not read: {ignored:?}");
    snap.spot_to_spot = true;
    snap
}

fn decide(c: &Cluster) -> (ClusterSnapshot, DisruptionDecision) {
    let snap = snapshot(c);
    let d = disrupt(&snap, &DefaultPolicies);
    (snap, d)
}

fn nodeclaims(c: &Cluster) -> Vec<String> {
    c.objects.nodeclaims.iter().filter_map(|n| n.metadata.name.clone()).collect()
}

fn node_names(c: &Cluster) -> Vec<String> {
    c.objects.nodes.iter().filter_map(|n| n.metadata.name.clone()).collect()
}

/// The names of the plan's candidates, sorted.
fn names(snap: &ClusterSnapshot, plan: &DisruptionPlan) -> Vec<String> {
    let mut v: Vec<String> = plan.candidates.iter().map(|&n| snap.nodes[n].name.clone()).collect();
    v.sort();
    v
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

/// How many nodes Karpenter's consolidation methods find eligible (its `EligibleNodes`
/// gauge, reason `underutilized`): consolidatable under WhenEmptyOrUnderutilized, not blocked,
/// not nominated.
fn eligible_underutilized(d: &DisruptionDecision) -> usize {
    d.candidates
        .iter()
        .filter(|c| {
            c.consolidatable
                && c.blocked.is_none()
                && c.consolidation_policy == ConsolidationPolicy::WhenEmptyOrUnderutilized
                && !d.blocked.iter().any(|b| b.node == c.node)
        })
        .count()
}

/// The command the controller makes of `plan`: candidates, and the NodeClaim object of each
/// replacement.
fn decided(c: &Cluster, snap: &ClusterSnapshot, plan: &DisruptionPlan) -> Command<NodeClaim> {
    let candidates: Vec<(String, String)> = plan
        .candidates
        .iter()
        .map(|&n| (snap.nodes[n].claim.as_ref().expect("managed").nodeclaim.clone(), snap.nodes[n].name.clone()))
        .collect();
    let planned = plan
        .replacements
        .iter()
        .map(|r| {
            let np = c.objects.nodepools.iter().find(|np| np.metadata.name.as_deref() == Some(&r.nodepool_name));
            tenon_core::nodeclaim::nodeclaim(r, np.expect("NodePool"), snap)
        })
        .collect();
    Command::new(plan.method, plan.reason.clone(), plan.savings_per_hour, candidates, planned, c.now * 1000)
        .expecting(plan.replacement_types(snap))
}

/// Karpenter's validation of `cmd` now, over the cluster as it is, `others` held.
fn validated(c: &Cluster, cmd: &Command<NodeClaim>, others: &[Command<NodeClaim>]) -> Option<String> {
    let mut snap = snapshot(c);
    hold(&mut snap, &command::held(others));
    validate(&snap, &DefaultPolicies, cmd.method, &cmd.candidates, &cmd.replacement_types)
}

/// Executes a validated command: its replacements are created (named after the candidate
/// they replace) and, when `ready`, launched and Initialized with a Node each
/// (`ExpectMakeNewNodeClaimsReady`); once they are, the candidates' NodeClaims and Nodes are
/// deleted with their pods (`ExpectNodeClaimsCascadeDeletion`). Returns the replacements.
fn execute(c: &mut Cluster, mut cmd: Command<NodeClaim>, ready: bool) -> Vec<NodeClaim> {
    let now = c.now * 1000;
    let mut created = Vec::new();
    for (i, mut nc) in cmd.planned.clone().into_iter().enumerate() {
        let name = format!("{}{}-{i}", nc.metadata.generate_name.clone().unwrap_or_default(), cmd.candidates[0].0);
        nc.metadata.name = Some(name.clone());
        if ready {
            let t = format!("reason: Ready, message: \"\", lastTransitionTime: \"{}\"", at(c.now - NOW));
            nc.status = Some(
                serde_yaml::from_str(&format!(
                    "{{nodeName: {name}, providerID: fake://{name}, conditions: [{{type: Launched, status: \"True\", {t}}}, {{type: Registered, status: \"True\", {t}}}, {{type: Initialized, status: \"True\", {t}}}]}}"
                ))
                .expect("status"),
            );
            c.node(&format!(
                "metadata: {{name: {name}, labels: {{karpenter.sh/nodepool: default, karpenter.sh/initialized: \"true\"}}}}\nspec: {{providerID: fake://{name}}}\nstatus: {{conditions: [{{type: Ready, status: \"True\"}}]}}\n"
            ));
        }
        c.objects.nodeclaims.push(nc.clone());
        created.push(nc);
    }
    let names: Vec<String> = created.iter().filter_map(|nc| nc.metadata.name.clone()).collect();
    cmd.execute(names, now);
    let states = vec![if ready { Replacement::Initialized } else { Replacement::Launching }; created.len()];
    match cmd.step(now, &states) {
        Step::Delete => remove(c, &cmd.candidates.iter().map(|(_, n)| n.clone()).collect::<Vec<_>>()),
        Step::Wait => assert!(!ready, "ready replacements, yet the command waits"),
        other => panic!("{other:?}"),
    }
    created
}

/// Carries `plan` out as the orchestration queue does (`ExpectObjectReconciled(queue, …)`):
/// decided now, validated [`VALIDATION_MS`] later, executed, replacements made ready.
fn carry_out(c: &mut Cluster, snap: &ClusterSnapshot, plan: &DisruptionPlan) -> Vec<NodeClaim> {
    let cmd = decided(c, snap, plan);
    assert_eq!(cmd.step(cmd.decided + VALIDATION_MS - 1, &[]), Step::Wait, "not validated before the TTL");
    c.now += VALIDATION_MS / 1000;
    assert_eq!(cmd.step(c.now * 1000, &[]), Step::Validate);
    if let Some(why) = validated(c, &cmd, &[]) {
        panic!("the command was abandoned at validation: {why}");
    }
    execute(c, cmd, true)
}

/// Deletes nodes `gone`, their NodeClaims and the pods bound to them.
fn remove(c: &mut Cluster, gone: &[String]) {
    let on = |n: Option<&String>| n.is_some_and(|n| gone.contains(n));
    c.objects.nodeclaims.retain(|nc| !on(nc.status.as_ref().and_then(|s| s.node_name.as_ref())));
    c.objects.nodes.retain(|n| !on(n.metadata.name.as_ref()));
    c.objects.pods.retain(|p| !on(p.spec.as_ref().and_then(|s| s.node_name.as_ref())));
}

/// The values of a NodeClaim's `node.kubernetes.io/instance-type In` requirement.
fn instance_types_of(nc: &NodeClaim) -> Vec<String> {
    nc.spec
        .requirements
        .iter()
        .find(|r| r.key == "node.kubernetes.io/instance-type" && r.operator == "In")
        .map(|r| r.values.clone())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------
// Events. Karpenter fires `Unconsolidatable` on a candidate's Node and NodeClaim when a
// consolidation method will not consider it; Tenon's controller fires `Unconsolidatable`
// only for a plan a consolidation policy rejected (`DisruptionDecision::rejected`). The
// decision part, whether and why the node is left to consolidation, is ported.
// ---------------------------------------------------------------------------------------

/// The suite's `nodeClaim`/`node`, with `pod` bound to it when given.
fn events_cluster(consolidate_after: &str, policy: &str, with_pod: bool) -> Cluster {
    let mut c = suite();
    nodepool(&mut c, "default", consolidate_after, policy, "100%", "[]");
    node(&mut c, "node-1", "default", MOST_EXPENSIVE, CPU_32);
    if with_pod {
        c.bound("{name: p}", "node-1", "");
    }
    c
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:104
#[test]
fn no_unconsolidatable_event_under_when_empty_or_underutilized() {
    let c = events_cluster("0s", "WhenEmptyOrUnderutilized", false);
    let (snap, d) = decide(&c);
    // Nothing was refused consolidation: no `Unconsolidatable` event.
    assert!(d.unconsolidatable.is_empty(), "{:?}", d.unconsolidatable);
    assert!(d.rejected.is_empty(), "{:?}", d.rejected);
    assert!(d.blocked.is_empty(), "{:?}", d.blocked);
    assert_eq!(eligible_underutilized(&d), 1, "the node is open to consolidation");
    let plan = d.plan.expect("the empty node goes");
    assert_eq!(names(&snap, &plan), ["node-1"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:114
#[test]
fn a_when_empty_nodepools_node_with_a_pod_is_left_to_emptiness() {
    let c = events_cluster("1m", "WhenEmpty", true);
    let (_, d) = decide(&c);
    // Karpenter's `Unconsolidatable` events on the Node and NodeClaim (four calls: multi- and
    // single-node consolidation each, one visible per object after its recorder's dedupe).
    // The decision names the node once; the controller publishes on both objects.
    assert_eq!(
        unconsolidatable(&d),
        ["NodePool \"default\" has consolidation policy WhenEmpty, but node is not empty"]
    );
    // The node is consolidatable by time but its policy is WhenEmpty, and it is not empty,
    // so no method takes it.
    let cand = &d.candidates[0];
    assert!(cand.consolidatable && !cand.empty);
    assert_eq!(cand.consolidation_policy, ConsolidationPolicy::WhenEmpty);
    assert_eq!(eligible_underutilized(&d), 0);
    assert!(d.plan.is_none(), "{:?}", d.plan);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:125
#[test]
fn a_consolidate_after_never_nodepools_node_is_not_consolidated() {
    let c = events_cluster("Never", "WhenEmptyOrUnderutilized", true);
    let (_, d) = decide(&c);
    // Karpenter's `Unconsolidatable` events (six calls: emptiness too; one per object after
    // dedupe): consolidation is disabled. consolidateAfter Never: never consolidatable.
    assert_eq!(unconsolidatable(&d), ["NodePool \"default\" has consolidation disabled"]);
    assert!(!d.candidates[0].consolidatable);
    assert_eq!(eligible_underutilized(&d), 0);
    assert!(d.plan.is_none(), "{:?}", d.plan);
}

/// The `Unconsolidatable` messages of a decision.
fn unconsolidatable(d: &DisruptionDecision) -> Vec<&str> {
    d.unconsolidatable.iter().map(|(_, why)| why.as_str()).collect()
}

/// A node missing label `key` (NodeClaim and Node), with a pod: `Unconsolidatable` with
/// `message`.
fn unlabelled(key: &str, message: &str) -> DisruptionDecision {
    let mut c = events_cluster("0s", "WhenEmptyOrUnderutilized", true);
    drop_label(&mut c, "node-1", key);
    let (snap, d) = decide(&c);
    // Karpenter's `Unconsolidatable` events from the consolidation methods (four calls, one
    // per object after dedupe).
    assert_eq!(unconsolidatable(&d), [message]);
    // The node is still a candidate (suite case 1856), but its price cannot be known, so
    // nothing is found cheaper and it is not consolidated.
    assert_eq!(d.candidates.len(), 1, "still a candidate");
    assert_eq!(snap.nodes[d.candidates[0].node].name, "node-1");
    // No consolidation. (Without an instance type the node is drifted, InstanceTypeNotFound,
    // as Karpenter's NodeClaim disruption controller would mark it: drift may replace it.)
    assert!(d.plan.as_ref().is_none_or(|p| p.method == Method::Drift), "{:?}", d.plan);
    d
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:137
#[test]
fn a_node_whose_instance_type_cannot_be_resolved_is_not_consolidated() {
    unlabelled("node.kubernetes.io/instance-type", "Instance Type \"\" not found");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:150
#[test]
fn a_node_without_a_capacity_type_label_is_not_consolidated() {
    unlabelled("karpenter.sh/capacity-type", "Node does not have label \"karpenter.sh/capacity-type\"");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:163
#[test]
fn a_node_without_a_zone_label_is_not_consolidated() {
    unlabelled("topology.kubernetes.io/zone", "Node does not have label \"topology.kubernetes.io/zone\"");
}

// ---------------------------------------------------------------------------------------
// Metrics. The gauges and counters are the controller's; what they count is the decision's
// and the validation's.
// ---------------------------------------------------------------------------------------

/// karpenter:pkg/controllers/disruption/consolidation_test.go:181
#[test]
fn a_node_counts_eligible_for_consolidation_once_its_do_not_disrupt_pod_loses_the_annotation() {
    let mut c = suite();
    default_nodepool(&mut c);
    node(&mut c, "node-1", "default", MOST_EXPENSIVE, CPU_32);
    c.bound("{name: p, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}", "node-1", "");
    let (_, d) = decide(&c);
    assert_eq!(eligible_underutilized(&d), 0, "blocked by the do-not-disrupt pod");
    assert!(d.plan.is_none());

    c.objects.pods[0].metadata.annotations = Some(Default::default());
    let (_, d) = decide(&c);
    assert_eq!(eligible_underutilized(&d), 1);
}

/// How the cluster changes between the decision and the validation (Karpenter's test
/// validators, `validation_test.go`).
#[derive(Clone, Copy, Debug)]
enum Change {
    /// `blockingBudget`: the NodePool's budget becomes 0%.
    BlockingBudget,
    /// `churn`: a 100m pod is bound to the first node, and that node nominated (a pending pod
    /// that only it can take).
    Churn,
    /// `nominated`: every node nominated (pending pods bound for each).
    Nominated,
}

/// Applies `change` over nodes `nodes` (the first is the largest).
fn apply(c: &mut Cluster, change: Change, nodes: &[&str]) {
    let nominate = |c: &mut Cluster, i: usize, node: &str| {
        // The first node is the only one with 20 CPU free; the others are pinned by hostname.
        if i == 0 {
            c.pending(&format!("{{name: nominee-{i}}}"), &requests("20"));
        } else {
            c.pending(
                &format!("{{name: nominee-{i}}}"),
                &format!(
                    "  nodeSelector: {{kubernetes.io/hostname: {node}}}\n  containers: [{{name: app, image: app, resources: {{requests: {{cpu: 100m}}}}}}]\n"
                ),
            );
        }
    };
    match change {
        Change::BlockingBudget => set_budget(c, "default", "0%"),
        Change::Churn => {
            rs_pod(c, "churn", nodes[0], "100m");
            nominate(c, 0, nodes[0]);
        }
        Change::Nominated => {
            for (i, n) in nodes.iter().enumerate() {
                nominate(c, i, n);
            }
        }
    }
}

/// Decides over `c` (expecting `method` over `nodes`), changes the cluster by `change`, then
/// validates: why the command was dropped. The shell counts the drop in
/// `karpenter_disruption_failed_validations_total`; Karpenter's `IsConsolidated` false has
/// no counterpart to assert: Tenon keeps no "consolidated" memo, each round decides afresh.
fn invalidated(mut c: Cluster, method: Method, nodes: &[&str], change: Change) -> String {
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("a command");
    assert_eq!(plan.method, method, "{}", plan.reason);
    assert_eq!(names(&snap, &plan), nodes);
    let cmd = decided(&c, &snap, &plan);
    apply(&mut c, change, nodes);
    c.now += VALIDATION_MS / 1000;
    assert_eq!(cmd.step(c.now * 1000, &[]), Step::Validate);
    let why = validated(&c, &cmd, &[]).unwrap_or_else(|| panic!("{change:?}: the command still validates"));
    match change {
        Change::BlockingBudget => assert!(why.contains("budget"), "{why}"),
        Change::Churn | Change::Nominated => {
            assert!(why.contains("nominated") || why.contains("no longer empty"), "{why}")
        }
    }
    // No command is left (`cmds` empty), and the next round does not decide it again.
    let (snap, next) = decide(&c);
    assert!(next.plan.as_ref().is_none_or(|p| names(&snap, p) != nodes), "{change:?}: {:?}", next.plan);
    why
}

/// The empty `node` (pods allowed, so that a pending pod can be nominated to it).
fn emptiness_metrics(change: Change) -> String {
    let mut c = suite();
    default_nodepool(&mut c);
    node(&mut c, "node-1", "default", MOST_EXPENSIVE, CPU_32_PODS);
    invalidated(c, Method::Emptiness, &["node-1"], change)
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:230
#[test]
fn an_emptiness_command_is_dropped_when_the_budget_closes_before_validation() {
    emptiness_metrics(Change::BlockingBudget);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:231
#[test]
fn an_emptiness_command_is_dropped_when_pods_churn_before_validation() {
    let why = emptiness_metrics(Change::Churn);
    assert!(why.contains("no longer empty"), "{why}");
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:232
#[test]
fn an_emptiness_command_is_dropped_when_its_node_is_nominated_before_validation() {
    let why = emptiness_metrics(Change::Nominated);
    assert!(why.contains("nominated"), "{why}");
}

/// `node` (32 CPU) and `node-2` (1 CPU), one pod of the ReplicaSet each: one replacement is
/// cheaper than both.
fn multi_node_metrics(change: Change) -> String {
    let mut c = suite();
    default_nodepool(&mut c);
    replica_set(&mut c);
    node(&mut c, "node-1", "default", MOST_EXPENSIVE, CPU_32_PODS);
    node(&mut c, "node-2", "default", MOST_EXPENSIVE, "{cpu: \"1\", pods: \"100\"}");
    rs_pod(&mut c, "p-0", "node-1", "");
    rs_pod(&mut c, "p-1", "node-2", "");
    invalidated(c, Method::MultiNodeConsolidation, &["node-1", "node-2"], change)
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:288
#[test]
fn a_multi_node_command_is_dropped_when_the_budget_closes_before_validation() {
    multi_node_metrics(Change::BlockingBudget);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:289
#[test]
fn a_multi_node_command_is_dropped_when_pods_churn_before_validation() {
    multi_node_metrics(Change::Churn);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:290
#[test]
fn a_multi_node_command_is_dropped_when_its_nodes_are_nominated_before_validation() {
    let why = multi_node_metrics(Change::Nominated);
    assert!(why.contains("nominated"), "{why}");
}

/// `node` with one pod of the ReplicaSet: a cheaper node can take it.
fn single_node_metrics(change: Change) -> String {
    let mut c = suite();
    default_nodepool(&mut c);
    replica_set(&mut c);
    node(&mut c, "node-1", "default", MOST_EXPENSIVE, CPU_32_PODS);
    rs_pod(&mut c, "p", "node-1", "");
    invalidated(c, Method::SingleNodeConsolidation, &["node-1"], change)
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:331
#[test]
fn a_single_node_command_is_dropped_when_the_budget_closes_before_validation() {
    single_node_metrics(Change::BlockingBudget);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:332
#[test]
fn a_single_node_command_is_dropped_when_pods_churn_before_validation() {
    single_node_metrics(Change::Churn);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:333
#[test]
fn a_single_node_command_is_dropped_when_its_node_is_nominated_before_validation() {
    let why = single_node_metrics(Change::Nominated);
    assert!(why.contains("nominated"), "{why}");
}

// ---------------------------------------------------------------------------------------
// Budgets: ten NodeClaims of `mostExpensiveInstance` (32 CPU, 100 pods).
// ---------------------------------------------------------------------------------------

/// The suite's NodePool under `budget`, its ten nodes `node-0`…, a pod of `cpu` on each
/// (`None`: empty).
fn ten_nodes(budget: &str, cpu: Option<&str>) -> Cluster {
    let mut c = suite();
    nodepool(&mut c, "default", "0s", "WhenEmptyOrUnderutilized", budget, "[]");
    replica_set(&mut c);
    for i in 0..10 {
        let n = format!("node-{i}");
        node(&mut c, &n, "default", MOST_EXPENSIVE, CPU_32_PODS);
        if let Some(cpu) = cpu {
            rs_pod(&mut c, &format!("p-{i}"), &n, cpu);
        }
    }
    c
}

/// The allowance of ten empty nodes under `budget`, and the NodeClaims left once the round's
/// one command (if any) is carried out.
fn ten_empty_nodes_under(budget: &str) -> (usize, usize) {
    let mut c = ten_nodes(budget, None);
    let (snap, d) = decide(&c);
    let allowed = allowance(&d, "default");
    match &d.plan {
        Some(plan) => {
            assert_eq!(plan.method, Method::Emptiness);
            assert_eq!(plan.candidates.len(), allowed.min(10));
            carry_out(&mut c, &snap, plan);
        }
        None => assert_eq!(allowed, 0, "no command although the budget allows {allowed}"),
    }
    assert_eq!(node_names(&c).len(), nodeclaims(&c).len());
    (allowed, nodeclaims(&c).len())
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:366
#[test]
fn a_30_percent_budget_lets_three_of_ten_empty_nodes_go() {
    assert_eq!(ten_empty_nodes_under("30%"), (3, 7));
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:388
#[test]
fn a_100_percent_budget_lets_all_ten_empty_nodes_go() {
    assert_eq!(ten_empty_nodes_under("100%"), (10, 0));
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:411
#[test]
fn a_0_percent_budget_lets_no_empty_node_go() {
    assert_eq!(ten_empty_nodes_under("0%"), (0, 10));
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:433
#[test]
fn a_30_percent_budget_caps_a_multi_node_delete_at_three() {
    // A 100m pod on each node: all fit on one node, the budget allows three to go.
    let mut c = ten_nodes("30%", Some("100m"));
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("one command");
    assert_eq!(plan.method, Method::MultiNodeConsolidation, "{}", plan.reason);
    assert!(plan.replacements.is_empty(), "{}", plan.reason);
    carry_out(&mut c, &snap, &plan);
    assert_eq!(nodeclaims(&c).len(), 7);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:476
#[test]
fn a_30_percent_budget_caps_single_node_deletes_at_three() {
    // A 15-CPU pod on each node (two fit a node). Five rounds, each seeing the commands
    // already decided as disrupting (held); then every command is validated and carried out.
    let mut c = ten_nodes("30%", Some("15"));
    let mut cmds: Vec<Command<NodeClaim>> = Vec::new();
    for _ in 0..5 {
        let mut snap = snapshot(&c);
        hold(&mut snap, &command::held(&cmds));
        if let Some(plan) = disrupt(&snap, &DefaultPolicies).plan {
            assert!(plan.replacements.is_empty(), "a delete: {}", plan.reason);
            cmds.push(decided(&c, &snap, &plan));
        }
    }
    assert!(!cmds.is_empty());
    assert_eq!(cmds.iter().map(|c| c.candidates.len()).sum::<usize>(), 3, "the budget's three");
    c.now += VALIDATION_MS / 1000;
    for i in 0..cmds.len() {
        let others: Vec<Command<NodeClaim>> =
            cmds.iter().enumerate().filter(|(j, _)| *j != i).map(|(_, c)| c.clone()).collect();
        assert_eq!(validated(&c, &cmds[i], &others), None);
    }
    for cmd in cmds {
        execute(&mut c, cmd, true);
    }
    assert_eq!(nodeclaims(&c).len(), 7);
}

/// Ten NodePools `np-0`… (WhenEmptyOrUnderutilized, 0s, budget `budget`) of three empty
/// nodes each, besides the suite's `nodePool`: each NodePool's allowance, and the
/// NodeClaims left once the round's one command (if any) is carried out.
fn ten_nodepools_of_three(budget: &str, with_pods: bool) -> (Cluster, Vec<String>) {
    let mut c = suite();
    default_nodepool(&mut c);
    replica_set(&mut c);
    let pools: Vec<String> = (0..10).map(|i| format!("np-{i}")).collect();
    for p in &pools {
        nodepool(&mut c, p, "0s", "WhenEmptyOrUnderutilized", budget, "[]");
        for i in 0..3 {
            let n = format!("{p}-node-{i}");
            node(&mut c, &n, p, MOST_EXPENSIVE, CPU_32_PODS);
            if with_pods {
                rs_pod(&mut c, &format!("{n}-pod"), &n, "1");
            }
        }
    }
    (c, pools)
}

fn ten_empty_nodepools_under(budget: &str) -> (Vec<usize>, Vec<usize>, usize) {
    let (mut c, pools) = ten_nodepools_of_three(budget, false);
    let (snap, d) = decide(&c);
    let allowed: Vec<usize> = pools.iter().map(|p| allowance(&d, p)).collect();
    let mut deleted = vec![0; pools.len()];
    if let Some(plan) = d.plan {
        assert_eq!(plan.method, Method::Emptiness);
        for n in names(&snap, &plan) {
            deleted[pools.iter().position(|p| n.starts_with(&format!("{p}-"))).expect("pool")] += 1;
        }
        carry_out(&mut c, &snap, &plan);
    }
    (allowed, deleted, nodeclaims(&c).len())
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:522
#[test]
fn a_50_percent_budget_of_three_nodes_rounds_up_to_two_per_nodepool() {
    let (allowed, deleted, left) = ten_empty_nodepools_under("50%");
    assert_eq!(allowed, [2; 10], "1.5 nodes round up to 2");
    assert_eq!(deleted, [2; 10]);
    assert_eq!(left, 10);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:588
#[test]
fn a_100_percent_budget_lets_every_nodepools_nodes_go_together() {
    let (allowed, deleted, left) = ten_empty_nodepools_under("100%");
    assert_eq!(allowed, [3; 10]);
    assert_eq!(deleted, [3; 10]);
    assert_eq!(left, 0);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:652
#[test]
fn a_0_percent_budget_lets_no_nodepools_nodes_go() {
    let (allowed, deleted, left) = ten_empty_nodepools_under("0%");
    assert_eq!(allowed, [0; 10]);
    assert_eq!(deleted, [0; 10], "no command");
    assert_eq!(left, 30);
}

/// Karpenter's `IsConsolidated()` false when a budget held candidates back: Tenon's
/// `budget_constrained` (the same cluster may decide differently once the budget changes, so
/// a round is not skipped as already consolidated). And with the budget open, the same
/// cluster is consolidated by `method`.
fn held_back_by_budgets(mut c: Cluster, pools: &[&str], method: Method) {
    let (_, d) = decide(&c);
    assert!(d.plan.is_none(), "{:?}", d.plan);
    assert!(d.budget_constrained, "not marked consolidated");
    assert!(!d.budget_varies_with_time, "a budget without a window changes only with the cluster");
    for p in pools {
        set_budget(&mut c, p, "100%");
    }
    let (_, d) = decide(&c);
    assert_eq!(d.plan.expect("the budget was all that held it back").method, method);
}

/// Tenon's simulator skips a round over an unchanged cluster unless a budget that time
/// alone can change held a node back: a windowed one here (the always-active 0% holds).
#[test]
fn a_windowed_budget_holding_nodes_back_can_change_with_time_alone() {
    let mut c = ten_nodes("0%", None);
    let np = c.objects.nodepools.iter_mut().find(|np| np.metadata.name.as_deref() == Some("default")).unwrap();
    np.spec.disruption.budgets =
        serde_yaml::from_str(r#"[{nodes: "0%"}, {nodes: "100%", schedule: "@daily", duration: 1h}]"#).unwrap();
    let (_, d) = decide(&c);
    assert!(d.plan.is_none(), "{:?}", d.plan);
    assert!(d.budget_constrained && d.budget_varies_with_time);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:714
#[test]
fn empty_nodes_held_back_by_one_nodepools_budget_are_not_marked_consolidated() {
    held_back_by_budgets(ten_nodes("0%", None), &["default"], Method::Emptiness);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:738
#[test]
fn empty_nodes_held_back_by_many_nodepools_budgets_are_not_marked_consolidated() {
    let (c, pools) = ten_nodepools_of_three("0%", false);
    let pools: Vec<&str> = pools.iter().map(String::as_str).collect();
    held_back_by_budgets(c, &pools, Method::Emptiness);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:802
/// karpenter:pkg/controllers/disruption/consolidation_test.go:903
#[test]
fn underused_nodes_held_back_by_one_nodepools_budget_are_not_marked_consolidated() {
    // One decision covers multi- and single-node consolidation: neither takes a node.
    held_back_by_budgets(ten_nodes("0%", Some("1")), &["default"], Method::MultiNodeConsolidation);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:833
/// karpenter:pkg/controllers/disruption/consolidation_test.go:934
#[test]
fn underused_nodes_held_back_by_many_nodepools_budgets_are_not_marked_consolidated() {
    let (c, pools) = ten_nodepools_of_three("0%", true);
    let pools: Vec<&str> = pools.iter().map(String::as_str).collect();
    held_back_by_budgets(c, &pools, Method::MultiNodeConsolidation);
}

// ---------------------------------------------------------------------------------------
// Replace.
// ---------------------------------------------------------------------------------------

/// The suite's `nodeClaim` (on-demand) or `spotNodeClaim` with one pod of the ReplicaSet.
fn one_replaceable_node(c: &mut Cluster, spot: bool) -> &'static str {
    let it = if spot { MOST_EXPENSIVE_SPOT } else { MOST_EXPENSIVE };
    replica_set(c);
    node(c, "node-1", "default", it, CPU_32);
    rs_pod(c, "p", "node-1", "");
    it
}

/// Replaces `node-1` (of type `it`) and checks Karpenter's outcome: one NodeClaim and one
/// Node, new, whose instance types do not include the expensive ones. Returns the new
/// NodeClaim.
fn replaced(c: &mut Cluster, it: &str) -> NodeClaim {
    let (snap, d) = decide(c);
    let plan = d.plan.unwrap_or_else(|| panic!("no command; blocked: {:?}", d.blocked));
    assert_eq!(names(&snap, &plan), ["node-1"]);
    assert_eq!(plan.replacements.len(), 1, "{}", plan.reason);
    let created = carry_out(c, &snap, &plan);
    assert_eq!(nodeclaims(c).len(), 1);
    assert_eq!(node_names(c).len(), 1);
    let new = &created[0];
    assert_ne!(new.metadata.name.as_deref(), Some("node-1"));
    let types = instance_types_of(new);
    assert!(!types.is_empty(), "the new NodeClaim has an instance-type requirement");
    assert!(!types.iter().any(|t| t == MOST_EXPENSIVE || t == it), "{types:?}");
    // And the old one is gone.
    assert!(!nodeclaims(c).contains(&"node-1".to_string()) && !node_names(c).contains(&"node-1".to_string()));
    new.clone()
}

fn can_replace(spot: bool) {
    let mut c = suite();
    default_nodepool(&mut c);
    let it = one_replaceable_node(&mut c, spot);
    replaced(&mut c, it);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1058
#[test]
fn an_on_demand_node_is_replaced_by_a_cheaper_one() {
    can_replace(false);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1059
#[test]
fn a_spot_node_is_replaced_by_a_cheaper_one() {
    can_replace(true);
}

/// Karpenter's spot-to-spot truncation cases: the first 18 spot types of the suite's catalog,
/// priced 1.00, 1.10, … except the 17th, made the cheapest (0.001); the node is the 18th
/// (the dearest); the NodePool requires `minValues` instance types. Returns the types the
/// replacement may launch as, and the catalog's types cheapest first.
fn spot_to_spot_with_min_values(min_values: usize) -> (Vec<String>, Vec<String>) {
    let mut spot: Vec<InstanceType> =
        assorted().iter().filter(|t| t.offerings.iter().any(|o| o.capacity_type == "spot")).take(18).cloned().collect();
    for (i, t) in spot.iter_mut().enumerate() {
        t.offerings[0].price = 1.00 + i as f64 * 0.1;
    }
    spot[16].offerings[0].price = 0.001;
    let dearest = spot[17].name.clone();
    let mut by_price: Vec<(String, f64)> = spot.iter().map(|t| (t.name.clone(), t.offerings[0].price)).collect();
    by_price.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut c = with_catalog(std::sync::Arc::new(spot));
    nodepool(
        &mut c,
        "default",
        "0s",
        "WhenEmptyOrUnderutilized",
        "100%",
        &format!("[{{key: node.kubernetes.io/instance-type, operator: Exists, minValues: {min_values}}}]"),
    );
    replica_set(&mut c);
    node(&mut c, "node-1", "default", &dearest, CPU_32);
    rs_pod(&mut c, "p", "node-1", "");
    let new = replaced(&mut c, &dearest);
    (instance_types_of(&new), by_price.into_iter().map(|(n, _)| n).collect())
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1357
#[test]
fn spot_to_spot_keeps_min_values_types_when_more_than_fifteen() {
    let (types, cheapest) = spot_to_spot_with_min_values(16);
    assert_eq!(types.len(), 16, "{types:?}");
    assert!(types.contains(&cheapest[0]), "the cheapest, outside the first fifteen of the catalog");
    for t in &cheapest[..16] {
        assert!(types.contains(t), "{t} missing from {types:?}");
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1568
#[test]
fn spot_to_spot_keeps_fifteen_types_when_min_values_is_fewer() {
    let (types, cheapest) = spot_to_spot_with_min_values(10);
    assert_eq!(types.len(), 15, "{types:?}");
    assert!(types.contains(&cheapest[0]));
    for t in &cheapest[..15] {
        assert!(types.contains(t), "{t} missing from {types:?}");
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1476
#[test]
fn a_multi_node_replace_that_breaks_min_values_falls_back_to_a_delete() {
    let zone = "test-zone-1a";
    let cat = vec![
        fake("current-on-demand").resources(5, 4 * GIB, 5).offerings(&[("on-demand", zone, 0.5, true)]).build(),
        fake("other-on-demand").resources(5, 4 * GIB, 5).offerings(&[("on-demand", zone, 0.4, true)]).build(),
    ];
    let mut c = with_catalog(std::sync::Arc::new(cat));
    nodepool(
        &mut c,
        "default",
        "0s",
        "WhenEmptyOrUnderutilized",
        "100%",
        "[{key: node.kubernetes.io/instance-type, operator: Exists, minValues: 2}, {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]",
    );
    for i in 0..3 {
        node(&mut c, &format!("node-{i}"), "default", "current-on-demand", "{cpu: \"4\", pods: \"100\"}");
    }
    // One 2-CPU pod on each of the first two nodes, two on the third.
    for (p, n) in [("p-0", "node-0"), ("p-1", "node-1"), ("p-2", "node-2"), ("p-3", "node-2")] {
        c.bound(&format!("{{name: {p}}}"), n, &requests("2"));
    }
    let (snap, d) = decide(&c);
    let plan = d.plan.expect("one command");
    // One of the first two nodes is deleted, its pod moving to the other.
    let gone = names(&snap, &plan);
    assert!(gone == ["node-0"] || gone == ["node-1"], "{}", plan.reason);
    assert!(plan.replacements.is_empty(), "{}", plan.reason);
    // Executed without making replacements ready: a replace would leave its candidates.
    let cmd = decided(&c, &snap, &plan);
    c.now += VALIDATION_MS / 1000;
    assert_eq!(validated(&c, &cmd, &[]), None);
    execute(&mut c, cmd, false);
    assert_eq!(nodeclaims(&c).len(), 2, "{}", plan.reason);
    assert_eq!(node_names(&c).len(), 2, "{}", plan.reason);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1777
/// karpenter:pkg/controllers/disruption/consolidation_test.go:1778
#[test]
fn a_replacement_with_fewer_cheaper_types_than_min_values_is_not_made() {
    // Karpenter's two entries both apply and bind the spot node (its on-demand entry sets
    // `node` but never applies it): a spot node of the 16th cheapest spot type, under a
    // NodePool requiring 16 instance types.
    let mut spot: Vec<(String, f64)> = assorted()
        .iter()
        .filter_map(|t| t.offerings.iter().find(|o| o.capacity_type == "spot").map(|o| (t.name.clone(), o.price)))
        .collect();
    spot.sort_by(|a, b| a.1.total_cmp(&b.1));
    let it = spot[15].0.clone();
    let mut c = suite();
    nodepool(
        &mut c,
        "default",
        "0s",
        "WhenEmptyOrUnderutilized",
        "100%",
        "[{key: node.kubernetes.io/instance-type, operator: Exists, minValues: 16}]",
    );
    replica_set(&mut c);
    node(&mut c, "node-1", "default", &it, CPU_32);
    rs_pod(&mut c, "p", "node-1", "");
    let (_, d) = decide(&c);
    assert!(d.plan.is_none(), "{:?}", d.plan);
    // Refused for minValues, not only for the spot-to-spot minimum of 15 types.
    let why = unconsolidatable(&d);
    assert!(why.len() == 1 && why[0].starts_with("Filtering by price: minValues 16"), "{why:?}");
    assert_eq!(nodeclaims(&c), ["node-1"]);
    assert_eq!(node_names(&c), ["node-1"]);
}

fn replace_despite_a_nodepool_without_types(spot: bool) {
    let mut c = suite();
    default_nodepool(&mut c);
    c.nodepool("nodepool-2", "  template:\n    spec:\n      requirements: []\n");
    c.objects.nodepools[1].metadata.annotations = Some([(NO_TYPES.to_string(), "true".to_string())].into());
    let it = one_replaceable_node(&mut c, spot);
    assert!(snapshot(&c).nodepools[1].instance_types.is_empty());
    let new = replaced(&mut c, it);
    assert_eq!(
        new.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")).map(String::as_str),
        Some("default")
    );
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1836
#[test]
fn an_on_demand_node_is_replaced_though_another_nodepool_has_no_instance_types() {
    replace_despite_a_nodepool_without_types(false);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1837
#[test]
fn a_spot_node_is_replaced_though_another_nodepool_has_no_instance_types() {
    replace_despite_a_nodepool_without_types(true);
}

/// `test.PodDisruptionBudget` over `app: test`, maxUnavailable 0, in `namespace`, with `extra`
/// under `spec`.
fn blocking_pdb(c: &mut Cluster, namespace: &str, extra: &str) {
    c.pdb(&format!(
        "metadata: {{name: pdb, namespace: {namespace}}}\nspec: {{selector: {{matchLabels: {{app: test}}}}, maxUnavailable: 0{extra}}}\nstatus: {{observedGeneration: 1, disruptionsAllowed: 0, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1}}"
    ));
}

/// The suite's node (spot or not) with three pods of the ReplicaSet under a blocking PDB.
fn three_pods_under_a_pdb(spot: bool, extra: &str) -> (Cluster, &'static str) {
    let mut c = suite();
    default_nodepool(&mut c);
    replica_set(&mut c);
    let it = if spot { MOST_EXPENSIVE_SPOT } else { MOST_EXPENSIVE };
    node(&mut c, "node-1", "default", it, CPU_32);
    for i in 0..3 {
        rs_pod(&mut c, &format!("p-{i}"), "node-1", "");
    }
    blocking_pdb(&mut c, "default", extra);
    (c, it)
}

fn pdb_blocks_the_replacement(spot: bool) {
    let (c, _) = three_pods_under_a_pdb(spot, "");
    let (_, d) = decide(&c);
    assert!(d.plan.is_none(), "{:?}", d.plan);
    assert!(d.blocked.iter().any(|b| b.reason.contains("PodDisruptionBudget=[default/pdb]")), "{:?}", d.blocked);
    // No new NodeClaim, the old one kept.
    assert_eq!(nodeclaims(&c), ["node-1"]);
    assert_eq!(node_names(&c), ["node-1"]);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1890
#[test]
fn a_pdb_allowing_no_disruption_keeps_an_on_demand_node() {
    pdb_blocks_the_replacement(false);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1891
#[test]
fn a_pdb_allowing_no_disruption_keeps_a_spot_node() {
    pdb_blocks_the_replacement(true);
}

fn unhealthy_pods_under_an_always_allow_pdb_are_replaced(spot: bool) {
    let (mut c, it) = three_pods_under_a_pdb(spot, ", unhealthyPodEvictionPolicy: AlwaysAllow");
    // The pods are not Ready: the PDB does not stop their eviction.
    for p in c.objects.pods.iter_mut() {
        p.status = Some(
            serde_yaml::from_str("{phase: Running, conditions: [{type: Ready, status: \"False\"}]}").expect("status"),
        );
    }
    replaced(&mut c, it);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1977
#[test]
fn an_always_allow_pdb_does_not_keep_an_on_demand_node_of_unready_pods() {
    unhealthy_pods_under_an_always_allow_pdb_are_replaced(false);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1978
#[test]
fn an_always_allow_pdb_does_not_keep_a_spot_node_of_unready_pods() {
    unhealthy_pods_under_an_always_allow_pdb_are_replaced(true);
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:2040
#[test]
fn a_pdb_of_another_namespace_does_not_keep_an_on_demand_node() {
    let mut c = suite();
    default_nodepool(&mut c);
    let it = one_replaceable_node(&mut c, false);
    c.namespace("metadata: {name: other}");
    blocking_pdb(&mut c, "other", "");
    replaced(&mut c, it);
}
