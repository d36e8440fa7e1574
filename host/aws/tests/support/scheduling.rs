//! Karpenter's provisioning step for the launch template suite's scheduling cases: pods and a
//! NodePool as Kubernetes objects, the instance types the provider offers a NodeClass (its
//! volumes and kubelet settings shaping their capacity), and the core's decision from them,
//! the controller's own path (`convert::snapshot`, then `schedule`).

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use std::collections::BTreeMap;
use std::sync::Arc;
use tenon_api::NodePool;
use tenon_core::ClusterSnapshot;
use tenon_core::ProvisioningPlan;
use tenon_core::convert::{self, ClusterObjects};
use tenon_core::instancetype::InstanceType;
use tenon_core::plan::NewNodeClaim;
use tenon_core::scorer::PriceScorer;

/// Any fixed time: scheduling does not depend on it.
pub const NOW: i64 = 1_795_996_800;

fn yaml<T: serde::de::DeserializeOwned>(s: &str) -> T {
    serde_yaml::from_str(s).unwrap_or_else(|e| panic!("{e}\n{s}"))
}

pub struct Cluster {
    objects: ClusterObjects,
    catalog: Arc<Vec<InstanceType>>,
    generated: usize,
}

impl Cluster {
    /// Karpenter's suite NodePool over `catalog`: on-demand (unless `requirements` name the
    /// capacity type), labelled `testing/cluster=unspecified`, launching from EC2NodeClass
    /// `nodeclass`, with `requirements` (flow YAML items).
    pub fn new(catalog: Vec<InstanceType>, nodeclass: &str, requirements: &[&str]) -> Cluster {
        // On-demand unless the case names the capacity type itself.
        let mut reqs: Vec<String> = if requirements.iter().any(|r| r.contains("karpenter.sh/capacity-type")) {
            Vec::new()
        } else {
            vec!["{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}".to_string()]
        };
        reqs.extend(requirements.iter().map(|r| r.to_string()));
        let np: NodePool = yaml(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: default}}\nspec:\n  template:\n    metadata:\n      labels: {{testing/cluster: unspecified}}\n    spec:\n      requirements: [{}]\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: {nodeclass}}}\n",
            reqs.join(", ")
        ));
        let objects = ClusterObjects { nodepools: vec![Arc::new(np)], ..Default::default() };
        Cluster { objects, catalog: Arc::new(catalog), generated: 0 }
    }

    /// A pod kube-scheduler could not place, its container requesting `requests` (flow YAML
    /// map, e.g. `{ephemeral-storage: 10Gi}`; `{}` for none).
    pub fn pending(&mut self, name: &str, requests: &str) -> &mut Self {
        self.generated += 1;
        let p: core::Pod = yaml(&format!(
            "metadata: {{name: {name}, namespace: default, uid: uid-{}}}\nspec:\n  containers: [{{name: app, image: app, resources: {{requests: {requests}}}}}]\nstatus: {{phase: Pending, conditions: [{{type: PodScheduled, status: \"False\", reason: Unschedulable}}]}}\n",
            self.generated
        ));
        self.objects.pods.push(Arc::new(p.into()));
        self
    }

    /// A DaemonSet whose pods request `requests` (flow YAML map).
    pub fn daemonset(&mut self, name: &str, requests: &str) -> &mut Self {
        let ds: apps::DaemonSet = yaml(&format!(
            "metadata: {{name: {name}, namespace: default}}\nspec:\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers: [{{name: app, image: app, resources: {{requests: {requests}}}}}]\n"
        ));
        self.objects.daemonsets.push(Arc::new(ds));
        self
    }

    /// Labels on the NodePool's template, beside `testing/cluster`.
    pub fn template_labels(&mut self, labels: &[(&str, &str)]) -> &mut Self {
        let l = &mut Arc::make_mut(&mut self.objects.nodepools[0]).spec.template.metadata.labels;
        l.extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        self
    }

    /// The instance types the NodePool launches from.
    pub fn catalog(&self) -> Vec<InstanceType> {
        self.catalog.as_ref().clone()
    }

    pub fn decide(&self) -> Decision {
        let catalog = self.catalog.clone();
        let (snap, ignored) = convert::snapshot(&self.objects, &move |_| catalog.clone(), NOW);
        assert!(ignored.is_empty(), "objects the controller could not read: {ignored:?}");
        let plan = tenon_core::schedule(&snap, &PriceScorer);
        Decision { nodepools: self.objects.nodepools.iter().map(|np| (**np).clone()).collect(), snap, plan }
    }
}

pub struct Decision {
    pub snap: ClusterSnapshot,
    pub plan: ProvisioningPlan,
    nodepools: Vec<NodePool>,
}

impl Decision {
    fn index(&self, pod: &str) -> usize {
        self.snap.pods.iter().position(|p| p.name == pod).unwrap_or_else(|| panic!("no pod {pod} in the snapshot"))
    }

    /// The new NodeClaim pod `pod` is planned on.
    pub fn nodeclaim_of(&self, pod: &str) -> Option<&NewNodeClaim> {
        let i = self.index(pod);
        self.plan.nodeclaims.iter().find(|nc| nc.pods.contains(&i))
    }

    pub fn scheduled(&self, pod: &str) -> bool {
        self.nodeclaim_of(pod).is_some()
    }

    /// The instance types the pod's NodeClaim may launch as, best first.
    pub fn options(&self, pod: &str) -> Vec<&InstanceType> {
        let nc = self.nodeclaim_of(pod).unwrap_or_else(|| panic!("{pod} has no NodeClaim"));
        let cat = &self.snap.nodepools[nc.nodepool].instance_types;
        nc.instance_types.iter().map(|&i| &cat[i as usize]).collect()
    }

    /// The NodeClaim object the controller creates for the pod's new NodeClaim.
    pub fn created(&self, pod: &str) -> tenon_api::NodeClaim {
        let nc = self.nodeclaim_of(pod).unwrap_or_else(|| panic!("{pod} has no NodeClaim"));
        let np = self.nodepools.iter().find(|np| np.metadata.name.as_deref() == Some(&nc.nodepool_name)).unwrap();
        tenon_core::nodeclaim::nodeclaim(nc, np, &self.snap)
    }

    /// The NodeClaim's labels, as a launch request carries them.
    pub fn labels(&self, pod: &str) -> BTreeMap<String, String> {
        self.created(pod).metadata.labels.unwrap_or_default()
    }
}
