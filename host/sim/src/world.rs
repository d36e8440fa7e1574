//! The virtual-time world: a cloud with the real EC2 catalog, a kubelet and a kube-scheduler
//! stand-in, Deployments, and Tenon's decision core deciding, exactly as the controller
//! would, on snapshots of it.

use crate::scenario::{Scenario, Settings, Step};
use k8s_openapi::api::apps::v1::Deployment as K8sDeployment;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1::PodDisruptionBudget as K8sPdb;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tenon_api::wellknown as wk;
use tenon_api::{EC2NodeClass, NodePool};
use tenon_core::catalog::{AwsCatalogOptions, aws};
use tenon_core::convert;
use tenon_core::disruption::drain::{DrainAction, drain_order};
use tenon_core::disruption::{DisruptionPlan, PolicySet, disrupt};
use tenon_core::instancetype::InstanceType;
use tenon_core::model::{ClaimInfo, ClusterSnapshot, Node, NodePoolTemplate, Pod, PodDisruptionBudget};
use tenon_core::plan::NewNodeClaim;
use tenon_core::requirements::{Requirement, Requirements};
use tenon_core::scorer::Scorer;
use tenon_core::taints::{Effect, Taint, untolerated};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SimError {
    #[error("{0}")]
    Invalid(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    Launching,
    Registering,
    Initializing,
    Ready,
}

#[derive(Clone, Debug)]
struct SimNode {
    name: String,
    nodepool: String,
    instance_type: String,
    zone: String,
    capacity_type: String,
    price: f64,
    created: i64,
    phase: Phase,
    next: i64,
    labels: BTreeMap<String, String>,
    /// The labels as requirements (built once: a node's labels do not change).
    requirements: Requirements,
    /// The NodePool's taints: what scheduling must tolerate once the node is initialized.
    pool_taints: Vec<Taint>,
    /// The NodePool's startup taints, removed by an agent on the node during initialization.
    startup_taints: Vec<Taint>,
    /// The Node object's taints now (empty before it registers).
    taints: Vec<Taint>,
    allocatable: tenon_core::resources::Resources,
    capacity: tenon_core::resources::Resources,
    /// Tainted for disruption: no new pods.
    disrupted: bool,
    /// Draining since, and the terminationGracePeriod deadline if any.
    draining: Option<(i64, Option<i64>)>,
    last_pod_event: i64,
    hash: String,
    /// The cloud takes the instance back at this time (spot interruption).
    reclaim_at: Option<i64>,
    /// What the last FailedDraining event said, so a stuck drain is reported once, not per tick.
    drain_blocked: Option<String>,
}

#[derive(Clone, Debug)]
struct SimPod {
    pod: Pod,
    deployment: Option<usize>,
    created: i64,
}

#[derive(Clone, Debug)]
struct Deployment {
    namespace: String,
    name: String,
    template: Pod,
    replicas: u32,
    next: u64,
}

#[derive(Clone, Debug)]
struct Pdb {
    namespace: String,
    name: String,
    selector: tenon_core::selector::LabelSelector,
    min_available: Option<PdbBound>,
    max_unavailable: Option<PdbBound>,
}

/// A PDB's minAvailable/maxUnavailable: a count, or a percentage of the matching pods.
#[derive(Clone, Copy, Debug, PartialEq)]
enum PdbBound {
    Count(i32),
    Percent(i32),
}

impl PdbBound {
    fn parse(v: &IntOrString, field: &str, object: &str) -> Result<Self, SimError> {
        match v {
            IntOrString::Int(i) => Ok(Self::Count(*i)),
            IntOrString::String(s) => s
                .strip_suffix('%')
                .and_then(|n| n.trim().parse::<i32>().ok())
                .filter(|n| (0..=100).contains(n))
                .map(Self::Percent)
                .ok_or_else(|| {
                    err(format!(
                        "PodDisruptionBudget {object}: spec.{field} {s:?} is neither an integer nor a percentage \
                         such as \"50%\""
                    ))
                }),
        }
    }

    /// Kubernetes' disruption controller rounds percentages up for both fields.
    fn scaled(self, expected: i32) -> i32 {
        match self {
            Self::Count(n) => n,
            Self::Percent(p) => (p * expected + 99) / 100,
        }
    }
}

/// Something that happened, as Kubernetes Events and Karpenter's logs would say it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Event {
    pub t: i64,
    pub reason: String,
    pub object: String,
    pub message: String,
}

/// The calls of one policy that failed in the same way, and what decided instead.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyFailures {
    pub nodepool: String,
    pub policy: String,
    pub hook: String,
    pub kind: String,
    pub count: usize,
    pub fallback: String,
    pub last_message: String,
}

/// The state at a moment, for plots and expectations.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Sample {
    pub t: i64,
    pub pending_pods: usize,
    pub running_pods: usize,
    pub nodes: usize,
    pub cost_per_hour: f64,
}

