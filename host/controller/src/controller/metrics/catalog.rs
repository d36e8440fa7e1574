//! Every family the controller exposes: Karpenter v1.14's name, type and buckets where the
//! meaning is the same (`karpenter_*`, and controller-runtime's `controller_runtime_*` for
//! the control loop's steps), `tenon_*` for Tenon's own. `docs/metrics.md` lists them.

/// What a family is, and for a histogram its upper bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram(&'static [f64]),
    /// Quantiles 0, 0.5, 0.9, 0.99, 1 over ten minutes (see `summary.rs`).
    Summary,
}

#[derive(Debug, PartialEq)]
pub struct Family {
    /// As exposed (a counter's ends in `_total`).
    pub name: &'static str,
    pub help: &'static str,
    pub kind: Kind,
}

/// Karpenter's buckets for scheduling and other short durations (controller-runtime's, with
/// longer ones for singleton loops).
pub const DURATION_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5,
    1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    150.0, 300.0, 450.0, 600.0,
];

/// controller-runtime's buckets for a reconcile's duration.
pub const RECONCILE_BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5,
    1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
];

/// Karpenter's buckets for a node's lifetime in seconds (15 minutes to 30 days).
pub const LIFETIME_BUCKETS: &[f64] = &[
    900.0,
    1800.0,
    2700.0,
    3600.0,
    7200.0,
    14_400.0,
    21_600.0,
    28_800.0,
    36_000.0,
    43_200.0,
    57_600.0,
    72_000.0,
    86_400.0,
    172_800.0,
    259_200.0,
    432_000.0,
    864_000.0,
    1_296_000.0,
    1_728_000.0,
    2_160_000.0,
    2_592_000.0,
];

/// 1, 2, 4, … 1024 seconds (Karpenter's for an instance's termination).
pub const DOUBLING_11: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0];
/// 1, 2, 4, … 2048 seconds (Karpenter's for a NodeClaim's termination).
pub const DOUBLING_12: &[f64] = &[1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0];

/// Prometheus' default buckets (operatorpkg's where Karpenter sets none).
pub const DEFAULT_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// 0.5, 1, 2, … 8192 seconds (Karpenter's for its kinds' condition and termination times).
pub const HALF_DOUBLING_15: &[f64] =
    &[0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 2048.0, 4096.0, 8192.0];

/// Karpenter's buckets for a Balanced consolidation score.
pub const SCORE_BUCKETS: &[f64] = &[0.1, 0.25, 0.33, 0.5, 1.0, 2.0, 5.0, 10.0];

/// client-go's request latency buckets: 1 ms growing by half, 20 of them (about 2.2 s last).
pub const CLIENT_BUCKETS: &[f64] = &[
    0.001,
    0.0015,
    0.0022500000000000003,
    0.0033750000000000004,
    0.005062500000000001,
    0.0075937500000000015,
    0.011390625000000001,
    0.017085937500000002,
    0.025628906250000003,
    0.03844335937500001,
    0.057665039062500006,
    0.08649755859375001,
    0.129746337890625,
    0.1946195068359375,
    0.29192926025390625,
    0.43789389038085935,
    0.656840835571289,
    0.9852612533569336,
    1.4778918800354004,
    2.2168378200531005,
];

macro_rules! catalog {
    ($($id:ident: $kind:expr, $name:literal, $help:literal;)*) => {
        $(pub const $id: &Family = &Family { name: $name, help: $help, kind: $kind };)*
        /// Every family, in exposition order.
        pub const CATALOG: &[&Family] = &[$($id),*];
    };
}

use Kind::{Counter, Gauge, Histogram, Summary};

