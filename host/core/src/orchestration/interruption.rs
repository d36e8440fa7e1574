//! What Karpenter's interruption handler does with one message (a spot warning, a
//! scheduled change, a state change, a rebalance recommendation): for each NodeClaim on an
//! instance the message names, an Event on the NodeClaim (and its Node), the spot offering
//! marked unavailable on a spot warning, and the NodeClaim deleted for every kind but a
//! rebalance recommendation. The controller carries the steps out for SQS messages and
//! deletes a message only when every delete succeeded or found the NodeClaim gone; the
//! simulator for its scripted spot interruptions.

use crate::cloud::UnavailableOffering;

/// The kinds of interruption message AWS sends (EventBridge rules for EC2 and AWS Health).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InterruptionKind {
    /// Two minutes before EC2 reclaims a spot instance.
    SpotInterruption,
    /// EC2 says the spot instance is at elevated risk of interruption.
    RebalanceRecommendation,
    /// AWS Health scheduled maintenance (retirement, reboot) for these instances.
    ScheduledChange,
    /// The instance changed state (`stopping`, `stopped`, `shutting-down`, `terminated`, ...).
    StateChange(String),
    /// EC2 is taking back the capacity reservation the instance runs in (an open
    /// reservation EC2 matched the launch to).
    CapacityReservationInterruption,
    /// EC2's status checks find the instance unhealthy
    /// ([`instance_health`](super::instance_health)): not a queue message, the same handling.
    Unhealthy(HealthCategory),
}

/// Which of EC2's status checks failed (DescribeInstanceStatus).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HealthCategory {
    /// The instance's own reachability check: the OS or its network is broken.
    InstanceStatus,
    /// The host's: the hardware or AWS's network under the instance is broken.
    SystemStatus,
    /// A scheduled event (reboot, maintenance, retirement, stop).
    EventStatus,
}

impl HealthCategory {
    /// As Karpenter's `karpenter_interruption_instance_status_unhealthy_total` labels it.
    pub fn as_str(self) -> &'static str {
        match self {
            HealthCategory::InstanceStatus => "InstanceStatus",
            HealthCategory::SystemStatus => "SystemStatus",
            HealthCategory::EventStatus => "EventStatus",
        }
    }
}

/// A NodeClaim on an instance the message names, as the handler needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Owner {
    pub nodeclaim: String,
    /// Its Node, when one has registered.
    pub node: Option<String>,
    pub nodepool: String,
    pub instance_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// Already being deleted: notified, not deleted again.
    pub deleting: bool,
    /// Carries `karpenter.sh/nodeclaim-termination-timestamp` already: never re-stamped.
    pub termination_stamped: bool,
}

/// Karpenter's kind of a message, as its metrics label it (`message_type` of
/// `karpenter_interruption_received_messages_total`, `reason` of
/// `karpenter_nodeclaims_disrupted_total`); `None` for a state change Karpenter ignores
/// (`pending`, `running`: its no-op).
pub fn kind(kind: &InterruptionKind) -> Option<&'static str> {
    Some(match kind {
        InterruptionKind::SpotInterruption => "spot_interrupted",
        InterruptionKind::RebalanceRecommendation => "rebalance_recommendation",
        InterruptionKind::ScheduledChange => "scheduled_change",
        InterruptionKind::CapacityReservationInterruption => "capacity_reservation_interrupted",
        InterruptionKind::StateChange(s) => match s.to_ascii_lowercase().as_str() {
            "stopping" | "stopped" => "instance_stopped",
            "shutting-down" | "terminated" => "instance_terminated",
            _ => return None,
        },
        InterruptionKind::Unhealthy(HealthCategory::InstanceStatus) => "instance_status",
        InterruptionKind::Unhealthy(HealthCategory::SystemStatus) => "system_status",
        InterruptionKind::Unhealthy(HealthCategory::EventStatus) => "event_status",
    })
}

/// Karpenter's `TerminatingOnInterruption` messages, on the NodeClaim and on its Node, once
/// a message had the NodeClaim deleted.
pub const TERMINATING_ON_INTERRUPTION: (&str, &str) =
    ("Interruption triggered termination for the NodeClaim", "Interruption triggered termination for the Node");

