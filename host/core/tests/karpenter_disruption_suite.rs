//! (Long: Karpenter's disruption suite, case by case.)
//! Karpenter's disruption suites (`pkg/controllers/disruption/suite_test.go`, `queue_test.go`)
//! and its NodePool hash suite (`pkg/controllers/nodepool/hash/suite_test.go`), ported to
//! Tenon's decision core (`disruption`), its command state machine
//! (`orchestration::command`) and its NodePool template hash. What the controller shell does
//! around them (taints, API writes, Events) is said in comments.

use crate::support;
use tenon_core::cached_pod;

use support::karpenter::{Cluster, default_types};
use support::*;
use tenon_core::disruption::candidates::{Candidate, candidates, eviction_cost};
use tenon_core::disruption::{DefaultPolicies, DisruptionDecision, DisruptionPlan, Method, disrupt};
use tenon_core::model::{Budget, BudgetNodes, ClusterSnapshot, DisruptionReason, Node, PodDisruptionBudget};
use tenon_core::orchestration::command::{
    self as command, Command, On, REPLACEMENT_TIMEOUT_MS, Replacement, Step, VALIDATION_MS, hold, stale_marks,
    still_invalid,
};
use tenon_core::plan::NewNodeClaim;
use tenon_core::requirements::Operator;
use tenon_core::scheduler::Simulator;
use tenon_core::scorer::PriceScorer;
use tenon_core::selector::LabelSelector;

const T0: i64 = 1_795_996_800;
const HOUR: i64 = 3600;
const MS: i64 = 1000;
const REASONS: [DisruptionReason; 3] =
    [DisruptionReason::Empty, DisruptionReason::Drifted, DisruptionReason::Underutilized];

fn decide(s: &ClusterSnapshot) -> DisruptionDecision {
    disrupt(s, &DefaultPolicies)
}

/// NodePool `default` (Karpenter's `test.NodePool()`), consolidating at once.
fn cluster() -> ClusterSnapshot {
    let mut p = pool("default");
    p.disruption.consolidate_after = Some(0);
    ClusterSnapshot { now: T0 + HOUR, nodepools: vec![p], ..Default::default() }
}

/// One managed, initialized node `n` of NodePool `default`, created an hour ago.
fn one_node() -> ClusterSnapshot {
    let mut s = cluster();
    s.nodes.push(managed("n", "default", "gp.xlarge", "zone-a", T0));
    s
}

fn claim_mut(s: &mut ClusterSnapshot, n: usize) -> &mut tenon_core::model::ClaimInfo {
    s.nodes[n].claim.as_mut().expect("managed node")
}

/// The candidate for node `n`, if it is one at all.
fn candidate(s: &ClusterSnapshot, n: usize) -> Option<Candidate> {
    candidates(s).0.into_iter().find(|c| c.node == n)
}

/// Why node `n` is not disruptable by graceful methods (Karpenter's
/// `GracefulDisruptionClass`): blocked as a candidate, or not one at all.
fn graceful_block(s: &ClusterSnapshot, n: usize) -> Option<String> {
    let (cands, blocked) = candidates(s);
    if let Some(b) = blocked.iter().find(|b| b.node == n) {
        return Some(b.reason.clone());
    }
    cands.into_iter().find(|c| c.node == n).and_then(|c| c.blocked)
}

fn pdb(name: &str, app: &str, allowed: i32) -> PodDisruptionBudget {
    PodDisruptionBudget {
        namespace: "default".into(),
        name: name.into(),
        selector: LabelSelector::from_labels(&labels(&[("app", app)])),
        disruptions_allowed: allowed,
        unhealthy_always_allow: false,
        fully_blocking: false,
    }
}

fn do_not_disrupt(name: &str, node: &str) -> tenon_core::model::Pod {
    let mut p = bound(name, node, 100, 1);
    p.annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    p
}

fn app_pod(name: &str, node: &str, app: &str) -> tenon_core::model::Pod {
    let mut p = bound(name, node, 100, 1);
    p.labels = labels(&[("app", app)]);
    p
}

/// An in-flight NodeClaim (created, no Node yet) standing for a planned replacement.
fn in_flight(name: &str, nc: &NewNodeClaim) -> Node {
    Node {
        name: name.into(),
        nodepool: Some(nc.nodepool_name.clone()),
        requirements: nc.requirements.clone(),
        labels: labels(&[("karpenter.sh/nodepool", &nc.nodepool_name)]),
        allocatable: nc.requests.clone(),
        capacity: nc.requests.clone(),
        in_flight: true,
        ..Default::default()
    }
}

/// (NodeClaim, Node) of each of a plan's candidates.
fn names(s: &ClusterSnapshot, nodes: &[usize]) -> Vec<(String, String)> {
    nodes.iter().map(|&n| (s.nodes[n].claim.as_ref().unwrap().nodeclaim.clone(), s.nodes[n].name.clone())).collect()
}

/// A drift command for node `node-1` (NodeClaim `nc-1`) with `replacements` replacements,
/// decided at 0 and executed (candidate marked, replacements `r0…` created) at 15 s:
/// Karpenter's `queue.StartCommand`.
fn started(replacements: usize) -> Command<()> {
    let mut c = Command::new(
        Method::Drift,
        "node-1 drifted: NodePoolDrifted".into(),
        0.0,
        vec![("nc-1".into(), "node-1".into())],
        vec![(); replacements],
        0,
    );
    assert_eq!(c.step(VALIDATION_MS, &[]), Step::Validate);
    c.execute((0..replacements).map(|i| format!("r{i}")).collect(), VALIDATION_MS);
    c
}

// ---------------------------------------------------------------------------------------
// queue_test.go: the orchestration queue.
// ---------------------------------------------------------------------------------------

/// karpenter:pkg/controllers/disruption/queue_test.go:89
#[test]
fn candidates_stay_marked_while_replacements_are_not_initialized() {
    let c = started(1);
    // The replacement was created but is not Initialized (not even seen yet, then launching).
    for state in [Replacement::NotSeen, Replacement::Launching] {
        assert_eq!(c.step(VALIDATION_MS + 30 * MS, &[state]), Step::Wait, "{state:?}");
    }
    // The command owns its marked candidate: the mark sweep leaves it tainted.
    assert!(stale_marks([("nc-1", "node-1")], std::slice::from_ref(&c)).is_empty());
    // Two NodeClaims now: the candidate's and the replacement's.
    assert_eq!(c.replacements, ["r0"]);
}

/// karpenter:pkg/controllers/disruption/queue_test.go:123
#[test]
fn a_command_before_the_timeout_waits_and_stays_queued() {
    let c = started(1);
    assert_eq!(c.step(VALIDATION_MS + REPLACEMENT_TIMEOUT_MS - 1, &[Replacement::Launching]), Step::Wait);
    assert!(c.has_candidate("nc-1"), "the command still holds its candidate");
}

/// karpenter:pkg/controllers/disruption/queue_test.go:148
#[test]
fn a_replacement_not_yet_in_the_shells_view_is_waited_for() {
    // The replacement exists for the cloud (launched) but the shell's view lags: not gone.
    let c = started(1);
    assert_eq!(c.step(VALIDATION_MS + MS, &[Replacement::NotSeen]), Step::Wait);
    assert_eq!(c.step(VALIDATION_MS + 2 * MS, &[Replacement::Launching]), Step::Wait);
    assert!(c.has_candidate("nc-1"));
}

