//! Voluntary disruption end to end: emptiness within consolidateAfter and budgets,
//! multi-node consolidation with the replacement Initialized before any drain, drift, and
//! policies that veto.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tenon_e2e::observe::Deletions;
use tenon_e2e::scenario::{
    INFLATE_NS, all_bound, apply_lab_general, disrupting, drifted_reason, lab_general_running, nodeclass_ready,
    patch_nodeclass, patch_nodepool, scale_inflate, small_deployment, small_nodes_quick_consolidation,
};
use tenon_e2e::{Cluster, eventually, has_condition};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_to_zero_removes_nodes_after_consolidate_after_within_the_budget() {
    let mut c = Cluster::start("scale-to-zero").await;
    apply_lab_general(&c);
    small_nodes_quick_consolidation(&c);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 8);
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(90)).await;
    let nodes = c.nodeclaims().await.len();
    assert!(nodes >= 3, "three pods per 4-vCPU node: {nodes} NodeClaims");

    // An empty node's deletion is over in milliseconds: watched, not polled.
    let deletions = Deletions::watch(&c.client);
    scale_inflate(&c, 0);
    let emptied = eventually(Duration::from_secs(20), "the inflate pods gone", || async {
        c.pods(INFLATE_NS).await.is_empty().then(Instant::now)
    })
    .await;
    // The seed's budget is nodes: "10%" of 3 nodes: one at a time (Karpenter rounds up).
    let mut most = 0;
    let mut first_disruption: Option<Instant> = None;
    while !c.nodeclaims().await.is_empty() {
        assert!(emptied.elapsed() < Duration::from_secs(150), "empty nodes still there after 150 s");
        let now = disrupting(&c).await;
        if now > 0 {
            first_disruption.get_or_insert_with(Instant::now);
        }
        most = most.max(now);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    c.assert_controller_running();
    let most = most.max(deletions.most_at_once());
    let first_disruption = [first_disruption, deletions.first(&BTreeSet::new())].into_iter().flatten().min();
    let waited = first_disruption.expect("a disruption was seen").duration_since(emptied);
    assert!(
        waited >= Duration::from_secs(5),
        "disrupted {waited:?} after the node emptied, before consolidateAfter (5s)"
    );
    assert!(most <= 1, "at most one node disrupting at a time (budget 10% of {nodes}), saw {most}");
    assert!(c.instances().await.is_empty(), "every instance terminated");
    eprintln!(
        "e2e disruption (scale to 0): {nodes} nodes removed in {:.1}s; first disruption {:.1}s after empty (consolidateAfter 5s); most disrupting at once {most} (budget allows 1)",
        emptied.elapsed().as_secs_f64(),
        waited.as_secs_f64()
    );
}