pub struct World<'p> {
    pub settings: Settings,
    /// Unix time now: the clock decisions and policies see.
    pub now: i64,
    /// Unix time at the scenario's 0s (`settings.start`); timeline, events and samples are
    /// relative to it.
    start: i64,
    catalog: Arc<Vec<InstanceType>>,
    nodepools: Vec<NodePoolTemplate>,
    /// NodePools whose NodeClass is missing: not Ready, nothing launched for them.
    not_ready: BTreeSet<String>,
    nodeclasses: BTreeSet<String>,
    nodes: Vec<SimNode>,
    /// Indices of the nodes the current snapshot borrowed labels and requirements from.
    lent_nodes: Vec<usize>,
    pods: Vec<SimPod>,
    deployments: Vec<Deployment>,
    daemonsets: Vec<tenon_core::model::DaemonSet>,
    pdbs: Vec<Pdb>,
    /// Offerings made unavailable: (instance type pattern, zone, capacity type).
    exhausted: Vec<(String, Option<String>, Option<String>)>,
    pub events: Vec<Event>,
    pub samples: Vec<Sample>,
    /// Seconds each bound pod waited.
    pub pending_times: Vec<i64>,
    pub nodeclaims_created: usize,
    pub disruptions: usize,
    /// Policy failures by (NodePool, policy, hook, kind).
    pub policy_failures: BTreeMap<(String, String, String, String), PolicyFailures>,
    pub cost: f64,
    batch: Option<(i64, i64)>,
    last_provision: i64,
    seen_pending: BTreeSet<String>,
    explained: BTreeMap<String, String>,
    /// Last reported reason a node could not be disrupted (events are not repeated).
    blocked: BTreeMap<String, String>,
    /// The disruption in progress: candidates waiting for replacements to be Ready.
    command: Option<(Vec<String>, Vec<String>)>,
    next_disruption: i64,
    ordinal: u64,
    /// Bumped on every change to pods or nodes: work whose inputs did not change is skipped.
    generation: u64,
    bind_seen: u64,
    provision_seen: u64,
    disruption_seen: u64,
    /// A drain that moved nothing at this generation stays stuck until something changes or
    /// `drain_wake` (a reclaim, a terminationGracePeriod deadline, a do-not-disrupt expiry).
    drain_seen: u64,
    drain_wake: i64,
    /// The next time a node becomes consolidatable or expires: a round must run then.
    disruption_timer: i64,
    last_round: i64,
    reconcile: bool,
    counts: (u64, usize, usize),
    policies: &'p dyn PolicySet,
}

fn err(m: impl ToString) -> SimError {
    SimError::Invalid(m.to_string())
}

fn duration_label(t: i64) -> String {
    format!("{:02}:{:02}:{:02}", t / 3600, (t % 3600) / 60, t % 60)
}

impl<'p> World<'p> {
    pub fn new(scenario: &Scenario, policies: &'p dyn PolicySet) -> Result<Self, SimError> {
        let opts = AwsCatalogOptions { region: scenario.settings.region.clone(), ..AwsCatalogOptions::default() };
        let mut catalog = aws(&opts).map_err(err)?;
        for t in &mut catalog {
            let od: BTreeMap<String, f64> = t
                .offerings
                .iter()
                .filter(|o| o.capacity_type == wk::CAPACITY_TYPE_ON_DEMAND)
                .map(|o| (o.zone.clone(), o.price))
                .collect();
            for o in t.offerings.iter_mut().filter(|o| o.capacity_type == wk::CAPACITY_TYPE_SPOT) {
                o.price = od.get(&o.zone).copied().unwrap_or(o.price) * scenario.settings.spot_price_factor;
            }
        }
        let start = scenario.settings.start.as_ref().map_or(0, |t| t.0.as_second());
        let mut w = World {
            settings: scenario.settings.clone(),
            now: start,
            start,
            catalog: Arc::new(catalog),
            nodepools: Vec::new(),
            not_ready: BTreeSet::new(),
            nodeclasses: BTreeSet::new(),
            nodes: Vec::new(),
            lent_nodes: Vec::new(),
            pods: Vec::new(),
            deployments: Vec::new(),
            daemonsets: Vec::new(),
            pdbs: Vec::new(),
            exhausted: Vec::new(),
            events: Vec::new(),
            samples: Vec::new(),
            pending_times: Vec::new(),
            nodeclaims_created: 0,
            disruptions: 0,
            policy_failures: BTreeMap::new(),
            cost: 0.0,
            batch: None,
            last_provision: start,
            seen_pending: BTreeSet::new(),
            explained: BTreeMap::new(),
            blocked: BTreeMap::new(),
            command: None,
            next_disruption: start + scenario.settings.disruption_interval_seconds,
            ordinal: 0,
            generation: 1,
            bind_seen: 0,
            provision_seen: 0,
            disruption_seen: 0,
            drain_seen: 0,
            drain_wake: start,
            disruption_timer: start,
            last_round: start,
            reconcile: true,
            counts: (0, 0, 0),
            policies,
        };
        w.apply(&scenario.documents)?;
        Ok(w)
    }

