//! The virtual-time world behind `tenon simulate`: a cluster (kube-scheduler, kubelets, a
//! Deployment controller) and an EC2 that answers like CreateFleet, driven second by second.
//! What Tenon itself does — when to decide, how a decision is carried out, what a failed
//! launch or a stale command does — is `tenon_core::orchestration`, the same state machines
//! the controller runs; this module and its parts only apply their intents to the world.

mod apply;
mod cloud;
mod disruption;
mod kubelet;
mod objects;
mod provision;
mod snapshot;

pub use objects::{DisruptionRecord, Event, NodeClaimRecord, Phase, PolicyFailures, Sample, SimError};

use crate::scenario::{Scenario, Settings};
use objects::{Deployment, Pdb, SimNode, SimPod};
use std::collections::{BTreeMap, BTreeSet};
use tenon_core::disruption::{Method, PolicySet};
use tenon_core::model::NodePoolTemplate;
use tenon_core::orchestration::batcher::Batcher;
use tenon_core::orchestration::budget_events::BudgetEvents;
use tenon_core::orchestration::command::Command;
use tenon_core::scorer::Scorer;
use tenon_core::taints::{Effect, Taint};

pub struct World<'p> {
    pub settings: Settings,
    /// Unix time now: the clock decisions and policies see.
    pub now: i64,
    /// Unix time at the scenario's 0s (`settings.start`); timeline, events and samples are
    /// relative to it.
    start: i64,
    cloud: cloud::Cloud,
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
    pub events: Vec<Event>,
    pub samples: Vec<Sample>,
    /// Seconds each bound pod waited.
    pub pending_times: Vec<i64>,
    pub nodeclaims_created: usize,
    pub disruptions: usize,
    /// Every NodeClaim and every carried-out disruption, in order (the decision trace).
    pub nodeclaim_log: Vec<NodeClaimRecord>,
    pub disruption_log: Vec<DisruptionRecord>,
    /// Policy failures by (NodePool, policy, hook, kind).
    pub policy_failures: BTreeMap<(String, String, String, String), PolicyFailures>,
    pub cost: f64,
    batcher: Batcher,
    /// The pods the batcher was last fed, at this generation (skipped when nothing changed
    /// and no batcher timer is due).
    batch_seen: u64,
    explained: BTreeMap<String, String>,
    /// Last reported reason a node could not be disrupted (events are not repeated).
    blocked: BTreeMap<String, String>,
    /// Last reported reason a node could not be consolidated (events are not repeated).
    unconsolidatable: BTreeMap<String, String>,
    /// (object, reason) of each command Event published while waiting on replacements: the
    /// controller's recorder would deduplicate the ones a pass repeats.
    waiting_noticed: BTreeSet<(String, &'static str)>,
    /// The disruptions under way; their replacements are planned NodeClaims until created.
    commands: Vec<Command<cloud::Planned>>,
    budget_events: BudgetEvents,
    next_disruption: i64,
    /// The method whose command just failed validation: a round runs at once and goes on
    /// from the method after it, as Karpenter's pass does.
    resume_after: Option<Method>,
    ordinal: u64,
    /// Bumped on every change to pods or nodes: work whose inputs did not change is skipped.
    generation: u64,
    bind_seen: u64,
    /// The generation and command set the last round saw.
    disruption_seen: (u64, u64),
    /// Bumped when a command starts or ends: the candidates a round holds back change.
    commands_changed: u64,
    /// A budget that can change with time alone held a node back in the last round: the next
    /// rounds must run even if nothing changed (a window may close, a policy may relent).
    budget_varies_with_time: bool,
    /// A drain that moved nothing at this generation stays stuck until something changes or
    /// `drain_wake` (a reclaim, a terminationGracePeriod deadline, a do-not-disrupt expiry).
    drain_seen: u64,
    drain_wake: i64,
    /// The next time a node becomes consolidatable or expires: a round must run then.
    disruption_timer: i64,
    reconcile: bool,
    counts: (u64, usize, usize),
    policies: &'p dyn PolicySet,
}

pub(super) fn err(m: impl ToString) -> SimError {
    SimError::Invalid(m.to_string())
}

fn duration_label(t: i64) -> String {
    format!("{:02}:{:02}:{:02}", t / 3600, (t % 3600) / 60, t % 60)
}

impl<'p> World<'p> {
    pub fn new(scenario: &Scenario, policies: &'p dyn PolicySet) -> Result<Self, SimError> {
        let cloud = cloud::Cloud::new(&scenario.settings, scenario.catalog.as_ref())?;
        let start = scenario.settings.start.as_ref().map_or(0, |t| t.0.as_second());
        let mut w = World {
            settings: scenario.settings.clone(),
            now: start,
            start,
            cloud,
            nodepools: Vec::new(),
            not_ready: BTreeSet::new(),
            nodeclasses: BTreeSet::new(),
            nodes: Vec::new(),
            lent_nodes: Vec::new(),
            pods: Vec::new(),
            deployments: Vec::new(),
            daemonsets: Vec::new(),
            pdbs: Vec::new(),
            events: Vec::new(),
            samples: Vec::new(),
            pending_times: Vec::new(),
            nodeclaims_created: 0,
            disruptions: 0,
            nodeclaim_log: Vec::new(),
            disruption_log: Vec::new(),
            policy_failures: BTreeMap::new(),
            cost: 0.0,
            batcher: Batcher::default(),
            batch_seen: 0,
            explained: BTreeMap::new(),
            blocked: BTreeMap::new(),
            unconsolidatable: BTreeMap::new(),
            waiting_noticed: BTreeSet::new(),
            commands: Vec::new(),
            budget_events: BudgetEvents::default(),
            next_disruption: start + scenario.settings.disruption_interval_seconds,
            resume_after: None,
            ordinal: 0,
            generation: 1,
            bind_seen: 0,
            disruption_seen: (0, 0),
            commands_changed: 0,
            budget_varies_with_time: false,
            drain_seen: 0,
            drain_wake: start,
            disruption_timer: start,
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

    /// The orchestration clock (milliseconds).
    fn now_ms(&self) -> i64 {
        self.now * 1000
    }

    fn event(&mut self, reason: &str, object: String, message: String) {
        self.events.push(Event { t: self.elapsed(), reason: reason.into(), object, message });
    }

    /// Advances the world by one second: the cluster's own controllers, then Tenon's passes
    /// in the controller's order.
    pub fn tick(&mut self, scorer: &dyn Scorer) {
        self.cloud.expire(self.now_ms(), &mut self.nodepools);
        self.reconcile_deployments();
        self.lifecycle();
        self.bind();
        self.provision(scorer);
        self.drain();
        self.expiration();
        self.disruption();
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

    /// Live nodes: (name, labels).
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

    /// Whether the spot prices came from a model rather than data (a pinned catalog).
    pub fn spot_prices_are_modelled(&self) -> bool {
        self.cloud.spot_prices_are_modelled()
    }

    pub fn describe_time(t: i64) -> String {
        duration_label(t)
    }
}

fn unregistered_taint() -> Taint {
    Taint { key: tenon_api::wellknown::TAINT_UNREGISTERED.into(), value: String::new(), effect: Effect::NoExecute }
}

fn taint_list(taints: &[Taint]) -> String {
    taints.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}
