//! The kubelet stand-in: Nodes for the cluster's running instances, registered as their
//! user data says (its labels and taints, as `--node-labels`/`--register-with-taints`, an
//! AL2023 NodeConfig's `kubelet.config.registerWithTaints` or Bottlerocket's
//! `settings.kubernetes.node-labels`/`node-taints`), nothing more: a taint the user data
//! leaves out is not there. A node labelled [`NEVER_READY`] stays NotReady. Pods bound to a
//! Ready node start: `Running` and `Ready`, which is what a PodDisruptionBudget counts.

use k8s_openapi::api::core::v1::{Node, Pod};
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

/// Labels the kubelet sets itself.
const KUBELET_LABELS: [&str; 3] = ["kubernetes.io/arch", "kubernetes.io/os", "node.kubernetes.io/instance-type"];

/// A node label (set through a NodePool template, so it reaches the user data) whose node
/// this kubelet registers and never reports Ready: a node stuck in initialization.
pub const NEVER_READY: (&str, &str) = ("e2e.tenon.dev/kubelet", "never-ready");

pub fn node_name(instance_id: &str) -> String {
    format!("{instance_id}.ec2.internal")
}

pub async fn run(
    client: Client,
    aws: Arc<AwsProvider>,
    catalog: Arc<BTreeMap<String, InstanceType>>,
    mut pace: super::Pace,
) {
    let nodes: Api<Node> = Api::all(client.clone());
    let pods: Api<Pod> = Api::all(client.clone());
    let mut ready: BTreeSet<String> = BTreeSet::new();
    let mut seen: BTreeMap<String, Instant> = BTreeMap::new();
    let mut joined: BTreeSet<String> = BTreeSet::new();
    let mut not_ready: BTreeMap<String, Instant> = BTreeMap::new();
    loop {
        // EC2 changes through the controller, which writes to the cluster after each launch;
        // an instance seen but not joined, or a node not Ready yet, waits on time.
        pace.next(seen.len() > joined.len() || !not_ready.is_empty()).await;
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
            let Some(joining) = user_data(&aws, &i.id).await.map(|u| joins_with(&u)) else { continue };
            let never_ready = joining.labels.get(NEVER_READY.0).is_some_and(|v| v == NEVER_READY.1);
            labels.extend(joining.labels);
            let node: Node = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": labels},
                "spec": {"providerID": i.provider_id, "taints": joining.taints},
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
                if !never_ready {
                    not_ready.insert(name, now);
                }
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
                    ready.insert(name);
                }
                // Deleted before it became Ready (a terminated NodeClaim): nothing to do.
                Err(kube::Error::Api(e)) if e.code == 404 => {
                    not_ready.remove(&name);
                }
                Err(_) => {}
            }
        }
        start_pods(&client, &pods, &ready).await;
    }
}

/// Pods bound to a Ready node of this kubelet and not started yet are started.
async fn start_pods(client: &Client, pods: &Api<Pod>, ready: &BTreeSet<String>) {
    if ready.is_empty() {
        return;
    }
    let Ok(list) = pods.list(&Default::default()).await else { return };
    for p in list.items {
        let on = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
        let phase = p.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("Pending");
        if !ready.contains(&on) || phase != "Pending" || p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let (Some(ns), Some(name)) = (p.metadata.namespace.as_deref(), p.metadata.name.as_deref()) else { continue };
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let condition = |t: &str| json!({"type": t, "status": "True", "lastTransitionTime": now});
        let status = json!({"status": {
            "phase": "Running",
            "startTime": now,
            "conditions": [condition("PodScheduled"), condition("Initialized"), condition("ContainersReady"), condition("Ready")],
        }});
        let api: Api<Pod> = Api::namespaced(client.clone(), ns);
        let _ = api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status)).await;
    }
}

