//! Karpenter's interruption controller cases (AWS `pkg/controllers/interruption/suite_test.go`)
//! at the level that decides them: messages go through a real queue (moto's SQS) and
//! `InterruptionQueue`, and `tenon_core::orchestration::interruption::plan` says what happens to the
//! NodeClaims; the controller only carries the steps out (its delete-failure path is the
//! end-to-end test `interruption_gc::a_spot_warning_whose_nodeclaim_delete_fails_is_handled_on_redelivery`).
//! A message is deleted from the queue once handled, so "deleted N messages" is "N acked,
//! and the queue is empty".

use crate::support;

use aws_sdk_sqs::types::QueueAttributeName;
use std::time::Instant;
use support::{Moto, event};
use tenon_aws::interruption::{InterruptionQueue, Received};
use tenon_core::cloud::{CloudError, UnavailableOffering};
use tenon_core::orchestration::instance_health::{InstanceChecks, UnhealthySeen, unhealthy};
use tenon_core::orchestration::interruption::{HealthCategory, InterruptionKind, Owner, Step, plan};

/// A queue holding `bodies`, and everything one pass over it receives (handled messages
/// acked, as the controller acks them when every step succeeded).
struct Pass {
    received: Vec<Received>,
    malformed: u64,
    /// Messages left in the queue, visible or not, after the pass.
    left: usize,
}

async fn pass(bodies: &[String]) -> Pass {
    let moto = Moto::start();
    let p = moto.provider("interruption").await;
    let sqs = &p.clients.sqs;
    let url = sqs.create_queue().queue_name("interruption").send().await.unwrap().queue_url().unwrap().to_string();
    for body in bodies {
        sqs.send_message().queue_url(&url).message_body(body).send().await.unwrap();
    }
    let mut q = InterruptionQueue::new(sqs.clone(), "interruption").await.unwrap();
    q.wait_seconds = 0;
    let mut received = Vec::new();
    loop {
        let batch = q.receive().await.unwrap();
        let malformed = q.malformed.load(std::sync::atomic::Ordering::Relaxed) as usize;
        for r in &batch {
            q.ack(r).await.unwrap();
        }
        received.extend(batch);
        if received.len() + malformed >= bodies.len() {
            break;
        }
    }
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap();
    let left = attrs.attributes().unwrap().values().map(|v| v.parse::<usize>().unwrap()).sum();
    Pass { received, malformed: q.malformed.load(std::sync::atomic::Ordering::Relaxed), left }
}

fn spot(id: &str) -> String {
    event(
        "EC2 Spot Instance Interruption Warning",
        "aws.ec2",
        serde_json::json!({"instance-id": id, "instance-action": "terminate"}),
    )
}

fn capacity_reservation(id: &str) -> String {
    event(
        "EC2 Capacity Reservation Instance Interruption Warning",
        "aws.ec2",
        serde_json::json!({"instance-id": id, "instance-action": "terminate"}),
    )
}

fn scheduled(id: &str) -> String {
    event(
        "AWS Health Event",
        "aws.health",
        serde_json::json!({"service": "EC2", "eventTypeCategory": "scheduledChange", "affectedEntities": [{"entityValue": id}]}),
    )
}

fn state(id: &str, state: &str) -> String {
    event("EC2 Instance State-change Notification", "aws.ec2", serde_json::json!({"instance-id": id, "state": state}))
}

/// Karpenter's fixture: a NodeClaim of NodePool `default` and its Node on instance `id`.
fn owner(id: &str) -> Owner {
    Owner {
        nodeclaim: format!("default-{id}"),
        node: Some(format!("node-{id}")),
        nodepool: "default".into(),
        instance_id: id.into(),
        ..Default::default()
    }
}

/// The NodeClaims the controller finds for a message: those on the instances it names.
fn owners_of(r: &Received, cluster: &[Owner]) -> Vec<Owner> {
    r.event.instance_ids.iter().flat_map(|id| cluster.iter().filter(move |o| &o.instance_id == id).cloned()).collect()
}

