//! Every well-known label, annotation, taint, finalizer and condition name in one place, so a
//! rename is one edit and a typo is a compile error.

/// API groups.
pub const KARPENTER_GROUP: &str = "karpenter.sh";
pub const AWS_GROUP: &str = "karpenter.k8s.aws";
pub const TENON_DOMAIN: &str = "tenon.dev";

// Karpenter labels.
pub const LABEL_NODEPOOL: &str = "karpenter.sh/nodepool";
pub const LABEL_CAPACITY_TYPE: &str = "karpenter.sh/capacity-type";
pub const LABEL_INITIALIZED: &str = "karpenter.sh/initialized";
pub const LABEL_REGISTERED: &str = "karpenter.sh/registered";
pub const LABEL_NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";
/// On a Node: whatever provisions it manages its taints, so registration leaves them.
pub const LABEL_DO_NOT_SYNC_TAINTS: &str = "karpenter.sh/do-not-sync-taints";

// Kubernetes labels.
pub const LABEL_HOSTNAME: &str = "kubernetes.io/hostname";
pub const LABEL_ARCH: &str = "kubernetes.io/arch";
pub const LABEL_OS: &str = "kubernetes.io/os";
pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";
pub const LABEL_WINDOWS_BUILD: &str = "node.kubernetes.io/windows-build";
pub const LABEL_ZONE_ID: &str = "topology.k8s.aws/zone-id";

// AWS instance labels.
pub const LABEL_INSTANCE_CATEGORY: &str = "karpenter.k8s.aws/instance-category";
pub const LABEL_INSTANCE_FAMILY: &str = "karpenter.k8s.aws/instance-family";
pub const LABEL_INSTANCE_GENERATION: &str = "karpenter.k8s.aws/instance-generation";
pub const LABEL_INSTANCE_SIZE: &str = "karpenter.k8s.aws/instance-size";
pub const LABEL_INSTANCE_CPU: &str = "karpenter.k8s.aws/instance-cpu";
pub const LABEL_INSTANCE_CPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-cpu-manufacturer";
pub const LABEL_INSTANCE_MEMORY: &str = "karpenter.k8s.aws/instance-memory";
pub const LABEL_INSTANCE_HYPERVISOR: &str = "karpenter.k8s.aws/instance-hypervisor";
pub const LABEL_INSTANCE_LOCAL_NVME: &str = "karpenter.k8s.aws/instance-local-nvme";
pub const LABEL_INSTANCE_NETWORK_BANDWIDTH: &str = "karpenter.k8s.aws/instance-network-bandwidth";
pub const LABEL_INSTANCE_EBS_BANDWIDTH: &str = "karpenter.k8s.aws/instance-ebs-bandwidth";
pub const LABEL_INSTANCE_GPU_NAME: &str = "karpenter.k8s.aws/instance-gpu-name";
pub const LABEL_INSTANCE_GPU_MANUFACTURER: &str = "karpenter.k8s.aws/instance-gpu-manufacturer";
pub const LABEL_INSTANCE_GPU_COUNT: &str = "karpenter.k8s.aws/instance-gpu-count";
pub const LABEL_INSTANCE_GPU_MEMORY: &str = "karpenter.k8s.aws/instance-gpu-memory";
pub const LABEL_INSTANCE_ACCELERATOR_NAME: &str = "karpenter.k8s.aws/instance-accelerator-name";
pub const LABEL_INSTANCE_ACCELERATOR_MANUFACTURER: &str = "karpenter.k8s.aws/instance-accelerator-manufacturer";
pub const LABEL_INSTANCE_ACCELERATOR_COUNT: &str = "karpenter.k8s.aws/instance-accelerator-count";
pub const LABEL_INSTANCE_CAPABILITY_FLEX: &str = "karpenter.k8s.aws/instance-capability-flex";
pub const LABEL_INSTANCE_CPU_CLOCK_MHZ: &str = "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz";
pub const LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT: &str = "karpenter.k8s.aws/instance-encryption-in-transit-supported";
pub const LABEL_INSTANCE_NITRO_ENCLAVES: &str = "karpenter.k8s.aws/instance-nitro-enclaves-supported";
pub const LABEL_INSTANCE_TENANCY: &str = "karpenter.k8s.aws/instance-tenancy";

