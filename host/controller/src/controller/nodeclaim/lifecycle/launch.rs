//! Launching NodeClaims through the cloud provider, one task per NodeClaim: the offerings
//! the plan ranked (or price order for a NodeClaim Tenon did not plan) narrowed into one
//! CreateFleet request, and a failure handled as `tenon_core::orchestration::launch` says
//! (a capacity error or an unusable NodeClass deletes the NodeClaim; anything else is tried
//! again).

use super::Lifecycle;
use super::rules as lifecycle;
use crate::controller::cloud::{Cloud, LaunchSlot};
use crate::controller::metrics::Metrics;
use crate::controller::metrics::catalog::{NODECLAIMS_LAUNCHED, RECONCILE_ERROR_KINDS};
use crate::controller::runner::Reconciler;
use crate::controller::{Catalogs, conditions, involved_nodeclaim, locked_patch, unix_now_ms};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use std::time::{Duration, Instant};
use tenon_api::wellknown::{self as wk, condition};
use tenon_api::{EC2NodeClass, NodeClaim};
use tenon_core::cloud::{CloudError, LaunchOption};
use tenon_core::instancetype::InstanceType;
use tenon_core::orchestration::launch::{AfterFailure, LaunchFailure, after_failure};

/// How long a NodeClaim deleted after a failed launch is held from launching again while the
/// watch catches up with the deletion.
const DELETE_SEEN_WITHIN: Duration = Duration::from_secs(30);

impl Lifecycle {
    /// Starts the launch of `nc` unless one is under way.
    pub(super) fn launch(&self, nc: &NodeClaim, catalogs: &Catalogs) {
        let name = nc.metadata.name.clone().unwrap_or_default();
        {
            let Ok(mut l) = self.ctx.launching.lock() else { return };
            if !l.insert(name.clone()) {
                return;
            }
        }
        let never_launched = self.ctx.cluster().take_unlaunched(&name, Instant::now());
        let class_name = nc.spec.node_class_ref.as_ref().map(|r| r.name.clone()).unwrap_or_default();
        let nodeclass = self
            .ctx
            .stores
            .nodeclasses
            .state()
            .into_iter()
            .find(|c| c.metadata.name.as_deref() == Some(class_name.as_str()));
        let types = catalogs.get(&class_name).cloned().unwrap_or_default();
        // A scoring policy's ranking is launched as ranked; the built-in price order is not.
        let pool = nc.metadata.labels.as_ref().and_then(|l| l.get(wk::LABEL_NODEPOOL));
        let ranked = self.ctx.stores.nodepools.state().iter().any(|np| {
            np.metadata.name.as_ref() == pool
                && np.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(wk::ANNOTATION_SCORING_POLICY))
        });
        let (client, cloud, recorder, metrics, launching, nc) = (
            self.ctx.client.clone(),
            self.ctx.cloud.clone(),
            self.ctx.recorder.clone(),
            self.ctx.metrics.clone(),
            self.ctx.launching.clone(),
            nc.clone(),
        );
        let claims = self.ctx.stores.nodeclaims.clone();
        tokio::spawn(async move {
            // A NodeClaim this process did not just create may have been launched already,
            // the cache not showing it yet (or showing an older copy): the API says.
            if !never_launched && launched_already(&client, &name).await {
                if let Ok(mut l) = launching.lock() {
                    l.remove(&name);
                }
                return;
            }
            // The request is built once a slot is free: a wave of a thousand NodeClaims
            // waits as names, not as a thousand sets of launch options.
            let result = match cloud.launch_slot().await {
                Ok(slot) => {
                    let options = lifecycle::launch_options(&nc, &types);
                    let launch = Launch { nc: &nc, nodeclass: nodeclass.as_deref(), options, never_launched, ranked };
                    launch_one(&client, cloud.as_ref(), &slot, launch, &types, &metrics).await
                }
                Err(e) => Err(LaunchFailure::unnamed(&e.to_string())),
            };
            if let Err(failure) = result {
                // Karpenter's lifecycle reconcile fails with its launch; this one runs apart.
                metrics.add(RECONCILE_ERROR_KINDS, &[("controller", Lifecycle::NAME), ("error", "launch")], 1);
                let api = Api::<NodeClaim>::all(client.clone());
                let obj = involved_nodeclaim(&nc);
                match after_failure(failure, unix_now_ms()) {
                    AfterFailure::Delete { event, message } => {
                        recorder.publish(&client, &obj, "Warning", event, &message).await;
                        tracing::warn!(nodeclaim = %name, %message, "launch failed; deleting the NodeClaim");
                        metrics.nodeclaim_disrupted(&nc, disrupted_reason(event), "");
                        if let Err(e) = api.delete(&name, &DeleteParams::default()).await {
                            tracing::warn!(nodeclaim = %name, error = %e, "could not delete a NodeClaim that failed to launch");
                        }
                        held_until_deletion_seen(&claims, &name).await;
                    }
                    AfterFailure::Retry { at, reason, message } => {
                        let unknown = |current: &NodeClaim| {
                            // Launched meanwhile (by an attempt that answered late): kept.
                            if lifecycle::next_step(current) != lifecycle::Step::Launch {
                                return None;
                            }
                            let conds =
                                conditions::with_unknown_condition(current, condition::LAUNCHED, &reason, &message);
                            Some(json!({"status": {"conditions": conds}}))
                        };
                        if let Err(e) = locked_patch::patch_status_locked(&api, &name, unknown).await {
                            tracing::warn!(nodeclaim = %name, error = %e, "could not record the failed launch");
                        }
                        // The next launch is a new attempt, recorded before it is made.
                        let next = (lifecycle::launch_attempt(&nc) + 1).to_string();
                        let meta = json!({"metadata": {"annotations": {wk::ANNOTATION_LAUNCH_ATTEMPT: next}}});
                        let _ = api.patch(&name, &PatchParams::default(), &Patch::Merge(&meta)).await;
                        recorder.publish(&client, &obj, "Warning", "LaunchFailed", &message).await;
                        tracing::warn!(nodeclaim = %name, %message, "launch failed; retrying");
                        let wait = (at - unix_now_ms()).max(0) as u64;
                        tokio::time::sleep(Duration::from_millis(wait)).await;
                    }
                }
            }
            if let Ok(mut l) = launching.lock() {
                l.remove(&name);
            }
        });
    }
}

