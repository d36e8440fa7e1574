//! Where policy code comes from, as the controller meets it: registries that attack the
//! puller, and a component that takes minutes to compile. Each fails its own NodePool with
//! a reason, and no other NodePool waits for it.

use sha2::Digest;
use std::time::Duration;
use tenon_e2e::scenario::{a_new_pod_is_nominated_within_5s, apply_lab_general, nodeclass_ready, tagged_pool};
use tenon_e2e::{Cluster, eventually};
use tenon_oci::test_registry::{Answer, Request, ScriptedRegistry};

fn sha256_hex(bytes: &[u8]) -> String {
    sha2::Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// A NodePool scored by `policy`, for pods labelled `capacity.example.io/pool: NAME`.
fn nodepool(name: &str, policy: &str) -> String {
    tagged_pool(name, &format!("tenon.dev/scoring-policy: \"{policy}\""), r#"{nodes: "10%"}"#)
}

/// The most memory replica 0 has held (VmHWM), in bytes.
fn controller_peak_rss(c: &Cluster) -> u64 {
    let pid = c.replica_pid(0).expect("the controller runs");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("the controller's status");
    let kib = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).expect("VmHWM");
    kib.trim().trim_end_matches("kB").trim().parse::<u64>().expect("VmHWM in kB") * 1024
}

/// The chart's memory limit for the controller (`controller.resources.limits.memory`).
const MEMORY_LIMIT: u64 = 1 << 30;

async fn unavailable_with(c: &Cluster, pool: &str, reason: &str) -> String {
    eventually(Duration::from_secs(90), &format!("{pool}: PolicyUnavailable saying {reason:?}"), || async {
        let (status, _, message) = c.nodepool_condition(pool, "PolicyHealthy").await?;
        (status == "False" && message.contains(reason)).then_some(message)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_registries_fail_their_nodepools_and_hold_up_no_other() {
    let component = vec![7u8; 1024];
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": format!("sha256:{}", "0".repeat(64)), "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": format!("sha256:{}", sha256_hex(&component)), "size": component.len()}],
    }))
    .unwrap();
    let digest = sha256_hex(&manifest);
    let registry = ScriptedRegistry::start(move |r: &Request| match r.path.as_str() {
        // A manifest of 100 MB and more, and an answer that never ends.
        p if p.contains("/big-manifest/") => Answer::Zeros { declared: None },
        p if p.contains("/endless/") => Answer::Trickle,
        // A 2 GiB component behind a well-formed manifest.
        p if p.contains("/blobs/") => Answer::Zeros { declared: Some(2 << 30) },
        _ => Answer::json(manifest.clone()),
    });
    let mut c = Cluster::start("hostile-registries").await;
    c.controller_env.push(("TENON_POLICY_OCI_SOURCES".into(), registry.addr.clone()));
    c.controller_env.push(("TENON_POLICY_OCI_CACHE".into(), c.dir.join("oci").display().to_string()));
    c.controller_env.push(("TENON_POLICY_OCI_PULL_TIMEOUT".into(), "5s".into()));
    apply_lab_general(&c);
    for pool in ["big-manifest", "endless", "big-blob"] {
        c.apply_yaml(pool, &nodepool(pool, &format!("oci://{}/team/{pool}@sha256:{digest}", registry.addr)));
    }
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;

    let message = unavailable_with(&c, "big-manifest", "over the limit of 4194304").await;
    assert!(message.contains("the last pull failed") && message.contains("the manifest is"), "{message}");
    unavailable_with(&c, "endless", "not finished within 5 s").await;
    let message = unavailable_with(&c, "big-blob", "the component is 2147483648 bytes or more").await;
    assert!(message.len() < 2000, "the registry's text is cut short: {message}");
    a_new_pod_is_nominated_within_5s(&c, "hostile registries").await;
    let peak = controller_peak_rss(&c);
    eprintln!("e2e: controller peak RSS {} MiB with hostile registries", peak >> 20);
    assert!(peak < MEMORY_LIMIT, "the controller held {} MiB at its peak", peak >> 20);
    c.assert_controller_running();
}

/// A valid component of about `bytes` whose every function Cranelift must compile: each
/// body adds to its parameter again and again. `nonce` makes it unlike any compiled before
/// (the precompile cache would otherwise make the second run instant).
fn slow_to_compile(bytes: usize, nonce: &str) -> Vec<u8> {
    use wasm_encoder::{
        CodeSection, Component, CustomSection, Function, FunctionSection, Module, ModuleSection, TypeSection, ValType,
    };
    // local.get 0; i32.const 1; i32.add; local.set 0
    const STEP: [u8; 7] = [0x20, 0x00, 0x41, 0x01, 0x6a, 0x21, 0x00];
    let per_function = 64 << 10;
    let functions = bytes.div_ceil(per_function) as u32;
    let mut module = Module::new();
    let mut types = TypeSection::new();
    types.ty().function([ValType::I32], [ValType::I32]);
    module.section(&types);
    let mut funcs = FunctionSection::new();
    for _ in 0..functions {
        funcs.function(0);
    }
    module.section(&funcs);
    let body: Vec<u8> = STEP.iter().copied().cycle().take(per_function / STEP.len() * STEP.len()).collect();
    let mut code = CodeSection::new();
    for _ in 0..functions {
        let mut f = Function::new([]);
        f.raw(body.iter().copied());
        f.raw([0x20, 0x00, 0x0b]); // local.get 0; end
        code.function(&f);
    }
    module.section(&code);
    module.section(&CustomSection { name: "tenon-test-nonce".into(), data: nonce.as_bytes().into() });
    let mut component = Component::new();
    component.section(&ModuleSection(&module));
    component.finish()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_component_slow_to_compile_holds_up_no_other_nodepool() {
    let mut c = Cluster::start("compile-bomb").await;
    let store = c.policy_store(&[]);
    let nonce = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
    // As large as the store takes (64 MiB; the encoding adds a few bytes to the code).
    let limit = tenon_api::policy::oci_media::MAX_LAYER_BYTES;
    let component = slow_to_compile(limit as usize - (64 << 10), &nonce);
    assert!(component.len() as u64 <= limit && component.len() as u64 > limit - (1 << 20), "{}", component.len());
    std::fs::write(store.join("slow-scorer.wasm"), component).unwrap();
    c.controller_env.push(("TENON_POLICY_DIR".into(), store.display().to_string()));
    // Its own precompile cache: nothing compiled here outlives the test.
    c.controller_env.push(("XDG_CACHE_HOME".into(), c.dir.join("cache").display().to_string()));
    apply_lab_general(&c);
    c.apply_yaml("slow", &nodepool("slow", "slow-scorer"));
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;

    // From its first status on, the NodePool says its policy is not there yet: it fails
    // safe while compiling, and a client waiting for PolicyHealthy=True must not start early.
    eventually(Duration::from_secs(90), "slow: PolicyUnavailable saying \"still compiling\"", || async {
        let (status, _, message) = c.nodepool_condition("slow", "PolicyHealthy").await?;
        assert_ne!(status, "True", "slow: reported healthy while its policy compiles: {message}");
        message.contains("still compiling").then_some(())
    })
    .await;
    a_new_pod_is_nominated_within_5s(&c, "a component slow to compile").await;
    // It was compiling all along: the stand-in is slow enough to show something.
    let (_, _, message) = c.nodepool_condition("slow", "PolicyHealthy").await.expect("the condition");
    assert!(message.contains("still compiling"), "{message}");
    c.assert_controller_running();
}
