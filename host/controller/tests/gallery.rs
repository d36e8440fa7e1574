//! The policy gallery (examples/policies): every policy has a README, fixtures that pass under
//! `tenon policy test`, stays small, and its comparison scenario runs on both sides with its
//! expectations held and the effect the gallery claims.

use crate::support;

use std::path::PathBuf;
use support::{repo, tenon};

/// Whether side B's report shows the claimed effect against side A's.
type Effect = fn(&serde_json::Value, &serde_json::Value) -> bool;

/// Each gallery policy and what its comparison must show against the default.
fn claims() -> Vec<(&'static str, Effect, &'static str)> {
    let fewer = |a: &serde_json::Value, b: &serde_json::Value| {
        b["nodeclaimsCreated"].as_u64() < a["nodeclaimsCreated"].as_u64()
    };
    let newer = |a: &serde_json::Value, b: &serde_json::Value| newest_generation(b) > newest_generation(a);
    let more_amd = |a: &serde_json::Value, b: &serde_json::Value| {
        let amd = |r| launched(r).filter(|t| family_suffix(t).starts_with('a')).count();
        amd(b) > amd(a) && launched(b).count() > amd(b)
    };
    // The scenario's NodePool holds a Savings Plan for m6a.
    let committed = |a: &serde_json::Value, b: &serde_json::Value| {
        let m6a = |r| launched(r).filter(|t| t.starts_with("m6a.")).count();
        m6a(b) > 0 && m6a(a) == 0
    };
    let calmer = |a: &serde_json::Value, b: &serde_json::Value| b["disruptions"].as_u64() < a["disruptions"].as_u64();
    // The scenario starts Monday 16:30 in Shanghai: the office closes at 5400 s, night at 19800 s.
    let after_hours = |a: &serde_json::Value, b: &serde_json::Value| {
        let (close, night) = (5400, 19800);
        let (a_moves, b_moves) = (disruptions(a, "Underutilized"), disruptions(b, "Underutilized"));
        let (a_drift, b_drift) = (disruptions(a, "Drifted"), disruptions(b, "Drifted"));
        a_moves.iter().any(|t| *t < close)
            && !b_moves.is_empty()
            && b_moves.iter().all(|t| *t >= close)
            && a_drift.iter().any(|t| *t < night)
            && !b_drift.is_empty()
            && b_drift.iter().all(|t| *t >= night)
    };
    vec![
        ("price-per-vcpu", fewer, "fewer NodeClaims than price order"),
        ("licence-overhead", fewer, "fewer (licensed) nodes than price order"),
        ("prefer-generation", newer, "a newer generation launched than price order's"),
        ("committed-capacity", committed, "the committed family launched where price order launched another"),
        ("utilisation-threshold", calmer, "fewer disruptions than Karpenter's consolidation"),
        ("business-hours", after_hours, "consolidation after office hours and drift at night only, not at once"),
        ("amd-first", more_amd, "more AMD launches than price order, and Intel once AMD ran out"),
    ]
}

/// A run's events of one reason.
fn events<'a>(report: &'a serde_json::Value, reason: &'a str) -> impl Iterator<Item = &'a serde_json::Value> {
    report["events"].as_array().into_iter().flatten().filter(move |e| e["reason"] == reason)
}

/// When a run disrupted NodeClaims for a reason (Karpenter's `Drifted`, `Underutilized`),
/// seconds.
fn disruptions(report: &serde_json::Value, reason: &str) -> Vec<i64> {
    let message = format!("Disrupting NodeClaim: {reason}");
    events(report, "DisruptionTerminating")
        .filter(|e| e["message"].as_str() == Some(message.as_str()))
        .filter_map(|e| e["t"].as_i64())
        .collect()
}

/// The instance types a run launched, in order (`c7a.4xlarge`).
fn launched(report: &serde_json::Value) -> impl Iterator<Item = &str> {
    events(report, "Launched").filter_map(|e| e["message"].as_str()?.split(' ').next())
}

/// A type's generation and what follows it in the family: `c7a.4xlarge` → (7, `a`),
/// `c7i-flex.large` → (7, `i-flex`).
fn generation_and_suffix(instance_type: &str) -> (u32, &str) {
    let family = instance_type.split('.').next().unwrap_or_default();
    let from = family.find(|c: char| c.is_ascii_digit()).unwrap_or(family.len());
    let to = family[from..].find(|c: char| !c.is_ascii_digit()).map_or(family.len(), |n| from + n);
    (family[from..to].parse().unwrap_or(0), &family[to..])
}

fn family_suffix(instance_type: &str) -> &str {
    generation_and_suffix(instance_type).1
}

/// The newest generation among the instance types a run launched (`c7a.4xlarge` → 7).
fn newest_generation(report: &serde_json::Value) -> u32 {
    launched(report).map(|t| generation_and_suffix(t).0).max().unwrap_or(0)
}

