//! Pushing and pulling policies against a real registry (CNCF distribution) on 127.0.0.1.

use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};
use tenon_api::policy::{OciSource, PolicyRef};
use tenon_oci::test_registry::TestRegistry;
use tenon_oci::{OciError, Options, Registry};

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn source(s: &str) -> OciSource {
    PolicyRef::parse(s).unwrap().oci.unwrap()
}

/// Stands in for a component: the registry and this crate never look inside.
fn component(n: u8) -> Vec<u8> {
    let mut c = b"\0asm\x0d\0\x01\0".to_vec();
    c.extend(std::iter::repeat_n(n, 4096));
    c
}

#[tokio::test]
async fn a_pushed_policy_pulls_back_by_digest_and_by_tag() {
    let reg = TestRegistry::start("roundtrip");
    let registry = Registry::new(Options::default()).unwrap();
    let policy = component(1);
    let tagged = source(&format!("oci://{}/team/amd-first:v1", reg.addr));
    let digest = registry.push(&policy, &tagged).await.unwrap();

    let pinned = source(&format!("oci://{}/team/amd-first@sha256:{digest}", reg.addr));
    let pulled = registry.pull(&pinned, false).await.unwrap();
    assert_eq!(pulled.digest, digest);
    assert_eq!(sha256_hex(&pulled.manifest), digest, "the manifest is the one the digest names");
    assert_eq!(pulled.component, policy);
    let manifest: serde_json::Value = serde_json::from_slice(&pulled.manifest).unwrap();
    assert_eq!(manifest["config"]["mediaType"], "application/vnd.wasm.config.v0+json");
    assert_eq!(manifest["layers"][0]["mediaType"], "application/wasm");

    assert_eq!(registry.pull(&tagged, false).await.unwrap().digest, digest, "the tag names the same manifest");
    // Moving the tag changes what it names, never what a digest names.
    let moved = registry.push(&component(2), &tagged).await.unwrap();
    assert_ne!(moved, digest);
    assert_eq!(registry.pull(&tagged, false).await.unwrap().component, component(2));
    assert_eq!(registry.pull(&pinned, false).await.unwrap().component, policy);

    let absent = source(&format!("oci://{}/team/amd-first@sha256:{}", reg.addr, "0".repeat(64)));
    let e = registry.pull(&absent, false).await.err().expect("an unknown digest fails").to_string();
    assert!(e.contains(&absent.to_string()), "the error names the reference: {e}");

    let e = registry.push(&policy, &pinned).await.expect_err("pushing to a digest is refused").to_string();
    assert!(e.contains("push to a tag"), "{e}");
}

#[tokio::test]
async fn a_blob_changed_in_the_registry_is_refused() {
    let reg = TestRegistry::start("tamper");
    let registry = Registry::new(Options::default()).unwrap();
    let policy = component(3);
    let digest = registry.push(&policy, &source(&format!("oci://{}/scorer:v1", reg.addr))).await.unwrap();
    // The registry serves blobs from disk as stored: change the component's bytes there.
    let layer = sha256_hex(&policy);
    let blob = reg.data_dir().join(format!("docker/registry/v2/blobs/sha256/{}/{layer}/data", &layer[..2]));
    let mut forged = policy.clone();
    *forged.last_mut().unwrap() ^= 0xff;
    std::fs::write(&blob, &forged).unwrap_or_else(|e| panic!("{}: {e}", blob.display()));

    let pinned = source(&format!("oci://{}/scorer@sha256:{digest}", reg.addr));
    match registry.pull(&pinned, false).await {
        Err(OciError::Pull { why, .. }) => assert!(why.contains("does not match its digest"), "a digest error: {why}"),
        Ok(_) => panic!("a component that does not match its layer digest was accepted"),
        Err(other) => panic!("expected a digest error, got {other}"),
    }
}

