//! Launch templates: one per distinct launch configuration (AMI, user data, security groups,
//! instance profile, block devices, metadata options…), named by a hash of that
//! configuration so identical NodeClaims reuse one and a changed NodeClass gets a new one.

use crate::error::{api, code};
use aws_sdk_ec2::types::{
    Filter, LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateEbsBlockDeviceRequest,
    LaunchTemplateHttpTokensState, LaunchTemplateIamInstanceProfileSpecificationRequest,
    LaunchTemplateInstanceMetadataEndpointState, LaunchTemplateInstanceMetadataOptionsRequest,
    LaunchTemplateInstanceMetadataProtocolIpv6, LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
    LaunchTemplatesMonitoringRequest, RequestLaunchTemplateData, ResourceType, Tag, TagSpecification, VolumeType,
};
use base64::Engine;
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use tenon_api::EC2NodeClass;
use tenon_core::cloud::CloudError;

/// Everything a launch template holds. Serialised, it is the template's identity.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LaunchTemplateSpec {
    pub image_id: String,
    pub user_data: String,
    pub security_group_ids: Vec<String>,
    pub instance_profile: String,
    pub block_devices: Vec<BlockDevice>,
    pub metadata: Metadata,
    pub detailed_monitoring: bool,
    pub associate_public_ip: Option<bool>,
    /// Tags on the template itself (cluster ownership, NodeClass).
    pub tags: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BlockDevice {
    pub device_name: String,
    /// `None`: EC2's default, the snapshot's size (a snapshot mapping without `volumeSize`).
    pub volume_gib: Option<i32>,
    pub volume_type: String,
    pub encrypted: bool,
    pub delete_on_termination: bool,
    pub iops: Option<i32>,
    pub throughput: Option<i32>,
    pub kms_key_id: Option<String>,
    pub snapshot_id: Option<String>,
    /// MiB/s at which a volume made from a snapshot is initialized. Left out of the identity
    /// when unset, so templates made before the field existed keep their names.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub volume_initialization_rate: Option<i32>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Metadata {
    pub http_endpoint: String,
    pub http_protocol_ipv6: String,
    pub hop_limit: i32,
    pub http_tokens: String,
}

impl LaunchTemplateSpec {
    /// `tenon/<hash>`: the same configuration always has the same name.
    pub fn name(&self) -> String {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let digest = Sha256::digest(&json);
        format!("tenon/{}", digest.iter().take(10).map(|b| format!("{b:02x}")).collect::<String>())
    }
}

/// Karpenter's default volumes for an AMI family when the NodeClass names none.
pub fn block_devices(nc: &EC2NodeClass, family: &str) -> Result<Vec<BlockDevice>, CloudError> {
    let gp3 = |device: &str, gib: i32| BlockDevice {
        device_name: device.into(),
        volume_gib: Some(gib),
        volume_type: "gp3".into(),
        encrypted: true,
        delete_on_termination: true,
        iops: None,
        throughput: None,
        kms_key_id: None,
        snapshot_id: None,
        volume_initialization_rate: None,
    };
    if nc.spec.block_device_mappings.is_empty() {
        return Ok(match family {
            "Bottlerocket" => vec![gp3("/dev/xvda", 4), gp3("/dev/xvdb", 20)],
            _ => vec![gp3("/dev/xvda", 20)],
        });
    }
    let name = nc.metadata.name.clone().unwrap_or_default();
    nc.spec
        .block_device_mappings
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let invalid = |msg: String| CloudError::NodeClassNotReady { nodeclass: name.clone(), message: msg };
            let ebs = m.ebs.clone().unwrap_or_default();
            // Without a size, a volume from a snapshot takes the snapshot's (EC2 refuses a size
            // smaller than the snapshot); any other volume gets the 20 GiB default.
            let bytes = match &ebs.volume_size {
                Some(q) => Some(
                    tenon_api::quantity::parse_units(&q.0)
                        .map_err(|e| invalid(format!("spec.blockDeviceMappings[{i}].ebs.volumeSize: {e}")))?,
                ),
                None if ebs.snapshot_id.is_some() => None,
                None => Some(20 << 30),
            };
            let gib = bytes.map(|b| ((b + (1 << 30) - 1) >> 30) as i32);
            Ok(BlockDevice {
                device_name: m.device_name.clone().unwrap_or_else(|| "/dev/xvda".into()),
                volume_gib: gib,
                volume_type: ebs.volume_type.clone().unwrap_or_else(|| "gp3".into()),
                encrypted: ebs.encrypted.unwrap_or(true),
                delete_on_termination: ebs.delete_on_termination.unwrap_or(true),
                iops: ebs.iops.map(|v| v as i32),
                throughput: ebs.throughput.map(|v| v as i32),
                kms_key_id: ebs.kms_key_id.clone(),
                snapshot_id: ebs.snapshot_id.clone(),
                volume_initialization_rate: ebs.volume_initialization_rate,
            })
        })
        .collect()
}

pub fn metadata(nc: &EC2NodeClass) -> Metadata {
    let m = nc.spec.metadata_options.clone();
    Metadata {
        http_endpoint: m.as_ref().map_or("enabled".into(), |m| m.http_endpoint.clone()),
        http_protocol_ipv6: m.as_ref().map_or("disabled".into(), |m| m.http_protocol_ipv6.clone()),
        hop_limit: m.as_ref().map_or(1, |m| m.http_put_response_hop_limit as i32),
        http_tokens: m.as_ref().map_or("required".into(), |m| m.http_tokens.clone()),
    }
}

