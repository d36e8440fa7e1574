//! Cluster-wide default topology spread (kube-scheduler's PodTopologySpread
//! `defaultConstraints`, given to Tenon as Karpenter's `SCHEDULER_CONFIG`): a pod that
//! declares no spread of its own is scheduled as if it carried the defaults, each with the
//! selector kube-scheduler deduces for that pod. The deduction must be kube-scheduler's, or
//! the simulation counts other pods than the real scheduler does:
//! - every Service in the pod's namespace whose (non-nil) selector matches the pod contributes
//!   its selector as equality labels, a later Service's value winning a shared key;
//! - the pod's controller (the owner reference with `controller: true`) then contributes: a
//!   ReplicationController's selector overwrites those labels; a ReplicaSet's or
//!   StatefulSet's selector is ANDed on as requirements (so a conflict selects nothing);
//!   any other kind, or an owner that no longer exists, contributes nothing;
//! - nothing deduced, no default: an empty selector would count every pod in the namespace.

use crate::cached_pod;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// What a decision reads to deduce selectors: the configured defaults and the objects that
/// select pods. Build one per snapshot; it remembers what it deduced.
pub struct DefaultSpread<'a> {
    defaults: &'a [core::TopologySpreadConstraint],
    services: HashMap<&'a str, Vec<&'a BTreeMap<String, String>>>,
    owners: HashMap<(&'a str, &'a str, &'a str), Contribution>,
    /// Deduced selectors by (namespace, controller UID, pod labels): the only inputs.
    deduced: HashMap<(String, String, String), Option<meta::LabelSelector>>,
}

/// The objects a default selector is deduced from.
#[derive(Clone, Copy)]
pub struct Selecting<'a> {
    pub services: &'a [Arc<core::Service>],
    pub replica_sets: &'a [Arc<apps::ReplicaSet>],
    pub stateful_sets: &'a [Arc<apps::StatefulSet>],
    pub replication_controllers: &'a [Arc<core::ReplicationController>],
}

/// What a controller adds to the services' labels.
#[derive(Clone)]
enum Contribution {
    /// A ReplicationController's selector: overwrites.
    Labels(BTreeMap<String, String>),
    /// A ReplicaSet's or StatefulSet's selector: ANDed on.
    Requirements(Vec<meta::LabelSelectorRequirement>),
}

fn key(m: &meta::ObjectMeta) -> Option<(&str, &str)> {
    Some((m.namespace.as_deref().unwrap_or("default"), m.name.as_deref()?))
}

impl<'a> DefaultSpread<'a> {
    pub fn new(defaults: &'a [core::TopologySpreadConstraint], from: Selecting<'a>) -> DefaultSpread<'a> {
        let mut services: HashMap<&str, Vec<&BTreeMap<String, String>>> = HashMap::new();
        let mut owners = HashMap::new();
        if !defaults.is_empty() {
            for s in from.services {
                if let (Some((ns, _)), Some(sel)) =
                    (key(&s.metadata), s.spec.as_ref().and_then(|s| s.selector.as_ref()))
                {
                    services.entry(ns).or_default().push(sel);
                }
            }
            let mut own = |kind: &'static str, m: &'a meta::ObjectMeta, c: Contribution| {
                if let Some((ns, name)) = key(m) {
                    owners.insert((kind, ns, name), c);
                }
            };
            for rc in from.replication_controllers {
                let sel = rc.spec.as_ref().and_then(|s| s.selector.clone()).unwrap_or_default();
                own("ReplicationController", &rc.metadata, Contribution::Labels(sel));
            }
            for rs in from.replica_sets {
                own(
                    "ReplicaSet",
                    &rs.metadata,
                    Contribution::Requirements(requirements(rs.spec.as_ref().map(|s| &s.selector))),
                );
            }
            for ss in from.stateful_sets {
                own(
                    "StatefulSet",
                    &ss.metadata,
                    Contribution::Requirements(requirements(ss.spec.as_ref().map(|s| &s.selector))),
                );
            }
        }
        DefaultSpread { defaults, services, owners, deduced: HashMap::new() }
    }

    /// The constraints `pod` is scheduled with beyond its own: the defaults with its deduced
    /// selector, or none (defaults unset, the pod has its own spread, or nothing selects it).
    pub fn for_pod(&mut self, pod: &cached_pod::Pod) -> Vec<core::TopologySpreadConstraint> {
        let own = pod.spec.as_ref().and_then(|s| s.topology_spread_constraints.as_ref()).is_some_and(|c| !c.is_empty());
        if self.defaults.is_empty() || own {
            return Vec::new();
        }
        let Some(selector) = self.selector(pod) else { return Vec::new() };
        self.defaults
            .iter()
            .map(|c| core::TopologySpreadConstraint { label_selector: Some(selector.clone()), ..c.clone() })
            .collect()
    }

    fn selector(&mut self, pod: &cached_pod::Pod) -> Option<meta::LabelSelector> {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let controller = controller_of(pod);
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        let cache_key = (
            ns.to_string(),
            controller.map(|c| c.uid.clone()).unwrap_or_default(),
            labels.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","),
        );
        if let Some(s) = self.deduced.get(&cache_key) {
            return s.clone();
        }
        let mut match_labels = BTreeMap::new();
        for sel in self.services.get(ns).into_iter().flatten() {
            if sel.iter().all(|(k, v)| labels.get(k) == Some(v)) {
                match_labels.extend(sel.iter().map(|(k, v)| (k.clone(), v.clone())));
            }
        }
        let mut match_expressions = Vec::new();
        let kind = controller.and_then(|c| supported_kind(&c.api_version, &c.kind));
        match kind.and_then(|k| self.owners.get(&(k, ns, controller?.name.as_str()))) {
            Some(Contribution::Labels(l)) => match_labels.extend(l.clone()),
            Some(Contribution::Requirements(r)) => match_expressions.extend(r.iter().cloned()),
            None => {}
        }
        let selector = (!match_labels.is_empty() || !match_expressions.is_empty()).then(|| meta::LabelSelector {
            match_labels: (!match_labels.is_empty()).then_some(match_labels),
            match_expressions: (!match_expressions.is_empty()).then_some(match_expressions),
        });
        self.deduced.insert(cache_key, selector.clone());
        selector
    }
}

/// The owner reference marked `controller: true`, if any (others are not the pod's controller).
fn controller_of(pod: &cached_pod::Pod) -> Option<&meta::OwnerReference> {
    pod.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true))
}

/// The kinds kube-scheduler deduces a selector from, by their exact group and version.
fn supported_kind(api_version: &str, kind: &str) -> Option<&'static str> {
    match (api_version, kind) {
        ("v1", "ReplicationController") => Some("ReplicationController"),
        ("apps/v1", "ReplicaSet") => Some("ReplicaSet"),
        ("apps/v1", "StatefulSet") => Some("StatefulSet"),
        _ => None,
    }
}

/// A selector as requirements: each label an `In` of its one value, then its expressions.
fn requirements(sel: Option<&meta::LabelSelector>) -> Vec<meta::LabelSelectorRequirement> {
    let Some(sel) = sel else { return Vec::new() };
    let labels = sel.match_labels.iter().flatten().map(|(k, v)| meta::LabelSelectorRequirement {
        key: k.clone(),
        operator: "In".into(),
        values: Some(vec![v.clone()]),
    });
    labels.chain(sel.match_expressions.iter().flatten().cloned()).collect()
}
