//! Karpenter's NodeClaim consistency pass (`tenon_core::orchestration::consistency`): each
//! Initialized NodeClaim is checked against its Node at most every ten minutes; a Node
//! short of a requested resource gets a `FailedConsistencyCheck` Warning on the NodeClaim
//! and `ConsistentStateFound=False`, a consistent one `ConsistentStateFound=True`.

use crate::controller::context::Context;
use crate::controller::error::{Error, Failures};
use crate::controller::runner::{self, Reconciler};
use crate::controller::{conditions, involved_nodeclaim, node_of};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_api::NodeClaim;
use tenon_api::wellknown::condition;
use tenon_core::orchestration::consistency::{SCAN_EVERY_MS, node_shape_issues};

pub struct Consistency {
    ctx: Arc<Context>,
    /// When each NodeClaim (by UID) was last checked.
    scanned: BTreeMap<String, Instant>,
}

impl Consistency {
    pub fn new(ctx: Arc<Context>) -> Consistency {
        Consistency { ctx, scanned: BTreeMap::new() }
    }
}

impl Reconciler for Consistency {
    const NAME: &'static str = "nodeclaim.consistency";

    async fn reconcile(&mut self) -> Result<(), Error> {
        let objects = self.ctx.objects();
        let now = Instant::now();
        let every = Duration::from_millis(SCAN_EVERY_MS as u64);
        let live: std::collections::BTreeSet<&str> =
            objects.nodeclaims.iter().filter_map(|nc| nc.metadata.uid.as_deref()).collect();
        self.scanned.retain(|uid, _| live.contains(uid.as_str()));
        let mut failures = Failures::default();
        for nc in &objects.nodeclaims {
            let Some(uid) = nc.metadata.uid.clone() else { continue };
            if nc.metadata.deletion_timestamp.is_some() || !conditions::has_condition(nc, condition::INITIALIZED) {
                continue;
            }
            if self.scanned.get(&uid).is_some_and(|t| now.duration_since(*t) < every) {
                continue;
            }
            let Some(node) = node_of(nc, &objects.nodes) else { continue };
            self.scanned.insert(uid, now);
            let Some(status) = nc.status.as_ref() else { continue };
            let expected: BTreeMap<&str, &str> =
                status.capacity.iter().map(|(k, q)| (k.as_str(), q.0.as_str())).collect();
            let node_capacity = node.status.as_ref().and_then(|s| s.capacity.as_ref());
            let found: BTreeMap<&str, &str> =
                node_capacity.into_iter().flatten().map(|(k, q)| (k.as_str(), q.0.as_str())).collect();
            let requests = nc.spec.resources.requests.iter().map(|(k, q)| (k.as_str(), q.0.as_str()));
            let issues = node_shape_issues(requests, &expected, &found);
            for issue in &issues {
                tracing::info!(nodeclaim = ?nc.metadata.name, %issue, "failed consistency check");
                self.ctx
                    .recorder
                    .publish(&self.ctx.client, &involved_nodeclaim(nc), "Warning", "FailedConsistencyCheck", issue)
                    .await;
            }
            if let Err(e) = write_consistency(&self.ctx, nc, issues.is_empty()).await {
                // Looked at again next reconcile, not in ten minutes: the write is what counts.
                self.scanned.remove(nc.metadata.uid.as_deref().unwrap_or_default());
                failures.push(e);
            }
        }
        failures.finish()
    }

    /// The next check due: the oldest one's ten minutes (a NodeClaim not checked yet waits
    /// for the change that initializes it or brings its Node).
    fn next_pass(&self) -> Duration {
        let every = Duration::from_millis(SCAN_EVERY_MS as u64);
        runner::due_in(self.scanned.values().min().map(|t| every.saturating_sub(t.elapsed())))
    }
}

/// `ConsistentStateFound`: False with Karpenter's reason when issues were found, True
/// otherwise (written only when it changes).
async fn write_consistency(ctx: &Context, nc: &NodeClaim, consistent: bool) -> Result<(), Error> {
    let status = if consistent { "True" } else { "False" };
    if conditions::condition_is(nc, condition::CONSISTENT_STATE_FOUND, status) {
        return Ok(());
    }
    let conds = if consistent {
        conditions::with_condition(nc, condition::CONSISTENT_STATE_FOUND, true, "ConsistentStateFound", "")
    } else {
        let (reason, message) = ("ConsistencyCheckFailed", "Consistency Check Failed");
        conditions::with_condition(nc, condition::CONSISTENT_STATE_FOUND, false, reason, message)
    };
    let name = nc.metadata.name.clone().unwrap_or_default();
    let patch = conditions::locked(&nc.metadata, json!({"status": {"conditions": conds}}));
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(|_| ())
        .map_err(|e| Error::kube(format!("writing ConsistentStateFound of NodeClaim {name}"), e))
}
