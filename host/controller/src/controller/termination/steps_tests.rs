//! (Long: tests only, one per case of Karpenter's node and NodeClaim termination suites.)
//! Karpenter's node and NodeClaim termination suites, step by step against the API emulator
//! (finalizers, graceful pod deletion, evictions, optimistic locking) and a fake EC2 whose
//! instances take their time to go. Each test drives `termination::finalize_node` and
//! `finalize_nodeclaim` the way the controller's pass does, with the clock given.

use super::steps::Instances;
use crate::controller::cloud::BoxFuture;
use crate::controller::error::Error;
use crate::controller::events::Recorder;
use crate::controller::metrics::Metrics;
use crate::controller::termination::{self, Ctx, NodeProgress, Progress};
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;
use tenon_api::NodeClaim;
use tenon_api::wellknown::{self as wk, condition};
use tenon_core::cloud::CloudError;
use tenon_core::convert::{ClusterObjects, shared};
use tenon_core::disruption::drain::PdbAllowance;
use tenon_kube_emulator::{Emulator, Options};

/// EC2 as the termination sees it: an instance told to terminate is shutting down (still
/// there) until the test says it is gone.
#[derive(Default)]
struct FakeEc2 {
    /// instance id → state ("running", "shutting-down", "terminated"); absent: not found.
    states: Mutex<BTreeMap<String, &'static str>>,
    terminate_calls: Mutex<Vec<String>>,
    fail_terminate: Mutex<bool>,
}

impl FakeEc2 {
    fn run(&self, id: &str) {
        self.states.lock().unwrap().insert(id.into(), "running");
    }

    fn finish(&self, id: &str) {
        self.states.lock().unwrap().insert(id.into(), "terminated");
    }

    fn calls(&self) -> Vec<String> {
        self.terminate_calls.lock().unwrap().clone()
    }
}

impl Instances for FakeEc2 {
    fn terminate<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<(), Error>> {
        Box::pin(async move {
            if *self.fail_terminate.lock().unwrap() {
                return Err(Error::cloud(
                    format!("terminating {id}"),
                    CloudError::Api { operation: "TerminateInstances".into(), message: "RequestLimitExceeded".into() },
                ));
            }
            self.terminate_calls.lock().unwrap().push(id.into());
            if let Some(s) = self.states.lock().unwrap().get_mut(id) {
                *s = "shutting-down";
            }
            Ok(())
        })
    }

    fn gone<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<bool, Error>> {
        Box::pin(async move { Ok(self.states.lock().unwrap().get(id).is_none_or(|s| *s == "terminated")) })
    }
}

struct World {
    emulator: Emulator,
    client: Client,
    /// As the controller's: no retries of its own.
    evictions: Client,
    ec2: FakeEc2,
    recorder: Recorder,
    metrics: Metrics,
    backoff: crate::controller::eviction_backoff::EvictionBackoff,
}

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

impl World {
    async fn new() -> World {
        // Pods take their own grace period to go, as on a kubelet.
        let emulator = Emulator::start_with(Options { pod_grace_cap: Duration::from_secs(600) }).unwrap();
        let config = kube::Config::new(emulator.url.parse().unwrap());
        let client = Client::try_from(config.clone()).unwrap();
        let mut once = config.clone();
        once.default_retry = false;
        let evictions = Client::try_from(once).unwrap();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for doc in tenon_api::crds::crds_yaml().unwrap().split("\n---\n") {
            let crd: CustomResourceDefinition = serde_yaml::from_str(doc).unwrap();
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        World {
            emulator,
            client,
            evictions,
            ec2: FakeEc2::default(),
            recorder: Recorder::default(),
            metrics: Metrics::default(),
            backoff: Default::default(),
        }
    }

    fn ctx(&self, now: i64) -> Ctx<'_> {
        Ctx {
            client: &self.client,
            evictions: &self.evictions,
            cloud: &self.ec2,
            recorder: &self.recorder,
            metrics: &self.metrics,
            backoff: &self.backoff,
            now,
        }
    }

    fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    fn claims(&self) -> Api<NodeClaim> {
        Api::all(self.client.clone())
    }