// Extended resources the AWS provider publishes for instance types.
pub const RESOURCE_NVIDIA_GPU: &str = "nvidia.com/gpu";
pub const RESOURCE_AMD_GPU: &str = "amd.com/gpu";
pub const RESOURCE_HABANA_GAUDI: &str = "habana.ai/gaudi";
pub const RESOURCE_AWS_NEURON: &str = "aws.amazon.com/neuron";
pub const RESOURCE_AWS_NEURON_CORE: &str = "aws.amazon.com/neuroncore";
pub const RESOURCE_EFA: &str = "vpc.amazonaws.com/efa";

/// Labels in restricted domains that users may still constrain (Karpenter core's
/// `WellKnownLabels`), plus the deprecated aliases Kubernetes still accepts.
pub const WELL_KNOWN_KUBERNETES_LABELS: &[&str] = &[
    LABEL_NODEPOOL,
    LABEL_CAPACITY_TYPE,
    LABEL_ZONE,
    LABEL_REGION,
    LABEL_INSTANCE_TYPE,
    LABEL_ARCH,
    LABEL_OS,
    LABEL_WINDOWS_BUILD,
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
];

/// The `karpenter.k8s.aws/*` labels the AWS provider publishes for instance types; any other
/// key in that domain is rejected as Karpenter's AWS CRDs reject it.
pub const WELL_KNOWN_AWS_LABELS: &[&str] = &[
    LABEL_INSTANCE_CATEGORY,
    LABEL_INSTANCE_FAMILY,
    LABEL_INSTANCE_GENERATION,
    LABEL_INSTANCE_SIZE,
    LABEL_INSTANCE_CPU,
    LABEL_INSTANCE_CPU_MANUFACTURER,
    LABEL_INSTANCE_CPU_CLOCK_MHZ,
    LABEL_INSTANCE_MEMORY,
    LABEL_INSTANCE_HYPERVISOR,
    LABEL_INSTANCE_ENCRYPTION_IN_TRANSIT,
    LABEL_INSTANCE_LOCAL_NVME,
    LABEL_INSTANCE_NETWORK_BANDWIDTH,
    LABEL_INSTANCE_EBS_BANDWIDTH,
    LABEL_INSTANCE_GPU_NAME,
    LABEL_INSTANCE_GPU_MANUFACTURER,
    LABEL_INSTANCE_GPU_COUNT,
    LABEL_INSTANCE_GPU_MEMORY,
    LABEL_INSTANCE_ACCELERATOR_NAME,
    LABEL_INSTANCE_ACCELERATOR_MANUFACTURER,
    LABEL_INSTANCE_ACCELERATOR_COUNT,
    LABEL_INSTANCE_CAPABILITY_FLEX,
    LABEL_INSTANCE_NITRO_ENCLAVES,
    LABEL_INSTANCE_TENANCY,
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
];

// Annotations.
pub const ANNOTATION_DO_NOT_DISRUPT: &str = "karpenter.sh/do-not-disrupt";
pub const ANNOTATION_NODEPOOL_HASH: &str = "karpenter.sh/nodepool-hash";
pub const ANNOTATION_NODEPOOL_HASH_VERSION: &str = "karpenter.sh/nodepool-hash-version";
pub const ANNOTATION_NODECLASS_HASH: &str = "karpenter.k8s.aws/ec2nodeclass-hash";
pub const ANNOTATION_NODECLASS_HASH_VERSION: &str = "karpenter.k8s.aws/ec2nodeclass-hash-version";
/// On a NodeClaim being deleted with a terminationGracePeriod: when its pods must be gone
/// (its deletion time plus the grace period, RFC 3339), written once.
pub const ANNOTATION_NODECLAIM_TERMINATION_TIME: &str = "karpenter.sh/nodeclaim-termination-timestamp";
/// `"true"` on a NodeClaim created with minValues lowered to what the catalog had
/// (`MIN_VALUES_POLICY=BestEffort`), `"false"` on every other one Karpenter creates.
pub const ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED: &str = "karpenter.sh/nodeclaim-min-values-relaxed";
pub const ANNOTATION_POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// On a NodeClaim until it is launched: the offerings it may launch as, best first, as the
/// NodePool's scorer ranked them when the NodeClaim was planned.
pub const ANNOTATION_LAUNCH_OFFERINGS: &str = "tenon.dev/launch-offerings";
/// On a NodeClaim whose launch failed: the attempt the next launch is (recorded before it is
/// made, so a launch repeated after a crash is the same attempt).
pub const ANNOTATION_LAUNCH_ATTEMPT: &str = "tenon.dev/launch-attempt";

