//! The policy store: a directory of `.wasm` files the Helm chart fills with the default
//! bundle and users' policies, and the OCI cache of policies pulled from registries.
//! References are `NAME`, `NAME@sha256:HEX` or `oci://…`; a pinned digest that does not
//! match is an error, never a fallback. Files may change under a running controller (a
//! ConfigMap volume update swaps a symlink, a pull lands): [`PolicyStore::stamp`] tells a
//! caller when to resolve again.

use crate::background::BackgroundCompiles;
use crate::engine::{PolicyEngine, sha256_hex};
use crate::error::PolicyError;
use crate::oci_cache::OciCache;
use crate::policy::LoadedPolicy;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tenon_api::policy::{PolicyRef, oci_media};
use tenon_api::policy_trust::TrustPolicy;

/// The largest component the store compiles, wherever it comes from (the default bundle's
/// are ~0.3 MiB): the same bound as a pulled one.
pub const MAX_COMPONENT_BYTES: u64 = oci_media::MAX_LAYER_BYTES;

/// What each of the precompile and OCI caches may hold besides what is in use (the chart's
/// `/tmp` emptyDir has a size limit; past it the kubelet evicts the pod).
pub const CACHE_BUDGET: u64 = 256 << 20;

/// The most distinct components the store holds compiled (about 1 MiB each and more).
pub const MAX_LOADED: usize = 64;

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
    /// Compiles waited for up to a bound (a controller); `None`: compiled inline (the CLI).
    background: Option<BackgroundCompiles>,
    /// The most compiled components held (see [`MAX_LOADED`]).
    max_loaded: usize,
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
            background: None,
            max_loaded: MAX_LOADED,
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

    /// Waits at most `wait` for a component to compile; one taking longer is refused with
    /// "still compiling" until it has finished in the background (see background.rs).
    pub fn with_compile_wait(mut self, wait: std::time::Duration) -> Self {
        self.background = Some(BackgroundCompiles::new(wait));
        self
    }

    /// Holds at most `n` compiled components instead of [`MAX_LOADED`].
    pub fn with_max_loaded(mut self, n: usize) -> Self {
        self.max_loaded = n;
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

    /// Keeps the precompile and OCI caches within their budgets (see [`CACHE_BUDGET`]),
    /// never removing what `components` (sha256s of loaded components) or `references`
    /// (what NodePools name) need.
    pub fn prune_caches<'a>(&self, components: &BTreeSet<String>, references: impl Iterator<Item = &'a PolicyRef>) {
        if let Some(c) = self.engine.precompile_cache() {
            c.prune(components, &self.engine.compatibility_hash(), CACHE_BUDGET);
        }
        if let Some(oci) = &self.oci {
            let named: BTreeSet<String> = references.filter_map(|r| oci.digest(r.oci.as_ref()?)).collect();
            oci.prune(&named, CACHE_BUDGET);
        }
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
                let io = |source| PolicyError::Io { path: path.display().to_string(), source };
                let len = std::fs::metadata(&path).map_err(io)?.len();
                if len > MAX_COMPONENT_BYTES {
                    return Err(PolicyError::TooLarge { name: r.name.clone(), bytes: len, limit: MAX_COMPONENT_BYTES });
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
        {
            let loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(p) = loaded.get(&sha) {
                return Ok(p.clone());
            }
            if loaded.len() >= self.max_loaded {
                return Err(PolicyError::TooManyLoaded { name: r.name.clone(), limit: self.max_loaded });
            }
        }
        // Not under the lock: a compile takes its time, and callers of loaded policies
        // need not wait for it.
        let policy = match &self.background {
            Some(b) => b.load(&self.engine, &r.name, &sha, bytes)?,
            None => Arc::new(self.engine.load(&r.name, &bytes)?.0),
        };
        self.loaded.lock().unwrap_or_else(|e| e.into_inner()).insert(sha, policy.clone());
        Ok(policy)
    }
}
