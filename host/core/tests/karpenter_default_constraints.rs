//! Karpenter's `pkg/controllers/provisioning/scheduling/defaultconstraints_test.go`, ported:
//! the selector deduced for each pod that gets the cluster's default spread constraints, read
//! back from the constraints Tenon schedules the pod with. Each test names the cases it
//! accounts for (tests/conformance/karpenter.tsv).

use crate::support;
use tenon_core::cached_pod;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use std::collections::BTreeMap;
use support::karpenter::*;
use tenon_core::default_spread::{DefaultSpread, Selecting};

const ZONE_DEFAULT: &str = "podTopologySpread: {defaultConstraints: [{topologyKey: topology.kubernetes.io/zone, maxSkew: 1, whenUnsatisfiable: DoNotSchedule}]}";

fn cluster() -> Cluster {
    let mut c = Cluster::new(default_types());
    c.scheduler_config(ZONE_DEFAULT);
    c
}

/// A pending pod labelled `labels` (map body) with these owner references (flow items).
fn pod(c: &mut Cluster, name: &str, labels: &str, owners: &[&str]) -> cached_pod::Pod {
    c.pending(&format!("{{name: {name}, labels: {{{labels}}}, ownerReferences: [{}]}}", owners.join(", ")), "");
    c.objects.pods.pop().expect("the pod")
}

fn controller(api_version: &str, kind: &str, name: &str) -> String {
    format!("{{apiVersion: {api_version}, kind: {kind}, name: {name}, uid: {name}-uid, controller: true}}")
}

fn injector(o: &tenon_core::convert::ClusterObjects) -> DefaultSpread<'_> {
    DefaultSpread::new(
        o.scheduler.default_constraints(),
        Selecting {
            services: &o.services,
            replica_sets: &o.replica_sets,
            stateful_sets: &o.stateful_sets,
            replication_controllers: &o.replication_controllers,
        },
    )
}

/// The selector of the one zonal default the pod gets, or `None` when it gets no default.
fn inject(c: &Cluster, pod: &cached_pod::Pod) -> Option<LabelSelector> {
    let got = injector(&c.objects.shared()).for_pod(pod);
    if got.is_empty() {
        return None;
    }
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].topology_key, "topology.kubernetes.io/zone");
    Some(got[0].label_selector.clone().expect("a deduced selector"))
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn is_in(key: &str, value: &str) -> LabelSelectorRequirement {
    LabelSelectorRequirement { key: key.into(), operator: "In".into(), values: Some(vec![value.into()]) }
}

/// The selector's requirements, in any order (`ConsistOf`).
fn expressions(s: &LabelSelector) -> Vec<LabelSelectorRequirement> {
    let mut v = s.match_expressions.clone().unwrap_or_default();
    v.sort_by(|a, b| a.key.cmp(&b.key));
    v
}

