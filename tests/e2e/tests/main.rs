//! The integration tests of this crate, as one test binary: linking the crate and its
//! dependencies once, not once per file. Each module is the file of the same name.

mod api_faults;
mod bad_input;
mod brownout;
mod chart;
mod coexistence;
mod differential;
mod disruption;
mod expiration;
mod hostile_control_plane;
mod image;
mod interruption_gc;
mod karpenter_manifests;
mod metrics;
mod nodeclaim_lifecycle;
mod policy_journey;
mod policy_sandbox;
mod policy_sources;
mod policy_update;
mod reconcilers;
mod scale_benchmark;
mod seed_experiments;
mod termination;
mod volume_topology;
