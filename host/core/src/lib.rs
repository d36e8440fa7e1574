//! Tenon's decision core: a pure function from a cluster snapshot to plans.
//!
//! No I/O, no clock, no async runtime, no Wasm engine, no Kubernetes client: time is a field
//! of the snapshot, and the same snapshot always gives the same plan.

pub mod cache_trim;
pub mod cached_pod;
pub mod catalog;
pub mod catalog_file;
pub mod cloud;
pub mod convert;
pub mod default_spread;
pub mod disruption;
pub mod instancetype;
pub mod model;
pub mod nodeclaim;
pub mod orchestration;
pub mod plan;
pub mod policy_failure;
pub mod requirements;
pub mod resources;
pub mod scheduler;
pub mod scorer;
pub mod selector;
pub mod taints;
pub mod volume_usage;
pub mod work;
pub mod workload;

pub use model::ClusterSnapshot;
pub use plan::ProvisioningPlan;
pub use scheduler::schedule;
