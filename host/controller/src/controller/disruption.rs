//! Voluntary disruption, Karpenter's way. Every [`ROUND_EVERY`] the core decides over a
//! snapshot, through each NodePool's consolidation and budget policies; the decision becomes
//! a `tenon_core::orchestration::command` whose steps this module carries out: re-checked
//! 15 s after the decision, then its candidates tainted `karpenter.sh/disrupted:NoSchedule`
//! (with the `DisruptionReason` condition) and its replacements created, then, once they are
//! Initialized, the candidates deleted — termination drains them. A command that stops
//! holding is abandoned and its candidates untainted; a mark no command owns (a restart
//! mid-command) is removed every round and at start-up (`sweep_marks`).

use super::conditions::{self, set_condition};
use super::metrics::catalog as mc;
use super::{Catalogs, Controller, involved_nodeclaim, snapshot, termination};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tenon_api::hash::{EC2NODECLASS_HASH_VERSION, NODEPOOL_HASH_VERSION};
use tenon_api::wellknown::{self as wk, condition};
use tenon_api::{EC2NodeClass, NodeClaim};
use tenon_core::ClusterSnapshot;
use tenon_core::cloud::CloudProvider;
use tenon_core::convert::{ClusterObjects, is_active, is_daemon, pod_key};
use tenon_core::disruption::balanced::Move;
use tenon_core::disruption::candidates::{Candidate, do_not_disrupt_event};
use tenon_core::disruption::{DisruptionPlan, Method, disrupt};
use tenon_core::orchestration::budget_events;
use tenon_core::orchestration::command::{self, Notice, On, Replacement, Step, stale_marks};

/// Karpenter's disruption polling period.
pub const ROUND_EVERY: Duration = Duration::from_secs(10);

/// A disruption under way; its replacements are NodeClaim objects until created.
pub type Command = command::Command<NodeClaim>;

/// The `DisruptionReason` condition's reason for a method (Karpenter's names).
fn reason_name(m: Method) -> &'static str {
    m.reason().map_or("Expired", |r| r.as_str())
}

/// Karpenter's `karpenter_voluntary_disruption_eligible_nodes`: the candidates each graceful
/// method could act on (a node blocked by a pod counts for none).
fn eligible_by_reason(candidates: &[tenon_core::disruption::candidates::Candidate]) -> [(&'static str, usize); 3] {
    use tenon_core::model::ConsolidationPolicy;
    let open = || candidates.iter().filter(|c| c.blocked.is_none());
    [
        ("empty", open().filter(|c| c.consolidatable && c.empty).count()),
        (
            "underutilized",
            open().filter(|c| c.consolidatable && c.consolidation_policy != ConsolidationPolicy::WhenEmpty).count(),
        ),
        ("drifted", open().filter(|c| c.drifted.is_some()).count()),
    ]
}

/// The Node named `name`, as an Event's object, if it is in the cache.
fn involved_node(objects: &ClusterObjects, name: &str) -> Option<super::events::Involved> {
    let n = objects.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(name))?;
    Some(super::events::Involved::cluster_scoped("v1", "Node", &n.metadata))
}

fn consolidation_type(m: Method) -> &'static str {
    match m {
        Method::MultiNodeConsolidation => "multi",
        Method::SingleNodeConsolidation => "single",
        Method::Emptiness => "empty",
        _ => "",
    }
}

/// Karpenter's `ConsolidationApproved` message (Go's `%.2f` spells infinity `+Inf`).
fn approved_message(s: &tenon_core::disruption::balanced::Score) -> String {
    let two = |v: f64| if v.is_infinite() { "+Inf".to_string() } else { format!("{v:.2}") };
    format!(
        "score {} >= threshold {} (k: {}, savings {:.1}%, disruption {:.1}%)",
        two(s.value()),
        two(s.threshold()),
        s.k,
        s.savings_fraction * 100.0,
        s.disruption_fraction * 100.0
    )
}

