//! The provisioner: batches pending pods (Karpenter's idle and max windows), asks the core
//! for a plan, and turns each planned NodeClaim into a `karpenter.sh/v1` NodeClaim object.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tenon_api::nodeclaim::ResourceRequirements;
use tenon_api::wellknown as wk;
use tenon_api::{NodeClaim, NodeClaimSpec, NodePool};
use tenon_core::convert::{ClusterObjects, is_active, is_daemon};
use tenon_core::plan::NewNodeClaim;
use tenon_core::resources::format_amount;

/// Karpenter's batching: a batch opens with the first new pending pod, closes after
/// `idle` without another, or after `max` in any case.
#[derive(Debug, Default)]
pub struct Batcher {
    seen: BTreeSet<String>,
    window: Option<(Instant, Instant)>,
    /// After a decision, pods it left pending count as new again from this time.
    retry_at: Option<Instant>,
}

/// How long pods a decision could not place wait before they are tried again (sooner when
/// new pods arrive). Without it a pod no NodePool can ever serve would keep a batch open
/// all the time, which also holds disruption off.
pub const RETRY_PENDING: Duration = Duration::from_secs(5);

impl Batcher {
    /// Feeds the pending pods now; true when a batch closes and a decision is due.
    pub fn tick(&mut self, pending: &BTreeSet<String>, now: Instant, idle: Duration, max: Duration) -> bool {
        let retry = self.retry_at.is_some_and(|t| now >= t);
        let fresh = retry || pending.iter().any(|p| !self.seen.contains(p));
        if fresh {
            self.retry_at = None;
        }
        self.seen = pending.clone();
        if pending.is_empty() {
            self.window = None;
            return false;
        }
        let (start, last) = match self.window {
            None if fresh => (now, now),
            None => return false,
            Some((s, l)) => (s, if fresh { now } else { l }),
        };
        if now.duration_since(last) >= idle || now.duration_since(start) >= max {
            self.window = None;
            return true;
        }
        self.window = Some((start, last));
        false
    }

    /// A batch is collecting pods.
    pub fn open(&self) -> bool {
        self.window.is_some()
    }

    /// Pods still pending after the decision made `now` are tried again after
    /// [`RETRY_PENDING`].
    pub fn decided(&mut self, now: Instant) {
        self.retry_at = Some(now + RETRY_PENDING);
    }
}

/// The NodeClaim object for a planned NodeClaim of `np` (named `<nodepool>-<suffix>` by the
/// API server through generateName); `instance_types` are the plan's options, which the
/// NodeClaim pins with `node.kubernetes.io/instance-type In [...]` as Karpenter does.
pub fn nodeclaim(plan: &NewNodeClaim, np: &NodePool, instance_types: &[&str]) -> NodeClaim {
    let pool = np.metadata.name.clone().unwrap_or_default();
    let t = &np.spec.template;
    let mut labels = t.metadata.labels.clone();
    labels.insert(wk::LABEL_NODEPOOL.into(), pool.clone());
    let mut annotations = t.metadata.annotations.clone();
    annotations.insert(wk::ANNOTATION_NODEPOOL_HASH.into(), np.template_hash());
    annotations.insert(wk::ANNOTATION_NODEPOOL_HASH_VERSION.into(), tenon_api::hash::NODEPOOL_HASH_VERSION.into());
    // The placeholder hostname the simulation used is not a real constraint.
    let mut reqs = plan.requirements.clone();
    let kept: Vec<_> = reqs.iter().filter(|r| r.key != wk::LABEL_HOSTNAME).cloned().collect();
    reqs = kept.into_iter().collect();
    if !instance_types.is_empty() {
        reqs.add(tenon_core::requirements::Requirement::in_values(
            wk::LABEL_INSTANCE_TYPE,
            instance_types.iter().copied(),
        ));
    }
    let requests: BTreeMap<String, Quantity> = plan
        .requests
        .entries()
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| (k.clone(), Quantity(format_amount(&k, v))))
        .collect();
    let spec = NodeClaimSpec {
        taints: t.spec.taints.clone(),
        startup_taints: t.spec.startup_taints.clone(),
        requirements: tenon_core::convert::api_requirements(&reqs),
        resources: ResourceRequirements { requests },
        node_class_ref: t.spec.node_class_ref.clone(),
        termination_grace_period: t.spec.termination_grace_period.clone(),
        expire_after: t.spec.expire_after.clone(),
    };
    let mut nc = NodeClaim::new("", spec);
    nc.metadata.name = None;
    nc.metadata.generate_name = Some(format!("{pool}-"));
    nc.metadata.labels = Some(labels);
    nc.metadata.annotations = Some(annotations);
    nc.metadata.finalizers = Some(vec![wk::FINALIZER_TERMINATION.into()]);
    nc.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "karpenter.sh/v1".into(),
        kind: "NodePool".into(),
        name: pool,
        uid: np.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    }]);
    nc
}

