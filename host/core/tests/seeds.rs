//! The runbooks' experiments at the level of the decision core: their own YAML, the real EC2
//! catalog (us-east-1), and the plan Karpenter would make.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1 as core;
use std::sync::Arc;
use tenon_api::NodePool;
use tenon_core::cached_pod;
use tenon_core::catalog::{AwsCatalogOptions, aws};
use tenon_core::instancetype::InstanceType;
use tenon_core::model::{ClusterSnapshot, Node};
use tenon_core::requirements::{Requirement, Requirements};
use tenon_core::resources::Resources;
use tenon_core::scorer::PriceScorer;
use tenon_core::{convert, schedule};

fn seed(path: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../../examples/seeds/{path}",
        std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo test")
    ))
    .unwrap()
}

fn catalog() -> Arc<Vec<InstanceType>> {
    Arc::new(aws(&AwsCatalogOptions::default()).unwrap())
}

fn nodepool(path: &str, cat: &Arc<Vec<InstanceType>>) -> tenon_core::model::NodePoolTemplate {
    let np: NodePool = serde_yaml::from_str(&seed(path)).unwrap();
    convert::nodepool(&np, cat.clone()).unwrap()
}

/// `replicas` pending pods of a Deployment's template.
fn replicas(dep: &Deployment, n: usize) -> Vec<tenon_core::model::Pod> {
    let tpl = dep.spec.as_ref().unwrap().template.clone();
    let name = dep.metadata.name.clone().unwrap();
    (0..n)
        .map(|i| {
            let mut meta = tpl.metadata.clone().unwrap_or_default();
            meta.name = Some(format!("{name}-{i}"));
            meta.namespace = dep.metadata.namespace.clone();
            meta.uid = Some(format!("uid-{i:04}"));
            convert::pod(&cached_pod::Pod { metadata: meta, spec: tpl.spec.clone().map(Into::into), status: None })
                .unwrap()
        })
        .collect()
}

fn deployment(path: &str, doc: usize) -> Deployment {
    let text = seed(path);
    let docs: Vec<serde_yaml::Value> =
        serde_yaml::Deserializer::from_str(&text).map(|d| serde::Deserialize::deserialize(d).unwrap()).collect();
    serde_yaml::from_value(docs[doc].clone()).unwrap()
}

fn label<'a>(cat: &'a [InstanceType], name: &str, key: &str) -> &'a str {
    cat.iter().find(|t| t.name == name).unwrap().label(key).unwrap()
}

#[test]
fn lab_general_positive_rollout() {
    let cat = catalog();
    let pool = nodepool("lab-general/nodepool-lab-general.yaml", &cat);
    let pods = replicas(&deployment("lab-general/karpenter-positive.yaml", 1), 8);
    let snap = ClusterSnapshot { nodepools: vec![pool], pods, ..Default::default() };
    let plan = schedule(&snap, &PriceScorer);
    assert!(plan.unschedulable.is_empty(), "{}", plan.render(&snap));
    let placed: usize = plan.nodeclaims.iter().map(|c| c.pods.len()).sum();
    assert_eq!(placed, 8);
    for nc in &plan.nodeclaims {
        assert_eq!(nc.nodepool_name, "lab-general");
        let names = nc.instance_type_names(&snap);
        assert!(!names.is_empty());
        for t in &names {
            assert!(["c", "m", "r"].contains(&label(&cat, t, "karpenter.k8s.aws/instance-category")), "{t}");
            assert!(label(&cat, t, "karpenter.k8s.aws/instance-generation").parse::<u32>().unwrap() > 4, "{t}");
            assert_eq!(label(&cat, t, "kubernetes.io/arch"), "amd64", "{t}");
        }
        assert_eq!(nc.requirements.get("karpenter.sh/capacity-type").unwrap().values(), ["on-demand"]);
        assert_eq!(nc.requirements.get("capacity.example.io/pool").unwrap().values(), ["lab-general"]);
        // Cheapest first: no later option is cheaper on-demand than the first.
        let price = |t: &str| {
            cat.iter()
                .find(|x| x.name == t)
                .unwrap()
                .offerings
                .iter()
                .filter(|o| o.capacity_type == "on-demand")
                .map(|o| o.price)
                .fold(f64::MAX, f64::min)
        };
        assert!(names.iter().all(|t| price(t) >= price(names[0])), "first option is the cheapest");
        // Every option can hold the pods it was planned for.
        for t in &names {
            assert!(
                nc.requests.fits_in(cat.iter().find(|x| &x.name == t).unwrap().allocatable()),
                "{t} too small for {}",
                nc.requests
            );
        }
    }
}

