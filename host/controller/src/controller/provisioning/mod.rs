//! (Long: a third of it is Karpenter's provisioning cases, beside the reconciler they test.)
//! The provisioner: pending pods feed `tenon_core::orchestration::batcher` (Karpenter's idle
//! and max windows, and a retry every 10 s while a pod stays pending); a closed batch is
//! decided over the cluster as provisioning sees it, and the plan becomes NodeClaim objects
//! (`tenon_core::nodeclaim`, carrying the scorer's ranking), Nominated and FailedScheduling
//! Events, and Karpenter's scheduler gauges.

mod create;

use crate::controller::context::Context;
use crate::controller::error::{Error, Failures};
use crate::controller::events::Involved;
use crate::controller::metrics::{Labels, Metrics, catalog as mc, labels};
use crate::controller::runner::{self, Reconciler};
use crate::controller::{Catalogs, names, off_loop, snapshot};
use create::create_nodeclaims;
pub use create::{create_nodeclaim, planned_nodeclaim};
use kube::Api;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_api::NodeClaim;
use tenon_api::wellknown as wk;
use tenon_core::ProvisioningPlan;
use tenon_core::convert::{ClusterObjects, is_reschedulable};
use tenon_core::orchestration::batcher::Batcher;

/// The `reason` NodeClaims the provisioner creates are counted under (Karpenter's
/// `ProvisionedReason`).
pub const PROVISIONED: &str = "provisioned";

/// Publishes Karpenter's scheduler gauges of a provisioning decision: how many pods it found
/// no place for, and how many pending pods each effective zone has. A zone no pending pod
/// has any more leaves the gauge (Karpenter resets it for every decision).
pub fn publish_decision(metrics: &Metrics, plan: &ProvisioningPlan) {
    metrics.set(mc::SCHEDULER_UNSCHEDULABLE_PODS, &[("controller", "provisioner")], plan.unschedulable.len() as f64);
    let by_zone = plan.pending_pods_by_zone();
    metrics.replace(
        mc::SCHEDULER_PENDING_BY_ZONE,
        by_zone.into_iter().map(|(zone, n)| (labels(&[("controller", "provisioner"), ("zone", &zone)]), n as f64)),
    );
}

/// Where a nominated pod goes, as Karpenter's `Nominated` Event names it: the NodeClaim
/// and, once registered, its Node (`nodeclaim/a, node/b`).
pub fn nominated_to(snap: &tenon_core::ClusterSnapshot, node: &str) -> String {
    match snap.nodes.iter().find(|n| n.name == node) {
        Some(n) if n.in_flight => format!("nodeclaim/{node}"),
        Some(n) => match &n.claim {
            Some(c) => format!("nodeclaim/{}, node/{node}", c.nodeclaim),
            None => format!("node/{node}"),
        },
        None => format!("node/{node}"),
    }
}

/// The cluster as provisioning sees it: pods on the nodes of NodeClaims being deleted count
/// as pending when they are reschedulable ([`is_reschedulable`]), so their capacity is
/// launched while the node drains instead of after. Only for provisioning: draining must see them where they are.
/// Borrows the cluster unchanged when nothing is leaving (every pass): only a drain pays for
/// the copy.
pub fn with_displaced_pods(objects: &ClusterObjects) -> std::borrow::Cow<'_, ClusterObjects> {
    let leaving: BTreeSet<&str> = objects
        .nodeclaims
        .iter()
        .filter(|nc| nc.metadata.deletion_timestamp.is_some())
        .filter_map(|nc| nc.status.as_ref().and_then(|s| s.node_name.as_deref()))
        .collect();
    if leaving.is_empty() {
        return std::borrow::Cow::Borrowed(objects);
    }
    let mut out = objects.clone();
    for p in &mut out.pods {
        let on_leaving = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| leaving.contains(n));
        if !on_leaving || !is_reschedulable(p, &objects.pdbs) {
            continue;
        }
        // What provisioning sees is the pod's replacement (a StatefulSet's keeps the name),
        // a copy: the cache's pod stays as it is.
        let p = std::sync::Arc::make_mut(p);
        p.metadata.deletion_timestamp = None;
        if let Some(spec) = p.spec.as_mut() {
            spec.node_name = None;
        }
        let status = p.status.get_or_insert_with(Default::default);
        status.phase = Some("Pending".into());
        status.conditions.get_or_insert_with(Vec::new).push(k8s_openapi::api::core::v1::PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            ..Default::default()
        });
    }
    std::borrow::Cow::Owned(out)
}

