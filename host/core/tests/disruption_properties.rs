//! Invariants of disruption decisions over random clusters and sequences of rounds.

use crate::support;

use proptest::prelude::*;
use support::*;
use tenon_core::disruption::budgets::{BudgetContext, BudgetRule, KarpenterBudgets};
use tenon_core::disruption::candidates::pdb_problem;
use tenon_core::disruption::{DefaultPolicies, Method, disrupt};
use tenon_core::model::{Budget, BudgetNodes, ClusterSnapshot, DisruptionReason, PodDisruptionBudget};
use tenon_core::scheduler::{Needs, Simulator};
use tenon_core::scorer::PriceScorer;
use tenon_core::selector::LabelSelector;

const T0: i64 = 1_795_996_800;
const TYPES: [&str; 6] = ["gp.small", "gp.medium", "gp.large", "gp.xlarge", "arm.medium", "arm.large"];

#[derive(Clone, Debug)]
struct NodeSpec {
    ty: usize,
    zone: usize,
    pods: Vec<(i64, usize, bool)>,
    drifted: bool,
}

fn node_spec() -> impl Strategy<Value = NodeSpec> {
    (
        0..TYPES.len(),
        0usize..3,
        prop::collection::vec(
            (prop::sample::select(vec![100i64, 500, 1000, 2000]), 0usize..3, prop::bool::weighted(0.1)),
            0..5,
        ),
        prop::bool::weighted(0.2),
    )
        .prop_map(|(ty, zone, pods, drifted)| NodeSpec { ty, zone, pods, drifted })
}

fn budget() -> impl Strategy<Value = Budget> {
    prop_oneof![
        prop::sample::select(vec![0u32, 10, 34, 50, 100]).prop_map(BudgetNodes::Percent),
        (0u32..3).prop_map(BudgetNodes::Count),
    ]
    .prop_map(|nodes| Budget { nodes, reasons: None, window: None })
}

fn build(nodes: &[NodeSpec], budgets: Vec<Budget>, pdb_allowed: i32) -> ClusterSnapshot {
    let mut p = pool("general");
    p.disruption.budgets = budgets;
    p.disruption.consolidate_after = Some(0);
    let mut s = ClusterSnapshot { now: T0 + 3600, nodepools: vec![p], ..Default::default() };
    for (i, n) in nodes.iter().enumerate() {
        let name = format!("n{i}");
        let mut node = managed(&name, "general", TYPES[n.ty], ZONES[n.zone], T0);
        if n.drifted {
            node.claim.as_mut().unwrap().drift = Some("AMIDrift".into());
        }
        let mut used = 0;
        for (j, (cpu, app, dnd)) in n.pods.iter().enumerate() {
            if used + cpu > node.allocatable.cpu {
                continue;
            }
            used += cpu;
            let mut pod = bound(&format!("{name}-p{j}"), &name, *cpu, 0);
            pod.labels = labels(&[("app", &format!("app{app}"))]);
            if *dnd {
                pod.annotations.insert("karpenter.sh/do-not-disrupt".into(), "true".into());
            }
            s.pods.push(pod);
        }
        s.nodes.push(node);
    }
    s.pdbs.push(PodDisruptionBudget {
        namespace: "default".into(),
        name: "app0".into(),
        selector: LabelSelector::from_labels(&labels(&[("app", "app0")])),
        disruptions_allowed: pdb_allowed,
        unhealthy_always_allow: false,
        fully_blocking: false,
    });
    s
}

