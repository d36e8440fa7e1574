//! `tenon simulate`: run a scenario in virtual time and print what happens; `--compare` runs
//! it twice with different policies and puts the outcomes side by side.

use anyhow::{Context, bail};
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use tenon_api::policy::PolicyRef;
use tenon_core::disruption::{DefaultPolicies, PolicySet};
use tenon_core::scorer::{PriceScorer, Scorer};
use tenon_policy::cache::PrecompileCache;
use tenon_policy::cluster::{ClusterPolicies, NodePoolInfo};
use tenon_policy::{Limits, PolicyEngine, PolicyStore};
use tenon_sim::world::World;
use tenon_sim::{Report, Scenario, run};

/// How to run a scenario.
pub struct Options<'a> {
    pub json: bool,
    pub quiet: bool,
    pub report: Option<&'a Path>,
    pub compare: Option<(String, String)>,
    pub policy_dir: Option<PathBuf>,
    /// Wall-clock limit of a policy call, as the controller's `--policy-deadline-ms`.
    pub policy_deadline_ms: u64,
}

fn policy_dir(given: Option<PathBuf>) -> PathBuf {
    given
        .or_else(|| std::env::var_os("TENON_POLICY_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("policies/target/wasm32-wasip2/release"))
}

fn nodepools(scenario: &Scenario) -> Vec<NodePoolInfo> {
    scenario
        .documents
        .iter()
        .filter(|d| d["kind"] == "NodePool")
        .map(|d| {
            let map = |v: &serde_json::Value| -> std::collections::BTreeMap<String, String> {
                v.as_object()
                    .into_iter()
                    .flatten()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                    .collect()
            };
            NodePoolInfo {
                name: d["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                labels: map(&d["spec"]["template"]["metadata"]["labels"]),
                annotations: map(&d["metadata"]["annotations"]),
            }
        })
        .collect()
}

/// The policies for a run: the NodePools' own annotations, or `refs` (`default` or a
/// comma-separated list of policy references) for every NodePool.
/// Where policies come from and how long a call may take.
struct Store<'a> {
    dir: &'a Path,
    deadline_ms: u64,
}

fn policies(scenario: &Scenario, refs: Option<&str>, from: &Store<'_>) -> anyhow::Result<Option<ClusterPolicies>> {
    let pools = nodepools(scenario);
    let overrides: Option<Vec<PolicyRef>> = match refs {
        Some("default") => return Ok(None),
        Some(list) => Some(
            list.split(',')
                .map(|r| PolicyRef::parse(r).with_context(|| format!("policy reference {r:?}")))
                .collect::<anyhow::Result<_>>()?,
        ),
        None => None,
    };
    let annotated = pools.iter().any(|p| p.annotations.keys().any(|k| k.starts_with("tenon.dev/")));
    if overrides.is_none() && !annotated {
        return Ok(None);
    }
    let limits = Limits { deadline_ms: from.deadline_ms, ..Limits::default() };
    let engine = PolicyEngine::new(limits, PrecompileCache::default_dir())?;
    let mut store = PolicyStore::new(from.dir, engine);
    // `oci://` references are read from what `tenon policy pull` fetched; nothing is pulled.
    if let Some(cache) = tenon_policy::oci_cache::OciCache::default_dir() {
        store = store.with_oci(tenon_policy::oci_cache::OciCache::new(cache), false);
    }
    let (set, problems) = ClusterPolicies::resolve(&store, &pools, overrides.as_deref());
    if !problems.is_empty() {
        let lines: Vec<String> = problems.iter().map(|(p, e)| format!("NodePool {p}: {e}")).collect();
        bail!("policies could not be loaded from {}:\n  {}", from.dir.display(), lines.join("\n  "));
    }
    Ok(Some(set))
}

fn run_once(scenario: &Scenario, set: Option<&ClusterPolicies>, live: bool) -> anyhow::Result<Report> {
    let (scorer, policy_set): (&dyn Scorer, &dyn PolicySet) = match set {
        Some(s) => (s, s),
        None => (&PriceScorer, &DefaultPolicies),
    };
    let progress = std::io::stderr().is_terminal() && scenario.duration > 3600;
    let mut printed = 0;
    let mut last = -1;
    let report = run(scenario, scorer, policy_set, |w| {
        if live {
            for e in &w.events[printed..] {
                println!("{}  {:<24} {:<44} {}", World::describe_time(e.t), e.reason, e.object, e.message);
            }
        }
        printed = w.events.len();
        let pct = 100 * w.elapsed() / scenario.duration.max(1);
        if progress && pct != last {
            last = pct;
            eprint!("\r{pct:>3}% {} pods pending, {} running, ${:.2}/h", w.pending(), w.running(), w.cost_per_hour());
            let _ = std::io::stderr().flush();
        }
    })?;
    if progress {
        eprintln!();
    }
    Ok(report)
}

fn summary(r: &Report) -> String {
    let p = |v: Option<i64>| v.map_or("-".to_string(), |s| format!("{s}s"));
    let failed = match r.policy_failure_count() {
        0 => String::new(),
        n => format!("; {n} policy calls failed and their fallback decided ({})", failures(r)),
    };
    format!(
        "{} NodeClaims created, {} disruptions, ${:.4} spent, ${:.4}/h at the end; pods waited p50 {} / max {}{failed} (spot prices are a model)",
        r.nodeclaims_created,
        r.disruptions,
        r.total_cost,
        r.final_cost_per_hour,
        p(r.pending_p50_seconds),
        p(r.pending_max_seconds)
    )
}

/// "default-scoring/scoring timeout ×12, …", or "none".
fn failures(r: &Report) -> String {
    if r.policy_failures.is_empty() {
        return "none".into();
    }
    let parts: Vec<String> =
        r.policy_failures.iter().map(|f| format!("{}/{} {} ×{}", f.policy, f.hook, f.kind, f.count)).collect();
    parts.join(", ")
}

pub fn simulate(path: &Path, o: Options<'_>) -> anyhow::Result<u8> {
    let scenario = Scenario::load(path).with_context(|| format!("loading scenario {}", path.display()))?;
    let dir = policy_dir(o.policy_dir.clone());
    let from = Store { dir: &dir, deadline_ms: o.policy_deadline_ms };
    if let Some((a, b)) = &o.compare {
        return compare(&scenario, a, b, &from, o.json);
    }
    let set = policies(&scenario, None, &from)?;
    let live = !o.json && !o.quiet;
    if live {
        println!("scenario: {} ({})", scenario.name, World::describe_time(scenario.duration));
        if !scenario.description.is_empty() {
            println!("{}", scenario.description.trim());
        }
    }
    let report = run_once(&scenario, set.as_ref(), live)?;
    if let Some(out) = o.report {
        let page = tenon_sim::report::html(&report).map_err(anyhow::Error::msg)?;
        std::fs::write(out, page).with_context(|| format!("writing {}", out.display()))?;
        if !o.json {
            println!("report: {}", out.display());
        }
    }
    if o.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("summary: {}", summary(&report));
        if report.failures.is_empty() {
            println!("expectations: {} checked, all held", report.expectations_checked);
        } else {
            for f in &report.failures {
                println!("FAILED {f}");
            }
        }
    }
    Ok(if report.failures.is_empty() { 0 } else { 1 })
}

fn compare(scenario: &Scenario, a: &str, b: &str, from: &Store<'_>, json: bool) -> anyhow::Result<u8> {
    let (sa, sb) = (policies(scenario, Some(a), from)?, policies(scenario, Some(b), from)?);
    let ra = run_once(scenario, sa.as_ref(), false)?;
    let rb = run_once(scenario, sb.as_ref(), false)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"a": {"policies": a, "report": ra}, "b": {"policies": b, "report": rb}})
            )?
        );
    } else {
        println!("scenario: {} ({})", scenario.name, World::describe_time(scenario.duration));
        let secs = |v: Option<i64>| v.map_or("-".to_string(), |s| format!("{s}s"));
        let held = |r: &Report| {
            if r.failures.is_empty() {
                format!("{} held", r.expectations_checked)
            } else {
                format!("{} failed", r.failures.len())
            }
        };
        let rows: Vec<(&str, String, String)> = vec![
            ("policies", a.to_string(), b.to_string()),
            ("total cost", format!("${:.4}", ra.total_cost), format!("${:.4}", rb.total_cost)),
            (
                "cost per hour at the end",
                format!("${:.4}", ra.final_cost_per_hour),
                format!("${:.4}", rb.final_cost_per_hour),
            ),
            ("pod wait p50", secs(ra.pending_p50_seconds), secs(rb.pending_p50_seconds)),
            ("pod wait max", secs(ra.pending_max_seconds), secs(rb.pending_max_seconds)),
            ("NodeClaims created", ra.nodeclaims_created.to_string(), rb.nodeclaims_created.to_string()),
            ("disruptions", ra.disruptions.to_string(), rb.disruptions.to_string()),
            ("policy failures", failures(&ra), failures(&rb)),
            ("expectations", held(&ra), held(&rb)),
        ];
        for (what, x, y) in rows {
            println!("{what:<26} {x:<28} {y}");
        }
        for (side, r) in [("A", &ra), ("B", &rb)] {
            if r.policy_failure_count() > 0 {
                println!(
                    "NOTE ({side}) {} policy calls failed: those decisions are the fallback's, not the policy's",
                    r.policy_failure_count()
                );
            }
            for f in &r.failures {
                println!("FAILED ({side}) {f}");
            }
        }
        println!("(spot prices are a model)");
    }
    Ok(if ra.failures.is_empty() && rb.failures.is_empty() { 0 } else { 1 })
}
