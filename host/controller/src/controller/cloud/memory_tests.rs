//! (Long: tests only, one per reconciler behaviour; the World that sets them up is shared.)
//! Reconcilers against the API emulator and the in-memory cloud: no moto, no AWS.

use super::memory::MemoryCloud;
use crate::controller::context::Context;
use crate::controller::interruption::Interruption;
use crate::controller::leader::Leadership;
use crate::controller::metrics::Metrics;
use crate::controller::nodeclaim::lifecycle::Lifecycle;
use crate::controller::nodeclass::NodeClasses;
use crate::controller::policies::Policies;
use crate::controller::runner::Reconciler;
use crate::controller::settings::Settings;
use crate::controller::state::Stores;
use clap::Parser;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use kube::{Api, Client};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_api::wellknown::condition;
use tenon_api::{EC2NodeClass, NodeClaim, NodePool};
use tenon_aws::interruption::{InterruptionEvent, InterruptionKind};
use tenon_core::cloud::UnavailableOffering;
use tenon_kube_emulator::Emulator;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    settings: Settings,
}

struct World {
    emulator: Emulator,
    client: Client,
    ctx: Arc<Context>,
    cloud: Arc<MemoryCloud>,
}

impl World {
    async fn new() -> World {
        World::new_with(false).await
    }

    /// A World whose controller has the `SpotToSpotConsolidation` gate as `spot_to_spot`.
    async fn new_with(spot_to_spot: bool) -> World {
        World::start(spot_to_spot, tenon_core::catalog::synthetic(4)).await
    }

    /// A World whose cloud offers `catalog`.
    async fn start(spot_to_spot: bool, catalog: Vec<tenon_core::instancetype::InstanceType>) -> World {
        let emulator = Emulator::start().unwrap();
        let client = Client::try_from(kube::Config::new(emulator.url.parse().unwrap())).unwrap();
        let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
        for doc in tenon_api::crds::crds_yaml().unwrap().split("\n---\n") {
            let crd: CustomResourceDefinition = serde_yaml::from_str(doc).unwrap();
            crds.create(&PostParams::default(), &crd).await.unwrap();
        }
        let settings = Cli::parse_from(["tenon", "--cluster-name", "memory"]).settings;
        let stores = Stores::start(&client, &settings.scheduler_config);
        stores.wait_synced().await.unwrap();
        let cloud = Arc::new(MemoryCloud::new(catalog));
        let policies = Policies::new(None, settings.policy_deadline_ms).unwrap();
        let ctx = Arc::new(Context::new(
            client.clone(),
            Arc::new(Leadership::sole()),
            settings,
            stores,
            cloud.clone(),
            Arc::new(Metrics::default()),
            policies,
            spot_to_spot,
        ));
        World { emulator, client, ctx, cloud }
    }

    async fn create<K>(&self, yaml: &str) -> K
    where
        K: kube::Resource<Scope = kube::core::ClusterResourceScope, DynamicType = ()>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let obj: K = serde_yaml::from_str(yaml).unwrap();
        Api::<K>::all(self.client.clone()).create(&PostParams::default(), &obj).await.unwrap()
    }

    /// Waits until `done` holds of the caches (they follow the emulator's watch).
    async fn until(&self, what: &str, done: impl Fn(&Context) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(&self.ctx) {
            assert!(Instant::now() < deadline, "not within 10 s: {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The EC2NodeClass `default`, resolved by the NodeClass reconciler.
    async fn ready_nodeclass(&self) -> EC2NodeClass {
        self.create::<EC2NodeClass>(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: default}\nspec:\n  role: KarpenterNodeRole-memory\n  amiSelectorTerms: [{alias: al2023@latest}]\n  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: memory}}]\n  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: memory}}]\n",
        )
        .await;
        self.until("the EC2NodeClass in the cache", |c| !c.stores.nodeclasses.state().is_empty()).await;
        NodeClasses::new(self.ctx.clone()).reconcile().await.unwrap();
        let api: Api<EC2NodeClass> = Api::all(self.client.clone());
        let nc = api.get("default").await.unwrap();
        self.until("the resolved EC2NodeClass in the cache", |c| {
            c.stores.nodeclasses.state().iter().any(|n| n.status.as_ref().is_some_and(|s| !s.subnets.is_empty()))
        })
        .await;
        nc
    }
}

