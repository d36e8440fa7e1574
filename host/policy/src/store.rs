//! The policy store: a directory of `.wasm` files the Helm chart fills with the default
//! bundle and users' policies. References are `NAME` or `NAME@sha256:HEX`; a pinned digest
//! that does not match is an error, never a fallback.

use crate::engine::{PolicyEngine, sha256_hex};
use crate::error::PolicyError;
use crate::policy::LoadedPolicy;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use tenon_api::policy::PolicyRef;

pub struct PolicyStore {
    dir: PathBuf,
    engine: PolicyEngine,
    /// Loaded components by sha256: a policy is compiled once however many NodePools use it.
    loaded: Mutex<BTreeMap<String, Arc<LoadedPolicy>>>,
}

impl PolicyStore {
    pub fn new(dir: impl Into<PathBuf>, engine: PolicyEngine) -> Self {
        PolicyStore { dir: dir.into(), engine, loaded: Mutex::new(BTreeMap::new()) }
    }

    pub fn engine(&self) -> &PolicyEngine {
        &self.engine
    }

    /// Loads the policy a reference names, checking a pinned digest first.
    pub fn resolve(&self, r: &PolicyRef) -> Result<Arc<LoadedPolicy>, PolicyError> {
        // Cargo names the file after the crate with '-' as '_': accept either spelling.
        let dashed = self.dir.join(format!("{}.wasm", r.name));
        let path = if dashed.is_file() { dashed } else { self.dir.join(format!("{}.wasm", r.name.replace('-', "_"))) };
        if !path.is_file() {
            return Err(PolicyError::NotFound { name: r.name.clone(), path: path.display().to_string() });
        }
        let bytes =
            std::fs::read(&path).map_err(|source| PolicyError::Io { path: path.display().to_string(), source })?;
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
