//! (Long: the fixtures of every ported Karpenter suite share this one builder.)
//! Karpenter's test fixtures in Tenon's terms, for the ported cases of its suites
//! (tests/conformance/karpenter.tsv): the fake cloud provider's instance types
//! (`pkg/cloudprovider/fake`), and decisions made from Kubernetes objects written as YAML,
//! the controller's own path (`convert::snapshot`, then `schedule`).
//!
//! Karpenter's fake registers `size`, `special` and `integer` as well-known labels; Tenon's
//! well-known set is AWS's, so the fake types carry [`SIZE`] (`small`/`large`), [`EXOTIC`]
//! (`optional` on large types, DoesNotExist otherwise) and [`CPU`] in their place.

use super::GIB;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::storage::v1 as storage;
use std::collections::BTreeMap;
use std::sync::Arc;
use tenon_api::NodeClaim;
use tenon_api::NodePool;
use tenon_core::cached_pod;
use tenon_core::convert::{self, ClusterObjects};
use tenon_core::instancetype::{InstanceType, Offering};
use tenon_core::model::ClusterSnapshot;
use tenon_core::plan::NewNodeClaim;
use tenon_core::requirements::{Operator, Requirement, Requirements};
use tenon_core::resources::Resources;
use tenon_core::scorer::PriceScorer;
use tenon_core::{ProvisioningPlan, schedule};

pub const ZONES: [&str; 3] = ["test-zone-1", "test-zone-2", "test-zone-3"];
/// Karpenter's fake `size` label.
pub const SIZE: &str = "karpenter.k8s.aws/instance-size";
/// Karpenter's fake `special` label (`ExoticInstanceLabelKey`).
pub const EXOTIC: &str = "karpenter.k8s.aws/instance-gpu-name";
/// Karpenter's fake `integer` label: the CPU count.
pub const CPU: &str = "karpenter.k8s.aws/instance-cpu";
/// Karpenter's fake GPU resources.
pub const GPU_A: &str = "fake.com/vendor-a";
pub const GPU_B: &str = "fake.com/vendor-b";
/// Karpenter's test clock is irrelevant to scheduling; any fixed time will do.
pub const NOW: i64 = 1_795_996_800;

/// `fake.NewInstanceType`: a type and its options, Karpenter's defaults until changed.
#[derive(Clone, Debug)]
pub struct Fake {
    pub name: String,
    pub cpu: i64,
    /// Bytes.
    pub memory: i64,
    pub pods: i64,
    pub arch: String,
    pub os: Vec<String>,
    /// (capacity type, zone, price, available); `None`: Karpenter's five offerings at the
    /// resource price (spot in zones 1-2, on-demand in zones 1-3).
    pub offerings: Option<Vec<(String, String, f64, bool)>>,
    pub labels: Vec<Requirement>,
    /// Extended resources (name, units), e.g. `("nvidia.com/gpu", 2)`.
    pub extended: Vec<(String, i64)>,
}

/// A fake type named `name` with Karpenter's defaults: 4 CPU, 4 GiB, 5 pods, amd64,
/// OS linux/windows/darwin.
pub fn fake(name: &str) -> Fake {
    Fake {
        name: name.into(),
        cpu: 4,
        memory: 4 * GIB,
        pods: 5,
        arch: "amd64".into(),
        os: vec!["linux".into(), "windows".into(), "darwin".into()],
        offerings: None,
        labels: Vec::new(),
        extended: Vec::new(),
    }
}

impl Fake {
    pub fn resources(mut self, cpu: i64, memory: i64, pods: i64) -> Self {
        (self.cpu, self.memory, self.pods) = (cpu, memory, pods);
        self
    }
    pub fn arch(mut self, arch: &str) -> Self {
        self.arch = arch.into();
        self
    }
    pub fn os(mut self, os: &[&str]) -> Self {
        self.os = os.iter().map(|s| s.to_string()).collect();
        self
    }
    /// Offerings as (capacity type, zone, price, available).
    pub fn offerings(mut self, offerings: &[(&str, &str, f64, bool)]) -> Self {
        self.offerings = Some(offerings.iter().map(|(c, z, p, a)| (c.to_string(), z.to_string(), *p, *a)).collect());
        self
    }
    pub fn label(mut self, key: &str, values: &[&str]) -> Self {
        self.labels.push(Requirement::in_values(key, values.iter().copied()));
        self
    }
    pub fn extended(mut self, name: &str, units: i64) -> Self {
        self.extended.push((name.into(), units));
        self
    }

