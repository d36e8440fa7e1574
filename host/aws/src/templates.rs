//! Which launch templates a launch needs and what each holds, as Karpenter resolves them: the
//! NodeClaim's options are grouped by what differs between templates (the AMI, the max pods
//! the kubelet runs with, the EFA interfaces), and each group gets one template whose user
//! data bootstraps the node with the NodeClaim's labels and taints. Pure: the caller creates
//! the templates.

use crate::catalog::InstanceStore;
use crate::launch_template::{self, IpFamily, LaunchTemplateSpec};
use crate::userdata::{self, ClusterInfo, NodeBootstrap};
use crate::{LaunchSettings, TAG_NODECLASS};
use std::collections::{BTreeMap, BTreeSet};
use tenon_api::EC2NodeClass;
use tenon_api::wellknown as wk;
use tenon_core::cloud::CloudError;
use tenon_core::taints::{Effect, Taint};

/// Everything about one NodeClaim's launch that shapes its templates.
#[derive(Clone, Debug)]
pub struct Launch<'a> {
    /// The EC2NodeClass with its resolved status.
    pub nodeclass: &'a EC2NodeClass,
    pub cluster: &'a ClusterInfo,
    pub settings: &'a LaunchSettings,
    pub region: &'a str,
    pub nodepool: &'a str,
    /// The NodeClaim's labels.
    pub labels: &'a BTreeMap<String, String>,
    /// The NodeClaim's taints, then its startup taints.
    pub taints: Vec<Taint>,
    pub capacity_type: &'a str,
    /// `default` or `dedicated` (the request's).
    pub tenancy: &'a str,
    /// The resources the NodeClaim requests (`spec.resources.requests`), by name.
    pub requested: &'a BTreeSet<String>,
    /// Tags for the templates, and the interfaces and spot requests launched from them.
    pub tags: &'a BTreeMap<String, String>,
}

/// What one option of the NodeClaim needs from its template.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Choice {
    /// The AMI that serves the option's instance type.
    pub ami: String,
    /// The pods the capacity model planned for the type (`None`: a type it does not know;
    /// the node's bootstrap then works the count out itself).
    pub pods: Option<i64>,
    /// The type's EFA interfaces.
    pub efa: i64,
}

/// The resource a NodeClaim requests to run Nitro Enclaves (its template enables them).
pub const RESOURCE_NITRO_SANDBOX: &str = "eks.amazonaws.com/nitro-sandbox";

fn not_ready(nc: &EC2NodeClass, message: impl Into<String>) -> CloudError {
    CloudError::NodeClassNotReady { nodeclass: nc.metadata.name.clone().unwrap_or_default(), message: message.into() }
}

/// `taints` plus `karpenter.sh/unregistered:NoExecute`: nothing schedules on the node until
/// registration has synced the NodeClaim onto it (and removed this taint).
fn with_unregistered(mut taints: Vec<Taint>) -> Vec<Taint> {
    if !taints.iter().any(|t| t.key == wk::TAINT_UNREGISTERED && t.effect == Effect::NoExecute) {
        taints.push(Taint { key: wk::TAINT_UNREGISTERED.into(), value: String::new(), effect: Effect::NoExecute });
    }
    taints
}

/// The labels the node bootstraps with: the NodeClaim's, its NodePool, the launch's capacity
/// type and the NodeClass (with the family's own, [`userdata::bootstrap_labels`]).
pub fn node_labels(l: &Launch, family: &str) -> BTreeMap<String, String> {
    let mut labels = l.labels.clone();
    labels.insert(wk::LABEL_NODEPOOL.into(), l.nodepool.to_string());
    labels.insert(wk::LABEL_CAPACITY_TYPE.into(), l.capacity_type.to_string());
    labels.insert(TAG_NODECLASS.into(), l.nodeclass.metadata.name.clone().unwrap_or_default());
    userdata::bootstrap_labels(family, &labels)
}