fn tags(t: &BTreeMap<String, String>) -> Vec<Tag> {
    t.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()
}

fn data(spec: &LaunchTemplateSpec) -> RequestLaunchTemplateData {
    let mut d = RequestLaunchTemplateData::builder()
        .image_id(&spec.image_id)
        .user_data(base64::engine::general_purpose::STANDARD.encode(&spec.user_data))
        .iam_instance_profile(
            LaunchTemplateIamInstanceProfileSpecificationRequest::builder().name(&spec.instance_profile).build(),
        )
        .monitoring(LaunchTemplatesMonitoringRequest::builder().enabled(spec.detailed_monitoring).build())
        .metadata_options(
            LaunchTemplateInstanceMetadataOptionsRequest::builder()
                .http_endpoint(LaunchTemplateInstanceMetadataEndpointState::from(spec.metadata.http_endpoint.as_str()))
                .http_protocol_ipv6(LaunchTemplateInstanceMetadataProtocolIpv6::from(
                    spec.metadata.http_protocol_ipv6.as_str(),
                ))
                .http_put_response_hop_limit(spec.metadata.hop_limit)
                .http_tokens(LaunchTemplateHttpTokensState::from(spec.metadata.http_tokens.as_str()))
                .build(),
        );
    for b in &spec.block_devices {
        d = d.block_device_mappings(
            LaunchTemplateBlockDeviceMappingRequest::builder()
                .device_name(&b.device_name)
                .ebs(
                    LaunchTemplateEbsBlockDeviceRequest::builder()
                        .set_volume_size(b.volume_gib)
                        .volume_type(VolumeType::from(b.volume_type.as_str()))
                        .encrypted(b.encrypted)
                        .delete_on_termination(b.delete_on_termination)
                        .set_iops(b.iops)
                        .set_throughput(b.throughput)
                        .set_kms_key_id(b.kms_key_id.clone())
                        .set_snapshot_id(b.snapshot_id.clone())
                        .set_volume_initialization_rate(b.volume_initialization_rate)
                        .build(),
                )
                .build(),
        );
    }
    // With a public-IP choice the groups go on the primary interface (EC2 rejects both).
    d = match spec.associate_public_ip {
        Some(public) => d.network_interfaces(
            LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
                .device_index(0)
                .associate_public_ip_address(public)
                .set_groups(Some(spec.security_group_ids.clone()))
                .build(),
        ),
        None => d.set_security_group_ids(Some(spec.security_group_ids.clone())),
    };
    d.build()
}

/// The template for `spec`, created if no template of that name exists yet.
pub(crate) async fn ensure(ec2: &aws_sdk_ec2::Client, spec: &LaunchTemplateSpec) -> Result<String, CloudError> {
    let name = spec.name();
    let found = ec2
        .describe_launch_templates()
        .filters(Filter::builder().name("launch-template-name").values(&name).build())
        .send()
        .await
        .map_err(|e| api("DescribeLaunchTemplates", e))?;
    if found.launch_templates().iter().any(|t| t.launch_template_name() == Some(name.as_str())) {
        return Ok(name);
    }
    let res = ec2
        .create_launch_template()
        .launch_template_name(&name)
        .launch_template_data(data(spec))
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::LaunchTemplate)
                .set_tags(Some(tags(&spec.tags)))
                .build(),
        )
        .send()
        .await;
    match res {
        Ok(_) => Ok(name),
        // Created concurrently by another launch: same name, same content.
        Err(e) if code(&e).as_deref() == Some("InvalidLaunchTemplateName.AlreadyExistsException") => Ok(name),
        Err(e) => Err(api("CreateLaunchTemplate", e)),
    }
}

/// The NodeClasses the cluster has launch templates for (by their tag).
pub(crate) async fn nodeclasses_with_templates(
    ec2: &aws_sdk_ec2::Client,
    cluster: &str,
) -> Result<std::collections::BTreeSet<String>, CloudError> {
    let mut out = std::collections::BTreeSet::new();
    let mut pages = ec2
        .describe_launch_templates()
        .filters(Filter::builder().name(format!("tag:{}", crate::TAG_CLUSTER)).values(cluster).build())
        .into_paginator()
        .send();
    while let Some(page) = pages.next().await {
        let page = page.map_err(|e| api("DescribeLaunchTemplates", e))?;
        for t in page.launch_templates() {
            if let Some(v) = t.tags().iter().find(|g| g.key() == Some(crate::TAG_NODECLASS)).and_then(|g| g.value()) {
                out.insert(v.to_string());
            }
        }
    }
    Ok(out)
}

/// Deletes the cluster's launch templates of a NodeClass (on NodeClass deletion).
pub(crate) async fn delete_for(ec2: &aws_sdk_ec2::Client, cluster: &str, nodeclass: &str) -> Result<usize, CloudError> {
    let found = ec2
        .describe_launch_templates()
        .filters(Filter::builder().name(format!("tag:{}", crate::TAG_CLUSTER)).values(cluster).build())
        .filters(Filter::builder().name(format!("tag:{}", crate::TAG_NODECLASS)).values(nodeclass).build())
        .send()
        .await
        .map_err(|e| api("DescribeLaunchTemplates", e))?;
    let mut n = 0;
    for t in found.launch_templates() {
        if let Some(id) = t.launch_template_id() {
            match ec2.delete_launch_template().launch_template_id(id).send().await {
                Ok(_) => n += 1,
                Err(e) if code(&e).is_some_and(|c| c.contains("NotFound")) => {}
                Err(e) => return Err(api("DeleteLaunchTemplate", e)),
            }
        }
    }
    Ok(n)
}
