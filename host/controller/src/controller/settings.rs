//! `tenon controller` settings: flags, each also read from the environment variable
//! Karpenter uses for the same setting (so a Karpenter Helm values file maps over).

use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use tenon_api::scheduler_config::SchedulerConfig;

#[derive(Args, Clone, Debug)]
pub struct Settings {
    /// The EKS cluster's name (tags, instance profiles, user data).
    #[arg(long, env = "CLUSTER_NAME")]
    pub cluster_name: String,
    /// The API server endpoint nodes join (user data). Default: eks:DescribeCluster's, else
    /// the kube client's server.
    #[arg(long, env = "CLUSTER_ENDPOINT")]
    pub cluster_endpoint: Option<String>,
    /// Base64 PEM of the cluster CA, for user data. Default: eks:DescribeCluster's, else the
    /// kube client's CA.
    #[arg(long, env = "CLUSTER_CA_BUNDLE")]
    pub cluster_ca_bundle: Option<String>,
    /// The cluster's Service CIDR (nodeadm derives cluster DNS from it). Default:
    /// eks:DescribeCluster's.
    #[arg(long, env = "SERVICE_CIDR")]
    pub service_cidr: Option<String>,
    /// SQS queue (name or URL) of interruption events; none disables interruption handling.
    #[arg(long, env = "INTERRUPTION_QUEUE")]
    pub interruption_queue: Option<String>,
    /// The longest a provisioning batch waits for more pods.
    #[arg(long, env = "BATCH_MAX_DURATION", default_value = "10s", value_parser = duration)]
    pub batch_max_duration: Duration,
    /// A batch closes after this long without a new pending pod.
    #[arg(long, env = "BATCH_IDLE_DURATION", default_value = "1s", value_parser = duration)]
    pub batch_idle_duration: Duration,
    /// Karpenter-style feature gates (`Name=true,Other=false`); accepted and logged.
    #[arg(long, env = "FEATURE_GATES", default_value = "")]
    pub feature_gates: String,
    #[arg(long, env = "KUBE_CLIENT_QPS", default_value_t = 200)]
    pub kube_client_qps: u32,
    #[arg(long, env = "KUBE_CLIENT_BURST", default_value_t = 300)]
    pub kube_client_burst: u32,
    /// Port of `/metrics` (Prometheus).
    #[arg(long, env = "METRICS_PORT", default_value_t = 8080)]
    pub metrics_port: u16,
    /// Port of `/healthz` and `/readyz`.
    #[arg(long, env = "HEALTH_PROBE_PORT", default_value_t = 8081)]
    pub health_probe_port: u16,
    /// Address the probe and metrics servers listen on.
    #[arg(long, env = "PROBE_BIND_ADDRESS", default_value = "0.0.0.0")]
    pub probe_bind_address: String,
    /// Run without the Lease (one replica only).
    #[arg(long, env = "DISABLE_LEADER_ELECTION", default_value_t = false)]
    pub disable_leader_election: bool,
    /// Name of the leader-election Lease (Karpenter's setting; Tenon's default differs, so
    /// the two never share a Lease by accident).
    #[arg(long, env = "LEADER_ELECTION_NAME", default_value = "tenon-leader-election", value_parser = lease_name)]
    pub leader_election_name: String,
    /// Another provisioner's leader-election Lease, `NAMESPACE/NAME`: while it is held and
    /// renewed, Tenon launches, disrupts and terminates nothing, so Karpenter and Tenon never
    /// both act on the same NodeClaims. Empty: not watched (the cut-over's override).
    #[arg(long, env = "TENON_KARPENTER_LEASE", default_value = "kube-system/karpenter-leader-election", value_parser = other_lease)]
    pub karpenter_lease: OtherLease,
    /// Namespace of the leader-election Lease. Default: the pod's own namespace.
    #[arg(long, env = "SYSTEM_NAMESPACE")]
    pub system_namespace: Option<String>,
    /// error, warn, info, debug or trace.
    #[arg(long, env = "LOG_LEVEL", default_value = "info")]
    pub log_level: String,
    /// json or text.
    #[arg(long, env = "LOG_FORMAT", default_value = "json")]
    pub log_format: String,
    /// The policy store (`.wasm` files named by NodePools' policy annotations).
    #[arg(long, env = "TENON_POLICY_DIR")]
    pub policy_dir: Option<PathBuf>,
    /// Wall-clock time a policy call may take before its decision falls back to the
    /// built-in one (milliseconds, 1–10000).
    #[arg(long, env = "TENON_POLICY_DEADLINE_MS", default_value_t = tenon_policy::Limits::default().deadline_ms,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub policy_deadline_ms: u64,
    /// Where policies pulled for `oci://` references are kept, by digest (default:
    /// `$XDG_CACHE_HOME/tenon/oci`, else `$HOME/.cache/tenon/oci`).
    #[arg(long, env = "TENON_POLICY_OCI_CACHE")]
    pub policy_oci_cache: Option<PathBuf>,
    /// Accept `oci://REGISTRY/REPOSITORY:TAG` without a digest. A tag is resolved to a
    /// digest when first pulled by this process; pinned digests are the safe default.
    #[arg(long, env = "TENON_POLICY_ALLOW_TAGS")]
    pub policy_allow_tags: bool,
    /// The trust policy's OCI sources: `REGISTRY` or `REGISTRY/PATH` (that repository and
    /// those under it), comma-separated. None (the default): no `oci://` policy is pulled.
    #[arg(long, env = "TENON_POLICY_OCI_SOURCES", value_delimiter = ',', value_parser = oci_source_rule)]
    pub policy_oci_sources: Vec<tenon_api::policy_trust::OciSourceRule>,
    /// The store's policies NodePools may name (comma-separated); default: all of them.
    #[arg(long, env = "TENON_POLICY_LOCAL_POLICIES", value_delimiter = ',')]
    pub policy_local_policies: Option<Vec<String>>,
    /// Cosign public keys (`cosign.pub` files, or directories of `*.pub`), comma-separated:
    /// when given, every `oci://` policy must carry a signature by one of them.
    #[arg(long, env = "TENON_POLICY_SIGNATURE_KEYS", value_delimiter = ',')]
    pub policy_signature_keys: Vec<PathBuf>,
    /// Registry credentials as a Docker `config.json` (a `kubernetes.io/dockerconfigjson`
    /// Secret's `.dockerconfigjson`); each is offered only to the registry it is filed under.
    #[arg(long, env = "TENON_POLICY_OCI_REGISTRY_CONFIG")]
    pub policy_oci_registry_config: Option<PathBuf>,
    /// Hosts (`host[:port]`) allowed registries may redirect to (blob storage) or name as
    /// their token service, comma-separated. Default: none, only the registry itself.
    #[arg(long, env = "TENON_POLICY_OCI_EXTRA_HOSTS", value_delimiter = ',')]
    pub policy_oci_extra_hosts: Vec<String>,
    /// PEM certificates trusted for registries besides the system's roots.
    #[arg(long, env = "TENON_POLICY_OCI_CA_BUNDLE")]
    pub policy_oci_ca_bundle: Option<PathBuf>,
    /// The longest one pull (manifest, component and signatures) may take.
    #[arg(long, env = "TENON_POLICY_OCI_PULL_TIMEOUT", default_value = "2m", value_parser = duration)]
    pub policy_oci_pull_timeout: Duration,
    /// Pulls at once; more wait their turn.
    #[arg(long, env = "TENON_POLICY_OCI_MAX_PULLS", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub policy_oci_max_pulls: u32,
    /// Registries (`host[:port]`, comma-separated) spoken to over plain HTTP; loopback
    /// registries always are.
    #[arg(long, env = "TENON_POLICY_INSECURE_REGISTRIES", value_delimiter = ',')]
    pub policy_insecure_registries: Vec<String>,
    /// Default: the SDK's chain (`AWS_DEFAULT_REGION`, the shared config profile, then the
    /// instance metadata service), as Karpenter's.
    #[arg(long, env = "AWS_REGION")]
    pub aws_region: Option<String>,
    /// Send every AWS call here (an emulator in tests).
    #[arg(long, env = "AWS_ENDPOINT_URL")]
    pub aws_endpoint_url: Option<String>,
    /// Kubernetes `MAJOR.MINOR` for AMI aliases. Default: the API server's version.
    #[arg(long, env = "KUBERNETES_VERSION")]
    pub kubernetes_version: Option<String>,
    /// Memory the hypervisor keeps, as a fraction of an instance type's memory (Karpenter's
    /// setting of the same name).
    #[arg(long, env = "VM_MEMORY_OVERHEAD_PERCENT", default_value_t = tenon_core::catalog::DEFAULT_VM_MEMORY_OVERHEAD, value_parser = fraction)]
    pub vm_memory_overhead_percent: f64,
    /// ENIs the VPC CNI keeps for itself: fewer pods per node (Karpenter's `RESERVED_ENIS`).
    #[arg(long, env = "RESERVED_ENIS", default_value_t = 0, value_parser = clap::value_parser!(i64).range(0..))]
    pub reserved_enis: i64,
    /// `Respect` pods' scheduling preferences while provisioning, or `Ignore` them (preferred
    /// affinities and ScheduleAnyway spreads), as Karpenter's setting of the same name.
    #[arg(long, env = "PREFERENCE_POLICY", default_value = "Respect", value_parser = ["Respect", "Ignore"])]
    pub preference_policy: String,
    /// `Strict`: a NodeClaim whose options cannot meet a NodePool's minValues is not created;
    /// `BestEffort`: it is, with those minValues lowered to what its options offer and
    /// `karpenter.sh/nodeclaim-min-values-relaxed: "true"` (Karpenter's setting).
    #[arg(long, env = "MIN_VALUES_POLICY", default_value = "Strict", value_parser = ["Strict", "BestEffort"])]
    pub min_values_policy: String,
    /// The cluster's kube-scheduler settings Karpenter mirrors (YAML or JSON): today
    /// `podTopologySpread.defaultConstraints`, applied to pods without spread constraints.
    #[arg(long, env = "SCHEDULER_CONFIG", default_value = "", value_parser = scheduler_config)]
    pub scheduler_config: SchedulerConfig,
}

