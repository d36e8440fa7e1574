//! Karpenter's provisioner in the world: pending pods feed the shared batcher (idle and max
//! windows, a retry every 10 s while a pod stays pending); a closed batch is decided and
//! its NodeClaims created and launched.

use super::World;
use super::cloud::Planned;
use std::collections::BTreeSet;
use tenon_core::scorer::Scorer;

impl World<'_> {
    pub(super) fn provision(&mut self, scorer: &dyn Scorer) {
        let (idle, max) = (self.settings.batch_idle_seconds * 1000, self.settings.batch_max_seconds * 1000);
        let now = self.now_ms();
        let timer_due = self.batcher.next_event(idle, max).is_some_and(|t| now >= t);
        if self.batch_seen == self.generation && !timer_due {
            return;
        }
        self.batch_seen = self.generation;
        let pending: BTreeSet<String> =
            self.pods.iter().filter(|p| p.pod.node_name.is_none() && !p.pod.is_daemon()).map(|p| p.pod.key()).collect();
        if !self.batcher.observe(now, &pending, idle, max) {
            return;
        }
        let mut snap = self.lend_snapshot(false);
        let plan = tenon_core::schedule(&snap, scorer);
        let unschedulable: Vec<(String, &String)> =
            plan.unschedulable.iter().map(|u| (snap.pods[u.pod].key(), &u.reason)).collect();
        self.give_back(&mut snap);
        for (key, reason) in unschedulable {
            if self.explained.get(&key) != Some(reason) {
                self.explained.insert(key.clone(), reason.clone());
                self.event("FailedScheduling", format!("Pod/{key}"), reason.clone());
            }
        }
        for nc in &plan.nodeclaims {
            let planned = Planned::new(nc, &snap);
            self.create_nodeclaim(&planned, "provisioning");
        }
    }
}