/// Karpenter's `provisioning` controller: the batcher and the decision it closes.
pub struct Provisioner {
    ctx: Arc<Context>,
    batcher: Batcher,
    /// A closed batch whose decision had to wait (for NodeClaims the cache has not shown).
    decision_due: bool,
}

impl Reconciler for Provisioner {
    const NAME: &'static str = "provisioner";

    async fn reconcile(&mut self) -> Result<(), Error> {
        let objects = self.ctx.objects();
        let mut failures = Failures::default();
        self.orphans(&objects, &mut failures).await;
        let pending_view = with_displaced_pods(&objects);
        let closed = self.batch_closed(&pending_view);
        let observed = self.cache_has_created(&objects).await;
        let decide = (closed || self.decision_due) && observed;
        self.decision_due = (closed || self.decision_due) && !decide;
        if decide {
            // A disruption round waits until this decision's NodeClaims are created.
            self.ctx.cluster().provisioning = true;
            let catalogs = self.ctx.catalogs().await;
            self.provision(&pending_view, &catalogs, &mut failures).await;
            self.ctx.cluster().provisioning = false;
        }
        failures.finish()
    }

    /// When the open batch closes or a pending pod triggers again; soon while a decision
    /// waits for NodeClaims the cache has not shown.
    fn next_pass(&self) -> Duration {
        if self.decision_due || !self.ctx.cluster().unobserved.is_empty() {
            return runner::BUSY;
        }
        let (idle, max) = (self.ctx.settings.batch_idle_duration, self.ctx.settings.batch_max_duration);
        let next = self.batcher.next_event(idle.as_millis() as i64, max.as_millis() as i64);
        runner::due_in(next.map(|at| self.ctx.wait_until_ms(at)))
    }
}

impl Provisioner {
    pub fn new(ctx: Arc<Context>) -> Provisioner {
        Provisioner { ctx, batcher: Batcher::default(), decision_due: false }
    }

    /// True when every NodeClaim this process created (or may have) is in the cache, or
    /// known not to exist. One the cache has not shown for [`CONFIRM_AFTER`] is read from the
    /// API server: gone, it is forgotten; there, decisions keep waiting for the cache (a
    /// stalled watch), as Karpenter waits for its cluster state to sync, since deciding
    /// without it would provision its pods twice and overrun the NodePool's limits.
    async fn cache_has_created(&mut self, objects: &ClusterObjects) -> bool {
        let overdue: Vec<String> = {
            let mut cluster = self.ctx.cluster();
            cluster.forget_seen(objects);
            cluster.unobserved.iter().filter(|(_, at)| at.elapsed() >= CONFIRM_AFTER).map(|(n, _)| n.clone()).collect()
        };
        let api: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        for name in overdue {
            match api.get_opt(&name).await {
                Ok(None) => {
                    tracing::info!(nodeclaim = %name, "a NodeClaim the cache never showed does not exist; deciding without it");
                    self.ctx.cluster().unobserved.remove(&name);
                }
                Ok(Some(_)) => {
                    tracing::warn!(nodeclaim = %name, "the cache does not show a NodeClaim that exists (a stalled watch?); decisions wait for it");
                    self.ctx.cluster().unobserved.insert(name, Instant::now());
                }
                Err(e) => {
                    tracing::warn!(nodeclaim = %name, error = %e, "could not read a NodeClaim the cache does not show; decisions wait for it");
                    self.ctx.cluster().unobserved.insert(name, Instant::now());
                }
            }
        }
        self.ctx.cluster().unobserved.is_empty()
    }

