//! The policy store: a directory of `.wasm` files the Helm chart fills with the default
//! bundle and users' policies, and the OCI cache of policies pulled from registries.
//! References are `NAME`, `NAME@sha256:HEX` or `oci://…`; a pinned digest that does not
//! match is an error, never a fallback. Files may change under a running controller (a
//! ConfigMap volume update swaps a symlink, a pull lands): [`PolicyStore::stamp`] tells a
//! caller when to resolve again.

use crate::engine::{PolicyEngine, sha256_hex};
use crate::error::PolicyError;
use crate::oci_cache::OciCache;
use crate::policy::LoadedPolicy;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tenon_api::policy::PolicyRef;
use tenon_api::policy_trust::TrustPolicy;

/// A policy file's identity and version as the file system reports them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileStamp {
    device: u64,
    inode: u64,
    len: u64,
    modified_ns: i64,
}

pub struct PolicyStore {
    dir: PathBuf,
    engine: PolicyEngine,
    /// Loaded components by sha256: a policy is compiled once however many NodePools use it.
    loaded: Mutex<BTreeMap<String, Arc<LoadedPolicy>>>,
    oci: Option<OciCache>,
    /// Whether `oci://…:TAG` references without a digest are accepted.
    allow_tags: bool,
    /// The cluster admin's trust policy, in a controller; `None` on a user's machine, where
    /// the user chose what was pulled.
    trust: Option<TrustPolicy>,
}

impl PolicyStore {
    pub fn new(dir: impl Into<PathBuf>, engine: PolicyEngine) -> Self {
        PolicyStore {
            dir: dir.into(),
            engine,
            loaded: Mutex::new(BTreeMap::new()),
            oci: None,
            allow_tags: false,
            trust: None,
        }
    }

    /// Resolves `oci://` references from `cache`; tags without a digest only if `allow_tags`.
    pub fn with_oci(mut self, cache: OciCache, allow_tags: bool) -> Self {
        self.oci = Some(cache);
        self.allow_tags = allow_tags;
        self
    }

    /// Refuses references outside `trust` before reading anything, and `oci://` policies
    /// without a signature one of its keys made when it requires signatures.
    pub fn with_trust(mut self, trust: TrustPolicy) -> Self {
        self.allow_tags = trust.allow_tags;
        self.trust = Some(trust);
        self
    }

    pub fn trust(&self) -> Option<&TrustPolicy> {
        self.trust.as_ref()
    }

    pub fn oci(&self) -> Option<&OciCache> {
        self.oci.as_ref()
    }

    pub fn engine(&self) -> &PolicyEngine {
        &self.engine
    }

    /// The file a reference names. Cargo names the file after the crate with '-' as '_':
    /// either spelling is accepted, the one as written first.
    fn path(&self, r: &PolicyRef) -> PathBuf {
        if let Some(src) = &r.oci {
            return self.oci.as_ref().and_then(|c| c.component_path(src)).unwrap_or_default();
        }
        let dashed = self.dir.join(format!("{}.wasm", r.name));
        if dashed.is_file() { dashed } else { self.dir.join(format!("{}.wasm", r.name.replace('-', "_"))) }
    }

    /// What identifies the file a reference names now, through symlinks (`None`: no such
    /// file): it differs after the file is replaced, rewritten or swapped.
    pub fn stamp(&self, r: &PolicyRef) -> Option<FileStamp> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(self.path(r)).ok()?;
        Some(FileStamp {
            device: m.dev(),
            inode: m.ino(),
            len: m.len(),
            modified_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        })
    }

    /// Forgets the loaded components whose sha256 is not in `in_use` (an updated policy's
    /// older versions), so a long-running controller does not keep every version it loaded.
    pub fn retain(&self, in_use: &BTreeSet<String>) {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner()).retain(|sha, _| in_use.contains(sha));
    }

    /// How many compiled components the store holds.
    pub fn loaded(&self) -> usize {
        self.loaded.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Loads the policy a reference names, checking a pinned digest first.
    pub fn resolve(&self, r: &PolicyRef) -> Result<Arc<LoadedPolicy>, PolicyError> {
        if let Some(trust) = &self.trust {
            trust.admit(r)?;
        }
        let bytes = match &r.oci {
            Some(src) => {
                if src.digest.is_none() && !self.allow_tags {
                    return Err(PolicyError::TagRefused { reference: src.to_string() });
                }
                let cache = self.oci.as_ref().ok_or_else(|| PolicyError::NoOciCache { reference: src.to_string() })?;
                let bytes = cache.read(src)?;
                if let Some(trust) = self.trust.as_ref().filter(|t| t.requires_signatures()) {
                    let signers = cache.signers(src);
                    if !signers.iter().any(|s| trust.signers.contains(s)) {
                        let found = match signers.len() {
                            0 => "no signature by a trusted key".to_string(),
                            n => format!("{n} signature(s), by keys no longer trusted"),
                        };
                        return Err(PolicyError::Unsigned { reference: src.to_string(), found });
                    }
                }
                bytes
            }
            None => {
                let path = self.path(r);
                if !path.is_file() {
                    return Err(PolicyError::NotFound { name: r.name.clone(), path: path.display().to_string() });
                }
                std::fs::read(&path).map_err(|source| PolicyError::Io { path: path.display().to_string(), source })?
            }
        };
        let sha = sha256_hex(&bytes);
        if let Some(want) = &r.sha256
            && *want != sha
        {
            return Err(PolicyError::DigestMismatch { name: r.name.clone(), want: want.clone(), found: sha });
        }
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = loaded.get(&sha) {
            return Ok(p.clone());
        }
        let (policy, _) = self.engine.load(&r.name, &bytes)?;
        let policy = Arc::new(policy);
        loaded.insert(sha, policy.clone());
        Ok(policy)
    }
}
