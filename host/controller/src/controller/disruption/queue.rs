//! A disruption command's steps after its decision: re-checked, its candidates marked and
//! replacements created, then the candidates deleted once the replacements are Initialized;
//! abandoned (and unmarked) when it stops holding; and the sweep of marks no command owns.

use super::{Command, Disruption, find, involved_node};
use crate::controller::conditions;
use crate::controller::error::Error;
use crate::controller::metrics::catalog as mc;
use crate::controller::provisioning::create_nodeclaim;
use crate::controller::{Catalogs, involved_nodeclaim, locked_patch, snapshot, termination};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::DeleteParams;
use serde_json::json;
use std::collections::BTreeSet;
use tenon_api::NodeClaim;
use tenon_api::wellknown::{self as wk, condition};
use tenon_core::convert::ClusterObjects;
use tenon_core::disruption::{Method, decision_labels};
use tenon_core::orchestration::command::{self, Notice, On, Replacement, Step, stale_marks};

/// Karpenter's queue failure for a command given up: once it has acted, the replacements
/// that never became ready, with its decision, reason and consolidation type. Karpenter
/// v1.14 writes the decision in `consolidation_type` too; Tenon the consolidation type.
fn queue_failure(cmd: &Command, states: &[Replacement]) -> Option<([(&'static str, String); 3], u64)> {
    cmd.executed?;
    let failed = states.iter().filter(|s| **s != Replacement::Initialized).count() as u64;
    Some((decision_labels(cmd.method, !cmd.replacements.is_empty()), failed))
}

impl Disruption {
    /// One step of the command under way; `None` when it is over.
    /// `held`: the candidates of every command under way (this one's taken out here).
    pub(super) async fn advance(
        &mut self,
        cmd: Command,
        objects: &ClusterObjects,
        catalogs: &Catalogs,
        held: &BTreeSet<String>,
    ) -> Option<Command> {
        let states: Vec<Replacement> = cmd.replacements.iter().map(|r| self.replacement(r, objects)).collect();
        let step = cmd.step(self.ctx.now_ms(), &states);
        if cmd.executed.is_some() && matches!(step, Step::Wait | Step::Delete) {
            self.publish(&cmd, objects, cmd.waiting_notices(&states)).await;
        }
        match step {
            Step::Wait => Some(cmd),
            Step::Validate => {
                let (mut snap, _) = snapshot(objects, catalogs, self.ctx.unix_now());
                snap.spot_to_spot = self.ctx.spot_to_spot;
                let others = held.iter().filter(|nc| !cmd.has_candidate(nc)).cloned().collect();
                command::hold(&mut snap, &others);
                let policies = self.ctx.active_policies();
                let (method, candidates, types) = (cmd.method, cmd.candidates.clone(), cmd.replacement_types.clone());
                let kept = crate::controller::off_loop("disruption validation", move || {
                    command::validate_keeping(&snap, &*policies, method, &candidates, &types)
                })
                .await
                .unwrap_or_else(|| Err("the validation panicked".into()));
                // Karpenter counts the candidates that failed validation.
                let labels = [("consolidation_type", cmd.method.consolidation_type())];
                match kept {
                    Ok(kept) => {
                        let dropped = (cmd.candidates.len() - kept.len()) as u64;
                        if dropped > 0 {
                            self.ctx.metrics.add(mc::VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS, &labels, dropped);
                        }
                        let mut cmd = cmd;
                        cmd.candidates = kept;
                        self.execute(cmd, objects).await
                    }
                    Err(why) => {
                        let failed = cmd.candidates.len() as u64;
                        self.ctx.metrics.add(mc::VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS, &labels, failed);
                        self.abandon(&cmd, objects, &why, false).await;
                        // Karpenter's pass goes on to the next method.
                        self.resume_after = Some(cmd.method);
                        None
                    }
                }
            }
            Step::Delete => {
                self.finish(&cmd, objects).await;
                None
            }
            Step::Abandon { why, marked } => {
                if let Some((labels, failed)) = queue_failure(&cmd, &states) {
                    let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    self.ctx.metrics.add(mc::VOLUNTARY_DISRUPTION_QUEUE_FAILURES, &labels, failed);
                }
                self.abandon(&cmd, objects, &why, marked).await;
                None
            }
        }
    }

    /// Where a replacement stands in the cache.
    pub(super) fn replacement(&self, name: &str, objects: &ClusterObjects) -> Replacement {
        let unobserved = self.ctx.cluster().unobserved.contains_key(name);
        replacement_state(name, objects, unobserved, || self.ctx.objects())
    }

    /// Marks the candidates and creates the replacements of a command that still holds.
    pub(super) async fn execute(&mut self, mut cmd: Command, objects: &ClusterObjects) -> Option<Command> {
        for (nc, node) in &cmd.candidates {
            if let Err(e) = self.mark(nc, node, cmd.method, &cmd.reason).await {
                self.abandon(&cmd, objects, &format!("marking {nc} failed: {e}"), true).await;
                self.failures.push(Error::kube(format!("marking disruption candidate {nc}"), e));
                return None;
            }
        }
        let [(d, decision), (r, reason), (k, kind)] = decision_labels(cmd.method, !cmd.planned.is_empty());
        let labels = [(d, decision.as_str()), (r, reason.as_str()), (k, kind.as_str())];
        self.ctx.metrics.add(mc::VOLUNTARY_DISRUPTION_DECISIONS, &labels, 1);
        let pools: BTreeSet<String> =
            cmd.candidates.iter().filter_map(|(nc, _)| find(objects, nc)).map(crate::controller::pool_of).collect();
        for pool in &pools {
            let [decision, reason, kind] = labels;
            self.ctx.metrics.add(
                mc::VOLUNTARY_DISRUPTION_DECISIONS_BY_NODEPOOL,
                &[("nodepool", pool), decision, reason, kind],
                1,
            );
        }
        let mut created = Vec::new();
        for r in std::mem::take(&mut cmd.planned) {
            // Karpenter's reason for a replacement: its command's, in lower case.
            let reason = cmd.method.reason_name().to_lowercase();
            match create_nodeclaim(&self.ctx, &r, &reason, &mut self.failures).await {
                Some(name) => created.push(name),
                None => {
                    cmd.execute(created, self.ctx.now_ms());
                    self.abandon(&cmd, objects, "a replacement could not be created", true).await;
                    return None;
                }
            }
        }
        cmd.execute(created, self.ctx.now_ms());
        Some(cmd)
    }

    /// Publishes a command's Events on the objects they name (those still in the cache).
    pub(super) async fn publish(&self, cmd: &Command, objects: &ClusterObjects, notices: Vec<Notice>) {
        for n in notices {
            let nodeclaim = |name: &str| find(objects, name).map(involved_nodeclaim);
            let obj = match n.on {
                On::CandidateNodeClaim(i) => cmd.candidates.get(i).and_then(|(nc, _)| nodeclaim(nc)),
                On::Replacement(i) => cmd.replacements.get(i).and_then(|nc| nodeclaim(nc)),
                On::CandidateNode(i) => cmd.candidates.get(i).and_then(|(_, node)| involved_node(objects, node)),
            };
            if let Some(obj) = obj {
                self.ctx.recorder.publish(&self.ctx.client, &obj, "Normal", n.reason, &n.message).await;
            }
        }
    }

    /// A Normal Event on a Node and its NodeClaim (those still in the cache), as Karpenter
    /// says most things about a candidate.
    pub(super) async fn publish_on_node_and_claim(
        &self,
        objects: &ClusterObjects,
        node: &str,
        nodeclaim: Option<&str>,
        reason: &str,
        message: &str,
    ) {
        let claim = nodeclaim.and_then(|nc| find(objects, nc)).map(involved_nodeclaim);
        for obj in involved_node(objects, node).into_iter().chain(claim) {
            self.ctx.recorder.publish(&self.ctx.client, &obj, "Normal", reason, message).await;
        }
    }

    /// Deletes the candidates of a command whose replacements are Initialized.
    pub(super) async fn finish(&mut self, cmd: &Command, objects: &ClusterObjects) {
        if let Some(at) = cmd.executed {
            let waited = (self.ctx.now_ms() - at) as f64 / 1000.0;
            self.ctx.metrics.set(mc::DISRUPTION_EXECUTION, &[], waited);
        }
        // One line per command with its NodeClaims (the differential test reads it).
        let candidates: Vec<&str> = cmd.candidates.iter().map(|(nc, _)| nc.as_str()).collect();
        tracing::info!(method = %cmd.method.as_str(), candidates = %candidates.join(","), replacements = %cmd.replacements.join(","), savings_per_hour = cmd.savings_per_hour, "deleting the candidates");
        for (i, (nc, _)) in cmd.candidates.iter().enumerate() {
            // Karpenter publishes once the delete went through.
            if self.delete_nodeclaim(nc, cmd.method, &cmd.reason, objects).await {
                self.publish(cmd, objects, cmd.terminating_notices(i).into()).await;
            }
        }
    }

    /// Deletes a candidate's NodeClaim; whether it was deleted now.
    pub(super) async fn delete_nodeclaim(
        &mut self,
        name: &str,
        method: Method,
        reason: &str,
        objects: &ClusterObjects,
    ) -> bool {
        let api: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(nodeclaim = %name, method = method.as_str(), %reason, "disrupting: NodeClaim deleted");
                if let Some(nc) = objects.nodeclaims.iter().find(|c| c.metadata.name.as_deref() == Some(name)) {
                    // Drift goes through the same queue: only consolidation names a policy.
                    let pool = objects
                        .nodepools
                        .iter()
                        .find(|p| p.metadata.name.as_deref() == Some(&crate::controller::pool_of(nc)));
                    let policy = match (method.consolidation_type(), pool) {
                        ("", _) | (_, None) => "",
                        (_, Some(p)) => p.spec.disruption.consolidation_policy.as_str(),
                    };
                    let pods = tenon_core::convert::reschedulable_on(nc, &objects.pods);
                    let reason = method.reason_name().to_lowercase();
                    self.ctx.metrics.nodeclaim_and_pods_disrupted(nc, &reason, policy, pods);
                }
                true
            }
            Err(kube::Error::Api(e)) if e.code == 404 => false,
            Err(e) => {
                self.failures.push(Error::kube(format!("deleting disrupted NodeClaim {name}"), e));
                false
            }
        }
    }

    /// Taint and `DisruptionReason` on one candidate.
    pub(super) async fn mark(&self, nc: &str, node: &str, method: Method, reason: &str) -> Result<(), kube::Error> {
        let nodes: Api<Node> = Api::all(self.ctx.client.clone());
        locked_patch::patch_locked(&nodes, node, termination::disrupted_taints).await?;
        let claims: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        let marked = |obj: &NodeClaim| {
            let conds =
                conditions::with_condition(obj, condition::DISRUPTION_REASON, true, method.reason_name(), reason);
            Some(json!({"status": {"conditions": conds}}))
        };
        locked_patch::patch_status_locked(&claims, nc, marked).await
    }

    /// Gives a command up: when `marked`, its candidates are untainted and their
    /// `DisruptionReason` removed. The replacements stay (they are ordinary capacity;
    /// consolidation removes them if unneeded).
    pub(super) async fn abandon(&self, cmd: &Command, objects: &ClusterObjects, why: &str, marked: bool) {
        tracing::info!(method = cmd.method.as_str(), candidates = ?cmd.candidates, %why, "disruption abandoned");
        if marked {
            for (nc, node) in &cmd.candidates {
                self.unmark(nc, node, objects).await;
            }
        }
        self.publish(cmd, objects, cmd.abandoned_notices(why)).await;
    }

    /// Removes the disruption taint and `DisruptionReason` from a candidate.
    pub(super) async fn unmark(&self, nc: &str, node: &str, objects: &ClusterObjects) {
        let nodes: Api<Node> = Api::all(self.ctx.client.clone());
        // A Node being deleted keeps it: termination owns its taints then (as Karpenter).
        let untainted = |n: &Node| {
            let tainted = n.spec.iter().flat_map(|s| s.taints.iter().flatten()).any(|t| t.key == wk::TAINT_DISRUPTED);
            (tainted && n.metadata.deletion_timestamp.is_none())
                .then(|| json!({"spec": {"taints": termination::taints_without(n, wk::TAINT_DISRUPTED)}}))
        };
        match locked_patch::patch_locked(&nodes, node, untainted).await {
            Ok(()) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => tracing::warn!(node = %node, error = %e, "could not remove the disruption taint"),
        }
        if find(objects, nc).is_some_and(|o| conditions::has_condition(o, condition::DISRUPTION_REASON)) {
            let claims: Api<NodeClaim> = Api::all(self.ctx.client.clone());
            let unmarked = |obj: &NodeClaim| {
                conditions::has_condition(obj, condition::DISRUPTION_REASON).then(|| {
                    json!({"status": {"conditions": conditions::without_condition(obj, condition::DISRUPTION_REASON)}})
                })
            };
            let _ = locked_patch::patch_status_locked(&claims, nc, unmarked).await;
        }
    }

    /// Karpenter's sweep, at start-up and every [`ROUND_EVERY`](super::ROUND_EVERY) whether or not a round can
    /// run: the disruption mark on a node no command owns (and that is not being deleted) is
    /// removed, so a restart mid-command leaves no node unschedulable.
    pub(super) async fn sweep_marks(&mut self, objects: &ClusterObjects) {
        if !self.a_round_since(self.last_sweep) {
            return;
        }
        self.last_sweep = Some(self.ctx.now_ms());
        let mut marked = Vec::new();
        for nc in objects.nodeclaims.iter().filter(|nc| nc.metadata.deletion_timestamp.is_none()) {
            let Some(node) = crate::controller::node_of(nc, &objects.nodes) else { continue };
            let tainted = node.spec.as_ref().and_then(|s| s.taints.as_ref()).into_iter().flatten();
            if node.metadata.deletion_timestamp.is_none() && tainted.into_iter().any(|t| t.key == wk::TAINT_DISRUPTED) {
                marked.push((
                    nc.metadata.name.as_deref().unwrap_or_default(),
                    node.metadata.name.as_deref().unwrap_or_default(),
                ));
            }
        }
        for (nc, node) in stale_marks(marked, &self.commands) {
            tracing::info!(nodeclaim = %nc, node = %node, "disruption mark no command owns; removing it");
            self.unmark(nc, node, objects).await;
        }
    }
}
/// Where replacement `name` stands: in this reconcile's view `pass`, else (`unobserved`)
/// created and not shown by the cache yet, else in the cache's `latest` view. The last is
/// read because another reconciler may have seen it in a view newer than `pass` and so
/// taken it off the unobserved list meanwhile: missing from `pass` alone is no proof that
/// it is gone.
fn replacement_state(
    name: &str,
    pass: &ClusterObjects,
    unobserved: bool,
    latest: impl FnOnce() -> std::sync::Arc<ClusterObjects>,
) -> Replacement {
    let state = |nc: &NodeClaim| match nc {
        nc if nc.metadata.deletion_timestamp.is_some() => Replacement::Deleting,
        nc if conditions::has_condition(nc, condition::INITIALIZED) => Replacement::Initialized,
        _ => Replacement::Launching,
    };
    if let Some(nc) = find(pass, name) {
        return state(nc);
    }
    if unobserved {
        return Replacement::NotSeen;
    }
    find(&latest(), name).map_or(Replacement::Gone, state)
}

