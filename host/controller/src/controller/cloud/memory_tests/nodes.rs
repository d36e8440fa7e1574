//! The disruption cases' cluster: NodePools, NodeClaims launched in the in-memory cloud by
//! the lifecycle reconciler, their Nodes registered as a kubelet would (Ready or not yet),
//! pods of one ReplicaSet bound to them; and the NodeClaims read back.

use super::World;
use crate::controller::nodeclaim::lifecycle::Lifecycle;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use tenon_api::wellknown::{LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, TAINT_DISRUPTED, condition};
use tenon_api::{NodeClaim, NodePool};

/// A pod of ReplicaSet `web` requesting `millis` of CPU, bound to Node `node` (JSON, for a
/// case to add labels or constraints to before [`World::started`]).
pub(super) fn web_pod(name: &str, node: &str, millis: i64) -> serde_json::Value {
    serde_json::json!({
        "metadata": {"name": name, "namespace": "default", "ownerReferences": [
            {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "00000000-0000-0000-0000-000000000001", "controller": true}]},
        "spec": {"nodeName": node, "containers": [{"name": "app", "image": "app", "resources": {"requests": {"cpu": format!("{millis}m")}}}]},
    })
}

impl World {
    /// Pod `name` of ReplicaSet `web` requesting `millis` of CPU, pending (kube-scheduler
    /// could not place it); once cached as provisionable.
    pub(super) async fn pending_pod(&self, name: &str, millis: i64) {
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "00000000-0000-0000-0000-000000000001", "controller": true}]},
            "spec": {"containers": [{"name": "app", "image": "app", "resources": {"requests": {"cpu": format!("{millis}m")}}}]},
        }))
        .unwrap();
        let pods: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        pods.create(&PostParams::default(), &p).await.unwrap();
        let unschedulable = serde_json::json!({"status": {"phase": "Pending",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}});
        pods.patch_status(name, &PatchParams::default(), &Patch::Merge(&unschedulable)).await.unwrap();
        self.until("the pending pod in the cache", |c| {
            c.stores
                .pods
                .state()
                .iter()
                .any(|p| p.metadata.name.as_deref() == Some(name) && tenon_core::convert::is_provisionable(p))
        })
        .await;
    }

    /// The EC2NodeClass and NodePool `default`, with `disruption` (JSON) as its disruption
    /// (`{}`: the defaults).
    pub(super) async fn pool_with(&self, disruption: serde_json::Value) {
        self.ready_nodeclass().await;
        self.pool_named("default", disruption).await;
    }

    /// NodePool `name` of the EC2NodeClass `default` (already there), with `disruption`.
    pub(super) async fn pool_named(&self, name: &str, disruption: serde_json::Value) {
        let pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"template": {"spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                                           "requirements": []}},
                     "disruption": disruption},
        }))
        .unwrap();
        Api::<NodePool>::all(self.client.clone()).create(&PostParams::default(), &pool).await.unwrap();
        self.until("the NodePool in the cache", |c| {
            c.stores.nodepools.state().iter().any(|p| p.metadata.name.as_deref() == Some(name))
        })
        .await;
    }

    /// NodeClaim `name` (already created) launched, its Node `name` registered by its kubelet
    /// (the capacity of the type it launched as) and, if `ready`, Ready and initialized.
    async fn registered(&self, name: &str, ready: bool) {
        let mut lifecycle = Lifecycle::new(self.ctx.clone());
        let nc = self.lifecycle_until_for(&mut lifecycle, name, condition::LAUNCHED).await;
        self.cached(&nc).await;
        let provider_id = nc.status.and_then(|s| s.provider_id).expect("launched");
        let it = nc.metadata.labels.unwrap_or_default()[LABEL_INSTANCE_TYPE].clone();
        let n: i64 = it.trim_start_matches("fake-it-").parse::<i64>().unwrap() + 1;
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name},
            "spec": {"providerID": provider_id, "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}]},
        }))
        .unwrap();
        let nodes: Api<Node> = Api::all(self.client.clone());
        nodes.create(&PostParams::default(), &node).await.unwrap();
        let capacity =
            serde_json::json!({"cpu": n.to_string(), "memory": format!("{}Gi", 2 * n), "pods": (10 * n).to_string()});
        let conditions = if ready {
            serde_json::json!([{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": ""}])
        } else {
            serde_json::json!([])
        };
        let status =
            serde_json::json!({"status": {"conditions": conditions, "capacity": capacity, "allocatable": capacity}});
        nodes.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await.unwrap();
        self.until(&format!("Node {name} in the cache"), |c| {
            c.stores.nodes.state().iter().any(|n| n.metadata.name.as_deref() == Some(name) && n.status.is_some())
        })
        .await;
        let next = if ready { condition::INITIALIZED } else { condition::REGISTERED };
        let nc = self.lifecycle_until_for(&mut lifecycle, name, next).await;
        self.cached(&nc).await;
    }

    /// The NodeClaim a command created (the candidates here are named `node-*`).
    pub(super) async fn replacement(&self) -> String {
        let claims = self.claims_deleting().await;
        claims.into_iter().map(|(n, _)| n).find(|n| !n.starts_with("node-")).expect("a replacement")
    }

    /// Replacement `name` brought up: the provisioner's pass sees it in the cache (it runs
    /// beside the disruption reconciler in the controller, taking it off the not-yet-seen
    /// list), then it launches, registers and initializes.
    pub(super) async fn replacement_up(&self, name: &str) {
        self.ctx.cluster().forget_seen(&self.ctx.objects());
        self.registered(name, true).await;
    }

    /// Runs `disruption`'s rounds until there are `claims` NodeClaims (its replacement
    /// created), brings the replacement up, then runs rounds until `candidate` is being
    /// deleted; the replacement's name.
    pub(super) async fn replaced_through(
        &self,
        disruption: &mut crate::controller::disruption::Disruption,
        claims: usize,
        candidate: &str,
    ) -> String {
        self.disruption_until(disruption, "a replacement", || async { self.claims_deleting().await.len() == claims })
            .await;
        let replacement = self.replacement().await;
        self.replacement_up(&replacement).await;
        self.disruption_until(disruption, &format!("{candidate} deleted"), || async {
            self.claims_deleting().await.contains(&(candidate.to_string(), true))
        })
        .await;
        replacement
    }

    /// Waits until the cache holds NodeClaim `nc` as written.
    pub(super) async fn cached(&self, nc: &NodeClaim) {
        let version = nc.metadata.resource_version.clone();
        self.until("the NodeClaim's write in the cache", |c| {
            c.stores.nodeclaims.state().iter().any(|n| n.metadata.resource_version == version)
        })
        .await;
    }

    /// NodeClaim and Node `name` of `instance_type` and `capacity_type` in NodePool
    /// `default`, initialized, running `pods` (name, CPU millicores) of one ReplicaSet.
    pub(super) async fn running(&self, name: &str, instance_type: &str, capacity_type: &str, pods: &[(&str, i64)]) {
        let requirements = [(LABEL_INSTANCE_TYPE, instance_type), (LABEL_CAPACITY_TYPE, capacity_type)];
        self.claimed("default", name, &requirements, true).await;
        for (pod, millis) in pods {
            self.started(web_pod(pod, name, *millis)).await;
        }
    }

    /// NodeClaim `name` of NodePool `pool`, requiring one value of each of `requirements`
    /// (label, value), launched, its Node registered and, if `ready`, initialized.
    pub(super) async fn claimed(&self, pool: &str, name: &str, requirements: &[(&str, &str)], ready: bool) {
        let requirements: Vec<serde_json::Value> = requirements
            .iter()
            .map(|(key, value)| serde_json::json!({"key": key, "operator": "In", "values": [value]}))
            .collect();
        let nc: NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": name, "labels": {"karpenter.sh/nodepool": pool}},
            "spec": {"nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                     "requirements": requirements,
                     "resources": {"requests": {"cpu": "100m"}}},
        }))
        .unwrap();
        Api::<NodeClaim>::all(self.client.clone()).create(&PostParams::default(), &nc).await.unwrap();
        self.until(&format!("{name} in the cache"), |c| {
            c.stores.nodeclaims.state().iter().any(|n| n.metadata.name.as_deref() == Some(name))
        })
        .await;
        self.registered(name, ready).await;
    }

    /// Pod `pod` (JSON, as [`web_pod`] makes) created and Running, once cached.
    pub(super) async fn started(&self, pod: serde_json::Value) {
        let p: Pod = serde_json::from_value(pod).unwrap();
        let name = p.metadata.name.clone().unwrap_or_default();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), "default");
        api.create(&PostParams::default(), &p).await.unwrap();
        let running = serde_json::json!({"status": {"phase": "Running"}});
        let written = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&running)).await.unwrap();
        self.until(&format!("pod {name} in the cache"), |c| {
            c.stores.pods.state().iter().any(|p| p.metadata.resource_version == written.metadata.resource_version)
        })
        .await;
    }

    /// The NodeClaims, by name, with whether each is being deleted.
    pub(super) async fn claims_deleting(&self) -> Vec<(String, bool)> {
        let all = Api::<NodeClaim>::all(self.client.clone()).list(&Default::default()).await.unwrap().items;
        all.into_iter()
            .map(|nc| (nc.metadata.name.unwrap_or_default(), nc.metadata.deletion_timestamp.is_some()))
            .collect()
    }

    /// No command acted: no NodeClaim deleted or created (the candidates here are named
    /// `node-*`), no Node tainted `karpenter.sh/disrupted`.
    pub(super) async fn nothing_disrupted(&self) {
        let claims = self.claims_deleting().await;
        assert!(claims.iter().all(|(n, deleting)| n.starts_with("node-") && !deleting), "{claims:?}");
        for n in Api::<Node>::all(self.client.clone()).list(&Default::default()).await.unwrap().items {
            assert!(!super::taint_keys(&n).iter().any(|t| t == TAINT_DISRUPTED), "{:?} tainted", n.metadata.name);
        }
    }
}
