//! NodeClaim rules.

use super::rules::{
    check_duration, check_nillable_duration, check_node_class_ref, check_requirements, check_resource_list,
    check_taints,
};
use super::{FieldPath, Problem, Report};
use crate::nodeclaim::NodeClaim;

/// Validates a NodeClaim, returning every problem.
pub fn validate_nodeclaim(nc: &NodeClaim) -> Vec<Problem> {
    let mut r = Report::default();
    let spec = FieldPath::root("spec");
    let s = &nc.spec;
    check_requirements(&mut r, &spec.field("requirements"), &s.requirements, false);
    check_taints(&mut r, &spec.field("taints"), &s.taints);
    check_taints(&mut r, &spec.field("startupTaints"), &s.startup_taints);
    check_resource_list(&mut r, &spec.field("resources").field("requests"), &s.resources.requests);
    check_node_class_ref(&mut r, &spec.field("nodeClassRef"), s.node_class_ref.as_ref());
    check_nillable_duration(&mut r, &spec.field("expireAfter"), &s.expire_after);
    if let Some(tgp) = &s.termination_grace_period {
        check_duration(&mut r, &spec.field("terminationGracePeriod"), tgp);
    }
    r.into_problems()
}