    /// A launched, registered NodeClaim `name` with instance `id` and its Ready Node
    /// `<id>.ec2.internal`, both with the termination finalizer.
    async fn registered_node(&self, name: &str, id: &str, tgp: Option<&str>) {
        self.ec2.run(id);
        let mut nc: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "finalizers": [wk::FINALIZER_TERMINATION],
                         "labels": {wk::LABEL_NODEPOOL: "default", wk::LABEL_NODECLASS: "default"}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": []},
        }))
        .unwrap();
        nc.spec.termination_grace_period = tgp.map(str::to_string);
        let created = self.claims().create(&PostParams::default(), &nc).await.unwrap();
        let mut conds = Vec::new();
        for t in [condition::LAUNCHED, condition::REGISTERED, condition::INITIALIZED, condition::READY] {
            super::conditions::set_condition(&mut conds, t, true, t, "", created.metadata.generation);
        }
        let status = json!({"status": {"providerID": format!("aws:///us-east-1a/{id}"), "nodeName": node_name(id), "conditions": conds}});
        self.claims().patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
        self.node(id, "True").await;
    }

    /// A NodeClaim `name` with the termination finalizer, never registered; with
    /// `provider_id` in its status when given (launched, its status written no further).
    async fn unlaunched_claim(&self, name: &str, provider_id: Option<&str>) {
        let nc: NodeClaim = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "finalizers": [wk::FINALIZER_TERMINATION]},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
        }))
        .unwrap();
        self.claims().create(&PostParams::default(), &nc).await.unwrap();
        if let Some(pid) = provider_id {
            let st = json!({"status": {"providerID": pid}});
            self.claims().patch_status(name, &PatchParams::default(), &Patch::Merge(&st)).await.unwrap();
        }
    }

    async fn node(&self, id: &str, ready: &str) {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": node_name(id), "finalizers": [wk::FINALIZER_TERMINATION],
                         "labels": {wk::LABEL_NODEPOOL: "default", wk::LABEL_NODECLASS: "default", wk::LABEL_ZONE: "us-east-1a"}},
            "spec": {"providerID": format!("aws:///us-east-1a/{id}")},
        }))
        .unwrap();
        self.nodes().create(&PostParams::default(), &node).await.unwrap();
        let status = json!({"status": {"conditions": [{"type": "Ready", "status": ready}]}});
        self.nodes().patch_status(&node_name(id), &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    }

    async fn pod(&self, name: &str, node: &str, grace: i64, extra: serde_json::Value) {
        let mut pod = json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"nodeName": node, "terminationGracePeriodSeconds": grace,
                     "containers": [{"name": "app", "image": "app"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        });
        merge(&mut pod, extra);
        let status = json!({"status": pod["status"].clone()});
        let pod: Pod = serde_json::from_value(pod).unwrap();
        let pods = Api::<Pod>::namespaced(self.client.clone(), "default");
        let name = pod.metadata.name.clone().unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
        // Running and Ready, as its kubelet reports (a create's status is not kept).
        pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
    }

    async fn objects(&self) -> ClusterObjects {
        let lp = ListParams::default();
        ClusterObjects {
            nodes: shared(self.nodes().list(&lp).await.unwrap().items),
            nodeclaims: shared(self.claims().list(&lp).await.unwrap().items),
            pods: shared(Api::<tenon_core::cached_pod::Pod>::all(self.client.clone()).list(&lp).await.unwrap().items),
            volume_attachments: shared(
                Api::<VolumeAttachment>::all(self.client.clone()).list(&lp).await.unwrap().items,
            ),
            claims: shared(
                Api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>::all(self.client.clone())
                    .list(&lp)
                    .await
                    .unwrap()
                    .items,
            ),
            pdbs: shared(
                Api::<k8s_openapi::api::policy::v1::PodDisruptionBudget>::all(self.client.clone())
                    .list(&lp)
                    .await
                    .unwrap()
                    .items,
            ),
            ..ClusterObjects::default()
        }
    }

    async fn get_node(&self, id: &str) -> Option<Node> {
        self.nodes().get_opt(&node_name(id)).await.unwrap()
    }

    async fn get_claim(&self, name: &str) -> Option<NodeClaim> {
        self.claims().get_opt(name).await.unwrap()
    }

    /// One termination step of Node `<id>.ec2.internal` at `now`, as the controller's pass.
    /// A do-not-disrupt pod on `id`'s node, then the instance gone and the Node deleted.
    async fn stuck_pod_then_instance_gone_and_node_deleted(&self, id: &str) {
        let annotations = json!({"metadata": {"annotations": {wk::ANNOTATION_DO_NOT_DISRUPT: "true"}}});
        self.pod("stuck", &node_name(id), 300, annotations).await;
        self.ec2.finish(id);
        self.nodes().delete(&node_name(id), &DeleteParams::default()).await.unwrap();
    }

    async fn node_step(&self, id: &str, now: i64) -> NodeProgress {
        let objects = self.objects().await;
        let node = objects.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(&node_name(id))).expect("the node");
        assert!(node.metadata.deletion_timestamp.is_some() && termination::is_ours(node), "a node being terminated");
        let nc = termination::claim_of_node(node, &objects.nodeclaims);
        let (snap, _) = tenon_core::convert::snapshot(&objects, &|_| Default::default(), now);
        let volumes = termination::pending_volume_attachments(
            &node_name(id),
            &objects.volume_attachments,
            &objects.pods,
            &snap,
            &objects.claims,
        );
        let mut allowance = PdbAllowance::default();
        termination::finalize_node(&self.ctx(now), node, nc, &snap, &mut allowance, &volumes).await.unwrap()
    }

    /// One termination step of NodeClaim `name` at `now`.
    async fn claim_step(&self, name: &str, now: i64) -> Result<Progress, Error> {
        let objects = self.objects().await;
        let nc = objects.nodeclaims.iter().find(|c| c.metadata.name.as_deref() == Some(name)).expect("the NodeClaim");
        let nodes = crate::controller::nodes_of(nc, &objects.nodes);
        termination::finalize_nodeclaim(&self.ctx(now), nc, &nodes).await
    }

    /// Steps Node `<id>` (a second apart) until released, at most `max` steps, an instance
    /// told to terminate finishing by the next step; the steps taken.
    async fn node_until_released(&self, id: &str, mut at: i64, max: usize) -> usize {
        for step in 1..=max {
            if self.node_step(id, at).await == NodeProgress::Released {
                return step;
            }
            for s in self.ec2.states.lock().unwrap().values_mut().filter(|s| **s == "shutting-down") {
                *s = "terminated";
            }
            at += 1;
        }
        panic!("node {id} not released in {max} steps")
    }
}

fn node_name(id: &str) -> String {
    format!("{id}.ec2.internal")
}

fn merge(a: &mut serde_json::Value, b: serde_json::Value) {
    match (a, b) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            for (k, v) in b {
                merge(a.entry(k).or_insert(serde_json::Value::Null), v);
            }
        }
        (a, b) => *a = b,
    }
}

fn condition_of(nc: &NodeClaim, t: &str) -> Option<(String, String)> {
    let c = nc.status.as_ref()?.conditions.iter().find(|c| c.type_ == t)?;
    Some((c.status.clone(), c.reason.clone()))
}

