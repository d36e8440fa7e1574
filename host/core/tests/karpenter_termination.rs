//! Karpenter's `pkg/controllers/node/termination` suites, ported where the behaviour is the
//! drain decision (`tenon_core::disruption::drain`): which pods a node's drain waits for,
//! evicts or force-deletes, and in what order. Pods are written as Kubernetes objects and
//! read through `convert::snapshot`, as the controller reads them. Each test names the cases
//! it accounts for (tests/conformance/karpenter.tsv).

use crate::support;

use support::karpenter::*;
use tenon_core::disruption::drain::{DrainAction, DrainPlan, PdbAllowance, drain_order, drain_order_with};

fn cluster() -> Cluster {
    Cluster::new(default_types())
}

/// RFC 3339 for `NOW + offset` seconds.
fn at(offset: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_second(NOW + offset).expect("a time").to_string()
}

/// A running pod `name` on node `n`; `meta` adds metadata fields, `spec` spec lines.
fn on_n(c: &mut Cluster, name: &str, meta: &str, spec: &[&str]) {
    let spec: String = spec.iter().map(|l| format!("  {l}\n")).collect();
    c.bound(&format!("{{name: {name}{meta}}}"), "n", &spec);
}

/// The names of the plan's pods with the action `pick` selects.
fn named(c: &Cluster, plan: &DrainPlan, pick: impl Fn(&DrainAction) -> bool) -> Vec<String> {
    let snap = c.snapshot();
    let mut v: Vec<String> =
        plan.steps.iter().filter(|(_, a)| pick(a)).map(|(p, _)| snap.pods[*p].name.clone()).collect();
    v.sort();
    v
}

fn plan(c: &Cluster, deadline: Option<i64>) -> DrainPlan {
    drain_order(&c.snapshot(), "n", deadline)
}

fn evicted(c: &Cluster, deadline: Option<i64>) -> Vec<String> {
    named(c, &plan(c, deadline), |a| *a == DrainAction::Evict)
}

/// Marks pod `name` terminating: its deletion timestamp `offset` seconds from now.
fn terminating(c: &mut Cluster, name: &str, offset: i64) {
    let p = c.objects.pods.iter_mut().find(|p| p.metadata.name.as_deref() == Some(name)).expect("the pod");
    p.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(offset).parse().unwrap()));
}

