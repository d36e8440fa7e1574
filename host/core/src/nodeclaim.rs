//! A planned NodeClaim as the `karpenter.sh/v1` object the controller creates: what the
//! API server stores, the cloud launches and the node registers with.

use crate::model::ClusterSnapshot;
use crate::orchestration::launch;
use crate::plan::NewNodeClaim;
use crate::requirements::{Requirement, is_well_known};
use crate::resources::format_amount;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use std::collections::BTreeMap;
use tenon_api::nodeclaim::ResourceRequirements;
use tenon_api::wellknown as wk;
use tenon_api::{NodeClaim, NodeClaimSpec, NodePool};

/// Whether this controller manages `nc`: its NodeClass is an EC2NodeClass (Karpenter's
/// `IsManaged`; NodeClaims of another provider's Karpenter are left alone, and their nodes are
/// nobody's to disrupt).
pub fn is_managed(nc: &NodeClaim) -> bool {
    nc.spec.node_class_ref.as_ref().is_some_and(|r| r.group == NODECLASS_GROUP && r.kind == NODECLASS_KIND)
}

const NODECLASS_GROUP: &str = "karpenter.k8s.aws";
const NODECLASS_KIND: &str = "EC2NodeClass";

/// The NodeClaim object for a planned NodeClaim of `np` (named `<nodepool>-<suffix>` by the
/// API server through generateName), planned over `snap`: its instance type options are
/// pinned with `node.kubernetes.io/instance-type In [...]` as Karpenter does, and the plan's
/// ranking of its offerings is carried for the launch.
pub fn nodeclaim(plan: &NewNodeClaim, np: &NodePool, snap: &ClusterSnapshot) -> NodeClaim {
    let instance_types = plan.instance_type_names(snap);
    let pool = np.metadata.name.clone().unwrap_or_default();
    let t = &np.spec.template;
    let mut labels = t.metadata.labels.clone();
    labels.insert(wk::LABEL_NODEPOOL.into(), pool.clone());
    // Karpenter's `<group>/<kind>` label naming the NodeClass: how a Node says which
    // provider's Karpenter manages it.
    if let Some(r) = &t.spec.node_class_ref {
        labels.insert(format!("{}/{}", r.group, r.kind.to_lowercase()), r.name.clone());
    }
    let mut annotations = t.metadata.annotations.clone();
    annotations.insert(wk::ANNOTATION_NODEPOOL_HASH.into(), np.template_hash());
    annotations.insert(wk::ANNOTATION_NODEPOOL_HASH_VERSION.into(), tenon_api::hash::NODEPOOL_HASH_VERSION.into());
    annotations.insert(wk::ANNOTATION_LAUNCH_OFFERINGS.into(), launch::encode(&launch::ranking(plan, snap)));
    annotations.insert(wk::ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED.into(), plan.min_values_relaxed.to_string());
    // The placeholder hostname the simulation used is not a real constraint.
    let mut reqs = plan.requirements.clone();
    let kept: Vec<_> = reqs.iter().filter(|r| r.key != wk::LABEL_HOSTNAME).cloned().collect();
    reqs = kept.into_iter().collect();
    // Custom labels get a value now, so the node registers with them and kube-scheduler can
    // bind the pods that asked for them; well-known ones come from the instance type.
    for r in reqs.iter() {
        let restricted = r.key.split('/').next().is_some_and(|d| d == "karpenter.sh" || d.ends_with(".karpenter.sh"));
        if !is_well_known(&r.key)
            && !restricted
            && let Some(v) = r.label_value()
        {
            labels.insert(r.key.clone(), v);
        }
    }
    if !instance_types.is_empty() {
        reqs.add(Requirement::in_values(wk::LABEL_INSTANCE_TYPE, instance_types.iter().copied()));
    }
    let requests: BTreeMap<String, Quantity> = plan
        .requests
        .entries()
        .into_iter()
        .filter(|(_, v)| *v > 0)
        .map(|(k, v)| (k.clone(), Quantity(format_amount(&k, v))))
        .collect();
    let spec = NodeClaimSpec {
        taints: t.spec.taints.clone(),
        startup_taints: t.spec.startup_taints.clone(),
        requirements: crate::convert::api_requirements(&reqs),
        resources: ResourceRequirements { requests },
        node_class_ref: t.spec.node_class_ref.clone(),
        termination_grace_period: t.spec.termination_grace_period.clone(),
        expire_after: t.spec.expire_after.clone(),
    };
    let mut nc = NodeClaim::new("", spec);
    nc.metadata.name = None;
    nc.metadata.generate_name = Some(format!("{pool}-"));
    nc.metadata.labels = Some(labels);
    nc.metadata.annotations = Some(annotations);
    nc.metadata.finalizers = Some(vec![wk::FINALIZER_TERMINATION.into()]);
    nc.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "karpenter.sh/v1".into(),
        kind: "NodePool".into(),
        name: pool,
        uid: np.metadata.uid.clone().unwrap_or_default(),
        block_owner_deletion: Some(true),
        controller: None,
    }]);
    nc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{AwsCatalogOptions, aws};
    use std::sync::Arc;

    #[test]
    fn planned_nodeclaims_become_karpenter_nodeclaims() {
        let root =
            std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("run under cargo test")).join("../..");
        let np: NodePool = serde_yaml::from_str(
            &std::fs::read_to_string(root.join("examples/seeds/lab-general/nodepool-lab-general.yaml")).unwrap(),
        )
        .unwrap();
        let cat = Arc::new(aws(&AwsCatalogOptions::default()).unwrap());
        let mut snap = crate::ClusterSnapshot { now: 0, ..Default::default() };
        snap.nodepools.push(crate::convert::nodepool(&np, cat).unwrap());
        let pod: crate::cached_pod::Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "inflate-1", "namespace": "karpenter-lab", "uid": "u1"},
            "spec": {"nodeSelector": {"capacity.example.io/pool": "lab-general"},
                     "containers": [{"name": "pause", "image": "pause", "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}]},
            "status": {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}
        }))
        .unwrap();
        snap.pods.push(crate::convert::pod(&pod).unwrap());
        let plan = crate::schedule(&snap, &crate::scorer::PriceScorer);
        assert_eq!(plan.nodeclaims.len(), 1);
        let names = plan.nodeclaims[0].instance_type_names(&snap);
        let nc = nodeclaim(&plan.nodeclaims[0], &np, &snap);
        assert_eq!(nc.metadata.generate_name.as_deref(), Some("lab-general-"));
        let labels = nc.metadata.labels.clone().unwrap();
        assert_eq!(labels["karpenter.sh/nodepool"], "lab-general");
        assert_eq!(labels["capacity.example.io/pool"], "lab-general");
        assert_eq!(labels["karpenter.k8s.aws/ec2nodeclass"], "lab-general", "the NodeClass label, as Karpenter's");
        assert_eq!(nc.metadata.annotations.clone().unwrap()["karpenter.sh/nodepool-hash"], np.template_hash());
        assert_eq!(nc.metadata.finalizers.clone().unwrap(), ["karpenter.sh/termination"]);
        assert_eq!(nc.metadata.owner_references.clone().unwrap()[0].kind, "NodePool");
        assert_eq!(nc.spec.node_class_ref.as_ref().unwrap().name, "lab-general");
        let keys: Vec<&str> = nc.spec.requirements.iter().map(|r| r.key.as_str()).collect();
        assert!(!keys.contains(&"kubernetes.io/hostname"), "no placeholder hostname: {keys:?}");
        let types = nc
            .spec
            .requirements
            .iter()
            .find(|r| r.key == "node.kubernetes.io/instance-type")
            .expect("instance types pinned");
        assert_eq!(types.values.len(), names.len());
        let gen_ = nc.spec.requirements.iter().find(|r| r.key == "karpenter.k8s.aws/instance-generation").unwrap();
        assert_eq!((gen_.operator.as_str(), gen_.values.as_slice()), ("Gt", &["4".to_string()][..]));
        assert!(nc.spec.resources.requests.contains_key("cpu"));
        // The plan's ranking travels with it: every offering of the pinned types, cheapest first.
        let ranked =
            launch::decode(&nc.metadata.annotations.clone().unwrap()[wk::ANNOTATION_LAUNCH_OFFERINGS]).unwrap();
        assert_eq!(ranked, launch::ranking(&plan.nodeclaims[0], &snap));
        assert_eq!(ranked[0].instance_type, names[0]);
        assert!(ranked.iter().all(|r| names.contains(&r.instance_type.as_str())));
        assert_eq!(nc.spec.expire_after, "720h");
        // What the API server will accept.
        let problems = tenon_api::validation::validate_nodeclaim(&{
            let mut named = nc.clone();
            named.metadata.name = Some("lab-general-x1y2z".into());
            named
        });
        assert!(problems.iter().all(|p| p.severity != tenon_api::validation::Severity::Error), "{problems:?}");
    }
}
