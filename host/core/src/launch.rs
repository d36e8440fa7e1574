//! The offerings a NodeClaim may launch as, before its NodePool's scorer ranks them: every
//! available offering of every type its requirements and requests allow, cheapest first,
//! narrowed as Karpenter's AWS provider narrows a launch.

use crate::instancetype::InstanceType;
use crate::requirements::Requirements;
use crate::resources::Resources;
use crate::scorer::Candidate;
use tenon_api::wellknown::{self as wk, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_SIZE};

/// Resources that make a type exotic: a pod that does not ask for them should not pay for them.
const EXOTIC_RESOURCES: [&str; 5] = [
    wk::RESOURCE_NVIDIA_GPU,
    wk::RESOURCE_AMD_GPU,
    wk::RESOURCE_HABANA_GAUDI,
    wk::RESOURCE_AWS_NEURON,
    wk::RESOURCE_AWS_NEURON_CORE,
];

/// Whether `it` satisfies `reqs` and holds `requests`.
pub fn type_fits(it: &InstanceType, reqs: &Requirements, requests: &Resources) -> bool {
    requests.fits_in(it.allocatable())
        && reqs.iter().all(|r| match it.requirements.get(&r.key) {
            Some(a) => a.overlaps(r),
            None => true,
        })
}

/// Launch candidates, cheapest first (ties by type, zone and capacity type). Unless a
/// requirement sets minValues (whose flexibility these filters would undo):
/// - metal sizes and accelerator types are left out while a generic type fits;
/// - when both capacity types are allowed and offered, spot offerings pricier than the
///   cheapest on-demand one are left out.
pub fn launch_candidates<'a>(
    reqs: &Requirements,
    requests: &Resources,
    types: &'a [InstanceType],
) -> Vec<Candidate<'a>> {
    let mut candidates: Vec<Candidate<'a>> = types
        .iter()
        .filter(|it| type_fits(it, reqs, requests))
        .flat_map(|it| {
            it.offerings
                .iter()
                .filter(|o| o.allowed_by(reqs))
                .map(move |o| Candidate { instance_type: it, offering: o })
        })
        .collect();
    candidates.sort_by(|a, b| {
        a.offering
            .price
            .total_cmp(&b.offering.price)
            .then(a.instance_type.name.cmp(&b.instance_type.name))
            .then(a.offering.zone.cmp(&b.offering.zone))
            .then(a.offering.capacity_type.cmp(&b.offering.capacity_type))
    });
    if reqs.iter().any(|r| r.min_values.is_some()) {
        return candidates;
    }
    if candidates.iter().any(|c| !is_exotic(c.instance_type)) {
        candidates.retain(|c| !is_exotic(c.instance_type));
    }
    let both = reqs
        .get(LABEL_CAPACITY_TYPE)
        .is_none_or(|r| r.has(wk::CAPACITY_TYPE_SPOT) && r.has(wk::CAPACITY_TYPE_ON_DEMAND));
    let cheapest_on_demand = candidates
        .iter()
        .filter(|c| c.offering.capacity_type == wk::CAPACITY_TYPE_ON_DEMAND)
        .map(|c| c.offering.price)
        .min_by(f64::total_cmp);
    let has_spot = candidates.iter().any(|c| c.offering.capacity_type == wk::CAPACITY_TYPE_SPOT);
    if both
        && has_spot
        && let Some(limit) = cheapest_on_demand
    {
        candidates.retain(|c| c.offering.capacity_type != wk::CAPACITY_TYPE_SPOT || c.offering.price <= limit);
    }
    candidates
}

/// Metal, or carrying GPUs or Neuron devices.
fn is_exotic(it: &InstanceType) -> bool {
    it.requirements.get(LABEL_INSTANCE_SIZE).is_some_and(|r| r.values().iter().any(|s| s.contains("metal")))
        || EXOTIC_RESOURCES.iter().any(|r| it.capacity.get(r) > 0)
}
