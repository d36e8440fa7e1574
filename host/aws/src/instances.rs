//! Instances the cluster owns: describe, list (for garbage collection), and drift
//! against the NodeClass' resolved status. Describe calls take many ids at once, in chunks
//! EC2 accepts (terminations go through terminate_batcher.rs).

use crate::error::api;
use crate::nodeclass::ami_serves;
use aws_sdk_ec2::types::Filter;
use std::collections::BTreeMap;
use tenon_api::EC2NodeClass;
use tenon_core::cloud::{CloudError, Instance, InstanceState, TENANCY_DEFAULT};

/// Ids per DescribeInstances / TerminateInstances call.
pub const CHUNK: usize = 500;

pub(crate) fn from_sdk(i: &aws_sdk_ec2::types::Instance) -> Option<Instance> {
    let id = i.instance_id()?.to_string();
    let zone = i.placement().and_then(|p| p.availability_zone()).unwrap_or_default().to_string();
    let capacity_type = match i.instance_lifecycle().map(|l| l.as_str()) {
        Some("spot") => tenon_api::wellknown::CAPACITY_TYPE_SPOT,
        _ => tenon_api::wellknown::CAPACITY_TYPE_ON_DEMAND,
    };
    let state = i
        .state()
        .and_then(|s| s.name())
        .and_then(|n| InstanceState::parse(n.as_str()))
        .unwrap_or(InstanceState::Pending);
    Some(Instance {
        provider_id: format!("aws:///{zone}/{id}"),
        id,
        instance_type: i.instance_type().map(|t| t.as_str().to_string()).unwrap_or_default(),
        zone,
        capacity_type: capacity_type.to_string(),
        image_id: i.image_id().unwrap_or_default().to_string(),
        subnet_id: i.subnet_id().unwrap_or_default().to_string(),
        security_groups: i.security_groups().iter().filter_map(|g| g.group_id().map(str::to_string)).collect(),
        state,
        launched_at: i.launch_time().map(|t| t.secs()),
        tags: i.tags().iter().filter_map(|t| Some((t.key()?.to_string(), t.value()?.to_string()))).collect(),
        tenancy: match i.placement().and_then(|p| p.tenancy()).map(|t| t.as_str()) {
            Some(t) if !t.is_empty() => t.to_string(),
            _ => TENANCY_DEFAULT.to_string(),
        },
    })
}

/// Runs DescribeInstances with `filters` over every page.
pub(crate) async fn describe(ec2: &aws_sdk_ec2::Client, filters: Vec<Filter>) -> Result<Vec<Instance>, CloudError> {
    let mut out = Vec::new();
    let mut pages = ec2.describe_instances().set_filters(Some(filters)).into_paginator().send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| api("DescribeInstances", e))?;
        out.extend(page.reservations().iter().flat_map(|r| r.instances()).filter_map(from_sdk));
    }
    Ok(out)
}

/// The instances among `ids` that exist, by id (terminated ones included, with their state).
pub(crate) async fn get_many(
    ec2: &aws_sdk_ec2::Client,
    ids: &[String],
) -> Result<BTreeMap<String, Instance>, CloudError> {
    let mut out = BTreeMap::new();
    for chunk in ids.chunks(CHUNK) {
        // An id filter (unlike InstanceIds) ignores ids EC2 does not know instead of failing
        // the whole call.
        let filter = Filter::builder().name("instance-id").set_values(Some(chunk.to_vec())).build();
        for i in describe(ec2, vec![filter]).await? {
            out.insert(i.id.clone(), i);
        }
    }
    Ok(out)
}

/// Live instances of this cluster launched for a NodePool.
pub(crate) async fn list(ec2: &aws_sdk_ec2::Client, cluster: &str) -> Result<Vec<Instance>, CloudError> {
    let filters = vec![
        // One filter per name: EC2 ANDs filters, but emulators (and readers) do better
        // without two `tag-key` filters.
        Filter::builder()
            .name(format!("tag:{}{cluster}", tenon_api::wellknown::TAG_CLUSTER_PREFIX))
            .values("owned")
            .build(),
        Filter::builder().name("tag-key").values(tenon_api::wellknown::LABEL_NODEPOOL).build(),
        Filter::builder()
            .name("instance-state-name")
            .values("pending")
            .values("running")
            .values("stopping")
            .values("stopped")
            .build(),
    ];
    describe(ec2, filters).await
}

/// Why the instance no longer matches the NodeClass' resolved status: its AMI, subnet or
/// security groups are no longer what the selectors pick. `labels` are its NodeClaim's
/// (its instance type's): the AMI it should run is the one a launch would pick for them
/// now, the first status AMI serving them (Karpenter's `MapToInstanceTypes`), so a newer
/// image for its architecture and variant drifts it even while the old one is still
/// selected. Labels no status AMI serves (a NodeClaim written without them) fall back to
/// "still selected at all".
pub fn drift(instance: &Instance, labels: &BTreeMap<String, String>, nc: &EC2NodeClass) -> Option<String> {
    let status = nc.status.as_ref()?;
    let current = status.amis.iter().find(|a| ami_serves(a, labels));
    match current {
        Some(ami) if ami.id != instance.image_id => {
            return Some(format!(
                "AMIDrift: image {} is not {}, the image spec.amiSelectorTerms select for {} now",
                instance.image_id, ami.id, instance.instance_type
            ));
        }
        None if !status.amis.is_empty() && !status.amis.iter().any(|a| a.id == instance.image_id) => {
            return Some(format!(
                "AMIDrift: image {} is no longer selected by spec.amiSelectorTerms",
                instance.image_id
            ));
        }
        _ => {}
    }
    if !status.subnets.is_empty() && !status.subnets.iter().any(|s| s.id == instance.subnet_id) {
        return Some(format!(
            "SubnetDrift: subnet {} is no longer selected by spec.subnetSelectorTerms",
            instance.subnet_id
        ));
    }
    // Every VPC instance has at least one group: an instance reporting none tells nothing.
    if !status.security_groups.is_empty() && !instance.security_groups.is_empty() {
        let mut want: Vec<&str> = status.security_groups.iter().map(|g| g.id.as_str()).collect();
        let mut have: Vec<&str> = instance.security_groups.iter().map(String::as_str).collect();
        want.sort();
        have.sort();
        if want != have {
            return Some(format!(
                "SecurityGroupDrift: instance has [{}], spec.securityGroupSelectorTerms select [{}]",
                have.join(", "),
                want.join(", ")
            ));
        }
    }
    None
}
