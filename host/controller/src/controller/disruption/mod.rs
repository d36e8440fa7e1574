//! Voluntary disruption, Karpenter's way. Every [`ROUND_EVERY`] the core decides over a
//! snapshot, through each NodePool's consolidation and budget policies; the decision becomes
//! a `tenon_core::orchestration::command` whose steps this module carries out: re-checked
//! 15 s after the decision, then its candidates tainted `karpenter.sh/disrupted:NoSchedule`
//! (with the `DisruptionReason` condition) and its replacements created, then, once they are
//! Initialized, the candidates deleted — termination drains them. A command that stops
//! holding is abandoned and its candidates untainted; a mark no command owns (a restart
//! mid-command) is removed every round and at start-up (`sweep_marks`).

mod drift;
mod queue;

use super::conditions;
use super::context::Context;
use super::error::{Error, Failures};
use super::metrics::catalog as mc;
use super::provisioning::planned_nodeclaim;
use super::runner::{self, Reconciler};
use super::{Catalogs, involved_nodeclaim, snapshot};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_api::NodeClaim;
use tenon_core::ClusterSnapshot;
use tenon_core::convert::ClusterObjects;
use tenon_core::disruption::balanced::Move;
use tenon_core::disruption::candidates::{Candidate, do_not_disrupt_event};
use tenon_core::disruption::claim_conditions;
use tenon_core::disruption::{DisruptionPlan, Method, disrupt_after};
use tenon_core::orchestration::budget_events::{self, BudgetEvents};
use tenon_core::orchestration::command;

/// Karpenter's disruption polling period.
pub const ROUND_EVERY: Duration = Duration::from_secs(10);

/// A disruption under way; its replacements are NodeClaim objects until created.
pub type Command = command::Command<NodeClaim>;

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

/// Karpenter's `disruption` controller and its queue: rounds, and the commands under way.
pub struct Disruption {
    ctx: Arc<Context>,
    /// The disruptions under way, each stepping on its own.
    commands: Vec<Command>,
    /// When the last round ran, on the orchestration clock (ms).
    last_round: Option<i64>,
    /// The last sweep of disruption marks no command owns (orchestration clock, ms).
    last_sweep: Option<i64>,
    budget_events: BudgetEvents,
    /// The method whose command just failed validation: the next round, run at once, goes
    /// on from the method after it (`disrupt_after`).
    resume_after: Option<Method>,
    /// What failed in this reconcile so far (each failure logged where it happened).
    failures: Failures,
}

impl Reconciler for Disruption {
    const NAME: &'static str = "disruption";

    async fn reconcile(&mut self) -> Result<(), Error> {
        let objects = self.ctx.objects();
        self.sweep_marks(&objects).await;
        // A round waits for every NodeClaim created to be seen, and for a provisioning
        // decision under way (it would not see that decision's NodeClaims). Nothing else
        // holds a round off: a plan that would count on a node not Initialized yet is
        // refused on its own (the core's rule), so one stuck node, a held drain or pod
        // churn stops nothing elsewhere.
        let synced = self.ctx.synced(&objects);
        let round = self.round_due() && synced;
        // Instance types only when a command steps or a round runs (shaping them is costly).
        if round || !self.commands.is_empty() {
            let catalogs = self.ctx.catalogs().await;
            self.disruption(&objects, &catalogs, round, synced).await;
        }
        std::mem::take(&mut self.failures).finish()
    }

    /// Commands under way step every [`runner::BUSY`]; otherwise the next round or sweep.
    fn next_pass(&self) -> Duration {
        if !self.commands.is_empty() || self.resume_after.is_some() {
            return runner::BUSY;
        }
        // The earlier of the two (never run: due now).
        let last = self.last_round.min(self.last_sweep).unwrap_or(i64::MIN / 2);
        runner::due_in(Some(self.ctx.wait_until_ms(last + ROUND_EVERY.as_millis() as i64)))
    }
}

impl Disruption {
    pub fn new(ctx: Arc<Context>) -> Disruption {
        Disruption {
            ctx,
            commands: Vec::new(),
            last_round: None,
            last_sweep: None,
            budget_events: BudgetEvents::default(),
            resume_after: None,
            failures: Failures::default(),
        }
    }

    fn round_due(&self) -> bool {
        self.a_round_since(self.last_round)
    }

