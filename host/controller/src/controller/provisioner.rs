//! The provisioner: batches pending pods (Karpenter's idle and max windows) and shapes the
//! cluster it decides on; `tenon_core::nodeclaim` turns the plan into NodeClaim objects.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};
use tenon_core::convert::{ClusterObjects, is_active, is_daemon};

/// Karpenter's batching: a batch opens with the first new pending pod, closes after
/// `idle` without another, or after `max` in any case.
#[derive(Debug, Default)]
pub struct Batcher {
    seen: BTreeSet<String>,
    window: Option<(Instant, Instant)>,
    /// After a decision, pods it left pending count as new again from this time.
    retry_at: Option<Instant>,
}

/// How long pods a decision could not place wait before they are tried again (sooner when
/// new pods arrive). Without it a pod no NodePool can ever serve would keep a batch open
/// all the time, which also holds disruption off.
pub const RETRY_PENDING: Duration = Duration::from_secs(5);

impl Batcher {
    /// Feeds the pending pods now; true when a batch closes and a decision is due.
    pub fn tick(&mut self, pending: &BTreeSet<String>, now: Instant, idle: Duration, max: Duration) -> bool {
        let retry = self.retry_at.is_some_and(|t| now >= t);
        let fresh = retry || pending.iter().any(|p| !self.seen.contains(p));
        if fresh {
            self.retry_at = None;
        }
        self.seen = pending.clone();
        if pending.is_empty() {
            self.window = None;
            return false;
        }
        let (start, last) = match self.window {
            None if fresh => (now, now),
            None => return false,
            Some((s, l)) => (s, if fresh { now } else { l }),
        };
        if now.duration_since(last) >= idle || now.duration_since(start) >= max {
            self.window = None;
            return true;
        }
        self.window = Some((start, last));
        false
    }

    /// A batch is collecting pods.
    pub fn open(&self) -> bool {
        self.window.is_some()
    }

    /// Pods still pending after the decision made `now` are tried again after
    /// [`RETRY_PENDING`].
    pub fn decided(&mut self, now: Instant) {
        self.retry_at = Some(now + RETRY_PENDING);
    }
}

/// Where a nominated pod goes, as Karpenter's `Nominated` Event names it: the NodeClaim
/// and, once registered, its Node (`nodeclaim/a, node/b`).
pub fn nominated_to(snap: &tenon_core::ClusterSnapshot, node: &str) -> String {
    match snap.nodes.iter().find(|n| n.name == node) {
        Some(n) if n.in_flight => format!("nodeclaim/{node}"),
        Some(n) => match &n.claim {
            Some(c) => format!("nodeclaim/{}, node/{node}", c.nodeclaim),
            None => format!("node/{node}"),
        },
        None => format!("node/{node}"),
    }
}

