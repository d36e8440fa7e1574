//! Karpenter v1 API types for Tenon: `karpenter.sh/v1` NodePool and NodeClaim and
//! `karpenter.k8s.aws/v1` EC2NodeClass, with Karpenter's defaults, validation equivalent to
//! its OpenAPI and CEL rules, Tenon's policy annotations, and every well-known name.
//!
//! This crate has no runtime: no tokio, no client, no cloud SDK.

pub mod common;
pub mod crds;
pub mod cron;
pub mod decode;
pub mod duration;
pub mod ec2nodeclass;
pub mod hash;
pub mod nodeclaim;
pub mod nodepool;
pub mod policy;
pub mod policy_trust;
pub mod quantity;
pub mod scheduler_config;
pub mod validation;
pub mod wellknown;

pub use ec2nodeclass::{EC2NodeClass, EC2NodeClassSpec, EC2NodeClassStatus};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus};
pub use nodepool::{NodePool, NodePoolSpec, NodePoolStatus};
