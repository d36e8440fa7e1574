//! NodePool status: the capacity and count of its NodeClaims, and the conditions
//! `ValidationSucceeded`, `NodeClassReady` and `Ready` — how a bad NodePool says what is wrong
//! without stopping the others.

use crate::controller::conditions::set_condition;
use crate::controller::context::Context;
use crate::controller::error::{Error, Failures};
use crate::controller::events::Involved;
use crate::controller::runner::Reconciler;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::sync::Arc;
use tenon_api::nodepool::NodePoolStatus;
use tenon_api::validation::{Severity, validate_nodepool};
use tenon_api::wellknown::{self as wk, condition};
use tenon_api::{EC2NodeClass, NodeClaim, NodePool};
use tenon_core::convert::ClusterObjects;
use tenon_core::orchestration::registration_health::Verdict;
use tenon_core::resources::{Resources, format_amount};

/// What the controller has seen of a NodePool beyond its objects.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// Why its policies are unhealthy: (reason, message).
    pub policy: Option<(&'static str, String)>,
    /// What its NodeClaims' registrations (`orchestration::registration_health`) last set
    /// `NodeRegistrationHealthy` to. `None` keeps the condition as it is.
    pub registration: Option<Verdict>,
}

/// The NodePool's `NodeRegistrationHealthy` as a bool (None: Unknown or absent).
pub fn registration_condition(np: &NodePool) -> Option<bool> {
    let c = np.status.as_ref()?.conditions.iter().find(|c| c.type_ == condition::NODE_REGISTRATION_HEALTHY)?;
    match c.status.as_str() {
        "True" => Some(true),
        "False" => Some(false),
        _ => None,
    }
}

/// Whether the NodePool's registration record is void (Karpenter's registration-health
/// reset): the condition was never set, or the NodePool or its NodeClass changed since.
pub fn registration_stale(np: &NodePool, nodeclass: Option<&EC2NodeClass>) -> bool {
    let status = np.status.as_ref();
    let c = status.and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::NODE_REGISTRATION_HEALTHY));
    let Some(c) = c else { return true };
    c.observed_generation != np.metadata.generation
        || nodeclass.is_some_and(|nc| status.and_then(|s| s.node_class_observed_generation) != nc.metadata.generation)
}

