//! Series read off the cluster each pass, as Karpenter's metrics controllers publish them:
//! per node (allocatable, requests, overhead, lifetime), per NodePool (usage and limits), per
//! pod (state, and startup latency for pods seen Pending). Pure functions over the objects.

use super::{Labels, SeriesLabels};
use k8s_openapi::api::core::v1::Node;
use std::collections::BTreeMap;
use tenon_api::NodePool;
use tenon_api::common::ResourceList;
use tenon_api::wellknown::{self as wk};
use tenon_core::cached_pod::Pod;
use tenon_core::convert::{ClusterObjects, is_daemon, pod_limits, pod_requests};
use tenon_core::resources::Resources;

/// A gauge family's series.
pub type Gauges = Vec<(Labels, f64)>;
/// Series that share their object's labels (a node's, a NodePool's) and add their own.
pub type SharedGauges = Vec<(SeriesLabels, f64)>;

/// The node families of one pass.
#[derive(Debug, Default)]
pub struct NodeSeries {
    pub allocatable: SharedGauges,
    pub pod_requests: SharedGauges,
    pub daemon_requests: SharedGauges,
    pub pod_limits: SharedGauges,
    pub daemon_limits: SharedGauges,
    pub system_overhead: SharedGauges,
    /// Karpenter's cluster utilization: all pod requests over all allocatable, in percent,
    /// by resource type.
    pub utilization: Gauges,
    /// Each node's labels (by node name), shared by its series: the lifetimes refreshed
    /// between rebuilds reuse them.
    pub labels: NodeLabels,
}

/// Each node's series labels, by node name.
pub type NodeLabels = BTreeMap<String, std::sync::Arc<Labels>>;

/// What the pods bound to one node hold: requests and limits, all pods' and DaemonSet pods'.
#[derive(Debug, Default)]
struct Held {
    requests: Resources,
    daemon_requests: Resources,
    limits: Resources,
    daemon_limits: Resources,
}

/// Karpenter's label name for a well-known node label: the part after the `/`, snake_case.
fn label_name(key: &str) -> String {
    key.rsplit('/').next().unwrap_or(key).to_lowercase().replace('-', "_")
}

/// The well-known labels a node's series carry (Karpenter core's and the AWS provider's).
fn well_known() -> impl Iterator<Item = &'static str> {
    wk::WELL_KNOWN_KUBERNETES_LABELS[..8].iter().chain(wk::WELL_KNOWN_AWS_LABELS).copied()
}

/// Leaks each distinct label name once: label names are `&'static str` in [`Labels`] and the
/// well-known set is fixed.
fn static_name(key: &str) -> &'static str {
    static NAMES: std::sync::OnceLock<BTreeMap<String, &'static str>> = std::sync::OnceLock::new();
    let names = NAMES
        .get_or_init(|| well_known().map(|k| (k.to_string(), &*Box::leak(label_name(k).into_boxed_str()))).collect());
    names.get(key).copied().unwrap_or("unknown")
}

fn node_labels(node: &Node) -> Labels {
    let get = |k: &str| node.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned().unwrap_or_default();
    let mut out: Labels = vec![
        ("node_name", node.metadata.name.clone().unwrap_or_default()),
        ("phase", node.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()),
        ("managed", (!get(wk::LABEL_NODEPOOL).is_empty()).to_string()),
    ];
    out.extend(well_known().map(|k| (static_name(k), get(k))));
    out
}

/// Karpenter's `resource_type` value for a resource name.
fn resource_type(name: &str) -> String {
    name.to_lowercase().replace('-', "_")
}

/// A resource list as (resource type, amount): cpu in cores, everything else in units.
fn amounts(list: &ResourceList) -> Vec<(String, f64)> {
    list.iter().filter_map(|(name, q)| Some((resource_type(name), Resources::approximate(name, &q.0).ok()?))).collect()
}

/// A resource vector as (resource type, amount), zero amounts left out except cpu and memory.
fn vector(r: &Resources) -> Vec<(String, f64)> {
    let mut out = vec![("cpu".to_string(), r.cpu as f64 / 1000.0), ("memory".to_string(), r.memory as f64)];
    for (name, v) in [("pods", r.pods), ("ephemeral_storage", r.ephemeral_storage)] {
        if v != 0 {
            out.push((name.to_string(), v as f64));
        }
    }
    out.extend(r.extended.iter().filter(|(_, v)| *v != 0).map(|(n, v)| (resource_type(n), *v as f64)));
    out
}

