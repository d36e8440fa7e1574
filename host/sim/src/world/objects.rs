//! What the simulated world is made of (nodes, pods, Deployments, PDBs) and what it reports
//! (events, samples, policy failures, and the decision trace a differential test compares).

use super::err;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde::Serialize;
use std::collections::BTreeMap;
use tenon_core::model::Pod;
use tenon_core::requirements::Requirements;
use tenon_core::taints::Taint;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SimError {
    #[error("{0}")]
    Invalid(String),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Phase {
    /// The instance is booting.
    Launching,
    Registering,
    Initializing,
    Ready,
}

#[derive(Clone, Debug)]
pub(super) struct SimNode {
    pub(super) name: String,
    pub(super) nodepool: String,
    pub(super) instance_type: String,
    pub(super) zone: String,
    pub(super) capacity_type: String,
    pub(super) price: f64,
    pub(super) created: i64,
    /// The NodePool's `expireAfter` when the NodeClaim was created (its own from then on).
    pub(super) expire_after: Option<i64>,
    pub(super) phase: Phase,
    pub(super) next: i64,
    pub(super) labels: BTreeMap<String, String>,
    /// The labels as requirements (built once: a node's labels do not change).
    pub(super) requirements: Requirements,
    /// The NodePool's taints: what scheduling must tolerate once the node is initialized.
    pub(super) pool_taints: Vec<Taint>,
    /// The NodePool's startup taints, removed by an agent on the node during initialization.
    pub(super) startup_taints: Vec<Taint>,
    /// The Node object's taints now (empty before it registers).
    pub(super) taints: Vec<Taint>,
    pub(super) allocatable: tenon_core::resources::Resources,
    pub(super) capacity: tenon_core::resources::Resources,
    /// Tainted for disruption: no new pods.
    pub(super) disrupted: bool,
    /// Draining since, and the terminationGracePeriod deadline if any.
    pub(super) draining: Option<(i64, Option<i64>)>,
    pub(super) last_pod_event: i64,
    pub(super) hash: String,
    /// The cloud takes the instance back at this time (spot interruption).
    pub(super) reclaim_at: Option<i64>,
    /// What the last FailedDraining event said, so a stuck drain is reported once, not per tick.
    pub(super) drain_blocked: Option<String>,
}

#[derive(Clone, Debug)]
pub(super) struct SimPod {
    pub(super) pod: Pod,
    pub(super) deployment: Option<usize>,
    pub(super) created: i64,
}

#[derive(Clone, Debug)]
pub(super) struct Deployment {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) template: Pod,
    pub(super) replicas: u32,
    pub(super) next: u64,
}

#[derive(Clone, Debug)]
pub(super) struct Pdb {
    pub(super) namespace: String,
    pub(super) name: String,
    pub(super) selector: tenon_core::selector::LabelSelector,
    pub(super) min_available: Option<PdbBound>,
    pub(super) max_unavailable: Option<PdbBound>,
}

/// A PDB's minAvailable/maxUnavailable: a count, or a percentage of the matching pods.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum PdbBound {
    Count(i32),
    Percent(i32),
}

impl PdbBound {
    pub(super) fn parse(v: &IntOrString, field: &str, object: &str) -> Result<Self, SimError> {
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
    pub(super) fn scaled(self, expected: i32) -> i32 {
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

/// A NodeClaim as the trace records it: what it was for and how its launch went.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimRecord {
    pub name: String,
    pub nodepool: String,
    /// `provisioning` or `disruption` (a replacement).
    pub reason: String,
    /// (instance type, zone, capacity type) it launched as; `None` when the launch failed.
    pub launched: Option<(String, String, String)>,
    /// Why the launch failed (the Event's reason), if it did.
    pub failed: Option<String>,
}

/// A disruption command as the trace records it, once its candidates are deleted.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DisruptionRecord {
    pub method: String,
    pub candidates: Vec<String>,
    pub replacements: Vec<String>,
}
