//! The precompile cache: native code compiled from policies, kept across restarts so a
//! policy is not compiled again. Loading an entry runs its native code, so nothing in it is
//! trusted that this user did not write:
//!
//! - the directory is private: created 0700, and refused unless it is a real directory
//!   owned by this user with no group or other permissions;
//! - entries are authenticated: each carries an HMAC-SHA256, under a key kept 0600 in the
//!   directory, over the sha256 of the component it was compiled from, the engine's
//!   compatibility hash and the code. An entry copied from another policy, truncated,
//!   planted or edited fails the check and is recompiled, never loaded;
//! - files are opened without following symlinks and written through a fresh temporary
//!   file created exclusively, then renamed into place.
//!
//! A refused directory leaves the engine compiling in memory; a refused entry is replaced.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use thiserror::Error;

const MAGIC: &[u8; 8] = b"TENONPC1";
const TAG: usize = 32;
/// Larger entries are not read (the default bundle's are ~1 MiB).
const MAX_ENTRY: u64 = 256 << 20;

#[derive(Debug, Error)]
pub enum CacheError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("{path} is not a directory of this user's with mode 0700 ({found}); remove it or `chmod 700` it")]
    NotPrivate { path: String, found: String },
    #[error("{path}: the cache key is not a 32-byte file of this user's with mode 0600 ({found}); remove it")]
    BadKey { path: String, found: String },
}

/// Why an entry was not loaded.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum Refused {
    #[error("not a regular file of this user's without group/other write access")]
    NotOurs,
    #[error("not an entry of this cache (bad header or length)")]
    Malformed,
    #[error("failed authentication: it was not compiled by this cache from this component")]
    Forged,
    #[error("unreadable: {0}")]
    Unreadable(String),
}

pub struct PrecompileCache {
    dir: PathBuf,
    key: [u8; 32],
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> CacheError + '_ {
    move |source| CacheError::Io { path: path.display().to_string(), source }
}

/// `$XDG_CACHE_HOME/tenon/NAME`, else `$HOME/.cache/tenon/NAME`.
pub fn user_cache_dir(name: &str) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("tenon").join(name))
}

fn uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn describe(meta: &std::fs::Metadata) -> String {
    let kind = if meta.file_type().is_symlink() {
        "a symlink"
    } else if meta.is_dir() {
        "a directory"
    } else {
        "a file"
    };
    format!("{kind} owned by uid {}, mode {:o}", meta.uid(), meta.mode() & 0o7777)
}

impl PrecompileCache {
    /// This user's cache: `$XDG_CACHE_HOME/tenon/policies`, else `$HOME/.cache/tenon/policies`.
    pub fn default_dir() -> Option<PathBuf> {
        user_cache_dir("policies")
    }

