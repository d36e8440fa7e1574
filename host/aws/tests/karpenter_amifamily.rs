//! (Long: tests only, one per ported Karpenter AMI-family case; setup in support/.)
//! The AWS provider's `pkg/providers/amifamily/suite_test.go`, ported: how AMI selector terms
//! resolve to the AMIs a NodeClass launches with. The query building and the choice among
//! images are pure (`tenon_aws::nodeclass`), since moto refuses the EKS parameters under
//! `/aws/service`; what moto can hold (images, tags, custom SSM parameters) runs against it.
//! Each test names the cases it accounts for (tests/conformance/karpenter.tsv).

use crate::support;

use support::Moto;
use support::lab::*;
use tenon_api::EC2NodeClass;

/// A NodeClass over the lab's subnets and groups with these AMI terms (flow YAML list) and
/// family (none: inferred from an alias).
fn with_terms(cluster: &str, name: &str, terms: &str, family: Option<&str>) -> EC2NodeClass {
    let family = family.map(|f| format!("  amiFamily: {f}\n")).unwrap_or_default();
    nodeclass(&format!(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: {name}}}\nspec:\n  role: KarpenterNodeRole-{cluster}\n{family}  amiSelectorTerms: {terms}\n  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: {cluster}}}}}]\n"
    ))
}

#[tokio::test]
async fn al2_is_refused_from_kubernetes_1_33_and_al2_and_windows_nodeclasses_never_launch() {
    let moto = Moto::start();
    let p = moto.provider("al2").await;
    lab(&p, "al2").await;
    // Kubernetes 1.33 (the lab's): EKS publishes no AL2 AMIs, and the alias says why.
    let nc = resolved(&p, with_terms("al2", "al2-alias", "[{alias: al2@latest}]", None)).await;
    let c = condition(&nc, "AMIsReady");
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "UnsupportedAlias"), "{c:?}");
    assert!(c.message.contains("1.33"), "{}", c.message);
    // AMIs Tenon can find but renders no user data for: the NodeClass is not valid for Tenon.
    for family in ["AL2", "Windows2019", "Windows2022"] {
        let name = family.to_lowercase();
        let terms = format!("[{{tags: {{{DISCOVERY}: al2}}}}]");
        let nc = resolved(&p, with_terms("al2", &name, &terms, Some(family))).await;
        assert_eq!(condition(&nc, "AMIsReady").status, "True", "{family}");
        let v = condition(&nc, "ValidationSucceeded");
        assert_eq!((v.status.as_str(), v.reason.as_str()), ("False", "UnsupportedAMIFamily"), "{family}: {v:?}");
        assert!(v.message.contains(family) && v.message.contains("al2023"), "{family}: {}", v.message);
        assert_eq!(condition(&nc, "Ready").status, "False", "{family}");
    }
    let nc = resolved(&p, lab_nodeclass("al2")).await;
    assert_eq!(condition(&nc, "ValidationSucceeded").status, "True");
    assert_eq!(condition(&nc, "Ready").status, "True");
}

// ----- Queries and the choice among images (pure) -----

use std::collections::BTreeMap;
use tenon_api::ec2nodeclass::{Ami, AmiRequirement};
use tenon_aws::nodeclass::{
    AliasError, Candidate, Image, ImageQuery, alias_paths, describe_image_queries, select_amis, sort_candidates,
};

/// A NodeClass with these AMI terms (flow YAML list), read as the API would; not validated, so
/// families the API does not know yet can be asked about.
fn terms(terms: &str) -> EC2NodeClass {
    serde_yaml::from_str(&format!(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: test}}\nspec:\n  role: r\n  amiSelectorTerms: {terms}\n  subnetSelectorTerms: [{{tags: {{a: b}}}}]\n  securityGroupSelectorTerms: [{{tags: {{a: b}}}}]\n"
    ))
    .unwrap()
}

