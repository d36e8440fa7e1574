//! The interruption controller: long-polls the SQS queue `tenon-aws` reads and carries out
//! what `tenon_core::orchestration::interruption::plan` decides, as Karpenter does and outside
//! disruption budgets: a spot warning, scheduled change or stop/termination deletes the
//! NodeClaim (a spot warning also marks its offering unavailable, so the replacement goes
//! elsewhere); a rebalance recommendation is an Event only. A message is deleted only once
//! every NodeClaim delete succeeded or found it gone; otherwise SQS delivers it again. The
//! pods being drained count as pending for the provisioner, so their replacement is
//! launched while the node drains.

pub mod instance_health;

use super::cloud::Cloud;
use super::events::{Involved, Recorder};
use super::involved_nodeclaim;
use super::leader::Leadership;
use super::metrics::{Metrics, catalog as mc};
use super::state::Stores;
use k8s_openapi::api::core::v1::Node;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_api::NodeClaim;
use tenon_api::wellknown as wk;
use tenon_aws::interruption::{InterruptionKind, Received};
use tenon_core::orchestration::interruption::{self as handling, Owner, Step};

#[derive(Clone)]
pub struct Interruption {
    pub client: Client,
    pub stores: Stores,
    pub cloud: Arc<dyn Cloud>,
    pub recorder: Arc<Recorder>,
    pub metrics: Arc<Metrics>,
    /// Messages are received only while this process may act: a follower, or Tenon beside
    /// another provisioner that leads, leaves them to the leader.
    pub leadership: Arc<Leadership>,
}

