//! (Long: every `tenon policy` subcommand is here, one function each, with their tests.)
//! `tenon policy …`: test, inspect, benchmark and scaffold WebAssembly policies.

use anyhow::{Context, bail};
use clap::{Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tenon_policy::policy::World;
use tenon_policy::testing::{Harness, fixture_files};
use tenon_policy::{Limits, PolicyEngine};

#[derive(Subcommand)]
pub enum PolicyCommand {
    /// Run YAML fixtures against a policy; one line per case, exit 1 on any failure.
    Test {
        /// The policy component (`.wasm`).
        wasm: PathBuf,
        /// Fixture files or directories of them.
        #[arg(required = true)]
        fixtures: Vec<PathBuf>,
        /// Run with an instruction budget instead of a wall-clock deadline (deterministic).
        #[arg(long)]
        fuel: Option<u64>,
        /// Per-call deadline in milliseconds.
        #[arg(long, default_value_t = 50)]
        deadline_ms: u64,
        /// One JSON object on stdout instead of a line per case (the exit status is the same).
        #[arg(long)]
        json: bool,
    },
    /// Show a policy's world, imports, exports and digest.
    Inspect {
        wasm: PathBuf,
        /// One JSON object on stdout.
        #[arg(long)]
        json: bool,
    },
    /// Measure compile time, cold load from the precompile cache, and call latency.
    Bench {
        wasm: PathBuf,
        /// A fixture file; its first case is the call measured.
        fixture: PathBuf,
        #[arg(long, default_value_t = 2000)]
        iterations: usize,
        #[arg(long)]
        json: bool,
    },
    /// Build a policy crate (wasm32-wasip2, release), run its `fixtures/`, and print the pin
    /// and the annotation that deploys it.
    Build {
        /// The policy crate (default: the current directory).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Then push it to this tag (`oci://REGISTRY/REPOSITORY:TAG`) and print the pinned
        /// reference to annotate with.
        #[arg(long, value_name = "OCI_REFERENCE")]
        push: Option<String>,
        /// Registries (`host[:port]`) spoken to over plain HTTP; loopback ones always are.
        #[arg(long, value_name = "REGISTRY")]
        insecure_registry: Vec<String>,
    },
    /// Push a policy component to an OCI registry tag and print the pinned reference
    /// (`oci://REGISTRY/REPOSITORY@sha256:…`) NodePools name it by.
    ///
    /// Credentials, when the registry needs them: TENON_OCI_USERNAME and TENON_OCI_PASSWORD
    /// (sent to this registry only), else your Docker config.json.
    Push {
        wasm: PathBuf,
        /// `oci://REGISTRY/REPOSITORY:TAG`.
        reference: String,
        /// Registries (`host[:port]`) spoken to over plain HTTP; loopback ones always are.
        #[arg(long, value_name = "REGISTRY")]
        insecure_registry: Vec<String>,
    },
    /// Pull an `oci://` policy into this machine's cache, where `tenon simulate` and
    /// `tenon check` find it, and print the component's path.
    Pull {
        reference: String,
        #[arg(long, value_name = "REGISTRY")]
        insecure_registry: Vec<String>,
    },
    /// Scaffold a policy crate that builds with `cargo build --target wasm32-wasip2 --release`.
    New {
        /// Crate name, e.g. `price-per-vcpu`.
        name: String,
        #[arg(long, value_enum)]
        kind: Kind,
        /// Where to create it (default: ./NAME).
        #[arg(long)]
        dir: Option<PathBuf>,
        /// Path of tenon-policy-sdk (default: the SDK of the tree this tenon was built from).
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Kind {
    Scorer,
    Consolidator,
    Budget,
}

pub fn run(cmd: PolicyCommand) -> anyhow::Result<u8> {
    match cmd {
        PolicyCommand::Test { wasm, fixtures, fuel, deadline_ms, json } => {
            test(&wasm, &fixtures, fuel, deadline_ms, json)
        }
        PolicyCommand::Inspect { wasm, json } => inspect(&wasm, json),
        PolicyCommand::Bench { wasm, fixture, iterations, json } => bench(&wasm, &fixture, iterations, json),
        PolicyCommand::New { name, kind, dir, sdk } => scaffold(&name, kind, dir, sdk),
        PolicyCommand::Build { dir, push, insecure_registry } => build(&dir, push.as_deref(), &insecure_registry),
        PolicyCommand::Push { wasm, reference, insecure_registry } => {
            println!("{}", oci::push(&wasm, &reference, &insecure_registry)?);
            Ok(0)
        }
        PolicyCommand::Pull { reference, insecure_registry } => {
            println!("{}", oci::pull(&reference, &insecure_registry)?.display());
            Ok(0)
        }
    }
}

#[cfg(feature = "oci")]
use crate::policy_oci as oci;

/// Without the `oci` feature (the README's quick build) the OCI commands say how to get them.
#[cfg(not(feature = "oci"))]
mod oci {
    const WHY: &str =
        "this tenon was built without OCI support: build it with the default features (or --features oci)";
    pub fn push(_: &std::path::Path, _: &str, _: &[String]) -> anyhow::Result<String> {
        anyhow::bail!(WHY)
    }
    pub fn pull(_: &str, _: &[String]) -> anyhow::Result<std::path::PathBuf> {
        anyhow::bail!(WHY)
    }
}

/// The `[package]` name of a policy crate's manifest.
fn package_name(manifest: &str) -> Option<String> {
    let mut in_package = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if let Some(value) = line.strip_prefix("name").map(str::trim).and_then(|v| v.strip_prefix('='))
            && in_package
        {
            return Some(value.trim().trim_matches('"').to_string());
        }
    }
    None
}

fn build(dir: &Path, push: Option<&str>, insecure: &[String]) -> anyhow::Result<u8> {
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).with_context(|| {
        format!("{}: no policy crate here (`tenon policy new NAME --kind scorer` makes one)", manifest.display())
    })?;
    let name = package_name(&text).with_context(|| format!("{}: no [package] name", manifest.display()))?;
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| dir.join("target"), PathBuf::from);
    let out = tenon_policy::testing::build_components(&manifest, &target).map_err(anyhow::Error::msg)?;
    let wasm = out.join(format!("{}.wasm", name.replace('-', "_")));
    let engine = PolicyEngine::new(Limits::default(), None)?;
    let bytes = std::fs::read(&wasm).with_context(|| format!("reading {}", wasm.display()))?;
    let (p, _) = engine.load(&name, &bytes)?;
    let version = if p.validates_config() { "0.2.0" } else { "0.1.0" };
    println!("built {} (tenon:policy/{}@{version}, {} bytes)", wasm.display(), p.world.as_str(), bytes.len());
    let fixtures = dir.join("fixtures");
    if fixtures.is_dir() && test(&wasm, &[fixtures], None, 50, false)? != 0 {
        return Ok(1);
    }
    let annotation = match p.world {
        World::Scorer => "tenon.dev/scoring-policy",
        World::Consolidator => "tenon.dev/consolidation-policy",
        World::DisruptionBudget => "tenon.dev/disruption-policy",
    };
    if let Some(reference) = push {
        let pin = oci::push(&wasm, reference, insecure)?;
        println!("pushed:  {pin}");
        println!("deploy:  kubectl annotate nodepool NODEPOOL {annotation}={pin} --overwrite");
        return Ok(0);
    }
    let pin = format!("{}@sha256:{}", p.name, p.sha256);
    println!("pin as:  {pin}");
    println!(
        "deploy:  push it (--push oci://REGISTRY/REPOSITORY:TAG) and annotate with what that prints, or put {} in the\n         controller's policy store (a ConfigMap in policies.extraConfigMaps), then\n         kubectl annotate nodepool NODEPOOL {annotation}={pin} --overwrite",
        wasm.file_name().map_or_else(String::new, |f| f.to_string_lossy().into_owned())
    );
    Ok(0)
}

