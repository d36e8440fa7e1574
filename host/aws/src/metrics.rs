//! The provider's Prometheus series (prometheus-client), rendered by the controller's
//! `/metrics` beside its own (names as Karpenter's where the meaning is the same).

use crate::sdk_metrics::SdkMetrics;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use tenon_core::cloud::CloudError;

/// Gauge: bytes of the user data last rendered into a NodeClass' launch template (EC2 refuses
/// more than 16 KiB), by NodeClass.
pub const USERDATA_BYTES: &str = "karpenter_ec2nodeclasses_userdata_bytes";

type ByNodeClass = Vec<(&'static str, String)>;
type Labels = Vec<(&'static str, String)>;

/// Prometheus' default buckets, which Karpenter's cloud provider histogram keeps.
const CALL_BUCKETS: [f64; 11] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

fn call_histogram() -> Histogram {
    Histogram::new(CALL_BUCKETS)
}

/// The `controller`, `method` and `provider` labels of a cloud provider call. Which control
/// loop step made the call is not known here: `controller` is empty.
fn call(method: &str) -> Labels {
    vec![("controller", String::new()), ("method", method.to_string()), ("provider", "aws".to_string())]
}

/// Karpenter's `error` label: the well-known error kinds by name, others empty.
fn error_kind(e: &CloudError) -> &'static str {
    match e {
        CloudError::NotFound(_) => "NodeClaimNotFoundError",
        CloudError::InsufficientCapacity { .. } => "InsufficientCapacityError",
        CloudError::NodeClassNotReady { .. } => "NodeClassNotReadyError",
        _ => "",
    }
}

fn by_nodeclass(nodeclass: &str) -> ByNodeClass {
    vec![("nodeclass", nodeclass.to_string())]
}

#[derive(Debug)]
pub struct Metrics {
    userdata_bytes: Family<ByNodeClass, Gauge<f64, AtomicU64>>,
    call_duration: Family<Labels, Histogram, fn() -> Histogram>,
    call_errors: Family<Labels, Counter>,
    launch_failures: Family<Labels, Counter>,
    termination_failures: Family<Labels, Counter>,
    /// Each zone's id, as the subnets resolved so far name them (an account's zone names map
    /// to ids of its own).
    zone_ids: Mutex<BTreeMap<String, String>>,
    registry: Registry,
    names: Vec<&'static str>,
}

/// A registry that remembers the names registered in it (an empty family is not rendered,
/// so the text alone cannot say which families exist).
#[derive(Default)]
pub struct Named {
    registry: Registry,
    names: Vec<&'static str>,
}

impl Named {
    pub fn register(&mut self, name: &'static str, help: &str, metric: impl prometheus_client::registry::Metric) {
        self.names.push(name);
        self.registry.register(name, help, metric);
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new(&SdkMetrics::default())
    }
}

impl Metrics {
    /// The provider's series, the SDK clients' (`sdk`) among them.
    pub fn new(sdk: &SdkMetrics) -> Self {
        let userdata_bytes = Family::default();
        let mut registry = Named::default();
        registry.register(
            USERDATA_BYTES,
            "Bytes of the user data last rendered for an EC2NodeClass (EC2 refuses more than 16 KiB), by NodeClass",
            userdata_bytes.clone(),
        );
        let call_duration = Family::new_with_constructor(call_histogram as fn() -> Histogram);
        let call_errors = Family::default();
        registry.register(
            "karpenter_cloudprovider_duration_seconds",
            "Seconds cloud provider calls took, by controller, method and provider",
            call_duration.clone(),
        );
        registry.register(
            "karpenter_cloudprovider_errors",
            "Cloud provider calls that returned an error, by controller, method, provider and error",
            call_errors.clone(),
        );
        let launch_failures = Family::default();
        let termination_failures = Family::default();
        registry.register(
            "karpenter_cloudprovider_instance_launch_failures",
            "Offerings CreateFleet failed to launch, by zone, zone ID, capacity type and Karpenter's reason for the error",
            launch_failures.clone(),
        );
        registry.register(
            "karpenter_cloudprovider_instance_termination_failures",
            "Instances TerminateInstances failed to terminate, by zone and zone ID",
            termination_failures.clone(),
        );
        sdk.register(&mut registry);
        let Named { registry, names } = registry;
        Metrics {
            userdata_bytes,
            call_duration,
            call_errors,
            launch_failures,
            termination_failures,
            zone_ids: Mutex::default(),
            registry,
            names,
        }
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

    /// Records one cloud provider call (Karpenter's method name: `Create`, `Delete`, `Get`,
    /// `List`, `GetInstanceTypes`) and its error, if any.
    pub fn provider_call(&self, method: &str, seconds: f64, error: Option<&CloudError>) {
        self.call_duration.get_or_create(&call(method)).observe(seconds);
        if let Some(e) = error {
            let mut labels = call(method);
            labels.push(("error", error_kind(e).to_string()));
            self.call_errors.get_or_create(&labels).inc();
        }
    }

    /// Learns zone ids from resolved subnets.
    pub fn learn_zone_ids<'a>(&self, subnets: impl IntoIterator<Item = (&'a str, Option<&'a str>)>) {
        if let Ok(mut ids) = self.zone_ids.lock() {
            for (zone, id) in subnets {
                if let Some(id) = id {
                    ids.insert(zone.to_string(), id.to_string());
                }
            }
        }
    }

    fn zone_labels(&self, zone: &str) -> Labels {
        let id = self.zone_ids.lock().ok().and_then(|ids| ids.get(zone).cloned()).unwrap_or_default();
        vec![("zone", zone.to_string()), ("zone_id", id)]
    }

    /// Counts one offering CreateFleet failed to launch, with Karpenter's reason for its error.
    pub fn launch_failure(&self, zone: &str, capacity_type: &str, reason: &str) {
        let mut labels = self.zone_labels(zone);
        labels.extend([("capacity_type", capacity_type.to_string()), ("reason", reason.to_string())]);
        self.launch_failures.get_or_create(&labels).inc();
    }

    /// Counts one instance TerminateInstances failed to terminate.
    pub fn termination_failure(&self, zone: &str) {
        self.termination_failures.get_or_create(&self.zone_labels(zone)).inc();
    }

    /// Every family's name as registered (a counter's without `_total`).
    pub fn names(&self) -> &[&'static str] {
        &self.names
    }

    /// The Prometheus text exposition (version 0.0.4) of every series.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        prometheus_text::encode(&mut out, &self.registry).map_or_else(|_| String::new(), |()| out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_calls_are_timed_and_their_errors_counted_by_kind() {
        let m = Metrics::default();
        m.provider_call("Create", 0.3, None);
        m.provider_call("Get", 0.02, Some(&CloudError::NotFound("i-1".into())));
        m.provider_call("Create", 0.4, Some(&CloudError::InvalidRequest("x".into())));
        let text = m.render();
        for line in [
            "# TYPE karpenter_cloudprovider_duration_seconds histogram",
            "karpenter_cloudprovider_duration_seconds_count{controller=\"\",method=\"Create\",provider=\"aws\"} 2",
            "# TYPE karpenter_cloudprovider_errors_total counter",
            "karpenter_cloudprovider_errors_total{controller=\"\",method=\"Get\",provider=\"aws\",error=\"NodeClaimNotFoundError\"} 1",
            "karpenter_cloudprovider_errors_total{controller=\"\",method=\"Create\",provider=\"aws\",error=\"\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} missing from\n{text}");
        }
    }

    #[test]
    fn launch_and_termination_failures_carry_the_zone_and_its_id() {
        let m = Metrics::default();
        m.learn_zone_ids([("us-west-2a", Some("usw2-az1")), ("us-west-2b", None)]);
        m.launch_failure("us-west-2a", "spot", "LaunchFailed");
        m.launch_failure("us-west-2a", "spot", "LaunchFailed");
        m.termination_failure("us-west-2b");
        let text = m.render();
        for line in [
            "# TYPE karpenter_cloudprovider_instance_launch_failures_total counter",
            "karpenter_cloudprovider_instance_launch_failures_total{zone=\"us-west-2a\",zone_id=\"usw2-az1\",capacity_type=\"spot\",reason=\"LaunchFailed\"} 2",
            "karpenter_cloudprovider_instance_termination_failures_total{zone=\"us-west-2b\",zone_id=\"\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} missing from\n{text}");
        }
    }
}
