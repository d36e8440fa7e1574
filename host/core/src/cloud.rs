//! The cloud boundary: what the controller asks of a cloud provider, and what it gets back.
//!
//! Implementations live outside the core (`tenon-aws` for EC2). The trait is async because
//! every real implementation is; the core itself never calls it, so it needs no runtime.

use crate::requirements::Requirements;
use crate::taints::Taint;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use tenon_api::EC2NodeClass;
use thiserror::Error;

/// One way to satisfy a NodeClaim: an instance type in a zone at a capacity type.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchOption {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// USD per hour, as the catalog priced it.
    pub price: f64,
    /// The instance type's well-known labels (architecture, GPU count…): they decide which
    /// of the NodeClass' AMIs it boots. Shared by the type's offerings.
    pub labels: Arc<BTreeMap<String, String>>,
}

/// A NodeClaim to launch.
#[derive(Clone, Debug)]
pub struct LaunchRequest {
    pub nodeclaim: String,
    pub nodepool: String,
    /// The EC2NodeClass with its resolved status (subnets, security groups, AMIs, profile).
    pub nodeclass: EC2NodeClass,
    /// Best first: the order the NodePool's scoring policy ranked the offerings in. The
    /// provider must let the cloud honour this order, not re-rank by its own criteria.
    pub options: Vec<LaunchOption>,
    /// Which attempt at launching this NodeClaim this is: part of the request's idempotency
    /// token, so a retry after a failure is a new request (not answered with the failure
    /// before it), while the same attempt repeated after a crash is answered with its result.
    pub attempt: u32,
    /// This process created the NodeClaim and has sent no launch for it: no instance can
    /// carry its tag yet, so the provider need not look for one before launching. False
    /// whenever that is not known (a restart, a retry, another replica's NodeClaim).
    pub never_launched: bool,
    /// A NodePool's scoring policy ranked `options`: the cloud is asked to honour their
    /// order. Otherwise it may pick among them by its own price and capacity judgement (EC2:
    /// Karpenter's lowest-price and price-capacity-optimized strategies).
    pub ranked: bool,
    /// Labels and taints the node registers with (the NodePool template's).
    pub labels: BTreeMap<String, String>,
    pub taints: Vec<Taint>,
    pub startup_taints: Vec<Taint>,
    /// `default` or `dedicated`: see [`launch_tenancy`].
    pub tenancy: String,
    /// The NodeClaim's minValues were relaxed (`MIN_VALUES_POLICY=BestEffort`).
    pub min_values_relaxed: bool,
}

/// The tenancy a NodeClaim with `requirements` is launched with, as Karpenter chooses it:
/// `default` when its `karpenter.k8s.aws/instance-tenancy` requirement allows it (or there is
/// none), else `dedicated`.
pub fn launch_tenancy(requirements: &Requirements) -> &'static str {
    match requirements.get(tenon_api::wellknown::LABEL_INSTANCE_TENANCY) {
        Some(r) if !r.has(TENANCY_DEFAULT) && r.has(TENANCY_DEDICATED) => TENANCY_DEDICATED,
        _ => TENANCY_DEFAULT,
    }
}

pub const TENANCY_DEFAULT: &str = "default";
pub const TENANCY_DEDICATED: &str = "dedicated";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceState {
    Pending,
    Running,
    ShuttingDown,
    Stopping,
    Stopped,
    Terminated,
}

impl InstanceState {
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Self::Pending,
            "running" => Self::Running,
            "shutting-down" => Self::ShuttingDown,
            "stopping" => Self::Stopping,
            "stopped" => Self::Stopped,
            "terminated" => Self::Terminated,
            _ => return None,
        })
    }

    /// Still costs money and may still become (or be) a node.
    pub fn is_live(self) -> bool {
        !matches!(self, Self::ShuttingDown | Self::Terminated)
    }
}

/// A cloud instance as the provider sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct Instance {
    pub id: String,
    /// `aws:///<zone>/<id>`: the Node's `spec.providerID`.
    pub provider_id: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    pub image_id: String,
    pub subnet_id: String,
    pub security_groups: Vec<String>,
    pub state: InstanceState,
    /// Seconds since the epoch.
    pub launched_at: Option<i64>,
    pub tags: BTreeMap<String, String>,
    /// `default` or `dedicated`: the instance's `Placement.Tenancy`.
    pub tenancy: String,
}

impl Instance {
    pub fn nodeclaim(&self) -> Option<&str> {
        self.tags.get(tenon_api::wellknown::TAG_NODECLAIM).map(String::as_str)
    }
}

/// An offering that just failed for lack of capacity.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnavailableOffering {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
}

#[derive(Debug, Error)]
pub enum CloudError {
    #[error("instance {0} not found")]
    NotFound(String),
    /// Every option failed for capacity; the provider has cached them as unavailable.
    #[error("insufficient capacity for all {} option(s): {message}", offerings.len())]
    InsufficientCapacity { offerings: Vec<UnavailableOffering>, message: String },
    /// The NodeClass cannot launch yet (no subnets, no AMI, no profile…): the message says
    /// which field and what to fix.
    #[error("EC2NodeClass {nodeclass} is not ready: {message}")]
    NodeClassNotReady { nodeclass: String, message: String },
    #[error("invalid launch request: {0}")]
    InvalidRequest(String),
    /// The cloud API failed after retries.
    #[error("{operation}: {message}")]
    Api { operation: String, message: String },
    /// A launch failed for a reason the provider names (Karpenter's `CreateError`): the
    /// NodeClaim's `Launched` condition carries both.
    #[error("{message}")]
    Launch { reason: String, message: String },
}

/// What a cloud provider does for the controller.
pub trait CloudProvider: Send + Sync {
    /// Launches one instance for `req.nodeclaim`. Idempotent per NodeClaim: when an instance
    /// for it already exists, that instance is returned and nothing new is launched.
    fn create(&self, req: &LaunchRequest) -> impl Future<Output = Result<Instance, CloudError>> + Send;
    /// Terminates instances; ids already gone are not an error.
    fn delete(&self, ids: &[String]) -> impl Future<Output = Result<(), CloudError>> + Send;
    fn get(&self, id: &str) -> impl Future<Output = Result<Instance, CloudError>> + Send;
    /// Every live instance this cluster owns (for garbage collection).
    fn list(&self) -> impl Future<Output = Result<Vec<Instance>, CloudError>> + Send;
    /// Why `instance` no longer matches its NodeClass' resolved status, if it does not;
    /// `labels` are its NodeClaim's (its instance type's and offering's).
    fn is_drifted(
        &self,
        instance: &Instance,
        labels: &BTreeMap<String, String>,
        nodeclass: &EC2NodeClass,
    ) -> Option<String>;
}