fn tainted(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.taints.as_ref()).into_iter().flatten().any(|t| t.key == wk::TAINT_DISRUPTED)
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:112
/// karpenter:pkg/controllers/node/termination/suite_test.go:152
/// karpenter:pkg/controllers/node/termination/suite_test.go:880
/// karpenter:pkg/controllers/node/termination/suite_test.go:1010
/// karpenter:pkg/controllers/node/termination/suite_test.go:1024
/// karpenter:pkg/controllers/node/termination/suite_test.go:1038
#[tokio::test]
async fn a_deleted_node_deletes_its_nodeclaim_drains_waits_then_terminates_its_instance() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    w.nodes().delete(&node_name("i-1"), &DeleteParams::default()).await.unwrap();
    let t0 = now();
    assert_eq!(w.node_step("i-1", t0).await, NodeProgress::Waiting);
    let nc = w.get_claim("nc").await.unwrap();
    assert!(nc.metadata.deletion_timestamp.is_some(), "the Node's deletion deletes its NodeClaim");
    assert!(tainted(&w.get_node("i-1").await.unwrap()));
    assert_eq!(condition_of(&nc, condition::DRAINED), Some(("Unknown".into(), "Draining".into())));
    // Nothing to drain, but draining lasts at least five seconds.
    assert_eq!(w.node_step("i-1", t0 + 3).await, NodeProgress::Waiting);
    assert_eq!(condition_of(&w.get_claim("nc").await.unwrap(), condition::DRAINED).unwrap().0, "Unknown");
    assert_eq!(w.node_step("i-1", t0 + 6).await, NodeProgress::Waiting);
    assert_eq!(condition_of(&w.get_claim("nc").await.unwrap(), condition::DRAINED).unwrap().0, "True");
    assert!(w.ec2.calls().is_empty(), "no termination before the drain");
    // Volumes (none), then the instance: told to terminate, and waited for.
    for s in 0..3 {
        assert_eq!(w.node_step("i-1", t0 + 7 + s).await, NodeProgress::Waiting);
    }
    assert_eq!(w.ec2.calls(), ["i-1"]);
    let nc = w.get_claim("nc").await.unwrap();
    assert_eq!(condition_of(&nc, condition::INSTANCE_TERMINATING).unwrap().0, "True");
    assert_eq!(w.node_step("i-1", t0 + 20).await, NodeProgress::Waiting, "shutting down is not gone");
    assert!(w.get_node("i-1").await.is_some());
    w.ec2.finish("i-1");
    assert_eq!(w.node_step("i-1", t0 + 21).await, NodeProgress::Released);
    assert!(w.get_node("i-1").await.is_none(), "the finalizer went, and the Node with it");
    let text = w.metrics.render();
    for series in [
        "karpenter_nodes_drained_total{nodepool=\"default\"} 1",
        "karpenter_nodes_terminated_total{nodepool=\"default\",zone=\"us-east-1a\"} 1",
        "karpenter_nodes_termination_duration_seconds_count{nodepool=\"default\"} 1",
        "karpenter_nodes_lifetime_duration_seconds_count{nodepool=\"default\"} 1",
    ] {
        assert!(text.lines().any(|l| l == series), "{series} missing:\n{text}");
    }
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:123
#[tokio::test]
async fn a_deleted_node_without_a_nodeclaim_is_drained_and_released_without_a_cloud_call() {
    let w = World::new().await;
    w.node("i-9", "True").await;
    w.nodes().delete(&node_name("i-9"), &DeleteParams::default()).await.unwrap();
    w.node_until_released("i-9", now(), 3).await;
    assert!(w.get_node("i-9").await.is_none());
    assert!(w.ec2.calls().is_empty());
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:132
#[tokio::test]
async fn a_node_two_nodeclaims_claim_is_released_as_one_without_any() {
    let w = World::new().await;
    w.registered_node("a", "i-1", None).await;
    // A second NodeClaim with the same providerID: no NodeClaim is the node's.
    w.unlaunched_claim("b", Some("aws:///us-east-1a/i-1")).await;
    w.nodes().delete(&node_name("i-1"), &DeleteParams::default()).await.unwrap();
    w.node_until_released("i-1", now(), 3).await;
    assert!(w.get_node("i-1").await.is_none(), "the Node is gone");
    assert!(w.get_claim("a").await.unwrap().metadata.deletion_timestamp.is_none());
    assert!(w.ec2.calls().is_empty());
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:564
/// karpenter:pkg/controllers/node/termination/suite_test.go:415
#[tokio::test]
async fn terminating_pods_hold_the_node_until_they_are_gone() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    w.pod("slow", &node_name("i-1"), 3, json!({})).await;
    w.nodes().delete(&node_name("i-1"), &DeleteParams::default()).await.unwrap();
    let t0 = now();
    assert!(matches!(w.node_step("i-1", t0).await, NodeProgress::Draining(_)));
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    let slow = pods.get("slow").await.unwrap();
    assert!(slow.metadata.deletion_timestamp.is_some(), "evicted: it takes its grace period to go");
    // Passes later the pod still runs its preStop: nothing moves on.
    for s in 1..4 {
        assert!(matches!(w.node_step("i-1", t0 + s).await, NodeProgress::Draining(_)));
        assert_eq!(condition_of(&w.get_claim("nc").await.unwrap(), condition::DRAINED).unwrap().0, "Unknown");
    }
    assert!(w.ec2.calls().is_empty());
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert!(pods.get_opt("slow").await.unwrap().is_none(), "gone after its grace period");
    w.node_until_released("i-1", t0 + 5, 8).await;
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:609
#[tokio::test]
async fn a_not_ready_node_whose_instance_is_gone_is_released_at_once() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    let st = json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}});
    w.nodes().patch_status(&node_name("i-1"), &PatchParams::default(), &Patch::Merge(&st)).await.unwrap();
    w.stuck_pod_then_instance_gone_and_node_deleted("i-1").await;
    assert_eq!(w.node_step("i-1", now()).await, NodeProgress::Released);
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:643
#[tokio::test]
async fn a_ready_node_whose_instance_is_gone_still_drains() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    w.stuck_pod_then_instance_gone_and_node_deleted("i-1").await;
    for s in 0..3 {
        assert!(matches!(w.node_step("i-1", now() + s).await, NodeProgress::Draining(_)));
    }
    assert!(w.get_node("i-1").await.is_some());
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:909
#[tokio::test]
async fn the_instance_waits_for_the_nodes_volume_attachments() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    let va: VolumeAttachment = serde_json::from_value(json!({
        "metadata": {"name": "va-1"},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node_name("i-1"), "source": {"persistentVolumeName": "foo"}},
    }))
    .unwrap();
    let vas: Api<VolumeAttachment> = Api::all(w.client.clone());
    vas.create(&PostParams::default(), &va).await.unwrap();
    w.nodes().delete(&node_name("i-1"), &DeleteParams::default()).await.unwrap();
    let t0 = now();
    for s in [0, 6, 7, 8, 9] {
        assert_eq!(w.node_step("i-1", t0 + s).await, NodeProgress::Waiting);
    }
    let nc = w.get_claim("nc").await.unwrap();
    assert_eq!(
        condition_of(&nc, condition::VOLUMES_DETACHED),
        Some(("Unknown".into(), "AwaitingVolumeDetachment".into()))
    );
    assert!(w.ec2.calls().is_empty(), "not while a volume is attached");
    assert!(w.get_node("i-1").await.is_some(), "the Node waits for its volume");
    vas.delete("va-1", &DeleteParams::default()).await.unwrap();
    for s in [10, 11] {
        assert_eq!(w.node_step("i-1", t0 + s).await, NodeProgress::Waiting);
    }
    assert_eq!(condition_of(&w.get_claim("nc").await.unwrap(), condition::VOLUMES_DETACHED).unwrap().0, "True");
    assert_eq!(w.ec2.calls(), ["i-1"]);
    w.ec2.finish("i-1");
    assert_eq!(w.node_step("i-1", t0 + 12).await, NodeProgress::Released);
    assert!(w.get_node("i-1").await.is_none(), "the Node is gone once its instance is");
    let nc = w.get_claim("nc").await.expect("the NodeClaim outlives its Node");
    assert_eq!(condition_of(&nc, condition::VOLUMES_DETACHED).unwrap().0, "True");
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:978
#[tokio::test]
async fn volume_attachments_are_not_waited_for_past_the_termination_grace_period() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", Some("60s")).await;
    let va: VolumeAttachment = serde_json::from_value(json!({
        "metadata": {"name": "va-1"},
        "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node_name("i-1"), "source": {"persistentVolumeName": "foo"}},
    }))
    .unwrap();
    Api::<VolumeAttachment>::all(w.client.clone()).create(&PostParams::default(), &va).await.unwrap();
    w.claims().delete("nc", &DeleteParams::default()).await.unwrap();
    let t0 = now();
    assert_eq!(w.claim_step("nc", t0).await.unwrap(), Progress::Waiting, "records the deadline, deletes the Node");
    for s in [0, 6, 7] {
        assert_eq!(w.node_step("i-1", t0 + s).await, NodeProgress::Waiting);
    }
    assert!(w.ec2.calls().is_empty());
    // Five minutes on, past the 60 s grace period: the volumes are no longer waited for.
    for s in [300, 301] {
        assert_eq!(w.node_step("i-1", t0 + s).await, NodeProgress::Waiting);
    }
    let nc = w.get_claim("nc").await.unwrap();
    assert_eq!(
        condition_of(&nc, condition::VOLUMES_DETACHED),
        Some(("False".into(), "TerminationGracePeriodElapsed".into()))
    );
    assert_eq!(w.ec2.calls(), ["i-1"]);
}

