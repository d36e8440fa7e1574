//! (Long: half of it is the unit tests of these rules, Karpenter's terminator cases among them.)
//! Termination in Karpenter's order, one step per pass.
//!
//! A NodeClaim being deleted first records when its pods must be gone (the
//! `karpenter.sh/nodeclaim-termination-timestamp` annotation: deletion plus
//! terminationGracePeriod), deletes its Node and waits until the Node is gone, then
//! terminates its instance (`InstanceTerminating`) and waits until the cloud says it is
//! gone, and only then releases its finalizer.
//!
//! A Node being deleted (by its NodeClaim, or by `kubectl delete node`) deletes its NodeClaim,
//! is tainted `karpenter.sh/disrupted:NoSchedule` and excluded from load balancers, drains in
//! the core's order (`Drained`; at least [`MIN_DRAIN_SECONDS`] after draining began), waits
//! for its volumes to detach until the deadline (`VolumesDetached`), has its instance
//! terminated, and is released. A NotReady Node whose instance is already gone is released
//! at once.

mod reconciler;
mod steps;
#[cfg(test)]
mod steps_tests;

pub use reconciler::Termination;
pub use steps::{Ctx, Instances, NodeProgress, Progress, finalize_node, finalize_nodeclaim};

use super::conditions;
use super::metrics::{Metrics, catalog as m};
use super::nodeclaim::lifecycle::rules as lifecycle;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::storage::v1::VolumeAttachment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, EvictParams};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::sync::Arc;
use tenon_api::NodeClaim;
use tenon_api::wellknown::{self as wk, condition};
use tenon_core::ClusterSnapshot;
use tenon_core::cached_pod::Pod;
use tenon_core::disruption::drain::is_drainable;

/// Karpenter's minimum drain time: a node drains at least this long, so what watches it (load
/// balancers, the scheduler) sees it go.
pub const MIN_DRAIN_SECONDS: i64 = 5;

/// The instance id in a providerID (`aws:///us-east-1a/i-0abc` → `i-0abc`).
pub fn instance_id(provider_id: &str) -> Option<&str> {
    provider_id.rsplit('/').next().filter(|s| s.starts_with("i-"))
}

/// The finalizers without ours, as a merge patch.
pub fn release_patch(meta: &ObjectMeta) -> Value {
    let rest: Vec<&String> = meta.finalizers.iter().flatten().filter(|f| *f != wk::FINALIZER_TERMINATION).collect();
    // The list is replaced whole: under optimistic locking, so a finalizer another
    // controller added meanwhile is not dropped (a conflict is retried next pass).
    json!({"metadata": {"finalizers": rest, "resourceVersion": meta.resource_version}})
}

fn has_finalizer(finalizers: Option<&Vec<String>>) -> bool {
    finalizers.is_some_and(|f| f.iter().any(|x| x == wk::FINALIZER_TERMINATION))
}

/// The node's taints as JSON (a merge patch replaces the whole list), without those keyed `key`.
pub fn taints_without(node: &Node, key: &str) -> Vec<Value> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.key != key)
        .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
        .collect()
}

/// The node's taints with `karpenter.sh/disrupted:NoSchedule` added, or `None` when present.
pub fn disrupted_taints(node: &Node) -> Option<Value> {
    let tainted = node.spec.as_ref().and_then(|s| s.taints.as_ref()).into_iter().flatten();
    if tainted.into_iter().any(|t| t.key == wk::TAINT_DISRUPTED && t.effect == "NoSchedule") {
        return None;
    }
    let mut list = taints_without(node, wk::TAINT_DISRUPTED);
    list.push(json!({"key": wk::TAINT_DISRUPTED, "effect": "NoSchedule"}));
    Some(json!({"spec": {"taints": list}}))
}

