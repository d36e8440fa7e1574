//! `tenon simulate`: run a scenario in virtual time and print what happens.

use anyhow::Context;
use std::io::{IsTerminal, Write};
use std::path::Path;
use tenon_core::disruption::DefaultPolicies;
use tenon_core::scorer::PriceScorer;
use tenon_sim::world::World;
use tenon_sim::{Scenario, run};

pub fn simulate(path: &Path, json: bool, quiet: bool, report_path: Option<&Path>) -> anyhow::Result<u8> {
    let scenario = Scenario::load(path).with_context(|| format!("loading scenario {}", path.display()))?;
    let live = !json && !quiet;
    let progress = !json && std::io::stderr().is_terminal();
    if live {
        println!("scenario: {} ({})", scenario.name, World::describe_time(scenario.duration));
        if !scenario.description.is_empty() {
            println!("{}", scenario.description.trim());
        }
    }
    let mut printed = 0;
    let mut last_progress = -1;
    let report = run(&scenario, &PriceScorer, &DefaultPolicies, |w| {
        if live {
            for e in &w.events[printed..] {
                println!("{}  {:<24} {:<44} {}", World::describe_time(e.t), e.reason, e.object, e.message);
            }
        }
        printed = w.events.len();
        let pct = 100 * w.now / scenario.duration.max(1);
        if progress && pct != last_progress && scenario.duration > 3600 {
            last_progress = pct;
            eprint!("\r{pct:>3}% {} pods pending, {} running, ${:.2}/h", w.pending(), w.running(), w.cost_per_hour());
            let _ = std::io::stderr().flush();
        }
    })?;
    if progress && scenario.duration > 3600 {
        eprintln!();
    }
    if let Some(out) = report_path {
        let page = tenon_sim::report::html(&report).map_err(anyhow::Error::msg)?;
        std::fs::write(out, page).with_context(|| format!("writing {}", out.display()))?;
        if !json {
            println!("report: {}", out.display());
        }
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        let p = |v: Option<i64>| v.map_or("-".to_string(), |s| format!("{s}s"));
        println!(
            "summary: {} NodeClaims created, {} disruptions, ${:.4} spent, ${:.4}/h at the end; pods waited p50 {} / max {} (spot prices are a model)",
            report.nodeclaims_created,
            report.disruptions,
            report.total_cost,
            report.final_cost_per_hour,
            p(report.pending_p50_seconds),
            p(report.pending_max_seconds)
        );
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
