//! Karpenter's ranking: cheapest compatible offering first. Scoring each offering by its
//! price reproduces it exactly (ties keep the host's price order).

use tenon_policy_sdk::scorer::{Guest, ScoringInput};

struct PriceOrder;

impl Guest for PriceOrder {
    fn rank(input: ScoringInput) -> Result<Vec<f64>, String> {
        Ok(input.offerings.iter().map(|o| o.price).collect())
    }
}

tenon_policy_sdk::export_scorer!(PriceOrder);
