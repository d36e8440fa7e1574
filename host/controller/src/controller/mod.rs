//! `tenon controller`: the imperative shell around the decision core. Reflectors keep the
//! cluster's objects; a loop (on every change, at least every half second) resolves
//! EC2NodeClasses, provisions for pending pods, moves NodeClaims through Launched →
//! Registered → Initialized, disrupts and terminates. Decisions are the core's pure
//! functions over a snapshot of the stores; when to make them and how to carry them out is
//! `tenon_core::orchestration`, the same state machines the simulator runs. This module is
//! start-up and the pass; each step lives in its own module.

pub mod client_metrics;
pub mod client_policy;
pub mod conditions;
pub mod consistency;
pub mod disruption;
pub mod events;
pub mod eviction_backoff;
pub mod expiration;
pub mod garbage;
pub mod health;
pub mod instance_health;
pub mod interruption;
pub mod launch;
pub mod leader;
pub mod lifecycle;
pub mod metrics;
pub mod names;
pub mod nodeclaims;
pub mod nodeclasses;
pub mod nodepool_status;
pub mod oci_pull;
pub mod policies;
pub mod provisioner;
pub mod ratelimit;
pub mod settings;
pub mod state;
pub mod termination;
#[cfg(test)]
mod termination_steps;

use anyhow::Context;
use events::{Involved, Recorder};
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use metrics::Metrics;
use settings::Settings;
use state::Stores;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tenon_api::wellknown::{self as wk, condition};
use tenon_api::{NodeClaim, NodePool};
use tenon_aws::{AwsProvider, ClusterInfo, Connection};

/// How nodes join the cluster: the settings, what eks:DescribeCluster adds, what the
/// controller's own client knows; each guess logged.
async fn join_info(settings: &Settings, clients: &tenon_aws::Clients, own: tenon_aws::cluster::Known) -> ClusterInfo {
    use tenon_aws::cluster;
    let given = cluster::Known {
        endpoint: settings.cluster_endpoint.clone().filter(|s| !s.is_empty()),
        ca_bundle: settings.cluster_ca_bundle.clone().filter(|s| !s.is_empty()),
        service_cidr: settings.service_cidr.clone().filter(|s| !s.is_empty()),
    };
    let described = if cluster::needs_describe(&given) {
        Some(cluster::describe(clients, &settings.cluster_name).await)
    } else {
        None
    };
    let (info, warnings) = cluster::resolve(&settings.cluster_name, given, described, own);
    for w in warnings {
        tracing::warn!("{w}");
    }
    tracing::info!(endpoint = %info.endpoint, service_cidr = %info.service_cidr, "nodes join the cluster here");
    info
}
use tenon_core::convert::ClusterObjects;
use tenon_core::instancetype::InstanceType;
use tenon_core::orchestration::batcher::Batcher;
use tenon_core::orchestration::budget_events::BudgetEvents;

