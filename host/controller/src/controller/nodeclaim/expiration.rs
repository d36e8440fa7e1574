//! The expiration pass, Karpenter's NodeClaim expiration controller: on each change and when
//! the next NodeClaim expires, each NodeClaim of this provider past its own
//! `spec.expireAfter` is deleted and counted
//! (`karpenter_nodeclaims_disrupted_total`, reason `expired`), outside disruption rounds and
//! budgets; termination drains it (`tenon_core::orchestration::expiration` decides).

use crate::controller::context::Context;
use crate::controller::error::{Error, Failures};
use crate::controller::involved_nodeclaim;
use crate::controller::nodeclaim::lifecycle::rules as lifecycle;
use crate::controller::runner::{self, Reconciler};
use kube::Api;
use kube::api::DeleteParams;
use std::sync::Arc;
use tenon_api::NodeClaim;
use tenon_core::convert::nodeclaim_expire_after;
use tenon_core::orchestration::expiration::{self, Lifetime};

/// What expiration reads of a NodeClaim.
pub fn lifetime(nc: &NodeClaim) -> Lifetime<'_> {
    Lifetime {
        nodeclaim: nc.metadata.name.as_deref().unwrap_or_default(),
        created: nc.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
        expire_after: nodeclaim_expire_after(nc),
        deleting: nc.metadata.deletion_timestamp.is_some(),
        managed: lifecycle::is_managed(nc),
    }
}

/// Karpenter's `nodeclaim.expiration` controller.
pub struct Expiration {
    pub ctx: Arc<Context>,
    /// When the next NodeClaim expires (Unix seconds), as of the last pass.
    next: Option<i64>,
}

impl Expiration {
    pub fn new(ctx: Arc<Context>) -> Expiration {
        Expiration { ctx, next: None }
    }
}

impl Reconciler for Expiration {
    const NAME: &'static str = "nodeclaim.expiration";

    async fn reconcile(&mut self) -> Result<(), Error> {
        let objects = self.ctx.objects();
        let mut failures = Failures::default();
        let lifetimes: Vec<Lifetime> = objects.nodeclaims.iter().map(|nc| lifetime(nc)).collect();
        let api: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        let now = self.ctx.unix_now();
        self.next = expiration::next(&lifetimes, now);
        for name in expiration::due(&lifetimes, now) {
            let Some(nc) = objects.nodeclaims.iter().find(|nc| nc.metadata.name.as_deref() == Some(name)) else {
                continue;
            };
            let reason = expiration::reason(nodeclaim_expire_after(nc));
            match api.delete(name, &DeleteParams::default()).await {
                Ok(_) => {
                    tracing::info!(nodeclaim = %name, %reason, "expired: NodeClaim deleted");
                    self.ctx
                        .recorder
                        .publish(&self.ctx.client, &involved_nodeclaim(nc), "Normal", "Expired", &reason)
                        .await;
                    let pods = tenon_core::convert::reschedulable_on(nc, &objects.pods);
                    self.ctx.metrics.nodeclaim_and_pods_disrupted(nc, "expired", "", pods);
                }
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => failures.push(Error::kube(format!("deleting expired NodeClaim {name}"), e)),
            }
        }
        failures.finish()
    }

    fn next_pass(&self) -> std::time::Duration {
        let left =
            self.next.map(|at| std::time::Duration::from_secs(at.saturating_sub(self.ctx.unix_now()).max(0) as u64));
        runner::due_in(left)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(expire_after: &str, group: &str) -> NodeClaim {
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: a, creationTimestamp: \"2026-12-01T00:00:00Z\"}}\nspec:\n  expireAfter: {expire_after}\n  nodeClassRef: {{group: {group}, kind: EC2NodeClass, name: x}}\n  requirements: []\n"
        ))
        .unwrap()
    }

    #[test]
    fn a_nodeclaim_is_read_with_its_own_expire_after_and_provider() {
        let created = 1_796_083_200; // 2026-12-01T00:00:00Z
        let managed = claim("30s", "karpenter.k8s.aws");
        let l = lifetime(&managed);
        assert_eq!((l.created, l.expire_after, l.managed, l.deleting), (created, Some(30), true, false));
        assert_eq!(lifetime(&claim("Never", "karpenter.k8s.aws")).expire_after, None);
        assert!(!lifetime(&claim("30s", "karpenter.test.sh")).managed);
    }
}