/// Whether the API holds NodeClaim `name` launched already, deleted, or being deleted. A
/// failed read says no: the launch that follows looks for an instance first.
async fn launched_already(client: &Client, name: &str) -> bool {
    match Api::<NodeClaim>::all(client.clone()).get_opt(name).await {
        Ok(Some(current)) => {
            current.metadata.deletion_timestamp.is_some() || lifecycle::next_step(&current) != lifecycle::Step::Launch
        }
        Ok(None) => true,
        Err(_) => false,
    }
}

/// Holds NodeClaim `name` as launching until the cache shows its deletion (or no longer
/// holds it), for at most [`DELETE_SEEN_WITHIN`]: a pass that still sees it undeleted would
/// otherwise launch it again.
async fn held_until_deletion_seen(claims: &kube::runtime::reflector::Store<NodeClaim>, name: &str) {
    let key = kube::runtime::reflector::ObjectRef::new(name);
    let deadline = Instant::now() + DELETE_SEEN_WITHIN;
    while Instant::now() < deadline && claims.get(&key).is_some_and(|c| c.metadata.deletion_timestamp.is_none()) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Karpenter's `karpenter_nodeclaims_disrupted_total` reason for a failed launch.
fn disrupted_reason(event: &str) -> &'static str {
    if event == "NodeClassNotReady" { "nodeclass_not_ready" } else { "insufficient_capacity" }
}

/// What one launch is of.
struct Launch<'a> {
    nc: &'a NodeClaim,
    nodeclass: Option<&'a EC2NodeClass>,
    options: Vec<LaunchOption>,
    /// Created by this process and never launched (no lookup of an earlier launch needed).
    never_launched: bool,
    /// Its NodePool's scoring policy ranked `options`.
    ranked: bool,
}

async fn launch_one(
    client: &Client,
    cloud: &dyn Cloud,
    slot: &LaunchSlot,
    launch: Launch<'_>,
    types: &[InstanceType],
    metrics: &Metrics,
) -> Result<(), LaunchFailure> {
    let Launch { nc, nodeclass, options, never_launched, ranked } = launch;
    let name = nc.metadata.name.clone().unwrap_or_default();
    let Some(nodeclass) = nodeclass else {
        let class = nc.spec.node_class_ref.as_ref().map(|r| r.name.clone()).unwrap_or_default();
        return Err(LaunchFailure::NodeClassNotReady(format!("EC2NodeClass {class:?} not found (spec.nodeClassRef)")));
    };
    if options.is_empty() {
        return Err(LaunchFailure::InsufficientCapacity(
            "all requested instance types were unavailable during launch".into(),
        ));
    }
    let req = lifecycle::launch_request(nc, nodeclass, options, never_launched, ranked);
    // What the NodeClaim requests shapes the launch (EFA interfaces, Nitro enclaves).
    let requested = nc.spec.resources.requests.keys().cloned().collect();
    let instance = cloud.launch(slot, &req, &requested).await.map_err(|e| match e {
        CloudError::InsufficientCapacity { message, .. } => LaunchFailure::InsufficientCapacity(message),
        CloudError::NodeClassNotReady { nodeclass, message } => {
            LaunchFailure::NodeClassNotReady(format!("EC2NodeClass {nodeclass}: {message}"))
        }
        CloudError::Launch { reason, message } => LaunchFailure::Other { reason, message },
        other => LaunchFailure::unnamed(&other.to_string()),
    })?;
    let it = types.iter().find(|t| t.name == instance.instance_type);
    let api: Api<NodeClaim> = Api::all(client.clone());
    let labels = lifecycle::launched_labels(&instance, it);
    // The ranking has served: the NodeClaim need not carry it any longer. The NodeClass hash
    // it launched with is what drift compares with later.
    let meta = json!({"metadata": {"labels": labels, "annotations": {
        wk::ANNOTATION_LAUNCH_OFFERINGS: null,
        wk::ANNOTATION_NODECLASS_HASH: nodeclass.static_hash(),
        wk::ANNOTATION_NODECLASS_HASH_VERSION: tenon_api::hash::EC2NODECLASS_HASH_VERSION,
    }}});
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&meta))
        .await
        .map_err(|e| LaunchFailure::unnamed(&format!("writing labels: {e}")))?;
    // Built from the NodeClaim as it is now: its conditions are one list, and other writers
    // may have changed it since this launch began.
    let launched = |current: &NodeClaim| Some(json!({"status": lifecycle::launched_status(current, &instance, it)}));
    locked_patch::patch_status_locked(&api, &name, launched)
        .await
        .map_err(|e| LaunchFailure::unnamed(&format!("writing Launched: {e}")))?;
    metrics.add(NODECLAIMS_LAUNCHED, &[("nodepool", &req.nodepool)], 1);
    tracing::info!(nodeclaim = %name, instance = %instance.id, instance_type = %instance.instance_type, zone = %instance.zone, capacity_type = %instance.capacity_type, "launched");
    Ok(())
}