/// The most nodes the budgets let be disrupting at once.
fn budget_cap(s: &ClusterSnapshot, reason: DisruptionReason) -> usize {
    let total = s.nodes.iter().filter(|n| n.claim.is_some()).count();
    let ctx = BudgetContext {
        nodepool: "general",
        reason,
        now: s.now,
        total_nodes: total,
        disrupting: 0,
        budgets: &s.nodepools[0].disruption.budgets,
    };
    KarpenterBudgets.allowed(&ctx).allowed
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 150, ..ProptestConfig::default() })]

    #[test]
    fn budgets_are_never_exceeded_over_a_sequence_of_rounds(nodes in prop::collection::vec(node_spec(), 1..9), budgets in prop::collection::vec(budget(), 1..3), pdb_allowed in 0i32..3) {
        let mut s = build(&nodes, budgets, pdb_allowed);
        for _round in 0..6 {
            let d = disrupt(&s, &DefaultPolicies);
            let Some(plan) = d.plan else { break };
            let reason = plan.method.reason().unwrap();
            for &n in &plan.candidates {
                s.nodes[n].claim.as_mut().unwrap().disrupting = true;
            }
            let disrupting = s.nodes.iter().filter(|n| n.claim.as_ref().is_some_and(|c| c.disrupting)).count();
            prop_assert!(disrupting <= budget_cap(&s, reason), "{disrupting} disrupting > cap {} ({:?})", budget_cap(&s, reason), plan.method);
        }
    }

    #[test]
    fn every_rescheduled_pod_has_a_place_and_pdbs_hold(nodes in prop::collection::vec(node_spec(), 1..9), budgets in prop::collection::vec(budget(), 1..3), pdb_allowed in 0i32..3) {
        let s = build(&nodes, budgets, pdb_allowed);
        let d = disrupt(&s, &DefaultPolicies);
        if let Some(plan) = &d.plan {
            prop_assert!(pdb_problem(&plan.pods, &s).is_none(), "plan evicts beyond a PDB");
            for &p in &plan.pods {
                prop_assert!(!tenon_core::disruption::candidates::do_not_disrupt(&s.pods[p], s.now) || plan.method == Method::Drift);
            }
            // Re-simulate from scratch: every pod lands on a remaining node or a replacement.
            let out = Simulator::new(&s).remove(&plan.candidates, &PriceScorer);
            prop_assert!(out.unschedulable.iter().all(|u| !plan.pods.contains(&u.pod)));
            let new_with_pods = out.nodeclaims.iter().filter(|nc| nc.pods.iter().any(|p| plan.pods.contains(p))).count();
            prop_assert_eq!(new_with_pods, plan.replacements.len());
            if matches!(plan.method, Method::MultiNodeConsolidation | Method::SingleNodeConsolidation) {
                prop_assert!(plan.replacements.len() <= 1);
                prop_assert!(plan.savings_per_hour > 0.0);
            }
        }
    }

    #[test]
    fn decisions_are_deterministic(nodes in prop::collection::vec(node_spec(), 1..7), budgets in prop::collection::vec(budget(), 1..3)) {
        let s = build(&nodes, budgets, 1);
        let key = |s: &ClusterSnapshot| disrupt(s, &DefaultPolicies).plan.map(|p| (p.method, p.candidates, p.replacements.iter().map(|r| r.instance_type_names(s).join(",")).collect::<Vec<_>>()));
        prop_assert_eq!(key(&s), key(&s.clone()));
    }

    /// A simulation that skips what its question does not need answers that question as a
    /// complete one does: stopped at a refusal only when the complete one refuses too, and
    /// counting the NodeClaims it leaves unbuilt.
    #[test]
    fn shortcut_simulations_answer_as_complete_ones(
        nodes in prop::collection::vec(node_spec(), 1..7),
        uninitialized in prop::collection::vec(prop::bool::weighted(0.4), 7),
        pending in prop::collection::vec(prop::sample::select(vec![100i64, 500, 1000, 2000, 4000]), 0..12),
    ) {
        let mut s = build(&nodes, vec![], 1);
        for (n, &u) in s.nodes.iter_mut().zip(&uninitialized) {
            n.claim.as_mut().unwrap().initialized = !u;
        }
        for (i, &cpu) in pending.iter().enumerate() {
            s.pods.push(pod(&format!("pending-{i}"), cpu, 0));
        }
        let marked: Vec<bool> = s.nodes.iter().map(|n| !n.claim.as_ref().unwrap().initialized).collect();
        let sim = Simulator::new(&s);
        for n in 0..s.nodes.len() {
            let full = sim.remove(&[n], &PriceScorer);
            let watched: Vec<usize> = (0..s.pods.len()).filter(|&p| s.pods[p].node_name.as_deref() == Some(s.nodes[n].name.as_str())).collect();
            for claims_up_to in [None, Some(0), Some(1)] {
                let needs = Needs { refused_if_on: Some((&watched, &marked)), claims_up_to, ..Needs::default() };
                let short = sim.ask(&[n], &PriceScorer, &needs);
                if short.complete {
                    prop_assert_eq!(&short.unschedulable, &full.unschedulable);
                    prop_assert_eq!(&short.moved_to, &full.moved_to);
                    prop_assert_eq!(short.claims_needed, full.nodeclaims.len());
                    if claims_up_to.is_none_or(|m| full.nodeclaims.len() <= m) {
                        prop_assert_eq!(&short.nodeclaims, &full.nodeclaims);
                    } else {
                        prop_assert!(short.nodeclaims.is_empty());
                    }
                } else {
                    prop_assert!(!watched.is_empty());
                    for p in &watched {
                        prop_assert_eq!(short.moved_to.get(p), full.moved_to.get(p));
                    }
                    prop_assert!(watched.iter().any(|p| full.moved_to.get(p).is_some_and(|&m| marked[m])));
                    prop_assert!(full.unschedulable.iter().all(|u| !watched.contains(&u.pod)));
                }
            }
        }
    }
}