#[tokio::test]
async fn an_expiring_grace_period_is_announced_on_the_node_as_on_its_nodeclaim() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", Some("60s")).await;
    w.pod("held", &node_name("i-1"), 30, json!({})).await;
    w.claims().delete("nc", &DeleteParams::default()).await.unwrap();
    let t0 = now();
    w.claim_step("nc", t0).await.unwrap();
    w.node_step("i-1", t0).await;
    let at = w.get_claim("nc").await.unwrap().metadata.annotations.unwrap()[wk::ANNOTATION_NODECLAIM_TERMINATION_TIME]
        .clone();
    let events =
        Api::<k8s_openapi::api::core::v1::Event>::all(w.client.clone()).list(&ListParams::default()).await.unwrap();
    for (kind, name) in [("NodeClaim", "nc".to_string()), ("Node", node_name("i-1"))] {
        let e = events
            .items
            .iter()
            .find(|e| {
                e.involved_object.kind.as_deref() == Some(kind)
                    && e.reason.as_deref() == Some("TerminationGracePeriodExpiring")
            })
            .unwrap_or_else(|| panic!("no TerminationGracePeriodExpiring on the {kind}"));
        assert_eq!(e.involved_object.name.as_deref(), Some(name.as_str()));
        assert_eq!(e.type_.as_deref(), Some("Warning"));
        assert_eq!(e.message.as_deref(), Some(format!("All pods will be deleted by {at}").as_str()));
    }
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:126
/// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:129
/// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:216
/// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:270
/// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:329
#[tokio::test]
async fn a_deleted_nodeclaim_deletes_its_node_then_waits_for_the_instance_to_be_gone() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    // Another controller's finalizer keeps the Node for a while.
    let fin = json!({"metadata": {"finalizers": [wk::FINALIZER_TERMINATION, "example.com/hold"]}});
    w.nodes().patch(&node_name("i-1"), &PatchParams::default(), &Patch::Merge(&fin)).await.unwrap();
    w.claims().delete("nc", &DeleteParams::default()).await.unwrap();
    let t0 = now();
    assert_eq!(w.claim_step("nc", t0).await.unwrap(), Progress::Waiting);
    assert!(w.get_node("i-1").await.unwrap().metadata.deletion_timestamp.is_some(), "its Node is deleted");
    let annotations = w.get_claim("nc").await.unwrap().metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key(wk::ANNOTATION_NODECLAIM_TERMINATION_TIME), "no grace period, no stamp");
    w.node_until_released("i-1", t0 + 10, 8).await;
    assert!(w.get_node("i-1").await.is_some(), "still held by the other finalizer");
    assert_eq!(w.claim_step("nc", t0 + 20).await.unwrap(), Progress::Waiting, "not while its Node exists");
    let fin = json!({"metadata": {"finalizers": []}});
    w.nodes().patch(&node_name("i-1"), &PatchParams::default(), &Patch::Merge(&fin)).await.unwrap();
    w.ec2.run("i-1");
    assert_eq!(w.claim_step("nc", t0 + 21).await.unwrap(), Progress::Waiting);
    assert_eq!(w.ec2.calls(), ["i-1"], "its instance is terminated");
    let nc = w.get_claim("nc").await.unwrap();
    assert_eq!(condition_of(&nc, condition::INSTANCE_TERMINATING).unwrap().0, "True");
    assert_eq!(condition_of(&nc, condition::READY).unwrap().0, "True", "the root condition is left alone");
    assert_eq!(w.claim_step("nc", t0 + 22).await.unwrap(), Progress::Waiting, "the instance is still shutting down");
    assert!(w.get_claim("nc").await.is_some());
    w.ec2.finish("i-1");
    assert_eq!(w.claim_step("nc", t0 + 23).await.unwrap(), Progress::Released);
    assert!(w.get_claim("nc").await.is_none());
    let text = w.metrics.render();
    for series in [
        "karpenter_nodeclaims_termination_duration_seconds_count{nodepool=\"default\"} 1",
        "karpenter_nodeclaims_instance_termination_duration_seconds_count{nodepool=\"default\"} 1",
    ] {
        assert!(text.lines().any(|l| l == series), "{series} missing:\n{text}");
    }
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:233
#[tokio::test]
async fn every_node_with_the_nodeclaims_provider_id_is_deleted() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    for extra in ["i-1-b", "i-1-c"] {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": extra}, "spec": {"providerID": "aws:///us-east-1a/i-1"},
        }))
        .unwrap();
        w.nodes().create(&PostParams::default(), &node).await.unwrap();
    }
    w.claims().delete("nc", &DeleteParams::default()).await.unwrap();
    assert_eq!(w.claim_step("nc", now()).await.unwrap(), Progress::Waiting);
    let left: Vec<String> = w
        .nodes()
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .filter_map(|n| n.metadata.name)
        .collect();
    assert!(left.is_empty(), "all three deleted, left: {left:?}");
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:297
#[tokio::test]
async fn a_nodeclaim_never_launched_is_released_without_a_cloud_call() {
    let w = World::new().await;
    w.unlaunched_claim("nc", None).await;
    w.claims().delete("nc", &DeleteParams::default()).await.unwrap();
    assert_eq!(w.claim_step("nc", now()).await.unwrap(), Progress::Released);
    assert!(w.ec2.calls().is_empty());
    assert!(w.get_claim("nc").await.is_none(), "the NodeClaim is gone");
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:400
#[tokio::test]
async fn an_unregistered_nodeclaims_node_is_not_deleted_its_instance_is_terminated() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    let nc = w.get_claim("nc").await.unwrap();
    let conds = super::conditions::with_unknown_condition(&nc, condition::REGISTERED, "NodeNotFound", "");
    let st = json!({"status": {"conditions": conds}});
    w.claims().patch_status("nc", &PatchParams::default(), &Patch::Merge(&st)).await.unwrap();
    w.claims().delete("nc", &DeleteParams::default()).await.unwrap();
    assert_eq!(w.claim_step("nc", now()).await.unwrap(), Progress::Waiting);
    assert!(w.get_node("i-1").await.unwrap().metadata.deletion_timestamp.is_none(), "its Node is left alone");
    assert_eq!(w.ec2.calls(), ["i-1"]);
    w.ec2.finish("i-1");
    assert_eq!(w.claim_step("nc", now()).await.unwrap(), Progress::Released);
    assert!(w.get_claim("nc").await.is_none(), "the NodeClaim is gone");
    let node = w.get_node("i-1").await.expect("its Node is still there");
    assert!(node.metadata.deletion_timestamp.is_none(), "and not being deleted");
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:198
#[tokio::test]
async fn a_failed_termination_keeps_the_finalizer_for_the_next_pass() {
    let w = World::new().await;
    w.unlaunched_claim("nc", Some("aws:///us-east-1a/i-1")).await;
    w.ec2.run("i-1");
    *w.ec2.fail_terminate.lock().unwrap() = true;
    w.claims().delete("nc", &DeleteParams::default()).await.unwrap();
    assert!(w.claim_step("nc", now()).await.is_err());
    assert!(w.get_claim("nc").await.is_some());
    *w.ec2.fail_terminate.lock().unwrap() = false;
    assert_eq!(w.claim_step("nc", now()).await.unwrap(), Progress::Waiting);
    assert_eq!(w.ec2.calls(), ["i-1"]);
    // The retried termination goes through: the NodeClaim is released and gone.
    w.ec2.finish("i-1");
    assert_eq!(w.claim_step("nc", now()).await.unwrap(), Progress::Released);
    assert!(w.get_claim("nc").await.is_none(), "the finalizer went, and the NodeClaim with it");
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/suite_test.go:151
#[tokio::test]
async fn conditions_written_while_finalizing_are_at_the_latest_generation() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    let before = w.get_claim("nc").await.unwrap().metadata.generation.unwrap();
    w.claims().delete("nc", &DeleteParams::default()).await.unwrap();
    let t0 = now();
    assert_eq!(w.claim_step("nc", t0).await.unwrap(), Progress::Waiting);
    w.node_until_released("i-1", t0 + 10, 8).await;
    let nc = w.get_claim("nc").await.unwrap();
    let generation = nc.metadata.generation;
    assert!(generation > Some(before), "the deletion is a new generation");
    let conds = &nc.status.as_ref().unwrap().conditions;
    for t in [condition::LAUNCHED, condition::REGISTERED, condition::INITIALIZED, condition::READY] {
        assert_eq!(condition_of(&nc, t).map(|(status, _)| status).as_deref(), Some("True"), "{t}: {conds:?}");
    }
    assert_eq!(condition_of(&nc, condition::INSTANCE_TERMINATING).map(|(status, _)| status).as_deref(), Some("True"));
    for c in conds {
        assert_eq!(c.observed_generation, generation, "{} observed at {:?}", c.type_, c.observed_generation);
    }
}

/// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:114
/// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:183
/// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:191
#[tokio::test]
async fn an_evicted_pod_gets_an_event_and_is_counted_with_the_disruption_reason() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    let nc = w.get_claim("nc").await.unwrap();
    let conds = super::conditions::with_condition(&nc, condition::DISRUPTION_REASON, true, "SpotInterruption", "");
    w.claims()
        .patch_status("nc", &PatchParams::default(), &Patch::Merge(&json!({"status": {"conditions": conds}})))
        .await
        .unwrap();
    w.pod("web", &node_name("i-1"), 1, json!({})).await;
    w.nodes().delete(&node_name("i-1"), &DeleteParams::default()).await.unwrap();
    assert!(matches!(w.node_step("i-1", now()).await, NodeProgress::Draining(_)));
    let text = w.metrics.render();
    for series in [
        "karpenter_pods_eviction_requests_total{code=\"200\"} 1",
        "karpenter_pods_drained_total{reason=\"SpotInterruption\"} 1",
    ] {
        assert!(text.lines().any(|l| l == series), "{series} missing:\n{text}");
    }
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(w.client.clone(), "default");
    let evicted = events.list(&ListParams::default()).await.unwrap().items;
    assert!(
        evicted.iter().any(|e| e.reason.as_deref() == Some("Evicted")
            && e.message.as_deref() == Some("Evicted pod: SpotInterruption")
            && e.involved_object.name.as_deref() == Some("web")),
        "{evicted:?}"
    );
}

/// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:220
/// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:284
#[tokio::test]
async fn past_the_deadline_a_pod_is_deleted_with_the_time_left_and_an_event() {
    // Held by do-not-disrupt, or by a PodDisruptionBudget allowing nothing (which an
    // eviction would honour; a deletion bypasses it).
    for pdb in [false, true] {
        let w = World::new().await;
        w.registered_node("nc", "i-1", Some("60s")).await;
        let meta = if pdb {
            json!({"metadata": {"labels": {"app": "db"}}})
        } else {
            json!({"metadata": {"annotations": {wk::ANNOTATION_DO_NOT_DISRUPT: "true"}}})
        };
        w.pod("db", &node_name("i-1"), 120, meta).await;
        if pdb {
            w.pdb("db", 0).await;
        }
        w.claims().delete("nc", &DeleteParams::default()).await.unwrap();
        let t0 = now();
        w.claim_step("nc", t0).await.unwrap();
        // An hour later the deadline is long past: the grace granted is the minimum, 1 s.
        assert!(matches!(w.node_step("i-1", t0 + 3600).await, NodeProgress::Draining(_)));
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(w.client.clone(), "default");
        let all = events.list(&ListParams::default()).await.unwrap().items;
        let disrupted: Vec<_> = all.iter().filter(|e| e.reason.as_deref() == Some("Disrupted")).collect();
        assert_eq!(disrupted.len(), 1, "pdb {pdb}: one Disrupted event");
        let message = disrupted[0].message.clone().unwrap_or_default();
        assert!(
            message.contains("granted 1 seconds of grace-period of its 120 terminationGracePeriodSeconds"),
            "{message}"
        );
        let pod = Api::<Pod>::namespaced(w.client.clone(), "default").get_opt("db").await.unwrap();
        assert!(pod.is_none_or(|p| p.metadata.deletion_timestamp.is_some()), "pdb {pdb}: deleted all the same");
        // Counted as Karpenter's terminator counts it (the reason is its NodeClaim's: none
        // given, a forceful termination).
        let series = "karpenter_pods_drained_total{reason=\"Forceful Termination\"} 1";
        assert!(w.metrics.render().lines().any(|l| l == series), "pdb {pdb}: {series} missing");
    }
}

/// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:108
/// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:274
/// karpenter:pkg/controllers/node/termination/suite_test.go:696
#[tokio::test]
async fn a_pod_gone_or_replaced_since_the_snapshot_is_not_touched() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", Some("60s")).await;
    w.pod("old", &node_name("i-1"), 1, json!({})).await;
    w.pod("db", &node_name("i-1"), 120, json!({"metadata": {"annotations": {wk::ANNOTATION_DO_NOT_DISRUPT: "true"}}}))
        .await;
    w.claims().delete("nc", &DeleteParams::default()).await.unwrap();
    let t0 = now();
    w.claim_step("nc", t0).await.unwrap();
    // The drain decides from this snapshot; meanwhile `old` is replaced by a new pod of the
    // same name and `db` is gone.
    let objects = w.objects().await;
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    let now_gone = DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() };
    for p in ["old", "db"] {
        pods.delete(p, &now_gone).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    w.pod("old", &node_name("i-1"), 1, json!({})).await;
    let node = objects.nodes.iter().find(|n| n.metadata.name.as_deref() == Some(&node_name("i-1"))).unwrap();
    let nc = termination::claim_of_node(node, &objects.nodeclaims);
    // An hour later: `db` is past the deadline (forced deletion), `old` would be evicted.
    let (snap, _) = tenon_core::convert::snapshot(&objects, &|_| Default::default(), t0 + 3600);
    let mut allowance = PdbAllowance::default();
    let step = termination::finalize_node(&w.ctx(t0 + 3600), node, nc, &snap, &mut allowance, &[]).await;
    assert!(matches!(step, Ok(NodeProgress::Draining(_))), "404 and 409 are done with, not errors: {step:?}");
    let new = pods.get("old").await.unwrap();
    assert!(new.metadata.deletion_timestamp.is_none(), "the new pod of that name is not evicted");
}

/// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:121
#[tokio::test]
async fn a_pdb_that_allows_one_lets_one_pod_go_and_says_why_the_other_waits() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    for p in ["web-1", "web-2"] {
        w.pod(p, &node_name("i-1"), 1, json!({"metadata": {"labels": {"app": "web"}}})).await;
    }
    w.pdb("web", 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    w.nodes().delete(&node_name("i-1"), &DeleteParams::default()).await.unwrap();
    let step = w.node_step("i-1", now()).await;
    let NodeProgress::Draining(Some(message)) = step else { panic!("one pod waits for the budget: {step:?}") };
    assert!(message.starts_with("Failed to drain node,") && message.contains("PodDisruptionBudget"), "{message}");
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    let evicted = [pods.get("web-1").await.unwrap(), pods.get("web-2").await.unwrap()]
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_some())
        .count();
    assert_eq!(evicted, 1);
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/termination_test.go:308
#[tokio::test]
async fn deleting_a_nodeclaim_never_launched_leaves_nodes_without_provider_ids() {
    let w = World::new().await;
    for i in 0..10 {
        let node: Node = serde_json::from_value(json!({"metadata": {"name": format!("bare-{i}")}})).unwrap();
        w.nodes().create(&PostParams::default(), &node).await.unwrap();
    }
    // As Karpenter's case: a provider ID, never registered (its test NodeClaims have one).
    w.unlaunched_claim("nc", Some("aws:///us-east-1a/i-1")).await;
    let pool = json!({"metadata": {"labels": {wk::LABEL_NODEPOOL: "default"}}});
    w.claims().patch("nc", &PatchParams::default(), &Patch::Merge(&pool)).await.unwrap();
    w.claims().delete("nc", &DeleteParams::default()).await.unwrap();
    assert_eq!(w.claim_step("nc", now()).await.unwrap(), Progress::Released);
    assert!(w.get_claim("nc").await.is_none(), "the NodeClaim is gone");
    for i in 0..10 {
        let node = w.nodes().get(&format!("bare-{i}")).await.unwrap();
        assert!(node.metadata.deletion_timestamp.is_none(), "bare-{i} is left alone");
    }
    let text = w.metrics.render();
    for series in [
        "karpenter_nodeclaims_termination_duration_seconds_count{nodepool=\"default\"} 1",
        "karpenter_nodeclaims_instance_termination_duration_seconds_count{nodepool=\"default\"} 1",
    ] {
        assert!(text.lines().any(|l| l == series), "{series} missing:\n{text}");
    }
}

/// The rule behind it: nodes without a providerID belong to no NodeClaim.
#[test]
fn a_nodeclaim_without_a_provider_id_has_no_nodes() {
    let nc: NodeClaim = serde_json::from_value(json!({
        "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim", "metadata": {"name": "nc"},
        "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}, "requirements": []},
    }))
    .unwrap();
    let nodes: Vec<std::sync::Arc<Node>> = (0..10)
        .map(|i| std::sync::Arc::new(serde_json::from_value(json!({"metadata": {"name": format!("n-{i}")}})).unwrap()))
        .collect();
    assert!(crate::controller::nodes_of(&nc, &nodes).is_empty(), "nodes without a providerID are not its nodes");
}

/// A refused eviction is asked for again after a backoff, not on every pass.
/// karpenter:pkg/controllers/node/termination/terminator/suite_test.go:131
#[tokio::test]
async fn a_refused_eviction_waits_its_backoff_and_says_why_on_the_node() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    w.pod("web", &node_name("i-1"), 1, json!({})).await;
    w.nodes().delete(&node_name("i-1"), &DeleteParams::default()).await.unwrap();
    w.emulator.fail_next("create", "pods/eviction", 429, 1);
    let t0 = now();
    let step = w.node_step("i-1", t0).await;
    let NodeProgress::Draining(Some(message)) = step else { panic!("refused: {step:?}") };
    assert!(message.contains("evicting pod violates a PDB") && message.contains("default/web"), "{message}");
    // Karpenter's terminator case: one FailedDraining Event on the Node saying why.
    let events =
        Api::<k8s_openapi::api::core::v1::Event>::all(w.client.clone()).list(&ListParams::default()).await.unwrap();
    let failed: Vec<&str> = events
        .items
        .iter()
        .filter(|e| e.involved_object.kind.as_deref() == Some("Node") && e.reason.as_deref() == Some("FailedDraining"))
        .filter_map(|e| e.message.as_deref())
        .collect();
    assert!(
        failed.len() == 1 && failed[0].contains("evicting pod violates a PDB"),
        "one FailedDraining Event saying why: {failed:?}"
    );
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    // The same second: not asked again (it would succeed now).
    w.node_step("i-1", t0).await;
    assert!(pods.get("web").await.unwrap().metadata.deletion_timestamp.is_none(), "backing off");
    w.node_step("i-1", t0 + 1).await;
    assert!(pods.get_opt("web").await.unwrap().is_none_or(|p| p.metadata.deletion_timestamp.is_some()), "evicted");
    assert!(w.metrics.render().contains("karpenter_pods_eviction_requests_total{code=\"429\"} 1"));
}

