//! Policies pulled from OCI registries, kept on disk by manifest digest so that a pinned
//! reference is pulled once and survives restarts. The store reads them from here; pulling
//! is the shell's job (the `tenon-oci` crate), so nothing here touches the network.
//!
//! Layout under the cache directory:
//! - `sha256/<manifest digest>/manifest.json` and `component.wasm`, and `signers`: the
//!   fingerprints of the keys whose signatures the puller verified, one per line;
//! - `tags/<registry>/<repository>/<tag>`: the manifest digest a tag named when pulled.
//!
//! Every read checks the chain again: the manifest hashes to its directory's name, it has
//! one Wasm layer, and the component hashes to that layer's digest and has its size. A file
//! changed on disk is refused, never loaded.

use crate::engine::sha256_hex;
use std::path::{Path, PathBuf};
use tenon_api::policy::{OciSource, oci_media};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum OciCacheError {
    #[error("{reference} is not pulled yet")]
    NotPulled { reference: String },
    #[error("{reference}: the manifest does not hash to sha256:{want} (found sha256:{found})")]
    ManifestDigest { reference: String, want: String, found: String },
    #[error("{reference}: not a policy artefact: {why}")]
    NotAPolicy { reference: String, why: String },
    #[error("{reference}: the component does not match its layer: {why}")]
    Component { reference: String, why: String },
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
}

/// The policy layer a manifest names: its digest (hex) and size.
pub fn policy_layer(reference: &str, manifest: &[u8]) -> Result<(String, u64), OciCacheError> {
    oci_media::policy_layer(manifest).map_err(|why| OciCacheError::NotAPolicy { reference: reference.to_string(), why })
}

/// Checks `component` against the layer `manifest` names.
pub fn verify(reference: &str, manifest: &[u8], component: &[u8]) -> Result<(), OciCacheError> {
    let (want, size) = policy_layer(reference, manifest)?;
    let bad = |why: String| OciCacheError::Component { reference: reference.to_string(), why };
    if component.len() as u64 != size {
        return Err(bad(format!("{} bytes, the layer says {size}", component.len())));
    }
    let found = sha256_hex(component);
    if found != want {
        return Err(bad(format!("sha256:{found}, the layer says sha256:{want}")));
    }
    Ok(())
}

pub struct OciCache {
    dir: PathBuf,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OciCacheError + '_ {
    move |source| OciCacheError::Io { path: path.display().to_string(), source }
}

/// Writes through a temporary file and a rename, so a reader never sees half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), OciCacheError> {
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(io(parent))?;
    let tmp =
        parent.join(format!(".{}.{}", path.file_name().unwrap_or_default().to_string_lossy(), std::process::id()));
    std::fs::write(&tmp, bytes).map_err(io(&tmp))?;
    std::fs::rename(&tmp, path).map_err(io(path))
}

