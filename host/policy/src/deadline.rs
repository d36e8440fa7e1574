//! The wall-clock guard around a policy call: the call's future is driven on the calling
//! thread until it finishes or the deadline passes, whichever comes first. Wasm that runs
//! too long is stopped by the engine's epoch deadline; this guard ends a call that waits in
//! a host function instead (dropping the future drops the guest's execution with it).
//!
//! It needs no async runtime, so a decision can call policies from any thread, a tokio
//! worker included.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Instant;

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// The future's output, or `None` when `deadline` passed first.
pub fn run_until<F: Future>(future: F, deadline: Instant) -> Option<F::Output> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
            return Some(out);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::park_timeout(deadline - now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_ready_future_finishes() {
        assert_eq!(run_until(async { 7 }, Instant::now() + Duration::from_secs(1)), Some(7));
    }

    #[test]
    fn a_future_that_never_finishes_ends_at_the_deadline() {
        let start = Instant::now();
        let out = run_until(std::future::pending::<()>(), start + Duration::from_millis(30));
        assert_eq!(out, None);
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(30) && took < Duration::from_millis(200), "{took:?}");
    }

    #[test]
    fn a_future_woken_from_another_thread_finishes() {
        let (tx, rx) = std::sync::mpsc::channel::<Waker>();
        let flag = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f2 = flag.clone();
        std::thread::spawn(move || {
            let w = rx.recv().unwrap();
            std::thread::sleep(Duration::from_millis(10));
            f2.store(true, std::sync::atomic::Ordering::SeqCst);
            w.wake();
        });
        let fut = std::future::poll_fn(|cx| {
            if flag.load(std::sync::atomic::Ordering::SeqCst) {
                Poll::Ready(1)
            } else {
                let _ = tx.send(cx.waker().clone());
                Poll::Pending
            }
        });
        assert_eq!(run_until(fut, Instant::now() + Duration::from_secs(5)), Some(1));
    }
}
