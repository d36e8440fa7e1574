//! The `tenon` binary.

mod bench;
mod check;
#[cfg(feature = "controller")]
mod controller;
#[cfg(feature = "heap-count")]
mod heap_count;
mod policy_cmd;
mod policy_deadline;
#[cfg(feature = "oci")]
mod policy_oci;
mod simulate;

use clap::{Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "tenon", version, about = "A Karpenter-v1-compatible node provisioner with WebAssembly policies")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Validate NodePool, NodeClaim and EC2NodeClass manifests as the API server would.
    ///
    /// Exit status: 0 when clean (warnings allowed), 1 on validation errors, 2 when input is
    /// unreadable or not YAML.
    Check {
        /// Files, directories (searched for *.yaml and *.yml) or `-` for standard input.
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// A policy store: NodePools' policy annotations are checked against the components
        /// in it (each must exist, match its pinned digest and implement its hook's world).
        #[arg(long)]
        policy_dir: Option<PathBuf>,
    },
    /// Print the NodePool, NodeClaim and EC2NodeClass CustomResourceDefinitions as YAML.
    Crds,
    /// Run a scenario (manifests, timeline, expectations) in virtual time.
    ///
    /// Exit status 1 when an expectation fails.
    Simulate {
        /// Scenario file (see examples/scenarios/).
        scenario: PathBuf,
        /// Print the report as JSON instead of the timeline.
        #[arg(long)]
        json: bool,
        /// Only the summary.
        #[arg(long)]
        quiet: bool,
        /// Also write an HTML report with plots (pods and nodes, cost, pending time).
        #[arg(long, value_name = "FILE.html")]
        report: Option<PathBuf>,
        /// Run twice, with policies A and B for every NodePool, and compare. Each side is
        /// `default` or comma-separated policy references (`price-per-vcpu,my-budget@sha256:…`).
        #[arg(long, num_args = 2, value_names = ["A", "B"])]
        compare: Option<Vec<String>>,
        /// The policy store (default: $TENON_POLICY_DIR, else policies/target/wasm32-wasip2/release).
        #[arg(long)]
        policy_dir: Option<PathBuf>,
        #[command(flatten)]
        policy_deadline: policy_deadline::PolicyDeadline,
    },
    /// Test, inspect, benchmark and scaffold WebAssembly policies.
    Policy {
        #[command(subcommand)]
        what: policy_cmd::PolicyCommand,
    },
    /// Run the provisioner against the cluster in KUBECONFIG (or in-cluster).
    #[cfg(feature = "controller")]
    Controller(Box<controller::settings::Settings>),
    /// Measure the decision core on generated workloads.
    Bench {
        #[command(subcommand)]
        what: bench::BenchCommand,
    },
}

/// The controller's allocator. At 10,000 pods glibc's held 620 MB for 221 MB in use (its
/// arenas give freed memory back to the kernel only from their top); mimalloc returns freed
/// pages.
#[cfg(all(feature = "controller", not(feature = "dhat-heap"), not(feature = "heap-count")))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(all(feature = "heap-count", not(feature = "dhat-heap")))]
#[global_allocator]
static ALLOCATOR: heap_count::Counting = heap_count::Counting;

/// With `dhat-heap`, every allocation is recorded by site; the profile (the heap at its peak
/// and at exit, by backtrace) is written to `dhat-heap.json` when `main` returns, or
/// `TENON_DHAT_AFTER` seconds after the start (the heap of a steady state, not of shutdown).
#[cfg(feature = "dhat-heap")]
#[global_allocator]
static ALLOCATOR: dhat::Alloc = dhat::Alloc;

#[cfg(feature = "dhat-heap")]
fn heap_profile() -> Option<dhat::Profiler> {
    let profiler = dhat::Profiler::new_heap();
    let Some(after) = std::env::var("TENON_DHAT_AFTER").ok().and_then(|s| s.parse().ok()) else {
        return Some(profiler);
    };
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_secs(after));
        drop(profiler);
    });
    None
}

fn main() -> ExitCode {
    #[cfg(feature = "dhat-heap")]
    let _profiler = heap_profile();
    #[cfg(feature = "heap-count")]
    heap_count::start();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Check { paths, policy_dir } => {
            check::run(&paths, policy_dir.as_deref(), &mut std::io::stdout().lock())
        }
        Command::Crds => print_crds(),
        Command::Bench { what } => bench::run(what),
        #[cfg(feature = "controller")]
        Command::Controller(settings) => controller::run(*settings),
        Command::Policy { what } => policy_cmd::run(what),
        Command::Simulate { scenario, json, quiet, report, compare, policy_dir, policy_deadline } => {
            simulate::simulate(
                &scenario,
                simulate::Options {
                    json,
                    quiet,
                    report: report.as_deref(),
                    compare: compare.map(|v| (v[0].clone(), v[1].clone())),
                    policy_dir,
                    policy_deadline_ms: policy_deadline.ms,
                },
            )
        }
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("tenon: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn print_crds() -> anyhow::Result<u8> {
    let yaml = tenon_api::crds::crds_yaml()?;
    std::io::stdout().lock().write_all(yaml.as_bytes())?;
    Ok(0)
}
