//! (Long: case-by-case ports of one Karpenter suite, each with its fixtures.)
//! Karpenter's `pkg/controllers/provisioning/scheduling/suite_test.go` from its `Binpacking`
//! context on, ported: each test names the cases it accounts for
//! (tests/conformance/karpenter.tsv). The suite's NodePool allows every capacity type; the
//! catalog is Karpenter's fake one unless a case replaces it.
//!
//! Karpenter's multi-round cases provision, let the fake cloud provider launch, bind the pods
//! and provision again. [`launch`] plays the launch-and-bind step: each planned NodeClaim
//! becomes a registered but uninitialized Node (and its NodeClaim) with the labels and
//! allocatable of the type the fake provider would pick.

use crate::support;

use k8s_openapi::api::core::v1 as core;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use support::GIB;
use support::karpenter::*;
use tenon_core::instancetype::InstanceType;
use tenon_core::resources::Resources;

const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
const ZONE: &str = "topology.kubernetes.io/zone";

/// The suite's NodePool (`Scheduling` BeforeEach) over `catalog`.
fn suite(catalog: Arc<Vec<InstanceType>>) -> Cluster {
    let mut c = Cluster::new(catalog);
    c.nodepool("default", &pool_spec(""));
    c
}

/// The suite NodePool's spec with `extra` appended to its template spec (indented 6).
fn pool_spec(extra: &str) -> String {
    format!(
        "  template:\n    spec:\n      requirements:\n        - {{key: karpenter.sh/capacity-type, operator: In, values: [spot, on-demand, reserved]}}\n{extra}"
    )
}

/// A pod spec (YAML under `spec:`) with one container requesting `requests` (a flow-map body).
/// Where Karpenter's case sets only limits, the API server's defaulting makes them the requests.
fn requesting(requests: &str) -> String {
    format!("  containers: [{{name: app, image: app, resources: {{requests: {{{requests}}}}}}}]\n")
}

/// Kubernetes quantities for a resource list (`{cpu: 1900m, memory: "…", pods: "5"}`).
fn quantities(r: &Resources) -> String {
    let entries: Vec<String> = r
        .entries()
        .iter()
        .map(|(n, v)| if n == "cpu" { format!("{n}: {v}m") } else { format!("{n}: \"{v}\"") })
        .collect();
    format!("{{{}}}", entries.join(", "))
}

/// What Karpenter's test harness does after a provisioning round: the fake cloud provider
/// launches every planned NodeClaim (its cheapest option, that option's first cheapest
/// offering) and a registered, uninitialized Node joins for it, carrying the NodePool's taints
/// and startup taints; with `bind`, the pods planned onto new or existing nodes are bound
/// there (`ExpectProvisioned`; `ExpectProvisionedNoBinding` leaves them pending). Returns the
/// new nodes' names in plan order.
fn launch(c: &mut Cluster, d: &Decision, bind: bool) -> Vec<String> {
    let mut names = Vec::new();
    let mut placed: Vec<(usize, String)> = Vec::new();
    for nc in &d.plan.nodeclaims {
        let name = format!("launched-{}", c.objects.nodes.len());
        let mut labels = launched_labels(&d.snap, nc);
        labels.insert("kubernetes.io/hostname".into(), name.clone());
        labels.insert("karpenter.sh/registered".into(), "true".into());
        let pool = &d.snap.nodepools[nc.nodepool];
        let it = pool.instance_types.iter().find(|t| t.name == labels[INSTANCE_TYPE]).expect("launched type");
        let taints: Vec<String> = pool
            .taints
            .iter()
            .chain(pool.startup_taints.iter())
            .map(|t| format!("{{key: {}, value: \"{}\", effect: {:?}}}", t.key, t.value, t.effect))
            .collect();
        let label_yaml: Vec<String> = labels.iter().map(|(k, v)| format!("{k}: \"{v}\"")).collect();
        let (alloc, cap) = (quantities(it.allocatable()), quantities(&it.capacity));
        let labels = label_yaml.join(", ");
        c.node(&format!(
            "metadata: {{name: {name}, labels: {{{labels}}}}}\nspec: {{providerID: fake://{name}, taints: [{}]}}\nstatus: {{allocatable: {alloc}, capacity: {cap}, conditions: [{{type: Ready, status: \"True\"}}]}}\n",
            taints.join(", ")
        ));
        c.objects.nodeclaims.push(serde_yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: {name}, labels: {{{labels}}}}}\nspec: {{requirements: [], nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}}\nstatus: {{nodeName: {name}, providerID: fake://{name}, allocatable: {alloc}, capacity: {cap}, conditions: [{{type: Launched, status: \"True\", reason: Launched, message: \"\", lastTransitionTime: \"2026-01-01T00:00:00Z\"}}, {{type: Registered, status: \"True\", reason: Registered, message: \"\", lastTransitionTime: \"2026-01-01T00:00:00Z\"}}]}}\n"
        )).expect("NodeClaim YAML"));
        placed.extend(nc.pods.iter().map(|&p| (p, name.clone())));
        names.push(name);
    }
    placed.extend(d.plan.nominations.iter().map(|n| (n.pod, n.node.clone())));
    if bind {
        for (p, node) in placed {
            let pod = &d.snap.pods[p];
            bind_pod(c, &pod.namespace, &pod.name, &node);
        }
    }
    names
}

/// Binds pod `namespace/name` to `node` (kube-scheduler's binding), running.
fn bind_pod(c: &mut Cluster, namespace: &str, name: &str, node: &str) {
    let p = c
        .objects
        .pods
        .iter_mut()
        .find(|p| p.metadata.namespace.as_deref() == Some(namespace) && p.metadata.name.as_deref() == Some(name))
        .expect("pod to bind");
    p.spec.as_mut().expect("spec").node_name = Some(node.into());
    p.status = Some(serde_yaml::from_str("{phase: Running}").expect("status"));
}

/// `ExpectDeleted` for a pod in namespace `default`.
fn delete_pod(c: &mut Cluster, name: &str) {
    c.objects.pods.retain(|p| p.metadata.name.as_deref() != Some(name));
}

fn node_mut<'a>(c: &'a mut Cluster, name: &str) -> &'a mut core::Node {
    c.objects.nodes.iter_mut().find(|n| n.metadata.name.as_deref() == Some(name)).expect("node")
}

/// The pod's new NodeClaim, identified by its placeholder hostname.
fn claim_of(d: &Decision, pod: &str) -> String {
    d.nodeclaim_of(pod)
        .unwrap_or_else(|| panic!("{pod} has no new NodeClaim: {}", d.plan.render(&d.snap)))
        .hostname
        .clone()
}

fn instance_type(d: &Decision, pod: &str) -> String {
    d.node_labels(pod)[INSTANCE_TYPE].clone()
}

