//! Karpenter's `nodeclaim/*` controllers: each NodeClaim's lifecycle (launch, registration,
//! initialization, liveness), consistency checks, expiration, garbage collection against
//! EC2, and the pod events that time its emptiness.

pub mod consistency;
pub mod expiration;
pub mod garbage;
pub mod lifecycle;
pub mod pod_events;
