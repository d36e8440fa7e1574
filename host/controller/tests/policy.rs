//! `tenon policy …` as a policy author runs it: real components, real fixtures, a scaffolded
//! crate built and tested from scratch.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use support::{repo, tenon};

fn target() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo().join("target"), PathBuf::from)
}

fn bundle() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        tenon_policy::testing::build_components(&repo().join("policies/Cargo.toml"), &target().join("guests")).unwrap()
    })
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn wasm(name: &str) -> String {
    bundle().join(format!("{name}.wasm")).display().to_string()
}

#[test]
fn the_default_bundle_passes_its_fixtures() {
    for (file, dir) in [
        ("default_scoring", "default-scoring"),
        ("default_consolidation", "default-consolidation"),
        ("default_budget", "default-budget"),
    ] {
        let o = tenon(&["policy", "test", &wasm(file), &format!("policies/{dir}/fixtures")]);
        assert_eq!(o.status.code(), Some(0), "{}{}", out(&o), String::from_utf8_lossy(&o.stderr));
        assert!(out(&o).contains(" passed, 0 failed"), "{}", out(&o));
    }
}

#[test]
fn a_wrong_expectation_fails_with_exit_1() {
    let dir = tempdir("wrong");
    let fixture = dir.join("wrong.yaml");
    // One a.large at $0.05 (and b.large at $0.10 when `two`), expecting `expect`.
    let fails = |two: bool, expect: &str, says: &str| {
        let b = if two { "      - {name: b.large, capacity: {cpu: \"2\"}}\n" } else { "" };
        let b_offer = if two { "      - {instanceType: b.large, price: 0.10}\n" } else { "" };
        std::fs::write(
            &fixture,
            format!(
                "cases:\n  - name: wrong\n    instanceTypes:\n      - {{name: a.large, capacity: {{cpu: \"2\"}}}}\n{b}    offerings:\n      - {{instanceType: a.large, price: 0.05}}\n{b_offer}    expect: {expect}\n"
            ),
        )
        .unwrap();
        // Fuel, not the wall-clock deadline: a loaded machine must not turn a wrong
        // expectation into a timeout.
        let o = tenon(&["policy", "test", "--fuel", "50000000", &wasm("default_scoring"), fixture.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(1), "{}", out(&o));
        assert!(out(&o).contains("FAIL") && out(&o).contains(says), "{}", out(&o));
    };
    fails(true, "{first: b.large}", "expected b.large first");
    // `order: []` asks for an empty ranking, so it fails on a non-empty one.
    fails(false, "{order: []}", "expected an empty ranking");
    // A case without an expectation is refused, not counted as passed.
    fails(false, "{}", "the case expects nothing: give expect.first or order");
    // With fuel instead of a deadline: the same verdicts, deterministically.
    let o =
        tenon(&["policy", "test", "--fuel", "50000000", &wasm("default_scoring"), "policies/default-scoring/fixtures"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
}

#[test]
fn inspect_shows_the_world_and_the_digest_to_pin() {
    let o = tenon(&["policy", "inspect", &wasm("default_budget")]);
    assert_eq!(o.status.code(), Some(0));
    let sha = tenon_policy::engine::sha256_hex(&std::fs::read(wasm("default_budget")).unwrap());
    assert!(out(&o).contains("world:   tenon:policy/disruption-budget@0.1.0"), "{}", out(&o));
    assert!(out(&o).contains(&format!("default-budget@sha256:{sha}")), "{}", out(&o));
    let o = tenon(&["policy", "inspect", "README.md"]);
    assert_eq!(o.status.code(), Some(2), "not a component: a clear error, not a crash");

    let o = tenon(&["policy", "inspect", "--json", &wasm("default_budget")]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object on stdout");
    assert_eq!(j["world"], "tenon:policy/disruption-budget@0.1.0");
    assert_eq!(j["sha256"], sha.as_str());
    assert_eq!(j["pin"], format!("default-budget@sha256:{sha}"));
    assert!(
        j["exports"].as_array().is_some_and(|e| e.iter().any(|e| e.as_str().is_some_and(|e| e.contains("budgets"))))
    );
}

#[test]
fn test_json_reports_every_case_and_keeps_the_exit_status() {
    let o = tenon(&["policy", "test", "--json", &wasm("default_scoring"), "policies/default-scoring/fixtures"]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("one JSON object on stdout");
    let cases = j["cases"].as_array().expect("cases");
    assert!(!cases.is_empty());
    assert_eq!(j["passed"].as_u64(), Some(cases.len() as u64));
    assert_eq!(j["failed"], 0);
    assert!(cases.iter().all(|c| c["passed"] == true && c["file"].as_str().is_some_and(|f| f.ends_with(".yaml"))));

    let dir = tempdir("json-wrong");
    let fixture = dir.join("wrong.yaml");
    std::fs::write(
        &fixture,
        "cases:\n  - name: wrong\n    instanceTypes:\n      - {name: a.large, capacity: {cpu: \"2\"}}\n      - {name: b.large, capacity: {cpu: \"2\"}}\n    offerings:\n      - {instanceType: a.large, price: 0.05}\n      - {instanceType: b.large, price: 0.10}\n    expect: {first: b.large}\n",
    )
    .unwrap();
    let o = tenon(&["policy", "test", "--json", &wasm("default_scoring"), fixture.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", out(&o));
    let j: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON on a failure too");
    assert_eq!((j["passed"].as_u64(), j["failed"].as_u64()), (Some(0), Some(1)));
    assert_eq!(j["cases"][0]["name"], "wrong");
    assert!(j["cases"][0]["detail"].as_str().is_some_and(|d| d.contains("expected b.large first")), "{j}");
}

fn tempdir(tag: &str) -> PathBuf {
    let d = target().join(format!("tmp-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The SDK is a crate of its own, contract included: what a registry would serve.
#[test]
fn the_sdk_packages_and_its_package_builds() {
    let o = Command::new(env!("CARGO"))
        .args(["package", "--allow-dirty", "--manifest-path", "policies/sdk/Cargo.toml"])
        .current_dir(repo())
        .env("CARGO_TARGET_DIR", target().join("scaffolded"))
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "cargo package: {log}");
    assert!(log.contains("Verifying tenon-policy-sdk"), "the packaged crate was built on its own: {log}");
}

#[test]
fn a_new_policy_tests_and_builds_without_edits() {
    let dir = tempdir("new");
    for kind in ["scorer", "consolidator", "budget"] {
        let name = format!("my-{kind}");
        let crate_dir = dir.join(&name);
        let o = tenon(&["policy", "new", &name, "--kind", kind, "--dir", crate_dir.to_str().unwrap()]);
        assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
        let shared = target().join("scaffolded");
        let test = Command::new(env!("CARGO"))
            .args(["test", "--quiet"])
            .current_dir(&crate_dir)
            .env("CARGO_TARGET_DIR", &shared)
            .output()
            .unwrap();
        assert!(test.status.success(), "cargo test in a fresh {kind}: {}", String::from_utf8_lossy(&test.stderr));
        // `tenon policy build`: the component, its fixtures run, the pin and the annotation.
        let o = Command::new(env!("CARGO_BIN_EXE_tenon"))
            .args(["policy", "build", crate_dir.to_str().unwrap()])
            .env("CARGO_TARGET_DIR", &shared)
            .output()
            .unwrap();
        let text = out(&o);
        assert_eq!(o.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&o.stderr));
        let component = shared.join(format!("wasm32-wasip2/release/{}.wasm", name.replace('-', "_")));
        assert!(text.starts_with(&format!("built {}", component.display())), "{text}");
        assert!(text.contains(" passed, 0 failed"), "its fixtures ran: {text}");
        let annotation = match kind {
            "scorer" => "tenon.dev/scoring-policy",
            "consolidator" => "tenon.dev/consolidation-policy",
            _ => "tenon.dev/disruption-policy",
        };
        assert!(text.contains(&format!("{annotation}={name}@sha256:")), "{text}");
        assert!(text.contains("@0.2.0,"), "scaffolds use contract 0.2.0: {text}");
        let manifest = std::fs::read_to_string(crate_dir.join("Cargo.toml")).unwrap();
        assert!(manifest.contains("tenon-policy-sdk = { version = "), "by version: {manifest}");
        assert!(manifest.contains("[patch.crates-io]\ntenon-policy-sdk = { path = "), "{manifest}");
    }
    let o = tenon(&["policy", "build", dir.join("nowhere").to_str().unwrap()]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("no policy crate here"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = tenon(&["policy", "new", "Bad_Name", "--kind", "scorer", "--dir", dir.join("x").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn check_with_a_policy_store_names_a_policy_in_the_wrong_annotation() {
    let np = std::fs::read_to_string(repo().join("examples/seeds/lab-general/nodepool-lab-general.yaml")).unwrap();
    let np = np.replacen(
        "  name: lab-general\n",
        "  name: lab-general\n  annotations:\n    tenon.dev/scoring-policy: default_budget\n    tenon.dev/disruption-policy: not-built-yet\n",
        1,
    );
    let dir = std::env::temp_dir().join(format!("tenon-check-policies-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("nodepool.yaml");
    std::fs::write(&file, np).unwrap();
    let store = bundle().display().to_string();
    let o = tenon(&["check", "--policy-dir", &store, file.to_str().unwrap()]);
    let text = out(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(
        text.contains("metadata.annotations.tenon.dev/scoring-policy: tenon.dev/scoring-policy names default_budget, which implements disruption-budget, not scorer: name it in tenon.dev/disruption-policy instead"),
        "{text}"
    );
    assert!(
        text.contains("warning: metadata.annotations.tenon.dev/disruption-policy: policy \"not-built-yet\" not found"),
        "{text}"
    );
    // Without a store the annotations cannot be checked, and nothing is claimed.
    let o = tenon(&["check", file.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", out(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}