/// Three nodes each left running one small pod: big pods (3 CPU, 12 GiB: one per 4-vCPU
/// 16 GiB node) arrive one at a time, a small Deployment (0.5 CPU) fills one leftover slot
/// per node, then the big pods go. Replacing all three with one small node is cheaper.
async fn three_underused_nodes(c: &mut Cluster) -> BTreeSet<String> {
    apply_lab_general(c);
    patch_nodepool(c, "lab-general", r#"{"spec":{"disruption":{"consolidateAfter":"5s"}}}"#, false);
    c.kubectl(&["set", "resources", "deployment", "inflate", "-n", INFLATE_NS, "--requests=cpu=3,memory=12Gi"]);
    c.start_controller();
    nodeclass_ready(c, "lab-general").await;
    for n in 1..=3 {
        scale_inflate(c, n);
        all_bound(c, INFLATE_NS, n as usize, Duration::from_secs(60)).await;
        eventually(Duration::from_secs(30), "one NodeClaim per big pod", || async {
            (c.nodeclaims().await.len() == n as usize).then_some(())
        })
        .await;
    }
    small_deployment(c, "small", 3);
    all_bound(c, INFLATE_NS, 6, Duration::from_secs(60)).await;
    // The seed's 10% of 3 nodes allows one at a time: no multi-node plan fits in that. A
    // budget of all nodes lets the three be replaced together.
    patch_nodepool(c, "lab-general", r#"{"spec":{"disruption":{"budgets":[{"nodes":"100%"}]}}}"#, false);
    scale_inflate(c, 0);
    all_bound(c, INFLATE_NS, 3, Duration::from_secs(60)).await;
    let claims = c.nodeclaims().await;
    assert_eq!(claims.len(), 3, "no new node for the small pods");
    claims.into_iter().filter_map(|nc| nc.metadata.name).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_underused_nodes_become_one_cheaper_node_replacement_first() {
    let mut c = Cluster::start("multi-node").await;
    let originals = three_underused_nodes(&mut c).await;
    let deletions = Deletions::watch(&c.client);
    let start = Instant::now();
    let mut replacement: Option<String> = None;
    let mut initialized: Option<Instant> = None;
    let mut first_deleting: Option<Instant> = None;
    // How long each pod waited for a node while its node was consolidated away.
    let mut unbound_since: BTreeMap<String, Instant> = BTreeMap::new();
    let mut longest_pending = Duration::ZERO;
    loop {
        assert!(start.elapsed() < Duration::from_secs(150), "no consolidation within 150 s");
        let claims = c.nodeclaims().await;
        let now = Instant::now();
        for p in c.pods(INFLATE_NS).await {
            let name = p.metadata.name.clone().unwrap_or_default();
            if p.spec.as_ref().is_some_and(|s| s.node_name.is_none()) {
                let since = *unbound_since.entry(name).or_insert(now);
                longest_pending = longest_pending.max(now.duration_since(since));
            } else {
                unbound_since.remove(&name);
            }
        }
        for nc in &claims {
            let name = nc.metadata.name.clone().unwrap_or_default();
            if originals.contains(&name) {
                if nc.metadata.deletion_timestamp.is_some() {
                    first_deleting.get_or_insert(now);
                }
            } else {
                replacement.get_or_insert(name);
                if has_condition(nc, "Initialized") {
                    initialized.get_or_insert(now);
                }
            }
        }
        let left = claims.iter().filter(|nc| originals.contains(nc.metadata.name.as_deref().unwrap_or(""))).count();
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    all_bound(&c, INFLATE_NS, 3, Duration::from_secs(60)).await;
    c.assert_controller_running();
    let claims = c.nodeclaims().await;
    assert_eq!(claims.len(), 1, "one node for the three small pods");
    assert_eq!(claims[0].metadata.name, replacement, "the replacement");
    let first_deleting = [first_deleting, deletions.first(&originals)].into_iter().flatten().min();
    let watched = replacement.as_deref().and_then(|r| deletions.initialized(r));
    let initialized = [initialized, watched].into_iter().flatten().min();
    let (init, deleting) = (initialized.expect("replacement Initialized"), first_deleting.expect("candidates deleted"));
    assert!(init <= deleting, "a candidate was deleted before its replacement was Initialized");
    // The replacement was ready before the drain: a moved pod waits for the Deployment and
    // the scheduler stand-ins only, never for a launch (join + ready + a batch window).
    let bound = tenon_e2e::JOIN_DELAY + tenon_e2e::READY_DELAY + Duration::from_secs(1);
    assert!(longest_pending < bound, "a pod waited {longest_pending:?} for capacity during consolidation");
    assert_eq!(c.instances().await.len(), 1);
    let log = c.controller_log();
    assert!(log.contains("multi-node-consolidation"), "decided as multi-node consolidation");
    // Karpenter's Events: the candidates named (Node and NodeClaim), the replacement
    // launching and awaited, then each candidate's Node and NodeClaim disrupted.
    let events = c.events().await;
    let count = |kind: &str, reason: &str, message: &str| {
        events
            .iter()
            .filter(|e| {
                e.involved_object.kind.as_deref() == Some(kind)
                    && e.reason.as_deref() == Some(reason)
                    && e.message.as_deref().unwrap_or("").contains(message)
            })
            .count()
    };
    for kind in ["Node", "NodeClaim"] {
        let n = count(kind, "ConsolidationCandidate", "(part of 3-node consolidation)");
        assert!(n >= 3, "ConsolidationCandidate on each candidate {kind}: {n}");
        let n = count(kind, "DisruptionTerminating", &format!("Disrupting {kind}: Underutilized"));
        assert_eq!(n, 3, "DisruptionTerminating on each candidate {kind}");
    }
    let on_replacement = |reason: &str, message: &str| {
        events.iter().any(|e| {
            e.involved_object.name == replacement
                && e.reason.as_deref() == Some(reason)
                && e.message.as_deref() == Some(message)
        })
    };
    assert!(on_replacement("DisruptionLaunching", "Launching NodeClaim: Underutilized"), "{events:#?}");
    assert!(on_replacement("DisruptionWaitingReadiness", "Waiting on readiness to continue disruption"));
    eprintln!(
        "e2e disruption (multi-node): 3 -> 1 ({}); candidates deleted {:.1}s after the replacement was Initialized; longest a pod waited for a node {:.1}s",
        claims[0]
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("node.kubernetes.io/instance-type"))
            .cloned()
            .unwrap_or_default(),
        deleting.duration_since(init).as_secs_f64(),
        longest_pending.as_secs_f64()
    );
}

/// Karpenter's restart rule: a command lives in memory only, so the marks it left are
/// removed at start-up (not after the cluster settles) and consolidation starts over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_disruption_launching_leaves_no_stale_mark_and_consolidation_finishes() {
    let mut c = Cluster::start("disruption-restart").await;
    let originals = three_underused_nodes(&mut c).await;
    eventually(Duration::from_secs(90), "DisruptionLaunching on a replacement", || async {
        for nc in c.nodeclaims().await {
            let name = nc.metadata.name.unwrap_or_default();
            if !originals.contains(&name)
                && c.events_for(&name).await.iter().any(|e| e.reason.as_deref() == Some("DisruptionLaunching"))
            {
                return Some(());
            }
        }
        None
    })
    .await;
    c.kill_controller();
    assert!(disrupting(&c).await > 0, "the candidates were marked before the kill");
    c.start_controller();
    let restarted = Instant::now();
    // Marked and not being deleted: a mark no command owns.
    let stale = || async {
        let deleting = c.nodeclaims().await.iter().filter(|nc| nc.metadata.deletion_timestamp.is_some()).count();
        disrupting(&c).await - deleting
    };
    eventually(Duration::from_secs(15), "no stale disruption mark after the restart", || async {
        (stale().await == 0).then_some(())
    })
    .await;
    let unmarked = restarted.elapsed();
    eventually(Duration::from_secs(150), "consolidation finished after the restart", || async {
        let claims = c.nodeclaims().await;
        let left = claims.iter().filter(|nc| originals.contains(nc.metadata.name.as_deref().unwrap_or(""))).count();
        (left == 0 && claims.len() == 1).then_some(())
    })
    .await;
    all_bound(&c, INFLATE_NS, 3, Duration::from_secs(60)).await;
    c.assert_controller_running();
    eprintln!(
        "e2e disruption restart: stale marks gone {:.1}s after the restart; consolidated {:.1}s after it",
        unmarked.as_secs_f64(),
        restarted.elapsed().as_secs_f64()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changing_the_nodepool_template_replaces_drifted_nodes() {
    let mut c = Cluster::start("drift").await;
    lab_general_running(&mut c, 8).await;
    let before: BTreeSet<String> = c.nodeclaims().await.into_iter().filter_map(|nc| nc.metadata.name).collect();
    patch_nodepool(&c, "lab-general", r#"{"spec":{"template":{"metadata":{"labels":{"team":"platform"}}}}}"#, false);
    let reason = drifted_reason(&c, "Drifted on the old NodeClaim").await;
    assert_eq!(reason, "NodePoolDrifted");
    eventually(Duration::from_secs(120), "the drifted nodes replaced", || async {
        let claims = c.nodeclaims().await;
        let fresh = claims.iter().all(|nc| !before.contains(nc.metadata.name.as_deref().unwrap_or("")));
        let labelled = claims.iter().all(|nc| tenon_e2e::label(&nc.metadata.labels, "team") == Some("platform"));
        (!claims.is_empty() && fresh && labelled).then_some(())
    })
    .await;
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(60)).await;
    assert_eq!(c.instances().await.len(), c.nodeclaims().await.len());

    // A new image version in the EC2NodeClass: the instances run the old AMI.
    patch_nodeclass(&c, "lab-general", r#"{"spec":{"amiSelectorTerms":[{"alias":"al2023@v20260401"}]}}"#);
    let reason = drifted_reason(&c, "AMI drift on the NodeClaim").await;
    assert!(reason.contains("AMI"), "drift reason names the AMI: {reason}");
    c.assert_controller_running();
}

/// Karpenter's static NodeClass drift: editing what launch templates are built from (here
/// userData) drifts every node launched before, and they are replaced within the budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_the_nodeclass_user_data_replaces_its_nodes_within_the_budget() {
    let mut c = Cluster::start("nodeclass-drift").await;
    apply_lab_general(&c);
    small_nodes_quick_consolidation(&c);
    // Consolidation must not take nodes away meanwhile: only drift acts.
    patch_nodepool(&c, "lab-general", r#"{"spec":{"disruption":{"consolidateAfter":"Never"}}}"#, false);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 8);
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(90)).await;
    let before: BTreeSet<String> = c.nodeclaims().await.into_iter().filter_map(|nc| nc.metadata.name).collect();
    assert!(before.len() >= 3, "{before:?}");
    patch_nodeclass(&c, "lab-general", r##"{"spec":{"userData":"#!/bin/bash\necho tuned\n"}}"##);
    let reason = drifted_reason(&c, "NodeClass drift on an old NodeClaim").await;
    assert!(reason.contains("NodeClassDrift"), "drift reason: {reason}");
    // The seed's budget: 10% of the nodes, rounded up: one at a time.
    let mut most = 0;
    let start = Instant::now();
    loop {
        assert!(start.elapsed() < Duration::from_secs(240), "old nodes left after 240 s");
        most = most.max(disrupting(&c).await);
        let claims = c.nodeclaims().await;
        if !claims.is_empty() && claims.iter().all(|nc| !before.contains(nc.metadata.name.as_deref().unwrap_or(""))) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(most <= 1, "{most} NodeClaims disrupted at once under a budget of one");
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(60)).await;
    c.assert_controller_running();
    eprintln!("e2e NodeClass drift: {} nodes replaced in {:.0}s", before.len(), start.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejecting_consolidation_policy_and_a_trapping_budget_policy_stop_disruption() {
    let mut c = Cluster::start("policy-veto").await;
    let store = c.policy_store(&[
        ("hostile_consolidator.wasm", "reject-all.wasm"),
        ("hostile_budget.wasm", "trapping-budget.wasm"),
    ]);
    c.controller_env.push(("TENON_POLICY_DIR".into(), store.display().to_string()));
    apply_lab_general(&c);
    patch_nodepool(&c, "lab-general", r#"{"spec":{"disruption":{"consolidateAfter":"2s"}}}"#, false);
    c.kubectl(&[
        "annotate",
        "nodepool",
        "lab-general",
        "tenon.dev/consolidation-policy=reject-all",
        r#"tenon.dev/policy-config={"mode":"reject"}"#,
    ]);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 8);
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(90)).await;
    let node = c.nodeclaims().await[0].metadata.name.clone().unwrap();
    scale_inflate(&c, 0);
    let event = eventually(Duration::from_secs(60), "ConsolidationRejected", || async {
        c.events_for(&node).await.into_iter().find(|e| e.reason.as_deref() == Some("ConsolidationRejected"))
    })
    .await;
    assert!(event.message.unwrap_or_default().contains("not today"), "the policy's reason is in the Event");
    c.rounds_decided(2).await;
    assert_eq!(disrupting(&c).await, 0, "a rejected plan disrupts nothing");

    // A budget policy that traps: zero disruptions (fail closed) and PolicyHealthy=False.
    c.kubectl(&["annotate", "nodepool", "lab-general", "tenon.dev/consolidation-policy-"]);
    c.kubectl(&[
        "annotate",
        "--overwrite",
        "nodepool",
        "lab-general",
        "tenon.dev/disruption-policy=trapping-budget",
        r#"tenon.dev/policy-config={"mode":"trap"}"#,
    ]);
    let api: kube::Api<tenon_api::NodePool> = kube::Api::all(c.client.clone());
    let message = eventually(Duration::from_secs(60), "PolicyHealthy=False", || async {
        let np = api.get("lab-general").await.ok()?;
        let cond = np.status?.conditions.into_iter().find(|x| x.type_ == "PolicyHealthy" && x.status == "False")?;
        Some(cond.message)
    })
    .await;
    assert!(message.contains("trapping-budget"), "{message}");
    c.rounds_decided(2).await;
    assert_eq!(disrupting(&c).await, 0, "a trapping budget allows nothing");
    assert_eq!(c.nodeclaims().await.len(), 1);

    // Without the policies the empty node goes: the vetoes above were the policies'.
    c.kubectl(&["annotate", "nodepool", "lab-general", "tenon.dev/disruption-policy-", "tenon.dev/policy-config-"]);
    eventually(Duration::from_secs(60), "the empty node removed", || async {
        c.nodeclaims().await.is_empty().then_some(())
    })
    .await;
    c.assert_controller_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdbs_and_do_not_disrupt_pods_block_consolidation_until_lifted() {
    let mut c = Cluster::start("blocked").await;
    apply_lab_general(&c);
    patch_nodepool(&c, "lab-general", r#"{"spec":{"disruption":{"consolidateAfter":"5s"}}}"#, false);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 8);
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(90)).await;
    let node = c.nodeclaims().await[0].metadata.name.clone().unwrap();
    c.apply_yaml(
        "pdb",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: inflate, namespace: karpenter-lab}\nspec:\n  maxUnavailable: 0\n  selector: {matchLabels: {app: inflate}}\n",
    );
    // Two 1-CPU pods on a 16-vCPU node: a cheaper node would do.
    scale_inflate(&c, 2);
    all_bound(&c, INFLATE_NS, 2, Duration::from_secs(30)).await;
    let blocked = eventually(Duration::from_secs(40), "DisruptionBlocked by the PDB", || async {
        c.events_for(&node).await.into_iter().find(|e| {
            e.reason.as_deref() == Some("DisruptionBlocked") && e.message.as_deref().unwrap_or("").contains("inflate")
        })
    })
    .await;
    eprintln!("blocked: {:?}", blocked.message);
    c.rounds_decided(2).await;
    assert_eq!(disrupting(&c).await, 0, "the PDB holds");
    assert_eq!(c.nodeclaims().await.len(), 1);

    // The PDB goes; a pod asks not to be disrupted for an hour after its start, the other
    // with a value that means nothing (ignored, and said so).
    c.kubectl(&["delete", "pdb", "inflate", "-n", INFLATE_NS]);
    let pods = c.pods(INFLATE_NS).await;
    let pod = pods[0].metadata.name.clone().unwrap();
    let other = pods[1].metadata.name.clone().unwrap();
    c.kubectl(&["annotate", "pod", &pod, "-n", INFLATE_NS, "karpenter.sh/do-not-disrupt=1h"]);
    c.kubectl(&["annotate", "pod", &other, "-n", INFLATE_NS, "karpenter.sh/do-not-disrupt=soon"]);
    eventually(Duration::from_secs(40), "DisruptionBlocked by do-not-disrupt", || async {
        c.events_for(&node).await.into_iter().find(|e| {
            e.reason.as_deref() == Some("DisruptionBlocked")
                && e.message.as_deref().unwrap_or("").contains("karpenter.sh/do-not-disrupt")
        })
    })
    .await;
    // Posted in the same pass as the block, after it.
    let event = |name: String, reason: &'static str| {
        let c = &c;
        async move {
            eventually(Duration::from_secs(10), reason, || async {
                c.events_for(&name).await.into_iter().find(|e| e.reason.as_deref() == Some(reason))
            })
            .await
        }
    };
    let message = event(pod.clone(), "DoNotDisruptUntil").await.message.unwrap_or_default();
    assert!(message.starts_with("The karpenter.sh/do-not-disrupt grace period will elapse at "), "{message:?}");
    let invalid = event(other.clone(), "InvalidDoNotDisruptAnnotation").await;
    assert_eq!(invalid.type_.as_deref(), Some("Warning"), "the meaningless value is called out");
    c.rounds_decided(2).await;
    assert_eq!(disrupting(&c).await, 0, "do-not-disrupt holds");
    assert_eq!(c.nodeclaims().await.len(), 1);

    // Lifted: the node is replaced by a cheaper one.
    c.kubectl(&["annotate", "pod", &pod, "-n", INFLATE_NS, "karpenter.sh/do-not-disrupt-"]);
    eventually(Duration::from_secs(90), "the node consolidated", || async {
        let claims = c.nodeclaims().await;
        (claims.len() == 1 && claims[0].metadata.name.as_deref() != Some(node.as_str())).then_some(())
    })
    .await;
    all_bound(&c, INFLATE_NS, 2, Duration::from_secs(30)).await;
    c.assert_controller_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_budget_window_with_zero_nodes_blocks_disruption_only_inside_it() {
    let mut c = Cluster::start("budget-window").await;
    apply_lab_general(&c);
    patch_nodepool(
        &c,
        "lab-general",
        r#"{"spec":{"disruption":{"consolidateAfter":"5s","budgets":[{"nodes":"0","schedule":"* * * * *","duration":"1h"}]}}}"#,
        false,
    );
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 8);
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(90)).await;
    scale_inflate(&c, 0);
    all_bound(&c, INFLATE_NS, 0, Duration::from_secs(30)).await;
    c.rounds_decided(2).await;
    assert_eq!(disrupting(&c).await, 0, "inside the window nothing is disrupted");
    assert_eq!(c.nodeclaims().await.len(), 1);
    // A window twelve hours away: now is outside it.
    let hour = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() / 3600 + 12) % 24;
    let patch = format!(
        r#"{{"spec":{{"disruption":{{"budgets":[{{"nodes":"0","schedule":"0 {hour} * * *","duration":"1h"}}]}}}}}}"#
    );
    patch_nodepool(&c, "lab-general", &patch, false);
    eventually(Duration::from_secs(60), "the empty node removed outside the window", || async {
        c.nodeclaims().await.is_empty().then_some(())
    })
    .await;
    c.assert_controller_running();
}

/// Karpenter runs each disruption on its own: a node that never becomes Ready (its kubelet
/// never reports it) holds nothing else back. Meanwhile an empty node of another NodePool
/// goes after consolidateAfter and an expired NodeClaim is replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_never_becomes_ready_freezes_no_disruption_elsewhere() {
    let mut c = Cluster::start("never-ready").await;
    apply_lab_general(&c);
    small_nodes_quick_consolidation(&c);
    let (key, value) = tenon_e2e::kubelet::NEVER_READY;
    c.apply_yaml(
        "stuck-pool",
        &format!(
            r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: stuck}}
spec:
  template:
    metadata:
      labels: {{capacity.example.io/pool: stuck, {key}: {value}}}
    spec:
      requirements:
        - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}
        - {{key: karpenter.k8s.aws/instance-cpu, operator: In, values: ["2"]}}
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: lab-general}}
  disruption: {{consolidateAfter: 5s}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: stuck, namespace: karpenter-lab}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: stuck}}}}
  template:
    metadata: {{labels: {{app: stuck}}}}
    spec:
      nodeSelector: {{capacity.example.io/pool: stuck}}
      containers:
        - name: pause
          image: public.ecr.aws/eks-distro/kubernetes/pause:3.10
          resources: {{requests: {{cpu: 500m}}}}
