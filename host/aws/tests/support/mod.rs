//! A moto server per test: started on a free 127.0.0.1 port, stopped when dropped.

#![allow(dead_code)]

pub mod lab;
pub mod scheduling;

use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tenon_aws::interruption::InterruptionKind;
use tenon_aws::{AwsProvider, ClusterInfo, Connection, Settings};

pub struct Moto {
    child: Child,
    pub url: String,
}

impl Moto {
    pub fn start() -> Moto {
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let child = Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto_server on PATH (scripts/setup-tools installs it; the test command puts it on PATH)");
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto_server did not listen on 127.0.0.1:{port} within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        }
        Moto { child, url: format!("http://127.0.0.1:{port}") }
    }

    pub fn connection(&self) -> Connection {
        let mut c = Connection::new("us-east-1");
        c.endpoint_url = Some(self.url.clone());
        c.static_credentials = Some(("testing".into(), "testing".into()));
        c.max_attempts = 2;
        c
    }

    pub async fn provider(&self, cluster: &str) -> AwsProvider {
        AwsProvider::connect(
            &self.connection(),
            Settings {
                cluster: ClusterInfo {
                    name: cluster.into(),
                    endpoint: "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com".into(),
                    ca_bundle: "Q0E=".into(),
                    service_cidr: "10.100.0.0/16".into(),
                },
                region: "us-east-1".into(),
                kubernetes_version: "1.33".into(),
                capacity: Default::default(),
            },
        )
        .await
        .expect("the connection names its region")
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn event(detail_type: &str, source: &str, detail: serde_json::Value) -> String {
    serde_json::json!({
        "version": "0", "id": "7e2b1a3c", "detail-type": detail_type, "source": source,
        "account": "123456789012", "time": "2026-11-30T10:00:00Z", "region": "us-east-1",
        "resources": [], "detail": detail,
    })
    .to_string()
}

/// The four EventBridge messages the interruption queue receives, as AWS sends them.
pub fn interruption_messages() -> Vec<(String, InterruptionKind, Vec<&'static str>)> {
    vec![
        (
            event(
                "EC2 Spot Instance Interruption Warning",
                "aws.ec2",
                serde_json::json!({"instance-id": "i-0aaa", "instance-action": "terminate"}),
            ),
            InterruptionKind::SpotInterruption,
            vec!["i-0aaa"],
        ),
        (
            event("EC2 Instance Rebalance Recommendation", "aws.ec2", serde_json::json!({"instance-id": "i-0bbb"})),
            InterruptionKind::RebalanceRecommendation,
            vec!["i-0bbb"],
        ),
        (
            event(
                "AWS Health Event",
                "aws.health",
                serde_json::json!({
                    "service": "EC2", "eventTypeCategory": "scheduledChange",
                    "eventTypeCode": "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED",
                    "affectedEntities": [{"entityValue": "i-0ccc"}, {"entityValue": "i-0ddd"}],
                }),
            ),
            InterruptionKind::ScheduledChange,
            vec!["i-0ccc", "i-0ddd"],
        ),
        (
            event(
                "EC2 Instance State-change Notification",
                "aws.ec2",
                serde_json::json!({"instance-id": "i-0eee", "state": "stopping"}),
            ),
            InterruptionKind::StateChange("stopping".into()),
            vec!["i-0eee"],
        ),
    ]
}

/// A fault injector in front of moto: the first `failures` requests get an error (EC2's
/// throttling error, HTTP 503 `RequestLimitExceeded`, unless [`fault_matching`] names
/// another); the rest are forwarded to moto unchanged.
pub struct Throttle {
    pub url: String,
    pub seen: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The most matching requests that were waiting for moto's answer at one time.
    pub peak_in_flight: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

pub async fn throttle(moto: &Moto, failures: usize) -> Throttle {
    throttle_matching(moto, failures, "").await
}

/// As [`throttle`], counting (and throttling) only the requests whose headers or body contain
/// `needle` (an operation's name, e.g. `AmazonSSM.GetParameter`); the others pass through.
pub async fn throttle_matching(moto: &Moto, failures: usize, needle: &str) -> Throttle {
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>throttled</RequestID></Response>";
    let resp = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    fault_matching(moto, failures, needle, resp).await
}

/// As [`throttle_matching`], answering the matching requests with `response` (a whole HTTP
/// response) instead of the throttling error.
pub async fn fault_matching(moto: &Moto, failures: usize, needle: &str, response: String) -> Throttle {
    fault_when(moto, needle, response, std::sync::Arc::new(move |n| n < failures), std::time::Duration::ZERO).await
}

/// A proxy in front of moto that holds each request matching `needle` for `delay` before
/// forwarding it, as a loaded EC2 answers slowly; it fails none.
pub async fn slow_matching(moto: &Moto, needle: &str, delay: std::time::Duration) -> Throttle {
    fault_when(moto, needle, String::new(), std::sync::Arc::new(|_| false), delay).await
}

/// As [`fault_matching`], failing the matching requests while `failing` is set.
pub async fn fault_while(
    moto: &Moto,
    needle: &str,
    response: String,
    failing: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Throttle {
    let fails = std::sync::Arc::new(move |_| failing.load(std::sync::atomic::Ordering::SeqCst));
    fault_when(moto, needle, response, fails, std::time::Duration::ZERO).await
}

/// Which matching requests fail, by their index among the matching ones.
type Fails = std::sync::Arc<dyn Fn(usize) -> bool + Send + Sync>;

async fn fault_when(moto: &Moto, needle: &str, response: String, fails: Fails, delay: std::time::Duration) -> Throttle {
    let needle = needle.to_string();
    let response = std::sync::Arc::new(response);
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let upstream = moto.url.trim_start_matches("http://").to_string();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak_in_flight = Arc::new(AtomicUsize::new(0));
    let peak = peak_in_flight.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            let count = count.clone();
            let (in_flight, peak) = (in_flight.clone(), peak.clone());
            let needle = needle.clone();
            let response = response.clone();
            let fails = fails.clone();
            tokio::spawn(async move {
                // Read one request: headers, then Content-Length bytes of body.
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let header_end = loop {
                    let r = client.read(&mut chunk).await.unwrap_or(0);
                    if r == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..r]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")))
                    .and_then(|(_, v)| v.trim().parse().ok())
                    .unwrap_or(0);
                while buf.len() < header_end + len {
                    let r = client.read(&mut chunk).await.unwrap_or(0);
                    if r == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..r]);
                }
                let matches = String::from_utf8_lossy(&buf).contains(&needle);
                if matches && fails(count.fetch_add(1, Ordering::SeqCst)) {
                    let _ = client.write_all(response.as_bytes()).await;
                    return;
                }
                if matches {
                    peak.fetch_max(in_flight.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                }
                // Forward with Connection: close so the upstream response ends at EOF.
                let head = head.replacen("\r\n", "\r\nConnection: close\r\n", 1);
                let Ok(mut up) = tokio::net::TcpStream::connect(&upstream).await else { return };
                let _ = up.write_all(head.as_bytes()).await;
                let _ = up.write_all(&buf[header_end..]).await;
                let mut resp = Vec::new();
                let _ = up.read_to_end(&mut resp).await;
                if matches {
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                }
                let _ = client.write_all(&resp).await;
            });
        }
    });
    Throttle { url, seen, peak_in_flight }
}