    /// Seconds since the scenario's 0s.
    pub fn elapsed(&self) -> i64 {
        self.now - self.start
    }

    fn event(&mut self, reason: &str, object: String, message: String) {
        self.events.push(Event { t: self.elapsed(), reason: reason.into(), object, message });
    }

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
                    let tpl = convert::nodepool(&np, self.catalog.clone()).map_err(err)?;
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
                    let mut template =
                        convert::pod(&core::Pod { metadata: meta, spec: spec.template.spec.clone(), status: None })
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
                    let pod = convert::pod(&p).map_err(err)?;
                    self.pods.retain(|x| x.pod.key() != pod.key());
                    self.pods.push(SimPod { pod, deployment: None, created: self.now });
                }
                "DaemonSet" => {
                    let d = serde_json::from_value(doc.clone()).map_err(|e| err(format!("DaemonSet {name}: {e}")))?;
                    let ds = convert::daemonset(&d).map_err(err)?;
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
                let (it, zone) = (self.nodes[i].instance_type.clone(), self.nodes[i].zone.clone());
                // Karpenter marks the offering unavailable and deletes the NodeClaim at once;
                // the cloud takes the instance back after the two-minute warning.
                self.exhausted.push((it.clone(), Some(zone.clone()), Some(wk::CAPACITY_TYPE_SPOT.into())));
                self.mark_unavailable(&[it.clone()].into());
                self.nodes[i].reclaim_at = Some(self.now + 120);
                let name = self.nodes[i].name.clone();
                self.event(
                    "SpotInterrupted",
                    format!("Node/{name}"),
                    format!("spot interruption warning for {it} in {zone}: draining, reclaimed in 2m"),
                );
                if self.nodes[i].draining.is_none() {
                    self.start_drain(i, "spot interruption");
                }
            }
        }
        if let Some(x) = &step.exhaust {
            for t in &x.instance_types {
                self.exhausted.push((t.clone(), x.zone.clone(), x.capacity_type.clone()));
            }
            self.event("InsufficientCapacity", "EC2".into(), format!("{:?} unavailable", x.instance_types));
        }
        Ok(())
    }

    fn exhausted(&self, it: &str, zone: &str, ct: &str) -> bool {
        self.exhausted.iter().any(|(p, z, c)| {
            let m = match p.strip_suffix('*') {
                Some(prefix) => it.starts_with(prefix),
                None => p == it,
            };
            m && z.as_deref().is_none_or(|z| z == zone) && c.as_deref().is_none_or(|c| c == ct)
        })
    }

    /// The snapshot the decision core sees now. `ready_only` is kube-scheduler's view.
    ///
    /// The pods are lent, not copied (copying and freeing ~10,000 pods per decision was a
    /// third of a day-long run): until `give_back`, the world's own pod objects are empty.
    fn lend_snapshot(&mut self, ready_only: bool) -> ClusterSnapshot {
        self.lent_nodes.clear();
        let lent = &mut self.lent_nodes;
        let nodes = self
            .nodes
            .iter_mut()
            .enumerate()
            .filter(|(_, n)| !ready_only || n.phase == Phase::Ready)
            .map(|(i, n)| {
                lent.push(i);
                (i, n)
            })
            .map(|(_, n)| Node {
                name: n.name.clone(),
                nodepool: Some(n.nodepool.clone()),
                requirements: std::mem::take(&mut n.requirements),
                labels: std::mem::take(&mut n.labels),
                // Karpenter plans against a NodeClaim's taints without its startup taints and
                // without karpenter.sh/unregistered; kube-scheduler sees only initialized nodes.
                taints: n.pool_taints.clone(),
                allocatable: n.allocatable.clone(),
                capacity: n.capacity.clone(),
                in_flight: n.phase != Phase::Ready,
                unschedulable: n.disrupted || n.draining.is_some(),
                claim: Some(ClaimInfo {
                    nodeclaim: n.name.clone(),
                    created: n.created,
                    initialized: n.phase == Phase::Ready,
                    ready: n.phase == Phase::Ready,
                    disrupting: n.disrupted || n.draining.is_some(),
                    last_pod_event: Some(n.last_pod_event),
                    annotations: BTreeMap::new(),
                    instance_type: n.instance_type.clone(),
                    zone: n.zone.clone(),
                    capacity_type: n.capacity_type.clone(),
                    price: n.price,
                    nodepool_hash: Some(n.hash.clone()),
                    nodepool_hash_version: Some(tenon_api::hash::NODEPOOL_HASH_VERSION.into()),
                    drift: None,
                }),
            })
            .collect();
        let pdbs = self
            .pdbs
            .iter()
            .map(|b| {
                let matching: Vec<&SimPod> = self
                    .pods
                    .iter()
                    .filter(|p| p.pod.namespace == b.namespace && b.selector.matches(&p.pod.labels))
                    .collect();
                let healthy =
                    matching.iter().filter(|p| p.pod.node_name.as_ref().is_some_and(|n| self.node_ready(n))).count()
                        as i32;
                let expected = matching.len() as i32;
                let allowed = match (b.min_available, b.max_unavailable) {
                    (Some(min), _) => healthy - min.scaled(expected),
                    (None, Some(max)) => max.scaled(expected) - (expected - healthy),
                    (None, None) => healthy,
                };
                PodDisruptionBudget {
                    namespace: b.namespace.clone(),
                    name: b.name.clone(),
                    selector: b.selector.clone(),
                    disruptions_allowed: allowed.max(0),
                }
            })
            .collect();
        ClusterSnapshot {
            now: self.now,
            nodepools: if ready_only {
                vec![]
            } else {
                self.nodepools.iter().filter(|p| !self.not_ready.contains(&p.name)).cloned().collect()
            },
            nodes,
            pods: self.pods.iter_mut().map(|p| std::mem::take(&mut p.pod)).collect(),
            daemonsets: self.daemonsets.clone(),
            pdbs,
            namespaces: BTreeMap::new(),
            max_instance_types: None,
            ignore_preferences: false,
        }
    }

    /// Returns what `lend_snapshot` lent; `snap.pods` is empty afterwards and its nodes have
    /// no labels or requirements.
    fn give_back(&mut self, snap: &mut ClusterSnapshot) {
        debug_assert_eq!(snap.pods.len(), self.pods.len());
        for (sp, pod) in self.pods.iter_mut().zip(snap.pods.drain(..)) {
            sp.pod = pod;
        }
        for (&i, node) in self.lent_nodes.iter().zip(snap.nodes.iter_mut()) {
            self.nodes[i].labels = std::mem::take(&mut node.labels);
            self.nodes[i].requirements = std::mem::take(&mut node.requirements);
        }
    }

    fn node_ready(&self, name: &str) -> bool {
        self.nodes.iter().any(|n| n.name == name && n.phase == Phase::Ready)
    }

    /// Advances the world by one second.
    pub fn tick(&mut self, scorer: &dyn Scorer) {
        self.reconcile_deployments();
        self.lifecycle();
        self.bind();
        self.provision(scorer);
        self.drain();
        if self.now >= self.next_disruption {
            self.next_disruption = self.now + self.settings.disruption_interval_seconds;
            self.disruption(scorer);
        }
        self.policy_failures();
        let cph = self.cost_per_hour();
        self.cost += cph / 3600.0;
        if self.counts.0 != self.generation {
            let pending = self.pending();
            self.counts = (self.generation, pending, self.pods.len() - pending);
        }
        let (_, pending, running) = self.counts;
        let sample = Sample {
            t: self.elapsed(),
            pending_pods: pending,
            running_pods: running,
            nodes: self.nodes.len(),
            cost_per_hour: cph,
        };
        if self.samples.last().is_none_or(|s| {
            (s.pending_pods, s.running_pods, s.nodes) != (pending, sample.running_pods, sample.nodes)
                || self.elapsed() % 60 == 0
        }) {
            self.samples.push(sample);
        }
        self.now += 1;
    }

    /// Every policy failure becomes an event (a breaker trip too) and is counted for the
    /// report: a run must not show a fallback's numbers as the policy's.
    fn policy_failures(&mut self) {
        for f in self.policies.take_failures() {
            let (reason, message) = if f.kind == "circuit_open" {
                ("PolicySkipped", format!("{} ({}) {}; {} decides meanwhile", f.policy, f.hook, f.message, f.fallback))
            } else {
                ("PolicyFailed", format!("{} ({}) {}: {}; {} decided", f.policy, f.hook, f.kind, f.message, f.fallback))
            };
            self.event(reason, format!("NodePool/{}", f.nodepool), message);
            if f.kind == "circuit_open" {
                continue;
            }
            let key = (f.nodepool.clone(), f.policy.clone(), f.hook.clone(), f.kind.clone());
            let entry = self.policy_failures.entry(key).or_insert_with(|| PolicyFailures {
                nodepool: f.nodepool,
                policy: f.policy,
                hook: f.hook,
                kind: f.kind,
                count: 0,
                fallback: f.fallback,
                last_message: String::new(),
            });
            entry.count += 1;
            entry.last_message = f.message;
        }
    }

    fn reconcile_deployments(&mut self) {
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

    fn lifecycle(&mut self) {
        let s = self.settings.clone();
        let mut ready = Vec::new();
        for i in 0..self.nodes.len() {
            let n = &mut self.nodes[i];
            if self.now < n.next || n.phase == Phase::Ready {
                continue;
            }
            let (phase, next, reason) = match n.phase {
                Phase::Launching => (Phase::Registering, self.now + s.register_seconds, "Launched"),
                Phase::Registering => (Phase::Initializing, self.now + s.initialize_seconds, "Registered"),
                Phase::Initializing => (Phase::Ready, i64::MAX, "Initialized"),
                Phase::Ready => unreachable!(),
            };
            n.phase = phase;
            n.next = next;
            self.generation += 1;
            let mut msg = format!("{} in {} ({}, ${:.4}/h)", n.instance_type, n.zone, n.capacity_type, n.price);
            match phase {
                // The kubelet registers the Node with karpenter.sh/unregistered plus the
                // NodePool's taints and startup taints; Karpenter's registration removes
                // karpenter.sh/unregistered once it has synced labels and taints.
                Phase::Initializing => {
                    let joined: Vec<Taint> = std::iter::once(unregistered_taint())
                        .chain(n.pool_taints.iter().chain(&n.startup_taints).cloned())
                        .collect();
                    msg.push_str(&format!(
                        "; Node joined with taints [{}]; {} removed",
                        taint_list(&joined),
                        joined[0]
                    ));
                    n.taints = joined[1..].to_vec();
                }
                // The agent that owns each startup taint removes it; the node is Initialized
                // when Ready with no startup taint left.
                Phase::Ready => {
                    if !n.startup_taints.is_empty() {
                        msg.push_str(&format!("; startup taints [{}] removed", taint_list(&n.startup_taints)));
                    }
                    n.taints = n.pool_taints.clone();
                    n.last_pod_event = self.now;
                    ready.push(i);
                }
                _ => {}
            }
            let name = n.name.clone();
            self.event(reason, format!("NodeClaim/{name}"), msg);
        }
        for i in ready {
            // DaemonSet pods start on every node whose taints they tolerate and whose labels
            // their node selector and required affinity accept.
            let node = self.nodes[i].name.clone();
            let daemonsets: Vec<_> = self
                .daemonsets
                .iter()
                .filter(|ds| {
                    let n = &self.nodes[i];
                    untolerated(&n.taints, &ds.pod.tolerations, false).is_none()
                        && n.requirements.is_compatible(&ds.pod.node_selector)
                        && (ds.pod.required_node_affinity.is_empty()
                            || ds.pod.required_node_affinity.iter().any(|t| n.requirements.is_compatible(t)))
                })
                .cloned()
                .collect();
            for ds in daemonsets {
                let mut pod = ds.pod.clone();
                pod.name = format!("{}-{}", ds.name, node);
                pod.node_name = Some(node.clone());
                self.pods.push(SimPod { pod, deployment: None, created: self.now });
            }
        }
    }

    /// kube-scheduler: binds pending pods to Ready nodes with room.
    fn bind(&mut self) {
        if self.bind_seen == self.generation {
            return;
        }
        self.bind_seen = self.generation;
        if !self.pods.iter().any(|p| p.pod.node_name.is_none()) || !self.nodes.iter().any(|n| n.phase == Phase::Ready) {
            return;
        }
        let mut snap = self.lend_snapshot(true);
        let plan = tenon_core::schedule(&snap, &tenon_core::scorer::PriceScorer);
        self.give_back(&mut snap);
        if !plan.nominations.is_empty() {
            self.generation += 1;
            self.bind_seen = self.generation;
        }
        for nom in plan.nominations {
            let now = self.now;
            let p = &mut self.pods[nom.pod];
            p.pod.node_name = Some(nom.node.clone());
            self.pending_times.push(now - p.created);
            if let Some(n) = self.nodes.iter_mut().find(|n| n.name == nom.node) {
                n.last_pod_event = now;
            }
        }
    }

    /// Karpenter's provisioner: batches pending pods, then plans NodeClaims for them.
    fn provision(&mut self, scorer: &dyn Scorer) {
        let retry_due =
            self.now - self.last_provision >= self.settings.batch_max_seconds && !self.seen_pending.is_empty();
        if self.batch.is_none() && self.provision_seen == self.generation && !retry_due {
            return;
        }
        self.provision_seen = self.generation;
        let pending: Vec<String> =
            self.pods.iter().filter(|p| p.pod.node_name.is_none() && !p.pod.is_daemon()).map(|p| p.pod.key()).collect();
        if pending.is_empty() {
            self.batch = None;
            self.seen_pending.clear();
            return;
        }
        let fresh = pending.iter().any(|k| !self.seen_pending.contains(k));
        self.seen_pending = pending.iter().cloned().collect();
        // Pods still pending are reconsidered every batch-max interval, as the provisioner
        // is re-triggered until they are placed.
        let retry = self.now - self.last_provision >= self.settings.batch_max_seconds;
        let (start, last) = match self.batch {
            None if fresh || retry => (self.now, self.now),
            None => return,
            Some((s, l)) => (s, if fresh { self.now } else { l }),
        };
        self.batch = Some((start, last));
        if self.now - last < self.settings.batch_idle_seconds && self.now - start < self.settings.batch_max_seconds {
            return;
        }
        self.batch = None;
        self.last_provision = self.now;
        let mut snap = self.lend_snapshot(false);
        let plan = tenon_core::schedule(&snap, scorer);
        let unschedulable: Vec<(String, &String)> =
            plan.unschedulable.iter().map(|u| (snap.pods[u.pod].key(), &u.reason)).collect();
        self.give_back(&mut snap);
        for (key, reason) in unschedulable {
            if self.explained.get(&key) != Some(reason) {
                self.explained.insert(key.clone(), reason.clone());
                self.event("FailedScheduling", format!("Pod/{key}"), reason.clone());
            }
        }
        for nc in &plan.nodeclaims {
            self.launch(&snap, nc, "Provisioning");
        }
    }

    /// CreateFleet: the first ranked instance type with an available offering.
    fn launch(&mut self, snap: &ClusterSnapshot, nc: &NewNodeClaim, why: &str) -> Option<String> {
        let pool = &snap.nodepools[nc.nodepool];
        let chosen = nc.instance_types.iter().find_map(|&t| {
            let it = &pool.instance_types[t as usize];
            it.compatible_offerings(&nc.requirements)
                .filter(|o| !self.exhausted(&it.name, &o.zone, &o.capacity_type))
                .min_by(|a, b| a.price.total_cmp(&b.price))
                .map(|o| (it, o.clone()))
        });
        let Some((it, offering)) = chosen else {
            // CreateFleet failed for every option: remember those offerings as unavailable
            // (Karpenter's unavailable-offerings cache), so the next decision goes elsewhere.
            let names: BTreeSet<String> =
                nc.instance_types.iter().map(|&t| pool.instance_types[t as usize].name.clone()).collect();
            self.mark_unavailable(&names);
            let name = nc.nodepool_name.clone();
            self.event(
                "InsufficientCapacityError",
                format!("NodePool/{name}"),
                format!("none of {} instance type option(s) has capacity; offerings marked unavailable", names.len()),
            );
            return None;
        };
        self.ordinal += 1;
        let name = format!("{}-{:05x}", nc.nodepool_name, self.ordinal * 7919 % 0xfffff);
        let mut labels = it.labels();
        labels.extend(pool.labels.clone());
        for (k, v) in [
            (wk::LABEL_ZONE, offering.zone.as_str()),
            (wk::LABEL_CAPACITY_TYPE, offering.capacity_type.as_str()),
            (wk::LABEL_NODEPOOL, nc.nodepool_name.as_str()),
            (wk::LABEL_HOSTNAME, name.as_str()),
        ] {
            labels.insert(k.to_string(), v.to_string());
        }
        self.nodes.push(SimNode {
            name: name.clone(),
            nodepool: nc.nodepool_name.clone(),
            instance_type: it.name.clone(),
            zone: offering.zone.clone(),
            capacity_type: offering.capacity_type.clone(),
            price: offering.price,
            created: self.now,
            phase: Phase::Launching,
            next: self.now + self.settings.launch_seconds,
            requirements: labels.iter().map(|(k, v)| Requirement::in_values(k, [v.clone()])).collect(),
            labels,
            pool_taints: pool.taints.clone(),
            startup_taints: pool.startup_taints.clone(),
            taints: Vec::new(),
            allocatable: it.allocatable().clone(),
            capacity: it.capacity.clone(),
            disrupted: false,
            draining: None,
            last_pod_event: self.now,
            hash: pool.hash.clone(),
            reclaim_at: None,
            drain_blocked: None,
        });
        self.nodeclaims_created += 1;
        self.generation += 1;
        let options = nc.instance_types.len();
        self.event(
            "Created",
            format!("NodeClaim/{name}"),
            format!("{why}: {} pod(s), {options} instance type option(s), launching {}", nc.pods.len(), it.name),
        );
        Some(name)
    }

    /// Marks the exhausted offerings of `types` unavailable in every NodePool's catalog.
    fn mark_unavailable(&mut self, types: &BTreeSet<String>) {
        let mut catalog = (*self.catalog).clone();
        for t in catalog.iter_mut().filter(|t| types.contains(&t.name)) {
            for o in &mut t.offerings {
                let gone = self.exhausted.iter().any(|(p, z, c)| {
                    let m = match p.strip_suffix('*') {
                        Some(prefix) => t.name.starts_with(prefix),
                        None => *p == t.name,
                    };
                    m && z.as_deref().is_none_or(|z| z == o.zone) && c.as_deref().is_none_or(|c| c == o.capacity_type)
                });
                if gone {
                    o.available = false;
                }
            }
        }
        self.catalog = Arc::new(catalog);
        for p in &mut self.nodepools {
            p.instance_types = self.catalog.clone();
        }
    }

    fn start_drain(&mut self, i: usize, why: &str) {
        let tgp =
            self.nodepools.iter().find(|p| p.name == self.nodes[i].nodepool).and_then(|p| p.termination_grace_period);
        self.generation += 1;
        let n = &mut self.nodes[i];
        n.disrupted = true;
        n.draining = Some((self.now, tgp.map(|g| self.now + g)));
        let name = n.name.clone();
        self.event("Draining", format!("Node/{name}"), why.to_string());
    }

    /// Evicts pods of draining nodes in drain order; terminates nodes that are empty.
    fn drain(&mut self) {
        if !self.nodes.iter().any(|n| n.draining.is_some())
            || (self.drain_seen == self.generation && self.now < self.drain_wake)
        {
            return;
        }
        let mut snap = self.lend_snapshot(false);
        let mut evict: BTreeSet<String> = BTreeSet::new();
        let mut done = Vec::new();
        let mut blocked = Vec::new();
        let mut wake = i64::MAX;
        for (i, n) in self.nodes.iter().enumerate().filter(|(_, n)| n.draining.is_some()) {
            if n.reclaim_at.is_some_and(|t| self.now >= t) {
                done.push(n.name.clone());
                continue;
            }
            let deadline = n.draining.and_then(|(_, d)| d);
            let plan = drain_order(&snap, &n.name, deadline);
            for p in plan.steps.iter().map(|(p, _)| *p).chain(plan.later.iter().copied()) {
                let pod = &snap.pods[p];
                if let Some(d) = deadline {
                    wake = wake.min(d - pod.termination_grace_seconds);
                }
                if pod.annotations.contains_key(wk::ANNOTATION_DO_NOT_DISRUPT) {
                    wake = self.now + 1;
                }
            }
            if let Some(t) = n.reclaim_at {
                wake = wake.min(t);
            }
            if plan.is_done() || (plan.tier >= 1 && plan.steps.iter().all(|(p, _)| snap.pods[*p].is_daemon())) {
                done.push(n.name.clone());
                continue;
            }
            let waiting: Vec<&String> = plan
                .steps
                .iter()
                .filter_map(|(_, a)| match a {
                    DrainAction::Wait(why) => Some(why),
                    _ => None,
                })
                .collect();
            let message = waiting
                .first()
                .map(|why| format!("Failed to drain node, {} pods are waiting to be evicted: {why}", waiting.len()));
            if message.is_some() && message != n.drain_blocked {
                blocked.push((i, message));
            }
            for (p, action) in plan.steps {
                if matches!(action, DrainAction::Evict | DrainAction::Delete) {
                    evict.insert(snap.pods[p].key());
                }
            }
        }
        self.give_back(&mut snap);
        for (i, message) in blocked {
            let name = self.nodes[i].name.clone();
            self.nodes[i].drain_blocked = message.clone();
            self.event("FailedDraining", format!("Node/{name}"), message.unwrap_or_default());
        }
        if !evict.is_empty() || !done.is_empty() {
            // Evicted pods of Deployments come back as new pending pods.
            self.generation += 1;
            self.reconcile = true;
        } else {
            self.drain_seen = self.generation;
            self.drain_wake = wake;
        }
        self.pods.retain(|p| !evict.contains(&p.pod.key()));
        for name in done {
            self.pods.retain(|p| p.pod.node_name.as_deref() != Some(name.as_str()));
            self.nodes.retain(|n| n.name != name);
            self.event("Terminated", format!("NodeClaim/{name}"), "instance terminated".into());
        }
    }

    fn disruption(&mut self, scorer: &dyn Scorer) {
        // A command in flight: drain its candidates once its replacements are Ready.
        if let Some((candidates, replacements)) = self.command.clone() {
            let ready = replacements.iter().all(|r| self.node_ready(r) || !self.nodes.iter().any(|n| &n.name == r));
            if ready {
                for c in candidates {
                    if let Some(i) = self.nodes.iter().position(|n| n.name == c && n.draining.is_none()) {
                        self.start_drain(i, "replacements are Initialized");
                    }
                }
                self.command = None;
            }
            return;
        }
        if self.nodes.iter().any(|n| n.draining.is_some()) {
            return;
        }
        // Same cluster, no timer passed: the decision would be the same as last time. A round
        // still runs every five minutes (budget windows open and close on the clock).
        if self.disruption_seen == self.generation
            && self.now < self.disruption_timer
            && self.now - self.last_round < 300
        {
            return;
        }
        self.disruption_seen = self.generation;
        self.last_round = self.now;
        self.disruption_timer = self.next_timer();
        let mut snap = self.lend_snapshot(false);
        let decision = disrupt(&snap, self.policies);
        self.give_back(&mut snap);
        for b in &decision.blocked {
            let name = snap.nodes[b.node].name.clone();
            if self.blocked.get(&name) != Some(&b.reason) {
                self.blocked.insert(name.clone(), b.reason.clone());
                self.event("DisruptionBlocked", format!("Node/{name}"), b.reason.clone());
            }
        }
        for r in &decision.rejected {
            let nodes: Vec<String> = r.candidates.iter().map(|&n| snap.nodes[n].name.clone()).collect();
            self.event(
                "ConsolidationRejected",
                format!("Node/{}", nodes.join(",")),
                format!("{}: {}", r.consolidator, r.reason),
            );
        }
        for e in &decision.expirations {
            for &c in &e.candidates {
                if let Some(i) = self.nodes.iter().position(|n| n.name == snap.nodes[c].name) {
                    self.start_drain(i, &format!("Expired: {}", e.reason));
                }
            }
        }
        let Some(plan) = decision.plan else { return };
        self.execute(&snap, plan, scorer);
    }

    fn execute(&mut self, snap: &ClusterSnapshot, plan: DisruptionPlan, _scorer: &dyn Scorer) {
        let names: Vec<String> = plan.candidates.iter().map(|&n| snap.nodes[n].name.clone()).collect();
        self.disruptions += names.len();
        self.event(
            "DisruptionTerminating",
            format!("Node/{}", names.join(",")),
            format!("{}, saving ${:.4}/h: {}", plan.method.as_str(), plan.savings_per_hour, plan.reason),
        );
        for name in &names {
            if let Some(n) = self.nodes.iter_mut().find(|n| &n.name == name) {
                n.disrupted = true;
            }
        }
        if plan.replacements.is_empty() {
            for name in &names {
                if let Some(i) = self.nodes.iter().position(|n| &n.name == name) {
                    self.start_drain(i, &format!("{}: no replacement needed", plan.method.as_str()));
                }
            }
            return;
        }
        let mut launched = Vec::new();
        for nc in &plan.replacements {
            if let Some(n) = self.launch(snap, nc, "Replacement") {
                launched.push(n);
            }
        }
        self.command = Some((names, launched));
    }

    /// The next time a node becomes consolidatable or expires.
    fn next_timer(&self) -> i64 {
        self.nodes
            .iter()
            .filter_map(|n| {
                let pool = self.nodepools.iter().find(|p| p.name == n.nodepool)?;
                let consolidatable = pool.disruption.consolidate_after.map(|a| n.last_pod_event + a);
                let expires = pool.expire_after.map(|e| n.created + e);
                [consolidatable, expires].into_iter().flatten().filter(|t| *t > self.now).min()
            })
            .min()
            .unwrap_or(i64::MAX)
    }

    /// Live NodeClaims per NodePool.
    pub fn nodeclaims_by_pool(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for n in &self.nodes {
            *m.entry(n.nodepool.clone()).or_insert(0) += 1;
        }
        m
    }

    pub fn pending(&self) -> usize {
        self.pods.iter().filter(|p| p.pod.node_name.is_none()).count()
    }

    pub fn running(&self) -> usize {
        self.pods.iter().filter(|p| p.pod.node_name.is_some()).count()
    }

    pub fn cost_per_hour(&self) -> f64 {
        // Folding from +0.0: an empty sum of f64 is -0.0.
        self.nodes.iter().fold(0.0, |a, n| a + n.price)
    }

    /// Live nodes: (instance type, labels).
    pub fn node_labels(&self) -> Vec<(String, BTreeMap<String, String>)> {
        self.nodes.iter().map(|n| (n.name.clone(), n.labels.clone())).collect()
    }

    /// Pods bound to nodes of each NodePool (DaemonSet pods included).
    pub fn pods_by_pool(&self) -> BTreeMap<String, usize> {
        let pool: BTreeMap<&str, &str> = self.nodes.iter().map(|n| (n.name.as_str(), n.nodepool.as_str())).collect();
        let mut m = BTreeMap::new();
        for p in &self.pods {
            if let Some(pool) = p.pod.node_name.as_deref().and_then(|n| pool.get(n)) {
                *m.entry(pool.to_string()).or_insert(0) += 1;
            }
        }
        m
    }

    /// Live nodes and their taints now.
    pub fn node_taints(&self) -> Vec<(String, Vec<Taint>)> {
        self.nodes.iter().map(|n| (n.name.clone(), n.taints.clone())).collect()
    }

    pub fn describe_time(t: i64) -> String {
        duration_label(t)
    }
}

fn unregistered_taint() -> Taint {
    Taint { key: wk::TAINT_UNREGISTERED.into(), value: String::new(), effect: Effect::NoExecute }
}

fn taint_list(taints: &[Taint]) -> String {
    taints.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}
