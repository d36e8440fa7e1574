//! The controller's view of the cluster: one reflector per kind, kept by kube-rs watchers,
//! and a change count every reconciler wakes on. Decisions read snapshots built from these
//! stores.

use super::pod_changes::PodChanges;
use futures_util::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    Namespace, Node, PersistentVolume, PersistentVolumeClaim, ReplicationController, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::storage::v1::{CSINode, StorageClass, VolumeAttachment};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use tenon_api::scheduler_config::SchedulerConfig;
use tenon_api::{EC2NodeClass, NodeClaim, NodePool};
use tenon_core::cached_pod::Pod;
use tenon_core::convert::ClusterObjects;
use tokio::sync::watch;

#[derive(Clone)]
pub struct Stores {
    pub pods: Store<Pod>,
    pub nodes: Store<Node>,
    pub nodeclaims: Store<NodeClaim>,
    pub nodepools: Store<NodePool>,
    pub nodeclasses: Store<EC2NodeClass>,
    pub daemonsets: Store<DaemonSet>,
    pub pdbs: Store<PodDisruptionBudget>,
    pub namespaces: Store<Namespace>,
    /// Volumes pin pods to zones: a claim's bound volume, or its StorageClass's topology.
    pub claims: Store<PersistentVolumeClaim>,
    pub volumes: Store<PersistentVolume>,
    pub storage_classes: Store<StorageClass>,
    /// A node's termination waits for its volumes to detach.
    pub volume_attachments: Store<VolumeAttachment>,
    /// How many volumes each node's CSI drivers can attach.
    pub csi_nodes: Store<CSINode>,
    /// What selects pods, watched only when default spread constraints need it.
    pub selecting: Option<Selecting>,
    pub scheduler: SchedulerConfig,
    /// When each node's pods last changed, recorded as the pod watch delivers them.
    pub pod_changes: Arc<Mutex<PodChanges>>,
    /// The number of changes the reflectors have seen: every reconciler wakes on it.
    pub changed: Arc<watch::Sender<u64>>,
}

fn reflect<K>(client: &Client, changed: Arc<watch::Sender<u64>>) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    reflect_observed(client, changed, |_| {}, |_| {})
}

/// [`reflect`], with `trim` dropping fields nothing reads before the store keeps an object,
/// and `observe` seeing each event just before the store takes it in: whoever reads the
/// store after `observe`'s record reads it as of that event or later.
fn reflect_observed<K>(
    client: &Client,
    changed: Arc<watch::Sender<u64>>,
    trim: fn(&mut K),
    mut observe: impl FnMut(&watcher::Event<K>) + Send + 'static,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    let (reader, writer) = reflector::store::<K>();
    let api: Api<K> = Api::all(client.clone());
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default().any_semantic())
            .default_backoff()
            .modify(move |o: &mut K| {
                tenon_core::cache_trim::meta(o.meta_mut());
                trim(o);
            })
            .inspect(move |ev| {
                if let Ok(event) = ev {
                    observe(event);
                }
            }),
    );
    tokio::spawn(async move {
        stream
            .for_each(|ev| {
                if let Err(e) = &ev {
                    tracing::warn!(kind = %K::kind(&()), error = %e, "watch failed; retrying with backoff");
                }
                // After the event is in the store: a reconciler woken by it sees it.
                changed.send_modify(|n| *n += 1);
                async {}
            })
            .await;
    });
    reader
}

/// The pods, and when each node's pods last changed (recorded before the store takes the
/// change in).
fn reflect_pods(client: &Client, changed: Arc<watch::Sender<u64>>) -> (Store<Pod>, Arc<Mutex<PodChanges>>) {
    let pod_changes = Arc::new(Mutex::new(PodChanges::default()));
    let seen = pod_changes.clone();
    let pods = reflect_observed(
        client,
        changed,
        |_| {},
        move |event| {
            seen.lock().unwrap_or_else(|e| e.into_inner()).observe(event, super::unix_now());
        },
    );
    (pods, pod_changes)
}

