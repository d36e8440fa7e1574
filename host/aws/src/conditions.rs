//! Status conditions with Kubernetes' transition semantics: `lastTransitionTime` moves only
//! when the status does.

use crate::nodeclass::Check;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tenon_api::common::Condition;

pub(crate) fn condition(old: &[Condition], check: &Check, generation: Option<i64>, now: &Time) -> Condition {
    let status = if check.ok { "True" } else { "False" };
    let prev = old.iter().find(|c| c.type_ == check.condition);
    let last_transition_time = match prev {
        Some(p) if p.status == status => p.last_transition_time.clone(),
        _ => now.clone(),
    };
    Condition {
        type_: check.condition.to_string(),
        status: status.to_string(),
        observed_generation: generation,
        last_transition_time,
        reason: check.reason.clone(),
        message: check.message.clone(),
    }
}
