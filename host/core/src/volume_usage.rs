//! The volumes a pod attaches, by CSI driver, and the attach limits a node's CSINode reports:
//! kube-scheduler refuses a pod that would take a node past a driver's limit, so a decision
//! must not count on that node for it (Karpenter's `VolumeUsage`).

use crate::cached_pod;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Claims (`namespace/name`) by the CSI driver that attaches them.
pub type Volumes = BTreeMap<String, BTreeSet<String>>;

/// Attachable volumes by CSI driver.
pub type Limits = BTreeMap<String, i64>;

/// The CSI driver that replaced an in-tree volume plugin (Kubernetes' CSI migration).
fn migrated(plugin: &str) -> Option<&'static str> {
    Some(match plugin {
        "kubernetes.io/aws-ebs" => "ebs.csi.aws.com",
        "kubernetes.io/gce-pd" => "pd.csi.storage.gke.io",
        "kubernetes.io/azure-disk" => "disk.csi.azure.com",
        "kubernetes.io/azure-file" => "file.csi.azure.com",
        "kubernetes.io/cinder" => "cinder.csi.openstack.org",
        "kubernetes.io/vsphere-volume" => "csi.vsphere.vmware.com",
        "kubernetes.io/portworx-volume" => "pxd.portworx.com",
        _ => return None,
    })
}

/// The driver that attaches `pvc`, as Karpenter resolves it: its bound volume's CSI driver
/// (an in-tree EBS volume: the EBS driver; any other: none), else its StorageClass'
/// provisioner (in-tree names translated). A claim naming no class, or a missing class or
/// volume, is not counted.
fn driver(
    pvc: &core::PersistentVolumeClaim,
    volumes: &[Arc<core::PersistentVolume>],
    classes: &[Arc<storage::StorageClass>],
) -> Option<String> {
    let spec = pvc.spec.as_ref()?;
    if let Some(name) = spec.volume_name.as_deref().filter(|n| !n.is_empty()) {
        let pv = crate::convert::find_named(volumes, name)?.spec.as_ref()?;
        return match (&pv.csi, &pv.aws_elastic_block_store) {
            (Some(csi), _) => Some(csi.driver.clone()),
            (None, Some(_)) => migrated("kubernetes.io/aws-ebs").map(str::to_string),
            (None, None) => None,
        };
    }
    let class = crate::convert::find_named(classes, spec.storage_class_name.as_deref().filter(|n| !n.is_empty())?)?;
    Some(migrated(&class.provisioner).map_or_else(|| class.provisioner.clone(), str::to_string))
}

/// The volumes pod `p` attaches: each claim it uses (an ephemeral volume's once created),
/// under its driver.
pub fn pod_volumes(
    p: &cached_pod::Pod,
    claims: &[Arc<core::PersistentVolumeClaim>],
    volumes: &[Arc<core::PersistentVolume>],
    classes: &[Arc<storage::StorageClass>],
) -> Volumes {
    let ns = p.metadata.namespace.as_deref().unwrap_or("default");
    let mut out = Volumes::new();
    for (name, _) in crate::convert::pod_claims(p) {
        let Some(pvc) = crate::convert::find_claim(claims, ns, &name) else { continue };
        if let Some(d) = driver(pvc, volumes, classes) {
            out.entry(d).or_default().insert(format!("{ns}/{name}"));
        }
    }
    out
}

/// The attach limits `csinode` reports (drivers without an allocatable count are unlimited).
pub fn limits(csinode: &storage::CSINode) -> Limits {
    csinode
        .spec
        .drivers
        .iter()
        .filter_map(|d| Some((d.name.clone(), i64::from(d.allocatable.as_ref()?.count?))))
        .collect()
}

/// Whether adding `more` to `used` takes some driver past its limit.
pub fn exceeds(used: &Volumes, more: &Volumes, limits: &Limits) -> bool {
    more.iter().any(|(driver, claims)| {
        limits.get(driver).is_some_and(|&limit| {
            let already = used.get(driver);
            let new = claims.iter().filter(|c| already.is_none_or(|a| !a.contains(*c))).count();
            (already.map_or(0, BTreeSet::len) + new) as i64 > limit
        })
    })
}

/// Adds `more` to `used`.
pub fn add(used: &mut Volumes, more: &Volumes) {
    for (driver, claims) in more {
        used.entry(driver.clone()).or_default().extend(claims.iter().cloned());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml<T: serde::de::DeserializeOwned>(s: &str) -> Arc<T> {
        Arc::new(serde_yaml::from_str(s).unwrap())
    }

    fn claim(spec: &str) -> core::PersistentVolumeClaim {
        serde_yaml::from_str(&format!("metadata: {{name: c, namespace: default}}\nspec: {spec}\n")).unwrap()
    }

    #[test]
    fn a_claims_driver_is_its_volumes_else_its_classs() {
        let volumes = [
            yaml("metadata: {name: csi}\nspec: {csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}}\n"),
            yaml("metadata: {name: in-tree}\nspec: {awsElasticBlockStore: {volumeID: vol-2}}\n"),
            yaml("metadata: {name: nfs}\nspec: {nfs: {server: s, path: /p}}\n"),
        ];
        let classes = [
            yaml("metadata: {name: gp3}\nprovisioner: ebs.csi.aws.com\n"),
            yaml("metadata: {name: old}\nprovisioner: kubernetes.io/aws-ebs\n"),
            yaml("metadata: {name: efs}\nprovisioner: efs.csi.aws.com\n"),
        ];
        let of = |spec: &str| driver(&claim(spec), &volumes, &classes);
        assert_eq!(of("{volumeName: csi, storageClassName: efs}").as_deref(), Some("ebs.csi.aws.com"), "the volume's");
        assert_eq!(of("{volumeName: in-tree}").as_deref(), Some("ebs.csi.aws.com"), "migrated");
        assert_eq!(of("{volumeName: nfs, storageClassName: gp3}"), None, "bound to no CSI volume");
        assert_eq!(of("{volumeName: gone, storageClassName: gp3}"), None, "a missing volume");
        assert_eq!(of("{storageClassName: old}").as_deref(), Some("ebs.csi.aws.com"), "migrated");
        assert_eq!(of("{storageClassName: efs}").as_deref(), Some("efs.csi.aws.com"));
        assert_eq!(of("{storageClassName: \"\"}"), None);
        assert_eq!(of("{storageClassName: missing}"), None);
        assert_eq!(of("{}"), None);
    }

    #[test]
    fn a_shared_claim_is_counted_once_against_the_limit() {
        let v = |claims: &[&str]| -> Volumes {
            Volumes::from([("d".to_string(), claims.iter().map(|c| c.to_string()).collect())])
        };
        let limits = Limits::from([("d".to_string(), 2)]);
        assert!(!exceeds(&v(&["a", "b"]), &v(&["a"]), &limits), "already attached");
        assert!(exceeds(&v(&["a", "b"]), &v(&["c"]), &limits));
        assert!(!exceeds(&v(&["a"]), &v(&["b"]), &limits));
        assert!(!exceeds(&v(&["a", "b"]), &v(&["c"]), &Limits::new()), "no limit");
        let mut used = v(&["a"]);
        add(&mut used, &v(&["a", "b"]));
        assert_eq!(used, v(&["a", "b"]));
    }
}
