//! The NodeClaim pass: every NodeClaim moves one step through Karpenter's lifecycle —
//! liveness (deleted when not Launched within 5 minutes or not Registered within 15),
//! launch (launch.rs), registration (its Node joined: labels, taints and finalizer synced),
//! initialization (Node Ready, startup taints gone) — and every Node and NodeClaim being
//! deleted one step towards release (termination.rs).

use super::metrics::catalog::NODES_CREATED;
use super::{
    Catalogs, Controller, conditions, involved_nodeclaim, lifecycle, nodes_of, pool_of, snapshot, termination,
    unix_now_ms,
};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use tenon_api::NodeClaim;
use tenon_api::wellknown::{self as wk, condition};
use tenon_core::convert::ClusterObjects;
use tenon_core::disruption::drain::PdbAllowance;
use tenon_core::orchestration::liveness;

impl Controller {
    pub(super) async fn lifecycle(&mut self, catalogs: &Catalogs) {
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let all_nodes = self.stores.nodes.state();
        for nc in self.stores.nodeclaims.state() {
            if !lifecycle::is_managed(&nc) || nc.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(nc) = self.prepare(&api, &nc).await else { continue };
            if let Some((reason, message)) = liveness::expired(lifecycle::progress(&nc), unix_now_ms()) {
                self.give_up(&api, &nc, reason, &message).await;
                continue;
            }
            let with_id = nodes_of(&nc, all_nodes.iter().map(|n| &**n));
            match lifecycle::next_step(&nc) {
                lifecycle::Step::Launch => self.launch(&nc, catalogs),
                lifecycle::Step::Register => self.register(&nc, &with_id).await,
                lifecycle::Step::Initialize | lifecycle::Step::Done => {
                    let [node] = with_id[..] else { continue };
                    self.initialize(&api, &nc, node).await;
                }
            }
        }
    }

    /// Karpenter's liveness: `nc` is given up, deleted (its instance, if any, terminated), and
    /// its pods get a new decision; its NodePool's registration health counts the failure.
    async fn give_up(&mut self, api: &Api<NodeClaim>, nc: &NodeClaim, reason: &str, message: &str) {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let event = if reason == "launch_timeout" { "LaunchTimeout" } else { "RegistrationTimeout" };
        let message = format!("{message}; deleting the NodeClaim");
        self.recorder.publish(&self.client, &involved_nodeclaim(nc), "Warning", event, &message).await;
        if let Some(np) = self.owning_nodepool(nc) {
            let uid = np.metadata.uid.clone().unwrap_or_default();
            let current = super::nodepool_status::registration_condition(&np);
            let (why, detail) = lifecycle::registration_failure(nc);
            if let Some(v) = self.registration.failed(&uid, current, (&why, &detail)) {
                self.registration_verdicts.insert(uid, v);
            }
        }
        self.metrics.nodeclaim_disrupted(nc, reason, "");
        match api.delete(&name, &kube::api::DeleteParams::default()).await {
            Ok(_) => tracing::warn!(nodeclaim = %name, %reason, "liveness: deleted"),
            Err(e) => tracing::warn!(nodeclaim = %name, error = %e, "could not delete a NodeClaim past its liveness"),
        }
    }

