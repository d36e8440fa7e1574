//! (Long: the Resolution and its status, then one resolver per selector kind: subnets, security groups, AMIs by alias, SSM or tags.)
//! EC2NodeClass resolution: selector terms → subnets, security groups and AMIs, as Karpenter
//! resolves them, and the status conditions that say what matched and what did not.
//!
//! Terms are ORed; within a term every field must match (tags are ANDed, a tag value `*`
//! means "has the key"). Each subnet and security group term is one Describe call with the
//! term's filters; AMI terms are Karpenter's DescribeImages queries ([`describe_image_queries`]),
//! and the images they find are narrowed to one per set of instance types ([`select_amis`]).

use crate::error::{api, code};
use aws_sdk_ec2::types::Filter;
use std::collections::BTreeMap;
use tenon_api::ec2nodeclass::{Ami, AmiRequirement, SecurityGroup, SelectorTags, Subnet};
use tenon_api::wellknown as wk;
use tenon_api::wellknown::condition;
use tenon_api::{EC2NodeClass, EC2NodeClassStatus};
use tenon_core::cloud::CloudError;

/// The outcome of one status check: a condition type, whether it holds, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Check {
    pub condition: &'static str,
    pub ok: bool,
    pub reason: String,
    pub message: String,
}

impl Check {
    pub fn ok(condition: &'static str) -> Self {
        Check { condition, ok: true, reason: condition.to_string(), message: String::new() }
    }
    pub fn failed(condition: &'static str, reason: &str, message: String) -> Self {
        Check { condition, ok: false, reason: reason.to_string(), message }
    }
}

/// What the selectors resolved to, and the checks for the status conditions.
#[derive(Clone, Debug, Default)]
pub struct Resolution {
    pub subnets: Vec<Subnet>,
    pub security_groups: Vec<SecurityGroup>,
    pub amis: Vec<Ami>,
    pub instance_profile: Option<String>,
    pub checks: Vec<Check>,
}

impl Resolution {
    /// The status to write: resolved lists plus the conditions, each with its transition time
    /// kept when its status did not change, and `Ready` summarising the others.
    pub fn status(
        &self,
        old: Option<&EC2NodeClassStatus>,
        generation: Option<i64>,
        now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
    ) -> EC2NodeClassStatus {
        let mut checks = self.checks.clone();
        let failed: Vec<&Check> = checks.iter().filter(|c| !c.ok).collect();
        let ready = match failed.first() {
            None => Check::ok(condition::READY),
            Some(_) => Check::failed(
                condition::READY,
                "NotReady",
                failed.iter().map(|c| format!("{}: {}", c.condition, c.message)).collect::<Vec<_>>().join("; "),
            ),
        };
        checks.push(ready);
        let old_conditions = old.map(|s| s.conditions.as_slice()).unwrap_or(&[]);
        let conditions =
            checks.iter().map(|c| crate::conditions::condition(old_conditions, c, generation, now)).collect();
        EC2NodeClassStatus {
            subnets: self.subnets.clone(),
            security_groups: self.security_groups.clone(),
            capacity_reservations: old.map(|s| s.capacity_reservations.clone()).unwrap_or_default(),
            amis: self.amis.clone(),
            instance_profile: self.instance_profile.clone(),
            conditions,
        }
    }
}

/// The EC2 filters of one tag selector.
fn tag_filters(tags: &SelectorTags) -> Vec<Filter> {
    tags.iter()
        .map(|(k, v)| match v.as_str() {
            "*" => Filter::builder().name("tag-key").values(k).build(),
            _ => Filter::builder().name(format!("tag:{k}")).values(v).build(),
        })
        .collect()
}

fn describe_terms(terms: impl Iterator<Item = String>) -> String {
    terms.collect::<Vec<_>>().join(" or ")
}

fn tags_text(tags: &SelectorTags) -> String {
    format!("tags {}", tags.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(","))
}

