//! The AWS SDK's request series Karpenter's provider publishes (`aws_sdk_go_*`, from the Go
//! SDK's metrics middleware): every call and every attempt counted and timed by service,
//! action and HTTP status code, and each call's retries. An interceptor on every client.

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeSerializationInterceptorContextRef, BeforeTransmitInterceptorContextRef, FinalizerInterceptorContextRef,
};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::{ConfigBag, Storable, StoreReplace};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use std::sync::atomic::AtomicU64;
use std::time::Instant;

type Labels = Vec<(&'static str, String)>;

/// 10 ms growing by half, 20 of them (the Go middleware's).
fn latency_histogram() -> Histogram {
    Histogram::new(std::iter::successors(Some(0.01), |b| Some(b * 1.5)).take(20))
}

fn retries_histogram() -> Histogram {
    Histogram::new((0..=10).map(f64::from))
}

/// The families, shared by the interceptor on every client and the provider's registry.
#[derive(Clone, Debug)]
pub struct SdkMetrics {
    requests: Family<Labels, Counter>,
    attempts: Family<Labels, Counter>,
    request_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    attempt_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    retries: Family<Labels, Histogram, fn() -> Histogram>,
    /// The EC2 rate gate's current rate and the attempts EC2 throttled (rate_gate.rs).
    pub(crate) ec2_rate: Gauge<f64, AtomicU64>,
    pub(crate) ec2_throttled: Counter,
}

impl Default for SdkMetrics {
    fn default() -> Self {
        SdkMetrics {
            requests: Family::default(),
            attempts: Family::default(),
            request_seconds: Family::new_with_constructor(latency_histogram),
            attempt_seconds: Family::new_with_constructor(latency_histogram),
            retries: Family::new_with_constructor(retries_histogram),
            ec2_rate: Gauge::default(),
            ec2_throttled: Counter::default(),
        }
    }
}

impl SdkMetrics {
    pub fn register(&self, registry: &mut crate::metrics::Named) {
        registry.register(
            "aws_sdk_go_request",
            "AWS API calls, by service, action and HTTP status code",
            self.requests.clone(),
        );
        registry.register(
            "aws_sdk_go_request_attempt",
            "Attempts of AWS API calls (retries included), by service, action and HTTP status code",
            self.attempts.clone(),
        );
        registry.register(
            "aws_sdk_go_request_duration_seconds",
            "Seconds AWS API calls took, retries included, by service, action and HTTP status code",
            self.request_seconds.clone(),
        );
        registry.register(
            "aws_sdk_go_request_attempt_duration_seconds",
            "Seconds each attempt of an AWS API call took, by service, action and HTTP status code",
            self.attempt_seconds.clone(),
        );
        registry.register(
            "aws_sdk_go_request_retry_count",
            "Retries each AWS API call took, by service, action and HTTP status code",
            self.retries.clone(),
        );
        registry.register(
            "tenon_aws_ec2_request_rate_limit",
            "EC2 requests per second the client-side gate allows now: 100 until EC2 throttles, halved at each throttled second, recovering 2 per quiet second",
            self.ec2_rate.clone(),
        );
        registry.register(
            "tenon_aws_ec2_throttled",
            "EC2 attempts answered 503 or 429 (RequestLimitExceeded, Unavailable), which slow the gate down",
            self.ec2_throttled.clone(),
        );
    }
}

/// When the call and its current attempt started, and how many attempts it has made.
#[derive(Clone, Debug)]
struct Timing {
    call: Instant,
    attempt: Instant,
    attempts: u32,
}

impl Storable for Timing {
    type Storer = StoreReplace<Self>;
}

/// Service, action and the status code of the answer (0 without one).
fn labels(cfg: &ConfigBag, context: &FinalizerInterceptorContextRef<'_>) -> Labels {
    let (service, action) = cfg.load::<Metadata>().map_or(("", ""), |m| (m.service(), m.name()));
    let code = context.response().map_or(0, |r| r.status().as_u16());
    vec![("service", service.to_string()), ("action", action.to_string()), ("code", code.to_string())]
}

#[derive(Clone, Debug)]
pub(crate) struct Measure(pub SdkMetrics);

impl Intercept for Measure {
    fn name(&self) -> &'static str {
        "TenonSdkMetrics"
    }

    fn read_before_execution(
        &self,
        _context: &BeforeSerializationInterceptorContextRef<'_>,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let now = Instant::now();
        cfg.interceptor_state().store_put(Timing { call: now, attempt: now, attempts: 0 });
        Ok(())
    }

    fn read_before_attempt(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let mut t = cfg.load::<Timing>().cloned().unwrap_or(Timing {
            call: Instant::now(),
            attempt: Instant::now(),
            attempts: 0,
        });
        t.attempt = Instant::now();
        t.attempts += 1;
        cfg.interceptor_state().store_put(t);
        Ok(())
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let labels = labels(cfg, context);
        if let Some(t) = cfg.load::<Timing>() {
            self.0.attempt_seconds.get_or_create(&labels).observe(t.attempt.elapsed().as_secs_f64());
        }
        self.0.attempts.get_or_create(&labels).inc();
        Ok(())
    }

    fn read_after_execution(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let labels = labels(cfg, context);
        self.0.requests.get_or_create(&labels).inc();
        if let Some(t) = cfg.load::<Timing>() {
            self.0.request_seconds.get_or_create(&labels).observe(t.call.elapsed().as_secs_f64());
            self.0.retries.get_or_create(&labels).observe(f64::from(t.attempts.saturating_sub(1)));
        }
        Ok(())
    }
}