fn condition_status(conditions: &[tenon_api::common::Condition], kind: &str) -> Option<String> {
    conditions.iter().find(|c| c.type_ == kind).map(|c| c.status.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nodeclass_reconciler_writes_what_the_cloud_resolved() {
    let w = World::new().await;
    let nc = w.ready_nodeclass().await;
    let status = nc.status.expect("a status written");
    // One subnet per zone the synthetic types are offered in.
    let zones: Vec<&str> = status.subnets.iter().map(|s| s.zone.as_str()).collect();
    assert_eq!(zones, ["test-zone-1", "test-zone-2", "test-zone-3"]);
    assert_eq!(status.instance_profile.as_deref(), Some("profile-default"));
    assert_eq!(
        condition_status(&status.conditions, condition::READY).as_deref(),
        Some("True"),
        "{:?}",
        status.conditions
    );
}

impl World {
    /// A NodeClaim for 1.5 vCPU of `capacity_type`, launched by the lifecycle reconciler.
    async fn launched(&self, capacity_type: &str) -> NodeClaim {
        self.launched_with(capacity_type, "").await
    }

    /// As [`World::launched`], with `spec` (YAML lines at the NodeClaim spec's indentation).
    async fn launched_with(&self, capacity_type: &str, spec: &str) -> NodeClaim {
        self.launched_as("[fake-it-1, fake-it-2]", capacity_type, "cpu: 1500m", spec).await
    }

    /// As [`World::launched_with`], of `types` (a YAML flow list), requesting `requests` (a
    /// YAML flow mapping's body).
    async fn launched_as(&self, types: &str, capacity_type: &str, requests: &str, spec: &str) -> NodeClaim {
        // NodePool `default`, unless the case made its own.
        if self.ctx.stores.nodepools.state().is_empty() {
            self.pool_with(serde_json::json!({})).await;
        }
        self.create::<NodeClaim>(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: default-abcde, labels: {{karpenter.sh/nodepool: default}}}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements:\n  - {{key: node.kubernetes.io/instance-type, operator: In, values: {types}}}\n  - {{key: karpenter.sh/capacity-type, operator: In, values: [{capacity_type}]}}\n  resources: {{requests: {{{requests}}}}}\n{spec}"
        ))
        .await;
        self.until("the NodeClaim in the cache", |c| !c.stores.nodeclaims.state().is_empty()).await;
        let nc = self.lifecycle_until(&mut Lifecycle::new(self.ctx.clone()), condition::LAUNCHED).await;
        self.until("the launched NodeClaim in the cache", |c| {
            c.stores.nodeclaims.state().iter().any(|n| n.status.as_ref().is_some_and(|s| s.provider_id.is_some()))
        })
        .await;
        nc
    }

    /// Runs `lifecycle` until NodeClaim `default-abcde` has condition `t` True (10 s at
    /// most); the NodeClaim then.
    async fn lifecycle_until(&self, lifecycle: &mut Lifecycle, t: &str) -> NodeClaim {
        self.lifecycle_until_for(lifecycle, "default-abcde", t).await
    }

    /// Runs `lifecycle` until NodeClaim `name` has condition `t` True (10 s at most); the
    /// NodeClaim then.
    async fn lifecycle_until_for(&self, lifecycle: &mut Lifecycle, name: &str, t: &str) -> NodeClaim {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            lifecycle.reconcile().await.unwrap();
            let nc = api.get(name).await.unwrap();
            let conditions = nc.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
            if condition_status(conditions, t).as_deref() == Some("True") {
                return nc;
            }
            assert!(Instant::now() < deadline, "{name} not {t} within 10 s: {:?}", nc.status);
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_lifecycle_reconciler_launches_a_nodeclaim_in_the_cloud_and_records_its_instance() {
    let w = World::new().await;
    let launched = w.launched("on-demand").await;
    let instances = w.cloud.instances();
    assert_eq!(instances.len(), 1, "one instance for one NodeClaim: {instances:?}");
    let instance = &instances[0];
    // The cheapest type that fits 1.5 vCPU (fake-it-1: 2 vCPU), on-demand as required.
    assert_eq!((instance.instance_type.as_str(), instance.capacity_type.as_str()), ("fake-it-1", "on-demand"));
    assert_eq!(instance.nodeclaim(), Some("default-abcde"));
    let status = launched.status.unwrap();
    assert_eq!(status.provider_id.as_deref(), Some(instance.provider_id.as_str()));
    let labels = launched.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("node.kubernetes.io/instance-type").map(String::as_str), Some("fake-it-1"));
    assert_eq!(labels.get("topology.kubernetes.io/zone"), Some(&instance.zone));
}

// Karpenter's lifecycle (launch_test:73, registration_test:140, initialization_test:113,
// liveness_test:98, suite_test:127) and termination (termination_test:127) controllers ignore
// NodeClaims of another provider's NodeClass: nothing launched, nothing deleted past a
// liveness timeout, no finalizer or condition written, its Node left as it is, and its
// deletion left to its own controller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeclaim_of_another_nodeclass_is_left_alone_by_lifecycle_and_termination() {
    use crate::controller::termination::Termination;
    use k8s_openapi::api::core::v1::Node;
    let w = World::new().await;
    w.ready_nodeclass().await;
    let nc = w
        .create::<NodeClaim>(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: other, finalizers: [karpenter.sh/termination]}\nspec:\n  nodeClassRef: {group: karpenter.test.sh, kind: TestNodeClass, name: default}\n  requirements: []\n",
        )
        .await;
    let api: Api<NodeClaim> = Api::all(w.client.clone());
    let mut with_status = nc.clone();
    // Launched at the start of the year and never Registered: a NodeClaim of ours would be
    // past its registration liveness and deleted, and its Node registered if it appeared.
    let launched = serde_json::json!({"type": "Launched", "status": "True", "reason": "Launched", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"});
    // The registration clock runs from this condition's transition.
    let registered = serde_json::json!({"type": "Registered", "status": "Unknown", "reason": "AwaitingReconciliation",
        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"});
    with_status.status = Some(
        serde_json::from_value(
            serde_json::json!({"providerID": "test:///other", "nodeName": "other", "conditions": [launched, registered]}),
        )
        .unwrap(),
    );
    let status = serde_json::json!({"status": with_status.status});
    api.patch_status("other", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&status)).await.unwrap();
    w.create::<Node>(
        "apiVersion: v1\nkind: Node\nmetadata: {name: other, labels: {karpenter.sh/nodepool: default}}\nspec:\n  providerID: test:///other\n  taints: [{key: karpenter.sh/unregistered, effect: NoExecute}]\n",
    )
    .await;
    w.until("the NodeClaim and Node in the cache", |c| {
        !c.stores.nodes.state().is_empty()
            && c.stores.nodeclaims.state().iter().any(|n| n.status.as_ref().is_some_and(|s| s.provider_id.is_some()))
    })
    .await;
    let before = api.get("other").await.unwrap();
    let node_before = Api::<Node>::all(w.client.clone()).get("other").await.unwrap();
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    let mut termination = Termination::new(w.ctx.clone());
    for _ in 0..3 {
        lifecycle.reconcile().await.unwrap();
        termination.reconcile().await.unwrap();
    }
    assert!(w.cloud.instances().is_empty(), "nothing launched");
    let after = api.get("other").await.unwrap();
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version, "the NodeClaim is not written");
    let node_after = Api::<Node>::all(w.client.clone()).get("other").await.unwrap();
    assert_eq!(node_after.metadata.resource_version, node_before.metadata.resource_version, "its Node is not written");
    // Deleted: its finalizer is its own controller's to remove, not ours.
    api.delete("other", &Default::default()).await.unwrap();
    w.until("the deletion in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|n| n.metadata.deletion_timestamp.is_some())
    })
    .await;
    for _ in 0..3 {
        lifecycle.reconcile().await.unwrap();
        termination.reconcile().await.unwrap();
    }
    let deleting = api.get("other").await.unwrap();
    assert_eq!(deleting.metadata.finalizers.unwrap_or_default(), ["karpenter.sh/termination"]);
    let conditions: Vec<String> = deleting.status.unwrap_or_default().conditions.into_iter().map(|c| c.type_).collect();
    assert_eq!(conditions, ["Launched", "Registered"], "no condition written but its own");
    let node_then = Api::<Node>::all(w.client.clone()).get("other").await.expect("its Node is not deleted");
    assert!(node_then.metadata.deletion_timestamp.is_none(), "its Node is not deleted");
    assert_eq!(node_then.metadata.resource_version, node_before.metadata.resource_version, "nor written");
}