impl Interruption {
    /// Runs forever: connects to the queue (retrying), then handles messages as they come.
    pub async fn run(self, queue: String) {
        let q = loop {
            match self.cloud.interruption_queue(&queue).await {
                Ok(q) => break q,
                Err(e) => {
                    tracing::warn!(%queue, error = %e, "interruption queue unavailable; retrying in 30s");
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
            }
        };
        tracing::info!(%queue, "watching the interruption queue");
        loop {
            if !self.leadership.may_act() {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            match q.receive().await {
                Ok(messages) => {
                    for m in messages {
                        // Deleted only once handled: otherwise SQS delivers it again.
                        if let Err(e) = self.handle(&m).await {
                            tracing::warn!(error = %e, "interruption: handling failed; the message comes back in 20 s");
                            continue;
                        }
                        match q.ack(&m).await {
                            Ok(()) => self.metrics.add(mc::INTERRUPTION_DELETED, &[], 1),
                            Err(e) => tracing::warn!(error = %e, "could not delete an interruption message"),
                        }
                    }
                    self.metrics.advance_to(mc::INTERRUPTION_MALFORMED, &[], q.malformed());
                }
                Err(e) => {
                    tracing::warn!(error = %e, "interruption queue: receive failed; retrying");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            }
        }
    }

    /// Acts on one message; an error means it must be handled again, so the message is kept.
    async fn handle(&self, m: &Received) -> Result<(), kube::Error> {
        let kind = handling::kind(&m.event.kind);
        self.metrics.add(mc::INTERRUPTION_RECEIVED, &[("message_type", kind.unwrap_or("no_op"))], 1);
        if let Ok(sent) = m.event.time.parse::<k8s_openapi::jiff::Timestamp>() {
            let waited = k8s_openapi::jiff::Timestamp::now().duration_since(sent).as_secs_f64().max(0.0);
            self.metrics.observe(mc::INTERRUPTION_MESSAGE_QUEUE_DURATION, &[], waited);
        }
        self.act(&m.event.kind, &m.event.instance_ids).await.map(|_| ())
    }

    /// Carries out `tenon_core::orchestration::interruption::plan` for a message of kind
    /// `of` naming instances `ids`. Whether any NodeClaim owns one of them; an error when
    /// a NodeClaim could not be deleted or stamped.
    pub(super) async fn act(&self, of: &InterruptionKind, ids: &[String]) -> Result<bool, kube::Error> {
        let kind = handling::kind(of);
        let claims = self.stores.nodeclaims.state();
        let mut owners = Vec::new();
        let mut found = Vec::new();
        for id in ids {
            let mine = claims.iter().filter(|c| {
                c.status
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .is_some_and(|p| super::termination::instance_id(p) == Some(id.as_str()))
            });
            let before = owners.len();
            for nc in mine {
                owners.push(owner(nc, id));
                found.push(nc.clone());
            }
            if owners.len() == before {
                tracing::info!(instance = %id, kind = kind.unwrap_or("no_op"), "interruption for an instance no NodeClaim owns; ignored");
            }
        }
        let nodes = self.stores.nodes.state();
        let mut failed = None;
        for step in handling::plan(of, &owners) {
            match step {
                Step::Notify { owner, notice } => {
                    self.notify(&found[owner], &owners[owner], &nodes, notice.type_, notice.reason, &notice.message)
                        .await;
                }
                Step::MarkUnavailable(offering) => self.cloud.mark_unavailable(offering, Instant::now()),
                Step::StampTermination { owner } => {
                    let name = &owners[owner].nodeclaim;
                    let at = super::conditions::now_time().0.to_string();
                    let patch = json!({"metadata": {"annotations": {wk::ANNOTATION_NODECLAIM_TERMINATION_TIME: at}}});
                    match Api::<NodeClaim>::all(self.client.clone())
                        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                    {
                        Ok(_) => {
                            tracing::info!(nodeclaim = %name, "unhealthy instance: its drain will not be waited for")
                        }
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => {
                            tracing::warn!(nodeclaim = %name, error = %e, "could not stamp the termination time");
                            failed = Some(e);
                        }
                    }
                }
                Step::Delete { owner, reason } => {
                    let o = &owners[owner];
                    match Api::<NodeClaim>::all(self.client.clone())
                        .delete(&o.nodeclaim, &DeleteParams::default())
                        .await
                    {
                        Ok(_) => {
                            tracing::info!(nodeclaim = %o.nodeclaim, instance = %o.instance_id, %reason, "interruption: NodeClaim deleted");
                            self.metrics.nodeclaim_disrupted(&found[owner], reason, "");
                            let messages = handling::TERMINATING_ON_INTERRUPTION;
                            self.notify_each(
                                &found[owner],
                                o,
                                &nodes,
                                "Warning",
                                "TerminatingOnInterruption",
                                messages,
                            )
                            .await;
                        }
                        // Gone already: nothing left to do.
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => {
                            tracing::warn!(nodeclaim = %o.nodeclaim, error = %e, "interruption: could not delete the NodeClaim");
                            failed = Some(e);
                        }
                    }
                }
            }
        }
        failed.map_or(Ok(!owners.is_empty()), Err)
    }

    /// An Event on the NodeClaim and, when it has registered, its Node (as Karpenter does).
    async fn notify(&self, nc: &NodeClaim, o: &Owner, nodes: &[Arc<Node>], type_: &str, reason: &str, message: &str) {
        self.notify_each(nc, o, nodes, type_, reason, (message, message)).await;
    }

    /// An Event on the NodeClaim and its Node, with a message for each.
    async fn notify_each(
        &self,
        nc: &NodeClaim,
        o: &Owner,
        nodes: &[Arc<Node>],
        type_: &str,
        reason: &str,
        (on_nodeclaim, on_node): (&str, &str),
    ) {
        self.recorder.publish(&self.client, &involved_nodeclaim(nc), type_, reason, on_nodeclaim).await;
        if let Some(node) = o.node.as_deref().and_then(|n| nodes.iter().find(|x| x.metadata.name.as_deref() == Some(n)))
        {
            let obj = Involved::cluster_scoped("v1", "Node", &node.metadata);
            self.recorder.publish(&self.client, &obj, type_, reason, on_node).await;
        }
    }
}

/// What the handler needs of a NodeClaim on instance `id`.
fn owner(nc: &NodeClaim, id: &str) -> Owner {
    let labels = nc.metadata.labels.clone().unwrap_or_default();
    let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
    Owner {
        nodeclaim: nc.metadata.name.clone().unwrap_or_default(),
        node: nc.status.as_ref().and_then(|s| s.node_name.clone()),
        nodepool: super::pool_of(nc).to_string(),
        instance_id: id.to_string(),
        instance_type: label(wk::LABEL_INSTANCE_TYPE),
        zone: label(wk::LABEL_ZONE),
        capacity_type: label(wk::LABEL_CAPACITY_TYPE),
        deleting: nc.metadata.deletion_timestamp.is_some(),
        termination_stamped: nc
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(wk::ANNOTATION_NODECLAIM_TERMINATION_TIME)),
    }
}
