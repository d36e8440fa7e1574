//! Garbage collection between the cluster and EC2: an instance the cluster owns that no
//! NodeClaim accounts for (a crash between CreateFleet and the NodeClaim, a NodeClaim deleted
//! by hand without its finalizer) is terminated once older than [`LEAK_GRACE_SECS`], with its
//! Node; a registered NodeClaim whose instance is gone (and whose Node is not Ready) is
//! deleted.

use crate::controller::context::Context;
use crate::controller::error::{Error, Failures};
use crate::controller::metrics::catalog::GARBAGE_COLLECTED_INSTANCES;
use crate::controller::nodeclaim::lifecycle::rules as lifecycle;
use crate::controller::runner::{self, Reconciler};
use crate::controller::termination::instance_id;
use crate::controller::{conditions, involved_nodeclaim, unix_now};
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::DeleteParams;
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_api::NodeClaim;
use tenon_api::wellknown::condition;
use tenon_core::cloud::{CloudError, Instance};
use tenon_core::convert::ClusterObjects;

pub const GC_EVERY: Duration = Duration::from_secs(10);
/// Launch templates and instance profiles need IAM and EC2 listings: less often.
pub const ORPHANS_EVERY: Duration = Duration::from_secs(300);
/// An instance without a NodeClaim may be one whose NodeClaim status is being written.
pub const LEAK_GRACE_SECS: i64 = 30;

/// Instances no NodeClaim accounts for, launched at least `LEAK_GRACE_SECS` before `now`. A
/// NodeClaim accounts for the instance its providerID names; one without a providerID yet
/// (launched, status not written) for the instances tagged with its name, which its next
/// launch attempt adopts. A tag naming a NodeClaim that points at another instance protects
/// nothing.
pub fn leaked<'a>(instances: &'a [Instance], claims: &[&NodeClaim], now: i64) -> Vec<&'a Instance> {
    fn provider_id<'c>(c: &&'c NodeClaim) -> Option<&'c str> {
        c.status.as_ref().and_then(|s| s.provider_id.as_deref()).filter(|p| !p.is_empty())
    }
    let launching: BTreeSet<&str> =
        claims.iter().filter(|c| provider_id(c).is_none()).filter_map(|c| c.metadata.name.as_deref()).collect();
    let ids: BTreeSet<&str> = claims.iter().filter_map(provider_id).collect();
    instances
        .iter()
        .filter(|i| !ids.contains(i.provider_id.as_str()) && !i.nodeclaim().is_some_and(|n| launching.contains(n)))
        .filter(|i| i.launched_at.is_some_and(|t| now - t >= LEAK_GRACE_SECS))
        .collect()
}

/// Karpenter's `nodeclaim.garbagecollection` controller, and the provider's garbage
/// collection of launch templates and instance profiles.
pub struct Garbage {
    ctx: Arc<Context>,
    last_gc: Option<Instant>,
    last_orphans: Option<Instant>,
}

impl Garbage {
    pub fn new(ctx: Arc<Context>) -> Garbage {
        Garbage { ctx, last_gc: None, last_orphans: None }
    }
}

impl Reconciler for Garbage {
    const NAME: &'static str = "nodeclaim.garbagecollection";

    async fn reconcile(&mut self) -> Result<(), Error> {
        if self.last_gc.is_some_and(|t| t.elapsed() < GC_EVERY) {
            return Ok(());
        }
        self.last_gc = Some(Instant::now());
        let objects = self.ctx.objects();
        let mut failures = Failures::default();
        self.garbage(&objects, &mut failures).await;
        failures.finish()
    }

    fn next_pass(&self) -> Duration {
        runner::due_in(self.last_gc.map(|t| GC_EVERY.saturating_sub(t.elapsed())))
    }
}

