//! Which consolidation plans of a round go ahead. The default approves every plan in
//! Karpenter's order; a Wasm consolidation policy implements the same trait.

use super::Method;

/// A node a plan would remove, as a policy sees it (and as policy fixtures write it).
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct CandidateView {
    pub node: String,
    pub nodepool: String,
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
    /// USD per hour.
    pub price: f64,
    pub age_seconds: i64,
    /// Requested / allocatable, 0..1.
    pub cpu_utilisation: f64,
    pub memory_utilisation: f64,
    pub pods: usize,
    pub disruption_cost: f64,
}

/// A consolidation plan, as a policy sees it.
#[derive(Clone, Debug)]
pub struct PlanView {
    pub method: Method,
    pub candidates: Vec<CandidateView>,
    /// Cheapest replacement option (name, USD/hour), if the plan launches one.
    pub replacement: Option<(String, f64)>,
    pub savings_per_hour: f64,
    pub now: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Approve,
    Reject(String),
}

/// A consolidator's answer: plan indices in preferred order (others follow in the given
/// order), and a verdict per plan (missing verdicts approve).
#[derive(Clone, Debug, Default)]
pub struct Review {
    pub order: Vec<usize>,
    pub verdicts: Vec<Verdict>,
}

pub trait Consolidator {
    fn review(&self, plans: &[PlanView]) -> Review;
    fn name(&self) -> &str;
}

/// Karpenter's behaviour: every plan approved, in the order the methods produced them.
#[derive(Clone, Copy, Debug, Default)]
pub struct ApproveAll;

impl Consolidator for ApproveAll {
    fn review(&self, plans: &[PlanView]) -> Review {
        Review { order: (0..plans.len()).collect(), verdicts: vec![Verdict::Approve; plans.len()] }
    }

    fn name(&self) -> &str {
        "approve-all"
    }
}
