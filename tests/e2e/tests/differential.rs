//! The differential test: each scenario of `examples/scenarios/differential/` through the
//! real controller (API emulator, moto with CreateFleet capacity errors, stand-ins) and
//! through `tenon simulate` pinned to the controller's catalog and start time; the decision
//! traces must be identical (tenon_e2e::differential says what a trace holds).

use tenon_e2e::Cluster;
use tenon_e2e::differential::{self, Trace};

/// The scenarios this file runs, one test each.
const CASES: &[&str] =
    &["budget-window", "drift", "multi-node", "pdb-shared-drain", "rollout", "scorer", "spot-exhausted"];

async fn same_decisions(name: &str) -> Trace {
    let mut c = Cluster::start(&format!("differential-{name}")).await;
    let run = differential::through_controller(&mut c, &differential::scenario(name)).await;
    let simulated = differential::through_simulator(&run.pinned);
    assert_eq!(
        run.trace, simulated,
        "{name}: the controller and the simulator decided differently\ncontroller:\n{}simulator:\n{}",
        run.trace, simulated
    );
    assert!(!run.trace.nodeclaims.is_empty(), "{name}: nothing was decided:\n{}", run.trace);
    eprintln!("{name}: both sides decided\n{}", run.trace);
    run.trace
}

#[test]
fn every_shared_scenario_runs_here() {
    let mut names: Vec<String> = differential::scenarios()
        .iter()
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(String::from))
        .collect();
    names.sort();
    assert_eq!(names, CASES, "add a test below for each scenario of examples/scenarios/differential/");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollout() {
    let t = same_decisions("rollout").await;
    assert_eq!(t.nodeclaims.len(), 1, "{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spot_exhausted() {
    let t = same_decisions("spot-exhausted").await;
    assert!(t.nodeclaims[0].ends_with("failed InsufficientCapacityError"), "{t}");
    assert!(t.nodeclaims.last().is_some_and(|l| l.ends_with("on-demand")), "{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_window() {
    let t = same_decisions("budget-window").await;
    assert!(t.events.contains("event NodePool/diff-budget DisruptionBlocked"), "{t}");
    assert!(t.disruptions.iter().any(|d| d.starts_with("disruption emptiness")), "{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift() {
    let t = same_decisions("drift").await;
    assert!(t.disruptions.iter().any(|d| d.starts_with("disruption drift [#1] -> [#2]")), "{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_node() {
    let t = same_decisions("multi-node").await;
    assert!(t.disruptions.iter().any(|d| d.starts_with("disruption multi-node-consolidation [#1,#2,#3]")), "{t}");
}

/// Two nodes drained under one `maxUnavailable: 1` PDB evict one pod at a time on both
/// sides: one drain is held (FailedDraining) until the PDB is relaxed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pdb_shared_drain() {
    let t = same_decisions("pdb-shared-drain").await;
    assert!(t.events.contains("event Node FailedDraining"), "one drain waits for the budget: {t}");
    assert_eq!(t.nodeclaims.len(), 2, "{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scorer() {
    same_decisions("scorer").await;
}
