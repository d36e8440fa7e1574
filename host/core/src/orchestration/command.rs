//! A disruption command's life, as Karpenter's disruption controller and orchestration queue
//! run it: decided → validated ([`validate`], [`VALIDATION_MS`] later for a consolidation: the candidates
//! still disruptable as decided, a consolidation simulated afresh) → executed (candidates marked `karpenter.sh/disrupted`, replacements
//! created) → every replacement Initialized → candidates deleted (termination drains them).
//! A command that stops holding is abandoned: a replacement gone, being deleted or not
//! Initialized within [`REPLACEMENT_TIMEOUT_MS`]; its marked candidates are unmarked and
//! its replacements stay as ordinary capacity. Commands run side by side, each on its own
//! steps; a round or a validation sees the other commands' candidates [`hold`]-held.
//!
//! `R` is what a shell needs to create one replacement (the controller keeps NodeClaim
//! objects, the simulator its planned NodeClaims).

use crate::disruption::Method;
use crate::model::ClusterSnapshot;
use std::collections::BTreeSet;

pub use super::validation::{still_invalid, validate, validate_keeping};

/// Karpenter's consolidation TTL: a decision is re-checked this long after it was made.
pub const VALIDATION_MS: i64 = 15_000;
/// How long after its decision a command of `method` is validated: Karpenter re-checks a
/// consolidation (emptiness, multi-node, single-node) after [`VALIDATION_MS`]; a drift or
/// expiration goes ahead at once.
pub fn validation_delay(method: Method) -> i64 {
    if method.consolidation_type().is_empty() { 0 } else { VALIDATION_MS }
}

/// Replacements not Initialized this long after execution: the command is abandoned.
pub const REPLACEMENT_TIMEOUT_MS: i64 = 600_000;

#[derive(Clone, Debug)]
pub struct Command<R> {
    pub method: Method,
    pub reason: String,
    pub savings_per_hour: f64,
    /// (NodeClaim, Node) of each candidate.
    pub candidates: Vec<(String, String)>,
    /// What to create for each replacement, until executed.
    pub planned: Vec<R>,
    /// The replacements' NodeClaim names, once created.
    pub replacements: Vec<String>,
    /// Instance types each planned replacement may be (validation's yardstick).
    pub replacement_types: Vec<Vec<String>>,
    pub decided: i64,
    /// When it was executed (candidates marked, replacements created).
    pub executed: Option<i64>,
}

/// Where a replacement NodeClaim stands, as a shell sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Replacement {
    /// Created, not in the shell's view yet (a watch lags): wait.
    NotSeen,
    Gone,
    Deleting,
    Launching,
    Initialized,
}

/// An Event a shell publishes for a command: on which object, Karpenter's reason, the message.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub on: On,
    pub reason: &'static str,
    pub message: String,
}

/// The object of a [`Notice`], by index into the command's `candidates` or `replacements`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum On {
    CandidateNode(usize),
    CandidateNodeClaim(usize),
    Replacement(usize),
}

/// What the shell does next.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    Wait,
    /// Re-check the candidates ([`validate_keeping`]), then [`Command::execute`] with those
    /// kept, or abandon.
    Validate,
    /// Delete the candidates: the command is done.
    Delete,
    /// Give the command up; unmark the candidates when `marked`.
    Abandon {
        why: String,
        marked: bool,
    },
}

impl<R> Command<R> {
    pub fn new(
        method: Method,
        reason: String,
        savings_per_hour: f64,
        candidates: Vec<(String, String)>,
        planned: Vec<R>,
        now: i64,
    ) -> Self {
        Command {
            method,
            reason,
            savings_per_hour,
            candidates,
            planned,
            replacements: Vec::new(),
            replacement_types: Vec::new(),
            decided: now,
            executed: None,
        }
    }

    /// The instance types of each planned replacement, as decided
    /// ([`DisruptionPlan::replacement_types`](crate::disruption::DisruptionPlan::replacement_types)):
    /// a validation that finds other ones abandons the command.
    pub fn expecting(mut self, types: Vec<Vec<String>>) -> Self {
        self.replacement_types = types;
        self
    }

