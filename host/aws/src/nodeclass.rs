//! EC2NodeClass resolution: selector terms → subnets, security groups and AMIs, as Karpenter
//! resolves them, and the status conditions that say what matched and what did not.
//!
//! Terms are ORed; within a term every field must match (tags are ANDed, a tag value `*`
//! means "has the key"). Each term is one Describe call with the term's filters.

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
    pub(crate) fn ok(condition: &'static str) -> Self {
        Check { condition, ok: true, reason: condition.to_string(), message: String::new() }
    }
    pub(crate) fn failed(condition: &'static str, reason: &str, message: String) -> Self {
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

/// An AMI the alias points at, by SSM parameter: the path and the requirements of the
/// instance types it serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AliasPath {
    pub path: String,
    pub requirements: Vec<AmiRequirement>,
}

fn req(key: &str, operator: &str, values: &[&str]) -> AmiRequirement {
    AmiRequirement {
        key: key.into(),
        operator: operator.into(),
        values: values.iter().map(|v| v.to_string()).collect(),
    }
}

/// The SSM parameters behind an alias (`al2023@latest`, `bottlerocket@v1.20.4`, `al2@v20240807`),
/// following the EKS optimized-AMI and Bottlerocket parameter layouts.
pub fn alias_paths(family: &str, version: &str, k8s: &str) -> Result<Vec<AliasPath>, String> {
    let arch_req = |arch: &str| req(wk::LABEL_ARCH, "In", &[arch]);
    let no_gpu = || req(wk::LABEL_INSTANCE_GPU_COUNT, "DoesNotExist", &[]);
    let gpu = || req(wk::LABEL_INSTANCE_GPU_COUNT, "Exists", &[]);
    let latest = version == "latest";
    Ok(match family {
        "al2023" => [
            ("x86_64", "amd64", "standard"),
            ("arm64", "arm64", "standard"),
            ("x86_64", "amd64", "nvidia"),
            ("arm64", "arm64", "nvidia"),
        ]
        .into_iter()
        .map(|(ssm_arch, arch, variant)| {
            let name = if latest {
                "recommended".to_string()
            } else {
                format!("amazon-eks-node-al2023-{ssm_arch}-{variant}-{k8s}-{version}")
            };
            AliasPath {
                path: format!(
                    "/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/{ssm_arch}/{variant}/{name}/image_id"
                ),
                requirements: vec![arch_req(arch), if variant == "nvidia" { gpu() } else { no_gpu() }],
            }
        })
        .collect(),
        "al2" => [("", "amd64", false), ("-arm64", "arm64", false), ("-gpu", "amd64", true)]
            .into_iter()
            .map(|(suffix, arch, is_gpu)| {
                let name =
                    if latest { "recommended".to_string() } else { format!("amazon-eks{suffix}-node-{k8s}-{version}") };
                AliasPath {
                    path: format!("/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2{suffix}/{name}/image_id"),
                    requirements: vec![arch_req(arch), if is_gpu { gpu() } else { no_gpu() }],
                }
            })
            .collect(),
        "bottlerocket" => {
            // Bottlerocket versions are written with a leading v on GitHub, without in SSM.
            let v = version.trim_start_matches('v');
            [
                ("", "x86_64", "amd64", false),
                ("", "arm64", "arm64", false),
                ("-nvidia", "x86_64", "amd64", true),
                ("-nvidia", "arm64", "arm64", true),
            ]
            .into_iter()
            .map(|(variant, ssm_arch, arch, is_gpu)| AliasPath {
                path: format!("/aws/service/bottlerocket/aws-k8s-{k8s}{variant}/{ssm_arch}/{v}/image_id"),
                requirements: vec![arch_req(arch), if is_gpu { gpu() } else { no_gpu() }],
            })
            .collect()
        }
        other => {
            return Err(format!(
                "AMI alias family {other:?} is not supported by Tenon's EC2 provider (use al2023, al2 or bottlerocket, or select AMIs by id, name or tags)"
            ));
        }
    })
}

