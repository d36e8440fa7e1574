//! Voluntary disruption, Karpenter's way. Every [`ROUND_EVERY`] the core decides over a
//! snapshot, through each NodePool's consolidation and budget policies; one command runs at a
//! time: its candidates are tainted `karpenter.sh/disrupted:NoSchedule` and given the
//! `DisruptionReason` condition, replacements are launched, and once they are Initialized and
//! at least [`VALIDATION_DELAY`] has passed since the decision the candidates are re-checked
//! (still there, still not blocked by a PDB or `karpenter.sh/do-not-disrupt`) and deleted —
//! termination drains them. A command that no longer holds is abandoned and its candidates
//! untainted. Expired NodeClaims are deleted outside budgets.

use super::lifecycle::{self, set_condition};
use super::{Catalogs, Controller, involved_nodeclaim, snapshot, termination};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tenon_api::NodeClaim;
use tenon_api::wellknown::{self as wk, condition};
use tenon_core::ClusterSnapshot;
use tenon_core::cloud::CloudProvider;
use tenon_core::convert::{ClusterObjects, is_active, is_daemon, pod_key};
use tenon_core::disruption::candidates::{Candidate, candidates};
use tenon_core::disruption::{DisruptionPlan, Method, disrupt};

/// Karpenter's disruption polling period.
pub const ROUND_EVERY: Duration = Duration::from_secs(10);
/// Karpenter's consolidation TTL: a decision is re-checked this long after it was made.
pub const VALIDATION_DELAY: Duration = Duration::from_secs(15);
/// Replacements not Initialized by then: the command is abandoned.
pub const REPLACEMENT_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// A disruption under way.
#[derive(Clone, Debug)]
pub struct Command {
    pub method: Method,
    pub reason: String,
    /// (NodeClaim, Node) of each candidate.
    pub candidates: Vec<(String, String)>,
    pub replacements: Vec<String>,
    pub decided: Instant,
    /// When every replacement was first seen Initialized.
    pub replaced: Option<Instant>,
    pub savings_per_hour: f64,
}

/// The `DisruptionReason` condition's reason for a method (Karpenter's names).
fn reason_name(m: Method) -> &'static str {
    m.reason().map_or("Expired", |r| r.as_str())
}

fn consolidation_type(m: Method) -> &'static str {
    match m {
        Method::MultiNodeConsolidation => "multi",
        Method::SingleNodeConsolidation => "single",
        Method::Emptiness => "empty",
        _ => "",
    }
}

impl Controller {
    /// True when a disruption round or a command step is due now (it needs instance types).
    pub(super) fn disruption_due(&self) -> bool {
        self.command.is_some() || self.last_round.is_none_or(|t| t.elapsed() >= ROUND_EVERY)
    }