/// The status `np` should have, given the cluster's NodeClaims, its NodeClass and what the
/// controller observed. `PolicyHealthy` and `NodeRegistrationHealthy` do not make the NodePool
/// NotReady, as in Karpenter: it keeps provisioning (with the built-in fallbacks when its
/// policies fail).
pub fn status(
    np: &NodePool,
    nodeclaims: &[std::sync::Arc<NodeClaim>],
    nodeclass: Option<&EC2NodeClass>,
    observed: &Observed,
) -> NodePoolStatus {
    let name = np.metadata.name.clone().unwrap_or_default();
    let mine: Vec<&NodeClaim> = nodeclaims
        .iter()
        .filter(|nc| nc.metadata.labels.as_ref().and_then(|l| l.get(wk::LABEL_NODEPOOL)) == Some(&name))
        .map(|nc| &**nc)
        .collect();
    let mut total = Resources::default();
    for nc in &mine {
        let caps = nc.status.as_ref().map(|s| &s.capacity);
        if let Some(r) =
            caps.and_then(|c| Resources::from_quantities(c.iter().map(|(k, q)| (k.as_str(), q.0.as_str()))).ok())
        {
            total.add(&r);
        }
    }
    let mut resources: std::collections::BTreeMap<String, Quantity> = total
        .entries()
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| (k.clone(), Quantity(format_amount(&k, v))))
        .collect();
    resources.insert("nodes".into(), Quantity(mine.len().to_string()));

    let generation = np.metadata.generation;
    let mut conds = np.status.as_ref().map(|s| s.conditions.clone()).unwrap_or_default();
    let errors: Vec<String> = validate_nodepool(np)
        .into_iter()
        .filter(|p| p.severity == Severity::Error)
        .map(|p| format!("{}: {} (fix: {})", p.path, p.message, p.hint))
        .collect();
    let valid = errors.is_empty();
    set_condition(
        &mut conds,
        condition::VALIDATION_SUCCEEDED,
        valid,
        if valid { "ValidationSucceeded" } else { "ValidationFailed" },
        &errors.join("; "),
        generation,
    );
    let class_ref = np.spec.template.spec.node_class_ref.as_ref().map(|r| r.name.clone()).unwrap_or_default();
    let (class_ok, class_reason, class_msg) = match nodeclass {
        None => (
            false,
            "NodeClassNotFound",
            format!("EC2NodeClass {class_ref:?} not found (spec.template.spec.nodeClassRef.name)"),
        ),
        Some(nc) => match nc.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::READY)) {
            Some(c) if c.status == "True" => (true, "NodeClassReady", String::new()),
            Some(c) => (false, "NodeClassNotReady", format!("EC2NodeClass {class_ref}: {}", c.message)),
            None => (false, "NodeClassNotReady", format!("EC2NodeClass {class_ref} has not been resolved yet")),
        },
    };
    set_condition(&mut conds, condition::NODE_CLASS_READY, class_ok, class_reason, &class_msg, generation);
    let (policy_ok, policy_reason, policy_message) = match &observed.policy {
        Some((reason, message)) => (false, *reason, message.as_str()),
        None => (true, "PolicyHealthy", ""),
    };
    set_condition(&mut conds, condition::POLICY_HEALTHY, policy_ok, policy_reason, policy_message, generation);
    if registration_stale(np, nodeclass) {
        set_unknown(&mut conds, condition::NODE_REGISTRATION_HEALTHY, generation);
    } else if let Some(v) = &observed.registration {
        set_condition(&mut conds, condition::NODE_REGISTRATION_HEALTHY, v.healthy, &v.reason, &v.message, generation);
    }
    let ready = valid && class_ok;
    let why: Vec<String> = conds
        .iter()
        .filter(|c| {
            ![condition::READY, condition::POLICY_HEALTHY, condition::NODE_REGISTRATION_HEALTHY]
                .contains(&c.type_.as_str())
                && c.status != "True"
        })
        .map(|c| format!("{}: {}", c.type_, c.message))
        .collect();
    set_condition(
        &mut conds,
        condition::READY,
        ready,
        if ready { "Ready" } else { "NotReady" },
        &why.join("; "),
        generation,
    );
    NodePoolStatus {
        resources,
        nodes: Some(mine.len() as i64),
        node_class_observed_generation: nodeclass.and_then(|c| c.metadata.generation),
        conditions: conds,
    }
}

/// Condition `t` Unknown, as Karpenter resets it.
fn set_unknown(conds: &mut Vec<tenon_api::common::Condition>, t: &str, generation: Option<i64>) {
    set_condition(conds, t, false, "AwaitingReconciliation", "object is awaiting reconciliation", generation);
    if let Some(c) = conds.iter_mut().find(|c| c.type_ == t) {
        c.status = "Unknown".into();
    }
}

/// Karpenter's `nodepool` status controllers (counter, readiness, validation, registration
/// health), and Tenon's resolution of each NodePool's policies (their health is a condition).
pub struct NodePoolStatusReconciler {
    pub ctx: Arc<Context>,
    /// The view and what was observed of each NodePool when every status was last written
    /// (or found current): the same again means the same statuses, not worth counting
    /// every NodeClaim twice a second for.
    written: Option<(std::sync::Weak<ClusterObjects>, Vec<Observed>)>,
}

impl NodePoolStatusReconciler {
    pub fn new(ctx: Arc<Context>) -> NodePoolStatusReconciler {
        NodePoolStatusReconciler { ctx, written: None }
    }
}

impl Reconciler for NodePoolStatusReconciler {
    const NAME: &'static str = "nodepool.status";

