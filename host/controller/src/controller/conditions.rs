//! A NodeClaim's status conditions as Karpenter keeps them: a transition time that moves
//! only when the status does, Unknown for a step still being tried, and the generation each
//! condition was observed at.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tenon_api::NodeClaim;
use tenon_api::common::Condition;

pub fn now_time() -> Time {
    Time(jiff_now())
}

fn jiff_now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::now()
}

pub fn has_condition(nc: &NodeClaim, t: &str) -> bool {
    nc.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == t && c.status == "True"))
}

/// Sets condition `t` in `conds`, keeping its transition time when the status is unchanged.
pub fn set_condition(
    conds: &mut Vec<Condition>,
    t: &str,
    ok: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
) {
    tenon_core::disruption::claim_conditions::set_condition(conds, t, ok, reason, message, generation, &now_time())
}

/// `nc`'s conditions without those of type `t`.
pub fn without_condition(nc: &NodeClaim, t: &str) -> Vec<Condition> {
    let conds = nc.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    observed_now(nc, conds.iter().filter(|c| c.type_ != t).cloned().collect())
}

/// The NodeClaim's conditions with `t` Unknown for `reason` (Karpenter's way of saying a
/// step is still being tried); its transition time stays when it was Unknown already.
pub fn with_unknown_condition(nc: &NodeClaim, t: &str, reason: &str, message: &str) -> Vec<Condition> {
    let mut conds = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    match conds.iter_mut().find(|c| c.type_ == t) {
        Some(c) if c.status == "Unknown" => {
            c.reason = reason.into();
            c.message = message.into();
            c.observed_generation = nc.metadata.generation;
        }
        _ => {
            set_condition(&mut conds, t, false, reason, message, nc.metadata.generation);
            if let Some(c) = conds.iter_mut().find(|c| c.type_ == t) {
                c.status = "Unknown".into();
            }
        }
    }
    observed_now(nc, conds)
}

/// Whether the NodeClaim's condition `t` has status `status` ("True", "False", "Unknown").
pub fn condition_is(nc: &NodeClaim, t: &str, status: &str) -> bool {
    nc.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == t && c.status == status))
}

/// When condition `t` last changed status (seconds since the epoch), if the NodeClaim has it.
pub fn condition_since(nc: &NodeClaim, t: &str) -> Option<i64> {
    let c = nc.status.as_ref()?.conditions.iter().find(|c| c.type_ == t)?;
    Some(c.last_transition_time.0.as_second())
}

/// The NodeClaim's conditions with `t` set.
pub fn with_condition(nc: &NodeClaim, t: &str, ok: bool, reason: &str, message: &str) -> Vec<Condition> {
    let mut conds = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    set_condition(&mut conds, t, ok, reason, message, nc.metadata.generation);
    observed_now(nc, conds)
}

/// Every condition of a status write is observed at the object's current generation
/// (Karpenter's status writes carry all of them).
fn observed_now(nc: &NodeClaim, mut conds: Vec<Condition>) -> Vec<Condition> {
    if let Some(g) = nc.metadata.generation {
        for c in &mut conds {
            c.observed_generation = Some(g);
        }
    }
    conds
}

/// The lifecycle conditions Karpenter starts every NodeClaim with, Unknown until their step
/// is done; liveness counts from their transition times.
pub const LIFECYCLE: [&str; 4] = [
    tenon_api::wellknown::condition::LAUNCHED,
    tenon_api::wellknown::condition::REGISTERED,
    tenon_api::wellknown::condition::INITIALIZED,
    tenon_api::wellknown::condition::READY,
];

/// `nc`'s conditions with the lifecycle ones it lacks added as Unknown, or None when it has
/// them all.
pub fn with_lifecycle_conditions(nc: &NodeClaim) -> Option<Vec<Condition>> {
    let mut conds = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    let missing: Vec<&str> = LIFECYCLE.into_iter().filter(|t| !conds.iter().any(|c| c.type_ == *t)).collect();
    if missing.is_empty() {
        return None;
    }
    for t in missing {
        conds.push(Condition {
            type_: t.into(),
            status: "Unknown".into(),
            observed_generation: nc.metadata.generation,
            last_transition_time: now_time(),
            reason: "AwaitingReconciliation".into(),
            message: "object is awaiting reconciliation".into(),
        });
    }
    Some(conds)
}

