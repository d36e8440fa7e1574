//! The interruption queue: EventBridge delivers EC2 and AWS Health events to an SQS queue;
//! Tenon long-polls it, turns each message into a typed event keyed by instance id, and
//! deletes it once handled. A message that is not one of the four kinds is logged, counted
//! and deleted: it can never become valid, and leaving it would redeliver it forever.

use crate::error::api;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use tenon_core::cloud::CloudError;

pub use tenon_core::orchestration::interruption::InterruptionKind;

/// One parsed message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterruptionEvent {
    pub kind: InterruptionKind,
    pub instance_ids: Vec<String>,
    /// The event's `time` as sent (RFC 3339).
    pub time: String,
}

/// Parses an EventBridge message body.
pub fn parse(body: &str) -> Result<InterruptionEvent, String> {
    let v: Value = serde_json::from_str(body).map_err(|e| format!("not JSON: {e}"))?;
    let detail_type = v["detail-type"].as_str().ok_or("no detail-type")?;
    let source = v["source"].as_str().unwrap_or_default();
    let detail = &v["detail"];
    let time = v["time"].as_str().unwrap_or_default().to_string();
    let one_id = || detail["instance-id"].as_str().map(|s| vec![s.to_string()]).ok_or("no detail.instance-id");
    let (kind, instance_ids) = match (source, detail_type) {
        ("aws.ec2", "EC2 Spot Instance Interruption Warning") => (InterruptionKind::SpotInterruption, one_id()?),
        ("aws.ec2", "EC2 Instance Rebalance Recommendation") => (InterruptionKind::RebalanceRecommendation, one_id()?),
        ("aws.ec2", "EC2 Capacity Reservation Instance Interruption Warning") => {
            (InterruptionKind::CapacityReservationInterruption, one_id()?)
        }
        ("aws.ec2", "EC2 Instance State-change Notification") => {
            let state = detail["state"].as_str().ok_or("no detail.state")?;
            (InterruptionKind::StateChange(state.to_string()), one_id()?)
        }
        ("aws.health", "AWS Health Event") => {
            if detail["service"].as_str() != Some("EC2")
                || detail["eventTypeCategory"].as_str() != Some("scheduledChange")
            {
                return Err(format!(
                    "AWS Health event for service {:?}, category {:?}: only EC2 scheduledChange is handled",
                    detail["service"].as_str().unwrap_or(""),
                    detail["eventTypeCategory"].as_str().unwrap_or("")
                ));
            }
            let ids: Vec<String> = detail["affectedEntities"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| e["entityValue"].as_str().map(str::to_string))
                .collect();
            if ids.is_empty() {
                return Err("AWS Health event without affectedEntities".into());
            }
            (InterruptionKind::ScheduledChange, ids)
        }
        (s, d) => return Err(format!("unhandled event {d:?} from {s:?}")),
    };
    Ok(InterruptionEvent { kind, instance_ids, time })
}

/// A received, parsed message; `ack` it once handled.
#[derive(Clone, Debug)]
pub struct Received {
    pub event: InterruptionEvent,
    pub receipt_handle: String,
}

pub struct InterruptionQueue {
    sqs: aws_sdk_sqs::Client,
    url: String,
    /// Messages that were not an interruption event (also exported as a metric by the
    /// controller: `tenon_interruption_malformed_messages_total`).
    pub malformed: AtomicU64,
    pub wait_seconds: i32,
}

/// Karpenter's: a message whose handling failed comes back 20 s later.
pub const VISIBILITY_TIMEOUT_SECS: i32 = 20;

impl InterruptionQueue {
    /// `queue` is a name or a URL.
    pub async fn new(sqs: aws_sdk_sqs::Client, queue: &str) -> Result<Self, CloudError> {
        let url = if queue.starts_with("https://") || queue.starts_with("http://") {
            queue.to_string()
        } else {
            sqs.get_queue_url()
                .queue_name(queue)
                .send()
                .await
                .map_err(|e| api("GetQueueUrl", e))?
                .queue_url()
                .unwrap_or_default()
                .to_string()
        };
        Ok(InterruptionQueue { sqs, url, malformed: AtomicU64::new(0), wait_seconds: 20 })
    }

    /// One long poll: up to 10 events. Malformed messages are deleted here.
    pub async fn receive(&self) -> Result<Vec<Received>, CloudError> {
        let out = self
            .sqs
            .receive_message()
            .queue_url(&self.url)
            .max_number_of_messages(10)
            // A message not deleted (its handling failed) is delivered again after this.
            .visibility_timeout(VISIBILITY_TIMEOUT_SECS)
            .wait_time_seconds(self.wait_seconds)
            .send()
            .await
            .map_err(|e| api("ReceiveMessage", e))?;
        let mut events = Vec::new();
        for m in out.messages() {
            let handle = m.receipt_handle().unwrap_or_default().to_string();
            match parse(m.body().unwrap_or_default()) {
                Ok(event) => events.push(Received { event, receipt_handle: handle }),
                Err(why) => {
                    self.malformed.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(message_id = m.message_id().unwrap_or(""), %why, "interruption queue: dropping a message that is not an interruption event");
                    self.delete(&handle).await?;
                }
            }
        }
        Ok(events)
    }

    pub async fn ack(&self, r: &Received) -> Result<(), CloudError> {
        self.delete(&r.receipt_handle).await
    }

    async fn delete(&self, handle: &str) -> Result<(), CloudError> {
        self.sqs
            .delete_message()
            .queue_url(&self.url)
            .receipt_handle(handle)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| api("DeleteMessage", e))
    }
}
