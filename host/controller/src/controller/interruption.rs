//! The interruption controller: long-polls the SQS queue `tenon-aws` reads, and acts as
//! Karpenter does, outside disruption budgets. A spot interruption warning or a scheduled
//! change deletes the NodeClaim (a spot offering is also marked unavailable, so the
//! replacement goes elsewhere); a state change to stopping/stopped/shutting-down/terminated
//! deletes it; a rebalance recommendation is an Event only. The pods being drained count as
//! pending for the provisioner, so their replacement is launched while the node drains.

use super::events::Recorder;
use super::health::Metrics;
use super::involved_nodeclaim;
use super::state::Stores;
use kube::api::DeleteParams;
use kube::{Api, Client};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_api::NodeClaim;
use tenon_aws::AwsProvider;
use tenon_aws::interruption::{InterruptionKind, InterruptionQueue, Received};
use tenon_core::cloud::UnavailableOffering;

pub struct Interruption {
    pub client: Client,
    pub stores: Stores,
    pub provider: Arc<AwsProvider>,
    pub recorder: Arc<Recorder>,
    pub metrics: Arc<Metrics>,
}

fn kind_name(k: &InterruptionKind) -> &'static str {
    match k {
        InterruptionKind::SpotInterruption => "spot_interrupted",
        InterruptionKind::RebalanceRecommendation => "rebalance_recommendation",
        InterruptionKind::ScheduledChange => "scheduled_change",
        InterruptionKind::StateChange(_) => "state_change",
    }
}

impl Interruption {
    /// Runs forever: connects to the queue (retrying), then handles messages as they come.
    pub async fn run(self, queue: String) {
        let q = loop {
            match InterruptionQueue::new(self.provider.clients.sqs.clone(), &queue).await {
                Ok(q) => break q,
                Err(e) => {
                    tracing::warn!(%queue, error = %e, "interruption queue unavailable; retrying in 30s");
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
            }
        };
        tracing::info!(%queue, "watching the interruption queue");
        loop {
            match q.receive().await {
                Ok(messages) => {
                    for m in messages {
                        // Deleted only once handled: otherwise SQS delivers it again.
                        if let Err(e) = self.handle(&m).await {
                            tracing::warn!(error = %e, "interruption: handling failed; the message comes back in 20 s");
                            continue;
                        }
                        match q.ack(&m).await {
                            Ok(()) => self.metrics.add("karpenter_interruption_deleted_messages_total", 1.0),
                            Err(e) => tracing::warn!(error = %e, "could not delete an interruption message"),
                        }
                    }
                    self.metrics.set(
                        "tenon_interruption_malformed_messages_total",
                        q.malformed.load(std::sync::atomic::Ordering::Relaxed) as f64,
                    );
                }
                Err(e) => {
                    tracing::warn!(error = %e, "interruption queue: receive failed; retrying");
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            }
        }
    }

    /// Acts on one message; an error means it must be handled again.
    async fn handle(&self, m: &Received) -> Result<(), kube::Error> {
        let kind = &m.event.kind;
        self.metrics.add(
            &format!("karpenter_interruption_received_messages_total{{message_type=\"{}\"}}", kind_name(kind)),
            1.0,
        );
        let claims = self.stores.nodeclaims.state();
        for id in &m.event.instance_ids {
            let Some(nc) = claims.iter().find(|c| {
                c.status
                    .as_ref()
                    .and_then(|s| s.provider_id.as_deref())
                    .is_some_and(|p| super::termination::instance_id(p) == Some(id.as_str()))
            }) else {
                tracing::info!(instance = %id, kind = kind_name(kind), "interruption for an instance no NodeClaim owns; ignored");
                continue;
            };
            let (reason, message) = match kind {
                InterruptionKind::RebalanceRecommendation => {
                    ("RebalanceRecommendation", format!("EC2 recommends rebalancing instance {id}"))
                }
                InterruptionKind::SpotInterruption => {
                    ("SpotInterrupted", format!("spot instance {id} will be reclaimed"))
                }
                InterruptionKind::ScheduledChange => {
                    ("InstanceScheduledChange", format!("AWS scheduled maintenance for instance {id}"))
                }
                InterruptionKind::StateChange(s) => ("InstanceStateChange", format!("instance {id} is {s}")),
            };
            let type_ = if m.event.is_actionable() { "Warning" } else { "Normal" };
            self.recorder.publish(&self.client, &involved_nodeclaim(nc), type_, reason, &message).await;
            if !m.event.is_actionable() || nc.metadata.deletion_timestamp.is_some() {
                continue;
            }
            if *kind == InterruptionKind::SpotInterruption {
                let labels = nc.metadata.labels.clone().unwrap_or_default();
                let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
                self.provider.unavailable.mark(
                    UnavailableOffering {
                        instance_type: label(tenon_api::wellknown::LABEL_INSTANCE_TYPE),
                        zone: label(tenon_api::wellknown::LABEL_ZONE),
                        capacity_type: label(tenon_api::wellknown::LABEL_CAPACITY_TYPE),
                    },
                    Instant::now(),
                );
            }
            let name = nc.metadata.name.clone().unwrap_or_default();
            match Api::<NodeClaim>::all(self.client.clone()).delete(&name, &DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(nodeclaim = %name, instance = %id, %reason, "interruption: NodeClaim deleted");
                    self.metrics
                        .add(&format!("karpenter_nodeclaims_disrupted_total{{reason=\"{}\"}}", kind_name(kind)), 1.0);
                }
                // Gone already: nothing left to do.
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => {
                    tracing::warn!(nodeclaim = %name, error = %e, "interruption: could not delete the NodeClaim");
                    return Err(e);
                }
            }
        }
        Ok(())
    }
}