/// A setting's value that cannot be read; clap names the setting, this says what is wrong
/// and how to write it.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadValue(String);

/// A Lease another provisioner leads with (`None`: none watched).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtherLease(pub Option<LeaseRef>);

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRef {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for LeaseRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A DNS-1123 subdomain (a Lease's name, a namespace's is stricter still).
fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|p| {
            !p.is_empty()
                && p.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !p.starts_with('-')
                && !p.ends_with('-')
        })
}

fn lease_name(s: &str) -> Result<String, BadValue> {
    if is_dns_subdomain(s) {
        Ok(s.to_string())
    } else {
        Err(BadValue(format!(
            "{s:?}: write a Lease name (lowercase letters, digits, '-' and '.'), e.g. tenon-leader-election"
        )))
    }
}

fn other_lease(s: &str) -> Result<OtherLease, BadValue> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(OtherLease(None));
    }
    match s.split_once('/') {
        Some((ns, name)) if is_dns_subdomain(ns) && !ns.contains('.') && is_dns_subdomain(name) => {
            Ok(OtherLease(Some(LeaseRef { namespace: ns.into(), name: name.into() })))
        }
        _ => Err(BadValue(format!(
            "{s:?}: write NAMESPACE/NAME of the other provisioner's Lease (e.g. kube-system/karpenter-leader-election), or nothing to watch none"
        ))),
    }
}

