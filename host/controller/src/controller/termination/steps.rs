//! The steps of termination that act (one per reconcile, against the API server and the
//! cloud): a NodeClaim's release after its Node and instance are gone, a Node's drain,
//! volume detachment and release.

use super::{
    Eviction, MIN_DRAIN_SECONDS, answer_code, deadline, deadline_to_record, delete_params, disrupted_message,
    drained_reason, evict_params, eviction_outcome, has_finalizer, instance_id, node_ready, recorded_deadline,
    release_patch, terminating_node_patch,
};
use crate::controller::cloud::{BoxFuture, Cloud};
use crate::controller::conditions::{self, has_condition};
use crate::controller::error::Error;
use crate::controller::events::{Involved, Recorder};
use crate::controller::eviction_backoff::EvictionBackoff;
use crate::controller::metrics::{Metrics, catalog as m};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tenon_api::NodeClaim;
use tenon_api::wellknown::{self as wk, condition};
use tenon_core::ClusterSnapshot;
use tenon_core::cloud::{CloudError, InstanceState};
use tenon_core::disruption::drain::{DrainAction, PdbAllowance, drain_order_with};

/// `read` as this step read it, at `written`'s resourceVersion: the step's own write since
/// is no conflict for its later writes.
fn at_version(read: &NodeClaim, written: &NodeClaim) -> NodeClaim {
    let mut nc = read.clone();
    nc.metadata.resource_version = written.metadata.resource_version.clone();
    nc
}

/// The cloud side of termination.
pub trait Instances: Sync {
    fn terminate<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), Error>>;
    /// Whether the instance is gone: not found, or terminated (shutting down still counts).
    fn gone<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, Error>>;
}

impl<C: Cloud> Instances for C {
    fn terminate<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            self.delete(&[id.to_string()]).await.map_err(|e| Error::cloud(format!("terminating {id}"), e))
        })
    }

    fn gone<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, Error>> {
        Box::pin(async move {
            match self.get(id).await {
                Ok(i) => Ok(i.state == InstanceState::Terminated),
                Err(CloudError::NotFound(_)) => Ok(true),
                Err(e) => Err(Error::cloud(format!("looking up {id}"), e)),
            }
        })
    }
}

/// What a termination step needs from the controller.
pub struct Ctx<'a> {
    pub client: &'a Client,
    /// For evictions: no retries inside the client (a refusal is backed off per pod).
    pub evictions: &'a Client,
    pub cloud: &'a dyn Instances,
    pub recorder: &'a Recorder,
    pub metrics: &'a Metrics,
    pub backoff: &'a EvictionBackoff,
    /// Seconds since the epoch.
    pub now: i64,
}

/// Where a NodeClaim's termination stands after a step.
#[derive(Debug, PartialEq)]
pub enum Progress {
    /// This step released it.
    Released,
    Waiting,
}

async fn patch_status(ctx: &Ctx<'_>, nc: &NodeClaim, conds: Vec<tenon_api::common::Condition>) -> Result<(), Error> {
    let name = nc.metadata.name.clone().unwrap_or_default();
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let patch = conditions::locked(&nc.metadata, json!({"status": {"conditions": conds}}));
    match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(Error::kube(format!("writing the conditions of {name}"), e)),
    }
}

/// Terminates the NodeClaim's instance (`InstanceTerminating`) and says whether it is gone.
async fn instance_gone(ctx: &Ctx<'_>, nc: &NodeClaim) -> Result<bool, Error> {
    let Some(id) = nc.status.as_ref().and_then(|s| s.provider_id.as_deref()).and_then(instance_id) else {
        return Ok(true);
    };
    if ctx.cloud.gone(id).await? {
        return Ok(true);
    }
    if !has_condition(nc, condition::INSTANCE_TERMINATING) {
        ctx.cloud.terminate(id).await?;
        patch_status(
            ctx,
            nc,
            conditions::with_condition(nc, condition::INSTANCE_TERMINATING, true, "InstanceTerminating", ""),
        )
        .await?;
    }
    Ok(false)
}