    /// NodePool status: resources, nodes and conditions; a validation failure is also an
    /// Event. Written only when it changes; each NodePool is written whatever happened to
    /// the others.
    async fn reconcile(&mut self) -> Result<(), Error> {
        // Each NodePool's policies first: their health is part of its status, written in
        // the same reconcile that resolves them (as the pass did).
        {
            let pools = self.ctx.stores.nodepools.state();
            let mut policies = self.ctx.policies();
            policies.refresh(&pools, std::time::Instant::now());
            policies.log_failures();
        }
        let objects = self.ctx.objects();
        let api: Api<NodePool> = Api::all(self.ctx.client.clone());
        let classes = self.ctx.stores.nodeclasses.state();
        let mut failures = Failures::default();
        let class_of = |np: &NodePool| {
            let r = np.spec.template.spec.node_class_ref.as_ref()?;
            classes.iter().find(|c| c.metadata.name.as_deref() == Some(r.name.as_str())).map(|c| &**c)
        };
        let observed: Vec<Observed> = objects.nodepools.iter().map(|np| self.observe(np, class_of(np))).collect();
        let view = Arc::downgrade(&objects);
        if self.written.as_ref().is_some_and(|(v, o)| v.ptr_eq(&view) && *o == observed) {
            return Ok(());
        }
        for (np, observed) in objects.nodepools.iter().zip(&observed) {
            let name = np.metadata.name.clone().unwrap_or_default();
            let class = class_of(np);
            let policy = observed.policy.clone();
            // Counted over every NodeClaim: outside the shared lock.
            let status = status(np, &objects.nodeclaims, class, observed);
            let failed =
                status.conditions.iter().find(|c| c.type_ == condition::VALIDATION_SUCCEEDED && c.status == "False");
            if failed.is_some() {
                self.ctx.cluster().invalid.insert(name.clone());
            } else {
                self.ctx.cluster().invalid.remove(&name);
            }
            if np.status.as_ref() == Some(&status) {
                continue;
            }
            let obj = Involved::cluster_scoped("karpenter.sh/v1", "NodePool", &np.metadata);
            if let Some(v) = failed {
                self.ctx.recorder.publish(&self.ctx.client, &obj, "Warning", "ValidationFailed", &v.message).await;
            }
            if let Some((reason, message)) = &policy {
                self.ctx.recorder.publish(&self.ctx.client, &obj, "Warning", reason, message).await;
            }
            if let Err(e) =
                api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&json!({"status": status}))).await
            {
                failures.push(Error::kube(format!("writing the status of NodePool {name}"), e));
            }
        }
        if failures.is_empty() {
            self.written = Some((view, observed));
        }
        failures.finish()
    }
}

