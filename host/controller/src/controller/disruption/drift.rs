//! Drift the cloud provider sees (the instance no longer matches its EC2NodeClass) and the
//! hash stamps that make template changes drift: re-stamped across hash versions, as
//! Karpenter's hash controllers do.

use super::Disruption;
use crate::controller::conditions;
use crate::controller::error::Error;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::json;
use std::collections::BTreeMap;
use tenon_api::hash::{EC2NODECLASS_HASH_VERSION, NODEPOOL_HASH_VERSION};
use tenon_api::wellknown::{self as wk, condition};
use tenon_api::{EC2NodeClass, NodeClaim};
use tenon_core::ClusterSnapshot;
use tenon_core::convert::ClusterObjects;

impl Disruption {
    /// NodeClaim → why its instance no longer matches its EC2NodeClass (AMI, subnet,
    /// security groups), per the cloud provider.
    pub(super) async fn cloud_drift(&mut self, objects: &ClusterObjects) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let instances = match self.ctx.live_instances().await {
            Ok(i) => i,
            Err(e) => {
                self.failures.push(Error::cloud("drift: listing instances", e));
                return out;
            }
        };
        let classes = self.ctx.stores.nodeclasses.state();
        // One hash per NodeClass per round, not one per NodeClaim.
        let hashes: BTreeMap<&str, String> =
            classes.iter().map(|n| (n.metadata.name.as_deref().unwrap_or_default(), n.static_hash())).collect();
        let by_id: BTreeMap<&str, &tenon_core::cloud::Instance> =
            instances.iter().map(|i| (i.provider_id.as_str(), i)).collect();
        let claims: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        for nc in &objects.nodeclaims {
            let Some(pid) = nc.status.as_ref().and_then(|s| s.provider_id.as_deref()) else { continue };
            let Some(instance) = by_id.get(pid) else { continue };
            let class = nc.spec.node_class_ref.as_ref().map(|r| r.name.as_str());
            let Some(nodeclass) = classes.iter().find(|n| n.metadata.name.as_deref() == class) else { continue };
            let name = nc.metadata.name.clone().unwrap_or_default();
            let now = hashes.get(class.unwrap_or_default()).map(String::as_str).unwrap_or_default();
            match nodeclass_hash(nc, nodeclass, now) {
                NodeClassHash::Drifted(reason) => {
                    out.insert(name, reason);
                    continue;
                }
                NodeClassHash::Restamp(hash) => {
                    // Another hash version (an older Tenon, or Karpenter's): re-stamped with
                    // today's hash, not drifted, as Karpenter's hash controller does.
                    let meta = json!({"metadata": {"annotations": {
                        wk::ANNOTATION_NODECLASS_HASH: hash,
                        wk::ANNOTATION_NODECLASS_HASH_VERSION: EC2NODECLASS_HASH_VERSION,
                    }}});
                    if let Err(e) = claims.patch(&name, &PatchParams::default(), &Patch::Merge(&meta)).await {
                        tracing::warn!(nodeclaim = %name, error = %e, "could not re-stamp the EC2NodeClass hash");
                    }
                }
                NodeClassHash::Same => {}
            }
            let labels = nc.metadata.labels.clone().unwrap_or_default();
            if let Some(reason) = self.ctx.cloud.is_drifted(instance, &labels, nodeclass) {
                out.insert(nc.metadata.name.clone().unwrap_or_default(), reason);
            }
        }
        out
    }
}

impl Disruption {
    /// Karpenter's NodePool hash migration: a NodeClaim stamped under another hash version
    /// (an older Tenon, or Karpenter's own) gets today's, so template changes from now on
    /// drift it; one already Drifted keeps its old hash and stays drifted.
    pub(super) async fn restamp_nodepool_hashes(&self, objects: &ClusterObjects, snap: &ClusterSnapshot) {
        let claims: Api<NodeClaim> = Api::all(self.ctx.client.clone());
        for nc in objects.nodeclaims.iter().filter(|nc| nc.metadata.deletion_timestamp.is_none()) {
            let pool = crate::controller::pool_of(nc);
            let Some(tpl) = snap.nodepools.iter().find(|t| t.name == pool) else { continue };
            let Some(patch) = nodepool_stamp(nc, &tpl.hash) else { continue };
            let name = nc.metadata.name.as_deref().unwrap_or_default();
            if let Err(e) = claims.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                tracing::warn!(nodeclaim = %name, error = %e, "could not re-stamp the NodePool hash");
            }
        }
    }
}

/// The annotations that bring a NodeClaim's NodePool hash to today's version, if it is
/// stamped under another; `hash` is its NodePool's hash now.
fn nodepool_stamp(nc: &NodeClaim, hash: &str) -> Option<serde_json::Value> {
    let annotations = nc.metadata.annotations.as_ref();
    let version = annotations.and_then(|a| a.get(wk::ANNOTATION_NODEPOOL_HASH_VERSION));
    if version.map(String::as_str) == Some(NODEPOOL_HASH_VERSION) {
        return None;
    }
    let drifted = conditions::has_condition(nc, condition::DRIFTED);
    let mut stamp = serde_json::Map::new();
    stamp.insert(wk::ANNOTATION_NODEPOOL_HASH_VERSION.into(), NODEPOOL_HASH_VERSION.into());
    if !drifted {
        stamp.insert(wk::ANNOTATION_NODEPOOL_HASH.into(), hash.into());
    }
    Some(json!({"metadata": {"annotations": stamp}}))
}

