//! Account-wide client-side rate limiting for EC2: every attempt of every EC2 call waits for a
//! token from one bucket, whose rate halves when EC2 throttles (HTTP 503: RequestLimitExceeded,
//! or Unavailable) and recovers by a little each second without throttling. The SDK retries a
//! throttled call on its own, but only that call; without this, the other launches, lookups
//! and terminations of a wave keep EC2 just as busy and are throttled in turn.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector,
};
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::FinalizerInterceptorContextRef;
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Requests per second while EC2 has not throttled (well above what a wave needs with
/// batching, so the gate costs nothing until EC2 pushes back), and the burst above it.
pub const MAX_RATE: f64 = 100.0;
const BURST: f64 = 200.0;
/// The floor: slow enough to let EC2's buckets refill, fast enough that a queue of a hundred
/// calls still gets through within an attempt's 30 s.
pub const MIN_RATE: f64 = 5.0;
/// Added to the rate per second without throttling (back to the top in about a minute).
const RECOVERY_PER_SECOND: f64 = 2.0;
/// Throttles within this long of a cut count as the same one.
const CUT_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct State {
    rate: f64,
    tokens: f64,
    refilled: Instant,
    last_cut: Option<Instant>,
}

/// The bucket, and the series that show it (`tenon_aws_ec2_request_rate_limit`,
/// `tenon_aws_ec2_throttled_total`).
#[derive(Debug)]
pub struct RateGate {
    state: Mutex<State>,
    rate: Gauge<f64, AtomicU64>,
    throttled: Counter,
}

impl RateGate {
    pub fn new(rate: Gauge<f64, AtomicU64>, throttled: Counter, now: Instant) -> Self {
        rate.set(MAX_RATE);
        RateGate {
            state: Mutex::new(State { rate: MAX_RATE, tokens: BURST, refilled: now, last_cut: None }),
            rate,
            throttled,
        }
    }

    /// Takes a token at `now`, or says how long to wait for one.
    pub fn take(&self, now: Instant) -> Result<(), Duration> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(s.refilled).as_secs_f64();
        // Recovery: the time since the last cut (and since the last refill) adds to the rate.
        let since_cut = s.last_cut.map_or(f64::INFINITY, |c| now.saturating_duration_since(c).as_secs_f64());
        if since_cut > CUT_EVERY.as_secs_f64() {
            s.rate = (s.rate + RECOVERY_PER_SECOND * elapsed.min(since_cut)).min(MAX_RATE);
        }
        s.tokens = (s.tokens + s.rate * elapsed).min(BURST.min(s.rate * 2.0).max(1.0));
        s.refilled = now;
        self.rate.set(s.rate);
        if s.tokens >= 1.0 {
            s.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - s.tokens) / s.rate))
        }
    }

    /// EC2 throttled an attempt at `now`: halve the rate (once per [`CUT_EVERY`]).
    pub fn throttled(&self, now: Instant) {
        self.throttled.inc();
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.last_cut.is_some_and(|c| now.saturating_duration_since(c) < CUT_EVERY) {
            return;
        }
        s.last_cut = Some(now);
        s.rate = (s.rate / 2.0).max(MIN_RATE);
        s.tokens = s.tokens.min(s.rate);
        self.rate.set(s.rate);
    }

    /// The rate now allowed, in requests per second.
    pub fn rate(&self) -> f64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).rate
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        while let Err(wait) = self.take(Instant::now()) {
            tokio::time::sleep(wait).await;
        }
    }
}

/// The EC2 client's HTTP client: each attempt waits for the gate before it is sent.
#[derive(Clone, Debug)]
pub struct Gated {
    pub inner: SharedHttpClient,
    pub gate: Arc<RateGate>,
}

impl HttpClient for Gated {
    fn http_connector(&self, settings: &HttpConnectorSettings, components: &RuntimeComponents) -> SharedHttpConnector {
        let inner = self.inner.http_connector(settings, components);
        SharedHttpConnector::new(GatedConnector { inner, gate: self.gate.clone() })
    }
}

#[derive(Debug)]
struct GatedConnector {
    inner: SharedHttpConnector,
    gate: Arc<RateGate>,
}

impl HttpConnector for GatedConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let (inner, gate) = (self.inner.clone(), self.gate.clone());
        HttpConnectorFuture::new(async move {
            gate.acquire().await;
            inner.call(request).await
        })
    }
}

/// Tells the gate which attempts EC2 throttled (HTTP 503 or 429).
#[derive(Clone, Debug)]
pub struct Throttles(pub Arc<RateGate>);

impl Intercept for Throttles {
    fn name(&self) -> &'static str {
        "TenonEc2RateGate"
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if context.response().is_some_and(|r| matches!(r.status().as_u16(), 503 | 429)) {
            self.0.throttled(Instant::now());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(now: Instant) -> RateGate {
        RateGate::new(Gauge::default(), Counter::default(), now)
    }

    /// How many tokens the gate hands out from `from` over `seconds`, asking every 10 ms.
    fn taken(g: &RateGate, from: Instant, seconds: u64) -> usize {
        (0..seconds * 100).filter(|i| g.take(from + Duration::from_millis(i * 10)).is_ok()).count()
    }

    #[test]
    fn throttling_halves_the_rate_to_a_floor_and_quiet_seconds_bring_it_back() {
        let t0 = Instant::now();
        let g = gate(t0);
        assert_eq!(g.rate(), MAX_RATE);
        g.throttled(t0);
        assert_eq!(g.rate(), MAX_RATE / 2.0);
        g.throttled(t0 + Duration::from_millis(500));
        assert_eq!(g.rate(), MAX_RATE / 2.0, "one cut per second");
        for s in 1..10 {
            g.throttled(t0 + Duration::from_secs(s) + Duration::from_millis(1));
        }
        assert_eq!(g.rate(), MIN_RATE);
        // Eleven quiet seconds after the last cut: 5 + 2 × 11 = 27 per second.
        let _ = g.take(t0 + Duration::from_secs(20));
        assert!((g.rate() - 27.0).abs() < 0.1, "{}", g.rate());
        let _ = g.take(t0 + Duration::from_secs(120));
        assert_eq!(g.rate(), MAX_RATE, "recovered");
    }

    #[test]
    fn a_throttled_gate_hands_out_about_its_rate() {
        let t0 = Instant::now();
        let g = gate(t0);
        assert_eq!((0..300).filter(|_| g.take(t0).is_ok()).count(), 200, "the burst first");
        for s in 0..5 {
            g.throttled(t0 + Duration::from_secs(1 + s * 2));
        }
        let at = t0 + Duration::from_secs(11);
        let rate = g.rate();
        assert!(rate < 10.0, "{rate}");
        let n = taken(&g, at, 2);
        assert!((5..=40).contains(&n), "{n} tokens in 2 s at about {rate}/s");
        // Drained, a caller is told how long to wait.
        let t = at + Duration::from_secs(2);
        while g.take(t).is_ok() {}
        assert!(g.take(t).is_err_and(|wait| wait > Duration::ZERO && wait <= Duration::from_secs_f64(1.0 / MIN_RATE)));
    }
}
