//! The orchestration around the decisions: when to decide, how a decision is carried out,
//! and what happens when the cloud or the cluster does not go along. Plain state machines
//! over an integer clock (milliseconds) that return what to do; the controller carries the
//! intents out against the API server and AWS, the simulator against its virtual cluster and
//! EC2, so both behave alike by construction.

pub mod batcher;
pub mod budget_events;
pub mod command;
pub mod consistency;
pub mod expiration;
pub mod ice;
pub mod instance_health;
pub mod interruption;
pub mod launch;
pub mod liveness;
pub mod registration_health;
pub mod validation;
