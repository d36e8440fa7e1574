//! `tenon policy push` and `pull` against a real registry on 127.0.0.1, and what `check`
//! makes of an `oci://` reference before and after it is pulled.
#![cfg(feature = "oci")]

#[allow(dead_code)] // each test binary uses part of the support module
use crate::support;

use std::path::PathBuf;
use std::process::{Command, Output};
use support::repo;
use tenon_oci::test_registry::TestRegistry;

/// `tenon ARGS…` with its own cache directory (where `pull` puts what it fetches).
fn tenon(cache: &PathBuf, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tenon"))
        .args(args)
        .current_dir(repo())
        .env("XDG_CACHE_HOME", cache)
        .output()
        .expect("run tenon")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn component() -> PathBuf {
    let dir = std::env::var_os("TENON_POLICY_DIR").expect("TENON_POLICY_DIR: the built policies");
    PathBuf::from(dir).join("default_scoring.wasm")
}

#[test]
fn push_prints_the_pin_that_pull_and_check_resolve() {
    let registry = TestRegistry::start("cli");
    let cache = std::env::temp_dir().join(format!("tenon-oci-cli-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&cache);
    let wasm = component();
    let tag = format!("oci://{}/platform/default-scoring:v1", registry.addr);
    let o = tenon(&cache, &["policy", "push", wasm.to_str().unwrap(), &tag]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let pin = String::from_utf8_lossy(&o.stdout).trim().to_string();
    assert!(pin.starts_with(&format!("oci://{}/platform/default-scoring@sha256:", registry.addr)), "{pin}");

    // A NodePool naming the pin: not checkable before it is pulled here, clean after.
    let np = std::fs::read_to_string(repo().join("examples/seeds/lab-general/nodepool-lab-general.yaml")).unwrap();
    let np = np.replacen(
        "  name: lab-general\n",
        &format!("  name: lab-general\n  annotations:\n    tenon.dev/scoring-policy: \"{pin}\"\n"),
        1,
    );
    std::fs::create_dir_all(&cache).unwrap();
    let file = cache.join("nodepool.yaml");
    std::fs::write(&file, np).unwrap();
    let store = wasm.parent().unwrap().to_str().unwrap().to_string();
    let check = |cache: &PathBuf| tenon(cache, &["check", "--policy-dir", &store, file.to_str().unwrap()]);
    let o = check(&cache);
    assert!(text(&o).contains("is not pulled yet on this machine"), "{}", text(&o));
    assert_eq!(o.status.code(), Some(0), "a warning, not an error: {}", text(&o));

    let o = tenon(&cache, &["policy", "pull", &pin]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let pulled = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
    assert!(pulled.starts_with(&cache), "pulled into the user's cache: {}", pulled.display());
    assert_eq!(std::fs::read(&pulled).unwrap(), std::fs::read(&wasm).unwrap());
    let o = check(&cache);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("scoring-policy"), "resolved and loaded: {}", text(&o));

    // Only policies are pushed, and only to tags.
    let o = tenon(&cache, &["policy", "push", file.to_str().unwrap(), &tag]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("is not a Tenon policy"), "{}", text(&o));
    let o = tenon(&cache, &["policy", "push", wasm.to_str().unwrap(), &pin]);
    assert!(text(&o).contains("push to a tag"), "{}", text(&o));
    std::fs::remove_dir_all(&cache).unwrap();
}
