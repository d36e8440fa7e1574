//! A cloud held in memory, for reconciler tests where AWS behaviour is not the point: every
//! EC2NodeClass resolves to one subnet per zone its instance types are offered in, launches
//! succeed at once with the first offering not marked unavailable (in the request's order),
//! instances run until deleted, and interruption events are whatever a test sends (each
//! delivered once: one not acknowledged is not delivered again, as SQS would).

use super::{BoxFuture, Cloud, InterruptionQueue, LaunchSlot};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tenon_api::EC2NodeClass;
use tenon_api::ec2nodeclass::{Ami, AmiRequirement, SecurityGroup, Subnet};
use tenon_api::wellknown::{self as wk, condition};
use tenon_aws::interruption::{InterruptionEvent, Received};
use tenon_aws::nodeclass::{Check, Resolution, family_check};
use tenon_core::cloud::{CloudError, Instance, InstanceState, LaunchRequest, UnavailableOffering};
use tenon_core::instancetype::InstanceType;
use tenon_core::orchestration::instance_health::{Check as HealthCheck, InstanceChecks};

#[derive(Default)]
struct State {
    /// By instance id; terminated instances stay, as EC2 shows them for a while.
    instances: BTreeMap<String, Instance>,
    unavailable: BTreeSet<UnavailableOffering>,
    /// Launches that first looked for an instance already tagged with their NodeClaim.
    lookups: u64,
    events: VecDeque<Received>,
    /// Interruption messages acknowledged (deleted from the queue).
    acked: u64,
    /// Status checks EC2 reports for an instance (none: all passing).
    checks: BTreeMap<String, Vec<HealthCheck>>,
    /// Each launch request's NodeClaim and whether a scoring policy ranked it.
    launches: Vec<(String, bool)>,
    /// Every launch fails with this reason (an API error, not capacity), while set.
    failing: Option<String>,
}

pub struct MemoryCloud {
    types: Arc<Vec<InstanceType>>,
    state: Arc<Mutex<State>>,
}

/// How long a receive waits for an interruption event before answering none.
const RECEIVE_WAIT: Duration = Duration::from_millis(200);

impl MemoryCloud {
    /// A cloud offering `types` (their offerings as given).
    pub fn new(types: Vec<InstanceType>) -> MemoryCloud {
        MemoryCloud { types: Arc::new(types), state: Arc::default() }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// Every launch from now fails with `reason`, as an EC2 outage would (`None`: none do).
    pub fn fail_launches(&self, reason: Option<&str>) {
        self.state().failing = reason.map(str::to_string);
    }

    /// Every instance launched so far, terminated ones included.
    pub fn instances(&self) -> Vec<Instance> {
        self.state().instances.values().cloned().collect()
    }

    /// Each launch request's NodeClaim and whether a scoring policy ranked its options.
    pub fn launches(&self) -> Vec<(String, bool)> {
        self.state().launches.clone()
    }

    /// How many launches looked for an instance already launched for their NodeClaim.
    pub fn lookups(&self) -> u64 {
        self.state().lookups
    }

    /// Offerings marked unavailable (by a failed launch or an interruption).
    pub fn unavailable(&self) -> BTreeSet<UnavailableOffering> {
        self.state().unavailable.clone()
    }

    /// EC2 reports `checks` for instance `id` from now on.
    pub fn set_checks(&self, id: &str, checks: Vec<HealthCheck>) {
        self.state().checks.insert(id.to_string(), checks);
    }

    /// How many interruption messages were acknowledged (deleted from the queue).
    pub fn acked(&self) -> u64 {
        self.state().acked
    }

    /// Queues an interruption event for the interruption queue to deliver.
    pub fn send(&self, event: InterruptionEvent) {
        let mut s = self.state();
        let receipt_handle = format!("receipt-{}", s.events.len());
        s.events.push_back(Received { event, receipt_handle });
    }

    fn zones(&self) -> BTreeSet<String> {
        self.types.iter().flat_map(|t| t.offerings.iter().map(|o| o.zone.clone())).collect()
    }
}

impl Cloud for MemoryCloud {
    fn resolve<'a>(&'a self, nc: &'a EC2NodeClass) -> BoxFuture<'a, Result<Resolution, CloudError>> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let subnets = self
            .zones()
            .into_iter()
            .enumerate()
            .map(|(i, zone)| Subnet { id: format!("subnet-{name}-{i}"), zone, zone_id: None })
            .collect();
        let amis = ["amd64", "arm64"]
            .into_iter()
            .map(|arch| Ami {
                id: format!("ami-{arch}"),
                deprecated: false,
                name: None,
                requirements: vec![AmiRequirement {
                    key: wk::LABEL_ARCH.into(),
                    operator: "In".into(),
                    values: vec![arch.into()],
                }],
            })
            .collect();
        let resolution = Resolution {
            subnets,
            security_groups: vec![SecurityGroup { id: format!("sg-{name}"), name: None }],
            amis,
            instance_profile: Some(format!("profile-{name}")),
            checks: vec![
                Check::ok(condition::SUBNETS_READY),
                Check::ok(condition::SECURITY_GROUPS_READY),
                Check::ok(condition::AMIS_READY),
                Check::ok(condition::INSTANCE_PROFILE_READY),
                family_check(nc),
            ],
        };
        Box::pin(async move { Ok(resolution) })
    }

