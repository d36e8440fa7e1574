//! The parts moto cannot exercise, checked against documents of the shape AWS returns: the
//! Price List API, CreateFleet's capacity errors, the EKS/Bottlerocket SSM alias layout; and
//! the pure parts: EventBridge interruption messages, drift.

use crate::support;

use aws_sdk_ec2::types::{
    CreateFleetError, FleetLaunchTemplateOverrides, InstanceType, LaunchTemplateAndOverridesResponse,
};
use std::collections::BTreeMap;
use support::{event, interruption_messages};
use tenon_aws::catalog::parse_price_document;
use tenon_aws::fleet::classify;
use tenon_aws::interruption::{InterruptionKind, parse};
use tenon_aws::nodeclass::alias_paths;
use tenon_core::cloud::{Instance, InstanceState, UnavailableOffering};

/// One GetProducts `PriceList` entry as AWS documents it (trimmed to the fields read).
const M5_LARGE: &str = r#"{
  "product": {
    "productFamily": "Compute Instance",
    "attributes": {"instanceType": "m5.large", "regionCode": "us-east-1", "operatingSystem": "Linux",
                   "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"},
    "sku": "2WTMTR9HDDT7AA73"
  },
  "serviceCode": "AmazonEC2",
  "terms": {
    "OnDemand": {
      "2WTMTR9HDDT7AA73.JRTCKXETXF": {
        "priceDimensions": {
          "2WTMTR9HDDT7AA73.JRTCKXETXF.6YS6EN2CT7": {
            "unit": "Hrs", "pricePerUnit": {"USD": "0.0960000000"},
            "description": "$0.096 per On Demand Linux m5.large Instance Hour"
          }
        },
        "sku": "2WTMTR9HDDT7AA73", "effectiveDate": "2025-11-01T00:00:00Z"
      }
    }
  },
  "version": "20251101000000", "publicationDate": "2025-11-01T00:00:00Z"
}"#;

#[test]
fn price_list_documents_give_the_on_demand_price() {
    assert_eq!(parse_price_document(M5_LARGE), Some(("m5.large".to_string(), 0.096)));
    let free = M5_LARGE.replace("0.0960000000", "0.0000000000");
    assert_eq!(parse_price_document(&free), None, "a zero price (reserved placeholder) is not a price");
    assert_eq!(parse_price_document("{\"product\": {}}"), None);
    assert_eq!(parse_price_document("not json"), None);
}

fn fleet_error(code: &str, t: &str, subnet: &str) -> CreateFleetError {
    CreateFleetError::builder()
        .error_code(code)
        .error_message(format!(
            "We currently do not have sufficient {t} capacity in the Availability Zone you requested"
        ))
        .launch_template_and_overrides(
            LaunchTemplateAndOverridesResponse::builder()
                .overrides(
                    FleetLaunchTemplateOverrides::builder()
                        .instance_type(InstanceType::from(t))
                        .subnet_id(subnet)
                        .build(),
                )
                .build(),
        )
        .build()
}

#[test]
fn create_fleet_capacity_errors_name_the_offerings_to_avoid() {
    let zones = BTreeMap::from([
        ("subnet-a".to_string(), "us-east-1a".to_string()),
        ("subnet-b".to_string(), "us-east-1b".to_string()),
    ]);
    let f = classify(
        "spot",
        &zones,
        &[
            fleet_error("InsufficientInstanceCapacity", "m6a.large", "subnet-b"),
            fleet_error("InsufficientInstanceCapacity", "m6a.large", "subnet-b"),
            fleet_error("MaxSpotInstanceCountExceeded", "c6a.large", "subnet-a"),
        ],
    );
    assert!(f.capacity);
    assert_eq!(
        f.offerings,
        [
            UnavailableOffering {
                instance_type: "c6a.large".into(),
                zone: "us-east-1a".into(),
                capacity_type: "spot".into()
            },
            UnavailableOffering {
                instance_type: "m6a.large".into(),
                zone: "us-east-1b".into(),
                capacity_type: "spot".into()
            },
        ]
    );
    // Not a capacity problem: nothing is cached, the message is kept for the NodeClaim.
    let f = classify("on-demand", &zones, &[fleet_error("InvalidParameterValue", "m6a.large", "subnet-a")]);
    assert!(!f.capacity);
    assert!(f.offerings.is_empty());
    assert!(f.message.starts_with("InvalidParameterValue: "), "{}", f.message);
    assert_eq!(classify("on-demand", &zones, &[]).message, "no instance launched and no error returned");
}