/// Kubewarden's policy layout (`kwctl push`) pulls too; an image that is not a policy does not.
#[tokio::test]
async fn kubewarden_artefacts_pull_and_container_images_do_not() {
    let reg = TestRegistry::start("layouts");
    let registry = Registry::new(Options::default()).unwrap();
    let client = Client::new(oci_client::client::ClientConfig {
        protocol: oci_client::client::ClientProtocol::Http,
        ..Default::default()
    });
    for (repo, layer_type, config_type) in [
        ("kw", "application/vnd.wasm.content.layer.v1+wasm", "application/vnd.wasm.config.v1+json"),
        ("image", "application/vnd.oci.image.layer.v1.tar+gzip", "application/vnd.oci.image.config.v1+json"),
    ] {
        let image = Reference::with_tag(reg.addr.clone(), repo.to_string(), "v1".to_string());
        client.auth(&image, &RegistryAuth::Anonymous, oci_client::RegistryOperation::Push).await.unwrap();
        let layer = component(4);
        let config = b"{}".to_vec();
        let (ld, cd) = (format!("sha256:{}", sha256_hex(&layer)), format!("sha256:{}", sha256_hex(&config)));
        client.push_blob(&image, layer.clone(), &ld).await.unwrap();
        client.push_blob(&image, config.clone(), &cd).await.unwrap();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": config_type, "digest": cd, "size": config.len()},
            "layers": [{"mediaType": layer_type, "digest": ld, "size": layer.len()}],
        }))
        .unwrap();
        let content_type = "application/vnd.oci.image.manifest.v1+json".parse().unwrap();
        client.push_manifest_raw(&image, manifest.clone(), content_type).await.unwrap();

        let pinned = source(&format!("oci://{}/{repo}@sha256:{}", reg.addr, sha256_hex(&manifest)));
        match (repo, registry.pull(&pinned, false).await) {
            ("kw", Ok(p)) => assert_eq!(p.component, layer),
            ("image", Err(OciError::NotAPolicy { why, .. })) => assert!(why.contains("application/wasm"), "{why}"),
            (_, Err(e)) => panic!("{repo}: {e}"),
            (_, Ok(_)) => panic!("{repo}: a container image was taken for a policy"),
        }
    }
}

/// Cosign signatures as `cosign sign --key` files them, pulled with the artefact and checked
/// against the configured keys.
#[tokio::test]
async fn a_signature_by_a_trusted_key_verifies_and_others_do_not() {
    use tenon_oci::cosign::{TrustedKey, Unverified, verify};
    use tenon_oci::test_registry::TestSigner;
    let reg = TestRegistry::start("signed");
    let registry = Registry::new(Options::default()).unwrap();
    let (ours, theirs) = (TestSigner::generate(), TestSigner::generate());
    let key = TrustedKey::from_pem(&ours.public_pem(), "cosign.pub").unwrap();
    let push = |n: u8, repo: &'static str| {
        let src = source(&format!("oci://{}/team/{repo}:v1", reg.addr));
        let registry = &registry;
        async move { registry.push(&component(n), &src).await.unwrap() }
    };
    let pull = |repo: &str, digest: &str| source(&format!("oci://{}/team/{repo}@sha256:{digest}", reg.addr));

    let signed = push(5, "signed").await;
    ours.sign(&reg.addr, "team/signed", &signed).await;
    let pulled = registry.pull(&pull("signed", &signed), true).await.unwrap();
    assert_eq!(pulled.signatures.len(), 1);
    assert_eq!(
        verify(std::slice::from_ref(&key), &signed, &pulled.signatures),
        Ok(vec![key.fingerprint().to_string()])
    );
    assert!(registry.pull(&pull("signed", &signed), false).await.unwrap().signatures.is_empty(), "not asked for");

    let unsigned = push(6, "unsigned").await;
    let pulled = registry.pull(&pull("unsigned", &unsigned), true).await.unwrap();
    let e = verify(std::slice::from_ref(&key), &unsigned, &pulled.signatures).unwrap_err();
    assert!(matches!(e, Unverified::None { .. }), "{e}");

    let foreign = push(7, "foreign").await;
    theirs.sign(&reg.addr, "team/foreign", &foreign).await;
    let pulled = registry.pull(&pull("foreign", &foreign), true).await.unwrap();
    assert_eq!(
        verify(std::slice::from_ref(&key), &foreign, &pulled.signatures),
        Err(Unverified::UntrustedKeys { count: 1 })
    );
}
