//! How the controller talks to the API server. kube-rs retries 429, 503 and 504 up to 15
//! times inside the client by default, for every request: a write the server stored before
//! answering 504 was then made twice, and a refused eviction held the whole pass. Here the
//! client retries nothing by itself except reads (GET, at most [`READ_RETRIES`] times with
//! backoff, honouring `Retry-After`); writes fail to their caller, which knows whether
//! trying again is safe. Every request gets an answer (or its watch stream starts) within
//! [`REQUEST_TIMEOUT`], and waits for the client-side rate limit first.

use super::client_metrics::RequestMetricsLayer;
use super::metrics::Metrics;
use super::ratelimit::RateLimitLayer;
use http::{Method, Request, Response};
use kube::client::Body;
use kube::client::retry::RetryPolicy;
use std::sync::Arc;
use std::time::Duration;
use tower::BoxError;
use tower::retry::{Policy, RetryLayer};
use tower::timeout::TimeoutLayer;

/// The longest a request waits for its answer (its retries included).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// How often a read the server refused with 429, 503 or 504 is tried again.
pub const READ_RETRIES: u32 = 3;

/// Retries reads only: a request whose method is not GET is never cloned, so never resent.
#[derive(Clone)]
pub struct ReadRetry(RetryPolicy);

impl Default for ReadRetry {
    fn default() -> Self {
        ReadRetry(
            RetryPolicy::new(Duration::from_millis(200), Duration::from_secs(5), READ_RETRIES, true)
                .expect("valid backoff"),
        )
    }
}

impl<Res> Policy<Request<Body>, Response<Res>, BoxError> for ReadRetry {
    type Future = tokio::time::Sleep;

    fn retry(&mut self, req: &mut Request<Body>, result: &mut Result<Response<Res>, BoxError>) -> Option<Self::Future> {
        self.0.retry(req, result)
    }

    fn clone_request(&mut self, req: &Request<Body>) -> Option<Request<Body>> {
        if req.method() != Method::GET {
            return None;
        }
        <RetryPolicy as Policy<Request<Body>, Response<Res>, BoxError>>::clone_request(&mut self.0, req)
    }
}

/// The controller's client: no built-in retries, reads retried, a timeout, the rate limit,
/// every request counted and timed in `metrics`.
pub fn client(config: kube::Config, limit: &RateLimitLayer, metrics: Arc<Metrics>) -> anyhow::Result<kube::Client> {
    client_with(config, limit, REQUEST_TIMEOUT, metrics)
}

fn client_with(
    mut config: kube::Config,
    limit: &RateLimitLayer,
    timeout: Duration,
    metrics: Arc<Metrics>,
) -> anyhow::Result<kube::Client> {
    config.default_retry = false;
    Ok(kube::client::ClientBuilder::try_from(config)?
        // The retry layer resends a request through a clone of the stack beneath it.
        .with_layer(&tower::buffer::BufferLayer::new(1024))
        .with_layer(&RetryLayer::new(ReadRetry::default()))
        .with_layer(&TimeoutLayer::new(timeout))
        .with_layer(limit)
        // Outermost, as client-go measures: from the call to the answer, waits included.
        .with_layer(&RequestMetricsLayer(metrics))
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenon_kube_emulator::Emulator;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap()
    }

    fn client_of(emu: &Emulator) -> kube::Client {
        let config = kube::Config::new(emu.url.parse().unwrap());
        client(config, &RateLimitLayer { qps: 0, burst: 1 }, Arc::default()).unwrap()
    }

    #[test]
    fn a_write_is_never_resent_and_a_read_is_retried_a_few_times() {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::api::{Api, PostParams};
        rt().block_on(async {
            let emu = Emulator::start().unwrap();
            let api: Api<ConfigMap> = Api::namespaced(client_of(&emu), "default");
            let cm: ConfigMap =
                serde_json::from_value(serde_json::json!({"metadata": {"generateName": "x-"}})).unwrap();
            // Stored, then answered 504: the client must not make it a second time.
            emu.inject(tenon_kube_emulator::Fault {
                verb: "create".into(),
                resource: "configmaps".into(),
                status: 504,
                remaining: 1,
                after_storing: true,
                ..Default::default()
            });
            let e = api.create(&PostParams::default(), &cm).await.unwrap_err();
            assert!(matches!(&e, kube::Error::Api(s) if s.code == 504), "{e}");
            assert_eq!(api.list(&Default::default()).await.unwrap().items.len(), 1, "exactly one stored");
            emu.fail_next("list", "configmaps", 503, READ_RETRIES as usize);
            assert_eq!(api.list(&Default::default()).await.unwrap().items.len(), 1, "a read is retried");
            emu.fail_next("list", "configmaps", 503, READ_RETRIES as usize + 1);
            assert!(api.list(&Default::default()).await.is_err(), "but not forever");
            emu.clear_faults();
            emu.fail_next("create", "configmaps", 429, 1);
            assert!(api.create(&PostParams::default(), &cm).await.is_err(), "a refused write goes to its caller");
        });
    }

    #[test]
    fn a_request_that_gets_no_answer_times_out() {
        rt().block_on(async {
            let emu = Emulator::start().unwrap();
            let config = kube::Config::new(emu.url.parse().unwrap());
            let limit = RateLimitLayer { qps: 0, burst: 1 };
            let c = client_with(config, &limit, Duration::from_millis(300), Arc::default()).unwrap();
            emu.set_latency(Duration::from_secs(3));
            let started = std::time::Instant::now();
            let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = kube::Api::namespaced(c, "default");
            assert!(api.list(&Default::default()).await.is_err());
            assert!(started.elapsed() < Duration::from_secs(2), "gave up after {:?}", started.elapsed());
        });
    }
}
