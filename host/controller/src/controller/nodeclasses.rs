//! EC2NodeClass status and finalization: each EC2NodeClass is resolved against AWS
//! (subnets, security groups, AMIs, instance profile) on a new generation and every
//! [`RESOLVE_EVERY`], with a Warning Event per failed check; one being deleted is finalized
//! once no NodeClaim uses it.

use super::events::Involved;
use super::{Controller, conditions};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::time::{Duration, Instant};
use tenon_api::EC2NodeClass;
use tenon_api::wellknown as wk;

pub const RESOLVE_EVERY: Duration = Duration::from_secs(300);

impl Controller {
    /// EC2NodeClass status: resolved on a new generation and every 5 minutes.
    pub(super) async fn nodeclasses(&mut self) {
        let api: Api<EC2NodeClass> = Api::all(self.client.clone());
        for nc in self.stores.nodeclasses.state() {
            let name = nc.metadata.name.clone().unwrap_or_default();
            if nc.metadata.deletion_timestamp.is_some() {
                self.finalize_nodeclass(&nc).await;
                continue;
            }
            let fins = nc.metadata.finalizers.clone().unwrap_or_default();
            if !fins.iter().any(|f| f == wk::FINALIZER_NODECLASS_TERMINATION) {
                let mut with = fins;
                with.push(wk::FINALIZER_NODECLASS_TERMINATION.into());
                let patch = json!({"metadata": {"finalizers": with}});
                if let Err(e) = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    tracing::warn!(nodeclass = %name, error = %e, "could not add the EC2NodeClass finalizer");
                }
            }
            let gen_ = nc.metadata.generation;
            if self.resolved.get(&name).is_some_and(|(g, at)| *g == gen_ && at.elapsed() < RESOLVE_EVERY) {
                continue;
            }
            match self.provider.resolve(&nc).await {
                Ok(r) => {
                    let status = r.status(nc.status.as_ref(), gen_, &conditions::now_time());
                    let patch = json!({"status": status});
                    if let Err(e) = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                        tracing::warn!(nodeclass = %name, error = %e, "could not write EC2NodeClass status");
                        continue;
                    }
                    for c in r.checks.iter().filter(|c| !c.ok) {
                        let obj = Involved::cluster_scoped("karpenter.k8s.aws/v1", "EC2NodeClass", &nc.metadata);
                        self.recorder.publish(&self.client, &obj, "Warning", c.reason.as_str(), &c.message).await;
                    }
                    self.resolved.insert(name, (gen_, Instant::now()));
                }
                Err(e) => tracing::warn!(nodeclass = %name, error = %e, "could not resolve EC2NodeClass"),
            }
        }
    }

    /// An EC2NodeClass being deleted: once no NodeClaim uses it, its managed instance
    /// profile and launch templates are deleted, then its finalizer released.
    async fn finalize_nodeclass(&self, nc: &EC2NodeClass) {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let fins = nc.metadata.finalizers.clone().unwrap_or_default();
        if !fins.iter().any(|f| f == wk::FINALIZER_NODECLASS_TERMINATION) {
            return;
        }
        let users: Vec<String> = self
            .stores
            .nodeclaims
            .state()
            .iter()
            .filter(|c| c.spec.node_class_ref.as_ref().is_some_and(|r| r.name == name))
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        let obj = Involved::cluster_scoped("karpenter.k8s.aws/v1", "EC2NodeClass", &nc.metadata);
        if !users.is_empty() {
            let message = format!("waiting on NodeClaim termination for {}", users.join(", "));
            self.recorder.publish(&self.client, &obj, "Normal", "WaitingOnNodeClaimTermination", &message).await;
            return;
        }
        if let Err(e) = self.provider.finalize_nodeclass(nc).await {
            tracing::warn!(nodeclass = %name, error = %e, "could not delete the EC2NodeClass' AWS resources; retrying");
            return;
        }
        let rest: Vec<&String> = fins.iter().filter(|f| *f != wk::FINALIZER_NODECLASS_TERMINATION).collect();
        let api: Api<EC2NodeClass> = Api::all(self.client.clone());
        match api.patch(&name, &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"finalizers": rest}}))).await
        {
            Ok(_) => {
                tracing::info!(nodeclass = %name, "EC2NodeClass finalized: instance profile and launch templates deleted")
            }
            Err(e) => tracing::warn!(nodeclass = %name, error = %e, "could not release the EC2NodeClass finalizer"),
        }
    }
}
