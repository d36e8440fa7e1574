//! A scorer that misbehaves on request.

use serde::Deserialize;
use std::time::{Duration, Instant, SystemTime};
use tenon_policy_sdk::scorer::{Guest, ScoringInput};

#[derive(Deserialize)]
struct Config {
    mode: String,
}

struct Hostile;

/// How often a 1 ms timer was found not ready before it was: with real timers this counts
/// real time passing; with the host's virtual clocks it is always 0.
fn spins_until_ready() -> f64 {
    let timer = wasip2::clocks::monotonic_clock::subscribe_duration(1_000_000);
    let mut spins = 0u64;
    while !timer.ready() && spins < 1_000_000_000 {
        spins += 1;
    }
    spins as f64
}

impl Guest for Hostile {
    fn rank(input: ScoringInput) -> Result<Vec<f64>, String> {
        let cfg: Config = tenon_policy_sdk::config(&input.nodepool.config)?;
        let n = input.offerings.len();
        match cfg.mode.as_str() {
            "loop" => {
                let mut x: u64 = 0;
                loop {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
            }
            "oom" => {
                let mut hoard: Vec<Vec<u8>> = Vec::new();
                loop {
                    hoard.push(vec![1u8; 8 << 20]);
                    std::hint::black_box(&hoard);
                }
            }
            "panic" => panic!("deliberate panic"),
            "nan" => Ok(vec![f64::NAN; n]),
            "short" => Ok(vec![1.0; n.saturating_sub(1)]),
            "huge" => Ok(vec![1.0; 4_000_000]),
            "error" => Err("bad configuration: mode=error".into()),
            // An 8 MiB error message.
            "long-error" => Err("x".repeat(8 << 20)),
            // Reverse price order: the most expensive first.
            "reverse" => Ok(input.offerings.iter().map(|o| -o.price).collect()),
            // An hour's sleep (a wasi:clocks subscribe + poll), then reverse price order.
            "sleep" => {
                std::thread::sleep(Duration::from_secs(3600));
                Ok(input.offerings.iter().map(|o| -o.price).collect())
            }
            // Every score is what the guest can learn of time: the wall clock, the monotonic
            // time a sleep took, and spins on a timer pollable.
            "clock" => {
                let wall = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_err(|e| e.to_string())?;
                let start = Instant::now();
                std::thread::sleep(Duration::from_millis(5));
                let slept = start.elapsed().as_nanos() as f64;
                let mut scores = vec![wall.as_secs() as f64, slept, spins_until_ready()];
                scores.resize(n, 0.0);
                Ok(scores)
            }
            "read-file" => match std::fs::read("/etc/hostname") {
                Ok(_) => Ok(vec![0.0; n]),
                Err(e) => Err(format!("read-file: {e}")),
            },
            "env" => match std::env::vars().count() {
                0 => Err("env: empty".into()),
                k => Ok(vec![k as f64; n]),
            },
            other => Err(format!("unknown mode {other:?}")),
        }
    }
}

tenon_policy_sdk::export_scorer!(Hostile);
