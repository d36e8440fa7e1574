//! The Deployment stand-in: keeps `spec.replicas` pods of every Deployment (creating from the
//! pod template; scaling down in the ReplicaSet controller's order), owned the way a
//! ReplicaSet's pods are.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

/// The label the stand-in finds a Deployment's pods by.
pub const OWNER_LABEL: &str = "e2e.tenon.dev/deployment";

pub async fn run(client: Client, mut pace: super::Pace) {
    let deployments: Api<Deployment> = Api::all(client.clone());
    let mut counter: u64 = 0;
    loop {
        pace.next(false).await;
        let Ok(list) = deployments.list(&ListParams::default()).await else { continue };
        for d in list.items {
            let (Some(ns), Some(name)) = (d.metadata.namespace.clone(), d.metadata.name.clone()) else { continue };
            let Some(spec) = d.spec.as_ref() else { continue };
            let want = spec.replicas.unwrap_or(1).max(0) as usize;
            let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
            let selector = format!("{OWNER_LABEL}={name}");
            let Ok(current) = pods.list(&ListParams::default().labels(&selector)).await else { continue };
            let mut live: Vec<Pod> =
                current.items.into_iter().filter(|p| p.metadata.deletion_timestamp.is_none()).collect();
            live.sort_by_key(|p| (p.metadata.creation_timestamp.clone().map(|t| t.0), p.metadata.name.clone()));
            if live.len() < want {
                let template = serde_json::to_value(&spec.template).unwrap_or_default();
                for _ in live.len()..want {
                    counter += 1;
                    let mut pod = template.clone();
                    pod["apiVersion"] = json!("v1");
                    pod["kind"] = json!("Pod");
                    let meta = &mut pod["metadata"];
                    meta["name"] = json!(format!("{name}-{counter:05}"));
                    meta["namespace"] = json!(ns);
                    meta["labels"][OWNER_LABEL] = json!(name);
                    meta["ownerReferences"] = json!([{
                        "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{name}-rs"),
                        "uid": d.metadata.uid.clone().unwrap_or_default(), "controller": true,
                    }]);
                    let Ok(pod) = serde_json::from_value::<Pod>(pod) else { continue };
                    let _ = pods.create(&PostParams::default(), &pod).await;
                }
            } else {
                for p in scale_down_order(&live).into_iter().take(live.len() - want) {
                    let _ = pods.delete(p.metadata.name.as_deref().unwrap_or_default(), &DeleteParams::default()).await;
                }
            }
        }
    }
}

/// Which pods a scale-down removes first, as the ReplicaSet controller ranks them: unbound
/// before bound, then those sharing their node with more replicas, then the newest.
pub fn scale_down_order(pods: &[Pod]) -> Vec<&Pod> {
    let node = |p: &Pod| p.spec.as_ref().and_then(|s| s.node_name.clone());
    let mut per_node: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    for n in pods.iter().filter_map(node) {
        *per_node.entry(n).or_default() += 1;
    }
    let mut order: Vec<&Pod> = pods.iter().collect();
    order.sort_by_key(|p| {
        let n = node(p);
        let colocated = n.as_ref().and_then(|n| per_node.get(n)).copied().unwrap_or(0);
        (
            n.is_some(),
            std::cmp::Reverse(colocated),
            std::cmp::Reverse(p.metadata.creation_timestamp.clone().map(|t| t.0)),
            std::cmp::Reverse(p.metadata.name.clone()),
        )
    });
    order
}