fn with_type(base: &std::sync::Arc<Labels>, (kind, v): (String, f64)) -> (SeriesLabels, f64) {
    (SeriesLabels::new(base, vec![("resource_type", kind)]), v)
}

/// Whether a pod still holds its node's resources: bound and not finished.
fn holds(p: &Pod) -> bool {
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    !matches!(phase, Some("Succeeded" | "Failed"))
}

/// Karpenter's node series for every Node but its lifetime ([`lifetimes`]).
pub fn nodes(objects: &ClusterObjects) -> NodeSeries {
    let mut held: BTreeMap<&str, Held> = BTreeMap::new();
    for p in &objects.pods {
        let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.as_deref()) else { continue };
        let Some(spec) = p.spec.as_ref().filter(|_| holds(p)) else { continue };
        let (Ok(r), Ok(l)) = (pod_requests(spec, "pod"), pod_limits(spec, "pod")) else { continue };
        let entry = held.entry(node).or_default();
        entry.requests.add(&r);
        entry.limits.add(&l);
        if is_daemon(p) {
            entry.daemon_requests.add(&r);
            entry.daemon_limits.add(&l);
        }
    }
    let mut out = NodeSeries::default();
    let mut all_allocatable: BTreeMap<String, f64> = BTreeMap::new();
    let mut all_requested: BTreeMap<String, f64> = BTreeMap::new();
    for node in &objects.nodes {
        let base = std::sync::Arc::new(node_labels(node));
        let name = node.metadata.name.as_deref().unwrap_or_default();
        out.labels.insert(name.to_string(), base.clone());
        let status = node.status.as_ref();
        let allocatable = status.and_then(|s| s.allocatable.clone()).unwrap_or_default();
        let capacity = status.and_then(|s| s.capacity.clone()).unwrap_or_default();
        let allocatable: ResourceList = allocatable.into_iter().collect();
        let capacity: ResourceList = capacity.into_iter().collect();
        let alloc = amounts(&allocatable);
        for (kind, cap) in amounts(&capacity) {
            let a = alloc.iter().find(|(k, _)| *k == kind).map_or(0.0, |(_, v)| *v);
            out.system_overhead.push(with_type(&base, (kind, cap - a)));
        }
        for (kind, v) in &alloc {
            *all_allocatable.entry(kind.clone()).or_default() += v;
        }
        out.allocatable.extend(alloc.into_iter().map(|a| with_type(&base, a)));
        let h = held.remove(name).unwrap_or_default();
        for (kind, v) in vector(&h.requests) {
            *all_requested.entry(kind).or_default() += v;
        }
        for (series, r) in [
            (&mut out.pod_requests, &h.requests),
            (&mut out.daemon_requests, &h.daemon_requests),
            (&mut out.pod_limits, &h.limits),
            (&mut out.daemon_limits, &h.daemon_limits),
        ] {
            series.extend(vector(r).into_iter().map(|a| with_type(&base, a)));
        }
    }
    for (kind, allocatable) in all_allocatable.into_iter().filter(|(_, v)| *v > 0.0) {
        let used = all_requested.get(&kind).copied().unwrap_or(0.0);
        out.utilization.push((vec![("resource_type", kind)], 100.0 * used / allocatable));
    }
    out
}

/// `karpenter_nodes_current_lifetime_seconds`: the one node series that moves with the
/// clock alone.
/// `labels` are the last rebuild's, from the same view (a node missing from them is
/// labelled afresh).
pub fn lifetimes(objects: &ClusterObjects, labels: &NodeLabels, now: i64) -> SharedGauges {
    let lifetime = |n: &Node| Some((now - n.metadata.creation_timestamp.as_ref()?.0.as_second()).max(0) as f64);
    let base = |n: &Node| match n.metadata.name.as_ref().and_then(|name| labels.get(name)) {
        Some(l) => l.clone(),
        None => std::sync::Arc::new(node_labels(n)),
    };
    objects.nodes.iter().filter_map(|n| Some((SeriesLabels::new(&base(n), vec![]), lifetime(n)?))).collect()
}

