//! One test per scheduling feature, on small scenarios a reader can check by hand.

use crate::support;

use support::*;
use tenon_core::model::{DaemonSet, HostPort};
use tenon_core::requirements::Operator::*;
use tenon_core::resources::Resources;
use tenon_core::scorer::PriceScorer;
use tenon_core::taints::{Effect, Taint, Toleration};
use tenon_core::{ClusterSnapshot, ProvisioningPlan, schedule};

fn run(s: &ClusterSnapshot) -> ProvisioningPlan {
    schedule(s, &PriceScorer)
}

#[test]
fn packs_onto_the_cheapest_type_that_fits() {
    let s = snapshot(vec![pool("p")], (0..3).map(|i| pod(&format!("a{i}"), 1000, 1)).collect());
    let plan = run(&s);
    assert_eq!(plan.nodeclaims.len(), 1);
    let names = plan.nodeclaims[0].instance_type_names(&s);
    // 3 cpu + pods do not fit 2-cpu types; the arm medium is the cheapest 4-cpu type.
    assert_eq!(names[0], "arm.medium");
    assert!(!names.contains(&"gp.small"));
}

#[test]
fn existing_capacity_is_used_before_new_nodes() {
    let mut s = snapshot(vec![pool("p")], vec![pod("a", 1000, 1)]);
    s.nodes.push(node("n1", "p", "zone-a", 4000));
    let plan = run(&s);
    assert!(plan.nodeclaims.is_empty());
    assert_eq!(plan.nominations.len(), 1);
    assert_eq!(plan.nominations[0].node, "n1");
}

#[test]
fn in_flight_nodeclaims_prevent_double_provisioning() {
    let mut s = snapshot(vec![pool("p")], vec![pod("a", 1000, 1)]);
    let mut claim = node("claim-1", "p", "zone-a", 2000);
    claim.in_flight = true;
    s.nodes.push(claim);
    let plan = run(&s);
    assert!(plan.nodeclaims.is_empty());
    assert_eq!(plan.nominations[0].node, "claim-1");
}

#[test]
fn taints_need_tolerations_and_startup_taints_do_not() {
    let mut p = pool("tainted");
    p.taints.push(Taint { key: "dedicated".into(), value: "ci".into(), effect: Effect::NoSchedule });
    p.startup_taints.push(Taint { key: "agent-not-ready".into(), value: String::new(), effect: Effect::NoExecute });
    let plan = run(&snapshot(vec![p.clone()], vec![pod("a", 100, 1)]));
    assert!(
        plan.unschedulable[0].reason.contains("did not tolerate taint dedicated=ci:NoSchedule"),
        "{}",
        plan.unschedulable[0].reason
    );
    let mut tolerant = pod("b", 100, 1);
    tolerant.tolerations.push(Toleration { key: "dedicated".into(), exists: false, value: "ci".into(), effect: None });
    let plan = run(&snapshot(vec![p], vec![tolerant]));
    assert_eq!(plan.nodeclaims.len(), 1);
}

#[test]
fn node_affinity_terms_are_tried_in_order() {
    let mut a = pod("a", 100, 1);
    a.required_node_affinity =
        vec![reqs(&[req("kubernetes.io/arch", In, &["s390x"])]), reqs(&[req("kubernetes.io/arch", In, &["arm64"])])];
    let s = snapshot(vec![pool("p")], vec![a]);
    let plan = run(&s);
    assert_eq!(plan.nodeclaims.len(), 1);
    assert!(plan.nodeclaims[0].instance_type_names(&s).iter().all(|t| t.starts_with("arm.")));
}

#[test]
fn preferred_node_affinity_is_honoured_then_relaxed() {
    let mut a = pod("a", 100, 1);
    a.preferred_node_affinity = vec![(10, reqs(&[req("topology.kubernetes.io/zone", In, &["zone-b"])]))];
    let plan = run(&snapshot(vec![pool("p")], vec![a.clone()]));
    assert_eq!(zone_of(&plan.nodeclaims[0].requirements).as_deref(), Some("zone-b"));
    a.preferred_node_affinity = vec![(10, reqs(&[req("topology.kubernetes.io/zone", In, &["zone-z"])]))];
    let plan = run(&snapshot(vec![pool("p")], vec![a]));
    assert_eq!(plan.nodeclaims.len(), 1, "an impossible preference is dropped");
}

