//! The cluster as its nodes join it: API server endpoint, CA bundle and Service CIDR (which
//! nodeadm derives the cluster DNS address from). The controller's settings win; what they
//! leave out comes from `eks:DescribeCluster`, then from what the controller itself knows (its
//! own API server URL and CA), as Karpenter resolves them.

use crate::clients::Clients;
use crate::error::api;
use crate::userdata::ClusterInfo;
use base64::Engine;
use tenon_core::cloud::CloudError;

/// The Service CIDR EKS picks when the VPC does not overlap it: used only when neither the
/// settings nor EKS say, with a warning (a wrong one breaks the nodes' cluster DNS).
pub const FALLBACK_SERVICE_CIDR: &str = "10.100.0.0/16";

/// What the cluster's settings, EKS, or the controller may know.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Known {
    pub endpoint: Option<String>,
    /// Base64 of the PEM bundle.
    pub ca_bundle: Option<String>,
    pub service_cidr: Option<String>,
}

impl Known {
    fn complete(&self) -> bool {
        self.endpoint.is_some() && self.ca_bundle.is_some() && self.service_cidr.is_some()
    }
}

/// What `eks:DescribeCluster` says of cluster `name`.
pub async fn describe(clients: &Clients, name: &str) -> Result<Known, CloudError> {
    let out = clients.eks.describe_cluster().name(name).send().await.map_err(|e| api("DescribeCluster", e))?;
    let Some(c) = out.cluster else { return Ok(Known::default()) };
    let net = c.kubernetes_network_config.as_ref();
    Ok(Known {
        endpoint: c.endpoint.filter(|e| !e.is_empty()),
        ca_bundle: c.certificate_authority.and_then(|a| a.data).filter(|d| !d.is_empty()),
        service_cidr: net
            .and_then(|n| n.service_ipv4_cidr.clone().or_else(|| n.service_ipv6_cidr.clone()))
            .filter(|c| !c.is_empty()),
    })
}

/// Base64 of the PEM bundle of DER certificates `ders` (how a kube client holds its CA).
pub fn pem_bundle(ders: &[Vec<u8>]) -> Option<String> {
    if ders.is_empty() {
        return None;
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    let mut pem = String::new();
    for der in ders {
        pem.push_str("-----BEGIN CERTIFICATE-----\n");
        let body = b64.encode(der);
        for line in body.as_bytes().chunks(64) {
            pem.push_str(std::str::from_utf8(line).unwrap_or_default());
            pem.push('\n');
        }
        pem.push_str("-----END CERTIFICATE-----\n");
    }
    Some(b64.encode(pem))
}

/// Cluster `name` as nodes join it: `given` by the settings, else `described` by EKS (asked
/// only when the settings leave something out), else the controller's `own` endpoint and CA.
/// Also what was left to a guess, for the operator to see.
pub fn resolve(
    name: &str,
    given: Known,
    described: Option<Result<Known, CloudError>>,
    own: Known,
) -> (ClusterInfo, Vec<String>) {
    let mut warnings = Vec::new();
    let eks = match described {
        Some(Ok(k)) => k,
        Some(Err(e)) => {
            warnings.push(format!(
                "eks:DescribeCluster for {name} failed ({e}); set CLUSTER_ENDPOINT, CLUSTER_CA_BUNDLE and SERVICE_CIDR, or allow the call"
            ));
            Known::default()
        }
        None => Known::default(),
    };
    let endpoint = given.endpoint.or(eks.endpoint).or(own.endpoint).unwrap_or_default();
    let ca_bundle = given.ca_bundle.or(eks.ca_bundle).or(own.ca_bundle).unwrap_or_default();
    if ca_bundle.is_empty() {
        warnings.push("no cluster CA bundle known: nodes cannot verify the API server (set CLUSTER_CA_BUNDLE)".into());
    }
    let service_cidr = given.service_cidr.or(eks.service_cidr).unwrap_or_else(|| {
        warnings.push(format!(
            "the cluster's Service CIDR is unknown: assuming {FALLBACK_SERVICE_CIDR} (set SERVICE_CIDR if it is not, or nodes' cluster DNS is wrong)"
        ));
        FALLBACK_SERVICE_CIDR.into()
    });
    (ClusterInfo { name: name.into(), endpoint, ca_bundle, service_cidr }, warnings)
}

/// Whether the settings leave anything for EKS to say.
pub fn needs_describe(given: &Known) -> bool {
    !given.complete()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(e: &str, ca: &str, cidr: &str) -> Known {
        let some = |s: &str| (!s.is_empty()).then(|| s.to_string());
        Known { endpoint: some(e), ca_bundle: some(ca), service_cidr: some(cidr) }
    }

    #[test]
    fn settings_win_then_eks_then_the_controllers_own() {
        let eks = known("https://eks.example", "RUtT", "172.20.0.0/16");
        let own = known("https://10.100.0.1:443", "T1dO", "");
        let (c, w) = resolve("lab", known("", "", ""), Some(Ok(eks.clone())), own.clone());
        assert_eq!(
            (c.endpoint.as_str(), c.ca_bundle.as_str(), c.service_cidr.as_str()),
            ("https://eks.example", "RUtT", "172.20.0.0/16")
        );
        assert!(w.is_empty(), "{w:?}");
        let (c, _) = resolve("lab", known("https://given", "", "10.0.0.0/16"), Some(Ok(eks)), own.clone());
        assert_eq!(
            (c.endpoint.as_str(), c.ca_bundle.as_str(), c.service_cidr.as_str()),
            ("https://given", "RUtT", "10.0.0.0/16")
        );
        assert!(!needs_describe(&known("a", "b", "c")) && needs_describe(&known("a", "", "c")));
    }

    #[test]
    fn without_eks_the_controllers_own_endpoint_and_ca_and_a_loud_guess_at_the_cidr() {
        let denied = CloudError::Api { operation: "DescribeCluster".into(), message: "AccessDeniedException".into() };
        let own = known("https://10.100.0.1:443", "T1dO", "");
        let (c, w) = resolve("lab", Known::default(), Some(Err(denied)), own);
        assert_eq!((c.endpoint.as_str(), c.ca_bundle.as_str()), ("https://10.100.0.1:443", "T1dO"));
        assert_eq!(c.service_cidr, FALLBACK_SERVICE_CIDR);
        assert!(w.iter().any(|m| m.contains("DescribeCluster") && m.contains("AccessDenied")), "{w:?}");
        assert!(w.iter().any(|m| m.contains("SERVICE_CIDR")), "{w:?}");
    }

    #[test]
    fn a_der_bundle_becomes_base64_pem() {
        let b64 = base64::engine::general_purpose::STANDARD;
        let pem = String::from_utf8(b64.decode(pem_bundle(&[vec![1, 2, 3]]).unwrap()).unwrap()).unwrap();
        assert_eq!(pem, "-----BEGIN CERTIFICATE-----\nAQID\n-----END CERTIFICATE-----\n");
        assert_eq!(pem_bundle(&[]), None);
    }
}
