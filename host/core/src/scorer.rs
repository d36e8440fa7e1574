//! How the instance offerings of a new NodeClaim are ranked. The default is Karpenter's:
//! cheapest compatible offering first. A Wasm scoring policy implements the same trait.

use crate::instancetype::{InstanceType, Offering};
use crate::resources::Resources;

/// One offering a NodeClaim could launch as.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    pub instance_type: &'a InstanceType,
    pub offering: &'a Offering,
}

/// Everything a scorer sees for one NodeClaim.
#[derive(Debug)]
pub struct ScoringInput<'a> {
    pub nodepool: &'a str,
    /// The snapshot's time, seconds since the epoch.
    pub now: i64,
    /// Requests of the NodeClaim's pods plus DaemonSet overhead.
    pub requests: &'a Resources,
    pub pod_count: usize,
    /// Every available offering compatible with the NodeClaim, in ascending price order
    /// (ties by instance type name, zone, capacity type).
    pub candidates: Vec<Candidate<'a>>,
}

/// Ranks candidates. The result lists candidate indices best first; indices it leaves out
/// follow in the given order, duplicates and out-of-range indices are ignored.
pub trait Scorer {
    fn rank(&self, input: &ScoringInput<'_>) -> Vec<usize>;

    /// A name for explanations and metrics.
    fn name(&self) -> &str;
}

/// Karpenter's ranking: the given price order.
#[derive(Clone, Copy, Debug, Default)]
pub struct PriceScorer;

impl Scorer for PriceScorer {
    fn rank(&self, input: &ScoringInput<'_>) -> Vec<usize> {
        (0..input.candidates.len()).collect()
    }

    fn name(&self) -> &str {
        "price"
    }
}

/// Completes a scorer's answer into a permutation: its valid, first-seen indices, then the
/// rest in the given order.
pub fn normalise_ranking(ranking: &[usize], n: usize) -> Vec<usize> {
    let mut seen = vec![false; n];
    let mut out = Vec::with_capacity(n);
    for i in ranking.iter().copied().chain(0..n) {
        if i < n && !seen[i] {
            seen[i] = true;
            out.push(i);
        }
    }
    out
}
