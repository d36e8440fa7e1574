//! (Long: three fifths of it is the unit tests, Karpenter's lifecycle cases among them.)
//! What a NodeClaim's life up to Ready needs, as pure functions: its launch options and
//! request, the labels and status a launch writes, the registration patch (its Node joined:
//! labels synced, `karpenter.sh/unregistered` removed, finalizer added), Initialized (Node
//! Ready, startup taints gone), conditions, and its liveness inputs.

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use tenon_api::common::Condition;
use tenon_api::wellknown::{self as wk, condition};
use tenon_api::{EC2NodeClass, NodeClaim};
use tenon_core::cloud::{Instance, LaunchOption, LaunchRequest, launch_tenancy};
use tenon_core::convert::requirements_with_min_values;
use tenon_core::instancetype::InstanceType;
use tenon_core::orchestration::{launch, liveness};
use tenon_core::resources::{Resources, format_amount};

/// Karpenter's liveness inputs for `nc` (times in ms since the epoch).
pub fn progress(nc: &NodeClaim) -> liveness::Progress {
    let created = nc.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_millisecond());
    let find = |t: &str| nc.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == t));
    let (launched, registered) = (find(condition::LAUNCHED), find(condition::REGISTERED));
    let since = |c: Option<&Condition>| c.map_or(created, |c| c.last_transition_time.0.as_millisecond());
    liveness::Progress {
        launched: launched.is_some_and(|c| c.status == "True"),
        launched_since: since(launched),
        registered: registered.is_some_and(|c| c.status == "True"),
        registered_since: since(registered),
    }
}

pub use tenon_core::nodeclaim::is_managed;

/// Whether this controller manages `node`: it carries the EC2NodeClass label its NodeClaim
/// gave it.
pub fn is_managed_node(node: &Node) -> bool {
    node.metadata.labels.as_ref().is_some_and(|l| l.contains_key(wk::LABEL_NODECLASS))
}

/// The NodeClass label (`<group>/<kind in lower case>: <name>`) a NodeClaim carries and
/// passes to its Node.
pub fn nodeclass_label(nc: &NodeClaim) -> Option<(String, String)> {
    let r = nc.spec.node_class_ref.as_ref()?;
    Some((format!("{}/{}", r.group, r.kind.to_lowercase()), r.name.clone()))
}

/// [`nodeclass_label`] when `labels` lack it (Karpenter's hydration adds it to NodeClaims
/// and Nodes created before it existed).
pub fn missing_nodeclass_label(nc: &NodeClaim, labels: Option<&BTreeMap<String, String>>) -> Option<(String, String)> {
    let (key, value) = nodeclass_label(nc)?;
    (labels.and_then(|l| l.get(&key)) != Some(&value)).then_some((key, value))
}

/// Whether `np` (by UID, not just by name) owns `nc`.
pub fn owned_by(nc: &NodeClaim, np: &tenon_api::NodePool) -> bool {
    let uid = np.metadata.uid.as_deref();
    uid.is_some()
        && nc.metadata.owner_references.iter().flatten().any(|o| o.kind == "NodePool" && Some(o.uid.as_str()) == uid)
}

/// Whether `nc` still needs Karpenter's termination finalizer before anything is launched
/// for it (without it, deleting the NodeClaim could leak the instance).
pub fn needs_finalizer(nc: &NodeClaim) -> bool {
    is_managed(nc)
        && nc.metadata.deletion_timestamp.is_none()
        && !nc.metadata.finalizers.iter().flatten().any(|f| f == wk::FINALIZER_TERMINATION)
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

/// `never_launched`: this process created `nc` and sent no launch for it yet; `ranked`: its
/// NodePool's scoring policy ranked `options`.
pub fn launch_request(
    nc: &NodeClaim,
    nodeclass: &EC2NodeClass,
    options: Vec<LaunchOption>,
    never_launched: bool,
    ranked: bool,
) -> LaunchRequest {
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
        never_launched,
        ranked,
        labels,
        taints: nc.spec.taints.iter().map(taint).collect(),
        startup_taints: nc.spec.startup_taints.iter().map(taint).collect(),
        tenancy: launch_tenancy(&requirements_with_min_values(&nc.spec.requirements)).to_string(),
        min_values_relaxed: nc
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(wk::ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED))
            .is_some_and(|v| v == "true"),
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
    labels.insert(wk::LABEL_INSTANCE_TENANCY.into(), instance.tenancy.clone());
    let zone_id = it.and_then(|t| t.offerings.iter().find(|o| o.zone == instance.zone)).and_then(|o| o.zone_id.clone());
    match zone_id {
        Some(id) => labels.insert(wk::LABEL_ZONE_ID.into(), id),
        // The type's label holds only when it is offered in one zone: the instance's wins.
        None => labels.remove(wk::LABEL_ZONE_ID),
    };
    labels
}

