//! SDK clients built once from one configuration: region, credentials, endpoint (moto in
//! tests), one rustls (ring) HTTPS client, and the SDK's standard retry policy.
//!
//! The region, unless given, comes from the SDK's chain as Karpenter's does: `AWS_REGION` or
//! `AWS_DEFAULT_REGION`, the shared config profile, then the instance's metadata (IMDSv2), so
//! a controller on a node in eu-west-1 talks to eu-west-1 without being told.

use crate::call_health::{CallHealth, Watch};
use crate::rate_gate::{Gated, RateGate, Throttles};
use crate::sdk_metrics::{Measure, SdkMetrics};
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
    /// `None`: the SDK's region chain (see the module's documentation).
    pub region: Option<String>,
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
    /// A connection to `region`.
    pub fn new(region: impl Into<String>) -> Self {
        Connection { region: Some(region.into()), ..Connection::from_environment() }
    }

    /// A connection whose region comes from the SDK's chain.
    pub fn from_environment() -> Self {
        Connection {
            region: None,
            endpoint_url: None,
            static_credentials: None,
            max_attempts: 5,
            attempt_timeout: ATTEMPT_TIMEOUT,
        }
    }
}

/// No region was given and the SDK's chain found none.
#[derive(Debug, thiserror::Error)]
#[error(
    "no AWS region: set AWS_REGION (the chart's controller.env) or run on EC2, where the \
     instance metadata service (IMDSv2) answers the region"
)]
pub struct NoRegion;

/// One client per AWS service the provider uses.
#[derive(Clone, Debug)]
pub struct Clients {
    /// The region every client talks to (given or found by the SDK's chain).
    pub region: String,
    pub ec2: aws_sdk_ec2::Client,
    pub iam: aws_sdk_iam::Client,
    pub ssm: aws_sdk_ssm::Client,
    pub sqs: aws_sdk_sqs::Client,
    pub pricing: aws_sdk_pricing::Client,
    pub eks: aws_sdk_eks::Client,
    /// Whether AWS answers (every client's attempts feed it).
    pub calls: Arc<CallHealth>,
    /// Every EC2 attempt waits for it; EC2's throttling slows it (rate_gate.rs).
    pub ec2_gate: Arc<RateGate>,
    /// Every client's calls and attempts, counted and timed.
    pub sdk: SdkMetrics,
}

