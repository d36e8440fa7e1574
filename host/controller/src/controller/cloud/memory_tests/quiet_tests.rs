//! Work proportional to change: on a settled cluster (a NodeClaim initialized, its pod
//! bound, nothing pending or being deleted) each reconciler waits for a change or its own
//! timed work, not a fixed period; and the runner does not pass again until one comes.

use super::World;
use crate::controller::context::Context;
use crate::controller::disruption::{Disruption, ROUND_EVERY};
use crate::controller::error::Error;
use crate::controller::metrics::publish::Publisher;
use crate::controller::nodeclaim::consistency::Consistency;
use crate::controller::nodeclaim::expiration::Expiration;
use crate::controller::nodeclaim::garbage::{GC_EVERY, Garbage};
use crate::controller::nodeclaim::lifecycle::Lifecycle;
use crate::controller::nodeclaim::pod_events::PodEvents;
use crate::controller::provisioning::Provisioner;
use crate::controller::runner::{self, BUSY, IDLE, Reconciler};
use crate::controller::termination::Termination;
use kube::Api;
use kube::api::{Patch, PatchParams};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Runs `r` once and says how long it would then wait without a change.
async fn after_a_pass<R: Reconciler>(mut r: R) -> Duration {
    r.reconcile().await.unwrap();
    r.next_pass()
}

/// A wait of `d` is `want`, give or take the time the test itself took.
fn about(d: Duration, want: Duration) -> bool {
    d <= want && d + Duration::from_secs(2) > want
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_settled_cluster_only_timed_work_schedules_a_pass() {
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "  expireAfter: 45s\n", "").await;
    // A cheaper node would fit its pod: consolidation off, or a round would plan a command.
    let never = serde_json::json!({"spec": {"disruption": {"consolidateAfter": "Never"}}});
    Api::<tenon_api::NodePool>::all(w.client.clone())
        .patch("default", &PatchParams::default(), &Patch::Merge(&never))
        .await
        .unwrap();
    w.until("consolidation off in the cache", |c| {
        c.stores.nodepools.state().iter().all(|np| np.spec.disruption.consolidate_after.as_deref() == Some("Never"))
    })
    .await;
    let ctx = || w.ctx.clone();
    // Nothing timed: a change is what wakes them.
    assert_eq!(after_a_pass(Lifecycle::new(ctx())).await, IDLE, "lifecycle: every NodeClaim initialized");
    assert_eq!(after_a_pass(PodEvents::new(ctx())).await, IDLE, "pod.events");
    assert_eq!(after_a_pass(Termination::new(ctx())).await, IDLE, "termination: nothing being deleted");
    assert_eq!(after_a_pass(Provisioner::new(ctx())).await, IDLE, "provisioner: no pod pending");
    // Their own schedules.
    let expiry = after_a_pass(Expiration::new(ctx())).await;
    assert!(expiry <= Duration::from_secs(45) && expiry > Duration::from_secs(30), "expiration: {expiry:?}");
    assert!(about(after_a_pass(Garbage::new(ctx())).await, GC_EVERY), "garbage collection every 10 s");
    assert!(about(after_a_pass(Disruption::new(ctx())).await, ROUND_EVERY), "a disruption round every 10 s");
    assert_eq!(after_a_pass(Consistency::new(ctx())).await, IDLE, "consistency: the next check in 10 minutes");
    assert!(after_a_pass(Publisher::new(ctx())).await <= Duration::from_secs(5), "metrics rebuilt every 5 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_pod_and_a_deletion_make_their_reconcilers_busy() {
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "", "").await;
    w.pending_pod("waiting", 100).await;
    let batch = after_a_pass(Provisioner::new(w.ctx.clone())).await;
    assert!(batch <= w.ctx.settings.batch_idle_duration, "the open batch closes after its idle time: {batch:?}");
    Api::<tenon_api::NodeClaim>::all(w.client.clone()).delete("default-abcde", &Default::default()).await.unwrap();
    w.until("the deletion in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|nc| nc.metadata.deletion_timestamp.is_some())
    })
    .await;
    assert_eq!(after_a_pass(Termination::new(w.ctx.clone())).await, BUSY, "a drain is timed");
}

/// Counts its passes; nothing timed.
struct Counting(Arc<AtomicUsize>);

impl Reconciler for Counting {
    const NAME: &'static str = "counting";

    async fn reconcile(&mut self) -> Result<(), Error> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn next_pass(&self) -> Duration {
        IDLE
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconciler_with_nothing_timed_passes_again_only_on_a_change() {
    let w = World::new().await;
    let passes = Arc::new(AtomicUsize::new(0));
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let task = runner::spawn(Counting(passes.clone()), w.ctx.clone(), stopped);
    let seen = |ctx: &Context| ctx.stores.version();
    // Three periods of the old fixed schedule (500 ms) with no change: no pass. The caches
    // may still be taking in their first events: a window that saw a change is tried again.
    while passes.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for _ in 0..10 {
        let (version, before) = (seen(&w.ctx), passes.load(Ordering::SeqCst));
        tokio::time::sleep(BUSY * 3).await;
        if seen(&w.ctx) == version {
            assert_eq!(passes.load(Ordering::SeqCst), before, "no change, no timed work: no pass after the first");
            break;
        }
    }
    let before = seen(&w.ctx);
    w.pool_with(serde_json::json!({})).await;
    w.until("the NodePool in the cache", |c| seen(c) > before).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(passes.load(Ordering::SeqCst) >= 2, "a change wakes it");
    let _ = stop.send(true);
    task.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodepool_status_skipped_over_an_unchanged_view_still_follows_a_new_verdict() {
    use crate::controller::nodepool::status::NodePoolStatusReconciler;
    use tenon_api::wellknown::condition;
    use tenon_core::orchestration::registration_health::Verdict;
    let w = World::new().await;
    w.pool_with(serde_json::json!({})).await;
    w.until("the NodePool in the cache", |c| !c.stores.nodepools.state().is_empty()).await;
    let mut status = NodePoolStatusReconciler::new(w.ctx.clone());
    // Passes until the cache holds a status current with the NodePool and its NodeClass (a
    // verdict recorded against a stale one is dropped, as it should be).
    let current = |c: &Context| {
        let (pools, classes) = (c.stores.nodepools.state(), c.stores.nodeclasses.state());
        pools
            .iter()
            .all(|np| !crate::controller::nodepool::status::registration_stale(np, classes.first().map(|c| &**c)))
    };
    for _ in 0..50 {
        status.reconcile().await.unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
        if current(&w.ctx) {
            break;
        }
    }
    assert!(current(&w.ctx), "the NodePool's status never caught up");
    status.reconcile().await.unwrap();
    let seen = w.ctx.objects();
    // What lifecycle records when a NodeClaim of it fails to register: no object changes.
    let uid = w.ctx.stores.nodepools.state()[0].metadata.uid.clone().unwrap();
    let failed = Verdict { healthy: false, reason: "RegistrationFailed".into(), message: "never joined".into() };
    w.ctx.cluster().registration_verdicts.insert(uid, failed);
    assert!(Arc::ptr_eq(&seen, &w.ctx.objects()), "the verdict alone, the view as it was");
    status.reconcile().await.unwrap();
    let pool = Api::<tenon_api::NodePool>::all(w.client.clone()).get("default").await.unwrap();
    let conditions = pool.status.map(|s| s.conditions).unwrap_or_default();
    let healthy = conditions.iter().find(|c| c.type_ == condition::NODE_REGISTRATION_HEALTHY).map(|c| c.status.clone());
    assert_eq!(healthy.as_deref(), Some("False"), "{conditions:?}");
}
