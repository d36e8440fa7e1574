//! `tenon controller`: the imperative shell around the decision core. Reflectors keep the
//! cluster's objects; a loop (on every change, at least every second) resolves EC2NodeClasses,
//! provisions for pending pods, and moves NodeClaims through Launched → Registered →
//! Initialized. Decisions are the core's pure functions over a snapshot of the stores.

pub mod disruption;
pub mod events;
pub mod garbage;
pub mod health;
pub mod interruption;
pub mod leader;
pub mod lifecycle;
pub mod nodepool_status;
pub mod policies;
pub mod provisioner;
pub mod ratelimit;
pub mod settings;
pub mod state;
pub mod termination;

use anyhow::Context;
use events::{Involved, Recorder};
use health::Metrics;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use settings::Settings;
use state::Stores;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tenon_api::wellknown::{self as wk, condition};
use tenon_api::{EC2NodeClass, NodeClaim, NodePool};
use tenon_aws::{AwsProvider, ClusterInfo, Connection};
use tenon_core::cloud::{CloudError, CloudProvider};
use tenon_core::convert::ClusterObjects;
use tenon_core::instancetype::InstanceType;

struct Controller {
    client: Client,
    settings: Settings,
    stores: Stores,
    provider: Arc<AwsProvider>,
    recorder: Arc<Recorder>,
    metrics: Arc<Metrics>,
    batcher: provisioner::Batcher,
    /// NodeClaims with a launch under way (a launch is one task; never two per NodeClaim).
    launching: Arc<Mutex<BTreeSet<String>>>,
    /// EC2NodeClass name → (generation, when) of its last resolution.
    resolved: BTreeMap<String, (Option<i64>, Instant)>,
    /// NodeClaims this process created that its cache has not shown yet, with when. A
    /// decision waits for them (Karpenter's cluster-state sync): deciding without them
    /// would provision their pods a second time.
    unobserved: BTreeMap<String, Instant>,
    /// A closed batch whose decision had to wait.
    decision_due: bool,
    policies: policies::Policies,
    /// NodePools whose spec failed validation: they provision nothing until fixed.
    invalid: BTreeSet<String>,
    /// NodePool → the last registration outcome of its NodeClaims (healthy, message).
    registration: BTreeMap<String, (bool, String)>,
    /// The disruption under way (one at a time).
    command: Option<disruption::Command>,
    last_round: Option<Instant>,
    /// NodeClaim → the pods on its node at the last look (for `lastPodEventTime`).
    pods_on: BTreeMap<String, BTreeSet<String>>,
    last_gc: Option<Instant>,
    last_orphans: Option<Instant>,
    /// The last instance listing, shared by the drift check and garbage collection.
    instances: Option<(Instant, Arc<Vec<tenon_core::cloud::Instance>>)>,
}

/// How long a created NodeClaim may stay out of the cache before decisions stop waiting for
/// it (it was deleted at once, or the watch is broken and the relist will tell).
const OBSERVE_TIMEOUT: Duration = Duration::from_secs(30);

const RESOLVE_EVERY: Duration = Duration::from_secs(300);

pub fn run(settings: Settings) -> anyhow::Result<u8> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(run_async(settings))
}