struct Controller {
    client: Client,
    /// Whether this replica may act (holds the leader Lease, or runs alone).
    leadership: Arc<leader::Leadership>,
    settings: Settings,
    stores: Stores,
    provider: Arc<AwsProvider>,
    recorder: Arc<Recorder>,
    metrics: Arc<Metrics>,
    /// The orchestration clock's zero: its milliseconds are monotonic time since start.
    started: Instant,
    batcher: Batcher,
    /// NodeClaims with a launch under way (a launch is one task; never two per NodeClaim).
    launching: Arc<Mutex<BTreeSet<String>>>,
    eviction_backoff: eviction_backoff::EvictionBackoff,
    /// EC2NodeClass name → (generation, when) of its last resolution.
    resolved: BTreeMap<String, (Option<i64>, Instant)>,
    /// EC2NodeClasses whose resolution AWS refused, backing off.
    resolve_failures: nodeclasses::Failures,
    /// NodeClaims this process created that its cache has not shown yet, with when. A
    /// decision waits for them (Karpenter's cluster-state sync): deciding without them
    /// would provision their pods a second time.
    unobserved: BTreeMap<String, Instant>,
    /// A closed batch whose decision had to wait.
    decision_due: bool,
    policies: policies::Policies,
    /// NodePools whose spec failed validation: they provision nothing until fixed.
    invalid: BTreeSet<String>,
    /// Every NodePool's recent registration outcomes, by NodePool UID.
    registration: tenon_core::orchestration::registration_health::RegistrationHealth,
    /// NodePool UID → what its `NodeRegistrationHealthy` was last decided to be.
    registration_verdicts: BTreeMap<String, tenon_core::orchestration::registration_health::Verdict>,
    /// The disruptions under way, each stepping on its own.
    commands: Vec<disruption::Command>,
    last_round: Option<Instant>,
    /// Karpenter's `SpotToSpotConsolidation` feature gate.
    spot_to_spot: bool,
    /// The last sweep of disruption marks no command owns.
    last_sweep: Option<Instant>,
    budget_events: BudgetEvents,
    /// NodeClaim → the pods on its node at the last look (for `lastPodEventTime`).
    pods_on: BTreeMap<String, BTreeSet<String>>,
    /// What the provisioner saw and decided of each waiting pod, for the pod latency series.
    pod_times: metrics::pods::PodTimes,
    /// The offering prices the cost series are read from, and when they were last refreshed.
    offering_prices: Option<(Instant, metrics::offerings::Prices)>,
    /// Each kind's conditions at the last pass, for operatorpkg's status series and Events.
    status_seen: metrics::status::StatusTracker,
    /// When each NodeClaim (by UID) was last checked for consistency.
    consistency_scanned: BTreeMap<String, Instant>,
    last_gc: Option<Instant>,
    last_orphans: Option<Instant>,
    /// The last instance listing, shared by the drift check and garbage collection.
    instances: Option<(Instant, Arc<Vec<tenon_core::cloud::Instance>>)>,
}

pub fn run(settings: Settings) -> anyhow::Result<u8> {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(run_async(settings))
}

