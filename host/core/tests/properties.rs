//! Invariants of the scheduling simulation over random clusters.

use crate::support;

use proptest::prelude::*;
use std::collections::BTreeMap;
use support::*;
use tenon_core::model::{ClusterSnapshot, NodePoolTemplate, Pod};
use tenon_core::requirements::Operator::*;
use tenon_core::scorer::PriceScorer;
use tenon_core::taints::{Effect, Taint, Toleration, untolerated};
use tenon_core::{ProvisioningPlan, schedule};

#[derive(Clone, Debug)]
struct PodSpec {
    cpu: i64,
    mem: i64,
    arch: Option<&'static str>,
    zone: Option<&'static str>,
    app: usize,
    anti: bool,
    spread: bool,
    tolerate: bool,
}

fn pod_spec() -> impl Strategy<Value = PodSpec> {
    (
        prop::sample::select(vec![100i64, 500, 1000, 1500, 3000, 7000, 20000]),
        1i64..8,
        prop::option::of(prop::sample::select(vec!["amd64", "arm64"])),
        prop::option::of(prop::sample::select(vec!["zone-a", "zone-b", "zone-c"])),
        0usize..3,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(cpu, mem, arch, zone, app, anti, spread, tolerate)| PodSpec {
            cpu,
            mem,
            arch,
            zone,
            app,
            anti,
            spread,
            tolerate,
        })
}

#[derive(Clone, Debug)]
struct PoolSpec {
    weight: i64,
    arch: Option<&'static str>,
    cpu_limit: Option<i64>,
    tainted: bool,
}

fn pool_spec() -> impl Strategy<Value = PoolSpec> {
    (0i64..3, prop::option::of(prop::sample::select(vec!["amd64", "arm64"])), prop::option::of(2i64..40), any::<bool>())
        .prop_map(|(weight, arch, cpu_limit, tainted)| PoolSpec { weight, arch, cpu_limit, tainted })
}

fn build(pools: &[PoolSpec], pods: &[PodSpec], existing: usize) -> ClusterSnapshot {
    let nodepools: Vec<NodePoolTemplate> = pools
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut p = pool(&format!("pool-{i}"));
            p.weight = s.weight;
            if let Some(a) = s.arch {
                p.requirements.add(req("kubernetes.io/arch", In, &[a]));
            }
            if let Some(l) = s.cpu_limit {
                p.limits.insert("cpu".into(), l * 1000);
            }
            if s.tainted {
                p.taints.push(Taint { key: "dedicated".into(), value: "x".into(), effect: Effect::NoSchedule });
            }
            p
        })
        .collect();
    let pods: Vec<Pod> = pods
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut p = pod(&format!("p{i:03}"), s.cpu, s.mem);
            let app = format!("app{}", s.app);
            p.labels = labels(&[("app", &app)]);
            let mut sel = Vec::new();
            if let Some(a) = s.arch {
                sel.push(req("kubernetes.io/arch", In, &[a]));
            }
            if let Some(z) = s.zone {
                sel.push(req("topology.kubernetes.io/zone", In, &[z]));
            }
            p.node_selector = reqs(&sel);
            if s.anti {
                p.anti_affinity.push(term("kubernetes.io/hostname", &app));
            }
            if s.spread {
                p.spread.push(spread("topology.kubernetes.io/zone", &app, false));
            }
            if s.tolerate {
                p.tolerations.push(Toleration {
                    key: "dedicated".into(),
                    exists: true,
                    value: String::new(),
                    effect: None,
                });
            }
            p
        })
        .collect();
    let mut snap = ClusterSnapshot { nodepools, pods, ..Default::default() };
    for i in 0..existing {
        snap.nodes.push(node(&format!("n{i}"), "pool-0", ZONES[i % 3], 4000));
    }
    snap
}

