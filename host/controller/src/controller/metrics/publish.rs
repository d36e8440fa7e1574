//! Karpenter's metrics controllers: the series read off the cluster (nodes, NodePools,
//! pods), operatorpkg's status-condition series and Events, and the provider's instance
//! type and offering series.

use super::{cluster, offerings, status};
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::runner::{self, Reconciler};
use crate::controller::{Catalogs, events, uid_of, unix_now, unix_now_ms};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_core::convert::ClusterObjects;

/// Each EC2NodeClass' name and resourceVersion.
type ClassVersions = Vec<(String, String)>;

/// The series read off every object are rebuilt when the cluster changed, at most this
/// often: during a wave of ten thousand pods the view changes on every pass, and a rebuild
/// of their series costs a quarter of a CPU-second.
const REBUILD_AT_MOST_EVERY: Duration = Duration::from_secs(2);
/// And this often when nothing changed, only the series that age with the clock.
const REBUILD_AT_LEAST_EVERY: Duration = Duration::from_secs(5);

pub struct Publisher {
    ctx: Arc<Context>,
    /// The view the series were last rebuilt from, and when.
    rebuilt: Option<(std::sync::Weak<ClusterObjects>, Instant)>,
    /// The offering prices the cost series are read from, when they were last refreshed,
    /// and the EC2NodeClasses (name, resourceVersion) they were read for.
    offering_prices: Option<(Instant, offerings::Prices, ClassVersions)>,
    /// Each kind's conditions at the last look, for operatorpkg's status series and Events.
    status_seen: status::StatusTracker,
    /// Each node's labels as the last rebuild read them (that view's).
    node_labels: cluster::NodeLabels,
}

impl Publisher {
    pub fn new(ctx: Arc<Context>) -> Publisher {
        Publisher {
            ctx,
            rebuilt: None,
            offering_prices: None,
            status_seen: status::StatusTracker::default(),
            node_labels: Default::default(),
        }
    }
}

impl Reconciler for Publisher {
    const NAME: &'static str = "metrics";

    async fn reconcile(&mut self) -> Result<(), Error> {
        let objects = self.ctx.objects();
        self.publish_sync_state();
        let Some(changed) = self.rebuild_due(&objects) else {
            return Ok(());
        };
        self.rebuilt = Some((Arc::downgrade(&objects), Instant::now()));
        if changed {
            self.publish_cluster_metrics(&objects);
        } else {
            self.publish_ages(&objects);
        }
        self.publish_status_conditions(&objects).await;
        self.publish_offerings(&objects).await;
        Ok(())
    }

    /// The next rebuild; soon while the cluster state is not synced (its age is a series).
    fn next_pass(&self) -> Duration {
        if !self.ctx.cluster().unobserved.is_empty() {
            return runner::BUSY;
        }
        runner::due_in(self.rebuilt.as_ref().map(|(_, at)| REBUILD_AT_LEAST_EVERY.saturating_sub(at.elapsed())))
    }
}

impl Publisher {
    /// Whether the series read off every object are rebuilt from `objects` now: `true`
    /// all of them (the cluster changed), `false` only those that age with the clock.
    fn rebuild_due(&self, objects: &Arc<ClusterObjects>) -> Option<bool> {
        let Some((seen, at)) = &self.rebuilt else { return Some(true) };
        let changed = !std::sync::Weak::ptr_eq(seen, &Arc::downgrade(objects));
        let due = at.elapsed() >= REBUILD_AT_LEAST_EVERY || (changed && at.elapsed() >= REBUILD_AT_MOST_EVERY);
        due.then_some(changed)
    }

    /// Whether the cluster state is synced, and the Events dropped: cheap, every pass.
    fn publish_sync_state(&self) {
        use super::catalog as mc;
        let (synced, unsynced) = {
            let cluster = self.ctx.cluster();
            (
                cluster.unobserved.is_empty(),
                cluster.unobserved.values().min().map_or(0.0, |t| t.elapsed().as_secs_f64()),
            )
        };
        self.ctx.metrics.set(mc::CLUSTER_STATE_SYNCED, &[], if synced { 1.0 } else { 0.0 });
        self.ctx.metrics.set(mc::CLUSTER_STATE_UNSYNCED_TIME, &[], unsynced);
        let dropped = self.ctx.recorder.dropped.load(std::sync::atomic::Ordering::Relaxed);
        self.ctx.metrics.advance_to(mc::EVENTS_DROPPED, &[], dropped);
    }

    /// Karpenter's series read off the cluster (nodes, NodePools, pods) and the controller's
    /// own counters kept elsewhere.
    fn publish_cluster_metrics(&mut self, objects: &ClusterObjects) {
        use super::catalog as mc;
        let mut nodes = cluster::nodes(objects);
        self.node_labels = std::mem::take(&mut nodes.labels);
        self.ctx.metrics.replace(mc::NODES_ALLOCATABLE, nodes.allocatable);
        self.ctx.metrics.replace(mc::NODES_POD_REQUESTS, nodes.pod_requests);
        self.ctx.metrics.replace(mc::NODES_DAEMON_REQUESTS, nodes.daemon_requests);
        self.ctx.metrics.replace(mc::NODES_POD_LIMITS, nodes.pod_limits);
        self.ctx.metrics.replace(mc::NODES_DAEMON_LIMITS, nodes.daemon_limits);
        self.ctx.metrics.replace(mc::CLUSTER_UTILIZATION, nodes.utilization);
        self.ctx.metrics.replace(mc::NODES_SYSTEM_OVERHEAD, nodes.system_overhead);
        let (usage, limit) = cluster::nodepools(&objects.nodepools);
        self.ctx.metrics.replace(mc::NODEPOOLS_USAGE, usage);
        self.ctx.metrics.replace(mc::NODEPOOLS_LIMIT, limit);
        self.ctx.metrics.replace(mc::PODS_STATE, cluster::pod_states(objects));
        self.ctx.metrics.set(mc::CLUSTER_STATE_NODE_COUNT, &[], objects.nodes.len() as f64);
        self.publish_ages(objects);
    }