/// Status after launch: providerID, image, capacity and allocatable, `Launched`.
pub fn launched_status(nc: &NodeClaim, instance: &Instance, it: Option<&InstanceType>) -> Value {
    let conds = crate::controller::conditions::with_condition(nc, condition::LAUNCHED, true, "Launched", "");
    json!({
        "providerID": instance.provider_id,
        "imageID": instance.image_id,
        "capacity": it.map(|t| quantities(&t.capacity)).unwrap_or_default(),
        "allocatable": it.map(|t| quantities(t.allocatable())).unwrap_or_default(),
        "conditions": conds,
    })
}

/// Startup taints (key, effect) a registering Node was seen carrying.
pub type SeenStartupTaints = BTreeSet<(String, String)>;

/// `nc`'s startup taints that `node` carries.
pub fn startup_taints_on(nc: &NodeClaim, node: &Node) -> SeenStartupTaints {
    let on = node.spec.as_ref().and_then(|s| s.taints.as_ref());
    nc.spec
        .startup_taints
        .iter()
        .filter(|t| on.is_some_and(|on| on.iter().any(|x| x.key == t.key && x.effect == t.effect)))
        .map(|t| (t.key.clone(), t.effect.clone()))
        .collect()
}

/// The merge patch that registers `node` for `nc`: NodeClaim labels, annotations and taints
/// synced (taints not on a node labelled `karpenter.sh/do-not-sync-taints=true`),
/// `karpenter.sh/unregistered` removed, the termination finalizer added. A startup taint in
/// `seen` is not added again: the Node had it, so whoever owns it removed it (a retry after
/// a conflict must not undo their write).
pub fn registration_patch(nc: &NodeClaim, node: &Node, seen: &SeenStartupTaints) -> Value {
    let mut labels = node.metadata.labels.clone().unwrap_or_default();
    let sync_taints = labels.get(wk::LABEL_DO_NOT_SYNC_TAINTS).is_none_or(|v| v != "true");
    labels.extend(nc.metadata.labels.clone().unwrap_or_default());
    let mut annotations = node.metadata.annotations.clone().unwrap_or_default();
    // The launch ranking is the NodeClaim's business, not the Node's.
    let synced = nc.metadata.annotations.iter().flatten().filter(|(k, _)| *k != wk::ANNOTATION_LAUNCH_OFFERINGS);
    annotations.extend(synced.map(|(k, v)| (k.clone(), v.clone())));
    let mut taints = crate::controller::termination::taints_without(node, wk::TAINT_UNREGISTERED);
    let startup = nc.spec.startup_taints.iter().filter(|t| !seen.contains(&(t.key.clone(), t.effect.clone())));
    for t in nc.spec.taints.iter().chain(startup).filter(|_| sync_taints) {
        let v = json!({"key": t.key, "value": t.value, "effect": t.effect});
        if !taints.iter().any(|x| x["key"] == v["key"] && x["effect"] == v["effect"]) {
            taints.push(v);
        }
    }
    let mut finalizers = node.metadata.finalizers.clone().unwrap_or_default();
    if !finalizers.iter().any(|f| f == wk::FINALIZER_TERMINATION) {
        finalizers.push(wk::FINALIZER_TERMINATION.into());
    }
    labels.insert(wk::LABEL_REGISTERED.into(), "true".into());
    // Owned by its NodeClaim, so the Node goes with it.
    let mut owners: Vec<Value> = node.metadata.owner_references.iter().flatten().map(|o| json!(o)).collect();
    let uid = nc.metadata.uid.clone().unwrap_or_default();
    if !owners.iter().any(|o| o["kind"] == "NodeClaim" && o["uid"] == uid.as_str()) {
        owners.push(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "name": nc.metadata.name, "uid": uid, "blockOwnerDeletion": true,
        }));
    }
    json!({
        "metadata": {"labels": labels, "annotations": annotations, "finalizers": finalizers, "ownerReferences": owners},
        "spec": {"taints": taints}
    })
}

