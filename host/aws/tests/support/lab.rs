//! The lab every moto test starts from, and the helpers that launch from it: a cluster's
//! account as it is before Tenon runs, NodeClasses checked as `tenon check` would, launch
//! requests, and the launch templates a launch made.

use aws_sdk_ec2::types::{Filter, ResourceType, Tag, TagSpecification};
use std::collections::BTreeMap;
use tenon_api::EC2NodeClass;
use tenon_api::wellknown as wk;
use tenon_aws::AwsProvider;
use tenon_core::cloud::{LaunchOption, LaunchRequest};
use tenon_core::taints::{Effect, Taint};

pub const DISCOVERY: &str = "karpenter.sh/discovery";

/// What a cluster's account holds before Tenon runs: a VPC with two tagged private subnets
/// and one untagged, a tagged node security group, two tagged AMIs and the node role.
pub struct Lab {
    pub subnets: Vec<(String, String)>,
    pub untagged_subnet: String,
    pub security_group: String,
    pub ami_amd64: String,
    pub ami_arm64: String,
}

pub fn tag(k: &str, v: &str) -> Tag {
    Tag::builder().key(k).value(v).build()
}

pub async fn lab(p: &AwsProvider, cluster: &str) -> Lab {
    let ec2 = &p.clients.ec2;
    let vpc = ec2.create_vpc().cidr_block("10.20.0.0/16").send().await.unwrap();
    let vpc = vpc.vpc().unwrap().vpc_id().unwrap().to_string();
    let mut subnets = Vec::new();
    let mut untagged_subnet = String::new();
    for (i, zone) in ["us-east-1a", "us-east-1b", "us-east-1c"].iter().enumerate() {
        let s = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(format!("10.20.{i}.0/24"))
            .availability_zone(*zone)
            .send()
            .await
            .unwrap();
        let id = s.subnet().unwrap().subnet_id().unwrap().to_string();
        if i < 2 {
            ec2.create_tags().resources(&id).tags(tag(DISCOVERY, cluster)).send().await.unwrap();
            subnets.push((id, zone.to_string()));
        } else {
            untagged_subnet = id;
        }
    }
    let sg = ec2
        .create_security_group()
        .group_name(format!("{cluster}-nodes"))
        .description("nodes")
        .vpc_id(&vpc)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::SecurityGroup)
                .tags(tag(DISCOVERY, cluster))
                .build(),
        )
        .send()
        .await
        .unwrap();
    let security_group = sg.group_id().unwrap().to_string();
    // moto's RegisterImage ignores the architecture; an image made from an instance of one
    // of moto's own AL2023 AMIs keeps it.
    let mut amis = Vec::new();
    for (name, arch, base_type) in [("x86_64", "x86_64", "m5.large"), ("arm64", "arm64", "m6g.large")] {
        let base = ec2
            .describe_images()
            .filters(Filter::builder().name("architecture").values(arch).build())
            .filters(Filter::builder().name("name").values("al2023-ami-2023*").build())
            .send()
            .await
            .unwrap();
        let base = base.images()[0].image_id().unwrap().to_string();
        amis.push(cluster_image(p, &base, base_type, &format!("{cluster}-al2023-{name}-v20251101"), cluster).await);
    }
    let trust = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;
    for role in [format!("KarpenterNodeRole-{cluster}"), format!("OtherRole-{cluster}")] {
        p.clients.iam.create_role().role_name(role).assume_role_policy_document(trust).send().await.unwrap();
    }
    Lab { subnets, untagged_subnet, security_group, ami_amd64: amis[0].clone(), ami_arm64: amis[1].clone() }
}

/// An image named `name` made from an instance of `base` (so it keeps `base`'s
/// architecture) and tagged for `cluster`'s AMI selector.
pub async fn cluster_image(p: &AwsProvider, base: &str, base_type: &str, name: &str, cluster: &str) -> String {
    let ec2 = &p.clients.ec2;
    let run = ec2
        .run_instances()
        .image_id(base)
        .instance_type(aws_sdk_ec2::types::InstanceType::from(base_type))
        .min_count(1)
        .max_count(1)
        .send()
        .await
        .unwrap();
    let builder = run.instances()[0].instance_id().unwrap().to_string();
    let img = ec2.create_image().instance_id(&builder).name(name).send().await.unwrap();
    let id = img.image_id().unwrap().to_string();
    ec2.create_tags().resources(&id).tags(tag(DISCOVERY, cluster)).send().await.unwrap();
    ec2.terminate_instances().instance_ids(builder).send().await.unwrap();
    id
}

/// A NodeClass manifest, checked as `tenon check` would: test fixtures are valid Karpenter.
pub fn nodeclass(yaml: &str) -> EC2NodeClass {
    let value: serde_json::Value = serde_yaml::from_str(yaml).unwrap();
    let problems = tenon_api::validation::validate_ec2nodeclass(&serde_json::from_value(value.clone()).unwrap());
    assert!(problems.iter().all(|p| p.severity != tenon_api::validation::Severity::Error), "{problems:?}");
    serde_json::from_value(value).unwrap()
}

