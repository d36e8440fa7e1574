//! Karpenter's NodeClaim lifecycle controller: every NodeClaim moves one step through its
//! lifecycle — liveness (deleted when not Launched within 5 minutes or not Registered
//! within 15), launch (launch.rs), registration (its Node joined: labels, taints and
//! finalizer synced), initialization (Node Ready, startup taints gone). The rules of each
//! step are pure functions (rules.rs).

pub mod launch;
pub mod rules;

use self::rules as lifecycle;
use crate::controller::context::Context;
use crate::controller::error::{Error, Failures};
use crate::controller::metrics::catalog::NODES_CREATED;
use crate::controller::runner::{self, Reconciler};
use crate::controller::{Catalogs, conditions, involved_nodeclaim, nodes_of, pool_of, unix_now_ms};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tenon_api::NodeClaim;
use tenon_api::wellknown::{self as wk, condition};
use tenon_core::orchestration::liveness;

/// Karpenter's `nodeclaim.lifecycle` controller. Launches run on their own tasks
/// (`Context::launching` names them), so a slow CreateFleet holds up no other NodeClaim.
pub struct Lifecycle {
    pub ctx: Arc<Context>,
    /// Startup taints each registering Node (by UID) was seen carrying, until registered.
    startup_taints_seen: BTreeMap<String, lifecycle::SeenStartupTaints>,
    /// A NodeClaim was short of Initialized at the last pass (its liveness is timed).
    settling: bool,
}

impl Lifecycle {
    pub fn new(ctx: Arc<Context>) -> Lifecycle {
        Lifecycle { ctx, startup_taints_seen: BTreeMap::new(), settling: false }
    }
}

impl Reconciler for Lifecycle {
    const NAME: &'static str = "nodeclaim.lifecycle";

    async fn reconcile(&mut self) -> Result<(), Error> {
        let claims = self.ctx.stores.nodeclaims.state();
        let live = claims.iter().filter(|nc| lifecycle::is_managed(nc) && nc.metadata.deletion_timestamp.is_none());
        // Shaping the catalog into instance types is costly: only when a launch needs it.
        let launches = live.clone().any(|nc| lifecycle::next_step(nc) == lifecycle::Step::Launch);
        self.settling = live.clone().any(|nc| lifecycle::next_step(nc) != lifecycle::Step::Done);
        let catalogs = if launches { self.ctx.catalogs().await } else { Catalogs::new() };
        let api: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        let all_nodes = self.ctx.stores.nodes.state();
        let mut failures = Failures::default();
        let mut registering = BTreeSet::new();
        for nc in live {
            let Some(nc) = failures.keep(self.prepare(&api, nc).await) else { continue };
            if let Some((reason, message)) = liveness::expired(lifecycle::progress(&nc), unix_now_ms()) {
                failures.keep(self.give_up(&api, &nc, reason, &message).await);
                continue;
            }
            let with_id = nodes_of(&nc, all_nodes.iter());
            match lifecycle::next_step(&nc) {
                lifecycle::Step::Launch => self.launch(&nc, &catalogs),
                lifecycle::Step::Register => {
                    registering.extend(with_id.iter().filter_map(|n| n.metadata.uid.clone()));
                    failures.keep(self.register(&nc, &with_id).await);
                }
                lifecycle::Step::Initialize | lifecycle::Step::Done => {
                    let [node] = with_id[..] else { continue };
                    failures.keep(self.initialize(&api, &nc, node).await);
                }
            }
        }
        self.startup_taints_seen.retain(|uid, _| registering.contains(uid));
        failures.finish()
    }

    /// Launching, registering and initializing are timed (liveness); an initialized
    /// NodeClaim changes only with its objects.
    fn next_pass(&self) -> std::time::Duration {
        if self.settling { runner::BUSY } else { runner::IDLE }
    }
}

