//! A moto server per test: started on a free 127.0.0.1 port, stopped when dropped.

#![allow(dead_code)]

pub mod lab;
pub mod scheduling;

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
        // moto unchanged, behind the catalog cache of the end-to-end suites' moto. It binds a
        // free port itself and writes its endpoint to `ready`, so no other test can take the
        // port between choosing and binding it.
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let ready = std::env::temp_dir().join(format!("tenon-moto-{}-{n}.ready", std::process::id()));
        let _ = std::fs::remove_file(&ready);
        let serve = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/moto/serve.py");
        let mut child = Command::new("python3")
            .arg(serve)
            .arg(&ready)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 with moto (scripts/setup-tools installs it; the test command puts its venv on PATH)");
        let deadline = Instant::now() + Duration::from_secs(30);
        let url = loop {
            if let Ok(url) = std::fs::read_to_string(&ready) {
                let _ = std::fs::remove_file(&ready);
                break url.trim().to_string();
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("tests/moto/serve.py exited with {status}");
            }
            assert!(Instant::now() < deadline, "tests/moto/serve.py did not listen within 30 s");
            std::thread::sleep(Duration::from_millis(50));
        };
        Moto { child, url }
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
