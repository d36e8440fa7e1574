//! The scheduler stand-in: binds pending pods to Ready nodes they fit, select and tolerate,
//! where their volumes can be (kube-scheduler's VolumeBinding and VolumeZone checks); marks
//! the others `PodScheduled=False/Unschedulable` (what Karpenter and Tenon act on).

use k8s_openapi::api::core::v1::{
    Node, NodeSelectorRequirement, PersistentVolume, PersistentVolumeClaim, Pod, Taint, Toleration,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use std::collections::BTreeMap;
use tenon_core::resources::Resources;

pub async fn run(client: Client, mut pace: super::Pace) {
    let pods_api: Api<Pod> = Api::all(client.clone());
    let nodes_api: Api<Node> = Api::all(client.clone());
    loop {
        pace.next(false).await;
        let (Ok(pods), Ok(nodes)) =
            (pods_api.list(&ListParams::default()).await, nodes_api.list(&ListParams::default()).await)
        else {
            continue;
        };
        let Some(storage) = Storage::read(&client).await else { continue };
        let mut used: BTreeMap<String, Resources> = BTreeMap::new();
        for p in &pods.items {
            if let Some(n) = p.spec.as_ref().and_then(|s| s.node_name.clone())
                && !terminal(p)
            {
                used.entry(n).or_default().add(&requests(p));
            }
        }
        let mut pending: Vec<&Pod> = pods
            .items
            .iter()
            .filter(|p| {
                p.spec.as_ref().is_some_and(|s| s.node_name.is_none())
                    && p.metadata.deletion_timestamp.is_none()
                    && !terminal(p)
            })
            .collect();
        pending.sort_by_key(|p| (p.metadata.creation_timestamp.clone().map(|t| t.0), p.metadata.name.clone()));
        for pod in pending {
            let req = requests(pod);
            let chosen = nodes.items.iter().find(|n| {
                let name = n.metadata.name.clone().unwrap_or_default();
                let free = allocatable(n);
                schedulable(n)
                    && fits_selectors(pod, n)
                    && tolerates(pod, n)
                    && storage.allows(pod, n)
                    && req.sum_fits_in(used.get(&name).unwrap_or(&Resources::default()), &free)
            });
            let ns = pod.metadata.namespace.clone().unwrap_or_default();
            let name = pod.metadata.name.clone().unwrap_or_default();
            let api: Api<Pod> = Api::namespaced(client.clone(), &ns);
            match chosen {
                Some(node) => {
                    let node_name = node.metadata.name.clone().unwrap_or_default();
                    let binding = json!({
                        "apiVersion": "v1", "kind": "Binding",
                        "metadata": {"name": name, "namespace": ns},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name},
                    });
                    let bound: Result<serde_json::Value, _> =
                        api.create_subresource("binding", &name, &PostParams::default(), &binding).await;
                    if bound.is_ok() {
                        used.entry(node_name).or_default().add(&req);
                    }
                }
                None if !marked_unschedulable(pod) => {
                    let status = json!({"status": {"conditions": [{
                        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": "0/0 nodes are available: no node fits the pod (scheduler stand-in)",
                    }]}});
                    let _ = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await;
                }
                None => {}
            }
        }
    }
}

/// The volume objects pods refer to.
struct Storage {
    claims: Vec<PersistentVolumeClaim>,
    volumes: Vec<PersistentVolume>,
    classes: Vec<StorageClass>,
}

impl Storage {
    async fn read(client: &Client) -> Option<Storage> {
        let lp = ListParams::default();
        Some(Storage {
            claims: Api::<PersistentVolumeClaim>::all(client.clone()).list(&lp).await.ok()?.items,
            volumes: Api::<PersistentVolume>::all(client.clone()).list(&lp).await.ok()?.items,
            classes: Api::<StorageClass>::all(client.clone()).list(&lp).await.ok()?.items,
        })
    }