    /// The candidates are marked and the replacements `created` (their names) at `now`.
    pub fn execute(&mut self, created: Vec<String>, now: i64) {
        self.replacements = created;
        self.executed = Some(now);
    }

    /// What to do at `now`, given each replacement's state (in `replacements` order).
    pub fn step(&self, now: i64, replacements: &[Replacement]) -> Step {
        let Some(executed) = self.executed else {
            return if now - self.decided >= validation_delay(self.method) { Step::Validate } else { Step::Wait };
        };
        for (name, state) in self.replacements.iter().zip(replacements) {
            let why = match state {
                Replacement::Gone => format!("replacement {name} is gone"),
                Replacement::Deleting => format!("replacement {name} is being deleted"),
                _ => continue,
            };
            return Step::Abandon { why, marked: true };
        }
        if replacements.iter().all(|s| *s == Replacement::Initialized) {
            return Step::Delete;
        }
        if now - executed >= REPLACEMENT_TIMEOUT_MS {
            let why = format!("replacements were not Initialized within {}m", REPLACEMENT_TIMEOUT_MS / 60_000);
            return Step::Abandon { why, marked: true };
        }
        Step::Wait
    }

    fn is_consolidation(&self) -> bool {
        matches!(self.method, Method::SingleNodeConsolidation | Method::MultiNodeConsolidation)
    }

    /// The command as Karpenter's Events spell it for candidate `i`: the whole command for one
    /// candidate, that candidate in context for several.
    fn as_seen_by(&self, i: usize) -> String {
        let decision = if self.planned_or_created() == 0 { "delete" } else { "replace" };
        let node = self.candidates.get(i).map_or("", |(_, n)| n.as_str());
        if self.candidates.len() > 1 {
            return format!("{decision}: [{node}] (part of {}-node consolidation)", self.candidates.len());
        }
        match self.planned_or_created() {
            0 => format!("{decision}: [{node}]"),
            1 => format!("{decision}: [{node}] -> [1 replacement]"),
            n => format!("{decision}: [{node}] -> [{n} replacements]"),
        }
    }

    fn planned_or_created(&self) -> usize {
        self.planned.len().max(self.replacements.len())
    }

    /// Karpenter's `ConsolidationCandidate` Events, when a consolidation is decided (none
    /// for other methods).
    pub fn candidate_notices(&self) -> Vec<Notice> {
        if !self.is_consolidation() {
            return Vec::new();
        }
        let message =
            |i| format!("Consolidation candidate: {} (savings: ${:.2})", self.as_seen_by(i), self.savings_per_hour);
        self.on_each_candidate("ConsolidationCandidate", message)
    }

    /// The Events of a command given up because of `why`: Karpenter's `ConsolidationRejected`
    /// for a consolidation, `DisruptionBlocked` otherwise.
    pub fn abandoned_notices(&self, why: &str) -> Vec<Notice> {
        if self.is_consolidation() {
            let message = |i| {
                format!(
                    "Consolidation rejected: {}, reason: {why} (savings: ${:.2})",
                    self.as_seen_by(i),
                    self.savings_per_hour
                )
            };
            return self.on_each_candidate("ConsolidationRejected", message);
        }
        self.on_each_candidate("DisruptionBlocked", |_| format!("{} abandoned: {why}", self.method.as_str()))
    }

    /// Karpenter's Events while the replacements come up (every pass, deduplicated by the
    /// recorder): `DisruptionLaunching` on each replacement in the shell's view and
    /// `DisruptionWaitingReadiness` on each not yet Initialized.
    pub fn waiting_notices(&self, states: &[Replacement]) -> Vec<Notice> {
        let mut out = Vec::new();
        for (i, state) in states.iter().enumerate().take(self.replacements.len()) {
            if matches!(state, Replacement::Launching | Replacement::Initialized) {
                let message = format!("Launching NodeClaim: {}", self.method.reason_name());
                out.push(Notice { on: On::Replacement(i), reason: "DisruptionLaunching", message });
            }
            if *state == Replacement::Launching {
                let message = "Waiting on readiness to continue disruption".to_string();
                out.push(Notice { on: On::Replacement(i), reason: "DisruptionWaitingReadiness", message });
            }
        }
        out
    }