async fn run_async(settings: Settings) -> anyhow::Result<u8> {
    init_logging(&settings);
    let mut config =
        kube::Config::infer().await.context("no Kubernetes client configuration (in-cluster or KUBECONFIG)")?;
    config.read_timeout = Some(Duration::from_secs(300));
    let server = config.cluster_url.to_string();
    let namespace = settings.system_namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
    let client = kube::client::ClientBuilder::try_from(config)?
        .with_layer(&ratelimit::RateLimitLayer { qps: settings.kube_client_qps, burst: settings.kube_client_burst })
        .build();
    log_feature_gates(&settings.feature_gates)?;
    let k8s_version = match &settings.kubernetes_version {
        Some(v) => v.clone(),
        None => {
            let v = client.apiserver_version().await.context("reading the API server version")?;
            format!("{}.{}", v.major, v.minor.trim_end_matches('+'))
        }
    };
    let mut conn = Connection::new(settings.aws_region.clone());
    conn.endpoint_url = settings.aws_endpoint_url.clone();
    let provider = AwsProvider::connect(
        &conn,
        tenon_aws::Settings {
            cluster: ClusterInfo {
                name: settings.cluster_name.clone(),
                endpoint: settings.cluster_endpoint.clone().unwrap_or(server),
                ca_bundle: settings.cluster_ca_bundle.clone(),
                service_cidr: settings.service_cidr.clone(),
            },
            region: settings.aws_region.clone(),
            kubernetes_version: k8s_version,
            capacity: tenon_aws::CapacitySettings {
                vm_memory_overhead: settings.vm_memory_overhead_percent,
                reserved_enis: settings.reserved_enis,
            },
        },
    )
    .await;
    let metrics = Arc::new(Metrics::default());
    let policies = policies::Policies::new(settings.policy_dir.as_deref())?;
    health::serve(
        metrics.clone(),
        policies.metrics.clone(),
        &settings.probe_bind_address,
        settings.health_probe_port,
        settings.metrics_port,
    )
    .await?;
    let stores = Stores::start(&client, &settings.scheduler_config);
    if !settings.scheduler_config.default_constraints().is_empty() {
        tracing::info!(defaults = ?settings.scheduler_config.default_constraints(), "SCHEDULER_CONFIG: default topology spread for pods without constraints of their own");
    }
    tracing::info!(cluster = %settings.cluster_name, "waiting for caches to sync");
    stores.wait_synced().await?;
    // Fetch the catalog before the first pending pod does (it takes seconds); instance
    // types are shaped from it only when a decision or launch needs them.
    if let Err(e) = provider.catalog().await {
        tracing::warn!(error = %e, "could not fetch the instance catalog yet; the first decision will retry");
    }
    metrics.set_ready();
    tracing::info!("caches synced");
    if !settings.disable_leader_election {
        let election = leader::Election {
            namespace,
            identity: identity(),
            lease_duration: Duration::from_secs(15),
            renew_every: Duration::from_secs(2),
        };
        election.acquire(&client).await;
        let keep_client = client.clone();
        tokio::spawn(async move {
            election.keep(keep_client).await;
            // Crash-only, as controller-runtime: a replica that may no longer lead must not
            // act; the restart comes back as a follower.
            tracing::error!("leadership lost; exiting");
            std::process::exit(1);
        });
    }
    let mut c = Controller {
        client,
        settings,
        stores,
        provider: Arc::new(provider),
        recorder: Arc::new(Recorder::default()),
        metrics,
        batcher: provisioner::Batcher::default(),
        launching: Arc::default(),
        resolved: BTreeMap::new(),
        unobserved: BTreeMap::new(),
        decision_due: false,
        policies,
        invalid: BTreeSet::new(),
        registration: BTreeMap::new(),
        command: None,
        last_round: None,
        pods_on: BTreeMap::new(),
        last_gc: None,
        last_orphans: None,
        instances: None,
    };
    if let Some(queue) = c.settings.interruption_queue.clone() {
        let handler = interruption::Interruption {
            client: c.client.clone(),
            stores: c.stores.clone(),
            provider: c.provider.clone(),
            recorder: c.recorder.clone(),
            metrics: c.metrics.clone(),
        };
        tokio::spawn(handler.run(queue));
    }
    let changed = c.stores.changed.clone();
    loop {
        c.metrics.pass_started();
        if let Err(e) = c.reconcile().await {
            tracing::warn!(error = %format!("{e:#}"), "reconcile failed; retrying");
        }
        c.metrics.pass_completed();
        tokio::select! {
            _ = changed.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = tokio::signal::ctrl_c() => {
                tracing::info!("interrupted; exiting");
                return Ok(0);
            }
        }
    }
}

/// Karpenter's `FEATURE_GATES` (`Name=true,Other=false`): none changes Tenon's behaviour yet,
/// but a malformed value is an error, as in Karpenter, rather than silently ignored.
fn log_feature_gates(gates: &str) -> anyhow::Result<()> {
    for gate in gates.split(',').map(str::trim).filter(|g| !g.is_empty()) {
        match gate.split_once('=') {
            Some((name, value)) if !name.is_empty() && matches!(value, "true" | "false") => {
                tracing::info!(gate = name, enabled = value, "feature gate (accepted; no effect in Tenon)");
            }
            _ => anyhow::bail!(
                "--feature-gates / FEATURE_GATES: {gate:?} is not NAME=true|false (e.g. SpotToSpotConsolidation=true)"
            ),
        }
    }
    Ok(())
}

