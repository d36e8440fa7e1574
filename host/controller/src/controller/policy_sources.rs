//! Where the controller may take policy code from, read from its settings once at start: the
//! cluster admin's trust policy, the cosign keys it names, and how registries are reached.
//! A key or credentials file that cannot be read stops the start with what to fix, rather
//! than running with less protection than the admin asked for.

use super::settings::Settings;
use anyhow::Context;
use std::path::{Path, PathBuf};
use tenon_api::policy_trust::TrustPolicy;
use tenon_oci::cosign::TrustedKey;

pub struct PolicySources {
    pub trust: TrustPolicy,
    pub keys: Vec<TrustedKey>,
    pub registry: tenon_oci::Options,
    /// Where pulled policies are kept; default: `OciCache::default_dir`.
    pub cache: Option<PathBuf>,
    pub max_pulls: usize,
}

impl Default for PolicySources {
    /// The safe default: the store only, no registry.
    fn default() -> Self {
        PolicySources {
            trust: TrustPolicy::default(),
            keys: Vec::new(),
            registry: tenon_oci::Options::default(),
            cache: None,
            max_pulls: 2,
        }
    }
}

/// The keys in `paths`: `.pub` files, or directories whose `*.pub` files are read.
pub fn read_keys(paths: &[PathBuf]) -> anyhow::Result<Vec<TrustedKey>> {
    let mut keys = Vec::new();
    for path in paths {
        let files: Vec<PathBuf> = if path.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(path)
                .with_context(|| format!("TENON_POLICY_SIGNATURE_KEYS: {}", path.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "pub"))
                .collect();
            files.sort();
            anyhow::ensure!(
                !files.is_empty(),
                "TENON_POLICY_SIGNATURE_KEYS: {} holds no *.pub file (policies.trust.signatureKeys names a Secret or ConfigMap of cosign.pub files)",
                path.display()
            );
            files
        } else {
            vec![path.clone()]
        };
        for f in files {
            keys.push(read_key(&f)?);
        }
    }
    Ok(keys)
}

fn read_key(file: &Path) -> anyhow::Result<TrustedKey> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("TENON_POLICY_SIGNATURE_KEYS: {}", file.display()))?;
    Ok(TrustedKey::from_pem(&text, &file.display().to_string())?)
}

impl PolicySources {
    pub fn from_settings(s: &Settings) -> anyhow::Result<Self> {
        let keys = read_keys(&s.policy_signature_keys)?;
        let trust = TrustPolicy {
            oci_sources: s.policy_oci_sources.clone(),
            allow_tags: s.policy_allow_tags,
            local_policies: s.policy_local_policies.as_ref().map(|names| names.iter().cloned().collect()),
            signers: keys.iter().map(|k| k.fingerprint().to_string()).collect(),
        };
        let credentials = match &s.policy_oci_registry_config {
            Some(path) => tenon_oci::Credentials::read(path).context("TENON_POLICY_OCI_REGISTRY_CONFIG")?,
            None => tenon_oci::Credentials::default(),
        };
        let ca_bundle = match &s.policy_oci_ca_bundle {
            Some(path) => {
                Some(std::fs::read(path).with_context(|| format!("TENON_POLICY_OCI_CA_BUNDLE: {}", path.display()))?)
            }
            None => None,
        };
        let registry = tenon_oci::Options {
            insecure: s.policy_insecure_registries.clone(),
            credentials,
            extra_hosts: s.policy_oci_extra_hosts.clone(),
            ca_bundle,
            limits: tenon_oci::PullLimits { total: s.policy_oci_pull_timeout, ..tenon_oci::PullLimits::default() },
        };
        Ok(PolicySources {
            trust,
            keys,
            registry,
            cache: s.policy_oci_cache.clone(),
            max_pulls: s.policy_oci_max_pulls as usize,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_read_from_files_and_directories_and_a_bad_one_stops_the_start() {
        let dir = std::env::temp_dir().join(format!("tenon-keys-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("ring")).unwrap();
        let signer = tenon_oci::test_registry::TestSigner::generate();
        std::fs::write(dir.join("ring/a.pub"), signer.public_pem()).unwrap();
        std::fs::write(dir.join("ring/README"), "not a key").unwrap();
        std::fs::write(dir.join("b.pub"), tenon_oci::test_registry::TestSigner::generate().public_pem()).unwrap();
        let keys = read_keys(&[dir.join("ring"), dir.join("b.pub")]).unwrap();
        assert_eq!(keys.len(), 2);

        std::fs::create_dir_all(dir.join("empty")).unwrap();
        let e = format!("{:#}", read_keys(&[dir.join("empty")]).unwrap_err());
        assert!(e.contains("holds no *.pub file"), "{e}");
        std::fs::write(dir.join("bad.pub"), "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n").unwrap();
        let e = format!("{:#}", read_keys(&[dir.join("bad.pub")]).unwrap_err());
        assert!(e.contains("bad.pub: not an ECDSA P-256 public key"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
