//! Termination of a NodeClaim being deleted, in Karpenter's order: taint its Node
//! `karpenter.sh/disrupted:NoSchedule`, drain it through the Eviction API in the core's tier
//! order (PDB refusals and `karpenter.sh/do-not-disrupt` wait; past the
//! terminationGracePeriod pods are deleted), terminate the instance, then release the Node
//! and the NodeClaim by removing the `karpenter.sh/termination` finalizer.

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{DeleteParams, EvictParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tenon_api::NodeClaim;
use tenon_api::wellknown as wk;
use tenon_core::ClusterSnapshot;
use tenon_core::cloud::CloudProvider;
use tenon_core::disruption::drain::{DrainAction, drain_order};

/// The instance id in a providerID (`aws:///us-east-1a/i-0abc` → `i-0abc`).
pub fn instance_id(provider_id: &str) -> Option<&str> {
    provider_id.rsplit('/').next().filter(|s| s.starts_with("i-"))
}

/// The finalizers without ours, as a merge patch.
pub fn release_patch(finalizers: Option<&Vec<String>>) -> Value {
    let rest: Vec<&String> = finalizers.into_iter().flatten().filter(|f| *f != wk::FINALIZER_TERMINATION).collect();
    json!({"metadata": {"finalizers": rest}})
}

/// The node's taints as JSON (a merge patch replaces the whole list), without those keyed `key`.
pub fn taints_without(node: &Node, key: &str) -> Vec<Value> {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.key != key)
        .map(|t| serde_json::to_value(t).unwrap_or(Value::Null))
        .collect()
}

/// The node's taints with `karpenter.sh/disrupted:NoSchedule` added, or `None` when present.
pub fn disrupted_taints(node: &Node) -> Option<Value> {
    let tainted = node.spec.as_ref().and_then(|s| s.taints.as_ref()).into_iter().flatten();
    if tainted.into_iter().any(|t| t.key == wk::TAINT_DISRUPTED) {
        return None;
    }
    let mut list = taints_without(node, wk::TAINT_DISRUPTED);
    list.push(json!({"key": wk::TAINT_DISRUPTED, "effect": "NoSchedule"}));
    Some(json!({"spec": {"taints": list}}))
}

/// An eviction of exactly this pod: a pod recreated under the same name is not evicted.
pub fn evict_params(pod: &tenon_core::model::Pod) -> EvictParams {
    EvictParams { delete_options: Some(delete_params_uid(pod, None)), ..EvictParams::default() }
}

/// A deletion of exactly this pod with `grace` seconds (Karpenter's forced drain).
pub fn delete_params(pod: &tenon_core::model::Pod, grace: i64) -> DeleteParams {
    delete_params_uid(pod, Some(grace))
}

fn delete_params_uid(pod: &tenon_core::model::Pod, grace: Option<i64>) -> DeleteParams {
    DeleteParams {
        grace_period_seconds: grace.map(|g| g.max(1) as u32),
        preconditions: Some(kube::api::Preconditions { uid: Some(pod.uid.clone()), resource_version: None }),
        ..DeleteParams::default()
    }
}

/// Where a NodeClaim's termination stands after a step.
#[derive(Debug, PartialEq)]
pub enum Progress {
    /// This step released it: instance terminated, Node deleted, finalizers removed.
    Released,
    /// Its node is draining; pods wait, and Karpenter's `FailedDraining` says why.
    Draining { waiting: Option<String> },
}