// Tenon's own NodePool annotations: the policies that decide for the NodePool.
pub const ANNOTATION_SCORING_POLICY: &str = "tenon.dev/scoring-policy";
pub const ANNOTATION_CONSOLIDATION_POLICY: &str = "tenon.dev/consolidation-policy";
pub const ANNOTATION_DISRUPTION_POLICY: &str = "tenon.dev/disruption-policy";
/// The configuration every policy of the NodePool gets unless its hook has its own.
pub const ANNOTATION_POLICY_CONFIG: &str = "tenon.dev/policy-config";
/// Each hook's own configuration, in place of `tenon.dev/policy-config` for that hook.
pub const ANNOTATION_SCORING_CONFIG: &str = "tenon.dev/scoring-config";
pub const ANNOTATION_CONSOLIDATION_CONFIG: &str = "tenon.dev/consolidation-config";
pub const ANNOTATION_DISRUPTION_CONFIG: &str = "tenon.dev/disruption-config";
pub const ANNOTATION_POLICY_MODE: &str = "tenon.dev/policy-mode";
pub const TENON_NODEPOOL_ANNOTATIONS: &[&str] = &[
    ANNOTATION_SCORING_POLICY,
    ANNOTATION_CONSOLIDATION_POLICY,
    ANNOTATION_DISRUPTION_POLICY,
    ANNOTATION_POLICY_CONFIG,
    ANNOTATION_SCORING_CONFIG,
    ANNOTATION_CONSOLIDATION_CONFIG,
    ANNOTATION_DISRUPTION_CONFIG,
    ANNOTATION_POLICY_MODE,
];

// Taints (key; the effect is in the comment's name).
/// `karpenter.sh/unregistered:NoExecute`, on a Node until Karpenter has registered it.
pub const TAINT_UNREGISTERED: &str = "karpenter.sh/unregistered";
/// `karpenter.sh/disrupted:NoSchedule`, on a Node chosen for disruption.
pub const TAINT_DISRUPTED: &str = "karpenter.sh/disrupted";

// Finalizers.
pub const FINALIZER_TERMINATION: &str = "karpenter.sh/termination";
/// Set on a Node being terminated, so load balancers stop sending it traffic.
pub const LABEL_EXCLUDE_FROM_LOAD_BALANCERS: &str = "node.kubernetes.io/exclude-from-external-load-balancers";
/// On EC2NodeClasses: their instance profile and launch templates go before they do.
pub const FINALIZER_NODECLASS_TERMINATION: &str = "karpenter.k8s.aws/termination";

// Capacity types and architectures.
pub const CAPACITY_TYPE_ON_DEMAND: &str = "on-demand";
pub const CAPACITY_TYPE_SPOT: &str = "spot";
pub const CAPACITY_TYPE_RESERVED: &str = "reserved";
pub const ARCH_AMD64: &str = "amd64";
pub const ARCH_ARM64: &str = "arm64";

// AWS resource tags.
pub const TAG_EKS_CLUSTER_NAME: &str = "eks:eks-cluster-name";
pub const TAG_NODECLAIM: &str = "karpenter.sh/nodeclaim";
pub const TAG_CLUSTER_PREFIX: &str = "kubernetes.io/cluster/";

/// Condition types.
pub mod condition {
    pub const READY: &str = "Ready";
    // NodeClaim
    pub const LAUNCHED: &str = "Launched";
    pub const REGISTERED: &str = "Registered";
    pub const INITIALIZED: &str = "Initialized";
    pub const CONSOLIDATABLE: &str = "Consolidatable";
    pub const DRIFTED: &str = "Drifted";
    pub const EXPIRED: &str = "Expired";
    pub const TERMINATING: &str = "Terminating";
    pub const DISRUPTION_REASON: &str = "DisruptionReason";
    pub const DRAINED: &str = "Drained";
    pub const VOLUMES_DETACHED: &str = "VolumesDetached";
    pub const INSTANCE_TERMINATING: &str = "InstanceTerminating";
    pub const CONSISTENT_STATE_FOUND: &str = "ConsistentStateFound";
    // NodePool
    pub const NODE_CLASS_READY: &str = "NodeClassReady";
    pub const VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";
    pub const NODE_REGISTRATION_HEALTHY: &str = "NodeRegistrationHealthy";
    pub const POLICY_HEALTHY: &str = "PolicyHealthy";
    // EC2NodeClass
    pub const SUBNETS_READY: &str = "SubnetsReady";
    pub const SECURITY_GROUPS_READY: &str = "SecurityGroupsReady";
    pub const AMIS_READY: &str = "AMIsReady";
    pub const INSTANCE_PROFILE_READY: &str = "InstanceProfileReady";
    pub const CAPACITY_RESERVATIONS_READY: &str = "CapacityReservationsReady";
}
