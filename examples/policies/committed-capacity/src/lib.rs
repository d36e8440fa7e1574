//! Savings Plans and Reserved Instances awareness (aws/karpenter-provider-aws#2259): rank
//! on-demand offerings by what they cost you, not their list price. Capacity you have already
//! committed to (an EC2 Instance Savings Plan for a family, a Reserved Instance for a type) is
//! cheaper at the margin, so Karpenter's list-price order launches the wrong thing.
//!
//! `tenon.dev/scoring-config`:
//! `{"commitments": [{"family": "m6a", "discountPercent": 40}, {"instanceType": "m6a.2xlarge", "effectivePrice": 0.05}]}`
//! Each entry names a `family` or an `instanceType` and gives a `discountPercent` (0-100) or an
//! `effectivePrice` (USD/h). A type entry beats a family entry. Spot offerings are never
//! covered. Commitments are not counted: the input does not say how many are in use.

use serde::Deserialize;
use tenon_policy_sdk::scorer::{Guest, ScoringInput};

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Config {
    commitments: Vec<Commitment>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Commitment {
    family: Option<String>,
    instance_type: Option<String>,
    discount_percent: Option<f64>,
    effective_price: Option<f64>,
}

/// What a covered offering costs: a share of its list price, or a fixed price.
enum Rate {
    Discount(f64),
    Fixed(f64),
}

impl Commitment {
    fn rate(&self, i: usize) -> Result<Rate, String> {
        let at = format!("config: commitments[{i}]");
        match (&self.family, &self.instance_type) {
            (Some(_), None) | (None, Some(_)) => {}
            _ => return Err(format!("{at}: give exactly one of family or instanceType")),
        }
        match (self.discount_percent, self.effective_price) {
            (Some(d), None) if (0.0..=100.0).contains(&d) => Ok(Rate::Discount(1.0 - d / 100.0)),
            (Some(d), None) => Err(format!("{at}: discountPercent must be between 0 and 100, got {d}")),
            (None, Some(p)) => {
                tenon_policy_sdk::non_negative(&format!("commitments[{i}].effectivePrice"), p, "USD/h").map(Rate::Fixed)
            }
            _ => Err(format!("{at}: give exactly one of discountPercent or effectivePrice")),
        }
    }
}

/// The configuration and each commitment's rate.
fn settings(json: &str) -> Result<(Config, Vec<Rate>), String> {
    let cfg: Config = tenon_policy_sdk::config(json)?;
    let rates = cfg.commitments.iter().enumerate().map(|(i, c)| c.rate(i)).collect::<Result<Vec<_>, _>>()?;
    Ok((cfg, rates))
}

struct CommittedCapacity;

impl tenon_policy_sdk::Config for CommittedCapacity {
    fn validate_config(config: &str) -> Result<(), String> {
        settings(config).map(drop)
    }
}

impl Guest for CommittedCapacity {
    fn rank(input: ScoringInput) -> Result<Vec<f64>, String> {
        let (cfg, rates) = settings(&input.nodepool.config)?;
        Ok(input
            .offerings
            .iter()
            .map(|o| {
                if input.capacity_type(o) != "on-demand" {
                    return o.price;
                }
                let name = input.instance_type(o).map_or("", |t| t.name.as_str());
                let family = input.family(o).unwrap_or_else(|| name.split('.').next().unwrap_or(""));
                let by_type = cfg.commitments.iter().position(|c| c.instance_type.as_deref() == Some(name));
                let by_family = || cfg.commitments.iter().position(|c| c.family.as_deref() == Some(family));
                match by_type.or_else(by_family).map(|i| &rates[i]) {
                    Some(Rate::Discount(share)) => o.price * share,
                    Some(Rate::Fixed(p)) => *p,
                    None => o.price,
                }
            })
            .collect())
    }
}

tenon_policy_sdk::export_scorer!(CommittedCapacity);