/// One step of terminating NodeClaim `nc`; `nodes` are the Nodes with its providerID. Its
/// release is counted in Karpenter's series.
pub async fn finalize_nodeclaim(ctx: &Ctx<'_>, nc: &NodeClaim, nodes: &[&Node]) -> Result<Progress, Error> {
    let progress = nodeclaim_step(ctx, nc, nodes).await?;
    if progress == Progress::Released {
        super::nodeclaim_released_metrics(ctx.metrics, nc, ctx.now);
    }
    Ok(progress)
}

async fn nodeclaim_step(ctx: &Ctx<'_>, nc: &NodeClaim, nodes: &[&Node]) -> Result<Progress, Error> {
    let name = nc.metadata.name.clone().unwrap_or_default();
    if !has_finalizer(nc.metadata.finalizers.as_ref()) {
        return Ok(Progress::Waiting);
    }
    let api: Api<NodeClaim> = Api::all(ctx.client.clone());
    let mut stamped = None;
    if let Some(at) = deadline_to_record(nc) {
        let patch = json!({"metadata": {"annotations": {wk::ANNOTATION_NODECLAIM_TERMINATION_TIME: at}}});
        let written = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::kube(format!("recording the termination time of {name}"), e))?;
        stamped = Some(at_version(nc, &written));
        let obj = Involved::cluster_scoped("karpenter.sh/v1", "NodeClaim", &nc.metadata);
        ctx.recorder
            .publish(
                ctx.client,
                &obj,
                "Warning",
                "TerminationGracePeriodExpiring",
                &format!("All pods will be deleted by {at}"),
            )
            .await;
    }
    let nc = stamped.as_ref().unwrap_or(nc);
    // Only a registered NodeClaim's Nodes are deleted (Karpenter: deleting a Node without
    // our finalizer could leak its kubelet's lease); the instance's end removes the others.
    if has_condition(nc, condition::REGISTERED) && !nodes.is_empty() {
        let api: Api<Node> = Api::all(ctx.client.clone());
        for n in nodes.iter().filter(|n| n.metadata.deletion_timestamp.is_none()) {
            let node = n.metadata.name.clone().unwrap_or_default();
            match api.delete(&node, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(Error::kube(format!("deleting node {node}"), e)),
            }
        }
        // The Node's own termination drains it; the NodeClaim waits until it is gone.
        return Ok(Progress::Waiting);
    }
    if !instance_gone(ctx, nc).await? {
        return Ok(Progress::Waiting);
    }
    match api.patch(&name, &PatchParams::default(), &Patch::Merge(&release_patch(&nc.metadata))).await {
        Ok(_) => Ok(Progress::Released),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Progress::Released),
        Err(e) => Err(Error::kube(format!("releasing {name}"), e)),
    }
}

/// Where a Node's termination stands after a step.
#[derive(Debug, PartialEq)]
pub enum NodeProgress {
    Released,
    /// Pods still to leave, and Karpenter's `FailedDraining` message when some must wait.
    Draining(Option<String>),
    Waiting,
}

/// One step of terminating Node `node` (being deleted, ours); `nc` is its NodeClaim, if one.
/// A drain held up is said on the Node (`FailedDraining`); its release is counted in
/// Karpenter's series.
pub async fn finalize_node(
    ctx: &Ctx<'_>,
    node: &Node,
    nc: Option<&NodeClaim>,
    snap: &ClusterSnapshot,
    allowance: &mut PdbAllowance,
    pending_volumes: &[String],
) -> Result<NodeProgress, Error> {
    let progress = node_step(ctx, node, nc, snap, allowance, pending_volumes).await?;
    match &progress {
        NodeProgress::Released => super::node_released_metrics(ctx.metrics, node, ctx.now),
        NodeProgress::Draining(Some(message)) => {
            let obj = Involved::cluster_scoped("v1", "Node", &node.metadata);
            ctx.recorder.publish(ctx.client, &obj, "Warning", "FailedDraining", message).await;
        }
        _ => {}
    }
    Ok(progress)
}

