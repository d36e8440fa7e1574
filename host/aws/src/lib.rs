//! (Long: `AwsProvider` and its settings, catalog cache and call wrappers; each AWS concern is its own module.)
//! Tenon's EC2 cloud provider: the instance catalog, EC2NodeClass resolution (subnets,
//! security groups, AMIs, instance profiles), launch templates, CreateFleet launches,
//! instance listing and termination, drift, and the SQS interruption queue.
//!
//! Every AWS operation this crate calls is listed in `docs/iam.md`; a test keeps the two in
//! step.

pub mod call_health;
mod clients;
mod conditions;
mod error;

pub mod catalog;
pub mod cluster;
pub mod describe_batcher;
pub mod fleet;
pub mod fleet_batcher;
pub mod instance_status;
pub mod instances;
pub mod interruption;
pub mod known_templates;
pub mod launch_template;
pub mod metrics;
pub mod nodeclass;
pub mod profile;
pub mod rate_gate;
pub mod sdk_metrics;
mod shaped;
mod tagging;
pub mod templates;
pub mod terminate_batcher;
pub mod unavailable;
pub mod userdata;
pub mod window;

pub use clients::{Clients, Connection, NoRegion};
pub use nodeclass::Resolution;
pub use userdata::ClusterInfo;

use catalog::RawCatalog;
use shaped::{ShapeKey, ShapedCatalogs};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_api::EC2NodeClass;
use tenon_core::catalog::{AmiFamilyFlags, AwsCatalogOptions, KubeletModel};
use tenon_core::cloud::{CloudError, CloudProvider, Instance, LaunchRequest};
use tenon_core::instancetype::InstanceType;
use unavailable::UnavailableOfferings;

/// Tag on launch templates: the cluster that owns them.
pub const TAG_CLUSTER: &str = "karpenter.k8s.aws/cluster";
/// Tag on instances and launch templates: the EC2NodeClass they were made for.
pub const TAG_NODECLASS: &str = "karpenter.k8s.aws/ec2nodeclass";

/// Launches the provider has under way at once. Identical requests share a CreateFleet call
/// (fleet_batcher.rs), but requests that differ (each NodeClaim's ranked offerings are its
/// own) would otherwise all land on EC2 at once, where they are throttled or time out
/// together and all retry. At ~1–2 s per launch, 64 in flight still launches a thousand
/// NodeClaims in well under a minute.
pub const LAUNCHES_IN_FLIGHT: usize = 64;

/// How long a fetched catalog (types, offerings, prices) is reused.
pub const CATALOG_TTL: Duration = Duration::from_secs(15 * 60);

#[derive(Clone, Debug)]
pub struct Settings {
    pub cluster: ClusterInfo,
    pub region: String,
    /// `MAJOR.MINOR` of the API server: AMI aliases resolve per Kubernetes version.
    pub kubernetes_version: String,
    /// Karpenter's `VM_MEMORY_OVERHEAD_PERCENT` and `RESERVED_ENIS`.
    pub capacity: CapacitySettings,
}

/// Controller-wide settings of the capacity model.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CapacitySettings {
    pub vm_memory_overhead: f64,
    pub reserved_enis: i64,
}

impl Default for CapacitySettings {
    fn default() -> Self {
        CapacitySettings { vm_memory_overhead: tenon_core::catalog::DEFAULT_VM_MEMORY_OVERHEAD, reserved_enis: 0 }
    }
}

/// Launch settings the controller learns from the cluster or its feature gates, set after
/// [`AwsProvider::new`]; the defaults are Karpenter's.
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchSettings {
    /// The ClusterIP of the cluster's DNS Service (`kube-system/kube-dns`): the kubelet's
    /// `clusterDNS` when the NodeClass sets none, and the cluster's IP family.
    pub cluster_dns: Option<std::net::IpAddr>,
    /// Karpenter's `ReservedCapacity` feature gate (on by default): on-demand and spot
    /// launches stay out of open capacity reservations.
    pub reserved_capacity: bool,
}