    /// Whether [`ROUND_EVERY`] has passed on the orchestration clock since `last` (or never).
    fn a_round_since(&self, last: Option<i64>) -> bool {
        last.is_none_or(|t| self.ctx.now_ms() - t >= ROUND_EVERY.as_millis() as i64)
    }

    /// Each command under way takes its next step, on its own; then, when `round` (one is
    /// due and the cluster synced, or a validation just failed), a round decides over the
    /// cluster as it is, the commands' candidates held (never taken twice, counted against
    /// their budgets).
    async fn disruption(&mut self, objects: &ClusterObjects, catalogs: &Catalogs, round: bool, synced: bool) {
        let commands = std::mem::take(&mut self.commands);
        let held = command::held(&commands);
        for cmd in commands {
            if let Some(cmd) = self.advance(cmd, objects, catalogs, &held).await {
                self.commands.push(cmd);
            }
        }
        if !(round || synced && self.resume_after.is_some()) {
            return;
        }
        let failed = self.resume_after.take();
        self.last_round = Some(self.ctx.now_ms());
        let (mut snap, _) = snapshot(objects, catalogs, self.ctx.unix_now());
        snap.spot_to_spot = self.ctx.spot_to_spot;
        command::hold(&mut snap, &command::held(&self.commands));
        self.restamp_nodepool_hashes(objects, &snap).await;
        // Cloud drift is looked up fresh each round (the condition is only its record).
        let cloud = self.cloud_drift(objects).await;
        for n in &mut snap.nodes {
            if let Some(c) = n.claim.as_mut() {
                c.drift = cloud.get(&c.nodeclaim).cloned();
            }
        }
        let policies = self.ctx.active_policies();
        let evaluating = Instant::now();
        let decided = super::off_loop("disruption", move || {
            let decision = disrupt_after(&snap, &*policies, failed);
            (snap, decision)
        });
        let Some((snap, decision)) = decided.await else {
            return self.failures.push(Error::Invariant("the disruption decision panicked".into()));
        };
        // One evaluation covers every method: labelled with the one that decided, or the
        // last one tried (single-node consolidation) when none did.
        let method = decision.plan.as_ref().map_or(Method::SingleNodeConsolidation, |p| p.method);
        let reason = method.reason_name().to_lowercase();
        self.ctx.metrics.observe(
            mc::VOLUNTARY_DISRUPTION_EVALUATION,
            &[("reason", &reason), ("consolidation_type", method.consolidation_type())],
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
            self.ctx.metrics.set(mc::VOLUNTARY_DISRUPTION_ELIGIBLE_NODES, &[("reason", reason)], n as f64);
        }
        self.publish_moves(objects, &snap, &decision.moves).await;
        let consuming = tenon_core::disruption::consuming_budgets(&snap);
        for ((pool, reason), allowance) in &decision.allowed {
            let labels = [("nodepool", pool.as_str()), ("reason", reason.as_str())];
            self.ctx.metrics.set(mc::NODEPOOLS_ALLOWED_DISRUPTIONS, &labels, allowance.allowed as f64);
            let n = consuming.get(pool).copied().unwrap_or_default();
            self.ctx.metrics.set(mc::NODEPOOLS_NODES_CONSUMING_BUDGETS, &labels, n as f64);
        }
        let now = self.ctx.now_ms();
        for (pool, message) in self.budget_events.due(&decision.budget_blocked, now) {
            if let Some(np) = objects.nodepools.iter().find(|np| np.metadata.name.as_deref() == Some(pool.as_str())) {
                let obj = super::events::Involved::cluster_scoped("karpenter.sh/v1", "NodePool", &np.metadata);
                self.ctx.recorder.publish(&self.ctx.client, &obj, "Normal", budget_events::REASON, &message).await;
            }
        }
        let said = decision.blocked.iter().map(|b| (b.node, "DisruptionBlocked", b.event_message()));
        for (i, reason, message) in
            said.chain(decision.unconsolidatable.iter().map(|(i, w)| (*i, "Unconsolidatable", w.clone())))
        {
            let node = &snap.nodes[i];
            let nodeclaim = node.claim.as_ref().map(|c| c.nodeclaim.as_str());
            self.publish_on_node_and_claim(objects, &node.name, nodeclaim, reason, &message).await;
        }
        // Karpenter's word on each duration-valued or invalid do-not-disrupt of a pod on a
        // node it could disrupt.
        let managed: BTreeSet<&str> =
            snap.nodes.iter().filter(|n| n.claim.is_some()).map(|n| n.name.as_str()).collect();
        for p in snap.pods.iter().filter(|p| p.node_name.as_deref().is_some_and(|n| managed.contains(n))) {
            if let Some((type_, reason, message)) = do_not_disrupt_event(p, snap.now) {
                self.ctx
                    .recorder
                    .publish(&self.ctx.client, &super::events::Involved::pod(p), type_, reason, &message)
                    .await;
            }
        }
        for r in &decision.rejected {
            for &c in &r.candidates {
                if let Some(nc) = snap.nodes[c].claim.as_ref().and_then(|c| find(objects, &c.nodeclaim)) {
                    let message = format!("{} by policy {}: {}", r.method.as_str(), r.consolidator, r.reason);
                    self.ctx
                        .recorder
                        .publish(&self.ctx.client, &involved_nodeclaim(nc), "Normal", "ConsolidationRejected", &message)
                        .await;
                    self.ctx
                        .recorder
                        .publish(&self.ctx.client, &involved_nodeclaim(nc), "Normal", "Unconsolidatable", &message)
                        .await;
                }
            }
        }
        if let Some(plan) = decision.plan {
            let cmd = self.decided(&snap, objects, plan, now);
            self.publish(&cmd, objects, cmd.candidate_notices()).await;
            // Its first step now: a drift, validated at once, is carried out in the round
            // that decides it (Karpenter's queues it there); a consolidation waits.
            let held = command::held(&self.commands);
            if let Some(cmd) = self.advance(cmd, objects, catalogs, &held).await {
                self.commands.push(cmd);
            }
        }
    }

