//! Read-modify-write of an object under an optimistic lock, as Karpenter's taint and status
//! writes do: a merge patch replaces a list (taints, finalizers, status conditions) whole, so
//! it carries the resourceVersion it was built from, and an object another writer changed
//! meanwhile is read again.

use super::conditions;
use kube::Api;
use kube::api::{Patch, PatchParams};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt::Debug;
use std::time::Duration;

/// Reads before giving up on conflicts (client-go's `retry.DefaultBackoff` steps).
const ATTEMPTS: u32 = 4;

/// Patches object `name` with `change` of it as read now (nothing when `None`), sent with
/// the resourceVersion read; a 409 reads again, up to [`ATTEMPTS`] times, 10 ms × 5ⁿ apart.
pub async fn patch_locked<K>(api: &Api<K>, name: &str, change: impl Fn(&K) -> Option<Value>) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug,
{
    write_locked(api, name, change, false).await
}

/// As [`patch_locked`], writing the status subresource.
pub async fn patch_status_locked<K>(
    api: &Api<K>,
    name: &str,
    change: impl Fn(&K) -> Option<Value>,
) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug,
{
    write_locked(api, name, change, true).await
}

async fn write_locked<K>(
    api: &Api<K>,
    name: &str,
    change: impl Fn(&K) -> Option<Value>,
    status: bool,
) -> Result<(), kube::Error>
where
    K: kube::Resource + Clone + DeserializeOwned + Debug,
{
    let mut attempt = 0;
    loop {
        let current = api.get(name).await?;
        let Some(patch) = change(&current) else { return Ok(()) };
        let patch = Patch::Merge(conditions::locked(current.meta(), patch));
        let written = if status {
            api.patch_status(name, &PatchParams::default(), &patch).await
        } else {
            api.patch(name, &PatchParams::default(), &patch).await
        };
        match written {
            Err(kube::Error::Api(e)) if e.code == 409 && attempt + 1 < ATTEMPTS => {
                tokio::time::sleep(Duration::from_millis(10 * 5u64.pow(attempt))).await;
                attempt += 1;
            }
            written => return written.map(|_| ()),
        }
    }
}
