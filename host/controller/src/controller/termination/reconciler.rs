//! Karpenter's `node.termination` and `nodeclaim.termination` controllers: every Node and
//! NodeClaim being deleted moves one step towards release (the steps are steps.rs).
//! Its own task, so a drain waiting on a slow eviction holds up nothing else.

use crate::controller::context::Context;
use crate::controller::error::{Error, Failures};
use crate::controller::eviction_backoff::EvictionBackoff;
use crate::controller::nodeclaim::lifecycle::rules as lifecycle;
use crate::controller::runner::{self, Reconciler};
use crate::controller::{Catalogs, nodes_of, snapshot, termination, unix_now_ms};
use k8s_openapi::api::core::v1::Node;
use std::sync::Arc;
use tenon_api::NodeClaim;
use tenon_core::disruption::drain::PdbAllowance;

pub struct Termination {
    ctx: Arc<Context>,
    /// Pods whose eviction a PDB refused, backing off.
    eviction_backoff: EvictionBackoff,
    /// A Node or NodeClaim was being deleted at the last pass (drains are timed).
    draining: bool,
}

impl Termination {
    pub fn new(ctx: Arc<Context>) -> Termination {
        Termination { ctx, eviction_backoff: EvictionBackoff::default(), draining: false }
    }
}

impl Reconciler for Termination {
    const NAME: &'static str = "node.termination";

    async fn reconcile(&mut self) -> Result<(), Error> {
        let objects = self.ctx.objects();
        let nodes: Vec<&Node> = objects
            .nodes
            .iter()
            .filter(|n| n.metadata.deletion_timestamp.is_some() && termination::is_ours(n))
            .map(|n| &**n)
            .collect();
        let claims: Vec<&NodeClaim> = objects
            .nodeclaims
            .iter()
            .filter(|nc| nc.metadata.deletion_timestamp.is_some() && lifecycle::is_managed(nc))
            .map(|nc| &**nc)
            .collect();
        self.draining = !(nodes.is_empty() && claims.is_empty());
        if !self.draining {
            return Ok(());
        }
        // Draining needs pods and nodes, not instance types.
        let (snap, _) = snapshot(&objects, &Catalogs::new(), self.ctx.unix_now());
        let ctx = termination::Ctx {
            client: &self.ctx.client,
            evictions: &self.ctx.client,
            cloud: self.ctx.cloud.as_ref(),
            recorder: &self.ctx.recorder,
            metrics: &self.ctx.metrics,
            backoff: &self.eviction_backoff,
            now: unix_now_ms() / 1000,
        };
        let mut failures = Failures::default();
        // One reconcile spends each PDB's allowance across all the nodes it drains.
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
                Ok(termination::NodeProgress::Released) => tracing::info!(node = %name, "node terminated"),
                Ok(_) => {}
                Err(e) => failures.push(e),
            }
        }
        for nc in claims {
            let name = nc.metadata.name.clone().unwrap_or_default();
            let with_id: Vec<&Node> = nodes_of(nc, &objects.nodes);
            match termination::finalize_nodeclaim(&ctx, nc, &with_id).await {
                Ok(termination::Progress::Released) => tracing::info!(nodeclaim = %name, "terminated"),
                Ok(termination::Progress::Waiting) => {}
                Err(e) => failures.push(e),
            }
        }
        failures.finish()
    }

    /// Evictions, volume detachment and grace periods are timed; with nothing being deleted
    /// there is nothing to wait for.
    fn next_pass(&self) -> std::time::Duration {
        if self.draining { runner::BUSY } else { runner::IDLE }
    }
}