    /// Karpenter's `PriceFromResources`: 0.1 per CPU, 0.1 per GB (1e9 bytes), 1.0 for each
    /// fake GPU resource the type has.
    pub fn price(&self) -> f64 {
        let gpus = self.extended.iter().filter(|(n, _)| n == GPU_A || n == GPU_B).count();
        0.1 * self.cpu as f64 + 0.1 * self.memory as f64 / 1e9 + gpus as f64
    }

    pub fn build(self) -> InstanceType {
        let price = self.price();
        let offerings: Vec<Offering> = match self.offerings {
            Some(o) => o
                .into_iter()
                .map(|(capacity_type, zone, price, available)| Offering {
                    zone_id: None,
                    zone,
                    capacity_type,
                    price,
                    available,
                })
                .collect(),
            None => [("spot", 0), ("spot", 1), ("on-demand", 0), ("on-demand", 1), ("on-demand", 2)]
                .into_iter()
                .map(|(ct, z)| Offering {
                    zone_id: None,
                    zone: ZONES[z].into(),
                    capacity_type: ct.into(),
                    price,
                    available: true,
                })
                .collect(),
        };
        let large = self.cpu > 4 && self.memory > 8 * GIB;
        let mut reqs = Requirements::from_iter([
            Requirement::in_values("node.kubernetes.io/instance-type", [self.name.clone()]),
            Requirement::in_values("kubernetes.io/arch", [self.arch.clone()]),
            Requirement::in_values("kubernetes.io/os", self.os.clone()),
            Requirement::in_values(CPU, [self.cpu.to_string()]),
            Requirement::in_values(SIZE, [if large { "large" } else { "small" }]),
            if large {
                Requirement::in_values(EXOTIC, ["optional"])
            } else {
                Requirement::new(EXOTIC, Operator::DoesNotExist, Vec::<String>::new())
            },
        ]);
        for l in self.labels {
            reqs.add(l);
        }
        let mut capacity = Resources::new(self.cpu * 1000, self.memory, self.pods);
        capacity.extended = self.extended;
        InstanceType::new(&self.name, reqs, capacity, Resources::new(100, 10 << 20, 0), offerings)
    }
}

/// `fake.CloudProvider.GetInstanceTypes`: the catalog of Karpenter's scheduling suites.
pub fn default_types() -> Arc<Vec<InstanceType>> {
    Arc::new(vec![
        fake("default-instance-type").build(),
        fake("small-instance-type").resources(2, 2 * GIB, 5).build(),
        fake("gpu-vendor-instance-type").extended(GPU_A, 2).build(),
        fake("gpu-vendor-b-instance-type").extended(GPU_B, 2).build(),
        fake("arm-instance-type")
            .arch("arm64")
            .os(&["ios", "linux", "windows", "darwin"])
            .resources(16, 128 * GIB, 5)
            .build(),
        fake("single-pod-instance-type").resources(4, 4 * GIB, 1).build(),
    ])
}

/// `fake.InstanceTypesAssorted()`: every combination of CPU {1…64} × memory {1…128 GiB} ×
/// zone × capacity type × OS {linux, windows} × arch {amd64, arm64}, each type with one
/// offering (1,344 types).
pub fn assorted() -> Arc<Vec<InstanceType>> {
    let mut out = Vec::new();
    for cpu in [1, 2, 4, 8, 16, 32, 64] {
        for mem in [1, 2, 4, 8, 16, 32, 64, 128] {
            for zone in ZONES {
                for ct in ["spot", "on-demand"] {
                    for os in ["linux", "windows"] {
                        for arch in ["amd64", "arm64"] {
                            let name = format!("{cpu}-cpu-{mem}-mem-{arch}-{os}-{zone}-{ct}");
                            let f = fake(&name).resources(cpu, mem * GIB, 5).arch(arch).os(&[os]);
                            let price = f.price();
                            out.push(f.offerings(&[(ct, zone, price, true)]).build());
                        }
                    }
                }
            }
        }
    }
    Arc::new(out)
}