    /// NodeClaims whose NodePool is gone or being deleted are deleted (termination drains
    /// them and terminates their instances). Kubernetes' garbage collector does the same
    /// through the owner reference; doing it here does not depend on it.
    async fn orphans(&self, objects: &ClusterObjects, failures: &mut Failures) {
        let pools: BTreeSet<&str> = objects
            .nodepools
            .iter()
            .filter(|np| np.metadata.deletion_timestamp.is_none())
            .filter_map(|np| np.metadata.name.as_deref())
            .collect();
        let api: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        for nc in objects.nodeclaims.iter().filter(|nc| nc.metadata.deletion_timestamp.is_none()) {
            let Some(pool) = nc.metadata.labels.as_ref().and_then(|l| l.get(wk::LABEL_NODEPOOL)) else { continue };
            if pools.contains(pool.as_str()) {
                continue;
            }
            let name = nc.metadata.name.clone().unwrap_or_default();
            match api.delete(&name, &kube::api::DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(nodeclaim = %name, nodepool = %pool, "NodePool deleted; deleting its NodeClaim")
                }
                Err(e) => {
                    failures.push(Error::kube(format!("deleting NodeClaim {name} of deleted NodePool {pool}"), e))
                }
            }
        }
    }

    /// Feeds the batcher the pods waiting for capacity; true when a batch has closed.
    fn batch_closed(&mut self, objects: &ClusterObjects) -> bool {
        let pending: BTreeSet<String> = objects
            .pods
            .iter()
            .filter(|p| tenon_core::convert::is_provisionable(p))
            .map(|p| tenon_core::convert::pod_key(p))
            .collect();
        self.ctx.pod_times().ack(pending.iter().map(String::as_str), crate::controller::unix_now_ms() as f64 / 1000.0);
        let (idle, max) = (self.ctx.settings.batch_idle_duration, self.ctx.settings.batch_max_duration);
        let now = self.ctx.now_ms();
        self.batcher.observe(now, &pending, idle.as_millis() as i64, max.as_millis() as i64)
    }

    /// A provisioning decision for the closed batch: NodeClaims for what fits nowhere,
    /// FailedScheduling events for what fits nowhere at all.
    async fn provision(&mut self, objects: &ClusterObjects, catalogs: &Catalogs, failures: &mut Failures) {
        let started = Instant::now();
        let provisionable = objects.pods.iter().filter(|p| tenon_core::convert::is_provisionable(p)).count();
        tracing::info!(pods = provisionable, "found provisionable pod(s)");
        let (mut snap, errors) = snapshot(objects, catalogs, self.ctx.unix_now());
        let mut ignored_pods = 0;
        let mut failed = Vec::new();
        for e in &errors {
            tracing::warn!(error = %e, "object left out of the decision");
            // A pod left out is told why on itself, where its owner looks.
            if let Some(p) =
                objects.pods.iter().find(|p| format!("Pod {}", tenon_core::convert::pod_key(p)) == e.object)
            {
                ignored_pods += 1;
                failed.push(tenon_core::convert::pod_key(p));
                let obj = Involved::pod_object(p);
                let message = format!("Failed to schedule pod, {}: {}", e.field, e.message);
                self.ctx.recorder.publish(&self.ctx.client, &obj, "Warning", "FailedScheduling", &message).await;
            }
        }
        self.ctx.metrics.set(mc::SCHEDULER_IGNORED_PODS, &[], f64::from(ignored_pods));
        // A NodePool being deleted keeps its nodes until they are drained, but gets no more
        // (the core skips it); one failing validation gets nothing at all.
        let invalid = self.ctx.cluster().invalid.clone();
        snap.nodepools.retain(|t| !invalid.contains(&t.name));
        snap.ignore_preferences = self.ctx.settings.preference_policy == "Ignore";
        // Provisioning only: consolidation never relaxes minValues (Karpenter's too).
        snap.min_values_best_effort = self.ctx.settings.min_values_policy == "BestEffort";
        let policies = self.ctx.active_policies();
        // Karpenter's gauges of the simulation under way: its queue, and how long it has run.
        let id = names::uuid();
        let simulation_labels = |id: &str| labels(&[("controller", "provisioner"), ("scheduling_id", id)]);
        let waiting = snap.pods.iter().filter(|p| p.node_name.is_none()).count();
        self.ctx.metrics.replace(mc::SCHEDULER_QUEUE_DEPTH, [(simulation_labels(&id), waiting as f64)]);
        let (running, clock) = (self.ctx.metrics.clone(), simulation_labels(&id));
        let ticking = tokio::spawn(async move {
            let started = Instant::now();
            loop {
                running.replace(mc::SCHEDULER_UNFINISHED_WORK, [(clock.clone(), started.elapsed().as_secs_f64())]);
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        let decided = off_loop("provisioning", move || {
            let simulation = Instant::now();
            let plan = tenon_core::schedule(&snap, &*policies);
            (snap, plan, simulation.elapsed())
        });
        let decided = decided.await;
        ticking.abort();
        self.ctx.metrics.replace(mc::SCHEDULER_UNFINISHED_WORK, Vec::<(Labels, f64)>::new());
        self.ctx.metrics.replace(mc::SCHEDULER_QUEUE_DEPTH, [(simulation_labels(&id), 0.0)]);
        let Some((snap, plan, simulation)) = decided else {
            failures.push(Error::Invariant("the provisioning decision panicked".into()));
            return;
        };
        // Pods already bound (those of nodes being deleted) are not decisions about them.
        let key = |i: usize| Some(&snap.pods[i]).filter(|p| p.node_name.is_none()).map(tenon_core::model::Pod::key);
        let placed: Vec<String> = plan
            .nodeclaims
            .iter()
            .flat_map(|n| n.pods.iter().copied())
            .chain(plan.nominations.iter().map(|n| n.pod))
            .filter_map(key)
            .collect();
        failed.extend(plan.unschedulable.iter().filter_map(|u| key(u.pod)));
        let decided = self.ctx.pod_times().decided(&placed, &failed, crate::controller::unix_now_ms() as f64 / 1000.0);
        for seconds in decided {
            self.ctx.metrics.observe(mc::PODS_SCHEDULING_DECISION, &[], seconds);
        }
        self.ctx.metrics.add(mc::PROVISIONING_DECISIONS, &[], 1);
        publish_decision(&self.ctx.metrics, &plan);
        let provisioner = [("controller", "provisioner")];
        self.ctx.metrics.observe(mc::SCHEDULER_SCHEDULING_DURATION, &provisioner, simulation.as_secs_f64());
        self.ctx.metrics.set(mc::PROVISIONING_DECISION_SECONDS, &[], started.elapsed().as_secs_f64());
        // Karpenter's line for a decision: when a batch closed and what it came to.
        if !plan.nodeclaims.is_empty() {
            let pods: usize = plan.nodeclaims.iter().map(|n| n.pods.len()).sum();
            tracing::info!(
                nodeclaims = plan.nodeclaims.len(),
                pods,
                duration = ?started.elapsed(),
                "computed new nodeclaim(s) to fit pod(s)"
            );
        }
        let (planned, ncs): (Vec<_>, Vec<_>) =
            plan.nodeclaims.iter().filter_map(|p| Some((p, planned_nodeclaim(p, &snap, objects)?))).unzip();
        let names = create_nodeclaims(&self.ctx, ncs, PROVISIONED, failures).await;
        for (planned, name) in planned.into_iter().zip(names) {
            let Some(name) = name else { continue };
            // Karpenter's nomination Event: where each pod is expected to land.
            for &i in &planned.pods {
                let obj = Involved::pod(&snap.pods[i]);
                let message = format!("Pod should schedule on: nodeclaim/{name}");
                self.ctx.recorder.publish(&self.ctx.client, &obj, "Normal", "Nominated", &message).await;
            }
        }
        // Pods placed on capacity that exists or is on its way get the Event too.
        for n in &plan.nominations {
            let obj = Involved::pod(&snap.pods[n.pod]);
            let message = format!("Pod should schedule on: {}", nominated_to(&snap, &n.node));
            self.ctx.recorder.publish(&self.ctx.client, &obj, "Normal", "Nominated", &message).await;
        }
        for name in &plan.incompatible_nodepools {
            let Some(np) = objects.nodepools.iter().find(|np| np.metadata.name.as_deref() == Some(name.as_str()))
            else {
                continue;
            };
            let obj = Involved::cluster_scoped("karpenter.sh/v1", "NodePool", &np.metadata);
            let message = "NodePool requirements filtered out all compatible available instance types";
            self.ctx.recorder.publish(&self.ctx.client, &obj, "Warning", "NoCompatibleInstanceTypes", message).await;
        }
        for u in &plan.unschedulable {
            let obj = Involved::pod(&snap.pods[u.pod]);
            self.ctx
                .recorder
                .publish(
                    &self.ctx.client,
                    &obj,
                    "Warning",
                    "FailedScheduling",
                    &format!("Failed to schedule pod, {}", u.reason),
                )
                .await;
        }
    }
}

/// How long a NodeClaim this process created may be missing from the cache before the API
/// server is asked whether it exists.
const CONFIRM_AFTER: Duration = Duration::from_secs(5);

#[cfg(test)]
mod tests {
    #[test]
    fn nominations_name_the_nodeclaim_and_its_node_as_karpenter_does() {
        use tenon_core::model::{ClaimInfo, Node};
        let node = |name: &str, in_flight: bool, claim: Option<&str>| Node {
            name: name.into(),
            in_flight,
            claim: claim.map(|c| ClaimInfo { nodeclaim: c.into(), ..Default::default() }),
            ..Default::default()
        };
        let snap = tenon_core::ClusterSnapshot {
            nodes: vec![
                node("lab-general-abc12", true, Some("lab-general-abc12")),
                node("ip-10-0-1-2.ec2.internal", false, Some("lab-general-def34")),
                node("unmanaged", false, None),
            ],
            ..Default::default()
        };
        assert_eq!(super::nominated_to(&snap, "lab-general-abc12"), "nodeclaim/lab-general-abc12");
        assert_eq!(
            super::nominated_to(&snap, "ip-10-0-1-2.ec2.internal"),
            "nodeclaim/lab-general-def34, node/ip-10-0-1-2.ec2.internal"
        );
        assert_eq!(super::nominated_to(&snap, "unmanaged"), "node/unmanaged");
    }

    use super::*;
    use tenon_core::convert::shared;

    /// A cluster whose NodeClaim `a` (node `node-a`) is being deleted, holding pod `p` (its
    /// metadata extra fields in `meta`, e.g. owners), with `pdbs` selecting `app: p`: the
    /// NodeClaims provisioning launches for it, each as its first choice of instance type.
    fn launched_for_a_pod_on_a_deleting_node(meta: &str, terminating: bool, pdbs: &[&str]) -> Vec<String> {
        let np: tenon_api::NodePool = serde_yaml::from_str("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: default}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n      requirements: []\n").unwrap();
        let nc: tenon_api::NodeClaim = serde_yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: a, deletionTimestamp: \"2026-11-30T00:00:00Z\", labels: {karpenter.sh/nodepool: default}}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n  requirements: []\nstatus: {nodeName: node-a}\n",
        )
        .unwrap();
        let deletion = if terminating { ", deletionTimestamp: \"2026-11-30T00:00:00Z\"" } else { "" };
        let pod: tenon_core::cached_pod::Pod = serde_yaml::from_str(&format!(
            "metadata: {{name: p, namespace: d, labels: {{app: p}}{deletion}{meta}}}\nspec: {{nodeName: node-a, containers: [{{name: c, image: i, resources: {{requests: {{memory: 100M}}}}}}]}}\nstatus: {{phase: Running}}\n"
        ))
        .unwrap();
        let objects = ClusterObjects {
            nodepools: shared([np]),
            nodeclaims: shared([nc]),
            pods: shared([pod]),
            pdbs: pdbs
                .iter()
                .enumerate()
                .map(|(i, spec)| {
                    std::sync::Arc::new(
                        serde_yaml::from_str(&format!(
                            "metadata: {{name: pdb-{i}, namespace: d}}\nspec: {{selector: {{matchLabels: {{app: p}}}}, {spec}}}\n"
                        ))
                        .unwrap(),
                    )
                })
                .collect(),
            ..Default::default()
        };
        let view = with_displaced_pods(&objects);
        let cat = std::sync::Arc::new(tenon_core::catalog::synthetic(4));
        let (snap, errors) = tenon_core::convert::snapshot(&view, &move |_| cat.clone(), 0);
        assert!(errors.is_empty(), "{errors:?}");
        let plan = tenon_core::schedule(&snap, &tenon_core::scorer::PriceScorer);
        let first_choice = |nc: &tenon_core::plan::NewNodeClaim| {
            snap.nodepools[nc.nodepool].instance_types[nc.instance_types[0] as usize].name.clone()
        };
        plan.nodeclaims.iter().map(first_choice).collect()
    }

    const OWNED_BY: &str = ", ownerReferences: [{apiVersion: apps/v1, kind: KIND, name: o, uid: u, controller: true}]";

    /// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4061
    /// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4087
    /// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4114
    /// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4171
    /// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4215
    #[test]
    fn pods_of_a_deleting_node_get_capacity_while_active_or_a_statefulsets() {
        // The size the pod was first given (the smallest type holds 100M): Karpenter's
        // case checks both nodes are of one size.
        assert_eq!(launched_for_a_pod_on_a_deleting_node("", false, &[]), ["fake-it-0"], "an active pod");
        assert!(launched_for_a_pod_on_a_deleting_node("", true, &[]).is_empty(), "a terminating pod");
        assert!(launched_for_a_pod_on_a_deleting_node(&OWNED_BY.replace("KIND", "DaemonSet"), false, &[]).is_empty());
        assert!(launched_for_a_pod_on_a_deleting_node(&OWNED_BY.replace("KIND", "ReplicaSet"), true, &[]).is_empty());
        assert_eq!(
            launched_for_a_pod_on_a_deleting_node(&OWNED_BY.replace("KIND", "StatefulSet"), true, &[]).len(),
            1,
            "a StatefulSet recreates its terminating pod under the same name"
        );
    }

    /// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4290
    /// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4294
    /// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4298
    /// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4302
    #[test]
    fn pods_a_budget_fully_blocks_get_no_capacity() {
        for pdbs in [
            &["maxUnavailable: 0"][..],
            &["maxUnavailable: \"0%\""],
            &["minAvailable: \"100%\""],
            &["minAvailable: \"100%\"", "minAvailable: \"100%\""],
        ] {
            assert!(launched_for_a_pod_on_a_deleting_node("", false, pdbs).is_empty(), "{pdbs:?}");
        }
        assert_eq!(
            launched_for_a_pod_on_a_deleting_node("", false, &["maxUnavailable: 1"]).len(),
            1,
            "a budget allowing one"
        );
        let marked = ", annotations: {karpenter.sh/do-not-disrupt: \"true\"}";
        assert!(launched_for_a_pod_on_a_deleting_node(marked, false, &[]).is_empty(), "do-not-disrupt");
    }

    /// The provisioning decision over NodePool `default` (template `requirements`, a YAML
    /// flow list) and pending pods (name, node selector as a YAML map body), on the
    /// synthetic catalog (`fake-it-0` …, in `test-zone-1` to `test-zone-3`).
    fn decide(requirements: &str, pods: &[(&str, &str)]) -> ProvisioningPlan {
        let np: tenon_api::NodePool = serde_yaml::from_str(&format!("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: default}}\nspec:\n  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n      requirements: {requirements}\n")).unwrap();
        let pods: Vec<tenon_core::cached_pod::Pod> = pods
            .iter()
            .map(|(name, selector)| {
                serde_yaml::from_str(&format!(
                    "metadata: {{name: {name}, namespace: d}}\nspec: {{nodeSelector: {{{selector}}}, containers: [{{name: c, image: i}}]}}\nstatus: {{phase: Pending, conditions: [{{type: PodScheduled, status: \"False\", reason: Unschedulable}}]}}\n"
                ))
                .unwrap()
            })
            .collect();
        let objects = ClusterObjects { nodepools: shared([np]), pods: shared(pods), ..Default::default() };
        let cat = std::sync::Arc::new(tenon_core::catalog::synthetic(4));
        let (snap, errors) = tenon_core::convert::snapshot(&objects, &move |_| cat.clone(), 0);
        assert!(errors.is_empty(), "{errors:?}");
        tenon_core::schedule(&snap, &tenon_core::scorer::PriceScorer)
    }

    /// The value of `series` as `/metrics` shows it.
    fn scraped(m: &Metrics, series: &str) -> Option<f64> {
        m.render().lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
    }

    /// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4355
    #[test]
    fn a_decision_publishes_how_many_pods_it_could_not_place() {
        let only_type = "[{key: node.kubernetes.io/instance-type, operator: In, values: [fake-it-0]}]";
        let mut pods: Vec<(String, &str)> =
            (0..10).map(|i| (format!("unknown-{i}"), "node.kubernetes.io/instance-type: unknown")).collect();
        pods.extend((0..5).map(|i| (format!("known-{i}"), "node.kubernetes.io/instance-type: fake-it-0")));
        let pods: Vec<(&str, &str)> = pods.iter().map(|(n, s)| (n.as_str(), *s)).collect();
        let plan = decide(only_type, &pods);
        let m = Metrics::default();
        publish_decision(&m, &plan);
        assert_eq!(
            scraped(&m, "karpenter_scheduler_unschedulable_pods_count{controller=\"provisioner\"}"),
            Some(10.0),
            "{}",
            m.render()
        );
        // The next decision's count replaces it.
        publish_decision(&m, &decide(only_type, &pods[10..]));
        assert_eq!(scraped(&m, "karpenter_scheduler_unschedulable_pods_count{controller=\"provisioner\"}"), Some(0.0));
    }

    #[test]
    fn a_nodepool_whose_requirements_leave_no_instance_type_is_named() {
        let none = "[{key: node.kubernetes.io/instance-type, operator: In, values: [no-such-type]}]";
        assert_eq!(decide(none, &[("p", "")]).incompatible_nodepools, ["default"]);
        let one = "[{key: node.kubernetes.io/instance-type, operator: In, values: [fake-it-0]}]";
        assert!(decide(one, &[("p", "")]).incompatible_nodepools.is_empty());
    }

    #[test]
    fn a_decision_publishes_pending_pods_by_effective_zone_and_drops_zones_gone() {
        let series = |zone: &str| {
            format!(
                "karpenter_scheduler_pending_pods_by_effective_zone_count{{controller=\"provisioner\",zone=\"{zone}\"}}"
            )
        };
        let m = Metrics::default();
        m.set(mc::SCHEDULER_IGNORED_PODS, &[], 3.0);
        let zone = |z: &str| format!("topology.kubernetes.io/zone: {z}");
        let (z1, z2, z9) = (zone("test-zone-1"), zone("test-zone-2"), zone("test-zone-9"));
        let plan = decide("[]", &[("a", ""), ("b", ""), ("c", &z2), ("d", &z9)]);
        publish_decision(&m, &plan);
        let text = m.render();
        assert!(text.contains("# TYPE karpenter_scheduler_pending_pods_by_effective_zone_count gauge\n"), "{text}");
        assert_eq!(scraped(&m, &series("flexible")), Some(2.0), "{text}");
        assert_eq!(scraped(&m, &series("test-zone-2")), Some(1.0), "{text}");
        assert_eq!(
            scraped(&m, &series("test-zone-9")),
            Some(1.0),
            "a zone no NodePool offers is still the pod's: {text}"
        );
        publish_decision(&m, &decide("[]", &[("e", &z1)]));
        let text = m.render();
        assert_eq!(scraped(&m, &series("test-zone-1")), Some(1.0), "{text}");
        for gone in ["flexible", "test-zone-2", "test-zone-9"] {
            assert_eq!(scraped(&m, &series(gone)), None, "{gone} is no longer pending: {text}");
        }
        assert_eq!(scraped(&m, "karpenter_scheduler_ignored_pods_count"), Some(3.0), "other series stay");
    }

    #[test]
    fn pods_of_a_deleting_nodeclaim_count_as_pending_for_provisioning_only() {
        let nc: tenon_api::NodeClaim = serde_yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: a, deletionTimestamp: \"2026-11-30T00:00:00Z\"}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}\n  requirements: []\nstatus: {nodeName: node-a}\n",
        )
        .unwrap();
        let pod = |name: &str, node: &str, owner: &str| -> tenon_core::cached_pod::Pod {
            serde_yaml::from_str(&format!(
                "metadata: {{name: {name}, namespace: d, ownerReferences: [{{apiVersion: apps/v1, kind: {owner}, name: o, uid: u}}]}}\nspec: {{nodeName: {node}, containers: [{{name: c}}]}}\nstatus: {{phase: Running}}\n"
            ))
            .unwrap()
        };
        let objects = ClusterObjects {
            nodeclaims: shared([nc]),
            pods: shared([
                pod("web", "node-a", "ReplicaSet"),
                pod("agent", "node-a", "DaemonSet"),
                pod("other", "node-b", "ReplicaSet"),
            ]),
            ..Default::default()
        };
        let view = with_displaced_pods(&objects);
        let pending: Vec<&str> = view
            .pods
            .iter()
            .filter(|p| tenon_core::convert::is_provisionable(p))
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        assert_eq!(pending, vec!["web"], "DaemonSet pods stay; other nodes' pods stay");
        assert!(objects.pods[0].spec.as_ref().unwrap().node_name.is_some(), "the original view is untouched");
    }
}