catalog! {
    BUILD_INFO: Gauge, "karpenter_build_info",
        "Always 1, labelled with the controller's version, commit, the compiler that built it (goversion) and its architecture (goarch)";
    NODECLAIMS_CREATED: Counter, "karpenter_nodeclaims_created_total",
        "NodeClaims created, by reason (provisioning, disruption), NodePool and whether minValues was relaxed";
    NODECLAIMS_DISRUPTED: Counter, "karpenter_nodeclaims_disrupted_total",
        "NodeClaims deleted to disrupt them, by reason, NodePool, capacity type, consolidation policy and termination mode";
    PODS_DISRUPTION_INITIATED: Counter, "karpenter_pods_disruption_initiated_total",
        "Reschedulable pods (not of a DaemonSet, not mirror pods) on NodeClaims deleted to disrupt them, by reason, NodePool, capacity type, consolidation policy and termination mode";
    NODECLAIMS_TERMINATED: Counter, "karpenter_nodeclaims_terminated_total",
        "NodeClaims whose finalizer was removed, by NodePool, capacity type and zone";
    NODECLAIMS_INSTANCE_TERMINATION: Histogram(DOUBLING_11), "karpenter_nodeclaims_instance_termination_duration_seconds",
        "Seconds from asking the cloud to terminate a NodeClaim's instance to the instance being gone, by NodePool";
    NODECLAIMS_TERMINATION: Histogram(DOUBLING_12), "karpenter_nodeclaims_termination_duration_seconds",
        "Seconds from a NodeClaim's deletion to the removal of its finalizer, by NodePool";
    NODES_CREATED: Counter, "karpenter_nodes_created_total",
        "Nodes that registered for a NodeClaim, by NodePool and zone";
    NODES_TERMINATED: Counter, "karpenter_nodes_terminated_total",
        "Nodes whose finalizer was removed, by NodePool and zone";
    NODES_TERMINATION: Summary, "karpenter_nodes_termination_duration_seconds",
        "Seconds from a Node's deletion to the removal of its finalizer, by NodePool";
    NODES_LIFETIME: Histogram(LIFETIME_BUCKETS), "karpenter_nodes_lifetime_duration_seconds",
        "Seconds from a Node's creation to the removal of its finalizer, by NodePool";
    NODES_DRAINED: Counter, "karpenter_nodes_drained_total",
        "Nodes drained of their pods, by NodePool";
    NODES_ALLOCATABLE: Gauge, "karpenter_nodes_allocatable",
        "A node's allocatable resources (cpu in cores, others in units or bytes), by node, its well-known labels and resource type";
    NODES_POD_REQUESTS: Gauge, "karpenter_nodes_total_pod_requests",
        "What the pods bound to a node request, DaemonSet pods included, by node, its well-known labels and resource type";
    NODES_DAEMON_REQUESTS: Gauge, "karpenter_nodes_total_daemon_requests",
        "What the DaemonSet pods bound to a node request, by node, its well-known labels and resource type";
    NODES_POD_LIMITS: Gauge, "karpenter_nodes_total_pod_limits",
        "The limits of the pods bound to a node, DaemonSet pods included, by node, its well-known labels and resource type";
    NODES_DAEMON_LIMITS: Gauge, "karpenter_nodes_total_daemon_limits",
        "The limits of the DaemonSet pods bound to a node, by node, its well-known labels and resource type";
    CLUSTER_UTILIZATION: Gauge, "karpenter_cluster_utilization_percent",
        "What the pods of all nodes request as a percentage of what the nodes can allocate, by resource type";
    NODES_SYSTEM_OVERHEAD: Gauge, "karpenter_nodes_system_overhead",
        "A node's capacity less its allocatable (what the kubelet and system reserve), by node, its well-known labels and resource type";
    NODES_CURRENT_LIFETIME: Gauge, "karpenter_nodes_current_lifetime_seconds",
        "Seconds since a node was created, by node and its well-known labels";
    NODEPOOLS_USAGE: Gauge, "karpenter_nodepools_usage",
        "Resources of the NodePool's NodeClaims (its status.resources), by NodePool and resource type";
    NODEPOOLS_LIMIT: Gauge, "karpenter_nodepools_limit",
        "The NodePool's spec.limits, by NodePool and resource type";
    NODEPOOLS_COST: Gauge, "karpenter_nodepools_cost_total",
        "Hourly price (USD) of the offerings the NodePool's NodeClaims were launched on, by NodePool (an estimate, not billing)";
    INSTANCE_TYPE_CPU: Gauge, "karpenter_cloudprovider_instance_type_cpu_cores",
        "vCPUs of each instance type the EC2NodeClasses can launch, by instance type";
    INSTANCE_TYPE_MEMORY: Gauge, "karpenter_cloudprovider_instance_type_memory_bytes",
        "Memory of each instance type the EC2NodeClasses can launch, in bytes, by instance type";
    OFFERING_AVAILABLE: Gauge, "karpenter_cloudprovider_instance_type_offering_available",
        "1 when an offering can be launched now, 0 when not (say after insufficient capacity), by instance type, capacity type and zone";
    OFFERING_PRICE: Gauge, "karpenter_cloudprovider_instance_type_offering_price_estimate",
        "Estimated hourly price (USD) of an offering, by instance type, capacity type and zone";
    NODEPOOLS_ALLOWED_DISRUPTIONS: Gauge, "karpenter_nodepools_allowed_disruptions",
        "Nodes the NodePool's disruption budgets allow to disrupt now, by NodePool and reason";
    PODS_STATE: Gauge, "karpenter_pods_state",
        "1 for each pod, labelled with its phase, readiness, node and that node's NodePool, zone, architecture, capacity type and instance type";
    PODS_STARTUP: Summary, "karpenter_pods_startup_duration_seconds",
        "Seconds from a pod's creation until it was Ready, for pods the controller saw Pending";
    PODS_UNSTARTED: Gauge, "karpenter_pods_unstarted_time_seconds",
        "Seconds since each pod seen Pending was created, until it runs, by name and namespace";
    PODS_UNBOUND: Gauge, "karpenter_pods_unbound_time_seconds",
        "Seconds since each Pending pod not bound yet was created, by name and namespace";
    PODS_BOUND: Histogram(DURATION_BUCKETS), "karpenter_pods_bound_duration_seconds",
        "Seconds from a pod's creation to its binding, for pods the controller saw Pending";
    PODS_PROVISIONING_UNSTARTED: Gauge, "karpenter_pods_provisioning_unstarted_time_seconds",
        "Seconds since the provisioner first found a place for each pod not running yet, by name and namespace";
    PODS_PROVISIONING_UNBOUND: Gauge, "karpenter_pods_provisioning_unbound_time_seconds",
        "Seconds since the provisioner first found a place for each pod not bound yet, by name and namespace";
    PODS_PROVISIONING_STARTUP: Histogram(DURATION_BUCKETS), "karpenter_pods_provisioning_startup_duration_seconds",
        "Seconds from the provisioner first finding a place for a pod until it was Ready";
    PODS_PROVISIONING_BOUND: Histogram(DURATION_BUCKETS), "karpenter_pods_provisioning_bound_duration_seconds",
        "Seconds from the provisioner first finding a place for a pod until it was bound";
    PODS_UNDECIDED: Gauge, "karpenter_pods_provisioning_scheduling_undecided_time_seconds",
        "Seconds since the provisioner saw each pod waiting for capacity, until a decision looked at it, by name and namespace";
    PODS_SCHEDULING_DECISION: Histogram(DURATION_BUCKETS), "karpenter_pods_scheduling_decision_duration_seconds",
        "Seconds from the provisioner seeing a pod waiting for capacity to the first decision that looked at it";
    PODS_EVICTION_REQUESTS: Counter, "karpenter_pods_eviction_requests_total",
        "Eviction requests made while draining, by the HTTP status code of the answer";
    PODS_DRAINED: Counter, "karpenter_pods_drained_total",
        "Pods evicted or deleted while draining, by the reason of the disruption";
    VOLUNTARY_DISRUPTION_ELIGIBLE_NODES: Gauge, "karpenter_voluntary_disruption_eligible_nodes",
        "Nodes a disruption round could act on, by reason (empty, underutilized, drifted)";
    VOLUNTARY_DISRUPTION_DECISIONS: Counter, "karpenter_voluntary_disruption_decisions_total",
        "Disruption decisions carried out, by decision (delete, replace), reason and consolidation type";
    VOLUNTARY_DISRUPTION_DECISIONS_BY_NODEPOOL: Counter, "karpenter_voluntary_disruption_decisions_by_nodepool_total",
        "Disruption decisions carried out, by NodePool of their candidates, decision, reason and consolidation type";
    VOLUNTARY_DISRUPTION_EVALUATION: Histogram(DURATION_BUCKETS), "karpenter_voluntary_disruption_decision_evaluation_duration_seconds",
        "Seconds a disruption round took to decide, by the reason and consolidation type of the method that decided (or the last one tried)";
    VOLUNTARY_DISRUPTION_QUEUE_FAILURES: Counter, "karpenter_voluntary_disruption_queue_failures_total",
        "Replacements that never became ready in disruption commands given up after acting, by decision, reason and consolidation type";
    NODEPOOLS_NODES_CONSUMING_BUDGETS: Gauge, "karpenter_nodepools_nodes_consuming_budgets",
        "Initialized nodes of the NodePool being disrupted or not Ready, which its budgets count as disrupting, by NodePool and reason";
    CONSOLIDATION_MOVES: Counter, "karpenter_consolidation_moves_total",
        "Consolidation moves scored, by decision (approved, rejected), NodePool and consolidation policy";
    CONSOLIDATION_SCORE: Histogram(SCORE_BUCKETS), "karpenter_consolidation_score",
        "Balanced NodePools' scores of consolidation moves (savings share over disruption share), by decision, NodePool and policy";
    SCHEDULER_UNSCHEDULABLE_PODS: Gauge, "karpenter_scheduler_unschedulable_pods_count",
        "Pods the last provisioning decision found no place for";
    SCHEDULER_PENDING_BY_ZONE: Gauge, "karpenter_scheduler_pending_pods_by_effective_zone_count",
        "Pending pods of the last provisioning decision, by the zone they can go to";
    SCHEDULER_IGNORED_PODS: Gauge, "karpenter_scheduler_ignored_pods_count",
        "Pending pods the last provisioning decision ignored because their spec is invalid";
    SCHEDULER_QUEUE_DEPTH: Gauge, "karpenter_scheduler_queue_depth",
        "Pods the scheduling simulation under way (or the last one, once done: 0) has still to place, by controller and scheduling_id";
    SCHEDULER_UNFINISHED_WORK: Gauge, "karpenter_scheduler_unfinished_work_seconds",
        "Seconds the scheduling simulation under way has run, by controller and scheduling_id (absent between simulations)";
    SCHEDULER_SCHEDULING_DURATION: Histogram(DURATION_BUCKETS), "karpenter_scheduler_scheduling_duration_seconds",
        "Seconds a scheduling simulation took, by controller (provisioner)";
    INTERRUPTION_RECEIVED: Counter, "karpenter_interruption_received_messages_total",
        "Interruption queue messages received, by message type";
    INTERRUPTION_DELETED: Counter, "karpenter_interruption_deleted_messages_total",
        "Interruption queue messages handled and deleted";
    INSTANCE_STATUS_UNHEALTHY: Counter, "karpenter_interruption_instance_status_unhealthy_total",
        "Instances of the cluster EC2 reported unhealthy, by category";
    CLUSTER_STATE_NODE_COUNT: Gauge, "karpenter_cluster_state_node_count",
        "Nodes in the controller's view of the cluster";
    CLUSTER_STATE_SYNCED: Gauge, "karpenter_cluster_state_synced",
        "1 when every NodeClaim the controller created is in its view of the cluster, 0 while one is not yet";
    CLUSTER_STATE_UNSYNCED_TIME: Gauge, "karpenter_cluster_state_unsynced_time_seconds",
        "Seconds the controller's view of the cluster has lacked a NodeClaim it created (0 when synced)";
    INTERRUPTION_MESSAGE_QUEUE_DURATION: Histogram(DURATION_BUCKETS), "karpenter_interruption_message_queue_duration_seconds",
        "Seconds from an interruption message's event time to its handling";
    VOLUNTARY_DISRUPTION_FAILED_VALIDATIONS: Counter, "karpenter_voluntary_disruption_failed_validations_total",
        "Disruption commands given up when re-validated before acting, by consolidation type";
    LEADER_ELECTION_MASTER_STATUS: Gauge, "leader_election_master_status",
        "1 while this replica holds the leader Lease, 0 while it waits, by Lease name (only with leader election)";
    OTHER_PROVISIONER_LEADS: Gauge, "tenon_other_provisioner_leads",
        "1 while another provisioner's Lease (TENON_KARPENTER_LEASE) is held and renewed and Tenon stands down, 0 while it acts";
    CLIENT_GO_REQUESTS: Counter, "client_go_request_total",
        "Requests to the API server, by HTTP status code (<error> without an answer) and method";
    CLIENT_GO_DURATION: Histogram(CLIENT_BUCKETS), "client_go_request_duration_seconds",
        "Seconds requests to the API server took to answer (rate-limit waits and read retries included), by verb, group, version, resource (kind) and subresource";
    RECONCILE_TIME: Histogram(RECONCILE_BUCKETS), "controller_runtime_reconcile_time_seconds",
        "Seconds each reconcile took, by controller (Karpenter's controller name for the concern)";
    RECONCILE_TOTAL: Counter, "controller_runtime_reconcile_total",
        "Reconciles run, by controller and result (success, error)";
    RECONCILE_ERRORS: Counter, "controller_runtime_reconcile_errors_total",
        "Reconciles that failed, by controller";
    RECONCILE_ERROR_KINDS: Counter, "tenon_controller_reconcile_errors_total",
        "Reconciles that failed, by controller and error (kube, cloud, launch, invariant)";
    EVENTS_DROPPED: Counter, "tenon_events_dropped_total",
        "Kubernetes Events not written because the API was throttling or refusing them";
    GARBAGE_COLLECTED_INSTANCES: Counter, "tenon_garbage_collected_instances_total",
        "Instances terminated because no NodeClaim accounted for them";
    DISRUPTION_EXECUTION: Gauge, "tenon_disruption_execution_seconds",
        "Seconds the last disruption command waited for its replacements before deleting its candidates";
    PROVISIONING_DECISIONS: Counter, "tenon_provisioning_decisions_total",
        "Provisioning decisions made";
    PROVISIONING_DECISION_SECONDS: Gauge, "tenon_provisioning_decision_seconds",
        "Seconds the last provisioning decision took, reading the cluster included";
    NODECLAIMS_LAUNCHED: Counter, "tenon_nodeclaims_launched_total",
        "NodeClaims whose instance was launched, by NodePool";
    NODECLAIM_CONDITION_COUNT: Gauge, "operator_nodeclaim_status_condition_count",
        "1 for each condition of each NodeClaim, by namespace, name, type, status and reason";
    NODECLAIM_CONDITION_CURRENT: Gauge, "operator_nodeclaim_status_condition_current_status_seconds",
        "Seconds since each condition of each NodeClaim last changed status, by namespace, name, type, status and reason";
    NODECLAIM_CONDITION_TRANSITIONS: Counter, "operator_nodeclaim_status_condition_transitions_total",
        "Status changes of NodeClaim conditions seen by this process, by type and the new status and reason";
    NODECLAIM_CONDITION_TRANSITION_SECONDS: Histogram(HALF_DOUBLING_15), "operator_nodeclaim_status_condition_transition_seconds",
        "Seconds a NodeClaim condition held a status before it changed, by type and that status";
    NODECLAIM_TERMINATION_CURRENT: Gauge, "operator_nodeclaim_termination_current_time_seconds",
        "Seconds each deleted NodeClaim has been terminating, by namespace and name";
    NODECLAIM_TERMINATION_DURATION: Histogram(HALF_DOUBLING_15), "operator_nodeclaim_termination_duration_seconds",
        "Seconds deleted NodeClaims took to go, from their deletion";
    NODEPOOL_CONDITION_COUNT: Gauge, "operator_nodepool_status_condition_count",
        "1 for each condition of each NodePool, by namespace, name, type, status and reason";
    NODEPOOL_CONDITION_CURRENT: Gauge, "operator_nodepool_status_condition_current_status_seconds",
        "Seconds since each condition of each NodePool last changed status, by namespace, name, type, status and reason";
    NODEPOOL_CONDITION_TRANSITIONS: Counter, "operator_nodepool_status_condition_transitions_total",
        "Status changes of NodePool conditions seen by this process, by type and the new status and reason";
    NODEPOOL_CONDITION_TRANSITION_SECONDS: Histogram(HALF_DOUBLING_15), "operator_nodepool_status_condition_transition_seconds",
        "Seconds a NodePool condition held a status before it changed, by type and that status";
    NODEPOOL_TERMINATION_CURRENT: Gauge, "operator_nodepool_termination_current_time_seconds",
        "Seconds each deleted NodePool has been terminating, by namespace and name";
    NODEPOOL_TERMINATION_DURATION: Histogram(HALF_DOUBLING_15), "operator_nodepool_termination_duration_seconds",
        "Seconds deleted NodePools took to go, from their deletion";
    NODE_CONDITION_COUNT: Gauge, "operator_node_status_condition_count",
        "1 for each condition of each Node, by namespace, name, type, status and reason";
    NODE_CONDITION_CURRENT: Gauge, "operator_node_status_condition_current_status_seconds",
        "Seconds since each condition of each Node last changed status, by namespace, name, type, status and reason";
    NODE_CONDITION_TRANSITIONS: Counter, "operator_node_status_condition_transitions_total",
        "Status changes of Node conditions seen by this process, by type and the new status and reason";
    NODE_CONDITION_TRANSITION_SECONDS: Histogram(HALF_DOUBLING_15), "operator_node_status_condition_transition_seconds",
        "Seconds a Node condition held a status before it changed, by type and that status";
    NODE_TERMINATION_CURRENT: Gauge, "operator_node_termination_current_time_seconds",
        "Seconds each deleted Node has been terminating, by namespace and name";
    NODE_TERMINATION_DURATION: Histogram(HALF_DOUBLING_15), "operator_node_termination_duration_seconds",
        "Seconds deleted Nodes took to go, from their deletion";
    EC2NODECLASS_CONDITION_COUNT: Gauge, "operator_ec2nodeclass_status_condition_count",
        "1 for each condition of each EC2NodeClass, by namespace, name, type, status and reason";
    EC2NODECLASS_CONDITION_CURRENT: Gauge, "operator_ec2nodeclass_status_condition_current_status_seconds",
        "Seconds since each condition of each EC2NodeClass last changed status, by namespace, name, type, status and reason";
    EC2NODECLASS_CONDITION_TRANSITIONS: Counter, "operator_ec2nodeclass_status_condition_transitions_total",
        "Status changes of EC2NodeClass conditions seen by this process, by type and the new status and reason";
    EC2NODECLASS_CONDITION_TRANSITION_SECONDS: Histogram(DEFAULT_BUCKETS), "operator_ec2nodeclass_status_condition_transition_seconds",
        "Seconds a EC2NodeClass condition held a status before it changed, by type and that status";
    EC2NODECLASS_TERMINATION_CURRENT: Gauge, "operator_ec2nodeclass_termination_current_time_seconds",
        "Seconds each deleted EC2NodeClass has been terminating, by namespace and name";
    EC2NODECLASS_TERMINATION_DURATION: Histogram(DEFAULT_BUCKETS), "operator_ec2nodeclass_termination_duration_seconds",
        "Seconds deleted EC2NodeClasss took to go, from their deletion";
    CONDITION_COUNT: Gauge, "operator_status_condition_count",
        "Deprecated: as operator_KIND_status_condition_count for NodeClaim, NodePool and EC2NodeClass, with group and kind";
    CONDITION_CURRENT: Gauge, "operator_status_condition_current_status_seconds",
        "Deprecated: as operator_KIND_status_condition_current_status_seconds, with group and kind";
    CONDITION_TRANSITIONS: Counter, "operator_status_condition_transitions_total",
        "Deprecated: as operator_KIND_status_condition_transitions_total, with group and kind";
    CONDITION_TRANSITION_SECONDS: Histogram(DEFAULT_BUCKETS), "operator_status_condition_transition_seconds",
        "Deprecated: as operator_KIND_status_condition_transition_seconds, with group and kind";
    TERMINATION_CURRENT: Gauge, "operator_termination_current_time_seconds",
        "Deprecated: as operator_KIND_termination_current_time_seconds, with group and kind";
    TERMINATION_DURATION: Histogram(DEFAULT_BUCKETS), "operator_termination_duration_seconds",
        "Deprecated: as operator_KIND_termination_duration_seconds, with group and kind";
    INTERRUPTION_MALFORMED: Counter, "tenon_interruption_malformed_messages_total",
        "Interruption queue messages that could not be read, deleted unhandled";
}