/// One step of terminating `nc`.
pub async fn step(
    client: &Client,
    provider: &dyn TerminateInstances,
    nc: &NodeClaim,
    node: Option<&Node>,
    snap: &ClusterSnapshot,
) -> Result<Progress, String> {
    let name = nc.metadata.name.clone().unwrap_or_default();
    if !nc.metadata.finalizers.as_ref().is_some_and(|f| f.iter().any(|x| x == wk::FINALIZER_TERMINATION)) {
        return Ok(Progress::Draining { waiting: None });
    }
    if let Some(node) = node {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let nodes: Api<Node> = Api::all(client.clone());
        if let Some(p) = disrupted_taints(node) {
            nodes
                .patch(&node_name, &PatchParams::default(), &Patch::Merge(&p))
                .await
                .map_err(|e| format!("tainting {node_name}: {e}"))?;
        }
        let deadline = nc.metadata.deletion_timestamp.as_ref().and_then(|t| {
            let tgp = nc
                .spec
                .termination_grace_period
                .as_deref()
                .and_then(|g| tenon_api::duration::parse_duration(g).ok())?;
            Some(t.0.as_second() + tgp.as_secs() as i64)
        });
        let plan = drain_order(snap, &node_name, deadline);
        if !plan.finished() {
            for (p, action) in &plan.steps {
                let pod = &snap.pods[*p];
                let pods: Api<Pod> = Api::namespaced(client.clone(), &pod.namespace);
                match action {
                    DrainAction::Evict => match pods.evict(&pod.name, &evict_params(pod)).await {
                        Ok(_) => {}
                        // The PDB allows nothing now: the next pass tries again.
                        Err(kube::Error::Api(s)) if s.code == 429 || s.code == 404 => {}
                        Err(e) => return Err(format!("evicting {}/{}: {e}", pod.namespace, pod.name)),
                    },
                    DrainAction::Delete { grace } => match pods.delete(&pod.name, &delete_params(pod, *grace)).await {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => return Err(format!("deleting {}/{}: {e}", pod.namespace, pod.name)),
                    },
                    DrainAction::Wait(_) => {}
                }
            }
            return Ok(Progress::Draining { waiting: plan.waiting_message() });
        }
    }
    if let Some(id) = nc.status.as_ref().and_then(|s| s.provider_id.as_deref()).and_then(instance_id) {
        provider.terminate(id).await?;
    }
    if let Some(node) = node {
        let node_name = node.metadata.name.clone().unwrap_or_default();
        let nodes: Api<Node> = Api::all(client.clone());
        match nodes.delete(&node_name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(format!("deleting node {node_name}: {e}")),
        }
        if node.metadata.finalizers.as_ref().is_some_and(|f| f.iter().any(|x| x == wk::FINALIZER_TERMINATION)) {
            let p = release_patch(node.metadata.finalizers.as_ref());
            match nodes.patch(&node_name, &PatchParams::default(), &Patch::Merge(&p)).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.code == 404 => {}
                Err(e) => return Err(format!("releasing node {node_name}: {e}")),
            }
        }
    }
    let api: Api<NodeClaim> = Api::all(client.clone());
    let p = release_patch(nc.metadata.finalizers.as_ref());
    match api.patch(&name, &PatchParams::default(), &Patch::Merge(&p)).await {
        Ok(_) => Ok(Progress::Released),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(Progress::Released),
        Err(e) => Err(format!("releasing {name}: {e}")),
    }
}

/// The cloud side of termination (a trait so the step can be driven by any provider).
pub trait TerminateInstances: Sync {
    fn terminate<'a>(
        &'a self,
        id: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + 'a>>;
}

impl<P: CloudProvider> TerminateInstances for P {
    fn terminate<'a>(
        &'a self,
        id: &'a str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + 'a>> {
        Box::pin(async move { self.delete(&[id.to_string()]).await.map_err(|e| format!("terminating {id}: {e}")) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_ids_and_finalizers() {
        assert_eq!(instance_id("aws:///us-east-1a/i-0abc"), Some("i-0abc"));
        assert_eq!(instance_id("kind://docker/node"), None);
        let fins = vec!["a".to_string(), wk::FINALIZER_TERMINATION.to_string()];
        assert_eq!(release_patch(Some(&fins)), json!({"metadata": {"finalizers": ["a"]}}));
        let node: Node = serde_json::from_value(
            json!({"metadata": {"name": "n"}, "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}}),
        )
        .unwrap();
        let p = disrupted_taints(&node).unwrap();
        assert_eq!(p["spec"]["taints"][1]["key"], wk::TAINT_DISRUPTED);
        let mut tainted = node.clone();
        tainted
            .spec
            .as_mut()
            .unwrap()
            .taints
            .as_mut()
            .unwrap()
            .push(serde_json::from_value(json!({"key": wk::TAINT_DISRUPTED, "effect": "NoSchedule"})).unwrap());
        assert!(disrupted_taints(&tainted).is_none());
    }
}