async fn run_async(settings: Settings) -> anyhow::Result<u8> {
    init_logging(&settings);
    let mut config =
        kube::Config::infer().await.context("no Kubernetes client configuration (in-cluster or KUBECONFIG)")?;
    config.read_timeout = Some(Duration::from_secs(300));
    let own = tenon_aws::cluster::Known {
        endpoint: Some(config.cluster_url.to_string().trim_end_matches('/').to_string()),
        ca_bundle: config.root_cert.as_deref().and_then(tenon_aws::cluster::pem_bundle),
        service_cidr: None,
    };
    let namespace = settings.system_namespace.clone().unwrap_or_else(|| config.default_namespace.clone());
    let limit = ratelimit::RateLimitLayer { qps: settings.kube_client_qps, burst: settings.kube_client_burst };
    // Evictions a PDB refuses (429) are the drain's to back off per pod; a write the server
    // may have stored is its caller's to check: the client retries only reads.
    let metrics = Arc::new(Metrics::default());
    let client = client_policy::client(config, &limit, metrics.clone())?;
    let gates = feature_gates(&settings.feature_gates)?;
    let k8s_version = match &settings.kubernetes_version {
        Some(v) => v.clone(),
        None => {
            let v = client.apiserver_version().await.context("reading the API server version")?;
            format!("{}.{}", v.major, v.minor.trim_end_matches('+'))
        }
    };
    let mut conn = Connection::from_environment();
    conn.region = settings.aws_region.clone();
    conn.endpoint_url = settings.aws_endpoint_url.clone();
    let clients = tenon_aws::Clients::connect(&conn).await?;
    let region = clients.region.clone();
    tracing::info!(%region, "AWS region");
    let cluster = join_info(&settings, &clients, own).await;
    let mut provider = AwsProvider::new(
        clients,
        tenon_aws::Settings {
            cluster,
            region,
            kubernetes_version: k8s_version,
            capacity: tenon_aws::CapacitySettings {
                vm_memory_overhead: settings.vm_memory_overhead_percent,
                reserved_enis: settings.reserved_enis,
            },
        },
    );
    provider.launch = tenon_aws::LaunchSettings {
        cluster_dns: cluster_dns(&client).await,
        reserved_capacity: gates.get("ReservedCapacity").copied().unwrap_or(true),
    };
    let election = (!settings.disable_leader_election).then(|| Arc::new(leader::Election::new(namespace, identity())));
    let leadership = Arc::new(match &election {
        Some(e) => leader::Leadership::elected(e.renew_deadline),
        None => leader::Leadership::sole(),
    });
    // No launch or termination unless this replica still leads, whoever calls.
    let fenced = leadership.clone();
    provider.fence = tenon_aws::Fence::new(move || fenced.leading());
    let provider = Arc::new(provider);
    let policies = policies::Policies::new(settings.policy_dir.as_deref(), settings.policy_deadline_ms)?.with_oci(
        policies::OciSettings {
            cache: settings.policy_oci_cache.clone(),
            allow_tags: settings.policy_allow_tags,
            insecure_registries: settings.policy_insecure_registries.clone(),
        },
    )?;
    health::serve(
        metrics.clone(),
        policies.metrics.clone(),
        provider.clone(),
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
    if election.is_some() {
        // Waiting for the Lease: a follower says so before its first pass.
        metrics.set(metrics::catalog::LEADER_ELECTION_MASTER_STATUS, &[("name", leader::LEASE_NAME)], 0.0);
    }
    tracing::info!("caches synced");
    if let Some(election) = election.clone() {
        election.acquire(&client, &leadership).await;
        tokio::spawn(leader::Election::watchdog(leadership.clone()));
        let (keep_client, held) = (client.clone(), leadership.clone());
        tokio::spawn(async move {
            election.keep(keep_client, &held).await;
            // Crash-only, as controller-runtime: a replica that may no longer lead must not
            // act; the restart comes back as a follower.
            tracing::error!("leadership lost; exiting");
            std::process::exit(1);
        });
    }
    let mut c = Controller {
        client,
        leadership,
        settings,
        stores,
        provider,
        recorder: Arc::new(Recorder::queued()),
        metrics,
        started: Instant::now(),
        batcher: Batcher::default(),
        launching: Arc::default(),
        eviction_backoff: Default::default(),
        resolved: BTreeMap::new(),
        resolve_failures: Default::default(),
        unobserved: BTreeMap::new(),
        decision_due: false,
        policies,
        invalid: BTreeSet::new(),
        registration: Default::default(),
        registration_verdicts: BTreeMap::new(),
        commands: Vec::new(),
        last_round: None,
        spot_to_spot: gates.get("SpotToSpotConsolidation").copied().unwrap_or(false),
        last_sweep: None,
        budget_events: BudgetEvents::default(),
        pods_on: BTreeMap::new(),
        pod_times: metrics::pods::PodTimes::default(),
        status_seen: metrics::status::StatusTracker::default(),
        offering_prices: None,
        consistency_scanned: BTreeMap::new(),
        last_gc: None,
        last_orphans: None,
        instances: None,
    };
    let handler = interruption::Interruption {
        client: c.client.clone(),
        stores: c.stores.clone(),
        provider: c.provider.clone(),
        recorder: c.recorder.clone(),
        metrics: c.metrics.clone(),
    };
    tokio::spawn(handler.clone().check_health());
    if let Some(queue) = c.settings.interruption_queue.clone() {
        tokio::spawn(handler.run(queue));
    }
    let changed = c.stores.changed.clone();
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    loop {
        c.metrics.pass_started();
        if let Err(e) = c.reconcile().await {
            tracing::warn!(error = %format!("{e:#}"), "reconcile failed; retrying");
        }
        c.metrics.pass_completed();
        // Signals are looked at between passes only: a pass is never cut in the middle.
        tokio::select! {
            _ = changed.notified() => {}
            _ = tokio::time::sleep(Duration::from_millis(500)) => {}
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
        }
    }
    tracing::info!("shutting down: finishing launches under way, then releasing the lease");
    c.settle_launches(SHUTDOWN_GRACE).await;
    if let Some(election) = election {
        election.release(&c.client).await;
    }
    Ok(0)
}

/// How long a shutdown waits for launches under way (a CreateFleet answered and recorded
/// leaves nothing for the next leader to adopt).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The feature gates Tenon implements.
const GATES: [&str; 2] = ["ReservedCapacity", "SpotToSpotConsolidation"];

/// Karpenter's `FEATURE_GATES` (`Name=true,Other=false`, spaces allowed around names and
/// values, booleans as Go's `strconv.ParseBool` reads them; a malformed value is an error, as
/// in Karpenter). `ReservedCapacity` shapes launches and `SpotToSpotConsolidation`
/// consolidation; any other gate set true (`NodeRepair`, `NodeOverlay`, `StaticCapacity`,
/// `CapacityBuffer`) is refused, since Tenon does not do what it turns on.
fn feature_gates(gates: &str) -> anyhow::Result<BTreeMap<String, bool>> {
    let mut set = BTreeMap::new();
    for gate in gates.split(',').map(str::trim).filter(|g| !g.is_empty()) {
        let parsed = gate.split_once('=').map(|(n, v)| (n.trim(), v.trim())).and_then(|(name, value)| {
            let value = match value {
                "1" | "t" | "T" | "true" | "TRUE" | "True" => true,
                "0" | "f" | "F" | "false" | "FALSE" | "False" => false,
                _ => return None,
            };
            (!name.is_empty()).then_some((name, value))
        });
        let Some((name, value)) = parsed else {
            anyhow::bail!(
                "--feature-gates / FEATURE_GATES: {gate:?} is not NAME=true|false (e.g. SpotToSpotConsolidation=true)"
            );
        };
        if !GATES.contains(&name) && value {
            anyhow::bail!(
                "--feature-gates / FEATURE_GATES: {name}=true is not supported by Tenon (supported: {}); remove it or set it to false",
                GATES.join(", ")
            );
        }
        tracing::info!(gate = name, enabled = value, "feature gate");
        set.insert(name.to_string(), value);
    }
    Ok(set)
}

/// The cluster's DNS address (`kube-system/kube-dns`'s ClusterIP): the kubelet's clusterDNS
/// where the NodeClass sets none, as Karpenter reads it.
async fn cluster_dns(client: &Client) -> Option<std::net::IpAddr> {
    let services: kube::Api<k8s_openapi::api::core::v1::Service> = kube::Api::namespaced(client.clone(), "kube-system");
    match services.get_opt("kube-dns").await {
        Ok(Some(s)) => s.spec.and_then(|s| s.cluster_ip).and_then(|ip| ip.parse().ok()),
        Ok(None) => {
            tracing::warn!("no kube-system/kube-dns Service: nodes' clusterDNS comes from nodeadm's defaults");
            None
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not read kube-system/kube-dns; nodes' clusterDNS comes from nodeadm's defaults");
            None
        }
    }
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

/// The Node of a NodeClaim: the one with its providerID.
fn node_of<'a>(nc: &NodeClaim, nodes: impl IntoIterator<Item = &'a Node>) -> Option<&'a Node> {
    nodes_of(nc, nodes).into_iter().next()
}