    /// The series that move with the clock when nothing else does: node lifetimes and how
    /// long pods have waited (at 10,000 pods the rest is most of a rebuild's cost).
    fn publish_ages(&mut self, objects: &ClusterObjects) {
        use super::catalog as mc;
        self.ctx
            .metrics
            .replace(mc::NODES_CURRENT_LIFETIME, cluster::lifetimes(objects, &self.node_labels, unix_now()));
        let pods = self.ctx.pod_times().observe(&objects.pods, unix_now_ms() as f64 / 1000.0);
        self.ctx.metrics.replace(mc::PODS_UNSTARTED, pods.unstarted);
        self.ctx.metrics.replace(mc::PODS_UNBOUND, pods.unbound);
        self.ctx.metrics.replace(mc::PODS_PROVISIONING_UNSTARTED, pods.provisioning_unstarted);
        self.ctx.metrics.replace(mc::PODS_PROVISIONING_UNBOUND, pods.provisioning_unbound);
        self.ctx.metrics.replace(mc::PODS_UNDECIDED, pods.undecided);
        for (family, seconds) in [
            (mc::PODS_STARTUP, pods.startup),
            (mc::PODS_PROVISIONING_STARTUP, pods.provisioning_startup),
            (mc::PODS_BOUND, pods.bound),
            (mc::PODS_PROVISIONING_BOUND, pods.provisioning_bound),
        ] {
            for s in seconds {
                self.ctx.metrics.observe(family, &[], s);
            }
        }
    }

    /// operatorpkg's status series for NodeClaims, NodePools, Nodes and EC2NodeClasses, and
    /// Karpenter's Event on each object whose condition changed status since the last pass.
    async fn publish_status_conditions(&mut self, objects: &ClusterObjects) {
        use super::catalog as mc;
        use status::{self as st, Tracked};
        let conds = |s: Option<&Vec<tenon_api::common::Condition>>| s.cloned().unwrap_or_default();
        let nodeclasses = self.ctx.stores.nodeclasses.state();
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
            ("node", &mc::NODE_STATUS, objects.nodes.iter().map(|n| st::tracked_node(n)).collect(), "v1", "Node"),
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
            st::publish(&self.ctx.metrics, families, extra, series, &mut deprecated);
            for e in events {
                let meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                    name: Some(e.name.clone()),
                    uid: uid_of(objects, &nodeclasses, kind_name, &e.name),
                    ..Default::default()
                };
                let obj = events::Involved::cluster_scoped(api_version, kind_name, &meta);
                self.ctx.recorder.publish(&self.ctx.client, &obj, "Normal", &e.type_, &e.message).await;
            }
        }
        deprecated.publish(&self.ctx.metrics);
    }

    /// Karpenter's instance type and offering series, refreshed each minute as its provider's
    /// metrics controller does, and each NodePool's cost, every reconcile.
    async fn publish_offerings(&mut self, objects: &ClusterObjects) {
        use super::catalog as mc;
        let classes: ClassVersions = self
            .ctx
            .stores
            .nodeclasses
            .state()
            .iter()
            .map(|c| {
                (c.metadata.name.clone().unwrap_or_default(), c.metadata.resource_version.clone().unwrap_or_default())
            })
            .collect();
        // Each minute, and as soon as an EC2NodeClass changes (its first resolution above
        // all: before it, it offers nothing).
        let stale = self
            .offering_prices
            .as_ref()
            .is_none_or(|(at, _, read_for)| at.elapsed() >= Duration::from_secs(60) || *read_for != classes);
        if stale {
            let catalogs: Catalogs = self.ctx.catalogs().await;
            let s = offerings::offerings(catalogs.values().map(|t| t.as_slice()), self.ctx.cloud.reserved_capacity());
            self.ctx.metrics.replace(mc::INSTANCE_TYPE_CPU, s.cpu_cores);
            self.ctx.metrics.replace(mc::INSTANCE_TYPE_MEMORY, s.memory_bytes);
            self.ctx.metrics.replace(mc::OFFERING_AVAILABLE, s.available);
            self.ctx.metrics.replace(mc::OFFERING_PRICE, s.price);
            self.offering_prices = Some((Instant::now(), offerings::Prices::new(&catalogs), classes));
        }
        if let Some((_, prices, _)) = &self.offering_prices {
            let costs = offerings::nodepool_costs(&objects.nodepools, &objects.nodeclaims, prices);
            self.ctx.metrics.replace(mc::NODEPOOLS_COST, costs);
        }
    }
}