pub(crate) async fn amis(
    clients: &crate::Clients,
    nc: &EC2NodeClass,
    k8s_version: &str,
) -> Result<(Vec<Ami>, Check), CloudError> {
    let mut known: BTreeMap<String, Vec<AmiRequirement>> = BTreeMap::new();
    let mut queries: Vec<(Vec<Filter>, Vec<String>)> = Vec::new();
    let mut ssm_misses = Vec::new();
    for term in &nc.spec.ami_selector_terms {
        if let Some(alias) = &term.alias {
            let (family, version) = alias.split_once('@').unwrap_or((alias.as_str(), "latest"));
            let paths = alias_paths(family, version, k8s_version).map_err(|m| CloudError::NodeClassNotReady {
                nodeclass: nc.metadata.name.clone().unwrap_or_default(),
                message: m,
            })?;
            for p in paths {
                match ssm_parameter(&clients.ssm, &p.path).await? {
                    Some(id) => {
                        known.insert(id, p.requirements);
                    }
                    None => ssm_misses.push(p.path),
                }
            }
            continue;
        }
        if let Some(param) = &term.ssm_parameter {
            match ssm_parameter(&clients.ssm, param).await? {
                Some(id) => queries.push((vec![Filter::builder().name("image-id").values(id).build()], vec![])),
                None => ssm_misses.push(param.clone()),
            }
            continue;
        }
        let mut filters = term.tags.as_ref().map(tag_filters).unwrap_or_default();
        if let Some(id) = &term.id {
            filters.push(Filter::builder().name("image-id").values(id).build());
        }
        if let Some(name) = &term.name {
            filters.push(Filter::builder().name("name").values(name).build());
        }
        // Owners go in the request's Owners list (account ids, `self`, `amazon`…). A name
        // alone could match anyone's public image: Karpenter limits it to the account's own
        // and Amazon's.
        let owners = match &term.owner {
            Some(o) => vec![o.clone()],
            None if term.name.is_some() && term.id.is_none() => vec!["self".to_string(), "amazon".to_string()],
            None => vec![],
        };
        queries.push((filters, owners));
    }
    if !known.is_empty() {
        queries.push((
            vec![Filter::builder().name("image-id").set_values(Some(known.keys().cloned().collect())).build()],
            vec![],
        ));
    }
    let mut found: BTreeMap<String, (Ami, String)> = BTreeMap::new();
    for (filters, owners) in queries {
        let owners = (!owners.is_empty()).then_some(owners);
        let mut pages = clients
            .ec2
            .describe_images()
            .set_filters(Some(filters))
            .set_owners(owners)
            .include_deprecated(true)
            .into_paginator()
            .send();
        while let Some(page) = pages.next().await {
            let page = page.map_err(|e| api("DescribeImages", e))?;
            for img in page.images() {
                let Some(id) = img.image_id() else { continue };
                let requirements = known.get(id).cloned().unwrap_or_else(|| {
                    let arch = match img.architecture().map(|a| a.as_str()) {
                        Some("arm64") => wk::ARCH_ARM64,
                        _ => wk::ARCH_AMD64,
                    };
                    vec![req(wk::LABEL_ARCH, "In", &[arch])]
                });
                let deprecated = img
                    .deprecation_time()
                    .and_then(|t| {
                        aws_smithy_types::DateTime::from_str(t, aws_smithy_types::date_time::Format::DateTime).ok()
                    })
                    .is_some_and(|t| t.secs() <= crate::now_secs());
                let ami = Ami { id: id.into(), deprecated, name: img.name().map(str::to_string), requirements };
                found.insert(id.into(), (ami, img.creation_date().unwrap_or("").to_string()));
            }
        }
    }
    // Newest first, non-deprecated before deprecated: the first AMI whose requirements an
    // instance type meets is the one it launches with.
    let mut list: Vec<(Ami, String)> = found.into_values().collect();
    list.sort_by(|a, b| a.0.deprecated.cmp(&b.0.deprecated).then(b.1.cmp(&a.1)).then(a.0.id.cmp(&b.0.id)));
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
    Ok((list.into_iter().map(|(a, _)| a).collect(), check))
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