    /// Opens `dir`, creating it (0700) and its key (0600) when absent; refuses a directory
    /// or key that is not this user's alone.
    pub fn open(dir: &Path) -> Result<Self, CacheError> {
        if let Some(parent) = dir.parent() {
            std::fs::create_dir_all(parent).map_err(io(parent))?;
        }
        match std::fs::DirBuilder::new().mode(0o700).create(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(dir)(e)),
        }
        let meta = std::fs::symlink_metadata(dir).map_err(io(dir))?;
        if !meta.is_dir() || meta.uid() != uid() || meta.mode() & 0o077 != 0 {
            return Err(CacheError::NotPrivate { path: dir.display().to_string(), found: describe(&meta) });
        }
        let key = Self::key(&dir.join("key"))?;
        Ok(PrecompileCache { dir: dir.to_path_buf(), key })
    }

    fn key(path: &Path) -> Result<[u8; 32], CacheError> {
        let mut key = [0u8; 32];
        let created =
            OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(path);
        match created {
            Ok(mut f) => {
                getrandom::fill(&mut key)
                    .map_err(|e| io(path)(std::io::Error::other(format!("no randomness for the cache key: {e}"))))?;
                f.write_all(&key).and_then(|_| f.sync_all()).map_err(io(path))?;
                return Ok(key);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io(path)(e)),
        }
        let bad = |found: String| CacheError::BadKey { path: path.display().to_string(), found };
        let mut f = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| bad(format!("cannot open it: {e}")))?;
        let meta = f.metadata().map_err(io(path))?;
        if !meta.is_file() || meta.uid() != uid() || meta.mode() & 0o077 != 0 || meta.len() != 32 {
            return Err(bad(format!("{}, {} bytes", describe(&meta), meta.len())));
        }
        f.read_exact(&mut key).map_err(io(path))?;
        Ok(key)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, sha: &str, compat: &str) -> PathBuf {
        self.dir.join(format!("{sha}-{compat}.cwasm"))
    }

    fn tag(&self, sha: &str, compat: &str, code: &[u8]) -> Hmac<Sha256> {
        let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key).expect("HMAC takes any key length");
        for part in [sha.as_bytes(), b"\0", compat.as_bytes(), b"\0", code] {
            mac.update(part);
        }
        mac
    }

    /// The authenticated code compiled from component `sha` for engine `compat`; `Ok(None)`
    /// when there is no entry.
    pub fn get(&self, sha: &str, compat: &str) -> Result<Option<Vec<u8>>, Refused> {
        let path = self.path(sha, compat);
        let mut f = match OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW).open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Refused::Unreadable(e.to_string())),
        };
        let meta = f.metadata().map_err(|e| Refused::Unreadable(e.to_string()))?;
        if !meta.is_file() || meta.uid() != uid() || meta.mode() & 0o022 != 0 {
            return Err(Refused::NotOurs);
        }
        if meta.len() > MAX_ENTRY || meta.len() < (MAGIC.len() + TAG) as u64 {
            return Err(Refused::Malformed);
        }
        let mut bytes = Vec::with_capacity(meta.len() as usize);
        f.read_to_end(&mut bytes).map_err(|e| Refused::Unreadable(e.to_string()))?;
        let Some(rest) = bytes.strip_prefix(MAGIC.as_slice()) else { return Err(Refused::Malformed) };
        let (tag, code) = rest.split_at(TAG);
        self.tag(sha, compat, code).verify_slice(tag).map_err(|_| Refused::Forged)?;
        Ok(Some(code.to_vec()))
    }

    /// Stores `code`, compiled from component `sha` for engine `compat`.
    pub fn put(&self, sha: &str, compat: &str, code: &[u8]) -> Result<(), CacheError> {
        let tag = self.tag(sha, compat, code).finalize().into_bytes();
        let mut suffix = [0u8; 8];
        let _ = getrandom::fill(&mut suffix);
        let hex: String = suffix.iter().map(|b| format!("{b:02x}")).collect();
        let tmp = self.dir.join(format!(".tmp-{hex}"));
        let write = || -> std::io::Result<()> {
            let mut f: File = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)?;
            f.write_all(MAGIC)?;
            f.write_all(&tag)?;
            f.write_all(code)?;
            f.sync_all()
        };
        let path = self.path(sha, compat);
        let out = write().and_then(|_| std::fs::rename(&tmp, &path));
        if out.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        out.map_err(io(&path))
    }
}

/// Removes files of `dir` that `evictable` accepts, least recently modified first, until
/// what remains of them is at most `budget` bytes; how many were removed. Files it does not
/// accept (in use, or not an entry) are neither counted nor removed.
pub fn evict(dir: &Path, budget: u64, evictable: impl Fn(&Path) -> bool) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| evictable(p))
        .filter_map(|p| {
            let m = std::fs::symlink_metadata(&p).ok()?;
            Some((m.modified().ok()?, tree_size(&p), p))
        })
        .collect();
    files.sort();
    let mut total: u64 = files.iter().map(|(_, size, _)| size).sum();
    let mut removed = 0;
    for (_, size, path) in files {
        if total <= budget {
            break;
        }
        let gone = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
        if gone.is_ok() {
            total -= size;
            removed += 1;
        }
    }
    removed
}

