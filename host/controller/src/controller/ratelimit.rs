//! Client-side rate limiting of API server requests, as client-go's `--kube-client-qps` and
//! `--kube-client-burst`: a token bucket refilled at `qps` per second holding up to `burst`.
//! A layer on the kube client's service stack, so every request (watches included) waits.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};
use tower::{Layer, Service};

/// Tokens refilled continuously; a request takes one.
#[derive(Clone, Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    /// `qps` 0 disables limiting (every take succeeds).
    pub fn new(qps: u32, burst: u32, now: Instant) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket { qps: f64::from(qps), burst, tokens: burst, at: now }
    }

    /// Takes a token, or says how long until one is there.
    pub fn take(&mut self, now: Instant) -> Result<(), Duration> {
        if self.qps <= 0.0 {
            return Ok(());
        }
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.qps).min(self.burst);
        self.at = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.qps))
        }
    }
}

#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    pub qps: u32,
    pub burst: u32,
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit { inner, bucket: TokenBucket::new(self.qps, self.burst, Instant::now()), wait: None, holding: false }
    }
}

pub struct RateLimit<S> {
    inner: S,
    bucket: TokenBucket,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A token taken for the next `call` (kept while the inner service is not ready).
    holding: bool,
}

impl<S: Service<R>, R> Service<R> for RateLimit<S> {
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        while !self.holding {
            if let Some(wait) = self.wait.as_mut() {
                ready!(wait.as_mut().poll(cx));
                self.wait = None;
            }
            match self.bucket.take(Instant::now()) {
                Ok(()) => self.holding = true,
                Err(d) => self.wait = Some(Box::pin(tokio::time::sleep(d))),
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> S::Future {
        self.holding = false;
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_then_qps() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(10, 3, t0);
        assert!((0..3).all(|_| b.take(t0).is_ok()), "the burst is available at once");
        let wait = b.take(t0).unwrap_err();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-9, "one token per 100 ms at 10 qps: {wait:?}");
        assert!(b.take(t0 + Duration::from_millis(100)).is_ok());
        assert!(b.take(t0 + Duration::from_millis(100)).is_err());
        // Refill never exceeds the burst.
        let later = t0 + Duration::from_secs(60);
        assert!((0..3).all(|_| b.take(later).is_ok()));
        assert!(b.take(later).is_err());
    }

    #[test]
    fn zero_qps_means_unlimited() {
        let t0 = Instant::now();
        let mut b = TokenBucket::new(0, 1, t0);
        assert!((0..1000).all(|_| b.take(t0).is_ok()));
    }

    #[test]
    fn requests_beyond_the_burst_wait_for_tokens() {
        use tower::ServiceExt;
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            let svc = tower::service_fn(|x: u32| async move { Ok::<u32, std::convert::Infallible>(x) });
            let mut limited = RateLimitLayer { qps: 50, burst: 2 }.layer(svc);
            let start = Instant::now();
            for i in 0..6 {
                limited.ready().await.unwrap();
                assert_eq!(limited.call(i).await.unwrap(), i);
            }
            // 2 at once, then 4 more at one per 20 ms.
            let took = start.elapsed();
            assert!(took >= Duration::from_millis(78), "{took:?}");
        });
    }
}
