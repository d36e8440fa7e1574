//! `tenon controller`: the imperative shell around the decision core. Reflectors keep the
//! cluster's objects; one reconciler per concern, each on its own task (runner.rs), woken by
//! every change and at least every half second, resolves EC2NodeClasses, provisions for
//! pending pods, moves NodeClaims through Launched → Registered → Initialized, disrupts and
//! terminates; what crosses concerns is the shared context (context.rs). Decisions are the
//! core's pure functions over a snapshot of the stores; when to make them and how to carry
//! them out is `tenon_core::orchestration`, the same state machines the simulator runs (in
//! one fixed order there). This module is start-up, the reconcilers' list and shutdown.

pub mod bootstrap;
pub mod client_metrics;
pub mod client_policy;
pub mod cloud;
pub mod conditions;
pub mod context;
pub mod disruption;
pub mod error;
pub mod events;
pub mod eviction_backoff;
pub mod foreign_lease;
pub mod health;
pub mod huge_pages;
pub mod interruption;
pub mod leader;
pub mod locked_patch;
pub mod metrics;
pub mod names;
pub mod nodeclaim;
pub mod nodeclass;
pub mod nodepool;
pub mod oci_pull;
pub mod pod_changes;
pub mod policies;
pub mod policy_sources;
pub mod provisioning;
pub mod ratelimit;
pub mod runner;
pub mod settings;
pub mod state;
pub mod termination;

use anyhow::Context;
use bootstrap::{cluster_dns, feature_gates, identity, init_logging, join_info};
use events::Involved;
use k8s_openapi::api::core::v1::Node;
use metrics::Metrics;
use settings::Settings;
use state::Stores;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tenon_api::wellknown as wk;
use tenon_api::{NodeClaim, NodePool};
use tenon_aws::{AwsProvider, Connection};

use tenon_core::convert::ClusterObjects;
use tenon_core::instancetype::InstanceType;

pub fn run(settings: Settings) -> anyhow::Result<u8> {
    // Before the runtime and the caches allocate.
    let huge_pages = huge_pages::disable_unless_allowed();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(run_async(settings, huge_pages))
}

