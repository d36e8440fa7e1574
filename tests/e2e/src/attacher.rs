//! The CSI attach/detach stand-in: a VolumeAttachment for each persistent volume a pod on a
//! node uses (its claim bound), as the attach/detach controller keeps them; deleted once no
//! pod on that node uses the volume any more (a terminating pod still does), after
//! [`DETACH_DELAY`], as a real detach takes a moment.

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::VolumeAttachment;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

pub const DETACH_DELAY: Duration = Duration::from_secs(2);

/// The attacher's own VolumeAttachments are named after the volume and the node.
fn name(pv: &str, node: &str) -> String {
    format!("csi-{pv}-{node}").replace(['.', '_'], "-").to_lowercase()
}

pub async fn run(client: Client, mut pace: super::Pace) {
    let pods: Api<Pod> = Api::all(client.clone());
    let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
    let vas: Api<VolumeAttachment> = Api::all(client.clone());
    let mut unused_since: BTreeMap<String, Instant> = BTreeMap::new();
    loop {
        // A volume left unused detaches after a delay: rounds go on while one waits.
        pace.next(!unused_since.is_empty()).await;
        let lp = ListParams::default();
        let (Ok(pods), Ok(claims), Ok(existing)) = (pods.list(&lp).await, claims.list(&lp).await, vas.list(&lp).await)
        else {
            continue;
        };
        let bound: BTreeMap<(String, String), String> = claims
            .items
            .iter()
            .filter_map(|c| {
                let key = (c.metadata.namespace.clone()?, c.metadata.name.clone()?);
                Some((key, c.spec.as_ref()?.volume_name.clone().filter(|v| !v.is_empty())?))
            })
            .collect();
        // (volume, node) pairs some pod on the node uses now.
        let mut used: BTreeSet<(String, String)> = BTreeSet::new();
        for p in &pods.items {
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            let Some(node) = p.spec.as_ref().and_then(|s| s.node_name.clone()) else { continue };
            if matches!(phase, Some("Succeeded" | "Failed")) {
                continue;
            }
            let ns = p.metadata.namespace.clone().unwrap_or_default();
            for v in p.spec.as_ref().and_then(|s| s.volumes.as_ref()).into_iter().flatten() {
                let Some(claim) = v.persistent_volume_claim.as_ref() else { continue };
                if let Some(pv) = bound.get(&(ns.clone(), claim.claim_name.clone())) {
                    used.insert((pv.clone(), node.clone()));
                }
            }
        }
        let have: BTreeSet<String> = existing.items.iter().filter_map(|va| va.metadata.name.clone()).collect();
        for (pv, node) in &used {
            let n = name(pv, node);
            unused_since.remove(&n);
            if have.contains(&n) {
                continue;
            }
            let va: VolumeAttachment = serde_json::from_value(json!({
                "metadata": {"name": n},
                "spec": {"attacher": "ebs.csi.aws.com", "nodeName": node, "source": {"persistentVolumeName": pv}},
            }))
            .expect("a VolumeAttachment");
            let _ = vas.create(&PostParams::default(), &va).await;
        }
        let wanted: BTreeSet<String> = used.iter().map(|(pv, node)| name(pv, node)).collect();
        let now = Instant::now();
        for n in have.iter().filter(|n| n.starts_with("csi-") && !wanted.contains(*n)) {
            let since = *unused_since.entry(n.clone()).or_insert(now);
            if now.duration_since(since) >= DETACH_DELAY {
                let _ = vas.delete(n, &DeleteParams::default()).await;
                unused_since.remove(n);
            }
        }
    }
}