/// [`ClusterObjects`] owned, so that cases can edit them in place.
#[derive(Clone, Default)]
pub struct Objects {
    pub nodepools: Vec<NodePool>,
    pub nodeclaims: Vec<NodeClaim>,
    pub nodes: Vec<core::Node>,
    pub pods: Vec<cached_pod::Pod>,
    pub daemonsets: Vec<apps::DaemonSet>,
    pub pdbs: Vec<policy::PodDisruptionBudget>,
    pub namespaces: Vec<core::Namespace>,
    pub claims: Vec<core::PersistentVolumeClaim>,
    pub volumes: Vec<core::PersistentVolume>,
    pub storage_classes: Vec<storage::StorageClass>,
    pub csi_nodes: Vec<storage::CSINode>,
    pub services: Vec<core::Service>,
    pub replica_sets: Vec<apps::ReplicaSet>,
    pub stateful_sets: Vec<apps::StatefulSet>,
    pub replication_controllers: Vec<core::ReplicationController>,
    pub scheduler: tenon_api::scheduler_config::SchedulerConfig,
    pub pod_changes: BTreeMap<String, i64>,
}

impl Objects {
    /// The view the controller decides from.
    pub fn shared(&self) -> ClusterObjects {
        fn arcs<T: Clone>(v: &[T]) -> Vec<Arc<T>> {
            v.iter().cloned().map(Arc::new).collect()
        }
        ClusterObjects {
            nodepools: arcs(&self.nodepools),
            nodeclaims: arcs(&self.nodeclaims),
            nodes: arcs(&self.nodes),
            pods: arcs(&self.pods),
            daemonsets: arcs(&self.daemonsets),
            pdbs: arcs(&self.pdbs),
            namespaces: arcs(&self.namespaces),
            claims: arcs(&self.claims),
            volumes: arcs(&self.volumes),
            storage_classes: arcs(&self.storage_classes),
            volume_attachments: Vec::new(),
            csi_nodes: arcs(&self.csi_nodes),
            services: arcs(&self.services),
            replica_sets: arcs(&self.replica_sets),
            stateful_sets: arcs(&self.stateful_sets),
            replication_controllers: arcs(&self.replication_controllers),
            scheduler: self.scheduler.clone(),
            pod_changes: self.pod_changes.clone(),
        }
    }
}

/// Kubernetes objects to decide from, each written as YAML.
pub struct Cluster {
    pub objects: Objects,
    pub catalog: Arc<Vec<InstanceType>>,
    pub now: i64,
    /// Karpenter's `scheduling.MaxInstanceTypes`, lowered by some of its cases.
    pub max_instance_types: Option<usize>,
    /// Karpenter's `PreferencePolicy: Ignore` option.
    pub ignore_preferences: bool,
    /// Karpenter's `MinValuesPolicy: BestEffort` option.
    pub min_values_best_effort: bool,
    generated: usize,
}

fn yaml<T: serde::de::DeserializeOwned>(s: &str) -> T {
    serde_yaml::from_str(s).unwrap_or_else(|e| panic!("{e}\n{s}"))
}

impl Cluster {
    /// Every NodePool launches from `catalog`.
    pub fn new(catalog: Arc<Vec<InstanceType>>) -> Cluster {
        Cluster {
            objects: Objects::default(),
            catalog,
            now: NOW,
            max_instance_types: None,
            ignore_preferences: false,
            min_values_best_effort: false,
            generated: 0,
        }
    }

