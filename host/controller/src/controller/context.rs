//! What every reconciler shares (Karpenter's operator context and `state.Cluster`): the
//! clients, caches and settings, read-only; the little state that crosses concerns, behind
//! one lock never held across an await; and the cluster view, built once per change.

use super::cloud::Cloud;
use super::events::Recorder;
use super::metrics::Metrics;
use super::metrics::pods::PodTimes;
use super::settings::Settings;
use super::state::Stores;
use super::{Catalogs, leader, policies};
use kube::Client;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tenon_core::cloud::{CloudError, Instance};
use tenon_core::convert::ClusterObjects;
use tenon_core::orchestration::registration_health::{RegistrationHealth, Verdict};

pub struct Context {
    pub client: Client,
    /// Whether this replica may act (holds the leader Lease, or runs alone).
    pub leadership: Arc<leader::Leadership>,
    pub settings: Settings,
    pub stores: Stores,
    pub cloud: Arc<dyn Cloud>,
    pub recorder: Arc<Recorder>,
    pub metrics: Arc<Metrics>,
    /// The orchestration clock's zero: its milliseconds are monotonic time since start.
    pub started: Instant,
    /// How far tests have moved the orchestration clock on (a validation wait without waiting).
    #[cfg(test)]
    skipped_ms: std::sync::atomic::AtomicI64,
    /// Karpenter's `SpotToSpotConsolidation` feature gate.
    pub spot_to_spot: bool,
    /// NodeClaims with a launch under way (a launch is one task; never two per NodeClaim).
    pub launching: Arc<Mutex<BTreeSet<String>>>,
    /// Each NodePool's policies: NodePool status refreshes them, decisions read them.
    policies: Mutex<policies::Policies>,
    /// What provisioning saw and decided of each waiting pod, for the pod latency series
    /// (its own lock: the metrics reconciler walks every pod with it).
    pub pod_times: Mutex<PodTimes>,
    cluster: Mutex<ClusterState>,
    /// The cluster view and the change count it was built at.
    view: Mutex<Option<(u64, Arc<ClusterObjects>)>>,
}

/// What one concern writes and another reads.
#[derive(Default)]
pub struct ClusterState {
    /// NodeClaims this process created that its cache has not shown yet, with when. A
    /// decision waits for them (Karpenter's cluster-state sync): deciding without them
    /// would provision their pods a second time. Provisioning and disruption create them.
    pub unobserved: BTreeMap<String, Instant>,
    /// A provisioning decision is being made or carried out: a disruption round waits
    /// for it (it would not see the NodeClaims it creates).
    pub provisioning: bool,
    /// NodePools whose spec failed validation (NodePool status finds them): they provision
    /// nothing until fixed.
    pub invalid: BTreeSet<String>,
    /// Every NodePool's recent registration outcomes, by NodePool UID (the NodeClaim
    /// lifecycle records them; NodePool status reads and resets them).
    pub registration: RegistrationHealth,
    /// NodePool UID → what its `NodeRegistrationHealthy` was last decided to be.
    pub registration_verdicts: BTreeMap<String, Verdict>,
    /// The last instance listing, shared by the drift check and garbage collection.
    instances: Option<(Instant, Arc<Vec<Instance>>)>,
    /// NodeClaims this process created and has not launched yet, with when: no instance
    /// can carry their tag, so their first launch need not look for one. (A replica that
    /// loses its Lease exits, so no other process launches for them meanwhile.)
    unlaunched: BTreeMap<String, Instant>,
}

/// How long a created NodeClaim is remembered as unlaunched: one never launched in that
/// time (deleted first, or its NodeClass not ready) is looked up like any other.
const UNLAUNCHED_FOR: std::time::Duration = std::time::Duration::from_secs(600);

impl ClusterState {
    /// Records that this process is creating the NodeClaims `names` (before the creates
    /// are sent).
    pub fn created<'a>(&mut self, names: impl IntoIterator<Item = &'a str>, now: Instant) {
        self.unlaunched.retain(|_, at| now.duration_since(*at) < UNLAUNCHED_FOR);
        self.unlaunched.extend(names.into_iter().map(|n| (n.to_string(), now)));
    }

    /// Whether `name` was created here and never launched, forgetting it: a launch is
    /// about to be sent.
    pub fn take_unlaunched(&mut self, name: &str, now: Instant) -> bool {
        self.unlaunched.remove(name).is_some_and(|at| now.duration_since(at) < UNLAUNCHED_FOR)
    }

    /// Forgets the NodeClaims created here that `objects` shows.
    pub fn forget_seen(&mut self, objects: &ClusterObjects) {
        if self.unobserved.is_empty() {
            return;
        }
        let seen: BTreeSet<&str> = objects.nodeclaims.iter().filter_map(|nc| nc.metadata.name.as_deref()).collect();
        self.unobserved.retain(|name, _| !seen.contains(name.as_str()));
    }
}

/// One DescribeInstances serves garbage collection and the drift check made together.
const INSTANCES_FRESH_FOR: Duration = Duration::from_secs(2);

