//! Karpenter's `Balanced` consolidation policy: a consolidation is approved when the share
//! of its NodePool's cost it saves is at least `1/K` of the share of the NodePool's
//! disruption it causes. Emptiness and drift are not scored.

use super::DisruptionPlan;
use super::candidates::reschedule_cost;
use crate::model::{ClusterSnapshot, ConsolidationPolicy};
use std::collections::BTreeMap;

/// Karpenter's `BalancedK`: a move passes at a score of 1/2.
pub const K: u32 = 2;

/// A NodePool's whole cost (USD/hour) and disruption cost (its nodes' rescheduling costs).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Totals {
    pub cost: f64,
    pub disruption: f64,
}

/// What a move saves and disrupts, as shares of its NodePool's totals.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Score {
    pub savings_fraction: f64,
    pub disruption_fraction: f64,
    pub k: u32,
}

impl Score {
    /// Savings share over disruption share: 0 when nothing is saved, infinite when nothing is
    /// disrupted.
    pub fn value(&self) -> f64 {
        if self.savings_fraction <= 0.0 {
            0.0
        } else if self.disruption_fraction == 0.0 {
            f64::INFINITY
        } else {
            self.savings_fraction / self.disruption_fraction
        }
    }

    pub fn threshold(&self) -> f64 {
        1.0 / f64::from(self.k)
    }

    pub fn approved(&self) -> bool {
        self.value() >= self.threshold()
    }
}

/// Karpenter's `ScoreMove`; a NodePool with no cost or no disruption scores nothing.
pub fn score_move(savings: f64, disruption_cost: f64, totals: Totals, k: u32) -> Score {
    if totals.cost <= 0.0 || totals.disruption <= 0.0 {
        return Score { savings_fraction: 0.0, disruption_fraction: 0.0, k };
    }
    Score { savings_fraction: savings / totals.cost, disruption_fraction: disruption_cost / totals.disruption, k }
}

/// Each Balanced NodePool's totals (by index): the price of its managed nodes, and their
/// rescheduling costs.
pub fn totals(snap: &ClusterSnapshot) -> BTreeMap<usize, Totals> {
    let mut out: BTreeMap<usize, Totals> = BTreeMap::new();
    for (i, pool) in snap.nodepools.iter().enumerate() {
        if pool.disruption.consolidation_policy != ConsolidationPolicy::Balanced {
            continue;
        }
        let t = out.entry(i).or_default();
        for (n, node) in snap.nodes.iter().enumerate() {
            if node.nodepool.as_deref() != Some(pool.name.as_str()) {
                continue;
            }
            if let Some(c) = &node.claim {
                t.cost += c.price;
                t.disruption += reschedule_cost(snap, n);
            }
        }
    }
    out
}

/// One consolidation move as Karpenter's balanced evaluator counts it
/// (`karpenter_consolidation_moves_total` and `_score`, and its `ConsolidationApproved` Event).
#[derive(Clone, Debug, PartialEq)]
pub struct Move {
    pub nodepool: String,
    /// The NodePool's consolidation policy, as the API spells it.
    pub policy: &'static str,
    pub approved: bool,
    /// The NodePool's score, when it is Balanced.
    pub score: Option<Score>,
    /// The candidate of a single-node move (the Event goes on its Node and NodeClaim); a
    /// multi-node move's Event goes on the NodePool.
    pub node: Option<usize>,
}

/// The API's name for a consolidation policy.
pub fn policy_name(p: ConsolidationPolicy) -> &'static str {
    match p {
        ConsolidationPolicy::WhenEmpty => "WhenEmpty",
        ConsolidationPolicy::WhenEmptyOrUnderutilized => "WhenEmptyOrUnderutilized",
        ConsolidationPolicy::Balanced => "Balanced",
    }
}