pub(crate) async fn subnets(ec2: &aws_sdk_ec2::Client, nc: &EC2NodeClass) -> Result<(Vec<Subnet>, Check), CloudError> {
    let mut found: BTreeMap<String, (Subnet, i32)> = BTreeMap::new();
    for term in &nc.spec.subnet_selector_terms {
        let mut filters = term.tags.as_ref().map(tag_filters).unwrap_or_default();
        if let Some(id) = &term.id {
            filters.push(Filter::builder().name("subnet-id").values(id).build());
        }
        let mut pages = ec2.describe_subnets().set_filters(Some(filters)).into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| api("DescribeSubnets", e))?;
            for s in page.subnets() {
                let (Some(id), Some(zone)) = (s.subnet_id(), s.availability_zone()) else { continue };
                let subnet =
                    Subnet { id: id.into(), zone: zone.into(), zone_id: s.availability_zone_id().map(str::to_string) };
                found.insert(id.to_string(), (subnet, s.available_ip_address_count().unwrap_or(0)));
            }
        }
    }
    // Karpenter's order: most free addresses first, so the first subnet per zone is the one
    // a launch should use.
    let mut list: Vec<(Subnet, i32)> = found.into_values().collect();
    list.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.id.cmp(&b.0.id)));
    let check = if list.is_empty() {
        let terms = describe_terms(nc.spec.subnet_selector_terms.iter().map(|t| match (&t.tags, &t.id) {
            (_, Some(id)) => format!("id {id}"),
            (Some(tags), None) => tags_text(tags),
            (None, None) => "an empty term".into(),
        }));
        Check::failed(
            condition::SUBNETS_READY,
            "SubnetsNotFound",
            format!(
                "no subnet matches spec.subnetSelectorTerms ({terms}); tag the cluster's private subnets with those tags (for example karpenter.sh/discovery=<cluster>) or select them by id"
            ),
        )
    } else {
        Check::ok(condition::SUBNETS_READY)
    };
    Ok((list.into_iter().map(|(s, _)| s).collect(), check))
}

pub(crate) async fn security_groups(
    ec2: &aws_sdk_ec2::Client,
    nc: &EC2NodeClass,
) -> Result<(Vec<SecurityGroup>, Check), CloudError> {
    let mut found: BTreeMap<String, SecurityGroup> = BTreeMap::new();
    for term in &nc.spec.security_group_selector_terms {
        let mut filters = term.tags.as_ref().map(tag_filters).unwrap_or_default();
        if let Some(id) = &term.id {
            filters.push(Filter::builder().name("group-id").values(id).build());
        }
        if let Some(name) = &term.name {
            filters.push(Filter::builder().name("group-name").values(name).build());
        }
        let mut pages = ec2.describe_security_groups().set_filters(Some(filters)).into_paginator().send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| api("DescribeSecurityGroups", e))?;
            for g in page.security_groups() {
                if let Some(id) = g.group_id() {
                    found.insert(id.into(), SecurityGroup { id: id.into(), name: g.group_name().map(str::to_string) });
                }
            }
        }
    }
    let check = if found.is_empty() {
        let terms =
            describe_terms(nc.spec.security_group_selector_terms.iter().map(|t| match (&t.tags, &t.id, &t.name) {
                (_, Some(id), _) => format!("id {id}"),
                (_, _, Some(name)) => format!("name {name}"),
                (Some(tags), _, _) => tags_text(tags),
                _ => "an empty term".into(),
            }));
        Check::failed(
            condition::SECURITY_GROUPS_READY,
            "SecurityGroupsNotFound",
            format!(
                "no security group matches spec.securityGroupSelectorTerms ({terms}); tag the cluster's node security group with those tags or select it by id or name"
            ),
        )
    } else {
        Check::ok(condition::SECURITY_GROUPS_READY)
    };
    Ok((found.into_values().collect(), check))
}

/// An SSM parameter behind an alias, and the sets of requirements (besides the architecture,
/// which the image says) of the instance types its AMI serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AliasPath {
    pub path: String,
    pub serves: Vec<Vec<AmiRequirement>>,
}