impl Default for LaunchSettings {
    fn default() -> Self {
        LaunchSettings { cluster_dns: None, reserved_capacity: true }
    }
}

/// Whether this process may still launch or terminate instances: of several replicas, only
/// the one holding the leader Lease may, and it must stop the moment it cannot tell that it
/// still does. Open (always may) unless the controller sets it.
#[derive(Clone, Default)]
pub struct Fence(Option<Arc<dyn Fn() -> bool + Send + Sync>>);

impl Fence {
    pub fn new(may_act: impl Fn() -> bool + Send + Sync + 'static) -> Fence {
        Fence(Some(Arc::new(may_act)))
    }

    /// `Err` when `operation` may not be called now.
    pub fn check(&self, operation: &str) -> Result<(), CloudError> {
        match &self.0 {
            Some(may_act) if !may_act() => Err(CloudError::Api {
                operation: operation.into(),
                message: "not called: this replica does not lead (its leader Lease lapsed, or another provisioner leads the cluster)".into(),
            }),
            _ => Ok(()),
        }
    }
}

/// The catalog cache: the last good catalog, and how its refresh goes.
#[derive(Default)]
struct CatalogSlot {
    state: std::sync::Mutex<CatalogState>,
    /// Bumped when a refresh ends.
    done: tokio::sync::watch::Sender<u64>,
}