/// One kind's status-controller families, and the kind's group and name where Karpenter
/// also writes the deprecated kind-less families for it.
pub struct StatusFamilies {
    pub count: &'static Family,
    pub current: &'static Family,
    pub transitions: &'static Family,
    pub transition_seconds: &'static Family,
    pub terminating: &'static Family,
    pub terminated: &'static Family,
    pub deprecated: Option<(&'static str, &'static str)>,
}

/// The kind-less families Karpenter still writes for some kinds.
pub const DEPRECATED_STATUS: StatusFamilies = StatusFamilies {
    count: CONDITION_COUNT,
    current: CONDITION_CURRENT,
    transitions: CONDITION_TRANSITIONS,
    transition_seconds: CONDITION_TRANSITION_SECONDS,
    terminating: TERMINATION_CURRENT,
    terminated: TERMINATION_DURATION,
    deprecated: None,
};

pub const NODECLAIM_STATUS: StatusFamilies = StatusFamilies {
    count: NODECLAIM_CONDITION_COUNT,
    current: NODECLAIM_CONDITION_CURRENT,
    transitions: NODECLAIM_CONDITION_TRANSITIONS,
    transition_seconds: NODECLAIM_CONDITION_TRANSITION_SECONDS,
    terminating: NODECLAIM_TERMINATION_CURRENT,
    terminated: NODECLAIM_TERMINATION_DURATION,
    deprecated: Some(("karpenter.sh", "NodeClaim")),
};

