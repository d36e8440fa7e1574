//! (Long: the template data built field group by field group, then ensure and delete; tests last.)
//! Launch templates: one per distinct launch configuration (AMI, user data, security groups,
//! instance profile, block devices, metadata options…), named by a hash of that
//! configuration so identical NodeClaims reuse one and a changed NodeClass gets a new one.

use crate::error::{api, code};
use crate::known_templates::KnownTemplates;
use aws_sdk_ec2::types::{
    CapacityReservationPreference, ConnectionTrackingSpecificationRequest, Filter,
    LaunchTemplateBlockDeviceMappingRequest, LaunchTemplateCapacityReservationSpecificationRequest,
    LaunchTemplateEbsBlockDeviceRequest, LaunchTemplateEnclaveOptionsRequest, LaunchTemplateHttpTokensState,
    LaunchTemplateIamInstanceProfileSpecificationRequest, LaunchTemplateInstanceMetadataEndpointState,
    LaunchTemplateInstanceMetadataOptionsRequest, LaunchTemplateInstanceMetadataProtocolIpv6,
    LaunchTemplateInstanceMetadataTagsState, LaunchTemplateInstanceNetworkInterfaceSpecificationRequest,
    LaunchTemplatePlacementRequest, LaunchTemplateTagSpecificationRequest, LaunchTemplatesMonitoringRequest,
    RequestLaunchTemplateData, ResourceType, Tag, TagSpecification, Tenancy, VolumeType,
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
    pub instance_profile: String,
    pub block_devices: Vec<BlockDevice>,
    pub metadata: Metadata,
    pub detailed_monitoring: bool,
    /// The instance's interfaces; the security groups go on them (EC2 refuses groups both on
    /// the template and on an interface).
    pub network_interfaces: Vec<NetworkInterface>,
    /// Nitro Enclaves, for NodeClaims that request `eks.amazonaws.com/nitro-sandbox`.
    pub enclave: bool,
    /// A spot launch tags its spot request too, so spot and on-demand need different templates.
    pub capacity_type: String,
    /// `none` keeps on-demand and spot launches out of open capacity reservations (Karpenter's
    /// ReservedCapacity gate); unset leaves EC2's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capacity_reservation_preference: Option<String>,
    pub tenancy: String,
    /// Tags on the template itself (cluster ownership, NodeClass), and on the interfaces and
    /// spot requests launched from it.
    pub tags: BTreeMap<String, String>,
}

/// One network interface of the launch template (Karpenter's `generateNetworkInterfaces`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NetworkInterface {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_card_index: Option<i32>,
    pub device_index: i32,
    /// `efa`, `efa-only` or `interface`; unset: EC2's default, `interface`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface_type: Option<String>,
    pub groups: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub associate_public_ip: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv4_prefix_count: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_prefix_count: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary_ipv6: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipv6_address_count: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
}

/// Connection tracking timeouts of an interface, in seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ConnectionTracking {
    pub tcp_established_timeout: Option<i32>,
    pub udp_stream_timeout: Option<i32>,
    pub udp_timeout: Option<i32>,
}

/// The IP family of the cluster's pods and services, as its DNS Service's address says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IpFamily {
    #[default]
    Ipv4,
    Ipv6,
}