    pub(super) async fn disruption(&mut self, objects: &ClusterObjects, catalogs: &Catalogs) {
        if let Some(cmd) = self.command.take() {
            self.command = self.advance(cmd, objects, catalogs).await;
            return;
        }
        if !self.disruption_due() || objects.nodeclaims.iter().any(|nc| nc.metadata.deletion_timestamp.is_some()) {
            // Karpenter waits for earlier disruptions to finish draining before the next.
            return;
        }
        self.last_round = Some(Instant::now());
        let (mut snap, _) = snapshot(objects, catalogs);
        // Cloud drift is looked up fresh each round (the condition is only its record).
        let cloud = self.cloud_drift(objects).await;
        for n in &mut snap.nodes {
            if let Some(c) = n.claim.as_mut() {
                c.drift = cloud.get(&c.nodeclaim).cloned();
            }
        }
        let policies = self.policies.active.clone();
        let decided = super::off_loop("disruption", move || {
            let decision = disrupt(&snap, &*policies);
            (snap, decision)
        });
        let Some((snap, decision)) = decided.await else { return };
        self.claim_conditions(objects, &snap, &decision.candidates).await;
        tracing::debug!(
            evaluated = decision.evaluated,
            blocked = decision.blocked.len(),
            rejected = decision.rejected.len(),
            expirations = decision.expirations.len(),
            plan = decision.plan.as_ref().map(|p| p.method.as_str()),
            allowed = ?decision.allowed.iter().map(|((p, r), a)| format!("{p}/{}={} ({})", r.as_str(), a.allowed, a.why)).collect::<Vec<_>>(),
            "disruption round"
        );
        self.metrics.set("karpenter_voluntary_disruption_eligible_nodes", decision.evaluated as f64);
        for ((pool, reason), allowance) in &decision.allowed {
            self.metrics.set(
                &format!(
                    "karpenter_nodepools_allowed_disruptions{{nodepool=\"{pool}\",reason=\"{}\"}}",
                    reason.as_str()
                ),
                allowance.allowed as f64,
            );
        }
        for b in &decision.blocked {
            let node = &snap.nodes[b.node];
            if let Some(nc) = node.claim.as_ref().and_then(|c| find(objects, &c.nodeclaim)) {
                self.recorder
                    .publish(&self.client, &involved_nodeclaim(nc), "Normal", "DisruptionBlocked", &b.reason)
                    .await;
            }
        }
        for r in &decision.rejected {
            for &c in &r.candidates {
                if let Some(nc) = snap.nodes[c].claim.as_ref().and_then(|c| find(objects, &c.nodeclaim)) {
                    let message = format!("{} by policy {}: {}", r.method.as_str(), r.consolidator, r.reason);
                    self.recorder
                        .publish(&self.client, &involved_nodeclaim(nc), "Normal", "ConsolidationRejected", &message)
                        .await;
                    self.recorder
                        .publish(&self.client, &involved_nodeclaim(nc), "Normal", "Unconsolidatable", &message)
                        .await;
                }
            }
        }
        for e in &decision.expirations {
            for &c in &e.candidates {
                let Some(claim) = snap.nodes[c].claim.as_ref() else { continue };
                let Some(nc) = find(objects, &claim.nodeclaim) else { continue };
                self.recorder.publish(&self.client, &involved_nodeclaim(nc), "Normal", "Expired", &e.reason).await;
                self.delete_nodeclaim(&claim.nodeclaim, Method::Expiration, &e.reason).await;
            }
        }
        if let Some(plan) = decision.plan {
            self.command = self.execute(&snap, objects, plan).await;
        }
    }