/// Every Node with the NodeClaim's providerID.
fn nodes_of<'a>(nc: &NodeClaim, nodes: impl IntoIterator<Item = &'a Node>) -> Vec<&'a Node> {
    let Some(id) = nc.status.as_ref().and_then(|s| s.provider_id.as_deref()) else { return Vec::new() };
    nodes.into_iter().filter(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(id)).collect()
}

/// The UID of the `kind` object named `name` in this pass's view.
fn uid_of(
    objects: &ClusterObjects,
    nodeclasses: &[Arc<tenon_api::EC2NodeClass>],
    kind: &str,
    name: &str,
) -> Option<String> {
    let named = |m: &&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| m.name.as_deref() == Some(name);
    let metas: Vec<&k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta> = match kind {
        "NodeClaim" => objects.nodeclaims.iter().map(|o| &o.metadata).collect(),
        "NodePool" => objects.nodepools.iter().map(|o| &o.metadata).collect(),
        "Node" => objects.nodes.iter().map(|o| &o.metadata).collect(),
        _ => nodeclasses.iter().map(|o| &o.metadata).collect(),
    };
    metas.into_iter().find(named).and_then(|m| m.uid.clone())
}

/// The NodePool a NodeClaim belongs to (its `karpenter.sh/nodepool` label).
fn pool_of(nc: &NodeClaim) -> String {
    nc.metadata.labels.as_ref().and_then(|l| l.get(wk::LABEL_NODEPOOL)).cloned().unwrap_or_default()
}