fn match_labels(s: &LabelSelector) -> BTreeMap<String, String> {
    s.match_labels.clone().unwrap_or_default()
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:80
#[test]
fn a_replica_sets_selector_is_deduced_not_the_pods_labels() {
    let mut c = cluster();
    c.replica_set("rs", "{matchLabels: {app: web, pod-template-hash: abc123}}");
    let p = pod(
        &mut c,
        "p",
        "app: web, pod-template-hash: abc123, extra: ignored",
        &[&controller("apps/v1", "ReplicaSet", "rs")],
    );
    let s = inject(&c, &p).expect("a default");
    assert!(match_labels(&s).is_empty(), "{s:?}");
    assert_eq!(expressions(&s), vec![is_in("app", "web"), is_in("pod-template-hash", "abc123")]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:98
#[test]
fn a_stateful_sets_selector_is_deduced_without_the_pods_volatile_labels() {
    let mut c = cluster();
    c.stateful_set("db", "{matchLabels: {app: db}}");
    let p = pod(
        &mut c,
        "db-0",
        "app: db, controller-revision-hash: db-6f8c, statefulset.kubernetes.io/pod-name: db-0, apps.kubernetes.io/pod-index: '0'",
        &[&controller("apps/v1", "StatefulSet", "db")],
    );
    let s = inject(&c, &p).expect("a default");
    assert_eq!(expressions(&s), vec![is_in("app", "db")]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:119
#[test]
fn a_replica_sets_match_expressions_are_carried_verbatim() {
    let mut c = cluster();
    c.replica_set("rs", "{matchExpressions: [{key: app, operator: NotIn, values: [other]}]}");
    let p = pod(&mut c, "p", "app: web", &[&controller("apps/v1", "ReplicaSet", "rs")]);
    let s = inject(&c, &p).expect("a default");
    let not_in =
        LabelSelectorRequirement { key: "app".into(), operator: "NotIn".into(), values: Some(vec!["other".into()]) };
    assert_eq!(expressions(&s), vec![not_in]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:137
#[test]
fn a_replication_controllers_selector_is_deduced_as_labels() {
    let mut c = cluster();
    c.replication_controller("legacy", "{app: legacy}");
    let p = pod(&mut c, "p", "app: legacy", &[&controller("v1", "ReplicationController", "legacy")]);
    let s = inject(&c, &p).expect("a default");
    assert_eq!(match_labels(&s), labels(&[("app", "legacy")]));
    assert!(expressions(&s).is_empty());
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:159
#[test]
fn an_unsupported_owner_kind_gives_no_selector() {
    let mut c = cluster();
    let p = pod(&mut c, "p", "app: batch", &[&controller("batch/v1", "Job", "test-job")]);
    assert_eq!(inject(&c, &p), None);
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:166
#[test]
fn an_owner_that_is_not_the_controller_is_ignored() {
    let mut c = cluster();
    c.replica_set("rs", "{matchLabels: {app: web}}");
    let p = pod(
        &mut c,
        "p",
        "app: web",
        &["{apiVersion: apps/v1, kind: ReplicaSet, name: rs, uid: rs-uid, controller: false}"],
    );
    assert_eq!(inject(&c, &p), None);
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:174
#[test]
fn an_owner_that_no_longer_exists_contributes_nothing() {
    let mut c = cluster();
    let p = pod(&mut c, "p", "app: web", &[&controller("apps/v1", "ReplicaSet", "does-not-exist")]);
    assert_eq!(inject(&c, &p), None);
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:185
#[test]
fn a_matching_service_gives_its_selector_as_labels() {
    let mut c = cluster();
    c.service("web", "{app: web}");
    let p = pod(&mut c, "p", "app: web, extra: ignored", &[]);
    let s = inject(&c, &p).expect("a default");
    assert_eq!(match_labels(&s), labels(&[("app", "web")]));
    assert!(expressions(&s).is_empty());
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:193
#[test]
fn the_selectors_of_every_matching_service_are_merged() {
    let mut c = cluster();
    c.service("web", "{app: web}").service("front", "{tier: frontend}");
    let p = pod(&mut c, "p", "app: web, tier: frontend", &[]);
    let s = inject(&c, &p).expect("a default");
    assert_eq!(match_labels(&s), labels(&[("app", "web"), ("tier", "frontend")]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:202
#[test]
fn a_service_that_does_not_match_gives_nothing() {
    let mut c = cluster();
    c.service("other", "{app: other}");
    let p = pod(&mut c, "p", "app: web", &[]);
    assert_eq!(inject(&c, &p), None);
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:206
#[test]
fn a_service_without_a_selector_matches_nothing() {
    let mut c = cluster();
    c.service("headless", "~");
    let p = pod(&mut c, "p", "app: web", &[]);
    assert_eq!(inject(&c, &p), None);
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:211
#[test]
fn a_service_with_an_empty_selector_contributes_nothing() {
    let mut c = cluster();
    c.service("all", "{}");
    let p = pod(&mut c, "p", "app: web", &[]);
    assert_eq!(inject(&c, &p), None);
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:216
#[test]
fn a_matching_service_in_another_namespace_is_ignored() {
    let mut c = cluster();
    c.service("web", "{app: web}");
    c.objects.services[0].metadata.namespace = Some("elsewhere".into());
    let p = pod(&mut c, "p", "app: web", &[]);
    assert_eq!(inject(&c, &p), None);
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:224
#[test]
fn a_services_labels_and_the_owners_requirements_combine() {
    let mut c = cluster();
    c.replica_set("rs", "{matchLabels: {app: web, pod-template-hash: abc123}}");
    c.service("front", "{tier: frontend}");
    let p = pod(
        &mut c,
        "p",
        "app: web, pod-template-hash: abc123, tier: frontend",
        &[&controller("apps/v1", "ReplicaSet", "rs")],
    );
    let s = inject(&c, &p).expect("a default");
    assert_eq!(match_labels(&s), labels(&[("tier", "frontend")]));
    assert_eq!(expressions(&s), vec![is_in("app", "web"), is_in("pod-template-hash", "abc123")]);
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:250
#[test]
fn a_replication_controllers_selector_overwrites_a_conflicting_service_label() {
    let mut c = cluster();
    c.replication_controller("legacy", "{app: legacy}");
    c.service("web", "{app: web}");
    let p = pod(&mut c, "p", "app: web", &[&controller("v1", "ReplicationController", "legacy")]);
    let s = inject(&c, &p).expect("a default");
    assert_eq!(match_labels(&s), labels(&[("app", "legacy")]));
    assert!(expressions(&s).is_empty());
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:272
#[test]
fn a_replica_sets_conflicting_selector_is_anded_and_selects_nothing() {
    let mut c = cluster();
    c.replica_set("rs", "{matchLabels: {app: other}}");
    c.service("web", "{app: web}");
    let p = pod(&mut c, "p", "app: web", &[&controller("apps/v1", "ReplicaSet", "rs")]);
    let s = inject(&c, &p).expect("a default");
    assert_eq!(match_labels(&s), labels(&[("app", "web")]));
    assert_eq!(expressions(&s), vec![is_in("app", "other")]);
    let compiled = tenon_core::convert::selector(Some(&s));
    assert!(!compiled.matches(&labels(&[("app", "web")])));
    assert!(!compiled.matches(&labels(&[("app", "other")])));
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:298
#[test]
fn pods_of_one_owner_with_different_labels_get_different_selectors() {
    let mut c = cluster();
    c.replica_set("rs", "{matchLabels: {app: web}}");
    c.service("front", "{tier: frontend}");
    let owner = controller("apps/v1", "ReplicaSet", "rs");
    let frontend = pod(&mut c, "frontend", "app: web, tier: frontend", &[&owner]);
    let plain = pod(&mut c, "plain", "app: web", &[&owner]);
    // One injector for both: what it remembers of the first must not answer for the second.
    let shared = c.objects.shared();
    let mut one = injector(&shared);
    let (a, b) = (one.for_pod(&frontend), one.for_pod(&plain));
    assert_eq!(a[0].label_selector.as_ref().map(match_labels), Some(labels(&[("tier", "frontend")])));
    assert_eq!(b[0].label_selector.as_ref().map(match_labels), Some(BTreeMap::new()));
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:314
#[test]
fn identically_labelled_pods_in_different_namespaces_get_their_own_selectors() {
    let mut c = cluster();
    c.service("web", "{app: web}");
    let selected = pod(&mut c, "selected", "app: web", &[]);
    let mut other = pod(&mut c, "other", "app: web", &[]);
    other.metadata.namespace = Some("elsewhere".into());
    let shared = c.objects.shared();
    let mut one = injector(&shared);
    assert_eq!(one.for_pod(&selected).len(), 1);
    assert!(one.for_pod(&other).is_empty());
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:332
#[test]
fn a_pod_with_constraints_of_its_own_is_left_as_it_is() {
    let mut c = cluster();
    c.replica_set("rs", "{matchLabels: {app: web}}");
    c.pending(
        &format!("{{name: p, labels: {{app: web}}, ownerReferences: [{}]}}", controller("apps/v1", "ReplicaSet", "rs")),
        "  topologySpreadConstraints: [{topologyKey: kubernetes.io/hostname, maxSkew: 5, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: web}}}]\n",
    );
    let p = c.objects.pods.last().unwrap().clone();
    assert!(injector(&c.objects.shared()).for_pod(&p).is_empty());
    // What the scheduler sees is the pod's own constraint, alone and unchanged.
    let d = c.decide();
    let seen = &d.snap.pods.iter().find(|x| x.name == "p").unwrap().spread;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!((seen[0].key.as_str(), seen[0].max_skew), ("kubernetes.io/hostname", 5));
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:377
#[test]
fn the_configured_fields_are_kept_on_the_injected_constraint() {
    let mut c = Cluster::new(default_types());
    c.scheduler_config(
        "podTopologySpread: {defaultConstraints: [{topologyKey: topology.kubernetes.io/zone, maxSkew: 4, whenUnsatisfiable: ScheduleAnyway, minDomains: 3, nodeTaintsPolicy: Honor}]}",
    );
    c.replica_set("rs", "{matchLabels: {app: web}}");
    let p = pod(&mut c, "p", "app: web", &[&controller("apps/v1", "ReplicaSet", "rs")]);
    let got = injector(&c.objects.shared()).for_pod(&p);
    assert_eq!(got.len(), 1);
    let t = &got[0];
    assert_eq!((t.max_skew, t.when_unsatisfiable.as_str(), t.min_domains), (4, "ScheduleAnyway", Some(3)));
    assert_eq!(t.node_taints_policy.as_deref(), Some("Honor"));
    assert!(t.label_selector.is_some());
    // And the scheduler reads them as configured.
    c.objects.pods.push(p);
    let d = c.decide();
    let seen = &d.snap.pods.iter().find(|x| x.name == "p").unwrap().spread[0];
    assert_eq!((seen.max_skew, seen.min_domains, seen.honor_node_taints), (4, Some(3), true));
}

/// karpenter:pkg/controllers/provisioning/scheduling/defaultconstraints_test.go:405
#[test]
fn pods_of_different_workloads_in_one_pass_get_independent_selectors() {
    let mut c = cluster();
    c.replica_set("web", "{matchLabels: {app: web}}").replica_set("api", "{matchLabels: {app: api}}");
    let web = pod(&mut c, "web", "app: web", &[&controller("apps/v1", "ReplicaSet", "web")]);
    let api = pod(&mut c, "api", "app: api", &[&controller("apps/v1", "ReplicaSet", "api")]);
    let orphan = pod(&mut c, "orphan", "app: orphan", &[]);
    let shared = c.objects.shared();
    let mut one = injector(&shared);
    let selector_of = |got: Vec<core::TopologySpreadConstraint>| expressions(got[0].label_selector.as_ref().unwrap());
    assert_eq!(selector_of(one.for_pod(&web)), vec![is_in("app", "web")]);
    assert_eq!(selector_of(one.for_pod(&api)), vec![is_in("app", "api")]);
    assert!(one.for_pod(&orphan).is_empty());
}