/// The bytes of a file, or of the files under a directory.
fn tree_size(path: &Path) -> u64 {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => {
            std::fs::read_dir(path).map(|d| d.filter_map(|e| e.ok()).map(|e| tree_size(&e.path())).sum()).unwrap_or(0)
        }
        Ok(m) => m.len(),
        Err(_) => 0,
    }
}

impl PrecompileCache {
    /// Keeps the cache within `budget` bytes besides the entries of components in `in_use`
    /// (sha256s): older entries go first, those of another engine version before any.
    pub fn prune(&self, in_use: &std::collections::BTreeSet<String>, compat: &str, budget: u64) -> usize {
        let entry = |p: &Path| -> Option<(String, String)> {
            let name = p.file_name()?.to_str()?.strip_suffix(".cwasm")?;
            let (sha, c) = name.split_once('-')?;
            Some((sha.to_string(), c.to_string()))
        };
        let stale = evict(&self.dir, 0, |p| entry(p).is_some_and(|(_, c)| c != compat));
        stale + evict(&self.dir, budget, |p| entry(p).is_some_and(|(sha, _)| !in_use.contains(&sha)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn pruning_keeps_what_is_in_use_and_the_newest_within_the_budget() {
        let dir = std::env::temp_dir().join(format!("tenon-precompile-prune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let c = PrecompileCache::open(&dir).unwrap();
        for (sha, compat) in [("aa", "e1"), ("bb", "e1"), ("cc", "e1"), ("dd", "e0")] {
            c.put(sha, compat, &[0u8; 1000]).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let in_use = ["aa".to_string()].into();
        // The other engine's entry goes; of the unused, the newest that fits the budget stays.
        assert_eq!(c.prune(&in_use, "e1", 1100), 2);
        assert!(c.get("aa", "e1").unwrap().is_some(), "in use, and older than the budget allows");
        assert!(c.get("bb", "e1").unwrap().is_none());
        assert!(c.get("cc", "e1").unwrap().is_some());
        assert!(c.get("dd", "e0").unwrap().is_none());
        assert!(dir.join("key").is_file(), "the key is not an entry");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn mode(path: &Path) -> std::io::Result<u32> {
        Ok(std::fs::symlink_metadata(path)?.permissions().mode() & 0o7777)
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("tenon-cache-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn entries_round_trip_and_bind_to_their_component() {
        let d = scratch("roundtrip");
        let c = PrecompileCache::open(&d).unwrap();
        assert_eq!(mode(&d).unwrap(), 0o700);
        assert_eq!(mode(&d.join("key")).unwrap(), 0o600);
        c.put("aa", "e1", b"code of aa").unwrap();
        assert_eq!(c.get("aa", "e1").unwrap().as_deref(), Some(b"code of aa".as_slice()));
        assert_eq!(c.get("bb", "e1").unwrap(), None);
        // Another component's entry copied over this one's name: refused.
        std::fs::copy(c.path("aa", "e1"), c.path("bb", "e1")).unwrap();
        assert_eq!(c.get("bb", "e1"), Err(Refused::Forged));
        // A different key (another user's or a fresh cache) does not authenticate it either.
        let other = PrecompileCache { dir: d.clone(), key: [7; 32] };
        assert_eq!(other.get("aa", "e1"), Err(Refused::Forged));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_loose_directory_is_refused_and_a_symlinked_entry_not_followed() {
        let d = scratch("loose");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(PrecompileCache::open(&d), Err(CacheError::NotPrivate { .. })));
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let c = PrecompileCache::open(&d).unwrap();
        c.put("aa", "e1", b"code").unwrap();
        std::os::unix::fs::symlink(c.path("aa", "e1"), c.path("cc", "e1")).unwrap();
        assert!(matches!(c.get("cc", "e1"), Err(Refused::Unreadable(_))));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
