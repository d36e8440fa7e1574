//! `tenon simulate` as a user runs it: every example scenario holds its expectations, a
//! broken expectation fails the run, and runs are deterministic.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::Output;
use support::{repo, tenon};

fn out(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A fresh directory of this test run's own, holding `files` (name, text).
fn scratch(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tenon-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    dir
}

/// The runbook's lab-general manifests with `nodepool` in place of its NodePool, inflate
/// scaled to 8 at 0s, run for 2m with one expectation at 90s.
fn lab_general_scenario(name: &str, nodepool: &str, expect: &str) -> String {
    let seeds = repo().join("examples/seeds/lab-general");
    format!(
        "name: {name}\nmanifests: [{0}/ec2nodeclass-lab-general.yaml, {nodepool}, {0}/karpenter-positive.yaml]\nduration: 2m\ntimeline:\n  - at: 0s\n    scale: {{deployment: karpenter-lab/inflate, replicas: 8}}\nexpect:\n  - at: 90s\n    {expect}\n",
        seeds.display()
    )
}

/// Simulates `scenario`, asserting the exit code and a piece of what it printed.
fn simulate_exits(scenario: &Path, code: i32, says: &str) {
    let o = tenon(&["simulate", scenario.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(code), "{}", out(&o));
    assert!(out(&o).contains(says), "{}", out(&o));
}

fn scenarios() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(repo().join("examples/scenarios"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.starts_with("name:")))
        .collect();
    v.sort();
    v
}

#[test]
fn every_example_scenario_holds_its_expectations() {
    let all = scenarios();
    assert!(all.len() >= 7, "{all:?}");
    for s in all {
        let o = tenon(&["simulate", s.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", s.display(), out(&o));
        assert!(out(&o).contains("all held"), "{}: {}", s.display(), out(&o));
    }
}

#[test]
fn the_rollout_takes_the_runbooks_forty_to_sixty_seconds() {
    let o = tenon(&["simulate", "--json", "examples/scenarios/lab-general-rollout.yaml"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p50 = r["pendingP50Seconds"].as_i64().unwrap();
    assert!((40..=60).contains(&p50), "pods waited {p50}s");
    assert_eq!(r["nodeclaimsCreated"], 1, "8 pods of 1 CPU share one NodeClaim");
    let reasons: Vec<&str> = r["events"].as_array().unwrap().iter().map(|e| e["reason"].as_str().unwrap()).collect();
    for want in ["Created", "Launched", "Registered", "Initialized"] {
        assert!(reasons.contains(&want), "{reasons:?}");
    }
    // Same scenario, same timeline.
    let again = tenon(&["simulate", "--json", "examples/scenarios/lab-general-rollout.yaml"]);
    assert_eq!(o.stdout, again.stdout);
}

#[test]
fn a_failed_expectation_fails_the_run() {
    let nodepool = repo().join("examples/seeds/lab-general/nodepool-lab-general.yaml");
    let wrong = lab_general_scenario("wrong", &nodepool.display().to_string(), "pendingPods: 8");
    let dir = scratch(
        "sim",
        &[("wrong.yaml", &wrong), ("broken.yaml", "name: broken\nmanifests: [nowhere.yaml]\nduration: 1m\n")],
    );
    simulate_exits(&dir.join("wrong.yaml"), 1, "FAILED at 00:01:30: expected 8 pending pods, found 0");
    simulate_exits(&dir.join("broken.yaml"), 2, "nowhere.yaml");
}

#[test]
fn a_pdb_bound_that_is_not_a_count_or_percentage_is_named() {
    let dir = scratch(
        "sim-pdb",
        &[
            (
                "pdb.yaml",
                "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: web, namespace: shop}\nspec:\n  maxUnavailable: half\n  selector: {matchLabels: {app: web}}\n",
            ),
            ("s.yaml", "name: pdb\nmanifests: [pdb.yaml]\nduration: 1m\n"),
        ],
    );
    simulate_exits(&dir.join("s.yaml"), 2, "PodDisruptionBudget shop/web: spec.maxUnavailable \"half\"");
}

#[test]
fn the_report_is_one_html_page_with_its_plots() {
    let path = std::env::temp_dir().join(format!("tenon-report-{}.html", std::process::id()));
    let o = tenon(&[
        "simulate",
        "--quiet",
        "--report",
        path.to_str().unwrap(),
        "examples/scenarios/consolidate-replace.yaml",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let page = std::fs::read_to_string(&path).unwrap();
    assert!(page.starts_with("<!doctype html>") && page.ends_with("</html>"));
    assert_eq!(page.matches("<svg").count(), 3, "pods/nodes, cost and waiting plots");
    for title in ["Pods and nodes", "Cost per hour", "How long pods waited"] {
        assert!(page.contains(title), "{title}");
    }
    assert!(page.contains("all held") && page.contains("DisruptionTerminating"));
}

fn guests() -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo().join("target"), PathBuf::from).join("guests");
    tenon_policy::testing::build_components(&repo().join("policies/Cargo.toml"), &target).unwrap();
    tenon_policy::testing::build_components(&repo().join("host/policy/tests/guests/Cargo.toml"), &target).unwrap()
}

#[test]
fn compare_runs_a_scenario_under_two_policy_sets() {
    let dir = guests();
    let dir = dir.to_str().unwrap();
    // The Wasm default decides exactly as the native default.
    let o = tenon(&[
        "simulate",
        "--json",
        "--policy-dir",
        dir,
        "--compare",
        "default",
        "default-scoring",
        "examples/scenarios/lab-general-rollout.yaml",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["a"]["report"]["totalCost"], v["b"]["report"]["totalCost"]);
    // A scorer that ranks the most expensive first (configured through the NodePool's
    // policy-config annotation) launches a pricier node for the same pods.
    let np = std::fs::read_to_string(repo().join("examples/seeds/lab-general/nodepool-lab-general.yaml")).unwrap();
    let np = np.replacen(
        "  name: lab-general\n",
        "  name: lab-general\n  annotations:\n    tenon.dev/policy-config: '{\"mode\": \"reverse\"}'\n",
        1,
    );
    let tmp = scratch(
        "compare",
        &[
            ("nodepool.yaml", &np),
            ("scenario.yaml", &lab_general_scenario("reversed", "nodepool.yaml", "pendingPods: 0")),
        ],
    );
    // A generous deadline: the test suite loads both cores, and the run's one scoring call
    // timing out would fall back to price order.
    let o = tenon(&[
        "simulate",
        "--json",
        "--policy-dir",
        dir,
        "--policy-deadline-ms",
        "5000",
        "--compare",
        "default",
        "hostile-scorer",
        tmp.join("scenario.yaml").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let (a, b) = (
        v["a"]["report"]["finalCostPerHour"].as_f64().unwrap(),
        v["b"]["report"]["finalCostPerHour"].as_f64().unwrap(),
    );
    let failures = &v["b"]["report"]["policyFailures"];
    assert!(b > a, "reversed ranking should cost more: default ${a}/h, reversed ${b}/h; policy failures {failures}");
    // An unknown policy is a clear error, not a run with defaults.
    let o = tenon(&[
        "simulate",
        "--policy-dir",
        dir,
        "--compare",
        "default",
        "no-such-policy",
        "examples/scenarios/lab-general-rollout.yaml",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", out(&o));
    assert!(out(&o).contains("no-such-policy"), "{}", out(&o));
}

#[test]
fn the_start_time_moves_the_wall_clock_and_nothing_else() {
    // consolidate-replace has no schedule and default policies: starting it on a Monday
    // morning instead of at the epoch must not change a single event, time or cost.
    let original = repo().join("examples/scenarios/consolidate-replace.yaml");
    let seeds = format!("{}/", repo().join("examples/seeds").display());
    let text = std::fs::read_to_string(&original).unwrap().replace("../seeds/", &seeds);
    let started = format!("settings: {{start: \"2026-11-30T08:30:00Z\"}}\n{text}");
    let dir = scratch("start-time", &[("started.yaml", &started)]);
    let report = |p: &Path| -> serde_json::Value {
        let o = tenon(&["simulate", "--json", p.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", out(&o));
        let mut v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v.as_object_mut().unwrap().remove("scenario");
        v
    };
    let (a, b) = (report(&original), report(&dir.join("started.yaml")));
    assert!(a["disruptions"].as_u64() > Some(0), "the scenario disrupts: {}", a["disruptions"]);
    assert_eq!(a, b, "a start time changed the outcome of a scenario without a clock-dependent decision");
    // A start that is not a timestamp is named.
    let bad = format!("settings: {{start: \"Monday 8:30\"}}\n{text}");
    let dir = scratch("clock-bad", &[("bad.yaml", &bad)]);
    let o = tenon(&["simulate", dir.join("bad.yaml").to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0), "{}", out(&o));
    assert!(
        out(&o).contains("start must be an RFC 3339 time, got \"Monday 8:30\"")
            && out(&o).contains("write e.g. \"2026-11-30T08:30:00Z\""),
        "the error names the field and the fix: {}",
        out(&o)
    );
}

/// consolidate-replace with its NodePool annotated (YAML lines under `annotations:`) and its
/// budget replaced by `budget`.
fn consolidate_replace_with(name: &str, annotations: &str, budget: &str) -> PathBuf {
    let seeds = repo().join("examples/seeds/lab-general");
    let np = std::fs::read_to_string(seeds.join("nodepool-lab-general.yaml"))
        .unwrap()
        .replacen("  name: lab-general\n", &format!("  name: lab-general\n  annotations:\n{annotations}"), 1)
        .replace("      - nodes: \"10%\"", &format!("      - nodes: \"{budget}\""));
    let scenario = std::fs::read_to_string(repo().join("examples/scenarios/consolidate-replace.yaml"))
        .unwrap()
        .replace("../seeds/lab-general/nodepool-lab-general.yaml", "nodepool.yaml")
        .replace("../seeds/", &format!("{}/", repo().join("examples/seeds").display()));
    scratch(name, &[("nodepool.yaml", &np), ("scenario.yaml", &scenario)]).join("scenario.yaml")
}

/// The report without what only policy failures add (their events and counts).
fn outcome(report: &serde_json::Value) -> serde_json::Value {
    let mut r = report.clone();
    let o = r.as_object_mut().unwrap();
    o.remove("policyFailures");
    o.remove("scenario");
    let events = o["events"].as_array_mut().unwrap();
    events.retain(|e| !["PolicyFailed", "PolicySkipped"].contains(&e["reason"].as_str().unwrap()));
    r
}

#[test]
fn failing_policies_in_shadow_mode_change_nothing() {
    let dir = guests();
    // Both policies fail on every call (the consolidator panics, the budget policy knows
    // no mode "panic"); in shadow mode the default decides regardless.
    let scenario = consolidate_replace_with(
        "shadow",
        "    tenon.dev/policy-mode: shadow\n    tenon.dev/policy-config: '{\"mode\": \"panic\"}'\n",
        "10%",
    );
    let o = tenon(&[
        "simulate",
        "--json",
        "--policy-dir",
        dir.to_str().unwrap(),
        "--compare",
        "default",
        "hostile-consolidator,hostile-budget",
        scenario.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let (a, b) = (&v["a"]["report"], &v["b"]["report"]);
    assert_eq!(a["disruptions"], 1, "the default replaces the node");
    assert_eq!(outcome(a), outcome(b), "shadow failures changed the outcome");
    let failures = b["policyFailures"].as_array().unwrap();
    let hooks: Vec<&str> = failures.iter().map(|f| f["hook"].as_str().unwrap()).collect();
    assert!(hooks.contains(&"consolidation") && hooks.contains(&"budget"), "reported: {failures:?}");
    assert!(failures.iter().all(|f| f["fallback"] == "the default (shadow mode)"), "{failures:?}");
}

#[test]
fn a_budget_policy_cannot_open_a_closed_budget_in_a_simulation() {
    let dir = guests();
    let scenario = consolidate_replace_with(
        "loosen",
        "    tenon.dev/disruption-policy: hostile-budget\n    tenon.dev/policy-config: '{\"mode\": \"max\"}'\n",
        "0",
    );
    let o = tenon(&["simulate", "--json", "--policy-dir", dir.to_str().unwrap(), scenario.to_str().unwrap()]);
    // The scenario expects one disruption; with nodes "0" there is none, whatever the policy says.
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["disruptions"], 0, "u32::MAX from the policy opened nodes: \"0\"");
}

#[test]
fn a_simulation_reports_every_policy_failure_and_skips_a_policy_that_keeps_failing() {
    let dir = guests();
    let dir = dir.to_str().unwrap();
    // A scorer that runs into its deadline on every call; 2-vCPU types only, so the eight
    // inflate pods need eight NodeClaims, each scored.
    let np = std::fs::read_to_string(repo().join("examples/seeds/lab-general/nodepool-lab-general.yaml")).unwrap();
    let np = np
        .replacen(
            "  name: lab-general\n",
            "  name: lab-general\n  annotations:\n    tenon.dev/scoring-policy: hostile-scorer\n    tenon.dev/policy-config: '{\"mode\": \"loop\"}'\n",
            1,
        )
        .replacen(
            "          values: [\"4\"]\n",
            "          values: [\"4\"]\n        - key: karpenter.k8s.aws/instance-cpu\n          operator: In\n          values: [\"2\"]\n",
            1,
        );
    let tmp = scratch(
        "failing-scorer",
        &[
            ("nodepool.yaml", &np),
            ("scenario.yaml", &lab_general_scenario("looping", "nodepool.yaml", "pendingPods: 0")),
        ],
    );
    let scenario = tmp.join("scenario.yaml");
    let o = tenon(&["simulate", "--json", "--policy-dir", dir, scenario.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "price order still provisions: {}", out(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let failures = v["policyFailures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    let f = &failures[0];
    assert_eq!(
        (f["policy"].as_str(), f["hook"].as_str(), f["kind"].as_str()),
        (Some("hostile-scorer"), Some("scoring"), Some("timeout"))
    );
    assert_eq!(f["fallback"], "price order");
    // Called until the breaker opened, then skipped: not once per decision.
    let calls = f["count"].as_u64().unwrap();
    assert_eq!(calls, 5, "{calls} timed-out calls for eight NodeClaims in a 2-minute run");
    let events = v["events"].as_array().unwrap();
    assert!(events.iter().any(|e| e["reason"] == "PolicyFailed" && e["object"] == "NodePool/lab-general"));
    assert!(events.iter().any(|e| e["reason"] == "PolicySkipped"), "the breaker trip is on the timeline");
    // The text summary and --compare say so too.
    let o = tenon(&["simulate", "--quiet", "--policy-dir", dir, scenario.to_str().unwrap()]);
    assert!(
        out(&o).contains("policy calls failed and their fallback decided (hostile-scorer/scoring timeout"),
        "{}",
        out(&o)
    );
    let o =
        tenon(&["simulate", "--policy-dir", dir, "--compare", "default", "hostile-scorer", scenario.to_str().unwrap()]);
    let text = out(&o);
    assert!(text.contains("policy failures") && text.contains("hostile-scorer/scoring timeout ×"), "{text}");
    assert!(text.contains("NOTE (B)") && text.contains("fallback's, not the policy's"), "{text}");
}
