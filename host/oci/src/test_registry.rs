//! A real registry for tests: the CNCF distribution registry (`docker-registry`, which
//! `scripts/setup-tools` installs) on 127.0.0.1, storing into a temporary directory, stopped
//! and removed on drop.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct TestRegistry {
    child: Child,
    dir: PathBuf,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl TestRegistry {
    /// Starts a registry; panics with what to do when `docker-registry` is not installed.
    pub fn start(name: &str) -> TestRegistry {
        let dir = std::env::temp_dir().join(format!("tenon-registry-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).expect("registry directory");
        let config = dir.join("config.yml");
        // Port 0: the registry picks a free port and logs it, so no port can be taken
        // between choosing and binding it.
        let yaml = format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:0\n",
            dir.join("data").display()
        );
        std::fs::write(&config, yaml).expect("registry config");
        let mut child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("docker-registry: {e} (scripts/setup-tools installs it into $TENON_CACHE/bin)"));
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("listening on ").nth(1) {
                    let addr = addr.split(['"', ' ']).next().unwrap_or_default().to_string();
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(addr);
                    }
                }
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(20)).expect("docker-registry did not say where it listens");
        TestRegistry { child, dir, addr }
    }
}

impl TestRegistry {
    /// Where the registry keeps its blobs and manifests.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
