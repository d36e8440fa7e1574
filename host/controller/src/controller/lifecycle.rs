//! What a NodeClaim's life up to Ready needs, as pure functions: its launch options and
//! request, the labels and status a launch writes, the registration patch (its Node joined:
//! labels synced, `karpenter.sh/unregistered` removed, finalizer added), Initialized (Node
//! Ready, startup taints gone), conditions, and its liveness inputs.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use tenon_api::common::Condition;
use tenon_api::wellknown::{self as wk, condition};
use tenon_api::{EC2NodeClass, NodeClaim};
use tenon_core::cloud::{Instance, LaunchOption, LaunchRequest};
use tenon_core::convert::requirements_with_min_values;
use tenon_core::instancetype::InstanceType;
use tenon_core::orchestration::{launch, liveness};
use tenon_core::resources::{Resources, format_amount};

pub fn now_time() -> Time {
    Time(jiff_now())
}

fn jiff_now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

/// Karpenter's liveness inputs for `nc` (times in ms since the epoch).
pub fn progress(nc: &NodeClaim) -> liveness::Progress {
    let ms = |t: &Time| t.0.as_millisecond();
    let launched = nc
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::LAUNCHED && c.status == "True"));
    liveness::Progress {
        created: nc.metadata.creation_timestamp.as_ref().map_or(0, ms),
        launched: launched.map(|c| ms(&c.last_transition_time)),
        registered: has_condition(nc, condition::REGISTERED),
    }
}

pub fn has_condition(nc: &NodeClaim, t: &str) -> bool {
    nc.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == t && c.status == "True"))
}

/// Sets condition `t` in `conds`, keeping its transition time when the status is unchanged.
pub fn set_condition(
    conds: &mut Vec<Condition>,
    t: &str,
    ok: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    let status = if ok { "True" } else { "False" };
    let fresh = Condition {
        type_: t.into(),
        status: status.into(),
        observed_generation: generation,
        last_transition_time: now_time(),
        reason: reason.into(),
        message: message.into(),
    };
    match conds.iter_mut().find(|c| c.type_ == t) {
        Some(c) if c.status == status => {
            c.reason = fresh.reason;
            c.message = fresh.message;
            c.observed_generation = generation;
        }
        Some(c) => *c = fresh,
        None => conds.push(fresh),
    }
}

/// `nc`'s conditions without those of type `t`.
pub fn without_condition(nc: &NodeClaim, t: &str) -> Vec<Condition> {
    let conds = nc.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    conds.iter().filter(|c| c.type_ != t).cloned().collect()
}

/// The NodeClaim's conditions with `t` Unknown for `reason` (Karpenter's way of saying a
/// step is still being tried).
pub fn with_unknown_condition(nc: &NodeClaim, t: &str, reason: &str, message: &str) -> Vec<Condition> {
    let mut conds = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    set_condition(&mut conds, t, false, reason, message, nc.metadata.generation);
    if let Some(c) = conds.iter_mut().find(|c| c.type_ == t) {
        c.status = "Unknown".into();
    }
    conds
}

/// The NodeClaim's conditions with `t` set.
pub fn with_condition(nc: &NodeClaim, t: &str, ok: bool, reason: &str, message: &str) -> Vec<Condition> {
    let mut conds = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    set_condition(&mut conds, t, ok, reason, message, nc.metadata.generation);
    conds
}

/// The CreateFleet overrides for `nc`, best first: the ranking the plan put on it (price
/// order for a NodeClaim without one) narrowed by `tenon_core::orchestration::launch`.
pub fn launch_options(nc: &NodeClaim, types: &[InstanceType]) -> Vec<LaunchOption> {
    let reqs = requirements_with_min_values(&nc.spec.requirements);
    let name = nc.metadata.name.as_deref().unwrap_or_default();
    let planned = nc.metadata.annotations.as_ref().and_then(|a| a.get(wk::ANNOTATION_LAUNCH_OFFERINGS));
    let ranking = match planned.map(|v| launch::decode(v)) {
        Some(Ok(r)) => r,
        other => {
            if let Some(Err(e)) = other {
                tracing::warn!(nodeclaim = %name, error = %e, "unreadable {}; launching in price order", wk::ANNOTATION_LAUNCH_OFFERINGS);
            }
            let object = format!("NodeClaim {name}");
            let requests =
                tenon_core::convert::resources(Some(&nc.spec.resources.requests), &object, "spec.resources.requests")
                    .unwrap_or_default();
            launch::price_ranking(&reqs, &requests, types)
        }
    };
    launch::fleet_request(&launch::options(&ranking, &reqs, types))
}

