//! `tenon simulate`: a virtual-time cluster and cloud that drives Tenon's decision core
//! (and its policies) exactly as the controller does, from the manifests a user would apply.
//!
//! Deterministic: the same scenario gives the same timeline.

pub mod report;
pub mod run;
pub mod scenario;
pub mod world;

pub use run::{Report, run};
pub use scenario::Scenario;