impl Lifecycle {
    /// Karpenter's liveness: `nc` is given up, deleted (its instance, if any, terminated), and
    /// its pods get a new decision; its NodePool's registration health counts the failure.
    async fn give_up(
        &mut self,
        api: &Api<NodeClaim>,
        nc: &NodeClaim,
        reason: &str,
        message: &str,
    ) -> Result<(), Error> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let event = if reason == "launch_timeout" { "LaunchTimeout" } else { "RegistrationTimeout" };
        let message = format!("{message}; deleting the NodeClaim");
        self.ctx.recorder.publish(&self.ctx.client, &involved_nodeclaim(nc), "Warning", event, &message).await;
        if let Some(np) = self.owning_nodepool(nc) {
            let uid = np.metadata.uid.clone().unwrap_or_default();
            let current = crate::controller::nodepool::status::registration_condition(&np);
            let (why, detail) = lifecycle::registration_failure(nc);
            let mut cluster = self.ctx.cluster();
            if let Some(v) = cluster.registration.failed(&uid, current, (&why, &detail)) {
                cluster.registration_verdicts.insert(uid, v);
            }
        }
        self.ctx.metrics.nodeclaim_disrupted(nc, reason, "");
        api.delete(&name, &kube::api::DeleteParams::default())
            .await
            .map_err(|e| Error::kube(format!("deleting NodeClaim {name} past its liveness"), e))?;
        tracing::warn!(nodeclaim = %name, %reason, "liveness: deleted");
        Ok(())
    }

    /// Karpenter's initialization of registered `nc` on `node` (and the NodeClass label for
    /// a Node registered before NodeClaims carried it).
    async fn initialize(&self, api: &Api<NodeClaim>, nc: &NodeClaim, node: &Node) -> Result<(), Error> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let nodes: Api<Node> = Api::all(self.ctx.client.clone());
        let node_name = node.metadata.name.clone().unwrap_or_default();
        if let Some((key, value)) = lifecycle::missing_nodeclass_label(nc, node.metadata.labels.as_ref()) {
            let label = json!({"metadata": {"labels": {key: value}}});
            nodes
                .patch(&node_name, &PatchParams::default(), &Patch::Merge(&label))
                .await
                .map_err(|e| Error::kube(format!("labelling node {node_name} with its NodeClass"), e))?;
        }
        if lifecycle::next_step(nc) == lifecycle::Step::Done {
            return Ok(());
        }
        let conds = match lifecycle::initialization(nc, node) {
            Err((reason, message)) => conditions::with_unknown_condition(nc, condition::INITIALIZED, reason, &message),
            Ok(()) => {
                // Karpenter's label first: what schedules by it sees an initialized node.
                let label = lifecycle::initialized_label_patch();
                nodes
                    .patch(&node_name, &PatchParams::default(), &Patch::Merge(&label))
                    .await
                    .map_err(|e| Error::kube(format!("labelling node {node_name} initialized"), e))?;
                tracing::info!(nodeclaim = %name, node = %node_name, "initialized");
                lifecycle::initialized_conditions(nc)
            }
        };
        if nc.status.as_ref().map(|s| &s.conditions) != Some(&conds) {
            let st = conditions::locked(&nc.metadata, json!({"status": {"conditions": conds}}));
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&st))
                .await
                .map_err(|e| Error::kube(format!("writing Initialized of NodeClaim {name}"), e))?;
        }
        Ok(())
    }

    /// The NodePool `nc` belongs to, if it is the one that created it: a NodePool deleted and
    /// recreated under the same name does not answer for its predecessor's NodeClaims.
    fn owning_nodepool(&self, nc: &NodeClaim) -> Option<std::sync::Arc<tenon_api::NodePool>> {
        let pool = pool_of(nc);
        let np = self
            .ctx
            .stores
            .nodepools
            .state()
            .into_iter()
            .find(|p| p.metadata.name.as_deref() == Some(pool.as_str()))?;
        lifecycle::owned_by(nc, &np).then_some(np)
    }

    /// What Karpenter does before any step of `nc`'s lifecycle: the termination finalizer
    /// (under optimistic locking, so a concurrent writer's finalizers are not lost) and the
    /// NodeClass label, the lifecycle conditions as Unknown, every condition at the current
    /// generation. The NodeClaim as written, for this reconcile's step; an error when the
    /// finalizer could not be added (nothing is launched without it).
    async fn prepare(&self, api: &Api<NodeClaim>, nc: &NodeClaim) -> Result<NodeClaim, Error> {
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
                .map_err(|e| Error::kube(format!("adding the finalizer and NodeClass label of NodeClaim {name}"), e))?;
        }
        let conds = conditions::with_lifecycle_conditions(&nc).or_else(|| conditions::at_current_generation(&nc));
        if let Some(conds) = conds {
            let st = conditions::locked(&nc.metadata, json!({"status": {"conditions": conds.clone()}}));
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
        Ok(nc)
    }

    /// Karpenter's registration of `nc`: its one Node (none yet: wait; several: an invariant
    /// broken) gets the NodeClaim's labels, annotations, taints, finalizer and owner
    /// reference, loses `karpenter.sh/unregistered`, and is labelled registered.
    async fn register(&mut self, nc: &NodeClaim, with_id: &[&Node]) -> Result<(), Error> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let api: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        let [node] = with_id[..] else {
            let conds = lifecycle::unregistered_conditions(nc, with_id.len());
            if nc.status.as_ref().map(|s| &s.conditions) != Some(&conds) {
                let st = conditions::locked(&nc.metadata, json!({"status": {"conditions": conds}}));
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&st))
                    .await
                    .map_err(|e| Error::kube(format!("writing Registered of NodeClaim {name}"), e))?;
            }
            return Ok(());
        };
        let node_name = node.metadata.name.clone().unwrap_or_default();
        if lifecycle::unregistered_taint_missing(node) {
            let message = "Missing karpenter.sh/unregistered taint which prevents registration related race conditions on Karpenter-managed nodes";
            self.ctx
                .recorder
                .publish(&self.ctx.client, &involved_nodeclaim(nc), "Warning", "UnregisteredTaintMissing", message)
                .await;
        }
        let uid = node.metadata.uid.clone().unwrap_or_default();
        let seen = self.startup_taints_seen.entry(uid.clone()).or_default();
        seen.extend(lifecycle::startup_taints_on(nc, node));
        // Locked: a merge patch replaces the taint list whole, and CNI or CSI agents remove
        // their startup taints from the same list meanwhile; a 409 reads again.
        let patch = conditions::locked(&node.metadata, lifecycle::registration_patch(nc, node, seen));
        let nodes: Api<Node> = Api::all(self.ctx.client.clone());
        nodes
            .patch(&node_name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::kube(format!("registering node {node_name}"), e))?;
        let st = conditions::locked(&nc.metadata, lifecycle::registered_status(nc, &node_name));
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&st))
            .await
            .map_err(|e| Error::kube(format!("writing Registered of NodeClaim {name}"), e))?;
        self.startup_taints_seen.remove(&uid);
        if let Some(np) = self.owning_nodepool(nc) {
            let uid = np.metadata.uid.clone().unwrap_or_default();
            let current = crate::controller::nodepool::status::registration_condition(&np);
            let mut cluster = self.ctx.cluster();
            if let Some(v) = cluster.registration.registered(&uid, current) {
                cluster.registration_verdicts.insert(uid, v);
            }
        }
        let zone = nc.metadata.labels.as_ref().and_then(|l| l.get(wk::LABEL_ZONE)).cloned().unwrap_or_default();
        self.ctx.metrics.add(NODES_CREATED, &[("nodepool", &pool_of(nc)), ("zone", &zone)], 1);
        tracing::info!(nodeclaim = %name, node = %node_name, "registered");
        Ok(())
    }
}