#[test]
fn aliases_map_to_the_published_ssm_parameters() {
    let paths =
        |f: &str, v: &str, k: &str| alias_paths(f, v, k).unwrap().into_iter().map(|p| p.path).collect::<Vec<_>>();
    assert_eq!(
        paths("al2023", "latest", "1.33"),
        [
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/nvidia/recommended/image_id",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/neuron/recommended/image_id",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id",
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/arm64/nvidia/recommended/image_id",
        ]
    );
    assert_eq!(
        paths("al2023", "v20251101", "1.33")[0],
        "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.33-v20251101/image_id"
    );
    assert_eq!(
        paths("bottlerocket", "v1.50.0", "1.33")[1],
        "/aws/service/bottlerocket/aws-k8s-1.33/arm64/1.50.0/image_id"
    );
    assert_eq!(
        paths("bottlerocket", "latest", "1.33")[2],
        "/aws/service/bottlerocket/aws-k8s-1.33-nvidia/x86_64/latest/image_id"
    );
    assert_eq!(
        paths("al2", "v20251101", "1.32")[1],
        "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/amazon-eks-arm64-node-1.32-v20251101/image_id"
    );
    assert_eq!(
        paths("windows2022", "latest", "1.33"),
        ["/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-1.33/image_id"]
    );
    let al2023 = alias_paths("al2023", "latest", "1.33").unwrap();
    assert_eq!(al2023[1].serves[0][0].operator, "Exists", "the nvidia variant serves GPU types only");
    let err = alias_paths("ubuntu", "latest", "1.33").unwrap_err().to_string();
    assert!(err.contains("ubuntu") && err.contains("al2023"), "{err}");
}

#[test]
fn the_four_interruption_kinds_parse_and_others_are_refused() {
    for (body, kind, ids) in interruption_messages() {
        let e = parse(&body).unwrap();
        assert_eq!(e.kind, kind);
        assert_eq!(e.instance_ids, ids);
        assert_eq!(e.time, "2026-11-30T10:00:00Z");
        let acted_on =
            tenon_core::orchestration::interruption::kind(&e.kind).is_some_and(|k| k != "rebalance_recommendation");
        assert_eq!(acted_on, kind != InterruptionKind::RebalanceRecommendation);
    }
    let running = event(
        "EC2 Instance State-change Notification",
        "aws.ec2",
        serde_json::json!({"instance-id": "i-1", "state": "running"}),
    );
    assert_eq!(
        tenon_core::orchestration::interruption::kind(&parse(&running).unwrap().kind),
        None,
        "a start is not an interruption"
    );
    for bad in [
        "not json".to_string(),
        event("EC2 Spot Instance Interruption Warning", "aws.ec2", serde_json::json!({})),
        event(
            "AWS Health Event",
            "aws.health",
            serde_json::json!({"service": "RDS", "eventTypeCategory": "scheduledChange"}),
        ),
        event("Object Created", "aws.s3", serde_json::json!({})),
    ] {
        assert!(parse(&bad).is_err(), "{bad}");
    }
}

/// A lab NodeClass with `status` (YAML under `status:`) as the controller resolved it.
fn resolved_nodeclass(status: &str) -> tenon_api::EC2NodeClass {
    let spec = "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: lab}\nspec:\n  role: r\n  amiSelectorTerms: [{alias: al2023@latest}]\n  subnetSelectorTerms: [{tags: {a: b}}]\n  securityGroupSelectorTerms: [{tags: {a: b}}]\nstatus:\n";
    serde_yaml::from_str(&format!("{spec}{status}")).unwrap()
}

/// A running on-demand instance of `instance_type` in us-east-1a from `image`.
fn running(image: &str, instance_type: &str) -> Instance {
    Instance {
        id: "i-1".into(),
        provider_id: "aws:///us-east-1a/i-1".into(),
        instance_type: instance_type.into(),
        zone: "us-east-1a".into(),
        capacity_type: "on-demand".into(),
        image_id: image.into(),
        subnet_id: String::new(),
        security_groups: vec![],
        state: InstanceState::Running,
        launched_at: None,
        tags: BTreeMap::new(),
        tenancy: "default".into(),
    }
}