fn involved_nodeclaim(nc: &NodeClaim) -> Involved {
    Involved::cluster_scoped("karpenter.sh/v1", "NodeClaim", &nc.metadata)
}

impl Controller {
    /// Waits until no launch is under way, at most `limit`.
    async fn settle_launches(&self, limit: Duration) {
        let until = Instant::now() + limit;
        while Instant::now() < until && self.launching.lock().map(|l| !l.is_empty()).unwrap_or(false) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The orchestration clock: milliseconds since this process started (monotonic).
    fn now_ms(&self) -> i64 {
        self.started.elapsed().as_millis() as i64
    }

    async fn reconcile(&mut self) -> anyhow::Result<()> {
        if self.leadership.is_elected() {
            let leading = if self.leadership.leading() { 1.0 } else { 0.0 };
            self.metrics.set(metrics::catalog::LEADER_ELECTION_MASTER_STATUS, &[("name", leader::LEASE_NAME)], leading);
        }
        if !self.leadership.leading() {
            // The watchdog is about to exit the process; nothing is done meanwhile.
            return Ok(());
        }
        let mut step = metrics::Step::start(self.metrics.clone(), "nodeclass");
        self.nodeclasses().await;
        step.next("policies");
        self.policies.refresh(&self.stores.nodepools.state(), Instant::now());
        self.policies.log_failures();
        let objects = self.stores.objects();
        step.next("nodepool.status");
        self.nodepools(&objects).await;
        step.next("provisioner");
        self.orphans(&objects).await;
        let pending_view = provisioner::with_displaced_pods(&objects);
        let closed = self.batch_closed(&pending_view);
        let observed = self.cache_has_created(&objects).await;
        let decide = (closed || self.decision_due) && observed;
        self.decision_due = (closed || self.decision_due) && !decide;
        let launches = objects
            .nodeclaims
            .iter()
            .any(|nc| nc.metadata.deletion_timestamp.is_none() && !conditions::has_condition(nc, condition::LAUNCHED));
        // Shaping the catalog into instance types is the costly part of a pass: done only
        // when a decision or a launch needs it, not on every tick.
        let disrupt = self.disruption_due();
        let catalogs = if decide || launches || disrupt { self.catalogs().await } else { BTreeMap::new() };
        if decide {
            self.provision(&pending_view, &catalogs).await;
        }
        step.next("nodeclaim.lifecycle");
        self.lifecycle(&catalogs).await;
        step.next("nodeclaim.consistency");
        self.consistency(&objects).await;
        step.next("pod.events");
        self.pod_events(&objects).await;
        // Neither waits for a settled cluster: one stuck node must not stop either.
        step.next("nodeclaim.expiration");
        self.expiration(&objects).await;
        step.next("disruption");
        self.sweep_marks(&objects).await;
        // A round right after a provisioning decision would not see its NodeClaims yet, nor
        // one before every created NodeClaim is seen. Nothing else holds a round off: a plan
        // that would count on a node not Initialized yet is refused on its own (the core's
        // rule), so one stuck node, a held drain or pod churn stops nothing elsewhere.
        self.disruption(&objects, &catalogs, !decide && observed).await;
        step.next("node.termination");
        self.terminate(&objects).await;
        step.next("nodeclaim.garbagecollection");
        self.garbage(&objects).await;
        step.next("metrics");
        self.publish_cluster_metrics(&objects);
        self.publish_status_conditions(&objects).await;
        self.publish_offerings(&objects, catalogs).await;
        step.finish();
        Ok(())
    }

    /// Karpenter's series read off the cluster (nodes, NodePools, pods) and the controller's
    /// own counters kept elsewhere.
    fn publish_cluster_metrics(&mut self, objects: &ClusterObjects) {
        use metrics::catalog as mc;
        let nodes = metrics::cluster::nodes(objects, unix_now());
        self.metrics.replace(mc::NODES_ALLOCATABLE, nodes.allocatable);
        self.metrics.replace(mc::NODES_POD_REQUESTS, nodes.pod_requests);
        self.metrics.replace(mc::NODES_DAEMON_REQUESTS, nodes.daemon_requests);
        self.metrics.replace(mc::NODES_POD_LIMITS, nodes.pod_limits);
        self.metrics.replace(mc::NODES_DAEMON_LIMITS, nodes.daemon_limits);
        self.metrics.replace(mc::CLUSTER_UTILIZATION, nodes.utilization);
        self.metrics.replace(mc::NODES_SYSTEM_OVERHEAD, nodes.system_overhead);
        self.metrics.replace(mc::NODES_CURRENT_LIFETIME, nodes.lifetime);
        let (usage, limit) = metrics::cluster::nodepools(&objects.nodepools);
        self.metrics.replace(mc::NODEPOOLS_USAGE, usage);
        self.metrics.replace(mc::NODEPOOLS_LIMIT, limit);
        self.metrics.replace(mc::PODS_STATE, metrics::cluster::pod_states(objects));
        let pods = self.pod_times.observe(&objects.pods, unix_now_ms() as f64 / 1000.0);
        self.metrics.replace(mc::PODS_UNSTARTED, pods.unstarted);
        self.metrics.replace(mc::PODS_UNBOUND, pods.unbound);
        self.metrics.replace(mc::PODS_PROVISIONING_UNSTARTED, pods.provisioning_unstarted);
        self.metrics.replace(mc::PODS_PROVISIONING_UNBOUND, pods.provisioning_unbound);
        self.metrics.replace(mc::PODS_UNDECIDED, pods.undecided);
        for (family, seconds) in [
            (mc::PODS_STARTUP, pods.startup),
            (mc::PODS_PROVISIONING_STARTUP, pods.provisioning_startup),
            (mc::PODS_BOUND, pods.bound),
            (mc::PODS_PROVISIONING_BOUND, pods.provisioning_bound),
        ] {
            for s in seconds {
                self.metrics.observe(family, &[], s);
            }
        }
        self.metrics.set(mc::CLUSTER_STATE_NODE_COUNT, &[], objects.nodes.len() as f64);
        self.metrics.set(mc::CLUSTER_STATE_SYNCED, &[], if self.unobserved.is_empty() { 1.0 } else { 0.0 });
        let unsynced = self.unobserved.values().min().map_or(0.0, |t| t.elapsed().as_secs_f64());
        self.metrics.set(mc::CLUSTER_STATE_UNSYNCED_TIME, &[], unsynced);
        let dropped = self.recorder.dropped.load(std::sync::atomic::Ordering::Relaxed);
        self.metrics.advance_to(mc::EVENTS_DROPPED, &[], dropped);
    }

    /// operatorpkg's status series for NodeClaims, NodePools, Nodes and EC2NodeClasses, and
    /// Karpenter's Event on each object whose condition changed status since the last pass.
    async fn publish_status_conditions(&mut self, objects: &ClusterObjects) {
        use metrics::catalog as mc;
        use metrics::status::{self as st, Tracked};
        let conds = |s: Option<&Vec<tenon_api::common::Condition>>| s.cloned().unwrap_or_default();
        let nodeclasses = self.stores.nodeclasses.state();
        let kinds: [(&'static str, &mc::StatusFamilies, Vec<Tracked>, &str, &str); 4] = [
            (
                "nodeclaim",
                &mc::NODECLAIM_STATUS,
                objects
                    .nodeclaims
                    .iter()
                    .map(|o| {
                        let c = conds(o.status.as_ref().map(|s| &s.conditions));
                        st::tracked(&o.metadata, &c, st::NODECLAIM_LABELS)
                    })
                    .collect(),
                "karpenter.sh/v1",
                "NodeClaim",
            ),
            (
                "nodepool",
                &mc::NODEPOOL_STATUS,
                objects
                    .nodepools
                    .iter()
                    .map(|o| st::tracked(&o.metadata, &conds(o.status.as_ref().map(|s| &s.conditions)), &[]))
                    .collect(),
                "karpenter.sh/v1",
                "NodePool",
            ),
            ("node", &mc::NODE_STATUS, objects.nodes.iter().map(st::tracked_node).collect(), "v1", "Node"),
            (
                "ec2nodeclass",
                &mc::EC2NODECLASS_STATUS,
                nodeclasses
                    .iter()
                    .map(|o| st::tracked(&o.metadata, &conds(o.status.as_ref().map(|s| &s.conditions)), &[]))
                    .collect(),
                "karpenter.k8s.aws/v1",
                "EC2NodeClass",
            ),
        ];
        let now = unix_now();
        let mut deprecated = st::Deprecated::default();
        for (kind, families, tracked, api_version, kind_name) in kinds {
            let extra = tracked.first().map_or(0, |t| t.labels.len());
            let mut series = self.status_seen.observe(kind, tracked, now);
            let events = std::mem::take(&mut series.events);
            st::publish(&self.metrics, families, extra, series, &mut deprecated);
            for e in events {
                let meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(e.name.clone()),
                    uid: uid_of(objects, &nodeclasses, kind_name, &e.name),
                    ..Default::default()
                };
                let obj = events::Involved::cluster_scoped(api_version, kind_name, &meta);
                self.recorder.publish(&self.client, &obj, "Normal", &e.type_, &e.message).await;
            }
        }
        deprecated.publish(&self.metrics);
    }

    /// Karpenter's instance type and offering series, refreshed each minute as its provider's
    /// metrics controller does (from this pass's instance types when it read them), and each
    /// NodePool's cost, every pass.
    async fn publish_offerings(&mut self, objects: &ClusterObjects, read: Catalogs) {
        use metrics::catalog as mc;
        let stale = self.offering_prices.as_ref().is_none_or(|(at, _)| at.elapsed() >= Duration::from_secs(60));
        if stale {
            let catalogs = if read.is_empty() { self.catalogs().await } else { read };
            let s = metrics::offerings::offerings(
                catalogs.values().map(|t| t.as_slice()),
                self.provider.launch.reserved_capacity,
            );
            self.metrics.replace(mc::INSTANCE_TYPE_CPU, s.cpu_cores);
            self.metrics.replace(mc::INSTANCE_TYPE_MEMORY, s.memory_bytes);
            self.metrics.replace(mc::OFFERING_AVAILABLE, s.available);
            self.metrics.replace(mc::OFFERING_PRICE, s.price);
            self.offering_prices = Some((Instant::now(), metrics::offerings::Prices::new(&catalogs)));
        }
        if let Some((_, prices)) = &self.offering_prices {
            let costs = metrics::offerings::nodepool_costs(&objects.nodepools, &objects.nodeclaims, prices);
            self.metrics.replace(mc::NODEPOOLS_COST, costs);
        }
    }

    /// Instance types per EC2NodeClass (from the provider's cached catalog).
    async fn catalogs(&self) -> Catalogs {
        let mut out = BTreeMap::new();
        for nc in self.stores.nodeclasses.state() {
            let name = nc.metadata.name.clone().unwrap_or_default();
            match self.provider.instance_types(&nc).await {
                Ok(t) => {
                    out.insert(name, t);
                }
                Err(e) => tracing::warn!(nodeclass = %name, error = %e, "no instance types"),
            }
        }
        out
    }
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
    unix_now_ms() / 1000
}

fn unix_now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

#[cfg(test)]
mod gate_tests {
    use super::feature_gates;

    #[test]
    fn gates_tenon_implements_are_read_others_refused_when_on() {
        let g = feature_gates("ReservedCapacity=false, SpotToSpotConsolidation=true,NodeRepair=false").unwrap();
        assert_eq!(g.get("SpotToSpotConsolidation"), Some(&true));
        assert_eq!(g.get("ReservedCapacity"), Some(&false));
        let e = feature_gates("NodeRepair=true").unwrap_err().to_string();
        assert!(e.contains("NodeRepair=true is not supported"), "{e}");
        assert!(feature_gates("SpotToSpotConsolidation").is_err(), "no value");
        assert!(feature_gates("SpotToSpotConsolidation=yes").is_err(), "not a Go boolean");
        // Go's strconv.ParseBool forms, and spaces around the parts, as Karpenter reads them.
        let g = feature_gates("SpotToSpotConsolidation = True, ReservedCapacity=0,NodeRepair=F").unwrap();
        assert_eq!((g["SpotToSpotConsolidation"], g["ReservedCapacity"], g["NodeRepair"]), (true, false, false));
        assert!(feature_gates("CapacityBuffer=1").is_err(), "refused in any spelling");
        assert!(feature_gates("").unwrap().is_empty());
    }
}
