//! EC2NodeClass status and finalization: each EC2NodeClass is resolved against AWS
//! (subnets, security groups, AMIs, instance profile) on a new generation and every
//! [`RESOLVE_EVERY`], with a Warning Event per failed check; a resolution AWS refuses
//! (AccessDenied, throttling) makes it `Ready=False` with the error and an Event, and is tried
//! again with a per-NodeClass backoff (1 s doubling to 5 minutes), not on every pass. One
//! that fails validation (what `tenon check` refuses) is `ValidationSucceeded=False` and
//! `Ready=False` with the fields named, with a Warning Event, and is not resolved. One
//! being deleted is finalized once no NodeClaim uses it.

use super::conditions;
use super::context::Context;
use super::error::{Error, Failures};
use super::events::Involved;
use super::runner::{self, Reconciler};
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_api::EC2NodeClass;
use tenon_api::validation::{Severity, validate_ec2nodeclass};
use tenon_api::wellknown::{self as wk, condition};

pub const RESOLVE_EVERY: Duration = Duration::from_secs(300);

/// Karpenter's `nodeclass` controllers (status, hash, termination) for EC2NodeClasses.
pub struct NodeClasses {
    ctx: Arc<Context>,
    /// EC2NodeClass name → (generation, when) of its last resolution.
    resolved: BTreeMap<String, (Option<i64>, Instant)>,
    /// EC2NodeClass name → its failed resolutions in a row: at which generation, how many,
    /// when to retry.
    resolve_failures: BTreeMap<String, (Option<i64>, u32, Instant)>,
}

impl Reconciler for NodeClasses {
    const NAME: &'static str = "nodeclass";

    async fn reconcile(&mut self) -> Result<(), Error> {
        self.nodeclasses().await
    }

    /// The next resolution due (every [`RESOLVE_EVERY`], or a refused one's retry); soon
    /// while an EC2NodeClass is being deleted.
    fn next_pass(&self) -> Duration {
        if self.ctx.stores.nodeclasses.state().iter().any(|nc| nc.metadata.deletion_timestamp.is_some()) {
            return runner::BUSY;
        }
        let now = Instant::now();
        let resolves = self.resolved.values().map(|(_, at)| (*at + RESOLVE_EVERY).saturating_duration_since(now));
        let retries = self.resolve_failures.values().map(|(_, _, next)| next.saturating_duration_since(now));
        runner::due_in(resolves.chain(retries).min())
    }
}

impl NodeClasses {
    pub fn new(ctx: Arc<Context>) -> NodeClasses {
        NodeClasses { ctx, resolved: BTreeMap::new(), resolve_failures: BTreeMap::new() }
    }