/// This replica's name in the Lease: the pod name where there is one, made unique.
fn identity() -> String {
    let host = std::env::var("POD_NAME").or_else(|_| std::env::var("HOSTNAME")).unwrap_or_else(|_| "tenon".into());
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{host}_{}_{nanos:08x}", std::process::id())
}

fn init_logging(s: &Settings) {
    let filter = tracing_subscriber::EnvFilter::try_new(&s.log_level)
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    if s.log_format == "json" {
        let _ = builder.json().try_init();
    } else {
        let _ = builder.try_init();
    }
}

/// A NodeClaim on its way to becoming capacity: launched but not Initialized, or launching
/// for less than a minute (one failing to launch for longer must not hold everything up).
fn in_flight(nc: &NodeClaim) -> bool {
    if nc.metadata.deletion_timestamp.is_some() || lifecycle::has_condition(nc, condition::INITIALIZED) {
        return false;
    }
    if lifecycle::has_condition(nc, condition::LAUNCHED) {
        return true;
    }
    let created = nc.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second());
    unix_now() - created < 60
}

/// The Node of a NodeClaim: the one with its providerID.
fn node_of<'a>(nc: &NodeClaim, nodes: impl IntoIterator<Item = &'a Node>) -> Option<&'a Node> {
    let id = nc.status.as_ref()?.provider_id.as_deref()?;
    nodes.into_iter().find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(id))
}

/// The NodePool a NodeClaim belongs to (its `karpenter.sh/nodepool` label).
fn pool_of(nc: &NodeClaim) -> String {
    nc.metadata.labels.as_ref().and_then(|l| l.get(wk::LABEL_NODEPOOL)).cloned().unwrap_or_default()
}

fn involved_nodeclaim(nc: &NodeClaim) -> Involved {
    Involved::cluster_scoped("karpenter.sh/v1", "NodeClaim", &nc.metadata)
}

impl Controller {
    async fn reconcile(&mut self) -> anyhow::Result<()> {
        self.nodeclasses().await;
        self.policies.refresh(&self.stores.nodepools.state());
        self.policies.log_failures();
        let objects = self.stores.objects();
        self.nodepools(&objects).await;
        self.orphans(&objects).await;
        let pending_view = provisioner::with_displaced_pods(&objects);
        let closed = self.batch_closed(&pending_view);
        let observed = self.cache_has_created(&objects);
        let decide = (closed || self.decision_due) && observed;
        self.decision_due = (closed || self.decision_due) && !decide;
        let launches = objects
            .nodeclaims
            .iter()
            .any(|nc| nc.metadata.deletion_timestamp.is_none() && !lifecycle::has_condition(nc, condition::LAUNCHED));
        // Shaping the catalog into instance types is the costly part of a pass: done only
        // when a decision or a launch needs it, not on every tick.
        let disrupt = self.disruption_due();
        let catalogs = if decide || launches || disrupt { self.catalogs().await } else { BTreeMap::new() };
        if decide {
            self.provision(&pending_view, &catalogs).await;
        }
        self.lifecycle(&catalogs).await;
        self.pod_events(&objects).await;
        // A round right after a provisioning decision would not see its NodeClaims yet.
        // Disruption decides over a settled cluster (Karpenter's rule: a simulation must not
        // count on capacity that is not there yet): no batch collecting pods, every NodeClaim
        // Initialized, every created NodeClaim seen. Pods no NodePool can serve do not hold
        // it off. A command under way still advances.
        let settled = !decide && observed && !self.batcher.open() && !objects.nodeclaims.iter().any(in_flight);
        if settled || self.command.is_some() {
            self.disruption(&objects, &catalogs).await;
        }
        self.terminate(&objects).await;
        self.garbage(&objects).await;
        Ok(())
    }