    /// A `karpenter.sh/v1` NodePool; `spec` is the YAML under `spec:` (indented 2).
    /// `nodeClassRef` defaults to an EC2NodeClass `default` when the template gives none.
    pub fn nodepool(&mut self, name: &str, spec: &str) -> &mut Self {
        let mut np: NodePool =
            yaml(&format!("apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: {name}}}\nspec:\n{spec}"));
        if np.spec.template.spec.node_class_ref.is_none() {
            np.spec.template.spec.node_class_ref =
                Some(yaml("{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}"));
        }
        self.objects.nodepools.push(np);
        self
    }

    /// The names of the catalog's instance types, sorted.
    pub fn catalog_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.catalog.iter().map(|t| t.name.clone()).collect();
        v.sort();
        v
    }

    /// A NodePool `default` with no requirements (Karpenter's `test.NodePool()`).
    pub fn default_nodepool(&mut self) -> &mut Self {
        self.nodepool("default", "  template:\n    spec:\n      requirements: []\n")
    }

    /// A pod kube-scheduler could not place (Karpenter's `test.UnschedulablePod`): `spec` is
    /// the YAML under `spec:` (indented 2); a `pause` container requesting nothing is added
    /// when the spec has none. Name it in `meta` (`{name: p, labels: {…}}`); namespace
    /// `default` unless given.
    pub fn pending(&mut self, meta: &str, spec: &str) -> &mut Self {
        let mut p: cached_pod::Pod =
            yaml(&format!("metadata: {meta}\nspec:\n{}", if spec.trim().is_empty() { "  {}\n" } else { spec }));
        self.complete(&mut p);
        p.status = Some(yaml(
            "{phase: Pending, conditions: [{type: PodScheduled, status: \"False\", reason: Unschedulable}]}",
        ));
        self.objects.pods.push(p);
        self
    }

    /// `n` pending pods alike, named `{prefix}-{i}`.
    pub fn pending_n(&mut self, n: usize, prefix: &str, labels: &str, spec: &str) -> &mut Self {
        for i in 0..n {
            self.pending(&format!("{{name: {prefix}-{i}, labels: {{{labels}}}}}"), spec);
        }
        self
    }

    /// A pod bound to node `node`, running.
    pub fn bound(&mut self, meta: &str, node: &str, spec: &str) -> &mut Self {
        let mut p: cached_pod::Pod =
            yaml(&format!("metadata: {meta}\nspec:\n{}", if spec.trim().is_empty() { "  {}\n" } else { spec }));
        self.complete(&mut p);
        p.spec.get_or_insert_with(Default::default).node_name = Some(node.into());
        p.status = Some(yaml("{phase: Running}"));
        self.objects.pods.push(p);
        self
    }

    fn complete(&mut self, p: &mut cached_pod::Pod) {
        self.generated += 1;
        let m = &mut p.metadata;
        m.namespace.get_or_insert_with(|| "default".into());
        m.name.get_or_insert_with(|| format!("pod-{}", self.generated));
        m.uid.get_or_insert_with(|| format!("uid-{}", self.generated));
        let spec = p.spec.get_or_insert_with(Default::default);
        if spec.containers.is_empty() {
            spec.containers.push(yaml("{name: pause, image: pause}"));
        }
    }

    /// A Node (any YAML of a `v1/Node`, e.g. a Karpenter-launched one with its labels).
    pub fn node(&mut self, node: &str) -> &mut Self {
        self.objects.nodes.push(yaml(node));
        self
    }

    pub fn daemonset(&mut self, ds: &str) -> &mut Self {
        self.objects.daemonsets.push(yaml::<apps::DaemonSet>(ds));
        self
    }
    pub fn claim(&mut self, pvc: &str) -> &mut Self {
        self.objects.claims.push(yaml(pvc));
        self
    }
    pub fn volume(&mut self, pv: &str) -> &mut Self {
        self.objects.volumes.push(yaml(pv));
        self
    }
    pub fn storage_class(&mut self, sc: &str) -> &mut Self {
        self.objects.storage_classes.push(yaml::<storage::StorageClass>(sc));
        self
    }
    /// A CSINode (YAML).
    pub fn csi_node(&mut self, c: &str) -> &mut Self {
        self.objects.csi_nodes.push(yaml::<storage::CSINode>(c));
        self
    }
    pub fn namespace(&mut self, ns: &str) -> &mut Self {
        self.objects.namespaces.push(yaml(ns));
        self
    }
    /// A Service (default namespace unless given) selecting `selector` (flow YAML; `~`: none).
    pub fn service(&mut self, name: &str, selector: &str) -> &mut Self {
        self.objects
            .services
            .push(yaml(&format!("metadata: {{name: {name}, namespace: default}}\nspec: {{selector: {selector}}}")));
        self
    }
    /// A ReplicaSet `name` (uid `<name>-uid`) whose selector is `selector` (flow YAML).
    pub fn replica_set(&mut self, name: &str, selector: &str) -> &mut Self {
        self.objects.replica_sets.push(yaml(&format!(
            "metadata: {{name: {name}, namespace: default, uid: {name}-uid}}\nspec: {{selector: {selector}}}"
        )));
        self
    }
    pub fn stateful_set(&mut self, name: &str, selector: &str) -> &mut Self {
        self.objects.stateful_sets.push(yaml(&format!(
            "metadata: {{name: {name}, namespace: default, uid: {name}-uid}}\nspec: {{selector: {selector}, serviceName: {name}, template: {{}}}}"
        )));
        self
    }
    /// A ReplicationController `name` whose (equality) selector is `selector` (flow YAML map).
    pub fn replication_controller(&mut self, name: &str, selector: &str) -> &mut Self {
        self.objects.replication_controllers.push(yaml(&format!(
            "metadata: {{name: {name}, namespace: default, uid: {name}-uid}}\nspec: {{selector: {selector}}}"
        )));
        self
    }
    /// A PodDisruptionBudget (any YAML of a `policy/v1` PDB, status included).
    pub fn pdb(&mut self, pdb: &str) -> &mut Self {
        self.objects.pdbs.push(yaml(pdb));
        self
    }

    /// The snapshot decisions see (no decision made); objects that cannot be read fail.
    pub fn snapshot(&self) -> ClusterSnapshot {
        let catalog = self.catalog.clone();
        let (snap, ignored) = convert::snapshot(&self.objects.shared(), &move |_| catalog.clone(), self.now);
        assert!(ignored.is_empty(), "objects the controller could not read: {ignored:?}");
        snap
    }

    /// Karpenter's `SCHEDULER_CONFIG`, as YAML or JSON.
    pub fn scheduler_config(&mut self, raw: &str) -> &mut Self {
        self.objects.scheduler = tenon_api::scheduler_config::SchedulerConfig::parse(raw).unwrap();
        self
    }

    /// The snapshot the controller would decide from, and the decision (Karpenter's price
    /// order). Objects that cannot be read fail the test.
    pub fn decide(&self) -> Decision {
        let d = self.decide_ignoring();
        assert!(d.ignored.is_empty(), "objects the controller could not read: {:?}", d.ignored);
        d
    }

    /// As [`Cluster::decide`], keeping what the controller leaves out of the decision
    /// (Karpenter's ignored pods) in [`Decision::ignored`].
    pub fn decide_ignoring(&self) -> Decision {
        let catalog = self.catalog.clone();
        let (mut snap, ignored) = convert::snapshot(&self.objects.shared(), &move |_| catalog.clone(), self.now);
        snap.max_instance_types = self.max_instance_types;
        snap.ignore_preferences = self.ignore_preferences;
        snap.min_values_best_effort = self.min_values_best_effort;
        let plan = schedule(&snap, &PriceScorer);
        Decision { snap, plan, ignored, nodepools: self.objects.nodepools.clone() }
    }
}

