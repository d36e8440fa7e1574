//! Karpenter's `Balanced` consolidation policy (`pkg/controllers/disruption/balanced_test.go`):
//! the move score and how a NodePool's `consolidationPolicy` is read.

use crate::support;

use support::karpenter::{Cluster, default_types};
use tenon_core::disruption::balanced::{K, Score, Totals, score_move};
use tenon_core::model::ConsolidationPolicy;

/// Karpenter's example pool: eight nodes at $4.84/day and two at $9.68/day, 80 pods; its
/// disruption cost is 10 (one per node) + 80 (one per pod).
const POOL: Totals = Totals { cost: 58.08, disruption: 90.0 };

fn expected(savings: f64, disruption: f64, t: Totals) -> f64 {
    (savings / t.cost) / (disruption / t.disruption)
}

fn near(a: f64, b: f64, within: f64) -> bool {
    (a - b).abs() <= within
}

fn scored(savings: f64, disruption: f64) -> Score {
    score_move(savings, disruption, POOL, K)
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:38
#[test]
fn an_oversized_node_replaced_by_a_small_one_is_approved() {
    let (savings, disruption) = (7.26, 4.0);
    let s = scored(savings, disruption);
    assert!(s.approved(), "score {}", s.value());
    assert!(near(s.value(), expected(savings, disruption, POOL), 0.02));
    assert!(near(s.savings_fraction, savings / POOL.cost, 0.001));
    assert!(near(s.disruption_fraction, disruption / POOL.disruption, 0.001));
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:53
#[test]
fn deleting_a_spare_node_is_approved() {
    let s = scored(4.84, 5.0);
    assert!(s.approved(), "score {}", s.value());
    assert!(near(s.value(), expected(4.84, 5.0, POOL), 0.02));
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:66
#[test]
fn a_marginal_move_is_rejected() {
    let s = scored(2.42, 9.0);
    assert!(!s.approved(), "score {}", s.value());
    assert!(near(s.value(), expected(2.42, 9.0, POOL), 0.01));
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:77
#[test]
fn a_move_saving_nothing_is_rejected_with_a_zero_score() {
    let s = scored(0.0, 11.0);
    assert!(!s.approved());
    assert_eq!(s.value(), 0.0);
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:88
#[test]
fn the_same_replace_passes_in_a_uniform_cheaper_pool() {
    let uniform = Totals { cost: 48.40, disruption: 90.0 };
    let s = score_move(2.42, 9.0, uniform, K);
    assert!(s.approved(), "score {}", s.value());
    assert!(near(s.value(), expected(2.42, 9.0, uniform), 0.01));
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:105
#[test]
fn low_disruption_nodes_pass_and_high_disruption_nodes_do_not() {
    let varied = Totals { cost: 58.08, disruption: 117.0 };
    let a = score_move(4.84, 5.0, varied, K);
    assert!(a.approved(), "node A score {}", a.value());
    assert!(near(a.value(), expected(4.84, 5.0, varied), 0.02));
    let b = score_move(4.84, 32.0, varied, K);
    assert!(!b.approved(), "node B score {}", b.value());
    assert!(near(b.value(), expected(4.84, 32.0, varied), 0.01));
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:131
#[test]
fn the_score_does_not_depend_on_the_pool_size() {
    let ten = scored(7.26, 4.0);
    let hundred = score_move(7.26, 4.0, Totals { cost: 580.80, disruption: 900.0 }, K);
    assert!(near(ten.value(), hundred.value(), 0.01));
    assert!(near(ten.value(), expected(7.26, 4.0, POOL), 0.02));
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:151
/// karpenter:pkg/controllers/disruption/balanced_test.go:168
#[test]
fn a_move_that_disrupts_nothing_and_saves_scores_infinity_and_passes() {
    let s = scored(4.84, 0.0);
    assert!(s.approved());
    assert!(s.value().is_infinite() && s.value() > 0.0);
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:157
#[test]
fn a_move_that_saves_and_disrupts_nothing_is_rejected() {
    assert!(!scored(0.0, 0.0).approved());
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:162
#[test]
fn a_pool_that_costs_nothing_approves_nothing() {
    assert!(!score_move(4.84, 5.0, Totals { cost: 0.0, disruption: 90.0 }, K).approved());
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:175
/// karpenter:pkg/controllers/disruption/balanced_test.go:180
/// karpenter:pkg/controllers/disruption/balanced_test.go:185
#[test]
fn the_threshold_is_one_over_k() {
    assert_eq!(K, 2, "Karpenter's BalancedK");
    assert!(!score_move(2.42, 9.0, POOL, 2).approved(), "k = 2");
    assert!(score_move(2.42, 9.0, POOL, 3).approved(), "k = 3");
    assert!(!score_move(2.42, 9.0, POOL, 1).approved(), "k = 1");
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:192
#[test]
fn proportionally_equal_moves_of_two_pools_score_alike() {
    let on_demand = score_move(4.84, 4.0, Totals { cost: 48.40, disruption: 90.0 }, K);
    let spot = score_move(1.45, 4.0, Totals { cost: 14.50, disruption: 90.0 }, K);
    assert!(near(on_demand.value(), spot.value(), 0.01));
    assert!(on_demand.approved() && spot.approved());
}

fn policy_of(policy: &str) -> ConsolidationPolicy {
    let mut c = Cluster::new(default_types());
    c.nodepool(
        "p",
        &format!(
            "  template:\n    spec:\n      requirements: []\n  disruption:\n    consolidationPolicy: {policy}\n    consolidateAfter: 0s\n"
        ),
    );
    c.snapshot().nodepools[0].disruption.consolidation_policy
}

/// karpenter:pkg/controllers/disruption/balanced_test.go:207
/// karpenter:pkg/controllers/disruption/balanced_test.go:211
/// karpenter:pkg/controllers/disruption/balanced_test.go:215
#[test]
fn only_the_balanced_policy_reads_as_balanced() {
    assert_eq!(policy_of("Balanced"), ConsolidationPolicy::Balanced);
    assert_eq!(policy_of("WhenEmptyOrUnderutilized"), ConsolidationPolicy::WhenEmptyOrUnderutilized);
    assert_eq!(policy_of("WhenEmpty"), ConsolidationPolicy::WhenEmpty);
}
