//! Karpenter's `nodepool/*` controllers: each NodePool's status (its resources, node count,
//! readiness, registration health and the policies its annotations name).

pub mod status;