    /// Whether every claim the pod uses exists and its volume (bound) or its class's allowed
    /// topologies (unbound, WaitForFirstConsumer) admit node `n`.
    fn allows(&self, pod: &Pod, n: &Node) -> bool {
        let empty = BTreeMap::new();
        let labels = n.metadata.labels.as_ref().unwrap_or(&empty);
        let ns = pod.metadata.namespace.as_deref();
        let pod_name = pod.metadata.name.as_deref().unwrap_or("");
        pod.spec.iter().flat_map(|s| s.volumes.iter().flatten()).all(|v| {
            let claim = match (&v.persistent_volume_claim, &v.ephemeral) {
                (Some(src), _) => src.claim_name.clone(),
                (None, Some(_)) => format!("{pod_name}-{}", v.name),
                (None, None) => return true,
            };
            let Some(pvc) = self
                .claims
                .iter()
                .find(|c| c.metadata.namespace.as_deref() == ns && c.metadata.name.as_ref() == Some(&claim))
            else {
                return false;
            };
            let spec = pvc.spec.as_ref();
            if let Some(pv_name) = spec.and_then(|s| s.volume_name.as_deref()).filter(|n| !n.is_empty()) {
                let Some(pv) = self.volumes.iter().find(|pv| pv.metadata.name.as_deref() == Some(pv_name)) else {
                    return false;
                };
                let terms = pv.spec.as_ref().and_then(|s| s.node_affinity.as_ref()?.required.as_ref());
                return terms.is_none_or(|t| {
                    t.node_selector_terms
                        .iter()
                        .any(|t| t.match_expressions.iter().flatten().all(|e| matches_expression(e, labels)))
                });
            }
            let class = spec.and_then(|s| s.storage_class_name.as_deref()).unwrap_or("");
            let Some(sc) = self.classes.iter().find(|c| c.metadata.name.as_deref() == Some(class)) else {
                return false;
            };
            if sc.volume_binding_mode.as_deref() != Some("WaitForFirstConsumer") {
                return false;
            }
            sc.allowed_topologies.as_ref().is_none_or(|terms| {
                terms.is_empty()
                    || terms.iter().any(|t| {
                        t.match_label_expressions
                            .iter()
                            .flatten()
                            .all(|e| labels.get(&e.key).is_some_and(|v| e.values.contains(v)))
                    })
            })
        })
    }
}

fn terminal(p: &Pod) -> bool {
    matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

fn marked_unschedulable(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
        cs.iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
    })
}

pub fn requests(p: &Pod) -> Resources {
    let mut total = Resources::new(0, 0, 1);
    for c in p.spec.iter().flat_map(|s| &s.containers) {
        let list = c.resources.as_ref().and_then(|r| r.requests.as_ref());
        let q = list.into_iter().flatten().map(|(k, v)| (k.as_str(), v.0.as_str()));
        if let Ok(r) = Resources::from_quantities(q) {
            total.add(&r);
        }
    }
    total
}

fn allocatable(n: &Node) -> Resources {
    let list = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
    Resources::from_quantities(list.into_iter().flatten().map(|(k, v)| (k.as_str(), v.0.as_str()))).unwrap_or_default()
}

fn schedulable(n: &Node) -> bool {
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    ready && n.metadata.deletion_timestamp.is_none() && !n.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false)
}

fn tolerates(p: &Pod, n: &Node) -> bool {
    let tolerations: &[Toleration] = p.spec.as_ref().and_then(|s| s.tolerations.as_deref()).unwrap_or(&[]);
    let taints: &[Taint] = n.spec.as_ref().and_then(|s| s.taints.as_deref()).unwrap_or(&[]);
    taints.iter().filter(|t| t.effect != "PreferNoSchedule").all(|t| {
        tolerations.iter().any(|tol| {
            let key = tol.key.as_deref().unwrap_or("");
            let effect_ok = tol.effect.as_deref().is_none_or(|e| e.is_empty() || e == t.effect);
            let key_ok = key.is_empty() || key == t.key;
            let value_ok = match tol.operator.as_deref() {
                Some("Exists") => true,
                _ => tol.value.as_deref().unwrap_or("") == t.value.as_deref().unwrap_or(""),
            };
            effect_ok && key_ok && value_ok
        })
    })
}

fn fits_selectors(p: &Pod, n: &Node) -> bool {
    let empty = BTreeMap::new();
    let labels = n.metadata.labels.as_ref().unwrap_or(&empty);
    let spec = p.spec.as_ref();
    let selector_ok =
        spec.and_then(|s| s.node_selector.as_ref()).is_none_or(|sel| sel.iter().all(|(k, v)| labels.get(k) == Some(v)));
    let terms = spec
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|r| &r.node_selector_terms);
    let affinity_ok = terms.is_none_or(|terms| {
        terms.iter().any(|t| t.match_expressions.iter().flatten().all(|e| matches_expression(e, labels)))
    });
    selector_ok && affinity_ok
}

fn matches_expression(e: &NodeSelectorRequirement, labels: &BTreeMap<String, String>) -> bool {
    let value = labels.get(&e.key);
    let values = e.values.as_deref().unwrap_or(&[]);
    let number = |v: Option<&String>| v.and_then(|v| v.parse::<i64>().ok());
    match e.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => matches!((number(value), number(values.first())), (Some(a), Some(b)) if a > b),
        "Lt" => matches!((number(value), number(values.first())), (Some(a), Some(b)) if a < b),
        _ => false,
    }
}