pub fn lab_nodeclass(cluster: &str) -> EC2NodeClass {
    nodeclass(&format!(
        r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: lab-general
spec:
  role: KarpenterNodeRole-{cluster}
  amiFamily: AL2023
  amiSelectorTerms:
    - tags:
        {DISCOVERY}: {cluster}
  subnetSelectorTerms:
    - tags:
        {DISCOVERY}: {cluster}
  securityGroupSelectorTerms:
    - tags:
        {DISCOVERY}: {cluster}
  tags:
    team: platform
"#
    ))
}

/// The NodeClass with its status resolved, as the NodeClass controller would write it.
pub async fn resolved(p: &AwsProvider, mut nc: EC2NodeClass) -> EC2NodeClass {
    let r = p.resolve(&nc).await.unwrap();
    let now = serde_json::from_value(serde_json::json!("2026-11-30T00:00:00Z")).unwrap();
    nc.status = Some(r.status(None, Some(1), &now));
    nc
}

pub fn option(t: &str, zone: &str, arch: &str) -> LaunchOption {
    LaunchOption {
        instance_type: t.into(),
        zone: zone.into(),
        capacity_type: wk::CAPACITY_TYPE_ON_DEMAND.into(),
        price: 0.1,
        labels: std::sync::Arc::new(BTreeMap::from([(wk::LABEL_ARCH.to_string(), arch.to_string())])),
    }
}

pub fn request(nodeclaim: &str, nc: &EC2NodeClass, options: Vec<LaunchOption>) -> LaunchRequest {
    LaunchRequest {
        nodeclaim: nodeclaim.into(),
        nodepool: "lab-general".into(),
        nodeclass: nc.clone(),
        options,
        attempt: 0,
        never_launched: false,
        ranked: false,
        labels: BTreeMap::from([("capacity.example.io/pool".to_string(), "lab-general".to_string())]),
        taints: vec![Taint { key: "dedicated".into(), value: "batch".into(), effect: Effect::NoSchedule }],
        startup_taints: vec![],
        tenancy: "default".into(),
        min_values_relaxed: false,
    }
}

/// Instance type `name`'s offerings in `types`, as (zone, capacity type, available).
pub fn offerings_of(types: &[tenon_core::instancetype::InstanceType], name: &str) -> Vec<(String, String, bool)> {
    let t = types.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{name} listed"));
    t.offerings.iter().map(|o| (o.zone.clone(), o.capacity_type.clone(), o.available)).collect()
}

/// Instance type `name`'s offerings still available, as (zone, capacity type).
pub fn available(types: &[tenon_core::instancetype::InstanceType], name: &str) -> Vec<(String, String)> {
    offerings_of(types, name).into_iter().filter(|o| o.2).map(|(z, c, _)| (z, c)).collect()
}

pub fn condition<'a>(nc: &'a EC2NodeClass, t: &str) -> &'a tenon_api::common::Condition {
    nc.status.as_ref().unwrap().conditions.iter().find(|c| c.type_ == t).unwrap()
}

/// Every launch template's name and the data of its latest version.
pub async fn templates(p: &AwsProvider) -> BTreeMap<String, aws_sdk_ec2::types::ResponseLaunchTemplateData> {
    let mut out = BTreeMap::new();
    let found = p.clients.ec2.describe_launch_templates().send().await.unwrap();
    for name in found.launch_templates().iter().filter_map(|t| t.launch_template_name()) {
        let v = p.clients.ec2.describe_launch_template_versions().launch_template_name(name).send().await.unwrap();
        out.insert(name.to_string(), v.launch_template_versions()[0].launch_template_data().unwrap().clone());
    }
    out
}

/// The templates created by `launch`.
pub async fn templates_made_by<F: std::future::Future<Output = ()>>(
    p: &AwsProvider,
    launch: F,
) -> Vec<aws_sdk_ec2::types::ResponseLaunchTemplateData> {
    let before = templates(p).await;
    launch.await;
    templates(p).await.into_iter().filter(|(name, _)| !before.contains_key(name)).map(|(_, d)| d).collect()
}

/// The lab's NodeClass over all three subnets (one per zone).
pub async fn three_zone_nodeclass(p: &AwsProvider, lab: &Lab, cluster: &str) -> EC2NodeClass {
    let mut nc = lab_nodeclass(cluster);
    nc.spec.subnet_selector_terms = lab
        .subnets
        .iter()
        .map(|(id, _)| id.clone())
        .chain([lab.untagged_subnet.clone()])
        .map(|id| tenon_api::ec2nodeclass::SubnetSelectorTerm { id: Some(id), tags: None })
        .collect();
    let nc = resolved(p, nc).await;
    assert_eq!(nc.status.as_ref().unwrap().subnets.len(), 3);
    nc
}