/// A scheduling decision, asked about the way Karpenter's tests ask.
pub struct Decision {
    pub snap: ClusterSnapshot,
    pub plan: ProvisioningPlan,
    /// Objects left out of the decision, and why.
    pub ignored: Vec<convert::ConvertError>,
    nodepools: Vec<NodePool>,
}

impl Decision {
    fn index(&self, pod: &str) -> usize {
        self.snap.pods.iter().position(|p| p.name == pod).unwrap_or_else(|| panic!("no pod {pod} in the snapshot"))
    }

    /// The new NodeClaim pod `pod` is planned on (`ExpectScheduled` onto new capacity).
    pub fn nodeclaim_of(&self, pod: &str) -> Option<&NewNodeClaim> {
        let i = self.index(pod);
        self.plan.nodeclaims.iter().find(|nc| nc.pods.contains(&i))
    }

    /// The existing node pod `pod` is nominated to.
    pub fn nominated(&self, pod: &str) -> Option<&str> {
        let i = self.index(pod);
        self.plan.nominations.iter().find(|n| n.pod == i).map(|n| n.node.as_str())
    }

    /// The NodeClaim object the controller creates for pod `pod`'s new NodeClaim (what
    /// Karpenter's fake cloud provider records as a `Create` call).
    pub fn created(&self, pod: &str) -> tenon_api::NodeClaim {
        let nc = self.nodeclaim_of(pod).unwrap_or_else(|| panic!("{pod} has no new NodeClaim"));
        let np = self.nodepools.iter().find(|np| np.metadata.name.as_deref() == Some(&nc.nodepool_name)).unwrap();
        tenon_core::nodeclaim::nodeclaim(nc, np, &self.snap)
    }

