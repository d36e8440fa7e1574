//! The runbooks' experiments, end to end: their manifests applied unchanged with kubectl to
//! the API emulator, the real `tenon controller`, moto as EC2, and the stand-ins.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tenon_api::NodeClaim;
use tenon_e2e::scenario::{
    INFLATE_NS, all_bound, apply_lab, apply_lab_general, nodeclass_ready, scale_inflate, unschedulable,
};
use tenon_e2e::{Cluster, eventually, has_condition, kubelet, label};

/// karpenter:pkg/controllers/nodeclaim/lifecycle/launch_test.go:72
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_general_positive_inflate_gets_cmr_gen5_plus_on_demand_amd64_nodes() {
    let mut c = Cluster::start("positive").await;
    apply_lab_general(&c);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;

    // The runbook's step: scale the inflate Deployment to 8.
    let scaled = Instant::now();
    scale_inflate(&c, 8);
    let pending = eventually(Duration::from_secs(20), "8 pods marked Unschedulable", || async {
        let pods = c.pods(INFLATE_NS).await;
        (pods.len() == 8 && unschedulable(&pods) == 8).then(Instant::now)
    })
    .await;
    let launched = eventually(Duration::from_secs(60), "a Launched NodeClaim", || async {
        c.nodeclaims().await.iter().any(|nc| has_condition(nc, "Launched")).then(Instant::now)
    })
    .await;
    let all_bound = all_bound(&c, INFLATE_NS, 8, Duration::from_secs(90)).await;
    c.assert_controller_running();

    let claims = c.nodeclaims().await;
    assert!(!claims.is_empty());
    let catalog = kubelet::catalog();
    let instances = c.instances().await;
    assert_eq!(instances.len(), claims.len(), "one instance per NodeClaim: {instances:#?}");
    let nodes: Vec<Node> = Api::<Node>::all(c.client.clone()).list(&ListParams::default()).await.unwrap().items;
    for nc in &claims {
        let name = nc.metadata.name.as_deref().unwrap();
        assert!(name.starts_with("lab-general-"), "{name}");
        assert_eq!(label(&nc.metadata.labels, "karpenter.sh/nodepool"), Some("lab-general"));
        assert_eq!(label(&nc.metadata.labels, "capacity.example.io/pool"), Some("lab-general"));
        let owner = nc.metadata.owner_references.as_ref().and_then(|o| o.first()).expect("owned by its NodePool");
        assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("NodePool", "lab-general"));
        for cond in ["Launched", "Registered", "Initialized", "Ready"] {
            assert!(has_condition(nc, cond), "{name} is not {cond}: {:#?}", nc.status);
        }
        let st = nc.status.as_ref().unwrap();
        let pid = st.provider_id.as_deref().expect("providerID");
        let instance = instances.iter().find(|i| i.provider_id == pid).expect("its instance is live in EC2");
        assert_eq!(instance.nodeclaim(), Some(name), "the instance is tagged with its NodeClaim");
        let node = nodes.iter().find(|n| n.metadata.name.as_deref() == st.node_name.as_deref()).expect("its Node");
        assert_eq!(label(&node.metadata.labels, "capacity.example.io/pool"), Some("lab-general"), "labels synced");
        let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        assert!(!taints.iter().any(|t| t.key == "karpenter.sh/unregistered"), "registration removed the taint");
    }
    let pods = c.pods(INFLATE_NS).await;
    let first = pods[0].metadata.name.clone().unwrap();
    let nominated = c.events_for(&first).await.into_iter().find(|e| e.reason.as_deref() == Some("Nominated"));
    let message = nominated.and_then(|e| e.message).unwrap_or_default();
    assert!(message.starts_with("Pod should schedule on: nodeclaim/lab-general-"), "{first}: {message:?}");
    for i in &instances {
        let t = catalog.get(&i.instance_type).expect("a real instance type");
        let l = t.labels();
        let category = l["karpenter.k8s.aws/instance-category"].as_str();
        let generation: u32 = l["karpenter.k8s.aws/instance-generation"].parse().unwrap();
        assert!(["c", "m", "r"].contains(&category), "{} is not c/m/r", i.instance_type);
        assert!(generation > 4, "{} is generation {generation}", i.instance_type);
        assert_eq!(l["kubernetes.io/arch"], "amd64", "{}", i.instance_type);
        assert_eq!(i.capacity_type, "on-demand", "{}", i.instance_type);
    }
    let decision = c.metric("tenon_provisioning_decision_seconds").await.unwrap_or(f64::NAN);
    eprintln!(
        "e2e timing (positive): scale→8 pods Unschedulable {:.2}s (stand-ins); Unschedulable→first Launched {:.2}s \
         (incl. batch idle 1s; last decision {:.1} ms); Launched→all bound {:.2}s (stand-ins' join {:?} + ready {:?}); \
         NodeClaims {}, instance types {:?}",
        pending.duration_since(scaled).as_secs_f64(),
        launched.duration_since(pending).as_secs_f64(),
        decision * 1000.0,
        all_bound.duration_since(launched).as_secs_f64(),
        tenon_e2e::JOIN_DELAY,
        tenon_e2e::READY_DELAY,
        claims.len(),
        instances.iter().map(|i| i.instance_type.as_str()).collect::<Vec<_>>(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lab_general_negative_impossible_arch_stays_pending_with_the_reason() {
    let mut c = Cluster::start("negative").await;
    // (`kubectl create namespace` sends protobuf, which the emulator does not speak.)
    c.apply_yaml("namespace", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: karpenter-lab\n");
    apply_lab(&c, "karpenter-negative.yaml");
    c.start_controller();
    // A decision made before the EC2NodeClass is resolved says the NodePool is not Ready;
    // the next (a pending pod is decided again every 10 s) names the conflict.
    let event = eventually(Duration::from_secs(60), "a FailedScheduling Event on impossible-arch", || async {
        c.events_for("impossible-arch").await.into_iter().find(|e| {
            e.reason.as_deref() == Some("FailedScheduling")
                && e.message.as_deref().is_some_and(|m| m.contains("kubernetes.io/arch"))
        })
    })
    .await;
    let message = event.message.unwrap_or_default();
    assert!(
        message.contains("nodepool lab-general: kubernetes.io/arch In [arm64] conflicts with In [amd64]"),
        "{message}"
    );
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    // Several more passes: still nothing.
    c.reconciled("provisioner", 8).await;
    c.assert_controller_running();
    assert!(c.nodeclaims().await.is_empty(), "no NodeClaim for an impossible pod");
    assert!(c.instances().await.is_empty(), "no instance for an impossible pod");
    let pod = c.pods(INFLATE_NS).await.into_iter().find(|p| p.metadata.name.as_deref() == Some("impossible-arch"));
    assert!(pod.and_then(|p| p.spec).is_some_and(|s| s.node_name.is_none()), "still Pending");
    // Once, not once per batch (a decision before the EC2NodeClass was resolved said
    // something else, once).
    let events = c.events_for("impossible-arch").await;
    let failed: Vec<_> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("FailedScheduling"))
        .filter(|e| e.message.as_deref().is_some_and(|m| m.contains("kubernetes.io/arch")))
        .collect();
    assert_eq!(failed.len(), 1, "one Event (its count grows), not one per batch: {failed:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn amd_pool_first_then_fallback_when_its_cpu_limit_is_reached() {
    let mut c = Cluster::start("fallback").await;
    c.kubectl(&["apply", "-k", "examples/seeds/amd-fallback"]);
    // The runbook's limit experiment, at lab scale: default-amd may hold 16 cores.
    c.kubectl(&["patch", "nodepool", "default-amd", "--type", "merge", "-p", r#"{"spec":{"limits":{"cpu":"16"}}}"#]);
    c.start_controller();
    nodeclass_ready(&c, "default").await;
    c.kubectl(&["apply", "-f", "examples/seeds/amd-fallback/test.yaml"]);
    all_bound(&c, "default", 10, Duration::from_secs(90)).await;
    c.assert_controller_running();
    let catalog = kubelet::catalog();
    let claims: Vec<NodeClaim> = c.nodeclaims().await;
    let mut cpu_by_pool: BTreeMap<String, i64> = BTreeMap::new();
    for nc in &claims {
        let pool = label(&nc.metadata.labels, "karpenter.sh/nodepool").unwrap().to_string();
        let it = label(&nc.metadata.labels, "node.kubernetes.io/instance-type").expect("launched type label");
        let t = catalog.get(it).unwrap();
        if pool == "default-amd" {
            assert_eq!(t.labels()["karpenter.k8s.aws/instance-cpu-manufacturer"], "amd", "{it}");
        }
        *cpu_by_pool.entry(pool).or_default() += t.capacity.cpu / 1000;
    }
    assert!(
        cpu_by_pool.get("default-amd").is_some_and(|c| *c > 0 && *c <= 16),
        "weight 100 first, within its limit: {cpu_by_pool:?}"
    );
    assert!(
        cpu_by_pool.get("default-fallback").is_some_and(|c| *c > 0),
        "the rest on the fallback pool: {cpu_by_pool:?}"
    );
    assert_eq!(c.instances().await.len(), claims.len());
}
