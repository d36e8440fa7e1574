//! Counts of the work the core does: scheduling passes, removal simulations, placements
//! tried, policy calls. Deterministic for a given input, unlike time, so a test can bound
//! them and catch a regression that multiplies the work on any machine, fast or slow.
//!
//! Kept per thread: a decision runs on one thread, and tests running side by side in one
//! process do not see each other's counts. Counting never changes a decision.

use serde::Serialize;
use std::cell::Cell;

/// What the core did, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Work {
    /// Provisioning passes over every pending pod (`schedule`).
    pub scheduling_passes: u64,
    /// Disruption rounds (`disrupt`).
    pub disruption_rounds: u64,
    /// Removal simulations: "where would these nodes' pods go" (each fork of a round's state).
    pub removal_simulations: u64,
    /// Times a pod was tried against the places it could go, relaxations included.
    pub placements_tried: u64,
    /// Placements that succeeded.
    pub pods_placed: u64,
    /// Calls to an offering scorer.
    pub scorer_calls: u64,
    /// Calls to a consolidation reviewer.
    pub consolidator_calls: u64,
    /// Calls to a disruption-budget rule.
    pub budget_calls: u64,
}

impl Work {
    /// Nothing done yet.
    pub const ZERO: Work = Work {
        scheduling_passes: 0,
        disruption_rounds: 0,
        removal_simulations: 0,
        placements_tried: 0,
        pods_placed: 0,
        scorer_calls: 0,
        consolidator_calls: 0,
        budget_calls: 0,
    };

    /// The work done since `earlier` (a value `total` returned before).
    pub fn since(self, earlier: Work) -> Work {
        Work {
            scheduling_passes: self.scheduling_passes - earlier.scheduling_passes,
            disruption_rounds: self.disruption_rounds - earlier.disruption_rounds,
            removal_simulations: self.removal_simulations - earlier.removal_simulations,
            placements_tried: self.placements_tried - earlier.placements_tried,
            pods_placed: self.pods_placed - earlier.pods_placed,
            scorer_calls: self.scorer_calls - earlier.scorer_calls,
            consolidator_calls: self.consolidator_calls - earlier.consolidator_calls,
            budget_calls: self.budget_calls - earlier.budget_calls,
        }
    }

    /// Every counter with its name, for reports and bounds.
    pub fn named(&self) -> [(&'static str, u64); 8] {
        [
            ("schedulingPasses", self.scheduling_passes),
            ("disruptionRounds", self.disruption_rounds),
            ("removalSimulations", self.removal_simulations),
            ("placementsTried", self.placements_tried),
            ("podsPlaced", self.pods_placed),
            ("scorerCalls", self.scorer_calls),
            ("consolidatorCalls", self.consolidator_calls),
            ("budgetCalls", self.budget_calls),
        ]
    }
}

thread_local! {
    static WORK: Cell<Work> = const { Cell::new(Work::ZERO) };
}

/// Everything this thread's core has done so far.
pub fn total() -> Work {
    WORK.with(Cell::get)
}

/// Adds to this thread's counts.
pub(crate) fn count(add: impl FnOnce(&mut Work)) {
    WORK.with(|w| {
        let mut v = w.get();
        add(&mut v);
        w.set(v);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_per_thread_and_since_subtracts() {
        let before = total();
        count(|w| w.pods_placed += 2);
        count(|w| w.scorer_calls += 1);
        let done = total().since(before);
        assert_eq!((done.pods_placed, done.scorer_calls, done.scheduling_passes), (2, 1, 0));
        let other = std::thread::spawn(|| total().pods_placed).join().unwrap();
        assert_eq!(other, 0, "another thread starts from nothing");
    }
}
