//! What the scheduling simulation decides.

use crate::model::ClusterSnapshot;
use crate::requirements::Requirements;
use crate::resources::Resources;
use std::collections::BTreeMap;
use std::fmt::Write;

/// A NodeClaim to create.
#[derive(Clone, Debug, PartialEq)]
pub struct NewNodeClaim {
    /// Index into `ClusterSnapshot::nodepools`.
    pub nodepool: usize,
    pub nodepool_name: String,
    /// The placeholder hostname pods were simulated against.
    pub hostname: String,
    /// Requirements the node must satisfy: the NodePool's, the pods', topology's, and
    /// `node.kubernetes.io/instance-type In [options]`.
    pub requirements: Requirements,
    /// Instance types it may launch as, best first, as indices into the NodePool's catalog.
    pub instance_types: Vec<u32>,
    /// Its offerings as the NodePool's scorer ranked them, best first: (index into the
    /// NodePool's catalog, index into that type's offerings), for the types above only.
    pub offerings: Vec<(u32, u32)>,
    /// Pods plus DaemonSet overhead.
    pub requests: Resources,
    /// Indices into `ClusterSnapshot::pods`.
    pub pods: Vec<usize>,
    /// Some minValues in `requirements` were lowered to what the options offer
    /// (`ClusterSnapshot::min_values_best_effort`).
    pub min_values_relaxed: bool,
}

impl NewNodeClaim {
    pub fn instance_type_names<'a>(&self, snapshot: &'a ClusterSnapshot) -> Vec<&'a str> {
        let cat = &snapshot.nodepools[self.nodepool].instance_types;
        self.instance_types.iter().map(|&i| cat[i as usize].name.as_str()).collect()
    }
}

/// A pod that fits capacity that exists or is already on its way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nomination {
    pub pod: usize,
    pub node: String,
}

/// A pod no NodePool can serve, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unschedulable {
    pub pod: usize,
    pub reason: String,
}

/// The zone a pending pod is confined to before anything is placed (Karpenter's effective
/// zone): a zone's name, [`ZONE_FLEXIBLE`] or [`ZONE_NONE`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PendingZone {
    pub pod: usize,
    pub zone: String,
}

/// The effective zone of a pod that could go to several zones.
pub const ZONE_FLEXIBLE: &str = "flexible";
/// The effective zone of a pod no zone can take.
pub const ZONE_NONE: &str = "none";

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProvisioningPlan {
    pub nodeclaims: Vec<NewNodeClaim>,
    pub nominations: Vec<Nomination>,
    pub unschedulable: Vec<Unschedulable>,
    /// Every pending pod's effective zone, in pod index order.
    pub pending_zones: Vec<PendingZone>,
    /// NodePools whose requirements filter out every instance type they could launch.
    pub incompatible_nodepools: Vec<String>,
}

impl ProvisioningPlan {
    /// How many pending pods each effective zone has.
    pub fn pending_pods_by_zone(&self) -> BTreeMap<String, usize> {
        let mut out = BTreeMap::new();
        for z in &self.pending_zones {
            *out.entry(z.zone.clone()).or_insert(0) += 1;
        }
        out
    }

    /// A complete, stable text rendering: equal plans render equally, byte for byte.
    pub fn render(&self, snapshot: &ClusterSnapshot) -> String {
        let mut s = String::new();
        for nc in &self.nodeclaims {
            let pods: Vec<String> = nc.pods.iter().map(|&p| snapshot.pods[p].key()).collect();
            let _ = writeln!(
                s,
                "nodeclaim {} {} requests [{}] pods [{}]",
                nc.nodepool_name,
                nc.hostname,
                nc.requests,
                pods.join(" ")
            );
            let _ = writeln!(s, "  requirements {}", nc.requirements);
        }
        for n in &self.nominations {
            let _ = writeln!(s, "nominate {} -> {}", snapshot.pods[n.pod].key(), n.node);
        }
        for u in &self.unschedulable {
            let _ = writeln!(s, "unschedulable {}: {}", snapshot.pods[u.pod].key(), u.reason);
        }
        for z in &self.pending_zones {
            let _ = writeln!(s, "zone {}: {}", snapshot.pods[z.pod].key(), z.zone);
        }
        s
    }
}
