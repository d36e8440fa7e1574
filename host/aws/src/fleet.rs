//! (Long: one launch end to end: placements, templates, the batched call and its answer.)
//! Launching a NodeClaim: one `instant` CreateFleet request whose overrides are the options
//! `tenon_core::orchestration::launch` chose (one capacity type, at most 60 types, best
//! first), with priorities in that order: a scoring policy's ranking is launched with the
//! prioritized strategies, so it is what EC2 honours; without one, with Karpenter's
//! lowest-price (on demand) and price-capacity-optimized (spot). Overrides that fail for
//! capacity are cached unavailable, whether or not another one launched.

use crate::error::launch_error;
pub use crate::fleet_batcher::tag_specifications;
use crate::fleet_batcher::{FleetRequest, Member};
use crate::known_templates;
use crate::launch_template;
use crate::nodeclass::ami_serves;
use crate::tagging;
use crate::{AwsProvider, templates};
use aws_sdk_ec2::types::{
    FleetLaunchTemplateConfigRequest, FleetLaunchTemplateOverridesRequest, FleetLaunchTemplateSpecificationRequest,
    InstanceType,
};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tenon_api::wellknown as wk;
use tenon_core::cloud::{CloudError, Instance, LaunchOption, LaunchRequest, UnavailableOffering};

/// CreateFleet error codes meaning "no capacity for this offering now".
const CAPACITY_ERRORS: &[&str] = &[
    "InsufficientInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "VcpuLimitExceeded",
    "UnfulfillableCapacity",
    "Unsupported",
    SUBNET_FULL,
];

/// A subnet out of free addresses: the offering and the subnet are both left out for a while.
const SUBNET_FULL: &str = "InsufficientFreeAddressesInSubnet";

fn not_ready(req: &LaunchRequest, message: impl Into<String>) -> CloudError {
    CloudError::NodeClassNotReady {
        nodeclass: req.nodeclass.metadata.name.clone().unwrap_or_default(),
        message: message.into(),
    }
}

/// An offering ready to become an override: the option, its subnet and its AMI.
struct Placement<'a> {
    option: &'a LaunchOption,
    subnet: String,
    ami: String,
}