/// One of the launches allowed under way at once, held until dropped.
pub struct LaunchSlot(#[allow(dead_code)] tokio::sync::OwnedSemaphorePermit);

#[derive(Default)]
struct CatalogState {
    current: Option<(Instant, Arc<RawCatalog>)>,
    refreshing: bool,
    failures: u32,
    retry_at: Option<Instant>,
    last_error: Option<String>,
}

impl CatalogSlot {
    fn finish(&self, fetched: Result<RawCatalog, CloudError>) {
        if let Ok(mut s) = self.state.lock() {
            let now = Instant::now();
            match fetched {
                Ok(c) => {
                    s.current = Some((now, Arc::new(c)));
                    s.failures = 0;
                    s.retry_at = None;
                    s.last_error = None;
                }
                Err(e) => {
                    s.failures += 1;
                    let delay = call_health::retry_after(s.failures);
                    tracing::warn!(error = %e, retry_in = ?delay, serving_stale = s.current.is_some(), "could not refresh the instance catalog");
                    s.retry_at = Some(now + delay);
                    s.last_error = Some(e.to_string());
                }
            }
            s.refreshing = false;
        }
        self.done.send_modify(|n| *n += 1);
    }
}

pub struct AwsProvider {
    pub clients: Clients,
    pub settings: Settings,
    pub launch: LaunchSettings,
    pub unavailable: UnavailableOfferings,
    /// The provider's series, for the controller's `/metrics`.
    pub metrics: metrics::Metrics,
    /// Asked before every launch and termination: whether this process may still act.
    pub fence: Fence,
    /// How long a fetched catalog is served before it is refreshed ([`CATALOG_TTL`]).
    pub catalog_ttl: Duration,
    catalog: Arc<CatalogSlot>,
    shaped: ShapedCatalogs,
    /// Launches under way at once (CreateFleet and the calls around it), [`LAUNCHES_IN_FLIGHT`]
    /// unless [`AwsProvider::limit_launches`] says otherwise.
    launch_slots: Arc<tokio::sync::Semaphore>,
    /// Launch templates known to exist, so a launch does not describe them again.
    pub(crate) templates: known_templates::KnownTemplates,
    /// Identical CreateFleet requests in flight together become one call.
    pub(crate) fleets: fleet_batcher::FleetBatcher,
    /// Lookups of instances by id or NodeClaim in flight together become one call.
    pub(crate) describes: describe_batcher::DescribeBatcher,
    /// Terminations asked for together become one call.
    pub(crate) terminations: terminate_batcher::TerminateBatcher,
}

impl AwsProvider {
    pub async fn connect(conn: &Connection, settings: Settings) -> Result<Self, NoRegion> {
        Ok(AwsProvider::new(Clients::connect(conn).await?, settings))
    }

    pub fn new(clients: Clients, settings: Settings) -> Self {
        let metrics = metrics::Metrics::new(&clients.sdk);
        AwsProvider {
            clients,
            settings,
            launch: LaunchSettings::default(),
            unavailable: UnavailableOfferings::default(),
            metrics,
            fence: Fence::default(),
            catalog_ttl: CATALOG_TTL,
            catalog: Arc::default(),
            shaped: ShapedCatalogs::default(),
            launch_slots: Arc::new(tokio::sync::Semaphore::new(LAUNCHES_IN_FLIGHT)),
            templates: known_templates::KnownTemplates::default(),
            fleets: fleet_batcher::FleetBatcher::default(),
            describes: describe_batcher::DescribeBatcher::default(),
            terminations: terminate_batcher::TerminateBatcher::default(),
        }
    }

    /// The region's catalog. A stale one is served while a refresh runs in the background; a
    /// refresh that fails keeps the last good catalog and is tried again after 1 s doubling
    /// to 5 minutes, not on every call. Only when there has never been a catalog does a call
    /// wait, for the fetch under way (or fail at once, naming the last error, while backing
    /// off).
    pub async fn catalog(&self) -> Result<Arc<RawCatalog>, CloudError> {
        let mut done = self.catalog.done.subscribe();
        let now = Instant::now();
        let (current, start) = {
            let Ok(mut s) = self.catalog.state.lock() else {
                return Err(CloudError::Api { operation: "catalog".into(), message: "poisoned".into() });
            };
            if let Some((at, c)) = &s.current
                && now.duration_since(*at) < self.catalog_ttl
            {
                return Ok(c.clone());
            }
            let start = !s.refreshing && s.retry_at.is_none_or(|t| now >= t);
            s.refreshing |= start;
            (s.current.as_ref().map(|(_, c)| c.clone()), start)
        };
        if start {
            let (clients, region, slot) = (self.clients.clone(), self.settings.region.clone(), self.catalog.clone());
            tokio::spawn(async move {
                let fetched = catalog::fetch(&clients, &region).await;
                slot.finish(fetched);
            });
        }
        if let Some(c) = current {
            return Ok(c);
        }
        loop {
            {
                let s = self
                    .catalog
                    .state
                    .lock()
                    .map_err(|_| CloudError::Api { operation: "catalog".into(), message: "poisoned".into() })?;
                if let Some((_, c)) = &s.current {
                    return Ok(c.clone());
                }
                if !s.refreshing {
                    return Err(CloudError::Api {
                        operation: "catalog".into(),
                        message: s.last_error.clone().unwrap_or_else(|| "not fetched yet".into()),
                    });
                }
            }
            if done.changed().await.is_err() {
                return Err(CloudError::Api { operation: "catalog".into(), message: "refresh abandoned".into() });
            }
        }
    }

    /// Instance types a NodeClass can launch: offered in the zones of its resolved subnets,
    /// with offerings that recently failed for capacity marked unavailable. Shaped once per
    /// catalog and NodeClass shape and shared: passes and the launches they start hold one
    /// copy, not one per pass.
    pub async fn instance_types(&self, nc: &EC2NodeClass) -> Result<Arc<Vec<InstanceType>>, CloudError> {
        self.measured("GetInstanceTypes", self.shaped_instance_types(nc)).await
    }

    async fn shaped_instance_types(&self, nc: &EC2NodeClass) -> Result<Arc<Vec<InstanceType>>, CloudError> {
        let raw = self.catalog().await?;
        let zones: Vec<String> =
            nc.status.as_ref().map(|s| s.subnets.iter().map(|s| s.zone.clone()).collect()).unwrap_or_default();
        if zones.is_empty() {
            return Ok(Arc::default());
        }
        let zone_ids = nc
            .status
            .as_ref()
            .map(|s| s.subnets.iter().filter_map(|s| Some((s.zone.clone(), s.zone_id.clone()?))).collect())
            .unwrap_or_default();
        let key =
            ShapeKey { zones, zone_ids, options: self.catalog_options(nc), store: catalog::InstanceStore::of(nc) };
        let name = nc.metadata.name.as_deref().unwrap_or_default();
        let shared = self.shaped.get_or_shape(&raw, name, key);
        let mut types = shared.clone();
        let now = Instant::now();
        // A zone none of whose subnets has a free address offers nothing for now: decided once
        // per zone, not per offering.
        let subnets = nc.status.as_ref().map(|s| s.subnets.as_slice()).unwrap_or_default();
        let mut zone_full: std::collections::BTreeMap<&str, bool> = Default::default();
        for s in subnets {
            let out = self.unavailable.is_subnet_unavailable(&s.id, now);
            *zone_full.entry(s.zone.as_str()).or_insert(true) &= out;
        }
        for t in 0..shared.len() {
            for o in 0..shared[t].offerings.len() {
                let offering = &shared[t].offerings[o];
                if zone_full.get(offering.zone.as_str()).copied().unwrap_or(false)
                    || self.unavailable.is_unavailable(&shared[t].name, &offering.zone, &offering.capacity_type, now)
                {
                    // Copied on the first mark only; the shared copy stays as the catalog has it.
                    Arc::make_mut(&mut types)[t].offerings[o].available = false;
                }
            }
        }
        Ok(types)
    }

    /// How the capacity model shapes instance types for a NodeClass.
    fn catalog_options(&self, nc: &EC2NodeClass) -> AwsCatalogOptions {
        AwsCatalogOptions {
            region: self.settings.region.clone(),
            root_volume_bytes: root_volume_bytes(nc),
            spot: true,
            kubelet: kubelet_model(nc),
            ami_family: AmiFamilyFlags::of(&nc.ami_family()),
            reserved_enis: self.settings.capacity.reserved_enis,
            vm_memory_overhead: self.settings.capacity.vm_memory_overhead,
        }
    }

    /// The capacity (pods, EFA interfaces…) of the named instance types under the NodeClass,
    /// as the catalog planned them; a type the catalog does not price is left out.
    pub async fn capacities(
        &self,
        nc: &EC2NodeClass,
        names: &std::collections::BTreeSet<&str>,
    ) -> Result<std::collections::BTreeMap<String, tenon_core::resources::Resources>, CloudError> {
        let raw = self.catalog().await?;
        let types = raw.instance_types_named(names, &self.catalog_options(nc), catalog::InstanceStore::of(nc));
        Ok(types.into_iter().map(|t| (t.name, t.capacity)).collect())
    }

    /// Waits for one of the [`LAUNCHES_IN_FLIGHT`] launch slots. A caller that takes its slot
    /// before building the request keeps only the waiting launches' names in memory, not
    /// their requests.
    pub async fn launch_slot(&self) -> Result<LaunchSlot, CloudError> {
        // The semaphore is never closed, so waiting for a slot cannot fail in practice.
        let permit = self
            .launch_slots
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| CloudError::Api { operation: "launch".into(), message: e.to_string() })?;
        Ok(LaunchSlot(permit))
    }

    /// Launches a NodeClaim (as [`CloudProvider::create`]) that requests the resources named in
    /// `requested` (its `spec.resources.requests`): a Nitro sandbox gets enclaves enabled, EFA
    /// one EFA interface per network card the type offers. Waits for a launch slot.
    pub async fn launch(
        &self,
        req: &LaunchRequest,
        requested: &std::collections::BTreeSet<String>,
    ) -> Result<Instance, CloudError> {
        let slot = self.launch_slot().await?;
        self.launch_in(&slot, req, requested).await
    }

    /// As [`AwsProvider::launch`], in a slot the caller holds.
    pub async fn launch_in(
        &self,
        _slot: &LaunchSlot,
        req: &LaunchRequest,
        requested: &std::collections::BTreeSet<String>,
    ) -> Result<Instance, CloudError> {
        self.measured("Create", async {
            // As Karpenter's provider does: a launch EC2 refused because a template was gone
            // (its templates are forgotten) is tried once more at once, making them again.
            match fleet::create(self, req, requested).await {
                Err(CloudError::Launch { reason, .. }) if reason == error::TEMPLATE_GONE => {
                    fleet::create(self, req, requested).await
                }
                other => other,
            }
        })
        .await
    }

    /// EC2's status checks of the cluster's instances (DescribeInstanceStatus).
    pub async fn instance_statuses(
        &self,
    ) -> Result<Vec<tenon_core::orchestration::instance_health::InstanceChecks>, CloudError> {
        instance_status::list(&self.clients.ec2).await
    }

    /// The interruption queue named `queue` (a name or a URL), checked to exist.
    pub async fn interruption_queue(&self, queue: &str) -> Result<interruption::InterruptionQueue, CloudError> {
        interruption::InterruptionQueue::new(self.clients.sqs.clone(), queue).await
    }

    /// `Err` naming the launch-critical AWS operations hung past their bound (what makes
    /// `/healthz` fail), as of `now`; `Ok` with the others timing out, if any (see
    /// call_health.rs).
    pub fn hung_calls(&self, now: Instant) -> Result<Option<String>, String> {
        self.clients.calls.check(now)
    }

    /// At most `n` launches under way at once from now on (clones share the bound).
    pub fn limit_launches(&mut self, n: usize) {
        self.launch_slots = Arc::new(tokio::sync::Semaphore::new(n.max(1)));
    }

    /// Resolves the NodeClass' selectors and its instance profile. The caller writes
    /// `Resolution::status` back to the cluster.
    pub async fn resolve(&self, nc: &EC2NodeClass) -> Result<Resolution, CloudError> {
        let (subnets, subnet_check) = nodeclass::subnets(&self.clients.ec2, nc).await?;
        self.metrics.learn_zone_ids(subnets.iter().map(|s| (s.zone.as_str(), s.zone_id.as_deref())));
        let (security_groups, sg_check) = nodeclass::security_groups(&self.clients.ec2, nc).await?;
        let (amis, ami_check) = nodeclass::amis(&self.clients, nc, &self.settings.kubernetes_version).await?;
        let (instance_profile, profile_check) =
            profile::ensure(&self.clients.iam, &self.settings.cluster.name, &self.settings.region, nc).await?;
        Ok(Resolution {
            subnets,
            security_groups,
            amis,
            instance_profile,
            checks: vec![subnet_check, sg_check, ami_check, profile_check, nodeclass::family_check(nc)],
        })
    }

    /// Cleans up what Tenon created for a NodeClass being deleted: its managed instance
    /// profile and its launch templates.
    pub async fn finalize_nodeclass(&self, nc: &EC2NodeClass) -> Result<(), CloudError> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        launch_template::delete_for(&self.clients.ec2, &self.settings.cluster.name, &name).await?;
        self.templates.clear();
        self.metrics.forget_nodeclass(&name);
        profile::delete(&self.clients.iam, &self.settings.cluster.name, &self.settings.region, nc).await
    }

    /// Deletes this cluster's launch templates and managed instance profiles whose
    /// EC2NodeClass is not in `nodeclasses` (deleted while the controller was down, or
    /// without its finalizer). Returns how many resources were deleted.
    pub async fn collect_orphans(&self, nodeclasses: &std::collections::BTreeSet<String>) -> Result<usize, CloudError> {
        let cluster = &self.settings.cluster.name;
        let mut n = 0;
        for name in launch_template::nodeclasses_with_templates(&self.clients.ec2, cluster).await? {
            if !nodeclasses.contains(&name) {
                n += launch_template::delete_for(&self.clients.ec2, cluster, &name).await?;
                self.templates.clear();
                self.metrics.forget_nodeclass(&name);
            }
        }
        n += profile::delete_unless(&self.clients.iam, cluster, &self.settings.region, nodeclasses).await?;
        Ok(n)
    }

    pub(crate) async fn find_by_nodeclaim(&self, nodeclaim: &str) -> Result<Option<Instance>, CloudError> {
        self.describes.find_by_nodeclaim(&self.clients.ec2, &self.settings.cluster.name, nodeclaim).await
    }

    /// Instances by id in as few DescribeInstances calls as EC2 allows.
    pub async fn get_many(&self, ids: &[String]) -> Result<std::collections::BTreeMap<String, Instance>, CloudError> {
        instances::get_many(&self.clients.ec2, ids).await
    }
}