/// karpenter:pkg/controllers/disruption/queue_test.go:179
#[test]
fn a_command_that_times_out_is_abandoned_and_its_candidates_unmarked() {
    let c = started(1);
    let step = c.step(VALIDATION_MS + 11 * 60 * MS, &[Replacement::Launching]);
    assert!(matches!(step, Step::Abandon { marked: true, .. }), "{step:?}");
    // The shell unmarks (untaints) the candidates; the command is dropped, and any mark it
    // left would be swept as stale.
    assert_eq!(stale_marks([("nc-1", "node-1")], &[] as &[Command<()>]), [("nc-1", "node-1")]);
}

/// karpenter:pkg/controllers/disruption/queue_test.go:209
#[test]
fn a_command_completes_once_its_replacement_is_initialized() {
    let c = started(1);
    // Launching, waiting on readiness: Karpenter's Events on the replacement.
    assert_eq!(c.step(VALIDATION_MS + MS, &[Replacement::Launching]), Step::Wait);
    let waiting: Vec<(On, &str, String)> =
        c.waiting_notices(&[Replacement::Launching]).into_iter().map(|n| (n.on, n.reason, n.message)).collect();
    assert_eq!(
        waiting,
        [
            (On::Replacement(0), "DisruptionLaunching", "Launching NodeClaim: Drifted".to_string()),
            (
                On::Replacement(0),
                "DisruptionWaitingReadiness",
                "Waiting on readiness to continue disruption".to_string()
            ),
        ]
    );
    assert_eq!(c.step(VALIDATION_MS + 2 * MS, &[Replacement::Initialized]), Step::Delete);
    assert!(c.waiting_notices(&[Replacement::Initialized]).iter().all(|n| n.reason == "DisruptionLaunching"));
    // The shell then deletes the candidate's NodeClaim (the Node follows) with Karpenter's
    // `DisruptionTerminating` Events on both.
    let [node, claim] = c.terminating_notices(0);
    assert_eq!(
        (node.on, node.reason, node.message.as_str()),
        (On::CandidateNode(0), "DisruptionTerminating", "Disrupting Node: Drifted")
    );
    assert_eq!(
        (claim.on, claim.reason, claim.message.as_str()),
        (On::CandidateNodeClaim(0), "DisruptionTerminating", "Disrupting NodeClaim: Drifted")
    );
}

/// karpenter:pkg/controllers/disruption/queue_test.go:257
#[test]
fn a_command_completes_only_once_every_replacement_is_initialized() {
    use Replacement::*;
    let c = started(2);
    assert_eq!(c.step(VALIDATION_MS + MS, &[Launching, Launching]), Step::Wait);
    assert_eq!(c.step(VALIDATION_MS + 2 * MS, &[Initialized, Launching]), Step::Wait);
    assert_eq!(c.step(VALIDATION_MS + 3 * MS, &[Initialized, Initialized]), Step::Delete);
}

/// karpenter:pkg/controllers/disruption/queue_test.go:314
#[test]
fn a_command_without_replacements_deletes_at_once() {
    let c = started(0);
    assert_eq!(c.step(VALIDATION_MS, &[]), Step::Delete);
    assert_eq!(c.terminating_notices(0)[0].message, "Disrupting Node: Drifted");
    assert!(c.waiting_notices(&[]).is_empty(), "no replacement to wait on");
}

/// karpenter:pkg/controllers/disruption/queue_test.go:339
#[test]
fn two_commands_finish_each_as_its_own_replacement_is_initialized() {
    use Replacement::*;
    let first = started(1);
    let mut second =
        Command::new(Method::Drift, "node-2 drifted".into(), 0.0, vec![("nc-2".into(), "node-2".into())], vec![()], 0);
    second.execute(vec!["r-2".into()], VALIDATION_MS);
    let t = VALIDATION_MS + MS;
    assert_eq!(first.step(t, &[Launching]), Step::Wait);
    assert_eq!(second.step(t, &[Launching]), Step::Wait);
    // The first command's replacement is Initialized: it finishes, the second still waits.
    assert_eq!(second.step(t + MS, &[Launching]), Step::Wait);
    assert_eq!(first.step(t + MS, &[Initialized]), Step::Delete);
    // Then the second's.
    assert_eq!(second.step(t + 2 * MS, &[Initialized]), Step::Delete);
    assert!(first.has_candidate("nc-1") && !first.has_candidate("nc-2"));
    assert!(second.has_candidate("nc-2") && !second.has_candidate("nc-1"));
}

/// karpenter:pkg/controllers/disruption/queue_test.go:431
/// karpenter:pkg/controllers/disruption/queue_test.go:432
#[test]
fn replacements_are_given_ten_minutes_however_many_commands_are_queued() {
    // Karpenter's max(n × 80 ms, 10 min): 10 minutes for 100 and for 4000 queued commands.
    assert_eq!(REPLACEMENT_TIMEOUT_MS, 10 * 60 * MS);
    for n in [100usize, 4000] {
        let queue: Vec<Command<()>> = (0..n).map(|_| started(1)).collect();
        let deadline = VALIDATION_MS + 10 * 60 * MS;
        assert!(queue.iter().all(|c| c.step(deadline - 1, &[Replacement::Launching]) == Step::Wait), "{n}");
        assert!(
            queue.iter().all(|c| matches!(c.step(deadline, &[Replacement::Launching]), Step::Abandon { .. })),
            "{n}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// nodepool/hash/suite_test.go: the NodePool template hash.
// ---------------------------------------------------------------------------------------

/// Karpenter's hash suite NodePool, with `extra` appended under `spec:` and `meta` in its
/// `metadata` (flow YAML entries).
fn hash_nodepool(meta: &str, labels: &str, annotations: &str, extra: &str) -> tenon_api::NodePool {
    serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: default{meta}}}\nspec:\n  template:\n    metadata:\n      annotations: {{{annotations}}}\n      labels: {{{labels}}}\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n      requirements: []\n      taints: [{{key: key, effect: NoExecute}}]\n      startupTaints: [{{key: key, effect: NoExecute}}]\n      expireAfter: 5m\n      terminationGracePeriod: 5m\n{extra}"
    ))
    .unwrap()
}

const ANNOTATIONS: &str = "keyAnnotation: valueAnnotation, keyAnnotation2: valueAnnotation2";

/// The hash decisions compare NodeClaims with (what Karpenter's controller would have
/// written to the NodePool's `karpenter.sh/nodepool-hash`): Tenon computes it from the
/// spec each round.
fn effective_hash(np: &tenon_api::NodePool) -> String {
    let mut c = Cluster::new(default_types());
    c.objects.nodepools.push(np.clone());
    c.snapshot().nodepools[0].hash.clone()
}

