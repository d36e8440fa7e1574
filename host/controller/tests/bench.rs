//! `tenon bench` as a user runs it.

use std::process::Command;

/// Runs `tenon`; a policy call may take 2 s (these tests count calls and failures, and a
/// loaded machine holds a call past the production deadline).
fn tenon(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tenon"))
        .args(args)
        .env("TENON_POLICY_DEADLINE_MS", "2000")
        .output()
        .expect("run tenon")
}

#[test]
fn scheduling_bench_reports_json() {
    let o = tenon(&["bench", "scheduling", "--pods", "500", "--runs", "1", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["pods"], 500);
    // 100 of the pods have hostname anti-affinity to each other: at least 100 nodes.
    assert!(v["nodeclaims"].as_u64().unwrap() >= 100, "{v}");
    assert_eq!(v["unschedulable"], 0);
    assert!(v["seconds"].as_f64().unwrap() > 0.0);
    assert!(v["pods_per_second"].as_f64().unwrap() > 0.0);
}

#[test]
fn scheduling_bench_on_the_real_catalog_prints_a_summary() {
    let o = tenon(&["bench", "scheduling", "--pods", "100", "--runs", "1", "--instance-types", "catalog"]);
    assert!(o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("scheduled 100 pods") && out.contains("ec2-us-east-1"), "{out}");
}

#[test]
fn zero_runs_is_an_error() {
    let o = tenon(&["bench", "scheduling", "--runs", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--runs must be at least 1"));
}

#[test]
fn consolidation_bench_reports_json() {
    let o = tenon(&["bench", "consolidation", "--nodes", "60", "--runs", "1", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert_eq!(v["nodes"], 60);
    assert!(v["seconds"].as_f64().unwrap() > 0.0);
    assert!(v["candidates"].as_u64().unwrap() > 0, "{v}");
    // ~30% of the nodes are underused: a pass finds something to consolidate.
    assert_ne!(v["method"], "none", "{v}");
    assert!(v["savings_per_hour"].as_f64().unwrap() > 0.0, "{v}");
}

/// A built component from the test command's policy directory.
fn component(file: &str) -> String {
    let dir = std::env::var_os("TENON_POLICY_DIR").expect("TENON_POLICY_DIR: the built policies");
    std::path::Path::new(&dir).join(file).display().to_string()
}

#[test]
fn scheduling_bench_measures_a_scoring_policy_against_the_price_order() {
    let policy = component("default_scoring.wasm");
    let o = tenon(&["bench", "scheduling", "--pods", "300", "--runs", "1", "--json", "--scoring-policy", &policy]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    // At most one call per NodeClaim opened (alike NodeClaims share an answer), none
    // failing; default-scoring is the price order, so the plan is the same size.
    let calls = v["policy_calls"].as_u64().unwrap();
    assert!(calls > 0 && calls <= v["nodeclaims"].as_u64().unwrap(), "{v}");
    assert_eq!(v["policy_failures"], 0, "{v}");
    assert_eq!(v["policy_nodeclaims"], v["nodeclaims"], "{v}");
    let (native, with) = (v["native_seconds"].as_f64().unwrap(), v["policy_seconds"].as_f64().unwrap());
    assert!(native > 0.0 && with > 0.0, "{v}");
    assert!((v["overhead"].as_f64().unwrap() - with / native).abs() < 1e-9, "{v}");

    let o = tenon(&["bench", "scheduling", "--pods", "10", "--scoring-policy", "README.md"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("name a .wasm file"), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn consolidation_bench_measures_consolidation_and_budget_policies() {
    let (c, b) = (component("default_consolidation.wasm"), component("default_budget.wasm"));
    let args = ["bench", "consolidation", "--nodes", "40", "--runs", "1", "--json"];
    let o = tenon(&[&args[..], &["--consolidation-policy", &c, "--budget-policy", &b]].concat());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object");
    assert!(v["policy_calls"].as_u64().unwrap() > 0, "the components were called: {v}");
    assert_eq!(v["policy_failures"], 0, "{v}");
    assert_eq!(v["policy_method"], v["method"], "the defaults decide as the built-in rules: {v}");
    assert!(v["overhead"].as_f64().unwrap() > 0.0, "{v}");
}