/// What a Node being terminated is patched with: the disruption taint (replacing one of
/// another effect) and the label that takes it out of load balancers; `None` when both are
/// there.
pub fn terminating_node_patch(node: &Node) -> Option<Value> {
    let labelled = node
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.get(wk::LABEL_EXCLUDE_FROM_LOAD_BALANCERS).is_some_and(|v| v == "karpenter"));
    let taints = disrupted_taints(node);
    if labelled && taints.is_none() {
        return None;
    }
    let mut patch = taints.unwrap_or_else(|| json!({}));
    patch["metadata"] = json!({"labels": {wk::LABEL_EXCLUDE_FROM_LOAD_BALANCERS: "karpenter"}});
    Some(patch)
}

/// The NodeClaim's recorded termination deadline, as written (RFC 3339).
fn recorded_deadline(nc: &NodeClaim) -> Option<&str> {
    nc.metadata.annotations.as_ref()?.get(wk::ANNOTATION_NODECLAIM_TERMINATION_TIME).map(String::as_str)
}

/// When the NodeClaim's pods must be gone (seconds since the epoch): its annotation, or, until
/// that is written, its deletion time plus its terminationGracePeriod.
pub fn deadline(nc: &NodeClaim) -> Option<i64> {
    if let Some(t) = recorded_deadline(nc).and_then(|v| v.parse::<k8s_openapi::jiff::Timestamp>().ok()) {
        return Some(t.as_second());
    }
    let deleted = nc.metadata.deletion_timestamp.as_ref()?.0.as_second();
    let tgp = nc.spec.termination_grace_period.as_deref().and_then(|g| tenon_api::duration::parse_duration(g).ok())?;
    Some(deleted + tgp.as_secs() as i64)
}

/// The annotation a NodeClaim being deleted still lacks (RFC 3339), if it has a
/// terminationGracePeriod. Never rewritten once there.
pub fn deadline_to_record(nc: &NodeClaim) -> Option<String> {
    if recorded_deadline(nc).is_some() || nc.metadata.deletion_timestamp.is_none() {
        return None;
    }
    k8s_openapi::jiff::Timestamp::from_second(deadline(nc)?).ok().map(|t| t.to_string())
}

/// The one NodeClaim whose providerID is the node's (several, or none: none).
pub fn claim_of_node<'a>(node: &Node, claims: &'a [Arc<NodeClaim>]) -> Option<&'a NodeClaim> {
    let id = node.spec.as_ref()?.provider_id.as_deref()?;
    let mut of = claims.iter().filter(|c| c.status.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(id));
    match (of.next(), of.next()) {
        (Some(c), None) => Some(&**c),
        _ => None,
    }
}

/// A Node Tenon terminates: it carries our finalizer and the EC2NodeClass label.
pub fn is_ours(node: &Node) -> bool {
    has_finalizer(node.metadata.finalizers.as_ref()) && lifecycle::is_managed_node(node)
}

pub fn node_ready(node: &Node) -> bool {
    let conds = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    conds.is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The VolumeAttachments the node's termination waits for: those on the node, except the
/// ones only pods the drain leaves alone (mirror pods, pods tolerating the disruption taint,
/// pods stuck terminating) use.
pub fn pending_volume_attachments(
    node: &str,
    vas: &[Arc<VolumeAttachment>],
    pods: &[Arc<Pod>],
    snap: &ClusterSnapshot,
    claims: &[Arc<k8s_openapi::api::core::v1::PersistentVolumeClaim>],
) -> Vec<String> {
    let mut kept: BTreeSet<String> = BTreeSet::new();
    for p in pods.iter().filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)) {
        let (ns, name) = (p.metadata.namespace.as_deref().unwrap_or("default"), p.metadata.name.as_deref());
        let drained = snap.pods.iter().find(|m| m.namespace == ns && Some(m.name.as_str()) == name);
        if drained.is_some_and(|m| is_drainable(m, snap.now)) {
            continue;
        }
        for v in p.spec.iter().flat_map(|s| s.volumes.iter().flatten()) {
            let Some(claim) = v.persistent_volume_claim.as_ref().map(|c| c.claim_name.as_str()) else { continue };
            let bound = claims
                .iter()
                .find(|c| c.metadata.namespace.as_deref() == Some(ns) && c.metadata.name.as_deref() == Some(claim));
            if let Some(pv) = bound.and_then(|c| c.spec.as_ref()?.volume_name.clone()) {
                kept.insert(pv);
            }
        }
    }
    vas.iter()
        .filter(|va| va.spec.node_name == node)
        .filter_map(|va| {
            let pv = va.spec.source.persistent_volume_name.as_ref()?;
            (!kept.contains(pv)).then(|| va.metadata.name.clone().unwrap_or_default())
        })
        .collect()
}