/// The next step of a NodeClaim not being deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Launch,
    Register,
    Initialize,
    /// Initialized: nothing is synced onto its Node again (startup taints stay removed).
    Done,
}

pub fn next_step(nc: &NodeClaim) -> Step {
    use crate::controller::conditions::has_condition;
    if !has_condition(nc, condition::LAUNCHED) {
        Step::Launch
    } else if !has_condition(nc, condition::REGISTERED) {
        Step::Register
    } else if !has_condition(nc, condition::INITIALIZED) {
        Step::Initialize
    } else {
        Step::Done
    }
}

/// `Registered` while `nc` does not have exactly one Node (`nodes` of them): Unknown while
/// none has joined, False when several claim its providerID (an invariant broken).
pub fn unregistered_conditions(nc: &NodeClaim, nodes: usize) -> Vec<Condition> {
    if nodes == 0 {
        crate::controller::conditions::with_unknown_condition(
            nc,
            condition::REGISTERED,
            "NodeNotFound",
            "Node not registered with cluster",
        )
    } else {
        crate::controller::conditions::with_condition(
            nc,
            condition::REGISTERED,
            false,
            "MultipleNodesFound",
            "Invariant violated, matched multiple nodes",
        )
    }
}

/// The status of `nc` registered as Node `node`.
pub fn registered_status(nc: &NodeClaim, node: &str) -> Value {
    let conds = crate::controller::conditions::with_condition(nc, condition::REGISTERED, true, "Registered", "");
    json!({"status": {"nodeName": node, "conditions": conds}})
}

/// The label an initialized NodeClaim's Node carries.
pub fn initialized_label_patch() -> Value {
    json!({"metadata": {"labels": {wk::LABEL_INITIALIZED: "true"}}})
}

/// `nc`'s conditions once its Node is initialized: Initialized, then Ready.
pub fn initialized_conditions(nc: &NodeClaim) -> Vec<Condition> {
    let mut probe = nc.clone();
    probe.status.get_or_insert_with(Default::default).conditions =
        crate::controller::conditions::with_condition(&probe, condition::INITIALIZED, true, "Initialized", "");
    crate::controller::conditions::with_condition(&probe, condition::READY, true, "Ready", "")
}

/// Why `nc` is given up, for its NodePool's `NodeRegistrationHealthy`: a NodeClaim that never
/// launched says why it did not; one that did, that it did not register.
pub fn registration_failure(nc: &NodeClaim) -> (String, String) {
    let launched = nc.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::LAUNCHED));
    match launched {
        Some(c) if c.status != "True" => (c.reason.clone(), c.message.clone()),
        _ => ("RegistrationFailed".into(), "Failed to register node".into()),
    }
}

/// A Node that was neither registered nor joined with `karpenter.sh/unregistered`: its
/// taints were not synced before pods could land (Karpenter warns).
pub fn unregistered_taint_missing(node: &Node) -> bool {
    let labelled = node.metadata.labels.as_ref().is_some_and(|l| l.contains_key(wk::LABEL_REGISTERED));
    let tainted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .any(|t| t.key == wk::TAINT_UNREGISTERED && t.effect == "NoExecute");
    !labelled && !tainted
}

/// Taints a node carries only until its agents are up (Karpenter's known ephemeral taints).
fn is_known_ephemeral(t: &k8s_openapi::api::core::v1::Taint) -> bool {
    let fixed = [
        ("node.kubernetes.io/not-ready", "NoSchedule"),
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoSchedule"),
        ("node.cloudprovider.kubernetes.io/uninitialized", "NoSchedule"),
        (wk::TAINT_UNREGISTERED, "NoExecute"),
    ];
    fixed.iter().any(|(k, e)| t.key == *k && t.effect == *e) || t.key.starts_with("readiness.k8s.io/")
}