fn gone(c: &mut Cluster, names: &[&str]) {
    c.objects.pods.retain(|p| !names.contains(&p.metadata.name.as_deref().unwrap_or_default()));
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:225
/// karpenter:pkg/controllers/node/termination/suite_test.go:256
#[test]
fn pods_tolerating_the_disruption_taint_are_neither_evicted_nor_waited_for() {
    for toleration in [
        "{key: karpenter.sh/disrupted, operator: Equal, value: '', effect: NoSchedule}",
        "{key: karpenter.sh/disrupted, operator: Exists, effect: NoSchedule}",
    ] {
        let mut c = cluster();
        on_n(&mut c, "plain", "", &[]);
        on_n(&mut c, "tolerant", "", &[&format!("tolerations: [{toleration}]")]);
        assert_eq!(evicted(&c, None), ["plain"], "{toleration}");
        gone(&mut c, &["plain"]);
        assert!(plan(&c, None).finished(), "{toleration}: the tolerant pod does not hold the node");
    }
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:289
/// karpenter:pkg/controllers/node/termination/suite_test.go:317
#[test]
fn pods_tolerating_unschedulable_and_pods_without_owners_are_evicted() {
    let mut c = cluster();
    on_n(
        &mut c,
        "tolerates-unschedulable",
        ", ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: rs-uid, controller: true}]",
        &["tolerations: [{key: node.kubernetes.io/unschedulable, operator: Exists, effect: NoSchedule}]"],
    );
    on_n(&mut c, "no-owner", "", &[]);
    assert_eq!(evicted(&c, None), ["no-owner", "tolerates-unschedulable"]);
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:348
#[test]
fn terminal_pods_do_not_hold_the_node() {
    let mut c = cluster();
    on_n(&mut c, "done", "", &[]);
    on_n(&mut c, "failed", "", &[]);
    for (p, phase) in c.objects.pods.iter_mut().zip(["Succeeded", "Failed"]) {
        p.status.get_or_insert_with(Default::default).phase = Some(phase.into());
    }
    assert!(plan(&c, None).finished());
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:368
#[test]
fn a_pdb_that_allows_nothing_holds_the_pod_and_says_so() {
    let mut c = cluster();
    on_n(&mut c, "guarded", ", labels: {app: db}", &[]);
    c.pdb("metadata: {name: db, namespace: default}\nspec: {selector: {matchLabels: {app: db}}, maxUnavailable: 0}\nstatus: {disruptionsAllowed: 0, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1}");
    let p = plan(&c, None);
    assert!(matches!(&p.steps[..], [(_, DrainAction::Wait(w))] if w.contains("PodDisruptionBudget default/db")));
    assert!(p.waiting_message().is_some_and(|m| m.starts_with("Failed to drain node, 1 pods")), "{p:?}");
    gone(&mut c, &["guarded"]);
    assert!(plan(&c, None).finished());
}

#[test]
fn a_pod_under_two_pdbs_waits() {
    let mut c = cluster();
    on_n(&mut c, "doubly", ", labels: {app: db}", &[]);
    for name in ["a", "b"] {
        c.pdb(&format!("metadata: {{name: {name}, namespace: default}}\nspec: {{selector: {{matchLabels: {{app: db}}}}, maxUnavailable: 1}}\nstatus: {{disruptionsAllowed: 1, currentHealthy: 1, desiredHealthy: 0, expectedPods: 1}}"));
    }
    let p = plan(&c, None);
    assert!(matches!(&p.steps[..], [(_, DrainAction::Wait(w))] if w.contains("more than one PodDisruptionBudget")));
}

#[test]
fn tiers_drain_in_order_and_each_waits_until_its_pods_are_gone() {
    let mut c = cluster();
    let ds = ", ownerReferences: [{apiVersion: apps/v1, kind: DaemonSet, name: ds, uid: ds-uid, controller: true}]";
    on_n(&mut c, "app", "", &[]);
    on_n(&mut c, "agent", ds, &[]);
    on_n(&mut c, "dns", "", &["priorityClassName: system-cluster-critical"]);
    on_n(&mut c, "proxy", ds, &["priorityClassName: system-node-critical"]);
    assert_eq!(evicted(&c, None), ["app"]);
    // Terminating is not gone: the tier still holds, nothing later starts.
    terminating(&mut c, "app", 30);
    let p = plan(&c, None);
    assert_eq!((p.tier, p.later.len()), (0, 3));
    assert_eq!(named(&c, &p, |a| matches!(a, DrainAction::Wait(w) if w.contains("terminating"))), ["app"]);
    assert!(!p.finished());
    gone(&mut c, &["app"]);
    assert_eq!(evicted(&c, None), ["agent"]);
    gone(&mut c, &["agent"]);
    assert_eq!(evicted(&c, None), ["dns"], "a DaemonSet tier does not end the drain: critical pods follow");
    gone(&mut c, &["dns"]);
    assert_eq!(evicted(&c, None), ["proxy"]);
    gone(&mut c, &["proxy"]);
    assert!(plan(&c, None).finished());
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:485
#[test]
fn non_critical_pods_go_before_critical_ones() {
    let mut c = cluster();
    on_n(&mut c, "app", "", &[]);
    on_n(&mut c, "critical-a", "", &["priority: 2000001000"]);
    on_n(&mut c, "critical-b", "", &["priority: 2000000000"]);
    assert_eq!(evicted(&c, None), ["app"]);
    gone(&mut c, &["app"]);
    assert_eq!(evicted(&c, None), ["critical-a", "critical-b"]);
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:523
#[test]
fn static_pods_are_not_evicted_and_do_not_hold_the_node() {
    let mut c = cluster();
    on_n(
        &mut c,
        "mirror",
        ", ownerReferences: [{apiVersion: v1, kind: Node, name: n, uid: n-uid, controller: true}]",
        &[],
    );
    assert!(plan(&c, None).finished());
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:675
#[test]
fn a_pod_stuck_terminating_a_minute_past_its_deletion_time_no_longer_holds_the_node() {
    let mut c = cluster();
    on_n(&mut c, "stuck", "", &[]);
    terminating(&mut c, "stuck", -59);
    assert!(!plan(&c, None).finished(), "59 s past: still waited for");
    terminating(&mut c, "stuck", -61);
    assert!(plan(&c, None).finished());
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:751
/// karpenter:pkg/controllers/node/termination/suite_test.go:810
/// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:237
#[test]
fn a_pod_is_deleted_early_only_when_its_grace_would_outlast_the_nodes() {
    let mut c = cluster();
    on_n(
        &mut c,
        "pinned",
        ", annotations: {karpenter.sh/do-not-disrupt: 'true'}",
        &["terminationGracePeriodSeconds: 60"],
    );
    let deadline = NOW + 300;
    // 210 s left: the pod's 60 s fit, and do-not-disrupt holds it.
    c.now = NOW + 90;
    assert!(matches!(&plan(&c, Some(deadline)).steps[..], [(_, DrainAction::Wait(_))]));
    // Exactly deadline − 60: not yet (Karpenter's "after").
    c.now = deadline - 60;
    assert!(matches!(&plan(&c, Some(deadline)).steps[..], [(_, DrainAction::Wait(_))]));
    // 35 s left: deleted now, with the 35 s the node has left.
    c.now = deadline - 35;
    assert_eq!(plan(&c, Some(deadline)).steps[0].1, DrainAction::Delete { grace: 35 });
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:777
#[test]
fn a_past_deadline_pod_is_not_gated_behind_an_earlier_tier() {
    let mut c = cluster();
    on_n(&mut c, "app", "", &["terminationGracePeriodSeconds: 30"]);
    on_n(&mut c, "dns", "", &["priorityClassName: system-cluster-critical", "terminationGracePeriodSeconds: 600"]);
    c.now = NOW + 10;
    let p = plan(&c, Some(NOW + 300));
    assert_eq!(named(&c, &p, |a| *a == DrainAction::Evict), ["app"]);
    assert_eq!(named(&c, &p, |a| *a == DrainAction::Delete { grace: 290 }), ["dns"]);
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:845
#[test]
fn a_pod_terminating_past_the_deadline_is_deleted_again_with_the_time_left() {
    let mut c = cluster();
    on_n(&mut c, "slow", "", &["terminationGracePeriodSeconds: 6000"]);
    terminating(&mut c, "slow", 6000);
    c.now = NOW + 90;
    assert_eq!(plan(&c, Some(NOW + 300)).steps[0].1, DrainAction::Delete { grace: 210 });
    // A pod terminating within the deadline is waited for, not deleted again.
    terminating(&mut c, "slow", 200);
    assert!(matches!(&plan(&c, Some(NOW + 300)).steps[..], [(_, DrainAction::Wait(_))]));
}

/// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:220
/// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:284
#[test]
fn a_forced_deletion_bypasses_pdbs_with_at_least_a_second_of_grace() {
    let mut c = cluster();
    on_n(&mut c, "guarded", ", labels: {app: db}", &["terminationGracePeriodSeconds: 120"]);
    c.pdb("metadata: {name: db, namespace: default}\nspec: {selector: {matchLabels: {app: db}}, maxUnavailable: 0}\nstatus: {disruptionsAllowed: 0, currentHealthy: 1, desiredHealthy: 1, expectedPods: 1}");
    assert_eq!(plan(&c, Some(NOW + 60)).steps[0].1, DrainAction::Delete { grace: 60 });
    assert_eq!(plan(&c, Some(NOW - 3600)).steps[0].1, DrainAction::Delete { grace: 1 }, "the deadline has passed");
}

#[test]
fn a_pdb_allowance_is_spent_across_the_nodes_of_one_pass() {
    let mut c = cluster();
    c.bound("{name: a, labels: {app: web}}", "n", "");
    c.bound("{name: b, labels: {app: web}}", "m", "");
    c.pdb("metadata: {name: web, namespace: default}\nspec: {selector: {matchLabels: {app: web}}, maxUnavailable: 1}\nstatus: {disruptionsAllowed: 1, currentHealthy: 2, desiredHealthy: 1, expectedPods: 2}");
    let snap = c.snapshot();
    let mut allowance = PdbAllowance::default();
    let n = drain_order_with(&snap, "n", None, &mut allowance);
    let m = drain_order_with(&snap, "m", None, &mut allowance);
    assert_eq!(n.steps[0].1, DrainAction::Evict, "the PDB allows one");
    assert!(matches!(m.steps[0].1, DrainAction::Wait(_)), "and only one, across both nodes");
}