/// The SSM parameters that exist: (path, value).
fn ssm(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The images DescribeImages returns for Karpenter's four mock AMIs, found by query 0.
fn mock_images(ids: &[&str]) -> Vec<(usize, Image)> {
    let all = [
        ("ami-id-amd64", "x86_64", "0001-01-01T00:00:00Z"),
        ("ami-id-arm64", "arm64", "0001-01-01T00:01:00Z"),
        ("ami-id-amd64-nvidia", "x86_64", "0001-01-01T00:02:00Z"),
        ("ami-id-arm64-nvidia", "arm64", "0001-01-01T00:02:00Z"),
    ];
    all.iter()
        .filter(|(id, _, _)| ids.contains(id))
        .map(|(id, arch, created)| {
            let img = Image {
                id: id.to_string(),
                name: Some(id.to_string()),
                architecture: arch.to_string(),
                creation_date: Some(created.to_string()),
                deprecation_time: None,
            };
            (0, img)
        })
        .collect()
}

/// The AMIs an alias resolves to when these SSM parameters exist and DescribeImages returns
/// the mock images they name.
fn resolve_alias(alias: &str, k8s: &str, params: &[(&str, &str)]) -> Vec<Ami> {
    let nc = terms(&format!("[{{alias: \"{alias}\"}}]"));
    let params = ssm(params);
    let queries = describe_image_queries(&nc, k8s, &params).unwrap();
    let ids: Vec<&str> = params.values().map(String::as_str).collect();
    select_amis(&queries, &mock_images(&ids), NOW)
}

const NOW: i64 = 1_795_996_800;

/// The AMIs as (id, requirements written `key op values`), order kept.
fn described(amis: &[Ami]) -> Vec<(String, Vec<String>)> {
    amis.iter()
        .map(|a| {
            let reqs =
                a.requirements.iter().map(|r| format!("{} {} {}", r.key, r.operator, r.values.join(","))).collect();
            (a.id.clone(), reqs)
        })
        .collect()
}

fn sorted(mut v: Vec<(String, Vec<String>)>) -> Vec<(String, Vec<String>)> {
    v.sort();
    v
}

const ARCH: &str = "kubernetes.io/arch In";
const NO_ACCEL: &str = "karpenter.k8s.aws/instance-accelerator-count DoesNotExist ";
const NO_GPU: &str = "karpenter.k8s.aws/instance-gpu-count DoesNotExist ";
const GPU: &str = "karpenter.k8s.aws/instance-gpu-count Exists ";
const ACCEL: &str = "karpenter.k8s.aws/instance-accelerator-count Exists ";

fn set(arch: &str, variant: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = variant.iter().map(|s| s.to_string()).collect();
    v.push(format!("{ARCH} {arch}"));
    v.sort_by(|a, b| {
        let key = |s: &str| s.split(' ').next().unwrap().to_string();
        key(a).len().cmp(&key(b).len()).then(key(a).cmp(&key(b)))
    });
    v
}

fn eks(k8s: &str, path: &str) -> String {
    format!("/aws/service/eks/optimized-ami/{k8s}/{path}/image_id")
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:181
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:182
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:183
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:184
#[test]
fn al2_aliases_end_at_kubernetes_1_33() {
    for (k8s, alias, ok) in [
        ("1.33.0", "al2@latest", false),
        ("1.34.2", "al2@latest", false),
        ("1.32.0", "al2@latest", true),
        ("1.33.0", "al2023@latest", true),
    ] {
        let nc = terms(&format!("[{{alias: {alias}}}]"));
        // Every parameter the alias could read exists: only the version decides.
        let params: BTreeMap<String, String> = ["al2", "al2023"]
            .iter()
            .filter_map(|f| alias_paths(f, "latest", k8s).ok())
            .flatten()
            .map(|p| (p.path, "ami-id-amd64".to_string()))
            .collect();
        match describe_image_queries(&nc, k8s, &params) {
            Ok(q) => assert!(ok && !q.is_empty(), "{alias} on {k8s}: {q:?}"),
            Err(e) => {
                assert!(!ok, "{alias} on {k8s}: {e}");
                assert!(matches!(&e, AliasError::Unsupported(m) if m.contains("1.33")), "{e}");
            }
        }
    }
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:187
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:348
#[test]
fn an_al2_alias_serves_standard_types_and_its_gpu_ami_both_gpu_kinds() {
    let k = "1.32";
    let amis = resolve_alias(
        "al2@latest",
        k,
        &[
            (&eks(k, "amazon-linux-2/recommended"), "ami-id-amd64"),
            (&eks(k, "amazon-linux-2-gpu/recommended"), "ami-id-amd64-nvidia"),
            (&eks(k, "amazon-linux-2-arm64/recommended"), "ami-id-arm64"),
        ],
    );
    assert_eq!(
        sorted(described(&amis)),
        sorted(vec![
            ("ami-id-amd64".into(), set("amd64", &[NO_ACCEL, NO_GPU])),
            ("ami-id-arm64".into(), set("arm64", &[NO_ACCEL, NO_GPU])),
            ("ami-id-amd64-nvidia".into(), set("amd64", &[ACCEL])),
            ("ami-id-amd64-nvidia".into(), set("amd64", &[GPU])),
        ])
    );
    // Without the GPU parameter, the two standard AMIs.
    let partial = resolve_alias(
        "al2@latest",
        k,
        &[
            (&eks(k, "amazon-linux-2/recommended"), "ami-id-amd64"),
            (&eks(k, "amazon-linux-2-arm64/recommended"), "ami-id-arm64"),
        ],
    );
    assert_eq!(partial.len(), 2, "{partial:?}");
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:201
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:363
#[test]
fn an_al2023_alias_resolves_the_variants_that_exist() {
    let k = "1.33";
    let amis = resolve_alias(
        "al2023@latest",
        k,
        &[
            (&eks(k, "amazon-linux-2023/x86_64/standard/recommended"), "ami-id-amd64"),
            (&eks(k, "amazon-linux-2023/arm64/standard/recommended"), "ami-id-arm64"),
        ],
    );
    assert_eq!(
        sorted(described(&amis)),
        sorted(vec![
            ("ami-id-amd64".into(), set("amd64", &[NO_ACCEL, NO_GPU])),
            ("ami-id-arm64".into(), set("arm64", &[NO_ACCEL, NO_GPU])),
        ])
    );
    let only_x86 = resolve_alias(
        "al2023@latest",
        k,
        &[(&eks(k, "amazon-linux-2023/x86_64/standard/recommended"), "ami-id-amd64")],
    );
    assert_eq!(described(&only_x86), [("ami-id-amd64".to_string(), set("amd64", &[NO_ACCEL, NO_GPU]))]);
    // The x86 Neuron variant is an alias path too.
    let paths: Vec<String> = alias_paths("al2023", "latest", k).unwrap().into_iter().map(|p| p.path).collect();
    assert!(paths.contains(&eks(k, "amazon-linux-2023/x86_64/neuron/recommended")), "{paths:?}");
}

fn bottlerocket(k8s: &str, flavour: &str, arch: &str) -> String {
    format!("/aws/service/bottlerocket/aws-k8s-{k8s}{flavour}/{arch}/latest/image_id")
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:211
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:372
#[test]
fn a_bottlerocket_alias_serves_neuron_types_with_its_x86_standard_ami() {
    let k = "1.33";
    let params = [
        (bottlerocket(k, "", "x86_64"), "ami-id-amd64"),
        (bottlerocket(k, "-nvidia", "x86_64"), "ami-id-amd64-nvidia"),
        (bottlerocket(k, "", "arm64"), "ami-id-arm64"),
        (bottlerocket(k, "-nvidia", "arm64"), "ami-id-arm64-nvidia"),
    ];
    let refs: Vec<(&str, &str)> = params.iter().map(|(p, v)| (p.as_str(), *v)).collect();
    let amis = resolve_alias("bottlerocket@latest", k, &refs);
    assert_eq!(
        sorted(described(&amis)),
        sorted(vec![
            ("ami-id-amd64".into(), set("amd64", &[NO_ACCEL, NO_GPU])),
            ("ami-id-amd64".into(), set("amd64", &[ACCEL])),
            ("ami-id-arm64".into(), set("arm64", &[NO_ACCEL, NO_GPU])),
            ("ami-id-amd64-nvidia".into(), set("amd64", &[GPU])),
            ("ami-id-arm64-nvidia".into(), set("arm64", &[GPU])),
        ])
    );
    // No arm64 NVIDIA parameter: four.
    assert_eq!(resolve_alias("bottlerocket@latest", k, &refs[..3]).len(), 4);
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:223
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:232
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:241
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:256
#[test]
fn windows_aliases_resolve_the_eks_optimized_core_ami() {
    for (family, year, build, k8s) in [
        ("windows2019", "2019", "10.0.17763", "1.33"),
        ("windows2022", "2022", "10.0.20348", "1.33"),
        ("windows2025", "2025", "10.0.26100", "1.35"),
    ] {
        let path =
            format!("/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id");
        let amis = resolve_alias(&format!("{family}@latest"), k8s, &[(&path, "ami-id-amd64")]);
        let windows = vec![
            "kubernetes.io/os In windows".to_string(),
            format!("{ARCH} amd64"),
            format!("node.kubernetes.io/windows-build In {build}"),
        ];
        assert_eq!(described(&amis), [("ami-id-amd64".to_string(), windows)], "{family}");
    }
    // Windows Server 2025 needs EKS 1.35.
    let nc = terms("[{alias: windows2025@latest}]");
    let err = describe_image_queries(&nc, "1.34.0", &BTreeMap::new()).unwrap_err();
    assert!(err.to_string().contains("Windows Server 2025 requires EKS version 1.35 or higher"), "{err}");
}

/// Two amd64 images a tag term found, as (id, name, created, deprecation time).
fn pick(images: &[(&str, &str, &str, Option<&str>)]) -> Vec<Ami> {
    let found: Vec<(usize, Image)> = images
        .iter()
        .map(|(id, name, created, deprecated)| {
            let img = Image {
                id: id.to_string(),
                name: Some(name.to_string()),
                architecture: "x86_64".into(),
                creation_date: Some(created.to_string()),
                deprecation_time: deprecated.map(str::to_string),
            };
            (0, img)
        })
        .collect();
    select_amis(&[ImageQuery::default()], &found, NOW)
}

/// An RFC 3339 time `delta` seconds from [`NOW`].
fn at(delta: i64) -> String {
    aws_smithy_types::DateTime::from_secs(NOW + delta).fmt(aws_smithy_types::date_time::Format::DateTime).unwrap()
}

fn amd64() -> Vec<AmiRequirement> {
    vec![AmiRequirement { key: "kubernetes.io/arch".into(), operator: "In".into(), values: vec!["amd64".into()] }]
}

fn ami(id: &str, name: &str, deprecated: bool) -> Ami {
    Ami { id: id.into(), deprecated, name: Some(name.into()), requirements: amd64() }
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:437
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:479
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:523
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:567
#[test]
fn of_images_serving_the_same_types_a_live_one_wins_then_the_newest() {
    let (hour_ago, ten_ago, in_ten) = (at(-3600), at(-600), at(600));
    // An older image that is not deprecated beats a newer deprecated one.
    let amis = pick(&[
        ("ami-5678", "amd64-ami", "2021-08-31T00:12:42.000Z", Some(&hour_ago)),
        ("ami-1234", "amd64-ami", "2020-08-31T00:08:42.000Z", None),
    ]);
    assert_eq!(amis, [ami("ami-1234", "amd64-ami", false)]);
    // Same creation time: the one whose deprecation is still ahead.
    let amis = pick(&[
        ("ami-5678", "amd64-ami", "2021-08-31T00:12:42.000Z", Some(&ten_ago)),
        ("ami-1234", "amd64-ami", "2021-08-31T00:12:42.000Z", Some(&in_ten)),
    ]);
    assert_eq!(amis, [ami("ami-1234", "amd64-ami", false)]);
    // … whatever the names.
    let amis = pick(&[
        ("ami-5678", "test-ami-2", "2021-08-31T00:12:42.000Z", Some(&ten_ago)),
        ("ami-1234", "test-ami-1", "2021-08-31T00:12:42.000Z", Some(&in_ten)),
    ]);
    assert_eq!(amis, [ami("ami-1234", "test-ami-1", false)]);
    // Both deprecated: the newer.
    let amis = pick(&[
        ("ami-5678", "amd64-ami", "2021-08-31T00:12:42.000Z", Some(&hour_ago)),
        ("ami-1234", "amd64-ami", "2020-08-31T00:08:42.000Z", Some(&hour_ago)),
    ]);
    assert_eq!(amis, [ami("ami-5678", "amd64-ami", true)]);
}

/// The queries of these terms, order and filter values not mattering (as Karpenter compares).
fn queries(terms_yaml: &str) -> Vec<ImageQuery> {
    let mut q = describe_image_queries(&terms(terms_yaml), "1.33", &BTreeMap::new()).unwrap();
    for x in &mut q {
        x.filters.iter_mut().for_each(|(_, v)| v.sort());
        x.filters.sort();
        x.owners.sort();
    }
    q.sort_by_key(|x| format!("{x:?}"));
    q
}

fn query(filters: &[(&str, &[&str])], owners: &[&str]) -> ImageQuery {
    ImageQuery {
        filters: filters.iter().map(|(n, v)| (n.to_string(), v.iter().map(|s| s.to_string()).collect())).collect(),
        owners: owners.iter().map(|s| s.to_string()).collect(),
        known: BTreeMap::new(),
    }
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:827
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:850
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:874
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:899
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:922
#[test]
fn each_term_is_a_query_with_karpenters_owners() {
    // Tags only: anyone's images the account tagged (tags are the account's own).
    assert_eq!(queries("[{tags: {Name: my-ami}}]"), [query(&[("tag:Name", &["my-ami"])], &[])]);
    // A name alone: the account's own and Amazon's images, never anyone's public ones.
    assert_eq!(queries("[{name: my-ami}]"), [query(&[("name", &["my-ami"])], &["amazon", "self"])]);
    // Ids: one query for all of them, no owners.
    assert_eq!(
        queries("[{id: ami-abcd1234}, {id: ami-cafeaced}]"),
        [query(&[("image-id", &["ami-abcd1234", "ami-cafeaced"])], &[])]
    );
    // Owners only: one query each.
    assert_eq!(
        queries("[{owner: abcdef}, {owner: \"123456789012\"}]"),
        [query(&[], &["123456789012"]), query(&[], &["abcdef"])]
    );
    // A name with an owner: that owner only.
    assert_eq!(
        queries("[{name: my-name, owner: \"0123456789\"}, {name: my-name, owner: self}]"),
        [query(&[("name", &["my-name"])], &["0123456789"]), query(&[("name", &["my-name"])], &["self"])]
    );
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2460
#[tokio::test]
async fn id_terms_are_one_request_for_available_images_and_each_image_launches() {
    let moto = Moto::start();
    let setup = moto.provider("ids").await;
    let lab = lab(&setup, "ids").await;
    // The DescribeImages call as it reaches EC2: both ids in one image-id filter, and only
    // available images.
    let filters = format!(
        "Filter.1.Name=image-id&Filter.1.Value.1={}&Filter.1.Value.2={}&Filter.2.Name=state&Filter.2.Value.1=available",
        lab.ami_amd64, lab.ami_arm64
    );
    let proxy = tenon_fault_proxy::slow_matching(&moto.url, &filters, std::time::Duration::ZERO).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(proxy.url.clone());
    let p = tenon_aws::AwsProvider::connect(&conn, setup.settings.clone()).await.unwrap();
    let terms = format!("[{{id: {}}}, {{id: {}}}]", lab.ami_amd64, lab.ami_arm64);
    let nc = resolved(&p, with_terms("ids", "ids", &terms, Some("AL2023"))).await;
    assert_eq!(proxy.seen.load(std::sync::atomic::Ordering::SeqCst), 1, "one DescribeImages call with those filters");
    let options = vec![option("m5.large", "us-east-1a", "amd64"), option("m6g.large", "us-east-1a", "arm64")];
    let made = templates_made_by(&p, async {
        tenon_core::cloud::CloudProvider::create(&p, &request("ids-a", &nc, options)).await.unwrap();
    })
    .await;
    let mut images: Vec<String> = made.iter().filter_map(|d| d.image_id().map(String::from)).collect();
    images.sort();
    let mut both = vec![lab.ami_amd64.clone(), lab.ami_arm64.clone()];
    both.sort();
    assert_eq!(images, both, "a launch template for each image");
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1140
#[test]
fn an_ssm_parameter_term_selects_the_image_it_names() {
    let path = "/aws/service/eks/optimized-ami/1.33/amazon-linux-2/recommended/image_id";
    let nc = terms(&format!("[{{ssmParameter: \"{path}\"}}]"));
    assert_eq!(tenon_aws::nodeclass::ssm_parameters(&nc, "1.33").unwrap(), [path]);
    let q = describe_image_queries(&nc, "1.33", &ssm(&[(path, "ami-id-amd64")])).unwrap();
    assert_eq!(q, [query(&[("image-id", &["ami-id-amd64"])], &[])]);
    let amis = select_amis(&q, &mock_images(&["ami-id-amd64"]), NOW);
    assert_eq!(described(&amis), [("ami-id-amd64".to_string(), vec![format!("{ARCH} amd64")])]);
    assert_eq!(amis[0].name.as_deref(), Some("ami-id-amd64"));
    // A value that is no AMI id selects nothing.
    assert!(describe_image_queries(&nc, "1.33", &ssm(&[(path, "not-an-ami")])).unwrap().is_empty());
}

fn candidate(name: &str, id: &str, created: &str, deprecated: bool) -> Candidate {
    Candidate {
        ami: Ami { id: id.into(), deprecated, name: Some(name.into()), requirements: vec![] },
        creation_date: (!created.is_empty()).then(|| created.to_string()),
    }
}

fn ids(c: &[Candidate]) -> Vec<&str> {
    c.iter().map(|c| c.ami.id.as_str()).collect()
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:959
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1016
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1074
#[test]
fn amis_sort_newest_first_then_by_id() {
    let mut c = vec![
        candidate("test-ami-1", "test-ami-1-id", "2021-08-31T00:10:42.000Z", false),
        candidate("test-ami-2", "test-ami-2-id", "2021-08-31T00:12:42.000Z", false),
        candidate("test-ami-3", "test-ami-3-id", "2021-08-31T00:08:42.000Z", false),
        candidate("test-ami-4", "test-ami-4-id", "", false),
    ];
    sort_candidates(&mut c);
    assert_eq!(ids(&c), ["test-ami-2-id", "test-ami-1-id", "test-ami-3-id", "test-ami-4-id"]);
    for deprecated in [false, true] {
        let mut c: Vec<Candidate> = (1..=4)
            .rev()
            .map(|i| candidate("test-ami-1", &format!("test-ami-{i}-id"), "2021-08-31T00:10:42.000Z", deprecated))
            .collect();
        sort_candidates(&mut c);
        assert_eq!(ids(&c), ["test-ami-1-id", "test-ami-2-id", "test-ami-3-id", "test-ami-4-id"], "{deprecated}");
        assert!(c.iter().all(|c| c.ami.deprecated == deprecated));
    }
}

// ----- Against moto -----

async fn tag_image(p: &tenon_aws::AwsProvider, id: &str, tags: &[(&str, &str)]) {
    let mut req = p.clients.ec2.create_tags().resources(id);
    for (k, v) in tags {
        req = req.tags(tag(k, v));
    }
    req.send().await.unwrap();
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:408
#[tokio::test]
async fn image_tags_select_images_but_never_become_requirements() {
    let moto = Moto::start();
    let p = moto.provider("itag").await;
    let lab = lab(&p, "itag").await;
    tag_image(
        &p,
        &lab.ami_amd64,
        &[
            ("foo", "bar"),
            ("node.kubernetes.io/instance-type", "m5.large"),
            ("topology.kubernetes.io/zone", "us-east-1a"),
        ],
    )
    .await;
    let nc = resolved(&p, with_terms("itag", "tagged", "[{tags: {foo: bar}}]", Some("AL2023"))).await;
    let amis = &nc.status.as_ref().unwrap().amis;
    assert_eq!(amis.len(), 1, "{amis:?}");
    assert_eq!(amis[0].id, lab.ami_amd64);
    assert_eq!(described(amis), [(lab.ami_amd64.clone(), vec![format!("{ARCH} amd64")])]);
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:732
#[tokio::test]
async fn tags_within_a_term_are_anded_and_terms_ored() {
    let moto = Moto::start();
    let p = moto.provider("andor").await;
    let lab = lab(&p, "andor").await;
    tag_image(&p, &lab.ami_amd64, &[("tag-key-1", "tag-value-1"), ("tag-key-2", "tag-value-2")]).await;
    tag_image(&p, &lab.ami_arm64, &[("tag-key-2", "tag-value-2")]).await;
    let ids = |nc: &EC2NodeClass| {
        let mut v: Vec<String> = nc.status.as_ref().unwrap().amis.iter().map(|a| a.id.clone()).collect();
        v.sort();
        v
    };
    let and = resolved(
        &p,
        with_terms("andor", "and", "[{tags: {tag-key-1: tag-value-1, tag-key-2: tag-value-2}}]", Some("AL2023")),
    )
    .await;
    assert_eq!(ids(&and), std::slice::from_ref(&lab.ami_amd64));
    let or = resolved(
        &p,
        with_terms(
            "andor",
            "or",
            "[{tags: {tag-key-1: tag-value-1}}, {tags: {tag-key-2: tag-value-2}}]",
            Some("AL2023"),
        ),
    )
    .await;
    let mut both = vec![lab.ami_amd64.clone(), lab.ami_arm64.clone()];
    both.sort();
    assert_eq!(ids(&or), both);
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1153
/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1167
#[tokio::test]
async fn a_custom_ssm_parameter_names_the_ami_and_a_missing_one_selects_none() {
    let moto = Moto::start();
    let p = moto.provider("ssmp").await;
    let lab = lab(&p, "ssmp").await;
    let name = "/my/custom/ami/parameter";
    p.clients
        .ssm
        .put_parameter()
        .name(name)
        .value(&lab.ami_amd64)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .unwrap();
    let nc =
        resolved(&p, with_terms("ssmp", "custom", &format!("[{{ssmParameter: \"{name}\"}}]"), Some("AL2023"))).await;
    let amis = &nc.status.as_ref().unwrap().amis;
    assert_eq!(amis.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(), [lab.ami_amd64.as_str()]);
    assert_eq!(amis[0].name.as_deref(), Some("ssmp-al2023-x86_64-v20251101"));
    // A parameter that does not exist is no error: no AMIs, and the condition names it.
    let missing = "/my/missing/parameter";
    let nc = resolved(&p, with_terms("ssmp", "missing", &format!("[{{ssmParameter: \"{missing}\"}}]"), Some("AL2023")))
        .await;
    assert!(nc.status.as_ref().unwrap().amis.is_empty());
    let c = condition(&nc, "AMIsReady");
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "AMINotFound"));
    assert!(c.message.contains(missing), "{}", c.message);
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1176
#[tokio::test]
async fn an_ssm_failure_other_than_not_found_fails_the_resolution() {
    let moto = Moto::start();
    let p = moto.provider("ssme").await;
    lab(&p, "ssme").await;
    let proxy = tenon_fault_proxy::throttle_matching(&moto.url, 100, "AmazonSSM.GetParameter").await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(proxy.url.clone());
    let throttled =
        tenon_aws::AwsProvider::connect(&conn, p.settings.clone()).await.expect("the connection names its region");
    let nc = with_terms("ssme", "custom", "[{ssmParameter: \"/my/custom/ami/parameter\"}]", Some("AL2023"));
    match throttled.resolve(&nc).await {
        Err(tenon_core::cloud::CloudError::Api { operation, .. }) => assert_eq!(operation, "GetParameter"),
        other => panic!("expected the GetParameter failure, got {other:?}"),
    }
    assert!(proxy.seen.load(std::sync::atomic::Ordering::SeqCst) >= 1);
}

/// karpenter-provider-aws:pkg/providers/amifamily/suite_test.go:1240
#[test]
fn a_kubelet_block_that_cannot_be_read_leaves_no_nodeclass_to_launch_from() {
    // clusterDNS is a list: a bare string cannot be read, and no defaults stand in for it.
    let doc = serde_json::json!({
        "apiVersion": "karpenter.k8s.aws/v1",
        "kind": "EC2NodeClass",
        "metadata": {"name": "test"},
        "spec": {
            "role": "r",
            "amiSelectorTerms": [{"alias": "al2023@latest"}],
            "subnetSelectorTerms": [{"tags": {"a": "b"}}],
            "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
            "kubelet": {"clusterDNS": "10.0.0.10"},
        },
    });
    let decoded = tenon_api::decode::decode_and_validate(doc.clone());
    assert!(decoded.object.is_none(), "a NodeClass was read from it");
    assert!(decoded.problems.iter().any(|p| p.path.starts_with("spec.kubelet")), "{:?}", decoded.problems);
    assert!(serde_json::from_value::<EC2NodeClass>(doc).is_err(), "the controller cannot read it either");
}
