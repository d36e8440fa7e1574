//! SDK clients built once from one configuration: region, credentials, endpoint (moto in
//! tests), one rustls (ring) HTTPS client, and the SDK's standard retry policy.

use crate::call_health::{CallHealth, Watch};
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_config::{BehaviorVersion, Region};
use aws_credential_types::Credentials;
use aws_credential_types::provider::SharedCredentialsProvider;
use aws_smithy_http_client::tls;
use std::sync::Arc;
use std::time::Duration;

/// [`Connection::attempt_timeout`]'s default.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(30);

/// Where and how to reach AWS.
#[derive(Clone, Debug)]
pub struct Connection {
    pub region: String,
    /// Overrides every service's endpoint (an emulator such as moto).
    pub endpoint_url: Option<String>,
    /// Static credentials (tests); `None` uses the default chain (environment, web identity
    /// for IRSA, EKS Pod Identity, instance metadata).
    pub static_credentials: Option<(String, String)>,
    /// Attempts per call, including the first. Throttling (`RequestLimitExceeded`,
    /// `Throttling`…) and transient errors (5xx, timeouts, connection resets) are retried with
    /// exponential backoff and jitter by the SDK's standard retry mode.
    pub max_attempts: u32,
    /// The longest one attempt may wait for its answer: a hung connection is given up and
    /// the attempt retried (CreateFleet carries a client token, so a retry launches nothing
    /// twice).
    pub attempt_timeout: Duration,
}

impl Connection {
    pub fn new(region: impl Into<String>) -> Self {
        Connection {
            region: region.into(),
            endpoint_url: None,
            static_credentials: None,
            max_attempts: 5,
            attempt_timeout: ATTEMPT_TIMEOUT,
        }
    }
}

/// One client per AWS service the provider uses.
#[derive(Clone, Debug)]
pub struct Clients {
    pub ec2: aws_sdk_ec2::Client,
    pub iam: aws_sdk_iam::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub pricing: aws_sdk_pricing::Client,
    pub eks: aws_sdk_eks::Client,
    /// Whether AWS answers (every client's attempts feed it).
    pub calls: Arc<CallHealth>,
}

impl Clients {
    pub async fn connect(c: &Connection) -> Clients {
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::Ring))
            .build_https();
        let retry = RetryConfig::standard()
            .with_max_attempts(c.max_attempts.max(1))
            .with_initial_backoff(Duration::from_millis(100))
            .with_max_backoff(Duration::from_secs(20));
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(c.region.clone()))
            .http_client(http)
            .retry_config(retry)
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .operation_attempt_timeout(c.attempt_timeout)
                    .build(),
            );
        if let Some(url) = &c.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        if let Some((key, secret)) = &c.static_credentials {
            let creds = Credentials::new(key, secret, None, None, "tenon-static");
            loader = loader.credentials_provider(SharedCredentialsProvider::new(creds));
        }
        let cfg = loader.load().await;
        // The Price List API is served only from a few regions; us-east-1 answers for all.
        let pricing_cfg = if c.endpoint_url.is_none() {
            aws_sdk_pricing::config::Builder::from(&cfg).region(Region::new("us-east-1"))
        } else {
            aws_sdk_pricing::config::Builder::from(&cfg)
        };
        let calls = Arc::new(CallHealth::default());
        let watch = Watch(calls.clone());
        Clients {
            ec2: aws_sdk_ec2::Client::from_conf(
                aws_sdk_ec2::config::Builder::from(&cfg).interceptor(watch.clone()).build(),
            ),
            iam: aws_sdk_iam::Client::from_conf(
                aws_sdk_iam::config::Builder::from(&cfg).interceptor(watch.clone()).build(),
            ),
            ssm: aws_sdk_ssm::Client::from_conf(
                aws_sdk_ssm::config::Builder::from(&cfg).interceptor(watch.clone()).build(),
            ),
            sqs: aws_sdk_sqs::Client::from_conf(
                aws_sdk_sqs::config::Builder::from(&cfg).interceptor(watch.clone()).build(),
            ),
            pricing: aws_sdk_pricing::Client::from_conf(pricing_cfg.interceptor(watch.clone()).build()),
            eks: aws_sdk_eks::Client::from_conf(aws_sdk_eks::config::Builder::from(&cfg).interceptor(watch).build()),
            calls,
        }
    }
}