fn built() -> PathBuf {
    PathBuf::from(std::env::var_os("TENON_POLICY_DIR").expect(
        "TENON_POLICY_DIR: the built policies, gallery included (scripts/test builds examples/policies into it)",
    ))
}

#[test]
fn every_gallery_policy_is_documented_small_and_passes_its_fixtures() {
    let dir = repo().join("examples/policies");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    names.sort();
    let claimed: Vec<&str> = claims().iter().map(|c| c.0).collect();
    assert_eq!(
        names,
        {
            let mut c = claimed.clone();
            c.sort();
            c
        },
        "every gallery policy has a comparison claim"
    );
    for name in &names {
        let root = dir.join(name);
        assert!(root.join("README.md").is_file(), "{name}: README.md");
        let lines = std::fs::read_to_string(root.join("src/lib.rs")).unwrap().lines().count();
        assert!(root.join("fixtures/cases.yaml").is_file(), "{name}: fixtures/cases.yaml");
        assert!(lines <= 150, "{name}: {lines} lines of Rust (a gallery policy stays ~150)");
        let wasm = built().join(format!("{}.wasm", name.replace('-', "_")));
        let fixtures = root.join("fixtures");
        let o = tenon(&["policy", "test", wasm.to_str().unwrap(), fixtures.to_str().unwrap()]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(o.status.code(), Some(0), "{name}: fixtures failed:\n{out}{}", String::from_utf8_lossy(&o.stderr));
        assert!(out.contains("0 failed") && !out.contains(" 0 passed"), "{out}");
        let text = std::fs::read_to_string(fixtures.join("cases.yaml")).unwrap();
        let source = std::fs::read_to_string(root.join("src/lib.rs")).unwrap();
        // The empty input of each decision: no offerings, no plans, no nodes.
        let empty = if source.contains("export_scorer!") {
            "order: []"
        } else if source.contains("export_consolidator!") {
            "plans: []"
        } else {
            "totalNodes: 0"
        };
        for edge in ["error:", empty] {
            assert!(text.contains(edge), "{name}: fixtures cover {edge:?} (bad config, empty input)");
        }
    }
}

#[test]
fn every_gallery_scenario_shows_its_effect() {
    for (name, effect, what) in claims() {
        let scenario = repo().join(format!("examples/scenarios/gallery/{name}.yaml"));
        let dir = built();
        let o = tenon(&[
            "simulate",
            "--policy-dir",
            dir.to_str().unwrap(),
            "--compare",
            "default",
            name,
            // The effect of each policy is the point, not its speed on a loaded machine.
            "--policy-deadline-ms",
            "2000",
            "--json",
            scenario.to_str().unwrap(),
        ]);
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{name}: expectations failed:\n{out}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let (a, b) = (&v["a"]["report"], &v["b"]["report"]);
        let summary =
            |r: &serde_json::Value| format!("{} NodeClaims, ${} total", r["nodeclaimsCreated"], r["totalCost"]);
        assert!(effect(a, b), "{name}: expected {what}; default {}, {name} {}", summary(a), summary(b));
    }
}

/// `tenon check` with a policy store asks each policy (contract 0.2.0) whether it accepts the
/// configuration the NodePool gives it, before anything is applied.
#[test]
fn check_asks_each_policy_about_its_configuration() {
    let np = std::fs::read_to_string(repo().join("examples/seeds/lab-general/nodepool-lab-general.yaml")).unwrap();
    let annotated = |config: &str| {
        np.replacen(
            "  name: lab-general\n",
            &format!(
                "  name: lab-general\n  annotations:\n    tenon.dev/disruption-policy: business-hours\n    tenon.dev/disruption-config: '{config}'\n"
            ),
            1,
        )
    };
    let dir = std::env::temp_dir().join(format!("tenon-check-configs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("nodepool.yaml");
    let store = built().display().to_string();
    let check = |config: &str| {
        std::fs::write(&file, annotated(config)).unwrap();
        let o = tenon(&["check", "--policy-dir", &store, file.to_str().unwrap()]);
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (code, text) =
        check(r#"{"timeZone": "Mars/Olympus", "businessHours": {"days": ["mon"], "start": "09:00", "end": "18:00"}}"#);
    assert_eq!(code, Some(1), "{text}");
    assert!(
        text.contains("metadata.annotations.tenon.dev/disruption-config: tenon.dev/disruption-config: policy business-hours refuses its configuration: config: timeZone: unknown time zone \"Mars/Olympus\""),
        "{text}"
    );
    let (code, text) = check(
        r#"{"timeZone": "Australia/Sydney", "businessHours": {"days": ["mon"], "start": "09:00", "end": "18:00"}}"#,
    );
    assert_eq!(code, Some(0), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn inspect_names_the_contract_version_a_policy_implements() {
    let wasm = built().join("business_hours.wasm");
    let o = tenon(&["policy", "inspect", wasm.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("world:   tenon:policy/disruption-budget@0.2.0"), "{text}");
    assert!(text.contains("tenon:policy/time@0.2.0"), "the host's time zones imported: {text}");
}
