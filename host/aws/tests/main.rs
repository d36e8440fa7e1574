//! The integration tests of this crate, as one test binary: linking the crate and its
//! dependencies once, not once per file. Each module is the file of the same name.

mod create_fleet;
mod documents;
mod iam;
mod karpenter_amifamily;
mod karpenter_interruption;
mod karpenter_launchtemplate;
mod launch_calls;
mod moto;
mod support;