impl World {
    /// PodDisruptionBudget `app` over the pods labelled `app: <app>`, with `maxUnavailable`.
    async fn pdb(&self, app: &str, max_unavailable: i32) {
        self.pdb_named(app, app, max_unavailable).await;
    }

    /// PodDisruptionBudget `name` over the pods labelled `app: <app>`, with `maxUnavailable`.
    async fn pdb_named(&self, name: &str, app: &str, max_unavailable: i32) {
        let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget = serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"maxUnavailable": max_unavailable, "selector": {"matchLabels": {"app": app}}},
        }))
        .unwrap();
        let pdbs: Api<k8s_openapi::api::policy::v1::PodDisruptionBudget> =
            Api::namespaced(self.client.clone(), "default");
        pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    }

    /// Whether pod `name` was evicted (gone, or going).
    async fn evicted(&self, name: &str) -> bool {
        let pod = Api::<Pod>::namespaced(self.client.clone(), "default").get_opt(name).await.unwrap();
        pod.is_none_or(|p| p.metadata.deletion_timestamp.is_some())
    }

    /// Node `<id>` (registered for NodeClaim `nc`) deleted and stepped until released, its
    /// instance terminating on the way; asserts the Node is gone.
    async fn drained_and_gone(&self, id: &str) {
        self.node_until_released(id, now(), 12).await;
        assert!(self.get_node(id).await.is_none(), "the Node is gone");
    }
}

/// Karpenter's drain of a Node with pods `pods` (name, extra fields): the Node deleted,
/// one step taken; returns which were evicted (in `pods` order).
async fn drained(w: &World, pods: &[(&str, serde_json::Value)]) -> Vec<bool> {
    w.registered_node("nc", "i-1", None).await;
    for (name, extra) in pods {
        w.pod(name, &node_name("i-1"), 0, extra.clone()).await;
    }
    w.nodes().delete(&node_name("i-1"), &DeleteParams::default()).await.unwrap();
    w.node_step("i-1", now()).await;
    assert!(tainted(&w.get_node("i-1").await.expect("draining")), "the Node is tainted while it drains");
    let mut out = Vec::new();
    for (name, _) in pods {
        out.push(w.evicted(name).await);
    }
    out
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:225
/// karpenter:pkg/controllers/node/termination/suite_test.go:256
#[tokio::test]
async fn pods_tolerating_the_disruption_taint_stay_and_do_not_hold_the_node() {
    for toleration in [
        json!({"key": "karpenter.sh/disrupted", "operator": "Equal", "value": "", "effect": "NoSchedule"}),
        json!({"key": "karpenter.sh/disrupted", "operator": "Exists", "effect": "NoSchedule"}),
    ] {
        let w = World::new().await;
        let tolerant = json!({"spec": {"tolerations": [toleration]}});
        assert_eq!(drained(&w, &[("plain", json!({})), ("tolerant", tolerant)]).await, [true, false]);
        w.drained_and_gone("i-1").await;
    }
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:289
/// karpenter:pkg/controllers/node/termination/suite_test.go:317
#[tokio::test]
async fn pods_tolerating_unschedulable_and_pods_without_owners_are_evicted() {
    let w = World::new().await;
    let tolerates = json!({
        "metadata": {"ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": true}]},
        "spec": {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]},
    });
    assert_eq!(drained(&w, &[("tolerates-unschedulable", tolerates), ("no-owner", json!({}))]).await, [true, true]);
    w.drained_and_gone("i-1").await;
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:348
#[tokio::test]
async fn terminal_pods_are_not_evicted_and_do_not_hold_the_node() {
    let w = World::new().await;
    let done = json!({"status": {"phase": "Succeeded"}});
    let failed = json!({"status": {"phase": "Failed"}});
    assert_eq!(drained(&w, &[("done", done), ("failed", failed)]).await, [false, false]);
    w.drained_and_gone("i-1").await;
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:523
#[tokio::test]
async fn static_pods_are_not_evicted_and_do_not_hold_the_node() {
    let w = World::new().await;
    let mirror = json!({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": node_name("i-1"), "uid": "node-uid", "controller": true}]}});
    assert_eq!(drained(&w, &[("mirror", mirror), ("app", json!({}))]).await, [false, true]);
    w.drained_and_gone("i-1").await;
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:368
#[tokio::test]
async fn a_pod_whose_pdb_allows_nothing_holds_the_node_until_it_is_gone() {
    let w = World::new().await;
    w.registered_node("nc", "i-1", None).await;
    w.pod("guarded", &node_name("i-1"), 0, json!({"metadata": {"labels": {"app": "db"}}})).await;
    w.pdb("db", 0).await;
    w.nodes().delete(&node_name("i-1"), &DeleteParams::default()).await.unwrap();
    let t0 = now();
    for s in 0..3 {
        assert!(matches!(w.node_step("i-1", t0 + s).await, NodeProgress::Draining(_)));
        assert!(!w.evicted("guarded").await, "the budget allows no eviction");
    }
    // Karpenter's ExpectNodeWithNodeClaimDraining: tainted, finalized, being deleted.
    let node = w.get_node("i-1").await.expect("the pod holds the Node");
    assert!(tainted(&node), "the disrupted taint written");
    assert!(node.metadata.finalizers.unwrap_or_default().iter().any(|f| f == wk::FINALIZER_TERMINATION));
    assert!(node.metadata.deletion_timestamp.is_some());
    // Its owner deletes the pod: the drain goes on and the Node goes.
    Api::<Pod>::namespaced(w.client.clone(), "default").delete("guarded", &DeleteParams::default()).await.unwrap();
    w.drained_and_gone("i-1").await;
}

mod drain_order_tests;
