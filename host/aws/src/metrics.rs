//! The provider's Prometheus series, rendered by the controller's `/metrics` beside its own
//! (names as Karpenter's where the meaning is the same).

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Gauge: bytes of the user data last rendered into a NodeClass' launch template (EC2 refuses
/// more than 16 KiB), by NodeClass.
pub const USERDATA_BYTES: &str = "karpenter_ec2nodeclasses_userdata_bytes";

#[derive(Debug, Default)]
pub struct Metrics {
    userdata_bytes: Mutex<BTreeMap<String, f64>>,
}

impl Metrics {
    pub fn set_userdata_bytes(&self, nodeclass: &str, bytes: usize) {
        if let Ok(mut m) = self.userdata_bytes.lock() {
            m.insert(nodeclass.to_string(), bytes as f64);
        }
    }

    pub fn userdata_bytes(&self, nodeclass: &str) -> Option<f64> {
        self.userdata_bytes.lock().ok()?.get(nodeclass).copied()
    }

    /// Drops a NodeClass' series, so a deleted one does not look like one with empty user data.
    pub fn forget_nodeclass(&self, nodeclass: &str) {
        if let Ok(mut m) = self.userdata_bytes.lock() {
            m.remove(nodeclass);
        }
    }

    /// The Prometheus text exposition of every series.
    pub fn render(&self) -> String {
        let m = self.userdata_bytes.lock().map(|m| m.clone()).unwrap_or_default();
        if m.is_empty() {
            return String::new();
        }
        let mut out = format!("# TYPE {USERDATA_BYTES} gauge\n");
        for (nodeclass, v) in m {
            let label = nodeclass.replace('\\', "\\\\").replace('"', "\\\"");
            out.push_str(&format!("{USERDATA_BYTES}{{nodeclass=\"{label}\"}} {v}\n"));
        }
        out
    }
}