/// The instance's user data (decoded), as its kubelet reads it at boot.
pub async fn user_data(aws: &AwsProvider, id: &str) -> Option<String> {
    use aws_sdk_ec2::types::InstanceAttributeName;
    use base64::Engine;
    let out = aws
        .clients
        .ec2
        .describe_instance_attribute()
        .instance_id(id)
        .attribute(InstanceAttributeName::UserData)
        .send()
        .await
        .ok()?;
    let encoded = out.user_data.and_then(|v| v.value).unwrap_or_default();
    let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// What a node registers with, from its user data.
#[derive(Debug, Default, PartialEq)]
pub struct Joining {
    pub labels: BTreeMap<String, String>,
    /// As the Node's `spec.taints`.
    pub taints: Vec<serde_json::Value>,
}

/// The labels and taints user data `text` registers its node with.
pub fn joins_with(text: &str) -> Joining {
    let mut j = Joining::default();
    let mut taint = |key: &str, value: &str, effect: &str| {
        let mut t = json!({"key": key, "effect": effect});
        if !value.is_empty() {
            t["value"] = json!(value);
        }
        j.taints.push(t);
    };
    let flag = |name: &str| -> Vec<String> {
        text.match_indices(name)
            .map(|(at, _)| {
                let rest = &text[at + name.len()..];
                rest[..rest.find(['"', '\'', ' ', '\n']).unwrap_or(rest.len())].to_string()
            })
            .collect()
    };
    for list in flag("--register-with-taints=") {
        for t in list.split(',').filter(|t| !t.is_empty()) {
            let (kv, effect) = t.rsplit_once(':').unwrap_or((t, "NoSchedule"));
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            taint(k, v, effect);
        }
    }
    for doc in node_configs(text) {
        let taints = &doc["spec"]["kubelet"]["config"]["registerWithTaints"];
        for t in taints.as_sequence().into_iter().flatten() {
            let field = |f: &str| t[f].as_str().unwrap_or_default().to_string();
            taint(&field("key"), &field("value"), &field("effect"));
        }
    }
    let mut labels = BTreeMap::new();
    for list in flag("--node-labels=") {
        for l in list.split(',') {
            if let Some((k, v)) = l.split_once('=') {
                labels.insert(k.to_string(), v.to_string());
            }
        }
    }
    // Bottlerocket: TOML settings.
    if let Ok(doc) = text.parse::<toml::Table>() {
        let k8s = doc.get("settings").and_then(|s| s.get("kubernetes"));
        for (k, v) in k8s.and_then(|k| k.get("node-labels")).and_then(|l| l.as_table()).into_iter().flatten() {
            labels.insert(k.clone(), v.as_str().unwrap_or_default().to_string());
        }
        for (k, vs) in k8s.and_then(|k| k.get("node-taints")).and_then(|t| t.as_table()).into_iter().flatten() {
            for v in vs.as_array().into_iter().flatten().filter_map(|v| v.as_str()) {
                let (value, effect) = v.rsplit_once(':').unwrap_or(("", v));
                taint(k, value, effect);
            }
        }
    }
    j.labels = labels;
    j
}

/// The AL2023 NodeConfig documents in user data: its MIME parts (split at `--boundary`
/// lines, each part's headers ending at a blank line), or the whole text.
fn node_configs(text: &str) -> Vec<serde_yaml::Value> {
    let text = text.replace("\r\n", "\n");
    let mut parts = vec![String::new()];
    for line in text.lines() {
        if line.starts_with("--") && !line.starts_with("---") {
            parts.push(String::new());
        } else if let Some(part) = parts.last_mut() {
            part.push_str(line);
            part.push('\n');
        }
    }
    parts
        .iter()
        .map(|p| p.split_once("\n\n").filter(|(h, _)| h.contains("Content-Type")).map_or(p.as_str(), |(_, b)| b))
        .filter_map(|body| serde_yaml::from_str::<serde_yaml::Value>(body).ok())
        .filter(|d| d["kind"].as_str() == Some("NodeConfig"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn al2023_flags_and_bottlerocket_settings_both_register_labels_and_taints() {
        let al2023 = "      - \"--node-labels=karpenter.sh/nodepool=a,team=x\"\n      - \"--register-with-taints=karpenter.sh/unregistered:NoExecute,dedicated=batch:NoSchedule\"\n";
        let j = joins_with(al2023);
        assert_eq!(j.labels.get("karpenter.sh/nodepool").map(String::as_str), Some("a"));
        assert_eq!(
            j.taints,
            vec![
                json!({"key": "karpenter.sh/unregistered", "effect": "NoExecute"}),
                json!({"key": "dedicated", "value": "batch", "effect": "NoSchedule"})
            ]
        );
        let bottlerocket = "[settings.kubernetes.node-labels]\n\"karpenter.sh/nodepool\" = \"b\"\n[settings.kubernetes.node-taints]\n\"karpenter.sh/unregistered\" = [\":NoExecute\"]\n";
        let j = joins_with(bottlerocket);
        assert_eq!(j.labels.get("karpenter.sh/nodepool").map(String::as_str), Some("b"));
        assert_eq!(j.taints, vec![json!({"key": "karpenter.sh/unregistered", "effect": "NoExecute"})]);
        assert_eq!(joins_with("#!/bin/bash\necho hi"), Joining::default(), "user data that says nothing");
    }

    #[test]
    fn al2023_node_config_registers_its_taints() {
        use tenon_aws::userdata::{ClusterInfo, NodeBootstrap, render};
        use tenon_core::taints::{Effect, Taint};
        let cluster = ClusterInfo {
            name: "c".into(),
            endpoint: "https://k".into(),
            ca_bundle: "Q0E=".into(),
            service_cidr: "10.100.0.0/16".into(),
        };
        let node = NodeBootstrap {
            labels: BTreeMap::from([("team".to_string(), "x".to_string())]),
            taints: vec![
                Taint { key: "karpenter.sh/unregistered".into(), value: String::new(), effect: Effect::NoExecute },
                Taint { key: "dedicated".into(), value: "batch".into(), effect: Effect::NoSchedule },
            ],
            ..Default::default()
        };
        let user = "#!/bin/bash\necho user part";
        let j = joins_with(&render("AL2023", &cluster, &node, Some(user)).expect("renders"));
        assert_eq!(j.labels.get("team").map(String::as_str), Some("x"));
        assert_eq!(
            j.taints,
            vec![
                json!({"key": "karpenter.sh/unregistered", "effect": "NoExecute"}),
                json!({"key": "dedicated", "value": "batch", "effect": "NoSchedule"})
            ]
        );
    }
}
