//! Which DaemonSet pods a new node of a NodePool runs, per instance type (Karpenter's daemon
//! overhead groups): a DaemonSet that selects GPU types is overhead on those types only, so
//! it makes no CPU-only node bigger, and its host ports are taken only where it runs.

use crate::instancetype::InstanceType;
use crate::model::{DaemonSet, HostPort, NodePoolTemplate, Pod};
use crate::requirements::Requirements;
use crate::resources::Resources;
use crate::taints::{Taint, untolerated};
use std::collections::HashMap;

/// What the DaemonSets running on one set of instance types add to a node.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Group {
    pub requests: Resources,
    pub ports: Vec<HostPort>,
}

/// A NodePool's DaemonSet overhead, by instance type of its catalog.
#[derive(Clone, Debug, Default)]
pub(crate) struct DaemonOverhead {
    /// Per catalog index, its group in `groups` (group 0: no DaemonSet).
    group_of: Vec<u32>,
    groups: Vec<Group>,
}

impl DaemonOverhead {
    /// The overhead of `daemonsets` on each instance type of `tpl`.
    pub(crate) fn of(tpl: &NodePoolTemplate, daemonsets: &[DaemonSet]) -> DaemonOverhead {
        // Terms that could suit the NodePool at all, per DaemonSet: the per-type check then
        // looks only at the instance type's own labels.
        let candidates: Vec<(usize, Vec<Requirements>)> = daemonsets
            .iter()
            .enumerate()
            .filter(|(_, ds)| untolerated(&tpl.taints, &ds.pod.tolerations, false).is_none())
            .map(|(i, ds)| (i, terms(&ds.pod).into_iter().filter(|t| tpl.requirements.is_compatible(t)).collect()))
            .filter(|(_, terms): &(usize, Vec<Requirements>)| !terms.is_empty())
            .collect();
        let mut out =
            DaemonOverhead { group_of: Vec::with_capacity(tpl.instance_types.len()), groups: vec![Group::default()] };
        let mut by_members: HashMap<Vec<usize>, u32> = HashMap::from([(Vec::new(), 0)]);
        for it in tpl.instance_types.iter() {
            let members: Vec<usize> = candidates
                .iter()
                .filter(|(_, terms)| terms.iter().any(|t| intersects(it, t)))
                .map(|&(i, _)| i)
                .collect();
            let g = match by_members.get(&members) {
                Some(&g) => g,
                None => {
                    let mut group = Group::default();
                    for &i in &members {
                        group.requests.add(&daemonsets[i].pod.requests);
                        group.ports.extend(daemonsets[i].pod.host_ports.iter().cloned());
                    }
                    out.groups.push(group);
                    let g = out.groups.len() as u32 - 1;
                    by_members.insert(members, g);
                    g
                }
            };
            out.group_of.push(g);
        }
        out
    }

    /// What the DaemonSets running on catalog type `t` request.
    pub(crate) fn requests(&self, t: u32) -> &Resources {
        &self.group(t).requests
    }

    /// Whether the DaemonSets running on catalog type `t` take one of `ports`.
    pub(crate) fn takes_port(&self, t: u32, ports: &[HostPort]) -> bool {
        self.group(t).ports.iter().any(|d| ports.iter().any(|p| p.conflicts(d)))
    }

    /// The smallest overhead among `types`, resource by resource: what a NodeClaim that
    /// may launch as any of them requests beside its pods (Karpenter's `addDaemonRequests`).
    pub(crate) fn min_requests(&self, types: &[u32]) -> Resources {
        let mut groups: Vec<u32> = types.iter().map(|&t| self.group_of.get(t as usize).copied().unwrap_or(0)).collect();
        groups.sort_unstable();
        groups.dedup();
        let mut it = groups.iter().map(|&g| &self.groups[g as usize].requests);
        let Some(first) = it.next() else { return Resources::default() };
        let mut min = first.clone();
        for r in it {
            min.min_with(r);
        }
        min
    }

    /// Whether any type's DaemonSets take a host port.
    pub(crate) fn has_ports(&self) -> bool {
        self.groups.iter().any(|g| !g.ports.is_empty())
    }

    fn group(&self, t: u32) -> &Group {
        &self.groups[self.group_of.get(t as usize).copied().unwrap_or(0) as usize]
    }
}

/// Whether DaemonSet pod `pod` runs on a node with requirements `reqs` and `taints` (an
/// in-flight NodeClaim, its instance type not chosen yet).
pub(crate) fn runs_on(pod: &Pod, reqs: &Requirements, taints: &[Taint]) -> bool {
    untolerated(taints, &pod.tolerations, false).is_none() && terms(pod).iter().any(|t| reqs.is_compatible(t))
}

/// The pod's node requirements, one set per required node affinity term (any one suffices,
/// as kube-scheduler ORs them), each with its node selector.
fn terms(pod: &Pod) -> Vec<Requirements> {
    if pod.required_node_affinity.is_empty() {
        return vec![pod.node_selector.clone()];
    }
    pod.required_node_affinity
        .iter()
        .map(|term| {
            let mut r = pod.node_selector.clone();
            r.add_all(term);
            r
        })
        .collect()
}

/// Karpenter's `Intersects` with the type's requirements: keys the type does not define
/// (custom labels, the NodePool's own) are not its to refuse.
fn intersects(it: &InstanceType, term: &Requirements) -> bool {
    term.iter().all(|r| it.requirements.get(&r.key).is_none_or(|have| have.agrees_with(r)))
}
