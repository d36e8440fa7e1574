//! Regression guard by counting, not timing: a reduced day-of-waves run must not make the
//! decision core do much more work than it did when the bounds were recorded. The counts are
//! deterministic, so this passes on a slow machine and fails on a change that multiplies the
//! work (as one that reran every disruption round over an unchanged cluster did: 47 s to
//! 17 minutes for the full day, with nothing failing).

use std::path::Path;
use tenon_core::disruption::DefaultPolicies;
use tenon_core::scorer::PriceScorer;
use tenon_sim::{Scenario, run};

/// What `examples/scenarios/scale/brief-waves.yaml` cost when the bounds were recorded
/// (`cargo test -p tenon-sim --test work -- --nocapture` prints today's). Recorded again
/// when consolidation stopped moving pods onto nodes within their consolidateAfter, as
/// Karpenter does: nodes empty later, so the day has 62 disruption rounds instead of 45 and
/// each tries more candidates (it was 37, 45, 733, 101975, 90847, 1150, 21, 198).
const RECORDED: [(&str, u64); 8] = [
    ("schedulingPasses", 41),
    ("disruptionRounds", 62),
    ("removalSimulations", 1297),
    ("placementsTried", 114742),
    ("podsPlaced", 103566),
    ("scorerCalls", 1891),
    ("consolidatorCalls", 28),
    ("budgetCalls", 270),
];

/// Headroom for honest changes to the decisions; a regression of the kind this guards
/// against multiplies a count many times over.
const SLACK: f64 = 1.5;

#[test]
fn brief_waves_work_stays_within_recorded_bounds() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scenarios/scale/brief-waves.yaml");
    let scenario = Scenario::load(&path).expect("the scenario loads");
    let report = run(&scenario, &PriceScorer, &DefaultPolicies, |_| {}).expect("the scenario runs");
    assert!(report.failures.is_empty(), "expectations: {:?}", report.failures);
    // The run still exercises what the bounds are about: provisioning and consolidation.
    assert!(
        report.nodeclaims_created > 0 && report.disruptions > 0,
        "nothing to measure: {} NodeClaims, {} disruptions",
        report.nodeclaims_created,
        report.disruptions
    );
    let measured = report.work.named();
    println!("work: {measured:?}");
    let over: Vec<String> = RECORDED
        .iter()
        .zip(measured)
        .inspect(|((recorded, _), (name, _))| assert_eq!(recorded, name, "counters in the order Work::named gives"))
        .filter(|((_, recorded), (_, now))| *now as f64 > (*recorded as f64 * SLACK).max(1.0))
        .map(|((name, recorded), (_, now))| format!("{name}: {now} > {SLACK} × {recorded}"))
        .collect();
    assert!(over.is_empty(), "the decision core does more work than recorded: {}", over.join("; "));
}