fn req(key: &str, operator: &str, values: &[&str]) -> AmiRequirement {
    AmiRequirement {
        key: key.into(),
        operator: operator.into(),
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

/// The instance types an EKS-optimized AMI variant serves: `standard` has neither GPUs nor
/// accelerators, `nvidia` has GPUs, `neuron` accelerators.
fn variant(name: &str) -> Vec<AmiRequirement> {
    match name {
        "nvidia" => vec![req(wk::LABEL_INSTANCE_GPU_COUNT, "Exists", &[])],
        "neuron" => vec![req(wk::LABEL_INSTANCE_ACCELERATOR_COUNT, "Exists", &[])],
        _ => vec![
            req(wk::LABEL_INSTANCE_ACCELERATOR_COUNT, "DoesNotExist", &[]),
            req(wk::LABEL_INSTANCE_GPU_COUNT, "DoesNotExist", &[]),
        ],
    }
}

/// A term Tenon (or EKS) cannot resolve at this Kubernetes version.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AliasError {
    #[error("{0}")]
    Unsupported(String),
    #[error(
        "AMI alias family {0:?} is not known (use al2023, bottlerocket, al2, windows2019, windows2022 or windows2025, or select AMIs by id, name, tags or SSM parameter)"
    )]
    Family(String),
}

/// The minor of a Kubernetes `MAJOR.MINOR[.PATCH]` version, when it reads as one.
fn minor(k8s: &str) -> Option<u32> {
    k8s.split('.').nth(1)?.parse().ok()
}

/// The SSM parameters behind an alias (`al2023@latest`, `bottlerocket@v1.20.4`, `al2@v20240807`,
/// `windows2022@latest`) at Kubernetes version `k8s`, following the EKS optimized-AMI,
/// Bottlerocket and Windows parameter layouts.
pub fn alias_paths(family: &str, version: &str, k8s: &str) -> Result<Vec<AliasPath>, AliasError> {
    let latest = version == "latest";
    let minor = minor(k8s);
    Ok(match family {
        "al2023" => [
            ("x86_64", "standard"),
            ("x86_64", "nvidia"),
            ("x86_64", "neuron"),
            ("arm64", "standard"),
            ("arm64", "nvidia"),
        ]
        .into_iter()
        .map(|(arch, v)| {
            let name = if latest {
                "recommended".to_string()
            } else {
                format!("amazon-eks-node-al2023-{arch}-{v}-{k8s}-{version}")
            };
            AliasPath {
                path: format!("/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{arch}/{v}/{name}/image_id"),
                serves: vec![variant(v)],
            }
        })
        .collect(),
        "al2" => {
            if minor.is_some_and(|m| m >= 33) {
                return Err(AliasError::Unsupported(format!(
                    "AL2 aliases are no longer supported on EKS 1.33+ (Kubernetes {k8s}): EKS publishes no AL2 AMIs for it; use al2023@ or bottlerocket@"
                )));
            }
            [("", vec!["standard"]), ("-arm64", vec!["standard"]), ("-gpu", vec!["neuron", "nvidia"])]
                .into_iter()
                .map(|(suffix, variants)| {
                    let name = if latest {
                        "recommended".to_string()
                    } else {
                        format!("amazon-eks{suffix}-node-{k8s}-{version}")
                    };
                    AliasPath {
                        path: format!("/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2{suffix}/{name}/image_id"),
                        serves: variants.into_iter().map(variant).collect(),
                    }
                })
                .collect()
        }
        "bottlerocket" => {
            // Bottlerocket versions are written with a leading v on GitHub, without in SSM.
            let v = version.trim_start_matches('v');
            [
                ("", "x86_64", vec!["standard", "neuron"]),
                ("", "arm64", vec!["standard"]),
                ("-nvidia", "x86_64", vec!["nvidia"]),
                ("-nvidia", "arm64", vec!["nvidia"]),
            ]
            .into_iter()
            .map(|(flavour, arch, variants)| AliasPath {
                path: format!("/aws/service/bottlerocket/aws-k8s-{k8s}{flavour}/{arch}/{v}/image_id"),
                serves: variants.into_iter().map(variant).collect(),
            })
            .collect()
        }
        "windows2019" | "windows2022" | "windows2025" => {
            let (year, build) = match family {
                "windows2019" => ("2019", "10.0.17763"),
                "windows2022" => ("2022", "10.0.20348"),
                _ => ("2025", "10.0.26100"),
            };
            if year == "2025" && minor.is_some_and(|m| m < 35) {
                return Err(AliasError::Unsupported(format!(
                    "Windows Server 2025 requires EKS version 1.35 or higher, current version: {k8s}"
                )));
            }
            vec![AliasPath {
                path: format!(
                    "/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{k8s}/image_id"
                ),
                serves: vec![vec![req(wk::LABEL_OS, "In", &["windows"]), req(wk::LABEL_WINDOWS_BUILD, "In", &[build])]],
            }]
        }
        other => return Err(AliasError::Family(other.to_string())),
    })
}

