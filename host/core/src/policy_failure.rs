//! What a policy set reports beside its decisions: the calls that did not decide, and what
//! decided instead. The simulator shows them on its timeline; the controller logs them.

/// A policy call whose answer was not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyFailure {
    /// The decision's time, seconds since the epoch.
    pub at: i64,
    pub nodepool: String,
    pub policy: String,
    /// `scoring`, `consolidation` or `budget`.
    pub hook: String,
    /// `timeout`, `trap`, `out_of_memory`, `invalid_output`, `policy_error`, `load_error`,
    /// or `circuit_open` when the policy was skipped after repeated failures.
    pub kind: String,
    pub message: String,
    /// What decided instead, e.g. "price order" or "zero disruptions".
    pub fallback: String,
}