impl IpFamily {
    /// Karpenter's rule: IPv6 when the cluster DNS address is an IPv6 one.
    pub fn of(cluster_dns: Option<std::net::IpAddr>) -> IpFamily {
        match cluster_dns {
            Some(std::net::IpAddr::V6(_)) => IpFamily::Ipv6,
            _ => IpFamily::Ipv4,
        }
    }
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
    /// Unset in the regions whose IMDS has no IPv6 endpoint setting (the ISO partitions).
    pub http_protocol_ipv6: Option<String>,
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
            // EC2 then gives the instance the volumes the AMI itself defines.
            "Custom" => vec![],
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

/// Regions whose instance metadata service takes no IPv6 endpoint setting.
const NO_IMDS_IPV6_SETTING: &[&str] =
    &["us-iso-east-1", "us-iso-west-1", "us-isob-east-1", "us-isob-west-1", "us-isof-south-1", "us-isof-east-1"];

/// The NodeClass' metadata options (the API defaults them), for a template in `region`.
pub fn metadata(nc: &EC2NodeClass, region: &str) -> Metadata {
    let m = nc.spec.metadata_options.clone();
    let ipv6 = m.as_ref().map_or("disabled".into(), |m| m.http_protocol_ipv6.clone());
    Metadata {
        http_endpoint: m.as_ref().map_or("enabled".into(), |m| m.http_endpoint.clone()),
        http_protocol_ipv6: (!NO_IMDS_IPV6_SETTING.contains(&region)).then_some(ipv6),
        hop_limit: m.as_ref().map_or(1, |m| m.http_put_response_hop_limit as i32),
        http_tokens: m.as_ref().map_or("required".into(), |m| m.http_tokens.clone()),
    }
}

/// The template's network interfaces (Karpenter's): the NodeClass' own when it names any;
/// else, with `efa` EFA interfaces, one EFA interface per network card (the first the
/// primary one); else the primary interface. Each carries the security groups, the prefix
/// delegation count (IPv4 or IPv6 by the cluster's family), the public-IP choice, the
/// connection tracking timeouts and, in an IPv6 cluster, a primary IPv6 address; an
/// EFA-only interface carries only the groups (EC2 refuses addresses on it).
pub fn network_interfaces(nc: &EC2NodeClass, groups: &[String], family: IpFamily, efa: i64) -> Vec<NetworkInterface> {
    let ipv6 = family == IpFamily::Ipv6;
    let prefixes = nc.spec.ip_prefix_count;
    let tracking =
        nc.spec.connection_tracking.as_ref().filter(|c| {
            c.tcp_established_timeout.is_some() || c.udp_stream_timeout.is_some() || c.udp_timeout.is_some()
        });
    let interface = |card: Option<i32>, device: i32, kind: Option<&str>| {
        let addressed = kind != Some("efa-only");
        NetworkInterface {
            network_card_index: card,
            device_index: device,
            interface_type: kind.map(str::to_string),
            groups: groups.to_vec(),
            associate_public_ip: nc.spec.associate_public_ip_address.filter(|_| addressed),
            ipv4_prefix_count: prefixes.filter(|_| addressed && !ipv6),
            ipv6_prefix_count: prefixes.filter(|_| addressed && ipv6),
            primary_ipv6: (addressed && ipv6).then_some(true),
            ipv6_address_count: (addressed && ipv6).then_some(1),
            connection_tracking: tracking.filter(|_| addressed).map(|c| ConnectionTracking {
                tcp_established_timeout: c.tcp_established_timeout,
                udp_stream_timeout: c.udp_stream_timeout,
                udp_timeout: c.udp_timeout,
            }),
        }
    };
    if !nc.spec.network_interfaces.is_empty() {
        return nc
            .spec
            .network_interfaces
            .iter()
            .map(|ni| interface(Some(ni.network_card_index), ni.device_index, Some(&ni.interface_type)))
            .collect();
    }
    if efa > 0 {
        // Device 0 on the first card only: that one is the instance's primary interface.
        return (0..efa as i32).map(|i| interface(Some(i), if i == 0 { 0 } else { 1 }, Some("efa"))).collect();
    }
    vec![interface(None, 0, None)]
}

fn tags(t: &BTreeMap<String, String>) -> Vec<Tag> {
    t.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()
}

fn interface(ni: &NetworkInterface) -> LaunchTemplateInstanceNetworkInterfaceSpecificationRequest {
    let tracking = ni.connection_tracking.as_ref().map(|c| {
        ConnectionTrackingSpecificationRequest::builder()
            .set_tcp_established_timeout(c.tcp_established_timeout)
            .set_udp_stream_timeout(c.udp_stream_timeout)
            .set_udp_timeout(c.udp_timeout)
            .build()
    });
    LaunchTemplateInstanceNetworkInterfaceSpecificationRequest::builder()
        .set_network_card_index(ni.network_card_index)
        .device_index(ni.device_index)
        .set_interface_type(ni.interface_type.clone())
        .set_groups(Some(ni.groups.clone()))
        .set_associate_public_ip_address(ni.associate_public_ip)
        .set_ipv4_prefix_count(ni.ipv4_prefix_count)
        .set_ipv6_prefix_count(ni.ipv6_prefix_count)
        .set_primary_ipv6(ni.primary_ipv6)
        .set_ipv6_address_count(ni.ipv6_address_count)
        .set_connection_tracking_specification(tracking)
        .build()
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
                .set_http_protocol_ipv6(
                    spec.metadata.http_protocol_ipv6.as_deref().map(LaunchTemplateInstanceMetadataProtocolIpv6::from),
                )
                .http_put_response_hop_limit(spec.metadata.hop_limit)
                .http_tokens(LaunchTemplateHttpTokensState::from(spec.metadata.http_tokens.as_str()))
                // Account-wide IMDS defaults may turn instance tags on; Karpenter's tag keys
                // (with `/`) are not valid there and would fail the instance.
                .instance_metadata_tags(LaunchTemplateInstanceMetadataTagsState::Disabled)
                .build(),
        )
        .enclave_options(LaunchTemplateEnclaveOptionsRequest::builder().enabled(spec.enclave).build())
        .placement(LaunchTemplatePlacementRequest::builder().tenancy(Tenancy::from(spec.tenancy.as_str())).build())
        .set_network_interfaces(Some(spec.network_interfaces.iter().map(interface).collect()));
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
    let mut tagged = vec![ResourceType::NetworkInterface];
    if spec.capacity_type == tenon_api::wellknown::CAPACITY_TYPE_SPOT {
        tagged.push(ResourceType::SpotInstancesRequest);
    }
    for rt in tagged {
        d = d.tag_specifications(
            LaunchTemplateTagSpecificationRequest::builder().resource_type(rt).set_tags(Some(tags(&spec.tags))).build(),
        );
    }
    if let Some(p) = &spec.capacity_reservation_preference {
        d = d.capacity_reservation_specification(
            LaunchTemplateCapacityReservationSpecificationRequest::builder()
                .capacity_reservation_preference(CapacityReservationPreference::from(p.as_str()))
                .build(),
        );
    }
    d.build()
}