    /// EC2NodeClass status: resolved on a new generation and every 5 minutes.
    async fn nodeclasses(&mut self) {
        let api: Api<EC2NodeClass> = Api::all(self.client.clone());
        for nc in self.stores.nodeclasses.state() {
            let name = nc.metadata.name.clone().unwrap_or_default();
            if nc.metadata.deletion_timestamp.is_some() {
                self.finalize_nodeclass(&nc).await;
                continue;
            }
            let fins = nc.metadata.finalizers.clone().unwrap_or_default();
            if !fins.iter().any(|f| f == wk::FINALIZER_NODECLASS_TERMINATION) {
                let mut with = fins;
                with.push(wk::FINALIZER_NODECLASS_TERMINATION.into());
                let patch = json!({"metadata": {"finalizers": with}});
                if let Err(e) = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    tracing::warn!(nodeclass = %name, error = %e, "could not add the EC2NodeClass finalizer");
                }
            }
            let gen_ = nc.metadata.generation;
            if self.resolved.get(&name).is_some_and(|(g, at)| *g == gen_ && at.elapsed() < RESOLVE_EVERY) {
                continue;
            }
            match self.provider.resolve(&nc).await {
                Ok(r) => {
                    let status = r.status(nc.status.as_ref(), gen_, &lifecycle::now_time());
                    let patch = json!({"status": status});
                    if let Err(e) = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                        tracing::warn!(nodeclass = %name, error = %e, "could not write EC2NodeClass status");
                        continue;
                    }
                    for c in r.checks.iter().filter(|c| !c.ok) {
                        let obj = Involved::cluster_scoped("karpenter.k8s.aws/v1", "EC2NodeClass", &nc.metadata);
                        self.recorder.publish(&self.client, &obj, "Warning", c.reason.as_str(), &c.message).await;
                    }
                    self.resolved.insert(name, (gen_, Instant::now()));
                }
                Err(e) => tracing::warn!(nodeclass = %name, error = %e, "could not resolve EC2NodeClass"),
            }
        }
    }

    /// An EC2NodeClass being deleted: once no NodeClaim uses it, its managed instance
    /// profile and launch templates are deleted, then its finalizer released.
    async fn finalize_nodeclass(&self, nc: &EC2NodeClass) {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let fins = nc.metadata.finalizers.clone().unwrap_or_default();
        if !fins.iter().any(|f| f == wk::FINALIZER_NODECLASS_TERMINATION) {
            return;
        }
        let users: Vec<String> = self
            .stores
            .nodeclaims
            .state()
            .iter()
            .filter(|c| c.spec.node_class_ref.as_ref().is_some_and(|r| r.name == name))
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        let obj = Involved::cluster_scoped("karpenter.k8s.aws/v1", "EC2NodeClass", &nc.metadata);
        if !users.is_empty() {
            let message = format!("waiting on NodeClaim termination for {}", users.join(", "));
            self.recorder.publish(&self.client, &obj, "Normal", "WaitingOnNodeClaimTermination", &message).await;
            return;
        }
        if let Err(e) = self.provider.finalize_nodeclass(nc).await {
            tracing::warn!(nodeclass = %name, error = %e, "could not delete the EC2NodeClass' AWS resources; retrying");
            return;
        }
        let rest: Vec<&String> = fins.iter().filter(|f| *f != wk::FINALIZER_NODECLASS_TERMINATION).collect();
        let api: Api<EC2NodeClass> = Api::all(self.client.clone());
        match api.patch(&name, &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"finalizers": rest}}))).await
        {
            Ok(_) => {
                tracing::info!(nodeclass = %name, "EC2NodeClass finalized: instance profile and launch templates deleted")
            }
            Err(e) => tracing::warn!(nodeclass = %name, error = %e, "could not release the EC2NodeClass finalizer"),
        }
    }

    /// NodePool status: resources, nodes and conditions; a validation failure is also an
    /// Event. Written only when it changes.
    async fn nodepools(&mut self, objects: &ClusterObjects) {
        let api: Api<NodePool> = Api::all(self.client.clone());
        let classes = self.stores.nodeclasses.state();
        for np in &objects.nodepools {
            let name = np.metadata.name.clone().unwrap_or_default();
            let class = np
                .spec
                .template
                .spec
                .node_class_ref
                .as_ref()
                .and_then(|r| classes.iter().find(|c| c.metadata.name.as_deref() == Some(r.name.as_str())));
            let observed = nodepool_status::Observed {
                policy: self.policies.unhealthy(&name),
                registration: self.registration.get(&name).cloned(),
            };
            let status = nodepool_status::status(np, &objects.nodeclaims, class.map(|c| &**c), &observed);
            let failed =
                status.conditions.iter().find(|c| c.type_ == condition::VALIDATION_SUCCEEDED && c.status == "False");
            if failed.is_some() {
                self.invalid.insert(name.clone());
            } else {
                self.invalid.remove(&name);
            }
            if np.status.as_ref() == Some(&status) {
                continue;
            }
            let obj = Involved::cluster_scoped("karpenter.sh/v1", "NodePool", &np.metadata);
            if let Some(v) = failed {
                self.recorder.publish(&self.client, &obj, "Warning", "ValidationFailed", &v.message).await;
            }
            if let Some((reason, message)) = &observed.policy {
                self.recorder.publish(&self.client, &obj, "Warning", reason, message).await;
            }
            if let Err(e) =
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": status}))).await
            {
                tracing::warn!(nodepool = %name, error = %e, "could not write NodePool status");
            }
        }
    }

    /// Instance types per EC2NodeClass (from the provider's cached catalog).
    async fn catalogs(&self) -> Catalogs {
        let mut out = BTreeMap::new();
        for nc in self.stores.nodeclasses.state() {
            let name = nc.metadata.name.clone().unwrap_or_default();
            match self.provider.instance_types(&nc).await {
                Ok(t) => {
                    out.insert(name, Arc::new(t));
                }
                Err(e) => tracing::warn!(nodeclass = %name, error = %e, "no instance types"),
            }
        }
        out
    }

    /// True when every NodeClaim this process created is in the cache (or overdue).
    fn cache_has_created(&mut self, objects: &ClusterObjects) -> bool {
        let seen: BTreeSet<&str> = objects.nodeclaims.iter().filter_map(|nc| nc.metadata.name.as_deref()).collect();
        self.unobserved.retain(|name, at| !seen.contains(name.as_str()) && at.elapsed() < OBSERVE_TIMEOUT);
        self.unobserved.is_empty()
    }

    /// NodeClaims whose NodePool is gone or being deleted are deleted (termination drains
    /// them and terminates their instances). Kubernetes' garbage collector does the same
    /// through the owner reference; doing it here does not depend on it.
    async fn orphans(&self, objects: &ClusterObjects) {
        let pools: BTreeSet<&str> = objects
            .nodepools
            .iter()
            .filter(|np| np.metadata.deletion_timestamp.is_none())
            .filter_map(|np| np.metadata.name.as_deref())
            .collect();
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        for nc in objects.nodeclaims.iter().filter(|nc| nc.metadata.deletion_timestamp.is_none()) {
            let Some(pool) = nc.metadata.labels.as_ref().and_then(|l| l.get(wk::LABEL_NODEPOOL)) else { continue };
            if pools.contains(pool.as_str()) {
                continue;
            }
            let name = nc.metadata.name.clone().unwrap_or_default();
            match api.delete(&name, &kube::api::DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(nodeclaim = %name, nodepool = %pool, "NodePool deleted; deleting its NodeClaim")
                }
                Err(e) => {
                    tracing::warn!(nodeclaim = %name, error = %e, "could not delete the NodeClaim of a deleted NodePool")
                }
            }
        }
    }

    /// Feeds the batcher the pods waiting for capacity; true when a batch has closed.
    fn batch_closed(&mut self, objects: &ClusterObjects) -> bool {
        let pending: BTreeSet<String> = objects
            .pods
            .iter()
            .filter(|p| tenon_core::convert::is_provisionable(p))
            .map(tenon_core::convert::pod_key)
            .collect();
        self.batcher.tick(&pending, Instant::now(), self.settings.batch_idle_duration, self.settings.batch_max_duration)
    }

    /// A provisioning decision for the closed batch: NodeClaims for what fits nowhere,
    /// FailedScheduling events for what fits nowhere at all.
    async fn provision(&mut self, objects: &ClusterObjects, catalogs: &Catalogs) {
        let started = Instant::now();
        let (mut snap, errors) = snapshot(objects, catalogs);
        let mut ignored_pods = 0;
        for e in &errors {
            tracing::warn!(error = %e, "object left out of the decision");
            // A pod left out is told why on itself, where its owner looks.
            if let Some(p) =
                objects.pods.iter().find(|p| format!("Pod {}", tenon_core::convert::pod_key(p)) == e.object)
            {
                ignored_pods += 1;
                let obj = Involved::pod_object(p);
                let message = format!("Failed to schedule pod, {}: {}", e.field, e.message);
                self.recorder.publish(&self.client, &obj, "Warning", "FailedScheduling", &message).await;
            }
        }
        self.metrics.set("karpenter_scheduler_ignored_pods_count", f64::from(ignored_pods));
        // A NodePool being deleted keeps its nodes until they are drained, but gets no more
        // (the core skips it); one failing validation gets nothing at all.
        snap.nodepools.retain(|t| !self.invalid.contains(&t.name));
        snap.ignore_preferences = self.settings.preference_policy == "Ignore";
        let policies = self.policies.active.clone();
        let decided = off_loop("provisioning", move || {
            let plan = tenon_core::schedule(&snap, &*policies);
            (snap, plan)
        });
        let Some((snap, plan)) = decided.await else { return };
        self.metrics.add("tenon_provisioning_decisions_total", 1.0);
        provisioner::publish_decision(&self.metrics, &plan);
        self.metrics.set("tenon_provisioning_decision_seconds", started.elapsed().as_secs_f64());
        for planned in &plan.nodeclaims {
            let Some(name) = self.create_nodeclaim(planned, &snap, objects, "provisioning").await else { continue };
            // Karpenter's nomination Event: where each pod is expected to land.
            for &i in &planned.pods {
                let obj = Involved::pod(&snap.pods[i]);
                let message = format!("Pod should schedule on: nodeclaim/{name}");
                self.recorder.publish(&self.client, &obj, "Normal", "Nominated", &message).await;
            }
        }
        // Pods placed on capacity that exists or is on its way get the Event too.
        for n in &plan.nominations {
            let obj = Involved::pod(&snap.pods[n.pod]);
            let message = format!("Pod should schedule on: {}", provisioner::nominated_to(&snap, &n.node));
            self.recorder.publish(&self.client, &obj, "Normal", "Nominated", &message).await;
        }
        for u in &plan.unschedulable {
            let obj = Involved::pod(&snap.pods[u.pod]);
            self.recorder
                .publish(
                    &self.client,
                    &obj,
                    "Warning",
                    "FailedScheduling",
                    &format!("Failed to schedule pod, {}", u.reason),
                )
                .await;
        }
        self.batcher.decided(Instant::now());
    }

    /// Creates the NodeClaim object of a planned one (provisioning or a disruption's
    /// replacement); its name, or `None` when the API refused it (logged).
    async fn create_nodeclaim(
        &mut self,
        planned: &tenon_core::plan::NewNodeClaim,
        snap: &tenon_core::ClusterSnapshot,
        objects: &ClusterObjects,
        reason: &str,
    ) -> Option<String> {
        let np =
            objects.nodepools.iter().find(|np| np.metadata.name.as_deref() == Some(planned.nodepool_name.as_str()))?;
        let nc = tenon_core::nodeclaim::nodeclaim(planned, np, &planned.instance_type_names(snap));
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        match api.create(&PostParams::default(), &nc).await {
            Ok(created) => {
                let name = created.metadata.name.clone().unwrap_or_default();
                self.unobserved.insert(name.clone(), Instant::now());
                self.metrics.add(
                    &format!(
                        "karpenter_nodeclaims_created_total{{nodepool=\"{}\",reason=\"{reason}\"}}",
                        planned.nodepool_name
                    ),
                    1.0,
                );
                tracing::info!(nodeclaim = %name, nodepool = %planned.nodepool_name, pods = planned.pods.len(), instance_types = planned.instance_types.len(), %reason, "created NodeClaim");
                Some(name)
            }
            Err(e) => {
                tracing::warn!(nodepool = %planned.nodepool_name, error = %e, "could not create NodeClaim");
                None
            }
        }
    }

    async fn lifecycle(&mut self, catalogs: &Catalogs) {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let nodes: Api<Node> = Api::all(self.client.clone());
        let all_nodes = self.stores.nodes.state();
        for nc in self.stores.nodeclaims.state() {
            let name = nc.metadata.name.clone().unwrap_or_default();
            if nc.metadata.deletion_timestamp.is_some() {
                continue;
            }
            if !lifecycle::has_condition(&nc, condition::LAUNCHED) {
                self.launch(&nc, catalogs);
                continue;
            }
            let Some(node) = node_of(&nc, all_nodes.iter().map(|n| &**n)) else {
                if lifecycle::registration_expired(&nc, unix_now()) {
                    // Karpenter's liveness: a launched instance that never joined is given
                    // up; deleting the NodeClaim terminates the instance.
                    let message = format!(
                        "no Node registered within {}m of launch; deleting the NodeClaim",
                        lifecycle::REGISTRATION_TTL_SECS / 60
                    );
                    self.recorder
                        .publish(&self.client, &involved_nodeclaim(&nc), "Warning", "RegistrationTimeout", &message)
                        .await;
                    self.registration.insert(pool_of(&nc), (false, format!("NodeClaim {name}: {message}")));
                    match api.delete(&name, &kube::api::DeleteParams::default()).await {
                        Ok(_) => tracing::warn!(nodeclaim = %name, "registration TTL exceeded; deleted"),
                        Err(e) => {
                            tracing::warn!(nodeclaim = %name, error = %e, "could not delete an unregistered NodeClaim")
                        }
                    }
                }
                continue;
            };
            let node_name = node.metadata.name.clone().unwrap_or_default();
            if !lifecycle::has_condition(&nc, condition::REGISTERED) {
                let patch = lifecycle::registration_patch(&nc, node);
                if let Err(e) = nodes.patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    tracing::warn!(node = %node_name, error = %e, "could not register node");
                    continue;
                }
                let conds = lifecycle::with_condition(&nc, condition::REGISTERED, true, "Registered", "");
                let st = json!({"status": {"nodeName": node_name, "conditions": conds}});
                match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&st)).await {
                    Ok(_) => {
                        self.registration.insert(pool_of(&nc), (true, String::new()));
                        self.metrics.add(
                            &format!("karpenter_nodeclaims_registered_total{{nodepool=\"{}\"}}", pool_of(&nc)),
                            1.0,
                        );
                        tracing::info!(nodeclaim = %name, node = %node_name, "registered");
                    }
                    Err(e) => tracing::warn!(nodeclaim = %name, error = %e, "could not write Registered"),
                }
                continue;
            }
            if !lifecycle::has_condition(&nc, condition::INITIALIZED) && lifecycle::initialized(&nc, node) {
                let mut probe = nc.as_ref().clone();
                let conds = lifecycle::with_condition(&probe, condition::INITIALIZED, true, "Initialized", "");
                probe.status.get_or_insert_with(Default::default).conditions = conds;
                let conds = lifecycle::with_condition(&probe, condition::READY, true, "Ready", "");
                let st = json!({"status": {"conditions": conds}});
                match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&st)).await {
                    Ok(_) => tracing::info!(nodeclaim = %name, "initialized"),
                    Err(e) => tracing::warn!(nodeclaim = %name, error = %e, "could not write Initialized"),
                }
            }
        }
    }

    /// Moves every NodeClaim being deleted one step towards release (termination.rs).
    async fn terminate(&self, objects: &ClusterObjects) {
        let deleting: Vec<&NodeClaim> =
            objects.nodeclaims.iter().filter(|nc| nc.metadata.deletion_timestamp.is_some()).collect();
        if deleting.is_empty() {
            return;
        }
        // Draining needs pods and nodes, not instance types.
        let (snap, _) = snapshot(objects, &Catalogs::new());
        for nc in deleting {
            let name = nc.metadata.name.clone().unwrap_or_default();
            let node = node_of(nc, &objects.nodes);
            match termination::step(&self.client, self.provider.as_ref(), nc, node, &snap).await {
                Ok(true) => {
                    self.metrics
                        .add(&format!("karpenter_nodeclaims_terminated_total{{nodepool=\"{}\"}}", pool_of(nc)), 1.0);
                    tracing::info!(nodeclaim = %name, "terminated");
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(nodeclaim = %name, error = %e, "termination step failed; retrying"),
            }
        }
    }

    /// Starts the launch of `nc` unless one is under way.
    fn launch(&self, nc: &NodeClaim, catalogs: &Catalogs) {
        let name = nc.metadata.name.clone().unwrap_or_default();
        {
            let Ok(mut l) = self.launching.lock() else { return };
            if !l.insert(name.clone()) {
                return;
            }
        }
        let class_name = nc.spec.node_class_ref.as_ref().map(|r| r.name.clone()).unwrap_or_default();
        let nodeclass = self
            .stores
            .nodeclasses
            .state()
            .into_iter()
            .find(|c| c.metadata.name.as_deref() == Some(class_name.as_str()));
        let types = catalogs.get(&class_name).cloned().unwrap_or_default();
        let (client, provider, recorder, metrics, launching, nc, policies) = (
            self.client.clone(),
            self.provider.clone(),
            self.recorder.clone(),
            self.metrics.clone(),
            self.launching.clone(),
            nc.clone(),
            self.policies.active.clone(),
        );
        tokio::spawn(async move {
            // Ranked by the NodePool's scorer, off the runtime's threads.
            let ranked = {
                let (nc, types) = (nc.clone(), types.clone());
                off_loop("launch ranking", move || lifecycle::launch_options(&nc, &types, &*policies, unix_now()))
            };
            let options = ranked.await.unwrap_or_default();
            let result = launch_one(&client, &provider, &nc, nodeclass.as_deref(), options, &types, &metrics).await;
            if let Err(message) = result {
                let conds = lifecycle::with_condition(&nc, condition::LAUNCHED, false, "LaunchFailed", &message);
                let st = json!({"status": {"conditions": conds}});
                let _ = Api::<NodeClaim>::all(client.clone())
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(&st))
                    .await;
                recorder.publish(&client, &involved_nodeclaim(&nc), "Warning", "LaunchFailed", &message).await;
                tracing::warn!(nodeclaim = %name, %message, "launch failed; retrying");
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
            if let Ok(mut l) = launching.lock() {
                l.remove(&name);
            }
        });
    }
}

