//! A scorer that opens a network connection: it imports `wasi:sockets`, which policies do
//! not get, so it must not load.

use tenon_policy_sdk::scorer::{Guest, ScoringInput};

struct Network;

impl Guest for Network {
    fn rank(input: ScoringInput) -> Result<Vec<f64>, String> {
        match std::net::TcpStream::connect("169.254.169.254:80") {
            Ok(_) => Ok(vec![0.0; input.offerings.len()]),
            Err(e) => Err(e.to_string()),
        }
    }
}

tenon_policy_sdk::export_scorer!(Network);
