//! The cluster's side of a node's life: the instance boots and its kubelet registers a Node
//! (with `karpenter.sh/unregistered`, the NodePool's taints and startup taints), Karpenter
//! registers it, its agents remove the startup taints and it turns Ready (Initialized);
//! DaemonSet pods start on it; kube-scheduler binds pending pods to Ready nodes with room.

use super::objects::{Phase, SimPod};
use super::{World, taint_list, unregistered_taint};
use tenon_core::taints::{Taint, untolerated};

impl World<'_> {
    pub(super) fn lifecycle(&mut self) {
        let s = self.settings.clone();
        let mut ready = Vec::new();
        for i in 0..self.nodes.len() {
            let n = &mut self.nodes[i];
            if self.now < n.next || n.phase == Phase::Ready {
                continue;
            }
            let (phase, next, reason) = match n.phase {
                Phase::Launching => (Phase::Registering, self.now + s.register_seconds, "Launched"),
                Phase::Registering => (Phase::Initializing, self.now + s.initialize_seconds, "Registered"),
                Phase::Initializing => (Phase::Ready, i64::MAX, "Initialized"),
                Phase::Ready => unreachable!(),
            };
            n.phase = phase;
            n.next = next;
            self.generation += 1;
            let mut msg = format!("{} in {} ({}, ${:.4}/h)", n.instance_type, n.zone, n.capacity_type, n.price);
            match phase {
                // The kubelet registers the Node with karpenter.sh/unregistered plus the
                // NodePool's taints and startup taints; Karpenter's registration removes
                // karpenter.sh/unregistered once it has synced labels and taints.
                Phase::Initializing => {
                    let joined: Vec<Taint> = std::iter::once(unregistered_taint())
                        .chain(n.pool_taints.iter().chain(&n.startup_taints).cloned())
                        .collect();
                    msg.push_str(&format!(
                        "; Node joined with taints [{}]; {} removed",
                        taint_list(&joined),
                        joined[0]
                    ));
                    n.taints = joined[1..].to_vec();
                }
                // The agent that owns each startup taint removes it; the node is Initialized
                // when Ready with no startup taint left.
                Phase::Ready => {
                    if !n.startup_taints.is_empty() {
                        msg.push_str(&format!("; startup taints [{}] removed", taint_list(&n.startup_taints)));
                    }
                    n.taints = n.pool_taints.clone();
                    n.last_pod_event = self.now;
                    ready.push(i);
                }
                _ => {}
            }
            let name = n.name.clone();
            self.event(reason, format!("NodeClaim/{name}"), msg);
        }
        for i in ready {
            // DaemonSet pods start on every node whose taints they tolerate and whose labels
            // their node selector and required affinity accept.
            let node = self.nodes[i].name.clone();
            let daemonsets: Vec<_> = self
                .daemonsets
                .iter()
                .filter(|ds| {
                    let n = &self.nodes[i];
                    untolerated(&n.taints, &ds.pod.tolerations, false).is_none()
                        && n.requirements.is_compatible(&ds.pod.node_selector)
                        && (ds.pod.required_node_affinity.is_empty()
                            || ds.pod.required_node_affinity.iter().any(|t| n.requirements.is_compatible(t)))
                })
                .cloned()
                .collect();
            for ds in daemonsets {
                let mut pod = ds.pod.clone();
                pod.name = format!("{}-{}", ds.name, node);
                pod.node_name = Some(node.clone());
                pod.started = Some(self.now);
                self.pods.push(SimPod { pod, deployment: None, created: self.now });
            }
        }
    }

    /// kube-scheduler: binds pending pods to Ready nodes with room.
    pub(super) fn bind(&mut self) {
        if self.bind_seen == self.generation {
            return;
        }
        self.bind_seen = self.generation;
        if !self.pods.iter().any(|p| p.pod.node_name.is_none()) || !self.nodes.iter().any(|n| n.phase == Phase::Ready) {
            return;
        }
        let mut snap = self.lend_snapshot(true);
        let plan = tenon_core::schedule(&snap, &tenon_core::scorer::PriceScorer);
        self.give_back(&mut snap);
        if !plan.nominations.is_empty() {
            self.generation += 1;
            self.bind_seen = self.generation;
        }
        for nom in plan.nominations {
            let now = self.now;
            let p = &mut self.pods[nom.pod];
            p.pod.node_name = Some(nom.node.clone());
            // The simulated kubelet starts a pod as it binds.
            p.pod.started = Some(now);
            self.pending_times.push(now - p.created);
            if let Some(n) = self.nodes.iter_mut().find(|n| n.name == nom.node) {
                n.last_pod_event = now;
            }
        }
    }
}