    /// Karpenter's initialization of registered `nc` on `node` (and the NodeClass label for
    /// a Node registered before NodeClaims carried it).
    async fn initialize(&self, api: &Api<NodeClaim>, nc: &NodeClaim, node: &Node) {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let nodes: Api<Node> = Api::all(self.client.clone());
        let node_name = node.metadata.name.clone().unwrap_or_default();
        if let Some((key, value)) = lifecycle::missing_nodeclass_label(nc, node.metadata.labels.as_ref()) {
            let label = json!({"metadata": {"labels": {key: value}}});
            if let Err(e) = nodes.patch(&node_name, &PatchParams::default(), &Patch::Merge(&label)).await {
                tracing::warn!(node = %node_name, error = %e, "could not label the node with its NodeClass");
            }
        }
        if lifecycle::next_step(nc) == lifecycle::Step::Done {
            return;
        }
        let conds = match lifecycle::initialization(nc, node) {
            Err((reason, message)) => conditions::with_unknown_condition(nc, condition::INITIALIZED, reason, &message),
            Ok(()) => {
                // Karpenter's label first: what schedules by it sees an initialized node.
                let label = lifecycle::initialized_label_patch();
                if let Err(e) = nodes.patch(&node_name, &PatchParams::default(), &Patch::Merge(&label)).await {
                    tracing::warn!(node = %node_name, error = %e, "could not label the node initialized");
                    return;
                }
                tracing::info!(nodeclaim = %name, node = %node_name, "initialized");
                lifecycle::initialized_conditions(nc)
            }
        };
        if nc.status.as_ref().map(|s| &s.conditions) != Some(&conds) {
            let st = json!({"status": {"conditions": conds}});
            if let Err(e) = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&st)).await {
                tracing::warn!(nodeclaim = %name, error = %e, "could not write Initialized");
            }
        }
    }

    /// The NodePool `nc` belongs to, if it is the one that created it: a NodePool deleted and
    /// recreated under the same name does not answer for its predecessor's NodeClaims.
    fn owning_nodepool(&self, nc: &NodeClaim) -> Option<std::sync::Arc<tenon_api::NodePool>> {
        let pool = pool_of(nc);
        let np =
            self.stores.nodepools.state().into_iter().find(|p| p.metadata.name.as_deref() == Some(pool.as_str()))?;
        lifecycle::owned_by(nc, &np).then_some(np)
    }

    /// What Karpenter does before any step of `nc`'s lifecycle: the termination finalizer
    /// (under optimistic locking, so a concurrent writer's finalizers are not lost) and the
    /// NodeClass label, the lifecycle conditions as Unknown, every condition at the current
    /// generation. The NodeClaim as written, for this pass's step; None when the finalizer
    /// could not be added (nothing is launched without it).
    async fn prepare(&self, api: &Api<NodeClaim>, nc: &NodeClaim) -> Option<NodeClaim> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let mut nc = nc.clone();
        let mut meta = serde_json::Map::new();
        if lifecycle::needs_finalizer(&nc) {
            let mut finalizers = nc.metadata.finalizers.clone().unwrap_or_default();
            finalizers.push(wk::FINALIZER_TERMINATION.into());
            meta.insert("finalizers".into(), json!(finalizers));
        }
        if let Some((key, value)) = lifecycle::missing_nodeclass_label(&nc, nc.metadata.labels.as_ref()) {
            meta.insert("labels".into(), json!({key: value}));
        }
        if !meta.is_empty() {
            meta.insert("resourceVersion".into(), json!(nc.metadata.resource_version));
            let patch = json!({"metadata": meta});
            nc = api
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .inspect_err(|e| tracing::warn!(nodeclaim = %name, error = %e, "could not add the finalizer and NodeClass label"))
                .ok()?;
        }
        let conds = conditions::with_lifecycle_conditions(&nc).or_else(|| conditions::at_current_generation(&nc));
        if let Some(conds) = conds {
            let st = json!({"status": {"conditions": conds.clone()}});
            match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&st)).await {
                Ok(written) => nc = written,
                // The step goes ahead all the same (its own status write carries them), as
                // in Karpenter, where they are written with the step's result.
                Err(e) => {
                    tracing::warn!(nodeclaim = %name, error = %e, "could not write the lifecycle conditions");
                    nc.status.get_or_insert_with(Default::default).conditions = conds;
                }
            }
        }
        Some(nc)
    }

    /// Karpenter's registration of `nc`: its one Node (none yet: wait; several: an invariant
    /// broken) gets the NodeClaim's labels, annotations, taints, finalizer and owner
    /// reference, loses `karpenter.sh/unregistered`, and is labelled registered.
    async fn register(&mut self, nc: &NodeClaim, with_id: &[&Node]) {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let api: Api<NodeClaim> = Api::all(self.client.clone());
        let [node] = with_id[..] else {
            let conds = lifecycle::unregistered_conditions(nc, with_id.len());
            if nc.status.as_ref().map(|s| &s.conditions) != Some(&conds) {
                let st = json!({"status": {"conditions": conds}});
                if let Err(e) = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&st)).await {
                    tracing::warn!(nodeclaim = %name, error = %e, "could not write Registered");
                }
            }
            return;
        };
        let node_name = node.metadata.name.clone().unwrap_or_default();
        if lifecycle::unregistered_taint_missing(node) {
            let message = "Missing karpenter.sh/unregistered taint which prevents registration related race conditions on Karpenter-managed nodes";
            self.recorder
                .publish(&self.client, &involved_nodeclaim(nc), "Warning", "UnregisteredTaintMissing", message)
                .await;
        }
        let patch = lifecycle::registration_patch(nc, node);
        let nodes: Api<Node> = Api::all(self.client.clone());
        if let Err(e) = nodes.patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            tracing::warn!(node = %node_name, error = %e, "could not register node");
            return;
        }
        let st = lifecycle::registered_status(nc, &node_name);
        match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&st)).await {
            Ok(_) => {
                if let Some(np) = self.owning_nodepool(nc) {
                    let uid = np.metadata.uid.clone().unwrap_or_default();
                    let current = super::nodepool_status::registration_condition(&np);
                    if let Some(v) = self.registration.registered(&uid, current) {
                        self.registration_verdicts.insert(uid, v);
                    }
                }
                let zone = nc.metadata.labels.as_ref().and_then(|l| l.get(wk::LABEL_ZONE)).cloned().unwrap_or_default();
                self.metrics.add(NODES_CREATED, &[("nodepool", &pool_of(nc)), ("zone", &zone)], 1);
                tracing::info!(nodeclaim = %name, node = %node_name, "registered");
            }
            Err(e) => tracing::warn!(nodeclaim = %name, error = %e, "could not write Registered"),
        }
    }

    /// Moves every Node and NodeClaim being deleted one step towards release (termination.rs).
    pub(super) async fn terminate(&self, objects: &ClusterObjects) {
        let nodes: Vec<&Node> = objects
            .nodes
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some() && termination::is_ours(n))
            .collect();
        let claims: Vec<&NodeClaim> = objects
            .nodeclaims
            .iter()
            .filter(|nc| nc.metadata.deletion_timestamp.is_some() && lifecycle::is_managed(nc))
            .collect();
        if nodes.is_empty() && claims.is_empty() {
            return;
        }
        // Draining needs pods and nodes, not instance types.
        let (snap, _) = snapshot(objects, &Catalogs::new());
        let ctx = termination::Ctx {
            client: &self.client,
            evictions: &self.client,
            cloud: self.provider.as_ref(),
            recorder: &self.recorder,
            metrics: &self.metrics,
            backoff: &self.eviction_backoff,
            now: unix_now_ms() / 1000,
        };
        // One pass spends each PDB's allowance across all the nodes it drains.
        let mut allowance = PdbAllowance::default();
        for node in nodes {
            let name = node.metadata.name.clone().unwrap_or_default();
            let nc = termination::claim_of_node(node, &objects.nodeclaims);
            let volumes = termination::pending_volume_attachments(
                &name,
                &objects.volume_attachments,
                &objects.pods,
                &snap,
                &objects.claims,
            );
            match termination::finalize_node(&ctx, node, nc, &snap, &mut allowance, &volumes).await {
                Ok(termination::NodeProgress::Released) => {
                    termination::node_released_metrics(&self.metrics, node, ctx.now);
                    tracing::info!(node = %name, "node terminated");
                }
                Ok(termination::NodeProgress::Draining(Some(message))) => {
                    let obj = super::events::Involved::cluster_scoped("v1", "Node", &node.metadata);
                    self.recorder.publish(&self.client, &obj, "Warning", "FailedDraining", &message).await;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(node = %name, error = %e, "node termination step failed; retrying"),
            }
        }
        for nc in claims {
            let name = nc.metadata.name.clone().unwrap_or_default();
            let with_id: Vec<&Node> = nodes_of(nc, &objects.nodes);
            match termination::finalize_nodeclaim(&ctx, nc, &with_id).await {
                Ok(termination::Progress::Released) => {
                    termination::nodeclaim_released_metrics(&self.metrics, nc, ctx.now);
                    tracing::info!(nodeclaim = %name, "terminated");
                }
                Ok(termination::Progress::Waiting) => {}
                Err(e) => tracing::warn!(nodeclaim = %name, error = %e, "termination step failed; retrying"),
            }
        }
    }
}