    /// Karpenter's balanced evaluator's series for each move scored, and its
    /// `ConsolidationApproved` Event for each Balanced approval: on the candidate's Node and
    /// NodeClaim for a single-node move, on the NodePool for a multi-node one.
    async fn publish_moves(&self, objects: &ClusterObjects, snap: &ClusterSnapshot, moves: &[Move]) {
        for m in moves {
            let decision = if m.approved { "approved" } else { "rejected" };
            let labels = [("decision", decision), ("nodepool", m.nodepool.as_str()), ("policy", m.policy)];
            self.ctx.metrics.add(mc::CONSOLIDATION_MOVES, &labels, 1);
            let Some(score) = m.score else { continue };
            let scored = if score.approved() { "approved" } else { "rejected" };
            let labels = [("decision", scored), ("nodepool", m.nodepool.as_str()), ("policy", m.policy)];
            self.ctx.metrics.observe(mc::CONSOLIDATION_SCORE, &labels, score.value());
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
                        self.ctx
                            .recorder
                            .publish(&self.ctx.client, &obj, "Normal", "ConsolidationApproved", &message)
                            .await;
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
        let planned = plan.replacements.iter().filter_map(|r| planned_nodeclaim(r, snap, objects)).collect::<Vec<_>>();
        tracing::info!(method = plan.method.as_str(), candidates = ?candidates, replacements = planned.len(), savings_per_hour = plan.savings_per_hour, reason = %plan.reason, "disruption decided");
        let types = plan.replacement_types(snap);
        Command::new(plan.method, plan.reason, plan.savings_per_hour, candidates, planned, now).expecting(types)
    }

    /// `Consolidatable` and `Drifted` as the round judged them (`claim_conditions`).
    async fn claim_conditions(&mut self, objects: &ClusterObjects, snap: &ClusterSnapshot, cands: &[Candidate]) {
        let api: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        let now = conditions::now_time();
        let nodeclaims = objects.nodeclaims.iter().map(|nc| &**nc);
        for (nc, conds) in claim_conditions::changed(nodeclaims, snap, cands, &now) {
            let name = nc.metadata.name.clone().unwrap_or_default();
            let patch = conditions::locked(&nc.metadata, json!({"status": {"conditions": conds}}));
            if let Err(e) = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                self.failures.push(Error::kube(format!("writing the disruption conditions of NodeClaim {name}"), e));
            }
        }
    }
}

fn find<'a>(objects: &'a ClusterObjects, name: &str) -> Option<&'a NodeClaim> {
    objects.nodeclaims.iter().find(|nc| nc.metadata.name.as_deref() == Some(name)).map(|nc| &**nc)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NodeClaim `a` of EC2NodeClass `lab` with `annotations`.
    pub(super) fn claim(annotations: &[(&str, &str)]) -> NodeClaim {
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
}
