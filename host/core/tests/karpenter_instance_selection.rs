//! (Long: Karpenter's instance-selection suite, case by case.)
//! Karpenter's `pkg/controllers/provisioning/scheduling/instance_selection_test.go` (and the
//! one default-constraints case Tenon can express), ported: each test names the cases it
//! accounts for (tests/conformance/karpenter.tsv). Unless a case brings its own catalog, the
//! catalog is `fake.InstanceTypesAssorted()`, shuffled as Karpenter's suite shuffles it, and the
//! NodePool allows spot and on-demand on both architectures.

use crate::support;

use std::sync::Arc;
use support::GIB;
use support::karpenter::*;
use tenon_core::instancetype::InstanceType;
use tenon_core::plan::NewNodeClaim;
use tenon_core::workload::Rng;

const ARCH: &str = "kubernetes.io/arch";
const OS: &str = "kubernetes.io/os";
const ZONE: &str = "topology.kubernetes.io/zone";
const CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// The custom numeric label of the minValues cases.
const GENERATION: &str = "karpenter/numerical-value";

/// The suite's NodePool requirements (`BeforeEach`).
const SUITE_REQUIREMENTS: &str = "[{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand]}, {key: kubernetes.io/arch, operator: In, values: [arm64, amd64]}]";

/// The assorted catalog in a seeded random order: the order must not matter.
fn shuffled_assorted(seed: u64) -> Vec<InstanceType> {
    let mut types = (*assorted()).clone();
    let mut rng = Rng::new(seed);
    for i in (1..types.len()).rev() {
        let j = rng.below(i + 1);
        types.swap(i, j);
    }
    types
}

/// A cluster whose NodePool `default` has the given requirements (a YAML list).
fn cluster(catalog: Vec<InstanceType>, requirements: &str) -> Cluster {
    let mut c = Cluster::new(Arc::new(catalog));
    c.nodepool("default", &format!("  template:\n    spec:\n      requirements: {requirements}\n"));
    c
}

/// A pod spec whose single required node-affinity term holds `expressions` (a YAML list).
fn requiring(expressions: &str) -> String {
    format!(
        "  affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: {expressions}}}]}}}}}}\n"
    )
}

/// `getMinPrice`: the cheapest offering anywhere in the catalog.
fn min_price(catalog: &[InstanceType]) -> f64 {
    catalog.iter().flat_map(|it| &it.offerings).map(|o| o.price).fold(f64::INFINITY, f64::min)
}

/// `nodePrice`: the cheapest offering of the launched node's type that matches its zone and
/// capacity type labels.
fn node_price(d: &Decision, pod: &str) -> f64 {
    let labels = d.node_labels(pod);
    let name = &labels[INSTANCE_TYPE];
    let it = d.snap.nodepools[0].instance_types.iter().find(|it| &it.name == name).expect("the launched type");
    it.offerings
        .iter()
        .filter(|o| o.available && o.zone == labels[ZONE] && o.capacity_type == labels[CAPACITY_TYPE])
        .map(|o| o.price)
        .fold(f64::INFINITY, f64::min)
}

/// `supportedInstanceTypes`: the types the NodeClaim may launch as.
fn options<'a>(d: &'a Decision, nc: &NewNodeClaim) -> Vec<&'a InstanceType> {
    let cat = &d.snap.nodepools[nc.nodepool].instance_types;
    nc.instance_types.iter().map(|&i| &cat[i as usize]).collect()
}

/// `ExpectInstancesWithLabel`: arch and OS through the type's requirements, zone and capacity
/// type through some offering.
fn has_label(it: &InstanceType, key: &str, value: &str) -> bool {
    match key {
        ZONE => it.offerings.iter().any(|o| o.zone == value),
        CAPACITY_TYPE => it.offerings.iter().any(|o| o.capacity_type == value),
        _ => it.requirements.get(key).is_some_and(|r| r.has(value)),
    }
}

/// `ExpectInstancesWithOffering`: one offering with both the capacity type and the zone.
fn has_offering(it: &InstanceType, capacity_type: &str, zone: &str) -> bool {
    it.offerings.iter().any(|o| o.capacity_type == capacity_type && o.zone == zone)
}

