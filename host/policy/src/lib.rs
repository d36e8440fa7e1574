//! Tenon's policy runtime: WebAssembly components implementing `wit/policy.wit`, run by
//! wasmtime in a sandbox (fresh store per call from a pre-instantiated component, a WASI
//! subset in which nothing blocks or tells real time, millisecond deadlines with a
//! wall-clock guard, a memory cap, optional fuel, capped strings), behind the decision
//! core's `Scorer`, `Consolidator` and `BudgetRule` traits with safe fallbacks and a
//! circuit breaker.

pub mod adapters;
pub mod background;
pub mod bindings;
pub mod breaker;
pub mod cache;
pub mod cluster;
pub mod deadline;
pub mod engine;
pub mod error;
pub mod metrics;
pub mod oci_cache;
pub mod policy;
pub mod sandbox;
pub mod store;
pub mod time;
mod wasi;

pub use engine::PolicyEngine;
pub use error::{Failure, FailureKind, PolicyError};
pub use policy::{LoadedPolicy, World};
pub use sandbox::Limits;
pub use store::{FileStamp, PolicyStore};
pub mod testing;
