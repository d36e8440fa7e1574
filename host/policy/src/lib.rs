//! Tenon's policy runtime: WebAssembly components implementing `wit/policy.wit`, run by
//! wasmtime in a sandbox (fresh store per call from a pre-instantiated component, deny-all
//! WASI, millisecond deadlines, a memory cap, optional fuel), behind the decision core's
//! `Scorer`, `Consolidator` and `BudgetRule` traits with safe fallbacks.

pub mod adapters;
pub mod bindings;
pub mod cluster;
pub mod engine;
pub mod error;
pub mod metrics;
pub mod policy;
pub mod sandbox;
pub mod store;

pub use engine::PolicyEngine;
pub use error::{Failure, FailureKind, PolicyError};
pub use policy::{LoadedPolicy, World};
pub use sandbox::Limits;
pub use store::PolicyStore;
pub mod testing;
