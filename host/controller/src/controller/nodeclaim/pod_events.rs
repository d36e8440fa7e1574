//! Karpenter's `pod.events` controller: `status.lastPodEventTime` of each registered
//! NodeClaim, bumped when the set of pods counted on its node changes (`pod_changes`), which
//! restarts `consolidateAfter`.

use crate::controller::conditions;
use crate::controller::context::Context;
use crate::controller::error::{Error, Failures};
use crate::controller::pod_changes::counted_on;
use crate::controller::runner::Reconciler;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tenon_api::NodeClaim;
use tenon_core::convert::pod_key;

pub struct PodEvents {
    ctx: Arc<Context>,
    /// NodeClaim → the pods on its node at the last look.
    pods_on: BTreeMap<String, BTreeSet<String>>,
}

impl PodEvents {
    pub fn new(ctx: Arc<Context>) -> PodEvents {
        PodEvents { ctx, pods_on: BTreeMap::new() }
    }
}

impl Reconciler for PodEvents {
    const NAME: &'static str = "pod.events";

    /// `status.lastPodEventTime` of each registered NodeClaim: bumped when the set of
    /// (non-DaemonSet) pods on its node changes, which restarts `consolidateAfter`.
    async fn reconcile(&mut self) -> Result<(), Error> {
        let objects = self.ctx.objects();
        let mut on_node: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut failures = Failures::default();
        for p in &objects.pods {
            if let Some(node) = counted_on(p) {
                on_node.entry(node).or_default().insert(pod_key(p));
            }
        }
        let api: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        let empty = BTreeSet::new();
        let mut seen = BTreeSet::new();
        for nc in &objects.nodeclaims {
            let (Some(name), Some(node)) =
                (nc.metadata.name.as_deref(), nc.status.as_ref().and_then(|s| s.node_name.as_deref()))
            else {
                continue;
            };
            seen.insert(name.to_string());
            let pods = on_node.get(node).unwrap_or(&empty);
            // First sight since start: nothing to compare with, only remembered. A failed
            // write is not remembered: the next reconcile tries again.
            let changed = self.pods_on.get(name).map(|before| before != pods);
            if changed == Some(true) {
                let patch = json!({"status": {"lastPodEventTime": conditions::now_time()}});
                if let Err(e) = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    failures.push(Error::kube(format!("writing lastPodEventTime of NodeClaim {name}"), e));
                    continue;
                }
            }
            if changed != Some(false) {
                self.pods_on.insert(name.to_string(), pods.clone());
            }
        }
        self.pods_on.retain(|k, _| seen.contains(k));
        failures.finish()
    }
}
