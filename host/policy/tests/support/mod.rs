//! Builds the guest policies the tests load: the default bundle (`policies/`), the gallery
//! (`examples/policies`) and the hostile guests (`tests/guests/`), for wasm32-wasip2, once per
//! test binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn repo() -> PathBuf {
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("run under cargo test"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d).join("guests"),
        None => repo().join("target/guests"),
    }
}

fn build(manifest: &Path) -> PathBuf {
    tenon_policy::testing::build_components(manifest, &target_dir()).unwrap_or_else(|e| panic!("{e}"))
}

/// The directory holding the built default bundle.
pub fn bundle_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| match std::env::var_os("TENON_POLICY_DIR") {
        Some(d) => PathBuf::from(d),
        None => build(&repo().join("policies/Cargo.toml")),
    })
}

/// The directory holding the built gallery (`examples/policies`); the test command builds it
/// next to the default bundle.
pub fn gallery_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| match std::env::var_os("TENON_POLICY_DIR") {
        Some(d) => PathBuf::from(d),
        None => build(&repo().join("examples/policies/Cargo.toml")),
    })
}

/// The directory holding the built hostile guests.
pub fn hostile_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| build(&repo().join("host/policy/tests/guests/Cargo.toml")))
}

pub fn wasm(dir: &Path, name: &str) -> Vec<u8> {
    let path = dir.join(format!("{}.wasm", name.replace('-', "_")));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A precompile cache shared by the tests (created private, 0700): each component is
/// compiled once per build.
pub fn cache_dir() -> PathBuf {
    target_dir().join("policy-cache")
}