fn test(wasm: &Path, fixtures: &[PathBuf], fuel: Option<u64>, deadline_ms: u64, json: bool) -> anyhow::Result<u8> {
    // With fuel the deadline is only a backstop.
    let deadline_ms = if fuel.is_some() { deadline_ms.max(60_000) } else { deadline_ms };
    let harness = Harness::with_limits(wasm, Limits { fuel, deadline_ms, ..Limits::default() })
        .with_context(|| format!("loading {}", wasm.display()))?;
    let mut results = Vec::new();
    for file in fixture_files(fixtures) {
        results.extend(harness.run_fixtures(&file)?);
    }
    if results.is_empty() {
        bail!("no fixture cases found in {fixtures:?}");
    }
    let failed = results.iter().filter(|r| !r.passed).count();
    let passed = results.len() - failed;
    if json {
        let cases: Vec<serde_json::Value> = results
            .iter()
            .map(|r| serde_json::json!({"file": r.file, "name": r.name, "passed": r.passed, "detail": r.detail}))
            .collect();
        let (name, sha256) = (harness.policy().name.as_str(), harness.policy().sha256.as_str());
        let report =
            serde_json::json!({"policy": name, "sha256": sha256, "passed": passed, "failed": failed, "cases": cases});
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for r in &results {
            if r.passed {
                println!("ok   {}: {}", r.file, r.name);
            } else {
                println!("FAIL {}: {}: {}", r.file, r.name, r.detail);
            }
        }
        println!("{passed} passed, {failed} failed");
    }
    Ok(if failed > 0 { 1 } else { 0 })
}

