//! A scorer that misbehaves on request.

use serde::Deserialize;
use tenon_policy_sdk::scorer::{Guest, ScoringInput};

#[derive(Deserialize)]
struct Config {
    mode: String,
}

struct Hostile;

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
            // Reverse price order: the most expensive first.
            "reverse" => Ok(input.offerings.iter().map(|o| -o.price).collect()),
            other => Err(format!("unknown mode {other:?}")),
        }
    }
}

tenon_policy_sdk::export_scorer!(Hostile);