    /// `Consolidatable` and `Drifted` on every candidate NodeClaim, as the core saw it.
    async fn claim_conditions(&self, objects: &ClusterObjects, snap: &ClusterSnapshot, cands: &[Candidate]) {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        for c in cands {
            let Some(claim) = snap.nodes[c.node].claim.as_ref() else { continue };
            let Some(nc) = find(objects, &claim.nodeclaim) else { continue };
            let mut conds = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
            let before = conds.clone();
            let (ok, why) = if c.consolidatable { (true, "Consolidatable") } else { (false, "NotConsolidatable") };
            set_condition(&mut conds, condition::CONSOLIDATABLE, ok, why, "", nc.metadata.generation);
            match &c.drifted {
                Some(drift) => {
                    // `AMIDrift: image … is no longer selected`: a condition reason is one word.
                    let (reason, message) = drift.split_once(": ").unwrap_or((drift.as_str(), ""));
                    set_condition(&mut conds, condition::DRIFTED, true, reason, message, nc.metadata.generation)
                }
                None => conds.retain(|x| x.type_ != condition::DRIFTED),
            }
            if conds != before {
                let name = claim.nodeclaim.clone();
                let patch = json!({"status": {"conditions": conds}});
                if let Err(e) = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    tracing::warn!(nodeclaim = %name, error = %e, "could not write disruption conditions");
                }
            }
        }
    }

    /// Marks the candidates and launches the replacements; deletes at once when none is needed.
    async fn execute(
        &mut self,
        snap: &ClusterSnapshot,
        objects: &ClusterObjects,
        plan: DisruptionPlan,
    ) -> Option<Command> {
        let mut cmd = Command {
            method: plan.method,
            reason: plan.reason.clone(),
            candidates: Vec::new(),
            replacements: Vec::new(),
            decided: Instant::now(),
            replaced: None,
            savings_per_hour: plan.savings_per_hour,
        };
        for &c in &plan.candidates {
            let node = &snap.nodes[c];
            let Some(claim) = node.claim.as_ref() else { continue };
            cmd.candidates.push((claim.nodeclaim.clone(), node.name.clone()));
        }
        tracing::info!(method = plan.method.as_str(), candidates = ?cmd.candidates, replacements = plan.replacements.len(), savings_per_hour = plan.savings_per_hour, reason = %plan.reason, "disruption decided");
        for (nc, node) in &cmd.candidates {
            if let Err(e) = self.mark(nc, node, plan.method, &plan.reason).await {
                tracing::warn!(nodeclaim = %nc, error = %e, "could not mark a disruption candidate; abandoning");
                self.abandon(&cmd, objects, &format!("marking {nc} failed: {e}")).await;
                return None;
            }
        }
        let decision = if plan.replacements.is_empty() { "delete" } else { "replace" };
        let labels = format!(
            "decision=\"{decision}\",reason=\"{}\",consolidation_type=\"{}\"",
            reason_name(plan.method).to_lowercase(),
            consolidation_type(plan.method)
        );
        self.metrics.add(&format!("karpenter_voluntary_disruption_decisions_total{{{labels}}}"), 1.0);
        for (nc, _) in &cmd.candidates {
            if let Some(obj) = find(objects, nc) {
                let message =
                    format!("{}: {} (saves ${:.4}/h)", plan.method.as_str(), plan.reason, plan.savings_per_hour);
                self.recorder
                    .publish(&self.client, &involved_nodeclaim(obj), "Normal", "ConsolidationApproved", &message)
                    .await;
            }
        }
        for r in &plan.replacements {
            match self.create_nodeclaim(r, snap, objects, "disruption").await {
                Some(name) => cmd.replacements.push(name),
                None => {
                    self.abandon(&cmd, objects, "a replacement could not be created").await;
                    return None;
                }
            }
        }
        if cmd.replacements.is_empty() {
            self.finish(&cmd).await;
            return None;
        }
        for (nc, _) in &cmd.candidates {
            if let Some(obj) = find(objects, nc) {
                let message =
                    format!("launching {} replacement(s): {}", cmd.replacements.len(), cmd.replacements.join(", "));
                self.recorder
                    .publish(&self.client, &involved_nodeclaim(obj), "Normal", "DisruptionLaunching", &message)
                    .await;
            }
        }
        Some(cmd)
    }

    /// One step of a command: wait for the replacements, re-check, delete.
    async fn advance(&mut self, mut cmd: Command, objects: &ClusterObjects, catalogs: &Catalogs) -> Option<Command> {
        let mut all_initialized = true;
        for r in &cmd.replacements {
            match find(objects, r) {
                // Created moments ago: the cache has not shown it yet.
                None if self.unobserved.contains_key(r) => all_initialized = false,
                None => {
                    self.abandon(&cmd, objects, &format!("replacement {r} is gone")).await;
                    return None;
                }
                Some(nc) if nc.metadata.deletion_timestamp.is_some() => {
                    self.abandon(&cmd, objects, &format!("replacement {r} is being deleted")).await;
                    return None;
                }
                Some(nc) => all_initialized &= lifecycle::has_condition(nc, condition::INITIALIZED),
            }
        }
        if !all_initialized {
            if cmd.decided.elapsed() >= REPLACEMENT_TIMEOUT {
                self.abandon(&cmd, objects, "replacements were not Initialized within 10m").await;
                return None;
            }
            return Some(cmd);
        }
        let replaced = *cmd.replaced.get_or_insert_with(Instant::now);
        if cmd.decided.elapsed() < VALIDATION_DELAY {
            return Some(cmd);
        }
        if let Some(why) = self.still_invalid(&cmd, objects, catalogs) {
            self.abandon(&cmd, objects, &why).await;
            return None;
        }
        tracing::info!(
            method = cmd.method.as_str(),
            candidates = ?cmd.candidates,
            since_replacements_initialized_ms = replaced.elapsed().as_millis() as u64,
            savings_per_hour = cmd.savings_per_hour,
            "replacements Initialized and the decision still holds; deleting the candidates"
        );
        self.metrics.set("tenon_disruption_replacement_to_delete_seconds", replaced.elapsed().as_secs_f64());
        self.finish(&cmd).await;
        None
    }

    /// Why the command's candidates may no longer be disrupted, if so.
    fn still_invalid(&self, cmd: &Command, objects: &ClusterObjects, catalogs: &Catalogs) -> Option<String> {
        for (nc, _) in &cmd.candidates {
            match find(objects, nc) {
                None => return Some(format!("candidate {nc} is gone")),
                Some(c) if c.metadata.deletion_timestamp.is_some() => {
                    return Some(format!("candidate {nc} is being deleted"));
                }
                Some(_) => {}
            }
        }
        // The core sees our own taint as "already disrupting": look at the candidates as if
        // they were not marked.
        let (mut snap, _) = snapshot(objects, catalogs);
        let ours: BTreeSet<&str> = cmd.candidates.iter().map(|(nc, _)| nc.as_str()).collect();
        for n in &mut snap.nodes {
            if let Some(c) = n.claim.as_mut().filter(|c| ours.contains(c.nodeclaim.as_str())) {
                c.disrupting = false;
                n.unschedulable = false;
            }
        }
        let (cands, blocked) = candidates(&snap);
        for b in &blocked {
            if let Some(c) = snap.nodes[b.node].claim.as_ref().filter(|c| ours.contains(c.nodeclaim.as_str())) {
                return Some(format!("{}: {}", c.nodeclaim, b.reason));
            }
        }
        for c in &cands {
            let Some(claim) = snap.nodes[c.node].claim.as_ref().filter(|x| ours.contains(x.nodeclaim.as_str())) else {
                continue;
            };
            if let Some(why) = &c.blocked {
                return Some(format!("{}: {why}", claim.nodeclaim));
            }
            let consolidating = matches!(cmd.method, Method::MultiNodeConsolidation | Method::SingleNodeConsolidation);
            if consolidating && !c.consolidatable {
                return Some(format!(
                    "{}: pods changed since the decision (consolidateAfter restarted)",
                    claim.nodeclaim
                ));
            }
            if cmd.method == Method::Emptiness && !c.empty {
                return Some(format!("{}: no longer empty", claim.nodeclaim));
            }
        }
        None
    }

    async fn finish(&mut self, cmd: &Command) {
        for (nc, _) in &cmd.candidates {
            self.delete_nodeclaim(nc, cmd.method, &cmd.reason).await;
        }
        // The next round comes a full period later: by then the cache shows the candidates
        // deleting (which holds rounds off until they are gone), so a replacement is not
        // taken for empty before the candidates' pods have moved onto it.
        self.last_round = Some(Instant::now());
    }

    async fn delete_nodeclaim(&self, name: &str, method: Method, reason: &str) {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(nodeclaim = %name, method = method.as_str(), %reason, "disrupting: NodeClaim deleted");
                self.metrics.add(
                    &format!(
                        "karpenter_nodeclaims_disrupted_total{{reason=\"{}\"}}",
                        reason_name(method).to_lowercase()
                    ),
                    1.0,
                );
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => tracing::warn!(nodeclaim = %name, error = %e, "could not delete a disrupted NodeClaim"),
        }
    }

    /// Taint and `DisruptionReason` on one candidate.
    async fn mark(&self, nc: &str, node: &str, method: Method, reason: &str) -> Result<(), kube::Error> {
        let nodes: Api<Node> = Api::all(self.client.clone());
        let current = nodes.get(node).await?;
        if let Some(p) = termination::disrupted_taints(&current) {
            nodes.patch(node, &PatchParams::default(), &Patch::Merge(&p)).await?;
        }
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        let obj = claims.get(nc).await?;
        let conds = lifecycle::with_condition(&obj, condition::DISRUPTION_REASON, true, reason_name(method), reason);
        claims
            .patch_status(nc, &PatchParams::default(), &Patch::Merge(&json!({"status": {"conditions": conds}})))
            .await?;
        Ok(())
    }

    /// Gives a command up: candidates untainted and their `DisruptionReason` removed. The
    /// replacements stay (they are ordinary capacity; consolidation removes them if unneeded).
    async fn abandon(&self, cmd: &Command, objects: &ClusterObjects, why: &str) {
        tracing::info!(method = cmd.method.as_str(), candidates = ?cmd.candidates, %why, "disruption abandoned");
        let nodes: Api<Node> = Api::all(self.client.clone());
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        for (nc, node) in &cmd.candidates {
            if let Ok(n) = nodes.get(node).await {
                let taints = termination::taints_without(&n, wk::TAINT_DISRUPTED);
                if let Err(e) = nodes
                    .patch(node, &PatchParams::default(), &Patch::Merge(&json!({"spec": {"taints": taints}})))
                    .await
                {
                    tracing::warn!(node = %node, error = %e, "could not untaint an abandoned candidate");
                }
            }
            if let Some(obj) = find(objects, nc) {
                let conds = lifecycle::without_condition(obj, condition::DISRUPTION_REASON);
                let _ = claims
                    .patch_status(nc, &PatchParams::default(), &Patch::Merge(&json!({"status": {"conditions": conds}})))
                    .await;
                self.recorder
                    .publish(
                        &self.client,
                        &involved_nodeclaim(obj),
                        "Normal",
                        "DisruptionBlocked",
                        &format!("{} abandoned: {why}", cmd.method.as_str()),
                    )
                    .await;
            }
        }
    }

    /// `status.lastPodEventTime` of each registered NodeClaim: bumped when the set of
    /// (non-DaemonSet) pods on its node changes, which restarts `consolidateAfter`.
    pub(super) async fn pod_events(&mut self, objects: &ClusterObjects) {
        let mut on_node: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
        for p in &objects.pods {
            let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) else { continue };
            if !is_daemon(p) && is_active(p) {
                on_node.entry(node).or_default().insert(pod_key(p));
            }
        }
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let empty = BTreeSet::new();
        let mut seen = BTreeSet::new();
        for nc in &objects.nodeclaims {
            let (Some(name), Some(node)) =
                (nc.metadata.name.as_deref(), nc.status.as_ref().and_then(|s| s.node_name.as_deref()))
            else {
                continue;
            };
            seen.insert(name.to_string());
            let pods = on_node.get(node).unwrap_or(&empty);
            // First sight since start: nothing to compare with, only remembered.
            let changed = self.pods_on.get(name).map(|before| before != pods);
            if changed != Some(false) {
                self.pods_on.insert(name.to_string(), pods.clone());
            }
            if changed == Some(true) {
                let patch = json!({"status": {"lastPodEventTime": lifecycle::now_time()}});
                if let Err(e) = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    tracing::warn!(nodeclaim = %name, error = %e, "could not write lastPodEventTime");
                }
            }
        }
        self.pods_on.retain(|k, _| seen.contains(k));
    }
}