async fn node_step(
    ctx: &Ctx<'_>,
    node: &Node,
    nc: Option<&NodeClaim>,
    snap: &ClusterSnapshot,
    allowance: &mut PdbAllowance,
    pending_volumes: &[String],
) -> Result<NodeProgress, Error> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    // The NodeClaim as this step read it, at the version the deletion left it (the step's
    // condition writes are conditional on it).
    let mut deleted = None;
    if let Some(nc) = nc.filter(|c| c.metadata.deletion_timestamp.is_none()) {
        let claim = nc.metadata.name.clone().unwrap_or_default();
        match Api::<NodeClaim>::all(ctx.client.clone()).delete(&claim, &DeleteParams::default()).await {
            Ok(answer) => deleted = answer.left().map(|d| at_version(nc, &d)),
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(Error::kube(format!("deleting NodeClaim {claim}"), e)),
        }
    }
    let nc = deleted.as_ref().or(nc);
    // Karpenter says so on the Node too, every pass (the recorder keeps it to once a window).
    if let Some(at) = nc.and_then(recorded_deadline) {
        let obj = Involved::cluster_scoped("v1", "Node", &node.metadata);
        let message = format!("All pods will be deleted by {at}");
        ctx.recorder.publish(ctx.client, &obj, "Warning", "TerminationGracePeriodExpiring", &message).await;
    }
    // A node whose instance is gone drains nothing: its pods are gone with it.
    let instance = node.spec.as_ref().and_then(|s| s.provider_id.as_deref()).and_then(instance_id);
    if !node_ready(node)
        && let Some(id) = instance
        && ctx.cloud.gone(id).await?
    {
        return release_node(&nodes, &node.metadata).await;
    }
    // The object as last written: the release below is conditional on its version.
    let mut current = node.metadata.clone();
    if let Some(p) = terminating_node_patch(node) {
        // Locked: the taint list is replaced whole (a 409 reads again).
        let p = conditions::locked(&node.metadata, p);
        current = nodes
            .patch(&name, &PatchParams::default(), &Patch::Merge(&p))
            .await
            .map_err(|e| Error::kube(format!("tainting {name}"), e))?
            .metadata;
    }
    let plan = drain_order_with(snap, &name, nc.and_then(deadline), allowance);
    if !plan.finished() {
        if let Some(c) = nc.filter(|c| !conditions::condition_is(c, condition::DRAINED, "Unknown")) {
            patch_status(ctx, c, conditions::with_unknown_condition(c, condition::DRAINED, "Draining", "")).await?;
        }
        let reason = drained_reason(nc);
        let mut refused = None;
        for (p, action) in &plan.steps {
            let pod = &snap.pods[*p];
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &pod.namespace);
            let evictions: Api<Pod> = Api::namespaced(ctx.evictions.clone(), &pod.namespace);
            let involved = Involved::pod(pod);
            match action {
                DrainAction::Evict if !ctx.backoff.ready(&pod.uid, ctx.now) => {}
                DrainAction::Evict => {
                    let answer = evictions.evict(&pod.name, &evict_params(pod)).await.map(|_| ());
                    ctx.metrics.add(m::PODS_EVICTION_REQUESTS, &[("code", &answer_code(&answer).to_string())], 1);
                    match eviction_outcome(&answer) {
                        Eviction::Evicted => {
                            ctx.backoff.done(&pod.uid);
                            let message = format!("Evicted pod: {reason}");
                            ctx.recorder.publish(ctx.client, &involved, "Normal", "Evicted", &message).await;
                            ctx.metrics.add(m::PODS_DRAINED, &[("reason", &reason)], 1);
                        }
                        Eviction::Gone => ctx.backoff.done(&pod.uid),
                        Eviction::Refused(why) => {
                            ctx.backoff.refused(&pod.uid, ctx.now);
                            refused = Some(format!("Failed to drain node, {why}: Pod {}/{}", pod.namespace, pod.name))
                        }
                        Eviction::Failed => {
                            if let Err(e) = answer {
                                return Err(Error::kube(format!("evicting {}/{}", pod.namespace, pod.name), e));
                            }
                        }
                    }
                }
                DrainAction::Delete { grace } => {
                    let until = nc.and_then(deadline).unwrap_or(ctx.now);
                    let message = disrupted_message(until, *grace, pod.termination_grace_seconds);
                    ctx.recorder.publish(ctx.client, &involved, "Normal", "Disrupted", &message).await;
                    match pods.delete(&pod.name, &delete_params(pod, *grace)).await {
                        Ok(_) => ctx.metrics.add(m::PODS_DRAINED, &[("reason", &reason)], 1),
                        // Gone, or the name is another pod's now (the UID precondition).
                        Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => {}
                        Err(e) => return Err(Error::kube(format!("deleting {}/{}", pod.namespace, pod.name), e)),
                    }
                }
                DrainAction::Wait(_) => {}
            }
        }
        return Ok(NodeProgress::Draining(refused.or_else(|| plan.waiting_message())));
    }
    if let Some(c) = nc {
        if !has_condition(c, condition::DRAINED) {
            // At least MIN_DRAIN_SECONDS since draining began.
            let began = conditions::condition_since(c, condition::DRAINED).unwrap_or(ctx.now);
            if ctx.now - began < MIN_DRAIN_SECONDS {
                if conditions::condition_since(c, condition::DRAINED).is_none() {
                    patch_status(ctx, c, conditions::with_unknown_condition(c, condition::DRAINED, "Draining", ""))
                        .await?;
                }
                return Ok(NodeProgress::Waiting);
            }
            patch_status(ctx, c, conditions::with_condition(c, condition::DRAINED, true, "Drained", "")).await?;
            let pool =
                node.metadata.labels.as_ref().and_then(|l| l.get(wk::LABEL_NODEPOOL)).cloned().unwrap_or_default();
            ctx.metrics.add(m::NODES_DRAINED, &[("nodepool", &pool)], 1);
            return Ok(NodeProgress::Waiting);
        }
        let past_deadline = deadline(c).is_some_and(|d| ctx.now >= d);
        if !pending_volumes.is_empty() && !past_deadline {
            if !conditions::condition_is(c, condition::VOLUMES_DETACHED, "Unknown") {
                let message = format!("Awaiting deletion of bound volumeattachments ({})", pending_volumes.join(", "));
                patch_status(
                    ctx,
                    c,
                    conditions::with_unknown_condition(
                        c,
                        condition::VOLUMES_DETACHED,
                        "AwaitingVolumeDetachment",
                        &message,
                    ),
                )
                .await?;
                let obj = Involved::cluster_scoped("v1", "Node", &node.metadata);
                ctx.recorder.publish(ctx.client, &obj, "Normal", "AwaitingVolumeDetachment", &message).await;
            }
            return Ok(NodeProgress::Waiting);
        }
        if !conditions::condition_is(c, condition::VOLUMES_DETACHED, "True")
            && !conditions::condition_is(c, condition::VOLUMES_DETACHED, "False")
        {
            let conds = if pending_volumes.is_empty() {
                conditions::with_condition(c, condition::VOLUMES_DETACHED, true, "VolumesDetached", "")
            } else {
                conditions::with_condition(c, condition::VOLUMES_DETACHED, false, "TerminationGracePeriodElapsed", "")
            };
            patch_status(ctx, c, conds).await?;
            return Ok(NodeProgress::Waiting);
        }
        if !instance_gone(ctx, c).await? {
            return Ok(NodeProgress::Waiting);
        }
    }
    release_node(&nodes, &current).await
}

/// Removes our finalizer from the Node whose metadata (as last written) is `meta`.
async fn release_node(nodes: &Api<Node>, meta: &ObjectMeta) -> Result<NodeProgress, Error> {
    let name = meta.name.clone().unwrap_or_default();
    match nodes.patch(&name, &PatchParams::default(), &Patch::Merge(&release_patch(meta))).await {
        Ok(_) => Ok(NodeProgress::Released),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(NodeProgress::Released),
        Err(e) => Err(Error::kube(format!("releasing node {name}"), e)),
    }
}