/// Karpenter's series for a Node whose finalizer went at `now` (seconds).
pub fn node_released_metrics(metrics: &Metrics, node: &Node, now: i64) {
    let label = |k: &str| node.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned().unwrap_or_default();
    let (pool, zone) = (label(wk::LABEL_NODEPOOL), label(wk::LABEL_ZONE));
    metrics.add(m::NODES_TERMINATED, &[("nodepool", &pool), ("zone", &zone)], 1);
    let since =
        |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| t.map(|t| (now - t.0.as_second()) as f64);
    let by_pool = [("nodepool", pool.as_str())];
    if let Some(s) = since(node.metadata.deletion_timestamp.as_ref()) {
        metrics.observe(m::NODES_TERMINATION, &by_pool, s);
    }
    if let Some(s) = since(node.metadata.creation_timestamp.as_ref()) {
        metrics.observe(m::NODES_LIFETIME, &by_pool, s);
    }
}

/// Karpenter's series for a NodeClaim whose finalizer went at `now` (seconds).
pub fn nodeclaim_released_metrics(metrics: &Metrics, nc: &NodeClaim, now: i64) {
    let label = |k: &str| nc.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned().unwrap_or_default();
    let pool = label(wk::LABEL_NODEPOOL);
    let (capacity_type, zone) = (label(wk::LABEL_CAPACITY_TYPE), label(wk::LABEL_ZONE));
    metrics.add(
        m::NODECLAIMS_TERMINATED,
        &[("nodepool", &pool), ("capacity_type", &capacity_type), ("zone", &zone)],
        1,
    );
    let by_pool = [("nodepool", pool.as_str())];
    // Karpenter times every launched NodeClaim's instance termination: one found already gone
    // on the first look took no time (it marks InstanceTerminating and observes at once).
    if nc.status.as_ref().and_then(|s| s.provider_id.as_deref()).is_some_and(|p| !p.is_empty()) {
        let since = conditions::condition_since(nc, condition::INSTANCE_TERMINATING).map_or(0, |t| (now - t).max(0));
        metrics.observe(m::NODECLAIMS_INSTANCE_TERMINATION, &by_pool, since as f64);
    }
    if let Some(t) = &nc.metadata.deletion_timestamp {
        metrics.observe(m::NODECLAIMS_TERMINATION, &by_pool, (now - t.0.as_second()) as f64);
    }
}

