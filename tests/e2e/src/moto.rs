//! moto holding a cluster's AWS account (tests/moto/account.py), one per test, on 127.0.0.1.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Moto {
    child: Child,
    pub url: String,
    /// Offerings CreateFleet finds no capacity for (account.py reads it at every call).
    exhausted: PathBuf,
    /// Instances whose system status check has failed (read at every DescribeInstanceStatus).
    impaired: PathBuf,
    /// EC2 actions that hang (read while a call waits).
    hung: PathBuf,
    /// EC2 actions refused as unauthorized (read at every call).
    refused: PathBuf,
}

impl Moto {
    /// Starts moto with subnets, security groups and node roles for `clusters` and the EKS
    /// AL2023 image parameters. Its log goes to `log` (never to a pipe nobody reads: a full
    /// pipe would stall the server).
    pub fn start(clusters: &[&str], log: &Path) -> Moto {
        let ready = log.with_extension("ready");
        let _ = std::fs::remove_file(&ready);
        let out = std::fs::File::create(log).expect("moto log file");
        let err = out.try_clone().expect("moto log file");
        let script = super::crate_dir().join("../moto/account.py");
        let mut child = Command::new("python3")
            .arg(&script)
            // Port 0: moto binds a free port itself and writes its endpoint to `ready`, so no
            // other test can take the port between choosing and binding it.
            .arg("0")
            .arg(&ready)
            .arg(clusters.join(","))
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .expect("python3 with moto (scripts/setup-tools installs it; the test command puts its venv on PATH)");
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready.exists() {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "tests/moto/account.py exited with {status}:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "moto did not come up within 60 s; log: {}", log.display());
            std::thread::sleep(Duration::from_millis(50));
        }
        Moto {
            child,
            url: std::fs::read_to_string(&ready).expect("moto's endpoint").trim().to_string(),
            exhausted: log.with_extension("exhausted.json"),
            impaired: log.with_extension("impaired.json"),
            hung: log.with_extension("hung.json"),
            refused: log.with_extension("refused.json"),
        }
    }

    /// From now on CreateFleet has no capacity for these offerings: (instance type or
    /// `prefix*`, zone, capacity type), `None` meaning any.
    pub fn exhaust(&self, offerings: &[(String, Option<String>, Option<String>)]) {
        let list: Vec<serde_json::Value> = offerings
            .iter()
            .map(|(t, z, c)| serde_json::json!({"instanceType": t, "zone": z, "capacityType": c}))
            .collect();
        std::fs::write(&self.exhausted, serde_json::Value::Array(list).to_string()).expect("exhausted offerings file");
    }
}

impl Moto {
    /// From now on these instances' system reachability check has failed, since an hour ago.
    pub fn impair(&self, instance_ids: &[&str]) {
        std::fs::write(&self.impaired, serde_json::json!(instance_ids).to_string()).expect("impaired instances file");
    }
}

impl Moto {
    /// From now on calls of these EC2 actions (only `CreateFleet` so far) get no answer,
    /// holding their connection open, until `hang(&[])`.
    pub fn hang(&self, actions: &[&str]) {
        std::fs::write(&self.hung, serde_json::json!(actions).to_string()).expect("hung actions file");
    }
}

impl Moto {
    /// From now on calls of these EC2 actions (only `DescribeSubnets` so far) are refused with
    /// `UnauthorizedOperation`, until `refuse(&[])`.
    pub fn refuse(&self, actions: &[&str]) {
        std::fs::write(&self.refused, serde_json::json!(actions).to_string()).expect("refused actions file");
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