/// `fake.InstanceTypes(n)`: type `i` has i+1 CPU, 2(i+1) GiB and 10(i+1) pods.
fn fake_instance_types(n: i64) -> Arc<Vec<InstanceType>> {
    Arc::new(
        (0..n)
            .map(|i| fake(&format!("fake-it-{i}")).resources(i + 1, 2 * (i + 1) * GIB, 10 * (i + 1)).build())
            .collect(),
    )
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1593
#[test]
fn pods_that_fill_a_node_spill_onto_new_default_nodes() {
    let mut c = suite(default_types());
    let spec = format!("  nodeSelector: {{kubernetes.io/arch: amd64}}\n{}", requesting("memory: 1.8G"));
    c.pending_n(40, "big", "", &spec);
    let d = c.decide();
    let mut claims = BTreeSet::new();
    for i in 0..40 {
        let p = format!("big-{i}");
        claims.insert(claim_of(&d, &p));
        assert_eq!(instance_type(&d, &p), "default-instance-type", "{p}");
    }
    assert_eq!(claims.len(), 20, "two 1.8G pods per 4Gi node: {}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1613
#[test]
fn small_pods_fill_the_room_large_pods_leave() {
    let mut c = suite(default_types());
    let arch = "  nodeSelector: {kubernetes.io/arch: amd64}\n";
    c.pending_n(40, "large", "", &format!("{arch}{}", requesting("memory: 1.8G")));
    c.pending_n(20, "small", "", &format!("{arch}{}", requesting("memory: 400M")));
    let d = c.decide();
    let mut claims = BTreeSet::new();
    for p in (0..40).map(|i| format!("large-{i}")).chain((0..20).map(|i| format!("small-{i}"))) {
        claims.insert(claim_of(&d, &p));
        assert_eq!(instance_type(&d, &p), "default-instance-type", "{p}");
    }
    assert_eq!(claims.len(), 20, "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1645
#[test]
fn a_small_pod_that_does_not_fit_beside_a_large_one_gets_a_smaller_node() {
    let mut c = suite(fake_instance_types(5));
    c.pending("{name: large}", &requesting("cpu: \"4.5\""));
    c.pending("{name: small}", &requesting("cpu: \"1\""));
    let d = c.decide();
    assert_ne!(claim_of(&d, "large"), claim_of(&d, "small"));
    assert_ne!(instance_type(&d, "large"), instance_type(&d, "small"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1671
#[test]
fn a_zero_request_of_a_resource_no_type_has_still_schedules() {
    let mut c = suite(default_types());
    c.pending(
        "{name: p}",
        "  containers: [{name: app, image: app, resources: {requests: {foo.com/weird-resources: \"0\"}, limits: {foo.com/weird-resources: \"0\"}}}]\n",
    );
    let d = c.decide();
    assert!(d.nodeclaim_of("p").is_some(), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1683
#[test]
fn a_pod_larger_than_every_type_is_not_scheduled() {
    let mut c = suite(default_types());
    c.pending("{name: p}", &requesting("memory: 2Ti"));
    let d = c.decide();
    assert!(!d.scheduled("p"));
    assert!(d.unschedulable("p").is_some());
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1694
#[test]
fn the_pod_limit_per_node_opens_new_nodes() {
    let mut c = suite(default_types());
    let spec = format!("  nodeSelector: {{kubernetes.io/arch: amd64}}\n{}", requesting("cpu: 1m, memory: 1m"));
    c.pending_n(25, "tiny", "", &spec);
    let d = c.decide();
    let mut claims = BTreeSet::new();
    for i in 0..25 {
        let p = format!("tiny-{i}");
        claims.insert(claim_of(&d, &p));
        assert_eq!(instance_type(&d, &p), "small-instance-type", "{p}");
    }
    assert_eq!(claims.len(), 5, "five pods per node: {}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1716
#[test]
fn init_container_requests_size_the_node() {
    let mut c = suite(default_types());
    c.pending(
        "{name: p}",
        "  initContainers: [{name: init, image: init, resources: {requests: {memory: 1Gi, cpu: \"2\"}}}]\n  containers: [{name: app, image: app, resources: {requests: {memory: 1Gi, cpu: \"1\"}}}]\n",
    );
    let d = c.decide();
    assert_eq!(instance_type(&d, "p"), "default-instance-type");
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1741
#[test]
fn an_init_container_larger_than_every_type_is_not_scheduled() {
    let mut c = suite(default_types());
    c.pending(
        "{name: p}",
        "  initContainers: [{name: init, image: init, resources: {requests: {memory: 1Ti, cpu: \"2\"}}}]\n  containers: [{name: app, image: app, resources: {requests: {memory: 1Gi, cpu: \"1\"}}}]\n",
    );
    let d = c.decide();
    assert!(!d.scheduled("p"));
    assert!(d.unschedulable("p").is_some());
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1763
#[test]
fn every_fitting_type_is_an_option_and_the_cheapest_launches() {
    let one = |name: &str, cpu: i64, price: f64| {
        fake(name).resources(cpu, cpu * GIB, 5).offerings(&[("on-demand", "test-zone-1a", price, true)]).build()
    };
    let mut c = suite(Arc::new(vec![one("medium", 2, 3.0), one("small", 1, 2.0), one("large", 4, 1.0)]));
    c.pending(
        "{name: p}",
        "  containers: [{name: app, image: app, resources: {requests: {cpu: 1m, memory: 1Mi}, limits: {cpu: 1m, memory: 1Mi}}}]\n",
    );
    let d = c.decide();
    assert_eq!(instance_type(&d, "p"), "large");
    let nc = d.nodeclaim_of("p").expect("a NodeClaim");
    let options: BTreeSet<&str> = d.options(nc).into_iter().collect();
    assert_eq!(options, BTreeSet::from(["small", "medium", "large"]));
}

/// Pods labelled `foo: bar` per value of node label `key` (the node name for the hostname),
/// over bound pods: Karpenter's `ExpectSkew`.
fn skew(c: &Cluster, key: &str) -> Vec<usize> {
    let nodes: BTreeMap<&str, &core::Node> =
        c.objects.nodes.iter().map(|n| (n.metadata.name.as_deref().unwrap_or(""), n)).collect();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for p in &c.objects.pods {
        let selected = p.metadata.labels.as_ref().is_some_and(|l| l.get("foo").is_some_and(|v| v == "bar"));
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) else { continue };
        if !selected {
            continue;
        }
        let domain = if key == "kubernetes.io/hostname" {
            node.to_string()
        } else {
            nodes[node].metadata.labels.as_ref().and_then(|l| l.get(key)).cloned().expect("node label")
        };
        *counts.entry(domain).or_default() += 1;
    }
    let mut v: Vec<usize> = counts.into_values().collect();
    v.sort();
    v
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1830
#[test]
fn a_pod_that_fits_an_in_flight_node_goes_there() {
    let mut c = suite(default_types());
    let spec = requesting("cpu: 10m");
    c.pending("{name: first}", &spec);
    let d = c.decide();
    let node1 = launch(&mut c, &d, true).remove(0);
    c.pending("{name: second}", &spec);
    let d = c.decide();
    assert_eq!(d.nominated("second"), Some(node1.as_str()), "{}", d.plan.render(&d.snap));
    assert!(d.plan.nodeclaims.is_empty());
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1847
#[test]
fn an_in_flight_node_takes_pods_whose_zones_include_its_own() {
    let mut c = suite(default_types());
    let zonal = |zones: &str| {
        format!(
            "  affinity: {{nodeAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: {{nodeSelectorTerms: [{{matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [{zones}]}}]}}]}}}}}}\n{}",
            requesting("cpu: 10m")
        )
    };
    c.pending("{name: first}", &zonal("test-zone-2"));
    let d = c.decide();
    assert_eq!(d.node_labels("first")[ZONE], "test-zone-2");
    let node1 = launch(&mut c, &d, true).remove(0);

    c.pending("{name: second}", &zonal("test-zone-1, test-zone-2"));
    let d = c.decide();
    assert_eq!(d.nominated("second"), Some(node1.as_str()), "{}", d.plan.render(&d.snap));
    assert!(d.plan.nodeclaims.is_empty());
    launch(&mut c, &d, true);

    c.pending("{name: third}", &zonal("test-zone-1, test-zone-3"));
    let d = c.decide();
    assert_eq!(d.nominated("third"), None);
    assert!(d.nodeclaim_of("third").is_some(), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1896
#[test]
fn a_pod_that_does_not_fit_the_in_flight_node_gets_a_new_one() {
    let mut c = suite(default_types());
    c.pending("{name: first}", &requesting("cpu: 1001m"));
    let d = c.decide();
    assert_eq!(instance_type(&d, "first"), "small-instance-type", "the node has 2 CPU");
    launch(&mut c, &d, true);
    c.pending("{name: second}", &requesting("cpu: \"1\""));
    let d = c.decide();
    assert_eq!(d.nominated("second"), None);
    assert!(d.nodeclaim_of("second").is_some(), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1915
#[test]
fn a_pod_incompatible_with_the_in_flight_node_gets_a_new_one() {
    let mut c = suite(default_types());
    c.pending("{name: first}", &requesting("cpu: 10m"));
    let d = c.decide();
    launch(&mut c, &d, true);
    c.pending("{name: second}", "  nodeSelector: {kubernetes.io/arch: arm64}\n");
    let d = c.decide();
    assert_eq!(d.nominated("second"), None);
    assert!(d.nodeclaim_of("second").is_some(), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1932
#[test]
fn a_terminating_in_flight_node_takes_no_pods() {
    let mut c = suite(default_types());
    let spec = requesting("cpu: 10m");
    c.pending("{name: first}", &spec);
    let d = c.decide();
    let node1 = launch(&mut c, &d, true).remove(0);
    let deleting: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time =
        serde_yaml::from_str("\"2026-01-01T00:00:00Z\"").expect("time");
    node_mut(&mut c, &node1).metadata.deletion_timestamp = Some(deleting.clone());
    for nc in &mut c.objects.nodeclaims {
        nc.metadata.deletion_timestamp = Some(deleting.clone());
    }
    c.pending("{name: second}", &spec);
    let d = c.decide();
    assert_eq!(d.nominated("second"), None, "{}", d.plan.render(&d.snap));
    assert!(d.nodeclaim_of("second").is_some());
    // Once both are gone (Karpenter's case removes their finalizers), the same.
    c.objects.nodes.clear();
    c.objects.nodeclaims.clear();
    let d = c.decide();
    assert!(d.nodeclaim_of("second").is_some(), "{}", d.plan.render(&d.snap));
}

const SPREAD_ZONE: &str = "  topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {foo: bar}}}]\n";
const SPREAD_HOST: &str = "  topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule, labelSelector: {matchLabels: {foo: bar}}}]\n";

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1959
#[test]
fn zone_spread_counts_pods_on_in_flight_nodes() {
    let mut c = suite(default_types());
    c.pending_n(4, "a", "foo: bar", SPREAD_ZONE);
    let d = c.decide();
    launch(&mut c, &d, true);
    assert_eq!(skew(&c, ZONE), vec![1, 1, 2]);
    let nodes = c.objects.nodes.len();
    c.pending_n(5, "b", "foo: bar", SPREAD_ZONE);
    let d = c.decide();
    assert!(d.plan.nodeclaims.is_empty(), "the in-flight nodes hold them: {}", d.plan.render(&d.snap));
    launch(&mut c, &d, true);
    assert_eq!(skew(&c, ZONE), vec![3, 3, 3]);
    assert_eq!(c.objects.nodes.len(), nodes);
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:1990
#[test]
fn hostname_spread_opens_new_nodes_beside_in_flight_ones() {
    let mut c = suite(default_types());
    c.pending_n(4, "a", "foo: bar", SPREAD_HOST);
    let d = c.decide();
    launch(&mut c, &d, true);
    assert_eq!(skew(&c, "kubernetes.io/hostname"), vec![1; 4]);
    c.pending_n(5, "b", "foo: bar", SPREAD_HOST);
    let d = c.decide();
    launch(&mut c, &d, true);
    assert_eq!(skew(&c, "kubernetes.io/hostname"), vec![1; 9]);
}

fn set_taints(c: &mut Cluster, node: &str, taints: &str) {
    node_mut(c, node).spec.get_or_insert_with(Default::default).taints =
        Some(serde_yaml::from_str(taints).expect("taints"));
}

fn label_node(c: &mut Cluster, node: &str, key: &str, value: &str) {
    node_mut(c, node).metadata.labels.get_or_insert_with(Default::default).insert(key.into(), value.into());
}

/// Karpenter marks a node initialized: the node's label and its NodeClaim's condition.
fn initialize(c: &mut Cluster, node: &str) {
    label_node(c, node, "karpenter.sh/initialized", "true");
    let nc = c.objects.nodeclaims.iter_mut().find(|nc| nc.metadata.name.as_deref() == Some(node)).expect("nodeclaim");
    nc.status.get_or_insert_with(Default::default).conditions.push(
        serde_yaml::from_str(
            "{type: Initialized, status: \"True\", reason: Initialized, message: \"\", lastTransitionTime: \"2026-01-01T00:00:00Z\"}",
        )
        .expect("condition"),
    );
}

/// A node's allocatable less the requests of the pods bound to it (Karpenter's
/// `StateNode.Available`), and the part of those requests DaemonSet pods make.
fn available(d: &Decision, node: &str) -> (Resources, Resources) {
    let n = d.snap.nodes.iter().find(|n| n.name == node).expect("node in the snapshot");
    let mut left = n.allocatable.clone();
    let mut daemons = Resources::default();
    for p in d.snap.pods.iter().filter(|p| p.node_name.as_deref() == Some(node)) {
        left.sub(&p.requests);
        if p.is_daemon() {
            daemons.add(&p.requests);
        }
    }
    (left, daemons)
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2018
#[test]
fn an_emptied_untainted_in_flight_node_takes_the_next_pod() {
    let mut c = suite(default_types());
    c.pending("{name: first}", &requesting("cpu: \"8\""));
    let d = c.decide();
    let node1 = launch(&mut c, &d, true).remove(0);
    delete_pod(&mut c, "first");
    set_taints(&mut c, &node1, "[]");
    c.pending("{name: second}", "");
    let d = c.decide();
    assert_eq!(d.nominated("second"), Some(node1.as_str()), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2078
#[test]
fn a_custom_taint_on_an_initialized_node_keeps_pods_away() {
    let mut c = suite(default_types());
    c.pending("{name: first}", &requesting("cpu: \"8\""));
    let d = c.decide();
    let node1 = launch(&mut c, &d, true).remove(0);
    initialize(&mut c, &node1);
    delete_pod(&mut c, "first");
    set_taints(&mut c, &node1, "[{key: foo.com/taint, value: tainted, effect: NoSchedule}]");
    c.pending("{name: second}", "");
    let d = c.decide();
    assert_eq!(d.nominated("second"), None, "{}", d.plan.render(&d.snap));
    assert!(d.nodeclaim_of("second").is_some());
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2110
#[test]
fn a_startup_taint_does_not_keep_pods_off_an_uninitialized_node() {
    let mut c = Cluster::new(default_types());
    c.nodepool(
        "default",
        &pool_spec("      startupTaints: [{key: foo.com/taint, value: tainted, effect: NoSchedule}]\n"),
    );
    c.pending("{name: first}", &requesting("cpu: \"8\""));
    let d = c.decide();
    let node1 = launch(&mut c, &d, true).remove(0);
    delete_pod(&mut c, "first");
    let taints = node_mut(&mut c, &node1).spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    assert!(
        taints
            .iter()
            .any(|t| t.key == "foo.com/taint" && t.value.as_deref() == Some("tainted") && t.effect == "NoSchedule"),
        "{taints:?}"
    );
    c.pending("{name: second}", "");
    let d = c.decide();
    assert_eq!(d.nominated("second"), Some(node1.as_str()), "{}", d.plan.render(&d.snap));
}

/// A DaemonSet `name` whose pods have `spec` (YAML under the template's `spec:`, indented 6).
fn daemonset(c: &mut Cluster, name: &str, spec: &str) {
    c.daemonset(&format!(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: {name}, namespace: default, uid: {name}-uid}}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n{spec}"
    ));
}

/// A pod of DaemonSet `ds` bound to `node`.
fn daemon_pod(c: &mut Cluster, name: &str, ds: &str, node: &str, spec: &str) {
    c.bound(
        &format!(
            "{{name: {name}, ownerReferences: [{{apiVersion: apps/v1, kind: DaemonSet, name: {ds}, uid: {ds}-uid, controller: true, blockOwnerDeletion: true}}]}}"
        ),
        node,
        spec,
    );
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2203
#[test]
fn a_bound_daemonset_pod_is_not_counted_twice_on_an_in_flight_node() {
    let mut c = suite(default_types());
    daemonset(
        &mut c,
        "ds",
        "      containers: [{name: d, image: d, resources: {requests: {cpu: \"1\", memory: 1Gi}}}]\n",
    );
    c.pending("{name: first}", &requesting("cpu: \"8\""));
    let d = c.decide();
    assert_eq!(instance_type(&d, "first"), "arm-instance-type", "8 CPU and the DaemonSet's 1 need the 16 CPU type");
    let node1 = launch(&mut c, &d, true).remove(0);
    delete_pod(&mut c, "first");
    let d = c.decide();
    let (left, daemons) = available(&d, &node1);
    assert_eq!((left.cpu, daemons.cpu), (15_900, 0));
    daemon_pod(
        &mut c,
        "ds-pod",
        "ds",
        &node1,
        "  containers: [{name: d, image: d, resources: {requests: {cpu: \"1\", memory: 2Gi}}}]\n",
    );
    let d = c.decide();
    let (left, daemons) = available(&d, &node1);
    assert_eq!((left.cpu, daemons.cpu), (14_900, 1_000));
    c.pending("{name: second}", &requesting("cpu: \"14.9\""));
    let d = c.decide();
    assert_eq!(d.nominated("second"), Some(node1.as_str()), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2275
#[test]
fn an_unexpected_daemonset_pod_leaves_no_phantom_room() {
    let mut c = suite(default_types());
    daemonset(
        &mut c,
        "ds1",
        "      nodeSelector: {my-node-label: value}\n      containers: [{name: d, image: d, resources: {requests: {cpu: \"1\", memory: 1Gi}}}]\n",
    );
    daemonset(&mut c, "ds2", "      containers: [{name: d, image: d, resources: {requests: {cpu: 1m}}}]\n");
    c.pending("{name: first}", &requesting("cpu: \"8\""));
    let d = c.decide();
    let node1 = launch(&mut c, &d, true).remove(0);
    label_node(&mut c, &node1, "my-node-label", "value");
    delete_pod(&mut c, "first");
    let d = c.decide();
    let (left, daemons) = available(&d, &node1);
    assert_eq!((left.cpu, daemons.cpu), (15_900, 0));
    daemon_pod(
        &mut c,
        "ds1-pod",
        "ds1",
        &node1,
        "  nodeSelector: {my-node-label: value}\n  containers: [{name: d, image: d, resources: {requests: {cpu: \"1\", memory: 2Gi}}}]\n",
    );
    let d = c.decide();
    let (left, daemons) = available(&d, &node1);
    assert_eq!((left.cpu, daemons.cpu), (14_900, 1_000));
    c.pending("{name: second}", &requesting("cpu: \"15.5\""));
    let d = c.decide();
    assert_eq!(d.nominated("second"), None, "{}", d.plan.render(&d.snap));
    assert!(d.nodeclaim_of("second").is_some(), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2492
#[test]
fn in_flight_nodes_are_packed_before_new_ones_open() {
    // Karpenter draws each round's pod count at random (0–9); these are fixed draws.
    for rounds in [[3, 7, 0, 9, 1, 5, 2, 8, 4, 6], [9, 9, 1, 1, 6, 0, 3, 7, 2, 5], [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]] {
        let medium = fake("medium").resources(4, 4 * GIB, 4).build();
        let mut capacity = medium.capacity.clone();
        capacity.cpu = 4_250;
        let medium = InstanceType::new(
            "medium",
            medium.requirements.clone(),
            capacity,
            medium.overhead.clone(),
            medium.offerings.clone(),
        );
        let mut c = suite(Arc::new(vec![medium]));
        for (round, n) in rounds.iter().enumerate() {
            c.pending_n(*n, &format!("r{round}"), "", &requesting("cpu: \"1\""));
            let d = c.decide();
            for i in 0..*n {
                assert!(d.scheduled(&format!("r{round}-{i}")), "{}", d.plan.render(&d.snap));
            }
            launch(&mut c, &d, true);
        }
        let d = c.decide();
        let with_room = d.snap.nodes.iter().filter(|n| available(&d, &n.name).0.cpu >= 1_000).count();
        assert!(with_room <= 1, "{rounds:?}: {with_room} nodes with a CPU free");
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2531
#[test]
fn a_pod_still_pending_after_its_node_launched_is_not_provisioned_for_again() {
    let mut c = suite(default_types());
    c.pending("{name: p}", &requesting("cpu: 10m"));
    let d = c.decide();
    let nodes = launch(&mut c, &d, false);
    assert_eq!(nodes.len(), 1);
    let d = c.decide();
    assert!(d.plan.nodeclaims.is_empty(), "{}", d.plan.render(&d.snap));
    assert_eq!(d.nominated("p"), Some(nodes[0].as_str()));
}

/// The small type as Karpenter's fake provider launches it with no requirements (its
/// cheapest type, first offering): labels and allocatable for a NodeClaim or Node.
const SMALL_LABELS: &str = "karpenter.sh/nodepool: default, node.kubernetes.io/instance-type: small-instance-type, topology.kubernetes.io/zone: test-zone-1, karpenter.sh/capacity-type: spot, kubernetes.io/arch: amd64";
const SMALL_ALLOCATABLE: &str = "{cpu: 1900m, memory: \"2136997888\", pods: \"5\"}";

fn launched_claim(name: &str, node: Option<&str>, initialized: bool) -> tenon_api::NodeClaim {
    let t = "lastTransitionTime: \"2026-01-01T00:00:00Z\", message: \"\"";
    let mut conditions = vec![format!("{{type: Launched, status: \"True\", reason: Launched, {t}}}")];
    if node.is_some() {
        conditions.push(format!("{{type: Registered, status: \"True\", reason: Registered, {t}}}"));
    }
    if initialized {
        conditions.push(format!("{{type: Initialized, status: \"True\", reason: Initialized, {t}}}"));
    }
    let node_name = node.map_or(String::new(), |n| format!("nodeName: {n}, "));
    serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: {name}, labels: {{{SMALL_LABELS}}}}}\nspec: {{requirements: [], nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}}\nstatus: {{{node_name}providerID: fake://{name}, allocatable: {SMALL_ALLOCATABLE}, capacity: {SMALL_ALLOCATABLE}, conditions: [{}]}}\n",
        conditions.join(", ")
    ))
    .expect("NodeClaim YAML")
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2553
#[test]
fn a_registered_node_is_tried_before_nodeclaims_still_launching() {
    // Karpenter picks the registered one at random; a few positions stand in.
    for elem in [0, 41, 99] {
        let mut c = suite(default_types());
        for i in 0..100 {
            let name = format!("claim-{i:03}");
            if i == elem {
                let node = format!("node-{i:03}");
                c.objects.nodeclaims.push(launched_claim(&name, Some(&node), true));
                c.node(&format!(
                    "metadata: {{name: {node}, labels: {{{SMALL_LABELS}, kubernetes.io/hostname: {node}, karpenter.sh/registered: \"true\", karpenter.sh/initialized: \"true\"}}}}\nspec: {{providerID: fake://{name}}}\nstatus: {{allocatable: {SMALL_ALLOCATABLE}, capacity: {SMALL_ALLOCATABLE}, conditions: [{{type: Ready, status: \"True\"}}]}}\n"
                ));
            } else {
                c.objects.nodeclaims.push(launched_claim(&name, None, false));
            }
        }
        c.pending("{name: p}", "");
        let d = c.decide();
        assert_eq!(d.nominated("p"), Some(format!("node-{elem:03}").as_str()), "{}", d.plan.render(&d.snap));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2593
#[test]
fn pods_sharing_a_host_port_get_separate_nodes() {
    let mut c = suite(default_types());
    let spec = "  containers: [{name: app, image: app, ports: [{containerPort: 8080, hostPort: 8080}]}]\n";
    c.pending("{name: a}", spec);
    c.pending("{name: b}", spec);
    let d = c.decide();
    assert_ne!(claim_of(&d, "a"), claim_of(&d, "b"));
}

/// An initialized node Karpenter does not manage, with `allocatable` (a flow map).
fn unowned_node(c: &mut Cluster, name: &str, allocatable: &str) {
    c.node(&format!(
        "metadata: {{name: {name}, labels: {{karpenter.sh/registered: \"true\", karpenter.sh/initialized: \"true\"}}}}\nstatus: {{allocatable: {allocatable}, capacity: {allocatable}, conditions: [{{type: Ready, status: \"True\"}}]}}\n"
    ));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2607
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2633
#[test]
fn pods_go_to_a_node_karpenter_does_not_own() {
    let spec = "  containers: [{name: app, image: app, resources: {requests: {cpu: 10m}, limits: {cpu: 10m}}}]\n";
    for (memory, pods) in [("10Gi", 1), ("100Gi", 100)] {
        let mut c = suite(default_types());
        unowned_node(&mut c, "unowned", &format!("{{cpu: \"10\", memory: {memory}, pods: \"110\"}}"));
        c.pending_n(pods, "p", "", spec);
        let d = c.decide();
        for i in 0..pods {
            assert_eq!(d.nominated(&format!("p-{i}")), Some("unowned"), "{}", d.plan.render(&d.snap));
        }
        assert!(d.plan.nodeclaims.is_empty());
    }
}

/// A Karpenter NodeClaim and its initialized Node (`test.NodeClaimAndNode`, no NodePool label,
/// no zone) with `allocatable`.
fn claimed_node(c: &mut Cluster, name: &str, allocatable: &str) {
    let t = "lastTransitionTime: \"2026-01-01T00:00:00Z\", message: \"\"";
    let labels = "karpenter.k8s.aws/ec2nodeclass: default";
    c.objects.nodeclaims.push(serde_yaml::from_str(&format!(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: {name}, labels: {{{labels}}}}}\nspec: {{requirements: [], nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}}\nstatus: {{nodeName: {name}, providerID: fake://{name}, allocatable: {allocatable}, conditions: [{{type: Launched, status: \"True\", reason: Launched, {t}}}, {{type: Registered, status: \"True\", reason: Registered, {t}}}, {{type: Initialized, status: \"True\", reason: Initialized, {t}}}]}}\n"
    )).expect("NodeClaim YAML"));
    c.node(&format!(
        "metadata: {{name: {name}, labels: {{{labels}, karpenter.sh/registered: \"true\", karpenter.sh/initialized: \"true\"}}}}\nspec: {{providerID: fake://{name}}}\nstatus: {{allocatable: {allocatable}, capacity: {allocatable}, conditions: [{{type: Ready, status: \"True\"}}]}}\n"
    ));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2695
#[test]
fn a_pod_the_existing_node_cannot_take_waits_for_a_nodepool() {
    let mut c = Cluster::new(default_types());
    claimed_node(&mut c, "existing", "{cpu: \"10\", memory: 10Gi, pods: \"110\"}");
    c.pending(
        "{name: p}",
        "  affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]}]}}}\n",
    );
    let d = c.decide();
    assert!(!d.scheduled("p"), "{}", d.plan.render(&d.snap));
    c.nodepool("default", &pool_spec(""));
    let d = c.decide();
    assert!(d.nodeclaim_of("p").is_some(), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2729
#[test]
fn daemonset_overhead_incompatible_with_an_existing_node_is_not_subtracted_from_it() {
    let mut c = suite(default_types());
    claimed_node(&mut c, "existing", "{cpu: \"1\", memory: 1Gi, pods: \"110\"}");
    daemonset(
        &mut c,
        "ds",
        "      affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]}]}}}\n      containers: [{name: d, image: d, resources: {requests: {cpu: \"100\", memory: 100Gi}}}]\n",
    );
    let spec = requesting("cpu: \"1\", memory: 1Gi");
    c.pending("{name: first}", &spec);
    let d = c.decide();
    assert_eq!(d.nominated("first"), Some("existing"), "{}", d.plan.render(&d.snap));
    launch(&mut c, &d, true);
    c.pending("{name: second}", &spec);
    let d = c.decide();
    assert!(!d.scheduled("second"), "the DaemonSet fills every new node: {}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2788
#[test]
fn pods_not_yet_bound_to_a_launched_node_keep_it_as_their_place() {
    let mut c = suite(default_types());
    let spec = requesting("cpu: 10m");
    c.pending("{name: first}", &spec);
    let d = c.decide();
    let nodes = launch(&mut c, &d, false);
    assert_eq!(nodes.len(), 1);
    c.pending("{name: second}", &spec);
    let d = c.decide();
    assert!(d.plan.nodeclaims.is_empty(), "{}", d.plan.render(&d.snap));
    assert_eq!(d.nominated("second"), Some(nodes[0].as_str()));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2860
#[test]
fn self_zone_affinity_follows_the_launched_node_without_binding() {
    let mut c = suite(default_types());
    let spec = "  affinity: {podAffinity: {requiredDuringSchedulingIgnoredDuringExecution: [{labelSelector: {matchLabels: {security: s2}}, topologyKey: topology.kubernetes.io/zone}]}}\n";
    c.pending("{name: p0, labels: {security: s2}}", spec);
    let d = c.decide();
    assert_eq!(launch(&mut c, &d, false).len(), 1);
    c.pending("{name: p1, labels: {security: s2}}", spec);
    let d = c.decide();
    assert!(d.plan.nodeclaims.is_empty(), "{}", d.plan.render(&d.snap));
}

/// The `VolumeUsage` context's catalog: one type with 1024 CPU and 1024 pods.
fn volume_suite() -> Cluster {
    suite(Arc::new(vec![fake("instance-type").resources(1024, 4 * GIB, 1024).build()]))
}

/// A pod spec mounting the claims `claims`, each as its own volume.
fn mounting(claims: &[&str]) -> String {
    let volumes: Vec<String> = claims
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{{name: v{i}, persistentVolumeClaim: {{claimName: {c}}}}}"))
        .collect();
    format!("  volumes: [{}]\n", volumes.join(", "))
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2955
#[test]
fn pods_sharing_one_claim_all_fit_the_in_flight_node() {
    let mut c = volume_suite();
    c.pending("{name: initial}", "");
    let d = c.decide();
    let node1 = launch(&mut c, &d, true).remove(0);
    c.storage_class("{metadata: {name: my-storage-class}, provisioner: fake.csi.provider, allowedTopologies: [{matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [test-zone-1]}]}]}");
    c.volume("{metadata: {name: my-volume}, spec: {csi: {driver: test.driver, volumeHandle: test-handle}, accessModes: [ReadWriteOnce], capacity: {storage: 100Gi}, nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]}]}}}}");
    c.claim("{metadata: {name: my-claim, namespace: default, annotations: {pv.kubernetes.io/bind-completed: \"yes\"}}, spec: {storageClassName: my-storage-class, volumeName: my-volume, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}");
    c.pending_n(100, "p", "", &mounting(&["my-claim"]));
    let d = c.decide();
    assert!(d.plan.nodeclaims.is_empty(), "{}", d.plan.render(&d.snap));
    for i in 0..100 {
        assert_eq!(d.nominated(&format!("p-{i}")), Some(node1.as_str()));
    }
}

/// CSINode `node`: each (driver, count) may attach that many volumes there.
fn csi_node(c: &mut Cluster, node: &str, limits: &[(&str, i32)]) {
    let drivers: Vec<String> = limits
        .iter()
        .map(|(d, n)| format!("{{name: {d}, nodeID: fake-node-id, allocatable: {{count: {n}}}}}"))
        .collect();
    c.csi_node(&format!("{{metadata: {{name: {node}}}, spec: {{drivers: [{}]}}}}", drivers.join(", ")));
}

/// StorageClass `name` of `provisioner`, binding at first consumer in test-zone-1.
fn waiting_class(c: &mut Cluster, name: &str, provisioner: &str) {
    c.storage_class(&format!("{{metadata: {{name: {name}}}, provisioner: {provisioner}, volumeBindingMode: WaitForFirstConsumer, allowedTopologies: [{{matchLabelExpressions: [{{key: topology.kubernetes.io/zone, values: [test-zone-1]}}]}}]}}"));
}

/// Unbound claim `name` of StorageClass `class`.
fn unbound_claim(c: &mut Cluster, name: &str, class: &str) {
    c.claim(&format!("{{metadata: {{name: {name}, namespace: default}}, spec: {{storageClassName: {class}, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}}}"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2903
#[test]
fn a_node_at_its_volume_limit_sends_the_rest_to_a_new_nodeclaim() {
    let mut c = volume_suite();
    c.pending("{name: initial}", "");
    let d = c.decide();
    let node1 = launch(&mut c, &d, true).remove(0);
    csi_node(&mut c, &node1, &[("fake.csi.provider", 10)]);
    waiting_class(&mut c, "my-storage-class", "fake.csi.provider");
    for i in 0..6 {
        unbound_claim(&mut c, &format!("my-claim-a-{i}"), "my-storage-class");
        unbound_claim(&mut c, &format!("my-claim-b-{i}"), "my-storage-class");
        c.pending(&format!("{{name: p-{i}}}"), &mounting(&[&format!("my-claim-a-{i}"), &format!("my-claim-b-{i}")]));
    }
    let d = c.decide();
    // Ten volumes, five pods, on the node; the sixth pod needs another.
    assert_eq!(d.plan.nodeclaims.len(), 1, "{}", d.plan.render(&d.snap));
    let on_node1 = (0..6).filter(|i| d.nominated(&format!("p-{i}")) == Some(node1.as_str())).count();
    assert_eq!(on_node1, 5, "{}", d.plan.render(&d.snap));
}

/// A pod spec with ephemeral volume `tmp-ephemeral` of StorageClass `class`.
fn ephemeral_of(class: &str) -> String {
    format!(
        "  volumes: [{{name: tmp-ephemeral, ephemeral: {{volumeClaimTemplate: {{spec: {{storageClassName: {class}, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}}}}}}}]\n"
    )
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3204
#[test]
fn an_ephemeral_volume_counts_against_its_classs_driver_limit() {
    let mut c = volume_suite();
    waiting_class(&mut c, "my-storage-class", "fake.csi.provider");
    c.storage_class("{metadata: {name: default-storage-class, annotations: {storageclass.kubernetes.io/is-default-class: \"true\"}}, provisioner: other-provider, volumeBindingMode: WaitForFirstConsumer}");
    // The claims the ephemeral volume controller made for each pod.
    unbound_claim(&mut c, "initial-tmp-ephemeral", "my-storage-class");
    c.pending("{name: initial}", &ephemeral_of("my-storage-class"));
    let d = c.decide();
    let node1 = launch(&mut c, &d, true).remove(0);
    csi_node(&mut c, &node1, &[("fake.csi.provider", 1), ("other-provider", 10)]);
    unbound_claim(&mut c, "second-tmp-ephemeral", "my-storage-class");
    c.pending("{name: second}", &ephemeral_of("my-storage-class"));
    let d = c.decide();
    assert!(d.scheduled("second"), "{}", d.plan.render(&d.snap));
    assert_ne!(d.nominated("second"), Some(node1.as_str()), "the node's one fake.csi.provider volume is taken");
    assert_eq!(d.plan.nodeclaims.len(), 1);
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3899
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3958
#[test]
fn an_in_tree_ebs_class_counts_against_the_ebs_csi_drivers_limit() {
    // Karpenter's claims name no class and the API server's admission gives them the default
    // (this in-tree one); the claims here are as the API server stores them.
    for ephemeral in [false, true] {
        let mut c = volume_suite();
        waiting_class(&mut c, "in-tree-storage-class", "kubernetes.io/aws-ebs");
        let spec = |pod: &str| {
            if ephemeral { ephemeral_of("in-tree-storage-class") } else { mounting(&[&format!("{pod}-claim")]) }
        };
        let claim = |pod: &str| if ephemeral { format!("{pod}-tmp-ephemeral") } else { format!("{pod}-claim") };
        unbound_claim(&mut c, &claim("initial"), "in-tree-storage-class");
        c.pending("{name: initial}", &spec("initial"));
        let d = c.decide();
        let node1 = launch(&mut c, &d, true).remove(0);
        csi_node(&mut c, &node1, &[("ebs.csi.aws.com", 1)]);
        unbound_claim(&mut c, &claim("pod"), "in-tree-storage-class");
        c.pending("{name: pod}", &spec("pod"));
        let d = c.decide();
        assert!(d.scheduled("pod"), "ephemeral {ephemeral}: {}", d.plan.render(&d.snap));
        assert_ne!(d.nominated("pod"), Some(node1.as_str()), "ephemeral {ephemeral}: the one EBS attachment is taken");
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3009
#[test]
fn nfs_volumes_do_not_stop_pods_reaching_the_in_flight_node() {
    let mut c = volume_suite();
    c.pending("{name: initial}", "");
    let d = c.decide();
    let node1 = launch(&mut c, &d, true).remove(0);
    c.volume("{metadata: {name: my-volume}, spec: {storageClassName: nfs, nfs: {server: fake.server, path: /some/path}, accessModes: [ReadWriteOnce], capacity: {storage: 100Gi}, nodeAffinity: {required: {nodeSelectorTerms: [{matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]}]}}}}");
    c.claim("{metadata: {name: my-claim, namespace: default, annotations: {pv.kubernetes.io/bind-completed: \"yes\"}}, spec: {storageClassName: \"\", volumeName: my-volume, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}");
    c.pending_n(5, "p", "", &mounting(&["my-claim", "my-claim"]));
    let d = c.decide();
    assert!(d.plan.nodeclaims.is_empty(), "{}", d.plan.render(&d.snap));
    for i in 0..5 {
        assert_eq!(d.nominated(&format!("p-{i}")), Some(node1.as_str()));
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3115
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3116
#[test]
fn a_node_local_volume_s_hostname_term_does_not_pin_the_pod_to_its_other_terms() {
    for source in ["local: {path: /mnt/local-disks}", "hostPath: {path: /mnt/local-disks}"] {
        let mut c = suite(default_types());
        c.volume(&format!(
            "{{metadata: {{name: hostname-or-zone-pv}}, spec: {{{source}, accessModes: [ReadWriteOnce], capacity: {{storage: 100Gi}}, nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [existing-host]}}]}}, {{matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [invalid-zone]}}]}}]}}}}}}}}"
        ));
        c.claim("{metadata: {name: hostname-or-zone-pvc, namespace: default, annotations: {pv.kubernetes.io/bind-completed: \"yes\"}}, spec: {volumeName: hostname-or-zone-pv, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}");
        c.pending("{name: hostname-or-zone-pod}", &mounting(&["hostname-or-zone-pvc"]));
        let d = c.decide();
        assert!(d.scheduled("hostname-or-zone-pod"), "{source}: {}", d.plan.render(&d.snap));
    }
}

/// Two pods `{prefix}-0` and `{prefix}-1`, each mounting claim `{claim}-{i}`, that may not
/// share a zone; the zones their nodes get.
fn zones_of_two_anti_affine_pods(c: &mut Cluster, prefix: &str, claim: &str) -> (String, String) {
    for i in 0..2 {
        c.pending(
            &format!("{{name: {prefix}-{i}, labels: {{app: {prefix}}}}}"),
            &format!(
                "{}  affinity: {{podAntiAffinity: {{requiredDuringSchedulingIgnoredDuringExecution: [{{topologyKey: topology.kubernetes.io/zone, labelSelector: {{matchLabels: {{app: {prefix}}}}}}}]}}}}\n",
                mounting(&[&format!("{claim}-{i}")])
            ),
        );
    }
    let d = c.decide();
    let zone = |p: &str| d.node_labels(p).get("topology.kubernetes.io/zone").cloned().unwrap_or_default();
    (zone(&format!("{prefix}-0")), zone(&format!("{prefix}-1")))
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3047
#[test]
fn a_volume_in_either_of_two_zones_lets_anti_affine_pods_take_both() {
    let mut c = suite(default_types());
    for i in 0..2 {
        c.volume(&format!("{{metadata: {{name: multi-zone-pv-{i}}}, spec: {{csi: {{driver: test.driver, volumeHandle: h{i}}}, accessModes: [ReadWriteOnce], capacity: {{storage: 1Gi}}, nodeAffinity: {{required: {{nodeSelectorTerms: [{{matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}}]}}, {{matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-2]}}]}}]}}}}}}}}"));
        c.claim(&format!("{{metadata: {{name: multi-zone-pvc-{i}, namespace: default, annotations: {{pv.kubernetes.io/bind-completed: \"yes\"}}}}, spec: {{volumeName: multi-zone-pv-{i}, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}}}"));
    }
    let (a, b) = zones_of_two_anti_affine_pods(&mut c, "pod", "multi-zone-pvc");
    assert!(
        ["test-zone-1", "test-zone-2"].contains(&a.as_str()) && ["test-zone-1", "test-zone-2"].contains(&b.as_str())
    );
    assert_ne!(a, b);
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3118
#[test]
fn a_storage_class_allowing_either_of_two_zones_lets_anti_affine_pods_take_both() {
    let mut c = suite(default_types());
    c.storage_class("{metadata: {name: multi-zone-sc}, provisioner: test-provisioner, volumeBindingMode: WaitForFirstConsumer, allowedTopologies: [{matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [test-zone-1]}]}, {matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [test-zone-2]}]}]}");
    for i in 0..2 {
        c.claim(&format!("{{metadata: {{name: multi-zone-pvc-{i}, namespace: default}}, spec: {{storageClassName: multi-zone-sc, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}}}"));
    }
    let (a, b) = zones_of_two_anti_affine_pods(&mut c, "sc-pod", "multi-zone-pvc");
    assert!(
        ["test-zone-1", "test-zone-2"].contains(&a.as_str()) && ["test-zone-1", "test-zone-2"].contains(&b.as_str())
    );
    assert_ne!(a, b);
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3165
#[test]
fn the_volume_alternative_every_claim_and_a_type_allow_is_the_one_taken() {
    let mut c = suite(default_types());
    c.storage_class(&format!("{{metadata: {{name: pruned-overlap-a}}, provisioner: p, volumeBindingMode: WaitForFirstConsumer, allowedTopologies: [{{matchLabelExpressions: [{{key: {EXOTIC}, values: [required]}}]}}, {{matchLabelExpressions: [{{key: {EXOTIC}, values: [optional]}}]}}]}}"));
    c.storage_class(&format!("{{metadata: {{name: pruned-overlap-b}}, provisioner: p, volumeBindingMode: WaitForFirstConsumer, allowedTopologies: [{{matchLabelExpressions: [{{key: topology.kubernetes.io/zone, values: [test-zone-1]}}, {{key: {EXOTIC}, values: [optional]}}]}}, {{matchLabelExpressions: [{{key: topology.kubernetes.io/zone, values: [test-zone-2]}}, {{key: {EXOTIC}, values: [required]}}]}}]}}"));
    for class in ["a", "b"] {
        c.claim(&format!("{{metadata: {{name: pruned-overlap-pvc-{class}, namespace: default}}, spec: {{storageClassName: pruned-overlap-{class}, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}}}"));
    }
    c.pending("{name: p}", &mounting(&["pruned-overlap-pvc-a", "pruned-overlap-pvc-b"]));
    let labels = c.decide().node_labels("p");
    assert_eq!(labels.get("topology.kubernetes.io/zone").map(String::as_str), Some("test-zone-1"));
    assert_eq!(labels.get(EXOTIC).map(String::as_str), Some("optional"));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2040
#[test]
fn a_not_ready_taint_is_ignored_only_until_the_node_is_initialized() {
    let mut c = suite(default_types());
    c.pending("{name: initial}", "");
    let d = c.decide();
    let node = launch(&mut c, &d, true).remove(0);
    delete_pod(&mut c, "initial");
    set_taints(&mut c, &node, "[{key: node.kubernetes.io/not-ready, effect: NoExecute}]");
    c.pending("{name: second}", "");
    assert_eq!(c.decide().nominated("second"), Some(node.as_str()), "uninitialized: the taint is passing");
    c.objects.pods.retain(|p| p.metadata.name.as_deref() != Some("second"));
    initialize(&mut c, &node);
    c.pending("{name: third}", "");
    let d = c.decide();
    assert_ne!(d.nominated("third"), Some(node.as_str()), "initialized: the taint is real");
    assert!(d.nodeclaim_of("third").is_some());
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:2143
#[test]
fn a_startup_taint_back_after_initialization_keeps_pods_off() {
    let mut c = Cluster::new(default_types());
    c.nodepool(
        "default",
        &pool_spec("      startupTaints: [{key: ignore-me, value: nothing-to-see-here, effect: NoSchedule}]\n"),
    );
    c.pending("{name: initial}", "");
    let d = c.decide();
    let node = launch(&mut c, &d, true).remove(0);
    delete_pod(&mut c, "initial");
    initialize(&mut c, &node);
    set_taints(&mut c, &node, "[{key: ignore-me, value: nothing-to-see-here, effect: NoSchedule}]");
    c.pending("{name: second}", "");
    let d = c.decide();
    assert_ne!(d.nominated("second"), Some(node.as_str()));
    assert!(d.nodeclaim_of("second").is_some(), "{}", d.plan.render(&d.snap));
}

/// StorageClass `default-storage-class` of Karpenter's VolumeUsage cases, binding `mode`.
fn other_provider_class(c: &mut Cluster, mode: &str) {
    c.storage_class(&format!("{{metadata: {{name: default-storage-class}}, provisioner: other-provider, volumeBindingMode: {mode}, allowedTopologies: [{{matchLabelExpressions: [{{key: topology.kubernetes.io/zone, values: [test-zone-1]}}]}}]}}"));
}

/// Asserts the pod is left out of provisioning for its volumes, naming `field` and `why`.
fn assert_ignored_for_volume(d: &Decision, pod: &str, why: &str) {
    let e = d.ignored_pod(pod).unwrap_or_else(|| panic!("{pod} was not left out: {}", d.plan.render(&d.snap)));
    assert!(e.field.starts_with("spec.volumes[") && e.message.contains(why), "{e}");
    assert!(d.plan.nodeclaims.is_empty(), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3662
#[test]
fn an_unbound_claim_of_an_immediate_class_launches_nothing() {
    let mut c = suite(default_types());
    other_provider_class(&mut c, "Immediate");
    c.claim("{metadata: {name: tmp-ephemeral, namespace: default}, spec: {storageClassName: default-storage-class, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}");
    c.pending("{name: p}", &mounting(&["tmp-ephemeral"]));
    assert_ignored_for_volume(&c.decide_ignoring(), "p", "binds Immediately");
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3684
#[test]
fn a_claim_being_deleted_launches_nothing() {
    let mut c = suite(default_types());
    other_provider_class(&mut c, "WaitForFirstConsumer");
    c.claim("{metadata: {name: tmp-ephemeral, namespace: default, deletionTimestamp: \"2026-11-30T00:00:00Z\", finalizers: [kubernetes.io/pvc-protection]}, spec: {storageClassName: default-storage-class, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}");
    c.pending("{name: p}", &mounting(&["tmp-ephemeral"]));
    assert_ignored_for_volume(&c.decide_ignoring(), "p", "is being deleted");
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3707
#[test]
fn a_bound_volume_being_deleted_launches_nothing() {
    let mut c = suite(default_types());
    c.pending(
        "{name: p}",
        "  volumes: [{name: tmp-ephemeral, ephemeral: {volumeClaimTemplate: {spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}}}]\n",
    );
    c.volume("{metadata: {name: pv, deletionTimestamp: \"2026-11-30T00:00:00Z\", finalizers: [kubernetes.io/pv-protection]}, spec: {csi: {driver: other-provider, volumeHandle: test-handle}, accessModes: [ReadWriteOnce], capacity: {storage: 100Gi}}}");
    c.claim("{metadata: {name: p-tmp-ephemeral, namespace: default, annotations: {pv.kubernetes.io/bind-completed: \"yes\"}}, spec: {volumeName: pv, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}");
    let d = c.decide_ignoring();
    assert_ignored_for_volume(&d, "p", "PersistentVolume pv of claim default/p-tmp-ephemeral is being deleted");
    assert_eq!(d.ignored_pod("p").unwrap().field, "spec.volumes[0].ephemeral");
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3749
#[test]
fn a_lost_claim_launches_nothing() {
    let mut c = suite(default_types());
    other_provider_class(&mut c, "WaitForFirstConsumer");
    c.claim("{metadata: {name: tmp-ephemeral, namespace: default}, spec: {storageClassName: default-storage-class, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}, status: {phase: Lost}}");
    c.pending("{name: p}", &mounting(&["tmp-ephemeral"]));
    assert_ignored_for_volume(&c.decide_ignoring(), "p", "is Lost");
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3807
#[test]
fn a_claim_naming_a_volume_but_not_marked_bound_launches_nothing() {
    let mut c = suite(default_types());
    other_provider_class(&mut c, "WaitForFirstConsumer");
    c.volume("{metadata: {name: pv}, spec: {csi: {driver: other-provider, volumeHandle: test-handle}, accessModes: [ReadWriteOnce], capacity: {storage: 100Gi}}}");
    c.claim("{metadata: {name: tmp-ephemeral, namespace: default}, spec: {storageClassName: default-storage-class, volumeName: pv, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}");
    c.pending("{name: p}", &mounting(&["tmp-ephemeral"]));
    assert_ignored_for_volume(&c.decide_ignoring(), "p", "pv.kubernetes.io/bind-completed");
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3808
#[test]
fn a_claim_bound_by_name_and_marked_bound_schedules() {
    let mut c = suite(default_types());
    c.storage_class("{metadata: {name: default-storage-class}, provisioner: other-provider, volumeBindingMode: WaitForFirstConsumer, allowedTopologies: [{matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [test-zone-1]}]}]}");
    c.volume("{metadata: {name: pv}, spec: {csi: {driver: other-provider, volumeHandle: test-handle}, accessModes: [ReadWriteOnce], capacity: {storage: 100Gi}}}");
    c.claim("{metadata: {name: tmp-ephemeral, namespace: default, annotations: {pv.kubernetes.io/bind-completed: \"yes\"}}, spec: {storageClassName: default-storage-class, volumeName: pv, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}");
    c.pending("{name: p}", &mounting(&["tmp-ephemeral"]));
    let d = c.decide();
    assert!(d.scheduled("p"), "{}", d.plan.render(&d.snap));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3859
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3860
#[test]
fn an_ephemeral_volume_whose_claim_is_bound_schedules_whatever_its_class() {
    for class in ["non-existent", ""] {
        let mut c = suite(default_types());
        c.pending(
            "{name: p}",
            &format!(
                "  volumes: [{{name: tmp-ephemeral, ephemeral: {{volumeClaimTemplate: {{spec: {{storageClassName: \"{class}\", accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}}}}}}}]\n"
            ),
        );
        c.claim(&format!(
            "{{metadata: {{name: p-tmp-ephemeral, namespace: default, annotations: {{pv.kubernetes.io/bind-completed: \"yes\"}}}}, spec: {{storageClassName: \"{class}\", volumeName: test-pv, accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}}}"
        ));
        c.volume("{metadata: {name: test-pv}, spec: {csi: {driver: test.driver, volumeHandle: test-handle}, accessModes: [ReadWriteOnce], capacity: {storage: 100Gi}}}");
        let d = c.decide();
        assert_eq!(d.plan.nodeclaims.len(), 1, "class {class:?}: {}", d.plan.render(&d.snap));
        assert!(d.nodeclaim_of("p").is_some());
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3895
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:3896
#[test]
fn an_ephemeral_volume_whose_claim_does_not_exist_yet_launches_nothing() {
    for class in ["non-existent", ""] {
        let mut c = suite(default_types());
        c.pending(
            "{name: p}",
            &format!(
                "  volumes: [{{name: tmp-ephemeral, ephemeral: {{volumeClaimTemplate: {{spec: {{storageClassName: \"{class}\", accessModes: [ReadWriteOnce], resources: {{requests: {{storage: 1Gi}}}}}}}}}}}}]\n"
            ),
        );
        assert_ignored_for_volume(&c.decide_ignoring(), "p", "PersistentVolumeClaim default/p-tmp-ephemeral not found");
    }
}

/// The reason Tenon gives when a NodePool's requirements leave none of its types.
const FILTERED_OUT: &str = "no instance type of its NodeClass satisfies the NodePool's requirements";

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:5197
#[test]
fn a_nodepool_whose_requirements_match_no_type_explains_the_pod_error() {
    let mut c = suite(default_types());
    c.pending("{name: normal}", "");
    let d = c.decide();
    assert!(d.nodeclaim_of("normal").is_some());
    launch(&mut c, &d, true);
    c.objects.nodepools.clear();
    c.nodepool(
        "default",
        &pool_spec(
            "        - {key: node.kubernetes.io/instance-type, operator: In, values: [non-existent-instance-type]}\n",
        ),
    );
    c.pending(
        "{name: test-pod-filtered, namespace: default}",
        "  containers: [{name: app, image: app, resources: {requests: {cpu: \"32\", memory: 256Gi}, limits: {cpu: \"32\", memory: 256Gi}}}]\n",
    );
    let d = c.decide();
    assert_eq!(d.plan.unschedulable.len(), 1, "{}", d.plan.render(&d.snap));
    assert!(!d.scheduled("test-pod-filtered"));
    let reason = d.unschedulable("test-pod-filtered").expect("a pod error");
    assert!(reason.contains(FILTERED_OUT), "{reason}");
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:5242
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:5273
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:5302
#[test]
fn nodepool_requirements_that_filter_out_every_type_fail_each_pod() {
    let cases: [(&str, &[&str]); 3] = [
        (
            "        - {key: kubernetes.io/arch, operator: In, values: [non-existent-arch]}\n",
            &["pod-1", "pod-2", "pod-3"],
        ),
        (
            "        - {key: kubernetes.io/arch, operator: In, values: [amd64]}\n        - {key: kubernetes.io/arch, operator: In, values: [arm64]}\n",
            &["conflicting-requirements-pod"],
        ),
        (
            "        - {key: topology.kubernetes.io/zone, operator: In, values: [non-existent-zone-1, non-existent-zone-2]}\n",
            &["zone-filtered-pod"],
        ),
    ];
    for (requirements, pods) in cases {
        let mut c = Cluster::new(default_types());
        c.nodepool("default", &pool_spec(requirements));
        for p in pods {
            c.pending(&format!("{{name: {p}, namespace: default}}"), "");
        }
        let d = c.decide();
        assert_eq!(d.plan.unschedulable.len(), pods.len(), "{requirements}: {}", d.plan.render(&d.snap));
        for p in pods {
            assert!(!d.scheduled(p));
            let reason = d.unschedulable(p).expect("a pod error");
            assert!(reason.contains(FILTERED_OUT), "{requirements}: {reason}");
        }
    }
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:5449
#[test]
fn a_pod_without_resource_claims_gets_one_nodeclaim() {
    let mut c = Cluster::new(default_types());
    c.default_nodepool();
    c.pending(
        "{name: non-dra-pod, namespace: default, uid: non-dra-pod-uid}",
        "  containers: [{name: app, image: nginx:latest, resources: {requests: {cpu: \"1\", memory: 1Gi}}}]\n",
    );
    let d = c.decide();
    assert_eq!(d.plan.nodeclaims.len(), 1, "{}", d.plan.render(&d.snap));
    assert!(d.plan.unschedulable.is_empty());
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:5361
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:5382
/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:5414
#[test]
fn pods_with_resource_claims_get_no_nodeclaim_and_say_why() {
    let containers = [
        // A container's claim.
        "  resourceClaims: [{name: gpu-claim, resourceClaimName: gpu}]\n  containers: [{name: app, image: cuda, resources: {requests: {cpu: \"1\", memory: 1Gi}, claims: [{name: gpu-claim}]}}]\n",
        // An init container's claim.
        "  resourceClaims: [{name: gpu-init-claim, resourceClaimName: gpu}]\n  initContainers: [{name: init, image: cuda, resources: {requests: {cpu: 500m, memory: 512Mi}, claims: [{name: gpu-init-claim}]}}]\n  containers: [{name: app, image: nginx, resources: {requests: {cpu: \"1\", memory: 1Gi}}}]\n",
        // Both.
        "  resourceClaims: [{name: gpu-claim, resourceClaimName: gpu}, {name: storage-init-claim, resourceClaimName: s}]\n  initContainers: [{name: init, image: busybox, resources: {requests: {cpu: 250m, memory: 256Mi}, claims: [{name: storage-init-claim}]}}]\n  containers: [{name: app, image: cuda, resources: {requests: {cpu: \"1\", memory: 1Gi}, claims: [{name: gpu-claim}]}}]\n",
    ];
    for spec in containers {
        let mut c = suite(default_types());
        c.pending("{name: p}", spec);
        let d = c.decide();
        assert!(d.plan.nodeclaims.is_empty(), "{spec}: {}", d.plan.render(&d.snap));
        let why = d.unschedulable("p").unwrap_or_default();
        assert!(why.contains("Dynamic Resource Allocation"), "{spec}: the DRA error, got {why:?}");
    }
}