/// What an answer to an eviction means for the drain (Karpenter's terminator).
#[derive(Debug, PartialEq, Eq)]
pub enum Eviction {
    Evicted,
    /// 404: the pod is gone; 409: the name is another pod's now (the UID precondition).
    Gone,
    /// 429, or the API server's refusal of a pod under several PDBs: asked again next pass,
    /// the Node told why.
    Refused(&'static str),
    Failed,
}

/// The API server's message for an eviction of a pod several PDBs select.
const MULTIPLE_PDBS: &str =
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.";

pub fn eviction_outcome(answer: &Result<(), kube::Error>) -> Eviction {
    match answer {
        Ok(()) => Eviction::Evicted,
        Err(kube::Error::Api(s)) if matches!(s.code, 404 | 409) => Eviction::Gone,
        Err(kube::Error::Api(s)) if s.code == 429 => Eviction::Refused("evicting pod violates a PDB"),
        Err(kube::Error::Api(s)) if s.message == MULTIPLE_PDBS => {
            Eviction::Refused("eviction does not support multiple PDBs")
        }
        Err(_) => Eviction::Failed,
    }
}

/// The HTTP code of an answer, for `karpenter_pods_eviction_requests_total`.
fn answer_code(answer: &Result<(), kube::Error>) -> String {
    match answer {
        Ok(()) => "200".into(),
        Err(kube::Error::Api(s)) => s.code.to_string(),
        Err(_) => "0".into(),
    }
}

/// Why pods leave this node, for their Events and `karpenter_pods_drained_total`: the
/// NodeClaim's disruption reason, else a forceful termination; nothing without a NodeClaim.
pub fn drained_reason(nc: Option<&NodeClaim>) -> String {
    let Some(nc) = nc else { return String::new() };
    let conds = nc.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    match conds.iter().find(|c| c.type_ == condition::DISRUPTION_REASON && c.status == "True") {
        Some(c) => c.reason.clone(),
        None => "Forceful Termination".into(),
    }
}

/// The Event of a pod deleted to meet the node's termination time (seconds since the epoch).
pub fn disrupted_message(until: i64, grace: i64, pod_grace: i64) -> String {
    let at = k8s_openapi::jiff::Timestamp::from_second(until).map(|t| t.to_string()).unwrap_or_default();
    format!(
        "Deleting the pod to accommodate the terminationTime {at} of the node. The pod was granted {} seconds of grace-period of its {pod_grace} terminationGracePeriodSeconds. This bypasses the PDB of the pod and the do-not-disrupt annotation.",
        grace.max(1)
    )
}

/// An eviction of exactly this pod: a pod recreated under the same name is not evicted.
pub fn evict_params(pod: &tenon_core::model::Pod) -> EvictParams {
    EvictParams { delete_options: Some(delete_params_uid(pod, None)), ..EvictParams::default() }
}

/// A deletion of exactly this pod with `grace` seconds (Karpenter's forced drain).
pub fn delete_params(pod: &tenon_core::model::Pod, grace: i64) -> DeleteParams {
    delete_params_uid(pod, Some(grace))
}

fn delete_params_uid(pod: &tenon_core::model::Pod, grace: Option<i64>) -> DeleteParams {
    DeleteParams {
        grace_period_seconds: grace.map(|g| g.max(1) as u32),
        preconditions: Some(kube::api::Preconditions { uid: Some(pod.uid.clone()), resource_version: None }),
        ..DeleteParams::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenon_core::convert::shared;

    fn node(yaml: &str) -> Node {
        serde_yaml::from_str(yaml).unwrap()
    }

    fn claim(yaml: &str) -> NodeClaim {
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\n{yaml}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements: []\n"
        ))
        .unwrap()
    }

