//! Voluntary disruption in the world, as the controller does it: a round on Karpenter's
//! cadence over the cluster as it is (the candidates of commands under way held), each
//! decision carried out on its own through `orchestration::command` (validated 15 s later,
//! then candidates marked and replacements launched, then the candidates drained once the
//! replacements are Initialized), and the drain of every node being deleted.

use super::World;
use super::cloud::Planned;
use super::objects::{DisruptionRecord, Phase};
use std::collections::BTreeSet;
use tenon_api::wellknown as wk;
use tenon_core::disruption::drain::{DrainAction, PdbAllowance, drain_order_with};
use tenon_core::disruption::{Method, disrupt_after};
use tenon_core::orchestration::budget_events;
use tenon_core::orchestration::command::{Command, Notice, On, Replacement, Step, held, hold, validate_keeping};
use tenon_core::orchestration::expiration::{self, Lifetime};

impl World<'_> {
    /// Expiration, as the controller's own pass: every NodeClaim past its own `expireAfter`
    /// is deleted (drained), whatever a disruption round is doing.
    pub(super) fn expiration(&mut self) {
        let lifetimes: Vec<Lifetime> = self
            .nodes
            .iter()
            .map(|n| Lifetime {
                nodeclaim: &n.name,
                created: n.created,
                expire_after: n.expire_after,
                deleting: n.draining.is_some(),
                managed: true,
            })
            .collect();
        let due: Vec<String> = expiration::due(&lifetimes, self.now).into_iter().map(String::from).collect();
        for name in due {
            let Some(i) = self.nodes.iter().position(|n| n.name == name) else { continue };
            let reason = expiration::reason(self.nodes[i].expire_after);
            self.event("Expired", format!("NodeClaim/{name}"), reason.clone());
            self.disruption_log.push(DisruptionRecord {
                method: Method::Expiration.as_str().into(),
                candidates: vec![name.clone()],
                replacements: vec![],
            });
            self.start_drain(i, &format!("Expired: {reason}"));
        }
    }

    pub(super) fn disruption(&mut self) {
        let commands = std::mem::take(&mut self.commands);
        let under_way = commands.len();
        let holding = held(&commands);
        for cmd in commands {
            self.advance(cmd, &holding);
        }
        if self.commands.len() != under_way {
            self.commands_changed += 1;
        }
        let failed = self.resume_after.take();
        if self.now < self.next_disruption && failed.is_none() {
            return;
        }
        self.next_disruption = self.now + self.settings.disruption_interval_seconds;
        // Same cluster, same commands under way, no timer passed, no budget that time alone
        // can change holding anything back: the decision would be the same as last time.
        let seen = (self.generation, self.commands_changed);
        if self.disruption_seen == seen
            && self.now < self.disruption_timer
            && !self.budget_varies_with_time
            && failed.is_none()
        {
            return;
        }
        self.disruption_seen = seen;
        self.disruption_timer = self.next_timer();
        let mut snap = self.lend_snapshot(false);
        hold(&mut snap, &held(&self.commands));
        let decision = disrupt_after(&snap, self.policies, failed);
        self.give_back(&mut snap);
        self.budget_varies_with_time = decision.budget_varies_with_time;
        let now = self.now_ms();
        for (pool, message) in self.budget_events.due(&decision.budget_blocked, now) {
            self.event(budget_events::REASON, format!("NodePool/{pool}"), message);
        }
        for b in &decision.blocked {
            let name = snap.nodes[b.node].name.clone();
            if self.blocked.get(&name) != Some(&b.reason) {
                self.blocked.insert(name.clone(), b.reason.clone());
                self.event("DisruptionBlocked", format!("Node/{name}"), b.event_message());
                self.event("DisruptionBlocked", format!("NodeClaim/{name}"), b.event_message());
            }
        }
        for (i, why) in &decision.unconsolidatable {
            let name = snap.nodes[*i].name.clone();
            if self.unconsolidatable.get(&name) != Some(why) {
                self.unconsolidatable.insert(name.clone(), why.clone());
                self.event("Unconsolidatable", format!("Node/{name}"), why.clone());
                self.event("Unconsolidatable", format!("NodeClaim/{name}"), why.clone());
            }
        }
        for r in &decision.rejected {
            let message = format!("{} by policy {}: {}", r.method.as_str(), r.consolidator, r.reason);
            for &c in &r.candidates {
                let object = format!("NodeClaim/{}", snap.nodes[c].name);
                self.event("ConsolidationRejected", object.clone(), message.clone());
                self.event("Unconsolidatable", object, message.clone());
            }
        }
        let Some(plan) = decision.plan else { return };
        let candidates: Vec<(String, String)> =
            plan.candidates.iter().map(|&c| (snap.nodes[c].name.clone(), snap.nodes[c].name.clone())).collect();
        let planned: Vec<Planned> = plan.replacements.iter().map(|r| Planned::new(r, &snap)).collect();
        let types = plan.replacement_types(&snap);
        let cmd = Command::new(plan.method, plan.reason, plan.savings_per_hour, candidates, planned, now);
        self.publish(&cmd, cmd.candidate_notices());
        // Its first step now, as in the controller: a drift goes ahead in this round.
        let under_way = held(&self.commands);
        self.advance(cmd.expecting(types), &under_way);
        self.commands_changed += 1;
    }

    /// One step of a command under way (kept among them unless it is over); `held`: the
    /// candidates of every command under way.
    fn advance(&mut self, cmd: Command<Planned>, held: &BTreeSet<String>) {
        let states: Vec<Replacement> = cmd
            .replacements
            .iter()
            .map(|r| match self.nodes.iter().find(|n| &n.name == r) {
                None => Replacement::Gone,
                Some(n) if n.draining.is_some() => Replacement::Deleting,
                Some(n) if n.phase == Phase::Ready => Replacement::Initialized,
                Some(_) => Replacement::Launching,
            })
            .collect();
        let step = cmd.step(self.now_ms(), &states);
        if cmd.executed.is_some() && matches!(step, Step::Wait | Step::Delete) {
            let fresh: Vec<Notice> = cmd
                .waiting_notices(&states)
                .into_iter()
                .filter(|n| self.waiting_noticed.insert((object(&cmd, n.on), n.reason)))
                .collect();
            self.publish(&cmd, fresh);
        }
        match step {
            Step::Wait => self.commands.push(cmd),
            Step::Validate => {
                let mut snap = self.lend_snapshot(false);
                let others = held.iter().filter(|nc| !cmd.has_candidate(nc)).cloned().collect();
                hold(&mut snap, &others);
                let kept = validate_keeping(&snap, self.policies, cmd.method, &cmd.candidates, &cmd.replacement_types);
                self.give_back(&mut snap);
                match kept {
                    Err(why) => {
                        self.abandon(&cmd, &why, false);
                        self.resume_after = Some(cmd.method);
                    }
                    Ok(kept) => {
                        let mut cmd = cmd;
                        cmd.candidates = kept;
                        self.execute(cmd)
                    }
                }
            }
            Step::Delete => self.finish(&cmd),
            Step::Abandon { why, marked } => self.abandon(&cmd, &why, marked),
        }
    }

    fn publish(&mut self, cmd: &Command<Planned>, notices: Vec<Notice>) {
        for n in notices {
            self.event(n.reason, object(cmd, n.on), n.message);
        }
    }

    /// Marks the candidates and launches the replacements of a command that still holds.
    fn execute(&mut self, mut cmd: Command<Planned>) {
        self.set_marked(&cmd, true);
        let mut created = Vec::new();
        for r in std::mem::take(&mut cmd.planned) {
            // A replacement that fails to launch is created and deleted at once: the
            // command sees it gone and is abandoned, as in the controller.
            created.push(self.create_nodeclaim(&r, "disruption"));
        }
        cmd.execute(created, self.now_ms());
        self.commands.push(cmd);
    }

    fn set_marked(&mut self, cmd: &Command<Planned>, marked: bool) {
        for n in self.nodes.iter_mut().filter(|n| cmd.has_candidate(&n.name) && n.draining.is_none()) {
            n.disrupted = marked;
        }
        self.generation += 1;
    }

    fn finish(&mut self, cmd: &Command<Planned>) {
        self.disruptions += cmd.candidates.len();
        for i in 0..cmd.candidates.len() {
            self.publish(cmd, cmd.terminating_notices(i).into());
        }
        self.disruption_log.push(DisruptionRecord {
            method: cmd.method.as_str().into(),
            candidates: cmd.candidates.iter().map(|(nc, _)| nc.clone()).collect(),
            replacements: cmd.replacements.clone(),
        });
        let why = if cmd.replacements.is_empty() {
            format!("{}: no replacement needed", cmd.method.as_str())
        } else {
            "replacements are Initialized".to_string()
        };
        for (nc, _) in &cmd.candidates {
            if let Some(i) = self.nodes.iter().position(|n| &n.name == nc && n.draining.is_none()) {
                self.start_drain(i, &why);
            }
        }
    }

    fn abandon(&mut self, cmd: &Command<Planned>, why: &str, marked: bool) {
        if marked {
            self.set_marked(cmd, false);
        }
        self.publish(cmd, cmd.abandoned_notices(why));
    }

    pub(super) fn start_drain(&mut self, i: usize, why: &str) {
        let tgp =
            self.nodepools.iter().find(|p| p.name == self.nodes[i].nodepool).and_then(|p| p.termination_grace_period);
        self.generation += 1;
        let n = &mut self.nodes[i];
        n.disrupted = true;
        n.draining = Some((self.now, tgp.map(|g| self.now + g)));
        let name = n.name.clone();
        self.event("Draining", format!("Node/{name}"), why.to_string());
    }

    /// Evicts pods of draining nodes in drain order; terminates nodes that are empty.
    pub(super) fn drain(&mut self) {
        if !self.nodes.iter().any(|n| n.draining.is_some())
            || (self.drain_seen == self.generation && self.now < self.drain_wake)
        {
            return;
        }
        let mut snap = self.lend_snapshot(false);
        let mut evict: BTreeSet<String> = BTreeSet::new();
        let mut done = Vec::new();
        let mut blocked = Vec::new();
        let mut wake = i64::MAX;
        // The Eviction API counts a PDB across nodes: one pass spends each budget once over
        // every node it drains, as the controller does.
        let mut allowance = PdbAllowance::default();
        for (i, n) in self.nodes.iter().enumerate().filter(|(_, n)| n.draining.is_some()) {
            if n.reclaim_at.is_some_and(|t| self.now >= t) {
                done.push(n.name.clone());
                continue;
            }
            let deadline = n.draining.and_then(|(_, d)| d);
            let plan = drain_order_with(&snap, &n.name, deadline, &mut allowance);
            for p in plan.steps.iter().map(|(p, _)| *p).chain(plan.later.iter().copied()) {
                let pod = &snap.pods[p];
                if let Some(d) = deadline {
                    wake = wake.min(d - pod.termination_grace_seconds);
                }
                if pod.annotations.contains_key(wk::ANNOTATION_DO_NOT_DISRUPT) {
                    wake = self.now + 1;
                }
            }
            if let Some(t) = n.reclaim_at {
                wake = wake.min(t);
            }
            if plan.finished() {
                done.push(n.name.clone());
                continue;
            }
            let message = plan.waiting_message();
            if message.is_some() && message != n.drain_blocked {
                blocked.push((i, message));
            }
            for (p, action) in plan.steps {
                if matches!(action, DrainAction::Evict | DrainAction::Delete { .. }) {
                    evict.insert(snap.pods[p].key());
                }
            }
        }
        self.give_back(&mut snap);
        for (i, message) in blocked {
            let name = self.nodes[i].name.clone();
            self.nodes[i].drain_blocked = message.clone();
            self.event("FailedDraining", format!("Node/{name}"), message.unwrap_or_default());
        }
        if !evict.is_empty() || !done.is_empty() {
            // Evicted pods of Deployments come back as new pending pods.
            self.generation += 1;
            self.reconcile = true;
        } else {
            self.drain_seen = self.generation;
            self.drain_wake = wake;
        }
        self.pods.retain(|p| !evict.contains(&p.pod.key()));
        for name in done {
            self.pods.retain(|p| p.pod.node_name.as_deref() != Some(name.as_str()));
            self.nodes.retain(|n| n.name != name);
            self.event("Terminated", format!("NodeClaim/{name}"), "instance terminated".into());
        }
    }

    /// The next time a node becomes consolidatable or expires (a round must run then: an
    /// expired node's replacement capacity changes what consolidation sees).
    fn next_timer(&self) -> i64 {
        self.nodes
            .iter()
            .filter_map(|n| {
                let pool = self.nodepools.iter().find(|p| p.name == n.nodepool)?;
                let consolidatable = pool.disruption.consolidate_after.map(|a| n.last_pod_event + a);
                let expires = n.expire_after.map(|e| n.created + e);
                [consolidatable, expires].into_iter().flatten().filter(|t| *t > self.now).min()
            })
            .min()
            .unwrap_or(i64::MAX)
    }
}

/// The object a command's Event names, as the simulator spells it (a node and its NodeClaim
/// share a name).
fn object(cmd: &Command<Planned>, on: On) -> String {
    match on {
        On::CandidateNode(i) => format!("Node/{}", cmd.candidates.get(i).map_or("", |(_, n)| n.as_str())),
        On::CandidateNodeClaim(i) => format!("NodeClaim/{}", cmd.candidates.get(i).map_or("", |(nc, _)| nc.as_str())),
        On::Replacement(i) => format!("NodeClaim/{}", cmd.replacements.get(i).map_or("", String::as_str)),
    }
}