/// The Event a message puts on its NodeClaim and Node (Karpenter's reasons).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notice {
    /// `Warning` or `Normal`.
    pub type_: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// One thing to do for a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Publish `notice` on the owner's NodeClaim and Node.
    Notify { owner: usize, notice: Notice },
    /// The offering the spot warning came from: no new capacity there for a while.
    MarkUnavailable(UnavailableOffering),
    /// Stamp the owner's NodeClaim with `karpenter.sh/nodeclaim-termination-timestamp` =
    /// now, so its drain is not waited for: the instance is broken, its pods may never go
    /// gracefully (Karpenter's forceful termination for failed status checks).
    StampTermination { owner: usize },
    /// Delete the owner's NodeClaim; once deleted, count it disrupted with `reason` and
    /// publish `TerminatingOnInterruption`.
    Delete { owner: usize, reason: &'static str },
}

/// The steps for a message of kind `of`, whose instances `owners` run (every NodeClaim whose
/// instance the message names, in the message's order).
pub fn plan(of: &InterruptionKind, owners: &[Owner]) -> Vec<Step> {
    let Some(kind) = kind(of) else { return vec![] };
    let mut steps = Vec::new();
    for (i, o) in owners.iter().enumerate() {
        let id = &o.instance_id;
        let (type_, reason, message) = match kind {
            "spot_interrupted" => {
                ("Warning", "SpotInterrupted", format!("Spot interruption warning for instance {id}"))
            }
            "rebalance_recommendation" => {
                ("Normal", "SpotRebalanceRecommendation", format!("Spot rebalance recommendation for instance {id}"))
            }
            "scheduled_change" => ("Warning", "InstanceUnhealthy", format!("AWS scheduled a change to instance {id}")),
            "capacity_reservation_interrupted" => (
                "Warning",
                "CapacityReservationInstanceInterrupted",
                "Capacity Reservation interruption warning was triggered".to_string(),
            ),
            "instance_stopped" => ("Warning", "InstanceStopping", format!("Instance {id} is stopping")),
            "instance_terminated" => ("Warning", "InstanceTerminating", format!("Instance {id} is terminating")),
            "event_status" => ("Warning", "InstanceUnhealthy", format!("Instance {id} has a scheduled EC2 event")),
            _ => ("Warning", "InstanceUnhealthy", format!("Instance {id} failed its EC2 {kind} check")),
        };
        steps.push(Step::Notify { owner: i, notice: Notice { type_, reason, message } });
        if matches!(kind, "instance_status" | "system_status") && !o.termination_stamped {
            steps.push(Step::StampTermination { owner: i });
        }
        if kind == "spot_interrupted" && !o.instance_type.is_empty() && !o.zone.is_empty() {
            steps.push(Step::MarkUnavailable(UnavailableOffering {
                instance_type: o.instance_type.clone(),
                zone: o.zone.clone(),
                capacity_type: tenon_api::wellknown::CAPACITY_TYPE_SPOT.into(),
            }));
        }
        if kind != "rebalance_recommendation" && !o.deleting {
            steps.push(Step::Delete { owner: i, reason: kind });
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_changes_are_stopped_or_terminated_and_others_are_nothing() {
        for (state, want) in [
            ("stopping", Some("instance_stopped")),
            ("Stopped", Some("instance_stopped")),
            ("shutting-down", Some("instance_terminated")),
            ("terminated", Some("instance_terminated")),
            ("running", None),
            ("pending", None),
        ] {
            assert_eq!(kind(&InterruptionKind::StateChange(state.into())), want, "{state}");
        }
    }

    #[test]
    fn a_nodeclaim_being_deleted_is_notified_not_deleted_again() {
        let owners = [Owner { nodeclaim: "a".into(), instance_id: "i-1".into(), deleting: true, ..Default::default() }];
        let steps = plan(&InterruptionKind::ScheduledChange, &owners);
        assert!(
            matches!(steps.as_slice(), [Step::Notify { owner: 0, notice }] if notice.reason == "InstanceUnhealthy")
        );
    }
}