fn oci_source_rule(s: &str) -> Result<tenon_api::policy_trust::OciSourceRule, BadValue> {
    s.parse().map_err(BadValue)
}

fn scheduler_config(s: &str) -> Result<SchedulerConfig, BadValue> {
    SchedulerConfig::parse(s).map_err(|e| BadValue(e.to_string()))
}

/// A fraction in [0, 1).
fn fraction(s: &str) -> Result<f64, BadValue> {
    match s.trim().parse::<f64>() {
        Ok(v) if (0.0..1.0).contains(&v) => Ok(v),
        _ => Err(BadValue(format!("{s:?}: write a fraction from 0 up to 1, e.g. 0.075"))),
    }
}

/// `10s`, `1m30s`, `500ms`.
pub fn duration(s: &str) -> Result<Duration, BadValue> {
    if let Some(ms) = s.strip_suffix("ms") {
        return ms.parse::<u64>().map(Duration::from_millis).map_err(|e| BadValue(format!("{s:?}: {e}")));
    }
    tenon_api::duration::parse_duration(s).map_err(|e| BadValue(format!("{s:?}: {e} (use e.g. 10s, 1m, 500ms)")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_other_provisioners_lease_is_namespace_slash_name_or_nothing() {
        let lease = other_lease("kube-system/karpenter-leader-election").unwrap().0.unwrap();
        assert_eq!((lease.namespace.as_str(), lease.name.as_str()), ("kube-system", "karpenter-leader-election"));
        assert_eq!(other_lease("").unwrap(), OtherLease(None));
        for bad in ["karpenter-leader-election", "kube-system/", "/x", "Kube-System/x", "a.b/x", "ns/x/y"] {
            let e = other_lease(bad).unwrap_err().to_string();
            assert!(e.contains("NAMESPACE/NAME"), "{bad}: {e}");
        }
        assert!(lease_name("Tenon").is_err());
    }
}