    /// Karpenter's `DisruptionTerminating` Events on candidate `i`'s Node and NodeClaim, once
    /// its NodeClaim is deleted.
    pub fn terminating_notices(&self, i: usize) -> [Notice; 2] {
        let reason = self.method.reason_name();
        [
            Notice {
                on: On::CandidateNode(i),
                reason: "DisruptionTerminating",
                message: format!("Disrupting Node: {reason}"),
            },
            Notice {
                on: On::CandidateNodeClaim(i),
                reason: "DisruptionTerminating",
                message: format!("Disrupting NodeClaim: {reason}"),
            },
        ]
    }

    fn on_each_candidate(&self, reason: &'static str, message: impl Fn(usize) -> String) -> Vec<Notice> {
        (0..self.candidates.len())
            .flat_map(|i| {
                let m = message(i);
                [
                    Notice { on: On::CandidateNode(i), reason, message: m.clone() },
                    Notice { on: On::CandidateNodeClaim(i), reason, message: m },
                ]
            })
            .collect()
    }

    /// Whether `nodeclaim` is one of this command's candidates.
    pub fn has_candidate(&self, nodeclaim: &str) -> bool {
        self.candidates.iter().any(|(nc, _)| nc == nodeclaim)
    }
}

/// Nodes carrying the disruption mark that no command owns (a command abandoned by a
/// restart or failover): Karpenter unmarks them every round. `marked` lists (NodeClaim,
/// Node) of every marked node that is not being deleted.
pub fn stale_marks<'a, R>(
    marked: impl IntoIterator<Item = (&'a str, &'a str)>,
    commands: &[Command<R>],
) -> Vec<(&'a str, &'a str)> {
    marked.into_iter().filter(|(nc, _)| !commands.iter().any(|c| c.has_candidate(nc))).collect()
}

/// The candidates of the commands under way are being disrupted, as a round or a
/// validation sees them, whether or not they are marked yet: never candidates twice, counted
/// against their NodePool's budget, their pods in need of a place.
/// `held` lists their NodeClaims ([`held`]).
pub fn hold(snap: &mut ClusterSnapshot, held: &BTreeSet<String>) {
    for claim in snap.nodes.iter_mut().filter_map(|n| n.claim.as_mut()) {
        if held.contains(&claim.nodeclaim) {
            claim.disrupting = true;
        }
    }
}

