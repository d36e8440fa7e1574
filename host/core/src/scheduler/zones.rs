//! A pending pod's effective zone, as Karpenter's `computeEffectiveZoneFromPod` reports it:
//! the zones left by its own node terms (node selector and first required term), its
//! volumes' zones and the valid domains of its zonal topology constraints (DoNotSchedule
//! spreads, required pod affinity and anti-affinity), judged before anything is placed.
//! One zone is named; several are [`ZONE_FLEXIBLE`], as is a pod nothing confines; none is
//! [`ZONE_NONE`]. Preferences confine nothing: they are dropped when they cannot be met.

use super::pods::PodState;
use super::topology::Topology;
use crate::model::{ClusterSnapshot, Pod};
use crate::plan::{ZONE_FLEXIBLE, ZONE_NONE};
use std::collections::BTreeSet;
use tenon_api::wellknown::LABEL_ZONE;

/// The effective zone of pending pod `ps`, with `topo` as it stands before placement.
pub(crate) fn effective_zone(ps: &PodState, topo: &Topology, snapshot: &ClusterSnapshot) -> String {
    let pod = &snapshot.pods[ps.idx];
    let mut own = pod.node_selector.clone();
    if let Some(term) = pod.required_node_affinity.first() {
        own.add_all(term);
    }
    let own_zone = own.get(LABEL_ZONE);
    let mut topology: Option<BTreeSet<String>> = None;
    for g in ps.required_groups().filter(|&g| topo.key(g) == LABEL_ZONE) {
        let valid = topo.valid_domains(g, pod, snapshot, own_zone);
        topology = Some(match topology {
            None => valid,
            Some(t) => t.intersection(&valid).cloned().collect(),
        });
    }
    let volumes = volume_zones(pod);
    // The zones to judge: the first finite set among the pod's own, its volumes' and its
    // topology's; with none of them, nothing confines the pod.
    let candidates: Vec<&String> = match (own_zone.filter(|r| !r.is_complement()), &volumes, &topology) {
        (Some(r), _, _) => r.values().iter().collect(),
        (None, Some(v), _) => v.iter().collect(),
        (None, None, Some(t)) => t.iter().collect(),
        (None, None, None) => return ZONE_FLEXIBLE.into(),
    };
    let mut fits = candidates.into_iter().filter(|z| {
        own_zone.is_none_or(|r| r.has(z))
            && volumes.as_ref().is_none_or(|v| v.contains(*z))
            && topology.as_ref().is_none_or(|t| t.contains(*z))
    });
    match (fits.next(), fits.next()) {
        (None, _) => ZONE_NONE.into(),
        (Some(z), None) => z.clone(),
        (Some(_), Some(_)) => ZONE_FLEXIBLE.into(),
    }
}

/// The zones the pod's volumes allow, over all their alternatives; `None` when some
/// alternative does not confine the zone to a finite set (or there are no volume
/// requirements).
fn volume_zones(pod: &Pod) -> Option<BTreeSet<String>> {
    if pod.volume_requirements.is_empty() {
        return None;
    }
    let mut out = BTreeSet::new();
    for alt in &pod.volume_requirements {
        let r = alt.get(LABEL_ZONE).filter(|r| !r.is_complement())?;
        out.extend(r.values().iter().cloned());
    }
    Some(out)
}