/// The templates for `choices`, each with the indices of the choices it serves.
pub fn resolve(l: &Launch, choices: &[Choice]) -> Result<Vec<(LaunchTemplateSpec, Vec<usize>)>, CloudError> {
    let nc = l.nodeclass;
    let status = nc.status.as_ref().ok_or_else(|| not_ready(nc, "its status is not resolved yet"))?;
    let profile = status.instance_profile.clone().ok_or_else(|| {
        not_ready(nc, "no instance profile (condition InstanceProfileReady): set spec.role or spec.instanceProfile")
    })?;
    let family = nc.ami_family();
    let mut kubelet = nc.spec.kubelet.clone().unwrap_or_default();
    if kubelet.cluster_dns.is_empty()
        && let Some(dns) = l.settings.cluster_dns
    {
        kubelet.cluster_dns = vec![dns.to_string()];
    }
    let labels = node_labels(l, &family);
    let taints = with_unregistered(l.taints.clone());
    let block_devices = launch_template::block_devices(nc, &family)?;
    let groups: Vec<String> = status.security_groups.iter().map(|g| g.id.clone()).collect();
    let enclave = l.requested.contains(RESOURCE_NITRO_SANDBOX);
    let efa_requested = l.requested.contains(wk::RESOURCE_EFA);
    // Types that differ only in what the template does not depend on share it.
    let mut groups_of: BTreeMap<(&str, Option<i64>, i64), Vec<usize>> = BTreeMap::new();
    for (i, c) in choices.iter().enumerate() {
        // The kubelet runs with the pods the capacity model planned, unless the NodeClass says.
        let pods = if kubelet.max_pods.is_some() { None } else { c.pods };
        let efa = if efa_requested { c.efa } else { 0 };
        groups_of.entry((c.ami.as_str(), pods, efa)).or_default().push(i);
    }
    let mut out = Vec::new();
    for ((ami, pods, efa), served) in groups_of {
        let mut kubelet = kubelet.clone();
        if let Some(pods) = pods {
            kubelet.max_pods = i32::try_from(pods).ok();
        }
        let bootstrap = NodeBootstrap {
            labels: labels.clone(),
            taints: taints.clone(),
            kubelet,
            raid0: InstanceStore::of(nc) == InstanceStore::Raid0,
            bottlerocket_bind_dirs: !bottlerocket_binds_by_default(bottlerocket_version(nc).as_deref()),
        };
        let user_data = userdata::render(&family, l.cluster, &bootstrap, nc.spec.user_data.as_deref())
            .map_err(|e| not_ready(nc, e.to_string()))?;
        let spec = LaunchTemplateSpec {
            image_id: ami.to_string(),
            user_data,
            instance_profile: profile.clone(),
            block_devices: block_devices.clone(),
            metadata: launch_template::metadata(nc, l.region),
            detailed_monitoring: nc.spec.detailed_monitoring.unwrap_or(false),
            network_interfaces: launch_template::network_interfaces(
                nc,
                &groups,
                IpFamily::of(l.settings.cluster_dns),
                efa,
            ),
            enclave,
            capacity_type: l.capacity_type.to_string(),
            capacity_reservation_preference: l.settings.reserved_capacity.then(|| "none".to_string()),
            tenancy: l.tenancy.to_string(),
            tags: l.tags.clone(),
        };
        // A Custom family's user data ignores max pods: such groups are one template.
        match out.iter_mut().find(|(s, _): &&mut (LaunchTemplateSpec, Vec<usize>)| *s == spec) {
            Some((_, all)) => {
                all.extend(served);
                all.sort();
            }
            None => out.push((spec, served)),
        }
    }
    Ok(out)
}

/// The Bottlerocket version a NodeClass launches, as Karpenter reads it: its alias' version,
/// else the `v<x.y.z>` part of a name term, else of the name of a resolved Bottlerocket AMI
/// (one an id term selects first).
pub fn bottlerocket_version(nc: &EC2NodeClass) -> Option<String> {
    let from_name = |name: &str| name.split('-').find(|p| p.starts_with('v') && p.contains('.')).map(str::to_string);
    if let Some(alias) = nc.alias() {
        return Some(alias.version);
    }
    let terms = &nc.spec.ami_selector_terms;
    if let Some(v) = terms.iter().filter_map(|t| t.name.as_deref()).find_map(from_name) {
        return Some(v);
    }
    let amis = nc.status.as_ref().map(|s| s.amis.as_slice()).unwrap_or_default();
    let bottlerocket = |id: Option<&str>| {
        amis.iter()
            .filter(|a| id.is_none_or(|id| a.id == id))
            .filter_map(|a| a.name.as_deref().filter(|n| n.contains("bottlerocket")))
            .find_map(from_name)
    };
    terms.iter().filter_map(|t| t.id.as_deref()).find_map(|id| bottlerocket(Some(id))).or_else(|| bottlerocket(None))
}

