//! A NodeClaim's life up to Ready: Launched (CreateFleet through the cloud provider),
//! Registered (its Node joined: labels synced, `karpenter.sh/unregistered` removed, finalizer
//! added), Initialized (Node Ready, startup taints gone).

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
use tenon_core::resources::{Resources, format_amount};
use tenon_core::scorer::{Scorer, ScoringInput, normalise_ranking};

pub fn now_time() -> Time {
    Time(jiff_now())
}

fn jiff_now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

/// Karpenter's registration TTL: a launched NodeClaim whose Node has not joined by then is
/// deleted.
pub const REGISTRATION_TTL_SECS: i64 = 15 * 60;

/// Launched more than the registration TTL ago (by the Launched condition) and not
/// Registered.
pub fn registration_expired(nc: &NodeClaim, now: i64) -> bool {
    let launched = nc
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::LAUNCHED && c.status == "True"));
    launched.is_some_and(|c| now - c.last_transition_time.0.as_second() >= REGISTRATION_TTL_SECS)
        && !has_condition(nc, condition::REGISTERED)
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

/// The NodeClaim's conditions with `t` set.
pub fn with_condition(nc: &NodeClaim, t: &str, ok: bool, reason: &str, message: &str) -> Vec<Condition> {
    let mut conds = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    set_condition(&mut conds, t, ok, reason, message, nc.metadata.generation);
    conds
}

/// The offerings a NodeClaim may launch as, best first: its launch candidates
/// ([`tenon_core::launch::launch_candidates`]) ranked by the NodePool's scorer. The launch
/// does not know the NodeClaim's pods, so the scorer sees `pod_count` 0; scorers that weigh pods rank them when the plan is made.
pub fn launch_options(nc: &NodeClaim, types: &[InstanceType], scorer: &dyn Scorer, now: i64) -> Vec<LaunchOption> {
    let reqs = requirements_with_min_values(&nc.spec.requirements);
    let object = format!("NodeClaim {}", nc.metadata.name.as_deref().unwrap_or_default());
    let requests =
        tenon_core::convert::resources(Some(&nc.spec.resources.requests), &object, "spec.resources.requests")
            .unwrap_or_default();
    let candidates = tenon_core::launch::launch_candidates(&reqs, &requests, types);
    let pool = nc.metadata.labels.as_ref().and_then(|l| l.get(wk::LABEL_NODEPOOL)).cloned().unwrap_or_default();
    let n = candidates.len();
    let input = ScoringInput { nodepool: &pool, now, requests: &requests, pod_count: 0, candidates };
    let order = if n > 1 { normalise_ranking(&scorer.rank(&input), n) } else { (0..n).collect() };
    order
        .into_iter()
        .map(|i| {
            let c = &input.candidates[i];
            LaunchOption {
                instance_type: c.instance_type.name.clone(),
                zone: c.offering.zone.clone(),
                capacity_type: c.offering.capacity_type.clone(),
                price: c.offering.price,
                labels: c.instance_type.labels(),
            }
        })
        .collect()
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
    annotations.extend(nc.metadata.annotations.clone().unwrap_or_default());
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
    fn launch_options_are_the_allowed_offerings_cheapest_first() {
        let cat = aws(&AwsCatalogOptions::default()).unwrap();
        let opts = launch_options(&seed_nodeclaim(), &cat, &tenon_core::scorer::PriceScorer, 0);
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
    fn unregistered_nodeclaims_expire_after_fifteen_minutes() {
        let mut nc = seed_nodeclaim();
        let mut conds = vec![];
        set_condition(&mut conds, condition::LAUNCHED, true, "Launched", "", None);
        let launched_at = conds[0].last_transition_time.0.as_second();
        nc.status.get_or_insert_with(Default::default).conditions = conds.clone();
        assert!(!registration_expired(&nc, launched_at + REGISTRATION_TTL_SECS - 1));
        assert!(registration_expired(&nc, launched_at + REGISTRATION_TTL_SECS));
        set_condition(&mut conds, condition::REGISTERED, true, "Registered", "", None);
        nc.status.as_mut().unwrap().conditions = conds;
        assert!(!registration_expired(&nc, launched_at + 3600), "registered in time");
        assert!(!registration_expired(&seed_nodeclaim(), i64::MAX / 2), "never launched");
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