#[test]
fn drift_names_the_field_that_moved() {
    let nc = resolved_nodeclass(
        r#"
  subnets: [{id: subnet-a, zone: us-east-1a}]
  securityGroups: [{id: sg-1}, {id: sg-2}]
  amis: [{id: ami-new, requirements: []}]
"#,
    );
    let instance = Instance {
        subnet_id: "subnet-a".into(),
        security_groups: vec!["sg-2".into(), "sg-1".into()],
        ..running("ami-new", "m5.large")
    };
    let none = BTreeMap::new();
    assert_eq!(tenon_aws::instances::drift(&instance, &none, &nc), None);
    let old_ami = Instance { image_id: "ami-old".into(), ..instance.clone() };
    assert!(tenon_aws::instances::drift(&old_ami, &none, &nc).unwrap().starts_with("AMIDrift"));
    let moved = Instance { subnet_id: "subnet-z".into(), ..instance.clone() };
    assert!(tenon_aws::instances::drift(&moved, &none, &nc).unwrap().starts_with("SubnetDrift"));
    let fewer = Instance { security_groups: vec!["sg-1".into()], ..instance.clone() };
    assert!(tenon_aws::instances::drift(&fewer, &none, &nc).unwrap().starts_with("SecurityGroupDrift"));
    let unreported = Instance { security_groups: vec![], ..instance };
    assert_eq!(tenon_aws::instances::drift(&unreported, &none, &nc), None, "no groups reported is not drift");
}

/// Karpenter's AMI drift maps each NodeClaim to the AMI a launch would pick for its instance
/// type now (the first status AMI whose requirements its labels meet): a GPU node running
/// the standard image is drifted although that image is still selected, and a NodeClaim
/// whose labels no AMI serves is judged only by whether its image is still selected.
#[test]
fn ami_drift_compares_with_the_image_a_launch_would_pick_for_the_instance_type() {
    let nc = resolved_nodeclass(
        r#"
  amis:
  - id: ami-nvidia
    requirements:
    - {key: kubernetes.io/arch, operator: In, values: [amd64]}
    - {key: karpenter.k8s.aws/instance-gpu-count, operator: Exists}
  - id: ami-standard
    requirements:
    - {key: kubernetes.io/arch, operator: In, values: [amd64]}
    - {key: karpenter.k8s.aws/instance-gpu-count, operator: DoesNotExist}
    - {key: karpenter.k8s.aws/instance-accelerator-count, operator: DoesNotExist}
  - id: ami-arm
    requirements:
    - {key: kubernetes.io/arch, operator: In, values: [arm64]}
"#,
    );
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    let on = running;
    let gpu = labels(&[("kubernetes.io/arch", "amd64"), ("karpenter.k8s.aws/instance-gpu-count", "1")]);
    let plain = labels(&[("kubernetes.io/arch", "amd64")]);
    let arm = labels(&[("kubernetes.io/arch", "arm64")]);
    assert_eq!(tenon_aws::instances::drift(&on("ami-nvidia", "g5.xlarge"), &gpu, &nc), None);
    let reason = tenon_aws::instances::drift(&on("ami-standard", "g5.xlarge"), &gpu, &nc).unwrap();
    assert!(reason.starts_with("AMIDrift") && reason.contains("ami-nvidia"), "{reason}");
    assert_eq!(tenon_aws::instances::drift(&on("ami-standard", "m5.large"), &plain, &nc), None);
    assert!(tenon_aws::instances::drift(&on("ami-nvidia", "m5.large"), &plain, &nc).is_some());
    assert_eq!(tenon_aws::instances::drift(&on("ami-arm", "m6g.large"), &arm, &nc), None);
    // Labels nothing serves (no architecture label): still selected is enough.
    let unlabelled = BTreeMap::new();
    assert_eq!(tenon_aws::instances::drift(&on("ami-arm", "m5.large"), &unlabelled, &nc), None);
    assert!(tenon_aws::instances::drift(&on("ami-gone", "m5.large"), &unlabelled, &nc).is_some());
}