impl OciCache {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        OciCache { dir: dir.into() }
    }

    /// This user's cache: `$XDG_CACHE_HOME/tenon/oci`, else `$HOME/.cache/tenon/oci`.
    pub fn default_dir() -> Option<PathBuf> {
        crate::cache::user_cache_dir("oci")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn tag_file(&self, src: &OciSource, tag: &str) -> PathBuf {
        self.dir.join("tags").join(&src.registry).join(&src.repository).join(tag)
    }

    /// The manifest digest a reference stands for here: its pin, else what its tag named
    /// when it was last pulled.
    pub fn digest(&self, src: &OciSource) -> Option<String> {
        if let Some(d) = &src.digest {
            return Some(d.clone());
        }
        let d = std::fs::read_to_string(self.tag_file(src, src.tag.as_deref()?)).ok()?;
        let d = d.trim();
        (d.len() == 64 && d.bytes().all(|b| b.is_ascii_hexdigit())).then(|| d.to_string())
    }

    /// The component file of a pulled reference (whether or not it is there).
    pub fn component_path(&self, src: &OciSource) -> Option<PathBuf> {
        Some(self.dir.join("sha256").join(self.digest(src)?).join("component.wasm"))
    }

    /// Whether the reference has been pulled (not checked: [`OciCache::read`] checks).
    pub fn holds(&self, src: &OciSource) -> bool {
        self.component_path(src).is_some_and(|p| p.is_file())
    }

    /// The component a reference names, checked against its manifest and pin.
    pub fn read(&self, src: &OciSource) -> Result<Vec<u8>, OciCacheError> {
        let reference = src.to_string();
        let not_pulled = || OciCacheError::NotPulled { reference: reference.clone() };
        let digest = self.digest(src).ok_or_else(not_pulled)?;
        let entry = self.dir.join("sha256").join(&digest);
        let read = |name: &str| {
            let path = entry.join(name);
            match std::fs::read(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(not_pulled()),
                r => r.map_err(io(&path)),
            }
        };
        let manifest = read("manifest.json")?;
        let found = sha256_hex(&manifest);
        if found != digest {
            return Err(OciCacheError::ManifestDigest { reference, want: digest, found });
        }
        let component = read("component.wasm")?;
        verify(&reference, &manifest, &component)?;
        Ok(component)
    }

    /// The fingerprints of the keys whose signatures were verified when `src` was pulled.
    pub fn signers(&self, src: &OciSource) -> Vec<String> {
        let Some(digest) = self.digest(src) else { return Vec::new() };
        let file = self.dir.join("sha256").join(digest).join("signers");
        std::fs::read_to_string(file).unwrap_or_default().lines().map(str::to_string).collect()
    }

    /// Keeps the pulled artefacts within `budget` bytes besides those whose manifest digest
    /// is in `in_use`, removing the least recently pulled first; a reference to a removed
    /// one is pulled again when named.
    pub fn prune(&self, in_use: &std::collections::BTreeSet<String>, budget: u64) -> usize {
        let unused =
            |p: &Path| p.file_name().and_then(|n| n.to_str()).is_some_and(|d| d.len() == 64 && !in_use.contains(d));
        crate::cache::evict(&self.dir.join("sha256"), budget, unused)
    }

    /// Keeps a pulled artefact after checking it: the manifest must hash to `digest` (and to
    /// the reference's pin), the component to its layer. A tag reference records its digest.
    /// `signers` are the keys whose signatures the puller verified (see [`OciCache::signers`]).
    pub fn put(
        &self,
        src: &OciSource,
        digest: &str,
        manifest: &[u8],
        component: &[u8],
        signers: &[String],
    ) -> Result<(), OciCacheError> {
        let reference = src.to_string();
        let found = sha256_hex(manifest);
        let want = src.digest.as_deref().unwrap_or(digest);
        if found != want || found != digest {
            return Err(OciCacheError::ManifestDigest { reference, want: want.to_string(), found });
        }
        verify(&reference, manifest, component)?;
        let entry = self.dir.join("sha256").join(digest);
        // The manifest first: an entry counts as pulled once its component is there.
        write_atomically(&entry.join("manifest.json"), manifest)?;
        write_atomically(&entry.join("signers"), signers.join("\n").as_bytes())?;
        write_atomically(&entry.join("component.wasm"), component)?;
        if let (None, Some(tag)) = (&src.digest, &src.tag) {
            write_atomically(&self.tag_file(src, tag), digest.as_bytes())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(layer: &[u8], media_type: &str) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": oci_media::MANIFEST,
            "config": {"mediaType": oci_media::CONFIG, "digest": format!("sha256:{}", sha256_hex(b"{}")), "size": 2},
            "layers": [{"mediaType": media_type, "digest": format!("sha256:{}", sha256_hex(layer)), "size": layer.len()}],
        }))
        .unwrap()
    }

    fn source(tag: Option<&str>, digest: Option<String>) -> OciSource {
        OciSource {
            registry: "127.0.0.1:5000".into(),
            repository: "team/scorer".into(),
            tag: tag.map(str::to_string),
            digest,
        }
    }

    #[test]
    fn keeps_what_was_pulled_and_refuses_what_changed_on_disk() {
        let dir = std::env::temp_dir().join(format!("tenon-oci-cache-{}", std::process::id()));
        let cache = OciCache::new(&dir);
        let component = b"\0asm component bytes".to_vec();
        let m = manifest(&component, "application/vnd.wasm.content.layer.v1+wasm");
        let digest = sha256_hex(&m);
        let pinned = source(None, Some(digest.clone()));
        assert!(matches!(cache.read(&pinned), Err(OciCacheError::NotPulled { .. })));

        let wrong = source(None, Some("0".repeat(64)));
        assert!(matches!(cache.put(&wrong, &digest, &m, &component, &[]), Err(OciCacheError::ManifestDigest { .. })));
        assert!(matches!(cache.put(&pinned, &digest, &m, b"other", &[]), Err(OciCacheError::Component { .. })));
        assert!(!cache.holds(&pinned), "nothing is kept from a refused pull");

        let tagged = source(Some("v1"), None);
        cache.put(&tagged, &digest, &m, &component, &["k1".to_string()]).unwrap();
        assert_eq!(cache.signers(&pinned), ["k1"]);
        assert_eq!(cache.digest(&tagged).as_deref(), Some(digest.as_str()));
        assert_eq!(cache.read(&pinned).unwrap(), component);
        assert_eq!(cache.read(&tagged).unwrap(), component);

        std::fs::write(cache.component_path(&pinned).unwrap(), b"\0asm component bytez").unwrap();
        let e = cache.read(&pinned).unwrap_err().to_string();
        assert!(e.contains("does not match its layer"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn pruning_keeps_what_is_named_and_the_newest_within_the_budget() {
        let dir = std::env::temp_dir().join(format!("tenon-oci-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let cache = OciCache::new(&dir);
        let mut digests = Vec::new();
        for n in 0..3u8 {
            let component = vec![n; 1000];
            let m = manifest(&component, oci_media::LAYER);
            let digest = sha256_hex(&m);
            cache.put(&source(None, Some(digest.clone())), &digest, &m, &component, &[]).unwrap();
            digests.push(digest);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let named = [digests[0].clone()].into();
        assert_eq!(cache.prune(&named, 1500), 1);
        let held = |d: &String| cache.holds(&source(None, Some(d.clone())));
        assert!(held(&digests[0]), "named, however old");
        assert!(!held(&digests[1]), "the oldest unnamed goes");
        assert!(held(&digests[2]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_manifest_needs_exactly_one_wasm_layer() {
        let e = policy_layer("r", &manifest(b"x", "application/vnd.oci.image.layer.v1.tar+gzip")).unwrap_err();
        assert!(e.to_string().contains("expected exactly one layer of type application/wasm"), "{e}");
        assert!(policy_layer("r", &manifest(b"x", oci_media::LAYER)).is_ok());
        assert!(policy_layer("r", b"<html>").is_err());
    }
}