/// `nc`'s conditions observed at its current generation (status, reason and transition time
/// untouched), or None when they all are already.
pub fn at_current_generation(nc: &NodeClaim) -> Option<Vec<Condition>> {
    let generation = nc.metadata.generation?;
    let mut conds = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    let stale = conds.iter().any(|c| c.observed_generation != Some(generation));
    for c in &mut conds {
        c.observed_generation = Some(generation);
    }
    stale.then_some(conds)
}

/// `patch` (a status patch of `meta`'s object) made conditional on the version it was read
/// at. A conditions list written from a stale copy would drop what another reconciler wrote
/// since (reconcilers run concurrently); the API server answers 409 instead, and the next
/// reconcile reads again.
pub fn locked(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    mut patch: serde_json::Value,
) -> serde_json::Value {
    patch["metadata"]["resourceVersion"] = serde_json::json!(meta.resource_version);
    patch
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenon_api::wellknown::condition;

    fn claim(generation: i64) -> NodeClaim {
        let mut nc: NodeClaim = serde_yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: c}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}\n  requirements: []\n",
        )
        .unwrap();
        nc.metadata.generation = Some(generation);
        nc
    }

    #[test]
    fn a_launch_failure_leaves_launched_unknown() {
        let conds = with_unknown_condition(&claim(1), condition::LAUNCHED, "LaunchFailed", "no subnet");
        assert_eq!((conds[0].status.as_str(), conds[0].reason.as_str()), ("Unknown", "LaunchFailed"));
    }

    #[test]
    fn conditions_keep_their_transition_time_when_unchanged() {
        let nc = claim(1);
        let first = with_condition(&nc, condition::LAUNCHED, true, "Launched", "");
        let mut nc2 = nc.clone();
        nc2.status.get_or_insert_with(Default::default).conditions = first.clone();
        let again = with_condition(&nc2, condition::LAUNCHED, true, "Launched", "");
        assert_eq!(again[0].last_transition_time, first[0].last_transition_time);
        assert_eq!(with_condition(&nc2, condition::REGISTERED, true, "Registered", "").len(), 2);
        // Unknown again with another reason (a retry): the clock keeps running from the first.
        let mut retry = nc.clone();
        retry.status.get_or_insert_with(Default::default).conditions =
            with_unknown_condition(&nc, condition::LAUNCHED, "LaunchFailed", "a");
        let t = retry.status.as_ref().unwrap().conditions[0].last_transition_time.clone();
        std::thread::sleep(std::time::Duration::from_millis(5));
        let again = with_unknown_condition(&retry, condition::LAUNCHED, "SubnetResolutionFailed", "b");
        assert_eq!((again[0].reason.as_str(), &again[0].last_transition_time), ("SubnetResolutionFailed", &t));
    }

    #[test]
    fn a_new_nodeclaim_starts_with_its_lifecycle_conditions_unknown() {
        let nc = claim(1);
        let conds = with_lifecycle_conditions(&nc).expect("none yet");
        let types: Vec<&str> = conds.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(types, LIFECYCLE);
        assert!(conds.iter().all(|c| c.status == "Unknown" && c.observed_generation == Some(1)));
        let mut started = nc.clone();
        started.status.get_or_insert_with(Default::default).conditions = conds;
        assert_eq!(with_lifecycle_conditions(&started), None);
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/suite_test.go:185
    #[test]
    fn conditions_follow_the_generation_without_changing_their_status() {
        let mut nc = claim(1);
        let mut conds = Vec::new();
        for t in LIFECYCLE {
            set_condition(&mut conds, t, true, t, "", Some(1));
        }
        nc.status.get_or_insert_with(Default::default).conditions = conds.clone();
        assert_eq!(at_current_generation(&nc), None, "all at generation 1");
        nc.metadata.generation = Some(2);
        let refreshed = at_current_generation(&nc).expect("generation 2 is newer");
        for (before, after) in conds.iter().zip(&refreshed) {
            assert_eq!(after.observed_generation, Some(2));
            assert_eq!(
                (&after.status, &after.reason, &after.last_transition_time),
                (&before.status, &before.reason, &before.last_transition_time)
            );
        }
        // Any status write carries every condition at the current generation.
        let written = with_condition(&nc, condition::DRAINED, true, "Drained", "");
        assert!(written.iter().all(|c| c.observed_generation == Some(2)));
    }
}
