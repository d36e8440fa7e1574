//! Each hook's policy gets its own configuration: two gallery policies on one NodePool
//! (`amd-first` scoring, `business-hours` disruption) each read theirs, and a bad
//! configuration spoils only the hook it is for.

use crate::support;

use std::collections::BTreeMap;
use support::*;
use tenon_core::catalog::synthetic;
use tenon_core::disruption::PolicySet;
use tenon_core::disruption::budgets::BudgetContext;
use tenon_core::instancetype::InstanceType;
use tenon_core::model::DisruptionReason;
use tenon_core::resources::Resources;
use tenon_core::scorer::{Candidate, Scorer, ScoringInput};
use tenon_policy::cluster::{ClusterPolicies, NodePoolInfo};
use tenon_policy::{Limits, PolicyEngine, PolicyStore};

const AMD_FIRST: &str = r#"{"maxPremiumPercent": 25}"#;
const BUSINESS_HOURS: &str = r#"{"timeZone": "Asia/Shanghai",
  "businessHours": {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "09:00", "end": "18:00"}}"#;
/// Monday 2026-11-30, 10:00 in Shanghai: inside business hours.
const MONDAY_10_SHANGHAI: i64 = 1_796_004_000;

fn store() -> PolicyStore {
    PolicyStore::new(gallery_dir(), PolicyEngine::new(Limits::default(), Some(cache_dir())).unwrap())
}

fn resolve(annotations: &[(&str, &str)]) -> (ClusterPolicies, Vec<(String, String)>) {
    let pool = NodePoolInfo {
        name: "lab-general".into(),
        labels: BTreeMap::new(),
        annotations: annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
    };
    ClusterPolicies::resolve(&store(), &[pool], None)
}

/// Calls both hooks once; returns the ranking and the allowance's reason.
fn decide(set: &ClusterPolicies) -> (Vec<usize>, String) {
    let types: Vec<InstanceType> = synthetic(10);
    let requests = Resources::new(500, 1 << 30, 1);
    let mut candidates: Vec<Candidate> = types
        .iter()
        .flat_map(|t| t.offerings.iter().map(move |o| Candidate { instance_type: t, offering: o }))
        .collect();
    candidates.sort_by(|a, b| a.offering.price.total_cmp(&b.offering.price));
    let input = ScoringInput {
        nodepool: "lab-general",
        now: MONDAY_10_SHANGHAI,
        requests: &requests,
        pod_count: 1,
        candidates,
    };
    let ranking = set.rank(&input);
    let ctx = BudgetContext {
        nodepool: "lab-general",
        reason: DisruptionReason::Underutilized,
        now: MONDAY_10_SHANGHAI,
        total_nodes: 10,
        disrupting: 0,
        budgets: &[],
    };
    (ranking, set.budget_rule("lab-general").allowed(&ctx).why)
}

#[test]
fn two_policies_on_one_nodepool_each_read_their_own_config() {
    let (set, problems) = resolve(&[
        ("tenon.dev/scoring-policy", "amd-first"),
        ("tenon.dev/scoring-config", AMD_FIRST),
        ("tenon.dev/disruption-policy", "business-hours"),
        ("tenon.dev/disruption-config", BUSINESS_HOURS),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
    let (_, why) = decide(&set);
    let failures = set.take_failures();
    assert!(failures.is_empty(), "each policy accepted its configuration: {failures:?}");
    assert!(set.health("lab-general").is_empty());
    assert_eq!(set.budget_rule("lab-general").name(), "business-hours");
    assert!(!why.contains("unavailable"), "the policy decided: {why}");
}

#[test]
fn the_shared_config_is_the_default_of_a_hook_without_its_own() {
    // amd-first reads the shared one; business-hours its own.
    let (set, problems) = resolve(&[
        ("tenon.dev/scoring-policy", "amd-first"),
        ("tenon.dev/policy-config", AMD_FIRST),
        ("tenon.dev/disruption-policy", "business-hours"),
        ("tenon.dev/disruption-config", BUSINESS_HOURS),
    ]);
    assert!(problems.is_empty(), "{problems:?}");
    decide(&set);
    let failures = set.take_failures();
    assert!(failures.is_empty(), "{failures:?}");

    // One shared object for both: each rejects the other's keys (why per-hook configs exist).
    let both = r#"{"maxPremiumPercent": 25, "timeZone": "Asia/Shanghai",
      "businessHours": {"start": "09:00", "end": "18:00"}}"#;
    let (set, _) = resolve(&[
        ("tenon.dev/scoring-policy", "amd-first"),
        ("tenon.dev/disruption-policy", "business-hours"),
        ("tenon.dev/policy-config", both),
    ]);
    let (_, why) = decide(&set);
    let failed: Vec<String> = set.take_failures().into_iter().map(|f| f.hook).collect();
    assert_eq!(failed, ["scoring", "budget"], "both fail on the other's keys");
    assert!(why.contains("zero disruptions") || why.contains("no disruption"), "fails closed: {why}");
}

#[test]
fn a_bad_hook_config_spoils_only_its_hook() {
    let (set, problems) = resolve(&[
        ("tenon.dev/scoring-policy", "amd-first"),
        ("tenon.dev/scoring-config", "[25]"),
        ("tenon.dev/disruption-policy", "business-hours"),
        ("tenon.dev/disruption-config", BUSINESS_HOURS),
    ]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].1.contains("tenon.dev/scoring-config: expected a JSON object, found an array"), "{problems:?}");
    assert_eq!(set.budget_rule("lab-general").name(), "business-hours", "the disruption hook is unaffected");

    // A bad shared config spoils the hooks that would read it, not one with its own.
    let (set, problems) = resolve(&[
        ("tenon.dev/scoring-policy", "amd-first"),
        ("tenon.dev/policy-config", "not json"),
        ("tenon.dev/disruption-policy", "business-hours"),
        ("tenon.dev/disruption-config", BUSINESS_HOURS),
    ]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].1.starts_with("tenon.dev/policy-config"), "{problems:?}");
    assert_eq!(set.budget_rule("lab-general").name(), "business-hours");
}