async fn run_async(settings: Settings, huge_pages: std::io::Result<bool>) -> anyhow::Result<u8> {
    init_logging(&settings);
    match huge_pages {
        Ok(off) => tracing::debug!(off, "transparent huge pages"),
        Err(e) => {
            tracing::warn!(error = %e, "could not turn transparent huge pages off; memory may stay near its peak")
        }
    }
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
    let lease_name = settings.leader_election_name.clone();
    let election = (!settings.disable_leader_election)
        .then(|| Arc::new(leader::Election::new(namespace, lease_name.clone(), identity())));
    let leadership = Arc::new(match &election {
        Some(e) => leader::Leadership::elected(e.renew_deadline),
        None => leader::Leadership::sole(),
    });
    // Nothing acts before the other provisioner's Lease has been read once.
    leadership.stand_down(settings.karpenter_lease.0.is_some());
    // No launch or termination unless this replica still leads and no other provisioner
    // does, whoever calls.
    let fenced = leadership.clone();
    provider.fence = tenon_aws::Fence::new(move || fenced.may_act());
    let cloud: Arc<dyn cloud::Cloud> = Arc::new(provider);
    let policies = policies::Policies::new(settings.policy_dir.as_deref(), settings.policy_deadline_ms)?
        .with_sources(policy_sources::PolicySources::from_settings(&settings)?)?;
    health::serve(
        metrics.clone(),
        policies.metrics.clone(),
        cloud.clone(),
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
    if let Err(e) = cloud.load_catalog().await {
        tracing::warn!(error = %e, "could not fetch the instance catalog yet; the first decision will retry");
    }
    metrics.set_ready();
    if election.is_some() {
        // Waiting for the Lease: a follower says so before its first pass.
        metrics.set(metrics::catalog::LEADER_ELECTION_MASTER_STATUS, &[("name", &lease_name)], 0.0);
    }
    tracing::info!("caches synced");
    if let Some(election) = election.clone() {
        election.acquire(&client, &leadership).await;
        tokio::spawn(leader::Election::watchdog(leadership.clone()));
        let (keep_client, held) = (client.clone(), leadership.clone());
        tokio::spawn(async move {
            if election.keep(keep_client, &held).await == leader::Kept::Lost {
                // Crash-only, as controller-runtime: a replica that may no longer lead must
                // not act; the restart comes back as a follower.
                tracing::error!("leadership lost; exiting");
                std::process::exit(1);
            }
        });
    }
    let spot_to_spot = gates.get("SpotToSpotConsolidation").copied().unwrap_or(false);
    let interruption_queue = settings.interruption_queue.clone();
    let other_lease = settings.karpenter_lease.0.clone();
    let ctx = Arc::new(context::Context::new(
        client,
        leadership.clone(),
        settings,
        stores,
        cloud,
        metrics,
        policies,
        spot_to_spot,
    ));
    let handler = interruption::Interruption {
        client: ctx.client.clone(),
        stores: ctx.stores.clone(),
        cloud: ctx.cloud.clone(),
        recorder: ctx.recorder.clone(),
        metrics: ctx.metrics.clone(),
        leadership: ctx.leadership.clone(),
    };
    if let Some(lease) = other_lease {
        let guard = foreign_lease::Guard {
            client: ctx.client.clone(),
            lease,
            leadership: ctx.leadership.clone(),
            recorder: ctx.recorder.clone(),
            metrics: ctx.metrics.clone(),
        };
        tokio::spawn(guard.run());
    }
    tokio::spawn(handler.clone().check_health());
    if let Some(queue) = interruption_queue {
        tokio::spawn(handler.run(queue));
    }
    if leadership.is_elected() {
        tokio::spawn(publish_leadership(ctx.clone(), lease_name));
    }
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let reconcilers = spawn_reconcilers(&ctx, &stopped);
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutting down: finishing reconciles and launches under way, then releasing the lease");
    // Each reconciler stops after the reconcile under way, never in its middle.
    let _ = stop.send(true);
    for r in reconcilers {
        let _ = r.await;
    }
    ctx.settle_launches(SHUTDOWN_GRACE).await;
    if let Some(election) = election {
        election.release(&ctx.client).await;
    }
    Ok(0)
}

/// One task per concern, in Karpenter's controllers' names (see each module).
fn spawn_reconcilers(
    ctx: &Arc<context::Context>,
    stop: &tokio::sync::watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    use runner::spawn;
    let c = || ctx.clone();
    vec![
        spawn(nodeclass::NodeClasses::new(c()), c(), stop.clone()),
        spawn(nodepool::status::NodePoolStatusReconciler::new(c()), c(), stop.clone()),
        spawn(provisioning::Provisioner::new(c()), c(), stop.clone()),
        spawn(nodeclaim::lifecycle::Lifecycle::new(c()), c(), stop.clone()),
        spawn(nodeclaim::consistency::Consistency::new(c()), c(), stop.clone()),
        spawn(nodeclaim::pod_events::PodEvents::new(c()), c(), stop.clone()),
        spawn(nodeclaim::expiration::Expiration::new(c()), c(), stop.clone()),
        spawn(disruption::Disruption::new(c()), c(), stop.clone()),
        spawn(termination::Termination::new(c()), c(), stop.clone()),
        spawn(nodeclaim::garbage::Garbage::new(c()), c(), stop.clone()),
        spawn(metrics::publish::Publisher::new(c()), c(), stop.clone()),
    ]
}

/// `leader_election_master_status` while leader election is on: 1 while this replica
/// leads, 0 while it waits.
async fn publish_leadership(ctx: Arc<context::Context>, lease: String) {
    loop {
        let leading = if ctx.leadership.leading() { 1.0 } else { 0.0 };
        ctx.metrics.set(metrics::catalog::LEADER_ELECTION_MASTER_STATUS, &[("name", &lease)], leading);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// How long a shutdown waits for launches under way (a CreateFleet answered and recorded
/// leaves nothing for the next leader to adopt).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The Node of a NodeClaim: the one with its providerID.
fn node_of<'a>(nc: &NodeClaim, nodes: impl IntoIterator<Item = &'a Arc<Node>>) -> Option<&'a Node> {
    nodes_of(nc, nodes).into_iter().next()
}

/// Every Node with the NodeClaim's providerID.
fn nodes_of<'a>(nc: &NodeClaim, nodes: impl IntoIterator<Item = &'a Arc<Node>>) -> Vec<&'a Node> {
    let Some(id) = nc.status.as_ref().and_then(|s| s.provider_id.as_deref()) else { return Vec::new() };
    nodes
        .into_iter()
        .filter(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(id))
        .map(|n| &**n)
        .collect()
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

/// The snapshot a decision sees at `now` (Unix seconds, [`context::Context::unix_now`]; objects that
/// cannot be read are left out and logged).
fn snapshot(
    objects: &ClusterObjects,
    catalogs: &Catalogs,
    now: i64,
) -> (tenon_core::ClusterSnapshot, Vec<tenon_core::convert::ConvertError>) {
    let catalog = |np: &NodePool| {
        np.spec.template.spec.node_class_ref.as_ref().and_then(|r| catalogs.get(&r.name)).cloned().unwrap_or_default()
    };
    tenon_core::convert::snapshot(objects, &catalog, now)
}

fn unix_now() -> i64 {
    unix_now_ms() / 1000
}

fn unix_now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}