    /// Why pod `pod` (namespace `default`) was left out of the decision, if it was.
    pub fn ignored_pod(&self, pod: &str) -> Option<&convert::ConvertError> {
        let object = format!("Pod default/{pod}");
        self.ignored.iter().find(|e| e.object == object)
    }

    /// Whether the pod gets a place: a new NodeClaim or an existing node.
    pub fn scheduled(&self, pod: &str) -> bool {
        self.nodeclaim_of(pod).is_some() || self.nominated(pod).is_some()
    }

    /// Why the pod cannot be scheduled (`ExpectNotScheduled`), if it cannot.
    pub fn unschedulable(&self, pod: &str) -> Option<&str> {
        let i = self.index(pod);
        self.plan.unschedulable.iter().find(|u| u.pod == i).map(|u| u.reason.as_str())
    }

    /// The labels the pod's new node would have when launched as Karpenter's fake cloud
    /// provider launches (its cheapest option, that option's cheapest compatible offering):
    /// the NodeClaim's single-valued requirements, the type's labels, zone and capacity type.
    pub fn node_labels(&self, pod: &str) -> BTreeMap<String, String> {
        let nc = self
            .nodeclaim_of(pod)
            .unwrap_or_else(|| panic!("{pod} has no new NodeClaim: {}", self.plan.render(&self.snap)));
        launched_labels(&self.snap, nc)
    }

    /// The NodeClaims' instance type options, by name, best first.
    pub fn options(&self, nc: &NewNodeClaim) -> Vec<&str> {
        nc.instance_type_names(&self.snap)
    }

    /// How many pods each new NodeClaim holds, in plan order.
    pub fn pods_per_nodeclaim(&self) -> Vec<usize> {
        self.plan.nodeclaims.iter().map(|nc| nc.pods.len()).collect()
    }
}