/// The SSM parameters the NodeClass' AMI terms read: an alias' paths, or each `ssmParameter`.
pub fn ssm_parameters(nc: &EC2NodeClass, k8s: &str) -> Result<Vec<String>, AliasError> {
    if let Some(alias) = nc.alias() {
        return Ok(alias_paths(&alias.family, &alias.version, k8s)?.into_iter().map(|p| p.path).collect());
    }
    Ok(nc.spec.ami_selector_terms.iter().filter_map(|t| t.ssm_parameter.clone()).collect())
}

/// One DescribeImages call: its filters and owners, and for images found by id through an
/// alias, the sets of requirements each serves.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageQuery {
    /// (filter name, values).
    pub filters: Vec<(String, Vec<String>)>,
    pub owners: Vec<String>,
    pub known: BTreeMap<String, Vec<Vec<AmiRequirement>>>,
}

impl ImageQuery {
    /// The request's filters: the query's, and only images that are available.
    pub fn request_filters(&self) -> Vec<Filter> {
        self.filters
            .iter()
            .map(|(n, v)| Filter::builder().name(n).set_values(Some(v.clone())).build())
            .chain([Filter::builder().name("state").values("available").build()])
            .collect()
    }
}

/// Karpenter's DescribeImages queries for the NodeClass' AMI terms, given the SSM parameters
/// that exist (`ssm`: name → value). An alias is one query by the ids its parameters hold;
/// ids (and the values of `ssmParameter` terms that are AMI ids) share one `image-id`
/// query; every other term is a query of its own. A name without an owner looks at the
/// account's own and Amazon's images only, never anyone's public ones.
pub fn describe_image_queries(
    nc: &EC2NodeClass,
    k8s: &str,
    ssm: &BTreeMap<String, String>,
) -> Result<Vec<ImageQuery>, AliasError> {
    if let Some(alias) = nc.alias() {
        let mut known: BTreeMap<String, Vec<Vec<AmiRequirement>>> = BTreeMap::new();
        for p in alias_paths(&alias.family, &alias.version, k8s)? {
            if let Some(id) = ssm.get(&p.path) {
                known.entry(id.clone()).or_default().extend(p.serves);
            }
        }
        if known.is_empty() {
            return Ok(vec![]);
        }
        let ids = known.keys().cloned().collect();
        return Ok(vec![ImageQuery { filters: vec![("image-id".into(), ids)], owners: vec![], known }]);
    }
    let mut ids = Vec::new();
    let mut queries = Vec::new();
    for term in &nc.spec.ami_selector_terms {
        if let Some(id) = &term.id {
            ids.push(id.clone());
            continue;
        }
        if let Some(param) = &term.ssm_parameter {
            if let Some(id) = ssm.get(param).filter(|v| v.starts_with("ami-")) {
                ids.push(id.clone());
            }
            continue;
        }
        let mut q = ImageQuery::default();
        if let Some(name) = &term.name {
            q.filters.push(("name".into(), vec![name.clone()]));
        }
        for (k, v) in term.tags.iter().flatten() {
            q.filters.push(match v.as_str() {
                "*" => ("tag-key".into(), vec![k.clone()]),
                _ => (format!("tag:{k}"), vec![v.clone()]),
            });
        }
        q.owners = match (&term.owner, &term.name) {
            (Some(o), _) => vec![o.clone()],
            (None, Some(_)) => vec!["self".into(), "amazon".into()],
            (None, None) => vec![],
        };
        queries.push(q);
    }
    if !ids.is_empty() {
        queries.push(ImageQuery { filters: vec![("image-id".into(), ids)], ..Default::default() });
    }
    Ok(queries)
}

/// An image as DescribeImages reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Image {
    pub id: String,
    pub name: Option<String>,
    /// EC2's architecture name (`x86_64`, `arm64`).
    pub architecture: String,
    /// RFC 3339.
    pub creation_date: Option<String>,
    /// RFC 3339.
    pub deprecation_time: Option<String>,
}

