//! The provider's Prometheus series (prometheus-client), rendered by the controller's
//! `/metrics` beside its own (names as Karpenter's where the meaning is the same).

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// Gauge: bytes of the user data last rendered into a NodeClass' launch template (EC2 refuses
/// more than 16 KiB), by NodeClass.
pub const USERDATA_BYTES: &str = "karpenter_ec2nodeclasses_userdata_bytes";

type ByNodeClass = Vec<(&'static str, String)>;

fn by_nodeclass(nodeclass: &str) -> ByNodeClass {
    vec![("nodeclass", nodeclass.to_string())]
}

#[derive(Debug)]
pub struct Metrics {
    userdata_bytes: Family<ByNodeClass, Gauge<f64, AtomicU64>>,
    registry: Registry,
}

impl Default for Metrics {
    fn default() -> Self {
        let userdata_bytes = Family::default();
        let mut registry = Registry::default();
        registry.register(
            USERDATA_BYTES,
            "Bytes of the user data last rendered for an EC2NodeClass (EC2 refuses more than 16 KiB), by NodeClass",
            userdata_bytes.clone(),
        );
        Metrics { userdata_bytes, registry }
    }
}

impl Metrics {
    pub fn set_userdata_bytes(&self, nodeclass: &str, bytes: usize) {
        self.userdata_bytes.get_or_create(&by_nodeclass(nodeclass)).set(bytes as f64);
    }

    pub fn userdata_bytes(&self, nodeclass: &str) -> Option<f64> {
        self.userdata_bytes.get(&by_nodeclass(nodeclass)).map(|g| g.get())
    }

    /// Drops a NodeClass' series, so a deleted one does not look like one with empty user data.
    pub fn forget_nodeclass(&self, nodeclass: &str) {
        self.userdata_bytes.remove(&by_nodeclass(nodeclass));
    }

    /// The Prometheus text exposition (version 0.0.4) of every series.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_text::encode(&mut out, &self.registry);
        out
    }
}
