//! (Long: Karpenter's provisioning suite, case by case.)
//! Karpenter's `pkg/controllers/provisioning/suite_test.go`, ported: each test names the cases
//! it accounts for. NodePools are Karpenter's `test.NodePool()` (no requirements, a 2000-CPU
//! limit unless the case sets limits); the catalog is the fake cloud provider's. Cases that run
//! several provisioning rounds launch each round's NodeClaims as the fake provider would (the
//! cheapest option) and bind the pods before the next round.

use crate::support;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use std::collections::BTreeMap;
use std::sync::Arc;
use support::GIB;
use support::karpenter::*;
use tenon_core::instancetype::InstanceType;
use tenon_core::plan::NewNodeClaim;
use tenon_core::resources::Resources;
use tenon_core::taints::{Effect, Taint};

const ZONE: &str = "topology.kubernetes.io/zone";
const NODEPOOL: &str = "karpenter.sh/nodepool";
const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";

/// Adds Karpenter's `test.NodePool()` named `name`: `spec` is more YAML under `spec:`
/// (indented 2); the 2000-CPU limit and an empty template apply unless `spec` gives its own.
fn pool(c: &mut Cluster, name: &str, spec: &str) {
    let limits =
        if spec.contains("\n  limits:") || spec.starts_with("  limits:") { "" } else { "  limits: {cpu: \"2000\"}\n" };
    let template = if spec.contains("  template:") { "" } else { "  template: {spec: {requirements: []}}\n" };
    c.nodepool(name, &format!("{limits}{template}{spec}"));
}

/// A cluster of the fake cloud provider's types with one default NodePool.
fn cluster() -> Cluster {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "");
    c
}

/// A pod spec (YAML under `spec:`) from the body of a flow mapping.
fn spec(body: &str) -> String {
    format!("  {{{body}}}\n")
}

/// A container requesting `requests` (flow mapping body, e.g. `cpu: "1", memory: 1Gi`).
fn container(requests: &str) -> String {
    format!("containers: [{{name: c, image: i, resources: {{requests: {{{requests}}}}}}}]")
}

fn affinity_in(key: &str, values: &str) -> String {
    format!(
        "affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{{key: {key}, operator: In, values: [{values}]}}]}}]}}}}}}"
    )
}

/// The instance type Karpenter's fake cloud provider launches for `nc`: the option with the
/// cheapest offering its requirements allow.
fn launched_type<'a>(d: &'a Decision, nc: &NewNodeClaim) -> &'a InstanceType {
    let cat = &d.snap.nodepools[nc.nodepool].instance_types;
    nc.instance_types
        .iter()
        .map(|&i| &cat[i as usize])
        .filter_map(|it| it.cheapest(&nc.requirements).map(|o| (it, o.price)))
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(it, _)| it)
        .expect("an option with an offering")
}

/// The capacity (CPU millis, memory bytes) of the node pod `pod` is launched on.
fn launched_capacity(d: &Decision, pod: &str) -> (i64, i64) {
    let nc = d.nodeclaim_of(pod).unwrap_or_else(|| panic!("{pod} has no new NodeClaim: {}", d.plan.render(&d.snap)));
    let it = launched_type(d, nc);
    (it.capacity.cpu, it.capacity.memory)
}

fn quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    r.entries()
        .into_iter()
        .map(|(k, v)| {
            let q = if k == "cpu" { format!("{v}m") } else { v.to_string() };
            (k, Quantity(q))
        })
        .collect()
}

/// Karpenter's `ExpectProvisioned` completing: every new NodeClaim becomes a Node of the type
/// the fake cloud provider launches, and every placed pod is bound where it was placed.
fn launch(c: &mut Cluster, d: &Decision) {
    for nc in &d.plan.nodeclaims {
        let name = format!("node-{}", c.objects.nodes.len());
        let it = launched_type(d, nc);
        let mut labels = launched_labels(&d.snap, nc);
        labels.insert("kubernetes.io/hostname".into(), name.clone());
        c.objects.nodes.push(core::Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.clone()),
                labels: Some(labels),
                ..Default::default()
            },
            status: Some(core::NodeStatus {
                capacity: Some(quantities(&it.capacity)),
                allocatable: Some(quantities(it.allocatable())),
                ..Default::default()
            }),
            ..Default::default()
        });
        for &p in &nc.pods {
            bind(c, d, p, &name);
        }
    }
    for n in &d.plan.nominations {
        bind(c, d, n.pod, &n.node);
    }
}

fn bind(c: &mut Cluster, d: &Decision, pod: usize, node: &str) {
    let p = &d.snap.pods[pod];
    let obj = c
        .objects
        .pods
        .iter_mut()
        .find(|o| o.metadata.name.as_deref() == Some(&p.name) && o.metadata.namespace.as_deref() == Some(&p.namespace))
        .expect("the pod object");
    obj.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
    obj.status = Some(tenon_core::cached_pod::PodStatus { phase: Some("Running".into()), ..Default::default() });
}

fn label(d: &Decision, pod: &str, key: &str) -> Option<String> {
    d.node_labels(pod).get(key).cloned()
}

// ----- Provisioning -----

