//! Instance profiles. `spec.role` means Tenon manages a profile for the NodeClass (create,
//! tag, attach the role, swap it when the role changes, delete it with the NodeClass);
//! `spec.instanceProfile` names one the user manages, which Tenon only checks exists.

use crate::error::{api, code};
use crate::nodeclass::Check;
use sha2::{Digest, Sha256};
use tenon_api::EC2NodeClass;
use tenon_api::wellknown::condition;
use tenon_core::cloud::CloudError;

/// The managed profile's name: the cluster's name and a hash of region and NodeClass, so
/// two clusters (or regions) never share one, within IAM's 128 characters.
pub fn managed_name(cluster: &str, region: &str, nodeclass: &str) -> String {
    let digest = Sha256::digest(format!("{region}/{nodeclass}").as_bytes());
    let hash: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let prefix: String = cluster.chars().take(100).collect();
    format!("{prefix}_{hash}")
}

fn profile_path(cluster: &str, region: &str) -> String {
    format!("/tenon/{region}/{cluster}/")
}

/// Makes sure the NodeClass' profile exists with the right role; returns its name.
pub(crate) async fn ensure(
    iam: &aws_sdk_iam::Client,
    cluster: &str,
    region: &str,
    nc: &EC2NodeClass,
) -> Result<(Option<String>, Check), CloudError> {
    let ncname = nc.metadata.name.clone().unwrap_or_default();
    if let Some(name) = &nc.spec.instance_profile {
        return match iam.get_instance_profile().instance_profile_name(name).send().await {
            Ok(_) => Ok((Some(name.clone()), Check::ok(condition::INSTANCE_PROFILE_READY))),
            Err(e) if code(&e).as_deref() == Some("NoSuchEntity") => Ok((
                None,
                Check::failed(
                    condition::INSTANCE_PROFILE_READY,
                    "InstanceProfileNotFound",
                    format!(
                        "spec.instanceProfile {name:?} does not exist; create it or use spec.role to let Tenon manage one"
                    ),
                ),
            )),
            Err(e) => Err(api("GetInstanceProfile", e)),
        };
    }
    let Some(role) = &nc.spec.role else {
        return Ok((
            None,
            Check::failed(
                condition::INSTANCE_PROFILE_READY,
                "NoRole",
                "set spec.role (Tenon manages the instance profile) or spec.instanceProfile".into(),
            ),
        ));
    };
    // A role may be given as an ARN; IAM's profile calls take the bare name.
    let role_name = role.rsplit('/').next().unwrap_or(role);
    let name = managed_name(cluster, region, &ncname);
    let existing = match iam.get_instance_profile().instance_profile_name(&name).send().await {
        Ok(out) => out.instance_profile().cloned(),
        Err(e) if code(&e).as_deref() == Some("NoSuchEntity") => None,
        Err(e) => return Err(api("GetInstanceProfile", e)),
    };
    let roles: Vec<String> = match existing {
        Some(p) => p.roles().iter().map(|r| r.role_name().to_string()).collect(),
        None => {
            let tag = |k: &str, v: &str| aws_sdk_iam::types::Tag::builder().key(k).value(v).build();
            let mut req =
                iam.create_instance_profile().instance_profile_name(&name).path(profile_path(cluster, region));
            for (k, v) in [
                (format!("kubernetes.io/cluster/{cluster}"), "owned".to_string()),
                ("eks:eks-cluster-name".into(), cluster.to_string()),
                ("karpenter.sh/managed-by".into(), cluster.to_string()),
                ("karpenter.k8s.aws/ec2nodeclass".into(), ncname.clone()),
                ("topology.kubernetes.io/region".into(), region.to_string()),
            ] {
                req = req.tags(tag(&k, &v).map_err(|e| CloudError::InvalidRequest(e.to_string()))?);
            }
            match req.send().await {
                Ok(_) => {}
                // Another reconcile created it first: use it.
                Err(e) if code(&e).as_deref() == Some("EntityAlreadyExists") => {}
                Err(e) => return Err(api("CreateInstanceProfile", e)),
            }
            Vec::new()
        }
    };
    for other in roles.iter().filter(|r| *r != role_name) {
        iam.remove_role_from_instance_profile()
            .instance_profile_name(&name)
            .role_name(other)
            .send()
            .await
            .map_err(|e| api("RemoveRoleFromInstanceProfile", e))?;
    }
    if !roles.iter().any(|r| r == role_name) {
        match iam.add_role_to_instance_profile().instance_profile_name(&name).role_name(role_name).send().await {
            Ok(_) => {}
            Err(e) if code(&e).as_deref() == Some("NoSuchEntity") => {
                return Ok((
                    None,
                    Check::failed(
                        condition::INSTANCE_PROFILE_READY,
                        "RoleNotFound",
                        format!("spec.role {role:?} does not exist in IAM; create the node role or fix the name"),
                    ),
                ));
            }
            Err(e) if code(&e).as_deref() == Some("LimitExceeded") => {}
            Err(e) => return Err(api("AddRoleToInstanceProfile", e)),
        }
    }
    Ok((Some(name), Check::ok(condition::INSTANCE_PROFILE_READY)))
}

