//! The cluster as the decision core sees it: pods, nodes, DaemonSets, PDBs and NodePool
//! templates, pre-parsed so decisions never parse strings.

use crate::instancetype::InstanceType;
use crate::requirements::Requirements;
use crate::resources::Resources;
use crate::selector::LabelSelector;
use crate::taints::{Taint, Toleration};
use std::collections::BTreeMap;
use std::sync::Arc;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WhenUnsatisfiable {
    DoNotSchedule,
    ScheduleAnyway,
}

/// A topology spread constraint.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SpreadConstraint {
    pub key: String,
    pub max_skew: i32,
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// Already merged with `matchLabelKeys` values of the pod.
    pub selector: LabelSelector,
    pub min_domains: Option<i32>,
    /// `nodeAffinityPolicy: Honor` (the default): only nodes matching the pod's node
    /// affinity count as domains.
    pub honor_node_affinity: bool,
    /// `nodeTaintsPolicy: Honor` (default Ignore): only nodes whose taints the pod tolerates count.
    pub honor_node_taints: bool,
}

/// A pod (anti-)affinity term.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AffinityTerm {
    pub key: String,
    pub selector: LabelSelector,
    /// Namespaces the term selects pods in; empty with `all_namespaces` false means the pod's own.
    pub namespaces: Vec<String>,
    pub all_namespaces: bool,
    pub namespace_selector: Option<LabelSelector>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    pub ip: String,
    pub port: i32,
    pub protocol: String,
}

impl HostPort {
    pub fn conflicts(&self, o: &HostPort) -> bool {
        let wildcard = |ip: &str| ip.is_empty() || ip == "0.0.0.0" || ip == "::";
        self.port == o.port && self.protocol == o.protocol && (self.ip == o.ip || wildcard(&self.ip) || wildcard(&o.ip))
    }
}

/// A pod with its scheduling constraints parsed.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// Effective requests (containers, init containers, sidecars, overhead) plus one pod slot.
    pub requests: Resources,
    /// `nodeSelector` as requirements.
    pub node_selector: Requirements,
    /// Required node affinity: ORed terms. Empty means none.
    pub required_node_affinity: Vec<Requirements>,
    /// Preferred node affinity terms, heaviest first.
    pub preferred_node_affinity: Vec<(i32, Requirements)>,
    /// Zone requirements from the pod's volumes.
    pub volume_requirements: Requirements,
    pub tolerations: Vec<Toleration>,
    pub spread: Vec<SpreadConstraint>,
    pub affinity: Vec<AffinityTerm>,
    pub preferred_affinity: Vec<(i32, AffinityTerm)>,
    pub anti_affinity: Vec<AffinityTerm>,
    pub preferred_anti_affinity: Vec<(i32, AffinityTerm)>,
    pub host_ports: Vec<HostPort>,
    pub priority: i32,
    pub node_name: Option<String>,
    /// Seconds since the epoch.
    pub created: i64,
    pub owner_kind: Option<String>,
    pub owner_name: Option<String>,
}

impl Pod {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn is_daemon(&self) -> bool {
        self.owner_kind.as_deref() == Some("DaemonSet")
    }
}

/// An existing Node, or a NodeClaim launched but not yet a Node.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Node {
    pub name: String,
    pub nodepool: Option<String>,
    /// Its labels as `In [value]`, and for an in-flight NodeClaim the requirements it will satisfy.
    pub requirements: Requirements,
    pub labels: BTreeMap<String, String>,
    /// Scheduling taints (startup and other ephemeral taints already removed).
    pub taints: Vec<Taint>,
    pub allocatable: Resources,
    pub capacity: Resources,
    /// A NodeClaim not yet registered as a Node.
    pub in_flight: bool,
    /// Being deleted, cordoned or disrupted: not a place for new pods.
    pub unschedulable: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DaemonSet {
    pub namespace: String,
    pub name: String,
    /// The pod template, as a pod.
    pub pod: Pod,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PodDisruptionBudget {
    pub namespace: String,
    pub name: String,
    pub selector: LabelSelector,
    pub disruptions_allowed: i32,
}

/// A NodePool as the scheduler uses it.
#[derive(Clone, Debug)]
pub struct NodePoolTemplate {
    pub name: String,
    pub weight: i64,
    /// Spec requirements, template labels as `In [value]`, and `karpenter.sh/nodepool In [name]`.
    pub requirements: Requirements,
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    /// Resource name → limit (millicores for cpu, bytes, units; `nodes` counts nodes).
    pub limits: BTreeMap<String, i64>,
    /// The instance types this NodePool's NodeClass can launch.
    pub instance_types: Arc<Vec<InstanceType>>,
}

/// Everything a decision looks at. Built by one conversion module (`convert`) in the
/// controller, by the simulator directly, and by tests.
#[derive(Clone, Debug, Default)]
pub struct ClusterSnapshot {
    /// Seconds since the epoch; the only clock a decision sees.
    pub now: i64,
    pub nodepools: Vec<NodePoolTemplate>,
    pub nodes: Vec<Node>,
    /// Every pod: bound (with `node_name`) and pending.
    pub pods: Vec<Pod>,
    pub daemonsets: Vec<DaemonSet>,
    pub pdbs: Vec<PodDisruptionBudget>,
    pub namespaces: BTreeMap<String, BTreeMap<String, String>>,
}

impl ClusterSnapshot {
    /// Pods waiting for a node.
    pub fn pending_pods(&self) -> impl Iterator<Item = (usize, &Pod)> {
        self.pods.iter().enumerate().filter(|(_, p)| p.node_name.is_none() && !p.is_daemon())
    }
}
