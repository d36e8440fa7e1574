//! Karpenter's NodePool `DisruptionBlocked` Event: a NodePool with nodes whose budget allows
//! no disruption for a reason says so, at most once a minute per reason (Karpenter's dedupe
//! window for it: budgets can change every minute).

use crate::model::DisruptionReason;
use std::collections::BTreeMap;

pub const DEDUPE_MS: i64 = 60_000;
pub const REASON: &str = "DisruptionBlocked";

pub fn message(reason: DisruptionReason) -> String {
    format!("No allowed disruptions for disruption reason {} due to blocking budget", reason.as_str())
}

#[derive(Clone, Debug, Default)]
pub struct BudgetEvents {
    last: BTreeMap<(String, DisruptionReason), i64>,
}

impl BudgetEvents {
    /// Of the (NodePool, reason) pairs a round found blocked, those to publish now, with the
    /// message.
    pub fn due(&mut self, blocked: &[(String, DisruptionReason)], now: i64) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (pool, reason) in blocked {
            let key = (pool.clone(), *reason);
            if self.last.get(&key).is_some_and(|&t| now - t < DEDUPE_MS) {
                continue;
            }
            self.last.insert(key, now);
            out.push((pool.clone(), message(*reason)));
        }
        self.last.retain(|_, t| now - *t < DEDUPE_MS);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_reason_is_told_once_a_minute() {
        let mut e = BudgetEvents::default();
        let blocked = [("a".to_string(), DisruptionReason::Empty), ("a".to_string(), DisruptionReason::Drifted)];
        let first = e.due(&blocked, 0);
        assert_eq!(first.len(), 2);
        assert_eq!(first[0].1, "No allowed disruptions for disruption reason Empty due to blocking budget");
        assert!(e.due(&blocked, 59_999).is_empty());
        assert_eq!(e.due(&blocked[..1], 60_000).len(), 1);
    }
}