/// The objects kube-scheduler deduces a default spread selector from.
#[derive(Clone)]
pub struct Selecting {
    pub services: Store<Service>,
    pub replica_sets: Store<ReplicaSet>,
    pub stateful_sets: Store<StatefulSet>,
    pub replication_controllers: Store<ReplicationController>,
}

impl Stores {
    pub fn start(client: &Client, scheduler: &SchedulerConfig) -> Stores {
        let changed = Arc::new(watch::Sender::new(0));
        let selecting = (!scheduler.default_constraints().is_empty()).then(|| Selecting {
            services: reflect(client, changed.clone()),
            replica_sets: reflect(client, changed.clone()),
            stateful_sets: reflect(client, changed.clone()),
            replication_controllers: reflect(client, changed.clone()),
        });
        let (pods, pod_changes) = reflect_pods(client, changed.clone());
        Stores {
            pods,
            nodes: reflect_observed(client, changed.clone(), tenon_core::cache_trim::node, |_| {}),
            nodeclaims: reflect(client, changed.clone()),
            nodepools: reflect(client, changed.clone()),
            nodeclasses: reflect(client, changed.clone()),
            daemonsets: reflect(client, changed.clone()),
            pdbs: reflect(client, changed.clone()),
            namespaces: reflect(client, changed.clone()),
            claims: reflect(client, changed.clone()),
            volumes: reflect(client, changed.clone()),
            storage_classes: reflect(client, changed.clone()),
            volume_attachments: reflect(client, changed.clone()),
            csi_nodes: reflect(client, changed.clone()),
            selecting,
            scheduler: scheduler.clone(),
            pod_changes,
            changed,
        }
    }

    /// Karpenter's "synced" gate: no decision before every cache holds the API server's
    /// objects (an empty cache would look like an empty cluster).
    pub async fn wait_synced(&self) -> anyhow::Result<()> {
        self.pods.wait_until_ready().await?;
        self.nodes.wait_until_ready().await?;
        self.nodeclaims.wait_until_ready().await?;
        self.nodepools.wait_until_ready().await?;
        self.nodeclasses.wait_until_ready().await?;
        self.daemonsets.wait_until_ready().await?;
        self.pdbs.wait_until_ready().await?;
        self.namespaces.wait_until_ready().await?;
        self.claims.wait_until_ready().await?;
        self.volumes.wait_until_ready().await?;
        self.storage_classes.wait_until_ready().await?;
        self.volume_attachments.wait_until_ready().await?;
        self.csi_nodes.wait_until_ready().await?;
        if let Some(s) = &self.selecting {
            s.services.wait_until_ready().await?;
            s.replica_sets.wait_until_ready().await?;
            s.stateful_sets.wait_until_ready().await?;
            s.replication_controllers.wait_until_ready().await?;
        }
        Ok(())
    }

    /// How many changes the reflectors have seen so far.
    pub fn version(&self) -> u64 {
        *self.changed.borrow()
    }