fn check_invariants(snap: &ClusterSnapshot, plan: &ProvisioningPlan) -> Result<(), TestCaseError> {
    // Every pending pod is accounted for exactly once.
    let mut seen = BTreeMap::new();
    for nc in &plan.nodeclaims {
        for &p in &nc.pods {
            *seen.entry(p).or_insert(0) += 1;
        }
    }
    for n in &plan.nominations {
        *seen.entry(n.pod).or_insert(0) += 1;
    }
    for u in &plan.unschedulable {
        *seen.entry(u.pod).or_insert(0) += 1;
        prop_assert!(!u.reason.is_empty());
    }
    prop_assert_eq!(seen.len(), snap.pods.len());
    prop_assert!(seen.values().all(|&c| c == 1));

    for nc in &plan.nodeclaims {
        let pool = &snap.nodepools[nc.nodepool];
        let cat = &pool.instance_types;
        prop_assert!(!nc.instance_types.is_empty());
        for &t in &nc.instance_types {
            let it = &cat[t as usize];
            // No node over its allocatable, whichever option launches.
            prop_assert!(nc.requests.fits_in(it.allocatable()), "{} cannot hold {}", it.name, nc.requests);
            prop_assert!(
                nc.requirements.intersects(&it.requirements).is_ok(),
                "{} violates {}",
                it.name,
                nc.requirements
            );
            prop_assert!(it.compatible_offerings(&nc.requirements).next().is_some());
        }
        let mut apps = BTreeMap::new();
        for &p in &nc.pods {
            let pod = &snap.pods[p];
            prop_assert!(nc.requirements.is_compatible(&pod.node_selector), "{} on {}", pod.name, nc.requirements);
            prop_assert!(untolerated(&pool.taints, &pod.tolerations, false).is_none());
            if !pod.anti_affinity.is_empty() {
                *apps.entry(pod.labels["app"].clone()).or_insert(0) += 1;
            }
        }
        // Hostname anti-affinity: at most one pod of an anti-affine app per node.
        for (p, count) in
            nc.pods.iter().map(|&p| &snap.pods[p]).filter_map(|p| apps.get(&p.labels["app"]).map(|c| (p, *c)))
        {
            let repelled =
                nc.pods.iter().any(|&q| snap.pods[q].anti_affinity.iter().any(|t| t.selector.matches(&p.labels)));
            prop_assert!(!(repelled && count > 1), "two pods of app {} share a node", p.labels["app"]);
        }
    }
    // Nominations never overcommit a node.
    for node in &snap.nodes {
        let used: i64 =
            plan.nominations.iter().filter(|n| n.node == node.name).map(|n| snap.pods[n.pod].requests.cpu).sum();
        prop_assert!(used <= node.allocatable.cpu);
    }
    // Limits hold even if every NodeClaim launches as its largest option.
    for (i, pool) in snap.nodepools.iter().enumerate() {
        if let Some(limit) = pool.limits.get("cpu") {
            let existing: i64 = snap
                .nodes
                .iter()
                .filter(|n| n.nodepool.as_deref() == Some(pool.name.as_str()))
                .map(|n| n.capacity.cpu)
                .sum();
            let planned: i64 = plan
                .nodeclaims
                .iter()
                .filter(|nc| nc.nodepool == i)
                .map(|nc| {
                    nc.instance_types.iter().map(|&t| pool.instance_types[t as usize].capacity.cpu).max().unwrap_or(0)
                })
                .sum();
            prop_assert!(
                existing + planned <= *limit || planned == 0,
                "pool {} limit {limit} < {existing} + {planned}",
                pool.name
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn plans_respect_every_constraint(pools in prop::collection::vec(pool_spec(), 1..4), pods in prop::collection::vec(pod_spec(), 0..40), existing in 0usize..4) {
        let snap = build(&pools, &pods, existing);
        let plan = schedule(&snap, &PriceScorer);
        check_invariants(&snap, &plan)?;
    }

    #[test]
    fn plans_are_deterministic(pools in prop::collection::vec(pool_spec(), 1..3), pods in prop::collection::vec(pod_spec(), 0..30)) {
        let snap = build(&pools, &pods, 1);
        let a = schedule(&snap, &PriceScorer).render(&snap);
        let b = schedule(&snap.clone(), &PriceScorer).render(&snap);
        prop_assert_eq!(a, b);
    }
}
