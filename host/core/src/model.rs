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
#[derive(Clone, Debug, PartialEq)]
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
    /// Requirements from the pod's volumes: ORed alternatives, tried in order. Empty means none.
    pub volume_requirements: Vec<Requirements>,
    pub tolerations: Vec<Toleration>,
    pub spread: Vec<SpreadConstraint>,
    pub affinity: Vec<AffinityTerm>,
    pub preferred_affinity: Vec<(i32, AffinityTerm)>,
    pub anti_affinity: Vec<AffinityTerm>,
    pub preferred_anti_affinity: Vec<(i32, AffinityTerm)>,
    pub host_ports: Vec<HostPort>,
    /// The claims it attaches, by CSI driver (counted against a node's attach limits).
    pub volumes: crate::volume_usage::Volumes,
    pub priority: i32,
    pub node_name: Option<String>,
    /// Seconds since the epoch.
    pub created: i64,
    /// When the kubelet started it (`status.startTime`), seconds since the epoch; a
    /// duration-valued do-not-disrupt counts from here.
    pub started: Option<i64>,
    pub owner_kind: Option<String>,
    pub owner_name: Option<String>,
    /// `terminationGracePeriodSeconds` (Kubernetes default 30).
    pub termination_grace_seconds: i64,
    /// Its deletion timestamp (seconds since the epoch: when the kubelet is to have it gone,
    /// the grace period included), if it is being deleted: going away, nothing to reschedule.
    pub deleted_at: Option<i64>,
    /// `priorityClassName` `system-cluster-critical` or `system-node-critical`: it drains last.
    pub critical: bool,
    /// Asks for devices through Dynamic Resource Allocation (resource claims): Tenon, like
    /// Karpenter without DRA support, provisions nothing for it.
    pub resource_claims: bool,
    /// Its Ready condition is False: a PDB with `unhealthyPodEvictionPolicy: AlwaysAllow`
    /// lets it be evicted whatever the budget.
    pub unready: bool,
}

impl Default for Pod {
    fn default() -> Self {
        Pod {
            namespace: String::new(),
            name: String::new(),
            uid: String::new(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            requests: Resources::default(),
            node_selector: Requirements::default(),
            required_node_affinity: Vec::new(),
            preferred_node_affinity: Vec::new(),
            volume_requirements: Vec::new(),
            tolerations: Vec::new(),
            spread: Vec::new(),
            affinity: Vec::new(),
            preferred_affinity: Vec::new(),
            anti_affinity: Vec::new(),
            preferred_anti_affinity: Vec::new(),
            host_ports: Vec::new(),
            volumes: Default::default(),
            priority: 0,
            node_name: None,
            created: 0,
            started: None,
            owner_kind: None,
            owner_name: None,
            termination_grace_seconds: 30,
            deleted_at: None,
            critical: false,
            resource_claims: false,
            unready: false,
        }
    }
}

impl Pod {
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    pub fn is_daemon(&self) -> bool {
        self.owner_kind.as_deref() == Some("DaemonSet")
    }

    /// A static pod's mirror (owned by its Node): the API cannot evict or delete it.
    pub fn is_mirror(&self) -> bool {
        self.owner_kind.as_deref() == Some("Node")
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
    /// What disruption decisions need to know; `None` for nodes Tenon does not manage.
    pub claim: Option<ClaimInfo>,
}

/// The NodeClaim behind a managed node.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct ClaimInfo {
    pub nodeclaim: String,
    /// NodeClaim creation, seconds since the epoch: expiration counts from here.
    pub created: i64,
    /// The NodeClaim's own `spec.expireAfter` in seconds (stamped from its NodePool at
    /// launch); `None` is `Never`.
    pub expire_after: Option<i64>,
    pub initialized: bool,
    /// Node condition Ready is True.
    pub ready: bool,
    /// Has a deletion timestamp or is already marked for disruption.
    pub disrupting: bool,
    /// Last time a pod was bound to or left the node (falls back to initialization/creation).
    pub last_pod_event: Option<i64>,
    pub annotations: BTreeMap<String, String>,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// USD per hour of its offering.
    pub price: f64,
    /// `karpenter.sh/nodepool-hash` and its version, as stamped at launch.
    pub nodepool_hash: Option<String>,
    pub nodepool_hash_version: Option<String>,
    /// Drift the cloud provider or NodeClass reported (AMI, subnet, security group, NodeClass hash).
    pub drift: Option<String>,
    /// When its `Drifted` condition turned True (seconds since the epoch): drift disrupts
    /// the earliest first.
    pub drifted_since: Option<i64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ConsolidationPolicy {
    WhenEmpty,
    #[default]
    WhenEmptyOrUnderutilized,
    /// Underutilized nodes too, when a move's share of savings is worth its share of
    /// disruption ([`crate::disruption::balanced`]).
    Balanced,
}

impl ConsolidationPolicy {
    /// Whether underutilized nodes are consolidated (not only empty ones).
    pub fn underutilized(&self) -> bool {
        !matches!(self, ConsolidationPolicy::WhenEmpty)
    }
}

/// Why a node is disrupted; budgets can be scoped to these.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DisruptionReason {
    Underutilized,
    Empty,
    Drifted,
}

impl DisruptionReason {
    pub fn as_str(&self) -> &'static str {
        match self {
            DisruptionReason::Underutilized => "Underutilized",
            DisruptionReason::Empty => "Empty",
            DisruptionReason::Drifted => "Drifted",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "Underutilized" => Some(DisruptionReason::Underutilized),
            "Empty" => Some(DisruptionReason::Empty),
            "Drifted" => Some(DisruptionReason::Drifted),
            _ => None,
        }
    }
}