    #[test]
    fn provider_ids_and_finalizers() {
        assert_eq!(instance_id("aws:///us-east-1a/i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id("kind://docker/node"), None);
        let meta = ObjectMeta {
            finalizers: Some(vec!["a".to_string(), wk::FINALIZER_TERMINATION.to_string()]),
            resource_version: Some("7".into()),
            ..ObjectMeta::default()
        };
        assert_eq!(release_patch(&meta), json!({"metadata": {"finalizers": ["a"], "resourceVersion": "7"}}));
    }

    /// karpenter:pkg/controllers/node/termination/suite_test.go:202
    #[test]
    fn a_terminating_node_is_tainted_and_excluded_from_load_balancers() {
        let n = node(
            "metadata: {name: n}\nspec: {taints: [{key: x, effect: NoSchedule}, {key: karpenter.sh/disrupted, effect: NoExecute}]}",
        );
        let p = terminating_node_patch(&n).expect("a patch");
        assert_eq!(p["metadata"]["labels"][wk::LABEL_EXCLUDE_FROM_LOAD_BALANCERS], "karpenter");
        // The disruption taint of another effect is replaced, other taints kept.
        assert_eq!(
            p["spec"]["taints"],
            json!([{"key": "x", "effect": "NoSchedule"}, {"key": wk::TAINT_DISRUPTED, "effect": "NoSchedule"}])
        );
        let done = node(
            "metadata: {name: n, labels: {node.kubernetes.io/exclude-from-external-load-balancers: karpenter}}\nspec: {taints: [{key: karpenter.sh/disrupted, effect: NoSchedule}]}",
        );
        assert_eq!(terminating_node_patch(&done), None);
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:329
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:350
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:373
    #[test]
    fn the_termination_time_is_recorded_once_and_read_back() {
        let nc = claim("metadata: {name: c, deletionTimestamp: \"2026-12-01T00:00:00Z\"}");
        assert_eq!(deadline_to_record(&nc), None, "no terminationGracePeriod: no deadline");
        let mut nc = claim("metadata: {name: c, deletionTimestamp: \"2026-12-01T00:00:00Z\"}");
        nc.spec.termination_grace_period = Some("1h".into());
        assert_eq!(deadline_to_record(&nc).as_deref(), Some("2026-12-01T01:00:00Z"));
        // Once written it is the deadline, and never rewritten.
        nc.metadata.annotations =
            Some([(wk::ANNOTATION_NODECLAIM_TERMINATION_TIME.to_string(), "2026-12-01T00:30:00Z".to_string())].into());
        assert_eq!(deadline_to_record(&nc), None);
        let at: k8s_openapi::jiff::Timestamp = "2026-12-01T00:30:00Z".parse().unwrap();
        assert_eq!(deadline(&nc), Some(at.as_second()));
    }

    #[test]
    fn a_node_with_two_nodeclaims_has_none() {
        let n = node("metadata: {name: n}\nspec: {providerID: 'aws:///a/i-1'}");
        let one = claim("metadata: {name: one}\nstatus: {providerID: 'aws:///a/i-1'}");
        let other = claim("metadata: {name: other}\nstatus: {providerID: 'aws:///a/i-2'}");
        assert_eq!(claim_of_node(&n, &shared([one.clone()])).and_then(|c| c.metadata.name.as_deref()), Some("one"));
        let twin = claim("metadata: {name: twin}\nstatus: {providerID: 'aws:///a/i-1'}");
        assert!(claim_of_node(&n, &shared([one, twin])).is_none());
        assert!(claim_of_node(&n, &shared([other])).is_none());
    }

    /// karpenter:pkg/controllers/node/termination/suite_test.go:935
    #[test]
    fn only_volumes_of_pods_the_drain_waits_for_hold_the_node() {
        let pod = |name: &str, claim: &str, tolerant: bool| -> Pod {
            let tol = if tolerant { ", tolerations: [{key: karpenter.sh/disrupted, operator: Exists}]" } else { "" };
            serde_yaml::from_str(&format!(
                "metadata: {{name: {name}, namespace: default, uid: {name}}}\nspec: {{nodeName: n, containers: [{{name: c, image: i}}], volumes: [{{name: v, persistentVolumeClaim: {{claimName: {claim}}}}}]{tol}}}\nstatus: {{phase: Running}}"
            ))
            .unwrap()
        };
        let pods = vec![pod("app", "data-app", false), pod("agent", "data-agent", true)];
        let claims: Vec<k8s_openapi::api::core::v1::PersistentVolumeClaim> = ["app", "agent"]
            .iter()
            .map(|p| {
                serde_yaml::from_str(&format!(
                    "metadata: {{name: data-{p}, namespace: default}}\nspec: {{volumeName: pv-{p}}}"
                ))
                .unwrap()
            })
            .collect();
        let va = |name: &str, pv: &str, on: &str| -> VolumeAttachment {
            serde_yaml::from_str(&format!(
                "metadata: {{name: {name}}}\nspec: {{attacher: ebs.csi.aws.com, nodeName: {on}, source: {{persistentVolumeName: {pv}}}}}"
            ))
            .unwrap()
        };
        let vas = vec![va("va-app", "pv-app", "n"), va("va-agent", "pv-agent", "n"), va("va-elsewhere", "pv-x", "m")];
        let objects = tenon_core::convert::ClusterObjects {
            pods: tenon_core::convert::shared(pods.clone()),
            ..Default::default()
        };
        let (snap, _) = tenon_core::convert::snapshot(&objects, &|_| Default::default(), 0);
        let (vas, pods, claims) = (shared(vas), shared(pods), shared(claims));
        assert_eq!(pending_volume_attachments("n", &vas, &pods, &snap, &claims), ["va-app"]);
        assert!(pending_volume_attachments("m", &vas, &pods, &snap, &claims) == ["va-elsewhere"]);
    }

    #[test]
    fn only_nodes_with_our_finalizer_and_the_ec2nodeclass_label_are_ours() {
        assert!(is_ours(&node(
            "metadata: {name: n, labels: {karpenter.k8s.aws/ec2nodeclass: c}, finalizers: [karpenter.sh/termination]}"
        )));
        assert!(!is_ours(&node(
            "metadata: {name: n, labels: {karpenter.sh/nodepool: p}, finalizers: [karpenter.sh/termination]}"
        )));
        assert!(!is_ours(&node("metadata: {name: n, labels: {karpenter.k8s.aws/ec2nodeclass: c}}")));
    }

    fn answer(code: u16, message: &str) -> Result<(), kube::Error> {
        Err(kube::Error::Api(kube::core::Status::failure(message, "").with_code(code).boxed()))
    }

    /// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:104
    /// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:108
    /// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:131
    /// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:144
    #[test]
    fn eviction_answers_as_karpenters_terminator_reads_them() {
        assert_eq!(eviction_outcome(&Ok(())), Eviction::Evicted);
        assert_eq!(eviction_outcome(&answer(404, "not found")), Eviction::Gone, "the pod is gone");
        assert_eq!(eviction_outcome(&answer(409, "uid mismatch")), Eviction::Gone, "another pod has the name");
        assert_eq!(eviction_outcome(&answer(429, "budget")), Eviction::Refused("evicting pod violates a PDB"));
        assert_eq!(
            eviction_outcome(&answer(500, MULTIPLE_PDBS)),
            Eviction::Refused("eviction does not support multiple PDBs")
        );
        assert_eq!(eviction_outcome(&answer(500, "etcd down")), Eviction::Failed);
        assert_eq!(answer_code(&answer(429, "")), "429");
        assert_eq!(answer_code(&Ok(())), "200");
    }

    /// karpenter:pkg/controllers/node/termination/suite_test.go:696
    #[test]
    fn evictions_and_forced_deletions_name_the_pods_uid() {
        let pod: Pod = serde_yaml::from_str(
            "metadata: {name: web, namespace: default, uid: uid-1}\nspec: {containers: [{name: c, image: i}]}",
        )
        .unwrap();
        let pod = tenon_core::convert::pod(&pod).unwrap();
        let uid = |p: &DeleteParams| p.preconditions.as_ref().and_then(|p| p.uid.clone());
        assert_eq!(evict_params(&pod).delete_options.as_ref().and_then(uid), Some("uid-1".into()));
        let forced = delete_params(&pod, 0);
        assert_eq!(
            (uid(&forced), forced.grace_period_seconds),
            (Some("uid-1".into()), Some(1)),
            "never 0: at least 1 s"
        );
    }

    /// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:191
    #[test]
    fn pods_leave_for_their_nodeclaims_disruption_reason() {
        let mut nc = claim("metadata: {name: c}");
        assert_eq!(drained_reason(None), "");
        assert_eq!(drained_reason(Some(&nc)), "Forceful Termination");
        nc.status.get_or_insert_with(Default::default).conditions =
            conditions::with_condition(&nc, condition::DISRUPTION_REASON, true, "Drifted", "");
        assert_eq!(drained_reason(Some(&nc)), "Drifted");
    }

    /// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:284
    #[test]
    fn a_forced_deletion_says_what_grace_it_grants() {
        let m = disrupted_message(0, -3600, 120);
        assert!(m.contains("terminationTime 1970-01-01T00:00:00Z"), "{m}");
        assert!(m.contains("granted 1 seconds of grace-period of its 120 terminationGracePeriodSeconds"), "{m}");
    }
}
