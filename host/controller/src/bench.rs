//! `tenon bench`: time the decision core on Karpenter's benchmark shapes, so users can
//! measure their own sizes.

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tenon_api::policy::PolicyRef;
use tenon_core::ClusterSnapshot;
use tenon_core::catalog::{AwsCatalogOptions, aws, synthetic};
use tenon_core::disruption::PolicySet;
use tenon_core::disruption::{DefaultPolicies, disrupt};
use tenon_core::scorer::PriceScorer;
use tenon_core::workload::{consolidation_benchmark, scheduling_benchmark};
use tenon_policy::cache::PrecompileCache;
use tenon_policy::cluster::{ClusterPolicies, NodePoolInfo};
use tenon_policy::{Limits, PolicyEngine, PolicyStore};

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Scheduling simulation: pending pods of Karpenter's diverse benchmark mix → NodeClaims.
    Scheduling {
        /// Number of pending pods.
        #[arg(long, default_value_t = 1000)]
        pods: usize,
        /// `synthetic`: Karpenter's 400 benchmark types; `catalog`: the real EC2 catalog (us-east-1 prices).
        #[arg(long, value_enum, default_value_t = Catalog::Synthetic)]
        instance_types: Catalog,
        /// Also run the pass with this scorer component ranking every NodeClaim's offerings,
        /// and report its overhead over the built-in price order measured in the same run.
        #[arg(long, value_name = "FILE.wasm")]
        scoring_policy: Option<PathBuf>,
        #[command(flatten)]
        run: RunOptions,
    },
    /// A full disruption pass (emptiness, drift, multi- and single-node consolidation) over
    /// a cluster of mixed EC2 nodes, about ten pods each, ~30% underutilised.
    Consolidation {
        /// Number of nodes.
        #[arg(long, default_value_t = 100)]
        nodes: usize,
        /// Also run the pass with this consolidation component reviewing the plans.
        #[arg(long, value_name = "FILE.wasm")]
        consolidation_policy: Option<PathBuf>,
        /// Also run the pass with this disruption-budget component (with the one above, if
        /// given; both from one directory).
        #[arg(long, value_name = "FILE.wasm")]
        budget_policy: Option<PathBuf>,
        #[command(flatten)]
        run: RunOptions,
    },
}

/// How a benchmark runs and reports.
#[derive(Args, Clone, Copy)]
pub struct RunOptions {
    /// Timed runs; the median is reported.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Workload seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    policy_deadline: crate::policy_deadline::PolicyDeadline,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Catalog {
    Synthetic,
    Catalog,
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<u8> {
    match cmd {
        BenchCommand::Scheduling { pods, instance_types, scoring_policy, run } => {
            scheduling(pods, instance_types, scoring_policy.as_deref(), run)
        }
        BenchCommand::Consolidation { nodes, consolidation_policy, budget_policy, run } => {
            let files: Vec<(&str, &Path)> = [
                ("consolidation-policy", consolidation_policy.as_deref()),
                ("budget-policy", budget_policy.as_deref()),
            ]
            .into_iter()
            .filter_map(|(flag, f)| Some((flag, f?)))
            .collect();
            consolidation(nodes, &files, run)
        }
    }
}

/// Policy components (`(flag, file)`) for every NodePool of `snapshot`, each in the hook of
/// the world it implements, as the controller would run them.
fn wasm_policies(
    files: &[(&str, &Path)],
    snapshot: &ClusterSnapshot,
    deadline_ms: u64,
) -> anyhow::Result<ClusterPolicies> {
    let pools: Vec<NodePoolInfo> = snapshot
        .nodepools
        .iter()
        .map(|np| NodePoolInfo { name: np.name.clone(), labels: np.labels.clone(), annotations: Default::default() })
        .collect();
    let engine = PolicyEngine::new(Limits { deadline_ms, ..Limits::default() }, PrecompileCache::default_dir())?;
    let mut store: Option<(PathBuf, PolicyStore)> = None;
    let mut refs = Vec::new();
    for (flag, file) in files {
        let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = file
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|_| file.extension().is_some_and(|e| e == "wasm"))
            .with_context(|| format!("--{flag} {}: name a .wasm file", file.display()))?;
        refs.push(PolicyRef::parse(name).map_err(|e| anyhow::anyhow!("--{flag} {}: {e}", file.display()))?);
        match &store {
            None => store = Some((dir.to_path_buf(), PolicyStore::new(dir, engine.clone()))),
            Some((d, _)) if d != dir => {
                bail!("--{flag} {}: put the benchmarked policies in one directory", file.display())
            }
            Some(_) => {}
        }
    }
    let (_, store) = store.context("no policy given")?;
    let (set, problems) = ClusterPolicies::resolve(&store, &pools, Some(&refs));
    if let Some((_, why)) = problems.first() {
        bail!("{why}");
    }
    Ok(set)
}

