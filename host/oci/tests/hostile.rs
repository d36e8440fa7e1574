//! Registries that attack the puller: answers too large, answers that never end, credential
//! and token tricks, redirects elsewhere. Each pull fails with a reason that says what
//! happened, within its limits, and gives nothing away.

use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_api::policy::{OciSource, PolicyRef};
use tenon_oci::test_registry::{Answer, ScriptedRegistry};
use tenon_oci::{Credentials, OciError, Options, PullLimits, Registry};

fn source(s: &str) -> OciSource {
    PolicyRef::parse(s).unwrap().oci.unwrap()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A policy manifest whose one layer claims `size` bytes of digest `layer`.
fn manifest(layer: &str, size: u64) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": format!("sha256:{}", "0".repeat(64)), "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": format!("sha256:{layer}"), "size": size}],
    }))
    .unwrap()
}

fn limited(total: Duration, stall: Duration) -> Registry {
    let limits = PullLimits { total, stall, ..PullLimits::default() };
    Registry::new(Options { limits, ..Options::default() }).unwrap()
}

/// The most this process has held (VmHWM), in bytes.
fn peak_rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

async fn pull_error(registry: &Registry, src: &OciSource) -> String {
    match registry.pull(src, true).await {
        Ok(_) => panic!("{src}: a hostile answer was accepted"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn oversized_manifests_and_blobs_are_refused_without_holding_them() {
    let component = vec![7u8; 1024];
    let layer = sha256_hex(&component);
    let small = manifest(&layer, component.len() as u64);
    let small_digest = sha256_hex(&small);
    let huge_layer = manifest(&layer, 2 << 30);
    let script = {
        let (small, huge_layer) = (small.clone(), huge_layer.clone());
        move |r: &tenon_oci::test_registry::Request| match r.path.as_str() {
            // A 100 MB manifest, declared, and one streamed without a length.
            p if p.contains("/big-declared/manifests/") => Answer::Zeros { declared: Some(100 << 20) },
            p if p.contains("/big-streamed/manifests/") => Answer::Zeros { declared: None },
            // A manifest claiming a 2 GiB layer.
            p if p.contains("/big-layer/manifests/") => Answer::json(huge_layer.clone()),
            // A small manifest whose blob is 2 GiB, declared or streamed.
            p if p.contains("/manifests/") => Answer::json(small.clone()),
            p if p.contains("/blob-declared/blobs/") => Answer::Zeros { declared: Some(2 << 30) },
            p if p.contains("/blob-streamed/blobs/") => Answer::Zeros { declared: None },
            _ => Answer::status(404, "{}"),
        }
    };
    let reg = ScriptedRegistry::start(script);
    let registry = limited(Duration::from_secs(60), Duration::from_secs(10));
    let before = peak_rss();
    let any = "a".repeat(64);
    for (repo, digest, want) in [
        ("big-declared", any.as_str(), "the manifest is 104857600 bytes or more, over the limit of 4194304"),
        ("big-streamed", any.as_str(), "over the limit of 4194304"),
        ("big-layer", sha256_hex(&huge_layer).as_str(), "more than 67108864"),
        ("blob-declared", small_digest.as_str(), "the component is 2147483648 bytes or more, over the limit of 1024"),
        ("blob-streamed", small_digest.as_str(), "over the limit of 1024"),
    ] {
        let src = source(&format!("oci://{}/team/{repo}@sha256:{digest}", reg.addr));
        let e = pull_error(&registry, &src).await;
        assert!(e.contains(want) && e.contains(&src.to_string()), "{repo}: {e}");
    }
    let grew = peak_rss().saturating_sub(before);
    assert!(grew < 64 << 20, "the pulls held {grew} bytes at their peak");
}

#[tokio::test]
async fn an_answer_that_never_ends_fails_at_the_pull_s_time_limit() {
    let reg = ScriptedRegistry::start(|r: &tenon_oci::test_registry::Request| {
        if r.path.contains("/silent/") {
            // Headers, then nothing: the stall limit.
            std::thread::sleep(Duration::from_secs(30));
        }
        Answer::Trickle
    });
    let registry = limited(Duration::from_secs(3), Duration::from_secs(2));
    let digest = "b".repeat(64);
    let started = Instant::now();
    let e = pull_error(&registry, &source(&format!("oci://{}/team/trickle@sha256:{digest}", reg.addr))).await;
    assert!(e.contains("not finished within 3 s"), "{e}");
    let e = pull_error(&registry, &source(&format!("oci://{}/team/silent@sha256:{digest}", reg.addr))).await;
    assert!(e.contains("timed out"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_registry_s_error_text_is_cut_short_and_printable() {
    let reg = ScriptedRegistry::start(|_: &tenon_oci::test_registry::Request| {
        let body = format!("\x1b[31mdenied\r\n{}", "x".repeat(1 << 20));
        Answer::Full { status: 403, headers: Vec::new(), body: body.into_bytes() }
    });
    let registry = limited(Duration::from_secs(30), Duration::from_secs(10));
    let e = pull_error(&registry, &source(&format!("oci://{}/team/x@sha256:{}", reg.addr, "c".repeat(64)))).await;
    assert!(e.contains("403 Forbidden: [31mdenied xxx"), "{e}");
    assert!(e.len() < 400 && !e.contains('\x1b') && !e.contains('\n'), "{} bytes: {e:?}", e.len());
}

/// Credentials filed for registry A go to A only: not to B when B asks for them, not to a
/// token service B names, not along a redirect from A to B.
#[tokio::test]
async fn credentials_for_one_registry_are_never_sent_to_another() {
    let b = Arc::new(ScriptedRegistry::start(|r: &tenon_oci::test_registry::Request| match r.authorization {
        None if r.path.contains("/basic/") => Answer::Full {
            status: 401,
            headers: vec![("WWW-Authenticate".into(), "Basic realm=\"b\"".into())],
            body: Vec::new(),
        },
        _ => Answer::status(404, "{}"),
    }));
    let b_addr = b.addr.clone();
    let a = ScriptedRegistry::start(move |r: &tenon_oci::test_registry::Request| {
        if r.path.contains("/to-b/") {
            let location = format!("http://{b_addr}/v2/team/basic/manifests/x");
            return Answer::Full { status: 307, headers: vec![("Location".into(), location)], body: Vec::new() };
        }
        if r.path.contains("/realm-b/") && r.authorization.is_none() {
            let challenge =
                format!("Bearer realm=\"http://{b_addr}/token\",service=\"a\",scope=\"repository:team/realm-b:pull\"");
            return Answer::Full {
                status: 401,
                headers: vec![("WWW-Authenticate".into(), challenge)],
                body: Vec::new(),
            };
        }
        if r.authorization.is_none() {
            return Answer::Full {
                status: 401,
                headers: vec![("WWW-Authenticate".into(), "Basic realm=\"a\"".into())],
                body: Vec::new(),
            };
        }
        Answer::status(404, "{}")
    });
    let credentials = Credentials::parse(
        format!(r#"{{"auths": {{"{}": {{"username": "alice", "password": "for-a-only"}}}}}}"#, a.addr).as_bytes(),
        "config.json",
    )
    .unwrap();
    let registry = Registry::new(Options { credentials, ..Options::default() }).unwrap();
    let pin = format!("@sha256:{}", "d".repeat(64));

    let e = pull_error(&registry, &source(&format!("oci://{}/team/basic{pin}", b.addr))).await;
    assert!(e.contains(&format!("{} asks for credentials and none are filed under it", b.addr)), "{e}");
    let e = pull_error(&registry, &source(&format!("oci://{}/team/realm-b{pin}", a.addr))).await;
    assert!(e.contains("token service 127.0.0.1 is not the registry's host"), "{e}");
    let e = pull_error(&registry, &source(&format!("oci://{}/team/to-b{pin}", a.addr))).await;
    assert!(e.contains("neither the registry nor a host in policies.oci.extraHosts"), "{e}");
    // A itself gets them (the control: the credential is configured and used).
    let e = pull_error(&registry, &source(&format!("oci://{}/team/own{pin}", a.addr))).await;
    assert!(e.contains("404"), "{e}");
    assert!(a.requests().iter().any(|r| r.authorization.as_deref().is_some_and(|h| h.starts_with("Basic "))));

    assert!(!b.requests().is_empty(), "B was asked (for its own repository)");
    for r in b.requests() {
        assert_eq!(r.authorization, None, "B received a credential at {}", r.path);
        assert!(!r.path.starts_with("/token"), "B's token service was asked: {}", r.path);
    }
}

#[tokio::test]
async fn a_redirect_to_a_listed_blob_store_is_followed() {
    let component = vec![9u8; 512];
    let layer = sha256_hex(&component);
    let m = manifest(&layer, component.len() as u64);
    let digest = sha256_hex(&m);
    let store = ScriptedRegistry::start(move |_: &tenon_oci::test_registry::Request| Answer::Full {
        status: 200,
        headers: Vec::new(),
        body: component.clone(),
    });
    let store_addr = store.addr.clone();
    let reg = ScriptedRegistry::start(move |r: &tenon_oci::test_registry::Request| {
        if r.path.contains("/blobs/") {
            let location = format!("http://{store_addr}/blob");
            return Answer::Full { status: 307, headers: vec![("Location".into(), location)], body: Vec::new() };
        }
        Answer::json(m.clone())
    });
    let src = source(&format!("oci://{}/team/p@sha256:{digest}", reg.addr));
    let refused = Registry::new(Options::default()).unwrap();
    assert!(matches!(refused.pull(&src, false).await, Err(OciError::Pull { .. })));
    let listed = Registry::new(Options { extra_hosts: vec![store.addr.clone()], ..Options::default() }).unwrap();
    assert_eq!(listed.pull(&src, false).await.unwrap().digest, digest);
}

#[test]
fn a_ca_bundle_without_certificates_is_refused_naming_the_setting() {
    for bundle in [&b"not a certificate"[..], b"-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"] {
        let options = Options { ca_bundle: Some(bundle.to_vec()), ..Options::default() };
        let e = Registry::new(options).err().expect("refused").to_string();
        assert!(e.contains("TENON_POLICY_OCI_CA_BUNDLE"), "{e}");
    }
}