    fn finalize_nodeclass<'a>(&'a self, _nc: &'a EC2NodeClass) -> BoxFuture<'a, Result<(), CloudError>> {
        Box::pin(async { Ok(()) })
    }

    fn collect_orphans<'a>(&'a self, _nodeclasses: &'a BTreeSet<String>) -> BoxFuture<'a, Result<usize, CloudError>> {
        Box::pin(async { Ok(0) })
    }

    fn load_catalog(&self) -> BoxFuture<'_, Result<(), CloudError>> {
        Box::pin(async { Ok(()) })
    }

    fn instance_types<'a>(
        &'a self,
        _nc: &'a EC2NodeClass,
    ) -> BoxFuture<'a, Result<Arc<Vec<InstanceType>>, CloudError>> {
        let types = self.types.clone();
        Box::pin(async move { Ok(types) })
    }

    fn launch_slot(&self) -> BoxFuture<'_, Result<LaunchSlot, CloudError>> {
        Box::pin(async { Ok(LaunchSlot::new(())) })
    }

    fn launch<'a>(
        &'a self,
        _slot: &'a LaunchSlot,
        req: &'a LaunchRequest,
        _requested: &'a BTreeSet<String>,
    ) -> BoxFuture<'a, Result<Instance, CloudError>> {
        Box::pin(async move { self.create(req) })
    }

    fn get<'a>(&'a self, id: &'a str) -> BoxFuture<'a, Result<Instance, CloudError>> {
        let found = self.state().instances.get(id).cloned().ok_or_else(|| CloudError::NotFound(id.to_string()));
        Box::pin(async move { found })
    }

    fn list(&self) -> BoxFuture<'_, Result<Vec<Instance>, CloudError>> {
        let live = self.state().instances.values().filter(|i| i.state != InstanceState::Terminated).cloned().collect();
        Box::pin(async move { Ok(live) })
    }

    fn delete<'a>(&'a self, ids: &'a [String]) -> BoxFuture<'a, Result<(), CloudError>> {
        let mut s = self.state();
        for id in ids {
            if let Some(i) = s.instances.get_mut(id) {
                i.state = InstanceState::Terminated;
            }
        }
        Box::pin(async { Ok(()) })
    }

    fn is_drifted(&self, instance: &Instance, labels: &BTreeMap<String, String>, nc: &EC2NodeClass) -> Option<String> {
        tenon_aws::instances::drift(instance, labels, nc)
    }

    fn mark_unavailable(&self, offering: UnavailableOffering, _now: Instant) {
        self.state().unavailable.insert(offering);
    }

    fn reserved_capacity(&self) -> bool {
        false
    }

    fn instance_statuses(&self) -> BoxFuture<'_, Result<Vec<InstanceChecks>, CloudError>> {
        let s = self.state();
        let statuses = s
            .instances
            .values()
            .filter(|i| i.state == InstanceState::Running)
            .map(|i| InstanceChecks {
                instance_id: i.id.clone(),
                checks: s.checks.get(&i.id).cloned().unwrap_or_default(),
            })
            .collect();
        Box::pin(async move { Ok(statuses) })
    }

    fn interruption_queue<'a>(
        &'a self,
        _queue: &'a str,
    ) -> BoxFuture<'a, Result<Box<dyn InterruptionQueue>, CloudError>> {
        let queue = MemoryQueue { state: self.state.clone() };
        Box::pin(async move { Ok(Box::new(queue) as Box<dyn InterruptionQueue>) })
    }

    fn hung_calls(&self, _now: Instant) -> Option<String> {
        None
    }

    fn render_metrics(&self) -> String {
        String::new()
    }
}