#[test]
fn impossible_arch_stays_pending_with_the_reason() {
    let cat = catalog();
    let pool = nodepool("lab-general/nodepool-lab-general.yaml", &cat);
    let p: cached_pod::Pod = serde_yaml::from_str(&seed("lab-general/karpenter-negative.yaml")).unwrap();
    let snap = ClusterSnapshot { nodepools: vec![pool], pods: vec![convert::pod(&p).unwrap()], ..Default::default() };
    let plan = schedule(&snap, &PriceScorer);
    assert!(plan.nodeclaims.is_empty());
    assert_eq!(plan.unschedulable.len(), 1);
    let reason = &plan.unschedulable[0].reason;
    assert!(
        reason.contains("nodepool lab-general: kubernetes.io/arch In [arm64] conflicts with In [amd64]"),
        "{reason}"
    );
}

fn amd_and_fallback(cat: &Arc<Vec<InstanceType>>) -> Vec<tenon_core::model::NodePoolTemplate> {
    vec![
        nodepool("amd-fallback/node-pool-default-fallback.yaml", cat),
        nodepool("amd-fallback/node-pool-default-amd.yaml", cat),
    ]
}

/// Existing nodes of `pool` adding up to `vcpus` cores.
fn existing_nodes(pool: &str, vcpus: i64, each: i64) -> Vec<Node> {
    (0..vcpus / each)
        .map(|i| {
            let name = format!("{pool}-node-{i}");
            let labels = [("karpenter.sh/nodepool", pool), ("kubernetes.io/hostname", name.as_str())];
            Node {
                name: name.clone(),
                nodepool: Some(pool.into()),
                requirements: Requirements::from_iter(labels.iter().map(|(k, v)| Requirement::in_values(k, [*v]))),
                labels: labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
                capacity: Resources::new(each * 1000, (each * 4) << 30, 110),
                // Full: nothing more fits.
                allocatable: Resources::new(0, 0, 0),
                ..Default::default()
            }
        })
        .collect()
}

#[test]
fn weights_pick_default_amd_first() {
    let cat = catalog();
    let pods = replicas(&deployment("amd-fallback/test.yaml", 0), 10);
    let snap = ClusterSnapshot { nodepools: amd_and_fallback(&cat), pods, ..Default::default() };
    let plan = schedule(&snap, &PriceScorer);
    assert!(plan.unschedulable.is_empty(), "{}", plan.render(&snap));
    assert!(!plan.nodeclaims.is_empty());
    for nc in &plan.nodeclaims {
        assert_eq!(nc.nodepool_name, "default-amd");
        for t in nc.instance_type_names(&snap) {
            assert_eq!(label(&cat, t, "karpenter.k8s.aws/instance-cpu-manufacturer"), "amd", "{t}");
            assert!(["8", "16", "32", "64"].contains(&label(&cat, t, "karpenter.k8s.aws/instance-cpu")), "{t}");
            assert!(["6", "7"].contains(&label(&cat, t, "karpenter.k8s.aws/instance-generation")), "{t}");
        }
    }
}

#[test]
fn fallback_serves_once_default_amd_reaches_its_cpu_limit() {
    let cat = catalog();
    let pods = replicas(&deployment("amd-fallback/test.yaml", 0), 10);
    let snap = ClusterSnapshot {
        nodepools: amd_and_fallback(&cat),
        pods,
        nodes: existing_nodes("default-amd", 800, 32),
        ..Default::default()
    };
    let plan = schedule(&snap, &PriceScorer);
    assert!(plan.unschedulable.is_empty(), "{}", plan.render(&snap));
    assert!(plan.nodeclaims.iter().all(|nc| nc.nodepool_name == "default-fallback"), "{}", plan.render(&snap));
}

#[test]
fn both_pools_at_their_limits_explain_each_limit() {
    let cat = catalog();
    let pods = replicas(&deployment("amd-fallback/test.yaml", 0), 1);
    let mut nodes = existing_nodes("default-amd", 800, 32);
    nodes.extend(existing_nodes("default-fallback", 200, 8));
    let snap = ClusterSnapshot { nodepools: amd_and_fallback(&cat), pods, nodes, ..Default::default() };
    let plan = schedule(&snap, &PriceScorer);
    assert!(plan.nodeclaims.is_empty());
    let reason = &plan.unschedulable[0].reason;
    assert!(reason.contains("nodepool default-amd: limit cpu=800 reached"), "{reason}");
    assert!(reason.contains("nodepool default-fallback: limit cpu=200 reached"), "{reason}");
}

