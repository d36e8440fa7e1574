//! The trust policy at work in the controller: what NodePools may name, what is pulled for
//! them, and which signatures make a pulled policy usable.

use super::*;
use crate::controller::policy_sources::PolicySources;
use std::time::Duration;
use tenon_api::policy::PolicyRef;
use tenon_oci::test_registry::{Answer, ScriptedRegistry, TestRegistry, TestSigner};

fn built(file: &str) -> Vec<u8> {
    let dir = std::env::var_os("TENON_POLICY_DIR").expect("TENON_POLICY_DIR: the built policies");
    std::fs::read(Path::new(&dir).join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
}

fn pool(name: &str, scoring: &str) -> Arc<NodePool> {
    Arc::new(
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: {name}\n  annotations: {{tenon.dev/scoring-policy: \"{scoring}\"}}\nspec:\n  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: lab}}\n      requirements: []\n"
        ))
        .unwrap(),
    )
}

fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tenon-trust-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn policies(dir: &Path, sources: PolicySources) -> Policies {
    Policies::new(Some(&dir.join("store")), 1000).unwrap().with_sources(sources).unwrap()
}

/// Refreshes until `done` holds (pulls land in the background), for at most 30 s.
async fn refresh_until(policies: &mut Policies, pools: &[Arc<NodePool>], done: impl Fn(&Policies) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done(policies) {
        assert!(
            Instant::now() < deadline,
            "not settled in 30 s: {:?}",
            pools.iter().map(|p| policies.unhealthy(p.metadata.name.as_deref().unwrap())).collect::<Vec<_>>()
        );
        // Far in the future: every backoff is due, so each pass resolves again.
        policies.refresh(pools, Instant::now() + Duration::from_secs(3600));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_outside_the_trust_policy_is_refused_and_never_fetched() {
    let registry = ScriptedRegistry::start(|_| Answer::status(404, "{}"));
    let dir = scratch("sources");
    let pin = format!("@sha256:{}", "a".repeat(64));
    let sources = PolicySources {
        trust: tenon_api::policy_trust::TrustPolicy {
            oci_sources: vec![format!("{}/platform", registry.addr).parse().unwrap()],
            ..Default::default()
        },
        cache: Some(dir.join("oci")),
        ..PolicySources::default()
    };
    let mut policies = policies(&dir, sources);
    let pools = [
        pool("team", &format!("oci://{}/team/scorer{pin}", registry.addr)),
        pool("platform", &format!("oci://{}/platform/scorer{pin}", registry.addr)),
    ];
    // The allowed one is fetched (and fails: 404), so the refused one had its chance too.
    refresh_until(&mut policies, &pools, |p| {
        p.unhealthy("platform").is_some_and(|(_, why)| why.contains("the last pull failed"))
    })
    .await;
    let (reason, why) = policies.unhealthy("team").unwrap();
    assert_eq!(reason, "PolicyUnavailable");
    assert!(why.contains(&format!("allows only {}/platform", registry.addr)), "{why}");
    assert!(why.contains("policies.trust.ociSources"), "names the rule: {why}");
    let asked: Vec<String> = registry.requests().into_iter().map(|r| r.path).collect();
    assert!(asked.iter().any(|p| p.contains("/platform/scorer/")), "{asked:?}");
    assert!(!asked.iter().any(|p| p.contains("/team/")), "the registry was asked for a refused reference: {asked:?}");

    // The default trusts no registry at all: nothing to pull, and the condition says so.
    let mut default =
        Policies::new(Some(&dir.join("store")), 1000).unwrap().with_sources(PolicySources::default()).unwrap();
    default.refresh_and_wait(&pools[1..], Instant::now());
    let (_, why) = default.unhealthy("platform").unwrap();
    assert!(why.contains("OCI policies are off"), "{why}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_signatures_required_only_a_policy_signed_by_a_trusted_key_loads() {
    let reg = TestRegistry::start("trust-signed");
    let dir = scratch("signed");
    let (ours, theirs) = (TestSigner::generate(), TestSigner::generate());
    let push = tenon_oci::Registry::new(tenon_oci::Options::default()).unwrap();
    let scorer = built("default_scoring.wasm");
    let mut pins = BTreeMap::new();
    for repo in ["signed", "unsigned", "foreign"] {
        let tag = PolicyRef::parse(&format!("oci://{}/platform/{repo}:v1", reg.addr)).unwrap().oci.unwrap();
        let digest = push.push(&scorer, &tag).await.unwrap();
        match repo {
            "signed" => ours.sign(&reg.addr, "platform/signed", &digest).await,
            "foreign" => theirs.sign(&reg.addr, "platform/foreign", &digest).await,
            _ => {}
        }
        pins.insert(repo, format!("oci://{}/platform/{repo}@sha256:{digest}", reg.addr));
    }
    std::fs::write(dir.join("cosign.pub"), ours.public_pem()).unwrap();
    let keys = crate::controller::policy_sources::read_keys(&[dir.join("cosign.pub")]).unwrap();
    let sources = PolicySources {
        trust: tenon_api::policy_trust::TrustPolicy {
            oci_sources: vec![reg.addr.parse().unwrap()],
            signers: keys.iter().map(|k| k.fingerprint().to_string()).collect(),
            ..Default::default()
        },
        keys,
        cache: Some(dir.join("oci")),
        ..PolicySources::default()
    };
    let mut policies = policies(&dir, sources);
    let pools: Vec<Arc<NodePool>> = pins.iter().map(|(repo, pin)| pool(repo, pin)).collect();
    let pulled =
        |p: &Policies, pool: &str| p.unhealthy(pool).is_some_and(|(_, why)| why.contains("the last pull failed"));
    refresh_until(&mut policies, &pools, |p| {
        p.unhealthy("signed").is_none() && pulled(p, "unsigned") && pulled(p, "foreign")
    })
    .await;
    let (_, why) = policies.unhealthy("unsigned").unwrap();
    assert!(why.contains("no cosign signature"), "{why}");
    let (_, why) = policies.unhealthy("foreign").unwrap();
    assert!(why.contains("none made by a trusted key"), "{why}");
    assert!(why.contains("policies.trust.signatureKeys"), "names the rule: {why}");

    // An artefact cached without a trusted signature (pulled before keys were required) is
    // not used from the cache either.
    let cache = OciCache::new(dir.join("oci"));
    let unsigned = PolicyRef::parse(&pins["unsigned"]).unwrap().oci.unwrap();
    let store = PolicyStore::new(dir.join("store"), PolicyEngine::new(Limits::default(), None).unwrap());
    let manifest =
        tenon_oci::Registry::new(tenon_oci::Options::default()).unwrap().pull(&unsigned, false).await.unwrap();
    cache.put(&unsigned, &manifest.digest, &manifest.manifest, &manifest.component, &[]).unwrap();
    let trust = tenon_api::policy_trust::TrustPolicy {
        oci_sources: vec![reg.addr.parse().unwrap()],
        signers: vec!["f".repeat(64)],
        ..Default::default()
    };
    let store = store.with_oci(OciCache::new(dir.join("oci")), false).with_trust(trust);
    let e = store.resolve(&PolicyRef::parse(&pins["unsigned"]).unwrap()).err().unwrap().to_string();
    assert!(e.contains("not signed by a trusted key"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