impl MemoryCloud {
    /// Launches the first offering not marked unavailable, once per NodeClaim unless the
    /// request says it was never launched (then, as EC2 would, it launches regardless).
    fn create(&self, req: &LaunchRequest) -> Result<Instance, CloudError> {
        let mut s = self.state();
        s.launches.push((req.nodeclaim.clone(), req.ranked));
        if !req.never_launched {
            s.lookups += 1;
            if let Some(i) = s.instances.values().find(|i| i.nodeclaim() == Some(req.nodeclaim.as_str())) {
                return Ok(i.clone());
            }
        }
        if let Some(reason) = &s.failing {
            return Err(CloudError::Launch { reason: reason.clone(), message: format!("{reason}: the cloud failed") });
        }
        let offering = |o: &tenon_core::cloud::LaunchOption| UnavailableOffering {
            instance_type: o.instance_type.clone(),
            zone: o.zone.clone(),
            capacity_type: o.capacity_type.clone(),
        };
        let Some(option) = req.options.iter().find(|o| !s.unavailable.contains(&offering(o))) else {
            return Err(CloudError::InsufficientCapacity {
                offerings: req.options.iter().map(offering).collect(),
                message: "every offering is marked unavailable".into(),
            });
        };
        // Instances are never forgotten, so their count numbers the next one.
        let id = format!("i-{:017x}", s.instances.len() + 1);
        let tags = BTreeMap::from([
            (wk::TAG_NODECLAIM.to_string(), req.nodeclaim.clone()),
            (wk::LABEL_NODEPOOL.to_string(), req.nodepool.clone()),
        ]);
        // As EC2 places it: in the NodeClass's subnet of that zone, with its security groups.
        let status = req.nodeclass.status.as_ref();
        let subnet = status.and_then(|st| st.subnets.iter().find(|sn| sn.zone == option.zone)).map(|sn| sn.id.clone());
        let groups = status.map(|st| st.security_groups.iter().map(|g| g.id.clone()).collect()).unwrap_or_default();
        let instance = Instance {
            provider_id: format!("aws:///{}/{id}", option.zone),
            id: id.clone(),
            instance_type: option.instance_type.clone(),
            zone: option.zone.clone(),
            capacity_type: option.capacity_type.clone(),
            image_id: "ami-amd64".into(),
            subnet_id: subnet.unwrap_or_default(),
            security_groups: groups,
            state: InstanceState::Running,
            launched_at: Some(crate::controller::unix_now()),
            tags,
            tenancy: req.tenancy.clone(),
        };
        s.instances.insert(id, instance.clone());
        Ok(instance)
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The events [`MemoryCloud::send`] queued, up to ten per receive.
struct MemoryQueue {
    state: Arc<Mutex<State>>,
}

impl MemoryQueue {
    fn take(&self) -> Vec<Received> {
        let mut s = lock(&self.state);
        let n = s.events.len().min(10);
        s.events.drain(..n).collect()
    }
}

impl InterruptionQueue for MemoryQueue {
    fn receive(&self) -> BoxFuture<'_, Result<Vec<Received>, CloudError>> {
        Box::pin(async move {
            let events = self.take();
            if !events.is_empty() {
                return Ok(events);
            }
            tokio::time::sleep(RECEIVE_WAIT).await;
            Ok(self.take())
        })
    }

    fn ack<'a>(&'a self, _event: &'a Received) -> BoxFuture<'a, Result<(), CloudError>> {
        lock(&self.state).acked += 1;
        Box::pin(async { Ok(()) })
    }

    fn malformed(&self) -> u64 {
        0
    }
}