#[test]
fn zonal_spread_balances_zones() {
    let pods = (0..6)
        .map(|i| {
            let mut p = pod(&format!("w{i}"), 100, 1);
            p.labels = labels(&[("app", "web")]);
            p.spread.push(spread("topology.kubernetes.io/zone", "web", false));
            p
        })
        .collect();
    let plan = run(&snapshot(vec![pool("p")], pods));
    let mut per_zone = std::collections::BTreeMap::new();
    for nc in &plan.nodeclaims {
        *per_zone.entry(zone_of(&nc.requirements).expect("every spread NodeClaim is pinned to a zone")).or_insert(0) +=
            nc.pods.len();
    }
    assert_eq!(per_zone.values().copied().collect::<Vec<_>>(), vec![2, 2, 2], "{per_zone:?}");
}

#[test]
fn hostname_anti_affinity_gives_each_pod_its_own_node() {
    let pods = (0..4)
        .map(|i| {
            let mut p = pod(&format!("db{i}"), 100, 1);
            p.labels = labels(&[("app", "db")]);
            p.anti_affinity.push(term("kubernetes.io/hostname", "db"));
            p
        })
        .collect();
    let plan = run(&snapshot(vec![pool("p")], pods));
    assert_eq!(plan.nodeclaims.len(), 4);
}

#[test]
fn zonal_pod_affinity_follows_the_first_pod() {
    let pods = (0..5)
        .map(|i| {
            let mut p = pod(&format!("c{i}"), 1500, 1);
            p.labels = labels(&[("app", "cache")]);
            p.affinity.push(term("topology.kubernetes.io/zone", "cache"));
            p
        })
        .collect();
    let plan = run(&snapshot(vec![pool("p")], pods));
    let zones: std::collections::BTreeSet<_> = plan.nodeclaims.iter().map(|nc| zone_of(&nc.requirements)).collect();
    assert_eq!(zones.len(), 1, "{zones:?}");
    assert!(zones.iter().next().unwrap().is_some());
}

#[test]
fn running_pods_anti_affinity_repels_newcomers() {
    let mut s = snapshot(vec![pool("p")], vec![]);
    s.nodes.push(node("n1", "p", "zone-a", 8000));
    let mut guard = pod("guard", 100, 1);
    guard.node_name = Some("n1".into());
    guard.anti_affinity.push(term("kubernetes.io/hostname", "noisy"));
    let mut noisy = pod("noisy", 100, 1);
    noisy.labels = labels(&[("app", "noisy")]);
    s.pods = vec![guard, noisy];
    let plan = run(&s);
    assert!(plan.nominations.is_empty(), "n1 has room but its running pod rejects app=noisy");
    assert_eq!(plan.nodeclaims.len(), 1);
}

#[test]
fn host_ports_do_not_collide() {
    let pods = (0..2)
        .map(|i| {
            let mut p = pod(&format!("hp{i}"), 100, 1);
            p.host_ports.push(HostPort { ip: String::new(), port: 8080, protocol: "TCP".into() });
            p
        })
        .collect();
    assert_eq!(run(&snapshot(vec![pool("p")], pods)).nodeclaims.len(), 2);
}

#[test]
fn limits_are_never_exceeded_and_explained() {
    let mut p = pool("capped");
    p.limits.insert("cpu".into(), 8000);
    let pods: Vec<_> = (0..20).map(|i| pod(&format!("x{i}"), 1000, 1)).collect();
    let s = snapshot(vec![p], pods);
    let plan = run(&s);
    let cat = &s.nodepools[0].instance_types;
    let max_cpu: i64 = plan
        .nodeclaims
        .iter()
        .map(|nc| nc.instance_types.iter().map(|&t| cat[t as usize].capacity.cpu).max().unwrap())
        .sum();
    assert!(max_cpu <= 8000, "planned up to {max_cpu}m against a limit of 8");
    assert!(!plan.unschedulable.is_empty());
    assert!(
        plan.unschedulable[0].reason.contains("nodepool capped: limit cpu=8 reached"),
        "{}",
        plan.unschedulable[0].reason
    );
}