/// Every NodeClaim a pass deletes, with the `karpenter_nodeclaims_disrupted_total` labels
/// (nodepool, reason) its deletion counts under.
fn deleted(p: &Pass, cluster: &[Owner]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for r in &p.received {
        let owners = owners_of(r, cluster);
        for step in plan(&r.event.kind, &owners) {
            if let Step::Delete { owner, reason } = step {
                let o = &owners[owner];
                out.push((o.nodeclaim.clone(), o.nodepool.clone(), reason.to_string()));
            }
        }
    }
    out
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:137
#[tokio::test]
async fn a_spot_interruption_warning_deletes_the_nodeclaim() {
    let cluster = [owner("i-0aaa")];
    let p = pass(&[spot("i-0aaa")]).await;
    assert_eq!(p.received.len(), 1);
    assert_eq!(deleted(&p, &cluster), [("default-i-0aaa".into(), "default".into(), "spot_interrupted".into())]);
    assert_eq!(p.left, 0, "the message is deleted");
    let steps = plan(&p.received[0].event.kind, &cluster);
    assert!(
        steps.iter().any(|s| matches!(s, Step::Notify { notice, .. } if notice.reason == "SpotInterrupted")),
        "{steps:?}"
    );
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:150
#[tokio::test]
async fn a_capacity_reservation_interruption_warning_deletes_the_nodeclaim() {
    let cluster = [owner("i-0bbb")];
    let p = pass(&[capacity_reservation("i-0bbb")]).await;
    assert_eq!(p.received.len(), 1);
    let gone = deleted(&p, &cluster);
    assert_eq!(gone, [("default-i-0bbb".into(), "default".into(), "capacity_reservation_interrupted".into())]);
    assert_eq!(p.left, 0, "the message is deleted");
    let steps = plan(&p.received[0].event.kind, &cluster);
    let notice = steps.iter().find_map(|s| match s {
        Step::Notify { notice, .. } => Some(notice.clone()),
        _ => None,
    });
    let notice = notice.expect("an Event on the NodeClaim and its Node");
    assert_eq!(
        (notice.type_, notice.reason, notice.message.as_str()),
        (
            "Warning",
            "CapacityReservationInstanceInterrupted",
            "Capacity Reservation interruption warning was triggered"
        )
    );
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:175
#[tokio::test]
async fn a_scheduled_change_deletes_the_nodeclaim() {
    let cluster = [owner("i-0ccc")];
    let p = pass(&[scheduled("i-0ccc")]).await;
    assert_eq!(deleted(&p, &cluster), [("default-i-0ccc".into(), "default".into(), "scheduled_change".into())]);
    assert_eq!(p.left, 0);
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:188
#[tokio::test]
async fn stop_and_termination_state_changes_delete_their_nodeclaims() {
    let states = ["terminated", "stopped", "stopping", "shutting-down"];
    let cluster: Vec<Owner> = (0..states.len()).map(|i| owner(&format!("i-{i}"))).collect();
    let bodies: Vec<String> = states.iter().enumerate().map(|(i, s)| state(&format!("i-{i}"), s)).collect();
    let p = pass(&bodies).await;
    let gone = deleted(&p, &cluster);
    assert_eq!(gone.len(), 4, "{gone:?}");
    let count = |reason: &str| gone.iter().filter(|(_, pool, r)| pool == "default" && r == reason).count();
    assert_eq!((count("instance_terminated"), count("instance_stopped")), (2, 2));
    assert_eq!(p.left, 0, "all four messages deleted");
}

/// A hundred messages built by `message`, each for its own NodeClaim: every one deleted.
async fn a_hundred_messages_delete_a_hundred_nodeclaims(message: fn(&str) -> String) {
    let cluster: Vec<Owner> = (0..100).map(|i| owner(&format!("i-{i:017}"))).collect();
    let bodies: Vec<String> = cluster.iter().map(|o| message(&o.instance_id)).collect();
    let p = pass(&bodies).await;
    let mut gone: Vec<String> = deleted(&p, &cluster).into_iter().map(|(n, _, _)| n).collect();
    gone.sort();
    let mut all: Vec<String> = cluster.iter().map(|o| o.nodeclaim.clone()).collect();
    all.sort();
    assert_eq!(gone, all);
    assert_eq!(p.left, 0, "a hundred messages deleted");
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:252
#[tokio::test]
async fn a_hundred_spot_warnings_delete_a_hundred_nodeclaims() {
    a_hundred_messages_delete_a_hundred_nodeclaims(spot).await;
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:253
#[tokio::test]
async fn a_hundred_capacity_reservation_warnings_delete_a_hundred_nodeclaims() {
    a_hundred_messages_delete_a_hundred_nodeclaims(capacity_reservation).await;
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:255
#[tokio::test]
async fn a_message_that_cannot_be_parsed_is_deleted() {
    let bad = serde_json::json!({"field1": "value1", "field2": "value2"}).to_string();
    let p = pass(&[bad]).await;
    assert!(p.received.is_empty());
    assert_eq!(p.malformed, 1);
    assert_eq!(p.left, 0, "the message is deleted");
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:270
#[tokio::test]
async fn a_state_change_to_a_state_not_acted_on_is_deleted_and_changes_nothing() {
    let cluster = [owner("i-0eee")];
    let p = pass(&[state("i-0eee", "creating")]).await;
    assert_eq!(p.received.len(), 1);
    assert!(plan(&p.received[0].event.kind, &cluster).is_empty(), "the NodeClaim stays, no Event");
    assert_eq!(p.left, 0, "the message is deleted");
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:279
#[tokio::test]
async fn a_spot_warning_marks_its_offering_unavailable() {
    let moto = Moto::start();
    let provider = moto.provider("ice").await;
    let mut o = owner("i-0aaa");
    o.instance_type = "t3.large".into();
    o.zone = "coretest-zone-1a".into();
    o.capacity_type = "spot".into();
    let cluster = [o];
    let p = pass(&[spot("i-0aaa")]).await;
    assert_eq!(deleted(&p, &cluster).len(), 1);
    assert_eq!(p.left, 0);
    let now = Instant::now();
    for step in plan(&p.received[0].event.kind, &cluster) {
        if let Step::MarkUnavailable(offering) = step {
            provider.unavailable.mark(offering, now);
        }
    }
    assert!(provider.unavailable.is_unavailable("t3.large", "coretest-zone-1a", "spot", now));
    assert_eq!(
        provider.unavailable.current(now),
        [UnavailableOffering {
            instance_type: "t3.large".into(),
            zone: "coretest-zone-1a".into(),
            capacity_type: "spot".into()
        }]
    );
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:739
#[tokio::test]
async fn polling_a_queue_that_no_longer_exists_is_an_error() {
    let moto = Moto::start();
    let p = moto.provider("gone").await;
    let sqs = &p.clients.sqs;
    let url = sqs.create_queue().queue_name("gone").send().await.unwrap().queue_url().unwrap().to_string();
    let mut q = InterruptionQueue::new(sqs.clone(), "gone").await.unwrap();
    q.wait_seconds = 0;
    sqs.delete_queue().queue_url(&url).send().await.unwrap();
    match q.receive().await {
        Err(CloudError::Api { operation, message }) => {
            assert_eq!(operation, "ReceiveMessage");
            assert!(message.contains("QueueDoesNotExist") || message.contains("NonExistentQueue"), "{message}");
        }
        other => panic!("expected the ReceiveMessage failure, got {other:?}"),
    }
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:743
#[tokio::test]
async fn polling_without_permission_is_an_error() {
    let moto = Moto::start();
    let p = moto.provider("denied").await;
    p.clients.sqs.create_queue().queue_name("denied").send().await.unwrap();
    let body = r#"{"__type":"com.amazonaws.sqs#AccessDenied","message":"Access to the resource is denied."}"#;
    let response = format!(
        "HTTP/1.1 403 Forbidden\r\nContent-Type: application/x-amz-json-1.0\r\nx-amzn-query-error: AccessDenied;Sender\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let proxy = tenon_fault_proxy::fault_matching(&moto.url, 100, "AmazonSQS.ReceiveMessage", response).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(proxy.url.clone());
    let denied =
        tenon_aws::AwsProvider::connect(&conn, p.settings.clone()).await.expect("the connection names its region");
    let mut q = InterruptionQueue::new(denied.clients.sqs.clone(), "denied").await.unwrap();
    q.wait_seconds = 0;
    match q.receive().await {
        Err(CloudError::Api { operation, message }) => {
            assert_eq!(operation, "ReceiveMessage");
            assert!(message.contains("AccessDenied"), "{message}");
        }
        other => panic!("expected the ReceiveMessage failure, got {other:?}"),
    }
    assert!(proxy.seen.load(std::sync::atomic::Ordering::SeqCst) >= 1);
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:752
#[tokio::test]
async fn a_spot_warning_for_an_instance_no_nodeclaim_owns_is_handled_without_error() {
    let p = pass(&[spot("i-0fff")]).await;
    assert_eq!(p.received.len(), 1);
    assert!(plan(&p.received[0].event.kind, &owners_of(&p.received[0], &[])).is_empty());
    assert_eq!(p.left, 0, "handled: the message is deleted");
}

// Instance status checks: Karpenter's DescribeInstanceStatus answers, read by
// `tenon_aws::instance_status::checks`, judged by `instance_health::unhealthy` an hour after
// the checks started failing, and handled by `plan` as the controller's health loop does.

const IMPAIRED_AT_MS: i64 = 1_764_547_200_000;
const AN_HOUR_LATER_MS: i64 = IMPAIRED_AT_MS + 3_600_000;

fn failed_reachability() -> aws_sdk_ec2::types::InstanceStatusSummary {
    use aws_sdk_ec2::types::{InstanceStatusDetails, InstanceStatusSummary, StatusName, StatusType, SummaryStatus};
    InstanceStatusSummary::builder()
        .status(SummaryStatus::Impaired)
        .details(
            InstanceStatusDetails::builder()
                .status(StatusType::Failed)
                .name(StatusName::Reachability)
                .impaired_since(aws_smithy_types::DateTime::from_millis(IMPAIRED_AT_MS))
                .build(),
        )
        .build()
}

fn initializing() -> aws_sdk_ec2::types::InstanceStatusSummary {
    use aws_sdk_ec2::types::{InstanceStatusDetails, InstanceStatusSummary, StatusName, StatusType, SummaryStatus};
    InstanceStatusSummary::builder()
        .status(SummaryStatus::Initializing)
        .details(
            InstanceStatusDetails::builder().status(StatusType::Initializing).name(StatusName::Reachability).build(),
        )
        .build()
}

fn retirement() -> aws_sdk_ec2::types::InstanceStatusEvent {
    aws_sdk_ec2::types::InstanceStatusEvent::builder().code(aws_sdk_ec2::types::EventCode::InstanceRetirement).build()
}

/// The status EC2 reports for `id`: (instance status, system status, scheduled events).
fn status(
    id: &str,
    instance: Option<aws_sdk_ec2::types::InstanceStatusSummary>,
    system: Option<aws_sdk_ec2::types::InstanceStatusSummary>,
    events: Vec<aws_sdk_ec2::types::InstanceStatusEvent>,
) -> InstanceChecks {
    let s = aws_sdk_ec2::types::InstanceStatus::builder()
        .instance_id(id)
        .set_instance_status(instance)
        .set_system_status(system)
        .set_events(Some(events))
        .build();
    tenon_aws::instance_status::checks(&s)
}

/// The (instance, category) pairs a check counts in
/// `karpenter_interruption_instance_status_unhealthy_total`.
type Counted = Vec<(String, HealthCategory)>;

/// One check of the health loop at `now_ms`: every step for each unhealthy instance a
/// NodeClaim of `cluster` owns, and the (instance, category) pairs that loop counts.
fn health_check(
    statuses: &[InstanceChecks],
    cluster: &[Owner],
    seen: &mut UnhealthySeen,
    now_ms: i64,
) -> (Vec<(Owner, Step)>, Counted) {
    let mut steps = Vec::new();
    let mut owned = Vec::new();
    for (id, categories) in unhealthy(statuses, now_ms) {
        let owners: Vec<Owner> = cluster.iter().filter(|o| o.instance_id == id).cloned().collect();
        for category in categories {
            if !owners.is_empty() {
                owned.push((id.clone(), category));
            }
            for s in plan(&InterruptionKind::Unhealthy(category), &owners) {
                let o = match &s {
                    Step::Notify { owner, .. } | Step::StampTermination { owner } | Step::Delete { owner, .. } => {
                        owners[*owner].clone()
                    }
                    Step::MarkUnavailable(_) => Owner::default(),
                };
                steps.push((o, s));
            }
        }
    }
    (steps, seen.record(owned))
}

fn deletes(steps: &[(Owner, Step)]) -> Vec<(String, &'static str)> {
    steps
        .iter()
        .filter_map(|(o, s)| match s {
            Step::Delete { reason, .. } => Some((o.nodepool.clone(), *reason)),
            _ => None,
        })
        .collect()
}

fn stamps(steps: &[(Owner, Step)]) -> usize {
    steps.iter().filter(|(_, s)| matches!(s, Step::StampTermination { .. })).count()
}

fn counted(fresh: &[(String, HealthCategory)], category: HealthCategory) -> usize {
    fresh.iter().filter(|(_, c)| *c == category).count()
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:321
#[test]
fn a_failed_system_status_check_terminates_the_nodeclaim_forcefully() {
    let cluster = [owner("i-0aaa")];
    let statuses = [status("i-0aaa", Some(initializing()), Some(failed_reachability()), vec![])];
    let (steps, fresh) = health_check(&statuses, &cluster, &mut UnhealthySeen::default(), AN_HOUR_LATER_MS);
    assert_eq!(deletes(&steps), [("default".to_string(), "system_status")]);
    assert_eq!(stamps(&steps), 1, "forceful: the drain is not waited for");
    assert_eq!(counted(&fresh, HealthCategory::SystemStatus), 1);
    assert_eq!(fresh.len(), 1, "the initializing instance check is not a failure");
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:361
#[test]
fn a_failed_instance_status_check_terminates_the_nodeclaim_forcefully() {
    let cluster = [owner("i-0aaa")];
    let statuses = [status("i-0aaa", Some(failed_reachability()), None, vec![])];
    let (steps, fresh) = health_check(&statuses, &cluster, &mut UnhealthySeen::default(), AN_HOUR_LATER_MS);
    assert_eq!(deletes(&steps), [("default".to_string(), "instance_status")]);
    assert_eq!(stamps(&steps), 1);
    assert_eq!(counted(&fresh, HealthCategory::InstanceStatus), 1);
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:396
#[test]
fn forceful_termination_stamps_the_termination_timestamp_and_deletes() {
    let cluster = [owner("i-0aaa")];
    let statuses = [status("i-0aaa", None, Some(failed_reachability()), vec![])];
    let (steps, _) = health_check(&statuses, &cluster, &mut UnhealthySeen::default(), AN_HOUR_LATER_MS);
    let order: Vec<&str> = steps
        .iter()
        .map(|(_, s)| match s {
            Step::Notify { .. } => "notify",
            Step::StampTermination { .. } => "stamp",
            Step::Delete { .. } => "delete",
            Step::MarkUnavailable(_) => "mark",
        })
        .collect();
    assert_eq!(order, ["notify", "stamp", "delete"], "stamped before the delete, as Karpenter does");
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:424
#[test]
fn a_scheduled_event_deletes_without_a_termination_timestamp() {
    let cluster = [owner("i-0aaa")];
    let statuses = [status("i-0aaa", None, None, vec![retirement()])];
    let (steps, _) = health_check(&statuses, &cluster, &mut UnhealthySeen::default(), IMPAIRED_AT_MS);
    assert_eq!(deletes(&steps).len(), 1, "deleted: drained and replaced");
    assert_eq!(stamps(&steps), 0, "a scheduled event is not forceful");
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:446
#[test]
fn a_failed_check_and_a_scheduled_event_together_terminate_forcefully() {
    let cluster = [owner("i-0aaa")];
    let statuses = [status("i-0aaa", None, Some(failed_reachability()), vec![retirement()])];
    let (steps, _) = health_check(&statuses, &cluster, &mut UnhealthySeen::default(), AN_HOUR_LATER_MS);
    assert_eq!(stamps(&steps), 1, "forceful termination wins");
    assert!(!deletes(&steps).is_empty());
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:479
#[test]
fn a_nodeclaim_already_stamped_and_deleting_is_not_written_again() {
    let statuses = [status("i-0aaa", None, Some(failed_reachability()), vec![])];
    let mut seen = UnhealthySeen::default();
    let (first, _) = health_check(&statuses, &[owner("i-0aaa")], &mut seen, AN_HOUR_LATER_MS);
    assert_eq!((stamps(&first), deletes(&first).len()), (1, 1));
    // The next check sees what the first wrote: the timestamp and the deletion.
    let mut after = owner("i-0aaa");
    after.termination_stamped = true;
    after.deleting = true;
    let (second, _) = health_check(&statuses, &[after], &mut seen, AN_HOUR_LATER_MS + 60_000);
    assert_eq!((stamps(&second), deletes(&second).len()), (0, 0), "no write to the NodeClaim: {second:?}");
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:514
#[test]
fn a_scheduled_maintenance_event_deletes_the_nodeclaim() {
    let cluster = [owner("i-0aaa")];
    let statuses = [status("i-0aaa", None, None, vec![retirement()])];
    let (steps, fresh) = health_check(&statuses, &cluster, &mut UnhealthySeen::default(), IMPAIRED_AT_MS);
    assert_eq!(deletes(&steps), [("default".to_string(), "event_status")]);
    assert_eq!(counted(&fresh, HealthCategory::EventStatus), 1);
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:570
#[test]
fn an_unhealthy_instance_is_counted_once_across_checks() {
    let cluster = [owner("i-0aaa")];
    let statuses = [status("i-0aaa", Some(failed_reachability()), None, vec![])];
    let mut seen = UnhealthySeen::default();
    let total: usize = (0..3)
        .map(|i| health_check(&statuses, &cluster, &mut seen, AN_HOUR_LATER_MS + i * 60_000).1)
        .map(|fresh| counted(&fresh, HealthCategory::InstanceStatus))
        .sum();
    assert_eq!(total, 1);
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:606
#[test]
fn each_unhealthy_instance_is_counted() {
    let cluster = [owner("i-0aaa"), owner("i-0bbb")];
    let statuses = [
        status("i-0aaa", Some(failed_reachability()), None, vec![]),
        status("i-0bbb", Some(failed_reachability()), None, vec![]),
    ];
    let mut seen = UnhealthySeen::default();
    let (_, first) = health_check(&statuses, &cluster, &mut seen, AN_HOUR_LATER_MS);
    assert_eq!(counted(&first, HealthCategory::InstanceStatus), 2);
    let (_, second) = health_check(&statuses, &cluster, &mut seen, AN_HOUR_LATER_MS + 60_000);
    assert_eq!(counted(&second, HealthCategory::InstanceStatus), 0, "still 2 in all");
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:670
#[test]
fn an_instance_that_recovers_and_fails_again_is_counted_again() {
    let cluster = [owner("i-0aaa")];
    let sick = [status("i-0aaa", Some(failed_reachability()), None, vec![])];
    let mut seen = UnhealthySeen::default();
    let (_, first) = health_check(&sick, &cluster, &mut seen, AN_HOUR_LATER_MS);
    let (_, recovered) = health_check(&[], &cluster, &mut seen, AN_HOUR_LATER_MS + 60_000);
    let (_, again) = health_check(&sick, &cluster, &mut seen, AN_HOUR_LATER_MS + 3_600_000);
    let total = [first, recovered, again].iter().map(|f| counted(f, HealthCategory::InstanceStatus)).sum::<usize>();
    assert_eq!(total, 2);
}

/// Karpenter's threshold: a reachability check that has failed for less than two minutes
/// is not acted on yet; a scheduled event is at once.
#[test]
fn a_check_failing_for_under_two_minutes_is_not_unhealthy_yet() {
    let statuses = [status("i-0aaa", Some(failed_reachability()), None, vec![])];
    assert!(unhealthy(&statuses, IMPAIRED_AT_MS + 119_000).is_empty());
    assert_eq!(unhealthy(&statuses, IMPAIRED_AT_MS + 120_000).len(), 1);
}
