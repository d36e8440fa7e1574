//! The guest side of Tenon's policy contract (`wit/policy.wit`).
//!
//! A policy is one `impl` of a world's `Guest` trait and one export macro:
//!
//! ```ignore
//! use tenon_policy_sdk::scorer::{Guest, ScoringInput};
//! struct CheapestFirst;
//! impl Guest for CheapestFirst {
//!     // One score per offering, lower first.
//!     fn rank(input: ScoringInput) -> Result<Vec<f64>, String> {
//!         Ok(input.offerings.iter().map(|o| o.price).collect())
//!     }
//! }
//! tenon_policy_sdk::export_scorer!(CheapestFirst);
//! ```
//!
//! Build with `cargo build --target wasm32-wasip2 --release`; the `.wasm` in
//! `target/wasm32-wasip2/release/` is the policy.

/// The `scorer` world: rank the offerings of a new NodeClaim.
pub mod scorer {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "scorer",
        pub_export_macro: true,
        export_macro_name: "export_scorer",
        default_bindings_module: "tenon_policy_sdk::scorer",
    });
    pub use self::exports::tenon::policy::scoring::{Guest, InstanceType, Offering, ScoringInput};
    pub use self::tenon::policy::types::{Label, Nodepool, Resources};
}

/// The `consolidator` world: order and approve consolidation plans.
pub mod consolidator {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "consolidator",
        pub_export_macro: true,
        export_macro_name: "export_consolidator",
        default_bindings_module: "tenon_policy_sdk::consolidator",
    });
    pub use self::exports::tenon::policy::consolidation::{
        Candidate, ConsolidationInput, Guest, Method, Plan, PlanReview, Replacement, Verdict,
    };
    pub use self::tenon::policy::types::{Label, Nodepool};
}

/// The `disruption-budget` world: how many nodes may be disrupted now.
pub mod budget {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "disruption-budget",
        pub_export_macro: true,
        export_macro_name: "export_budget",
        default_bindings_module: "tenon_policy_sdk::budget",
    });
    pub use self::exports::tenon::policy::budgets::{Allowance, Budget, BudgetInput, BudgetNodes, Guest, Reason};
    pub use self::tenon::policy::types::{Label, Nodepool};
}

/// Parses a NodePool's `tenon.dev/policy-config` into your settings type. An error names
/// the problem; return it as your policy's `Err` so the NodePool shows it.
pub fn config<T: serde::de::DeserializeOwned>(json: &str) -> Result<T, String> {
    let json = if json.trim().is_empty() { "{}" } else { json };
    serde_json::from_str(json).map_err(|e| format!("tenon.dev/policy-config: {e}"))
}

/// The value of a label, if present.
pub fn label<'a>(labels: &'a [scorer::Label], key: &str) -> Option<&'a str> {
    labels.iter().find(|l| l.key == key).map(|l| l.value.as_str())
}

pub use budget::export_budget;
pub use consolidator::export_consolidator;
pub use scorer::export_scorer;