/// Seconds since the epoch (spot price lookups, AMI deprecation).
pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// The EC2NodeClass' kubelet settings that shape capacity and overhead.
fn kubelet_model(nc: &EC2NodeClass) -> KubeletModel {
    let Some(k) = nc.spec.kubelet.as_ref() else { return KubeletModel::default() };
    KubeletModel {
        max_pods: k.max_pods.map(i64::from),
        pods_per_core: k.pods_per_core.map(i64::from),
        kube_reserved: k.kube_reserved.clone(),
        system_reserved: k.system_reserved.clone(),
        eviction_hard: k.eviction_hard.clone(),
        eviction_soft: k.eviction_soft.clone(),
    }
}

/// The size of the volume the kubelet keeps pods' ephemeral storage on, as Karpenter works it
/// out: the mapping marked `rootVolume`; for a Custom family (whose AMI Tenon does not know)
/// the last mapping; else the mapping of the family's own data device; else the family's
/// default volume.
fn root_volume_bytes(nc: &EC2NodeClass) -> i64 {
    let size = |m: &tenon_api::ec2nodeclass::BlockDeviceMapping| {
        m.ebs.as_ref()?.volume_size.as_ref().and_then(|q| tenon_api::quantity::parse_units(&q.0).ok()).map(|b| b as i64)
    };
    let family = nc.ami_family();
    let device = match family.as_str() {
        "Bottlerocket" => Some("/dev/xvdb"),
        "Custom" => None,
        f if f.starts_with("Windows") => Some("/dev/sda1"),
        _ => Some("/dev/xvda"),
    };
    let default = if family.starts_with("Windows") { 50 << 30 } else { tenon_core::catalog::DEFAULT_ROOT_VOLUME_BYTES };
    let mappings = &nc.spec.block_device_mappings;
    if let Some(bytes) = mappings.iter().find(|m| m.root_volume).and_then(size) {
        return bytes;
    }
    let chosen = match device {
        None => mappings.last(),
        Some(d) => mappings.iter().find(|m| m.device_name.as_deref() == Some(d)),
    };
    chosen.and_then(size).unwrap_or(default)
}