struct Cheapest {
    case: u32,
    /// NodePool requirements; `None`: the suite's.
    pool: Option<&'static str>,
    /// The pod's required node-affinity expressions; `None`: a plain pod.
    pod: Option<&'static str>,
    /// Every option carries each (label, value).
    labels: &'static [(&'static str, &'static str)],
    /// Every option has an offering of this (capacity type, zone).
    offering: Option<(&'static str, &'static str)>,
}

/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:82
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:89
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:103
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:116
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:131
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:146
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:161
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:174
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:189
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:202
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:215
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:230
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:243
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:258
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:271
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:291
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:310
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:330
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:362
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:396
#[test]
fn launches_at_the_cheapest_price_with_every_option_honouring_pool_and_pod_constraints() {
    let cases = [
        Cheapest { case: 82, pool: None, pod: None, labels: &[], offering: None },
        Cheapest {
            case: 89,
            pool: None,
            pod: Some("[{key: kubernetes.io/arch, operator: In, values: [amd64]}]"),
            labels: &[(ARCH, "amd64")],
            offering: None,
        },
        Cheapest {
            case: 103,
            pool: None,
            pod: Some("[{key: kubernetes.io/arch, operator: In, values: [arm64]}]"),
            labels: &[(ARCH, "arm64")],
            offering: None,
        },
        Cheapest {
            case: 116,
            pool: Some("[{key: kubernetes.io/arch, operator: In, values: [amd64]}]"),
            pod: None,
            labels: &[(ARCH, "amd64")],
            offering: None,
        },
        Cheapest {
            case: 131,
            pool: Some("[{key: kubernetes.io/arch, operator: In, values: [arm64]}]"),
            pod: None,
            labels: &[(ARCH, "arm64")],
            offering: None,
        },
        Cheapest {
            case: 146,
            pool: Some("[{key: kubernetes.io/os, operator: In, values: [windows]}]"),
            pod: None,
            labels: &[(OS, "windows")],
            offering: None,
        },
        Cheapest {
            case: 161,
            pool: None,
            pod: Some("[{key: kubernetes.io/os, operator: In, values: [windows]}]"),
            labels: &[(OS, "windows")],
            offering: None,
        },
        Cheapest {
            case: 174,
            pool: Some("[{key: kubernetes.io/os, operator: In, values: [windows]}]"),
            pod: None,
            labels: &[(OS, "windows")],
            offering: None,
        },
        Cheapest {
            case: 189,
            pool: None,
            pod: Some("[{key: kubernetes.io/os, operator: In, values: [linux]}]"),
            labels: &[(OS, "linux")],
            offering: None,
        },
        Cheapest {
            case: 202,
            pool: None,
            pod: Some("[{key: kubernetes.io/os, operator: In, values: [linux]}]"),
            labels: &[(OS, "linux")],
            offering: None,
        },
        Cheapest {
            case: 215,
            pool: Some("[{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}]"),
            pod: None,
            labels: &[(ZONE, "test-zone-2")],
            offering: None,
        },
        Cheapest {
            case: 230,
            pool: None,
            pod: Some("[{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}]"),
            labels: &[(ZONE, "test-zone-2")],
            offering: None,
        },
        Cheapest {
            case: 243,
            pool: Some("[{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]"),
            pod: None,
            labels: &[(CAPACITY_TYPE, "spot")],
            offering: None,
        },
        Cheapest {
            case: 258,
            pool: None,
            pod: Some("[{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]"),
            labels: &[(CAPACITY_TYPE, "spot")],
            offering: None,
        },
        Cheapest {
            case: 271,
            pool: Some(
                "[{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}, {key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]",
            ),
            pod: None,
            labels: &[],
            offering: Some(("on-demand", "test-zone-1")),
        },
        Cheapest {
            case: 291,
            pool: None,
            pod: Some(
                "[{key: karpenter.sh/capacity-type, operator: In, values: [spot]}, {key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]",
            ),
            labels: &[],
            offering: Some(("spot", "test-zone-1")),
        },
        Cheapest {
            case: 310,
            pool: Some("[{key: karpenter.sh/capacity-type, operator: In, values: [spot]}]"),
            pod: Some("[{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}]"),
            labels: &[],
            offering: Some(("spot", "test-zone-2")),
        },
        Cheapest {
            case: 330,
            pool: Some(
                "[{key: kubernetes.io/arch, operator: In, values: [arm64]}, {key: kubernetes.io/os, operator: In, values: [windows]}, {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}, {key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]",
            ),
            pod: None,
            labels: &[(OS, "windows"), (ARCH, "arm64")],
            offering: Some(("on-demand", "test-zone-1")),
        },
        Cheapest {
            case: 362,
            pool: Some(
                "[{key: kubernetes.io/arch, operator: In, values: [amd64]}, {key: kubernetes.io/os, operator: In, values: [linux]}]",
            ),
            pod: Some(
                "[{key: karpenter.sh/capacity-type, operator: In, values: [spot]}, {key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}]",
            ),
            labels: &[(OS, "linux"), (ARCH, "amd64")],
            offering: Some(("spot", "test-zone-2")),
        },
        Cheapest {
            case: 396,
            pool: None,
            pod: Some(
                "[{key: kubernetes.io/arch, operator: In, values: [amd64]}, {key: kubernetes.io/os, operator: In, values: [linux]}, {key: karpenter.sh/capacity-type, operator: In, values: [spot]}, {key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}]",
            ),
            labels: &[(OS, "linux"), (ARCH, "amd64")],
            offering: Some(("spot", "test-zone-2")),
        },
    ];
    for k in cases {
        let catalog = shuffled_assorted(u64::from(k.case));
        let cheapest = min_price(&catalog);
        assert_eq!(cheapest, fake("1-cpu-1-mem").resources(1, GIB, 5).price(), "case {}: the assorted minimum", k.case);
        let mut c = cluster(catalog, k.pool.unwrap_or(SUITE_REQUIREMENTS));
        c.pending("{name: p}", &k.pod.map(requiring).unwrap_or_default());
        let d = c.decide();
        let nc =
            d.nodeclaim_of("p").unwrap_or_else(|| panic!("case {}: not scheduled\n{}", k.case, d.plan.render(&d.snap)));
        assert_eq!(d.plan.nodeclaims.len(), 1, "case {}: one NodeClaim", k.case);
        assert_eq!(node_price(&d, "p"), cheapest, "case {}: the launched node's price", k.case);
        let opts = options(&d, nc);
        assert!(!opts.is_empty(), "case {}: no options", k.case);
        for it in opts {
            for &(key, value) in k.labels {
                assert!(has_label(it, key, value), "case {}: option {} lacks {key}={value}", k.case, it.name);
            }
            if let Some((ct, zone)) = k.offering {
                assert!(
                    has_offering(it, ct, zone),
                    "case {}: option {} has no {ct} offering in {zone}",
                    k.case,
                    it.name
                );
            }
        }
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:428
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:448
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:477
#[test]
fn nothing_launches_when_no_instance_type_matches_the_constraints() {
    let offered_in_zone_2 = |it: &InstanceType| it.offerings.iter().any(|o| o.zone == "test-zone-2");
    let is_amd64 = |it: &InstanceType| has_label(it, ARCH, "amd64");
    let no_arm: Vec<InstanceType> = shuffled_assorted(428).into_iter().filter(is_amd64).collect();
    let no_arm_in_zone_2 = |seed| -> Vec<InstanceType> {
        shuffled_assorted(seed).into_iter().filter(|it| !offered_in_zone_2(it) || is_amd64(it)).collect()
    };
    let arm = "{key: kubernetes.io/arch, operator: In, values: [arm64]}";
    let zone_2 = "{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}";
    let cases = [
        (428, no_arm, SUITE_REQUIREMENTS.to_string(), format!("[{arm}]")),
        (448, no_arm_in_zone_2(448), SUITE_REQUIREMENTS.to_string(), format!("[{arm}, {zone_2}]")),
        (477, no_arm_in_zone_2(477), format!("[{arm}]"), format!("[{zone_2}]")),
    ];
    for (case, catalog, pool, pod) in cases {
        assert!(!catalog.is_empty(), "case {case}: the filtered catalog is empty");
        let mut c = cluster(catalog, &pool);
        c.pending("{name: p}", &requiring(&pod));
        let d = c.decide();
        assert!(!d.scheduled("p"), "case {case}: scheduled\n{}", d.plan.render(&d.snap));
        assert!(d.unschedulable("p").is_some(), "case {case}: no reason given");
        assert!(d.plan.nodeclaims.is_empty(), "case {case}: a NodeClaim was planned");
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:509
#[test]
fn three_equal_pods_share_one_node_and_every_option_has_room_for_them() {
    let catalog = shuffled_assorted(509);
    let before = catalog.clone();
    for cpu in ["0.1", "1.0", "2.0", "2.5", "4.0", "8.0", "16.0"] {
        for mem in ["0.1", "1.0", "2.0", "4.0", "8.0", "16.0", "32.0"] {
            let mut c = cluster(catalog.clone(), SUITE_REQUIREMENTS);
            c.pending_n(3, "p", "", &format!("  containers: [{{name: c, image: i, resources: {{requests: {{cpu: \"{cpu}\", memory: {mem}Gi}}}}}}]\n"));
            let d = c.decide();
            let nc = d.nodeclaim_of("p-0").unwrap_or_else(|| panic!("{cpu} cpu, {mem}Gi: not scheduled"));
            for p in ["p-1", "p-2"] {
                assert_eq!(
                    d.nodeclaim_of(p).map(|n| &n.hostname),
                    Some(&nc.hostname),
                    "{cpu} cpu, {mem}Gi: {p} elsewhere"
                );
            }
            assert_eq!(d.plan.nodeclaims.len(), 1, "{cpu} cpu, {mem}Gi: one node");
            let cpu_milli: f64 = cpu.parse::<f64>().unwrap() * 1000.0;
            let mem_bytes: f64 = mem.parse::<f64>().unwrap() * GIB as f64;
            let (total_cpu, total_mem) = (3 * cpu_milli.round() as i64, 3 * mem_bytes.ceil() as i64);
            let opts = options(&d, nc);
            assert!(!opts.is_empty());
            for it in opts {
                assert!(total_cpu + it.overhead.cpu < it.capacity.cpu, "{cpu} cpu, {mem}Gi: {} lacks cpu", it.name);
                assert!(
                    total_mem + it.overhead.memory < it.capacity.memory,
                    "{cpu} cpu, {mem}Gi: {} lacks memory",
                    it.name
                );
            }
            for it in d.snap.nodepools[0].instance_types.iter() {
                let orig = before.iter().find(|b| b.name == it.name).expect("a catalog type");
                assert_eq!((&it.capacity, &it.overhead), (&orig.capacity, &orig.overhead), "{} changed", it.name);
            }
        }
    }
    assert_eq!(catalog, before, "scheduling changed the catalog");
}

/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:563
#[test]
fn an_on_demand_pool_launches_the_cheapest_on_demand_type_whatever_spot_costs() {
    let one = |name: &str, od: f64, spot: f64| {
        fake(name)
            .arch("amd64")
            .os(&["linux"])
            .resources(1, GIB, 5)
            .offerings(&[("on-demand", "test-zone-1a", od, true), ("spot", "test-zone-1a", spot, true)])
            .build()
    };
    let mut c = cluster(
        vec![one("test-instance1", 1.0, 0.2), one("test-instance2", 1.3, 0.1)],
        "[{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]",
    );
    c.pending("{name: p}", "");
    let d = c.decide();
    assert_eq!(d.node_labels("p").get(INSTANCE_TYPE).map(String::as_str), Some("test-instance1"));
}

/// A minValues case's type: arm64 (unless told), linux, `cpu` CPUs and GiB, one spot offering
/// in `test-zone-1-spot`, optionally a generation label.
fn mv_type(name: &str, arch: &str, cpu: i64, price: f64, generation: Option<&str>) -> InstanceType {
    let mut f = fake(name).arch(arch).os(&["linux"]).resources(cpu, cpu * GIB, 5).offerings(&[(
        "spot",
        "test-zone-1-spot",
        price,
        true,
    )]);
    if let Some(g) = generation {
        f = f.label(GENERATION, &[g]);
    }
    f.build()
}

/// Two pods of 0.9 CPU and 0.9Gi, with a pod spec tail (e.g. affinity) appended.
fn two_big_pods(c: &mut Cluster, extra: &str) {
    let spec = format!(
        "  containers: [{{name: c, image: i, resources: {{requests: {{cpu: \"0.9\", memory: 0.9Gi}}}}}}]\n{extra}"
    );
    c.pending("{name: p1}", &spec).pending("{name: p2}", &spec);
}

/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:621
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:693
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:870
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:1029
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:1121
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:1331
/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:1410
#[test]
fn min_values_split_pods_that_only_fit_together_on_one_type() {
    let cases: [(u32, Vec<InstanceType>, &str); 7] = [
        (
            621,
            vec![mv_type("instance-type-1", "arm64", 1, 0.52, None), mv_type("instance-type-2", "arm64", 4, 1.0, None)],
            "[{key: node.kubernetes.io/instance-type, operator: In, values: [instance-type-1, instance-type-2], minValues: 2}]",
        ),
        (
            693,
            vec![
                mv_type("instance-type-1", "arm64", 1, 0.52, Some("2")),
                mv_type("instance-type-2", "arm64", 1, 1.0, Some("3")),
                mv_type("instance-type-3", "arm64", 4, 1.2, Some("4")),
            ],
            "[{key: karpenter/numerical-value, operator: Gt, values: [\"2\"], minValues: 2}]",
        ),
        (
            870,
            vec![
                mv_type("instance-type-1", "arm64", 1, 0.52, Some("2")),
                mv_type("instance-type-2", "arm64", 2, 1.0, Some("3")),
                mv_type("instance-type-3", "arm64", 4, 1.2, Some("4")),
            ],
            "[{key: karpenter/numerical-value, operator: Lt, values: [\"4\"], minValues: 2}]",
        ),
        (
            1029,
            vec![
                mv_type("instance-type-1", "arm64", 1, 0.52, None),
                mv_type("instance-type-2", "arm64", 2, 1.0, None),
                mv_type("instance-type-3", "arm64", 4, 1.2, None),
            ],
            "[{key: node.kubernetes.io/instance-type, operator: In, values: [instance-type-1, instance-type-2, instance-type-3], minValues: 1}, {key: node.kubernetes.io/instance-type, operator: NotIn, values: [instance-type-3], minValues: 2}]",
        ),
        (
            1121,
            vec![
                mv_type("instance-type-1", "arm64", 1, 0.52, Some("2")),
                mv_type("instance-type-2", "arm64", 1, 1.0, Some("3")),
                mv_type("instance-type-3", "arm64", 4, 1.2, Some("4")),
                mv_type("instance-type-4", "arm64", 4, 1.2, Some("5")),
            ],
            "[{key: karpenter/numerical-value, operator: Gt, values: [\"2\"], minValues: 1}, {key: karpenter/numerical-value, operator: Lt, values: [\"5\"], minValues: 2}]",
        ),
        (
            1331,
            vec![mv_type("instance-type-1", "arm64", 1, 0.52, None), mv_type("instance-type-2", "arm64", 4, 1.0, None)],
            "[{key: node.kubernetes.io/instance-type, operator: Exists, minValues: 1}, {key: node.kubernetes.io/instance-type, operator: In, values: [instance-type-1, instance-type-2], minValues: 2}]",
        ),
        (
            1410,
            vec![mv_type("instance-type-1", "arm64", 1, 0.52, None), mv_type("instance-type-2", "amd64", 4, 1.0, None)],
            "[{key: kubernetes.io/arch, operator: Exists, minValues: 2}, {key: node.kubernetes.io/instance-type, operator: In, values: [instance-type-1, instance-type-2], minValues: 1}]",
        ),
    ];
    for (case, catalog, pool) in cases {
        let mut c = cluster(catalog, pool);
        two_big_pods(&mut c, "");
        let d = c.decide();
        let plan = d.plan.render(&d.snap);
        let n1 = d.nodeclaim_of("p1").unwrap_or_else(|| panic!("case {case}: p1 not scheduled\n{plan}"));
        let n2 = d.nodeclaim_of("p2").unwrap_or_else(|| panic!("case {case}: p2 not scheduled\n{plan}"));
        assert_ne!(n1.hostname, n2.hostname, "case {case}: both pods on one node\n{plan}");
        for nc in &d.plan.nodeclaims {
            let names = d.options(nc);
            assert!(names.len() >= 2, "case {case}: options {names:?}");
        }
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:784
#[test]
fn min_values_unmet_after_the_pods_narrow_a_key_leaves_them_unscheduled() {
    let mut c = cluster(
        vec![
            mv_type("instance-type-1", "arm64", 1, 0.52, Some("2")),
            mv_type("instance-type-2", "arm64", 4, 1.0, Some("3")),
        ],
        "[{key: karpenter/numerical-value, operator: Exists, minValues: 2}]",
    );
    two_big_pods(&mut c, &requiring("[{key: karpenter/numerical-value, operator: Gt, values: [\"2\"]}]"));
    let d = c.decide();
    assert!(d.plan.nodeclaims.is_empty(), "{}", d.plan.render(&d.snap));
    for p in ["p1", "p2"] {
        assert!(!d.scheduled(p), "{p} scheduled");
        let reason = d.unschedulable(p).unwrap_or_else(|| panic!("{p}: no reason"));
        assert!(reason.contains("minValues") && reason.contains(GENERATION), "{p}: {reason}");
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:351
#[test]
fn without_configured_defaults_a_replica_set_pod_gets_no_spread_constraint() {
    // The pod's ReplicaSet exists, so a configured default would apply.
    let spread = |configured: bool| {
        let mut c = cluster(shuffled_assorted(351), SUITE_REQUIREMENTS);
        c.replica_set("web-abc", "{matchLabels: {app: web}}");
        if configured {
            c.scheduler_config("podTopologySpread: {defaultConstraints: [{topologyKey: topology.kubernetes.io/zone, maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]}");
        }
        c.pending(
            "{name: p, labels: {app: web}, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-abc, uid: web-abc-uid, controller: true}]}",
            "",
        );
        let d = c.decide();
        let pod = d.snap.pods.iter().find(|p| p.name == "p").expect("the pod").clone();
        assert_eq!(pod.owner_kind.as_deref(), Some("ReplicaSet"));
        pod.spread
    };
    assert!(spread(false).is_empty(), "no defaults configured: no spread");
    assert_eq!(spread(true).len(), 1, "the same pod with a default configured gets it");
}

/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:961
#[test]
fn a_nodepool_min_values_no_type_set_meets_schedules_nothing() {
    let mut c = cluster(
        vec![
            mv_type("instance-type-1", "arm64", 2, 0.52, Some("2")),
            mv_type("instance-type-2", "arm64", 4, 1.2, Some("4")),
        ],
        "[{key: karpenter/numerical-value, operator: Lt, values: [\"4\"], minValues: 2}]",
    );
    two_big_pods(&mut c, "");
    let d = c.decide();
    assert!(d.plan.nodeclaims.is_empty(), "{}", d.plan.render(&d.snap));
    for p in ["p1", "p2"] {
        assert!(!d.scheduled(p), "{p}");
        assert!(d.unschedulable(p).is_some_and(|r| r.contains("minValues")), "{p}: {:?}", d.unschedulable(p));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:1234
#[test]
fn min_values_above_the_number_of_types_schedules_nothing() {
    let types: Vec<InstanceType> = (0..10).map(|i| fake(&format!("fake-it-{i}")).build()).collect();
    let mut c = cluster(types, "[{key: node.kubernetes.io/instance-type, operator: Exists, minValues: 11}]");
    c.pending("{name: p}", "");
    let d = c.decide();
    assert!(!d.scheduled("p"), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/instance_selection_test.go:1261
#[test]
fn min_values_broken_by_truncating_the_options_schedules_nothing() {
    let mut c = cluster(
        vec![mv_type("instance-type-1", "arm64", 1, 0.52, None), mv_type("instance-type-2", "arm64", 4, 1.0, None)],
        "[{key: node.kubernetes.io/instance-type, operator: In, values: [instance-type-1, instance-type-2], minValues: 2}]",
    );
    // Karpenter's suite lowers MaxInstanceTypes to 1 to reach truncation with two types.
    c.max_instance_types = Some(1);
    two_big_pods(&mut c, "");
    let d = c.decide();
    assert!(d.plan.nodeclaims.is_empty(), "{}", d.plan.render(&d.snap));
    for p in ["p1", "p2"] {
        assert!(d.unschedulable(p).is_some_and(|r| r.contains("minValues")), "{p}: {:?}", d.unschedulable(p));
    }
}