/// Seconds since the epoch of an RFC 3339 time.
fn epoch(t: &str) -> Option<i64> {
    aws_smithy_types::DateTime::from_str(t, aws_smithy_types::date_time::Format::DateTime).ok().map(|t| t.secs())
}

/// An AMI candidate: the image and whether it is deprecated now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub ami: Ami,
    pub creation_date: Option<String>,
}

/// Karpenter's order of AMIs: newest first (no creation date last), then by id.
pub fn sort_candidates(c: &mut [Candidate]) {
    let created = |c: &Candidate| c.creation_date.as_deref().and_then(epoch).unwrap_or(i64::MIN);
    c.sort_by(|a, b| created(b).cmp(&created(a)).then_with(|| a.ami.id.cmp(&b.ami.id)));
}

/// Which of two images serving the same instance types is kept: a non-deprecated one over a
/// deprecated one, then the newer, then the name that sorts last.
fn better(a: &Candidate, b: &Candidate) -> bool {
    let created = |c: &Candidate| c.creation_date.as_deref().and_then(epoch).unwrap_or(i64::MIN);
    (!a.ami.deprecated, created(a), &a.ami.name) > (!b.ami.deprecated, created(b), &b.ami.name)
}

/// Requirements in status order (shorter keys first, then by key), so equal sets compare equal.
fn canonical(mut reqs: Vec<AmiRequirement>) -> Vec<AmiRequirement> {
    for r in &mut reqs {
        r.values.sort();
    }
    reqs.sort_by(|a, b| a.key.len().cmp(&b.key.len()).then_with(|| a.key.cmp(&b.key)));
    reqs
}

/// The AMIs a NodeClass launches with, from the images each query found (`found`: query
/// index, image), at `now` (seconds): one per set of requirements, the best image for it
/// ([`better`]), sorted as Karpenter sorts them. An image an alias found serves each of its
/// requirement sets; any other serves its architecture. Images of other architectures are
/// left out.
pub fn select_amis(queries: &[ImageQuery], found: &[(usize, Image)], now: i64) -> Vec<Ami> {
    type Key = Vec<(String, String, Vec<String>)>;
    let mut best: BTreeMap<Key, Candidate> = BTreeMap::new();
    for (q, img) in found {
        let arch = match img.architecture.as_str() {
            "x86_64" => wk::ARCH_AMD64,
            "arm64" => wk::ARCH_ARM64,
            _ => continue,
        };
        let sets = queries.get(*q).and_then(|q| q.known.get(&img.id)).cloned().unwrap_or_else(|| vec![vec![]]);
        for mut reqs in sets {
            reqs.push(req(wk::LABEL_ARCH, "In", &[arch]));
            let reqs = canonical(reqs);
            let key: Key = reqs.iter().map(|r| (r.key.clone(), r.operator.clone(), r.values.clone())).collect();
            let deprecated = img.deprecation_time.as_deref().and_then(epoch).is_some_and(|t| t <= now);
            let c = Candidate {
                ami: Ami { id: img.id.clone(), deprecated, name: img.name.clone(), requirements: reqs },
                creation_date: img.creation_date.clone(),
            };
            if best.get(&key).is_none_or(|old| better(&c, old)) {
                best.insert(key, c);
            }
        }
    }
    let mut list: Vec<Candidate> = best.into_values().collect();
    sort_candidates(&mut list);
    list.into_iter().map(|c| c.ami).collect()
}

