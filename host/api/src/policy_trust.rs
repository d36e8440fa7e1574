//! The cluster admin's trust policy: which policy references a NodePool may name and so make
//! the controller run. A NodePool can be edited by teams the admin delegates to; the code
//! the controller compiles must still come only from sources the admin chose. The default
//! trusts the local policy store (the chart's bundle and ConfigMap) and no registry.

use crate::policy::{OciSource, PolicyRef};
use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;
use thiserror::Error;

/// `REGISTRY` or `REGISTRY/PATH`: a registry's every repository, or the repository `PATH`
/// and those under it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OciSourceRule {
    pub registry: String,
    pub path: Option<String>,
}

impl FromStr for OciSourceRule {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let rule = s.trim().trim_start_matches("oci://").trim_end_matches('/');
        let (registry, path) = match rule.split_once('/') {
            Some((r, p)) => (r, Some(p)),
            None => (rule, None),
        };
        let registry_ok = !registry.is_empty()
            && registry.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
        let path_ok = path.is_none_or(|p| {
            p.split('/').all(|c| {
                !c.is_empty()
                    && c.bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-'))
            })
        });
        if !registry_ok || !path_ok {
            return Err(format!(
                "{s:?}: write an allowed OCI source as REGISTRY (every repository there) or REGISTRY/PATH (that repository and those under it), e.g. ghcr.io/acme/policies"
            ));
        }
        Ok(OciSourceRule { registry: registry.to_string(), path: path.map(str::to_string) })
    }
}

impl fmt::Display for OciSourceRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(p) => write!(f, "{}/{p}", self.registry),
            None => f.write_str(&self.registry),
        }
    }
}

impl OciSourceRule {
    /// Whether `src` is this registry's and, with a path, that repository or one under it
    /// (`acme/p` covers `acme/p/scorer`, never `acme/policies`).
    pub fn covers(&self, src: &OciSource) -> bool {
        src.registry == self.registry
            && self.path.as_deref().is_none_or(|p| {
                src.repository == p || src.repository.strip_prefix(p).is_some_and(|rest| rest.starts_with('/'))
            })
    }
}

/// Which references NodePools may name. [`TrustPolicy::default`] is the safe default: the
/// local store only, no registry, no tags.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustPolicy {
    /// Registries and repositories `oci://` references may come from; none turns OCI off.
    pub oci_sources: Vec<OciSourceRule>,
    /// Whether `oci://…:TAG` without a digest is accepted (resolved once, when first pulled).
    pub allow_tags: bool,
    /// The store's policy names NodePools may use; `None`: every policy in the store.
    pub local_policies: Option<BTreeSet<String>>,
    /// Fingerprints of the keys (see `tenon_oci::cosign`) one of which must have signed an
    /// `oci://` policy; none: no signature required.
    pub signers: Vec<String>,
}

/// Why the trust policy refuses a reference. Each names the setting that decides it, so
/// a NodePool's condition tells its owner whom to ask and what to change.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum Untrusted {
    #[error(
        "{reference}: OCI policies are off: the trust policy names no allowed sources (chart value policies.trust.ociSources, setting TENON_POLICY_OCI_SOURCES); nothing was pulled"
    )]
    OciOff { reference: String },
    #[error(
        "{reference}: not an allowed source: the trust policy (policies.trust.ociSources) allows only {allowed}; nothing was pulled"
    )]
    Source { reference: String, allowed: String },
    #[error(
        "{reference}: a tag without a digest, and the trust policy refuses tags (policies.trust.allowTags): pin the digest `tenon policy push` printed"
    )]
    Tag { reference: String },
    #[error(
        "policy {name:?} is not one the trust policy allows from the store (policies.trust.localPolicies: {allowed})"
    )]
    Local { name: String, allowed: String },
}