#[test]
fn weights_order_nodepools() {
    let mut heavy = pool("heavy");
    heavy.weight = 50;
    let light = pool("light");
    let plan = run(&snapshot(vec![light, heavy], vec![pod("a", 100, 1)]));
    assert_eq!(plan.nodeclaims[0].nodepool_name, "heavy");
}

#[test]
fn daemonset_overhead_is_reserved_on_new_nodes() {
    let mut s = snapshot(vec![pool("p")], vec![pod("a", 1500, 1)]);
    s.daemonsets.push(DaemonSet { namespace: "kube-system".into(), name: "agent".into(), pod: pod("agent", 1000, 1) });
    let plan = run(&s);
    let nc = &plan.nodeclaims[0];
    assert_eq!(nc.requests.cpu, 2500);
    // 2.5 cpu does not fit a 2-cpu type (1.9 allocatable).
    assert!(nc.instance_type_names(&s).iter().all(|t| !t.ends_with(".small")));
}

#[test]
fn min_values_keeps_enough_variety() {
    let mut p = pool("p");
    p.requirements.add(req("karpenter.k8s.aws/instance-family", Exists, &[]).with_min_values(Some(2)));
    let s = snapshot(vec![p], vec![pod("a", 100, 1)]);
    let plan = run(&s);
    let names = plan.nodeclaims[0].instance_type_names(&s);
    assert!(names.iter().any(|t| t.starts_with("gp.")) && names.iter().any(|t| t.starts_with("arm.")));
    let mut strict = pool("strict");
    strict.requirements.add(req("karpenter.k8s.aws/instance-family", In, &["gp", "arm"]).with_min_values(Some(2)));
    let mut amd = pod("b", 100, 1);
    amd.node_selector = reqs(&[req("kubernetes.io/arch", In, &["amd64"])]);
    let plan = run(&snapshot(vec![strict], vec![amd]));
    assert!(plan.unschedulable[0].reason.contains("minValues"), "{}", plan.unschedulable[0].reason);
}

#[test]
fn volume_zone_pins_the_node() {
    let mut a = pod("a", 100, 1);
    a.volume_requirements = vec![reqs(&[req("topology.kubernetes.io/zone", In, &["zone-c"])])];
    let plan = run(&snapshot(vec![pool("p")], vec![a]));
    assert_eq!(zone_of(&plan.nodeclaims[0].requirements).as_deref(), Some("zone-c"));
}

#[test]
fn schedule_anyway_spread_is_relaxed_when_it_cannot_hold() {
    let mut a = pod("a", 100, 1);
    a.labels = labels(&[("app", "w")]);
    a.spread.push(spread("example.com/rack", "w", true));
    let plan = run(&snapshot(vec![pool("p")], vec![a.clone()]));
    assert_eq!(plan.nodeclaims.len(), 1, "{:?}", plan.unschedulable);
    a.spread[0].when_unsatisfiable = tenon_core::model::WhenUnsatisfiable::DoNotSchedule;
    let plan = run(&snapshot(vec![pool("p")], vec![a]));
    assert!(plan.unschedulable[0].reason.contains("example.com/rack"), "{}", plan.unschedulable[0].reason);
}

#[test]
fn custom_labels_must_come_from_the_nodepool() {
    let mut a = pod("a", 100, 1);
    a.node_selector = reqs(&[req("team", In, &["blue"])]);
    let plan = run(&snapshot(vec![pool("p")], vec![a.clone()]));
    assert!(
        plan.unschedulable[0].reason.contains("label \"team\" does not have known values"),
        "{}",
        plan.unschedulable[0].reason
    );
    let mut p = pool("blue");
    p.requirements.add(req("team", In, &["blue"]));
    assert_eq!(run(&snapshot(vec![p], vec![a])).nodeclaims.len(), 1);
}

#[test]
fn oversized_pods_are_explained() {
    let plan = run(&snapshot(vec![pool("p")], vec![pod("huge", 64_000, 1)]));
    let r = &plan.unschedulable[0].reason;
    assert!(r.contains("no instance type has room") && r.contains("cpu: needs 64"), "{r}");
}

#[test]
fn extended_resources_need_a_type_that_has_them() {
    let mut gpu = pod("g", 100, 1);
    gpu.requests.set("nvidia.com/gpu", 1);
    let plan = run(&snapshot(vec![pool("p")], vec![gpu]));
    assert!(plan.unschedulable[0].reason.contains("nvidia.com/gpu"), "{}", plan.unschedulable[0].reason);
    let _ = Resources::default();
}