/// The cluster as provisioning sees it: pods on the nodes of NodeClaims being deleted count
/// as pending (Karpenter's "reschedulable pods"), so their capacity is launched while the
/// node drains instead of after. Only for provisioning: draining must see them where they are.
/// Borrows the cluster unchanged when nothing is leaving (every pass): only a drain pays for
/// the copy.
pub fn with_displaced_pods(objects: &ClusterObjects) -> std::borrow::Cow<'_, ClusterObjects> {
    let leaving: BTreeSet<&str> = objects
        .nodeclaims
        .iter()
        .filter(|nc| nc.metadata.deletion_timestamp.is_some())
        .filter_map(|nc| nc.status.as_ref().and_then(|s| s.node_name.as_deref()))
        .collect();
    if leaving.is_empty() {
        return std::borrow::Cow::Borrowed(objects);
    }
    let mut out = objects.clone();
    for p in &mut out.pods {
        let on_leaving = p.spec.as_ref().and_then(|s| s.node_name.as_deref()).is_some_and(|n| leaving.contains(n));
        if !on_leaving || is_daemon(p) || !is_active(p) || p.metadata.deletion_timestamp.is_some() {
            continue;
        }
        if let Some(spec) = p.spec.as_mut() {
            spec.node_name = None;
        }
        let status = p.status.get_or_insert_with(Default::default);
        status.phase = Some("Pending".into());
        status.conditions.get_or_insert_with(Vec::new).push(k8s_openapi::api::core::v1::PodCondition {
            type_: "PodScheduled".into(),
            status: "False".into(),
            reason: Some("Unschedulable".into()),
            ..Default::default()
        });
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn nominations_name_the_nodeclaim_and_its_node_as_karpenter_does() {
        use tenon_core::model::{ClaimInfo, Node};
        let node = |name: &str, in_flight: bool, claim: Option<&str>| Node {
            name: name.into(),
            in_flight,
            claim: claim.map(|c| ClaimInfo { nodeclaim: c.into(), ..Default::default() }),
            ..Default::default()
        };
        let snap = tenon_core::ClusterSnapshot {
            nodes: vec![
                node("lab-general-abc12", true, Some("lab-general-abc12")),
                node("ip-10-0-1-2.ec2.internal", false, Some("lab-general-def34")),
                node("unmanaged", false, None),
            ],
            ..Default::default()
        };
        assert_eq!(super::nominated_to(&snap, "lab-general-abc12"), "nodeclaim/lab-general-abc12");
        assert_eq!(
            super::nominated_to(&snap, "ip-10-0-1-2.ec2.internal"),
            "nodeclaim/lab-general-def34, node/ip-10-0-1-2.ec2.internal"
        );
        assert_eq!(super::nominated_to(&snap, "unmanaged"), "node/unmanaged");
    }

    use super::*;

    #[test]
    fn batches_close_after_idle_or_max() {
        let (idle, max) = (Duration::from_secs(1), Duration::from_secs(10));
        let t0 = Instant::now();
        let mut b = Batcher::default();
        let one: BTreeSet<String> = ["a".to_string()].into();
        assert!(!b.tick(&one, t0, idle, max), "a batch opens");
        assert!(!b.tick(&one, t0 + Duration::from_millis(900), idle, max));
        assert!(b.tick(&one, t0 + Duration::from_millis(1000), idle, max), "idle for 1 s");
        assert!(!b.tick(&one, t0 + Duration::from_secs(2), idle, max), "the same pods do not reopen it");
        // New pods keep arriving every 0.5 s: the batch closes at 10 s.
        let mut b = Batcher::default();
        let mut closed = None;
        for i in 0..30u64 {
            let pods: BTreeSet<String> = (0..=i).map(|n| n.to_string()).collect();
            if b.tick(&pods, t0 + Duration::from_millis(500 * i), idle, max) {
                closed = Some(i);
                break;
            }
        }
        assert_eq!(closed, Some(20), "closed at 10 s");
    }

    #[test]
    fn pods_a_decision_left_pending_are_retried_after_a_pause() {
        let (idle, max) = (Duration::from_secs(1), Duration::from_secs(10));
        let t0 = Instant::now();
        let mut b = Batcher::default();
        let one: BTreeSet<String> = ["impossible".to_string()].into();
        b.tick(&one, t0, idle, max);
        assert!(b.tick(&one, t0 + Duration::from_secs(1), idle, max));
        b.decided(t0 + Duration::from_secs(1));
        for ms in [1500, 3000, 5900] {
            assert!(!b.tick(&one, t0 + Duration::from_millis(ms), idle, max));
            assert!(!b.open(), "no batch held open by a pod already decided on ({ms} ms)");
        }
        assert!(!b.tick(&one, t0 + Duration::from_secs(6), idle, max), "retried: a new window opens");
        assert!(b.open());
        assert!(b.tick(&one, t0 + Duration::from_secs(7), idle, max));
        // A new pod does not wait for the retry.
        b.decided(t0 + Duration::from_secs(7));
        let two: BTreeSet<String> = ["impossible".to_string(), "new".to_string()].into();
        b.tick(&two, t0 + Duration::from_millis(7500), idle, max);
        assert!(b.open());
    }

    #[test]
    fn pods_of_a_deleting_nodeclaim_count_as_pending_for_provisioning_only() {
        let nc: tenon_api::NodeClaim = serde_yaml::from_str(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {name: a, deletionTimestamp: \"2026-11-30T00:00:00Z\"}\nspec:\n  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}\n  requirements: []\nstatus: {nodeName: node-a}\n",
        )
        .unwrap();
        let pod = |name: &str, node: &str, owner: &str| -> k8s_openapi::api::core::v1::Pod {
            serde_yaml::from_str(&format!(
                "metadata: {{name: {name}, namespace: d, ownerReferences: [{{apiVersion: apps/v1, kind: {owner}, name: o, uid: u}}]}}\nspec: {{nodeName: {node}, containers: [{{name: c}}]}}\nstatus: {{phase: Running}}\n"
            ))
            .unwrap()
        };
        let objects = ClusterObjects {
            nodeclaims: vec![nc],
            pods: vec![
                pod("web", "node-a", "ReplicaSet"),
                pod("agent", "node-a", "DaemonSet"),
                pod("other", "node-b", "ReplicaSet"),
            ],
            ..Default::default()
        };
        let view = with_displaced_pods(&objects);
        let pending: Vec<&str> = view
            .pods
            .iter()
            .filter(|p| tenon_core::convert::is_provisionable(p))
            .filter_map(|p| p.metadata.name.as_deref())
            .collect();
        assert_eq!(pending, vec!["web"], "DaemonSet pods stay; other nodes' pods stay");
        assert!(objects.pods[0].spec.as_ref().unwrap().node_name.is_some(), "the original view is untouched");
    }
}