    /// Wakes on each change the reflectors see.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    pub fn objects(&self) -> ClusterObjects {
        fn all<K: Clone + Resource + 'static>(s: &Store<K>) -> Vec<Arc<K>>
        where
            K::DynamicType: Eq + Hash + Clone,
        {
            // The cache's objects themselves: nothing writes a cached object back (every
            // write is a patch), so a pass may hold them as long as it likes.
            let mut v = s.state();
            // Deterministic order: the core's decisions depend on it. Names are unique within
            // a kind, so an unstable sort gives the one order, and faster.
            v.sort_unstable_by(|a, b| {
                (a.meta().namespace.as_deref(), a.meta().name.as_deref())
                    .cmp(&(b.meta().namespace.as_deref(), b.meta().name.as_deref()))
            });
            v
        }
        ClusterObjects {
            nodepools: all(&self.nodepools),
            nodeclaims: all(&self.nodeclaims),
            nodes: all(&self.nodes),
            pods: all(&self.pods),
            daemonsets: all(&self.daemonsets),
            pdbs: all(&self.pdbs),
            namespaces: all(&self.namespaces),
            claims: all(&self.claims),
            volumes: all(&self.volumes),
            storage_classes: all(&self.storage_classes),
            volume_attachments: all(&self.volume_attachments),
            csi_nodes: all(&self.csi_nodes),
            services: self.selecting.as_ref().map(|s| all(&s.services)).unwrap_or_default(),
            replica_sets: self.selecting.as_ref().map(|s| all(&s.replica_sets)).unwrap_or_default(),
            stateful_sets: self.selecting.as_ref().map(|s| all(&s.stateful_sets)).unwrap_or_default(),
            replication_controllers: self
                .selecting
                .as_ref()
                .map(|s| all(&s.replication_controllers))
                .unwrap_or_default(),
            scheduler: self.scheduler.clone(),
            // After the pods (fields are evaluated in order): a change among them is here.
            pod_changes: self.pod_changes.lock().unwrap_or_else(|e| e.into_inner()).times(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod as FullPod;
    use tenon_core::cache_trim::LAST_APPLIED;

    #[test]
    fn the_cache_keeps_neither_managed_fields_nor_the_last_applied_copy() {
        // The emulator outlives the runtime: its shutdown waits for the reflector's watch,
        // which ends only when the runtime's tasks do.
        let emu = tenon_kube_emulator::Emulator::start().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.block_on(async {
            let client = Client::try_from(kube::Config::new(emu.url.parse().unwrap())).unwrap();
            let pod: FullPod = serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": "p",
                    "namespace": "default",
                    "annotations": {LAST_APPLIED: "{\"big\": true}", "karpenter.sh/do-not-disrupt": "true"},
                    "managedFields": [{"manager": "kubectl", "operation": "Apply", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}],
                },
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            }))
            .unwrap();
            Api::<FullPod>::namespaced(client.clone(), "default").create(&Default::default(), &pod).await.unwrap();
            let pods = reflect::<Pod>(&client, Arc::new(watch::Sender::new(0)));
            tokio::time::timeout(std::time::Duration::from_secs(10), pods.wait_until_ready())
                .await
                .expect("the pod cache syncs")
                .unwrap();
            let cached = pods.state();
            let meta = &cached[0].metadata;
            assert!(meta.managed_fields.is_none(), "{meta:?}");
            let annotations = meta.annotations.clone().unwrap_or_default();
            assert!(!annotations.contains_key(LAST_APPLIED));
            assert_eq!(annotations.get("karpenter.sh/do-not-disrupt").map(String::as_str), Some("true"), "others stay");
        });
        drop(rt);
        drop(emu);
    }

    #[test]
    fn a_snapshot_that_sees_a_pod_bound_sees_when_its_node_changed() {
        let emu = tenon_kube_emulator::Emulator::start().unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.block_on(async {
            let client = Client::try_from(kube::Config::new(emu.url.parse().unwrap())).unwrap();
            let (pods, changes) = reflect_pods(&client, Arc::new(watch::Sender::new(0)));
            tokio::time::timeout(std::time::Duration::from_secs(10), pods.wait_until_ready())
                .await
                .expect("the pod cache syncs")
                .unwrap();
            let pod: FullPod = serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "default"},
                "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i"}]},
            }))
            .unwrap();
            Api::<FullPod>::namespaced(client.clone(), "default").create(&Default::default(), &pod).await.unwrap();
            // Read as `Stores::objects` reads: the pods, then the times.
            let times = tokio::time::timeout(std::time::Duration::from_secs(10), async {
                loop {
                    let seen = !pods.state().is_empty();
                    let times = changes.lock().unwrap().times();
                    if seen {
                        return times;
                    }
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                }
            })
            .await
            .expect("the pod reaches the cache");
            assert_eq!(times.keys().collect::<Vec<_>>(), ["n1"]);
        });
        drop(rt);
        drop(emu);
    }
}
