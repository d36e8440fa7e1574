//! (Long: tests only, one per ported Karpenter launch-template case; setup in support/.)
//! The AWS provider's `pkg/providers/launchtemplate/suite_test.go`, ported against moto: what
//! a launch writes into its launch templates and CreateFleet request. Each test names the
//! cases it accounts for (tests/conformance/karpenter.tsv).
//!
//! Karpenter's suite launches from an AL2023 NodeClass by default; so do these tests (the
//! lab's NodeClass). Where a case counts templates (Karpenter makes one per AMI and max-pods
//! value), the test checks the field in every template the launch made.

use crate::support;

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
use tenon_core::taints::{Effect, Taint};

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

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:3077
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:3078
#[tokio::test]
async fn a_template_asks_for_the_tenancy_the_launch_chose() {
    let moto = Moto::start();
    let p = moto.provider("tnc").await;
    lab(&p, "tnc").await;
    let nc = resolved(&p, lab_nodeclass("tnc")).await;
    for (i, tenancy) in [Tenancy::Default, Tenancy::Dedicated].into_iter().enumerate() {
        let mut req = request(&format!("tnc-{i}"), &nc, vec![option("m5.large", "us-east-1a", "amd64")]);
        req.tenancy = tenancy.as_str().into();
        let made = templates_made_by(&p, async {
            p.create(&req).await.unwrap();
        })
        .await;
        assert_eq!(made.len(), 1, "one new template per tenancy");
        assert_eq!(made[0].placement().and_then(|p| p.tenancy()), Some(&tenancy));
    }
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

// ----- User data -----

/// The user data of a template, decoded.
fn user_data(d: &ResponseLaunchTemplateData) -> String {
    use base64::Engine;
    let raw = base64::engine::general_purpose::STANDARD.decode(d.user_data().expect("user data")).unwrap();
    String::from_utf8(raw).unwrap()
}

/// A MIME multipart document's parts as (content type, body), read as a MIME reader would:
/// the boundary from the header, each part's headers up to the first blank line.
fn mime_parts(doc: &str) -> Vec<(String, String)> {
    let (head, body) = doc.split_once("\n\n").expect("MIME headers");
    let ct = head.lines().find(|l| l.to_ascii_lowercase().starts_with("content-type:")).expect("Content-Type");
    let boundary = ct.split("boundary=").nth(1).expect("a boundary").trim_matches('"');
    let delimiter = format!("--{boundary}");
    let mut parts = Vec::new();
    for chunk in body.split(&delimiter).skip(1) {
        if chunk.starts_with("--") {
            break;
        }
        let (headers, content) = chunk.trim_start_matches('\n').split_once("\n\n").expect("part headers");
        let ct = headers
            .lines()
            .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-type")))
            .map(|(_, v)| v.trim().to_string())
            .expect("a part's Content-Type");
        parts.push((ct, content.trim_end_matches('\n').to_string()));
    }
    parts
}

const NODE_CONFIG: &str = "application/node.eks.aws";

/// The NodeConfig parts of AL2023 user data, parsed.
fn node_configs(ud: &str) -> Vec<serde_yaml::Value> {
    mime_parts(ud)
        .into_iter()
        .filter(|(ct, _)| ct == NODE_CONFIG)
        .map(|(_, body)| serde_yaml::from_str(&body).unwrap())
        .collect()
}

/// The one NodeConfig Tenon generates, when the NodeClass brings no user data.
fn generated_config(ud: &str) -> serde_yaml::Value {
    let configs = node_configs(ud);
    assert_eq!(configs.len(), 1, "{ud}");
    configs.into_iter().next().unwrap()
}

fn yaml(s: &str) -> serde_yaml::Value {
    serde_yaml::from_str(s).unwrap()
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2146
#[tokio::test]
async fn al2023_nodes_register_their_taints_through_the_kubelet_config() {
    let moto = Moto::start();
    let p = moto.provider("rwt").await;
    lab(&p, "rwt").await;
    let nc = resolved(&p, lab_nodeclass("rwt")).await;
    let mut req = request("rwt-a", &nc, vec![option("m5.large", "us-east-1a", "amd64")]);
    req.taints = vec![
        Taint { key: "test-taint-1".into(), value: String::new(), effect: Effect::NoSchedule },
        Taint { key: "test-taint-2".into(), value: String::new(), effect: Effect::NoExecute },
    ];
    let made = templates_made_by(&p, async {
        p.create(&req).await.unwrap();
    })
    .await;
    assert!(!made.is_empty());
    for d in &made {
        let ud = user_data(d);
        let config = generated_config(&ud);
        let taints = &config["spec"]["kubelet"]["config"]["registerWithTaints"];
        assert_eq!(
            taints,
            &yaml(
                "[{key: test-taint-1, effect: NoSchedule}, {key: test-taint-2, effect: NoExecute}, {key: karpenter.sh/unregistered, effect: NoExecute}]"
            ),
            "{ud}"
        );
        let flags = config["spec"]["kubelet"]["flags"].as_sequence().unwrap();
        assert!(flags.iter().all(|f| !f.as_str().unwrap().starts_with("--register-with-taints")), "{flags:?}");
    }
}

/// The NodeConfig Tenon writes for the lab's `cluster` with maxPods 110 and the kube-dns
/// address 10.0.100.10, launched on demand for NodePool lab-general from NodeClass `nc`,
/// whose template labels `testing/cluster=unspecified`.
fn expected_node_config(cluster: &str, nc: &str) -> serde_yaml::Value {
    yaml(&format!(
        r#"
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: {cluster}
    apiServerEndpoint: https://ABCDEF.gr7.us-east-1.eks.amazonaws.com
    certificateAuthority: Q0E=
    cidr: 10.100.0.0/16
  kubelet:
    config:
      clusterDNS: [10.0.100.10]
      maxPods: 110
      registerWithTaints: [{{key: karpenter.sh/unregistered, effect: NoExecute}}]
    flags:
      - --node-labels=karpenter.k8s.aws/ec2nodeclass={nc},karpenter.sh/capacity-type=on-demand,karpenter.sh/do-not-sync-taints=true,karpenter.sh/nodepool=lab-general,testing/cluster=unspecified
"#
    ))
}

const USER_NODE_CONFIG: &str = "apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: 42\n      shutdownGracePeriod: 30s";
const USER_SCRIPT: &str = "#!/bin/bash\necho \"joined by Tenon\" > /etc/motd";

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2407
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2408
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2409
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2410
#[tokio::test]
async fn al2023_user_data_is_the_users_parts_then_tenons_node_config() {
    let moto = Moto::start();
    let mut p = moto.provider("merge").await;
    p.launch.cluster_dns = Some("10.0.100.10".parse().unwrap());
    lab(&p, "merge").await;
    let mime = format!(
        "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"USERPARTS\"\n\n--USERPARTS\nContent-Type: {NODE_CONFIG}\n\n{USER_NODE_CONFIG}\n--USERPARTS\nContent-Type: text/x-shellscript; charset=\"us-ascii\"\n\n{USER_SCRIPT}\n--USERPARTS--\n"
    );
    let shell = "text/x-shellscript; charset=\"us-ascii\"";
    // (NodeClass, its user data, the parts Tenon keeps from it)
    type Case<'a> = (&'a str, Option<String>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case> = vec![
        ("mime", Some(mime), vec![(NODE_CONFIG, USER_NODE_CONFIG), (shell, USER_SCRIPT)]),
        ("yaml", Some(USER_NODE_CONFIG.into()), vec![(NODE_CONFIG, USER_NODE_CONFIG)]),
        ("shell", Some(USER_SCRIPT.into()), vec![(shell, USER_SCRIPT)]),
        // Not a YAML map, not MIME: a script, shebang or not.
        ("bare", Some("yum install -y htop".into()), vec![(shell, "yum install -y htop")]),
        ("empty", None, vec![]),
    ];
    for (name, custom, user_parts) in cases {
        let nc = lab_with(&p, "merge", name, |nc| {
            nc.spec.user_data = custom;
            nc.spec.kubelet =
                Some(tenon_api::ec2nodeclass::KubeletConfiguration { max_pods: Some(110), ..Default::default() });
        })
        .await;
        let mut req = request(&format!("{name}-a"), &nc, vec![option("m5.large", "us-east-1a", "amd64")]);
        req.labels = BTreeMap::from([("testing/cluster".to_string(), "unspecified".to_string())]);
        req.taints = vec![];
        let made = templates_made_by(&p, async {
            p.create(&req).await.unwrap();
        })
        .await;
        assert_eq!(made.len(), 1, "{name}");
        let ud = user_data(&made[0]);
        let parts = mime_parts(&ud);
        assert_eq!(parts.len(), user_parts.len() + 1, "{name}: {ud}");
        for ((ct, body), (want_ct, want_body)) in parts.iter().zip(&user_parts) {
            assert_eq!((ct.as_str(), body.as_str()), (*want_ct, *want_body), "{name}: {ud}");
        }
        let (ct, generated) = parts.last().unwrap();
        assert_eq!(ct, NODE_CONFIG, "{name}: Tenon's NodeConfig comes last, so its cluster settings win");
        assert_eq!(yaml(generated), expected_node_config("merge", name), "{name}: {ud}");
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1401
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1389
#[tokio::test]
async fn the_kubelet_defaults_to_the_clusters_dns_address() {
    let moto = Moto::start();
    let mut p = moto.provider("dns").await;
    lab(&p, "dns").await;
    for (i, address) in ["10.0.100.10", "fd4b:121b:812b::a"].into_iter().enumerate() {
        p.launch.cluster_dns = Some(address.parse().unwrap());
        let nc = lab_with(&p, "dns", &format!("dns-{i}"), |_| {}).await;
        let made = launch(&p, &nc, &format!("dns-{i}-a")).await;
        assert!(!made.is_empty());
        for d in &made {
            let config = generated_config(&user_data(d));
            assert_eq!(config["spec"]["kubelet"]["config"]["clusterDNS"], yaml(&format!("[\"{address}\"]")));
        }
    }
    // A NodeClass that sets clusterDNS keeps its own.
    let nc = lab_with(&p, "dns", "own-dns", |nc| {
        nc.spec.kubelet = Some(tenon_api::ec2nodeclass::KubeletConfiguration {
            cluster_dns: vec!["10.0.0.53".into()],
            ..Default::default()
        })
    })
    .await;
    let made = launch(&p, &nc, "own-dns-a").await;
    assert_eq!(generated_config(&user_data(&made[0]))["spec"]["kubelet"]["config"]["clusterDNS"], yaml("[10.0.0.53]"));
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2412
#[tokio::test]
async fn no_al2023_template_without_the_service_cidr() {
    let moto = Moto::start();
    let mut p = moto.provider("cidr").await;
    p.settings.cluster.service_cidr = String::new();
    lab(&p, "cidr").await;
    let nc = resolved(&p, lab_nodeclass("cidr")).await;
    let made = templates_made_by(&p, async {
        let err = p.create(&request("cidr-a", &nc, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap_err();
        assert!(
            matches!(&err, tenon_core::cloud::CloudError::NodeClassNotReady { message, .. } if message.contains("CIDR")),
            "{err}"
        );
    })
    .await;
    assert!(made.is_empty(), "{made:?}");
    assert!(p.list().await.unwrap().is_empty(), "nothing launched");
}

fn toml(s: &str) -> toml::Table {
    s.parse().unwrap_or_else(|e| panic!("{e}: {s}"))
}

/// A Bottlerocket NodeClass over the lab's AMIs with maxPods 110 (Karpenter's suite's).
async fn bottlerocket(p: &AwsProvider, cluster: &str, name: &str, custom: Option<&str>) -> EC2NodeClass {
    lab_with(p, cluster, name, |nc| {
        nc.spec.ami_family = Some("Bottlerocket".into());
        nc.spec.user_data = custom.map(str::to_string);
        nc.spec.kubelet =
            Some(tenon_api::ec2nodeclass::KubeletConfiguration { max_pods: Some(110), ..Default::default() });
    })
    .await
}

/// A request labelled `testing/cluster=unspecified`, tainted foo=bar:NoExecute with the startup
/// taint baz=bin:NoExecute (Karpenter's Bottlerocket merge case).
fn tainted_request(nodeclaim: &str, nc: &EC2NodeClass) -> tenon_core::cloud::LaunchRequest {
    let mut req = request(nodeclaim, nc, vec![option("m5.large", "us-east-1a", "amd64")]);
    req.labels = BTreeMap::from([("testing/cluster".to_string(), "unspecified".to_string())]);
    req.taints = vec![Taint { key: "foo".into(), value: "bar".into(), effect: Effect::NoExecute }];
    req.startup_taints = vec![Taint { key: "baz".into(), value: "bin".into(), effect: Effect::NoExecute }];
    req
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1587
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1603
#[tokio::test]
async fn bottlerocket_settings_merge_tenons_over_the_users() {
    let moto = Moto::start();
    let mut p = moto.provider("brm").await;
    p.launch.cluster_dns = Some("10.0.100.10".parse().unwrap());
    lab(&p, "brm").await;
    let custom = r#"
[settings.kubernetes]
"not-a-kubelet-setting" = "dropped"
api-server = "https://elsewhere"
cloud-provider = "external"
cluster-name = "elsewhere"
max-pods = 12345
[settings.kubernetes.eviction-hard]
"memory.available" = "12%"
[settings.kubernetes.labels]
"also" = "dropped"
[settings.kubernetes.node-labels]
"team" = "data"
"karpenter.sh/nodepool" = "overridden"
[settings.kubernetes.node-taints]
"replaced" = ["x:NoSchedule"]
[settings.ntp]
time-servers = ["169.254.169.123"]
[settings.host-containers.admin]
enabled = true
"#;
    let generated = |nc: &str, labels: &str| {
        format!(
            r#"
api-server = "https://ABCDEF.gr7.us-east-1.eks.amazonaws.com"
cluster-certificate = "Q0E="
cluster-name = "brm"
cluster-dns-ip = "10.0.100.10"
max-pods = 110
[node-labels]
{labels}"karpenter.k8s.aws/ec2nodeclass" = "{nc}"
"karpenter.sh/capacity-type" = "on-demand"
"karpenter.sh/do-not-sync-taints" = "true"
"karpenter.sh/nodepool" = "lab-general"
"testing/cluster" = "unspecified"
[node-taints]
baz = ["bin:NoExecute"]
foo = ["bar:NoExecute"]
"karpenter.sh/unregistered" = [":NoExecute"]
"#
        )
    };
    for (name, custom) in [("merged", Some(custom)), ("unmerged", None)] {
        let nc = bottlerocket(&p, "brm", name, custom).await;
        let req = tainted_request(&format!("{name}-a"), &nc);
        let made = templates_made_by(&p, async {
            p.create(&req).await.unwrap();
        })
        .await;
        assert_eq!(made.len(), 1, "{name}");
        let got = toml(&user_data(&made[0]));
        let mut want = toml::Table::new();
        let mut kubernetes = toml(&generated(name, if custom.is_some() { "\"team\" = \"data\"\n" } else { "" }));
        if custom.is_some() {
            // The user's known settings stay unless Tenon sets them; unknown ones go, and the
            // NodePool's taints replace the user's.
            kubernetes.insert("cloud-provider".into(), "external".into());
            kubernetes.insert("eviction-hard".into(), toml("\"memory.available\" = \"12%\"").into());
        }
        let mut settings = toml::Table::new();
        settings.insert("kubernetes".into(), kubernetes.into());
        if custom.is_some() {
            settings.insert("ntp".into(), toml("time-servers = [\"169.254.169.123\"]").into());
            settings.insert("host-containers".into(), toml("[admin]\nenabled = true").into());
        }
        want.insert("settings".into(), settings.into());
        assert_eq!(got, want, "{name}");
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1705
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2007
#[tokio::test]
async fn bottlerocket_kubernetes_settings_carry_the_cluster_dns_address() {
    let moto = Moto::start();
    let mut p = moto.provider("brd").await;
    p.launch.cluster_dns = Some("10.0.100.10".parse().unwrap());
    lab(&p, "brd").await;
    let nc = lab_with(&p, "brd", "grace", |nc| {
        nc.spec.ami_family = Some("Bottlerocket".into());
        nc.spec.kubelet = Some(tenon_api::ec2nodeclass::KubeletConfiguration {
            max_pods: Some(35),
            eviction_max_pod_grace_period: Some(10),
            ..Default::default()
        });
    })
    .await;
    let made = launch(&p, &nc, "grace-a").await;
    assert_eq!(made.len(), 1);
    let k = &toml(&user_data(&made[0]))["settings"]["kubernetes"];
    assert_eq!(k["api-server"].as_str(), Some("https://ABCDEF.gr7.us-east-1.eks.amazonaws.com"));
    assert_eq!(k["cluster-certificate"].as_str(), Some("Q0E="));
    assert_eq!(k["cluster-name"].as_str(), Some("brd"));
    assert_eq!(k["cluster-dns-ip"].as_str(), Some("10.0.100.10"));
    assert_eq!(k["max-pods"].as_integer(), Some(35));
    assert_eq!(k["eviction-max-pod-grace-period"].as_integer(), Some(10));
}

// ----- What each instance type makes of its template: max pods, EFA, enclaves -----

/// The templates a launch of `options` makes, the NodeClaim requesting `requested`.
async fn launch_requesting(
    p: &AwsProvider,
    nc: &EC2NodeClass,
    nodeclaim: &str,
    options: Vec<tenon_core::cloud::LaunchOption>,
    requested: &[&str],
) -> Vec<ResponseLaunchTemplateData> {
    let requested: std::collections::BTreeSet<String> = requested.iter().map(|s| s.to_string()).collect();
    templates_made_by(p, async {
        p.launch(&request(nodeclaim, nc, options), &requested).await.unwrap();
    })
    .await
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2347
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1220
#[tokio::test]
async fn each_max_pods_value_gets_its_own_template() {
    let moto = Moto::start();
    let p = moto.provider("mxp").await;
    lab(&p, "mxp").await;
    // Karpenter's case sets clusterDNS so that the kubelet config is not empty.
    let nc = lab_with(&p, "mxp", "dns", |nc| {
        nc.spec.kubelet = Some(tenon_api::ec2nodeclass::KubeletConfiguration {
            cluster_dns: vec!["10.0.0.10".into()],
            ..Default::default()
        })
    })
    .await;
    let options = vec![option("m5.large", "us-east-1a", "amd64"), option("m5.xlarge", "us-east-1a", "amd64")];
    let made = launch_requesting(&p, &nc, "mxp-a", options, &[]).await;
    let mut pods: Vec<i64> = made
        .iter()
        .map(|d| generated_config(&user_data(d))["spec"]["kubelet"]["config"]["maxPods"].as_i64().unwrap())
        .collect();
    pods.sort();
    // The ENI-limited pods of each type: m5.large 3 × (10 − 1) + 2, m5.xlarge 4 × (15 − 1) + 2.
    assert_eq!(pods, [29, 58]);
    // Bottlerocket too, and a NodeClass maxPods is every type's.
    let br = lab_with(&p, "mxp", "br", |nc| nc.spec.ami_family = Some("Bottlerocket".into())).await;
    let made = launch_requesting(&p, &br, "mxp-b", vec![option("m5.large", "us-east-1a", "amd64")], &[]).await;
    assert_eq!(toml(&user_data(&made[0]))["settings"]["kubernetes"]["max-pods"].as_integer(), Some(29));
    let fixed = lab_with(&p, "mxp", "fixed", |nc| {
        nc.spec.kubelet =
            Some(tenon_api::ec2nodeclass::KubeletConfiguration { max_pods: Some(20), ..Default::default() })
    })
    .await;
    let options = vec![option("m5.large", "us-east-1a", "amd64"), option("m5.xlarge", "us-east-1a", "amd64")];
    let made = launch_requesting(&p, &fixed, "mxp-c", options, &[]).await;
    assert_eq!(made.len(), 1, "one maxPods, one template");
    assert_eq!(generated_config(&user_data(&made[0]))["spec"]["kubelet"]["config"]["maxPods"].as_i64(), Some(20));
}

const NITRO_SANDBOX: &str = "eks.amazonaws.com/nitro-sandbox";

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2765
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1251
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1260
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1272
#[tokio::test]
async fn enclaves_are_enabled_for_nodeclaims_that_request_a_nitro_sandbox() {
    let moto = Moto::start();
    let p = moto.provider("encl").await;
    lab(&p, "encl").await;
    for (i, (requested, want)) in
        [(vec![], false), (vec![NITRO_SANDBOX], true), (vec!["cpu", "memory"], false)].into_iter().enumerate()
    {
        // A NodeClass each, so that each launch makes its own template.
        let nc = lab_with(&p, "encl", &format!("encl-{i}"), |_| {}).await;
        let made = launch_requesting(
            &p,
            &nc,
            &format!("encl-{i}"),
            vec![option("m5.large", "us-east-1a", "amd64")],
            &requested,
        )
        .await;
        assert!(!made.is_empty(), "{requested:?}: a new template");
        for d in &made {
            assert_eq!(d.enclave_options().and_then(|e| e.enabled()), Some(want), "{requested:?}");
        }
    }
}

const EFA: &str = "vpc.amazonaws.com/efa";

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2650
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2651
#[tokio::test]
async fn efa_nodeclaims_get_an_efa_interface_per_network_card() {
    let moto = Moto::start();
    let p = moto.provider("efa").await;
    let lab = lab(&p, "efa").await;
    // The catalog knows how many EFA interfaces each type takes.
    let nc = resolved(&p, lab_nodeclass("efa")).await;
    let types = p.instance_types(&nc).await.unwrap();
    let efa = |name: &str| types.iter().find(|t| t.name == name).unwrap().capacity.get(EFA);
    assert_eq!((efa("c5n.18xlarge"), efa("p4d.24xlarge"), efa("m5.large")), (1, 4, 0));
    for public in [true, false] {
        let nc =
            lab_with(&p, "efa", &format!("public-{public}"), |nc| nc.spec.associate_public_ip_address = Some(public))
                .await;
        let options =
            vec![option("c5n.18xlarge", "us-east-1a", "amd64"), option("p4d.24xlarge", "us-east-1a", "amd64")];
        let made = launch_requesting(&p, &nc, &format!("efa-{public}"), options, &[EFA]).await;
        let mut cards: Vec<usize> = made.iter().map(|d| d.network_interfaces().len()).collect();
        cards.sort();
        assert_eq!(cards, [1, 4], "one template per EFA count");
        for d in &made {
            for (i, ni) in d.network_interfaces().iter().enumerate() {
                assert_eq!(ni.network_card_index(), Some(i as i32));
                assert_eq!(ni.device_index(), Some(if i == 0 { 0 } else { 1 }));
                assert_eq!(ni.interface_type(), Some("efa"));
                assert_eq!(ni.associate_public_ip_address(), Some(public));
                assert_eq!(ni.groups(), std::slice::from_ref(&lab.security_group));
            }
        }
    }
}

// ----- Scheduling with the provider's instance types -----

use support::scheduling::Cluster;

const MIB: i64 = 1 << 20;

/// Karpenter's suite NodePool over the instance types the provider offers `nc`.
async fn cluster_for(p: &AwsProvider, nc: &EC2NodeClass, requirements: &[&str]) -> Cluster {
    let types = p.instance_types(nc).await.unwrap();
    assert!(!types.is_empty());
    Cluster::new(types.to_vec(), nc.metadata.name.as_deref().unwrap(), requirements)
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:832
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:845
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:854
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:863
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:885
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:908
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:928
#[tokio::test]
async fn ephemeral_storage_requests_fit_the_20gi_root_volume_less_its_overhead() {
    let moto = Moto::start();
    let p = moto.provider("eph").await;
    lab(&p, "eph").await;
    let nc = resolved(&p, lab_nodeclass("eph")).await;
    let base = cluster_for(&p, &nc, &[]).await;
    let decide = |f: &dyn Fn(&mut Cluster)| {
        let mut c = Cluster::new(base_catalog(&base), "lab-general", &[]);
        f(&mut c);
        c.decide()
    };
    // A DaemonSet's ephemeral storage is overhead the pod still fits beside.
    let d = decide(&|c| {
        c.daemonset("ds", "{cpu: \"1\", memory: 1Gi, ephemeral-storage: 1Gi}").pending("p", "{}");
    });
    assert!(d.scheduled("p"));
    for (request, fits) in [("1G", true), ("10Gi", true), ("19Gi", false), ("150Gi", false)] {
        let d = decide(&|c| {
            c.pending("p", &format!("{{ephemeral-storage: {request}}}"));
        });
        // 20Gi less 1Gi kube-reserved and the 2Gi (10%) eviction threshold: 17Gi.
        assert_eq!(d.scheduled("p"), fits, "{request}");
    }
    // Two 10Gi pods need two nodes; a 150Gi one none, while a 10Gi one still schedules.
    let d = decide(&|c| {
        c.pending("a", "{ephemeral-storage: 10Gi}").pending("b", "{ephemeral-storage: 10Gi}");
    });
    assert!(d.scheduled("a") && d.scheduled("b"));
    assert_eq!(d.plan.nodeclaims.len(), 2);
    let d = decide(&|c| {
        c.pending("small", "{ephemeral-storage: 10Gi}").pending("big", "{ephemeral-storage: 150Gi}");
    });
    assert!(d.scheduled("small") && !d.scheduled("big"));
}

/// The instance types a cluster was made with.
fn base_catalog(c: &Cluster) -> Vec<tenon_core::instancetype::InstanceType> {
    c.catalog()
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:939
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:966
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:996
#[tokio::test]
async fn the_root_volume_is_the_familys_device_the_last_custom_mapping_or_the_marked_one() {
    let moto = Moto::start();
    let p = moto.provider("root").await;
    lab(&p, "root").await;
    let mapping = |device: &str, size: &str, root: bool| tenon_api::ec2nodeclass::BlockDeviceMapping {
        device_name: Some(device.into()),
        ebs: Some(tenon_api::ec2nodeclass::BlockDevice {
            volume_size: Some(k8s_openapi::apimachinery::pkg::api::resource::Quantity(size.into())),
            ..Default::default()
        }),
        root_volume: root,
    };
    let cases = [
        // AL2023 keeps the pods on /dev/xvda.
        ("al2023", "AL2023", vec![mapping("/dev/xvda", "50G", false), mapping("/dev/xvdb", "20G", false)]),
        // A Custom AMI's root is unknown: the last mapping is taken.
        ("custom", "Custom", vec![mapping("/dev/xvda", "20G", false), mapping("/dev/xvdb", "40G", false)]),
        // Unless a mapping says it is the root.
        (
            "marked",
            "Custom",
            vec![
                mapping("/dev/xvda", "20G", false),
                mapping("/dev/xvdb", "40G", true),
                mapping("/dev/xvdc", "20G", false),
            ],
        ),
    ];
    for (name, family, mappings) in cases {
        let nc = lab_with(&p, "root", name, |nc| {
            nc.spec.ami_family = Some(family.into());
            nc.spec.block_device_mappings = mappings;
            if family == "Custom" {
                nc.spec.user_data = Some("#!/bin/sh\n".into());
            }
        })
        .await;
        let mut c = cluster_for(&p, &nc, &[]).await;
        // Fits only if the larger volume holds the pods.
        let d = c.pending("p", "{ephemeral-storage: 25Gi}").decide();
        assert!(d.scheduled("p"), "{name}");
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1059
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1113
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1142
#[tokio::test]
async fn memory_overhead_follows_the_pods_each_family_counts() {
    let moto = Moto::start();
    let mut p = moto.provider("ovh").await;
    p.settings.capacity.vm_memory_overhead = 0.0;
    lab(&p, "ovh").await;
    for (name, family, max_pods, want_mib) in [
        // kube-reserved 11Mi × 58 ENI-limited pods + 255Mi, and the 100Mi eviction threshold.
        ("al2", "AL2", None, 993),
        ("br", "Bottlerocket", None, 993),
        ("br110", "Bottlerocket", Some(110), 11 * 110 + 255 + 100),
    ] {
        let nc = lab_with(&p, "ovh", name, |nc| {
            nc.spec.ami_family = Some(family.into());
            nc.spec.kubelet = Some(tenon_api::ec2nodeclass::KubeletConfiguration { max_pods, ..Default::default() });
        })
        .await;
        let types = p.instance_types(&nc).await.unwrap();
        let m5 = types.iter().find(|t| t.name == "m5.xlarge").unwrap();
        assert_eq!(m5.overhead.memory, want_mib * MIB, "{name}");
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:569
#[tokio::test]
async fn nodes_get_their_os_architecture_and_instance_type() {
    let moto = Moto::start();
    let p = moto.provider("lbl").await;
    lab(&p, "lbl").await;
    let nc = resolved(&p, lab_nodeclass("lbl")).await;
    let mut c = cluster_for(&p, &nc, &[]).await;
    let d = c.pending("p", "{}").decide();
    for t in d.options("p") {
        let labels = t.labels();
        for key in ["kubernetes.io/os", "kubernetes.io/arch", "node.kubernetes.io/instance-type"] {
            assert!(labels.contains_key(key), "{}: {key}", t.name);
        }
    }
}
const GB: i64 = 1_000_000_000;
const GIB: i64 = 1 << 30;

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:872
#[tokio::test]
async fn with_raid0_instance_storage_is_the_ephemeral_storage() {
    let moto = Moto::start();
    let p = moto.provider("raid").await;
    lab(&p, "raid").await;
    let nc = lab_with(&p, "raid", "raid0", |nc| nc.spec.instance_store_policy = Some("RAID0".into())).await;
    let types = p.instance_types(&nc).await.unwrap();
    let m6idn = types.iter().find(|t| t.name == "m6idn.32xlarge").unwrap();
    assert_eq!(m6idn.capacity.ephemeral_storage, 7600 * GB, "its four 1900 GB NVMe disks");
    let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
    assert_eq!(m5.capacity.ephemeral_storage, 20 * GIB, "no instance storage: the root volume");
    let mut c = Cluster::new(types.to_vec(), "raid0", &[]);
    let d = c.pending("p", "{ephemeral-storage: 5000Gi}").decide();
    assert!(d.scheduled("p"));
    let raw = p.catalog().await.unwrap();
    for t in d.options("p") {
        let disks = raw.types[&t.name]["InstanceStorageInfo"]["TotalSizeInGB"].as_i64().unwrap();
        assert_eq!(t.capacity.ephemeral_storage, disks * GB, "{}", t.name);
        assert!(t.capacity.ephemeral_storage > 5000 * GIB, "{}", t.name);
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2377
#[tokio::test]
async fn al2023_raid0_nodes_stripe_their_instance_storage() {
    let moto = Moto::start();
    let p = moto.provider("raid23").await;
    lab(&p, "raid23").await;
    let nc = lab_with(&p, "raid23", "raid0", |nc| nc.spec.instance_store_policy = Some("RAID0".into())).await;
    let made = launch(&p, &nc, "raid0-a").await;
    assert!(!made.is_empty());
    for d in &made {
        assert_eq!(generated_config(&user_data(d))["spec"]["instance"]["localStorage"]["strategy"], yaml("RAID0"));
    }
    let plain = launch(&p, &resolved(&p, lab_nodeclass("raid23")).await, "plain-a").await;
    assert!(generated_config(&user_data(&plain[0]))["spec"].get("instance").is_none(), "only when asked for");
}

/// A Bottlerocket NodeClass choosing its AMI by `terms` (flow YAML), with the lab's AMIs in its
/// status (moto serves no Bottlerocket parameters or images), and `custom` user data.
async fn bottlerocket_with(
    p: &AwsProvider,
    cluster: &str,
    name: &str,
    terms: &str,
    custom: Option<&str>,
) -> EC2NodeClass {
    let lab_amis = resolved(p, lab_nodeclass(cluster)).await.status.unwrap().amis;
    let mut nc = lab_with(p, cluster, name, |nc| {
        nc.spec.ami_family = Some("Bottlerocket".into());
        nc.spec.ami_selector_terms = serde_yaml::from_str(terms).unwrap();
        nc.spec.instance_store_policy = Some("RAID0".into());
        nc.spec.user_data = custom.map(str::to_string);
    })
    .await;
    nc.status.as_mut().unwrap().amis = lab_amis;
    nc
}

/// The bootstrap command that mounts instance storage, as Bottlerocket takes it, binding the
/// given directories (none: Bottlerocket's default ones).
fn mount_command(dirs: &[&str]) -> toml::Table {
    let bind: Vec<String> = ["'apiclient'", "'ephemeral-storage'", "'bind'"]
        .into_iter()
        .map(str::to_string)
        .chain((!dirs.is_empty()).then(|| "'--dirs'".to_string()))
        .chain(dirs.iter().map(|d| format!("'{d}'")))
        .collect();
    toml(&format!(
        "commands = [['apiclient', 'ephemeral-storage', 'init'], [{}]]\nmode = 'always'\nessential = true",
        bind.join(", ")
    ))
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1506
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1550
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1566
#[tokio::test]
async fn bottlerocket_raid0_nodes_mount_instance_storage_at_boot() {
    let moto = Moto::start();
    let p = moto.provider("raidbr").await;
    lab(&p, "raidbr").await;
    let explicit = ["/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"];
    for (name, terms, dirs) in [
        // Bottlerocket binds the kubelet's directories itself from 1.46.0.
        ("latest", "[{alias: bottlerocket@latest}]", &[][..]),
        ("v1-46-0", "[{alias: bottlerocket@v1.46.0}]", &[][..]),
        ("v1-45-0", "[{alias: bottlerocket@v1.45.0}]", &explicit[..]),
        // A name term's version counts too; no version known: name the directories.
        ("named", "[{name: bottlerocket-aws-k8s-1.33-x86_64-v1.47.1-*}]", &[][..]),
        ("unknown", "[{tags: {karpenter.sh/discovery: raidbr}}]", &explicit[..]),
    ] {
        let nc = bottlerocket_with(&p, "raidbr", name, terms, None).await;
        let made = launch(&p, &nc, &format!("{name}-a")).await;
        assert!(!made.is_empty(), "{name}");
        for d in &made {
            let settings = toml(&user_data(d))["settings"].as_table().unwrap().clone();
            assert_eq!(
                settings["bootstrap-commands"]["000-mount-instance-storage"].as_table(),
                Some(&mount_command(dirs)),
                "{name}"
            );
        }
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1522
#[tokio::test]
async fn bottlerocket_raid0_mounting_runs_beside_the_users_bootstrap_commands() {
    let moto = Moto::start();
    let p = moto.provider("raidmix").await;
    lab(&p, "raidmix").await;
    let custom = "[settings.bootstrap-commands.111-say-hello]\ncommands = [['echo', 'hello']]\nmode = 'always'\nessential = true\n";
    let nc = bottlerocket_with(&p, "raidmix", "mixed", "[{alias: bottlerocket@latest}]", Some(custom)).await;
    let made = launch(&p, &nc, "mixed-a").await;
    assert!(!made.is_empty());
    for d in &made {
        let commands = toml(&user_data(d))["settings"]["bootstrap-commands"].as_table().unwrap().clone();
        let mut want = toml(custom)["settings"]["bootstrap-commands"].as_table().unwrap().clone();
        want.insert("000-mount-instance-storage".into(), mount_command(&[]).into());
        assert_eq!(commands, want);
    }
}

// ----- IPv6 clusters -----

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2844
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2845
#[test]
fn the_cluster_ip_family_is_its_dns_addresss() {
    use tenon_aws::launch_template::IpFamily;
    assert_eq!(IpFamily::of(Some("10.0.100.10".parse().unwrap())), IpFamily::Ipv4);
    assert_eq!(IpFamily::of(Some("fd01:99f0:d47b::a".parse().unwrap())), IpFamily::Ipv6);
    assert_eq!(IpFamily::of(None), IpFamily::Ipv4, "unknown: IPv4, EKS's default");
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2684
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2685
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2686
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2687
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2879
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2880
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2881
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2882
#[tokio::test]
async fn ipv6_clusters_give_nodes_a_primary_ipv6_address_and_ipv6_prefixes() {
    let moto = Moto::start();
    let mut p = moto.provider("ipv6").await;
    p.launch.cluster_dns = Some("fd4b:121b:812b::a".parse().unwrap());
    lab(&p, "ipv6").await;
    for count in [0, 1, 10, 100] {
        let nc = lab_with(&p, "ipv6", &format!("prefix-{count}"), |nc| nc.spec.ip_prefix_count = Some(count)).await;
        let made = launch(&p, &nc, &format!("prefix-{count}-a")).await;
        let ni = &made[0].network_interfaces()[0];
        assert_eq!((ni.ipv6_prefix_count(), ni.ipv4_prefix_count()), (Some(count), None), "ipPrefixCount {count}");
    }
    // (public IP set, its value, EFA requested)
    for (set, public, efa) in [(false, true, false), (false, false, true), (true, true, true), (true, false, false)] {
        let name = format!("v6-{set}-{public}-{efa}");
        let nc = lab_with(&p, "ipv6", &name, |nc| {
            if set {
                nc.spec.associate_public_ip_address = Some(public);
            }
        })
        .await;
        let requested: &[&str] = if efa { &[EFA] } else { &[] };
        let made =
            launch_requesting(&p, &nc, &name, vec![option("c5n.18xlarge", "us-east-1a", "amd64")], requested).await;
        assert_eq!(made.len(), 1, "{name}");
        let ni = &made[0].network_interfaces()[0];
        if efa {
            assert_eq!(ni.interface_type(), Some("efa"), "{name}");
        }
        assert_eq!(ni.associate_public_ip_address(), set.then_some(public), "{name}");
        assert_eq!((ni.ipv6_address_count(), ni.primary_ipv6()), (Some(1), Some(true)), "{name}");
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1172
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1189
#[tokio::test]
async fn the_user_data_size_is_a_gauge_per_nodeclass_until_its_templates_go() {
    let moto = Moto::start();
    let p = moto.provider("udb").await;
    lab(&p, "udb").await;
    let nc = resolved(&p, lab_nodeclass("udb")).await;
    let made = launch(&p, &nc, "udb-a").await;
    // The size EC2 limits: the decoded bytes, of one of the NodeClass' templates.
    let sizes: Vec<f64> = made.iter().map(|d| user_data(d).len() as f64).collect();
    let gauge = p.metrics.userdata_bytes("lab-general").expect("a series for the NodeClass");
    assert!(sizes.contains(&gauge), "{gauge} not among {sizes:?}");
    assert!(gauge < 16384.0);
    let series = format!("karpenter_ec2nodeclasses_userdata_bytes{{nodeclass=\"lab-general\"}} {gauge:?}");
    assert!(p.metrics.render().contains(&series), "{}", p.metrics.render());
    // Deleting the NodeClass' templates removes the series rather than zeroing it.
    p.finalize_nodeclass(&nc).await.unwrap();
    assert_eq!(p.metrics.userdata_bytes("lab-general"), None);
    assert!(!p.metrics.render().contains("nodeclass=\"lab-general\""), "{}", p.metrics.render());
}

// ----- The kubelet settings in the user data -----

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1233
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1255
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1277
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1297
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1322
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1347
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1360
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1373
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1412
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1425
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1438
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2258
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2265
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2272
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2279
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2291
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2303
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2306
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2309
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2312
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2315
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2318
#[tokio::test]
async fn al2023_node_configs_carry_the_nodeclass_kubelet_settings() {
    use tenon_api::ec2nodeclass::KubeletConfiguration;
    let moto = Moto::start();
    let p = moto.provider("kub").await;
    lab(&p, "kub").await;
    let reserved = map(&[("cpu", "500m"), ("memory", "1Gi"), ("ephemeral-storage", "2Gi")]);
    let thresholds = map(&[("memory.available", "10%"), ("nodefs.available", "15%"), ("nodefs.inodesFree", "5%")]);
    let grace = map(&[("memory.available", "1m0s"), ("nodefs.available", "3m0s"), ("nodefs.inodesFree", "5m0s")]);
    let all = KubeletConfiguration {
        system_reserved: reserved.clone(),
        kube_reserved: reserved.clone(),
        eviction_hard: thresholds.clone(),
        eviction_soft: thresholds.clone(),
        eviction_soft_grace_period: grace.clone(),
        eviction_max_pod_grace_period: Some(300),
        pods_per_core: Some(2),
        max_pods: Some(100),
        cluster_dns: vec!["10.0.100.0".into()],
        image_gc_high_threshold_percent: Some(50),
        cpu_cfs_quota: Some(false),
        ..Default::default()
    };
    let low = KubeletConfiguration { image_gc_low_threshold_percent: Some(50), ..Default::default() };
    for (name, kubelet) in [("all", all), ("gc-low", low)] {
        let nc = lab_with(&p, "kub", name, |nc| nc.spec.kubelet = Some(kubelet.clone())).await;
        let made = launch(&p, &nc, &format!("{name}-a")).await;
        assert!(!made.is_empty());
        // Every field the NodeClass sets is in the inline config as the NodeClass wrote it.
        let want = serde_json::to_value(&kubelet).unwrap();
        for d in &made {
            let config = generated_config(&user_data(d))["spec"]["kubelet"]["config"].clone();
            let config: serde_json::Value = serde_json::to_value(config).unwrap();
            for (field, value) in want.as_object().unwrap() {
                assert_eq!(&config[field], value, "{name}: {field}");
            }
        }
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1637
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1661
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1685
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1725
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1749
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1967
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1987
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2022
#[tokio::test]
async fn bottlerocket_settings_carry_the_nodeclass_kubelet_settings() {
    use tenon_api::ec2nodeclass::KubeletConfiguration;
    let moto = Moto::start();
    let p = moto.provider("brk").await;
    lab(&p, "brk").await;
    let reserved = map(&[("cpu", "2"), ("memory", "3Gi"), ("ephemeral-storage", "10Gi")]);
    let thresholds = map(&[("memory.available", "10%"), ("nodefs.available", "15%"), ("nodefs.inodesFree", "5%")]);
    let high = KubeletConfiguration {
        system_reserved: reserved.clone(),
        kube_reserved: reserved.clone(),
        eviction_hard: thresholds.clone(),
        eviction_soft: map(&[("memory.available", "10%")]),
        eviction_soft_grace_period: map(&[("memory.available", "1m0s")]),
        max_pods: Some(10),
        image_gc_high_threshold_percent: Some(50),
        cpu_cfs_quota: Some(false),
        ..Default::default()
    };
    let low = KubeletConfiguration { image_gc_low_threshold_percent: Some(50), ..Default::default() };
    let table = |m: &BTreeMap<String, String>| {
        toml::Value::Table(m.iter().map(|(k, v)| (k.clone(), toml::Value::String(v.clone()))).collect())
    };
    for (name, kubelet) in [("high", high.clone()), ("low", low)] {
        let nc = lab_with(&p, "brk", name, |nc| {
            nc.spec.ami_family = Some("Bottlerocket".into());
            nc.spec.kubelet = Some(kubelet.clone());
        })
        .await;
        let made = launch(&p, &nc, &format!("{name}-a")).await;
        assert!(!made.is_empty());
        for d in &made {
            let k = toml(&user_data(d))["settings"]["kubernetes"].as_table().unwrap().clone();
            if name == "high" {
                assert_eq!(k["system-reserved"], table(&high.system_reserved));
                assert_eq!(k["kube-reserved"], table(&high.kube_reserved));
                assert_eq!(k["eviction-hard"], table(&high.eviction_hard));
                assert_eq!(k["eviction-soft"], table(&high.eviction_soft));
                assert_eq!(k["eviction-soft-grace-period"], table(&high.eviction_soft_grace_period));
                assert_eq!(k["max-pods"].as_integer(), Some(10));
                assert_eq!(k["image-gc-high-threshold-percent"].as_str(), Some("50"));
                assert_eq!(k["cpu-cfs-quota-enforced"].as_bool(), Some(false));
            } else {
                assert_eq!(k["image-gc-low-threshold-percent"].as_str(), Some("50"));
            }
        }
    }
}

/// The node labels a launch's user data bootstraps with: AL2023's `--node-labels` flag, or
/// Bottlerocket's `node-labels` table.
fn bootstrapped_labels(ud: &str) -> BTreeMap<String, String> {
    if let Ok(t) = ud.parse::<toml::Table>() {
        let labels = t["settings"]["kubernetes"]["node-labels"].as_table().unwrap();
        return labels.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap().to_string())).collect();
    }
    let config = generated_config(ud);
    let flag = config["spec"]["kubelet"]["flags"][0].as_str().unwrap().to_string();
    let list = flag.strip_prefix("--node-labels=").expect("the labels flag");
    list.split(',').map(|kv| kv.split_once('=').unwrap()).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2040
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2059
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2179
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2202
#[tokio::test]
async fn nodepool_labels_and_single_value_requirements_reach_the_kubelet() {
    let moto = Moto::start();
    let p = moto.provider("lbls").await;
    lab(&p, "lbls").await;
    let desired = [("test-label-1", "value-1"), ("test-label-2", "value-2")];
    let requirements: Vec<String> =
        desired.iter().map(|(k, v)| format!("{{key: {k}, operator: In, values: [{v}]}}")).collect();
    let requirements: Vec<&str> = requirements.iter().map(String::as_str).collect();
    for family in ["AL2023", "Bottlerocket"] {
        for how in ["template labels", "requirements"] {
            // A NodeClass each, so that each launch makes its own template.
            let name = format!("{}-{}", family.to_lowercase(), how.len());
            let nc = lab_with(&p, "lbls", &name, |nc| nc.spec.ami_family = Some(family.into())).await;
            let reqs: &[&str] = if how == "requirements" { &requirements } else { &[] };
            let mut c = cluster_for(&p, &nc, reqs).await;
            if how == "template labels" {
                c.template_labels(&desired);
            }
            let d = c.pending("p", "{}").decide();
            // What the controller launches the pod's NodeClaim with.
            let mut req = request(&name, &nc, vec![option("m5.large", "us-east-1a", "amd64")]);
            req.labels = d.labels("p");
            let made = templates_made_by(&p, async {
                p.create(&req).await.unwrap();
            })
            .await;
            assert!(!made.is_empty(), "{family} {how}");
            for t in &made {
                let labels = bootstrapped_labels(&user_data(t));
                for (k, v) in desired {
                    assert_eq!(labels.get(k).map(String::as_str), Some(v), "{family} {how}: {labels:?}");
                }
            }
        }
    }
}

// ----- Templates, AMIs and what a launch refuses -----

/// The cluster's templates by name, with their tags.
async fn template_tags(p: &AwsProvider) -> BTreeMap<String, BTreeMap<String, String>> {
    let out = p.clients.ec2.describe_launch_templates().send().await.unwrap();
    out.launch_templates().iter().map(|t| (t.launch_template_name().unwrap().to_string(), tag_map(t.tags()))).collect()
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:223
#[tokio::test]
async fn identical_nodeclasses_get_templates_of_their_own() {
    let moto = Moto::start();
    let p = moto.provider("twin").await;
    lab(&p, "twin").await;
    let a = lab_with(&p, "twin", "twin-a", |_| {}).await;
    let b = lab_with(&p, "twin", "twin-b", |_| {}).await;
    let mut spot = option("m5.large", "us-east-1a", "amd64");
    spot.capacity_type = wk::CAPACITY_TYPE_SPOT.into();
    p.create(&request("twin-a-1", &a, vec![spot])).await.unwrap();
    p.create(&request("twin-b-1", &b, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap();
    let tags = template_tags(&p).await;
    assert_eq!(tags.len(), 2, "{tags:?}");
    let mut owners: Vec<&str> = tags.values().map(|t| t["karpenter.k8s.aws/ec2nodeclass"].as_str()).collect();
    owners.sort();
    assert_eq!(owners, ["twin-a", "twin-b"]);
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:331
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2579
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2590
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1629
#[tokio::test]
async fn nothing_is_launched_without_a_profile_an_ami_that_fits_or_valid_user_data() {
    let moto = Moto::start();
    let p = moto.provider("refuse").await;
    lab(&p, "refuse").await;
    let base = resolved(&p, lab_nodeclass("refuse")).await;
    let mut no_profile = base.clone();
    no_profile.status.as_mut().unwrap().instance_profile = None;
    let mut no_amis = base.clone();
    no_amis.status.as_mut().unwrap().amis.clear();
    let mut alien = base.clone();
    alien.status.as_mut().unwrap().amis = vec![tenon_api::ec2nodeclass::Ami {
        id: "ami-123".into(),
        deprecated: false,
        name: None,
        requirements: vec![tenon_api::ec2nodeclass::AmiRequirement {
            key: "kubernetes.io/arch".into(),
            operator: "In".into(),
            values: vec!["newnew".into()],
        }],
    }];
    let mut bad_toml = lab_with(&p, "refuse", "bad-toml", |nc| {
        nc.spec.ami_family = Some("Bottlerocket".into());
        nc.spec.user_data = Some("#/bin/bash\n ./not-toml.sh".into());
    })
    .await;
    bad_toml.metadata.name = Some("bad-toml".into());
    for (name, nc, says) in [
        ("no-profile", &no_profile, "instance profile"),
        ("no-amis", &no_amis, "no AMIs"),
        ("alien", &alien, "no AMI in status.amis serves"),
        ("bad-toml", &bad_toml, "TOML"),
    ] {
        let made = templates_made_by(&p, async {
            let err = p.create(&request(name, nc, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap_err();
            assert!(
                matches!(&err, tenon_core::cloud::CloudError::NodeClassNotReady { message, .. } if message.contains(says)),
                "{name}: {err}"
            );
        })
        .await;
        assert!(made.is_empty(), "{name}: {made:?}");
    }
    assert!(p.list().await.unwrap().is_empty(), "nothing launched");
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:339
#[tokio::test]
async fn a_nodeclass_instance_profile_is_the_templates() {
    let moto = Moto::start();
    let p = moto.provider("iprof").await;
    lab(&p, "iprof").await;
    let iam = &p.clients.iam;
    iam.create_instance_profile().instance_profile_name("overridden-profile").send().await.unwrap();
    iam.add_role_to_instance_profile()
        .instance_profile_name("overridden-profile")
        .role_name("KarpenterNodeRole-iprof")
        .send()
        .await
        .unwrap();
    let nc = lab_with(&p, "iprof", "own-profile", |nc| {
        nc.spec.role = None;
        nc.spec.instance_profile = Some("overridden-profile".into());
    })
    .await;
    let made = launch(&p, &nc, "own-profile-a").await;
    assert!(!made.is_empty());
    for d in &made {
        assert_eq!(d.iam_instance_profile().and_then(|i| i.name()), Some("overridden-profile"));
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:353
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:422
#[tokio::test]
async fn equal_nodeclaims_share_a_template_which_comes_back_if_deleted() {
    let moto = Moto::start();
    // CreateFleet counted at the wire.
    let fleets = tenon_fault_proxy::slow_matching(&moto.url, "Action=CreateFleet", std::time::Duration::ZERO).await;
    let setup = moto.provider("reuse").await;
    lab(&setup, "reuse").await;
    let nc = resolved(&setup, lab_nodeclass("reuse")).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(fleets.url.clone());
    let p = tenon_aws::AwsProvider::connect(&conn, setup.settings.clone()).await.expect("a region");
    let first = launch(&p, &nc, "reuse-a").await;
    assert_eq!(first.len(), 1);
    assert!(launch(&p, &nc, "reuse-b").await.is_empty(), "the second NodeClaim reuses the first's template");
    let names: Vec<String> = template_tags(&p).await.into_keys().collect();
    // Deleted behind Tenon's back: known to exist, it is not described again, so CreateFleet
    // fails as EC2 says it is gone; as in Karpenter (whose template cache that error
    // invalidates), the same launch tries once more, makes it again under the same name,
    // and launches: one failed CreateFleet, then one that launched.
    p.clients.ec2.delete_launch_template().launch_template_name(&names[0]).send().await.unwrap();
    assert!(template_tags(&p).await.is_empty());
    let before = fleets.seen.load(std::sync::atomic::Ordering::SeqCst);
    let c = request("reuse-c", &nc, vec![option("m5.large", "us-east-1a", "amd64")]);
    p.create(&c).await.expect("launched after the template was made again");
    let calls = fleets.seen.load(std::sync::atomic::Ordering::SeqCst) - before;
    assert_eq!(calls, 2, "one CreateFleet refused, one that launched");
    assert_eq!(template_tags(&p).await.into_keys().collect::<Vec<_>>(), names);
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2422
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2609
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2442
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2501
#[tokio::test]
async fn templates_boot_the_status_amis_that_serve_their_types() {
    let moto = Moto::start();
    let p = moto.provider("amis").await;
    let lab = lab(&p, "amis").await;
    let resolved_amis = resolved(&p, lab_nodeclass("amis")).await.status.unwrap().amis;
    let only = |id: &str| resolved_amis.iter().filter(|a| a.id == id).cloned().collect::<Vec<_>>();
    // A Custom family launches the status' AMI with the user's data untouched.
    let mut custom = lab_with(&p, "amis", "custom", |nc| {
        nc.spec.ami_family = Some("Custom".into());
        nc.spec.user_data = Some("special user data".into());
    })
    .await;
    custom.status.as_mut().unwrap().amis = only(&lab.ami_amd64);
    let made = launch(&p, &custom, "custom-a").await;
    assert_eq!(made.len(), 1);
    assert_eq!(made[0].image_id(), Some(lab.ami_amd64.as_str()));
    assert_eq!(user_data(&made[0]), "special user data");
    // AMIs of different requirements: a template each, each with its AMI.
    let nc = resolved(&p, lab_nodeclass("amis")).await;
    let made = templates_made_by(&p, async {
        let options = vec![option("m5.large", "us-east-1a", "amd64"), option("m6g.large", "us-east-1a", "arm64")];
        p.create(&request("both-a", &nc, options)).await.unwrap();
    })
    .await;
    let mut images: Vec<&str> = made.iter().filter_map(|d| d.image_id()).collect();
    images.sort();
    let mut want = vec![lab.ami_amd64.as_str(), lab.ami_arm64.as_str()];
    want.sort();
    assert_eq!(images, want);
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2530
#[tokio::test]
async fn the_newest_ami_that_serves_the_type_is_launched() {
    use tenon_aws::nodeclass::{Image, ImageQuery, select_amis};
    let moto = Moto::start();
    let p = moto.provider("newest").await;
    lab(&p, "newest").await;
    let image = |id: &str, arch: &str, created: &str| Image {
        id: id.into(),
        name: Some(id.into()),
        architecture: arch.into(),
        creation_date: Some(created.into()),
        deprecation_time: None,
    };
    // What a tag term's DescribeImages found.
    let found = vec![
        (0, image("ami-123", "x86_64", "2020-01-01T12:00:00Z")),
        (0, image("ami-456", "x86_64", "2021-01-01T12:00:00Z")),
        (0, image("ami-789", "arm64", "2022-01-01T12:00:00Z")),
    ];
    let amis = select_amis(&[ImageQuery::default()], &found, 1_795_996_800);
    let mut nc = lab_with(&p, "newest", "custom", |nc| nc.spec.ami_family = Some("Custom".into())).await;
    nc.status.as_mut().unwrap().amis = amis;
    // An amd64 NodeClaim: the newer amd64 image, not the newest image.
    let made = launch(&p, &nc, "newest-a").await;
    assert_eq!(made.iter().map(|d| d.image_id().unwrap()).collect::<Vec<_>>(), ["ami-456"]);
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2648
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2649
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2732
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2742
#[tokio::test]
async fn public_ips_and_detailed_monitoring_follow_the_nodeclass() {
    let moto = Moto::start();
    let p = moto.provider("pubmon").await;
    lab(&p, "pubmon").await;
    let monitored = |d: &ResponseLaunchTemplateData| d.monitoring().and_then(|m| m.enabled());
    let made = launch(&p, &resolved(&p, lab_nodeclass("pubmon")).await, "default-a").await;
    assert_eq!(monitored(&made[0]), Some(false), "off unless asked for");
    for (public, monitor) in [(true, true), (false, false)] {
        let nc = lab_with(&p, "pubmon", &format!("public-{public}"), |nc| {
            nc.spec.associate_public_ip_address = Some(public);
            nc.spec.detailed_monitoring = Some(monitor);
        })
        .await;
        let made = launch(&p, &nc, &format!("public-{public}-a")).await;
        assert_eq!(made.len(), 1);
        assert_eq!(made[0].network_interfaces()[0].associate_public_ip_address(), Some(public));
        assert_eq!(monitored(&made[0]), Some(monitor));
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2343
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2344
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2345
#[tokio::test]
async fn kubelet_fields_tenon_does_not_interpret_reach_al2023_nodes_as_written() {
    let moto = Moto::start();
    let p = moto.provider("pass").await;
    lab(&p, "pass").await;
    for (field, value) in [
        ("topologyManagerPolicy", serde_json::json!("best-effort")),
        ("serializeImagePulls", serde_json::json!(false)),
        ("containerLogMaxSize", serde_json::json!("50Mi")),
    ] {
        let kubelet: tenon_api::ec2nodeclass::KubeletConfiguration =
            serde_json::from_value(serde_json::json!({ field: value.clone() })).unwrap();
        let nc = lab_with(&p, "pass", &field.to_lowercase(), |nc| nc.spec.kubelet = Some(kubelet)).await;
        let made = launch(&p, &nc, &format!("{}-a", field.to_lowercase())).await;
        assert!(!made.is_empty());
        for d in &made {
            let config = generated_config(&user_data(d))["spec"]["kubelet"]["config"].clone();
            let config: serde_json::Value = serde_json::to_value(config).unwrap();
            assert_eq!(config[field], value, "{field}: {config}");
        }
    }
}

// ----- Connection tracking and the NodeClass' own interfaces -----

/// The lab's NodeClass named `name` with `spec` fields (JSON) added, resolved.
async fn lab_with_spec(p: &AwsProvider, cluster: &str, name: &str, spec: serde_json::Value) -> EC2NodeClass {
    let mut v = serde_json::to_value(lab_nodeclass(cluster)).unwrap();
    v["metadata"]["name"] = name.into();
    for (k, f) in spec.as_object().unwrap() {
        v["spec"][k] = f.clone();
    }
    let problems = tenon_api::validation::validate_ec2nodeclass(&serde_json::from_value(v.clone()).unwrap());
    assert!(problems.iter().all(|p| p.severity != tenon_api::validation::Severity::Error), "{problems:?}");
    resolved(p, serde_json::from_value(v).unwrap()).await
}

/// An interface's connection tracking timeouts (TCP established, UDP stream, UDP).
fn tracking(
    ni: &aws_sdk_ec2::types::LaunchTemplateInstanceNetworkInterfaceSpecification,
) -> Option<(Option<i32>, Option<i32>, Option<i32>)> {
    ni.connection_tracking_specification()
        .map(|c| (c.tcp_established_timeout(), c.udp_stream_timeout(), c.udp_timeout()))
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2898
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2910
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2933
#[tokio::test]
async fn connection_tracking_timeouts_go_on_every_interface() {
    let moto = Moto::start();
    let p = moto.provider("ctrk").await;
    lab(&p, "ctrk").await;
    for (name, ct, want) in [
        (
            "aws-defaults",
            serde_json::json!({"tcpEstablishedTimeout": 432000, "udpStreamTimeout": 180, "udpTimeout": 30}),
            (Some(432000), Some(180), Some(30)),
        ),
        ("tcp-only", serde_json::json!({"tcpEstablishedTimeout": 86400}), (Some(86400), None, None)),
    ] {
        let nc = lab_with_spec(&p, "ctrk", name, serde_json::json!({"connectionTracking": ct})).await;
        let made = launch(&p, &nc, &format!("{name}-a")).await;
        assert_eq!(made.len(), 1, "{name}");
        assert_eq!(tracking(&made[0].network_interfaces()[0]), Some(want), "{name}");
    }
    // Every EFA interface too.
    let ct = serde_json::json!({"tcpEstablishedTimeout": 86400, "udpStreamTimeout": 120, "udpTimeout": 45});
    let nc = lab_with_spec(&p, "ctrk", "efa", serde_json::json!({"connectionTracking": ct})).await;
    let made = launch_requesting(&p, &nc, "efa-a", vec![option("p4d.24xlarge", "us-east-1a", "amd64")], &[EFA]).await;
    let nis = made[0].network_interfaces();
    assert!(nis.len() > 1);
    for ni in nis {
        assert_eq!(ni.interface_type(), Some("efa"));
        assert_eq!(tracking(ni), Some((Some(86400), Some(120), Some(45))));
    }
}

fn four_interfaces() -> serde_json::Value {
    serde_json::json!([
        {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
        {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"},
        {"networkCardIndex": 1, "deviceIndex": 0, "interfaceType": "efa-only"},
        {"networkCardIndex": 1, "deviceIndex": 1, "interfaceType": "interface"},
    ])
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:3002
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:3003
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2950
#[tokio::test]
async fn the_nodeclass_interfaces_are_the_templates_efa_or_not() {
    let moto = Moto::start();
    let p = moto.provider("nis").await;
    lab(&p, "nis").await;
    let ct = serde_json::json!({"tcpEstablishedTimeout": 86400, "udpStreamTimeout": 120, "udpTimeout": 45});
    for (i, requested) in [&[][..], &[EFA][..]].into_iter().enumerate() {
        let nc = lab_with_spec(
            &p,
            "nis",
            &format!("nis-{i}"),
            serde_json::json!({"networkInterfaces": four_interfaces(), "connectionTracking": ct}),
        )
        .await;
        let made = launch_requesting(
            &p,
            &nc,
            &format!("nis-{i}"),
            vec![option("p4d.24xlarge", "us-east-1a", "amd64")],
            requested,
        )
        .await;
        let nis = made[0].network_interfaces();
        let got: Vec<(Option<i32>, Option<i32>, Option<&str>)> =
            nis.iter().map(|n| (n.network_card_index(), n.device_index(), n.interface_type())).collect();
        assert_eq!(
            got,
            [
                (Some(0), Some(0), Some("interface")),
                (Some(0), Some(1), Some("efa-only")),
                (Some(1), Some(0), Some("efa-only")),
                (Some(1), Some(1), Some("interface"))
            ],
            "{requested:?}"
        );
        // Connection tracking on every interface but the EFA-only ones.
        for ni in nis {
            let want = (ni.interface_type() != Some("efa-only")).then_some((Some(86400), Some(120), Some(45)));
            assert_eq!(tracking(ni), want, "{ni:?}");
        }
    }
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:3010
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:3035
#[tokio::test]
async fn efa_only_interfaces_get_no_addresses() {
    let moto = Moto::start();
    let mut p = moto.provider("efao").await;
    lab(&p, "efao").await;
    let three = serde_json::json!([
        {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
        {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"},
        {"networkCardIndex": 1, "deviceIndex": 1, "interfaceType": "interface"},
    ]);
    let nc = lab_with_spec(&p, "efao", "v4", serde_json::json!({"networkInterfaces": three, "ipPrefixCount": 2})).await;
    let made = launch(&p, &nc, "v4-a").await;
    let prefixes: Vec<(Option<&str>, Option<i32>)> =
        made[0].network_interfaces().iter().map(|n| (n.interface_type(), n.ipv4_prefix_count())).collect();
    assert_eq!(prefixes, [(Some("interface"), Some(2)), (Some("efa-only"), None), (Some("interface"), Some(2))]);
    // In an IPv6 cluster, the ENA interfaces get the IPv6 address, the EFA-only one none.
    p.launch.cluster_dns = Some("fd4b:121b:812b::a".parse().unwrap());
    let two = serde_json::json!([
        {"networkCardIndex": 0, "deviceIndex": 0, "interfaceType": "interface"},
        {"networkCardIndex": 0, "deviceIndex": 1, "interfaceType": "efa-only"},
    ]);
    let nc = lab_with_spec(&p, "efao", "v6", serde_json::json!({"networkInterfaces": two})).await;
    let made = launch(&p, &nc, "v6-a").await;
    let v6: Vec<(Option<&str>, Option<bool>, Option<i32>)> = made[0]
        .network_interfaces()
        .iter()
        .map(|n| (n.interface_type(), n.primary_ipv6(), n.ipv6_address_count()))
        .collect();
    assert_eq!(v6, [(Some("interface"), Some(true), Some(1)), (Some("efa-only"), None, None)]);
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1488
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1489
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1490
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1491
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1492
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:1493
#[tokio::test]
async fn labels_in_restricted_domains_stay_out_of_the_launch_templates() {
    let moto = Moto::start();
    let p = moto.provider("rdl").await;
    lab(&p, "rdl").await;
    let nc = resolved(&p, lab_nodeclass("rdl")).await;
    let restricted = [
        "node-restriction.kubernetes.io/bar",
        "kubernetes.io/bar",
        "k8s.io/bar",
        "foo.node-restriction.kubernetes.io/bar",
        "foo.kubernetes.io/bar",
        "foo.k8s.io/bar",
    ];
    for (i, label) in restricted.into_iter().enumerate() {
        let mut req = request(&format!("rdl-{i}"), &nc, vec![option("m5.large", "us-east-1a", "amd64")]);
        req.labels.insert(label.into(), "foobar".into());
        // A label of each case's own: every launch writes a template of its own.
        let own = format!("example.com/case-{i}");
        req.labels.insert(own.clone(), "yes".into());
        let made = templates_made_by(&p, async {
            p.create(&req).await.unwrap();
        })
        .await;
        assert!(!made.is_empty(), "{label}: a launch template written");
        for d in &made {
            let ud = user_data(d);
            assert!(!ud.contains(label), "{label} in the user data: {ud}");
            assert!(ud.contains(&own) && ud.contains("capacity.example.io/pool"), "other labels stay: {ud}");
        }
    }
}
