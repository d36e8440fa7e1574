//! A policy updated under a running controller, as a platform team ships one: the policy
//! store is a ConfigMap volume (each key a symlink into `..data`, swapped atomically by the
//! kubelet), the NodePool pins the digest, and the pin and the ConfigMap change in either
//! order. Between the two the NodePool is `PolicyUnavailable`; after the second it recovers
//! without a restart.

use std::path::{Path, PathBuf};

use tenon_e2e::Cluster;
use tenon_e2e::scenario::{apply_lab_general, nodeclass_ready};

/// A directory laid out as the kubelet mounts a ConfigMap, updated as the kubelet does.
struct ConfigMapVolume {
    dir: PathBuf,
    version: u32,
}

impl ConfigMapVolume {
    fn new(dir: PathBuf, key: &str, bytes: &[u8]) -> Self {
        std::fs::create_dir_all(&dir).unwrap();
        let mut v = ConfigMapVolume { dir, version: 0 };
        v.update(key, bytes);
        std::os::unix::fs::symlink(format!("..data/{key}"), v.dir.join(key)).unwrap();
        v
    }

    /// The kubelet's atomic writer: the new contents in a new directory, a `..data_tmp`
    /// symlink to it renamed over `..data`, then the old directory removed.
    fn update(&mut self, key: &str, bytes: &[u8]) {
        self.version += 1;
        let old = std::fs::read_link(self.dir.join("..data")).ok();
        let ts = format!("..2026_12_04_15_00_0{}.000000001", self.version);
        std::fs::create_dir(self.dir.join(&ts)).unwrap();
        std::fs::write(self.dir.join(&ts).join(key), bytes).unwrap();
        std::os::unix::fs::symlink(&ts, self.dir.join("..data_tmp")).unwrap();
        std::fs::rename(self.dir.join("..data_tmp"), self.dir.join("..data")).unwrap();
        if let Some(old) = old {
            std::fs::remove_dir_all(self.dir.join(old)).unwrap();
        }
    }
}

/// A built component and its sha256 (lower-case hex, as a pin writes it).
fn built(file: &str) -> (Vec<u8>, String) {
    let dir = std::env::var_os("TENON_POLICY_DIR").expect("TENON_POLICY_DIR: the built policies");
    let path = Path::new(&dir).join(file);
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
    let out = std::process::Command::new("sha256sum").arg(&path).output().expect("sha256sum");
    let digest = String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or_default().to_string();
    assert_eq!(digest.len(), 64, "sha256sum {file}: {out:?}");
    (bytes, digest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pinned_nodepool_recovers_from_a_configmap_update_in_either_order() {
    let mut c = Cluster::start("policy-update").await;
    // Two versions of one scorer: different components, so different digests.
    let ((v1, d1), (v2, d2)) = (built("default_scoring.wasm"), built("price_per_vcpu.wasm"));
    let mut volume = ConfigMapVolume::new(c.dir.join("policies"), "team-scorer.wasm", &v1);
    c.controller_env.push(("TENON_POLICY_DIR".into(), volume.dir.display().to_string()));
    apply_lab_general(&c);
    let pin = |d: &str| format!("tenon.dev/scoring-policy=team-scorer@sha256:{d}");
    c.kubectl(&["annotate", "nodepool", "lab-general", &pin(&d1)]);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    c.await_nodepool_condition("lab-general", "PolicyHealthy", "True").await;

    // The pin first: the mounted file is still v1.
    c.kubectl(&["annotate", "--overwrite", "nodepool", "lab-general", &pin(&d2)]);
    let (reason, message) = c.await_nodepool_condition("lab-general", "PolicyHealthy", "False").await;
    assert_eq!(reason, "PolicyUnavailable");
    assert!(message.contains(&d2) && message.contains(&d1), "names the pin and what was found: {message}");
    volume.update("team-scorer.wasm", &v2);
    c.await_nodepool_condition("lab-general", "PolicyHealthy", "True").await;

    // The ConfigMap first: the pin is still v2.
    volume.update("team-scorer.wasm", &v1);
    let (reason, message) = c.await_nodepool_condition("lab-general", "PolicyHealthy", "False").await;
    assert_eq!(reason, "PolicyUnavailable");
    assert!(message.contains(&d2) && message.contains(&d1), "{message}");
    c.kubectl(&["annotate", "--overwrite", "nodepool", "lab-general", &pin(&d1)]);
    c.await_nodepool_condition("lab-general", "PolicyHealthy", "True").await;
    c.assert_controller_running();
}
