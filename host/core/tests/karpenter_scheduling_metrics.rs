//! Karpenter's `pkg/controllers/provisioning/scheduling/suite_test.go`, `Metrics` context,
//! ported: each test names the cases it accounts for (tests/conformance/karpenter.tsv).
//!
//! Karpenter's `karpenter_scheduler_pending_pods_by_effective_zone_count` gauge counts the
//! pending pods of a decision by the zone they are confined to before anything is placed: a
//! zone's name, `flexible` (several zones) or `none` (no zone at all). The decision carries
//! each pending pod's effective zone (`ProvisioningPlan::pending_zones`); the controller
//! publishes the counts under the gauge's name (`tenon::controller::provisioner`). The
//! suite's NodePool here is Karpenter's `test.NodePool()` over its fake catalog, which
//! launches in `test-zone-1` to `test-zone-3`.

use crate::support;

use std::collections::BTreeMap;
use support::karpenter::*;

/// The `Metrics` context's cluster: `test.NodePool()` and the fake catalog.
fn cluster() -> Cluster {
    let mut c = Cluster::new(default_types());
    c.default_nodepool();
    c
}

/// The context's pod labels (`app: pod-label`), as a YAML map body.
const LABELS: &str = "app: pod-label";

fn selector_zone(zone: &str) -> String {
    format!("  nodeSelector: {{topology.kubernetes.io/zone: {zone}}}\n")
}

/// A required pod (anti-)affinity term (`kind` is `podAffinity` or `podAntiAffinity`) on the
/// zone key, selecting `match_labels` (a matchLabels body).
fn zone_term(kind: &str, match_labels: &str) -> String {
    format!(
        "  affinity: {{{kind}: {{requiredDuringSchedulingIgnoredDuringExecution: [{{topologyKey: topology.kubernetes.io/zone, labelSelector: {{matchLabels: {{{match_labels}}}}}}}]}}}}\n"
    )
}

/// A zonal DoNotSchedule spread of max skew 1 over the context's labels, with `extra`
/// fields (e.g. `, minDomains: 4`).
fn zone_spread(extra: &str) -> String {
    format!(
        "  topologySpreadConstraints: [{{topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule, maxSkew: 1, labelSelector: {{matchLabels: {{{LABELS}}}}}{extra}}}]\n"
    )
}

/// Provisions for every pending pod (`ExpectProvisioned`) and makes what was decided real:
/// each new NodeClaim becomes a Ready Node with the labels Karpenter's fake cloud provider
/// gives it, and each pod is bound where it was placed. Every pod must have been placed.
fn provision_existing(c: &mut Cluster) {
    let d = c.decide();
    assert!(d.plan.unschedulable.is_empty(), "existing pods must schedule: {}", d.plan.render(&d.snap));
    let mut binds: Vec<(String, String)> = Vec::new();
    for (i, nc) in d.plan.nodeclaims.iter().enumerate() {
        let name = format!("existing-{}-{i}", c.objects.nodes.len());
        let mut labels = launched_labels(&d.snap, nc);
        labels.insert("kubernetes.io/hostname".into(), name.clone());
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("\"{k}\": \"{v}\"")).collect();
        c.node(&format!(
            "{{metadata: {{name: {name}, labels: {{{}}}}}, status: {{allocatable: {{cpu: \"4\", memory: 4Gi, pods: \"5\"}}, capacity: {{cpu: \"4\", memory: 4Gi, pods: \"5\"}}, conditions: [{{type: Ready, status: \"True\"}}]}}}}",
            labels.join(", ")
        ));
        binds.extend(nc.pods.iter().map(|&p| (d.snap.pods[p].name.clone(), name.clone())));
    }
    binds.extend(d.plan.nominations.iter().map(|n| (d.snap.pods[n.pod].name.clone(), n.node.clone())));
    for (pod, node) in binds {
        let p = c.objects.pods.iter_mut().find(|o| o.metadata.name.as_deref() == Some(pod.as_str())).unwrap();
        p.spec.as_mut().unwrap().node_name = Some(node);
        p.status = Some(serde_yaml::from_str("{phase: Running}").unwrap());
    }
}