/// The template for `spec`, created if no template of that name exists yet; no call when
/// `known` says it exists.
pub(crate) async fn ensure(
    ec2: &aws_sdk_ec2::Client,
    known: &KnownTemplates,
    spec: &LaunchTemplateSpec,
) -> Result<String, CloudError> {
    let name = spec.name();
    if known.contains(&name) {
        return Ok(name);
    }
    let gate = known.gate(&name);
    let _one_at_a_time = gate.lock().await;
    if known.contains(&name) {
        return Ok(name);
    }
    let found = ec2
        .describe_launch_templates()
        .filters(Filter::builder().name("launch-template-name").values(&name).build())
        .send()
        .await
        .map_err(|e| api("DescribeLaunchTemplates", e))?;
    if found.launch_templates().iter().any(|t| t.launch_template_name() == Some(name.as_str())) {
        known.insert(&name);
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
        Ok(_) => {}
        // Created concurrently by another launch: same name, same content.
        Err(e) if code(&e).as_deref() == Some("InvalidLaunchTemplateName.AlreadyExistsException") => {}
        Err(e) => return Err(api("CreateLaunchTemplate", e)),
    }
    known.insert(&name);
    Ok(name)
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

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_ec2::types::LaunchTemplateEbsBlockDeviceRequest as Ebs;

    fn nodeclass(extra: &str) -> EC2NodeClass {
        serde_yaml::from_str(&format!(
            "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: test}}\nspec:\n  role: r\n  amiSelectorTerms: [{{alias: al2023@latest}}]\n  subnetSelectorTerms: [{{tags: {{a: b}}}}]\n  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]\n{extra}"
        ))
        .unwrap()
    }

    fn spec(nc: &EC2NodeClass, family: &str) -> LaunchTemplateSpec {
        LaunchTemplateSpec {
            image_id: "ami-123".into(),
            user_data: String::new(),
            instance_profile: "profile".into(),
            block_devices: block_devices(nc, family).unwrap(),
            metadata: metadata(nc, "us-west-2"),
            detailed_monitoring: false,
            network_interfaces: network_interfaces(nc, &["sg-1".into()], IpFamily::Ipv4, 0),
            enclave: false,
            capacity_type: "on-demand".into(),
            capacity_reservation_preference: Some("none".into()),
            tenancy: "default".into(),
            tags: BTreeMap::new(),
        }
    }

    /// The EBS part of each mapping the template data sends.
    fn ebs(nc: &EC2NodeClass, family: &str) -> Vec<(String, Ebs)> {
        data(&spec(nc, family))
            .block_device_mappings()
            .iter()
            .map(|m| (m.device_name().unwrap().to_string(), m.ebs().unwrap().clone()))
            .collect()
    }

    fn gp3(gib: i32) -> Ebs {
        Ebs::builder().volume_size(gib).volume_type(VolumeType::Gp3).encrypted(true).delete_on_termination(true).build()
    }

    /// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:312
    /// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:669
    /// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:768
    #[test]
    fn default_volumes_per_family_are_encrypted_gp3() {
        let nc = nodeclass("");
        assert_eq!(ebs(&nc, "AL2023"), [("/dev/xvda".to_string(), gp3(20))]);
        // Bottlerocket: a 4Gi control volume and a 20Gi data volume.
        assert_eq!(ebs(&nc, "Bottlerocket"), [("/dev/xvda".to_string(), gp3(4)), ("/dev/xvdb".to_string(), gp3(20))]);
        for (_, e) in ebs(&nc, "AL2023").iter().chain(&ebs(&nc, "Bottlerocket")) {
            assert_eq!(e.iops(), None, "no IOPS unless asked for");
        }
    }

    const KMS: &str = "arn:aws:kms:us-west-2:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab";

    fn io2(device: &str, size: &str) -> String {
        format!(
            "    - deviceName: {device}\n      ebs: {{deleteOnTermination: true, encrypted: true, volumeType: io2, volumeSize: {size}, iops: 10000, kmsKeyID: \"{KMS}\"}}\n"
        )
    }

    fn want_io2(gib: i32) -> Ebs {
        Ebs::builder()
            .volume_size(gib)
            .volume_type(VolumeType::Io2)
            .iops(10_000)
            .delete_on_termination(true)
            .encrypted(true)
            .kms_key_id(KMS)
            .build()
    }

    /// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:683
    /// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:732
    /// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:799
    #[test]
    fn nodeclass_volumes_are_sent_as_written_in_whole_gibibytes_rounded_up() {
        let nc =
            nodeclass(&format!("  blockDeviceMappings:\n{}{}", io2("/dev/xvda", "200G"), io2("/dev/xvdb", "200Gi")));
        // 200G is 186.26Gi: EC2 takes whole GiB, so 187.
        assert_eq!(
            ebs(&nc, "AL2023"),
            [("/dev/xvda".to_string(), want_io2(187)), ("/dev/xvdb".to_string(), want_io2(200))]
        );
        let nc = nodeclass(&format!("  blockDeviceMappings:\n{}{}", io2("/dev/xvda", "4G"), io2("/dev/xvdb", "2G")));
        let sizes: Vec<_> = ebs(&nc, "AL2023").iter().map(|(_, e)| e.volume_size()).collect();
        assert_eq!(sizes, [Some(4), Some(2)]);
        // A Custom family takes the NodeClass' mapping as is.
        let nc = nodeclass(&format!("  amiFamily: Custom\n  blockDeviceMappings:\n{}", io2("/dev/xvda", "40Gi")));
        assert_eq!(ebs(&nc, "Custom"), [("/dev/xvda".to_string(), want_io2(40))]);
    }

    /// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1235
    /// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1236
    /// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1237
    /// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1238
    #[test]
    fn the_imds_ipv6_setting_is_left_out_where_the_partition_has_none() {
        let nc = nodeclass("");
        let ipv6 = |region: &str| {
            let d = data(&LaunchTemplateSpec { metadata: metadata(&nc, region), ..spec(&nc, "AL2023") });
            d.metadata_options().unwrap().http_protocol_ipv6().cloned()
        };
        assert_eq!(ipv6("us-west-2"), Some(LaunchTemplateInstanceMetadataProtocolIpv6::Disabled));
        for region in ["us-iso-east-1", "us-isob-east-1", "us-isof-south-1"] {
            assert_eq!(ipv6(region), None, "{region}");
        }
    }
}