/// The candidates (NodeClaims) of `commands`, for [`hold`]; a command being validated takes
/// its own out.
pub fn held<R>(commands: &[Command<R>]) -> BTreeSet<String> {
    commands.iter().flat_map(|c| c.candidates.iter().map(|(nc, _)| nc.clone())).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Replacement::*;

    fn cmd(replacements: usize) -> Command<()> {
        Command::new(
            Method::SingleNodeConsolidation,
            "cheaper".into(),
            0.1,
            vec![("a".into(), "node-a".into())],
            vec![(); replacements],
            1_000,
        )
    }

    fn messages(notices: &[Notice]) -> Vec<(On, &str, &str)> {
        notices.iter().map(|n| (n.on, n.reason, n.message.as_str())).collect()
    }

    /// karpenter:pkg/controllers/disruption/drift_test.go:1052 (Karpenter's drift has no
    /// validation wait: its command is queued in the round that decides it)
    #[test]
    fn a_consolidation_waits_to_be_validated_and_a_drift_does_not() {
        let consolidation = cmd(0);
        let decided = consolidation.decided;
        assert_eq!(consolidation.step(decided, &[]), Step::Wait);
        assert_eq!(consolidation.step(decided + VALIDATION_MS, &[]), Step::Validate);
        let mut drift = cmd(0);
        drift.method = Method::Drift;
        assert_eq!(drift.step(decided, &[]), Step::Validate);
    }

    #[test]
    fn a_consolidation_names_each_candidate_on_its_node_and_nodeclaim() {
        let delete = cmd(0);
        let m = "Consolidation candidate: delete: [node-a] (savings: $0.10)";
        assert_eq!(
            messages(&delete.candidate_notices()),
            [
                (On::CandidateNode(0), "ConsolidationCandidate", m),
                (On::CandidateNodeClaim(0), "ConsolidationCandidate", m)
            ]
        );
        let replace = cmd(1).candidate_notices();
        assert_eq!(
            replace[0].message,
            "Consolidation candidate: replace: [node-a] -> [1 replacement] (savings: $0.10)"
        );
        let mut multi = cmd(1);
        multi.method = Method::MultiNodeConsolidation;
        multi.candidates.push(("b".into(), "node-b".into()));
        let notices = multi.candidate_notices();
        assert_eq!(notices.len(), 4);
        assert_eq!(
            notices[2].message,
            "Consolidation candidate: replace: [node-b] (part of 2-node consolidation) (savings: $0.10)"
        );
        let mut drift = cmd(1);
        drift.method = Method::Drift;
        assert!(drift.candidate_notices().is_empty(), "only consolidation names candidates");
    }

    #[test]
    fn an_abandoned_consolidation_is_rejected_and_other_methods_blocked() {
        let rejected = cmd(0).abandoned_notices("a pod would not schedule");
        assert_eq!(
            (rejected[1].on, rejected[1].reason, rejected[1].message.as_str()),
            (
                On::CandidateNodeClaim(0),
                "ConsolidationRejected",
                "Consolidation rejected: delete: [node-a], reason: a pod would not schedule (savings: $0.10)"
            )
        );
        let mut drift = cmd(0);
        drift.method = Method::Drift;
        let blocked = drift.abandoned_notices("replacement r is gone");
        assert_eq!(
            messages(&blocked)[0],
            (On::CandidateNode(0), "DisruptionBlocked", "drift abandoned: replacement r is gone")
        );
    }

    #[test]
    fn a_command_is_validated_fifteen_seconds_after_the_decision() {
        let c = cmd(1);
        assert_eq!(c.step(1_000, &[]), Step::Wait);
        assert_eq!(c.step(15_999, &[]), Step::Wait);
        assert_eq!(c.step(16_000, &[]), Step::Validate);
    }

    #[test]
    fn candidates_are_deleted_once_every_replacement_is_initialized() {
        let mut c = cmd(2);
        c.execute(vec!["r1".into(), "r2".into()], 16_000);
        assert_eq!(c.step(17_000, &[NotSeen, Launching]), Step::Wait);
        assert_eq!(c.step(20_000, &[Initialized, Launching]), Step::Wait);
        assert_eq!(c.step(25_000, &[Initialized, Initialized]), Step::Delete);
    }

    #[test]
    fn without_replacements_the_candidates_go_at_once() {
        let mut c = cmd(0);
        c.execute(vec![], 16_000);
        assert_eq!(c.step(16_000, &[]), Step::Delete);
    }

    #[test]
    fn a_replacement_gone_deleted_or_late_abandons_the_command() {
        let mut c = cmd(1);
        c.execute(vec!["r1".into()], 16_000);
        for s in [Gone, Deleting] {
            assert!(matches!(c.step(17_000, &[s]), Step::Abandon { marked: true, .. }), "{s:?}");
        }
        assert_eq!(c.step(16_000 + REPLACEMENT_TIMEOUT_MS - 1, &[Launching]), Step::Wait);
        assert!(matches!(c.step(16_000 + REPLACEMENT_TIMEOUT_MS, &[Launching]), Step::Abandon { .. }));
    }

    #[test]
    fn marks_no_command_owns_are_stale() {
        let c = cmd(1);
        let marked = [("a", "node-a"), ("b", "node-b")];
        assert_eq!(stale_marks(marked, std::slice::from_ref(&c)), [("b", "node-b")]);
        assert_eq!(stale_marks(marked, &[] as &[Command<()>]).len(), 2);
    }
}