impl Garbage {
    async fn garbage(&mut self, objects: &ClusterObjects, failures: &mut Failures) {
        let instances = match self.ctx.live_instances().await {
            Ok(i) => i,
            Err(e) => return failures.push(Error::cloud("garbage collection: listing instances", e)),
        };
        // Instances first, NodeClaims after (Karpenter's order): a NodeClaim created while the
        // list ran is seen. The store is current; a leak it suggests is confirmed by a list
        // from the API server before anything is terminated.
        let current = self.ctx.stores.nodeclaims.state();
        let claims: Vec<&NodeClaim> = current.iter().map(|c| c.as_ref()).collect();
        let mut leaks = leaked(&instances, &claims, unix_now());
        if !leaks.is_empty() {
            match Api::<NodeClaim>::all(self.ctx.client.clone()).list(&Default::default()).await {
                Ok(fresh) => {
                    let fresh: Vec<&NodeClaim> = fresh.items.iter().collect();
                    let still: BTreeSet<&str> =
                        leaked(&instances, &fresh, unix_now()).into_iter().map(|i| i.id.as_str()).collect();
                    leaks.retain(|i| still.contains(i.id.as_str()));
                }
                Err(e) => {
                    failures.push(Error::kube("garbage collection: listing NodeClaims (no instance terminated)", e));
                    leaks.clear();
                }
            }
        }
        let claims: Vec<&NodeClaim> = objects.nodeclaims.iter().map(|nc| &**nc).collect();
        if !leaks.is_empty() {
            let ids: Vec<String> = leaks.iter().map(|i| i.id.clone()).collect();
            match self.ctx.cloud.delete(&ids).await {
                Ok(()) => {
                    tracing::warn!(instances = ?ids, "garbage collection: terminated instances no NodeClaim accounts for");
                    self.ctx.metrics.add(GARBAGE_COLLECTED_INSTANCES, &[], ids.len() as u64);
                    let nodes: Api<Node> = Api::all(self.ctx.client.clone());
                    for n in &objects.nodes {
                        let pid = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
                        if leaks.iter().any(|i| Some(i.provider_id.as_str()) == pid) {
                            let name = n.metadata.name.clone().unwrap_or_default();
                            let _ = nodes.delete(&name, &DeleteParams::default()).await;
                        }
                    }
                }
                Err(e) => failures.push(Error::cloud(format!("garbage collection: terminating leaked {ids:?}"), e)),
            }
        }
        if self.last_orphans.is_none_or(|t| t.elapsed() >= ORPHANS_EVERY) {
            self.last_orphans = Some(Instant::now());
            let classes: BTreeSet<String> =
                self.ctx.stores.nodeclasses.state().iter().filter_map(|n| n.metadata.name.clone()).collect();
            match self.ctx.cloud.collect_orphans(&classes).await {
                Ok(0) => {}
                Ok(n) => tracing::warn!(
                    deleted = n,
                    "garbage collection: launch templates / instance profiles of EC2NodeClasses that no longer exist"
                ),
                Err(e) => failures.push(Error::cloud(
                    "garbage collection: collecting orphaned launch templates / instance profiles",
                    e,
                )),
            }
        }
        let live: BTreeSet<&str> = instances.iter().map(|i| i.provider_id.as_str()).collect();
        let api: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        let nodes: Vec<&Node> = objects.nodes.iter().map(|n| &**n).collect();
        for nc in gone_nodeclaims(&claims, &live, &nodes) {
            let Some(id) = nc.status.as_ref().and_then(|s| s.provider_id.as_deref()).and_then(instance_id) else {
                continue;
            };
            // The list is eventually consistent: ask for this one before giving it up.
            let gone = match self.ctx.cloud.get(id).await {
                Ok(i) => !i.state.is_live(),
                Err(CloudError::NotFound(_)) => true,
                Err(_) => false,
            };
            if !gone {
                continue;
            }
            let name = nc.metadata.name.clone().unwrap_or_default();
            let message = format!("instance {id} no longer exists; deleting the NodeClaim");
            self.ctx
                .recorder
                .publish(&self.ctx.client, &involved_nodeclaim(nc), "Warning", "InstanceGone", &message)
                .await;
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {
                    let pods = tenon_core::convert::reschedulable_on(nc, &objects.pods);
                    self.ctx.metrics.nodeclaim_and_pods_disrupted(nc, "garbage_collected", "", pods);
                    tracing::warn!(nodeclaim = %name, instance = %id, "garbage collection: instance gone; NodeClaim deleted")
                }
                Err(e) => failures.push(Error::kube(format!("deleting NodeClaim {name}, whose instance is gone"), e)),
            }
        }
    }
}