/// A single-node move: approved unless its NodePool is Balanced and scores it too low.
pub fn single_move(plan: &DisruptionPlan, snap: &ClusterSnapshot, totals: &BTreeMap<usize, Totals>) -> Option<Move> {
    let &node = plan.candidates.first()?;
    let pool = pool_of(snap, node)?;
    let score = scores(plan, snap, totals).remove(&pool);
    let t = &snap.nodepools[pool];
    Some(Move {
        nodepool: t.name.clone(),
        policy: policy_name(t.disruption.consolidation_policy),
        approved: score.is_none_or(|s| s.approved()),
        score,
        node: Some(node),
    })
}

/// A multi-node move, one per NodePool it touches: the move's `approved` is the plan's, each
/// Balanced NodePool's score its own.
pub fn multi_moves(
    plan: &DisruptionPlan,
    snap: &ClusterSnapshot,
    totals: &BTreeMap<usize, Totals>,
    approved: bool,
) -> Vec<Move> {
    let mut s = scores(plan, snap, totals);
    let pools: std::collections::BTreeSet<usize> = plan.candidates.iter().filter_map(|&n| pool_of(snap, n)).collect();
    pools
        .into_iter()
        .map(|pool| {
            let t = &snap.nodepools[pool];
            Move {
                nodepool: t.name.clone(),
                policy: policy_name(t.disruption.consolidation_policy),
                approved,
                score: s.remove(&pool),
                node: None,
            }
        })
        .collect()
}

fn pool_of(snap: &ClusterSnapshot, n: usize) -> Option<usize> {
    snap.nodes[n].nodepool.as_deref().and_then(|p| snap.nodepools.iter().position(|t| t.name == p))
}

/// Whether every Balanced NodePool the plan touches approves it (others always do).
pub fn approves(plan: &DisruptionPlan, snap: &ClusterSnapshot, totals: &BTreeMap<usize, Totals>) -> bool {
    scores(plan, snap, totals).values().all(Score::approved)
}

/// Each Balanced NodePool's score of the plan. With several NodePools, each is credited the
/// savings in proportion to its candidates' cost.
pub fn scores(
    plan: &DisruptionPlan,
    snap: &ClusterSnapshot,
    totals: &BTreeMap<usize, Totals>,
) -> BTreeMap<usize, Score> {
    let mut by_pool: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &n in &plan.candidates {
        if let Some(p) = pool_of(snap, n) {
            by_pool.entry(p).or_default().push(n);
        }
    }
    let price = |n: usize| snap.nodes[n].claim.as_ref().map_or(0.0, |c| c.price);
    let source: f64 = plan.candidates.iter().map(|&n| price(n)).sum();
    let several = by_pool.len() > 1;
    by_pool
        .iter()
        .filter_map(|(pool, nodes)| {
            let t = totals.get(pool)?;
            let pool_cost: f64 = nodes.iter().map(|&n| price(n)).sum();
            let savings = if several && source > 0.0 {
                plan.savings_per_hour * pool_cost / source
            } else {
                plan.savings_per_hour
            };
            let disruption: f64 = nodes.iter().map(|&n| reschedule_cost(snap, n)).sum();
            Some((*pool, score_move(savings, disruption, *t, K)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn totals(cost: f64, disruption: f64) -> Totals {
        Totals { cost, disruption }
    }

    #[test]
    fn the_score_is_the_savings_share_over_the_disruption_share() {
        let s = score_move(1.0, 2.0, totals(10.0, 10.0), K);
        assert!((s.value() - 0.5).abs() < 1e-12);
        assert!(s.approved(), "exactly at 1/k");
        assert!(!score_move(0.9, 2.0, totals(10.0, 10.0), K).approved());
        assert_eq!(score_move(1.0, 0.0, totals(10.0, 10.0), K).value(), f64::INFINITY);
        assert!(!score_move(0.0, 0.0, totals(10.0, 10.0), K).approved());
        assert!(!score_move(1.0, 1.0, totals(0.0, 10.0), K).approved());
    }
}