#[cfg(test)]
mod tests {
    use super::super::tests::claim;
    use super::*;

    #[test]
    fn a_replacement_another_reconciler_saw_after_this_view_was_taken_is_not_gone() {
        let mut created = claim(&[]);
        created.metadata.name = Some("r1".into());
        let pass = ClusterObjects::default();
        let latest = std::sync::Arc::new(ClusterObjects {
            nodeclaims: tenon_core::convert::shared([created]),
            ..Default::default()
        });
        let seen_since = replacement_state("r1", &pass, false, || latest.clone());
        assert_eq!(seen_since, Replacement::Launching, "the cache shows it now: it is launching");
        let unobserved = replacement_state("r1", &pass, true, || latest.clone());
        assert_eq!(unobserved, Replacement::NotSeen);
        let empty = std::sync::Arc::new(ClusterObjects::default());
        assert_eq!(replacement_state("r1", &pass, false, || empty.clone()), Replacement::Gone, "nowhere: gone");
    }

    #[test]
    fn a_command_given_up_after_acting_counts_its_replacements_that_never_became_ready() {
        let candidates = vec![("nc-a".to_string(), "node-a".to_string())];
        let mut cmd =
            Command::new(Method::SingleNodeConsolidation, "underutilized".into(), 0.1, candidates, vec![claim(&[])], 0);
        assert_eq!(queue_failure(&cmd, &[]), None, "given up before acting: a failed validation, not this");
        cmd.execute(vec!["r1".into(), "r2".into()], 1);
        let (labels, failed) = queue_failure(&cmd, &[Replacement::Initialized, Replacement::Launching]).expect("acted");
        assert_eq!(failed, 1);
        let expected = [("decision", "replace"), ("reason", "underutilized"), ("consolidation_type", "single")];
        assert_eq!(labels.map(|(k, v)| (k, v)), expected.map(|(k, v)| (k, v.to_string())));
    }
}