/// The NodeClaim's launch attempt (0 until a launch failed).
pub fn launch_attempt(nc: &NodeClaim) -> u32 {
    let a = nc.metadata.annotations.as_ref().and_then(|a| a.get(wk::ANNOTATION_LAUNCH_ATTEMPT));
    a.and_then(|v| v.parse().ok()).unwrap_or(0)
}

pub fn launch_request(nc: &NodeClaim, nodeclass: &EC2NodeClass, options: Vec<LaunchOption>) -> LaunchRequest {
    let labels = nc.metadata.labels.clone().unwrap_or_default();
    let taint = |t: &tenon_api::common::Taint| tenon_core::taints::Taint {
        key: t.key.clone(),
        value: t.value.clone().unwrap_or_default(),
        effect: tenon_core::taints::Effect::parse(&t.effect).unwrap_or(tenon_core::taints::Effect::NoSchedule),
    };
    LaunchRequest {
        nodeclaim: nc.metadata.name.clone().unwrap_or_default(),
        nodepool: labels.get(wk::LABEL_NODEPOOL).cloned().unwrap_or_default(),
        nodeclass: nodeclass.clone(),
        options,
        attempt: launch_attempt(nc),
        labels,
        taints: nc.spec.taints.iter().map(taint).collect(),
        startup_taints: nc.spec.startup_taints.iter().map(taint).collect(),
    }
}

fn quantities(r: &Resources) -> BTreeMap<String, Quantity> {
    r.entries().into_iter().filter(|(_, v)| *v > 0).map(|(k, v)| (k.clone(), Quantity(format_amount(&k, v)))).collect()
}

/// The labels a launched NodeClaim (and its Node) carry: the instance type's and the
/// offering's.
pub fn launched_labels(instance: &Instance, it: Option<&InstanceType>) -> BTreeMap<String, String> {
    let mut labels = it.map(|t| t.labels()).unwrap_or_default();
    labels.insert(wk::LABEL_INSTANCE_TYPE.into(), instance.instance_type.clone());
    labels.insert(wk::LABEL_ZONE.into(), instance.zone.clone());
    labels.insert(wk::LABEL_CAPACITY_TYPE.into(), instance.capacity_type.clone());
    labels
}

/// Status after launch: providerID, image, capacity and allocatable, `Launched`.
pub fn launched_status(nc: &NodeClaim, instance: &Instance, it: Option<&InstanceType>) -> Value {
    let conds = with_condition(nc, condition::LAUNCHED, true, "Launched", "");
    json!({
        "providerID": instance.provider_id,
        "imageID": instance.image_id,
        "capacity": it.map(|t| quantities(&t.capacity)).unwrap_or_default(),
        "allocatable": it.map(|t| quantities(t.allocatable())).unwrap_or_default(),
        "conditions": conds,
    })
}

/// The merge patch that registers `node` for `nc`: NodeClaim labels, annotations and taints
/// synced (taints not on a node labelled `karpenter.sh/do-not-sync-taints=true`),
/// `karpenter.sh/unregistered` removed, the termination finalizer added.
pub fn registration_patch(nc: &NodeClaim, node: &Node) -> Value {
    let mut labels = node.metadata.labels.clone().unwrap_or_default();
    let sync_taints = labels.get(wk::LABEL_DO_NOT_SYNC_TAINTS).is_none_or(|v| v != "true");
    labels.extend(nc.metadata.labels.clone().unwrap_or_default());
    let mut annotations = node.metadata.annotations.clone().unwrap_or_default();
    // The launch ranking is the NodeClaim's business, not the Node's.
    let synced = nc.metadata.annotations.iter().flatten().filter(|(k, _)| *k != wk::ANNOTATION_LAUNCH_OFFERINGS);
    annotations.extend(synced.map(|(k, v)| (k.clone(), v.clone())));
    let mut taints = super::termination::taints_without(node, wk::TAINT_UNREGISTERED);
    for t in nc.spec.taints.iter().chain(&nc.spec.startup_taints).filter(|_| sync_taints) {
        let v = json!({"key": t.key, "value": t.value, "effect": t.effect});
        if !taints.iter().any(|x| x["key"] == v["key"] && x["effect"] == v["effect"]) {
            taints.push(v);
        }
    }
    let mut finalizers = node.metadata.finalizers.clone().unwrap_or_default();
    if !finalizers.iter().any(|f| f == wk::FINALIZER_TERMINATION) {
        finalizers.push(wk::FINALIZER_TERMINATION.into());
    }
    json!({
        "metadata": {"labels": labels, "annotations": annotations, "finalizers": finalizers},
        "spec": {"taints": taints}
    })
}