/// Karpenter's queue failure for a command given up: once it has acted, the replacements
/// that never became ready, with its decision, reason and consolidation type. Karpenter
/// v1.14 writes the decision in `consolidation_type` too; Tenon the consolidation type.
fn queue_failure(cmd: &Command, states: &[Replacement]) -> Option<([(&'static str, String); 3], u64)> {
    cmd.executed?;
    let failed = states.iter().filter(|s| **s != Replacement::Initialized).count() as u64;
    let decision = if cmd.replacements.is_empty() { "delete" } else { "replace" };
    Some((
        [
            ("decision", decision.to_string()),
            ("reason", reason_name(cmd.method).to_lowercase()),
            ("consolidation_type", consolidation_type(cmd.method).to_string()),
        ],
        failed,
    ))
}

impl Controller {
    /// True when a disruption round or a command step is due now (it needs instance types).
    pub(super) fn disruption_due(&self) -> bool {
        !self.commands.is_empty() || self.round_due()
    }

    fn round_due(&self) -> bool {
        self.last_round.is_none_or(|t| t.elapsed() >= ROUND_EVERY)
    }

    /// Each command under way takes its next step, on its own; then, when one is due and
    /// `round` allows it, a round decides over the cluster as it is, the commands' candidates
    /// held (never taken twice, counted against their budgets).
    pub(super) async fn disruption(&mut self, objects: &ClusterObjects, catalogs: &Catalogs, round: bool) {
        let commands = std::mem::take(&mut self.commands);
        let held = command::held(&commands);
        for cmd in commands {
            if let Some(cmd) = self.advance(cmd, objects, catalogs, &held).await {
                self.commands.push(cmd);
            }
        }
        if !round || !self.round_due() {
            return;
        }
        self.last_round = Some(Instant::now());
        let (mut snap, _) = snapshot(objects, catalogs);
        snap.spot_to_spot = self.spot_to_spot;
        command::hold(&mut snap, &command::held(&self.commands));
        self.restamp_nodepool_hashes(objects, &snap).await;
        // Cloud drift is looked up fresh each round (the condition is only its record).
        let cloud = self.cloud_drift(objects).await;
        for n in &mut snap.nodes {
            if let Some(c) = n.claim.as_mut() {
                c.drift = cloud.get(&c.nodeclaim).cloned();
            }
        }
        let policies = self.policies.active.clone();
        let evaluating = Instant::now();
        let decided = super::off_loop("disruption", move || {
            let decision = disrupt(&snap, &*policies);
            (snap, decision)
        });
        let Some((snap, decision)) = decided.await else { return };
        // One evaluation covers every method: labelled with the one that decided, or the
        // last one tried (single-node consolidation) when none did.
        let method = decision.plan.as_ref().map_or(Method::SingleNodeConsolidation, |p| p.method);
        let reason = reason_name(method).to_lowercase();
        self.metrics.observe(
            mc::VOLUNTARY_DISRUPTION_EVALUATION,
            &[("reason", &reason), ("consolidation_type", consolidation_type(method))],
            evaluating.elapsed().as_secs_f64(),
        );
        self.claim_conditions(objects, &snap, &decision.candidates).await;
        tracing::debug!(
            evaluated = decision.evaluated,
            blocked = decision.blocked.len(),
            rejected = decision.rejected.len(),
            plan = decision.plan.as_ref().map(|p| p.method.as_str()),
            allowed = ?decision.allowed.iter().map(|((p, r), a)| format!("{p}/{}={} ({})", r.as_str(), a.allowed, a.why)).collect::<Vec<_>>(),
            "disruption round"
        );
        for (reason, n) in eligible_by_reason(&decision.candidates) {
            self.metrics.set(mc::VOLUNTARY_DISRUPTION_ELIGIBLE_NODES, &[("reason", reason)], n as f64);
        }
        self.publish_moves(objects, &snap, &decision.moves).await;
        let consuming = tenon_core::disruption::consuming_budgets(&snap);
        for ((pool, reason), allowance) in &decision.allowed {
            let labels = [("nodepool", pool.as_str()), ("reason", reason.as_str())];
            self.metrics.set(mc::NODEPOOLS_ALLOWED_DISRUPTIONS, &labels, allowance.allowed as f64);
            let n = consuming.get(pool).copied().unwrap_or_default();
            self.metrics.set(mc::NODEPOOLS_NODES_CONSUMING_BUDGETS, &labels, n as f64);
        }
        let now = self.now_ms();
        for (pool, message) in self.budget_events.due(&decision.budget_blocked, now) {
            if let Some(np) = objects.nodepools.iter().find(|np| np.metadata.name.as_deref() == Some(pool.as_str())) {
                let obj = super::events::Involved::cluster_scoped("karpenter.sh/v1", "NodePool", &np.metadata);
                self.recorder.publish(&self.client, &obj, "Normal", budget_events::REASON, &message).await;
            }
        }
        let said = decision.blocked.iter().map(|b| (b.node, "DisruptionBlocked", &b.reason));
        for (i, reason, message) in
            said.chain(decision.unconsolidatable.iter().map(|(i, w)| (*i, "Unconsolidatable", w)))
        {
            let node = &snap.nodes[i];
            let nodeclaim = node.claim.as_ref().map(|c| c.nodeclaim.as_str());
            self.publish_on_node_and_claim(objects, &node.name, nodeclaim, reason, message).await;
        }
        // Karpenter's word on each duration-valued or invalid do-not-disrupt of a pod on a
        // node it could disrupt.
        let managed: BTreeSet<&str> =
            snap.nodes.iter().filter(|n| n.claim.is_some()).map(|n| n.name.as_str()).collect();
        for p in snap.pods.iter().filter(|p| p.node_name.as_deref().is_some_and(|n| managed.contains(n))) {
            if let Some((type_, reason, message)) = do_not_disrupt_event(p, snap.now) {
                self.recorder.publish(&self.client, &super::events::Involved::pod(p), type_, reason, &message).await;
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
        if let Some(plan) = decision.plan {
            let cmd = self.decided(&snap, objects, plan, now);
            self.publish(&cmd, objects, cmd.candidate_notices()).await;
            self.commands.push(cmd);
        }
    }

    /// Karpenter's balanced evaluator's series for each move scored, and its
    /// `ConsolidationApproved` Event for each Balanced approval: on the candidate's Node and
    /// NodeClaim for a single-node move, on the NodePool for a multi-node one.
    async fn publish_moves(&self, objects: &ClusterObjects, snap: &ClusterSnapshot, moves: &[Move]) {
        for m in moves {
            let decision = if m.approved { "approved" } else { "rejected" };
            let labels = [("decision", decision), ("nodepool", m.nodepool.as_str()), ("policy", m.policy)];
            self.metrics.add(mc::CONSOLIDATION_MOVES, &labels, 1);
            let Some(score) = m.score else { continue };
            let scored = if score.approved() { "approved" } else { "rejected" };
            let labels = [("decision", scored), ("nodepool", m.nodepool.as_str()), ("policy", m.policy)];
            self.metrics.observe(mc::CONSOLIDATION_SCORE, &labels, score.value());
            if !(m.approved && score.approved()) {
                continue;
            }
            let message = approved_message(&score);
            match m.node {
                Some(i) => {
                    let node = &snap.nodes[i];
                    let nodeclaim = node.claim.as_ref().map(|c| c.nodeclaim.as_str());
                    self.publish_on_node_and_claim(objects, &node.name, nodeclaim, "ConsolidationApproved", &message)
                        .await;
                }
                None => {
                    let np =
                        objects.nodepools.iter().find(|np| np.metadata.name.as_deref() == Some(m.nodepool.as_str()));
                    if let Some(np) = np {
                        let obj = super::events::Involved::cluster_scoped("karpenter.sh/v1", "NodePool", &np.metadata);
                        self.recorder.publish(&self.client, &obj, "Normal", "ConsolidationApproved", &message).await;
                    }
                }
            }
        }
    }

    /// A command for `plan`: its candidates and the NodeClaim objects of its replacements.
    /// Nothing is marked until it has been re-checked.
    fn decided(&self, snap: &ClusterSnapshot, objects: &ClusterObjects, plan: DisruptionPlan, now: i64) -> Command {
        let candidates: Vec<(String, String)> = plan
            .candidates
            .iter()
            .filter_map(|&c| Some((snap.nodes[c].claim.as_ref()?.nodeclaim.clone(), snap.nodes[c].name.clone())))
            .collect();
        let planned =
            plan.replacements.iter().filter_map(|r| Self::planned_nodeclaim(r, snap, objects)).collect::<Vec<_>>();
        tracing::info!(method = plan.method.as_str(), candidates = ?candidates, replacements = planned.len(), savings_per_hour = plan.savings_per_hour, reason = %plan.reason, "disruption decided");
        let types = plan.replacement_types(snap);
        Command::new(plan.method, plan.reason, plan.savings_per_hour, candidates, planned, now).expecting(types)
    }

    /// One step of the command under way; `None` when it is over.
    /// `held`: the candidates of every command under way (this one's taken out here).
    async fn advance(
        &mut self,
        cmd: Command,
        objects: &ClusterObjects,
        catalogs: &Catalogs,
        held: &BTreeSet<String>,
    ) -> Option<Command> {
        let states: Vec<Replacement> = cmd.replacements.iter().map(|r| self.replacement(r, objects)).collect();
        let step = cmd.step(self.now_ms(), &states);
        if cmd.executed.is_some() && matches!(step, Step::Wait | Step::Delete) {
            self.publish(&cmd, objects, cmd.waiting_notices(&states)).await;
        }
        match step {
            Step::Wait => Some(cmd),
            Step::Validate => {
                let (mut snap, _) = snapshot(objects, catalogs);
                snap.spot_to_spot = self.spot_to_spot;
                let others = held.iter().filter(|nc| !cmd.has_candidate(nc)).cloned().collect();
                command::hold(&mut snap, &others);
                let policies = self.policies.active.clone();
                let (method, candidates, types) = (cmd.method, cmd.candidates.clone(), cmd.replacement_types.clone());
                let why = super::off_loop("disruption validation", move || {
                    command::validate(&snap, &*policies, method, &candidates, &types)
                })
                .await
                .unwrap_or_else(|| Some("the validation panicked".into()));
                if let Some(why) = why {
                    let labels = [("consolidation_type", consolidation_type(cmd.method))];
                    self.metrics.add(mc::VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS, &labels, 1);
                    self.abandon(&cmd, objects, &why, false).await;
                    return None;
                }
                self.execute(cmd, objects).await
            }
            Step::Delete => {
                self.finish(&cmd, objects).await;
                None
            }
            Step::Abandon { why, marked } => {
                if let Some((labels, failed)) = queue_failure(&cmd, &states) {
                    let labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (*k, v.as_str())).collect();
                    self.metrics.add(mc::VOLUNTARY_DISRUPTION_QUEUE_FAILURES, &labels, failed);
                }
                self.abandon(&cmd, objects, &why, marked).await;
                None
            }
        }
    }

    /// Where a replacement stands in the cache.
    fn replacement(&self, name: &str, objects: &ClusterObjects) -> Replacement {
        match find(objects, name) {
            // Created moments ago: the cache has not shown it yet.
            None if self.unobserved.contains_key(name) => Replacement::NotSeen,
            None => Replacement::Gone,
            Some(nc) if nc.metadata.deletion_timestamp.is_some() => Replacement::Deleting,
            Some(nc) if conditions::has_condition(nc, condition::INITIALIZED) => Replacement::Initialized,
            Some(_) => Replacement::Launching,
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

    /// Marks the candidates and creates the replacements of a command that still holds.
    async fn execute(&mut self, mut cmd: Command, objects: &ClusterObjects) -> Option<Command> {
        for (nc, node) in &cmd.candidates {
            if let Err(e) = self.mark(nc, node, cmd.method, &cmd.reason).await {
                tracing::warn!(nodeclaim = %nc, error = %e, "could not mark a disruption candidate; abandoning");
                self.abandon(&cmd, objects, &format!("marking {nc} failed: {e}"), true).await;
                return None;
            }
        }
        let decision = if cmd.planned.is_empty() { "delete" } else { "replace" };
        let reason = reason_name(cmd.method).to_lowercase();
        let labels =
            [("decision", decision), ("reason", &reason), ("consolidation_type", consolidation_type(cmd.method))];
        self.metrics.add(mc::VOLUNTARY_DISRUPTION_DECISIONS, &labels, 1);
        let pools: BTreeSet<String> =
            cmd.candidates.iter().filter_map(|(nc, _)| find(objects, nc)).map(super::pool_of).collect();
        for pool in &pools {
            let [decision, reason, kind] = labels;
            self.metrics.add(
                mc::VOLUNTARY_DISRUPTION_DECISIONS_BY_NODEPOOL,
                &[("nodepool", pool), decision, reason, kind],
                1,
            );
        }
        let mut created = Vec::new();
        for r in std::mem::take(&mut cmd.planned) {
            match self.create_nodeclaim(&r, "disruption").await {
                Some(name) => created.push(name),
                None => {
                    cmd.execute(created, self.now_ms());
                    self.abandon(&cmd, objects, "a replacement could not be created", true).await;
                    return None;
                }
            }
        }
        cmd.execute(created, self.now_ms());
        Some(cmd)
    }

    /// Publishes a command's Events on the objects they name (those still in the cache).
    async fn publish(&self, cmd: &Command, objects: &ClusterObjects, notices: Vec<Notice>) {
        for n in notices {
            let nodeclaim = |name: &str| find(objects, name).map(involved_nodeclaim);
            let obj = match n.on {
                On::CandidateNodeClaim(i) => cmd.candidates.get(i).and_then(|(nc, _)| nodeclaim(nc)),
                On::Replacement(i) => cmd.replacements.get(i).and_then(|nc| nodeclaim(nc)),
                On::CandidateNode(i) => cmd.candidates.get(i).and_then(|(_, node)| involved_node(objects, node)),
            };
            if let Some(obj) = obj {
                self.recorder.publish(&self.client, &obj, "Normal", n.reason, &n.message).await;
            }
        }
    }

    /// A Normal Event on a Node and its NodeClaim (those still in the cache), as Karpenter
    /// says most things about a candidate.
    async fn publish_on_node_and_claim(
        &self,
        objects: &ClusterObjects,
        node: &str,
        nodeclaim: Option<&str>,
        reason: &str,
        message: &str,
    ) {
        let claim = nodeclaim.and_then(|nc| find(objects, nc)).map(involved_nodeclaim);
        for obj in involved_node(objects, node).into_iter().chain(claim) {
            self.recorder.publish(&self.client, &obj, "Normal", reason, message).await;
        }
    }

    /// Deletes the candidates of a command whose replacements are Initialized.
    async fn finish(&mut self, cmd: &Command, objects: &ClusterObjects) {
        if let Some(at) = cmd.executed {
            let waited = (self.now_ms() - at) as f64 / 1000.0;
            self.metrics.set(mc::DISRUPTION_EXECUTION, &[], waited);
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
    async fn delete_nodeclaim(&self, name: &str, method: Method, reason: &str, objects: &ClusterObjects) -> bool {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {
                tracing::info!(nodeclaim = %name, method = method.as_str(), %reason, "disrupting: NodeClaim deleted");
                if let Some(nc) = objects.nodeclaims.iter().find(|c| c.metadata.name.as_deref() == Some(name)) {
                    // Drift goes through the same queue: only consolidation names a policy.
                    let pool =
                        objects.nodepools.iter().find(|p| p.metadata.name.as_deref() == Some(&super::pool_of(nc)));
                    let policy = match (consolidation_type(method), pool) {
                        ("", _) | (_, None) => "",
                        (_, Some(p)) => p.spec.disruption.consolidation_policy.as_str(),
                    };
                    self.metrics.nodeclaim_disrupted(nc, &reason_name(method).to_lowercase(), policy);
                }
                true
            }
            Err(kube::Error::Api(e)) if e.code == 404 => false,
            Err(e) => {
                tracing::warn!(nodeclaim = %name, error = %e, "could not delete a disrupted NodeClaim");
                false
            }
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
        let conds = conditions::with_condition(&obj, condition::DISRUPTION_REASON, true, reason_name(method), reason);
        claims
            .patch_status(nc, &PatchParams::default(), &Patch::Merge(&json!({"status": {"conditions": conds}})))
            .await?;
        Ok(())
    }

    /// Gives a command up: when `marked`, its candidates are untainted and their
    /// `DisruptionReason` removed. The replacements stay (they are ordinary capacity;
    /// consolidation removes them if unneeded).
    async fn abandon(&self, cmd: &Command, objects: &ClusterObjects, why: &str, marked: bool) {
        tracing::info!(method = cmd.method.as_str(), candidates = ?cmd.candidates, %why, "disruption abandoned");
        if marked {
            for (nc, node) in &cmd.candidates {
                self.unmark(nc, node, objects).await;
            }
        }
        self.publish(cmd, objects, cmd.abandoned_notices(why)).await;
    }

    /// Removes the disruption taint and `DisruptionReason` from a candidate.
    async fn unmark(&self, nc: &str, node: &str, objects: &ClusterObjects) {
        let nodes: Api<Node> = Api::all(self.client.clone());
        if let Ok(n) = nodes.get(node).await {
            let taints = termination::taints_without(&n, wk::TAINT_DISRUPTED);
            if let Err(e) =
                nodes.patch(node, &PatchParams::default(), &Patch::Merge(&json!({"spec": {"taints": taints}}))).await
            {
                tracing::warn!(node = %node, error = %e, "could not remove the disruption taint");
            }
        }
        if let Some(obj) = find(objects, nc).filter(|o| conditions::has_condition(o, condition::DISRUPTION_REASON)) {
            let conds = conditions::without_condition(obj, condition::DISRUPTION_REASON);
            let claims: Api<NodeClaim> = Api::all(self.client.clone());
            let _ = claims
                .patch_status(nc, &PatchParams::default(), &Patch::Merge(&json!({"status": {"conditions": conds}})))
                .await;
        }
    }

    /// Karpenter's sweep, at start-up and every [`ROUND_EVERY`] whether or not a round can
    /// run: the disruption mark on a node no command owns (and that is not being deleted) is
    /// removed, so a restart mid-command leaves no node unschedulable.
    pub(super) async fn sweep_marks(&mut self, objects: &ClusterObjects) {
        if self.last_sweep.is_some_and(|t| t.elapsed() < ROUND_EVERY) {
            return;
        }
        self.last_sweep = Some(Instant::now());
        let mut marked = Vec::new();
        for nc in objects.nodeclaims.iter().filter(|nc| nc.metadata.deletion_timestamp.is_none()) {
            let Some(node) = super::node_of(nc, &objects.nodes) else { continue };
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
                let patch = json!({"status": {"lastPodEventTime": conditions::now_time()}});
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
        // One hash per NodeClass per round, not one per NodeClaim.
        let hashes: BTreeMap<&str, String> =
            classes.iter().map(|n| (n.metadata.name.as_deref().unwrap_or_default(), n.static_hash())).collect();
        let by_id: BTreeMap<&str, &tenon_core::cloud::Instance> =
            instances.iter().map(|i| (i.provider_id.as_str(), i)).collect();
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        for nc in &objects.nodeclaims {
            let Some(pid) = nc.status.as_ref().and_then(|s| s.provider_id.as_deref()) else { continue };
            let Some(instance) = by_id.get(pid) else { continue };
            let class = nc.spec.node_class_ref.as_ref().map(|r| r.name.as_str());
            let Some(nodeclass) = classes.iter().find(|n| n.metadata.name.as_deref() == class) else { continue };
            let name = nc.metadata.name.clone().unwrap_or_default();
            let now = hashes.get(class.unwrap_or_default()).map(String::as_str).unwrap_or_default();
            match nodeclass_hash(nc, nodeclass, now) {
                NodeClassHash::Drifted(reason) => {
                    out.insert(name, reason);
                    continue;
                }
                NodeClassHash::Restamp(hash) => {
                    // Another hash version (an older Tenon, or Karpenter's): re-stamped with
                    // today's hash, not drifted, as Karpenter's hash controller does.
                    let meta = json!({"metadata": {"annotations": {
                        wk::ANNOTATION_NODECLASS_HASH: hash,
                        wk::ANNOTATION_NODECLASS_HASH_VERSION: EC2NODECLASS_HASH_VERSION,
                    }}});
                    if let Err(e) = claims.patch(&name, &PatchParams::default(), &Patch::Merge(&meta)).await {
                        tracing::warn!(nodeclaim = %name, error = %e, "could not re-stamp the EC2NodeClass hash");
                    }
                }
                NodeClassHash::Same => {}
            }
            let labels = nc.metadata.labels.clone().unwrap_or_default();
            if let Some(reason) = self.provider.is_drifted(instance, &labels, nodeclass) {
                out.insert(nc.metadata.name.clone().unwrap_or_default(), reason);
            }
        }
        out
    }
}

impl Controller {
    /// Karpenter's NodePool hash migration: a NodeClaim stamped under another hash version
    /// (an older Tenon, or Karpenter's own) gets today's, so template changes from now on
    /// drift it; one already Drifted keeps its old hash and stays drifted.
    async fn restamp_nodepool_hashes(&self, objects: &ClusterObjects, snap: &ClusterSnapshot) {
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        for nc in objects.nodeclaims.iter().filter(|nc| nc.metadata.deletion_timestamp.is_none()) {
            let pool = super::pool_of(nc);
            let Some(tpl) = snap.nodepools.iter().find(|t| t.name == pool) else { continue };
            let Some(patch) = nodepool_stamp(nc, &tpl.hash) else { continue };
            let name = nc.metadata.name.as_deref().unwrap_or_default();
            if let Err(e) = claims.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                tracing::warn!(nodeclaim = %name, error = %e, "could not re-stamp the NodePool hash");
            }
        }
    }
}

/// The annotations that bring a NodeClaim's NodePool hash to today's version, if it is
/// stamped under another; `hash` is its NodePool's hash now.
fn nodepool_stamp(nc: &NodeClaim, hash: &str) -> Option<serde_json::Value> {
    let annotations = nc.metadata.annotations.as_ref();
    let version = annotations.and_then(|a| a.get(wk::ANNOTATION_NODEPOOL_HASH_VERSION));
    if version.map(String::as_str) == Some(NODEPOOL_HASH_VERSION) {
        return None;
    }
    let drifted = conditions::has_condition(nc, condition::DRIFTED);
    let mut stamp = serde_json::Map::new();
    stamp.insert(wk::ANNOTATION_NODEPOOL_HASH_VERSION.into(), NODEPOOL_HASH_VERSION.into());
    if !drifted {
        stamp.insert(wk::ANNOTATION_NODEPOOL_HASH.into(), hash.into());
    }
    Some(json!({"metadata": {"annotations": stamp}}))
}

/// How a NodeClaim's stamped EC2NodeClass hash compares with its NodeClass' now.
#[derive(Debug, PartialEq)]
enum NodeClassHash {
    Same,
    /// The static fields changed since launch (Karpenter's `NodeClassDrift`).
    Drifted(String),
    /// Stamped under another hash version, or not at all: re-stamp with this hash.
    Restamp(String),
}

/// `now` is `nodeclass`'s static hash.
fn nodeclass_hash(nc: &NodeClaim, nodeclass: &EC2NodeClass, now: &str) -> NodeClassHash {
    let annotations = nc.metadata.annotations.as_ref();
    let get = |k: &str| annotations.and_then(|a| a.get(k)).map(String::as_str);
    if get(wk::ANNOTATION_NODECLASS_HASH_VERSION) != Some(EC2NODECLASS_HASH_VERSION) {
        return NodeClassHash::Restamp(now.to_string());
    }
    match get(wk::ANNOTATION_NODECLASS_HASH) {
        Some(h) if h == now => NodeClassHash::Same,
        _ => NodeClassHash::Drifted(format!(
            "NodeClassDrift: EC2NodeClass {} changed since launch (userData, tags, kubelet, block devices, …)",
            nodeclass.metadata.name.as_deref().unwrap_or_default()
        )),
    }
}

fn find<'a>(objects: &'a ClusterObjects, name: &str) -> Option<&'a NodeClaim> {
    objects.nodeclaims.iter().find(|nc| nc.metadata.name.as_deref() == Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodeclass(user_data: &str) -> EC2NodeClass {
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: lab}}\nspec:\n  role: r\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n  userData: {user_data:?}\n"
        ))
        .unwrap()
    }

    fn claim(annotations: &[(&str, &str)]) -> NodeClaim {
        let mut nc: NodeClaim = serde_yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: a}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: lab}\n  requirements: []\n",
        )
        .unwrap();
        nc.metadata.annotations = Some(annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        nc
    }

    #[test]
    fn the_approval_message_is_karpenters() {
        use tenon_core::disruption::balanced::{K, Totals, score_move};
        let s = score_move(7.26, 4.0, Totals { cost: 58.08, disruption: 90.0 }, K);
        assert_eq!(approved_message(&s), "score 2.81 >= threshold 0.50 (k: 2, savings 12.5%, disruption 4.4%)");
        let free = score_move(1.0, 0.0, Totals { cost: 10.0, disruption: 10.0 }, K);
        assert!(approved_message(&free).starts_with("score +Inf >= threshold 0.50"));
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

    /// karpenter:pkg/controllers/nodepool/hash/suite_test.go:163
    #[test]
    fn nodeclaims_stamped_under_another_nodepool_hash_version_are_restamped_unless_drifted() {
        let hash_of = |p: &serde_json::Value, k: &str| p["metadata"]["annotations"][k].as_str().map(String::from);
        let karpenters = claim(&[(wk::ANNOTATION_NODEPOOL_HASH, "123"), (wk::ANNOTATION_NODEPOOL_HASH_VERSION, "v3")]);
        let p = nodepool_stamp(&karpenters, "456").expect("re-stamped");
        assert_eq!(hash_of(&p, wk::ANNOTATION_NODEPOOL_HASH).as_deref(), Some("456"));
        assert_eq!(hash_of(&p, wk::ANNOTATION_NODEPOOL_HASH_VERSION).as_deref(), Some(NODEPOOL_HASH_VERSION));
        assert!(nodepool_stamp(&claim(&[]), "456").is_some(), "no version at all");
        let ours = claim(&[
            (wk::ANNOTATION_NODEPOOL_HASH, "123"),
            (wk::ANNOTATION_NODEPOOL_HASH_VERSION, NODEPOOL_HASH_VERSION),
        ]);
        assert_eq!(nodepool_stamp(&ours, "456"), None, "today's version: its hash is compared, not replaced");
        // Already drifted: only the version moves, so it stays drifted.
        let mut drifted = karpenters.clone();
        drifted.status = Some(serde_json::from_value(serde_json::json!({"conditions": [{"type": "Drifted", "status": "True", "reason": "NodePoolDrifted", "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}]})).unwrap());
        let p = nodepool_stamp(&drifted, "456").expect("version bumped");
        assert_eq!(hash_of(&p, wk::ANNOTATION_NODEPOOL_HASH), None);
        assert_eq!(hash_of(&p, wk::ANNOTATION_NODEPOOL_HASH_VERSION).as_deref(), Some(NODEPOOL_HASH_VERSION));
    }

    #[test]
    fn a_nodeclaim_drifts_when_its_nodeclass_static_fields_change_and_is_restamped_across_versions() {
        let launched = nodeclass("echo one");
        let hash = launched.static_hash();
        let stamped = claim(&[
            (wk::ANNOTATION_NODECLASS_HASH, &hash),
            (wk::ANNOTATION_NODECLASS_HASH_VERSION, EC2NODECLASS_HASH_VERSION),
        ]);
        assert_eq!(nodeclass_hash(&stamped, &launched, &hash), NodeClassHash::Same);
        let edited = nodeclass("echo two");
        assert!(
            matches!(nodeclass_hash(&stamped, &edited, &edited.static_hash()), NodeClassHash::Drifted(r) if r.starts_with("NodeClassDrift"))
        );
        // Karpenter's own stamp (another version) or none: re-stamped, never drifted.
        let karpenters =
            claim(&[(wk::ANNOTATION_NODECLASS_HASH, "123"), (wk::ANNOTATION_NODECLASS_HASH_VERSION, "v4")]);
        assert_eq!(
            nodeclass_hash(&karpenters, &edited, &edited.static_hash()),
            NodeClassHash::Restamp(edited.static_hash())
        );
        assert_eq!(
            nodeclass_hash(&claim(&[]), &edited, &edited.static_hash()),
            NodeClassHash::Restamp(edited.static_hash())
        );
    }
}