/// Where a nominated pod goes, as Karpenter's `Nominated` Event names it: the NodeClaim
/// and, once registered, its Node (`nodeclaim/a, node/b`).
pub fn nominated_to(snap: &tenon_core::ClusterSnapshot, node: &str) -> String {
    match snap.nodes.iter().find(|n| n.name == node) {
        Some(n) if n.in_flight => format!("nodeclaim/{node}"),
        Some(n) => match &n.claim {
            Some(c) => format!("nodeclaim/{}, node/{node}", c.nodeclaim),
            None => format!("node/{node}"),
        },
        None => format!("node/{node}"),
    }
}

/// The cluster as provisioning sees it: pods on the nodes of NodeClaims being deleted count
/// as pending (Karpenter's "reschedulable pods"), so their capacity is launched while the
/// node drains instead of after. Only for provisioning: draining must see them where they are.
/// Borrows the cluster unchanged when nothing is leaving (every pass): only a drain pays for
/// the copy.
pub fn with_displaced_pods(objects: &ClusterObjects) -> std::borrow::Cow<'_, ClusterObjects> {
    let leaving: BTreeSet<&str> = objects
        .nodeclaims
        .iter()
        .filter(|nc| nc.metadata.deletion_timestamp.is_some())
        .filter_map(|nc| nc.status.as_ref().and_then(|s| s.node_name.as_deref()))
        .collect();
    if leaving.is_empty() {
        return std::borrow::Cow::Borrowed(objects);
    }
    let mut out = objects.clone();
    for p in &mut out.pods {
        let on_leaving = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| leaving.contains(n));
        if !on_leaving || is_daemon(p) || !is_active(p) || p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(spec) = p.spec.as_mut() {
            spec.node_name = None;
        }
        let status = p.status.get_or_insert_with(Default::default);
        status.phase = Some("Pending".into());
        status.conditions.get_or_insert_with(Vec::new).push(k8s_openapi::api::core::v1::PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            ..Default::default()
        });
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn nominations_name_the_nodeclaim_and_its_node_as_karpenter_does() {
        use tenon_core::model::{ClaimInfo, Node};
        let node = |name: &str, in_flight: bool, claim: Option<&str>| Node {
            name: name.into(),
            in_flight,
            claim: claim.map(|c| ClaimInfo { nodeclaim: c.into(), ..Default::default() }),
            ..Default::default()
        };
        let snap = tenon_core::ClusterSnapshot {
            nodes: vec![
                node("lab-general-abc12", true, Some("lab-general-abc12")),
                node("ip-10-0-1-2.ec2.internal", false, Some("lab-general-def34")),
                node("unmanaged", false, None),
            ],
            ..Default::default()
        };
        assert_eq!(super::nominated_to(&snap, "lab-general-abc12"), "nodeclaim/lab-general-abc12");
        assert_eq!(
            super::nominated_to(&snap, "ip-10-0-1-2.ec2.internal"),
            "nodeclaim/lab-general-def34, node/ip-10-0-1-2.ec2.internal"
        );
        assert_eq!(super::nominated_to(&snap, "unmanaged"), "node/unmanaged");
    }

    use super::*;
    use std::sync::Arc;
    use tenon_core::catalog::{AwsCatalogOptions, aws};

    #[test]
    fn planned_nodeclaims_become_karpenter_nodeclaims() {
        let root =
            std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo test")).join("../..");
        let np: NodePool = serde_yaml::from_str(
            &std::fs::read_to_string(root.join("examples/seeds/lab-general/nodepool-lab-general.yaml")).unwrap(),
        )
        .unwrap();
        let cat = Arc::new(aws(&AwsCatalogOptions::default()).unwrap());
        let mut snap = tenon_core::ClusterSnapshot { now: 0, ..Default::default() };
        snap.nodepools.push(tenon_core::convert::nodepool(&np, cat).unwrap());
        let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "inflate-1", "namespace": "karpenter-lab", "uid": "u1"},
            "spec": {"nodeSelector": {"capacity.example.io/pool": "lab-general"},
                     "containers": [{"name": "pause", "image": "pause", "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        }))
        .unwrap();
        snap.pods.push(tenon_core::convert::pod(&pod).unwrap());
        let plan = tenon_core::schedule(&snap, &tenon_core::scorer::PriceScorer);
        assert_eq!(plan.nodeclaims.len(), 1);
        let names = plan.nodeclaims[0].instance_type_names(&snap);
        let nc = nodeclaim(&plan.nodeclaims[0], &np, &names);
        assert_eq!(nc.metadata.generate_name.as_deref(), Some("lab-general-"));
        let labels = nc.metadata.labels.clone().unwrap();
        assert_eq!(labels["karpenter.sh/nodepool"], "lab-general");
        assert_eq!(labels["capacity.example.io/pool"], "lab-general");
        assert_eq!(nc.metadata.annotations.clone().unwrap()["karpenter.sh/nodepool-hash"], np.template_hash());
        assert_eq!(nc.metadata.finalizers.clone().unwrap(), ["karpenter.sh/termination"]);
        assert_eq!(nc.metadata.owner_references.clone().unwrap()[0].kind, "NodePool");
        assert_eq!(nc.spec.node_class_ref.as_ref().unwrap().name, "lab-general");
        let keys: Vec<&str> = nc.spec.requirements.iter().map(|r| r.key.as_str()).collect();
        assert!(!keys.contains(&"kubernetes.io/hostname"), "no placeholder hostname: {keys:?}");
        let types = nc
            .spec
            .requirements
            .iter()
            .find(|r| r.key == "node.kubernetes.io/instance-type")
            .expect("instance types pinned");
        assert_eq!(types.values.len(), names.len());
        let gen_ = nc.spec.requirements.iter().find(|r| r.key == "karpenter.k8s.aws/instance-generation").unwrap();
        assert_eq!((gen_.operator.as_str(), gen_.values.as_slice()), ("Gt", &["4".to_string()][..]));
        assert!(nc.spec.resources.requests.contains_key("cpu"));
        assert_eq!(nc.spec.expire_after, "720h");
        // What the API server will accept.
        let problems = tenon_api::validation::validate_nodeclaim(&{
            let mut named = nc.clone();
            named.metadata.name = Some("lab-general-x1y2z".into());
            named
        });
        assert!(problems.iter().all(|p| p.severity != tenon_api::validation::Severity::Error), "{problems:?}");
    }

    #[test]
    fn batches_close_after_idle_or_max() {
        let (idle, max) = (Duration::from_secs(1), Duration::from_secs(10));
        let t0 = Instant::now();
        let mut b = Batcher::default();
        let one: BTreeSet<String> = ["a".to_string()].into();
        assert!(!b.tick(&one, t0, idle, max), "a batch opens");
        assert!(!b.tick(&one, t0 + Duration::from_millis(900), idle, max));
        assert!(b.tick(&one, t0 + Duration::from_millis(1000), idle, max), "idle for 1 s");
        assert!(!b.tick(&one, t0 + Duration::from_secs(2), idle, max), "the same pods do not reopen it");
        // New pods keep arriving every 0.5 s: the batch closes at 10 s.
        let mut b = Batcher::default();
        let mut closed = None;
        for i in 0..30u64 {
            let pods: BTreeSet<String> = (0..=i).map(|n| n.to_string()).collect();
            if b.tick(&pods, t0 + Duration::from_millis(500 * i), idle, max) {
                closed = Some(i);
                break;
            }
        }
        assert_eq!(closed, Some(20), "closed at 10 s");
    }

    #[test]
    fn pods_a_decision_left_pending_are_retried_after_a_pause() {
        let (idle, max) = (Duration::from_secs(1), Duration::from_secs(10));
        let t0 = Instant::now();
        let mut b = Batcher::default();
        let one: BTreeSet<String> = ["impossible".to_string()].into();
        b.tick(&one, t0, idle, max);
        assert!(b.tick(&one, t0 + Duration::from_secs(1), idle, max));
        b.decided(t0 + Duration::from_secs(1));
        for ms in [1500, 3000, 5900] {
            assert!(!b.tick(&one, t0 + Duration::from_millis(ms), idle, max));
            assert!(!b.open(), "no batch held open by a pod already decided on ({ms} ms)");
        }
        assert!(!b.tick(&one, t0 + Duration::from_secs(6), idle, max), "retried: a new window opens");
        assert!(b.open());
        assert!(b.tick(&one, t0 + Duration::from_secs(7), idle, max));
        // A new pod does not wait for the retry.
        b.decided(t0 + Duration::from_secs(7));
        let two: BTreeSet<String> = ["impossible".to_string(), "new".to_string()].into();
        b.tick(&two, t0 + Duration::from_millis(7500), idle, max);
        assert!(b.open());
    }

    #[test]
    fn pods_of_a_deleting_nodeclaim_count_as_pending_for_provisioning_only() {
        let nc: NodeClaim = serde_yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: a, deletionTimestamp: \"2026-11-30T00:00:00Z\"}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}\n  requirements: []\nstatus: {nodeName: node-a}\n",
        )
        .unwrap();
        let pod = |name: &str, node: &str, owner: &str| -> k8s_openapi::api::core::v1::Pod {
            serde_yaml::from_str(&format!(
                "metadata: {{name: {name}, namespace: d, ownerReferences: [{{apiVersion: apps/v1, kind: {owner}, name: o, uid: u}}]}}\nspec: {{nodeName: {node}, containers: [{{name: c}}]}}\nstatus: {{phase: Running}}\n"
            ))
            .unwrap()
        };
        let objects = ClusterObjects {
            nodeclaims: vec![nc],
            pods: vec![
                pod("web", "node-a", "ReplicaSet"),
                pod("agent", "node-a", "DaemonSet"),
                pod("other", "node-b", "ReplicaSet"),
            ],
            ..Default::default()
        };
        let view = with_displaced_pods(&objects);
        let pending: Vec<&str> = view
            .pods
            .iter()
            .filter(|p| tenon_core::convert::is_provisionable(p))
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        assert_eq!(pending, vec!["web"], "DaemonSet pods stay; other nodes' pods stay");
        assert!(objects.pods[0].spec.as_ref().unwrap().node_name.is_some(), "the original view is untouched");
    }
}