pub(crate) async fn amis(
    clients: &crate::Clients,
    nc: &EC2NodeClass,
    k8s_version: &str,
) -> Result<(Vec<Ami>, Check), CloudError> {
    let unsupported = |e: AliasError| Check::failed(condition::AMIS_READY, "UnsupportedAlias", e.to_string());
    let params = match ssm_parameters(nc, k8s_version) {
        Ok(p) => p,
        Err(e) => return Ok((vec![], unsupported(e))),
    };
    let mut ssm = BTreeMap::new();
    let mut ssm_misses = Vec::new();
    for name in params {
        match ssm_parameter(&clients.ssm, &name).await? {
            Some(v) => {
                ssm.insert(name, v);
            }
            None => ssm_misses.push(name),
        }
    }
    let queries = match describe_image_queries(nc, k8s_version, &ssm) {
        Ok(q) => q,
        Err(e) => return Ok((vec![], unsupported(e))),
    };
    let mut found = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let owners = (!q.owners.is_empty()).then(|| q.owners.clone());
        let mut pages = clients
            .ec2
            .describe_images()
            .set_filters(Some(q.request_filters()))
            .set_owners(owners)
            .include_deprecated(true)
            .max_results(1000)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| api("DescribeImages", e))?;
            for img in page.images() {
                let Some(id) = img.image_id() else { continue };
                found.push((
                    i,
                    Image {
                        id: id.into(),
                        name: img.name().map(str::to_string),
                        architecture: img.architecture().map(|a| a.as_str().to_string()).unwrap_or_default(),
                        creation_date: img.creation_date().map(str::to_string),
                        deprecation_time: img.deprecation_time().map(str::to_string),
                    },
                ));
            }
        }
    }
    let list = select_amis(&queries, &found, crate::now_secs());
    let check = if list.is_empty() {
        let mut message = "no AMI matches spec.amiSelectorTerms".to_string();
        if !ssm_misses.is_empty() {
            message.push_str(&format!(" (SSM parameters not found: {})", ssm_misses.join(", ")));
        }
        message.push_str("; check the alias version, the AMI id/name/owner, or the AMI's tags");
        Check::failed(condition::AMIS_READY, "AMINotFound", message)
    } else {
        Check::ok(condition::AMIS_READY)
    };
    Ok((list, check))
}

/// Tenon renders user data for AL2023 and Bottlerocket (and launches Custom families with the
/// user's own): a NodeClass of another family resolves, as Karpenter's does, but is not valid
/// for Tenon to launch from.
pub fn family_check(nc: &EC2NodeClass) -> Check {
    let family = nc.ami_family();
    let alias = nc.alias().map(|a| a.family).unwrap_or_default();
    let windows = family.starts_with("Windows") || (family != "Custom" && alias.starts_with("windows"));
    let why = if family == "AL2" {
        "Amazon Linux 2 is at end of life on EKS, and Tenon renders no user data for it"
    } else if windows {
        "Tenon launches Linux nodes only"
    } else {
        return Check::ok(condition::VALIDATION_SUCCEEDED);
    };
    let family = if windows && !family.starts_with("Windows") { alias } else { family };
    Check::failed(
        condition::VALIDATION_SUCCEEDED,
        "UnsupportedAMIFamily",
        format!(
            "AMI family {family} is not launched by Tenon ({why}); use an al2023@ or bottlerocket@ alias, or amiFamily: Custom with your own user data"
        ),
    )
}

/// An SSM parameter's value; `None` when it does not exist.
async fn ssm_parameter(ssm: &aws_sdk_ssm::Client, name: &str) -> Result<Option<String>, CloudError> {
    match ssm.get_parameter().name(name).send().await {
        Ok(out) => Ok(out.parameter().and_then(|p| p.value()).map(str::to_string)),
        Err(e) if code(&e).as_deref() == Some("ParameterNotFound") => Ok(None),
        Err(e) => Err(api("GetParameter", e)),
    }
}

/// Does an instance with these labels meet an AMI's requirements?
pub fn ami_serves(ami: &Ami, labels: &BTreeMap<String, String>) -> bool {
    ami.requirements.iter().all(|r| {
        let v = labels.get(&r.key);
        match r.operator.as_str() {
            "In" => v.is_some_and(|v| r.values.contains(v)),
            "NotIn" => v.is_none_or(|v| !r.values.contains(v)),
            "Exists" => v.is_some(),
            "DoesNotExist" => v.is_none(),
            "Gt" => v
                .and_then(|v| v.parse::<i64>().ok())
                .zip(r.values.first().and_then(|x| x.parse::<i64>().ok()))
                .is_some_and(|(a, b)| a > b),
            "Lt" => v
                .and_then(|v| v.parse::<i64>().ok())
                .zip(r.values.first().and_then(|x| x.parse::<i64>().ok()))
                .is_some_and(|(a, b)| a < b),
            _ => false,
        }
    })
}