/// How many calls the components (named by their files, as the store loads them) answered.
fn policy_calls(set: &ClusterPolicies, files: &[(&str, &Path)]) -> u64 {
    files
        .iter()
        .filter_map(|(_, f)| f.file_stem()?.to_str())
        .flat_map(|name| ["scoring", "consolidation", "budget"].map(|hook| set.metrics.calls(name, hook)))
        .sum()
}

/// The median of `runs` timings of `pass`, and its last result.
fn median<T>(runs: usize, mut pass: impl FnMut() -> T) -> (f64, T) {
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let start = Instant::now();
        last = Some(pass());
        times.push(start.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    (times[times.len() / 2], last.expect("runs >= 1"))
}

fn scheduling(
    pods: usize,
    catalog: Catalog,
    policy: Option<&Path>,
    RunOptions { runs, seed, json, policy_deadline }: RunOptions,
) -> anyhow::Result<u8> {
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let (types, label) = match catalog {
        Catalog::Synthetic => (synthetic(400), "synthetic-400"),
        Catalog::Catalog => {
            (aws(&AwsCatalogOptions::default()).context("loading the bundled EC2 catalog")?, "ec2-us-east-1")
        }
    };
    let type_count = types.len();
    let snapshot = scheduling_benchmark(pods, Arc::new(types), seed);
    let (seconds, plan) = median(runs, || tenon_core::schedule(&snapshot, &PriceScorer));
    let pods_per_second = if seconds > 0.0 { pods as f64 / seconds } else { f64::INFINITY };
    // The same pass with the component ranking, timed in the same process and run.
    let with_policy = match policy {
        None => None,
        Some(file) => {
            let set = wasm_policies(&[("scoring-policy", file)], &snapshot, policy_deadline.ms)?;
            let (policy_seconds, policy_plan) = median(runs, || tenon_core::schedule(&snapshot, &set));
            let failures = set.take_failures();
            let calls = policy_calls(&set, &[("scoring-policy", file)]) / runs as u64;
            Some((file, policy_seconds, policy_plan, calls, failures))
        }
    };
    if json {
        let mut out = serde_json::json!({
            "pods": pods,
            "nodeclaims": plan.nodeclaims.len(),
            "unschedulable": plan.unschedulable.len(),
            "seconds": seconds,
            "pods_per_second": pods_per_second,
            "instance_types": label,
            "instance_type_count": type_count,
            "runs": runs,
            "threads": 1,
        });
        if let Some((file, policy_seconds, policy_plan, calls, failures)) = &with_policy {
            out["scoring_policy"] = serde_json::json!(file.display().to_string());
            out["native_seconds"] = serde_json::json!(seconds);
            out["policy_seconds"] = serde_json::json!(policy_seconds);
            out["policy_calls"] = serde_json::json!(calls);
            out["policy_failures"] = serde_json::json!(failures.len());
            out["overhead"] = serde_json::json!(policy_seconds / seconds);
            out["policy_nodeclaims"] = serde_json::json!(policy_plan.nodeclaims.len());
        }
        println!("{out}");
    } else {
        println!(
            "scheduled {pods} pods onto {} NodeClaims ({} unschedulable) in {seconds:.3} s = {pods_per_second:.0} pods/s \
             [{label}, {type_count} types, median of {runs}, 1 thread]",
            plan.nodeclaims.len(),
            plan.unschedulable.len()
        );
        if let Some((file, policy_seconds, policy_plan, calls, failures)) = &with_policy {
            println!(
                "with {}: {policy_seconds:.3} s ({:.2}x the price order), {calls} policy calls, {} failures, {} NodeClaims",
                file.display(),
                policy_seconds / seconds,
                failures.len(),
                policy_plan.nodeclaims.len()
            );
        }
    }
    Ok(0)
}

fn consolidation(
    nodes: usize,
    policies: &[(&str, &Path)],
    RunOptions { runs, seed, json, policy_deadline }: RunOptions,
) -> anyhow::Result<u8> {
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let catalog = Arc::new(aws(&AwsCatalogOptions::default()).context("loading the bundled EC2 catalog")?);
    let snapshot = consolidation_benchmark(nodes, catalog, seed);
    let (seconds, d) = median(runs, || disrupt(&snapshot, &DefaultPolicies));
    // The same pass with the components deciding, timed in the same process and run.
    let with_policies = if policies.is_empty() {
        None
    } else {
        let set = wasm_policies(policies, &snapshot, policy_deadline.ms)?;
        let (policy_seconds, pd) = median(runs, || disrupt(&snapshot, &set));
        let calls = policy_calls(&set, policies);
        let failures = set.take_failures().len();
        Some((policy_seconds, pd, calls / runs as u64, failures))
    };
    // Worst case for single-node consolidation: simulate removing every node, one at a time
    // (what a pass does when no candidate can go).
    let scan_start = Instant::now();
    let sim = tenon_core::scheduler::Simulator::new(&snapshot);
    let mut unplaceable = 0usize;
    for n in 0..snapshot.nodes.len() {
        if !sim.remove(&[n], &PriceScorer).unschedulable.is_empty() {
            unplaceable += 1;
        }
    }
    let scan_seconds = scan_start.elapsed().as_secs_f64();
    let per_candidate_ms = 1000.0 * scan_seconds / snapshot.nodes.len().max(1) as f64;
    let (method, removed, replacements, savings) = match &d.plan {
        Some(p) => (p.method.as_str(), p.candidates.len(), p.replacements.len(), p.savings_per_hour),
        None => ("none", 0, 0, 0.0),
    };
    if json {
        let mut out = serde_json::json!({
            "nodes": nodes,
            "pods": snapshot.pods.len(),
            "seconds": seconds,
            "candidates": d.evaluated,
            "method": method,
            "nodes_removed": removed,
            "replacements": replacements,
            "savings_per_hour": savings,
            "blocked": d.blocked.len(),
            "scan_all_seconds": scan_seconds,
            "per_candidate_ms": per_candidate_ms,
            "runs": runs,
            "threads": 1,
        });
        if let Some((policy_seconds, pd, calls, failures)) = &with_policies {
            let files: Vec<String> = policies.iter().map(|(_, f)| f.display().to_string()).collect();
            out["policies"] = serde_json::json!(files);
            out["native_seconds"] = serde_json::json!(seconds);
            out["policy_seconds"] = serde_json::json!(policy_seconds);
            out["policy_calls"] = serde_json::json!(calls);
            out["policy_failures"] = serde_json::json!(failures);
            out["overhead"] = serde_json::json!(policy_seconds / seconds);
            out["policy_method"] = serde_json::json!(pd.plan.as_ref().map_or("none", |p| p.method.as_str()));
        }
        println!("{out}");
    } else {
        println!(
            "disruption pass over {nodes} nodes / {} pods in {seconds:.3} s: {} candidates simulated, plan {method} removing {removed} node(s) \
             with {replacements} replacement(s), saving ${savings:.4}/h; {} nodes blocked [median of {runs}, 1 thread]\n\
             simulating every node's removal one by one: {scan_seconds:.3} s ({per_candidate_ms:.3} ms per candidate; \
             {unplaceable} leave pods without a place)",
            snapshot.pods.len(),
            d.evaluated,
            d.blocked.len()
        );
        if let Some((policy_seconds, pd, calls, failures)) = &with_policies {
            println!(
                "with the policies: {policy_seconds:.3} s ({:.2}x), {calls} policy calls, {failures} failures, plan {}",
                policy_seconds / seconds,
                pd.plan.as_ref().map_or("none", |p| p.method.as_str())
            );
        }
    }
    Ok(0)
}