#[test]
fn min_domains_treats_the_global_minimum_as_zero() {
    // Three zones exist but minDomains asks for five: with maxSkew 1 each zone takes one pod.
    let pods: Vec<_> = (0..6)
        .map(|i| {
            let mut p = pod(&format!("m{i}"), 100, 1);
            p.labels = labels(&[("app", "m")]);
            let mut c = spread("topology.kubernetes.io/zone", "m", false);
            c.min_domains = Some(5);
            p.spread.push(c);
            p
        })
        .collect();
    let plan = run(&snapshot(vec![pool("p")], pods));
    let placed: usize = plan.nodeclaims.iter().map(|nc| nc.pods.len()).sum();
    assert_eq!((placed, plan.unschedulable.len()), (3, 3));
}

#[test]
fn spread_over_capacity_types() {
    let pods: Vec<_> = (0..4)
        .map(|i| {
            let mut p = pod(&format!("c{i}"), 100, 1);
            p.labels = labels(&[("app", "c")]);
            p.spread.push(spread("karpenter.sh/capacity-type", "c", false));
            p
        })
        .collect();
    let plan = run(&snapshot(vec![pool("p")], pods));
    let mut per = std::collections::BTreeMap::new();
    for nc in &plan.nodeclaims {
        let ct = nc.requirements.get("karpenter.sh/capacity-type").unwrap().values().to_vec();
        assert_eq!(ct.len(), 1);
        *per.entry(ct[0].clone()).or_insert(0) += nc.pods.len();
    }
    assert_eq!(per.get("on-demand"), Some(&2));
    assert_eq!(per.get("spot"), Some(&2));
}

#[test]
fn affinity_namespace_selection() {
    let mut s = snapshot(vec![pool("p")], vec![]);
    s.nodes.push(node("n1", "p", "zone-a", 8000));
    let mut other_ns = pod("db", 100, 1);
    other_ns.namespace = "data".into();
    other_ns.labels = labels(&[("app", "db")]);
    other_ns.node_name = Some("n1".into());
    // Anti-affinity to app=db in the pod's own namespace: the pod in "data" does not count.
    let mut web = pod("web", 100, 1);
    web.anti_affinity.push(term("kubernetes.io/hostname", "db"));
    s.pods = vec![other_ns, web.clone()];
    assert_eq!(run(&s).nominations.len(), 1, "same-namespace term ignores namespace data");
    web.anti_affinity[0].namespaces = vec!["data".into()];
    s.pods[1] = web;
    let plan = run(&s);
    assert!(plan.nominations.is_empty(), "listing namespace data makes the db pod repel");
}

/// First fit skips the nodes that turned away the previous pod only when the next asks the
/// same: a pod of the same size that asks another zone still gets the node the first one
/// could not use, and a smaller pod still gets the room the larger ones left.
#[test]
fn nodes_turned_away_are_skipped_only_for_the_same_ask() {
    let mut in_b = pod("a0-zone-b", 2000, 1);
    in_b.node_selector = reqs(&[req("topology.kubernetes.io/zone", In, &["zone-b"])]);
    let mut in_a = pod("a1-zone-a", 2000, 1);
    in_a.node_selector = reqs(&[req("topology.kubernetes.io/zone", In, &["zone-a"])]);
    let mut s = snapshot(vec![pool("p")], vec![in_b, in_a, pod("a2", 2000, 1), pod("a3", 2000, 1), pod("z", 500, 1)]);
    s.nodes.push(node("n-a", "p", "zone-a", 3000));
    s.nodes.push(node("n-b", "p", "zone-b", 3000));
    let plan = run(&s);
    let on = |p: &str| {
        let i = s.pods.iter().position(|x| x.name == p).unwrap();
        plan.nominations.iter().find(|n| n.pod == i).map(|n| n.node.as_str())
    };
    assert_eq!(on("a0-zone-b"), Some("n-b"));
    assert_eq!(on("a1-zone-a"), Some("n-a"), "n-a turned away a pod of another zone, not this one");
    assert_eq!((on("a2"), on("a3")), (None, None), "both nodes are full for 2 CPUs: new capacity");
    assert_eq!(on("z"), Some("n-a"), "a smaller ask still fits the room left");
}