/// Karpenter's NodeClaim garbage collection: the registered NodeClaims (of this provider, not
/// being deleted) whose instance the cloud no longer lists, unless their Node is still Ready
/// (its kubelet still runs, whatever the list says). One never registered is the
/// registration timeout's to give up, not this.
pub fn gone_nodeclaims<'a>(claims: &[&'a NodeClaim], live: &BTreeSet<&str>, nodes: &[&Node]) -> Vec<&'a NodeClaim> {
    claims
        .iter()
        .copied()
        .filter(|nc| {
            let Some(pid) = nc.status.as_ref().and_then(|s| s.provider_id.as_deref()) else { return false };
            lifecycle::is_managed(nc)
                && nc.metadata.deletion_timestamp.is_none()
                && conditions::has_condition(nc, condition::REGISTERED)
                && !live.contains(pid)
                && !nodes.iter().any(|n| {
                    n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(pid)
                        && crate::controller::termination::node_ready(n)
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tenon_core::cloud::InstanceState;

    fn instance(id: &str, nodeclaim: Option<&str>, launched: i64) -> Instance {
        let mut tags = BTreeMap::new();
        if let Some(n) = nodeclaim {
            tags.insert(tenon_api::wellknown::TAG_NODECLAIM.to_string(), n.to_string());
        }
        Instance {
            id: id.into(),
            provider_id: format!("aws:///us-east-1a/{id}"),
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: "on-demand".into(),
            image_id: "ami-1".into(),
            subnet_id: "subnet-1".into(),
            security_groups: vec![],
            state: InstanceState::Running,
            launched_at: Some(launched),
            tags,
            tenancy: "default".into(),
        }
    }

    fn claim(name: &str, provider_id: Option<&str>) -> NodeClaim {
        let status = provider_id.map(|p| format!("status: {{providerID: \"{p}\"}}\n")).unwrap_or_default();
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: {name}}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: x}}\n  requirements: []\n{status}"
        ))
        .unwrap()
    }

    #[test]
    fn only_old_instances_no_nodeclaim_accounts_for_are_leaked() {
        let now = 1_000;
        let instances = vec![
            instance("i-owned", Some("a"), 0),
            instance("i-tagged", Some("b"), 0),
            instance("i-orphan", Some("gone"), 0),
            instance("i-untagged", None, 0),
            instance("i-young", None, now - 5),
        ];
        let a = claim("a", Some("aws:///us-east-1a/i-owned"));
        // b's status was never written (crash after CreateFleet): the tag accounts for it.
        let b = claim("b", None);
        let leaks: Vec<&str> = leaked(&instances, &[&a, &b], now).into_iter().map(|i| i.id.as_str()).collect();
        assert_eq!(leaks, vec!["i-orphan", "i-untagged"]);
    }

    #[test]
    fn a_tag_naming_a_nodeclaim_that_owns_another_instance_protects_nothing() {
        let now = 1_000;
        // A second instance for "a" (a retried launch whose first answer was lost): "a" is
        // i-owned's, so i-twin is nobody's.
        let instances = vec![instance("i-owned", Some("a"), 0), instance("i-twin", Some("a"), 0)];
        let a = claim("a", Some("aws:///us-east-1a/i-owned"));
        let leaks: Vec<&str> = leaked(&instances, &[&a], now).into_iter().map(|i| i.id.as_str()).collect();
        assert_eq!(leaks, vec!["i-twin"]);
    }

    fn registered(name: &str, id: &str) -> NodeClaim {
        let mut nc = claim(name, Some(&format!("aws:///us-east-1a/{id}")));
        nc.status.as_mut().unwrap().conditions =
            crate::controller::conditions::with_condition(&nc, condition::REGISTERED, true, "Registered", "");
        nc
    }

    fn node(id: &str, ready: &str) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{id}.ec2.internal")},
            "spec": {"providerID": format!("aws:///us-east-1a/{id}")},
            "status": {"conditions": [{"type": "Ready", "status": ready}]}
        }))
        .unwrap()
    }

    fn gone<'a>(claims: &[&'a NodeClaim], live: &[&str], nodes: &[&Node]) -> Vec<&'a str> {
        let ids: Vec<String> = live.iter().map(|i| format!("aws:///us-east-1a/{i}")).collect();
        let live: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        gone_nodeclaims(claims, &live, nodes).into_iter().filter_map(|c| c.metadata.name.as_deref()).collect()
    }

    /// karpenter:pkg/controllers/nodeclaim/garbagecollection/suite_test.go:85
    #[test]
    fn a_registered_nodeclaim_whose_instance_is_gone_and_node_not_ready_is_collected() {
        let nc = registered("a", "i-a");
        assert_eq!(gone(&[&nc], &[], &[&node("i-a", "False")]), ["a"]);
        assert_eq!(gone(&[&nc], &[], &[&node("i-a", "Unknown")]), ["a"]);
    }

    /// karpenter:pkg/controllers/nodeclaim/garbagecollection/suite_test.go:112
    #[test]
    fn a_ready_node_keeps_its_nodeclaim_whatever_the_instance_list_says() {
        let nc = registered("a", "i-a");
        assert!(gone(&[&nc], &[], &[&node("i-a", "True")]).is_empty());
    }

    /// karpenter:pkg/controllers/nodeclaim/garbagecollection/suite_test.go:136
    #[test]
    fn many_nodeclaims_whose_instances_are_gone_are_collected_together() {
        let claims: Vec<NodeClaim> = (0..100).map(|i| registered(&format!("nc-{i}"), &format!("i-{i}"))).collect();
        let nodes: Vec<Node> = (0..100).map(|i| node(&format!("i-{i}"), "False")).collect();
        let refs: Vec<&NodeClaim> = claims.iter().collect();
        let node_refs: Vec<&Node> = nodes.iter().collect();
        assert_eq!(gone(&refs, &[], &node_refs).len(), 100);
    }

    /// karpenter:pkg/controllers/nodeclaim/garbagecollection/suite_test.go:178
    #[test]
    fn a_launched_nodeclaim_that_never_registered_is_left_to_the_registration_timeout() {
        let launched = claim("a", Some("aws:///us-east-1a/i-a"));
        assert!(gone(&[&launched], &[], &[]).is_empty());
        // Registered, with no Node at all: collected.
        assert_eq!(gone(&[&registered("b", "i-b")], &[], &[]), ["b"]);
    }

    /// karpenter:pkg/controllers/nodeclaim/garbagecollection/suite_test.go:201
    #[test]
    fn a_nodeclaim_whose_instance_is_listed_is_kept_without_a_node() {
        let nc = registered("a", "i-a");
        assert!(gone(&[&nc], &["i-a"], &[]).is_empty());
    }

    #[test]
    fn nodeclaims_of_another_provider_or_being_deleted_are_left_alone() {
        let mut foreign = registered("a", "i-a");
        foreign.spec.node_class_ref.as_mut().unwrap().group = "karpenter.test.sh".into();
        let mut deleting = registered("b", "i-b");
        deleting.metadata.deletion_timestamp = Some(crate::controller::conditions::now_time());
        assert!(gone(&[&foreign, &deleting], &[], &[]).is_empty());
    }
}
