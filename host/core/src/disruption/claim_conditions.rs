//! The `Consolidatable` and `Drifted` conditions on each NodeClaim, as Karpenter's NodeClaim
//! disruption controller keeps them: set while they hold, removed (never False) once they do
//! not. A round judges its candidates; a NodeClaim that is no candidate because it is not
//! initialized (or not launched) loses the condition that needs it, as in Karpenter.

use super::candidates::Candidate;
use crate::model::ClusterSnapshot;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::collections::BTreeMap;
use tenon_api::NodeClaim;
use tenon_api::common::Condition;
use tenon_api::wellknown::condition;

/// Sets condition `t` in `conds`; its transition time moves only when the status does.
pub fn set_condition(
    conds: &mut Vec<Condition>,
    t: &str,
    ok: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) {
    let status = if ok { "True" } else { "False" };
    match conds.iter_mut().find(|c| c.type_ == t) {
        Some(c) if c.status == status => {
            c.reason = reason.into();
            c.message = message.into();
            c.observed_generation = generation;
        }
        found => {
            let fresh = Condition {
                type_: t.into(),
                status: status.into(),
                observed_generation: generation,
                last_transition_time: now.clone(),
                reason: reason.into(),
                message: message.into(),
            };
            match found {
                Some(c) => *c = fresh,
                None => conds.push(fresh),
            }
        }
    }
}

/// `conds` with `Consolidatable` and `Drifted` as a round judged candidate `c`.
pub fn judged(mut conds: Vec<Condition>, c: &Candidate, generation: Option<i64>, now: &Time) -> Vec<Condition> {
    if c.consolidatable {
        set_condition(&mut conds, condition::CONSOLIDATABLE, true, "Consolidatable", "", generation, now);
    } else {
        conds.retain(|x| x.type_ != condition::CONSOLIDATABLE);
    }
    match &c.drifted {
        Some(drift) => {
            // `AMIDrift: image … is no longer selected`: a condition reason is one word.
            let (reason, message) = drift.split_once(": ").unwrap_or((drift.as_str(), ""));
            set_condition(&mut conds, condition::DRIFTED, true, reason, message, generation, now)
        }
        None => conds.retain(|x| x.type_ != condition::DRIFTED),
    }
    conds
}

/// `conds` of a NodeClaim the round did not judge: without `Consolidatable` unless it is
/// initialized, without `Drifted` unless it is launched; otherwise as they were.
pub fn unjudged(mut conds: Vec<Condition>) -> Vec<Condition> {
    let holds = |conds: &[Condition], t: &str| conds.iter().any(|c| c.type_ == t && c.status == "True");
    if !holds(&conds, condition::INITIALIZED) {
        conds.retain(|x| x.type_ != condition::CONSOLIDATABLE);
    }
    if !holds(&conds, condition::LAUNCHED) {
        conds.retain(|x| x.type_ != condition::DRIFTED);
    }
    conds
}

/// The NodeClaims (not being deleted) whose conditions a round changes, with their new
/// conditions: candidates as judged, the others by [`unjudged`].
pub fn changed<'a>(
    nodeclaims: impl IntoIterator<Item = &'a NodeClaim>,
    snap: &ClusterSnapshot,
    candidates: &[Candidate],
    now: &Time,
) -> Vec<(&'a NodeClaim, Vec<Condition>)> {
    let by_name: BTreeMap<&str, &Candidate> =
        candidates.iter().filter_map(|c| Some((snap.nodes[c.node].claim.as_ref()?.nodeclaim.as_str(), c))).collect();
    nodeclaims
        .into_iter()
        .filter(|nc| nc.metadata.deletion_timestamp.is_none() && crate::nodeclaim::is_managed(nc))
        .filter_map(|nc| {
            let before = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
            let name = nc.metadata.name.as_deref()?;
            let after = match by_name.get(name) {
                Some(c) => judged(before.clone(), c, nc.metadata.generation, now),
                None => unjudged(before.clone()),
            };
            (after != before).then_some((nc, after))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ConsolidationPolicy;

    fn candidate(consolidatable: bool, drifted: Option<&str>) -> Candidate {
        Candidate {
            node: 0,
            nodepool: 0,
            pods: vec![],
            cost: 0.0,
            reschedule_cost: 1.0,
            price: 1.0,
            empty: true,
            consolidatable,
            consolidation_policy: ConsolidationPolicy::WhenEmptyOrUnderutilized,
            drifted: drifted.map(String::from),
            expired: false,
            blocked: None,
            spot: false,
        }
    }

    fn now() -> Time {
        Time("2026-01-01T00:00:00Z".parse().unwrap())
    }

    fn statuses(c: &[Condition]) -> Vec<(&str, &str)> {
        c.iter().map(|c| (c.type_.as_str(), c.status.as_str())).collect()
    }

    #[test]
    fn a_candidate_that_stops_being_consolidatable_or_drifted_loses_the_condition() {
        let set = judged(vec![], &candidate(true, Some("AMIDrift: image gone")), Some(1), &now());
        assert_eq!(statuses(&set), [("Consolidatable", "True"), ("Drifted", "True")]);
        assert_eq!((set[1].reason.as_str(), set[1].message.as_str()), ("AMIDrift", "image gone"));
        let cleared = judged(set, &candidate(false, None), Some(1), &now());
        assert_eq!(statuses(&cleared), []);
    }

    #[test]
    fn a_nodeclaim_no_longer_initialized_or_launched_loses_what_needed_it() {
        let mut conds = judged(vec![], &candidate(true, Some("NodePoolDrifted")), Some(1), &now());
        set_condition(&mut conds, condition::LAUNCHED, true, "Launched", "", Some(1), &now());
        assert_eq!(statuses(&unjudged(conds.clone())), [("Drifted", "True"), ("Launched", "True")]);
        set_condition(&mut conds, condition::INITIALIZED, true, "Initialized", "", Some(1), &now());
        assert_eq!(unjudged(conds.clone()), conds, "initialized and launched: left as they are");
        conds.retain(|c| c.type_ != condition::LAUNCHED);
        assert_eq!(statuses(&unjudged(conds)), [("Consolidatable", "True"), ("Initialized", "True")]);
    }
}