/// Deletes the cluster's managed profiles (under its path) that belong to none of
/// `nodeclasses`; returns how many.
pub(crate) async fn delete_unless(
    iam: &aws_sdk_iam::Client,
    cluster: &str,
    region: &str,
    nodeclasses: &std::collections::BTreeSet<String>,
) -> Result<usize, CloudError> {
    let keep: std::collections::BTreeSet<String> =
        nodeclasses.iter().map(|n| managed_name(cluster, region, n)).collect();
    let mut n = 0;
    let mut pages = iam.list_instance_profiles().path_prefix(profile_path(cluster, region)).into_paginator().send();
    let mut orphans = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| api("ListInstanceProfiles", e))?;
        for p in page.instance_profiles() {
            if !keep.contains(p.instance_profile_name()) {
                orphans.push((
                    p.instance_profile_name().to_string(),
                    p.roles().iter().map(|r| r.role_name().to_string()).collect::<Vec<_>>(),
                ));
            }
        }
    }
    for (name, roles) in orphans {
        remove(iam, &name, &roles).await?;
        n += 1;
    }
    Ok(n)
}

/// Detaches `roles` from profile `name` and deletes it; one already gone is not an error.
async fn remove(iam: &aws_sdk_iam::Client, name: &str, roles: &[String]) -> Result<(), CloudError> {
    for r in roles {
        iam.remove_role_from_instance_profile()
            .instance_profile_name(name)
            .role_name(r)
            .send()
            .await
            .map_err(|e| api("RemoveRoleFromInstanceProfile", e))?;
    }
    match iam.delete_instance_profile().instance_profile_name(name).send().await {
        Ok(_) => Ok(()),
        Err(e) if code(&e).as_deref() == Some("NoSuchEntity") => Ok(()),
        Err(e) => Err(api("DeleteInstanceProfile", e)),
    }
}

/// Deletes the managed profile of a NodeClass being deleted. A profile the user named in
/// `spec.instanceProfile` is never touched; one already gone is not an error.
pub(crate) async fn delete(
    iam: &aws_sdk_iam::Client,
    cluster: &str,
    region: &str,
    nc: &EC2NodeClass,
) -> Result<(), CloudError> {
    if nc.spec.instance_profile.is_some() {
        return Ok(());
    }
    let name = managed_name(cluster, region, nc.metadata.name.as_deref().unwrap_or_default());
    let profile = match iam.get_instance_profile().instance_profile_name(&name).send().await {
        Ok(out) => out.instance_profile().cloned(),
        Err(e) if code(&e).as_deref() == Some("NoSuchEntity") => return Ok(()),
        Err(e) => return Err(api("GetInstanceProfile", e)),
    };
    let roles: Vec<String> = profile.iter().flat_map(|p| p.roles()).map(|r| r.role_name().to_string()).collect();
    remove(iam, &name, &roles).await
}
