//! Read-modify-write of a Node under an optimistic lock, as Karpenter's taint writes do: a
//! merge patch replaces a list (taints, finalizers) whole, so it carries the resourceVersion
//! it was built from, and a Node another writer changed meanwhile is read again.

use super::conditions;
use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde_json::Value;
use std::time::Duration;

/// Reads before giving up on conflicts (client-go's `retry.DefaultBackoff` steps).
const ATTEMPTS: u32 = 4;

/// Patches Node `name` with `change` of it as read now (nothing when `None`), sent with the
/// resourceVersion read; a 409 reads again, up to [`ATTEMPTS`] times, 10 ms × 5ⁿ apart.
pub async fn patch_locked(
    nodes: &Api<Node>,
    name: &str,
    change: impl Fn(&Node) -> Option<Value>,
) -> Result<(), kube::Error> {
    let mut attempt = 0;
    loop {
        let current = nodes.get(name).await?;
        let Some(patch) = change(&current) else { return Ok(()) };
        let patch = conditions::locked(&current.metadata, patch);
        match nodes.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Err(kube::Error::Api(e)) if e.code == 409 && attempt + 1 < ATTEMPTS => {
                tokio::time::sleep(Duration::from_millis(10 * 5u64.pow(attempt))).await;
                attempt += 1;
            }
            written => return written.map(|_| ()),
        }
    }
}