/// Karpenter's initialization: the Node Ready, no startup taint and no known ephemeral taint
/// left, and every resource the NodeClaim requested registered (a GPU's device plugin up).
/// Otherwise the reason and message `Initialized` stays Unknown with.
pub fn initialization(nc: &NodeClaim, node: &Node) -> Result<(), (&'static str, String)> {
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    if !ready {
        return Err(("NodeNotReady", "Node status is NotReady".into()));
    }
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    let shown = |t: &k8s_openapi::api::core::v1::Taint| format!("{}:{}", t.key, t.effect);
    for st in &nc.spec.startup_taints {
        if let Some(t) = taints.iter().find(|t| t.key == st.key && t.effect == st.effect) {
            return Err(("StartupTaintsExist", format!("StartupTaint {:?} still exists", shown(t))));
        }
    }
    if let Some(t) = taints.iter().find(|t| is_known_ephemeral(t)) {
        return Err(("KnownEphemeralTaintsExist", format!("KnownEphemeralTaint {:?} still exists", shown(t))));
    }
    let allocatable = node.status.as_ref().and_then(|s| s.allocatable.clone()).unwrap_or_default();
    for (name, q) in &nc.spec.resources.requests {
        let zero = |q: &Quantity| tenon_api::quantity::parse_milli(&q.0).is_ok_and(|v| v == 0);
        if !zero(q) && allocatable.get(name).is_none_or(zero) {
            return Err(("ResourceNotRegistered", format!("Resource {name:?} was requested but not registered")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::conditions;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
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
        let p = registration_patch(&nc, &node, &SeenStartupTaints::new());
        assert_eq!(p["metadata"]["labels"]["karpenter.sh/nodepool"], "lab-general");
        assert_eq!(p["metadata"]["labels"]["kubernetes.io/hostname"], "ip-10-0-1-5");
        assert_eq!(p["metadata"]["finalizers"], json!(["karpenter.sh/termination"]));
        let keys: Vec<&str> =
            p["spec"]["taints"].as_array().unwrap().iter().filter_map(|t| t["key"].as_str()).collect();
        assert_eq!(keys, ["node.cilium.io/agent-not-ready"], "unregistered removed, the startup taint kept");
    }

    fn node_with(taints: serde_json::Value, ready: &str, allocatable: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n", "labels": {"karpenter.sh/registered": "true"}},
            "spec": {"providerID": "aws:///us-east-1a/i-1", "taints": taints},
            "status": {"conditions": [{"type": "Ready", "status": ready}], "allocatable": allocatable}
        }))
        .unwrap()
    }

    fn cpu_memory() -> serde_json::Value {
        json!({"cpu": "16", "memory": "32Gi", "pods": "58"})
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:142
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:161
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:197
    #[test]
    fn registration_labels_the_node_registered_and_owned_by_its_nodeclaim() {
        let mut nc = seed_nodeclaim();
        nc.metadata.uid = Some("nc-uid".into());
        let node = node_with(json!([{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]), "False", json!({}));
        let p = registration_patch(&nc, &node, &SeenStartupTaints::new());
        assert_eq!(p["metadata"]["labels"]["karpenter.sh/registered"], "true");
        let taints = p["spec"]["taints"].as_array().unwrap();
        assert!(!taints.iter().any(|t| t["key"] == "karpenter.sh/unregistered"), "{taints:?}");
        let owners = p["metadata"]["ownerReferences"].as_array().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(
            (owners[0]["kind"].as_str(), owners[0]["uid"].as_str(), owners[0]["blockOwnerDeletion"].as_bool()),
            (Some("NodeClaim"), Some("nc-uid"), Some(true))
        );
        // Registering again adds no second reference.
        let mut again = node.clone();
        again.metadata.owner_references =
            Some(serde_json::from_value(p["metadata"]["ownerReferences"].clone()).unwrap());
        assert_eq!(
            registration_patch(&nc, &again, &SeenStartupTaints::new())["metadata"]["ownerReferences"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:216
    #[test]
    fn a_node_that_joined_without_the_unregistered_taint_is_reported() {
        let joined = node_with(json!([]), "True", json!({}));
        let mut fresh = joined.clone();
        fresh.metadata.labels = None;
        assert!(unregistered_taint_missing(&fresh), "neither registered nor tainted");
        assert!(!unregistered_taint_missing(&joined), "registered already");
        let tainted =
            node_with(json!([{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]), "True", json!({}));
        let mut tainted_fresh = tainted.clone();
        tainted_fresh.metadata.labels = None;
        assert!(!unregistered_taint_missing(&tainted_fresh));
        // Registration goes ahead all the same.
        assert_eq!(
            registration_patch(&seed_nodeclaim(), &fresh, &SeenStartupTaints::new())["metadata"]["labels"]["karpenter.sh/registered"],
            "true"
        );
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:112
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:209
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:368
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:441
    #[test]
    fn a_node_is_initialized_once_ready_without_startup_taints() {
        let nc = seed_nodeclaim();
        let startup = json!([{"key": "node.cilium.io/agent-not-ready", "value": "true", "effect": "NoExecute"}]);
        let why = |n: &Node| initialization(&nc, n).err().map(|e| e.0);
        assert_eq!(why(&node_with(json!([]), "False", cpu_memory())), Some("NodeNotReady"));
        assert_eq!(why(&node_with(startup, "True", cpu_memory())), Some("StartupTaintsExist"));
        assert_eq!(why(&node_with(json!([]), "True", cpu_memory())), None);
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:508
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:578
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:658
    #[test]
    fn known_ephemeral_taints_hold_initialization_until_removed() {
        let nc = seed_nodeclaim();
        for taint in [
            json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}),
            json!({"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}),
            json!({"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"}),
            json!({"key": "readiness.k8s.io/some-rule", "effect": "NoSchedule"}),
        ] {
            let n = node_with(json!([taint.clone()]), "True", cpu_memory());
            assert_eq!(initialization(&nc, &n).err().map(|e| e.0), Some("KnownEphemeralTaintsExist"), "{taint}");
        }
        assert!(initialization(&nc, &node_with(json!([]), "True", cpu_memory())).is_ok());
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:253
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:304
    #[test]
    fn requested_extended_resources_must_be_registered() {
        let mut nc = seed_nodeclaim();
        nc.spec.resources.requests.insert("nvidia.com/gpu".into(), Quantity("1".into()));
        let without = node_with(json!([]), "True", cpu_memory());
        let e = initialization(&nc, &without).unwrap_err();
        assert_eq!(e.0, "ResourceNotRegistered");
        assert!(e.1.contains("nvidia.com/gpu"), "{}", e.1);
        let zeroed =
            node_with(json!([]), "True", json!({"cpu": "16", "memory": "32Gi", "pods": "58", "nvidia.com/gpu": "0"}));
        assert!(initialization(&nc, &zeroed).is_err(), "zeroed by the kubelet until the device plugin registers");
        let with =
            node_with(json!([]), "True", json!({"cpu": "16", "memory": "32Gi", "pods": "58", "nvidia.com/gpu": "2"}));
        assert!(initialization(&nc, &with).is_ok());
    }

    /// karpenter:pkg/controllers/provisioning/suite_test.go:1528
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:271
    #[test]
    fn registration_syncs_the_nodeclaims_annotations() {
        let mut nc = seed_nodeclaim();
        nc.metadata.annotations = Some([("karpenter.sh/do-not-disrupt".to_string(), "true".to_string())].into());
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": "n", "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {"taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]}
        }))
        .unwrap();
        let p = registration_patch(&nc, &node, &SeenStartupTaints::new());
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
        let p = registration_patch(&nc, &node, &SeenStartupTaints::new());
        let keys: Vec<&str> =
            p["spec"]["taints"].as_array().unwrap().iter().filter_map(|t| t["key"].as_str()).collect();
        assert_eq!(keys, ["own"]);
    }

    #[test]
    fn liveness_clocks_run_from_creation_then_from_the_conditions() {
        let mut nc = seed_nodeclaim();
        nc.metadata.creation_timestamp = Some(Time("2026-12-01T00:00:00Z".parse().unwrap()));
        let created = nc.metadata.creation_timestamp.as_ref().unwrap().0.as_millisecond();
        let p = progress(&nc);
        assert_eq!((p.launched, p.registered, p.launched_since), (false, false, created));
        assert_eq!(liveness::due(p), Some(created + liveness::LAUNCH_TIMEOUT_MS));
        nc.status.get_or_insert_with(Default::default).conditions =
            conditions::with_lifecycle_conditions(&nc).expect("all four added");
        let p = progress(&nc);
        assert!(!p.launched && p.launched_since > created, "the Launched condition's clock");
        nc.status.as_mut().unwrap().conditions =
            conditions::with_condition(&nc, condition::LAUNCHED, true, "Launched", "");
        let p = progress(&nc);
        assert!(p.launched && p.registered_since > created, "the Registered condition's clock");
        nc.status.as_mut().unwrap().conditions =
            conditions::with_condition(&nc, condition::REGISTERED, true, "Registered", "");
        assert!(progress(&nc).registered);
    }

    fn managed(group: &str, kind: &str) -> NodeClaim {
        let mut nc = seed_nodeclaim();
        let r = nc.spec.node_class_ref.as_mut().unwrap();
        (r.group, r.kind) = (group.into(), kind.into());
        nc
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/launch_test.go:73
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:98
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:140
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:113
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:127
    #[test]
    fn only_nodeclaims_of_an_ec2nodeclass_are_managed_here() {
        assert!(is_managed(&seed_nodeclaim()));
        assert!(!is_managed(&managed("karpenter.test.sh", "TestNodeClass")));
        assert!(!is_managed(&managed("karpenter.k8s.aws", "OtherNodeClass")));
        let mut none = seed_nodeclaim();
        none.spec.node_class_ref = None;
        assert!(!is_managed(&none));
    }

    /// karpenter:pkg/controllers/node/termination/suite_test.go:143
    #[test]
    fn only_nodes_with_the_ec2nodeclass_label_are_managed_here() {
        let node: Node =
            serde_json::from_value(json!({"metadata": {"name": "n", "labels": {wk::LABEL_NODEPOOL: "p"}}})).unwrap();
        assert!(!is_managed_node(&node), "another provider's Karpenter node");
        let ours: Node =
            serde_json::from_value(json!({"metadata": {"name": "n", "labels": {wk::LABEL_NODECLASS: "c"}}})).unwrap();
        assert!(is_managed_node(&ours));
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/suite_test.go:110
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/suite_test.go:127
    #[test]
    fn the_finalizer_is_added_to_managed_nodeclaims_only_once() {
        assert!(needs_finalizer(&seed_nodeclaim()));
        assert!(!needs_finalizer(&managed("karpenter.test.sh", "TestNodeClass")));
        let mut has = seed_nodeclaim();
        has.metadata.finalizers = Some(vec![wk::FINALIZER_TERMINATION.into()]);
        assert!(!needs_finalizer(&has));
    }

    #[test]
    fn the_nodeclass_label_is_added_where_missing() {
        let nc = seed_nodeclaim();
        let want = Some(("karpenter.k8s.aws/ec2nodeclass".to_string(), "lab-general".to_string()));
        assert_eq!(missing_nodeclass_label(&nc, nc.metadata.labels.as_ref()), want);
        let labels: BTreeMap<String, String> = [want.clone().unwrap()].into();
        assert_eq!(missing_nodeclass_label(&nc, Some(&labels)), None);
    }

    #[test]
    fn a_nodepool_owns_its_nodeclaims_by_uid() {
        let np: tenon_api::NodePool = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "lab-general", "uid": "u-2"},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "x"}, "requirements": []}}}
        }))
        .unwrap();
        let mut nc = seed_nodeclaim();
        assert!(!owned_by(&nc, &np), "no owner reference");
        nc.metadata.owner_references = Some(vec![k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "karpenter.sh/v1".into(),
            kind: "NodePool".into(),
            name: "lab-general".into(),
            uid: "u-1".into(),
            ..Default::default()
        }]);
        assert!(!owned_by(&nc, &np), "the NodePool of that name was recreated");
        nc.metadata.owner_references.as_mut().unwrap()[0].uid = "u-2".into();
        assert!(owned_by(&nc, &np));
    }

    fn registered(nc: &NodeClaim) -> NodeClaim {
        let mut nc = nc.clone();
        for t in [condition::LAUNCHED, condition::REGISTERED] {
            nc.status.get_or_insert_with(Default::default).conditions = conditions::with_condition(&nc, t, true, t, "");
        }
        nc
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:466
    #[test]
    fn an_initialized_nodeclaim_syncs_nothing_onto_its_node_again() {
        let nc = seed_nodeclaim();
        assert_eq!(next_step(&nc), Step::Launch);
        let nc = registered(&nc);
        assert_eq!(next_step(&nc), Step::Initialize);
        let mut done = nc.clone();
        done.status.as_mut().unwrap().conditions = initialized_conditions(&nc);
        assert_eq!(next_step(&done), Step::Done, "registration (and its taint sync) never runs again");
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:115
    #[test]
    fn two_nodes_with_one_provider_id_are_no_registration() {
        let mut nc = seed_nodeclaim();
        nc.status.get_or_insert_with(Default::default).conditions = conditions::with_lifecycle_conditions(&nc).unwrap();
        let conds = unregistered_conditions(&nc, 2);
        let find = |t: &str| conds.iter().find(|c| c.type_ == t).unwrap();
        let r = find(condition::REGISTERED);
        assert_eq!((r.status.as_str(), r.reason.as_str()), ("False", "MultipleNodesFound"));
        assert_eq!(find(condition::INITIALIZED).status, "Unknown");
        let none = unregistered_conditions(&nc, 0);
        let r = none.iter().find(|c| c.type_ == condition::REGISTERED).unwrap();
        assert_eq!((r.status.as_str(), r.reason.as_str()), ("Unknown", "NodeNotFound"));
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:139
    #[test]
    fn a_registered_nodeclaim_names_its_node() {
        let st = registered_status(&seed_nodeclaim(), "ip-10-0-1-5.ec2.internal");
        assert_eq!(st["status"]["nodeName"], "ip-10-0-1-5.ec2.internal");
        let conds = st["status"]["conditions"].as_array().unwrap();
        assert!(conds.iter().any(|c| c["type"] == condition::REGISTERED && c["status"] == "True"));
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:166
    #[test]
    fn an_initialized_nodes_label_and_conditions() {
        assert_eq!(initialized_label_patch()["metadata"]["labels"][wk::LABEL_INITIALIZED], "true");
        let conds = initialized_conditions(&registered(&seed_nodeclaim()));
        for t in [condition::INITIALIZED, condition::READY] {
            assert!(conds.iter().any(|c| c.type_ == t && c.status == "True"), "{t}");
        }
    }

    /// Not a Karpenter case (issue 47): the launched NodeClaim is labelled with its zone's ID
    /// when the cloud names it, and with no stale one otherwise.
    #[test]
    fn a_launched_nodeclaim_is_labelled_with_its_zones_id() {
        use tenon_core::instancetype::Offering;
        let offering = |zone: &str, id: Option<&str>| Offering {
            zone: zone.into(),
            zone_id: id.map(str::to_string),
            capacity_type: "on-demand".into(),
            price: 0.1,
            available: true,
        };
        let offerings = vec![offering("us-east-1a", Some("use1-az1")), offering("us-east-1b", Some("use1-az2"))];
        let it =
            InstanceType::new("m5.large", Default::default(), Resources::default(), Resources::default(), offerings);
        let labels = launched_labels(&running_in("us-east-1b"), Some(&it));
        assert_eq!(labels.get(wk::LABEL_ZONE_ID).map(String::as_str), Some("use1-az2"));
        let one = vec![offering("us-east-1a", Some("use1-az1"))];
        let it = InstanceType::new("m5.large", Default::default(), Resources::default(), Resources::default(), one);
        assert_eq!(launched_labels(&running_in("us-east-1c"), Some(&it)).get(wk::LABEL_ZONE_ID), None, "no stale ID");
    }

    /// Instance `i-1`, an on-demand m5.large running in `zone`.
    fn running_in(zone: &str) -> Instance {
        Instance {
            id: "i-1".into(),
            provider_id: format!("aws:///{zone}/i-1"),
            instance_type: "m5.large".into(),
            zone: zone.into(),
            capacity_type: "on-demand".into(),
            image_id: "ami-1".into(),
            subnet_id: "subnet-1".into(),
            security_groups: vec![],
            state: tenon_core::cloud::InstanceState::Running,
            launched_at: None,
            tags: Default::default(),
            tenancy: "default".into(),
        }
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/launch_test.go:75
    #[test]
    fn a_launch_writes_the_provider_id_and_launched() {
        let instance = running_in("us-east-1a");
        let st = launched_status(&seed_nodeclaim(), &instance, None);
        assert_eq!(st["providerID"], "aws:///us-east-1a/i-1");
        assert_eq!(st["imageID"], "ami-1");
        let launched = st["conditions"].as_array().unwrap().iter().find(|c| c["type"] == condition::LAUNCHED).cloned();
        assert_eq!(launched.map(|c| c["status"].clone()), Some(json!("True")));
    }

    fn registering_node(labels: serde_json::Value) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": "n", "labels": labels},
            "spec": {"providerID": "aws:///us-east-1a/i-1", "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]}
        }))
        .unwrap()
    }

    fn with_taints(mut nc: NodeClaim) -> NodeClaim {
        let taint = |k: &str, e: &str| serde_json::from_value(json!({"key": k, "value": "v", "effect": e})).unwrap();
        nc.spec.taints = vec![taint("custom-taint", "NoSchedule"), taint("other-custom-taint", "NoExecute")];
        nc.spec.startup_taints = vec![taint("custom-startup-taint", "NoSchedule")];
        nc.metadata.labels.get_or_insert_with(Default::default).insert("custom-label".into(), "custom-value".into());
        nc
    }

    fn taint_keys(p: &Value) -> Vec<String> {
        p["spec"]["taints"].as_array().unwrap().iter().filter_map(|t| t["key"].as_str().map(str::to_string)).collect()
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:245
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:299
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:410
    #[test]
    fn registration_syncs_labels_taints_and_startup_taints() {
        let nc = with_taints(seed_nodeclaim());
        let p = registration_patch(&nc, &registering_node(json!({})), &SeenStartupTaints::new());
        // Every label of the NodeClaim reaches the Node (Karpenter's case reads each back).
        let labels = nc.metadata.labels.clone().unwrap_or_default();
        assert!(labels.contains_key("custom-label") && labels.len() > 1, "{labels:?}");
        for (k, v) in &labels {
            assert_eq!(p["metadata"]["labels"][k], json!(v), "{k}");
        }
        assert_eq!(taint_keys(&p), ["custom-taint", "other-custom-taint", "custom-startup-taint"]);
    }

    #[test]
    fn a_startup_taint_the_node_had_and_lost_is_not_added_again() {
        let nc = with_taints(seed_nodeclaim());
        let mut node = registering_node(json!({}));
        node.spec.as_mut().unwrap().taints.as_mut().unwrap().push(
            serde_json::from_value(json!({"key": "custom-startup-taint", "value": "v", "effect": "NoSchedule"}))
                .unwrap(),
        );
        let seen = startup_taints_on(&nc, &node);
        assert_eq!(seen, SeenStartupTaints::from([("custom-startup-taint".into(), "NoSchedule".into())]));
        // Its owner removed it after the read the first patch was built from.
        let removed = registering_node(json!({}));
        assert_eq!(taint_keys(&registration_patch(&nc, &removed, &seen)), ["custom-taint", "other-custom-taint"]);
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:320
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:435
    #[test]
    fn a_do_not_sync_taints_label_other_than_true_syncs_them() {
        let node = registering_node(json!({wk::LABEL_DO_NOT_SYNC_TAINTS: "false"}));
        let p = registration_patch(&with_taints(seed_nodeclaim()), &node, &SeenStartupTaints::new());
        assert_eq!(taint_keys(&p), ["custom-taint", "other-custom-taint", "custom-startup-taint"]);
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:347
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:377
    #[test]
    fn a_do_not_sync_taints_node_gets_neither_taints_nor_startup_taints() {
        let mut node = registering_node(json!({wk::LABEL_DO_NOT_SYNC_TAINTS: "true"}));
        node.spec.as_mut().unwrap().taints.as_mut().unwrap().push(
            serde_json::from_value(json!({"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})).unwrap(),
        );
        let p = registration_patch(&with_taints(seed_nodeclaim()), &node, &SeenStartupTaints::new());
        assert_eq!(taint_keys(&p), ["node.kubernetes.io/not-ready"], "its own kept, unregistered removed");
        assert_eq!(p["metadata"]["labels"]["custom-label"], "custom-value", "labels still sync");
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/suite_test.go:383
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/suite_test.go:389
    #[test]
    fn requested_dra_drivers_do_not_hold_initialization() {
        let mut nc = seed_nodeclaim();
        let ready = node_with(json!([]), "True", cpu_memory());
        assert!(initialization(&nc, &ready).is_ok(), "no annotation");
        nc.metadata.annotations =
            Some([("karpenter.sh/requested-dra-drivers".to_string(), "driver-a".to_string())].into());
        assert!(initialization(&nc, &ready).is_ok(), "DRA is not supported: the annotation is not a gate");
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/liveness_test.go:97
    #[test]
    fn a_nodeclaim_given_up_tells_its_nodepool_why() {
        let launched = registered(&seed_nodeclaim());
        assert_eq!(registration_failure(&launched), ("RegistrationFailed".into(), "Failed to register node".into()));
        let mut failing = seed_nodeclaim();
        failing.status.get_or_insert_with(Default::default).conditions =
            conditions::with_unknown_condition(&failing, condition::LAUNCHED, "SubnetResolutionFailed", "no subnet");
        assert_eq!(registration_failure(&failing), ("SubnetResolutionFailed".into(), "no subnet".into()));
    }
}