"#
        ),
    );
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 2);
    // The stuck pod never binds: its node never becomes Ready.
    eventually(Duration::from_secs(90), "2 inflate pods bound", || async {
        let pods = c.pods(INFLATE_NS).await;
        let inflate: Vec<_> =
            pods.into_iter().filter(|p| tenon_e2e::label(&p.metadata.labels, "app") == Some("inflate")).collect();
        (inflate.len() == 2 && tenon_e2e::scenario::bound(&inflate) == 2).then_some(())
    })
    .await;
    let pool_of =
        |nc: &tenon_api::NodeClaim| tenon_e2e::label(&nc.metadata.labels, "karpenter.sh/nodepool").map(String::from);
    let stuck = eventually(Duration::from_secs(60), "the stuck NodeClaim registered", || async {
        c.nodeclaims().await.into_iter().find(|nc| {
            pool_of(nc).as_deref() == Some("stuck")
                && has_condition(nc, "Registered")
                && !has_condition(nc, "Initialized")
        })
    })
    .await;
    let stuck_name = stuck.metadata.name.clone().unwrap();

    // An empty lab-general node goes, consolidateAfter (5 s) after it emptied.
    scale_inflate(&c, 0);
    let emptied = Instant::now();
    eventually(Duration::from_secs(60), "the empty lab-general nodes removed", || async {
        let claims = c.nodeclaims().await;
        claims.iter().all(|nc| pool_of(nc).as_deref() != Some("lab-general")).then_some(())
    })
    .await;
    let removed = emptied.elapsed();

    // A NodeClaim stamped with a 30 s expireAfter expires and its pod gets a new node.
    patch_nodepool(&c, "lab-general", r#"{"spec":{"template":{"spec":{"expireAfter":"30s"}}}}"#, false);
    small_deployment(&c, "extra", 1);
    let first = eventually(Duration::from_secs(60), "a NodeClaim for the extra pod", || async {
        c.nodeclaims().await.into_iter().find(|nc| pool_of(nc).as_deref() == Some("lab-general"))
    })
    .await;
    let first_name = first.metadata.name.clone().unwrap();
    assert_eq!(first.spec.expire_after, "30s");
    let launched = Instant::now();
    eventually(Duration::from_secs(120), "the expired NodeClaim replaced", || async {
        let claims = c.nodeclaims().await;
        let replaced = claims.iter().any(|nc| {
            pool_of(nc).as_deref() == Some("lab-general") && nc.metadata.name.as_deref() != Some(first_name.as_str())
        });
        let pods = c.pods(INFLATE_NS).await;
        let extra_bound = pods.iter().any(|p| {
            tenon_e2e::label(&p.metadata.labels, "app") == Some("extra")
                && p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| !n.is_empty())
                && p.metadata.deletion_timestamp.is_none()
        });
        let gone = claims.iter().all(|nc| nc.metadata.name.as_deref() != Some(first_name.as_str()));
        (replaced && extra_bound && gone).then_some(())
    })
    .await;
    let events = c.events_for(&first_name).await;
    assert!(events.iter().any(|e| e.reason.as_deref() == Some("Expired")), "{events:#?}");
    let still = c.nodeclaims().await;
    let stuck_now = still.iter().find(|nc| nc.metadata.name.as_deref() == Some(stuck_name.as_str()));
    assert!(stuck_now.is_some_and(|nc| !has_condition(nc, "Initialized")), "the stuck node stayed uninitialized");
    c.assert_controller_running();
    eprintln!(
        "e2e never-ready: empty node removed {:.1}s after emptying (consolidateAfter 5s); expired NodeClaim replaced {:.1}s after launch (expireAfter 30s)",
        removed.as_secs_f64(),
        launched.elapsed().as_secs_f64()
    );
}