pub(crate) async fn create(
    p: &AwsProvider,
    req: &LaunchRequest,
    requested: &std::collections::BTreeSet<String>,
) -> Result<Instance, CloudError> {
    // An earlier attempt (before a restart, or whose answer was lost) may have launched one.
    if !req.never_launched
        && let Some(existing) = p.find_by_nodeclaim(&req.nodeclaim).await?
    {
        tracing::info!(nodeclaim = %req.nodeclaim, instance = %existing.id, "instance already launched; not launching another");
        return Ok(existing);
    }
    let status = req
        .nodeclass
        .status
        .as_ref()
        .ok_or_else(|| not_ready(req, "its status is not resolved yet (subnets, security groups, AMIs)"))?;
    if status.subnets.is_empty() {
        return Err(not_ready(req, "no subnets resolved (condition SubnetsReady): check spec.subnetSelectorTerms"));
    }
    if status.security_groups.is_empty() {
        return Err(not_ready(req, "no security groups resolved (condition SecurityGroupsReady)"));
    }
    if status.amis.is_empty() {
        return Err(not_ready(req, "no AMIs resolved (condition AMIsReady): check spec.amiSelectorTerms"));
    }
    if status.instance_profile.is_none() {
        return Err(not_ready(
            req,
            "no instance profile (condition InstanceProfileReady): set spec.role or spec.instanceProfile",
        ));
    }
    if req.options.is_empty() {
        return Err(CloudError::InvalidRequest(format!("NodeClaim {} has no instance type options", req.nodeclaim)));
    }
    // Status lists subnets with the most free addresses first: the first per zone is used,
    // unless it just ran out of addresses and the zone has another (Karpenter sorts such a
    // subnet last).
    let now = Instant::now();
    let mut subnet_by_zone: BTreeMap<&str, &str> = BTreeMap::new();
    for s in &status.subnets {
        let chosen = subnet_by_zone.entry(s.zone.as_str()).or_insert(s.id.as_str());
        if p.unavailable.is_subnet_unavailable(chosen, now) && !p.unavailable.is_subnet_unavailable(&s.id, now) {
            *chosen = s.id.as_str();
        }
    }
    let available: Vec<&LaunchOption> = req
        .options
        .iter()
        .filter(|o| !p.unavailable.is_unavailable(&o.instance_type, &o.zone, &o.capacity_type, now))
        .filter(|o| subnet_by_zone.contains_key(o.zone.as_str()))
        .collect();
    let Some(first) = available.first() else {
        let cached = req
            .options
            .iter()
            .filter(|o| p.unavailable.is_unavailable(&o.instance_type, &o.zone, &o.capacity_type, now))
            .count();
        if cached > 0 {
            return Err(CloudError::InsufficientCapacity {
                offerings: vec![],
                message: format!("all {} option(s) recently failed for capacity (cached for 3m)", req.options.len()),
            });
        }
        return Err(not_ready(req, "no resolved subnet is in any zone of the NodeClaim's options"));
    };
    // The request's capacity type: the first option's. `launch::fleet_request` gives options
    // of one; others would go out as overrides of the wrong capacity type, so they are left out.
    let capacity_type = first.capacity_type.clone();
    let mut placements: Vec<Placement> = Vec::new();
    let mut no_ami: Vec<&str> = Vec::new();
    for o in available.into_iter().filter(|o| o.capacity_type == capacity_type) {
        match status.amis.iter().find(|a| ami_serves(a, &o.labels)) {
            Some(ami) => placements.push(Placement {
                option: o,
                subnet: subnet_by_zone[o.zone.as_str()].to_string(),
                ami: ami.id.clone(),
            }),
            None => no_ami.push(&o.instance_type),
        }
    }
    if placements.is_empty() {
        no_ami.dedup();
        return Err(not_ready(
            req,
            format!(
                "no AMI in status.amis serves instance type(s) {} (architecture or GPU requirements)",
                no_ami.join(", ")
            ),
        ));
    }

    let ncname = req.nodeclass.metadata.name.clone().unwrap_or_default();
    // The controller policy lets CreateLaunchTemplate through only with the cluster, EKS
    // cluster-name and NodePool request tags, and DeleteLaunchTemplate only on templates
    // that carry them.
    let mut lt_tags = instance_tags(p, req);
    lt_tags.remove(wk::TAG_NODECLAIM);
    lt_tags.remove("Name");
    lt_tags.insert(crate::TAG_CLUSTER.into(), p.settings.cluster.name.clone());
    lt_tags.insert(crate::TAG_NODECLASS.into(), ncname);
    let launch = templates::Launch {
        nodeclass: &req.nodeclass,
        cluster: &p.settings.cluster,
        settings: &p.launch,
        region: &p.settings.region,
        nodepool: &req.nodepool,
        labels: &req.labels,
        taints: req.taints.iter().chain(&req.startup_taints).cloned().collect(),
        capacity_type: &capacity_type,
        tenancy: &req.tenancy,
        requested,
        tags: &lt_tags,
    };
    let names = placements.iter().map(|pl| pl.option.instance_type.as_str()).collect();
    let capacity = p.capacities(&req.nodeclass, &names).await?;
    let choices: Vec<templates::Choice> = placements
        .iter()
        .map(|pl| {
            let cap = capacity.get(&pl.option.instance_type);
            templates::Choice {
                ami: pl.ami.clone(),
                pods: cap.map(|c| c.pods),
                efa: cap.map_or(0, |c| c.get(wk::RESOURCE_EFA)),
            }
        })
        .collect();
    let mut configs = Vec::new();
    let mut used = Vec::new();
    for (spec, served) in templates::resolve(&launch, &choices)? {
        let lt = launch_template::ensure(&p.clients.ec2, &p.templates, &spec)
            .await
            .map_err(|e| launch_error("Error getting launch template configs", e))?;
        used.push(lt.clone());
        p.metrics.set_userdata_bytes(req.nodeclass.metadata.name.as_deref().unwrap_or_default(), spec.user_data.len());
        let mut cfg = FleetLaunchTemplateConfigRequest::builder().launch_template_specification(
            FleetLaunchTemplateSpecificationRequest::builder().launch_template_name(lt).version("$Latest").build(),
        );
        for (rank, pl) in served.into_iter().filter_map(|i| placements.get(i).map(|pl| (i, pl))) {
            cfg = cfg.overrides(
                FleetLaunchTemplateOverridesRequest::builder()
                    .instance_type(InstanceType::from(pl.option.instance_type.as_str()))
                    .subnet_id(&pl.subnet)
                    .priority(rank as f64)
                    .build(),
            );
        }
        configs.push(cfg.build());
    }
    let tags = instance_tags(p, req);
    // What is the NodeClaim's own (Tenon's Name unless the NodeClass names its instances)
    // is left out of a batch's call and tagged on its instance after.
    let mut shared = tags.clone();
    shared.remove(wk::TAG_NODECLAIM);
    if !req.nodeclass.spec.tags.contains_key("Name") {
        shared.remove("Name");
    }
    let own: BTreeMap<String, String> =
        tags.iter().filter(|(k, _)| !shared.contains_key(*k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    p.fence.check("CreateFleet")?;
    let request = FleetRequest {
        configs,
        spot: capacity_type == wk::CAPACITY_TYPE_SPOT,
        prioritized: req.ranked,
        shared_tags: shared,
        token_seed: token_seed(&p.settings.cluster.name, &placements),
        // Not when minValues were relaxed: the context may be what made them unmeetable.
        context: req.nodeclass.spec.context.clone().filter(|_| !req.min_values_relaxed),
    };
    let member = Member { nodeclaim: req.nodeclaim.clone(), attempt: req.attempt, tags: tags.clone() };
    let share = p.fleets.launch(&p.clients.ec2, &p.fence, request, member).await;
    // A template deleted under us (the call's error or an override's): described (and made)
    // again on the retry.
    let gone = match &share.answer {
        Ok(out) => out.errors().iter().any(|e| e.error_code().is_some_and(known_templates::gone)),
        Err((code, _)) => code.as_deref().is_some_and(known_templates::gone),
    };
    if gone {
        p.templates.forget(&used);
    }
    let out = match share.answer {
        Ok(out) => out,
        Err((_, message)) => {
            let e = CloudError::Api { operation: "CreateFleet".into(), message };
            return Err(launch_error("Error creating fleet request", e));
        }
    };
    // Overrides tried before the ones that launched failed: cached either way (counted once
    // per call, by its first caller).
    let failure = fleet_failure(p, &capacity_type, &placements, out.errors(), share.index == 0);
    let ids: Vec<&String> = out.instances().iter().flat_map(|i| i.instance_ids()).collect();
    let Some(id) = ids.get(share.index).map(|id| id.to_string()) else {
        return Err(failure);
    };
    let mut reported = tags;
    if share.size > 1
        && let Err(e) = tagging::tag_within(&p.clients.ec2, &id, &own, tagging::TAG_INLINE_WITHIN).await
    {
        // The instance is this NodeClaim's whatever its tags say (garbage collection accounts
        // by the providerID the launch reports): failing the launch here left it to garbage
        // collection and launched another, and waiting out EC2's retries let garbage
        // collection's grace pass before the NodeClaim recorded it. Its tags follow later.
        tracing::warn!(nodeclaim = %req.nodeclaim, instance = %id, error = %e, "tagging a launched instance failed; retrying in the background");
        tokio::spawn(tagging::tag_later(p.clients.ec2.clone(), id.clone(), own.clone()));
        reported.retain(|k, _| !own.contains_key(k));
    }
    // As Karpenter does: the answer names the override each instance launched from.
    if let Some(i) = from_answer(&out, &id, &placements, status, &capacity_type, &req.tenancy, reported) {
        return Ok(i);
    }
    // A just-launched instance can take a moment to appear in DescribeInstances.
    for attempt in 0..5 {
        match p.describes.get(&p.clients.ec2, &p.settings.cluster.name, &id).await {
            Ok(i) => return Ok(i),
            Err(CloudError::NotFound(_)) if attempt < 4 => {
                tokio::time::sleep(Duration::from_millis(200 << attempt)).await
            }
            Err(e) => return Err(e),
        }
    }
    Err(CloudError::NotFound(id))
}

/// Instance `id` as CreateFleet's answer describes it: the override it launched from names
/// its type and subnet, hence its zone and (from the placements) its image. None when the
/// answer does not say; the caller then describes it.
fn from_answer(
    out: &aws_sdk_ec2::operation::create_fleet::CreateFleetOutput,
    id: &str,
    placements: &[Placement],
    status: &tenon_api::ec2nodeclass::EC2NodeClassStatus,
    capacity_type: &str,
    tenancy: &str,
    tags: BTreeMap<String, String>,
) -> Option<Instance> {
    let launched = out.instances().iter().find(|i| i.instance_ids().iter().any(|i| i == id))?;
    let ov = launched.launch_template_and_overrides()?.overrides()?;
    let (instance_type, subnet) = (ov.instance_type()?.as_str(), ov.subnet_id()?);
    let pl = placements.iter().find(|pl| pl.option.instance_type == instance_type && pl.subnet == subnet)?;
    let zone = pl.option.zone.clone();
    Some(Instance {
        provider_id: format!("aws:///{zone}/{id}"),
        id: id.to_string(),
        instance_type: instance_type.to_string(),
        zone,
        capacity_type: capacity_type.to_string(),
        image_id: pl.ami.clone(),
        subnet_id: subnet.to_string(),
        security_groups: status.security_groups.iter().map(|g| g.id.clone()).collect(),
        state: tenon_core::cloud::InstanceState::Pending,
        launched_at: Some(crate::now_secs()),
        tags,
        // CreateFleet's answer does not say; the template asked for it.
        tenancy: tenancy.to_string(),
    })
}

/// What CreateFleet's per-override errors mean: the offerings that failed for capacity, and
/// the messages.
#[derive(Clone, Debug, PartialEq)]
pub struct FleetFailure {
    pub offerings: Vec<UnavailableOffering>,
    /// At least one error was a capacity error.
    pub capacity: bool,
    pub message: String,
}

/// Reads CreateFleet's `Errors` (`zone_of` maps the overrides' subnets to zones).
pub fn classify(
    capacity_type: &str,
    zone_of: &BTreeMap<String, String>,
    errors: &[aws_sdk_ec2::types::CreateFleetError],
) -> FleetFailure {
    let mut offerings = Vec::new();
    let mut messages = Vec::new();
    let mut capacity = false;
    for e in errors {
        let code = e.error_code().unwrap_or("Unknown");
        messages.push(format!("{code}: {}", e.error_message().unwrap_or("")));
        if !CAPACITY_ERRORS.contains(&code) {
            continue;
        }
        capacity = true;
        let Some(ov) = e.launch_template_and_overrides().and_then(|l| l.overrides()) else { continue };
        let (Some(t), Some(zone)) = (ov.instance_type(), ov.subnet_id().and_then(|s| zone_of.get(s))) else { continue };
        offerings.push(UnavailableOffering {
            instance_type: t.as_str().to_string(),
            zone: zone.clone(),
            capacity_type: capacity_type.to_string(),
        });
    }
    messages.sort();
    messages.dedup();
    offerings.sort();
    offerings.dedup();
    let message =
        if messages.is_empty() { "no instance launched and no error returned".into() } else { messages.join("; ") };
    FleetFailure { offerings, capacity, message }
}

/// Caches the offerings that failed for capacity and says what went wrong.
fn fleet_failure(
    p: &AwsProvider,
    capacity_type: &str,
    placements: &[Placement],
    errors: &[aws_sdk_ec2::types::CreateFleetError],
    count: bool,
) -> CloudError {
    let zone_of: BTreeMap<String, String> =
        placements.iter().map(|pl| (pl.subnet.clone(), pl.option.zone.clone())).collect();
    // Karpenter counts every offering's error, its reason read from "code: message".
    for e in errors.iter().filter(|_| count) {
        let subnet = e.launch_template_and_overrides().and_then(|l| l.overrides()).and_then(|o| o.subnet_id());
        let zone = subnet.and_then(|s| zone_of.get(s)).map_or("", String::as_str);
        let text = format!("{}: {}", e.error_code().unwrap_or_default(), e.error_message().unwrap_or_default());
        p.metrics.launch_failure(zone, capacity_type, crate::error::reason_for(&text).0);
    }
    let f = classify(capacity_type, &zone_of, errors);
    let now = Instant::now();
    for e in errors.iter().filter(|e| e.error_code() == Some(SUBNET_FULL)) {
        if let Some(subnet) = e.launch_template_and_overrides().and_then(|l| l.overrides()).and_then(|o| o.subnet_id())
        {
            p.unavailable.mark_subnet(subnet, now);
        }
    }
    for o in &f.offerings {
        p.unavailable.mark(o.clone(), now);
    }
    if f.capacity {
        return CloudError::InsufficientCapacity { offerings: f.offerings, message: f.message };
    }
    launch_error("CreateFleet", CloudError::Api { operation: "CreateFleet".into(), message: f.message })
}

/// The tags every instance (and its volumes) carries.
pub(crate) fn instance_tags(p: &AwsProvider, req: &LaunchRequest) -> BTreeMap<String, String> {
    let cluster = &p.settings.cluster.name;
    let mut tags = req.nodeclass.spec.tags.clone();
    for (k, v) in [
        (format!("{}{cluster}", wk::TAG_CLUSTER_PREFIX), "owned".to_string()),
        (wk::TAG_EKS_CLUSTER_NAME.to_string(), cluster.clone()),
        (wk::LABEL_NODEPOOL.to_string(), req.nodepool.clone()),
        (wk::TAG_NODECLAIM.to_string(), req.nodeclaim.clone()),
        (crate::TAG_NODECLASS.to_string(), req.nodeclass.metadata.name.clone().unwrap_or_default()),
    ] {
        tags.insert(k, v);
    }
    // A name the NodeClass gives its instances wins over Tenon's.
    tags.entry("Name".to_string()).or_insert_with(|| format!("{}/{}", req.nodepool, req.nodeclaim));
    tags
}

/// What a launch's client token is made from besides its NodeClaims and attempts: the
/// cluster and the overrides.
fn token_seed(cluster: &str, placements: &[Placement]) -> String {
    let mut seed = cluster.to_string();
    for pl in placements {
        seed.push_str(&format!("|{}|{}|{}", pl.option.instance_type, pl.subnet, pl.ami));
    }
    seed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(attempt: u32) -> LaunchRequest {
        let nodeclass: tenon_api::EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "default"},
            "spec": {"role": "r", "amiSelectorTerms": [{"alias": "al2023@latest"}], "subnetSelectorTerms": [{"id": "subnet-1"}], "securityGroupSelectorTerms": [{"id": "sg-1"}]}
        }))
        .unwrap();
        LaunchRequest {
            nodeclaim: "default-abcde".into(),
            nodepool: "default".into(),
            nodeclass,
            options: vec![],
            attempt,
            never_launched: false,
            ranked: false,
            labels: BTreeMap::new(),
            taints: vec![],
            startup_taints: vec![],
            tenancy: "default".into(),
            min_values_relaxed: false,
        }
    }

    #[test]
    fn the_token_seed_names_the_cluster_and_every_override() {
        let option = LaunchOption {
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: "on-demand".into(),
            price: 0.1,
            labels: Default::default(),
        };
        let placements = [Placement { option: &option, subnet: "subnet-1".into(), ami: "ami-1".into() }];
        assert_eq!(token_seed("lab", &placements), "lab|m5.large|subnet-1|ami-1");
        assert_eq!(request(0).attempt, 0);
    }
}
