//! EC2 as the controller's cloud: the AWS provider's calls behind [`Cloud`].

use super::{BoxFuture, Cloud, InterruptionQueue, LaunchSlot};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;
use tenon_api::EC2NodeClass;
use tenon_aws::AwsProvider;
use tenon_aws::interruption::Received;
use tenon_aws::nodeclass::Resolution;
use tenon_core::cloud::{CloudError, CloudProvider, Instance, LaunchRequest, UnavailableOffering};
use tenon_core::instancetype::InstanceType;
use tenon_core::orchestration::instance_health::InstanceChecks;

impl Cloud for AwsProvider {
    fn resolve<'a>(&'a self, nc: &'a EC2NodeClass) -> BoxFuture<'a, Result<Resolution, CloudError>> {
        Box::pin(AwsProvider::resolve(self, nc))
    }

    fn finalize_nodeclass<'a>(&'a self, nc: &'a EC2NodeClass) -> BoxFuture<'a, Result<(), CloudError>> {
        Box::pin(AwsProvider::finalize_nodeclass(self, nc))
    }

    fn collect_orphans<'a>(&'a self, nodeclasses: &'a BTreeSet<String>) -> BoxFuture<'a, Result<usize, CloudError>> {
        Box::pin(AwsProvider::collect_orphans(self, nodeclasses))
    }

    fn load_catalog(&self) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async move { self.catalog().await.map(|_| ()) })
    }

    fn instance_types<'a>(&'a self, nc: &'a EC2NodeClass) -> BoxFuture<'a, Result<Arc<Vec<InstanceType>>, CloudError>> {
        Box::pin(AwsProvider::instance_types(self, nc))
    }

    fn launch_slot(&self) -> BoxFuture<'_, Result<LaunchSlot, CloudError>> {
        Box::pin(async move { AwsProvider::launch_slot(self).await.map(LaunchSlot::new) })
    }

    fn launch<'a>(
        &'a self,
        slot: &'a LaunchSlot,
        req: &'a LaunchRequest,
        requested: &'a BTreeSet<String>,
    ) -> BoxFuture<'a, Result<Instance, CloudError>> {
        Box::pin(async move {
            let Some(slot) = slot.0.downcast_ref::<tenon_aws::LaunchSlot>() else {
                return Err(CloudError::Api { operation: "launch".into(), message: "not an EC2 launch slot".into() });
            };
            self.launch_in(slot, req, requested).await
        })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Instance, CloudError>> {
        Box::pin(CloudProvider::get(self, id))
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<Instance>, CloudError>> {
        Box::pin(CloudProvider::list(self))
    }

    fn delete<'a>(&'a self, ids: &'a [String]) -> BoxFuture<'a, Result<(), CloudError>> {
        Box::pin(CloudProvider::delete(self, ids))
    }

    fn is_drifted(&self, instance: &Instance, labels: &BTreeMap<String, String>, nc: &EC2NodeClass) -> Option<String> {
        CloudProvider::is_drifted(self, instance, labels, nc)
    }

    fn mark_unavailable(&self, offering: UnavailableOffering, now: Instant) {
        self.unavailable.mark(offering, now);
    }

    fn reserved_capacity(&self) -> bool {
        self.launch.reserved_capacity
    }

    fn instance_statuses(&self) -> BoxFuture<'_, Result<Vec<InstanceChecks>, CloudError>> {
        Box::pin(AwsProvider::instance_statuses(self))
    }

    fn interruption_queue<'a>(
        &'a self,
        queue: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn InterruptionQueue>, CloudError>> {
        Box::pin(async move {
            let q = AwsProvider::interruption_queue(self, queue).await?;
            Ok(Box::new(q) as Box<dyn InterruptionQueue>)
        })
    }

    fn hung_calls(&self, now: Instant) -> Option<String> {
        AwsProvider::hung_calls(self, now).err()
    }

    fn render_metrics(&self) -> String {
        self.metrics.render()
    }
}

impl InterruptionQueue for tenon_aws::interruption::InterruptionQueue {
    fn receive(&self) -> BoxFuture<'_, Result<Vec<Received>, CloudError>> {
        Box::pin(tenon_aws::interruption::InterruptionQueue::receive(self))
    }

    fn ack<'a>(&'a self, event: &'a Received) -> BoxFuture<'a, Result<(), CloudError>> {
        Box::pin(tenon_aws::interruption::InterruptionQueue::ack(self, event))
    }

    fn malformed(&self) -> u64 {
        self.malformed.load(Ordering::Relaxed)
    }
}