/// The zone of the node pod `pod` was bound to.
fn bound_zone(c: &Cluster, pod: &str) -> String {
    let p = c.objects.pods.iter().find(|o| o.metadata.name.as_deref() == Some(pod)).unwrap();
    let node = p.spec.as_ref().and_then(|s| s.node_name.clone()).expect("bound");
    let n = c.objects.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(node.as_str())).unwrap();
    n.metadata.labels.as_ref().and_then(|l| l.get("topology.kubernetes.io/zone")).cloned().expect("a zone")
}

/// The gauge's values after deciding for the pending pods: pending pods per effective zone.
fn pending_by_zone(c: &Cluster) -> BTreeMap<String, usize> {
    c.decide().plan.pending_pods_by_zone()
}

fn want(entries: &[(&str, usize)]) -> BTreeMap<String, usize> {
    entries.iter().map(|(z, n)| (z.to_string(), *n)).collect()
}

/// A pod pending on claim `pvc-name` of StorageClass `zone-sc` (WaitForFirstConsumer) that
/// allows `zones`, with the pod's `spec` lines.
fn pod_with_claim(zones: &[&str], spec: &str) -> Cluster {
    let mut c = cluster();
    c.storage_class(&format!(
        "{{metadata: {{name: zone-sc}}, provisioner: fake.csi.provider, volumeBindingMode: WaitForFirstConsumer, allowedTopologies: [{{matchLabelExpressions: [{{key: topology.kubernetes.io/zone, values: [{}]}}]}}]}}",
        zones.join(", ")
    ));
    c.claim("{metadata: {name: pvc-name, namespace: default}, spec: {storageClassName: zone-sc, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}}");
    c.pending(
        "{name: p}",
        &format!(
            "{spec}  containers: [{{name: c, image: pause}}]\n  volumes: [{{name: v, persistentVolumeClaim: {{claimName: pvc-name}}}}]\n"
        ),
    );
    c
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4478
#[test]
fn a_claim_whose_class_allows_several_zones_leaves_the_pod_flexible() {
    let c = pod_with_claim(&["test-zone-1", "test-zone-2"], "");
    assert_eq!(pending_by_zone(&c), want(&[("flexible", 1)]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4484
#[test]
fn a_claim_whose_class_allows_one_zone_confines_the_pod_to_it() {
    let c = pod_with_claim(&["test-zone-1"], "");
    assert_eq!(pending_by_zone(&c), want(&[("test-zone-1", 1)]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4490
#[test]
fn a_claim_in_another_zone_than_the_pods_selector_leaves_it_no_zone() {
    let c = pod_with_claim(&["test-zone-2"], &selector_zone("test-zone-1"));
    assert_eq!(pending_by_zone(&c), want(&[("none", 1)]));
    // The same pod without the claim's conflict is confined to its selector's zone.
    let c = pod_with_claim(&["test-zone-1"], &selector_zone("test-zone-1"));
    assert_eq!(pending_by_zone(&c), want(&[("test-zone-1", 1)]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4525
#[test]
fn pods_free_to_take_any_zone_are_flexible() {
    let mut c = cluster();
    c.pending_n(2, "p", "", "");
    assert_eq!(pending_by_zone(&c), want(&[("flexible", 2)]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4529
#[test]
fn pods_selecting_one_zone_count_in_it() {
    let mut c = cluster();
    c.pending_n(3, "p", "", &selector_zone("test-zone-2"));
    assert_eq!(pending_by_zone(&c), want(&[("test-zone-2", 3)]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4534
#[test]
fn pods_selecting_different_zones_count_in_each() {
    let mut c = cluster();
    c.pending("{name: a}", &selector_zone("test-zone-1"));
    c.pending("{name: b}", &selector_zone("test-zone-2"));
    assert_eq!(pending_by_zone(&c), want(&[("test-zone-1", 1), ("test-zone-2", 1)]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4545
#[test]
fn a_preferred_zone_does_not_confine_a_pod() {
    let mut c = cluster();
    c.pending(
        "{name: p}",
        "  affinity: {nodeAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, preference: {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [test-zone-1]}]}}]}}\n",
    );
    let d = c.decide();
    // The preference is honoured where it lands, but it is no constraint.
    assert_eq!(d.node_labels("p").get("topology.kubernetes.io/zone").map(String::as_str), Some("test-zone-1"));
    assert_eq!(d.plan.pending_pods_by_zone(), want(&[("flexible", 1)]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4554
#[test]
fn required_zonal_affinity_confines_a_pod_to_its_targets_zone() {
    let mut c = cluster();
    c.pending(&format!("{{name: target, labels: {{{LABELS}}}}}"), &selector_zone("test-zone-1"));
    provision_existing(&mut c);
    assert_eq!(bound_zone(&c, "target"), "test-zone-1");
    c.pending("{name: p}", &zone_term("podAffinity", LABELS));
    assert_eq!(pending_by_zone(&c), want(&[("test-zone-1", 1)]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4568
#[test]
fn required_zonal_anti_affinity_confines_a_pod_to_the_zone_left_free() {
    let mut c = cluster();
    for (name, zone) in [("a", "test-zone-1"), ("b", "test-zone-2")] {
        c.pending(&format!("{{name: {name}, labels: {{{LABELS}}}}}"), &selector_zone(zone));
    }
    provision_existing(&mut c);
    assert_eq!((bound_zone(&c, "a").as_str(), bound_zone(&c, "b").as_str()), ("test-zone-1", "test-zone-2"));
    c.pending("{name: p}", &zone_term("podAntiAffinity", LABELS));
    assert_eq!(pending_by_zone(&c), want(&[("test-zone-3", 1)]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4586
#[test]
fn a_zonal_spread_confines_a_pod_to_the_zones_within_its_skew() {
    let mut c = cluster();
    for (name, zone) in [("a", "test-zone-1"), ("b", "test-zone-2")] {
        c.pending(&format!("{{name: {name}, labels: {{{LABELS}}}}}"), &(selector_zone(zone) + &zone_spread("")));
    }
    provision_existing(&mut c);
    assert_eq!((bound_zone(&c, "a").as_str(), bound_zone(&c, "b").as_str()), ("test-zone-1", "test-zone-2"));
    c.pending(&format!("{{name: p, labels: {{{LABELS}}}}}"), &zone_spread(""));
    assert_eq!(pending_by_zone(&c), want(&[("test-zone-3", 1)]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4604
#[test]
fn a_zonal_spread_it_cannot_satisfy_leaves_a_pod_no_zone() {
    let mut c = cluster();
    for (i, zone) in ["test-zone-1", "test-zone-1", "test-zone-2", "test-zone-2", "test-zone-3", "test-zone-3"]
        .into_iter()
        .enumerate()
    {
        c.pending(&format!("{{name: e{i}, labels: {{{LABELS}}}}}"), &selector_zone(zone));
    }
    provision_existing(&mut c);
    // Four domains wanted, three exist: the global minimum counts as 0, and every zone
    // already holds 2 > max skew 1.
    c.pending("{name: p}", &zone_spread(", minDomains: 4"));
    assert_eq!(pending_by_zone(&c), want(&[("none", 1)]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4641
#[test]
fn required_affinity_to_pods_that_do_not_exist_leaves_a_pod_no_zone() {
    let mut c = cluster();
    c.pending("{name: p}", &zone_term("podAffinity", "nonexistent: label"));
    let d = c.decide();
    assert!(d.unschedulable("p").is_some(), "{}", d.plan.render(&d.snap));
    assert_eq!(d.plan.pending_pods_by_zone(), want(&[("none", 1)]));
}

/// karpenter:pkg/controllers/provisioning/scheduling/suite_test.go:4650
#[test]
fn required_anti_affinity_against_every_zone_leaves_a_pod_no_zone() {
    let mut c = cluster();
    for (name, zone) in [("a", "test-zone-1"), ("b", "test-zone-2"), ("c", "test-zone-3")] {
        c.pending(&format!("{{name: {name}, labels: {{{LABELS}}}}}"), &selector_zone(zone));
    }
    provision_existing(&mut c);
    c.pending("{name: p}", &zone_term("podAntiAffinity", LABELS));
    assert_eq!(pending_by_zone(&c), want(&[("none", 1)]));
}