/// Whether Bottlerocket `version` binds the kubelet's directories onto the instance-storage
/// array by itself (from 1.46.0; `latest` is taken as the newest). An unknown version is not
/// assumed to.
pub fn bottlerocket_binds_by_default(version: Option<&str>) -> bool {
    let Some(v) = version else { return false };
    if v == "latest" {
        return true;
    }
    let mut parts = v.trim_start_matches('v').split('.').map(|p| p.parse::<u32>());
    match (parts.next(), parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor)), Some(_)) => major > 1 || (major == 1 && minor >= 46),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tenon_api::ec2nodeclass::KubeletConfiguration;

    fn nodeclass() -> EC2NodeClass {
        serde_yaml::from_str(
            r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: test}
spec:
  role: r
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {a: b}}]
  securityGroupSelectorTerms: [{tags: {a: b}}]
status:
  subnets: [{id: subnet-a, zone: us-east-1a}]
  securityGroups: [{id: sg-1}]
  amis: [{id: ami-1, requirements: []}]
  instanceProfile: profile
"#,
        )
        .unwrap()
    }

    fn cluster() -> ClusterInfo {
        ClusterInfo {
            name: "test".into(),
            endpoint: "https://test".into(),
            ca_bundle: "Q0E=".into(),
            service_cidr: "10.100.0.0/16".into(),
        }
    }

    /// What varies from the base launch, each change on its own.
    #[derive(Clone, Default)]
    struct Inputs {
        nc: Option<EC2NodeClass>,
        cluster: Option<ClusterInfo>,
        settings: Option<LaunchSettings>,
        labels: BTreeMap<String, String>,
        taints: Vec<Taint>,
        capacity_type: Option<String>,
        requested: BTreeSet<String>,
        tags: BTreeMap<String, String>,
        choice: Option<Choice>,
    }

    fn choice() -> Choice {
        Choice { ami: "ami-1".into(), pods: Some(29), efa: 0 }
    }

    /// The templates' names for `inputs`.
    fn names(i: &Inputs, choices: &[Choice]) -> Vec<String> {
        let nc = i.nc.clone().unwrap_or_else(nodeclass);
        let cluster = i.cluster.clone().unwrap_or_else(cluster);
        let settings = i.settings.clone().unwrap_or_default();
        let capacity_type = i.capacity_type.clone().unwrap_or_else(|| "on-demand".into());
        let l = Launch {
            nodeclass: &nc,
            cluster: &cluster,
            settings: &settings,
            region: "us-east-1",
            nodepool: "default",
            labels: &i.labels,
            taints: i.taints.clone(),
            capacity_type: &capacity_type,
            tenancy: "default",
            requested: &i.requested,
            tags: &i.tags,
        };
        resolve(&l, choices).unwrap().into_iter().map(|(spec, _)| spec.name()).collect()
    }

    fn name(i: &Inputs) -> String {
        let names = names(i, &[i.choice.clone().unwrap_or_else(choice)]);
        assert_eq!(names.len(), 1);
        names.into_iter().next().unwrap()
    }

    fn all_distinct(variants: &[Inputs]) {
        let names: Vec<String> = variants.iter().map(name).collect();
        let unique: BTreeSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }

    fn with_nc(f: impl FnOnce(&mut EC2NodeClass)) -> Inputs {
        let mut nc = nodeclass();
        f(&mut nc);
        Inputs { nc: Some(nc), ..Default::default() }
    }

    fn with_cluster(f: impl FnOnce(&mut ClusterInfo)) -> Inputs {
        let mut c = cluster();
        f(&mut c);
        Inputs { cluster: Some(c), ..Default::default() }
    }

    fn with_kubelet(k: KubeletConfiguration) -> Inputs {
        with_nc(|nc| nc.spec.kubelet = Some(k))
    }

    fn map(k: &str, v: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(k.to_string(), v.to_string())])
    }

    /// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:449
    #[test]
    fn each_launch_option_names_its_own_template() {
        all_distinct(&[
            Inputs::default(),
            with_cluster(|c| c.name = "test-name".into()),
            with_cluster(|c| c.endpoint = "test-endpoint".into()),
            with_cluster(|c| c.service_cidr = "10.200.0.0/16".into()),
            with_nc(|nc| nc.status.as_mut().unwrap().instance_profile = Some("test-profile".into())),
            with_nc(|nc| nc.spec.instance_store_policy = Some("RAID0".into())),
            with_nc(|nc| nc.status.as_mut().unwrap().security_groups[0].id = "sg-test".into()),
            Inputs { tags: map("test-key", "test-value"), ..Default::default() },
            Inputs {
                settings: Some(LaunchSettings {
                    cluster_dns: Some("192.0.0.2".parse().unwrap()),
                    ..Default::default()
                }),
                ..Default::default()
            },
            with_nc(|nc| nc.spec.associate_public_ip_address = Some(true)),
            with_nc(|nc| nc.metadata.name = Some("test-name".into())),
        ]);
    }

    /// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:485
    #[test]
    fn each_kubelet_setting_names_its_own_template() {
        all_distinct(&[
            Inputs::default(),
            with_kubelet(KubeletConfiguration { kube_reserved: map("cpu", "20"), ..Default::default() }),
            with_kubelet(KubeletConfiguration { system_reserved: map("memory", "10Gi"), ..Default::default() }),
            with_kubelet(KubeletConfiguration { eviction_hard: map("memory.available", "52%"), ..Default::default() }),
            with_kubelet(KubeletConfiguration { eviction_soft: map("nodefs.available", "132%"), ..Default::default() }),
            with_kubelet(KubeletConfiguration { max_pods: Some(20), ..Default::default() }),
        ]);
    }

    /// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:502
    #[test]
    fn kubelet_fields_passed_through_name_their_own_template() {
        let kubelet = |v: serde_json::Value| with_kubelet(serde_json::from_value(v).unwrap());
        all_distinct(&[
            kubelet(serde_json::json!({"maxPods": 12})),
            kubelet(serde_json::json!({"maxPods": 21})),
            kubelet(serde_json::json!({"registryPullQPS": 5})),
            kubelet(serde_json::json!({"registryPullQPS": 6})),
        ]);
    }

    /// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:518
    #[test]
    fn each_bootstrap_option_names_its_own_template() {
        all_distinct(&[
            Inputs::default(),
            with_cluster(|c| c.name = "test-name".into()),
            with_cluster(|c| c.endpoint = "test-endpoint".into()),
            with_cluster(|c| c.service_cidr = "test-cidr".into()),
            Inputs {
                taints: vec![Taint { key: "test-key".into(), value: "test-value".into(), effect: Effect::NoSchedule }],
                ..Default::default()
            },
            Inputs { labels: map("test-key", "test-value"), ..Default::default() },
            with_cluster(|c| c.ca_bundle = "dGVzdC1idW5kbGU=".into()),
            with_nc(|nc| nc.spec.user_data = Some("test-cidr".into())),
        ]);
    }

    /// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:538
    #[test]
    fn each_template_setting_names_its_own_template() {
        let mapping = tenon_api::ec2nodeclass::BlockDeviceMapping {
            device_name: Some("test-block".into()),
            ..Default::default()
        };
        all_distinct(&[
            Inputs::default(),
            with_nc(|nc| nc.spec.block_device_mappings = vec![mapping]),
            Inputs { choice: Some(Choice { ami: "test-ami".into(), ..choice() }), ..Default::default() },
            with_nc(|nc| nc.spec.detailed_monitoring = Some(true)),
            Inputs {
                choice: Some(Choice { efa: 12, ..choice() }),
                requested: BTreeSet::from([wk::RESOURCE_EFA.to_string()]),
                ..Default::default()
            },
            Inputs { capacity_type: Some("spot".into()), ..Default::default() },
            Inputs { requested: BTreeSet::from([RESOURCE_NITRO_SANDBOX.to_string()]), ..Default::default() },
        ]);
    }

    /// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:555
    #[test]
    fn instance_types_alike_share_a_template() {
        // Two types with the same AMI and max pods (the choice is all a template sees of them).
        let both = names(&Inputs::default(), &[choice(), choice()]);
        assert_eq!(both, [name(&Inputs::default())]);
    }

    #[test]
    fn max_pods_split_templates_only_where_the_user_data_says_them() {
        let two = [choice(), Choice { pods: Some(58), ..choice() }];
        assert_eq!(names(&Inputs::default(), &two).len(), 2, "AL2023 runs each with its max pods");
        // A Custom family's user data is the user's: one template serves both.
        let custom = with_nc(|nc| {
            nc.spec.ami_family = Some("Custom".into());
            nc.spec.user_data = Some("#!/bin/sh\n".into());
        });
        assert_eq!(names(&custom, &two).len(), 1);
    }
}