    /// EC2NodeClass status: resolved on a new generation and every 5 minutes. Each NodeClass
    /// is tried whatever happened to the others; the reconcile fails with the first failure.
    async fn nodeclasses(&mut self) -> Result<(), Error> {
        let api: Api<EC2NodeClass> = Api::all(self.ctx.client.clone());
        let mut failures = Failures::default();
        for nc in self.ctx.stores.nodeclasses.state() {
            let name = nc.metadata.name.clone().unwrap_or_default();
            if nc.metadata.deletion_timestamp.is_some() {
                failures.keep(self.finalize_nodeclass(&nc).await);
                continue;
            }
            let fins = nc.metadata.finalizers.clone().unwrap_or_default();
            if !fins.iter().any(|f| f == wk::FINALIZER_NODECLASS_TERMINATION) {
                let mut with = fins;
                with.push(wk::FINALIZER_NODECLASS_TERMINATION.into());
                let patch = json!({"metadata": {"finalizers": with}});
                if let Err(e) = api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    failures.push(Error::kube(format!("adding the finalizer of EC2NodeClass {name}"), e));
                }
            }
            let gen_ = nc.metadata.generation;
            // Resolved at this generation means it validated then: nothing to check again.
            if self.resolved.get(&name).is_some_and(|(g, at)| *g == gen_ && at.elapsed() < RESOLVE_EVERY) {
                continue;
            }
            if let Some(message) = validation_errors(&nc) {
                failures.keep(self.validation_failed(&nc, gen_, &message).await);
                continue;
            }
            // A new generation is tried at once: it may be the fix.
            if self.resolve_failures.get(&name).is_some_and(|(g, _, next)| *g == gen_ && Instant::now() < *next) {
                continue;
            }
            match self.ctx.cloud.resolve(&nc).await {
                Ok(r) => {
                    // The resolution sets ValidationSucceeded itself (an AMI family Tenon does
                    // not launch is False), replacing a ValidationFailed from before a fix.
                    let status = r.status(nc.status.as_ref(), gen_, &conditions::now_time());
                    let patch = json!({"status": status});
                    if let Err(e) = api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                        failures.push(Error::kube(format!("writing the status of EC2NodeClass {name}"), e));
                        continue;
                    }
                    for c in r.checks.iter().filter(|c| !c.ok) {
                        let obj = Involved::cluster_scoped("karpenter.k8s.aws/v1", "EC2NodeClass", &nc.metadata);
                        self.ctx
                            .recorder
                            .publish(&self.ctx.client, &obj, "Warning", c.reason.as_str(), &c.message)
                            .await;
                    }
                    self.resolve_failures.remove(&name);
                    self.resolved.insert(name, (gen_, Instant::now()));
                }
                Err(e) => {
                    failures.keep(self.resolution_failed(&nc, gen_, &e.to_string()).await);
                    failures.push(Error::cloud(format!("resolving EC2NodeClass {name}"), e));
                }
            }
        }
        failures.finish()
    }

    /// `ValidationSucceeded=False` and `Ready=False` naming the invalid fields, and a Warning
    /// Event, once per change (not every pass).
    async fn validation_failed(&mut self, nc: &EC2NodeClass, gen_: Option<i64>, message: &str) -> Result<(), Error> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        self.resolved.remove(&name);
        let mut conds = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
        let before = conds.clone();
        conditions::set_condition(
            &mut conds,
            condition::VALIDATION_SUCCEEDED,
            false,
            "ValidationFailed",
            message,
            gen_,
        );
        conditions::set_condition(&mut conds, condition::READY, false, "ValidationFailed", message, gen_);
        if conds == before {
            return Ok(());
        }
        let api: Api<EC2NodeClass> = Api::all(self.ctx.client.clone());
        let patch = json!({"status": {"conditions": conds}});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| Error::kube(format!("writing the status of EC2NodeClass {name}"), e))?;
        let obj = Involved::cluster_scoped("karpenter.k8s.aws/v1", "EC2NodeClass", &nc.metadata);
        self.ctx.recorder.publish(&self.ctx.client, &obj, "Warning", "ValidationFailed", message).await;
        tracing::warn!(nodeclass = %name, %message, "EC2NodeClass failed validation");
        Ok(())
    }

    /// AWS refused a resolution: `Ready=False` with the error, a Warning Event, and a backoff.
    async fn resolution_failed(&mut self, nc: &EC2NodeClass, gen_: Option<i64>, error: &str) -> Result<(), Error> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let failures = match self.resolve_failures.get(&name) {
            Some((g, n, _)) if *g == gen_ => n + 1,
            _ => 1,
        };
        let delay = tenon_aws::call_health::retry_after(failures);
        self.resolve_failures.insert(name.clone(), (gen_, failures, Instant::now() + delay));
        tracing::warn!(nodeclass = %name, error, failures, retry_in = ?delay, "could not resolve EC2NodeClass");
        let message = format!("could not resolve against AWS: {error}");
        let mut conds = nc.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
        conditions::set_condition(&mut conds, condition::READY, false, "ResolutionFailed", &message, gen_);
        let api: Api<EC2NodeClass> = Api::all(self.ctx.client.clone());
        let patch = json!({"status": {"conditions": conds}});
        let obj = Involved::cluster_scoped("karpenter.k8s.aws/v1", "EC2NodeClass", &nc.metadata);
        self.ctx.recorder.publish(&self.ctx.client, &obj, "Warning", "ResolutionFailed", &message).await;
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| Error::kube(format!("writing the status of EC2NodeClass {name}"), e))
    }

    /// An EC2NodeClass being deleted: once no NodeClaim uses it, its managed instance
    /// profile and launch templates are deleted, then its finalizer released.
    async fn finalize_nodeclass(&self, nc: &EC2NodeClass) -> Result<(), Error> {
        let name = nc.metadata.name.clone().unwrap_or_default();
        let fins = nc.metadata.finalizers.clone().unwrap_or_default();
        if !fins.iter().any(|f| f == wk::FINALIZER_NODECLASS_TERMINATION) {
            return Ok(());
        }
        let users: Vec<String> = self
            .ctx
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
            self.ctx
                .recorder
                .publish(&self.ctx.client, &obj, "Normal", "WaitingOnNodeClaimTermination", &message)
                .await;
            return Ok(());
        }
        self.ctx
            .cloud
            .finalize_nodeclass(nc)
            .await
            .map_err(|e| Error::cloud(format!("deleting the AWS resources of EC2NodeClass {name}"), e))?;
        let rest: Vec<&String> = fins.iter().filter(|f| *f != wk::FINALIZER_NODECLASS_TERMINATION).collect();
        let api: Api<EC2NodeClass> = Api::all(self.ctx.client.clone());
        api.patch(&name, &PatchParams::default(), &Patch::Merge(&json!({"metadata": {"finalizers": rest}})))
            .await
            .map_err(|e| Error::kube(format!("releasing the finalizer of EC2NodeClass {name}"), e))?;
        tracing::info!(nodeclass = %name, "EC2NodeClass finalized: instance profile and launch templates deleted");
        Ok(())
    }
}

/// What validation refuses in `nc`, as one message naming each field, or `None`.
fn validation_errors(nc: &EC2NodeClass) -> Option<String> {
    let errors: Vec<String> = validate_ec2nodeclass(nc)
        .into_iter()
        .filter(|p| p.severity == Severity::Error)
        .map(|p| format!("{}: {} ({})", p.path, p.message, p.hint))
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}
