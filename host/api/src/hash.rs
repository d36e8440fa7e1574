//! The NodePool template hash stamped on NodeClaims (`karpenter.sh/nodepool-hash`) so drift
//! can be detected when the template changes.
//!
//! Like Karpenter, requirements are left out (requirement drift is judged against the node's
//! labels instead) and so are disruption settings. Tenon's hash is its own (FNV-1a over the
//! template's canonical JSON), under its own version: a NodeClaim carrying another version
//! (Karpenter's `v3`) is re-stamped rather than treated as drifted, as Karpenter itself does
//! when its hash version changes.
//!
//! The EC2NodeClass hash (`karpenter.k8s.aws/ec2nodeclass-hash`, stamped on a NodeClaim at
//! launch) covers what launch templates are built from, as Karpenter's: not the selector
//! terms (their results drift on their own: AMI, subnet, security group), not the literal
//! `amiFamily` but the family it resolves to; lists compare as sets.

use crate::{EC2NodeClass, NodePool};

/// Value of `karpenter.sh/nodepool-hash-version` for hashes Tenon computes.
pub const NODEPOOL_HASH_VERSION: &str = "tenon-v1";

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl NodePool {
    /// The template hash: equal templates (ignoring requirements) hash equally.
    pub fn template_hash(&self) -> String {
        let mut template = self.spec.template.clone();
        template.spec.requirements.clear();
        // Field order is fixed by the types and maps are sorted, so the JSON is canonical.
        let json = serde_json::to_vec(&template).unwrap_or_default();
        fnv1a(&json).to_string()
    }
}

/// Value of `karpenter.k8s.aws/ec2nodeclass-hash-version` for hashes Tenon computes.
pub const EC2NODECLASS_HASH_VERSION: &str = "tenon-v1";

/// Fields of `EC2NodeClass.spec` left out of its static hash.
const NODECLASS_DYNAMIC_FIELDS: [&str; 6] = [
    "subnetSelectorTerms",
    "securityGroupSelectorTerms",
    "capacityReservationSelectorTerms",
    "ipPrefixCount",
    "amiSelectorTerms",
    "amiFamily",
];

impl EC2NodeClass {
    /// The static hash: equal for specs that launch the same nodes.
    pub fn static_hash(&self) -> String {
        let mut spec = match serde_json::to_value(&self.spec) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => serde_json::Map::new(),
        };
        for f in NODECLASS_DYNAMIC_FIELDS {
            spec.remove(f);
        }
        for v in spec.values_mut() {
            if let serde_json::Value::Array(items) = v {
                items.sort_by_key(|i| i.to_string());
            }
        }
        spec.insert("amiFamily".into(), self.ami_family().into());
        // Maps are sorted (no preserve_order): the JSON is canonical.
        let json = serde_json::to_vec(&serde_json::Value::Object(spec)).unwrap_or_default();
        fnv1a(&json).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(extra: &str) -> EC2NodeClass {
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: a}}\nspec:\n  role: r\n  subnetSelectorTerms: [{{tags: {{a: b}}}}]\n  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn what_launch_templates_are_built_from_changes_the_hash_selectors_do_not() {
        let base = class("").static_hash();
        for changed in [
            "  userData: echo hi\n",
            "  tags: {team: x}\n",
            "  kubelet: {maxPods: 20}\n",
            "  blockDeviceMappings: [{deviceName: /dev/xvda, ebs: {volumeSize: 50Gi}}]\n",
        ] {
            assert_ne!(class(changed).static_hash(), base, "{changed}");
        }
        let mut other_selectors = class("");
        other_selectors.spec.subnet_selector_terms.clear();
        other_selectors.spec.ami_selector_terms.clear();
        other_selectors.spec.ami_family = Some("AL2023".into());
        assert_eq!(other_selectors.static_hash(), base, "selectors and the literal amiFamily are not hashed");
    }
}