impl Controller {
    /// NodeClaim → why its instance no longer matches its EC2NodeClass (AMI, subnet,
    /// security groups), per the cloud provider.
    async fn cloud_drift(&mut self, objects: &ClusterObjects) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let instances = match self.live_instances().await {
            Ok(i) => i,
            Err(e) => {
                tracing::warn!(error = %e, "drift: could not list instances");
                return out;
            }
        };
        let classes = self.stores.nodeclasses.state();
        let by_id: BTreeMap<&str, &tenon_core::cloud::Instance> =
            instances.iter().map(|i| (i.provider_id.as_str(), i)).collect();
        for nc in &objects.nodeclaims {
            let Some(pid) = nc.status.as_ref().and_then(|s| s.provider_id.as_deref()) else { continue };
            let Some(instance) = by_id.get(pid) else { continue };
            let class = nc.spec.node_class_ref.as_ref().map(|r| r.name.as_str());
            let Some(nodeclass) = classes.iter().find(|n| n.metadata.name.as_deref() == class) else { continue };
            if let Some(reason) = self.provider.is_drifted(instance, nodeclass) {
                out.insert(nc.metadata.name.clone().unwrap_or_default(), reason);
            }
        }
        out
    }
}

fn find<'a>(objects: &'a ClusterObjects, name: &str) -> Option<&'a NodeClaim> {
    objects.nodeclaims.iter().find(|nc| nc.metadata.name.as_deref() == Some(name))
}