impl World {
    /// Node `node-a` for the launched NodeClaim, as the kubelet registers it with `taints`
    /// (YAML flow mappings), once in the cache.
    async fn kubelet_registers(&self, nc: NodeClaim, taints: &[String]) {
        let provider_id = nc.status.and_then(|s| s.provider_id).expect("a provider ID");
        let taints: String = taints.iter().map(|t| format!("  - {t}\n")).collect();
        self.create::<k8s_openapi::api::core::v1::Node>(&format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: node-a}}\nspec:\n  providerID: {provider_id}\n  taints:\n{taints}"
        ))
        .await;
        self.until("the Node in the cache", |c| !c.stores.nodes.state().is_empty()).await;
    }
}

impl World {
    /// Node `node-a` Ready as its kubelet reports it, with `capacity` (also its allocatable)
    /// if reported yet; once cached.
    async fn kubelet_reports(&self, capacity: Option<serde_json::Value>) {
        use kube::api::{Patch, PatchParams};
        let mut status = serde_json::json!({
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": ""}]});
        if let Some(c) = capacity {
            status["capacity"] = c.clone();
            status["allocatable"] = c;
        }
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(self.client.clone());
        let patch = serde_json::json!({"status": status});
        let written = nodes.patch_status("node-a", &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap();
        self.until("the kubelet's report in the cache", |c| {
            c.stores.nodes.state().iter().any(|n| n.metadata.resource_version == written.metadata.resource_version)
        })
        .await;
    }

    /// NodeClaim `default-abcde`'s conditions after three passes of `lifecycle`.
    async fn conditions_after_passes(&self, lifecycle: &mut Lifecycle) -> Vec<tenon_api::common::Condition> {
        for _ in 0..3 {
            lifecycle.reconcile().await.unwrap();
        }
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        claims.get("default-abcde").await.unwrap().status.unwrap().conditions
    }
}

fn taint_keys(node: &k8s_openapi::api::core::v1::Node) -> Vec<String> {
    node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default().into_iter().map(|t| t.key).collect()
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:112
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeclaim_is_initialized_once_its_node_is_ready_with_capacity() {
    use k8s_openapi::api::core::v1::Node;
    let w = World::new().await;
    let nc = w.launched("on-demand").await;
    w.kubelet_registers(nc, &["{key: karpenter.sh/unregistered, effect: NoExecute}".to_string()]).await;
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    w.lifecycle_until(&mut lifecycle, condition::REGISTERED).await;
    let nodes: Api<Node> = Api::all(w.client.clone());
    // Ready, but the kubelet has not reported its capacity yet.
    w.kubelet_reports(None).await;
    let conditions = w.conditions_after_passes(&mut lifecycle).await;
    assert_eq!(condition_status(&conditions, condition::INITIALIZED).as_deref(), Some("Unknown"), "no capacity yet");
    w.kubelet_reports(Some(serde_json::json!({"cpu": "2", "memory": "4Gi", "pods": "20"}))).await;
    w.lifecycle_until(&mut lifecycle, condition::INITIALIZED).await;
    let node = nodes.get("node-a").await.unwrap();
    assert_eq!(
        node.metadata.labels.unwrap_or_default().get("karpenter.sh/initialized").map(String::as_str),
        Some("true")
    );
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:441
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeclaim_is_initialized_once_its_startup_taints_are_gone() {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Patch, PatchParams};
    let w = World::new().await;
    let startup = "  startupTaints: [{key: example.com/startup, effect: NoSchedule}]\n";
    let nc = w.launched_with("on-demand", startup).await;
    let taints = [
        "{key: karpenter.sh/unregistered, effect: NoExecute}".to_string(),
        "{key: example.com/startup, effect: NoSchedule}".to_string(),
    ];
    w.kubelet_registers(nc, &taints).await;
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    w.lifecycle_until(&mut lifecycle, condition::REGISTERED).await;
    w.kubelet_reports(Some(serde_json::json!({"cpu": "2", "memory": "4Gi", "pods": "20"}))).await;
    let conditions = w.conditions_after_passes(&mut lifecycle).await;
    assert_eq!(condition_status(&conditions, condition::REGISTERED).as_deref(), Some("True"));
    assert_eq!(
        condition_status(&conditions, condition::INITIALIZED).as_deref(),
        Some("Unknown"),
        "a startup taint is on"
    );
    // Its owner (a CNI, say) removes the startup taint.
    let nodes: Api<Node> = Api::all(w.client.clone());
    nodes
        .patch("node-a", &PatchParams::default(), &Patch::Merge(&serde_json::json!({"spec": {"taints": []}})))
        .await
        .unwrap();
    w.lifecycle_until(&mut lifecycle, condition::INITIALIZED).await;
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:253
/// karpenter:pkg/controllers/nodeclaim/lifecycle/initialization_test.go:304
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_requested_resource_holds_initialization_until_the_node_reports_it() {
    use k8s_openapi::api::core::v1::Node;
    // The synthetic catalog and a 2-CPU type with a GPU.
    let mut catalog = tenon_core::catalog::synthetic(4);
    let t = catalog[1].clone();
    let mut capacity = t.capacity.clone();
    capacity.set("nvidia.com/gpu", 1);
    let name = |r: &tenon_core::requirements::Requirement| match r.key.as_str() {
        "node.kubernetes.io/instance-type" => tenon_core::requirements::Requirement::in_values(&r.key, ["fake-gpu-1"]),
        _ => r.clone(),
    };
    let reqs = t.requirements.iter().map(name).collect();
    catalog.push(tenon_core::instancetype::InstanceType::new("fake-gpu-1", reqs, capacity, t.overhead, t.offerings));
    let w = World::start(false, catalog).await;
    let nc = w.launched_as("[fake-gpu-1]", "on-demand", "cpu: 1500m, nvidia.com/gpu: \"1\"", "").await;
    w.kubelet_registers(nc, &["{key: karpenter.sh/unregistered, effect: NoExecute}".to_string()]).await;
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    w.lifecycle_until(&mut lifecycle, condition::REGISTERED).await;
    // Ready with its capacity, but the device plugin has not registered the GPU yet.
    let nodes: Api<Node> = Api::all(w.client.clone());
    w.kubelet_reports(Some(serde_json::json!({"cpu": "2", "memory": "4Gi", "pods": "20"}))).await;
    let conditions = w.conditions_after_passes(&mut lifecycle).await;
    assert_eq!(condition_status(&conditions, condition::REGISTERED).as_deref(), Some("True"));
    assert_eq!(condition_status(&conditions, condition::INITIALIZED).as_deref(), Some("Unknown"), "{conditions:?}");
    let labels = nodes.get("node-a").await.unwrap().metadata.labels.unwrap_or_default();
    assert!(!labels.contains_key("karpenter.sh/initialized"), "{labels:?}");
    // The GPU registers: initialized.
    w.kubelet_reports(Some(serde_json::json!({"cpu": "2", "memory": "4Gi", "pods": "20", "nvidia.com/gpu": "1"})))
        .await;
    w.lifecycle_until(&mut lifecycle, condition::INITIALIZED).await;
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/launch_test.go:89
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeclaim_no_offering_can_launch_is_deleted() {
    use crate::controller::cloud::Cloud;
    let w = World::new().await;
    w.ready_nodeclass().await;
    // EC2 has no on-demand capacity left for the types the NodeClaim allows.
    for it in ["fake-it-1", "fake-it-2"] {
        for zone in ["test-zone-1", "test-zone-2", "test-zone-3"] {
            let offering =
                UnavailableOffering { instance_type: it.into(), zone: zone.into(), capacity_type: "on-demand".into() };
            w.cloud.mark_unavailable(offering, Instant::now());
        }
    }
    w.create::<NodeClaim>(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: default-abcde, labels: {karpenter.sh/nodepool: default}}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n  requirements:\n  - {key: node.kubernetes.io/instance-type, operator: In, values: [fake-it-1, fake-it-2]}\n  - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}\n",
    )
    .await;
    w.until("the NodeClaim in the cache", |c| !c.stores.nodeclaims.state().is_empty()).await;
    w.lifecycle_until_deleted().await;
    assert!(w.cloud.instances().is_empty(), "nothing launched");
}

impl World {
    /// Runs the lifecycle reconciler until NodeClaim `default-abcde` is deleted (10 s at most).
    async fn lifecycle_until_deleted(&self) {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let mut lifecycle = Lifecycle::new(self.ctx.clone());
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            lifecycle.reconcile().await.unwrap();
            if api.get_opt("default-abcde").await.unwrap().is_none_or(|nc| nc.metadata.deletion_timestamp.is_some()) {
                return;
            }
            assert!(Instant::now() < deadline, "the NodeClaim is not deleted within 10 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/launch_test.go:97
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nodeclaim_whose_nodeclass_is_not_ready_is_deleted() {
    let w = World::new().await;
    w.ready_nodeclass().await;
    w.create::<NodeClaim>(
        "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: default-abcde, labels: {karpenter.sh/nodepool: default}}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: missing}\n  requirements: []\n",
    )
    .await;
    w.until("the NodeClaim in the cache", |c| !c.stores.nodeclaims.state().is_empty()).await;
    w.lifecycle_until_deleted().await;
    assert!(w.cloud.instances().is_empty(), "nothing launched");
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:139
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_coming_online_is_matched_by_provider_id_and_its_nodepool_registers_healthy() {
    use crate::controller::nodepool::status::NodePoolStatusReconciler;
    let w = World::new().await;
    let nc = w.owned_and_launched().await;
    let pools: Api<NodePool> = Api::all(w.client.clone());
    // The NodePool's status as the controller keeps it from its creation: registration
    // health Unknown until a NodeClaim of it registers.
    NodePoolStatusReconciler::new(w.ctx.clone()).reconcile().await.unwrap();
    let health = |p: NodePool| {
        condition_status(&p.status.map(|s| s.conditions).unwrap_or_default(), condition::NODE_REGISTRATION_HEALTHY)
    };
    assert_eq!(health(pools.get("default").await.unwrap()).as_deref(), Some("Unknown"));
    w.until("the NodePool's status in the cache", |c| {
        c.stores.nodepools.state().iter().any(|p| p.status.as_ref().is_some_and(|s| !s.conditions.is_empty()))
    })
    .await;
    w.kubelet_registers(nc, &["{key: karpenter.sh/unregistered, effect: NoExecute}".to_string()]).await;
    let registered = w.lifecycle_until(&mut Lifecycle::new(w.ctx.clone()), condition::REGISTERED).await;
    assert_eq!(registered.status.and_then(|s| s.node_name).as_deref(), Some("node-a"), "matched by its provider ID");
    w.until("the registered NodeClaim in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|n| n.status.as_ref().is_some_and(|s| s.node_name.is_some()))
    })
    .await;
    NodePoolStatusReconciler::new(w.ctx.clone()).reconcile().await.unwrap();
    assert_eq!(health(pools.get("default").await.unwrap()).as_deref(), Some("True"));
}

impl World {
    /// A NodeClaim launched and owned by its NodePool `default`, as the provisioner creates
    /// it (cached).
    async fn owned_and_launched(&self) -> NodeClaim {
        let nc = self.launched("on-demand").await;
        let pools: Api<NodePool> = Api::all(self.client.clone());
        let uid = pools.get("default").await.unwrap().metadata.uid.unwrap();
        let owner = serde_json::json!({"metadata": {"ownerReferences": [
            {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "name": "default", "uid": uid, "blockOwnerDeletion": true}]}});
        let claims: Api<NodeClaim> = Api::all(self.client.clone());
        let nc = claims
            .patch(nc.metadata.name.as_deref().unwrap(), &Default::default(), &kube::api::Patch::Merge(&owner))
            .await
            .unwrap();
        self.until("the owned NodeClaim in the cache", |c| {
            c.stores
                .nodeclaims
                .state()
                .iter()
                .any(|n| n.metadata.owner_references.as_ref().is_some_and(|o| !o.is_empty()))
        })
        .await;
        nc
    }
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:495
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registration_turns_a_nodepool_said_unhealthy_healthy() {
    use crate::controller::nodepool::status::NodePoolStatusReconciler;
    let w = World::new().await;
    let nc = w.owned_and_launched().await;
    // The NodePool says registrations failed (as written before a restart: nothing recorded).
    let pools: Api<NodePool> = Api::all(w.client.clone());
    let class = Api::<EC2NodeClass>::all(w.client.clone()).get("default").await.unwrap();
    let said = serde_json::json!({"status": {
        "nodeClassObservedGeneration": class.metadata.generation,
        "conditions": [{"type": condition::NODE_REGISTRATION_HEALTHY, "status": "False", "reason": "unhealthy",
                        "message": "unhealthy", "observedGeneration": 1, "lastTransitionTime": "2026-11-30T00:00:00Z"}]}});
    let written = pools.patch_status("default", &Default::default(), &kube::api::Patch::Merge(&said)).await.unwrap();
    w.until("the unhealthy NodePool in the cache", |c| {
        c.stores.nodepools.state().iter().any(|p| p.metadata.resource_version == written.metadata.resource_version)
    })
    .await;
    w.kubelet_registers(nc, &["{key: karpenter.sh/unregistered, effect: NoExecute}".to_string()]).await;
    let registered = w.lifecycle_until(&mut Lifecycle::new(w.ctx.clone()), condition::REGISTERED).await;
    assert_eq!(registered.status.and_then(|s| s.node_name).as_deref(), Some("node-a"));
    NodePoolStatusReconciler::new(w.ctx.clone()).reconcile().await.unwrap();
    let pool = pools.get("default").await.unwrap();
    let health =
        condition_status(&pool.status.map(|s| s.conditions).unwrap_or_default(), condition::NODE_REGISTRATION_HEALTHY);
    assert_eq!(health.as_deref(), Some("True"));
}

/// karpenter:pkg/controllers/nodeclaim/lifecycle/registration_test.go:466
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_taints_removed_from_a_registered_node_are_not_synced_again() {
    use k8s_openapi::api::core::v1::Node;
    use kube::api::{Patch, PatchParams};
    let w = World::new().await;
    let startup = "example.com/cni-not-ready";
    let nc =
        w.launched_with("on-demand", &format!("  startupTaints: [{{key: {startup}, effect: NoSchedule}}]\n")).await;
    let taints = [
        "{key: karpenter.sh/unregistered, effect: NoExecute}".to_string(),
        format!("{{key: {startup}, effect: NoSchedule}}"),
    ];
    w.kubelet_registers(nc, &taints).await;
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    w.lifecycle_until(&mut lifecycle, condition::REGISTERED).await;
    let nodes: Api<Node> = Api::all(w.client.clone());
    assert_eq!(taint_keys(&nodes.get("node-a").await.unwrap()), [startup]);
    // The startup taint's owner removes it; the controller sees the change and reconciles.
    let cleared = serde_json::json!({"spec": {"taints": []}});
    nodes.patch("node-a", &PatchParams::default(), &Patch::Merge(&cleared)).await.unwrap();
    w.until("the untainted Node in the cache", |c| c.stores.nodes.state().iter().all(|n| taint_keys(n).is_empty()))
        .await;
    for _ in 0..3 {
        lifecycle.reconcile().await.unwrap();
    }
    assert!(taint_keys(&nodes.get("node-a").await.unwrap()).is_empty(), "no startup taint synced again");
}

// Karpenter patches the Node under an optimistic lock (registration.go): a merge patch
// replaces the taint list whole, and a CNI agent removing its startup taint writes the same
// list at the same moment.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_startup_taint_removed_while_the_node_registers_stays_removed() {
    use k8s_openapi::api::core::v1::Node;
    let w = World::new().await;
    let startup = "example.com/cni-not-ready";
    let nc = w
        .launched_with(
            "on-demand",
            &format!("  startupTaints: [{{key: {startup}, effect: NoSchedule}}]\n  taints: [{{key: example.com/team, value: a, effect: NoSchedule}}]\n"),
        )
        .await;
    // As the kubelet registers it, with the taints the user data gives it.
    let taints = [
        "{key: karpenter.sh/unregistered, effect: NoExecute}".to_string(),
        format!("{{key: {startup}, effect: NoSchedule}}"),
    ];
    w.kubelet_registers(nc, &taints).await;
    // The CNI agent removes its taint just before the controller's first write to the Node.
    w.emulator.write_before_next("patch", "nodes", None, 1, move |node| {
        if let Some(taints) = node["spec"]["taints"].as_array_mut() {
            taints.retain(|t| t["key"] != startup);
        }
    });
    let mut lifecycle = Lifecycle::new(w.ctx.clone());
    w.lifecycle_until(&mut lifecycle, condition::REGISTERED).await;
    let node = Api::<Node>::all(w.client.clone()).get("node-a").await.unwrap();
    assert_eq!(
        taint_keys(&node),
        ["example.com/team"],
        "the CNI agent's removal and the controller's own changes both land"
    );
    let labels = node.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("karpenter.sh/registered").map(String::as_str), Some("true"));
    assert_eq!(node.metadata.finalizers.unwrap_or_default(), ["karpenter.sh/termination"]);
}

impl World {
    /// NodeClaim `default-abcde` of `capacity_type` launched, then EC2's `kind` message for
    /// its instance handled by the interruption controller until the NodeClaim is being
    /// deleted and the message deleted from the queue; the instance.
    async fn interrupted(&self, capacity_type: &str, kind: InterruptionKind) -> tenon_core::cloud::Instance {
        self.launched(capacity_type).await;
        let instance = self.cloud.instances().remove(0);
        let time = "2026-12-06T12:00:00Z".into();
        self.cloud.send(InterruptionEvent { kind, instance_ids: vec![instance.id.clone()], time });
        let running = tokio::spawn(self.interruption().run("memory".into()));
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let deadline = Instant::now() + Duration::from_secs(10);
        while api.get_opt("default-abcde").await.unwrap().is_some_and(|nc| nc.metadata.deletion_timestamp.is_none())
            || self.cloud.acked() == 0
        {
            assert!(Instant::now() < deadline, "the interrupted NodeClaim is not being deleted within 10 s");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        running.abort();
        assert_eq!(self.cloud.acked(), 1, "the one message is deleted from the queue");
        instance
    }

    /// `karpenter_nodeclaims_disrupted_total` for NodeClaim `default-abcde` (NodePool
    /// `default`, no grace period) of `capacity_type` disrupted for `reason`.
    fn disrupted(&self, reason: &str, capacity_type: &str) -> Option<f64> {
        use crate::controller::metrics::catalog::NODECLAIMS_DISRUPTED;
        let labels = [
            ("reason", reason),
            ("nodepool", "default"),
            ("capacity_type", capacity_type),
            ("consolidation_policy", ""),
            ("termination_mode", "graceful"),
        ];
        self.ctx.metrics.value(NODECLAIMS_DISRUPTED, &labels)
    }
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:137
/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:279
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_interruption_from_the_cloud_deletes_its_nodeclaim_and_marks_the_offering_unavailable() {
    let w = World::new().await;
    let instance = w.interrupted("spot", InterruptionKind::SpotInterruption).await;
    assert_eq!(w.disrupted("spot_interrupted", "spot"), Some(1.0));
    let offering = UnavailableOffering {
        instance_type: instance.instance_type.clone(),
        zone: instance.zone.clone(),
        capacity_type: "spot".into(),
    };
    assert!(w.cloud.unavailable().contains(&offering), "{:?}", w.cloud.unavailable());
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:175
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_change_message_deletes_its_nodeclaim() {
    let w = World::new().await;
    w.interrupted("on-demand", InterruptionKind::ScheduledChange).await;
    assert_eq!(w.disrupted("scheduled_change", "on-demand"), Some(1.0));
    assert!(w.cloud.unavailable().is_empty(), "no offering is marked for a scheduled change");
}

// Karpenter writes a NodeClaim's status under an optimistic lock: its conditions are one
// list, which another writer (a reconciler of ours, another controller) may change meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_written_while_the_nodeclaim_launches_is_kept() {
    let w = World::new().await;
    w.emulator.write_before_next("patch", "nodeclaims/status", None, 1, |nc| {
        let example = serde_json::json!({"type": "Example", "status": "True", "reason": "Example", "message": "",
            "lastTransitionTime": "2026-12-06T00:00:00Z"});
        match nc["status"]["conditions"].as_array_mut() {
            Some(conditions) => conditions.push(example),
            None => nc["status"]["conditions"] = serde_json::json!([example]),
        }
    });
    let nc = w.launched("on-demand").await;
    let status = nc.status.expect("a status");
    assert!(status.provider_id.is_some(), "the launch is recorded");
    assert_eq!(condition_status(&status.conditions, "Example").as_deref(), Some("True"), "{:?}", status.conditions);
}

impl World {
    /// NodeClaim `default-abcde` of `capacity_type` (with `spec` lines) launched, its Node
    /// `node-a` (2 CPUs) registered, Ready and Initialized, pod `web` (100m, of a ReplicaSet,
    /// with `pod_meta` flow-mapping entries) bound to it.
    async fn initialized_with_pod(&self, capacity_type: &str, spec: &str, pod_meta: &str) {
        use k8s_openapi::api::core::v1::{Node, Pod};
        let nc = self.launched_with(capacity_type, spec).await;
        self.kubelet_registers(nc, &["{key: karpenter.sh/unregistered, effect: NoExecute}".to_string()]).await;
        let ready = serde_json::json!({"status": {
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": ""}],
            "capacity": {"cpu": "2", "memory": "4Gi", "pods": "20"},
            "allocatable": {"cpu": "1900m", "memory": "4Gi", "pods": "20"},
        }});
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes
            .patch_status("node-a", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&ready))
            .await
            .unwrap();
        let pod: Pod = serde_yaml::from_str(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: web, namespace: default, {pod_meta} ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: 00000000-0000-0000-0000-000000000001, controller: true}}]}}\nspec:\n  nodeName: node-a\n  containers: [{{name: app, image: app, resources: {{requests: {{cpu: 100m}}}}}}]\nstatus: {{phase: Running}}\n"
        ))
        .unwrap();
        Api::<Pod>::namespaced(self.client.clone(), "default").create(&PostParams::default(), &pod).await.unwrap();
        self.lifecycle_until(&mut Lifecycle::new(self.ctx.clone()), condition::INITIALIZED).await;
        self.until("the initialized NodeClaim and the pod in the cache", |c| {
            !c.stores.pods.state().is_empty()
                && c.stores.nodeclaims.state().iter().any(|n| {
                    n.status.as_ref().is_some_and(|s| {
                        condition_status(&s.conditions, condition::INITIALIZED).as_deref() == Some("True")
                    })
                })
        })
        .await;
    }

    /// Runs one disruption round, then waits (the recorder posts from its own queue) for an
    /// Event `reason` with `message` on both the Node and the NodeClaim.
    async fn disruption_says(&self, reason: &str, message: &str) {
        use crate::controller::disruption::Disruption;
        use k8s_openapi::api::core::v1::Event;
        Disruption::new(self.ctx.clone()).reconcile().await.unwrap();
        let said = |events: &[Event], kind: &str| {
            events.iter().any(|e| {
                e.involved_object.kind.as_deref() == Some(kind)
                    && e.reason.as_deref() == Some(reason)
                    && e.message.as_deref() == Some(message)
            })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let events: Vec<Event> =
                Api::<Event>::all(self.client.clone()).list(&Default::default()).await.unwrap().items;
            if said(&events, "Node") && said(&events, "NodeClaim") {
                return;
            }
            assert!(Instant::now() < deadline, "no {reason} {message:?} on the Node and the NodeClaim: {events:#?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Runs `disruption`'s rounds until `done` holds (100 at most), moving the orchestration
    /// clock on 5 s after each: a command is validated 15 s after it is decided.
    async fn disruption_until<F, Fut>(
        &self,
        disruption: &mut crate::controller::disruption::Disruption,
        what: &str,
        mut done: F,
    ) where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        for _ in 0..100 {
            disruption.reconcile().await.unwrap();
            if done().await {
                return;
            }
            self.ctx.advance(Duration::from_secs(5));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("not after 100 disruption rounds: {what}");
    }

    /// `rounds` disruption rounds, the orchestration clock moved on 5 s after each.
    async fn rounds(&self, disruption: &mut crate::controller::disruption::Disruption, rounds: usize) {
        for _ in 0..rounds {
            disruption.reconcile().await.unwrap();
            self.ctx.advance(Duration::from_secs(5));
        }
    }

    /// Neither the Node nor the NodeClaim is disrupted after disruption rounds past the
    /// validation wait (a decided command taints its candidate only 15 s after deciding):
    /// no disruption taint, nothing deleted, no replacement launched.
    async fn not_disrupted(&self) {
        use k8s_openapi::api::core::v1::Node;
        let mut disruption = crate::controller::disruption::Disruption::new(self.ctx.clone());
        self.rounds(&mut disruption, 5).await;
        let nodes = Api::<Node>::all(self.client.clone()).list(&Default::default()).await.unwrap().items;
        assert_eq!(nodes.len(), 1, "one Node");
        assert!(!taint_keys(&nodes[0]).iter().any(|t| t == "karpenter.sh/disrupted"), "{:?}", taint_keys(&nodes[0]));
        let claims = Api::<NodeClaim>::all(self.client.clone()).list(&Default::default()).await.unwrap().items;
        assert_eq!(claims.len(), 1, "one NodeClaim, no replacement");
        assert!(claims[0].metadata.deletion_timestamp.is_none());
        assert_eq!(self.cloud.instances().len(), 1, "nothing launched");
    }
}

/// karpenter:pkg/controllers/disruption/consolidation_test.go:1136
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_node_is_unconsolidatable_without_spot_to_spot_and_says_so() {
    let w = World::new().await;
    // A spot node of 2 CPUs holding one small pod: a 1-CPU spot node would be cheaper.
    w.initialized_with_pod("spot", "", "").await;
    let why = "SpotToSpotConsolidation is disabled, can't replace a spot node with a spot node";
    w.disruption_says("Unconsolidatable", why).await;
    w.not_disrupted().await;
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1124
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pdb_blocked_pod_under_a_termination_grace_period_blocks_graceful_disruption() {
    use k8s_openapi::api::policy::v1::PodDisruptionBudget;
    let w = World::new().await;
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(w.client.clone(), "default");
    let pdb: PodDisruptionBudget = serde_yaml::from_str(
        "metadata: {name: pdb}\nspec: {maxUnavailable: 0, selector: {matchLabels: {test: value}}}\n",
    )
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    let status = serde_json::json!({"status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}});
    pdbs.patch_status("pdb", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&status)).await.unwrap();
    w.initialized_with_pod("on-demand", "  terminationGracePeriod: 300s\n", "labels: {test: value},").await;
    w.disruption_says("DisruptionBlocked", "Pdb prevents pod evictions (PodDisruptionBudget=[default/pdb])").await;
    w.not_disrupted().await;
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1493
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_do_not_disrupt_pod_blocks_graceful_disruption_of_its_node() {
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "", "annotations: {karpenter.sh/do-not-disrupt: \"true\"},").await;
    let why = "Pod has \"karpenter.sh/do-not-disrupt\" annotation (Pod=default/web)";
    w.disruption_says("DisruptionBlocked", why).await;
    w.not_disrupted().await;
}

/// karpenter:pkg/controllers/disruption/suite_test.go:1678
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_nominated_for_a_pending_pod_is_no_candidate() {
    use k8s_openapi::api::core::v1::Pod;
    let w = World::new().await;
    w.initialized_with_pod("on-demand", "", "").await;
    // A pod kube-scheduler could not place: the node has room for it, so it is nominated.
    let pending: Pod = serde_yaml::from_str(
        "metadata: {name: pending, namespace: default, ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: 00000000-0000-0000-0000-000000000001, controller: true}]}\nspec:\n  containers: [{name: app, image: app, resources: {requests: {cpu: 100m}}}]\nstatus: {phase: Pending, conditions: [{type: PodScheduled, status: \"False\", reason: Unschedulable}]}\n",
    )
    .unwrap();
    let pods: Api<Pod> = Api::namespaced(w.client.clone(), "default");
    pods.create(&PostParams::default(), &pending).await.unwrap();
    // As kube-scheduler writes it (a create's status is not kept).
    let unschedulable = serde_json::json!({"status": pending.status});
    pods.patch_status("pending", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&unschedulable))
        .await
        .unwrap();
    w.until("the unschedulable pod in the cache", |c| {
        c.stores.pods.state().iter().any(|p| tenon_core::convert::is_provisionable(p))
    })
    .await;
    w.disruption_says("DisruptionBlocked", "Node is nominated for a pending pod").await;
    w.not_disrupted().await;
}

impl World {
    /// NodeClaim `default-abcde` launched on demand, EC2 reporting `checks` for its
    /// instance, and one instance-health check run; the NodeClaim as it is then.
    async fn health_checked(&self, checks: Vec<tenon_core::orchestration::instance_health::Check>) -> NodeClaim {
        let nc = self.launched("on-demand").await;
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        assert!(nc.metadata.finalizers.unwrap_or_default().iter().any(|f| f == "karpenter.sh/termination"));
        let instance = self.cloud.instances().remove(0);
        self.cloud.set_checks(&instance.id, checks);
        self.check_health_once().await;
        api.get("default-abcde").await.unwrap()
    }

    async fn check_health_once(&self) {
        self.interruption().check_once(&mut tenon_core::orchestration::instance_health::UnhealthySeen::default()).await;
    }

    /// The interruption controller over this world.
    fn interruption(&self) -> Interruption {
        Interruption {
            client: self.client.clone(),
            stores: self.ctx.stores.clone(),
            cloud: self.ctx.cloud.clone(),
            recorder: self.ctx.recorder.clone(),
            metrics: self.ctx.metrics.clone(),
            leadership: self.ctx.leadership.clone(),
        }
    }

    /// `karpenter_interruption_instance_status_unhealthy_total` for `category`.
    fn unhealthy(&self, category: &str) -> Option<f64> {
        use crate::controller::metrics::catalog::INSTANCE_STATUS_UNHEALTHY;
        self.ctx.metrics.value(INSTANCE_STATUS_UNHEALTHY, &[("category", category)])
    }
}

/// A failed check of `category` impaired for an hour (or a scheduled event).
fn failing(
    category: tenon_core::orchestration::interruption::HealthCategory,
) -> tenon_core::orchestration::instance_health::Check {
    let an_hour_ago = crate::controller::conditions::now_time().0.as_millisecond() - 3_600_000;
    let since =
        (category != tenon_core::orchestration::interruption::HealthCategory::EventStatus).then_some(an_hour_ago);
    tenon_core::orchestration::instance_health::Check { category, failed: true, impaired_since_ms: since }
}

const TERMINATION_TIMESTAMP: &str = "karpenter.sh/nodeclaim-termination-timestamp";

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:424
/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:514
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_event_deletes_the_nodeclaim_without_a_termination_timestamp() {
    use tenon_core::orchestration::interruption::HealthCategory;
    let w = World::new().await;
    // EC2 schedules the instance's retirement.
    let nc = w.health_checked(vec![failing(HealthCategory::EventStatus)]).await;
    // Still there (its finalizer), being deleted, and not stamped for a forceful termination.
    assert!(nc.metadata.deletion_timestamp.is_some(), "deleted: drained and replaced");
    let annotations = nc.metadata.annotations.unwrap_or_default();
    assert!(!annotations.contains_key(TERMINATION_TIMESTAMP), "{annotations:?}");
    assert_eq!(w.disrupted("event_status", "on-demand"), Some(1.0));
    assert_eq!(w.unhealthy("EventStatus"), Some(1.0));
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:321
/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:361
/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:396
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_reachability_check_deletes_the_nodeclaim_without_waiting_for_its_drain() {
    use tenon_core::orchestration::interruption::HealthCategory;
    for (category, label, category_label) in [
        (HealthCategory::SystemStatus, "system_status", "SystemStatus"),
        (HealthCategory::InstanceStatus, "instance_status", "InstanceStatus"),
    ] {
        let w = World::new().await;
        let nc = w.health_checked(vec![failing(category)]).await;
        assert!(nc.metadata.deletion_timestamp.is_some(), "{label}: deleted");
        let annotations = nc.metadata.annotations.unwrap_or_default();
        assert!(
            annotations.contains_key(TERMINATION_TIMESTAMP),
            "{label}: terminated without its drain: {annotations:?}"
        );
        assert_eq!(w.disrupted(label, "on-demand"), Some(1.0), "{label}");
        assert_eq!(w.unhealthy(category_label), Some(1.0), "{label}");
    }
}

/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:446
/// karpenter-provider-aws:pkg/controllers/interruption/suite_test.go:479
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_check_and_a_scheduled_event_stamp_once() {
    use tenon_core::orchestration::interruption::HealthCategory;
    let w = World::new().await;
    let nc =
        w.health_checked(vec![failing(HealthCategory::InstanceStatus), failing(HealthCategory::EventStatus)]).await;
    let stamp = nc.metadata.annotations.unwrap_or_default().get(TERMINATION_TIMESTAMP).cloned();
    assert!(stamp.is_some(), "forceful termination wins");
    assert!(nc.metadata.deletion_timestamp.is_some());
    // The next check writes nothing: the same stamp, the same resourceVersion.
    w.until("the deleting NodeClaim in the cache", |c| {
        c.stores.nodeclaims.state().iter().any(|n| n.metadata.deletion_timestamp.is_some())
    })
    .await;
    w.check_health_once().await;
    let again = Api::<NodeClaim>::all(w.client.clone()).get("default-abcde").await.unwrap();
    assert_eq!(again.metadata.annotations.unwrap_or_default().get(TERMINATION_TIMESTAMP).cloned(), stamp);
    assert_eq!(again.metadata.resource_version, nc.metadata.resource_version);
}

/// karpenter:pkg/controllers/node/termination/suite_test.go:143
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_node_of_another_nodeclass_is_left_to_its_own_controller() {
    use crate::controller::termination::Termination;
    use k8s_openapi::api::core::v1::Node;
    let w = World::new().await;
    w.create::<Node>(
        "apiVersion: v1\nkind: Node\nmetadata: {name: other, finalizers: [karpenter.sh/termination], labels: {karpenter.sh/nodepool: default, karpenter.test.sh/unmanagednodeclass: default}}\nspec: {providerID: test:///other}\n",
    )
    .await;
    let nodes: Api<Node> = Api::all(w.client.clone());
    nodes.delete("other", &Default::default()).await.unwrap();
    w.until("the deleting Node in the cache", |c| {
        c.stores.nodes.state().iter().any(|n| n.metadata.deletion_timestamp.is_some())
    })
    .await;
    let before = nodes.get("other").await.unwrap();
    let mut termination = Termination::new(w.ctx.clone());
    for _ in 0..3 {
        termination.reconcile().await.unwrap();
    }
    let after = nodes.get("other").await.expect("still there: its finalizer is not ours to remove");
    assert_eq!(after.metadata.resource_version, before.metadata.resource_version, "not written");
    assert_eq!(after.metadata.finalizers.unwrap_or_default(), ["karpenter.sh/termination"]);
}

mod blocked_tests;
mod cache_trim_tests;
mod claim_condition_tests;
mod consolidation_tests;
mod create_tests;
mod decision_metrics_tests;
mod delete_tests;
mod destination_tests;
mod disruption_mark_tests;
mod drift_tests;
mod emptiness_tests;
mod expiration_tests;
mod initialization_tests;
mod interruption_tests;
mod launch_lookup_tests;
mod liveness_tests;
mod nodes;
mod queue_tests;
mod quiet_tests;
mod ranked_launch_tests;
mod registration_health_tests;
mod replace_tests;
mod tenancy_tests;
mod validation_tests;
mod volume_limit_tests;