impl TrustPolicy {
    /// Whether a NodePool may name `r`; checked before anything is pulled or compiled.
    pub fn admit(&self, r: &PolicyRef) -> Result<(), Untrusted> {
        let Some(src) = &r.oci else {
            return match &self.local_policies {
                Some(allowed) if !allowed.contains(&r.name) => Err(Untrusted::Local {
                    name: r.name.clone(),
                    allowed: allowed.iter().cloned().collect::<Vec<_>>().join(", "),
                }),
                _ => Ok(()),
            };
        };
        let reference = src.to_string();
        if self.oci_sources.is_empty() {
            return Err(Untrusted::OciOff { reference });
        }
        if !self.oci_sources.iter().any(|rule| rule.covers(src)) {
            let allowed = self.oci_sources.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
            return Err(Untrusted::Source { reference, allowed });
        }
        if src.digest.is_none() && !self.allow_tags {
            return Err(Untrusted::Tag { reference });
        }
        Ok(())
    }

    /// Whether `oci://` policies must carry a signature by one of [`TrustPolicy::signers`].
    pub fn requires_signatures(&self) -> bool {
        !self.signers.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(s: &str) -> PolicyRef {
        PolicyRef::parse(s).unwrap()
    }

    fn pin(s: &str) -> String {
        format!("{s}@sha256:{}", "a".repeat(64))
    }

    #[test]
    fn the_default_trusts_the_store_and_no_registry() {
        let trust = TrustPolicy::default();
        assert_eq!(trust.admit(&r("default-scoring")), Ok(()));
        let e = trust.admit(&r(&pin("oci://ghcr.io/acme/scorer"))).unwrap_err();
        assert!(matches!(e, Untrusted::OciOff { .. }), "{e}");
        assert!(e.to_string().contains("policies.trust.ociSources"), "{e}");
    }

    #[test]
    fn a_source_rule_covers_its_repository_and_those_under_it_only() {
        let trust = TrustPolicy {
            oci_sources: vec!["ghcr.io/acme/p".parse().unwrap(), "registry.internal:5000".parse().unwrap()],
            ..TrustPolicy::default()
        };
        for ok in ["oci://ghcr.io/acme/p", "oci://ghcr.io/acme/p/scorer", "oci://registry.internal:5000/any/thing"] {
            assert_eq!(trust.admit(&r(&pin(ok))), Ok(()), "{ok}");
        }
        for refused in
            ["oci://ghcr.io/acme/policies", "oci://ghcr.io/acme", "oci://registry.internal/x", "oci://evil.io/acme/p"]
        {
            let e = trust.admit(&r(&pin(refused))).unwrap_err();
            assert!(e.to_string().contains("allows only ghcr.io/acme/p, registry.internal:5000"), "{refused}: {e}");
        }
        let e = trust.admit(&r("oci://ghcr.io/acme/p:v1")).unwrap_err();
        assert!(matches!(e, Untrusted::Tag { .. }), "{e}");
        let tags = TrustPolicy { allow_tags: true, ..trust };
        assert_eq!(tags.admit(&r("oci://ghcr.io/acme/p:v1")), Ok(()));
    }

    #[test]
    fn local_policies_can_be_limited_by_name() {
        let trust =
            TrustPolicy { local_policies: Some(["default-scoring".to_string()].into()), ..TrustPolicy::default() };
        assert_eq!(trust.admit(&r("default-scoring")), Ok(()));
        let e = trust.admit(&r("team-scorer")).unwrap_err();
        assert!(e.to_string().contains("policies.trust.localPolicies: default-scoring"), "{e}");
    }

    #[test]
    fn a_bad_rule_says_how_to_write_one() {
        for bad in ["", "ghcr.io//x", "ghcr.io/Acme", "ghcr io"] {
            let e = bad.parse::<OciSourceRule>().unwrap_err();
            assert!(e.contains("REGISTRY/PATH"), "{bad}: {e}");
        }
        assert_eq!("oci://ghcr.io/acme/".parse::<OciSourceRule>().unwrap().to_string(), "ghcr.io/acme");
    }
}
