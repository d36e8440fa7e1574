//! What a scenario does to the world: manifests applied as `kubectl apply` would, timeline
//! steps (scale, apply, delete a NodePool, exhaust capacity, interrupt spot), and the
//! Deployment controller keeping each Deployment's replicas.

use super::objects::{Deployment, Pdb, PdbBound, SimError, SimPod};
use super::{World, duration_label, err};
use crate::scenario::Step;
use k8s_openapi::api::apps::v1::Deployment as K8sDeployment;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget as K8sPdb;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeSet;
use tenon_api::wellknown as wk;
use tenon_api::{EC2NodeClass, NodePool};
use tenon_core::convert;
use tenon_core::orchestration::interruption::{self, InterruptionKind, Owner, Step as InterruptionStep};

impl World<'_> {
    /// Applies Kubernetes documents as `kubectl apply` would (create or replace).
    pub fn apply(&mut self, docs: &[serde_json::Value]) -> Result<(), SimError> {
        for doc in docs {
            let kind = doc["kind"].as_str().unwrap_or_default();
            let name = doc["metadata"]["name"].as_str().unwrap_or_default().to_string();
            match kind {
                "EC2NodeClass" => {
                    let _: EC2NodeClass =
                        serde_json::from_value(doc.clone()).map_err(|e| err(format!("EC2NodeClass {name}: {e}")))?;
                    self.nodeclasses.insert(name);
                }
                "NodePool" => {
                    let np: NodePool =
                        serde_json::from_value(doc.clone()).map_err(|e| err(format!("NodePool {name}: {e}")))?;
                    let problems: Vec<String> = tenon_api::validation::validate_nodepool(&np)
                        .into_iter()
                        .filter(|p| p.severity == tenon_api::validation::Severity::Error)
                        .map(|p| p.to_string())
                        .collect();
                    if !problems.is_empty() {
                        return Err(err(format!("NodePool {name} is invalid: {}", problems.join("; "))));
                    }
                    let tpl = convert::nodepool(&np, self.cloud.catalog()).map_err(err)?;
                    let class =
                        np.spec.template.spec.node_class_ref.as_ref().map(|r| r.name.clone()).unwrap_or_default();
                    self.nodepools.retain(|p| p.name != name);
                    self.nodepools.push(tpl);
                    if self.nodeclasses.contains(&class) {
                        self.not_ready.remove(&name);
                    } else {
                        self.not_ready.insert(name.clone());
                        self.event(
                            "NodeClassNotReady",
                            format!("NodePool/{name}"),
                            format!("EC2NodeClass {class:?} does not exist; nothing will launch"),
                        );
                    }
                }
                "Deployment" => {
                    let d: K8sDeployment =
                        serde_json::from_value(doc.clone()).map_err(|e| err(format!("Deployment {name}: {e}")))?;
                    let ns = d.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                    let spec = d.spec.clone().unwrap_or_default();
                    let mut meta = spec.template.metadata.clone().unwrap_or_default();
                    meta.namespace = Some(ns.clone());
                    meta.name = Some(name.clone());
                    let mut template = convert::pod(
                        &core::Pod { metadata: meta, spec: spec.template.spec.clone(), status: None }.into(),
                    )
                    .map_err(err)?;
                    template.owner_kind = Some("ReplicaSet".into());
                    template.owner_name = Some(name.clone());
                    let replicas = spec.replicas.unwrap_or(1).max(0) as u32;
                    match self.deployments.iter_mut().find(|x| x.namespace == ns && x.name == name) {
                        Some(x) => {
                            x.template = template;
                            x.replicas = replicas;
                        }
                        None => self.deployments.push(Deployment { namespace: ns, name, template, replicas, next: 0 }),
                    }
                }
                "Pod" => {
                    let p: core::Pod =
                        serde_json::from_value(doc.clone()).map_err(|e| err(format!("Pod {name}: {e}")))?;
                    let pod = convert::pod(&p.into()).map_err(err)?;
                    self.pods.retain(|x| x.pod.key() != pod.key());
                    self.pods.push(SimPod { pod, deployment: None, created: self.now });
                }
                "DaemonSet" => {
                    let d = serde_json::from_value(doc.clone()).map_err(|e| err(format!("DaemonSet {name}: {e}")))?;
                    let ds = convert::daemonset(&d, None).map_err(err)?;
                    self.daemonsets.retain(|x| (&x.namespace, &x.name) != (&ds.namespace, &ds.name));
                    self.daemonsets.push(ds);
                }
                "PodDisruptionBudget" => {
                    let p: K8sPdb = serde_json::from_value(doc.clone())
                        .map_err(|e| err(format!("PodDisruptionBudget {name}: {e}")))?;
                    let spec = p.spec.clone().unwrap_or_default();
                    let namespace = p.metadata.namespace.clone().unwrap_or_else(|| "default".into());
                    let object = format!("{namespace}/{name}");
                    let bound = |v: &Option<IntOrString>, field: &str| {
                        v.as_ref().map(|v| PdbBound::parse(v, field, &object)).transpose()
                    };
                    let pdb = Pdb {
                        selector: convert::selector(spec.selector.as_ref()),
                        min_available: bound(&spec.min_available, "minAvailable")?,
                        max_unavailable: bound(&spec.max_unavailable, "maxUnavailable")?,
                        namespace,
                        name,
                    };
                    self.pdbs.retain(|x| (&x.namespace, &x.name) != (&pdb.namespace, &pdb.name));
                    self.pdbs.push(pdb);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Carries out one timeline step.
    pub fn step(&mut self, step: &Step, docs: &[serde_json::Value]) -> Result<(), SimError> {
        self.generation += 1;
        self.reconcile = true;
        if let Some(s) = &step.scale {
            let (ns, name) = s.deployment.split_once('/').unwrap_or(("default", &s.deployment));
            let d = self
                .deployments
                .iter_mut()
                .find(|d| d.namespace == ns && d.name == name)
                .ok_or_else(|| err(format!("no Deployment {ns}/{name} to scale")))?;
            d.replicas = s.replicas;
            self.event("ScalingReplicaSet", format!("Deployment/{ns}/{name}"), format!("scaled to {}", s.replicas));
        }
        if !docs.is_empty() {
            self.apply(docs)?;
        }
        if let Some(np) = &step.delete_nodepool {
            self.nodepools.retain(|p| &p.name != np);
            for i in 0..self.nodes.len() {
                if &self.nodes[i].nodepool == np && self.nodes[i].draining.is_none() {
                    self.start_drain(i, "NodePool deleted");
                }
            }
        }
        if let Some(x) = &step.interrupt_spot {
            let mut spot: Vec<usize> = (0..self.nodes.len())
                .filter(|&i| {
                    self.nodes[i].nodepool == x.nodepool
                        && self.nodes[i].capacity_type == wk::CAPACITY_TYPE_SPOT
                        && self.nodes[i].reclaim_at.is_none()
                })
                .collect();
            spot.sort_by_key(|&i| (self.nodes[i].created, i));
            if spot.is_empty() {
                return Err(err(format!(
                    "no spot node of NodePool {} to interrupt at {}",
                    x.nodepool,
                    duration_label(self.elapsed())
                )));
            }
            for i in spot.into_iter().take(x.count) {
                let node = &self.nodes[i];
                let (it, zone, name) = (node.instance_type.clone(), node.zone.clone(), node.name.clone());
                // The cloud takes the instance back after the two-minute warning.
                self.cloud.exhaust(&it, Some(zone.clone()), Some(wk::CAPACITY_TYPE_SPOT.into()));
                let owner = Owner {
                    nodeclaim: name.clone(),
                    node: Some(name.clone()),
                    nodepool: node.nodepool.clone(),
                    instance_id: name.clone(),
                    instance_type: it,
                    zone,
                    capacity_type: wk::CAPACITY_TYPE_SPOT.into(),
                    deleting: node.draining.is_some(),
                    termination_stamped: false,
                };
                self.nodes[i].reclaim_at = Some(self.now + 120);
                // What the controller does with the warning, step for step.
                for s in interruption::plan(&InterruptionKind::SpotInterruption, std::slice::from_ref(&owner)) {
                    match s {
                        InterruptionStep::Notify { notice, .. } => {
                            self.event(notice.reason, format!("Node/{name}"), notice.message)
                        }
                        InterruptionStep::MarkUnavailable(offering) => {
                            let now = self.now_ms();
                            self.cloud.mark(vec![offering], now, &mut self.nodepools);
                        }
                        // The simulator scripts spot warnings only, which stamp nothing.
                        InterruptionStep::StampTermination { .. } => {}
                        InterruptionStep::Delete { .. } => {
                            let (on_nodeclaim, on_node) = interruption::TERMINATING_ON_INTERRUPTION;
                            self.event("TerminatingOnInterruption", format!("NodeClaim/{name}"), on_nodeclaim.into());
                            self.event("TerminatingOnInterruption", format!("Node/{name}"), on_node.into());
                            self.start_drain(i, "spot interruption");
                        }
                    }
                }
            }
        }
        if let Some(x) = &step.exhaust {
            for t in &x.instance_types {
                self.cloud.exhaust(t, x.zone.clone(), x.capacity_type.clone());
            }
            self.event("InsufficientCapacity", "EC2".into(), format!("{:?} unavailable", x.instance_types));
        }
        Ok(())
    }

    pub(super) fn reconcile_deployments(&mut self) {
        if !std::mem::take(&mut self.reconcile) {
            return;
        }
        self.generation += 1;
        for d in 0..self.deployments.len() {
            let have: Vec<usize> = (0..self.pods.len()).filter(|&i| self.pods[i].deployment == Some(d)).collect();
            let want = self.deployments[d].replicas as usize;
            if have.len() < want {
                for _ in have.len()..want {
                    let dep = &mut self.deployments[d];
                    let mut pod = dep.template.clone();
                    pod.name = format!("{}-{:05}", dep.name, dep.next);
                    pod.uid = format!("{}-{}", dep.name, dep.next);
                    pod.created = self.now;
                    dep.next += 1;
                    self.pods.push(SimPod { pod, deployment: Some(d), created: self.now });
                }
            } else if have.len() > want {
                // Newest pods go first, pending before running, as a ReplicaSet scales down.
                let excess = have.len() - want;
                let mut victims = have;
                victims.sort_by_key(|&i| {
                    (
                        self.pods[i].pod.node_name.is_some(),
                        std::cmp::Reverse(self.pods[i].created),
                        std::cmp::Reverse(i),
                    )
                });
                let remove: BTreeSet<usize> = victims.into_iter().take(excess).collect();
                let now = self.now;
                for &i in &remove {
                    if let Some(n) = self.pods[i].pod.node_name.clone()
                        && let Some(node) = self.nodes.iter_mut().find(|x| x.name == n)
                    {
                        node.last_pod_event = now;
                    }
                }
                let mut idx = 0;
                self.pods.retain(|_| {
                    let keep = !remove.contains(&idx);
                    idx += 1;
                    keep
                });
            }
        }
    }
}