impl Context {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: Client,
        leadership: Arc<leader::Leadership>,
        settings: Settings,
        stores: Stores,
        cloud: Arc<dyn Cloud>,
        metrics: Arc<Metrics>,
        policies: policies::Policies,
        spot_to_spot: bool,
    ) -> Context {
        Context {
            client,
            leadership,
            settings,
            stores,
            cloud,
            recorder: Arc::new(Recorder::queued()),
            metrics,
            started: Instant::now(),
            #[cfg(test)]
            skipped_ms: Default::default(),
            spot_to_spot,
            launching: Arc::default(),
            policies: Mutex::new(policies),
            pod_times: Mutex::default(),
            cluster: Mutex::default(),
            view: Mutex::default(),
        }
    }

    /// The shared cluster state (never held across an await).
    pub fn cluster(&self) -> MutexGuard<'_, ClusterState> {
        self.cluster.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Each NodePool's policies (never held across an await).
    pub fn policies(&self) -> MutexGuard<'_, policies::Policies> {
        self.policies.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The policies as they are now, for a decision made off the loop.
    pub fn active_policies(&self) -> Arc<tenon_policy::cluster::ClusterPolicies> {
        self.policies().active.clone()
    }

    /// The pod timings (never held across an await).
    pub fn pod_times(&self) -> MutexGuard<'_, PodTimes> {
        self.pod_times.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cluster as the caches hold it, copied once per change however many reconcilers
    /// ask (a copy of every pod is the costly part at 10,000 pods).
    pub fn objects(&self) -> Arc<ClusterObjects> {
        let mut view = self.view.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        // Read before copying: a change during the copy makes the next call copy again.
        let version = self.stores.version();
        if let Some((at, objects)) = view.as_ref()
            && *at == version
        {
            return objects.clone();
        }
        let objects = Arc::new(self.stores.objects());
        *view = Some((version, objects.clone()));
        objects
    }

    /// Whether a decision may be made over `objects`: every NodeClaim this process created
    /// is in it (those are forgotten here) and no provisioning decision is under way.
    pub fn synced(&self, objects: &ClusterObjects) -> bool {
        let mut cluster = self.cluster();
        cluster.forget_seen(objects);
        cluster.unobserved.is_empty() && !cluster.provisioning
    }

    /// The orchestration clock: milliseconds since this process started (monotonic).
    pub fn now_ms(&self) -> i64 {
        let ms = self.started.elapsed().as_millis() as i64;
        #[cfg(test)]
        let ms = ms + self.skipped_ms.load(std::sync::atomic::Ordering::Relaxed);
        ms
    }

    /// Unix seconds as decisions read them (consolidateAfter, budget schedules): the wall
    /// clock; in tests moved on with the orchestration clock by [`Context::advance`].
    pub fn unix_now(&self) -> i64 {
        let ms = super::unix_now_ms();
        #[cfg(test)]
        let ms = ms + self.skipped_ms.load(std::sync::atomic::Ordering::Relaxed);
        ms / 1000
    }

    /// How long until `at` (ms on the orchestration clock); nothing when it has passed.
    pub fn wait_until_ms(&self, at: i64) -> std::time::Duration {
        std::time::Duration::from_millis((at - self.now_ms()).max(0) as u64)
    }

    /// Moves the orchestration clock, and the decisions' Unix clock, on by `by` (tests: past
    /// a command's validation wait or a node's consolidateAfter).
    #[cfg(test)]
    pub fn advance(&self, by: std::time::Duration) {
        self.skipped_ms.fetch_add(by.as_millis() as i64, std::sync::atomic::Ordering::Relaxed);
    }

    /// Instance types per EC2NodeClass (from the cloud's cached catalog).
    pub async fn catalogs(&self) -> Catalogs {
        let mut out = BTreeMap::new();
        for nc in self.stores.nodeclasses.state() {
            let name = nc.metadata.name.clone().unwrap_or_default();
            match self.cloud.instance_types(&nc).await {
                Ok(t) => {
                    out.insert(name, t);
                }
                Err(e) => tracing::warn!(nodeclass = %name, error = %e, "no instance types"),
            }
        }
        out
    }

    /// The cluster's live instances, listed at most once per [`INSTANCES_FRESH_FOR`].
    pub async fn live_instances(&self) -> Result<Arc<Vec<Instance>>, CloudError> {
        if let Some((at, list)) = &self.cluster().instances
            && at.elapsed() < INSTANCES_FRESH_FOR
        {
            return Ok(list.clone());
        }
        let list = Arc::new(self.cloud.list().await?);
        self.cluster().instances = Some((Instant::now(), list.clone()));
        Ok(list)
    }

    /// Waits until no launch is under way, at most `limit`.
    pub async fn settle_launches(&self, limit: Duration) {
        let until = Instant::now() + limit;
        while Instant::now() < until && self.launching.lock().map(|l| !l.is_empty()).unwrap_or(false) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_created_nodeclaim_is_unlaunched_once_and_only_for_a_while() {
        let t0 = Instant::now();
        let mut state = ClusterState::default();
        state.created(["a", "b"], t0);
        assert!(state.take_unlaunched("a", t0));
        assert!(!state.take_unlaunched("a", t0), "taken by its first launch");
        assert!(!state.take_unlaunched("c", t0), "not created here");
        assert!(!state.take_unlaunched("b", t0 + UNLAUNCHED_FOR), "remembered only for a while");
        state.created(["d"], t0);
        state.created(["e"], t0 + UNLAUNCHED_FOR);
        assert_eq!(state.unlaunched.keys().collect::<Vec<_>>(), ["e"], "old entries pruned");
    }
}