/// How a NodeClaim's stamped EC2NodeClass hash compares with its NodeClass' now.
#[derive(Debug, PartialEq)]
enum NodeClassHash {
    Same,
    /// The static fields changed since launch (Karpenter's `NodeClassDrift`).
    Drifted(String),
    /// Stamped under another hash version, or not at all: re-stamp with this hash.
    Restamp(String),
}

/// `now` is `nodeclass`'s static hash.
fn nodeclass_hash(nc: &NodeClaim, nodeclass: &EC2NodeClass, now: &str) -> NodeClassHash {
    let annotations = nc.metadata.annotations.as_ref();
    let get = |k: &str| annotations.and_then(|a| a.get(k)).map(String::as_str);
    if get(wk::ANNOTATION_NODECLASS_HASH_VERSION) != Some(EC2NODECLASS_HASH_VERSION) {
        return NodeClassHash::Restamp(now.to_string());
    }
    match get(wk::ANNOTATION_NODECLASS_HASH) {
        Some(h) if h == now => NodeClassHash::Same,
        _ => NodeClassHash::Drifted(format!(
            "NodeClassDrift: EC2NodeClass {} changed since launch (userData, tags, kubelet, block devices, …)",
            nodeclass.metadata.name.as_deref().unwrap_or_default()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::claim;
    use super::*;

    fn nodeclass(user_data: &str) -> EC2NodeClass {
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: lab}}\nspec:\n  role: r\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n  userData: {user_data:?}\n"
        ))
        .unwrap()
    }

    /// karpenter:pkg/controllers/nodepool/hash/suite_test.go:163
    #[test]
    fn nodeclaims_stamped_under_another_nodepool_hash_version_are_restamped_unless_drifted() {
        let hash_of = |p: &serde_json::Value, k: &str| p["metadata"]["annotations"][k].as_str().map(String::from);
        let karpenters = claim(&[(wk::ANNOTATION_NODEPOOL_HASH, "123"), (wk::ANNOTATION_NODEPOOL_HASH_VERSION, "v3")]);
        let p = nodepool_stamp(&karpenters, "456").expect("re-stamped");
        assert_eq!(hash_of(&p, wk::ANNOTATION_NODEPOOL_HASH).as_deref(), Some("456"));
        assert_eq!(hash_of(&p, wk::ANNOTATION_NODEPOOL_HASH_VERSION).as_deref(), Some(NODEPOOL_HASH_VERSION));
        assert!(nodepool_stamp(&claim(&[]), "456").is_some(), "no version at all");
        let ours = claim(&[
            (wk::ANNOTATION_NODEPOOL_HASH, "123"),
            (wk::ANNOTATION_NODEPOOL_HASH_VERSION, NODEPOOL_HASH_VERSION),
        ]);
        assert_eq!(nodepool_stamp(&ours, "456"), None, "today's version: its hash is compared, not replaced");
        // Already drifted: only the version moves, so it stays drifted.
        let mut drifted = karpenters.clone();
        drifted.status = Some(serde_json::from_value(serde_json::json!({"conditions": [{"type": "Drifted", "status": "True", "reason": "NodePoolDrifted", "message": "", "lastTransitionTime": "2026-12-01T00:00:00Z"}]})).unwrap());
        let p = nodepool_stamp(&drifted, "456").expect("version bumped");
        assert_eq!(hash_of(&p, wk::ANNOTATION_NODEPOOL_HASH), None);
        assert_eq!(hash_of(&p, wk::ANNOTATION_NODEPOOL_HASH_VERSION).as_deref(), Some(NODEPOOL_HASH_VERSION));
    }

    #[test]
    fn a_nodeclaim_drifts_when_its_nodeclass_static_fields_change_and_is_restamped_across_versions() {
        let launched = nodeclass("echo one");
        let hash = launched.static_hash();
        let stamped = claim(&[
            (wk::ANNOTATION_NODECLASS_HASH, &hash),
            (wk::ANNOTATION_NODECLASS_HASH_VERSION, EC2NODECLASS_HASH_VERSION),
        ]);
        assert_eq!(nodeclass_hash(&stamped, &launched, &hash), NodeClassHash::Same);
        let edited = nodeclass("echo two");
        assert!(
            matches!(nodeclass_hash(&stamped, &edited, &edited.static_hash()), NodeClassHash::Drifted(r) if r.starts_with("NodeClassDrift"))
        );
        // Karpenter's own stamp (another version) or none: re-stamped, never drifted.
        let karpenters =
            claim(&[(wk::ANNOTATION_NODECLASS_HASH, "123"), (wk::ANNOTATION_NODECLASS_HASH_VERSION, "v4")]);
        assert_eq!(
            nodeclass_hash(&karpenters, &edited, &edited.static_hash()),
            NodeClassHash::Restamp(edited.static_hash())
        );
        assert_eq!(
            nodeclass_hash(&claim(&[]), &edited, &edited.static_hash()),
            NodeClassHash::Restamp(edited.static_hash())
        );
    }
}
