//! The kubelet stand-in: Nodes for the cluster's running instances.

use k8s_openapi::api::core::v1::Node;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;
use tenon_aws::AwsProvider;
use tenon_core::cloud::{CloudProvider, InstanceState};
use tenon_core::instancetype::InstanceType;
use tenon_core::resources::format_amount;

/// The real EC2 instance types (what a booting instance's kubelet would report).
pub fn catalog() -> BTreeMap<String, InstanceType> {
    tenon_core::catalog::aws(&Default::default())
        .expect("the bundled EC2 catalog")
        .into_iter()
        .map(|t| (t.name.clone(), t))
        .collect()
}

/// Labels the kubelet sets itself (plus the NodePool label EKS user data passes it).
const KUBELET_LABELS: [&str; 3] = ["kubernetes.io/arch", "kubernetes.io/os", "node.kubernetes.io/instance-type"];

pub fn node_name(instance_id: &str) -> String {
    format!("{instance_id}.ec2.internal")
}

pub async fn run(client: Client, aws: Arc<AwsProvider>, catalog: Arc<BTreeMap<String, InstanceType>>) {
    let nodes: Api<Node> = Api::all(client);
    let mut seen: BTreeMap<String, Instant> = BTreeMap::new();
    let mut joined: BTreeSet<String> = BTreeSet::new();
    let mut not_ready: BTreeMap<String, Instant> = BTreeMap::new();
    loop {
        tokio::time::sleep(super::STANDIN_PERIOD).await;
        let Ok(instances) = aws.list().await else { continue };
        let now = Instant::now();
        for i in instances.iter().filter(|i| i.state == InstanceState::Running) {
            let first = *seen.entry(i.id.clone()).or_insert(now);
            if joined.contains(&i.id) || now.duration_since(first) < super::JOIN_DELAY {
                continue;
            }
            let Some(it) = catalog.get(&i.instance_type) else { continue };
            let name = node_name(&i.id);
            let it_labels = it.labels();
            let mut labels: BTreeMap<String, String> =
                KUBELET_LABELS.iter().filter_map(|k| Some((k.to_string(), it_labels.get(*k)?.clone()))).collect();
            labels.insert("kubernetes.io/hostname".into(), name.clone());
            labels.insert("topology.kubernetes.io/zone".into(), i.zone.clone());
            labels.insert("topology.kubernetes.io/region".into(), "us-east-1".into());
            if let Some(np) = i.tags.get("karpenter.sh/nodepool") {
                labels.insert("karpenter.sh/nodepool".into(), np.clone());
            }
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels},
                "spec": {
                    "providerID": i.provider_id,
                    "taints": [{"key": "karpenter.sh/unregistered", "effect": "NoExecute"}],
                },
            }))
            .expect("a Node");
            match nodes.create(&PostParams::default(), &node).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 409 => {}
                Err(_) => continue,
            }
            let quantities = |r: &tenon_core::resources::Resources| -> BTreeMap<String, String> {
                r.entries().into_iter().map(|(k, v)| (k.clone(), format_amount(&k, v))).collect()
            };
            let status = json!({"status": {
                "capacity": quantities(&it.capacity),
                "allocatable": quantities(it.allocatable()),
                "conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "container runtime network not ready"}],
            }});
            if nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.is_ok() {
                joined.insert(i.id.clone());
                not_ready.insert(name, now);
            }
        }
        let due: Vec<String> = not_ready
            .iter()
            .filter(|(_, at)| now.duration_since(**at) >= super::READY_DELAY)
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            let status = json!({"status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}]}});
            match nodes.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await {
                Ok(_) => {
                    not_ready.remove(&name);
                }
                // Deleted before it became Ready (a terminated NodeClaim): nothing to do.
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    not_ready.remove(&name);
                }
                Err(_) => {}
            }
        }
    }
}