/// The same experiment through the conversion a controller uses: raw objects in, and only
/// pods kube-scheduler marked unschedulable are provisioned for.
#[test]
fn snapshot_from_cluster_objects() {
    let cat = catalog();
    let np: NodePool = serde_yaml::from_str(&seed("lab-general/nodepool-lab-general.yaml")).unwrap();
    let dep = deployment("lab-general/karpenter-positive.yaml", 1);
    let tpl = dep.spec.as_ref().unwrap().template.clone();
    let unschedulable = tenon_core::cached_pod::PodStatus {
        phase: Some("Pending".into()),
        conditions: Some(vec![core::PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    let mut pods: Vec<cached_pod::Pod> = (0..3)
        .map(|i| {
            let mut meta = tpl.metadata.clone().unwrap_or_default();
            meta.name = Some(format!("inflate-{i}"));
            meta.namespace = Some("karpenter-lab".into());
            cached_pod::Pod {
                metadata: meta,
                spec: tpl.spec.clone().map(Into::into),
                status: Some(unschedulable.clone()),
            }
        })
        .collect();
    // Not yet tried by kube-scheduler, and gated: neither is provisioned for.
    let mut fresh = pods[0].clone();
    fresh.metadata.name = Some("fresh".into());
    fresh.status = Some(tenon_core::cached_pod::PodStatus { phase: Some("Pending".into()), ..Default::default() });
    let mut gated = pods[0].clone();
    gated.metadata.name = Some("gated".into());
    gated.spec.as_mut().unwrap().scheduling_gates = Some(vec![core::PodSchedulingGate { name: "wait".into() }]);
    pods.extend([fresh, gated]);
    let objects = convert::ClusterObjects {
        nodepools: vec![std::sync::Arc::new(np)],
        pods: pods.into_iter().map(std::sync::Arc::new).collect(),
        ..Default::default()
    };
    let (snap, errors) = convert::snapshot(&objects, &|_| cat.clone(), 0);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(snap.pods.len(), 3);
    let plan = schedule(&snap, &PriceScorer);
    assert_eq!(plan.nodeclaims.len(), 1);
    assert_eq!(plan.nodeclaims[0].pods.len(), 3);
}

/// The first runbook's clean-up: inflate scaled to 0 leaves lab-general's node empty; with
/// `consolidateAfter: 10m` it is removed ten minutes after its last pod left, not before.
#[test]
fn lab_general_scale_to_zero_consolidates_after_ten_minutes() {
    use tenon_core::disruption::{DefaultPolicies, Method, disrupt};
    use tenon_core::model::ClaimInfo;
    let cat = catalog();
    let pool = nodepool("lab-general/nodepool-lab-general.yaml", &cat);
    assert_eq!(pool.disruption.consolidate_after, Some(600));
    let it = cat.iter().find(|t| t.name == "c6a.4xlarge").unwrap();
    let mut labels = it.labels();
    for (k, v) in [
        ("topology.kubernetes.io/zone", "us-east-1a"),
        ("karpenter.sh/capacity-type", "on-demand"),
        ("karpenter.sh/nodepool", "lab-general"),
        ("capacity.example.io/pool", "lab-general"),
        ("kubernetes.io/hostname", "ip-10-0-1-1"),
    ] {
        labels.insert(k.into(), v.into());
    }
    let t0 = 1_795_996_800;
    let node = Node {
        name: "ip-10-0-1-1".into(),
        nodepool: Some("lab-general".into()),
        requirements: labels.iter().map(|(k, v)| Requirement::in_values(k, [v.clone()])).collect(),
        labels,
        allocatable: it.allocatable().clone(),
        capacity: it.capacity.clone(),
        claim: Some(ClaimInfo {
            nodeclaim: "lab-general-abcde".into(),
            created: t0 - 3600,
            initialized: true,
            ready: true,
            // The last inflate pod left at t0.
            last_pod_event: Some(t0),
            instance_type: "c6a.4xlarge".into(),
            zone: "us-east-1a".into(),
            capacity_type: "on-demand".into(),
            price: 0.612,
            nodepool_hash: Some(pool.hash.clone()),
            nodepool_hash_version: Some(tenon_api::hash::NODEPOOL_HASH_VERSION.into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut snap = ClusterSnapshot { now: t0 + 599, nodepools: vec![pool], nodes: vec![node], ..Default::default() };
    assert!(disrupt(&snap, &DefaultPolicies).plan.is_none(), "9m59s after: not yet");
    snap.now = t0 + 600;
    let plan = disrupt(&snap, &DefaultPolicies).plan.expect("10m after: consolidated");
    assert_eq!(plan.method, Method::Emptiness);
    assert_eq!(plan.candidates, vec![0]);
}