impl Clients {
    pub async fn connect(c: &Connection) -> Result<Clients, NoRegion> {
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::Ring))
            .build_https();
        let retry = RetryConfig::standard()
            .with_max_attempts(c.max_attempts.max(1))
            .with_initial_backoff(Duration::from_millis(100))
            .with_max_backoff(Duration::from_secs(20));
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .http_client(http.clone())
            .retry_config(retry)
            .timeout_config(
                TimeoutConfig::builder()
                    .connect_timeout(Duration::from_secs(10))
                    .operation_attempt_timeout(c.attempt_timeout)
                    .build(),
            );
        if let Some(region) = &c.region {
            loader = loader.region(Region::new(region.clone()));
        }
        if let Some(url) = &c.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        if let Some((key, secret)) = &c.static_credentials {
            let creds = Credentials::new(key, secret, None, None, "tenon-static");
            loader = loader.credentials_provider(SharedCredentialsProvider::new(creds));
        }
        let cfg = loader.load().await;
        let region = cfg.region().map(|r| r.to_string()).filter(|r| !r.is_empty()).ok_or(NoRegion)?;
        // The Price List API is served only from a few regions; us-east-1 answers for all.
        let pricing_cfg = if c.endpoint_url.is_none() {
            aws_sdk_pricing::config::Builder::from(&cfg).region(Region::new("us-east-1"))
        } else {
            aws_sdk_pricing::config::Builder::from(&cfg)
        };
        let calls = Arc::new(CallHealth::default());
        let watch = Watch(calls.clone());
        let sdk = SdkMetrics::default();
        let measure = Measure(sdk.clone());
        let ec2_gate =
            Arc::new(RateGate::new(sdk.ec2_rate.clone(), sdk.ec2_throttled.clone(), std::time::Instant::now()));
        Ok(Clients {
            region,
            ec2: aws_sdk_ec2::Client::from_conf(
                aws_sdk_ec2::config::Builder::from(&cfg)
                    .http_client(Gated { inner: http, gate: ec2_gate.clone() })
                    .interceptor(watch.clone())
                    .interceptor(measure.clone())
                    .interceptor(Throttles(ec2_gate.clone()))
                    .build(),
            ),
            iam: aws_sdk_iam::Client::from_conf(
                aws_sdk_iam::config::Builder::from(&cfg)
                    .interceptor(watch.clone())
                    .interceptor(measure.clone())
                    .build(),
            ),
            ssm: aws_sdk_ssm::Client::from_conf(
                aws_sdk_ssm::config::Builder::from(&cfg)
                    .interceptor(watch.clone())
                    .interceptor(measure.clone())
                    .build(),
            ),
            sqs: aws_sdk_sqs::Client::from_conf(
                aws_sdk_sqs::config::Builder::from(&cfg)
                    .interceptor(watch.clone())
                    .interceptor(measure.clone())
                    .build(),
            ),
            pricing: aws_sdk_pricing::Client::from_conf(
                pricing_cfg.interceptor(watch.clone()).interceptor(measure.clone()).build(),
            ),
            eks: aws_sdk_eks::Client::from_conf(
                aws_sdk_eks::config::Builder::from(&cfg).interceptor(watch).interceptor(measure).build(),
            ),
            calls,
            ec2_gate,
            sdk,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;
    use std::process::Command;

    /// The child half of the tests below: connects with the region chain in the environment
    /// its parent set and prints what it found.
    #[test]
    #[ignore = "run by the region-chain tests, in an environment they control"]
    fn connect_and_print_region() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        match rt.block_on(Clients::connect(&Connection::from_environment())) {
            Ok(c) => println!("region={}", c.region),
            Err(e) => println!("error={e}"),
        }
    }

    /// An instance metadata service (IMDSv2) that answers `region`, on 127.0.0.1.
    fn metadata_service(region: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                let _ = reader.read_line(&mut request);
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let (status, body) = if request.starts_with("PUT /latest/api/token") {
                    ("200 OK", "a-token")
                } else if request.starts_with("GET /latest/meta-data/placement/region") {
                    ("200 OK", region)
                } else {
                    ("404 Not Found", "")
                };
                let _ = write!(
                    &stream,
                    "HTTP/1.1 {status}\r\nContent-Length: {}\r\nx-aws-ec2-metadata-token-ttl-seconds: 21600\r\n\
                     Connection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        url
    }

    /// Runs the child half with only `env` (no profile files, no inherited region).
    fn child(env: &[(&str, &str)]) -> String {
        let home = std::env::temp_dir().join(format!("tenon-region-chain-{}", std::process::id()));
        let out = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "clients::tests::connect_and_print_region", "--ignored", "--nocapture"])
            .env_clear()
            .env("HOME", &home)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        stdout
            .lines()
            .find(|l| l.starts_with("region=") || l.starts_with("error="))
            .unwrap_or_else(|| panic!("the child printed no region: {stdout}{}", String::from_utf8_lossy(&out.stderr)))
            .to_string()
    }

    #[test]
    fn without_a_region_the_instance_metadata_names_it() {
        let imds = metadata_service("eu-west-1");
        assert_eq!(child(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", &imds)]), "region=eu-west-1");
    }

    #[test]
    fn the_environment_outranks_the_instance_metadata() {
        let imds = metadata_service("eu-west-1");
        let env = [("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds.as_str()), ("AWS_DEFAULT_REGION", "ap-southeast-2")];
        assert_eq!(child(&env), "region=ap-southeast-2");
        let env = [env[0], env[1], ("AWS_REGION", "sa-east-1")];
        assert_eq!(child(&env), "region=sa-east-1");
    }

    #[test]
    fn no_region_anywhere_is_an_error_that_says_how_to_set_one() {
        // Nothing listens here: the metadata service does not answer.
        let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        let line = child(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", &format!("http://{closed}"))]);
        assert!(line.starts_with("error=no AWS region: set AWS_REGION"), "{line}");
    }
}
