//! Karpenter's validation of a decided disruption command, [`VALIDATION_MS`] after the
//! decision and before anything is marked or launched: are its candidates still disruptable
//! as decided (and, for a consolidation, does a fresh simulation still call for it)?
//!
//! [`VALIDATION_MS`]: super::command::VALIDATION_MS

use crate::disruption::{Method, PolicySet, revalidate, revalidate_emptiness};
use crate::model::ClusterSnapshot;
use std::collections::{BTreeMap, BTreeSet};

/// Why the candidates (by NodeClaim) may no longer be disrupted as `method` decided, over a
/// snapshot of now, if so: a candidate gone, being deleted, blocked (a PDB, do-not-disrupt),
/// consolidatable no more (its pods changed), or no longer empty.
pub fn still_invalid(snap: &ClusterSnapshot, method: Method, candidates: &[(String, String)]) -> Option<String> {
    let mut why = why_invalid(snap, method, candidates);
    candidates.iter().find_map(|(nc, _)| why.remove(nc))
}

/// [`still_invalid`] for each candidate on its own: the NodeClaims that no longer hold, and why.
fn why_invalid(snap: &ClusterSnapshot, method: Method, candidates: &[(String, String)]) -> BTreeMap<String, String> {
    let ours: BTreeSet<&str> = candidates.iter().map(|(nc, _)| nc.as_str()).collect();
    let mut why = BTreeMap::new();
    let mut present = BTreeSet::new();
    for n in &snap.nodes {
        if let Some(c) = n.claim.as_ref().filter(|c| ours.contains(c.nodeclaim.as_str())) {
            if c.disrupting {
                why.insert(c.nodeclaim.clone(), format!("candidate {} is being disrupted already", c.nodeclaim));
            }
            present.insert(c.nodeclaim.as_str());
        }
    }
    for gone in ours.iter().filter(|nc| !present.contains(*nc)) {
        why.insert(gone.to_string(), format!("candidate {gone} is gone"));
    }
    let (cands, blocked) = crate::disruption::candidates::candidates(snap);
    let claim_of = |node: usize| snap.nodes[node].claim.as_ref().filter(|c| ours.contains(c.nodeclaim.as_str()));
    for b in &blocked {
        if let Some(c) = claim_of(b.node) {
            why.entry(c.nodeclaim.clone()).or_insert_with(|| format!("{}: {}", c.nodeclaim, b.reason));
        }
    }
    let consolidating = matches!(method, Method::MultiNodeConsolidation | Method::SingleNodeConsolidation);
    for c in &cands {
        let Some(claim) = claim_of(c.node) else { continue };
        let reason = if let Some(blocked) = &c.blocked {
            blocked.clone()
        } else if (consolidating || method == Method::Emptiness) && !c.consolidatable {
            "pods changed since the decision (consolidateAfter restarted)".into()
        } else if method == Method::Emptiness && !c.empty {
            "no longer empty".into()
        } else {
            continue;
        };
        why.entry(claim.nodeclaim.clone()).or_insert_with(|| format!("{}: {reason}", claim.nodeclaim));
    }
    why
}

/// Karpenter's validation, [`VALIDATION_MS`](super::command::VALIDATION_MS) after the decision and before anything is
/// marked or launched, over a snapshot of now with the other commands [`hold`](super::command::hold): why the
/// command no longer holds ([`still_invalid`], then `disruption::revalidate`), if so.
pub fn validate(
    snap: &ClusterSnapshot,
    policies: &dyn PolicySet,
    method: Method,
    candidates: &[(String, String)],
    replacement_types: &[Vec<String>],
) -> Option<String> {
    if let Some(why) = still_invalid(snap, method, candidates) {
        return Some(why);
    }
    revalidate(snap, policies, method, &node_indices(snap, candidates), replacement_types)
}

/// [`validate`] as the shells run it: the candidates to go ahead with, or why none. An
/// emptiness command goes ahead with those of its candidates still empty, not nominated and
/// within budget (Karpenter's emptiness validator drops the others); any other command holds
/// whole or not at all.
pub fn validate_keeping(
    snap: &ClusterSnapshot,
    policies: &dyn PolicySet,
    method: Method,
    candidates: &[(String, String)],
    replacement_types: &[Vec<String>],
) -> Result<Vec<(String, String)>, String> {
    if method != Method::Emptiness {
        return match validate(snap, policies, method, candidates, replacement_types) {
            Some(why) => Err(why),
            None => Ok(candidates.to_vec()),
        };
    }
    let mut invalid = why_invalid(snap, method, candidates);
    let still: Vec<(String, String)> = candidates.iter().filter(|(nc, _)| !invalid.contains_key(nc)).cloned().collect();
    let kept: BTreeSet<&str> = revalidate_emptiness(snap, policies, &node_indices(snap, &still))
        .into_iter()
        .filter_map(|i| snap.nodes[i].claim.as_ref().map(|c| c.nodeclaim.as_str()))
        .collect();
    let kept: Vec<(String, String)> = still.into_iter().filter(|(nc, _)| kept.contains(nc.as_str())).collect();
    if !kept.is_empty() {
        return Ok(kept);
    }
    Err(candidates
        .iter()
        .find_map(|(nc, _)| invalid.remove(nc))
        .unwrap_or_else(|| "every candidate is nominated for a pending pod or over its NodePool's budget".into()))
}

/// The snapshot indices of the candidates' nodes.
fn node_indices(snap: &ClusterSnapshot, candidates: &[(String, String)]) -> Vec<usize> {
    snap.nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.claim.as_ref().is_some_and(|c| candidates.iter().any(|(nc, _)| *nc == c.nodeclaim)))
        .map(|(i, _)| i)
        .collect()
}
