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
    pub use self::exports::tenon::policy::scoring::{Guest, InstanceType, Offering, ScoringInput, TypeLabel};
    pub use self::tenon::policy::types::{Label, Nodepool, Resources};

    impl ScoringInput {
        /// The value of label `key` on instance type `index` (`karpenter.k8s.aws/instance-family`).
        pub fn label(&self, index: u32, key: &str) -> Option<&str> {
            let k = self.label_keys.iter().position(|x| x == key)? as u32;
            let t = self.instance_types.get(index as usize)?;
            t.labels.iter().find(|l| l.key == k).map(|l| l.value.as_str())
        }

        /// The instance type an offering launches.
        pub fn instance_type(&self, offering: &Offering) -> Option<&InstanceType> {
            self.instance_types.get(offering.instance_type as usize)
        }

        /// The zone of an offering.
        pub fn zone(&self, offering: &Offering) -> &str {
            self.zones.get(offering.zone as usize).map_or("", String::as_str)
        }

        /// The capacity type of an offering (`on-demand`, `spot`, `reserved`).
        pub fn capacity_type(&self, offering: &Offering) -> &str {
            self.capacity_types.get(offering.capacity_type as usize).map_or("", String::as_str)
        }
    }
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

/// The value of a NodePool label, if present.
pub fn label<'a>(labels: &'a [scorer::Label], key: &str) -> Option<&'a str> {
    labels.iter().find(|l| l.key == key).map(|l| l.value.as_str())
}

// The export macros emit the component's exports only when compiling for WebAssembly, so a
// policy crate's `cargo test` runs natively (native linkers reject the export names).

/// Exports a `scorer::Guest` implementation as the policy's `scorer` world.
#[macro_export]
macro_rules! export_scorer {
    ($t:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::scorer::export_scorer!($t);
    };
}

/// Exports a `consolidator::Guest` implementation as the policy's `consolidator` world.
#[macro_export]
macro_rules! export_consolidator {
    ($t:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::consolidator::export_consolidator!($t);
    };
}

/// Exports a `budget::Guest` implementation as the policy's `disruption-budget` world.
#[macro_export]
macro_rules! export_budget {
    ($t:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::budget::export_budget!($t);
    };
}
