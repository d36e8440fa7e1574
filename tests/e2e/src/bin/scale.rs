//! `scale`: the scale benchmark (see `tenon_e2e::scale`). It runs the controller binary next to
//! it, or `$TENON_BIN`:
//!
//! ```text
//! cargo build --release -p tenon
//! TENON_BIN=target/release/tenon cargo run -p tenon-e2e --bin scale -- --pods 10000 --json
//! ```

use std::time::Duration;
use tenon_e2e::scale::{self, Options};

const USAGE: &str =
    "usage: scale [--pods N] [--waves N] [--steady SECONDS] [--pod-cpu MILLICORES] [--brownout PERCENT] [--json]";

fn main() -> std::process::ExitCode {
    let (opts, json) = match parse(std::env::args().skip(1)) {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("scale: {e}\n{USAGE}");
            return std::process::ExitCode::from(2);
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build();
    let Ok(rt) = rt else {
        eprintln!("scale: could not start a Tokio runtime");
        return std::process::ExitCode::FAILURE;
    };
    let report = rt.block_on(scale::run(&opts, |line| eprintln!("[scale] {line}")));
    if json {
        println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
    } else {
        println!("controller: {}", report.controller);
        println!("peak RSS {:.1} MiB; RSS growth over the waves {:.2}x", report.peak_rss_mib, report.rss_growth);
        for (i, w) in report.waves.iter().enumerate() {
            println!("wave {}: {w:#?}", i + 1);
        }
    }
    std::process::ExitCode::SUCCESS
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<(Options, bool), String> {
    let mut opts = Options::default();
    let mut json = false;
    while let Some(arg) = args.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            let v = args.next().ok_or_else(|| format!("{name} needs a value"))?;
            v.parse().map_err(|_| format!("{name} {v:?} is not a whole number"))
        };
        match arg.as_str() {
            "--pods" => opts.pods = value("--pods")? as usize,
            "--waves" => opts.waves = value("--waves")?.max(1) as usize,
            "--steady" => opts.steady = Duration::from_secs(value("--steady")?),
            "--pod-cpu" => opts.pod_cpu_millis = value("--pod-cpu")? as u32,
            "--brownout" => opts.brownout_percent = value("--brownout")?.min(100) as u32,
            "--json" => json = true,
            "-h" | "--help" => return Err("help".into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    Ok((opts, json))
}