/// karpenter:pkg/controllers/nodepool/hash/suite_test.go:109
#[test]
fn the_hash_follows_the_templates_static_fields() {
    let before = hash_nodepool("", "keyLabel: valueLabel", ANNOTATIONS, "");
    assert_eq!(effective_hash(&before), before.template_hash());
    // New labels; the same annotations in another order.
    let after = hash_nodepool(
        "",
        "keyLabeltest: valueLabeltest",
        "keyAnnotation2: valueAnnotation2, keyAnnotation: valueAnnotation",
        "",
    );
    assert_eq!(effective_hash(&after), after.template_hash());
    assert_ne!(after.template_hash(), before.template_hash());
}

/// karpenter:pkg/controllers/nodepool/hash/suite_test.go:126
#[test]
fn the_hash_ignores_behaviour_fields() {
    let before = hash_nodepool("", "keyLabel: valueLabel", ANNOTATIONS, "");
    let mut after = hash_nodepool(
        "",
        "keyLabel: valueLabel",
        ANNOTATIONS,
        "  limits: {cpu: \"16\"}\n  disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 30s}\n  weight: 80\n",
    );
    after.spec.template.spec.requirements = serde_yaml::from_str(
        "[{key: topology.kubernetes.io/zone, operator: In, values: [test]}, {key: topology.kubernetes.io/zone, operator: Gt, values: [\"1\"]}, {key: topology.kubernetes.io/zone, operator: Lt, values: [\"1\"]}]",
    )
    .unwrap();
    assert_eq!(after.template_hash(), before.template_hash());
    assert_eq!(effective_hash(&after), before.template_hash());
}

/// karpenter:pkg/controllers/nodepool/hash/suite_test.go:149
#[test]
fn a_stale_hash_annotation_on_the_nodepool_is_not_used() {
    // Karpenter rewrites the NodePool's hash and version annotations when the version is
    // out of date; Tenon never reads them: the hash is the spec's under today's version.
    let np = hash_nodepool(
        ", annotations: {karpenter.sh/nodepool-hash: abceduefed, karpenter.sh/nodepool-hash-version: test}",
        "keyLabel: valueLabel",
        ANNOTATIONS,
        "",
    );
    assert_eq!(effective_hash(&np), np.template_hash());
    assert_ne!(effective_hash(&np), "abceduefed");
    assert_eq!(tenon_api::hash::NODEPOOL_HASH_VERSION, "tenon-v1");
}

/// A node of NodePool `default` whose NodeClaim is stamped `hash` under `version`.
fn stamped(hash: &str, version: &str) -> ClusterSnapshot {
    let mut s = one_node();
    s.nodepools[0].hash = "current".into();
    s.nodepools[0].disruption.consolidate_after = None;
    let c = claim_mut(&mut s, 0);
    c.nodepool_hash = Some(hash.into());
    c.nodepool_hash_version = Some(version.into());
    s
}

/// The decision part of Karpenter's nodepool/hash case 163 (the re-stamp is the controller's, ported there).
#[test]
fn nodeclaims_stamped_under_another_hash_version_are_not_drifted() {
    // Karpenter re-stamps them with today's hash and version, so they are not drifted until
    // the template changes again. Tenon's decision treats a foreign version the same way
    // (no NodePool-hash drift); the re-stamp itself would be the controller's write.
    for version in ["test", "v3"] {
        let s = stamped("123456", version);
        assert_eq!(candidate(&s, 0).unwrap().drifted, None, "{version}");
        assert!(decide(&s).plan.is_none(), "{version}");
    }
}

/// karpenter:pkg/controllers/nodepool/hash/suite_test.go:200
#[test]
fn nodeclaims_stamped_under_todays_version_keep_their_hash_and_drift() {
    let s = stamped("1234564654", tenon_api::hash::NODEPOOL_HASH_VERSION);
    assert_eq!(candidate(&s, 0).unwrap().drifted.as_deref(), Some("NodePoolDrifted"));
    let s = stamped("current", tenon_api::hash::NODEPOOL_HASH_VERSION);
    assert_eq!(candidate(&s, 0).unwrap().drifted, None);
}

/// karpenter:pkg/controllers/nodepool/hash/suite_test.go:228
#[test]
fn a_drifted_nodeclaim_stays_drifted_across_a_hash_version_change() {
    let mut s = stamped("123456", "test");
    claim_mut(&mut s, 0).drift = Some("NodePoolDrifted".into());
    assert_eq!(candidate(&s, 0).unwrap().drifted.as_deref(), Some("NodePoolDrifted"));
    assert_eq!(decide(&s).plan.expect("still drifted").method, Method::Drift);
}

// ---------------------------------------------------------------------------------------
// suite_test.go: Simulate Scheduling.
// ---------------------------------------------------------------------------------------

