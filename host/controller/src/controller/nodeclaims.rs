//! The NodeClaim pass: every NodeClaim moves one step through Karpenter's lifecycle —
//! liveness (deleted when not Launched within 5 minutes or not Registered within 15),
//! launch (launch.rs), registration (its Node joined: labels, taints and finalizer synced),
//! initialization (Node Ready, startup taints gone) — and every NodeClaim being deleted one
//! step towards release (termination.rs).

use super::{
    Catalogs, Controller, involved_nodeclaim, lifecycle, node_of, pool_of, snapshot, termination, unix_now_ms,
};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tenon_api::NodeClaim;
use tenon_api::wellknown::condition;
use tenon_core::convert::ClusterObjects;
use tenon_core::orchestration::liveness;

impl Controller {
    pub(super) async fn lifecycle(&mut self, catalogs: &Catalogs) {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let nodes: Api<Node> = Api::all(self.client.clone());
        let all_nodes = self.stores.nodes.state();
        for nc in self.stores.nodeclaims.state() {
            let name = nc.metadata.name.clone().unwrap_or_default();
            if nc.metadata.deletion_timestamp.is_some() {
                continue;
            }
            if let Some((reason, message)) = liveness::expired(lifecycle::progress(&nc), unix_now_ms()) {
                // Karpenter's liveness: given up, the NodeClaim is deleted (its instance, if
                // any, terminated) and its pods get a new decision.
                let event = if reason == "launch_timeout" { "LaunchTimeout" } else { "RegistrationTimeout" };
                let message = format!("{message}; deleting the NodeClaim");
                self.recorder.publish(&self.client, &involved_nodeclaim(&nc), "Warning", event, &message).await;
                self.registration.insert(pool_of(&nc), (false, format!("NodeClaim {name}: {message}")));
                self.metrics.add(
                    &format!(
                        "karpenter_nodeclaims_disrupted_total{{nodepool=\"{}\",reason=\"{reason}\"}}",
                        pool_of(&nc)
                    ),
                    1.0,
                );
                match api.delete(&name, &kube::api::DeleteParams::default()).await {
                    Ok(_) => tracing::warn!(nodeclaim = %name, %reason, "liveness: deleted"),
                    Err(e) => {
                        tracing::warn!(nodeclaim = %name, error = %e, "could not delete a NodeClaim past its liveness")
                    }
                }
                continue;
            }
            if !lifecycle::has_condition(&nc, condition::LAUNCHED) {
                self.launch(&nc, catalogs);
                continue;
            }
            let Some(node) = node_of(&nc, all_nodes.iter().map(|n| &**n)) else { continue };
            let node_name = node.metadata.name.clone().unwrap_or_default();
            if !lifecycle::has_condition(&nc, condition::REGISTERED) {
                let patch = lifecycle::registration_patch(&nc, node);
                if let Err(e) = nodes.patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    tracing::warn!(node = %node_name, error = %e, "could not register node");
                    continue;
                }
                let conds = lifecycle::with_condition(&nc, condition::REGISTERED, true, "Registered", "");
                let st = json!({"status": {"nodeName": node_name, "conditions": conds}});
                match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&st)).await {
                    Ok(_) => {
                        self.registration.insert(pool_of(&nc), (true, String::new()));
                        self.metrics.add(
                            &format!("karpenter_nodeclaims_registered_total{{nodepool=\"{}\"}}", pool_of(&nc)),
                            1.0,
                        );
                        tracing::info!(nodeclaim = %name, node = %node_name, "registered");
                    }
                    Err(e) => tracing::warn!(nodeclaim = %name, error = %e, "could not write Registered"),
                }
                continue;
            }
            if !lifecycle::has_condition(&nc, condition::INITIALIZED) && lifecycle::initialized(&nc, node) {
                let mut probe = nc.as_ref().clone();
                let conds = lifecycle::with_condition(&probe, condition::INITIALIZED, true, "Initialized", "");
                probe.status.get_or_insert_with(Default::default).conditions = conds;
                let conds = lifecycle::with_condition(&probe, condition::READY, true, "Ready", "");
                let st = json!({"status": {"conditions": conds}});
                match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&st)).await {
                    Ok(_) => tracing::info!(nodeclaim = %name, "initialized"),
                    Err(e) => tracing::warn!(nodeclaim = %name, error = %e, "could not write Initialized"),
                }
            }
        }
    }

    /// Moves every NodeClaim being deleted one step towards release (termination.rs).
    pub(super) async fn terminate(&self, objects: &ClusterObjects) {
        let deleting: Vec<&NodeClaim> =
            objects.nodeclaims.iter().filter(|nc| nc.metadata.deletion_timestamp.is_some()).collect();
        if deleting.is_empty() {
            return;
        }
        // Draining needs pods and nodes, not instance types.
        let (snap, _) = snapshot(objects, &Catalogs::new());
        for nc in deleting {
            let name = nc.metadata.name.clone().unwrap_or_default();
            let node = node_of(nc, &objects.nodes);
            match termination::step(&self.client, self.provider.as_ref(), nc, node, &snap).await {
                Ok(termination::Progress::Released) => {
                    self.metrics
                        .add(&format!("karpenter_nodeclaims_terminated_total{{nodepool=\"{}\"}}", pool_of(nc)), 1.0);
                    tracing::info!(nodeclaim = %name, "terminated");
                }
                Ok(termination::Progress::Draining { waiting }) => {
                    if let (Some(message), Some(node)) = (waiting, node) {
                        let obj = super::events::Involved::cluster_scoped("v1", "Node", &node.metadata);
                        self.recorder.publish(&self.client, &obj, "Warning", "FailedDraining", &message).await;
                    }
                }
                Err(e) => tracing::warn!(nodeclaim = %name, error = %e, "termination step failed; retrying"),
            }
        }
    }
}