/// `karpenter_nodepools_usage` (from `status.resources`) and `_limit` (from `spec.limits`).
pub fn nodepools(pools: &[std::sync::Arc<NodePool>]) -> (SharedGauges, SharedGauges) {
    let mut usage = Vec::new();
    let mut limit = Vec::new();
    for np in pools {
        let base = std::sync::Arc::new(vec![("nodepool", np.metadata.name.clone().unwrap_or_default())]);
        if let Some(status) = &np.status {
            usage.extend(amounts(&status.resources).into_iter().map(|a| with_type(&base, a)));
        }
        limit.extend(amounts(&np.spec.limits).into_iter().map(|a| with_type(&base, a)));
    }
    (usage, limit)
}

fn is_ready(p: &Pod) -> Option<&k8s_openapi::api::core::v1::PodCondition> {
    p.status.as_ref()?.conditions.as_ref()?.iter().find(|c| c.type_ == "Ready" && c.status == "True")
}

/// `karpenter_pods_state`: 1 for each pod, with its node's labels.
pub fn pod_states(objects: &ClusterObjects) -> Gauges {
    let nodes: BTreeMap<&str, &Node> =
        objects.nodes.iter().filter_map(|n| Some((n.metadata.name.as_deref()?, &**n))).collect();
    objects
        .pods
        .iter()
        .map(|p| {
            let node_name = p.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
            let node_label = |k: &str| {
                nodes
                    .get(node_name.as_str())
                    .and_then(|n| n.metadata.labels.as_ref())
                    .and_then(|l| l.get(k))
                    .cloned()
                    .unwrap_or_default()
            };
            let namespace = p.metadata.namespace.clone().unwrap_or_default();
            // Karpenter spells the owner as the self link of the first owner reference.
            let owner = p.metadata.owner_references.as_ref().and_then(|o| o.first()).map_or(String::new(), |o| {
                format!("/apis/{}/namespaces/{namespace}/{}s/{}", o.api_version, o.kind.to_lowercase(), o.name)
            });
            let nodepool = node_label(wk::LABEL_NODEPOOL);
            let labels = vec![
                ("name", p.metadata.name.clone().unwrap_or_default()),
                ("namespace", namespace),
                ("owner", owner),
                ("node", node_name.clone()),
                ("scheduled", (!node_name.is_empty()).to_string()),
                ("phase", p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default()),
                ("ready", is_ready(p).is_some().to_string()),
                ("zone", node_label(wk::LABEL_ZONE)),
                ("arch", node_label(wk::LABEL_ARCH)),
                ("capacity_type", node_label(wk::LABEL_CAPACITY_TYPE)),
                ("instance_type", node_label(wk::LABEL_INSTANCE_TYPE)),
                ("managed", (!nodepool.is_empty()).to_string()),
                ("nodepool", nodepool),
            ];
            (labels, 1.0)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tenon_core::convert::shared;

    fn node(name: &str, pool: &str) -> Node {
        serde_json::from_value(json!({
            "metadata": {"name": name, "creationTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"karpenter.sh/nodepool": pool, "topology.kubernetes.io/zone": "us-west-2a",
                    "kubernetes.io/arch": "amd64", "karpenter.k8s.aws/instance-family": "m5"}},
            "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "29"},
                "allocatable": {"cpu": "1930m", "memory": "7Gi", "pods": "29"}}
        }))
        .unwrap()
    }

    fn pod(name: &str, node: &str, cpu: &str, daemon: bool, phase: &str) -> Pod {
        let owner = if daemon {
            json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "ds", "uid": "u", "controller": true}])
        } else {
            json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "u", "controller": true}])
        };
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "default", "uid": name, "ownerReferences": owner,
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {
                "requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"memory": if daemon { "1Gi" } else { "2Gi" }}}}]},
            "status": {"phase": phase}
        }))
        .unwrap()
    }

    /// `g` with each series' labels in one list.
    fn flat(g: &SharedGauges) -> Gauges {
        g.iter().map(|(l, v)| (l.pairs().cloned().collect(), *v)).collect()
    }

    fn value(g: &Gauges, pairs: &[(&str, &str)]) -> Option<f64> {
        g.iter().find(|(l, _)| pairs.iter().all(|(k, v)| l.iter().any(|(lk, lv)| lk == k && lv == v))).map(|(_, v)| *v)
    }

    #[test]
    fn node_series_sum_bound_pods_and_daemons_apart() {
        let objects = ClusterObjects {
            nodes: shared([node("n1", "default")]),
            pods: shared([
                pod("a", "n1", "500m", false, "Running"),
                pod("d", "n1", "100m", true, "Running"),
                pod("done", "n1", "4", false, "Succeeded"),
            ]),
            ..Default::default()
        };
        let s = nodes(&objects);
        let n1 = [("node_name", "n1"), ("nodepool", "default"), ("zone", "us-west-2a"), ("instance_family", "m5")];
        let with = |t: &'static str| n1.iter().copied().chain([("resource_type", t)]).collect::<Vec<_>>();
        assert_eq!(value(&flat(&s.allocatable), &with("cpu")), Some(1.93));
        assert_eq!(value(&flat(&s.allocatable), &with("memory")), Some(7.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(value(&flat(&s.pod_requests), &with("cpu")), Some(0.6), "the finished pod holds nothing");
        assert_eq!(value(&flat(&s.pod_requests), &with("pods")), Some(2.0));
        assert_eq!(value(&flat(&s.daemon_requests), &with("cpu")), Some(0.1));
        assert_eq!(value(&flat(&s.pod_limits), &with("memory")), Some(3.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(value(&flat(&s.daemon_limits), &with("memory")), Some(1024.0 * 1024.0 * 1024.0));
        assert_eq!(value(&flat(&s.pod_limits), &with("pods")), None, "limits hold no pod slot");
        let cpu = value(&s.utilization, &[("resource_type", "cpu")]).unwrap();
        assert!((cpu - 100.0 * 0.6 / 1.93).abs() < 1e-9, "{cpu}");
        assert_eq!(value(&flat(&s.system_overhead), &with("cpu")), Some(2.0 - 1.93));
        let aged = lifetimes(&objects, &s.labels, 1_767_225_600 + 3600);
        assert_eq!(value(&flat(&aged), &n1), Some(3600.0));
        assert!(std::sync::Arc::ptr_eq(&aged[0].0.shared, &s.labels[&aged[0].0.shared[0].1]), "the rebuild's labels");
        let afresh = lifetimes(&objects, &Default::default(), 1_767_225_600 + 3600);
        assert_eq!(value(&flat(&afresh), &n1), Some(3600.0));
        let labels = &flat(&s.allocatable)[0].0;
        let names: std::collections::BTreeSet<_> = labels.iter().map(|(k, _)| *k).collect();
        assert_eq!(names.len(), labels.len(), "a label name twice: {labels:?}");
        for k in ["capacity_type", "instance_type", "arch", "os", "region", "windows_build", "managed", "phase"] {
            assert!(names.contains(k), "{k} missing from {names:?}");
        }
    }

    #[test]
    fn pods_state_carries_the_nodes_labels() {
        let objects = ClusterObjects {
            nodes: shared([node("n1", "default")]),
            pods: shared([pod("a", "n1", "1", false, "Running"), pod("p", "", "1", false, "Pending")]),
            ..Default::default()
        };
        let s = pod_states(&objects);
        assert_eq!(
            value(&s, &[("name", "a"), ("nodepool", "default"), ("zone", "us-west-2a"), ("scheduled", "true")]),
            Some(1.0)
        );
        assert_eq!(
            value(&s, &[("name", "a"), ("owner", "/apis/apps/v1/namespaces/default/replicasets/rs")]),
            Some(1.0)
        );
        assert_eq!(value(&s, &[("name", "p"), ("scheduled", "false"), ("managed", "false")]), Some(1.0));
    }

    #[test]
    fn nodepool_usage_and_limits_by_resource_type() {
        let np: NodePool = serde_json::from_value(json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "default"},
            "spec": {"limits": {"cpu": "1000", "nvidia.com/gpu": "4"}, "template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}, "requirements": []}}},
            "status": {"resources": {"cpu": "4500m", "nodes": "2"}}
        }))
        .unwrap();
        let (usage, limit) = nodepools(&shared([np]));
        let (usage, limit) = (flat(&usage), flat(&limit));
        assert_eq!(value(&usage, &[("nodepool", "default"), ("resource_type", "cpu")]), Some(4.5));
        assert_eq!(value(&usage, &[("resource_type", "nodes")]), Some(2.0));
        assert_eq!(value(&limit, &[("resource_type", "nvidia.com/gpu")]), Some(4.0));
    }
}