/// Runs Karpenter's two rounds: the pods constrained to what the NodePool can launch get
/// nodes; then, with those nodes running, the pods constrained to anything else do not.
fn well_known_constraints(constrain: fn(&str, &str) -> String) {
    let schedulable = [
        (NODEPOOL, "default"),
        (ZONE, "test-zone-1"),
        (INSTANCE_TYPE, "default-instance-type"),
        ("kubernetes.io/arch", "arm64"),
        ("kubernetes.io/os", "linux"),
    ];
    let unschedulable = [
        (NODEPOOL, "unknown"),
        (ZONE, "unknown"),
        (INSTANCE_TYPE, "unknown"),
        ("kubernetes.io/arch", "unknown"),
        ("kubernetes.io/os", "unknown"),
        ("karpenter.sh/capacity-type", "unknown"),
        ("foo", "bar"),
    ];
    let mut c = cluster();
    for (i, (k, v)) in schedulable.iter().enumerate() {
        c.pending(&format!("{{name: ok-{i}}}"), &spec(&constrain(k, v)));
    }
    let d = c.decide();
    for (i, (k, v)) in schedulable.iter().enumerate() {
        assert!(d.nodeclaim_of(&format!("ok-{i}")).is_some(), "{k}={v}: {}", d.plan.render(&d.snap));
    }
    launch(&mut c, &d);
    for (i, (k, v)) in unschedulable.iter().enumerate() {
        c.pending(&format!("{{name: no-{i}}}"), &spec(&constrain(k, v)));
    }
    let d = c.decide();
    for (i, (k, v)) in unschedulable.iter().enumerate() {
        assert!(!d.scheduled(&format!("no-{i}")), "{k}={v}: {}", d.plan.render(&d.snap));
    }
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:336
#[test]
fn node_selectors_on_what_the_nodepool_launches_schedule_and_others_do_not() {
    well_known_constraints(|k, v| format!("nodeSelector: {{{k}: {v}}}"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:376
#[test]
fn required_node_affinity_on_what_the_nodepool_launches_schedules_and_others_do_not() {
    well_known_constraints(affinity_in);
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:416
#[test]
fn accelerator_pods_get_nodes_with_their_accelerator() {
    let mut c = cluster();
    for (p, gpu) in [("a", GPU_A), ("b", GPU_B)] {
        // The API server defaults a pod's missing requests to its limits.
        c.pending(
            &format!("{{name: {p}}}"),
            &spec(&format!(
                "containers: [{{name: c, image: i, resources: {{requests: {{{gpu}: \"1\"}}, limits: {{{gpu}: \"1\"}}}}}}]"
            )),
        );
    }
    let d = c.decide();
    for (p, gpu) in [("a", GPU_A), ("b", GPU_B)] {
        let nc = d.nodeclaim_of(p).unwrap_or_else(|| panic!("{p}: {}", d.plan.render(&d.snap)));
        assert!(launched_type(&d, nc).capacity.get(gpu) >= 1, "{p}");
    }
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:431
#[test]
fn one_pod_instance_types_give_each_pod_its_own_node() {
    let mut c = Cluster::new(default_types());
    pool(
        &mut c,
        "default",
        "  template: {spec: {requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [single-pod-instance-type]}]}}\n",
    );
    c.pending_n(3, "p", "", "");
    let d = c.decide();
    assert_eq!(d.plan.nodeclaims.len(), 3, "{}", d.plan.render(&d.snap));
    for i in 0..3 {
        assert!(d.nodeclaim_of(&format!("p-{i}")).is_some());
    }
}

/// The fake types plus three `example` types of 10, 11 and 12 CPUs (4, 5 and 6 GiB), as
/// Karpenter's sidecar cases add them: arch `arch`, Linux, one spot offering in zone 1.
fn with_example_types() -> Cluster {
    let mut types: Vec<InstanceType> = default_types().to_vec();
    for (cpu, mem) in [(10, 4), (11, 5), (12, 6)] {
        let f = fake("example").resources(cpu, mem * GIB, 5).arch("arch").os(&["linux"]);
        let price = f.price();
        types.push(f.offerings(&[("spot", "test-zone-1", price, true)]).build());
    }
    let mut c = Cluster::new(Arc::new(types));
    pool(&mut c, "default", "");
    c
}

fn sized(cpu: &str, mem: &str) -> String {
    format!("resources: {{requests: {{cpu: \"{cpu}\", memory: {mem}}}, limits: {{cpu: \"{cpu}\", memory: {mem}}}}}")
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:532
/// karpenter:pkg/controllers/provisioning/suite_test.go:583
/// karpenter:pkg/controllers/provisioning/suite_test.go:634
#[test]
fn sidecars_and_init_containers_size_the_node_by_their_peak() {
    // (containers, init containers in order as (restartable, cpu, memory))
    type Init<'a> = (bool, &'a str, &'a str);
    let cases: [((&str, &str), [Init; 2]); 3] = [
        (("6", "2Gi"), [(false, "10", "4Gi"), (true, "4.9", "2.9Gi")]),
        (("6", "2Gi"), [(true, "4.9", "2.9Gi"), (false, "5", "1Gi")]),
        (("5", "1Gi"), [(true, "4.9", "2.9Gi"), (false, "6", "2Gi")]),
    ];
    for ((cpu, mem), inits) in cases {
        let init: Vec<String> = inits
            .iter()
            .enumerate()
            .map(|(i, (restartable, cpu, mem))| {
                let policy = if *restartable { ", restartPolicy: Always" } else { "" };
                format!("{{name: init-{i}, image: i{policy}, {}}}", sized(cpu, mem))
            })
            .collect();
        let mut c = with_example_types();
        c.pending(
            "{name: p}",
            &spec(&format!(
                "containers: [{{name: c, image: i, {}}}], initContainers: [{}]",
                sized(cpu, mem),
                init.join(", ")
            )),
        );
        let d = c.decide();
        assert_eq!(launched_capacity(&d, "p"), (11_000, 5 * GIB), "{cpu}/{mem} with {inits:?}");
    }
}

// ----- Resource Limits -----

/// karpenter:pkg/controllers/provisioning/suite_test.go:742
#[test]
fn capacity_in_flight_beyond_the_cpu_limit_blocks_the_nodepool() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "  limits: {cpu: \"20\"}\n");
    c.objects.nodeclaims.push(
        serde_yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: in-flight, labels: {karpenter.sh/nodepool: default}}\nspec: {nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}, requirements: []}\nstatus: {capacity: {cpu: \"100\"}}\n",
        )
        .unwrap(),
    );
    c.pending("{name: p}", "");
    let d = c.decide();
    assert!(!d.scheduled("p"), "{}", d.plan.render(&d.snap));
}

fn cpu_limited(limit: &str) -> Cluster {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", &format!("  limits: {{cpu: \"{limit}\"}}\n"));
    c
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:765
#[test]
fn a_node_within_the_cpu_limit_launches() {
    let mut c = cpu_limited("2");
    c.pending("{name: p}", &spec(&container("cpu: \"1.75\"")));
    let d = c.decide();
    assert!(d.nodeclaim_of("p").is_some(), "{}", d.plan.render(&d.snap));
}

fn anti_affine(cpu: &str) -> String {
    spec(&format!(
        "{}, affinity: {{podAntiAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [{{topologyKey: kubernetes.io/hostname, labelSelector: {{matchLabels: {{app: foo}}}}}}]}}}}",
        container(&format!("cpu: \"{cpu}\""))
    ))
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:782
#[test]
fn the_cpu_limit_admits_only_the_nodes_it_has_room_for() {
    let mut c = cpu_limited("3");
    c.pending_n(2, "p", "app: foo", &anti_affine("1.5"));
    let d = c.decide();
    let placed = ["p-0", "p-1"].iter().filter(|p| d.scheduled(p)).count();
    let refused = ["p-0", "p-1"].iter().filter(|p| d.unschedulable(p).is_some()).count();
    assert_eq!((placed, refused), (1, 1), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:832
#[test]
fn a_pod_needing_more_than_the_cpu_limit_does_not_schedule() {
    let mut c = cpu_limited("2");
    c.pending("{name: p}", &spec(&container("cpu: \"2.1\"")));
    assert!(!c.decide().scheduled("p"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:847
#[test]
fn a_pods_limit_below_every_types_capacity_blocks_gpu_pods() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "  limits: {pods: \"1\"}\n");
    c.pending(
        "{name: p}",
        &spec(&format!(
            "containers: [{{name: c, image: i, resources: {{requests: {{{GPU_A}: \"1\"}}, limits: {{{GPU_A}: \"1\"}}}}}}]"
        )),
    );
    assert!(!c.decide().scheduled("p"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:863
#[test]
fn nodes_launched_in_an_earlier_round_count_against_the_cpu_limit() {
    let mut c = cpu_limited("2");
    c.pending("{name: first}", &spec(&container("cpu: \"1.75\"")));
    let d = c.decide();
    assert!(d.nodeclaim_of("first").is_some(), "{}", d.plan.render(&d.snap));
    launch(&mut c, &d);
    c.pending("{name: second}", &spec(&container("cpu: \"1.75\"")));
    let d = c.decide();
    assert!(!d.scheduled("second"), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:891
#[test]
fn the_nodes_limit_stops_the_third_node() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "  limits: {nodes: \"2\"}\n");
    for (round, expect) in [(0, true), (1, true), (2, false)] {
        let name = format!("p-{round}");
        c.pending(&format!("{{name: {name}, labels: {{app: foo}}}}"), &anti_affine("1.5"));
        let d = c.decide();
        assert_eq!(d.nodeclaim_of(&name).is_some(), expect, "round {round}: {}", d.plan.render(&d.snap));
        assert_eq!(d.scheduled(&name), expect, "round {round}");
        launch(&mut c, &d);
    }
}

// ----- Daemonsets -----

/// Adds a DaemonSet `name` whose pod template spec is the flow mapping body `pod_spec`.
fn daemonset(c: &mut Cluster, name: &str, pod_spec: &str) {
    c.daemonset(&format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: {name}, namespace: default}}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec: {{{pod_spec}}}\n"
    ));
}

/// One pending pod requesting 1 CPU and 1 GiB (plus `extra` spec fields); the capacity of the
/// node it is launched on.
fn small_pod_capacity(c: &mut Cluster, extra: &str) -> (i64, i64) {
    c.pending("{name: p}", &spec(&format!("{}{extra}", container("cpu: \"1\", memory: 1Gi"))));
    let d = c.decide();
    launched_capacity(&d, "p")
}

const DS_2CPU: &str = "containers: [{name: c, image: i, resources: {requests: {cpu: \"2\", memory: 2Gi}}}]";

/// karpenter:pkg/controllers/provisioning/suite_test.go:935
#[test]
fn daemonset_overhead_sizes_the_node() {
    let mut c = cluster();
    daemonset(&mut c, "ds", DS_2CPU);
    assert_eq!(small_pod_capacity(&mut c, ""), (4000, 4 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:974
#[test]
fn daemonset_overhead_counts_despite_an_untolerated_startup_taint() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "  template: {spec: {startupTaints: [{key: foo.com/taint, effect: NoSchedule}]}}\n");
    daemonset(&mut c, "ds", DS_2CPU);
    assert_eq!(small_pod_capacity(&mut c, ""), (4000, 4 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1004
#[test]
fn daemonset_overhead_larger_than_every_type_blocks_scheduling() {
    let mut c = cluster();
    daemonset(
        &mut c,
        "ds",
        "containers: [{name: c, image: i, resources: {requests: {cpu: \"10000\", memory: 10000Gi}}}]",
    );
    c.pending("{name: p}", "");
    assert!(!c.decide().scheduled("p"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1057
#[test]
fn a_daemonset_limit_without_a_request_counts_as_its_request() {
    let mut c = cluster();
    daemonset(
        &mut c,
        "ds",
        "containers: [{name: c, image: i, resources: {limits: {cpu: \"10000\", memory: 10000Gi}, requests: {cpu: \"1\"}}}]",
    );
    c.pending("{name: p}", "");
    assert!(!c.decide().scheduled("p"), "the 10000Gi memory limit is the daemon's request");
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1070
#[test]
fn a_daemonsets_overhead_is_the_larger_of_its_containers_and_init_containers() {
    let mut c = cluster();
    daemonset(
        &mut c,
        "ds",
        "containers: [{name: c, image: i, resources: {limits: {cpu: \"10000\", memory: 1Gi}, requests: {cpu: \"1\"}}}], initContainers: [{name: init, image: i, resources: {limits: {cpu: \"10000\", memory: 3Gi}, requests: {cpu: \"3\"}}}]",
    );
    // The daemon reserves max(1, 3) = 3 CPU and max(1Gi, 3Gi) = 3Gi (limits standing in for
    // the memory requests): the 2Gi type is too small, the 4-CPU, 4Gi one holds it.
    c.pending("{name: p}", "");
    assert_eq!(launched_capacity(&c.decide(), "p"), (4000, 4 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1098
#[test]
fn a_daemonset_whose_init_container_limit_is_too_large_blocks_scheduling() {
    let mut c = cluster();
    daemonset(
        &mut c,
        "ds",
        "containers: [{name: c, image: i, resources: {limits: {cpu: \"10000\", memory: 1Gi}, requests: {cpu: \"1\"}}}], initContainers: [{name: init, image: i, resources: {limits: {cpu: \"10000\", memory: 10000Gi}, requests: {cpu: \"1\"}}}]",
    );
    c.pending("{name: p}", "");
    assert!(!c.decide().scheduled("p"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1119
#[test]
fn a_daemonset_init_container_larger_than_every_type_blocks_scheduling() {
    let mut c = cluster();
    daemonset(
        &mut c,
        "ds",
        "containers: [{name: c, image: i}], initContainers: [{name: init, image: i, resources: {requests: {cpu: \"10000\", memory: 10000Gi}}}]",
    );
    c.pending("{name: p}", "");
    assert!(!c.decide().scheduled("p"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1135
#[test]
fn a_daemonset_without_requests_does_not_block_scheduling() {
    let mut c = cluster();
    daemonset(&mut c, "ds", "containers: [{name: c, image: i}]");
    c.pending("{name: p}", "");
    let d = c.decide();
    assert!(d.nodeclaim_of("p").is_some(), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1143
#[test]
fn daemonsets_not_tolerating_the_nodepool_taint_add_no_overhead() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "  template: {spec: {taints: [{key: foo, value: bar, effect: NoSchedule}]}}\n");
    daemonset(&mut c, "ds", DS_2CPU);
    assert_eq!(small_pod_capacity(&mut c, ", tolerations: [{operator: Exists}]"), (2000, 2 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1175
#[test]
fn daemonsets_selecting_labels_no_nodepool_has_add_no_overhead() {
    let mut c = cluster();
    daemonset(&mut c, "ds", &format!("{DS_2CPU}, nodeSelector: {{node: invalid}}"));
    assert_eq!(small_pod_capacity(&mut c, ""), (2000, 2 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1219
#[test]
fn daemonsets_selecting_a_nodepool_label_add_overhead() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "  template: {metadata: {labels: {purpose: monitoring}}, spec: {requirements: []}}\n");
    daemonset(&mut c, "ds", &format!("{DS_2CPU}, nodeSelector: {{purpose: monitoring}}"));
    assert_eq!(small_pod_capacity(&mut c, ""), (4000, 4 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1276
#[test]
fn daemonsets_excluding_an_undefined_label_value_add_overhead() {
    let mut c = cluster();
    daemonset(
        &mut c,
        "ds",
        &format!(
            "{DS_2CPU}, affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{{key: foo, operator: NotIn, values: [bar]}}]}}]}}}}}}"
        ),
    );
    assert_eq!(small_pod_capacity(&mut c, &format!(", {}", affinity_in(ZONE, "test-zone-2"))), (4000, 4 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1431
#[test]
fn daemonset_node_preferences_do_not_remove_its_overhead() {
    let mut c = cluster();
    daemonset(
        &mut c,
        "ds",
        &format!(
            "{DS_2CPU}, affinity: {{nodeAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 1, preference: {{matchExpressions: [{{key: node, operator: In, values: [invalid]}}]}}}}]}}}}"
        ),
    );
    assert_eq!(small_pod_capacity(&mut c, ""), (4000, 4 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1459
#[test]
fn prefer_no_schedule_taints_do_not_remove_daemonset_overhead() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "  template: {spec: {taints: [{key: test, effect: PreferNoSchedule}]}}\n");
    daemonset(&mut c, "ds", DS_2CPU);
    assert_eq!(small_pod_capacity(&mut c, ""), (4000, 4 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:956
#[test]
fn a_daemonsets_host_port_keeps_a_pod_wanting_it_off_its_nodes() {
    let mut c = cluster();
    daemonset(&mut c, "ds", &with_host_port(DS_2CPU, 8080));
    c.pending("{name: p}", &spec(&with_host_port(&container("cpu: \"1\", memory: 1Gi"), 8080)));
    let d = c.decide();
    assert!(!d.scheduled("p"), "the DaemonSet holds port 8080 on every node: {}", d.plan.render(&d.snap));
    assert!(d.plan.nodeclaims.is_empty());
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1014
#[test]
fn a_daemonsets_running_pod_sizes_its_overhead_not_its_template() {
    let mut c = cluster();
    daemonset(&mut c, "ds", "containers: [{name: c, image: i, resources: {requests: {cpu: \"4\", memory: 4Gi}}}]");
    // Its pod asks for less (a LimitRange or webhook changed it): the pod is what runs.
    c.pending(&ds_pod_meta("ds-abcde", "ds"), &spec(DS_2CPU));
    assert_eq!(small_pod_capacity(&mut c, ", nodeSelector: {karpenter.sh/nodepool: default}"), (4000, 4 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1197
#[test]
fn a_daemonset_no_instance_type_admits_adds_no_overhead() {
    let mut c = cluster();
    daemonset(&mut c, "ds", &format!("{DS_2CPU}, {}", affinity_in(INSTANCE_TYPE, "non-existent-instance-type")));
    assert_eq!(small_pod_capacity(&mut c, ""), (2000, 2 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1246
#[test]
fn each_instance_type_carries_only_the_daemonsets_it_admits() {
    let mut c = cluster();
    let cpu = |n: &str| format!("containers: [{{name: c, image: i, resources: {{requests: {{cpu: \"{n}\"}}}}}}]");
    daemonset(&mut c, "small-ds", &format!("{}, {}", cpu("1"), affinity_in(SIZE, "small")));
    daemonset(&mut c, "large-ds", &format!("{}, {}", cpu("10"), affinity_in(SIZE, "large")));
    assert_eq!(small_pod_capacity(&mut c, ""), (4000, 4 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1299
#[test]
fn a_daemonsets_pod_is_judged_by_its_templates_node_affinity() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "  template: {metadata: {labels: {foo: bar}}, spec: {requirements: []}}\n");
    let big = "containers: [{name: c, image: i, resources: {requests: {cpu: \"4\", memory: 4Gi}}}]";
    daemonset(&mut c, "ds", &format!("{big}, {}", affinity_in("foo", "bar")));
    // The DaemonSet controller pins its pod to one node by name; the pod asks for less.
    let pinned = "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [node-name]}]}]}}}";
    c.pending(&ds_pod_meta("ds-abcde", "ds"), &spec(&format!("{DS_2CPU}, {pinned}")));
    assert_eq!(small_pod_capacity(&mut c, ", nodeSelector: {foo: bar}"), (4000, 4 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1371
#[test]
fn a_daemonset_admitted_by_its_second_affinity_term_adds_overhead() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "  template: {metadata: {labels: {foo: bar}}, spec: {requirements: []}}\n");
    let terms = "affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: foo, operator: In, values: [voo]}]}, {matchExpressions: [{key: foo, operator: In, values: [bar]}]}]}}}";
    daemonset(&mut c, "ds", &format!("{DS_2CPU}, {terms}"));
    assert_eq!(small_pod_capacity(&mut c, ""), (4000, 4 * GIB));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1496
#[test]
fn a_daemonsets_host_port_counts_only_where_it_runs() {
    let mut c = cluster();
    let sized = |cpu: &str, port: u16, size: &str| {
        let requests = format!("cpu: \"{cpu}\", memory: {cpu}Gi");
        format!("{}, {}", with_host_port(&container(&requests), port), affinity_in(SIZE, size))
    };
    daemonset(&mut c, "large-ds", &sized("4", 8080, "large"));
    daemonset(&mut c, "small-ds", &sized("2", 8081, "small"));
    let mine =
        format!("{}, {}", with_host_port(&container("cpu: \"1\", memory: 1Gi"), 8080), affinity_in(SIZE, "small"));
    c.pending("{name: p}", &spec(&mine));
    let d = c.decide();
    assert_eq!(label(&d, "p", SIZE).as_deref(), Some("small"));
    assert_eq!(launched_capacity(&d, "p"), (4000, 4 * GIB));
}

/// Not a Karpenter case (issue 47): a DaemonSet that runs only on GPU types is no overhead
/// on the CPU-only types of the same NodePool.
#[test]
fn a_gpu_only_daemonset_does_not_make_a_cpu_only_node_bigger() {
    let mut c = cluster();
    daemonset(
        &mut c,
        "device-plugin",
        &format!("{DS_2CPU}, {}", affinity_in(INSTANCE_TYPE, "gpu-vendor-instance-type")),
    );
    assert_eq!(small_pod_capacity(&mut c, ""), (2000, 2 * GIB), "the small CPU-only type, as without the DaemonSet");
}

/// `containers` (a flow-mapping body) with its first container publishing `port` on the host.
fn with_host_port(containers: &str, port: u16) -> String {
    containers.replacen(
        "{name: c, image: i,",
        &format!("{{name: c, image: i, ports: [{{containerPort: {port}, hostPort: {port}}}],"),
        1,
    )
}

/// The metadata of pod `name` that DaemonSet `ds` controls (pending, as Karpenter's cases
/// leave it).
fn ds_pod_meta(name: &str, ds: &str) -> String {
    format!(
        "{{name: {name}, ownerReferences: [{{apiVersion: apps/v1, kind: DaemonSet, name: {ds}, uid: ds-uid, controller: true}}]}}"
    )
}

// ----- Taints -----

/// karpenter:pkg/controllers/provisioning/suite_test.go:1645
#[test]
fn every_way_of_tolerating_the_nodepool_taint_schedules() {
    let mut c = Cluster::new(default_types());
    pool(
        &mut c,
        "default",
        "  template: {spec: {taints: [{key: nvidia.com/gpu, value: \"true\", effect: NoSchedule}]}}\n",
    );
    let tolerations = [
        "{key: nvidia.com/gpu, operator: Equal, value: \"true\", effect: NoSchedule}",
        "{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}",
        "{key: nvidia.com/gpu, operator: Exists}",
        "{operator: Exists}",
    ];
    for (i, t) in tolerations.iter().enumerate() {
        c.pending(&format!("{{name: p-{i}}}"), &spec(&format!("tolerations: [{t}]")));
    }
    let d = c.decide();
    for (i, t) in tolerations.iter().enumerate() {
        assert!(d.nodeclaim_of(&format!("p-{i}")).is_some(), "{t}: {}", d.plan.render(&d.snap));
    }
}

// ----- Volume Topology Requirements -----

/// Karpenter's suite StorageClass: zones 2 and 3, bound on first consumer.
const ZONAL_CLASS: &str = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: zonal}\nprovisioner: test-provisioner\nvolumeBindingMode: WaitForFirstConsumer\nallowedTopologies: [{matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [test-zone-2, test-zone-3]}]}]\n";

/// A claim `name`: `spec` is the flow mapping body of its spec. A claim naming its volume
/// is marked bound, as the PV controller marks it (and Karpenter's test fixture does).
fn claim(c: &mut Cluster, name: &str, spec: &str) {
    let annotations =
        if spec.contains("volumeName:") { ", annotations: {pv.kubernetes.io/bind-completed: \"yes\"}" } else { "" };
    c.claim(&format!(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: default{annotations}}}\nspec: {{accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}, {spec}}}\n"
    ));
}

/// A volume `name`: `source` and more spec as a flow mapping body.
fn volume(c: &mut Cluster, name: &str, spec: &str) {
    c.volume(&format!(
        "apiVersion: v1\nkind: PersistentVolume\nmetadata: {{name: {name}}}\nspec: {{accessModes: [ReadWriteOnce], capacity: {{storage: 100Gi}}, {spec}}}\n"
    ));
}

const CSI: &str = "csi: {driver: test.driver, volumeHandle: test-handle}";

fn zone3_volume(c: &mut Cluster) {
    volume(
        c,
        "zone-3-volume",
        &format!(
            "{CSI}, nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-3]}}]}}]}}}}"
        ),
    );
}

/// A pod using claim `claim`, with more spec fields in `extra`.
fn with_claim(claim: &str, extra: &str) -> String {
    spec(&format!(
        "containers: [{{name: c, image: i}}], volumes: [{{name: data, persistentVolumeClaim: {{claimName: {claim}}}}}]{extra}"
    ))
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1995
#[test]
fn a_pod_whose_claim_does_not_exist_is_ignored() {
    let mut c = cluster();
    c.pending("{name: p}", &with_claim("invalid", ""));
    let d = c.decide_ignoring();
    // Karpenter's ignored-pod count: exactly this pod is left out.
    assert_eq!(d.ignored.len(), 1, "{:?}", d.ignored);
    let e = d.ignored_pod("p").expect("the pod is ignored");
    assert_eq!(e.field, "spec.volumes[0].persistentVolumeClaim.claimName");
    assert!(e.message.contains("PersistentVolumeClaim default/invalid not found"), "{e}");
    assert!(d.plan.nodeclaims.is_empty());
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2024
/// karpenter:pkg/controllers/provisioning/suite_test.go:2054
#[test]
fn unbound_claims_without_a_storage_class_are_ignored() {
    for (class, why) in
        [("\"\"", "names no StorageClass"), ("missing-storage-class", "StorageClass missing-storage-class")]
    {
        let mut c = cluster();
        claim(&mut c, "data", &format!("storageClassName: {class}"));
        c.pending("{name: p}", &with_claim("data", ""));
        let d = c.decide_ignoring();
        let e = d.ignored_pod("p").unwrap_or_else(|| panic!("class {class}: not ignored"));
        assert!(e.message.contains(why), "{e}");
        assert!(d.plan.nodeclaims.is_empty());
    }
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2066
/// karpenter:pkg/controllers/provisioning/suite_test.go:2077
/// karpenter:pkg/controllers/provisioning/suite_test.go:2090
#[test]
fn a_pod_with_an_invalid_claim_does_not_stop_the_others() {
    type Setup = fn(&mut Cluster);
    let invalid: [(&str, Setup); 3] = [
        ("pvc", |_| {}),
        ("storage class", |c| claim(c, "invalid", "storageClassName: invalid-storage-class")),
        ("volume name", |c| claim(c, "invalid", "volumeName: invalid-volume-name")),
    ];
    for (case, setup) in invalid {
        let mut c = cluster();
        setup(&mut c);
        c.pending("{name: invalid-pod}", &with_claim("invalid", ""));
        c.pending("{name: p}", "");
        let d = c.decide_ignoring();
        assert!(d.ignored_pod("invalid-pod").is_some(), "{case}: not ignored");
        assert!(d.nodeclaim_of("p").is_some(), "{case}: {}", d.plan.render(&d.snap));
    }
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2004
/// karpenter:pkg/controllers/provisioning/suite_test.go:2034
#[test]
fn bound_claims_schedule_whatever_their_storage_class() {
    for class in ["\"\"", "missing-storage-class"] {
        let mut c = cluster();
        volume(&mut c, "test-volume", &format!("{CSI}, storageClassName: {class}"));
        claim(&mut c, "data", &format!("storageClassName: {class}, volumeName: test-volume"));
        c.pending("{name: p}", &with_claim("data", ""));
        let d = c.decide();
        assert!(d.nodeclaim_of("p").is_some(), "class {class}: {}", d.plan.render(&d.snap));
    }
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2103
#[test]
fn unbound_claims_narrow_the_zone_to_the_storage_class_zones() {
    let mut c = cluster();
    c.storage_class(ZONAL_CLASS);
    claim(&mut c, "data", "storageClassName: zonal");
    c.pending("{name: p}", &with_claim("data", &format!(", {}", affinity_in(ZONE, "test-zone-1, test-zone-3"))));
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-3"));
}

/// A pod with an ephemeral volume `data` of StorageClass `zonal`, with more spec in `extra`.
fn with_ephemeral(extra: &str) -> String {
    spec(&format!(
        "containers: [{{name: c, image: i}}], volumes: [{{name: data, ephemeral: {{volumeClaimTemplate: {{spec: {{accessModes: [ReadWriteOnce], storageClassName: zonal, resources: {{requests: {{storage: 1Gi}}}}}}}}}}}}]{extra}"
    ))
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2116
#[test]
fn an_ephemeral_claim_narrows_the_zone_to_the_storage_class_zones() {
    let mut c = cluster();
    c.storage_class(ZONAL_CLASS);
    claim(&mut c, "p-data", "storageClassName: zonal");
    c.pending("{name: p}", &with_ephemeral(&format!(", {}", affinity_in(ZONE, "test-zone-1, test-zone-3"))));
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-3"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2150
#[test]
fn ephemeral_storage_class_zones_the_pod_excludes_do_not_schedule() {
    let mut c = cluster();
    c.storage_class(ZONAL_CLASS);
    claim(&mut c, "p-data", "storageClassName: zonal");
    c.pending("{name: p}", &with_ephemeral(&format!(", {}", affinity_in(ZONE, "test-zone-1"))));
    let d = c.decide();
    assert!(!d.scheduled("p"));
    assert!(d.unschedulable("p").is_some());
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2138
#[test]
fn storage_class_zones_the_pod_excludes_do_not_schedule() {
    let mut c = cluster();
    c.storage_class(ZONAL_CLASS);
    claim(&mut c, "data", "storageClassName: zonal");
    c.pending("{name: p}", &with_claim("data", &format!(", {}", affinity_in(ZONE, "test-zone-1"))));
    assert!(!c.decide().scheduled("p"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2171
#[test]
fn bound_claims_pin_the_zone_of_their_volume() {
    let mut c = cluster();
    c.storage_class(ZONAL_CLASS);
    zone3_volume(&mut c);
    claim(&mut c, "data", "storageClassName: zonal, volumeName: zone-3-volume");
    c.pending("{name: p}", &with_claim("data", ""));
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-3"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2182
#[test]
fn a_bound_ephemeral_claim_pins_the_zone_of_its_volume() {
    let mut c = cluster();
    c.storage_class(ZONAL_CLASS);
    zone3_volume(&mut c);
    claim(&mut c, "p-data", "storageClassName: zonal, volumeName: zone-3-volume");
    c.pending("{name: p}", &with_ephemeral(""));
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-3"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2317
#[test]
fn volume_zones_the_pod_excludes_do_not_schedule() {
    let mut c = cluster();
    c.storage_class(ZONAL_CLASS);
    zone3_volume(&mut c);
    claim(&mut c, "data", "storageClassName: zonal, volumeName: zone-3-volume");
    c.pending("{name: p}", &with_claim("data", &format!(", {}", affinity_in(ZONE, "test-zone-1"))));
    assert!(!c.decide().scheduled("p"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2330
#[test]
fn ephemeral_volume_zones_the_pod_excludes_do_not_schedule() {
    let mut c = cluster();
    c.storage_class(ZONAL_CLASS);
    zone3_volume(&mut c);
    claim(&mut c, "p-data", "storageClassName: zonal, volumeName: zone-3-volume");
    c.pending("{name: p}", &with_ephemeral(&format!(", {}", affinity_in(ZONE, "test-zone-1"))));
    let d = c.decide();
    assert!(!d.scheduled("p"));
    assert!(d.unschedulable("p").is_some());
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2353
#[test]
fn relaxing_required_terms_keeps_the_volume_zone() {
    let mut c = cluster();
    c.storage_class(ZONAL_CLASS);
    zone3_volume(&mut c);
    claim(&mut c, "data", "storageClassName: zonal, volumeName: zone-3-volume");
    c.pending(
        "{name: p}",
        &with_claim(
            "data",
            ", affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: example.com/label, operator: In, values: [unsupported]}]}, {matchExpressions: [{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}]}]}}}",
        ),
    );
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-3"));
}

const LOCAL_CLASS: &str = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: local-path}\nprovisioner: kubernetes.io/no-provisioner\n";

fn hostname_affinity(source: &str) -> String {
    format!(
        "{source}, storageClassName: local-path, nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [some-random-node]}}]}}]}}}}"
    )
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2241
/// karpenter:pkg/controllers/provisioning/suite_test.go:2242
#[test]
fn local_volume_hostname_affinity_is_ignored() {
    for source in ["local: {path: /mnt/local-disks}", "hostPath: {path: /mnt/local-disks}"] {
        let mut c = cluster();
        c.storage_class(LOCAL_CLASS);
        volume(&mut c, "local-volume", &hostname_affinity(source));
        claim(&mut c, "data", "storageClassName: local-path, volumeName: local-volume");
        c.pending("{name: p}", &with_claim("data", ""));
        let d = c.decide();
        assert!(d.nodeclaim_of("p").is_some(), "{source}: {}", d.plan.render(&d.snap));
    }
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2287
/// karpenter:pkg/controllers/provisioning/suite_test.go:2288
#[test]
fn local_ephemeral_volume_hostname_affinity_is_ignored() {
    for source in ["local: {path: /mnt/local-disks}", "hostPath: {path: /mnt/local-disks}"] {
        let mut c = cluster();
        c.storage_class(LOCAL_CLASS);
        volume(&mut c, "local-volume", &hostname_affinity(source));
        claim(&mut c, "p-data", "storageClassName: local-path, volumeName: local-volume");
        c.pending(
            "{name: p}",
            &spec("containers: [{name: c, image: i}], volumes: [{name: data, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], storageClassName: local-path, resources: {requests: {storage: 1Gi}}}}}}]"),
        );
        let d = c.decide();
        assert!(d.nodeclaim_of("p").is_some(), "{source}: {}", d.plan.render(&d.snap));
    }
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2290
#[test]
fn a_network_volume_s_hostname_affinity_is_kept() {
    let mut c = cluster();
    c.storage_class(ZONAL_CLASS);
    volume(
        &mut c,
        "pinned",
        &format!(
            "{CSI}, nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [some-random-node]}}]}}]}}}}"
        ),
    );
    claim(&mut c, "data", "storageClassName: zonal, volumeName: pinned");
    c.pending("{name: p}", &with_claim("data", ""));
    let d = c.decide();
    assert!(!d.scheduled("p"), "{}", d.plan.render(&d.snap));
    assert!(d.unschedulable("p").is_some());
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:685
#[test]
fn pod_level_requests_size_the_node() {
    let mut types: Vec<InstanceType> = default_types().to_vec();
    for (cpu, gib) in [(10, 4), (11, 5), (12, 6)] {
        let f = fake(&format!("example-{cpu}")).resources(cpu, gib * GIB, 110).arch("arch").os(&["linux"]);
        let price = f.price();
        types.push(f.offerings(&[("spot", "test-zone-1", price, true)]).build());
    }
    let mut c = Cluster::new(Arc::new(types));
    pool(&mut c, "default", "");
    c.pending(
        "{name: p}",
        "  resources: {limits: {cpu: \"10\", memory: 4Gi}, requests: {cpu: \"9.9\", memory: 3.9Gi}}\n  containers: [{name: c, image: i, resources: {limits: {cpu: \"5\", memory: 1Gi}, requests: {cpu: \"5\", memory: 1Gi}}}]\n  initContainers:\n    - {name: a, image: i, resources: {limits: {cpu: \"6\", memory: 2Gi}, requests: {cpu: \"6\", memory: 2Gi}}}\n    - {name: b, image: i, restartPolicy: Always, resources: {limits: {cpu: \"4\", memory: 2Gi}, requests: {cpu: \"4\", memory: 2Gi}}}\n",
    );
    let d = c.decide();
    assert_eq!(launched_capacity(&d, "p"), (10_000, 4 * GIB));
    // The pod-level requests, not the containers' 9 CPU and 3Gi, are what the node must hold.
    let requests = d.created("p").spec.resources.requests;
    assert_eq!(
        (requests["cpu"].0.as_str(), requests["memory"].0.as_str()),
        ("9900m", "4187593114"),
        "3.9Gi rounds up to whole bytes"
    );
}

// ----- Labels and NodeClaim creation -----

/// The created NodeClaim's requirement on `key`: (operator, sorted values).
fn written(nc: &tenon_api::NodeClaim, key: &str) -> Option<(String, Vec<String>)> {
    nc.spec.requirements.iter().find(|r| r.key == key).map(|r| {
        let mut v = r.values.clone();
        v.sort();
        (r.operator.clone(), v)
    })
}

fn in_(values: &[&str]) -> Option<(String, Vec<String>)> {
    let mut v: Vec<String> = values.iter().map(|s| s.to_string()).collect();
    v.sort();
    Some(("In".into(), v))
}

/// The fake types that fit a pod requesting nothing (all of them but none on labels).
fn all_type_names(c: &Cluster) -> Vec<String> {
    c.catalog_names()
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1528
#[test]
fn nodes_get_the_templates_annotations() {
    let mut c = Cluster::new(default_types());
    pool(
        &mut c,
        "default",
        "  template: {metadata: {annotations: {karpenter.sh/do-not-disrupt: \"true\"}}, spec: {requirements: []}}\n",
    );
    c.pending("{name: p}", "");
    let annotations = c.decide().created("p").metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("karpenter.sh/do-not-disrupt").map(String::as_str), Some("true"), "{annotations:?}");
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1546
#[test]
fn nodes_get_template_labels_and_a_value_for_each_custom_requirement() {
    let mut c = Cluster::new(default_types());
    pool(
        &mut c,
        "default",
        "  template:\n    metadata: {labels: {test-key-1: test-value-1}}\n    spec:\n      requirements:\n        - {key: test-key-2, operator: In, values: [test-value-2]}\n        - {key: test-key-3, operator: NotIn, values: [test-value-3]}\n        - {key: test-key-4, operator: Lt, values: [\"4\"]}\n        - {key: test-key-5, operator: Gt, values: [\"5\"]}\n        - {key: test-key-6, operator: Exists}\n        - {key: test-key-7, operator: DoesNotExist}\n",
    );
    c.pending("{name: p}", "");
    let labels = c.decide().created("p").metadata.labels.unwrap();
    assert_eq!(labels[NODEPOOL], "default");
    assert_eq!(labels["test-key-1"], "test-value-1");
    assert_eq!(labels["test-key-2"], "test-value-2");
    assert_ne!(labels["test-key-3"], "test-value-3");
    assert!(labels["test-key-4"].parse::<i64>().unwrap() < 4, "{labels:?}");
    assert!(labels["test-key-5"].parse::<i64>().unwrap() > 5, "{labels:?}");
    assert!(labels.contains_key("test-key-6"));
    assert!(!labels.contains_key("test-key-7"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:259
/// karpenter:pkg/controllers/provisioning/suite_test.go:270
#[test]
fn a_created_nodeclaim_takes_the_nodepools_termination_grace_period() {
    let mut c = cluster();
    c.pending("{name: p}", "");
    assert_eq!(c.decide().created("p").spec.termination_grace_period, None);
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "  template: {spec: {requirements: [], terminationGracePeriod: 223h}}\n");
    c.pending("{name: p}", "");
    assert_eq!(c.decide().created("p").spec.termination_grace_period.as_deref(), Some("223h"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:283
#[test]
fn a_nodepool_being_deleted_launches_nothing() {
    let mut c = cluster();
    c.objects.nodepools[0].metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2026-11-30T00:00:00Z".parse().unwrap()));
    c.pending("{name: p}", "");
    let d = c.decide();
    assert!(d.plan.nodeclaims.is_empty());
    assert!(d.unschedulable("p").is_some_and(|r| r.contains("being deleted")), "{:?}", d.unschedulable("p"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1579
/// karpenter:pkg/controllers/provisioning/suite_test.go:1601
#[test]
fn template_labels_in_kubernetes_domains_are_valid_and_label_the_node() {
    for prefix in ["", "subdomain."] {
        for domain in ["kubernetes.io", "k8s.io"] {
            let key = format!("{prefix}{domain}/test");
            let mut c = Cluster::new(default_types());
            pool(
                &mut c,
                "default",
                &format!("  template: {{metadata: {{labels: {{{key}: test-value}}}}, spec: {{requirements: []}}}}\n"),
            );
            let problems = tenon_api::validation::validate_nodepool(&c.objects.nodepools[0]);
            assert!(problems.iter().all(|p| p.severity != tenon_api::validation::Severity::Error), "{problems:?}");
            c.pending(
                "{name: p}",
                &spec(&format!("containers: [{{name: c, image: i}}], {}", affinity_in(&key, "test-value"))),
            );
            let d = c.decide();
            assert_eq!(d.created("p").metadata.labels.unwrap().get(&key).map(String::as_str), Some("test-value"));
        }
    }
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1623
#[test]
fn well_known_requirements_do_not_become_labels() {
    let mut c = Cluster::new(default_types());
    pool(
        &mut c,
        "default",
        "  template: {spec: {requirements: [{key: foo, operator: In, values: [bar]}, {key: node.kubernetes.io/windows-build, operator: NotIn, values: [test-value]}]}}\n",
    );
    c.pending("{name: p}", "");
    let labels = c.decide().created("p").metadata.labels.unwrap();
    assert_eq!(labels["foo"], "bar");
    assert!(!labels.contains_key("node.kubernetes.io/windows-build"), "{labels:?}");
    assert!(!labels.contains_key("kubernetes.io/hostname"), "{labels:?}");
}

/// A pod's own custom requirement becomes a label too, so kube-scheduler can bind it there.
#[test]
fn a_pods_custom_requirement_becomes_a_label() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "  template: {spec: {requirements: [{key: team, operator: Exists}]}}\n");
    c.pending("{name: p}", &spec("containers: [{name: c, image: i}], nodeSelector: {team: payments}"));
    assert_eq!(c.decide().created("p").metadata.labels.unwrap()["team"], "payments");
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1695
/// karpenter:pkg/controllers/provisioning/suite_test.go:1716
#[test]
fn a_created_nodeclaim_pins_its_types_its_nodepool_and_the_pools_requirements() {
    let mut c = cluster();
    c.pending("{name: p}", "");
    let nc = c.decide().created("p");
    let all = all_type_names(&c);
    let names: Vec<&str> = all.iter().map(String::as_str).collect();
    assert_eq!(written(&nc, INSTANCE_TYPE), in_(&names));
    assert_eq!(written(&nc, NODEPOOL), in_(&["default"]));

    let mut c = Cluster::new(default_types());
    pool(
        &mut c,
        "default",
        "  template: {spec: {requirements: [{key: custom-requirement-key, operator: In, values: [value]}, {key: custom-requirement-key2, operator: In, values: [value]}]}}\n",
    );
    c.pending("{name: p}", "");
    let nc = c.decide().created("p");
    assert_eq!(written(&nc, INSTANCE_TYPE), in_(&names));
    assert_eq!(written(&nc, NODEPOOL), in_(&["default"]));
    assert_eq!(written(&nc, "custom-requirement-key"), in_(&["value"]));
    assert_eq!(written(&nc, "custom-requirement-key2"), in_(&["value"]));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1766
/// karpenter:pkg/controllers/provisioning/suite_test.go:1803
#[test]
fn a_created_nodeclaim_pins_only_the_types_of_its_arch_or_os() {
    for (key, value) in [("kubernetes.io/arch", "arm64"), ("kubernetes.io/os", "ios")] {
        let mut c = Cluster::new(default_types());
        pool(
            &mut c,
            "default",
            &format!("  template: {{spec: {{requirements: [{{key: {key}, operator: In, values: [{value}]}}]}}}}\n"),
        );
        c.pending("{name: p}", "");
        let nc = c.decide().created("p");
        assert_eq!(written(&nc, key), in_(&[value]));
        assert_eq!(written(&nc, INSTANCE_TYPE), in_(&["arm-instance-type"]), "{key}");
    }
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1840
#[test]
fn a_created_nodeclaim_pins_only_the_types_holding_the_pods_resources() {
    let mut c = cluster();
    c.pending("{name: p}", &spec(&format!("containers: [{{name: c, image: i, resources: {{requests: {{{GPU_A}: \"1\"}}, limits: {{{GPU_A}: \"1\"}}}}}}]")));
    assert_eq!(written(&c.decide().created("p"), INSTANCE_TYPE), in_(&["gpu-vendor-instance-type"]));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1867
/// karpenter:pkg/controllers/provisioning/suite_test.go:1885
#[test]
fn a_created_nodeclaim_is_owned_by_its_nodepool_and_names_its_class() {
    let mut c = Cluster::new(default_types());
    pool(
        &mut c,
        "default",
        "  template: {spec: {nodeClassRef: {group: karpenter.test.sh, kind: TestNodeClass, name: test}}}\n",
    );
    c.objects.nodepools[0].metadata.uid = Some("np-uid".into());
    c.pending("{name: p}", "");
    let nc = c.decide().created("p");
    let owner = &nc.metadata.owner_references.unwrap()[0];
    assert_eq!(
        (owner.api_version.as_str(), owner.kind.as_str(), owner.name.as_str(), owner.uid.as_str()),
        ("karpenter.sh/v1", "NodePool", "default", "np-uid")
    );
    assert_eq!(owner.block_owner_deletion, Some(true));
    let class = nc.spec.node_class_ref.unwrap();
    assert_eq!(
        (class.group.as_str(), class.kind.as_str(), class.name.as_str()),
        ("karpenter.test.sh", "TestNodeClass", "test")
    );
}

/// The created NodeClaim's resource requests as (name, quantity) pairs.
fn requests(nc: &tenon_api::NodeClaim) -> Vec<(String, String)> {
    nc.spec.resources.requests.iter().map(|(k, v)| (k.clone(), v.0.clone())).collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = list.iter().map(|(k, q)| (k.to_string(), q.to_string())).collect();
    v.sort();
    v
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:1913
#[test]
fn a_created_nodeclaim_requests_what_its_pods_request() {
    let mut c = cluster();
    c.pending(
        "{name: p}",
        &spec(&format!("containers: [{{name: c, image: i, resources: {{requests: {{cpu: \"1\", memory: 1Mi, {GPU_A}: \"1\"}}, limits: {{{GPU_A}: \"1\"}}}}}}]")),
    );
    let nc = c.decide().created("p");
    assert_eq!(requests(&nc), pairs(&[("cpu", "1"), ("memory", "1Mi"), (GPU_A, "1"), ("pods", "1")]));
}

const ONE_CPU_ONE_MI: &str = "containers: [{name: c, image: i, resources: {requests: {cpu: \"1\", memory: 1Mi}}}]";

/// karpenter:pkg/controllers/provisioning/suite_test.go:1939
/// karpenter:pkg/controllers/provisioning/suite_test.go:1959
#[test]
fn a_created_nodeclaim_requests_daemon_overhead_once() {
    for (pods, cpu, memory, count) in [(1, "2", "2Mi", "2"), (2, "3", "3Mi", "3")] {
        let mut c = cluster();
        daemonset(&mut c, "ds", ONE_CPU_ONE_MI);
        for i in 0..pods {
            c.pending(&format!("{{name: p{i}}}"), &spec(ONE_CPU_ONE_MI));
        }
        let d = c.decide();
        assert_eq!(d.plan.nodeclaims.len(), 1);
        assert_eq!(
            requests(&d.created("p0")),
            pairs(&[("cpu", cpu), ("memory", memory), ("pods", count)]),
            "{pods} pods"
        );
    }
}

// ----- Ignore Preferences -----

/// Karpenter's `PreferencePolicy: Ignore` cluster with one default NodePool.
fn ignoring_preferences() -> Cluster {
    let mut c = cluster();
    c.ignore_preferences = true;
    c
}

/// A zone-1 pod (2 CPU), two zone-2 pods (3 CPU) and pod `p` (1 CPU, `extra` spec fields):
/// `p` lands with the zone-1 pod, the node with fewer pods, unless a preference pulls it.
fn zone_pods_and(c: &mut Cluster, extra: &str) {
    c.pending(
        "{name: z1, labels: {app: foo}}",
        &spec(&format!("{}, nodeSelector: {{{ZONE}: test-zone-1}}", container("cpu: \"2\""))),
    );
    for i in 0..2 {
        c.pending(
            &format!("{{name: z2-{i}, labels: {{app: bar}}}}"),
            &spec(&format!("{}, nodeSelector: {{{ZONE}: test-zone-2}}", container("cpu: \"3\""))),
        );
    }
    c.pending("{name: p, labels: {app: baz}}", &spec(&format!("{}, {extra}", container("cpu: \"1\""))));
}

fn same_claim(d: &Decision, a: &str, b: &str) -> bool {
    match (d.nodeclaim_of(a), d.nodeclaim_of(b)) {
        (Some(x), Some(y)) => std::ptr::eq(x, y),
        _ => false,
    }
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2566
#[test]
fn ignored_node_affinity_preferences_do_not_pull_a_pod() {
    let mut c = ignoring_preferences();
    zone_pods_and(
        &mut c,
        &format!(
            "affinity: {{nodeAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 1, preference: {{matchExpressions: [{{key: {ZONE}, operator: In, values: [test-zone-2]}}]}}}}]}}}}"
        ),
    );
    let d = c.decide();
    assert!(same_claim(&d, "p", "z1") && !same_claim(&d, "p", "z2-0"), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2767
/// karpenter:pkg/controllers/provisioning/suite_test.go:2768
#[test]
fn ignored_pod_affinity_preferences_do_not_pull_a_pod() {
    for key in [ZONE, "kubernetes.io/hostname"] {
        let mut c = ignoring_preferences();
        zone_pods_and(
            &mut c,
            &format!(
                "affinity: {{podAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 1, podAffinityTerm: {{topologyKey: {key}, labelSelector: {{matchLabels: {{app: bar}}}}}}}}]}}}}"
            ),
        );
        let d = c.decide();
        assert!(same_claim(&d, "p", "z1") && !same_claim(&d, "p", "z2-0"), "{key}: {}", d.plan.render(&d.snap));
    }
}

/// Five `app: foo` pods with `constraint` land on one node.
fn five_share_a_node(constraint: &str) {
    let mut c = ignoring_preferences();
    for i in 0..5 {
        c.pending(
            &format!("{{name: p{i}, labels: {{app: foo}}}}"),
            &spec(&format!("containers: [{{name: c, image: i}}], {constraint}")),
        );
    }
    let d = c.decide();
    assert_eq!(d.plan.nodeclaims.len(), 1, "{constraint}: {}", d.plan.render(&d.snap));
    assert_eq!(d.plan.nodeclaims[0].pods.len(), 5);
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2660
/// karpenter:pkg/controllers/provisioning/suite_test.go:2661
#[test]
fn ignored_schedule_anyway_spreads_do_not_spread() {
    for key in [ZONE, "kubernetes.io/hostname"] {
        five_share_a_node(&format!(
            "topologySpreadConstraints: [{{maxSkew: 1, topologyKey: {key}, whenUnsatisfiable: ScheduleAnyway, labelSelector: {{matchLabels: {{app: foo}}}}}}]"
        ));
    }
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2694
/// karpenter:pkg/controllers/provisioning/suite_test.go:2695
#[test]
fn ignored_anti_affinity_preferences_do_not_spread() {
    for key in [ZONE, "kubernetes.io/hostname"] {
        five_share_a_node(&format!(
            "affinity: {{podAntiAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{{weight: 1, podAffinityTerm: {{topologyKey: {key}, labelSelector: {{matchLabels: {{app: foo}}}}}}}}]}}}}"
        ));
    }
}

// ----- Preferential Fallback -----

/// karpenter:pkg/controllers/provisioning/suite_test.go:2389
#[test]
fn a_single_unsatisfiable_required_term_is_not_relaxed() {
    let mut c = Cluster::new(default_types());
    pool(
        &mut c,
        "default",
        "  template: {spec: {requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]}}\n",
    );
    c.pending("{name: p}", &spec(&affinity_in(ZONE, "invalid")));
    assert!(!c.decide().scheduled("p"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2410
#[test]
fn required_terms_are_relaxed_to_the_first_satisfiable_one() {
    let mut c = cluster();
    let terms: Vec<String> = ["invalid", "invalid", "test-zone-1", "test-zone-2"]
        .iter()
        .map(|z| format!("{{matchExpressions: [{{key: {ZONE}, operator: In, values: [{z}]}}]}}"))
        .collect();
    c.pending(
        "{name: p}",
        &spec(&format!(
            "affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{}]}}}}}}",
            terms.join(", ")
        )),
    );
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-1"));
}

fn preferring(terms: &[(i32, &str, &str)]) -> String {
    let terms: Vec<String> = terms
        .iter()
        .map(|(w, k, v)| {
            format!("{{weight: {w}, preference: {{matchExpressions: [{{key: {k}, operator: In, values: [{v}]}}]}}}}")
        })
        .collect();
    format!("affinity: {{nodeAffinity: {{preferredDuringSchedulingIgnoredDuringExecution: [{}]}}}}", terms.join(", "))
}

const UNSATISFIABLE_PREFERENCES: [(i32, &str, &str); 2] = [(1, ZONE, "invalid"), (1, INSTANCE_TYPE, "invalid")];

/// karpenter:pkg/controllers/provisioning/suite_test.go:2434
#[test]
fn every_unsatisfiable_node_preference_is_relaxed() {
    let mut c = cluster();
    c.pending("{name: p}", &spec(&preferring(&UNSATISFIABLE_PREFERENCES)));
    let d = c.decide();
    assert!(d.nodeclaim_of("p").is_some(), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2453
#[test]
fn node_preferences_relax_heaviest_first() {
    let mut c = Cluster::new(default_types());
    pool(
        &mut c,
        "default",
        "  template: {spec: {requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1, test-zone-2]}]}}\n",
    );
    c.pending(
        "{name: p}",
        &spec(&preferring(&[(100, INSTANCE_TYPE, "test-zone-3"), (50, ZONE, "test-zone-2"), (1, ZONE, "test-zone-1")])),
    );
    assert_eq!(label(&c.decide(), "p", ZONE).as_deref(), Some("test-zone-2"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2487
#[test]
fn a_prefer_no_schedule_taint_is_tolerated_after_preferences_are_relaxed() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "default", "  template: {spec: {taints: [{key: foo, value: bar, effect: PreferNoSchedule}]}}\n");
    c.pending("{name: p}", &spec(&preferring(&UNSATISFIABLE_PREFERENCES)));
    let d = c.decide();
    let nc = d.nodeclaim_of("p").unwrap_or_else(|| panic!("{}", d.plan.render(&d.snap)));
    let taint = Taint { key: "foo".into(), value: "bar".into(), effect: Effect::PreferNoSchedule };
    assert!(d.snap.nodepools[nc.nodepool].taints.contains(&taint));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2558
/// karpenter:pkg/controllers/provisioning/suite_test.go:2559
#[test]
fn a_relaxed_node_preference_lets_the_pod_share_a_node() {
    for key in [ZONE, "kubernetes.io/hostname"] {
        let mut c = cluster();
        c.pending("{name: big, labels: {app: foo}}", &spec(&container("cpu: \"2\"")));
        c.pending(
            "{name: prefers, labels: {app: baz}}",
            &spec(&format!("{}, {}", container("cpu: \"1\""), preferring(&[(1, key, "value-1")]))),
        );
        let d = c.decide();
        let (a, b) = (d.nodeclaim_of("big"), d.nodeclaim_of("prefers"));
        assert!(a.is_some() && b.is_some(), "{key}: {}", d.plan.render(&d.snap));
        assert_eq!(a.map(|n| &n.hostname), b.map(|n| &n.hostname), "{key}");
    }
}

// ----- Multiple NodePools -----

/// karpenter:pkg/controllers/provisioning/suite_test.go:2773
#[test]
fn a_pod_selecting_a_nodepool_by_name_gets_it() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "a-pool", "");
    pool(&mut c, "b-pool", "");
    c.pending("{name: p}", &spec("nodeSelector: {karpenter.sh/nodepool: b-pool}"));
    assert_eq!(label(&c.decide(), "p", NODEPOOL).as_deref(), Some("b-pool"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2781
#[test]
fn a_pod_selecting_a_template_label_gets_that_nodepool() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "a-pool", "");
    pool(&mut c, "b-pool", "  template: {metadata: {labels: {foo: bar}}, spec: {requirements: []}}\n");
    c.pending("{name: p}", &spec("nodeSelector: {foo: bar}"));
    assert_eq!(label(&c.decide(), "p", NODEPOOL).as_deref(), Some("b-pool"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2797
#[test]
fn a_nodepool_with_a_prefer_no_schedule_taint_is_avoided() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "a-tainted", "  template: {spec: {taints: [{key: foo, value: bar, effect: PreferNoSchedule}]}}\n");
    pool(&mut c, "b-plain", "");
    c.pending("{name: p}", "");
    assert_ne!(label(&c.decide(), "p", NODEPOOL).as_deref(), Some("a-tainted"));
}

fn weighted_pools() -> Cluster {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "a-unweighted", "");
    pool(&mut c, "b-weight-20", "  weight: 20\n");
    pool(&mut c, "c-weight-100", "  weight: 100\n");
    c
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2815
#[test]
fn the_heaviest_nodepool_takes_every_pod() {
    let mut c = weighted_pools();
    c.pending_n(3, "p", "", "");
    let d = c.decide();
    for i in 0..3 {
        assert_eq!(label(&d, &format!("p-{i}"), NODEPOOL).as_deref(), Some("c-weight-100"));
    }
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2831
#[test]
fn a_pod_selecting_a_lighter_nodepool_gets_it() {
    let mut c = weighted_pools();
    c.pending("{name: p}", &spec("nodeSelector: {karpenter.sh/nodepool: a-unweighted}"));
    assert_eq!(label(&c.decide(), "p", NODEPOOL).as_deref(), Some("a-unweighted"));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2848
/// karpenter:pkg/controllers/provisioning/suite_test.go:2859
#[test]
fn static_nodepools_are_never_provisioned_for_pods() {
    let mut c = Cluster::new(default_types());
    pool(&mut c, "static", "  replicas: 2\n");
    c.pending("{name: p}", "");
    let d = c.decide();
    assert!(!d.scheduled("p"), "a static NodePool keeps its replicas; it does not follow pods");
    // With a dynamic NodePool beside it, the pod gets the dynamic one.
    let mut c = Cluster::new(default_types());
    pool(&mut c, "dynamic", "");
    pool(&mut c, "static", "  replicas: 1\n");
    c.pending("{name: p}", "");
    let d = c.decide();
    assert_eq!(d.node_labels("p").get(NODEPOOL).map(String::as_str), Some("dynamic"));
}

/// An arm64 linux type of 4 CPU and 4 GiB with spot offerings as (zone, price).
fn spot_type(name: &str, offerings: &[(&str, f64)]) -> InstanceType {
    let o: Vec<(&str, &str, f64, bool)> = offerings.iter().map(|&(z, p)| ("spot", z, p, true)).collect();
    fake(name).arch("arm64").os(&["linux"]).resources(4, 4 * GIB, 5).offerings(&o).build()
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2911
/// karpenter:pkg/controllers/provisioning/suite_test.go:3216
#[test]
fn strict_min_values_the_catalog_cannot_meet_schedules_nothing() {
    let pod = spec(&container("cpu: \"0.9\", memory: 0.9Gi"));
    // Three instance types asked for, two exist.
    let mut c = Cluster::new(Arc::new(vec![
        spot_type("instance-type-1", &[("test-zone-1-spot", 0.52)]),
        spot_type("instance-type-2", &[("test-zone-2-spot", 0.52)]),
    ]));
    pool(
        &mut c,
        "default",
        "  weight: 100\n  template: {spec: {requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [instance-type-1, instance-type-2, instance-type-3], minValues: 3}]}}\n",
    );
    c.pending("{name: p}", &pod);
    assert!(!c.decide().scheduled("p"), "instance-type minValues 3 with two types");
    // Three zones asked for, two offered.
    let mut c = Cluster::new(Arc::new(vec![
        spot_type("instance-type-1", &[("test-zone-1", 0.52), ("test-zone-2", 0.54)]),
        spot_type("instance-type-2", &[("test-zone-1", 0.6), ("test-zone-2", 0.62)]),
    ]));
    pool(
        &mut c,
        "default",
        "  template: {spec: {requirements: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1, test-zone-2, test-zone-3], minValues: 3}]}}\n",
    );
    c.pending("{name: p}", &pod);
    assert!(!c.decide().scheduled("p"), "zone minValues 3 with two zones");
}

/// The NodePool of Karpenter's BestEffort cases: three instance types asked for, minValues 3.
const THREE_TYPES: &str = "{key: node.kubernetes.io/instance-type, operator: In, values: [instance-type-1, instance-type-2, instance-type-3], minValues: 3}";

/// Two single-offering spot types, `instance-type-1` in `test-zone-1-spot` and
/// `instance-type-2` in `test-zone-2-spot` (Karpenter's BestEffort cases' catalog), under
/// MinValuesPolicy BestEffort, and the pod of those cases.
fn best_effort_two_types() -> Cluster {
    let mut c = Cluster::new(Arc::new(vec![
        spot_type("instance-type-1", &[("test-zone-1-spot", 0.52)]),
        spot_type("instance-type-2", &[("test-zone-2-spot", 0.52)]),
    ]));
    c.min_values_best_effort = true;
    c.pending("{name: p}", &spec(&container("cpu: \"0.9\", memory: 0.9Gi")));
    c
}

/// The created NodeClaim's requirement on `key`: its values and minValues.
fn written_requirement(nc: &tenon_api::NodeClaim, key: &str) -> (Vec<String>, Option<i64>) {
    let r = nc.spec.requirements.iter().find(|r| r.key == key).unwrap_or_else(|| panic!("no {key} requirement"));
    (r.values.clone(), r.min_values)
}

/// The created NodeClaim's `karpenter.sh/nodeclaim-min-values-relaxed` annotation.
fn relaxed(nc: &tenon_api::NodeClaim) -> Option<&str> {
    nc.metadata.annotations.as_ref()?.get("karpenter.sh/nodeclaim-min-values-relaxed").map(String::as_str)
}

/// Pod `p` on `instance-type-1`, its NodeClaim created relaxed to the two types there are.
fn relaxed_to_the_two_types(d: &Decision) {
    assert_eq!(label(d, "p", INSTANCE_TYPE).as_deref(), Some("instance-type-1"));
    let nc = d.created("p");
    assert_eq!(relaxed(&nc), Some("true"));
    let types = vec!["instance-type-1".to_string(), "instance-type-2".into()];
    assert_eq!(written_requirement(&nc, INSTANCE_TYPE), (types, Some(2)));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:2962
#[test]
fn best_effort_min_values_schedule_on_what_there_is_and_say_so() {
    let mut c = best_effort_two_types();
    pool(&mut c, "default", &format!("  weight: 100\n  template: {{spec: {{requirements: [{THREE_TYPES}]}}}}\n"));
    relaxed_to_the_two_types(&c.decide());
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:3024
#[test]
fn best_effort_relaxes_min_values_before_falling_back_to_another_nodepool() {
    let mut c = best_effort_two_types();
    pool(&mut c, "default", &format!("  weight: 100\n  template: {{spec: {{requirements: [{THREE_TYPES}]}}}}\n"));
    let no_min = THREE_TYPES.replace(", minValues: 3", "");
    pool(&mut c, "no-min-values", &format!("  weight: 10\n  template: {{spec: {{requirements: [{no_min}]}}}}\n"));
    let d = c.decide();
    assert_eq!(label(&d, "p", NODEPOOL).as_deref(), Some("default"));
    relaxed_to_the_two_types(&d);
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:3100
#[test]
fn best_effort_relaxes_in_the_heavier_nodepool() {
    let mut c = best_effort_two_types();
    pool(&mut c, "default", &format!("  weight: 100\n  template: {{spec: {{requirements: [{THREE_TYPES}]}}}}\n"));
    pool(&mut c, "lighter", &format!("  weight: 10\n  template: {{spec: {{requirements: [{THREE_TYPES}]}}}}\n"));
    let d = c.decide();
    assert_eq!(label(&d, "p", NODEPOOL).as_deref(), Some("default"));
    relaxed_to_the_two_types(&d);
}

const THREE_ZONES: &str =
    "{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1, test-zone-2, test-zone-3], minValues: 3}";

/// One spot type offered in `test-zone-1` and `test-zone-2`, under BestEffort.
fn best_effort_two_zones() -> Cluster {
    let mut c =
        Cluster::new(Arc::new(vec![spot_type("instance-type-1", &[("test-zone-1", 0.52), ("test-zone-2", 0.54)])]));
    c.min_values_best_effort = true;
    c.pending("{name: p}", &spec(&container("cpu: \"0.9\", memory: 0.9Gi")));
    c
}

fn zones() -> Vec<String> {
    ["test-zone-1", "test-zone-2", "test-zone-3"].map(String::from).to_vec()
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:3259
#[test]
fn best_effort_zone_min_values_schedule_in_the_zones_there_are() {
    let mut c = best_effort_two_zones();
    pool(&mut c, "default", &format!("  template: {{spec: {{requirements: [{THREE_ZONES}]}}}}\n"));
    let d = c.decide();
    assert_eq!(label(&d, "p", INSTANCE_TYPE).as_deref(), Some("instance-type-1"));
    let zone = label(&d, "p", ZONE);
    assert!(matches!(zone.as_deref(), Some("test-zone-1" | "test-zone-2")), "{zone:?}");
    let nc = d.created("p");
    assert_eq!(relaxed(&nc), Some("true"));
    assert_eq!(written_requirement(&nc, ZONE), (zones(), Some(2)));
}

/// karpenter:pkg/controllers/provisioning/suite_test.go:3353
#[test]
fn best_effort_relaxes_every_min_values_it_cannot_meet() {
    let mut c = best_effort_two_zones();
    pool(&mut c, "default", &format!("  template: {{spec: {{requirements: [{THREE_TYPES}, {THREE_ZONES}]}}}}\n"));
    let d = c.decide();
    assert_eq!(label(&d, "p", INSTANCE_TYPE).as_deref(), Some("instance-type-1"));
    let nc = d.created("p");
    assert_eq!(relaxed(&nc), Some("true"));
    assert_eq!(written_requirement(&nc, INSTANCE_TYPE), (vec!["instance-type-1".to_string()], Some(1)));
    assert_eq!(written_requirement(&nc, ZONE), (zones(), Some(2)));
}

/// Karpenter marks every NodeClaim it creates, relaxed or not.
#[test]
fn a_nodeclaim_whose_min_values_hold_says_it_was_not_relaxed() {
    let mut c = cluster();
    c.pending("{name: p}", "");
    assert_eq!(relaxed(&c.decide().created("p")), Some("false"));
}

// ---- the batcher (tenon_core::orchestration::batcher, both shells' batching) ----------------

mod batching {
    use super::*;
    use std::collections::BTreeSet;
    use tenon_core::orchestration::batcher::Batcher;

    const S: i64 = 1_000;

    fn pods(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| format!("default/{n}")).collect()
    }

    /// karpenter:pkg/controllers/provisioning/suite_test.go:119
    #[test]
    fn a_single_pod_is_provisioned_once_the_idle_window_passes() {
        let mut c = cluster();
        c.pending("{name: p}", "");
        let mut b = Batcher::default();
        let (idle, max) = (S, 10 * S);
        assert!(!b.observe(0, &pods(&["p"]), idle, max), "the batch opens");
        assert!(!b.observe(S / 2, &pods(&["p"]), idle, max), "inside the idle window");
        assert!(b.observe(11 * S, &pods(&["p"]), idle, max), "past it: decide");
        let d = c.decide();
        assert!(d.scheduled("p"), "{}", d.plan.render(&d.snap));
    }

    /// karpenter:pkg/controllers/provisioning/suite_test.go:137
    #[test]
    fn the_same_pod_again_does_not_extend_the_idle_window() {
        let (idle, max) = (5 * S, 10 * S);
        let mut b = Batcher::default();
        assert!(!b.observe(0, &pods(&["p"]), idle, max));
        assert!(!b.observe(3 * S, &pods(&["p"]), idle, max), "the same pod, 3 s in");
        assert!(b.open());
        // 6 s: past the idle window of the first (and only) trigger.
        assert!(b.observe(6 * S, &pods(&["p"]), idle, max));
        assert!(!b.open());
    }

    /// karpenter:pkg/controllers/provisioning/suite_test.go:177
    #[test]
    fn a_new_pod_extends_the_idle_window() {
        let (idle, max) = (5 * S, 10 * S);
        let mut b = Batcher::default();
        assert!(!b.observe(0, &pods(&["p"]), idle, max));
        assert!(!b.observe(3 * S, &pods(&["p", "p2"]), idle, max), "a new pod, 3 s in");
        assert!(!b.observe(6 * S, &pods(&["p", "p2"]), idle, max), "3 s after it: still inside");
        assert!(b.open());
        assert!(b.observe(9 * S, &pods(&["p", "p2"]), idle, max), "idle for 6 s: decide");
    }
}
