//! The AWS provider's `pkg/providers/launchtemplate/suite_test.go`, ported against moto: what
//! a launch writes into its launch templates and CreateFleet request. Each test names the
//! cases it accounts for (tests/conformance/karpenter.tsv).
//!
//! Karpenter's suite launches from an AL2023 NodeClass by default; so do these tests (the
//! lab's NodeClass). Where a case counts templates (Karpenter makes one per AMI and max-pods
//! value), the test checks the field in every template the launch made.

mod support;

use aws_sdk_ec2::types::{
    CapacityReservationPreference, LaunchTemplateInstanceMetadataTagsState, ResourceType, ResponseLaunchTemplateData,
    Tenancy,
};
use std::collections::BTreeMap;
use support::Moto;
use support::lab::*;
use tenon_api::EC2NodeClass;
use tenon_api::wellknown as wk;
use tenon_aws::AwsProvider;
use tenon_core::cloud::CloudProvider;

/// The templates one on-demand m5.large launch from `nc` makes.
async fn launch(p: &AwsProvider, nc: &EC2NodeClass, nodeclaim: &str) -> Vec<ResponseLaunchTemplateData> {
    templates_made_by(p, async {
        p.create(&request(nodeclaim, nc, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap();
    })
    .await
}

/// The lab's NodeClass with `f` applied, resolved.
async fn lab_with(p: &AwsProvider, cluster: &str, name: &str, f: impl FnOnce(&mut EC2NodeClass)) -> EC2NodeClass {
    let mut nc = lab_nodeclass(cluster);
    nc.metadata.name = Some(name.into());
    f(&mut nc);
    resolved(p, nc).await
}

fn tag_map(tags: &[aws_sdk_ec2::types::Tag]) -> BTreeMap<String, String> {
    tags.iter().map(|t| (t.key().unwrap_or_default().to_string(), t.value().unwrap_or_default().to_string())).collect()
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:603
#[tokio::test]
async fn template_data_tags_network_interfaces_and_spot_requests() {
    let moto = Moto::start();
    let p = moto.provider("ltt").await;
    lab(&p, "ltt").await;
    let nc = lab_with(&p, "ltt", "tagged", |nc| {
        nc.spec.tags = BTreeMap::from([("tag1".into(), "tag1value".into()), ("tag2".into(), "tag2value".into())]);
    })
    .await;
    for spot in [false, true] {
        let mut o = option("m5.large", "us-east-1a", "amd64");
        if spot {
            o.capacity_type = wk::CAPACITY_TYPE_SPOT.into();
        }
        let made = templates_made_by(&p, async {
            p.create(&request(&format!("tagged-{spot}"), &nc, vec![o])).await.unwrap();
        })
        .await;
        assert_eq!(made.len(), 1, "spot {spot}: spot and on-demand launches need different templates");
        // moto lists the template's own tags among its data's; those are not the data's.
        let specs: Vec<_> = made[0]
            .tag_specifications()
            .iter()
            .filter(|s| s.resource_type() != Some(&ResourceType::LaunchTemplate))
            .collect();
        let kinds: Vec<_> = specs.iter().map(|s| s.resource_type().cloned().unwrap()).collect();
        let want = if spot {
            vec![ResourceType::NetworkInterface, ResourceType::SpotInstancesRequest]
        } else {
            vec![ResourceType::NetworkInterface]
        };
        assert_eq!(kinds, want, "spot {spot}");
        for s in specs {
            let tags = tag_map(s.tags());
            assert_eq!(tags.get("tag1").map(String::as_str), Some("tag1value"), "{s:?}");
            assert_eq!(tags.get("tag2").map(String::as_str), Some("tag2value"), "{s:?}");
        }
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:580
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:630
#[tokio::test]
async fn nodeclass_tags_reach_the_fleet_its_instances_and_volumes_and_may_name_them() {
    let moto = Moto::start();
    let p = moto.provider("ltn").await;
    lab(&p, "ltn").await;
    for (name, tags) in
        [("two-tags", vec![("tag1", "tag1value"), ("tag2", "tag2value")]), ("named", vec![("Name", "myname")])]
    {
        let nc = lab_with(&p, "ltn", name, |nc| {
            nc.spec.tags = tags.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        })
        .await;
        let i = p.create(&request(&format!("{name}-a"), &nc, vec![option("m5.large", "us-east-1a", "amd64")])).await;
        let i = i.unwrap();
        for (k, v) in &tags {
            assert_eq!(i.tags.get(*k).map(String::as_str), Some(*v), "{name}: instance tag {k}: {:?}", i.tags);
        }
        // moto tags a fleet's instances only; the request tags the fleet and the volumes with
        // the instance's tags too.
        let specs = tenon_aws::fleet::tag_specifications(&i.tags);
        let kinds: Vec<_> = specs.iter().map(|s| s.resource_type().cloned().unwrap()).collect();
        assert_eq!(kinds, [ResourceType::Fleet, ResourceType::Instance, ResourceType::Volume]);
        for s in &specs {
            assert_eq!(tag_map(s.tags()), i.tags, "{name}: {s:?}");
        }
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2667
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2668
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2669
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2670
#[tokio::test]
async fn ip_prefix_count_goes_on_the_primary_interface() {
    let moto = Moto::start();
    let p = moto.provider("pfx").await;
    let lab = lab(&p, "pfx").await;
    for count in [0, 1, 10, 100] {
        let nc = lab_with(&p, "pfx", &format!("prefix-{count}"), |nc| nc.spec.ip_prefix_count = Some(count)).await;
        let made = launch(&p, &nc, &format!("prefix-{count}-a")).await;
        assert_eq!(made.len(), 1);
        let ni = &made[0].network_interfaces()[0];
        assert_eq!(ni.device_index(), Some(0));
        assert_eq!(ni.ipv4_prefix_count(), Some(count), "ipPrefixCount {count}");
        assert_eq!(
            ni.groups(),
            std::slice::from_ref(&lab.security_group),
            "the node's security groups are on the interface"
        );
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2897
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2755
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2812
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:3076
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:3077
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:3263
#[tokio::test]
async fn a_default_launch_template_is_karpenters() {
    let moto = Moto::start();
    let p = moto.provider("dflt").await;
    let lab = lab(&p, "dflt").await;
    let nc = resolved(&p, lab_nodeclass("dflt")).await;
    let made = launch(&p, &nc, "dflt-a").await;
    assert_eq!(made.len(), 1);
    let d = &made[0];
    // One primary interface carrying the groups; no connection tracking unless asked for.
    assert_eq!(d.network_interfaces().len(), 1, "{:?}", d.network_interfaces());
    let ni = &d.network_interfaces()[0];
    assert_eq!((ni.device_index(), ni.groups()), (Some(0), std::slice::from_ref(&lab.security_group)));
    assert!(ni.connection_tracking_specification().is_none(), "{ni:?}");
    assert!(ni.associate_public_ip_address().is_none(), "{ni:?}");
    assert!(d.security_group_ids().is_empty(), "groups go on the interface only: {:?}", d.security_group_ids());
    assert_eq!(d.enclave_options().and_then(|e| e.enabled()), Some(false));
    assert_eq!(
        d.metadata_options().and_then(|m| m.instance_metadata_tags()),
        Some(&LaunchTemplateInstanceMetadataTagsState::Disabled)
    );
    assert_eq!(d.placement().and_then(|p| p.tenancy()), Some(&Tenancy::Default));
    // Karpenter's ReservedCapacity gate is on by default: on-demand and spot launches stay out
    // of open capacity reservations.
    assert_eq!(
        d.capacity_reservation_specification().and_then(|c| c.capacity_reservation_preference()),
        Some(&CapacityReservationPreference::None)
    );
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:787
#[tokio::test]
async fn a_custom_family_without_mappings_keeps_the_amis_volumes() {
    let moto = Moto::start();
    let p = moto.provider("cbdm").await;
    lab(&p, "cbdm").await;
    let nc = lab_with(&p, "cbdm", "custom", |nc| {
        nc.spec.ami_family = Some("Custom".into());
        nc.spec.user_data = Some("#!/bin/sh\n".into());
    })
    .await;
    let made = launch(&p, &nc, "custom-a").await;
    assert_eq!(made.len(), 1);
    assert!(made[0].block_device_mappings().is_empty(), "{:?}", made[0].block_device_mappings());
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:3264
#[tokio::test]
async fn without_the_reserved_capacity_gate_templates_leave_reservations_alone() {
    let moto = Moto::start();
    let mut p = moto.provider("gate").await;
    p.launch.reserved_capacity = false;
    lab(&p, "gate").await;
    let nc = resolved(&p, lab_nodeclass("gate")).await;
    let made = launch(&p, &nc, "gate-a").await;
    assert_eq!(made.len(), 1);
    assert!(
        made[0].capacity_reservation_specification().is_none(),
        "{:?}",
        made[0].capacity_reservation_specification()
    );
}
