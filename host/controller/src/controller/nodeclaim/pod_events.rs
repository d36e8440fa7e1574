//! Karpenter's `pod.events` controller: `status.lastPodEventTime` of each registered
//! NodeClaim, set to when the pods counted on its node last changed (`pod_changes`, as the
//! pod watch delivered the change), which restarts `consolidateAfter`. A pass writes only
//! what changed since the last: its work follows the pod churn, not the number of pods.

use crate::controller::context::Context;
use crate::controller::error::{Error, Failures};
use crate::controller::runner::{self, Reconciler};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use tenon_api::NodeClaim;

pub struct PodEvents {
    ctx: Arc<Context>,
    /// Node name → the change time last written for it.
    written: BTreeMap<String, i64>,
}

impl PodEvents {
    pub fn new(ctx: Arc<Context>) -> PodEvents {
        PodEvents { ctx, written: BTreeMap::new() }
    }
}

/// `secs` (Unix) as the API's time.
fn time(secs: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(secs).unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH))
}

impl Reconciler for PodEvents {
    const NAME: &'static str = "pod.events";

    async fn reconcile(&mut self) -> Result<(), Error> {
        let objects = self.ctx.objects();
        // Forgotten changes are long written (or their NodeClaim long gone).
        self.written.retain(|node, _| objects.pod_changes.contains_key(node));
        let api: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        let mut failures = Failures::default();
        for nc in &objects.nodeclaims {
            let (Some(name), Some(node)) =
                (nc.metadata.name.as_deref(), nc.status.as_ref().and_then(|s| s.node_name.as_deref()))
            else {
                continue;
            };
            let Some(&changed) = objects.pod_changes.get(node) else { continue };
            if self.written.get(node).is_some_and(|&w| w >= changed) {
                continue;
            }
            let patch = json!({"status": {"lastPodEventTime": time(changed)}});
            match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                Ok(_) => {
                    self.written.insert(node.to_string(), changed);
                }
                // Not remembered: the next reconcile tries again.
                Err(e) => failures.push(Error::kube(format!("writing lastPodEventTime of NodeClaim {name}"), e)),
            }
        }
        failures.finish()
    }

    /// Nothing here is timed: a pod change is what it writes.
    fn next_pass(&self) -> std::time::Duration {
        runner::IDLE
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_are_written_as_the_api_spells_them() {
        assert_eq!(serde_json::to_value(super::time(1_795_996_800)).unwrap(), "2026-11-30T00:00:00Z");
    }
}