impl NodePoolStatusReconciler {
    /// What the controller has seen of `np` beyond its objects: its policies' health and
    /// its registrations' verdict (reset when its template or NodeClass changed).
    fn observe(&self, np: &NodePool, class: Option<&EC2NodeClass>) -> Observed {
        let name = np.metadata.name.as_deref().unwrap_or_default();
        let uid = np.metadata.uid.clone().unwrap_or_default();
        let policy = self.ctx.policies().unhealthy(name);
        let mut cluster = self.ctx.cluster();
        if registration_stale(np, class) {
            cluster.registration.reset(&uid);
            cluster.registration_verdicts.remove(&uid);
        } else {
            cluster.registration.hydrate(&uid, registration_condition(np));
        }
        Observed { policy, registration: cluster.registration_verdicts.get(&uid).cloned() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(extra: &str) -> NodePool {
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {{name: lab, generation: 2}}\nspec:\n  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: lab}}\n      requirements: []\n{extra}"
        ))
        .unwrap()
    }

    fn nodeclass(ready: &str) -> EC2NodeClass {
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: lab, generation: 3}}\nspec:\n  role: r\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n  subnetSelectorTerms: [{{tags: {{a: b}}}}]\n  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]\nstatus:\n  conditions: [{{type: Ready, status: \"{ready}\", reason: x, message: \"SubnetsReady: no subnet matches\", lastTransitionTime: \"2026-11-30T00:00:00Z\"}}]\n"
        ))
        .unwrap()
    }

    fn claim(pool: &str, cpu: &str) -> NodeClaim {
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: c-{cpu}, labels: {{karpenter.sh/nodepool: {pool}}}}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: lab}}\n  requirements: []\nstatus:\n  capacity: {{cpu: \"{cpu}\", memory: 16Gi, pods: \"58\"}}\n"
        ))
        .unwrap()
    }

    fn cond<'a>(s: &'a NodePoolStatus, t: &str) -> &'a tenon_api::common::Condition {
        s.conditions.iter().find(|c| c.type_ == t).unwrap()
    }

    #[test]
    fn counts_its_nodeclaims_and_is_ready_with_a_ready_nodeclass() {
        let s = status(
            &pool(""),
            &tenon_core::convert::shared([claim("lab", "4"), claim("lab", "8"), claim("other", "2")]),
            Some(&nodeclass("True")),
            &Observed::default(),
        );
        assert_eq!(s.nodes, Some(2));
        assert_eq!(s.resources["cpu"].0, "12");
        assert_eq!(s.resources["nodes"].0, "2");
        assert_eq!(s.node_class_observed_generation, Some(3));
        assert_eq!(cond(&s, "Ready").status, "True");
    }

    #[test]
    fn an_invalid_budget_and_a_missing_nodeclass_are_conditions() {
        let bad = pool("  disruption:\n    budgets: [{nodes: \"ten\"}]\n");
        let s = status(&bad, &[], None, &Observed::default());
        let v = cond(&s, "ValidationSucceeded");
        assert_eq!((v.status.as_str(), v.reason.as_str()), ("False", "ValidationFailed"));
        assert!(v.message.contains("spec.disruption.budgets[0].nodes"), "{}", v.message);
        let c = cond(&s, "NodeClassReady");
        assert_eq!(c.reason, "NodeClassNotFound");
        assert!(c.message.contains("spec.template.spec.nodeClassRef.name"));
        let r = cond(&s, "Ready");
        assert_eq!(r.status, "False");
        assert!(r.message.contains("ValidationSucceeded") && r.message.contains("NodeClassReady"), "{}", r.message);
        let s = status(&pool(""), &[], Some(&nodeclass("False")), &Observed::default());
        assert!(cond(&s, "NodeClassReady").message.contains("no subnet matches"));
    }

    #[test]
    fn unhealthy_policies_are_a_condition_but_the_pool_stays_ready() {
        let observed = Observed {
            policy: Some(("PolicyUnavailable", "policy nope not found".to_string())),
            registration: Some(Verdict {
                healthy: false,
                reason: "RegistrationFailed".into(),
                message: "Failed to register node".into(),
            }),
        };
        let tracked = with_registration_tracked(pool(""), 3);
        let s = status(&tracked, &[], Some(&nodeclass("True")), &observed);
        let r = cond(&s, "NodeRegistrationHealthy");
        assert_eq!((r.status.as_str(), r.reason.as_str()), ("False", "RegistrationFailed"));
        assert_eq!(r.message, "Failed to register node");
        let p = cond(&s, "PolicyHealthy");
        assert_eq!((p.status.as_str(), p.reason.as_str()), ("False", "PolicyUnavailable"));
        assert_eq!(p.message, "policy nope not found");
        assert_eq!(cond(&s, "Ready").status, "True", "defaults keep provisioning");
        let s = status(&pool(""), &[], Some(&nodeclass("True")), &Observed::default());
        assert_eq!(cond(&s, "PolicyHealthy").status, "True");
        assert_eq!(cond(&s, "NodeRegistrationHealthy").status, "Unknown", "unknown until a NodeClaim tells");
    }

    /// `np` as the status pass left it with NodeRegistrationHealthy observed at its generation
    /// and NodeClass generation `class_generation`.
    fn with_registration_tracked(mut np: NodePool, class_generation: i64) -> NodePool {
        let s = status(&np, &[], Some(&nodeclass("True")), &Observed::default());
        np.status = Some(NodePoolStatus { node_class_observed_generation: Some(class_generation), ..s });
        np
    }

    #[test]
    fn a_changed_nodepool_or_nodeclass_voids_the_registration_record() {
        let np = with_registration_tracked(pool(""), 3);
        assert!(!registration_stale(&np, Some(&nodeclass("True"))));
        let mut bumped = np.clone();
        bumped.metadata.generation = Some(3);
        assert!(registration_stale(&bumped, Some(&nodeclass("True"))), "the NodePool changed");
        let mut class = nodeclass("True");
        class.metadata.generation = Some(4);
        assert!(registration_stale(&np, Some(&class)), "its NodeClass changed");
        let verdict = Observed {
            registration: Some(Verdict {
                healthy: true,
                reason: "NodeRegistrationHealthy".into(),
                message: String::new(),
            }),
            ..Observed::default()
        };
        assert_eq!(
            cond(&status(&bumped, &[], Some(&nodeclass("True")), &verdict), "NodeRegistrationHealthy").status,
            "Unknown"
        );
        assert_eq!(
            cond(&status(&np, &[], Some(&nodeclass("True")), &verdict), "NodeRegistrationHealthy").status,
            "True"
        );
    }
}