pub const NODEPOOL_STATUS: StatusFamilies = StatusFamilies {
    count: NODEPOOL_CONDITION_COUNT,
    current: NODEPOOL_CONDITION_CURRENT,
    transitions: NODEPOOL_CONDITION_TRANSITIONS,
    transition_seconds: NODEPOOL_CONDITION_TRANSITION_SECONDS,
    terminating: NODEPOOL_TERMINATION_CURRENT,
    terminated: NODEPOOL_TERMINATION_DURATION,
    deprecated: Some(("karpenter.sh", "NodePool")),
};

pub const NODE_STATUS: StatusFamilies = StatusFamilies {
    count: NODE_CONDITION_COUNT,
    current: NODE_CONDITION_CURRENT,
    transitions: NODE_CONDITION_TRANSITIONS,
    transition_seconds: NODE_CONDITION_TRANSITION_SECONDS,
    terminating: NODE_TERMINATION_CURRENT,
    terminated: NODE_TERMINATION_DURATION,
    deprecated: None,
};

pub const EC2NODECLASS_STATUS: StatusFamilies = StatusFamilies {
    count: EC2NODECLASS_CONDITION_COUNT,
    current: EC2NODECLASS_CONDITION_CURRENT,
    transitions: EC2NODECLASS_CONDITION_TRANSITIONS,
    transition_seconds: EC2NODECLASS_CONDITION_TRANSITION_SECONDS,
    terminating: EC2NODECLASS_TERMINATION_CURRENT,
    terminated: EC2NODECLASS_TERMINATION_DURATION,
    deprecated: Some(("karpenter.k8s.aws", "EC2NodeClass")),
};