/// How many nodes a budget allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetNodes {
    Count(u32),
    Percent(u32),
    /// Unparsable: fails closed (zero).
    Invalid,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Budget {
    pub nodes: BudgetNodes,
    /// `None` applies to every reason.
    pub reasons: Option<Vec<DisruptionReason>>,
    /// Active window: each hit of the schedule (UTC) opens it for `duration` seconds. `None`:
    /// always active. An unparsable schedule is `Some(Err)` and fails closed.
    pub window: Option<Result<(tenon_api::cron::CronSchedule, i64), String>>,
}

/// A NodePool's disruption settings.
#[derive(Clone, Debug, PartialEq)]
pub struct DisruptionSettings {
    pub consolidation_policy: ConsolidationPolicy,
    /// Seconds; `None` is `Never`.
    pub consolidate_after: Option<i64>,
    pub budgets: Vec<Budget>,
}

impl Default for DisruptionSettings {
    fn default() -> Self {
        DisruptionSettings {
            consolidation_policy: ConsolidationPolicy::WhenEmptyOrUnderutilized,
            consolidate_after: Some(0),
            budgets: vec![Budget { nodes: BudgetNodes::Percent(10), reasons: None, window: None }],
        }
    }
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
    /// `unhealthyPodEvictionPolicy: AlwaysAllow`: unready pods are evictable regardless.
    pub unhealthy_always_allow: bool,
    /// It allows no disruption whatever the count (`maxUnavailable: 0` or `0%`,
    /// `minAvailable: 100%`): its pods are not currently reschedulable (Karpenter's
    /// `IsCurrentlyReschedulable`).
    pub fully_blocking: bool,
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
    pub disruption: DisruptionSettings,
    /// Seconds; `None` is `Never`.
    pub expire_after: Option<i64>,
    /// Seconds a draining node may wait for its pods; `None`: forever.
    pub termination_grace_period: Option<i64>,
    /// The template hash NodeClaims launched now are stamped with.
    pub hash: String,
    /// `spec.replicas`: a static NodePool keeps this many nodes and is never provisioned
    /// for pods (its nodes still take pods that fit them).
    pub replicas: Option<i64>,
    /// Why the NodePool launches nothing now: it is being deleted, or not Ready (its `Ready`
    /// condition is False). `None` while it may launch.
    pub unavailable: Option<String>,
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
    /// At most this many instance type options per NodeClaim (Karpenter's
    /// `MaxInstanceTypes`); `None`: [`crate::scheduler::MAX_INSTANCE_TYPES`].
    pub max_instance_types: Option<usize>,
    /// Karpenter's `PREFERENCE_POLICY=Ignore`: pods' preferences (preferred node and pod
    /// affinity and anti-affinity, ScheduleAnyway spreads) play no part in provisioning.
    pub ignore_preferences: bool,
    /// Karpenter's `SpotToSpotConsolidation` feature gate: a spot node may be replaced by a
    /// cheaper spot node (off: spot nodes are only deleted).
    pub spot_to_spot: bool,
    /// Karpenter's `MIN_VALUES_POLICY=BestEffort`, for provisioning: a NodeClaim whose
    /// options cannot meet a minValues is created with it lowered to what they offer
    /// (`Strict`, the default: no NodeClaim).
    pub min_values_best_effort: bool,
    /// Attach limits by node name, from each node's CSINode (none: unlimited).
    pub volume_limits: BTreeMap<String, crate::volume_usage::Limits>,
}

impl ClusterSnapshot {
    /// Pods waiting for a node.
    pub fn pending_pods(&self) -> impl Iterator<Item = (usize, &Pod)> {
        self.pods.iter().enumerate().filter(|(_, p)| p.node_name.is_none() && !p.is_daemon())
    }
}
