//! The NodePool template hash stamped on NodeClaims (`karpenter.sh/nodepool-hash`) so drift
//! can be detected when the template changes.
//!
//! Like Karpenter, requirements are left out (requirement drift is judged against the node's
//! labels instead) and so are disruption settings. Tenon's hash is its own (FNV-1a over the
//! template's canonical JSON), under its own version: a NodeClaim carrying another version
//! (Karpenter's `v3`) is re-stamped rather than treated as drifted, as Karpenter itself does
//! when its hash version changes.

use crate::NodePool;

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
