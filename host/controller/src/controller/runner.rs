//! Runs each reconciler on its own task, as controller-runtime runs a controller: woken by
//! every change the caches see and when its own timed work is due (controller-runtime's
//! `RequeueAfter`), only while this replica leads.
//! Each reconcile is timed and counted by result; a failure is counted by its kind and
//! decides the wait before the next try. No reconciler waits on another's I/O.

use super::context::Context;
use super::error::Error;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// One concern of the controller, owning its own state.
pub trait Reconciler: Send + 'static {
    /// Its `controller` label (Karpenter's controller name where it has one).
    const NAME: &'static str;
    fn reconcile(&mut self) -> impl Future<Output = Result<(), Error>> + Send;

    /// After a pass, how long it may wait for a change before its next: until its soonest
    /// timed work (a deadline, a round, a retry) is due. A reconciler with timed work under
    /// way says [`BUSY`]; one with none waits for a change, at most [`IDLE`].
    fn next_pass(&self) -> Duration {
        BUSY
    }
}

/// The wait of a reconciler with timed work under way (a launch, a drain, a batch filling).
pub const BUSY: Duration = Duration::from_millis(500);
/// The longest any reconciler waits without a change: a safety net, not a schedule (at
/// 10,000 pods a pass that finds nothing to do still reads every object).
pub const IDLE: Duration = Duration::from_secs(60);

/// The wait until timed work `until` from now is due, at most [`IDLE`]; work already due
/// that the pass left (it waits on something else) is looked at again after [`BUSY`].
pub fn due_in(until: Option<Duration>) -> Duration {
    match until {
        None => IDLE,
        Some(d) if d.is_zero() => BUSY,
        Some(d) => d.min(IDLE),
    }
}

/// The first wait after a failure, doubled at each failure in a row up to [`BACKOFF_MAX`].
const BACKOFF_FIRST: Duration = Duration::from_secs(1);
const BACKOFF_MAX: Duration = Duration::from_secs(10);

/// How long a reconciler that has failed `failures` times in a row waits for its next try:
/// changes do not wake it sooner (a refusing API server is not asked again on every event).
/// `None` for a stale read: the change that brings the cache up to date wakes it, as usual.
pub fn requeue_after(failures: u32, error: &Error) -> Option<Duration> {
    if error.is_stale_read() {
        return None;
    }
    Some(BACKOFF_FIRST.saturating_mul(1 << failures.saturating_sub(1).min(8)).min(BACKOFF_MAX))
}

/// Spawns `r` on its own task; it stops when `stop` turns true (after the reconcile under
/// way, never in its middle).
pub fn spawn<R: Reconciler>(
    mut r: R,
    ctx: Arc<Context>,
    mut stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut changes = ctx.stores.subscribe();
        let mut failures = 0u32;
        while !*stop.borrow() {
            let mut backoff = None;
            // A follower looks again soon: it may have just been elected.
            let mut next = BUSY;
            if ctx.leadership.may_act() {
                // Changes until now are this reconcile's to see.
                changes.borrow_and_update();
                let started = Instant::now();
                ctx.metrics.reconcile_started(R::NAME);
                // A stale read (a conflict, an object gone) is no failure, as in Karpenter's
                // controllers: the change behind it wakes the next reconcile.
                let failed = match r.reconcile().await {
                    Ok(()) => None,
                    Err(e) => match requeue_after(failures + 1, &e) {
                        None => {
                            tracing::debug!(controller = R::NAME, error = %e, "stale read; reconciling on the next change");
                            None
                        }
                        Some(wait) => Some((e, wait)),
                    },
                };
                ctx.metrics.reconcile_finished(R::NAME, started, failed.as_ref().map(|(e, _)| e.label()));
                next = r.next_pass();
                match failed {
                    None => failures = 0,
                    Some((e, wait)) => {
                        failures += 1;
                        backoff = Some(wait);
                        tracing::warn!(controller = R::NAME, error = %e, kind = e.label(), failures, retry_in = ?wait, "reconcile failed");
                    }
                }
            }
            match backoff {
                Some(wait) => tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.changed() => {}
                },
                None => tokio::select! {
                    _ = changes.changed() => {}
                    _ = tokio::time::sleep(next) => {}
                    _ = stop.changed() => {}
                },
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timed_work_is_waited_for_and_work_left_due_is_looked_at_again_soon() {
        assert_eq!(due_in(None), IDLE);
        assert_eq!(due_in(Some(Duration::from_secs(3))), Duration::from_secs(3));
        assert_eq!(due_in(Some(Duration::from_secs(3600))), IDLE);
        assert_eq!(due_in(Some(Duration::ZERO)), BUSY);
    }

    #[test]
    fn failures_back_off_doubling_to_ten_seconds_and_stale_reads_wait_for_the_change() {
        let refused = Error::Invariant("x".into());
        let waits: Vec<u64> = (1..=6).filter_map(|n| requeue_after(n, &refused)).map(|d| d.as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 10, 10]);
        let conflict = kube::Error::Api(kube::core::Status::failure("conflict", "Conflict").with_code(409).boxed());
        assert_eq!(requeue_after(3, &Error::kube("writing", conflict)), None);
    }
}
