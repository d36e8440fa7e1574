//! The store's bounds in a controller: how large a component it reads, how many it holds
//! compiled, and how long a resolution waits for a compile.

use crate::support::{bundle_dir, wasm};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tenon_api::policy::PolicyRef;
use tenon_policy::{Limits, PolicyEngine, PolicyError, PolicyStore};

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("tenon-store-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The default scorer with a custom section of its own: the same policy, another component.
fn variant(n: u8) -> Vec<u8> {
    let mut c = wasm(bundle_dir(), "default-scoring");
    c.extend([0x00, 3, 1, b'n', n]);
    c
}

/// Compiling every time: no precompile cache.
fn engine() -> PolicyEngine {
    PolicyEngine::new(Limits::default(), None).unwrap()
}

fn r(name: &str) -> PolicyRef {
    PolicyRef::parse(name).unwrap()
}

#[test]
fn a_component_larger_than_a_policy_may_be_is_refused_unread() {
    let dir = Dir::new("large");
    let f = std::fs::File::create(dir.0.join("huge.wasm")).unwrap();
    f.set_len(tenon_policy::store::MAX_COMPONENT_BYTES + 1).unwrap();
    let e = PolicyStore::new(&dir.0, engine()).resolve(&r("huge")).err().expect("refused");
    assert!(matches!(e, PolicyError::TooLarge { .. }), "{e}");
    assert!(e.to_string().contains("67108865 bytes, more than the 67108864"), "{e}");
}

#[test]
fn the_store_holds_at_most_its_limit_of_compiled_policies() {
    let dir = Dir::new("many");
    for n in 0..3 {
        std::fs::write(dir.0.join(format!("p{n}.wasm")), variant(n)).unwrap();
    }
    let store = PolicyStore::new(&dir.0, engine()).with_max_loaded(2);
    store.resolve(&r("p0")).unwrap();
    store.resolve(&r("p1")).unwrap();
    let e = store.resolve(&r("p2")).err().expect("over the limit");
    assert!(e.to_string().contains("holds 2 loaded policies, its limit"), "{e}");
    // One no longer in use makes room.
    store.retain(&[tenon_policy::engine::sha256_hex(&variant(0))].into());
    store.resolve(&r("p2")).unwrap();
}

#[test]
fn a_compile_past_the_wait_goes_on_in_the_background_and_is_used_when_done() {
    let dir = Dir::new("slow");
    std::fs::write(dir.0.join("a.wasm"), variant(1)).unwrap();
    std::fs::write(dir.0.join("b.wasm"), variant(2)).unwrap();
    let store = PolicyStore::new(&dir.0, engine()).with_compile_wait(Duration::from_millis(1));
    let started = Instant::now();
    let e = store.resolve(&r("a")).err().expect("a compile takes more than 1 ms");
    assert!(matches!(e, PolicyError::StillCompiling { .. }), "{e}");
    assert!(started.elapsed() < Duration::from_millis(500), "the caller waited {:?}", started.elapsed());
    // One compile at a time: another component waits its turn, without compiling.
    let busy = store.resolve(&r("b")).err().expect("the compiler is busy");
    assert!(busy.to_string().contains("\"a\" has been compiling"), "{busy}");
    let deadline = Instant::now() + Duration::from_secs(120);
    let policy = loop {
        match store.resolve(&r("a")) {
            Ok(p) => break p,
            Err(PolicyError::StillCompiling { .. }) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("{e}"),
        }
    };
    assert_eq!(policy.name, "a");
    assert_eq!(store.loaded(), 1);
}
