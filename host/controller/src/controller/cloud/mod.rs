//! What the controller asks of its cloud (Karpenter's `cloudprovider.CloudProvider` plus the
//! AWS provider's NodeClass, catalog, interruption and health calls): one object-safe trait
//! the reconcilers hold as `Arc<dyn Cloud>`. EC2 answers it in production (`aws.rs`); an
//! in-memory cloud (`memory.rs`, built for tests) answers it in reconciler tests where AWS
//! is not the point.

pub mod aws;
#[cfg(test)]
pub mod memory;

use super::termination::Instances;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;
use tenon_api::EC2NodeClass;
use tenon_aws::interruption::Received;
use tenon_aws::nodeclass::Resolution;
use tenon_core::cloud::{CloudError, Instance, LaunchRequest, UnavailableOffering};
use tenon_core::instancetype::InstanceType;
use tenon_core::orchestration::instance_health::InstanceChecks;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A free place among the launches a cloud lets run at once, held for the whole launch.
pub struct LaunchSlot(#[allow(dead_code)] Box<dyn std::any::Any + Send + Sync>);

impl LaunchSlot {
    pub fn new(permit: impl std::any::Any + Send + Sync) -> LaunchSlot {
        LaunchSlot(Box::new(permit))
    }
}

pub trait Cloud: Instances + Send + Sync {
    /// Resolves an EC2NodeClass' selectors and instance profile; the caller writes the status.
    fn resolve<'a>(&'a self, nc: &'a EC2NodeClass) -> BoxFuture<'a, Result<Resolution, CloudError>>;
    /// Deletes what was created for an EC2NodeClass being deleted (templates, profile).
    fn finalize_nodeclass<'a>(&'a self, nc: &'a EC2NodeClass) -> BoxFuture<'a, Result<(), CloudError>>;
    /// Deletes what was created for EC2NodeClasses not in `nodeclasses`; returns how many.
    fn collect_orphans<'a>(&'a self, nodeclasses: &'a BTreeSet<String>) -> BoxFuture<'a, Result<usize, CloudError>>;
    /// Loads the instance catalog ahead of the first decision.
    fn load_catalog(&self) -> BoxFuture<'_, Result<(), CloudError>>;
    /// The instance types an EC2NodeClass can launch, with their offerings.
    fn instance_types<'a>(&'a self, nc: &'a EC2NodeClass) -> BoxFuture<'a, Result<Arc<Vec<InstanceType>>, CloudError>>;
    /// Waits for a free launch slot.
    fn launch_slot(&self) -> BoxFuture<'_, Result<LaunchSlot, CloudError>>;
    /// Launches `req` in `slot` (idempotent per NodeClaim); `requested` names the resources
    /// its NodeClaim requests.
    fn launch<'a>(
        &'a self,
        slot: &'a LaunchSlot,
        req: &'a LaunchRequest,
        requested: &'a BTreeSet<String>,
    ) -> BoxFuture<'a, Result<Instance, CloudError>>;
    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Instance, CloudError>>;
    /// Every live instance of this cluster.
    fn list(&self) -> BoxFuture<'_, Result<Vec<Instance>, CloudError>>;
    /// Terminates instances; ids already gone are no error.
    fn delete<'a>(&'a self, ids: &'a [String]) -> BoxFuture<'a, Result<(), CloudError>>;
    /// Why `instance` no longer matches its EC2NodeClass, if it does not.
    fn is_drifted(&self, instance: &Instance, labels: &BTreeMap<String, String>, nc: &EC2NodeClass) -> Option<String>;
    /// Offerings that just failed for capacity are not offered for a while.
    fn mark_unavailable(&self, offering: UnavailableOffering, now: Instant);
    /// Karpenter's `ReservedCapacity` feature gate, as this cloud launches.
    fn reserved_capacity(&self) -> bool;
    /// The status checks of the cluster's instances.
    fn instance_statuses(&self) -> BoxFuture<'_, Result<Vec<InstanceChecks>, CloudError>>;
    /// The interruption queue named `queue`, checked to exist.
    fn interruption_queue<'a>(
        &'a self,
        queue: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn InterruptionQueue>, CloudError>>;
    /// The calls launching needs that have been timing out past their bound, named for
    /// `/healthz`; `None` when none has (other calls timing out never fail the probe).
    fn hung_calls(&self, now: Instant) -> Option<String>;
    /// This cloud's own metric series, in the Prometheus text format.
    fn render_metrics(&self) -> String;
}

/// Interruption events as a queue delivers them: each is acknowledged once handled.
pub trait InterruptionQueue: Send + Sync {
    /// One poll: the events that came (waiting a while for some).
    fn receive(&self) -> BoxFuture<'_, Result<Vec<Received>, CloudError>>;
    fn ack<'a>(&'a self, event: &'a Received) -> BoxFuture<'a, Result<(), CloudError>>;
    /// Messages dropped as no interruption event, so far.
    fn malformed(&self) -> u64;
}

#[cfg(test)]
mod memory_tests;