/// Initialized: the Node is Ready and none of the NodeClaim's startup taints remain.
pub fn initialized(nc: &NodeClaim, node: &Node) -> bool {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    let startup_left =
        nc.spec.startup_taints.iter().any(|st| taints.iter().any(|t| t.key == st.key && t.effect == st.effect));
    let unregistered = taints.iter().any(|t| t.key == wk::TAINT_UNREGISTERED);
    ready && !startup_left && !unregistered
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenon_core::catalog::{AwsCatalogOptions, aws};

    fn seed_nodeclaim() -> NodeClaim {
        serde_yaml::from_str(
            r#"
apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata:
  name: lab-general-abcde
  labels: {karpenter.sh/nodepool: lab-general, capacity.example.io/pool: lab-general}
spec:
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: lab-general}
  requirements:
    - {key: kubernetes.io/arch, operator: In, values: [amd64]}
    - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
    - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
    - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ["4"]}
    - {key: karpenter.sh/nodepool, operator: In, values: [lab-general]}
  resources:
    requests: {cpu: 8150m, memory: 2Gi, pods: "9"}
  startupTaints:
    - {key: node.cilium.io/agent-not-ready, value: "true", effect: NoExecute}
"#,
        )
        .unwrap()
    }

    #[test]
    fn without_a_ranking_launch_options_are_the_allowed_offerings_cheapest_first() {
        let cat = aws(&AwsCatalogOptions::default()).unwrap();
        let opts = launch_options(&seed_nodeclaim(), &cat);
        assert!(!opts.is_empty());
        for o in &opts {
            let l = &o.labels;
            assert_eq!(l[wk::LABEL_ARCH], "amd64", "{o:?}");
            assert!(["c", "m", "r"].contains(&l[wk::LABEL_INSTANCE_CATEGORY].as_str()), "{o:?}");
            assert!(l[wk::LABEL_INSTANCE_GENERATION].parse::<i64>().unwrap() > 4, "{o:?}");
            assert_eq!(o.capacity_type, "on-demand");
            let it = cat.iter().find(|t| t.name == o.instance_type).unwrap();
            assert!(it.allocatable().cpu >= 8150, "{} cannot hold 8150m", it.name);
        }
        assert!(opts.windows(2).all(|w| w[0].price <= w[1].price), "cheapest first");
        let types: std::collections::BTreeSet<&str> = opts.iter().map(|o| o.instance_type.as_str()).collect();
        assert!(types.len() <= launch::MAX_FLEET_TYPES);
    }

    #[test]
    fn a_planned_ranking_is_launched_in_its_order_even_against_price() {
        let cat = aws(&AwsCatalogOptions::default()).unwrap();
        let mut nc = seed_nodeclaim();
        let off = |t: &str, z: &str| launch::RankedOffering {
            instance_type: t.into(),
            zone: z.into(),
            capacity_type: "on-demand".into(),
        };
        // r6i.4xlarge before the cheaper c6i.4xlarge: the scorer's word, not price.
        let ranking = [off("r6i.4xlarge", "us-east-1b"), off("c6i.4xlarge", "us-east-1a")];
        nc.metadata.annotations =
            Some([(wk::ANNOTATION_LAUNCH_OFFERINGS.to_string(), launch::encode(&ranking))].into());
        let opts = launch_options(&nc, &cat);
        let got: Vec<(&str, &str)> = opts.iter().map(|o| (o.instance_type.as_str(), o.zone.as_str())).collect();
        assert_eq!(got, [("r6i.4xlarge", "us-east-1b"), ("c6i.4xlarge", "us-east-1a")]);
        // An unreadable ranking falls back to price order rather than launching nothing.
        nc.metadata.annotations = Some([(wk::ANNOTATION_LAUNCH_OFFERINGS.to_string(), "v9;x".to_string())].into());
        assert!(launch_options(&nc, &cat).len() > 2);
    }

    #[test]
    fn registration_syncs_labels_removes_unregistered_and_adds_the_finalizer() {
        let nc = seed_nodeclaim();
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "ip-10-0-1-5.ec2.internal", "labels": {"kubernetes.io/hostname": "ip-10-0-1-5"}},
            "spec": {"providerID": "aws:///us-east-1a/i-1", "taints": [
                {"key": "karpenter.sh/unregistered", "effect": "NoExecute"},
                {"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}
            ]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}
        }))
        .unwrap();
        let p = registration_patch(&nc, &node);
        assert_eq!(p["metadata"]["labels"]["karpenter.sh/nodepool"], "lab-general");
        assert_eq!(p["metadata"]["labels"]["kubernetes.io/hostname"], "ip-10-0-1-5");
        assert_eq!(p["metadata"]["finalizers"], json!(["karpenter.sh/termination"]));
        let keys: Vec<&str> =
            p["spec"]["taints"].as_array().unwrap().iter().filter_map(|t| t["key"].as_str()).collect();
        assert_eq!(keys, ["node.cilium.io/agent-not-ready"], "unregistered removed, the startup taint kept");
        assert!(!initialized(&nc, &node), "still tainted");
        let mut ready = node.clone();
        ready.spec.as_mut().unwrap().taints = Some(vec![]);
        assert!(initialized(&nc, &ready));
        let mut not_ready = ready.clone();
        not_ready.status.as_mut().unwrap().conditions.as_mut().unwrap()[0].status = "False".into();
        assert!(!initialized(&nc, &not_ready));
    }

    /// karpenter:pkg/controllers/provisioning/suite_test.go:1528
    #[test]
    fn registration_syncs_the_nodeclaims_annotations() {
        let mut nc = seed_nodeclaim();
        nc.metadata.annotations = Some([("karpenter.sh/do-not-disrupt".to_string(), "true".to_string())].into());
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]}
        }))
        .unwrap();
        let p = registration_patch(&nc, &node);
        assert_eq!(p["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"], "true");
        assert_eq!(p["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"], "0", "the kubelet's stay");
    }

    /// A node labelled `karpenter.sh/do-not-sync-taints=true` keeps its own taints: whatever
    /// provisions it manages them (only `karpenter.sh/unregistered` is still removed).
    #[test]
    fn registration_leaves_the_taints_of_a_do_not_sync_taints_node() {
        let mut nc = seed_nodeclaim();
        nc.spec.taints =
            vec![serde_json::from_value(json!({"key": "dedicated", "value": "x", "effect": "NoSchedule"})).unwrap()];
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "labels": {"karpenter.sh/do-not-sync-taints": "true"}},
            "spec": {"taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}, {"key": "own", "effect": "NoSchedule"}]}
        }))
        .unwrap();
        let p = registration_patch(&nc, &node);
        let keys: Vec<&str> =
            p["spec"]["taints"].as_array().unwrap().iter().filter_map(|t| t["key"].as_str()).collect();
        assert_eq!(keys, ["own"]);
    }

    #[test]
    fn liveness_counts_from_creation_and_from_launch() {
        let mut nc = seed_nodeclaim();
        nc.metadata.creation_timestamp = Some(Time("2026-12-01T00:00:00Z".parse().unwrap()));
        let p = progress(&nc);
        assert_eq!((p.launched, p.registered), (None, false));
        assert_eq!(liveness::due(p), Some(p.created + liveness::LAUNCH_TIMEOUT_MS));
        nc.status.get_or_insert_with(Default::default).conditions =
            with_condition(&nc, condition::LAUNCHED, true, "Launched", "");
        let p = progress(&nc);
        assert!(p.launched.is_some_and(|t| t > p.created));
        nc.status.as_mut().unwrap().conditions = with_condition(&nc, condition::REGISTERED, true, "Registered", "");
        assert!(progress(&nc).registered);
    }

    #[test]
    fn a_launch_failure_leaves_launched_unknown() {
        let conds = with_unknown_condition(&seed_nodeclaim(), condition::LAUNCHED, "LaunchFailed", "no subnet");
        assert_eq!((conds[0].status.as_str(), conds[0].reason.as_str()), ("Unknown", "LaunchFailed"));
    }

    #[test]
    fn conditions_keep_their_transition_time_when_unchanged() {
        let nc = seed_nodeclaim();
        let first = with_condition(&nc, condition::LAUNCHED, true, "Launched", "");
        let mut nc2 = nc.clone();
        nc2.status.get_or_insert_with(Default::default).conditions = first.clone();
        let again = with_condition(&nc2, condition::LAUNCHED, true, "Launched", "");
        assert_eq!(again[0].last_transition_time, first[0].last_transition_time);
        assert_eq!(with_condition(&nc2, condition::REGISTERED, true, "Registered", "").len(), 2);
    }
}
