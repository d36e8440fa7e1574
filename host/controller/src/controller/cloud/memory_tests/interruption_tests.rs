//! Interruption messages and instance health checks for several NodeClaims at once, read
//! back from the API (NodeClaims being deleted), the queue (messages deleted) and the
//! metrics registry, as Karpenter's interruption suite reads them.

use super::World;
use kube::Api;
use std::time::{Duration, Instant};
use tenon_api::NodeClaim;
use tenon_aws::interruption::{InterruptionEvent, InterruptionKind};
use tenon_core::orchestration::instance_health::UnhealthySeen;
use tenon_core::orchestration::interruption::HealthCategory;

impl World {
    /// `n` NodeClaims of NodePool `default` (`default-000`…), each launched by the lifecycle
    /// reconciler; their names and instance ids, in name order.
    async fn launched_many(&self, n: usize) -> Vec<(String, String)> {
        use crate::controller::nodeclaim::lifecycle::Lifecycle;
        use crate::controller::runner::Reconciler;
        self.pool_with(serde_json::json!({})).await;
        for i in 0..n {
            self.create::<NodeClaim>(&format!(
                "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: default-{i:03}, labels: {{karpenter.sh/nodepool: default}}}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements:\n  - {{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}}\n  resources: {{requests: {{cpu: 500m}}}}\n"
            ))
            .await;
        }
        self.until("the NodeClaims in the cache", |c| c.stores.nodeclaims.state().len() == n).await;
        let mut lifecycle = Lifecycle::new(self.ctx.clone());
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            lifecycle.reconcile().await.unwrap();
            let launched: Vec<(String, String)> = api
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .filter_map(|nc| {
                    let id = nc.status?.provider_id?.rsplit('/').next()?.to_string();
                    Some((nc.metadata.name?, id))
                })
                .collect();
            if launched.len() == n {
                self.until("the launched NodeClaims in the cache", |c| {
                    c.stores
                        .nodeclaims
                        .state()
                        .iter()
                        .all(|nc| nc.status.as_ref().is_some_and(|s| s.provider_id.is_some()))
                })
                .await;
                return launched;
            }
            assert!(Instant::now() < deadline, "{} of {n} launched within 30 s", launched.len());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Sends `events` and runs the interruption controller until each of `deleted` is being
    /// deleted and every message is deleted from the queue.
    async fn interrupt_all(&self, events: Vec<InterruptionEvent>, deleted: &[String]) {
        let sent = events.len() as u64;
        for e in events {
            self.cloud.send(e);
        }
        let running = tokio::spawn(self.interruption().run("memory".into()));
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut left = 0;
            for name in deleted {
                if api.get_opt(name).await.unwrap().is_some_and(|nc| nc.metadata.deletion_timestamp.is_none()) {
                    left += 1;
                }
            }
            if left == 0 && self.cloud.acked() >= sent {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{left} NodeClaims not deleted, {} of {sent} messages acked",
                self.cloud.acked()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        running.abort();
        assert_eq!(self.cloud.acked(), sent, "each message is deleted from the queue once");
    }

    /// `karpenter_nodeclaims_disrupted_total` of NodePool `default` for `reason`, on-demand.
    fn disrupted_on_demand(&self, reason: &str) -> Option<f64> {
        self.disrupted(reason, "on-demand")
    }
}

fn event(kind: InterruptionKind, id: &str) -> InterruptionEvent {
    InterruptionEvent { kind, instance_ids: vec![id.to_string()], time: "2026-12-06T12:00:00Z".into() }
}

fn names(claims: &[(String, String)]) -> Vec<String> {
    claims.iter().map(|(n, _)| n.clone()).collect()
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:150
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capacity_reservation_interruption_warning_deletes_the_nodeclaim() {
    let w = World::new().await;
    let claims = w.launched_many(1).await;
    w.interrupt_all(vec![event(InterruptionKind::CapacityReservationInterruption, &claims[0].1)], &names(&claims))
        .await;
    assert_eq!(w.disrupted_on_demand("capacity_reservation_interrupted"), Some(1.0));
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:188
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_stopping_or_terminating_state_change_deletes_its_nodeclaim() {
    let w = World::new().await;
    let claims = w.launched_many(4).await;
    let states = ["terminated", "stopped", "stopping", "shutting-down"];
    let events =
        claims.iter().zip(states).map(|((_, id), s)| event(InterruptionKind::StateChange(s.into()), id)).collect();
    w.interrupt_all(events, &names(&claims)).await;
    assert_eq!(w.disrupted_on_demand("instance_terminated"), Some(2.0));
    assert_eq!(w.disrupted_on_demand("instance_stopped"), Some(2.0));
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:252
/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:253
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_interruption_messages_delete_a_hundred_nodeclaims() {
    for (kind, reason) in [
        (InterruptionKind::SpotInterruption, "spot_interrupted"),
        (InterruptionKind::CapacityReservationInterruption, "capacity_reservation_interrupted"),
    ] {
        let w = World::new().await;
        let claims = w.launched_many(100).await;
        let events = claims.iter().map(|(_, id)| event(kind.clone(), id)).collect();
        w.interrupt_all(events, &names(&claims)).await;
        assert_eq!(w.disrupted_on_demand(reason), Some(100.0), "{reason}");
    }
}

impl World {
    /// Reachability of each of `claims`' instances failing for an hour.
    fn unreachable(&self, claims: &[(String, String)]) {
        for (_, id) in claims {
            self.cloud.set_checks(id, vec![super::failing(HealthCategory::InstanceStatus)]);
        }
    }

    /// `karpenter_interruption_instance_status_unhealthy_total{category="InstanceStatus"}`.
    fn unreachable_counted(&self) -> Option<f64> {
        self.unhealthy("InstanceStatus")
    }
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:570
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unhealthy_instance_is_counted_once_across_checks() {
    let w = World::new().await;
    let claims = w.launched_many(1).await;
    w.unreachable(&claims);
    let mut seen = UnhealthySeen::default();
    for _ in 0..3 {
        w.interruption().check_once(&mut seen).await;
    }
    assert_eq!(w.unreachable_counted(), Some(1.0));
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:606
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_unhealthy_instance_is_counted() {
    let w = World::new().await;
    let claims = w.launched_many(2).await;
    w.unreachable(&claims);
    let mut seen = UnhealthySeen::default();
    w.interruption().check_once(&mut seen).await;
    assert_eq!(w.unreachable_counted(), Some(2.0));
    w.interruption().check_once(&mut seen).await;
    assert_eq!(w.unreachable_counted(), Some(2.0));
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:670
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_that_recovers_and_fails_again_is_counted_again() {
    let w = World::new().await;
    let claims = w.launched_many(1).await;
    let mut seen = UnhealthySeen::default();
    w.unreachable(&claims);
    w.interruption().check_once(&mut seen).await;
    assert_eq!(w.unreachable_counted(), Some(1.0));
    w.cloud.set_checks(&claims[0].1, vec![]);
    w.interruption().check_once(&mut seen).await;
    w.unreachable(&claims);
    w.interruption().check_once(&mut seen).await;
    assert_eq!(w.unreachable_counted(), Some(2.0));
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:270
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_change_not_acted_on_is_deleted_from_the_queue_and_deletes_nothing() {
    let w = World::new().await;
    let claims = w.launched_many(1).await;
    // `interrupt_all` waits for the controller to delete the message from the queue.
    w.interrupt_all(vec![event(InterruptionKind::StateChange("creating".into()), &claims[0].1)], &[]).await;
    assert_eq!(w.claims_deleting().await, [(claims[0].0.clone(), false)], "the NodeClaim is kept");
    assert_eq!(w.disrupted_on_demand("instance_terminated"), None);
    assert_eq!(w.disrupted_on_demand("instance_stopped"), None);
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:752
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_warning_for_an_instance_no_nodeclaim_owns_is_deleted_from_the_queue() {
    let w = World::new().await;
    let claims = w.launched_many(1).await;
    // `interrupt_all` waits for the controller to delete the message from the queue.
    w.interrupt_all(vec![event(InterruptionKind::SpotInterruption, "i-0fffffffffffffff0")], &[]).await;
    assert_eq!(w.cloud.acked(), 1, "deleted once");
    assert_eq!(w.claims_deleting().await, [(claims[0].0.clone(), false)], "the NodeClaim is kept");
    assert_eq!(w.disrupted_on_demand("spot_interrupted"), None);
}