/// Contract 0.2.0: a configuration the policy's `validate-config` refuses is a problem of the
/// NodePool as soon as it is resolved (the controller's `PolicyHealthy=False` and Event), with
/// the policy's own words, and the hook fails safe before any decision.
#[test]
fn a_configuration_the_policy_refuses_is_a_problem_at_resolution() {
    let mars = r#"{"timeZone": "Mars/Olympus", "businessHours": {"days": ["mon"], "start": "09:00", "end": "18:00"}}"#;
    let (set, problems) = resolve(&[
        ("tenon.dev/scoring-policy", "amd-first"),
        ("tenon.dev/scoring-config", AMD_FIRST),
        ("tenon.dev/disruption-policy", "business-hours"),
        ("tenon.dev/disruption-config", mars),
    ]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    let why = &problems[0].1;
    assert!(
        why.starts_with("tenon.dev/disruption-config: policy business-hours refuses its configuration: config: timeZone: unknown time zone \"Mars/Olympus\""),
        "{why}"
    );
    let (_, why) = decide(&set);
    assert!(why.contains("zero disruptions") || why.contains("no disruption"), "the hook fails safe: {why}");
    assert!(why.contains("Mars/Olympus"), "and says why: {why}");
    assert!(set.take_failures().iter().all(|f| f.hook != "scoring"), "the scoring hook is unaffected");

    // A negative premium: refused by amd-first's own check, named by its field.
    let (_, problems) = resolve(&[
        ("tenon.dev/scoring-policy", "amd-first"),
        ("tenon.dev/scoring-config", r#"{"maxPremiumPercent": -5}"#),
    ]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].1.contains("maxPremiumPercent must be a non-negative percentage, got -5"), "{problems:?}");
}

/// A policy built against contract 0.1.0 (the default bundle) has no `validate-config`: it
/// loads and is resolved as before; a 0.2.0 one (the gallery) exports it and may import the
/// host's time zones.
#[test]
fn policies_of_both_contract_versions_load() {
    let bundle = PolicyStore::new(bundle_dir(), PolicyEngine::new(Limits::default(), Some(cache_dir())).unwrap());
    for name in ["default-scoring", "default-consolidation", "default-budget"] {
        let p = bundle.resolve(&tenon_api::policy::PolicyRef::parse(name).unwrap()).unwrap();
        assert!(!p.validates_config(), "{name} is built against 0.1.0");
        assert!(p.exports.iter().all(|e| !e.contains("@0.2")), "{name}: {:?}", p.exports);
        assert_eq!(p.validate_config("not even JSON", 0), Ok(()), "nothing to ask a 0.1.0 policy");
    }
    let gallery = store();
    let p = gallery.resolve(&tenon_api::policy::PolicyRef::parse("business-hours").unwrap()).unwrap();
    assert!(p.validates_config());
    assert!(p.imports.iter().any(|i| i == tenon_policy::time::INTERFACE), "{:?}", p.imports);
    assert!(p.validate_config(BUSINESS_HOURS, 0).is_ok());
}