impl AwsProvider {
    /// Runs a cloud provider call, timed and its error counted under Karpenter's `method`.
    async fn measured<T>(
        &self,
        method: &str,
        call: impl std::future::Future<Output = Result<T, CloudError>>,
    ) -> Result<T, CloudError> {
        let started = std::time::Instant::now();
        let out = call.await;
        self.metrics.provider_call(method, started.elapsed().as_secs_f64(), out.as_ref().err());
        out
    }
}

impl CloudProvider for AwsProvider {
    async fn create(&self, req: &LaunchRequest) -> Result<Instance, CloudError> {
        self.launch(req, &Default::default()).await
    }

    async fn delete(&self, ids: &[String]) -> Result<(), CloudError> {
        self.measured("Delete", async {
            self.fence.check("TerminateInstances")?;
            self.terminations.terminate(&self.clients.ec2, ids).await.map_err(|(message, zones)| {
                for z in &zones {
                    self.metrics.termination_failure(z);
                }
                CloudError::Api { operation: "TerminateInstances".into(), message }
            })
        })
        .await
    }

    async fn get(&self, id: &str) -> Result<Instance, CloudError> {
        self.measured("Get", self.describes.get(&self.clients.ec2, &self.settings.cluster.name, id)).await
    }

    async fn list(&self) -> Result<Vec<Instance>, CloudError> {
        self.measured("List", instances::list(&self.clients.ec2, &self.settings.cluster.name)).await
    }

    fn is_drifted(
        &self,
        instance: &Instance,
        labels: &std::collections::BTreeMap<String, String>,
        nodeclass: &EC2NodeClass,
    ) -> Option<String> {
        instances::drift(instance, labels, nodeclass)
    }
}