fn inspect(wasm: &Path, json: bool) -> anyhow::Result<u8> {
    let bytes = std::fs::read(wasm).with_context(|| format!("reading {}", wasm.display()))?;
    let engine = PolicyEngine::new(Limits::default(), None)?;
    let (p, _) =
        engine.load(&wasm.file_stem().and_then(|s| s.to_str()).unwrap_or("policy").replace('_', "-"), &bytes)?;
    // A component exporting `validate-config` implements contract 0.2.0.
    let version = if p.validates_config() { "0.2.0" } else { "0.1.0" };
    let world = format!("tenon:policy/{}@{version}", p.world.as_str());
    let pin = format!("{}@sha256:{}", p.name, p.sha256);
    if json {
        let report = serde_json::json!({
            "policy": p.name, "world": world, "sha256": p.sha256, "size": bytes.len(), "pin": pin,
            "exports": p.exports, "imports": p.imports,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(0);
    }
    println!("policy:  {}", p.name);
    println!("world:   {world}");
    println!("sha256:  {}", p.sha256);
    println!("size:    {} bytes", bytes.len());
    println!("pin as:  {pin}");
    println!("exports:");
    for e in &p.exports {
        println!("  {e}");
    }
    println!("imports:");
    for i in &p.imports {
        println!("  {i}");
    }
    Ok(0)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn bench(wasm: &Path, fixture: &Path, iterations: usize, json: bool) -> anyhow::Result<u8> {
    if iterations == 0 {
        bail!("--iterations must be at least 1");
    }
    let bytes = std::fs::read(wasm).with_context(|| format!("reading {}", wasm.display()))?;
    let cache = std::env::temp_dir().join(format!("tenon-policy-bench-{}", std::process::id()));
    let name = wasm.file_stem().and_then(|s| s.to_str()).unwrap_or("policy").to_string();
    let t = Instant::now();
    let (_, _) = PolicyEngine::new(Limits::default(), Some(cache.clone()))?.load(&name, &bytes)?;
    let compile = t.elapsed().as_secs_f64();
    // A new engine, as after a restart: the component comes from the precompile cache.
    let engine = PolicyEngine::new(Limits::default(), Some(cache.clone()))?;
    let t = Instant::now();
    let (_, path) = engine.load(&name, &bytes)?;
    let cold = t.elapsed().as_secs_f64();
    let _ = std::fs::remove_dir_all(&cache);
    anyhow::ensure!(path == tenon_policy::engine::LoadPath::FromCache, "the second load did not come from the cache");
    let harness = Harness::load(wasm)?;
    let first = harness.run_fixtures(fixture)?;
    let Some(case) = first.first() else { bail!("{} has no cases", fixture.display()) };
    anyhow::ensure!(case.passed, "the fixture's first case fails: {}", case.detail);
    let policy = harness.policy();
    // One decision per sample: fresh store, instantiation, the call, checking the answer.
    let mut results = Vec::new();
    match policy.world {
        tenon_policy::World::Scorer => {
            for offerings in [100usize, 600] {
                let types = tenon_core::catalog::synthetic(offerings.div_ceil(5));
                let mut candidates: Vec<tenon_core::scorer::Candidate> = types
                    .iter()
                    .flat_map(|t| {
                        t.offerings.iter().map(move |o| tenon_core::scorer::Candidate { instance_type: t, offering: o })
                    })
                    .take(offerings)
                    .collect();
                candidates.sort_by(|a, b| a.offering.price.total_cmp(&b.offering.price));
                let requests = tenon_core::resources::Resources::new(1000, 1 << 30, 1);
                let input = tenon_core::scorer::ScoringInput {
                    nodepool: "bench",
                    now: 0,
                    requests: &requests,
                    pod_count: 1,
                    candidates,
                };
                let wit = tenon_policy::adapters::scoring_input(&input, ("bench".into(), vec![], "{}".into()));
                let samples = time(iterations, || {
                    let scores = policy.rank(&wit, 0).map_err(|f| anyhow::anyhow!("{f}"))?;
                    tenon_policy::adapters::ranking_from_scores(&scores, offerings)
                        .map_err(|f| anyhow::anyhow!("{f}"))?;
                    Ok(())
                })?;
                results.push((format!("rank {offerings} offerings"), samples));
            }
        }
        tenon_policy::World::Consolidator => {
            let plans = vec![
                tenon_core::disruption::consolidator::PlanView {
                    method: tenon_core::disruption::Method::SingleNodeConsolidation,
                    candidates: vec![],
                    replacement: None,
                    savings_per_hour: 0.1,
                    now: 0,
                };
                3
            ];
            let wit = tenon_policy::adapters::consolidation_input(&plans, ("bench".into(), vec![], "{}".into()), 0);
            let samples = time(iterations, || policy.review(&wit, 0).map(|_| ()).map_err(|f| anyhow::anyhow!("{f}")))?;
            results.push(("review 3 plans".into(), samples));
        }
        tenon_policy::World::DisruptionBudget => {
            let budgets = vec![
                tenon_core::model::Budget {
                    nodes: tenon_core::model::BudgetNodes::Percent(10),
                    reasons: None,
                    window: None
                };
                3
            ];
            let ctx = tenon_core::disruption::budgets::BudgetContext {
                nodepool: "bench",
                reason: tenon_core::model::DisruptionReason::Underutilized,
                now: 0,
                total_nodes: 100,
                disrupting: 1,
                budgets: &budgets,
            };
            let wit = tenon_policy::adapters::budget_input(&ctx, ("bench".into(), vec![], "{}".into()));
            let samples = time(iterations, || policy.allowed(&wit, 0).map(|_| ()).map_err(|f| anyhow::anyhow!("{f}")))?;
            results.push(("allowed with 3 budgets".into(), samples));
        }
    }
    if json {
        let calls: Vec<serde_json::Value> = results
            .iter()
            .map(|(what, s)| serde_json::json!({"call": what, "p50_seconds": percentile(s, 0.5), "p99_seconds": percentile(s, 0.99)}))
            .collect();
        println!(
            "{}",
            serde_json::json!({"policy": name, "compile_seconds": compile, "cold_load_seconds": cold, "calls": calls, "iterations": iterations})
        );
    } else {
        println!("{name}: compile {:.1} ms, cold load from the precompile cache {:.2} ms", compile * 1e3, cold * 1e3);
        for (what, s) in &results {
            println!(
                "  {what}: p50 {:.1} µs, p99 {:.1} µs over {iterations} calls (fresh store each)",
                percentile(s, 0.5) * 1e6,
                percentile(s, 0.99) * 1e6
            );
        }
    }
    Ok(0)
}

fn time(iterations: usize, mut call: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<Vec<f64>> {
    call()?;
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        call()?;
        samples.push(t.elapsed().as_secs_f64());
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples)
}

/// The SDK of the tree this tenon was built from.
const SDK: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../policies/sdk");
/// The SDK version a scaffold asks for (policies/Cargo.toml's; a test keeps them equal).
const SDK_VERSION: &str = "0.1.0";

/// Under `cargo run`/`cargo test` the tree's location comes from the environment: a build
/// reused from a clone at another path must not point at that clone.
fn default_sdk() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(|d| PathBuf::from(d).join("../../policies/sdk"))
        .filter(|p| p.join("Cargo.toml").is_file())
        .unwrap_or_else(|| PathBuf::from(SDK))
}

fn scaffold(name: &str, kind: Kind, dir: Option<PathBuf>, sdk: Option<PathBuf>) -> anyhow::Result<u8> {
    if name.is_empty()
        || !name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        || !name.as_bytes()[0].is_ascii_lowercase()
    {
        bail!(
            "policy name {name:?}: use lowercase letters, digits and '-', starting with a letter (e.g. price-per-vcpu)"
        );
    }
    let dir = dir.unwrap_or_else(|| PathBuf::from(name));
    if dir.exists() {
        bail!("{} already exists", dir.display());
    }
    let sdk = sdk.unwrap_or_else(default_sdk);
    let sdk = sdk
        .canonicalize()
        .with_context(|| format!("tenon-policy-sdk not found at {} (pass --sdk PATH)", sdk.display()))?;
    let ident: String = name.split('-').map(|w| w[..1].to_uppercase() + &w[1..]).collect();
    let (lib, fixture) = match kind {
        Kind::Scorer => (SCORER_LIB, SCORER_FIXTURE),
        Kind::Consolidator => (CONSOLIDATOR_LIB, CONSOLIDATOR_FIXTURE),
        Kind::Budget => (BUDGET_LIB, BUDGET_FIXTURE),
    };
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::create_dir_all(dir.join("fixtures"))?;
    let cargo = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n[lib]\ncrate-type = [\"cdylib\", \"rlib\"]\n\n[dependencies]\n# Contract 0.2.0: `validate-config` and the host's time-zone database.\ntenon-policy-sdk = {{ version = \"{SDK_VERSION}\", features = [\"v0-2\"] }}\nserde = {{ version = \"1\", features = [\"derive\"] }}\n\n# tenon-policy-sdk is not in a public registry: this takes it from a Tenon checkout.\n# Point it at yours, or drop this section where your registry serves the SDK.\n[patch.crates-io]\ntenon-policy-sdk = {{ path = {:?} }}\n\n# A standalone crate, not part of any enclosing workspace.\n[workspace]\n\n[profile.release]\nopt-level = \"s\"\nlto = true\npanic = \"abort\"\nstrip = true\n",
        sdk.display().to_string()
    );
    std::fs::write(dir.join("Cargo.toml"), cargo)?;
    std::fs::write(dir.join("src/lib.rs"), lib.replace("POLICY", &ident))?;
    std::fs::write(dir.join("fixtures/basic.yaml"), fixture)?;
    std::fs::write(dir.join(".gitignore"), "/target\n")?;
    let wasm = format!("target/wasm32-wasip2/release/{}.wasm", name.replace('-', "_"));
    std::fs::write(
        dir.join("README.md"),
        format!(
            "# {name}\n\nA Tenon policy.\n\n```sh\ncargo test                                          # unit tests, on the host\ntenon policy build                                  # the component, its fixtures, its pin\ntenon policy build --push oci://REGISTRY/REPO:TAG   # …then published; prints what to annotate\ntenon policy test {wasm} fixtures/ --json\n```\n"
        ),
    )?;
    println!(
        "created {} ({}); next: tenon policy build {} [--push oci://REGISTRY/REPOSITORY:TAG]",
        dir.display(),
        match kind {
            Kind::Scorer => "scorer",
            Kind::Consolidator => "consolidator",
            Kind::Budget => "disruption-budget",
        },
        dir.display()
    );
    Ok(0)
}

const SCORER_LIB: &str = r#"//! A scoring policy: one score per offering, lower ranks first.
//!
//! `tenon.dev/scoring-config`: no settings yet; add them to `Settings`.

use serde::Deserialize;
use tenon_policy_sdk::scorer::{Guest, ScoringInput};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Settings {}

pub struct POLICY;

/// Called when a NodePool names the policy: a bad configuration shows on the NodePool then.
impl tenon_policy_sdk::Config for POLICY {
    fn validate_config(config: &str) -> Result<(), String> {
        tenon_policy_sdk::config::<Settings>(config).map(drop)
    }
}

impl Guest for POLICY {
    fn rank(input: ScoringInput) -> Result<Vec<f64>, String> {
        let _settings: Settings = tenon_policy_sdk::config(&input.nodepool.config)?;
        // Karpenter's behaviour, price order. `.prefer(|o| …)` before `.scores()` ranks the
        // offerings you prefer first, e.g. `input.architecture(o) == Some("arm64")`.
        Ok(input.ranking().scores())
    }
}

tenon_policy_sdk::export_scorer!(POLICY);

#[cfg(test)]
mod tests {
    use super::*;
    use tenon_policy_sdk::scorer::{InstanceType, Nodepool, Offering, Resources};

    fn resources(cpu: i64) -> Resources {
        Resources { cpu_millis: cpu, memory_bytes: 0, pods: 0, ephemeral_storage_bytes: 0, extended: vec![] }
    }

    #[test]
    fn cheaper_offerings_score_lower() {
        let t = |name: &str| InstanceType { name: name.into(), labels: vec![], capacity: resources(2000), allocatable: resources(1900) };
        let o = |i: u32, price: f64| Offering { instance_type: i, zone: 0, capacity_type: 0, price };
        let input = ScoringInput {
            nodepool: Nodepool { name: "default".into(), labels: vec![], config: "{}".into() },
            now: 0,
            requests: resources(1000),
            pod_count: 1,
            instance_types: vec![t("a.large"), t("b.large")],
            label_keys: vec![],
            zones: vec!["zone-a".into()],
            capacity_types: vec!["on-demand".into()],
            offerings: vec![o(0, 0.05), o(1, 0.10)],
        };
        let scores = POLICY::rank(input).unwrap();
        assert!(scores[0] < scores[1]);
    }
}
"#;

const SCORER_FIXTURE: &str = r#"cases:
  - name: the cheaper offering ranks first
    instanceTypes:
      - {name: a.large, capacity: {cpu: "2", memory: 8Gi, pods: "29"}}
      - {name: b.large, capacity: {cpu: "2", memory: 8Gi, pods: "29"}}
    offerings:
      - {instanceType: b.large, price: 0.10}
      - {instanceType: a.large, price: 0.05}
    expect: {first: a.large}
"#;

const CONSOLIDATOR_LIB: &str = r#"//! A consolidation policy: order the round's plans and approve or reject each.
//!
//! `tenon.dev/consolidation-config`: none read yet; check yours in `validate_config`.

use tenon_policy_sdk::consolidator::{ConsolidationInput, Guest, PlanReview, Verdict};

pub struct POLICY;

/// Accepts any configuration: parse and check yours here (see `tenon_policy_sdk::config`).
impl tenon_policy_sdk::Config for POLICY {}

impl Guest for POLICY {
    fn review(input: ConsolidationInput) -> Result<PlanReview, String> {
        // Start from Karpenter's behaviour: approve everything. Change this to your rule.
        let n = input.plans.len() as u32;
        Ok(PlanReview { order: (0..n).collect(), verdicts: (0..n).map(|_| Verdict { approve: true, reason: String::new() }).collect() })
    }
}

tenon_policy_sdk::export_consolidator!(POLICY);

#[cfg(test)]
mod tests {
    use super::*;
    use tenon_policy_sdk::consolidator::{Method, Nodepool, Plan};

    #[test]
    fn approves_every_plan() {
        let plan = Plan { method: Method::Emptiness, candidates: vec![], replacement: None, savings_per_hour: 0.1 };
        let input = ConsolidationInput { nodepool: Nodepool { name: "default".into(), labels: vec![], config: "{}".into() }, now: 0, plans: vec![plan] };
        assert!(POLICY::review(input).unwrap().verdicts[0].approve);
    }
}
"#;

const CONSOLIDATOR_FIXTURE: &str = r#"cases:
  - name: an empty node may go
    plans:
      - method: emptiness
        candidates: [{node: ip-10-0-1-1, instanceType: m6a.large, price: 0.0864}]
        savingsPerHour: 0.0864
    expect: {approved: [0]}
"#;

const BUDGET_LIB: &str = r#"//! A disruption-budget policy: how many nodes may be disrupted now.
//!
//! `tenon.dev/disruption-config`: none read yet; check yours in `validate_config`.

use tenon_policy_sdk::budget::{Allowance, BudgetInput, Guest};

pub struct POLICY;

/// Accepts any configuration: parse and check yours here (see `tenon_policy_sdk::config`).
impl tenon_policy_sdk::Config for POLICY {}

impl Guest for POLICY {
    fn allowed(input: BudgetInput) -> Result<Allowance, String> {
        // A simple rule to start from: one node at a time.
        let allowed = 1u32.saturating_sub(input.disrupting);
        Ok(Allowance { allowed, reason: format!("one at a time, {} disrupting", input.disrupting) })
    }
}

tenon_policy_sdk::export_budget!(POLICY);

#[cfg(test)]
mod tests {
    use super::*;
    use tenon_policy_sdk::budget::{Nodepool, Reason};

    #[test]
    fn one_at_a_time() {
        let input = |disrupting| BudgetInput {
            nodepool: Nodepool { name: "default".into(), labels: vec![], config: "{}".into() },
            reason: Reason::Underutilized,
            now: 0,
            total_nodes: 10,
            disrupting,
            budgets: vec![],
        };
        assert_eq!(POLICY::allowed(input(0)).unwrap().allowed, 1);
        assert_eq!(POLICY::allowed(input(1)).unwrap().allowed, 0);
    }
}
"#;

const BUDGET_FIXTURE: &str = r#"cases:
  - name: one node at a time
    totalNodes: 10
    expect: {allowed: 1}
  - name: none while one is disrupting
    totalNodes: 10
    disrupting: 1
    expect: {allowed: 0}
"#;

#[cfg(test)]
mod tests {
    #[test]
    fn scaffolds_ask_for_the_sdk_version_of_this_tree() {
        let manifest = include_str!("../../../policies/Cargo.toml");
        assert!(manifest.contains(&format!("version = \"{}\"", super::SDK_VERSION)), "policies/Cargo.toml");
    }
}