async fn launch_one(
    client: &Client,
    provider: &AwsProvider,
    nc: &NodeClaim,
    nodeclass: Option<&EC2NodeClass>,
    options: Vec<tenon_core::cloud::LaunchOption>,
    types: &[InstanceType],
    metrics: &Metrics,
) -> Result<(), String> {
    let name = nc.metadata.name.clone().unwrap_or_default();
    let Some(nodeclass) = nodeclass else {
        return Err(format!(
            "EC2NodeClass {:?} not found (spec.nodeClassRef)",
            nc.spec.node_class_ref.as_ref().map(|r| r.name.clone()).unwrap_or_default()
        ));
    };
    if options.is_empty() {
        return Err("no instance type offering satisfies the NodeClaim's requirements and resources".into());
    }
    let req = lifecycle::launch_request(nc, nodeclass, options);
    let instance = provider.create(&req).await.map_err(|e| match e {
        CloudError::InsufficientCapacity { message, .. } => format!("InsufficientCapacityError: {message}"),
        other => other.to_string(),
    })?;
    let it = types.iter().find(|t| t.name == instance.instance_type);
    let api: Api<NodeClaim> = Api::all(client.clone());
    let labels = lifecycle::launched_labels(&instance, it);
    api.patch(&name, &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"labels": labels}})))
        .await
        .map_err(|e| format!("writing labels: {e}"))?;
    let status = lifecycle::launched_status(nc, &instance, it);
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": status})))
        .await
        .map_err(|e| format!("writing Launched: {e}"))?;
    metrics.add(&format!("karpenter_nodeclaims_launched_total{{nodepool=\"{}\"}}", req.nodepool), 1.0);
    tracing::info!(nodeclaim = %name, instance = %instance.id, instance_type = %instance.instance_type, zone = %instance.zone, "launched");
    Ok(())
}

/// Runs a decision on tokio's blocking threads, never the control loop's: the policies it
/// calls may take up to their deadline each. `None` when it panicked (logged).
async fn off_loop<T: Send + 'static>(decision: &str, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    match tokio::task::spawn_blocking(f).await {
        Ok(out) => Some(out),
        Err(e) => {
            tracing::error!(error = %e, decision, "the decision panicked");
            None
        }
    }
}

/// Instance types per EC2NodeClass name.
type Catalogs = BTreeMap<String, Arc<Vec<InstanceType>>>;

/// The snapshot a decision sees now (objects that cannot be read are left out and logged).
fn snapshot(
    objects: &ClusterObjects,
    catalogs: &Catalogs,
) -> (tenon_core::ClusterSnapshot, Vec<tenon_core::convert::ConvertError>) {
    let catalog = |np: &NodePool| {
        np.spec.template.spec.node_class_ref.as_ref().and_then(|r| catalogs.get(&r.name)).cloned().unwrap_or_default()
    };
    tenon_core::convert::snapshot(objects, &catalog, unix_now())
}

fn unix_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}
