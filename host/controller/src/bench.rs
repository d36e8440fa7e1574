//! `tenon bench`: time the decision core on Karpenter's benchmark shapes, so users can
//! measure their own sizes.

use anyhow::{Context, bail};
use clap::{Args, Subcommand, ValueEnum};
use std::sync::Arc;
use std::time::Instant;
use tenon_core::catalog::{AwsCatalogOptions, aws, synthetic};
use tenon_core::disruption::{DefaultPolicies, disrupt};
use tenon_core::scorer::PriceScorer;
use tenon_core::workload::{consolidation_benchmark, scheduling_benchmark};

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
        #[command(flatten)]
        run: RunOptions,
    },
    /// A full disruption pass (emptiness, drift, multi- and single-node consolidation) over
    /// a cluster of mixed EC2 nodes, about ten pods each, ~30% underutilised.
    Consolidation {
        /// Number of nodes.
        #[arg(long, default_value_t = 100)]
        nodes: usize,
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
}

#[derive(Clone, Copy, ValueEnum)]
pub enum Catalog {
    Synthetic,
    Catalog,
}

pub fn run(cmd: BenchCommand) -> anyhow::Result<u8> {
    match cmd {
        BenchCommand::Scheduling { pods, instance_types, run } => scheduling(pods, instance_types, run),
        BenchCommand::Consolidation { nodes, run } => consolidation(nodes, run),
    }
}

fn scheduling(pods: usize, catalog: Catalog, RunOptions { runs, seed, json }: RunOptions) -> anyhow::Result<u8> {
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
    let mut times = Vec::with_capacity(runs);
    let mut plan = None;
    for _ in 0..runs {
        let start = Instant::now();
        let p = tenon_core::schedule(&snapshot, &PriceScorer);
        times.push(start.elapsed().as_secs_f64());
        plan = Some(p);
    }
    let plan = plan.expect("runs >= 1");
    times.sort_by(f64::total_cmp);
    let seconds = times[times.len() / 2];
    let pods_per_second = if seconds > 0.0 { pods as f64 / seconds } else { f64::INFINITY };
    if json {
        let out = serde_json::json!({
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
        println!("{out}");
    } else {
        println!(
            "scheduled {pods} pods onto {} NodeClaims ({} unschedulable) in {seconds:.3} s = {pods_per_second:.0} pods/s \
             [{label}, {type_count} types, median of {runs}, 1 thread]",
            plan.nodeclaims.len(),
            plan.unschedulable.len()
        );
    }
    Ok(0)
}

fn consolidation(nodes: usize, RunOptions { runs, seed, json }: RunOptions) -> anyhow::Result<u8> {
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let catalog = Arc::new(aws(&AwsCatalogOptions::default()).context("loading the bundled EC2 catalog")?);
    let snapshot = consolidation_benchmark(nodes, catalog, seed);
    let mut times = Vec::with_capacity(runs);
    let mut decision = None;
    for _ in 0..runs {
        let start = Instant::now();
        let d = disrupt(&snapshot, &DefaultPolicies);
        times.push(start.elapsed().as_secs_f64());
        decision = Some(d);
    }
    let d = decision.expect("runs >= 1");
    times.sort_by(f64::total_cmp);
    let seconds = times[times.len() / 2];
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
        let out = serde_json::json!({
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
    }
    Ok(0)
}
