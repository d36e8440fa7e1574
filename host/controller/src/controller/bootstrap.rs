//! Start-up: the feature gates, how nodes join the cluster, the cluster's DNS address, this
//! replica's identity and logging.

use super::settings::Settings;
use kube::Client;
use std::collections::BTreeMap;
use tenon_aws::ClusterInfo;

/// How nodes join the cluster: the settings, what eks:DescribeCluster adds, what the
/// controller's own client knows; each guess logged.
pub async fn join_info(
    settings: &Settings,
    clients: &tenon_aws::Clients,
    own: tenon_aws::cluster::Known,
) -> ClusterInfo {
    use tenon_aws::cluster;
    let given = cluster::Known {
        endpoint: settings.cluster_endpoint.clone().filter(|s| !s.is_empty()),
        ca_bundle: settings.cluster_ca_bundle.clone().filter(|s| !s.is_empty()),
        service_cidr: settings.service_cidr.clone().filter(|s| !s.is_empty()),
    };
    let described = if cluster::needs_describe(&given) {
        Some(cluster::describe(clients, &settings.cluster_name).await)
    } else {
        None
    };
    let (info, warnings) = cluster::resolve(&settings.cluster_name, given, described, own);
    for w in warnings {
        tracing::warn!("{w}");
    }
    tracing::info!(endpoint = %info.endpoint, service_cidr = %info.service_cidr, "nodes join the cluster here");
    info
}
/// The feature gates Tenon implements.
const GATES: [&str; 2] = ["ReservedCapacity", "SpotToSpotConsolidation"];

/// Karpenter's `FEATURE_GATES` (`Name=true,Other=false`, spaces allowed around names and
/// values, booleans as Go's `strconv.ParseBool` reads them; a malformed value is an error, as
/// in Karpenter). `ReservedCapacity` shapes launches and `SpotToSpotConsolidation`
/// consolidation; any other gate set true (`NodeRepair`, `NodeOverlay`, `StaticCapacity`,
/// `CapacityBuffer`) is refused, since Tenon does not do what it turns on.
pub fn feature_gates(gates: &str) -> anyhow::Result<BTreeMap<String, bool>> {
    let mut set = BTreeMap::new();
    for gate in gates.split(',').map(str::trim).filter(|g| !g.is_empty()) {
        let parsed = gate.split_once('=').map(|(n, v)| (n.trim(), v.trim())).and_then(|(name, value)| {
            let value = match value {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
                "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
                _ => return None,
            };
            (!name.is_empty()).then_some((name, value))
        });
        let Some((name, value)) = parsed else {
            anyhow::bail!(
                "--feature-gates / FEATURE_GATES: {gate:?} is not NAME=true|false (e.g. SpotToSpotConsolidation=true)"
            );
        };
        if !GATES.contains(&name) && value {
            anyhow::bail!(
                "--feature-gates / FEATURE_GATES: {name}=true is not supported by Tenon (supported: {}); remove it or set it to false",
                GATES.join(", ")
            );
        }
        tracing::info!(gate = name, enabled = value, "feature gate");
        set.insert(name.to_string(), value);
    }
    Ok(set)
}

/// The cluster's DNS address (`kube-system/kube-dns`'s ClusterIP): the kubelet's clusterDNS
/// where the NodeClass sets none, as Karpenter reads it.
pub async fn cluster_dns(client: &Client) -> Option<std::net::IpAddr> {
    let services: kube::Api<k8s_openapi::api::core::v1::Service> = kube::Api::namespaced(client.clone(), "kube-system");
    match services.get_opt("kube-dns").await {
        Ok(Some(s)) => s.spec.and_then(|s| s.cluster_ip).and_then(|ip| ip.parse().ok()),
        Ok(None) => {
            tracing::warn!("no kube-system/kube-dns Service: nodes' clusterDNS comes from nodeadm's defaults");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not read kube-system/kube-dns; nodes' clusterDNS comes from nodeadm's defaults");
            None
        }
    }
}

/// This replica's name in the Lease: the pod name where there is one, made unique.
pub fn identity() -> String {
    let host = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "tenon".into());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{host}_{}_{nanos:08x}", std::process::id())
}

pub fn init_logging(s: &Settings) {
    let filter = tracing_subscriber::EnvFilter::try_new(&s.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if s.log_format == "json" {
        let _ = builder.json().try_init();
    } else {
        let _ = builder.try_init();
    }
}

#[cfg(test)]
mod gate_tests {
    use super::feature_gates;

    #[test]
    fn gates_tenon_implements_are_read_others_refused_when_on() {
        let g = feature_gates("ReservedCapacity=false, SpotToSpotConsolidation=true,NodeRepair=false").unwrap();
        assert_eq!(g.get("SpotToSpotConsolidation"), Some(&true));
        assert_eq!(g.get("ReservedCapacity"), Some(&false));
        let e = feature_gates("NodeRepair=true").unwrap_err().to_string();
        assert!(e.contains("NodeRepair=true is not supported"), "{e}");
        assert!(feature_gates("SpotToSpotConsolidation").is_err(), "no value");
        assert!(feature_gates("SpotToSpotConsolidation=yes").is_err(), "not a Go boolean");
        // Go's strconv.ParseBool forms, and spaces around the parts, as Karpenter reads them.
        let g = feature_gates("SpotToSpotConsolidation = True, ReservedCapacity=0,NodeRepair=F").unwrap();
        assert_eq!((g["SpotToSpotConsolidation"], g["ReservedCapacity"], g["NodeRepair"]), (true, false, false));
        assert!(feature_gates("CapacityBuffer=1").is_err(), "refused in any spelling");
        assert!(feature_gates("").unwrap().is_empty());
    }
}