/// karpenter:pkg/controllers/disruption/suite_test.go:194
#[test]
fn a_candidates_pods_get_new_capacity_when_every_other_node_is_deleting() {
    let mut s = cluster();
    s.nodepools[0].disruption.consolidate_after = None;
    for i in 0..10 {
        let mut n = managed(&format!("n{i}"), "default", "gp.xlarge", "zone-a", T0);
        n.allocatable = tenon_core::resources::Resources::new(3000, 64 * GIB, 100);
        if i > 0 {
            // Marked for deletion.
            n.claim.as_mut().unwrap().disrupting = true;
            n.unschedulable = true;
        }
        s.nodes.push(n);
    }
    // 2 CPU: one such pod per node.
    s.pods.push(bound("p", "n0", 2000, 0));
    let out = Simulator::new(&s).remove(&[0], &PriceScorer);
    assert!(out.unschedulable.is_empty(), "{:?}", out.unschedulable);
    assert_eq!(out.nodeclaims.len(), 1);
    assert_eq!(out.nodeclaims[0].pods, [0]);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:259
#[test]
fn replacements_follow_one_another_until_the_budget_is_spent() {
    let mut s = cluster();
    s.nodepools[0].disruption.consolidate_after = None;
    s.nodepools[0].requirements.add(req("test-partition", Operator::Exists, &[]));
    s.nodepools[0].disruption.budgets = vec![Budget { nodes: BudgetNodes::Count(3), reasons: None, window: None }];
    s.now = T0 + 60;
    for i in 0..10 {
        let name = format!("n{i}");
        let mut n = managed(&name, "default", "gp.xlarge", "zone-a", T0);
        n.labels.insert("test-partition".into(), i.to_string());
        n.requirements.add(tenon_core::requirements::Requirement::in_values("test-partition", [i.to_string()]));
        n.claim.as_mut().unwrap().drift = Some("Drifted".into());
        s.nodes.push(n);
        let mut p = bound(&format!("p{i}"), &name, 100, 0);
        p.node_selector.add(tenon_core::requirements::Requirement::in_values("test-partition", [i.to_string()]));
        s.pods.push(p);
    }
    let mut nodeclaims = 10;
    for round in 0..3 {
        let plan = decide(&s).plan.unwrap_or_else(|| panic!("round {round}: a replace"));
        assert_eq!(plan.method, Method::Drift);
        assert_eq!(plan.candidates.len(), 1);
        assert_eq!(plan.replacements.len(), 1, "round {round}");
        // Executed: the candidate is marked (tainted), its replacement created.
        let c = plan.candidates[0];
        claim_mut(&mut s, c).disrupting = true;
        s.nodes[c].unschedulable = true;
        s.nodes.push(in_flight(&format!("replacement-{round}"), &plan.replacements[0]));
        nodeclaims += 1;
        assert_eq!(nodeclaims, 11 + round);
    }
    // The budget of 3 is spent.
    assert!(decide(&s).plan.is_none());
    assert_eq!(nodeclaims, 13);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:374
#[test]
fn a_node_with_a_local_volume_pinned_to_it_can_be_replaced() {
    use k8s_openapi::api::core::v1 as core;
    use k8s_openapi::api::storage::v1 as storage;
    let mut s = one_node();
    s.nodes[0].allocatable = tenon_core::resources::Resources::new(32_000, 64 * GIB, 100);
    let pv: core::PersistentVolume = serde_yaml::from_str(
        "metadata: {name: local-pv}\nspec: {storageClassName: local-path, local: {path: /mnt/local}, nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n]}]}]}}}",
    )
    .unwrap();
    let pvc: core::PersistentVolumeClaim = serde_yaml::from_str(
        "metadata: {name: claim, namespace: default}\nspec: {volumeName: local-pv, storageClassName: local-path}",
    )
    .unwrap();
    let sc: storage::StorageClass =
        serde_yaml::from_str("metadata: {name: local-path}\nprovisioner: kubernetes.io/no-provisioner").unwrap();
    let k8s_pod: cached_pod::Pod = serde_yaml::from_str(
        "metadata: {name: p, namespace: default, labels: {app: test}, ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: ss, uid: ss-uid, controller: true}]}\nspec: {nodeName: n, containers: [{name: c, image: i}], volumes: [{name: v, persistentVolumeClaim: {claimName: claim}}]}",
    )
    .unwrap();
    let mut p = bound("p", "n", 100, 0);
    p.owner_kind = Some("StatefulSet".into());
    p.volume_requirements = {
        use tenon_core::convert::shared;
        tenon_core::convert::volume_requirements(&k8s_pod, &shared([pvc]), &shared([pv]), &shared([sc]))
    };
    s.pods.push(p);
    let plan = decide(&s).plan.expect("a replacement despite the PV's hostname affinity");
    assert_eq!(plan.candidates, [0]);
    assert_eq!(plan.replacements.len(), 1);
    // A command: validated, executed, the replacement Initialized: the old node goes.
    let mut cmd =
        Command::new(plan.method, plan.reason.clone(), 0.0, names(&s, &plan.candidates), plan.replacements, 0);
    assert_eq!(cmd.step(VALIDATION_MS, &[]), Step::Validate);
    assert_eq!(still_invalid(&s, cmd.method, &cmd.candidates), None);
    cmd.execute(vec!["replacement".into()], VALIDATION_MS);
    assert_eq!(cmd.step(VALIDATION_MS + MS, &[Replacement::Initialized]), Step::Delete);
    assert_ne!(cmd.replacements[0], "n-claim");
}

/// karpenter:pkg/controllers/disruption/suite_test.go:469
#[test]
fn provisioning_does_not_duplicate_a_replacement_not_yet_created() {
    let mut s = one_node();
    claim_mut(&mut s, 0).drift = Some("Drifted".into());
    let mut p = bound("p", "n", 100, 0);
    p.owner_kind = Some("ReplicaSet".into());
    s.pods.push(p);
    let plan = decide(&s).plan.expect("a drift replace");
    assert_eq!(plan.replacements.len(), 1);
    // Until the command executes (replacements created first), the candidate is not marked:
    // provisioning sees its pod bound and launches nothing for it.
    let cmd = Command::new(plan.method, plan.reason.clone(), 0.0, names(&s, &plan.candidates), plan.replacements, 0);
    assert!(cmd.executed.is_none());
    let provisioning = tenon_core::schedule(&s, &PriceScorer);
    assert!(provisioning.nodeclaims.is_empty(), "{}", provisioning.render(&s));
    // Nor when the command's candidate is held as disrupting for the next round.
    let mut held = s.clone();
    hold(&mut held, &command::held(std::slice::from_ref(&cmd)));
    let provisioning = tenon_core::schedule(&held, &PriceScorer);
    assert!(provisioning.nodeclaims.is_empty(), "{}", provisioning.render(&held));
}

// ---------------------------------------------------------------------------------------
// suite_test.go: Disruption Taints.
// ---------------------------------------------------------------------------------------

/// karpenter:pkg/controllers/disruption/suite_test.go:598
#[test]
fn marks_left_by_an_earlier_disruption_are_removed() {
    // A node tainted karpenter.sh/disrupted (and its NodeClaim's DisruptionReason condition)
    // that no command owns: the shell removes both each round.
    let marked = [("n-claim", "n")];
    assert_eq!(stale_marks(marked, &[] as &[Command<()>]), marked);
    let other: Command<()> =
        Command::new(Method::Drift, "other".into(), 0.0, vec![("m-claim".into(), "m".into())], vec![], 0);
    assert_eq!(stale_marks(marked, std::slice::from_ref(&other)), marked);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:625
#[test]
fn a_command_whose_replacement_is_deleted_unmarks_its_candidate() {
    let mut s = one_node();
    s.pods.push(bound("p", "n", 100, 0));
    let plan = decide(&s).plan.expect("a consolidation");
    assert_eq!(plan.replacements.len(), 1, "{}", plan.reason);
    let mut cmd =
        Command::new(plan.method, plan.reason.clone(), 0.0, names(&s, &plan.candidates), plan.replacements, 0);
    assert_eq!(cmd.step(VALIDATION_MS, &[]), Step::Validate);
    assert_eq!(still_invalid(&s, cmd.method, &cmd.candidates), None);
    // Executed: the candidate marked (tainted, DisruptionReason set), the replacement created.
    cmd.execute(vec!["replacement".into()], VALIDATION_MS);
    assert!(stale_marks([("n-claim", "n")], std::slice::from_ref(&cmd)).is_empty());
    // The replacement is deleted: the command is abandoned and the candidate unmarked.
    let step = cmd.step(VALIDATION_MS + MS, &[Replacement::Gone]);
    assert!(matches!(step, Step::Abandon { marked: true, .. }), "{step:?}");
}

// ---------------------------------------------------------------------------------------
// suite_test.go: BuildDisruptionBudgetMapping.
// ---------------------------------------------------------------------------------------

/// Ten initialized nodes of `default`, budget `nodes`.
fn ten_nodes(nodes: BudgetNodes) -> ClusterSnapshot {
    let mut s = cluster();
    s.nodepools[0].disruption.budgets = vec![Budget { nodes, reasons: None, window: None }];
    for i in 0..10 {
        s.nodes.push(managed(&format!("n{i}"), "default", "gp.xlarge", "zone-a", T0));
    }
    s
}

fn allowed(s: &ClusterSnapshot) -> Vec<usize> {
    let d = decide(s);
    REASONS.iter().map(|r| d.allowed[&("default".to_string(), *r)].allowed).collect()
}

/// karpenter:pkg/controllers/disruption/suite_test.go:711
#[test]
fn unmanaged_nodes_do_not_count_towards_budgets() {
    let mut s = ten_nodes(BudgetNodes::Percent(100));
    let mut unmanaged = node("unmanaged", "default", "zone-a", 4000);
    unmanaged.nodepool = None;
    unmanaged.labels.remove("karpenter.sh/nodepool");
    s.nodes.push(unmanaged);
    assert_eq!(allowed(&s), [10, 10, 10]);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:724
#[test]
fn uninitialized_nodes_do_not_count_towards_budgets() {
    let mut s = ten_nodes(BudgetNodes::Percent(100));
    let mut n = managed("new", "default", "gp.xlarge", "zone-a", T0);
    n.claim.as_mut().unwrap().initialized = false;
    s.nodes.push(n);
    assert_eq!(allowed(&s), [10, 10, 10]);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:755
#[test]
fn terminating_nodes_do_not_count_towards_budgets() {
    // As in Karpenter's case, the terminating NodeClaim (its instance already being deleted)
    // never initialized. Tenon has no InstanceTerminating state of its own: such a NodeClaim
    // is being deleted.
    let mut s = ten_nodes(BudgetNodes::Percent(100));
    let mut n = managed("terminating", "default", "gp.xlarge", "zone-a", T0);
    let c = n.claim.as_mut().unwrap();
    c.initialized = false;
    c.disrupting = true;
    s.nodes.push(n);
    assert_eq!(allowed(&s), [10, 10, 10]);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:787
#[test]
fn budgets_never_go_negative() {
    let mut s = ten_nodes(BudgetNodes::Percent(10));
    for n in 0..10 {
        claim_mut(&mut s, n).disrupting = true;
    }
    assert_eq!(allowed(&s), [0, 0, 0]);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:808
#[test]
fn deleting_and_marked_nodes_consume_the_budget() {
    let mut s = ten_nodes(BudgetNodes::Percent(100));
    // One deleted, one MarkedForDeletion: both `disrupting`.
    claim_mut(&mut s, 0).disrupting = true;
    claim_mut(&mut s, 1).disrupting = true;
    assert_eq!(allowed(&s), [8, 8, 8]);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:832
#[test]
fn not_ready_nodes_consume_the_budget() {
    let mut s = ten_nodes(BudgetNodes::Percent(100));
    claim_mut(&mut s, 0).ready = false;
    claim_mut(&mut s, 1).ready = false;
    assert_eq!(allowed(&s), [8, 8, 8]);
}

// ---------------------------------------------------------------------------------------
// suite_test.go: Pod Eviction Cost.
// ---------------------------------------------------------------------------------------

fn costed(deletion_cost: Option<&str>, priority: i32) -> f64 {
    let mut p = pod("p", 0, 0);
    if let Some(c) = deletion_cost {
        p.annotations.insert("controller.kubernetes.io/pod-deletion-cost".into(), c.into());
    }
    p.priority = priority;
    eviction_cost(&p)
}

/// karpenter:pkg/controllers/disruption/suite_test.go:857
#[test]
fn a_plain_pod_costs_one() {
    assert_eq!(costed(None, 0), 1.0);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:861
#[test]
fn a_positive_deletion_cost_raises_the_cost() {
    assert!(costed(Some("100"), 0) > 1.0);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:869
#[test]
fn a_negative_deletion_cost_lowers_the_cost() {
    assert!(costed(Some("-100"), 0) < 1.0);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:877
#[test]
fn higher_deletion_costs_cost_more() {
    assert!(costed(Some("101"), 0) > costed(Some("100"), 0));
    assert!(costed(Some("100"), 0) > costed(Some("99"), 0));
}

/// karpenter:pkg/controllers/disruption/suite_test.go:896
#[test]
fn a_higher_priority_costs_more() {
    assert!(costed(None, 1) > 1.0);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:902
#[test]
fn a_lower_priority_costs_less() {
    assert!(costed(None, -1) < 1.0);
}

// ---------------------------------------------------------------------------------------
// suite_test.go: Candidate Filtering. Karpenter's GracefulDisruptionClass is Tenon's
// candidate without `blocked`; its EventualDisruptionClass is drift under a
// terminationGracePeriod, which goes ahead despite `blocked`.
// ---------------------------------------------------------------------------------------

fn assert_do_not_disrupt_blocks(s: &ClusterSnapshot, pod: &str) {
    let why = graceful_block(s, 0).expect("blocked");
    assert_eq!(why, format!("pod has \"karpenter.sh/do-not-disrupt\" annotation (Pod=default/{pod})"));
    let d = decide(s);
    assert!(d.plan.is_none(), "{:?}", d.plan);
    // The `DisruptionBlocked` Event both shells publish on the Node and the NodeClaim.
    let event = format!("Pod has \"karpenter.sh/do-not-disrupt\" annotation (Pod=default/{pod})");
    assert!(d.blocked.iter().any(|b| b.node == 0 && b.event_message() == event), "{:?}", d.blocked);
}

fn assert_pdb_blocks(s: &ClusterSnapshot, pdb: &str) {
    let why = graceful_block(s, 0).expect("blocked");
    assert_eq!(why, format!("pdb prevents pod evictions (PodDisruptionBudget=[default/{pdb}])"));
    let d = decide(s);
    assert!(d.plan.is_none(), "{:?}", d.plan);
    let event = format!("Pdb prevents pod evictions (PodDisruptionBudget=[default/{pdb}])");
    assert!(d.blocked.iter().any(|b| b.node == 0 && b.event_message() == event), "{:?}", d.blocked);
}

fn assert_considered(s: &ClusterSnapshot, n: usize) {
    let c = candidate(s, n).unwrap_or_else(|| panic!("node {n} is no candidate"));
    assert_eq!(c.blocked, None);
}

/// Node `n` drifted, under a terminationGracePeriod of 300 s or none.
fn drifted_one_node(tgp: Option<i64>) -> ClusterSnapshot {
    let mut s = one_node();
    s.nodepools[0].termination_grace_period = tgp;
    claim_mut(&mut s, 0).drift = Some("Drifted".into());
    s
}

/// karpenter:pkg/controllers/disruption/suite_test.go:929
#[test]
fn do_not_disrupt_pods_block_a_node_without_a_termination_grace_period() {
    let mut s = one_node();
    s.pods.push(do_not_disrupt("p", "n"));
    assert_do_not_disrupt_blocks(&s, "p");
}

/// karpenter:pkg/controllers/disruption/suite_test.go:957
#[test]
fn do_not_disrupt_mirror_pods_block_a_node() {
    let mut s = one_node();
    let mut p = do_not_disrupt("mirror", "n");
    p.owner_kind = Some("Node".into());
    p.owner_name = Some("n".into());
    s.pods.push(p);
    assert_do_not_disrupt_blocks(&s, "mirror");
}

/// karpenter:pkg/controllers/disruption/suite_test.go:995
#[test]
fn do_not_disrupt_daemonset_pods_block_a_node() {
    let mut s = one_node();
    let mut p = do_not_disrupt("ds", "n");
    p.owner_kind = Some("DaemonSet".into());
    p.owner_name = Some("ds".into());
    s.pods.push(p);
    assert_do_not_disrupt_blocks(&s, "ds");
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1034
#[test]
fn do_not_disrupt_pods_do_not_stop_drift_under_a_termination_grace_period() {
    let mut s = drifted_one_node(Some(300));
    s.pods.push(do_not_disrupt("p", "n"));
    let d = decide(&s);
    let plan = d.plan.expect("drift goes ahead: the drain forces the pod out in time");
    assert_eq!((plan.method, plan.candidates), (Method::Drift, vec![0]));
    assert!(d.blocked.iter().all(|b| b.node != 0), "{:?}", d.blocked);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1063
#[test]
fn pdb_blocked_pods_do_not_stop_drift_under_a_termination_grace_period() {
    let mut s = drifted_one_node(Some(300));
    s.pods.push(app_pod("p", "n", "test"));
    s.pdbs.push(pdb("pdb", "test", 0));
    let d = decide(&s);
    let plan = d.plan.expect("drift goes ahead");
    assert_eq!((plan.method, plan.candidates), (Method::Drift, vec![0]));
    assert!(d.blocked.iter().all(|b| b.node != 0), "{:?}", d.blocked);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1095
#[test]
fn do_not_disrupt_pods_block_consolidation_even_under_a_termination_grace_period() {
    let mut s = one_node();
    s.nodepools[0].termination_grace_period = Some(300);
    s.pods.push(do_not_disrupt("p", "n"));
    assert_do_not_disrupt_blocks(&s, "p");
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1124
#[test]
fn pdb_blocked_pods_block_consolidation_even_under_a_termination_grace_period() {
    let mut s = one_node();
    s.nodepools[0].termination_grace_period = Some(300);
    s.pods.push(app_pod("p", "n", "test"));
    s.pdbs.push(pdb("pdb", "test", 0));
    assert_pdb_blocks(&s, "pdb");
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1160
#[test]
fn do_not_disrupt_pods_stop_drift_without_a_termination_grace_period() {
    let mut s = drifted_one_node(None);
    s.pods.push(do_not_disrupt("p", "n"));
    assert_do_not_disrupt_blocks(&s, "p");
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1188
#[test]
fn pdb_blocked_pods_stop_drift_without_a_termination_grace_period() {
    let mut s = drifted_one_node(None);
    s.pods.push(app_pod("p", "n", "test"));
    s.pdbs.push(pdb("pdb", "test", 0));
    assert_pdb_blocks(&s, "pdb");
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1223
#[test]
fn terminating_do_not_disrupt_pods_do_not_block() {
    let mut s = one_node();
    let mut p = do_not_disrupt("p", "n");
    p.deleted_at = Some(T0 + HOUR - 10);
    s.pods.push(p);
    assert_considered(&s, 0);
}

/// A Karpenter-launched node `n` of NodePool `default` (fake type `default-instance-type`,
/// on-demand, test-zone-1) and its NodeClaim, as the controller reads them; `drop` names
/// labels the node and NodeClaim lack.
fn karpenter_node(c: &mut Cluster, drop: &[&str]) {
    let all = [
        ("karpenter.sh/nodepool", "default"),
        ("node.kubernetes.io/instance-type", "default-instance-type"),
        ("karpenter.sh/capacity-type", "on-demand"),
        ("topology.kubernetes.io/zone", "test-zone-1"),
        ("karpenter.sh/initialized", "true"),
        ("kubernetes.io/hostname", "n"),
    ];
    let labels: Vec<String> =
        all.iter().filter(|(k, _)| !drop.contains(k)).map(|(k, v)| format!("{k}: \"{v}\"")).collect();
    let labels = labels.join(", ");
    c.node(&format!(
        "metadata: {{name: n, labels: {{{labels}}}}}\nspec: {{providerID: fake://n}}\nstatus: {{allocatable: {{cpu: \"32\", memory: 32Gi, pods: \"100\"}}, capacity: {{cpu: \"32\", memory: 32Gi, pods: \"100\"}}, conditions: [{{type: Ready, status: \"True\"}}]}}\n"
    ));
    c.objects.nodeclaims.push(
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: n-claim, labels: {{{labels}}}}}\nspec: {{requirements: [], nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}}\nstatus: {{nodeName: n, providerID: fake://n, conditions: [{{type: Initialized, status: \"True\", reason: Initialized, message: \"\", lastTransitionTime: \"2026-11-30T00:00:00Z\"}}]}}\n"
        ))
        .unwrap(),
    );
}

fn karpenter_cluster() -> Cluster {
    let mut c = Cluster::new(default_types());
    c.default_nodepool();
    c
}

fn node_index(s: &ClusterSnapshot, name: &str) -> usize {
    s.nodes.iter().position(|n| n.name == name).unwrap()
}

/// Sets the phase of the last pod added.
fn phase(c: &mut Cluster, phase: &str) {
    c.objects.pods.last_mut().unwrap().status = Some(serde_yaml::from_str(&format!("{{phase: {phase}}}")).unwrap());
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1253
#[test]
fn terminal_do_not_disrupt_pods_do_not_block() {
    let mut c = karpenter_cluster();
    karpenter_node(&mut c, &[]);
    c.bound("{name: done, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}", "n", "");
    phase(&mut c, "Succeeded");
    c.bound("{name: failed, annotations: {karpenter.sh/do-not-disrupt: \"true\"}}", "n", "");
    phase(&mut c, "Failed");
    let s = c.snapshot();
    assert_considered(&s, node_index(&s, "n"));
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1291
#[test]
fn do_not_disrupt_on_the_node_blocks_it() {
    let mut s = one_node();
    claim_mut(&mut s, 0).annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
    let why = graceful_block(&s, 0).expect("blocked");
    assert_eq!(why, "disruption is blocked through the \"karpenter.sh/do-not-disrupt\" annotation");
    let d = decide(&s);
    assert!(d.plan.is_none());
    assert!(d.blocked.iter().any(|b| b.node == 0 && b.reason == why));
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1314
#[test]
fn a_pod_under_two_pdbs_blocks_its_node() {
    let mut s = one_node();
    s.pods.push(app_pod("p", "n", "test"));
    s.pdbs.push(pdb("pdb-1", "test", 0));
    s.pdbs.push(pdb("pdb-2", "test", 0));
    let why = graceful_block(&s, 0).expect("blocked");
    assert!(why.starts_with("eviction does not support multiple PDBs"), "{why}");
    let d = decide(&s);
    assert!(d.plan.is_none());
    assert!(d.blocked.iter().any(|b| b.event_message().starts_with("Eviction does not support multiple PDBs")));
    // Karpenter names both budgets.
    assert!(why.contains("default/pdb-1") && why.contains("default/pdb-2"), "{why}");
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1364
/// karpenter:pkg/controllers/disruption/suite_test.go:1524
#[test]
fn a_fully_blocking_pdb_blocks_its_node() {
    let mut s = one_node();
    s.pods.push(app_pod("p", "n", "test"));
    s.pdbs.push(pdb("pdb", "test", 0));
    assert_pdb_blocks(&s, "pdb");
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1400
#[test]
fn a_fully_blocking_pdb_on_a_daemonset_pod_blocks_its_node() {
    let mut s = one_node();
    let mut p = app_pod("ds", "n", "test");
    p.owner_kind = Some("DaemonSet".into());
    s.pods.push(p);
    s.pdbs.push(pdb("pdb", "test", 0));
    assert_pdb_blocks(&s, "pdb");
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1447
#[test]
fn a_fully_blocking_pdb_on_a_mirror_pod_does_not_block() {
    let mut s = one_node();
    let mut p = app_pod("mirror", "n", "test");
    p.owner_kind = Some("Node".into());
    s.pods.push(p);
    s.pdbs.push(pdb("pdb", "test", 0));
    assert_considered(&s, 0);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1493
#[test]
fn do_not_disrupt_pods_block_graceful_disruption_without_a_termination_grace_period() {
    // Karpenter's case differs from :929 only by re-reading the PDB limits first.
    let mut s = one_node();
    s.pods.push(do_not_disrupt("p", "n"));
    assert_do_not_disrupt_blocks(&s, "p");
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1558
#[test]
fn a_fully_blocking_pdb_over_terminal_pods_does_not_block() {
    let mut c = karpenter_cluster();
    karpenter_node(&mut c, &[]);
    c.bound("{name: done, labels: {app: test}}", "n", "");
    phase(&mut c, "Succeeded");
    c.bound("{name: failed, labels: {app: test}}", "n", "");
    phase(&mut c, "Failed");
    c.pdb("metadata: {name: pdb, namespace: default}\nspec: {selector: {matchLabels: {app: test}}, maxUnavailable: 0}\nstatus: {disruptionsAllowed: 0, currentHealthy: 0, desiredHealthy: 0, expectedPods: 2}");
    let s = c.snapshot();
    assert_considered(&s, node_index(&s, "n"));
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1602
#[test]
fn a_fully_blocking_pdb_over_terminating_pods_does_not_block() {
    let mut s = one_node();
    let mut p = app_pod("p", "n", "test");
    p.deleted_at = Some(T0 + HOUR - 10);
    s.pods.push(p);
    s.pdbs.push(pdb("pdb", "test", 0));
    assert_considered(&s, 0);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1640
#[test]
fn a_node_without_a_nodeclaim_is_no_candidate() {
    let mut s = cluster();
    s.nodes.push(node("n", "default", "zone-a", 4000));
    assert!(candidate(&s, 0).is_none());
    assert!(decide(&s).plan.is_none());
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1659
#[test]
fn a_nodeclaim_without_a_node_is_no_candidate() {
    let mut c = karpenter_cluster();
    c.objects.nodeclaims.push(
        serde_yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: n-claim, labels: {karpenter.sh/nodepool: default}}\nspec: {requirements: [], nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\nstatus: {providerID: fake://n}\n",
        )
        .unwrap(),
    );
    let s = c.snapshot();
    assert_eq!(s.nodes.len(), 1);
    assert!(candidate(&s, 0).is_none());
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1678
#[test]
fn a_node_a_pending_pod_is_nominated_to_is_no_candidate() {
    // Karpenter's IsNodeNominated: the empty node is where the pending pod will go.
    let mut s = one_node();
    s.pods.push(pod("pending", 1000, 1));
    let d = decide(&s);
    assert!(d.plan.is_none(), "{:?}", d.plan);
    // The shell's `DisruptionBlocked` Event: "Node is nominated for a pending pod".
    assert!(
        d.blocked.iter().any(|b| b.node == 0 && b.event_message() == "Node is nominated for a pending pod"),
        "{:?}",
        d.blocked
    );
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1699
#[test]
fn a_nodeclaim_with_a_deletion_timestamp_is_no_candidate() {
    let mut c = karpenter_cluster();
    karpenter_node(&mut c, &[]);
    let s = c.snapshot();
    assert!(candidate(&s, node_index(&s, "n")).is_some(), "a candidate before its deletion");
    // As the API server records a delete held by the termination finalizer.
    let deleted = serde_yaml::from_str("2026-12-06T12:00:00Z").expect("a time");
    c.objects.nodeclaims[0].metadata.deletion_timestamp = Some(deleted);
    let s = c.snapshot();
    let n = node_index(&s, "n");
    assert!(candidate(&s, n).is_none());
    assert!(disrupt(&s, &DefaultPolicies).plan.is_none());
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1721
#[test]
fn deleting_or_marked_nodes_are_no_candidates() {
    let mut s = one_node();
    claim_mut(&mut s, 0).disrupting = true;
    assert!(candidate(&s, 0).is_none());
    assert!(decide(&s).plan.is_none());
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1742
#[test]
fn uninitialized_nodes_are_no_candidates() {
    let mut s = one_node();
    claim_mut(&mut s, 0).initialized = false;
    assert!(candidate(&s, 0).is_none());
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1762
#[test]
fn nodes_of_no_nodepool_are_no_candidates() {
    let mut s = one_node();
    s.nodes[0].nodepool = None;
    s.nodes[0].labels.remove("karpenter.sh/nodepool");
    assert!(candidate(&s, 0).is_none());
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1781
#[test]
fn nodes_of_a_missing_nodepool_are_no_candidates() {
    let mut s = one_node();
    s.nodes[0].nodepool = Some("gone".into());
    s.nodes[0].labels.insert("karpenter.sh/nodepool".into(), "gone".into());
    assert!(candidate(&s, 0).is_none());
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1805
/// karpenter:pkg/controllers/disruption/suite_test.go:1822
/// karpenter:pkg/controllers/disruption/suite_test.go:1839
#[test]
fn nodes_missing_well_known_labels_are_still_candidates() {
    for label in ["karpenter.sh/capacity-type", "topology.kubernetes.io/zone", "node.kubernetes.io/instance-type"] {
        let mut c = karpenter_cluster();
        karpenter_node(&mut c, &[label]);
        let s = c.snapshot();
        let n = node_index(&s, "n");
        assert!(candidate(&s, n).is_some(), "without {label}");
    }
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1856
#[test]
fn nodes_of_an_unknown_instance_type_are_still_candidates() {
    let mut c = karpenter_cluster();
    karpenter_node(&mut c, &["node.kubernetes.io/instance-type"]);
    c.objects.nodes[0]
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("node.kubernetes.io/instance-type".into(), "unknown-instance-type".into());
    let s = c.snapshot();
    let n = node_index(&s, "n");
    assert!(candidate(&s, n).is_some());
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1877
#[test]
fn nodes_of_a_running_command_are_no_candidates() {
    let mut s = one_node();
    let mut cmd: Command<()> = Command::new(Method::Drift, "drift".into(), 0.0, names(&s, &[0]), vec![], 0);
    cmd.execute(vec![], VALIDATION_MS);
    // A round sees the candidates of the commands under way as being disrupted.
    let commands = [cmd];
    hold(&mut s, &command::held(&commands));
    assert!(candidate(&s, 0).is_none());
    assert!(decide(&s).plan.is_none());
    let cmd = &commands[0];
    let why = still_invalid(&s, Method::Drift, &cmd.candidates).expect("invalid for another command");
    assert!(why.contains("being disrupted already"), "{why}");
}

// ---------------------------------------------------------------------------------------
// suite_test.go: Metrics. Karpenter counts each decision in
// `karpenter_disruption_decisions_total{decision, reason, consolidation_type}`; the
// controller's metric is the shell's, the decision labelled is the core's: ported here.
// ---------------------------------------------------------------------------------------

/// NodePool `default` with a 100% budget and `n` nodes of type `it`.
fn metrics_cluster(n: usize, it: &str) -> ClusterSnapshot {
    let mut s = cluster();
    s.nodepools[0].disruption.budgets = vec![Budget { nodes: BudgetNodes::Percent(100), reasons: None, window: None }];
    for i in 0..n {
        s.nodes.push(managed(&format!("n{i}"), "default", it, "zone-a", T0));
    }
    s
}

/// The `karpenter_voluntary_disruption_decisions_by_nodepool_total` samples a plan's command
/// adds one to, by NodePool (the labels without `nodepool` are the unlabelled total's).
fn decision_samples(s: &ClusterSnapshot, plan: &DisruptionPlan) -> Vec<(String, [(&'static str, String); 3])> {
    let pools: std::collections::BTreeSet<String> =
        plan.candidates.iter().filter_map(|&n| s.nodes[n].nodepool.clone()).collect();
    let labels = tenon_core::disruption::decision_labels(plan.method, !plan.replacements.is_empty());
    pools.into_iter().map(|p| (p, labels.clone())).collect()
}

fn decision(d: &str, r: &str, k: &str) -> [(&'static str, String); 3] {
    [("decision", d.into()), ("reason", r.into()), ("consolidation_type", k.into())]
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1941
#[test]
fn a_single_empty_node_is_an_empty_delete() {
    let s = metrics_cluster(1, "arm.small");
    let plan = decide(&s).plan.expect("a decision");
    assert_eq!((plan.method, plan.candidates.len(), plan.replacements.len()), (Method::Emptiness, 1, 0));
    assert_eq!(plan.method.reason(), Some(DisruptionReason::Empty));
    // What the command adds one to: Karpenter's `DecisionsPerformedTotal` and, with each
    // candidate's NodePool, `NodepoolDecisionsPerformed`.
    assert_eq!(decision_samples(&s, &plan), [("default".to_string(), decision("delete", "empty", "empty"))]);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1961
#[test]
fn a_single_drifted_node_whose_pods_fit_elsewhere_is_a_drift_delete() {
    let mut s = metrics_cluster(2, "gp.xlarge");
    claim_mut(&mut s, 0).drift = Some("Drifted".into());
    // Only n0 may be disrupted: n1 is not consolidatable.
    s.nodepools[0].disruption.consolidate_after = None;
    for (p, n) in [("p0", "n0"), ("p1", "n0"), ("p2", "n1"), ("p3", "n1")] {
        s.pods.push(bound(p, n, 100, 0));
    }
    let plan = decide(&s).plan.expect("a decision");
    assert_eq!((plan.method, plan.candidates.clone(), plan.replacements.len()), (Method::Drift, vec![0], 0));
    assert_eq!(plan.method.reason(), Some(DisruptionReason::Drifted));
    // What the command adds one to: Karpenter's `DecisionsPerformedTotal` and, with each
    // candidate's NodePool, `NodepoolDecisionsPerformed`.
    assert_eq!(decision_samples(&s, &plan), [("default".to_string(), decision("delete", "drifted", ""))]);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1991
#[test]
fn a_single_drifted_node_with_nowhere_for_its_pods_is_a_drift_replace() {
    let mut s = metrics_cluster(1, "gp.xlarge");
    claim_mut(&mut s, 0).drift = Some("Drifted".into());
    for p in ["p0", "p1", "p2", "p3"] {
        s.pods.push(bound(p, "n0", 100, 0));
    }
    let plan = decide(&s).plan.expect("a decision");
    assert_eq!((plan.method, plan.candidates.len(), plan.replacements.len()), (Method::Drift, 1, 1));
    // What the command adds one to: Karpenter's `DecisionsPerformedTotal` and, with each
    // candidate's NodePool, `NodepoolDecisionsPerformed`.
    assert_eq!(decision_samples(&s, &plan), [("default".to_string(), decision("replace", "drifted", ""))]);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:2019
#[test]
fn several_empty_nodes_are_one_empty_delete() {
    let s = metrics_cluster(3, "arm.small");
    let plan = decide(&s).plan.expect("a decision");
    assert_eq!((plan.method, plan.candidates.len(), plan.replacements.len()), (Method::Emptiness, 3, 0));
    // What the command adds one to: Karpenter's `DecisionsPerformedTotal` and, with each
    // candidate's NodePool, `NodepoolDecisionsPerformed`.
    assert_eq!(decision_samples(&s, &plan), [("default".to_string(), decision("delete", "empty", "empty"))]);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:2038
#[test]
fn underused_cheapest_nodes_are_a_multi_node_delete() {
    let mut s = metrics_cluster(3, "arm.small");
    // Karpenter's nodes take the cheapest offering of the cheapest type: spot.
    for n in &mut s.nodes {
        n.labels.insert("karpenter.sh/capacity-type".into(), "spot".into());
        n.requirements.add(req("karpenter.sh/capacity-type", Operator::In, &["spot"]));
        let c = n.claim.as_mut().unwrap();
        c.capacity_type = "spot".into();
        c.price *= 0.4;
    }
    for i in 0..3 {
        let mut p = bound(&format!("p{i}"), &format!("n{i}"), 100, 0);
        p.owner_kind = Some("ReplicaSet".into());
        s.pods.push(p);
    }
    let plan = decide(&s).plan.expect("a decision");
    assert_eq!(plan.method, Method::MultiNodeConsolidation);
    assert!(plan.candidates.len() >= 2);
    assert!(plan.replacements.is_empty(), "{}", plan.reason);
    // What the command adds one to: Karpenter's `DecisionsPerformedTotal` and, with each
    // candidate's NodePool, `NodepoolDecisionsPerformed`.
    assert_eq!(decision_samples(&s, &plan), [("default".to_string(), decision("delete", "underutilized", "multi"))]);
}

/// karpenter:pkg/controllers/disruption/suite_test.go:2079
#[test]
fn underused_expensive_nodes_are_a_multi_node_replace() {
    let mut s = metrics_cluster(3, "gp.xlarge");
    for (p, n) in [("p0", "n0"), ("p1", "n1"), ("p2", "n2"), ("p3", "n2")] {
        let mut p = bound(p, n, 100, 0);
        p.owner_kind = Some("ReplicaSet".into());
        s.pods.push(p);
    }
    let plan = decide(&s).plan.expect("a decision");
    assert_eq!((plan.method, plan.candidates.len(), plan.replacements.len()), (Method::MultiNodeConsolidation, 3, 1));
    assert_eq!(plan.method.reason(), Some(DisruptionReason::Underutilized));
    // What the command adds one to: Karpenter's `DecisionsPerformedTotal` and, with each
    // candidate's NodePool, `NodepoolDecisionsPerformed`.
    assert_eq!(decision_samples(&s, &plan), [("default".to_string(), decision("replace", "underutilized", "multi"))]);
}