/// The labels Karpenter gives a NodeClaim of NodePool `pool` launched as `it` in an
/// offering of capacity type `ct` in `zone`.
pub fn offering_labels(pool: &str, it: &str, ct: &str, zone: &str) -> BTreeMap<String, String> {
    [
        ("karpenter.sh/nodepool", pool),
        ("node.kubernetes.io/instance-type", it),
        ("karpenter.sh/capacity-type", ct),
        ("topology.kubernetes.io/zone", zone),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect()
}

impl Cluster {
    /// A NodeClaim `name` with `labels` (its NodePool, instance type, capacity type and zone
    /// at least) created at `at` (seconds since the epoch) and launched and registered then,
    /// and its Node `name`; when `initialized`, also Initialized and Ready (Karpenter's
    /// `test.NodeClaimAndNode` then `ExpectMakeNodesAndNodeClaimsInitializedAndStateUpdated`),
    /// otherwise registered only and NotReady.
    pub fn launched_node(
        &mut self,
        name: &str,
        labels: &BTreeMap<String, String>,
        allocatable: &str,
        at: i64,
        initialized: bool,
    ) -> &mut Self {
        let l = labels.iter().map(|(k, v)| format!("\"{k}\": \"{v}\"")).collect::<Vec<_>>().join(", ");
        let at = k8s_openapi::jiff::Timestamp::from_second(at).expect("a time").to_string();
        let t = format!("reason: Ready, message: \"\", lastTransitionTime: \"{at}\"");
        let (init_condition, init_label, ready) = if initialized {
            (format!(", {{type: Initialized, status: \"True\", {t}}}"), ", karpenter.sh/initialized: \"true\"", "True")
        } else {
            (String::new(), "", "False")
        };
        self.objects.nodeclaims.push(yaml(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: {name}, creationTimestamp: \"{at}\", labels: {{{l}}}}}\nspec: {{requirements: [], nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}}}\nstatus: {{nodeName: {name}, providerID: fake://{name}, allocatable: {allocatable}, capacity: {allocatable}, conditions: [{{type: Launched, status: \"True\", {t}}}, {{type: Registered, status: \"True\", {t}}}{init_condition}]}}\n"
        )));
        self.node(&format!(
            "metadata: {{name: {name}, creationTimestamp: \"{at}\", labels: {{{l}, kubernetes.io/hostname: {name}, kubernetes.io/arch: amd64, kubernetes.io/os: linux, karpenter.sh/registered: \"true\"{init_label}}}}}\nspec: {{providerID: fake://{name}}}\nstatus: {{allocatable: {allocatable}, capacity: {allocatable}, conditions: [{{type: Ready, status: \"{ready}\"}}]}}\n"
        ))
    }

    /// [`Cluster::launched_node`] of NodePool `pool` as catalog type `it` (its first
    /// offering's capacity type and zone), Initialized at `at`.
    pub fn initialized_node(&mut self, name: &str, pool: &str, it: &str, allocatable: &str, at: i64) -> &mut Self {
        let catalog = self.catalog.clone();
        let t = catalog.iter().find(|t| t.name == it).unwrap_or_else(|| panic!("no type {it}"));
        let o = &t.offerings[0];
        self.launched_node(name, &offering_labels(pool, it, &o.capacity_type, &o.zone), allocatable, at, true)
    }
}

/// What Karpenter's fake `Create` labels a node with.
pub fn launched_labels(snap: &ClusterSnapshot, nc: &NewNodeClaim) -> BTreeMap<String, String> {
    let cat = &snap.nodepools[nc.nodepool].instance_types;
    let (it, offering) = nc
        .instance_types
        .iter()
        .filter_map(|&i| {
            let it = &cat[i as usize];
            it.cheapest(&nc.requirements).map(|o| (it, o))
        })
        .min_by(|a, b| a.1.price.total_cmp(&b.1.price))
        .expect("an option with an offering");
    let mut labels: BTreeMap<String, String> = nc
        .requirements
        .iter()
        .filter(|r| !r.is_complement() && r.values().len() == 1)
        .map(|r| (r.key.clone(), r.values()[0].clone()))
        .collect();
    labels.extend(it.labels());
    labels.insert("topology.kubernetes.io/zone".into(), offering.zone.clone());
    labels.insert("karpenter.sh/capacity-type".into(), offering.capacity_type.clone());
    // The controller's launch asks for this tenancy and labels the NodeClaim with it.
    labels.insert(
        tenon_api::wellknown::LABEL_INSTANCE_TENANCY.into(),
        tenon_core::cloud::launch_tenancy(&nc.requirements).into(),
    );
    labels
}
