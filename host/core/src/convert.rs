//! (Long: every Kubernetes field the core reads is interpreted here, once.)
//! The one place Kubernetes and Karpenter objects become the core's model. The controller,
//! the simulator and tests all build snapshots through here, so a field is interpreted once.

use crate::cached_pod;
use crate::default_spread::{DefaultSpread, Selecting};
use crate::instancetype::InstanceType;
use crate::model::{
    AffinityTerm, Budget, BudgetNodes, ClaimInfo, ConsolidationPolicy, DaemonSet, DisruptionReason, DisruptionSettings,
    HostPort, Node, NodePoolTemplate, Pod, PodDisruptionBudget, SpreadConstraint, WhenUnsatisfiable,
};
use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::{NODES, Resources};
use crate::selector::{LabelSelector, SelectorOp};
use crate::taints::{Effect, Taint, Toleration};
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::storage::v1 as storage;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use tenon_api::common::NodeSelectorRequirementWithMinValues;
use tenon_api::cron::CronSchedule;
use tenon_api::duration::{parse_budget_duration, parse_duration, parse_nillable_duration};
use tenon_api::quantity::{parse_milli, parse_units};
use tenon_api::scheduler_config::SchedulerConfig;
use tenon_api::wellknown::{
    LABEL_HOSTNAME, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_ZONE, TAINT_UNREGISTERED, condition,
};
use tenon_api::{NodeClaim, NodePool};
use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{object}: {field}: {message}")]
pub struct ConvertError {
    pub object: String,
    pub field: String,
    pub message: String,
}

fn err(object: &str, field: &str, message: impl ToString) -> ConvertError {
    ConvertError { object: object.to_string(), field: field.to_string(), message: message.to_string() }
}

/// Parses a resource list into [`Resources`].
pub fn resources(
    list: Option<&BTreeMap<String, Quantity>>,
    object: &str,
    field: &str,
) -> Result<Resources, ConvertError> {
    let mut r = Resources::default();
    for (name, q) in list.into_iter().flatten() {
        let v = if name == "cpu" { parse_milli(&q.0) } else { parse_units(&q.0) }
            .map_err(|e| err(object, &format!("{field}.{name}"), e))?;
        r.set(name, v as i64);
    }
    Ok(r)
}

/// A node selector requirement as the core's [`Requirement`]. Unknown operators select
/// nothing (the API server rejects them; a decision must not guess).
pub fn requirement(key: &str, operator: &str, values: &[String]) -> Requirement {
    let key = normalized_label(key);
    match Operator::parse(operator) {
        Some(op) => Requirement::new(key, op, values.iter().cloned()),
        None => Requirement::new(key, Operator::DoesNotExist, Vec::<String>::new()),
    }
}

/// The label a deprecated or driver-specific alias stands for (Karpenter's
/// `NormalizedLabels`, with the EBS CSI driver's zone key the AWS provider adds), so a pod
/// selecting `beta.kubernetes.io/arch` means `kubernetes.io/arch`.
pub fn normalized_label(key: &str) -> &str {
    match key {
        "failure-domain.beta.kubernetes.io/zone" | "topology.ebs.csi.aws.com/zone" => LABEL_ZONE,
        "failure-domain.beta.kubernetes.io/region" => tenon_api::wellknown::LABEL_REGION,
        "beta.kubernetes.io/arch" => tenon_api::wellknown::LABEL_ARCH,
        "beta.kubernetes.io/os" => tenon_api::wellknown::LABEL_OS,
        "beta.kubernetes.io/instance-type" => LABEL_INSTANCE_TYPE,
        k => k,
    }
}

fn term_requirements(term: &core::NodeSelectorTerm) -> Requirements {
    Requirements::from_iter(
        term.match_expressions
            .iter()
            .flatten()
            .map(|e| requirement(&e.key, &e.operator, e.values.as_deref().unwrap_or(&[]))),
    )
    .compact()
}

/// Requirements with minValues, as NodePools and NodeClaims carry them.
pub fn requirements_with_min_values(reqs: &[NodeSelectorRequirementWithMinValues]) -> Requirements {
    Requirements::from_iter(reqs.iter().map(|r| {
        requirement(&r.key, &r.operator, &r.values).with_min_values(r.min_values.and_then(|m| u32::try_from(m).ok()))
    }))
}

/// A label selector; `None` selects nothing, as Kubernetes treats a missing selector in
/// affinity terms and spread constraints.
pub fn selector(sel: Option<&meta::LabelSelector>) -> LabelSelector {
    let Some(sel) = sel else {
        return LabelSelector { expressions: vec![(String::new(), SelectorOp::In(vec![]))] };
    };
    let mut out = LabelSelector::from_labels(sel.match_labels.as_ref().unwrap_or(&BTreeMap::new()));
    for e in sel.match_expressions.iter().flatten() {
        let values = e.values.clone().unwrap_or_default();
        let op = match e.operator.as_str() {
            "In" => SelectorOp::In(values),
            "NotIn" => SelectorOp::NotIn(values),
            "Exists" => SelectorOp::Exists,
            "DoesNotExist" => SelectorOp::DoesNotExist,
            _ => SelectorOp::In(vec![]),
        };
        out.push(&e.key, op);
    }
    out
}

fn with_match_label_keys(
    mut sel: LabelSelector,
    keys: Option<&Vec<String>>,
    labels: &BTreeMap<String, String>,
) -> LabelSelector {
    for k in keys.into_iter().flatten() {
        if let Some(v) = labels.get(k) {
            sel.push(k, SelectorOp::In(vec![v.clone()]));
        }
    }
    sel
}

/// A topology spread constraint as the scheduler reads it.
fn spread_constraint(c: &core::TopologySpreadConstraint, labels: &BTreeMap<String, String>) -> SpreadConstraint {
    SpreadConstraint {
        key: c.topology_key.clone(),
        max_skew: c.max_skew,
        when_unsatisfiable: if c.when_unsatisfiable == "ScheduleAnyway" {
            WhenUnsatisfiable::ScheduleAnyway
        } else {
            WhenUnsatisfiable::DoNotSchedule
        },
        selector: with_match_label_keys(selector(c.label_selector.as_ref()), c.match_label_keys.as_ref(), labels),
        min_domains: c.min_domains,
        honor_node_affinity: c.node_affinity_policy.as_deref() != Some("Ignore"),
        honor_node_taints: c.node_taints_policy.as_deref() == Some("Honor"),
    }
}

fn taint(t: &core::Taint) -> Option<Taint> {
    Some(Taint { key: t.key.clone(), value: t.value.clone().unwrap_or_default(), effect: Effect::parse(&t.effect)? })
}

fn api_taint(t: &tenon_api::common::Taint) -> Option<Taint> {
    Some(Taint { key: t.key.clone(), value: t.value.clone().unwrap_or_default(), effect: Effect::parse(&t.effect)? })
}

fn toleration(t: &core::Toleration) -> Toleration {
    Toleration {
        key: t.key.clone().unwrap_or_default(),
        exists: t.operator.as_deref() == Some("Exists"),
        value: t.value.clone().unwrap_or_default(),
        effect: t.effect.as_deref().and_then(Effect::parse),
    }
}

fn affinity_term(t: &core::PodAffinityTerm, labels: &BTreeMap<String, String>) -> AffinityTerm {
    AffinityTerm {
        key: t.topology_key.clone(),
        selector: with_match_label_keys(selector(t.label_selector.as_ref()), t.match_label_keys.as_ref(), labels),
        namespaces: t.namespaces.clone().unwrap_or_default(),
        all_namespaces: false,
        namespace_selector: t.namespace_selector.as_ref().map(|s| selector(Some(s))),
    }
}

/// Effective requests: containers plus restartable init containers (sidecars), or the largest
/// init container with the sidecars started before it, whichever is larger; pod-level cpu and
/// memory requests instead where set; plus pod overhead and one pod slot.
pub fn pod_requests(spec: &cached_pod::PodSpec, object: &str) -> Result<Resources, ConvertError> {
    let mut r = pod_amounts(spec, object, "requests")?;
    r.pods += 1;
    Ok(r)
}

/// Effective limits, by the same rules as [`pod_requests`] (without the pod slot).
pub fn pod_limits(spec: &cached_pod::PodSpec, object: &str) -> Result<Resources, ConvertError> {
    pod_amounts(spec, object, "limits")
}

/// A pod's effective `requests` or `limits` (`which`), Kubernetes' rules for both.
fn pod_amounts(spec: &cached_pod::PodSpec, object: &str, which: &str) -> Result<Resources, ConvertError> {
    fn pick<'r>(r: &'r core::ResourceRequirements, which: &str) -> Option<&'r BTreeMap<String, Quantity>> {
        if which == "limits" { r.limits.as_ref() } else { r.requests.as_ref() }
    }
    let of = |c: &cached_pod::Container, field: &str| {
        resources(c.resources.as_ref().and_then(|r| pick(r, which)), object, &format!("{field}.{which}"))
    };
    let mut main = Resources::default();
    for c in &spec.containers {
        main.add(&of(c, "spec.containers.resources")?);
    }
    let mut sidecars = Resources::default();
    let mut init_peak = Resources::default();
    for c in spec.init_containers.iter().flatten() {
        let r = of(c, "spec.initContainers.resources")?;
        if c.restart_policy.as_deref() == Some("Always") {
            sidecars.add(&r);
            init_peak.max_with(&sidecars);
        } else {
            init_peak.max_with(&sidecars.plus(&r));
        }
    }
    main.add(&sidecars);
    main.max_with(&init_peak);
    // Pod-level amounts (spec.resources) replace the containers' sum for cpu and memory.
    let set = spec.resources.as_ref().and_then(|r| pick(r, which));
    let pod_level = resources(set, object, &format!("spec.resources.{which}"))?;
    if set.is_some_and(|r| r.contains_key("cpu")) {
        main.cpu = pod_level.cpu;
    }
    if set.is_some_and(|r| r.contains_key("memory")) {
        main.memory = pod_level.memory;
    }
    main.add(&resources(spec.overhead.as_ref(), object, "spec.overhead")?);
    Ok(main)
}

/// Whether Karpenter would provision for this pod: pending, not gated, not owned by a
/// DaemonSet, not being deleted, and marked unschedulable by kube-scheduler.
pub fn is_provisionable(p: &cached_pod::Pod) -> bool {
    let spec = p.spec.as_ref();
    let status = p.status.as_ref();
    let unschedulable = status.and_then(|s| s.conditions.as_ref()).is_some_and(|cs| {
        cs.iter()
            .any(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
    });
    // A nominated node means kube-scheduler is preempting room for it there.
    let preempting = status.and_then(|s| s.nominated_node_name.as_deref()).is_some_and(|n| !n.is_empty());
    spec.is_some_and(|s| s.node_name.is_none() && s.scheduling_gates.as_ref().is_none_or(Vec::is_empty))
        && !preempting
        && p.metadata.deletion_timestamp.is_none()
        && status.and_then(|s| s.phase.as_deref()).is_none_or(|ph| ph == "Pending")
        && !is_daemon(p)
        && unschedulable
}

/// Whether capacity should be launched now for a pod on a node that is going away
/// (Karpenter's currently-reschedulable pods): it is active, or a terminating StatefulSet
/// pod (whose replacement keeps its name and needs a node); no DaemonSet or Node owns it;
/// it is not marked `karpenter.sh/do-not-disrupt`; and no PodDisruptionBudget fully blocks
/// its eviction (more than one selects it, or one allows no disruption whatever the count:
/// `maxUnavailable: 0` or `0%`, `minAvailable: 100%`).
pub fn is_reschedulable(p: &cached_pod::Pod, pdbs: &[Arc<policy::PodDisruptionBudget>]) -> bool {
    let active = is_active(p) && p.metadata.deletion_timestamp.is_none();
    let annotations = p.metadata.annotations.as_ref();
    let do_not_disrupt =
        annotations.and_then(|a| a.get(tenon_api::wellknown::ANNOTATION_DO_NOT_DISRUPT)).is_some_and(|v| v == "true");
    needs_a_new_home(p) && !do_not_disrupt && !(active && fully_blocked(p, pdbs))
}

/// Whether a pod on a node that goes away needs another (Karpenter's `IsReschedulable`):
/// active, or a terminating StatefulSet pod; owned by no DaemonSet and no Node.
pub fn needs_a_new_home(p: &cached_pod::Pod) -> bool {
    let owned_by = |kind: &str| p.metadata.owner_references.iter().flatten().any(|o| o.kind == kind);
    let terminating = p.metadata.deletion_timestamp.is_some();
    let active = is_active(p) && !terminating;
    (active || (owned_by("StatefulSet") && terminating && is_active(p))) && !is_daemon(p) && !owned_by("Node")
}

/// How many of `pods` on `nc`'s Node need another home if it goes (Karpenter's
/// `ReschedulablePods`, counted in `karpenter_pods_disruption_initiated_total`).
pub fn reschedulable_on(nc: &tenon_api::NodeClaim, pods: &[Arc<cached_pod::Pod>]) -> u64 {
    let Some(node) = nc.status.as_ref().and_then(|s| s.node_name.as_deref()) else { return 0 };
    let on = |p: &&Arc<cached_pod::Pod>| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node);
    pods.iter().filter(on).filter(|p| needs_a_new_home(p)).count() as u64
}

fn fully_blocked(p: &cached_pod::Pod, pdbs: &[Arc<policy::PodDisruptionBudget>]) -> bool {
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let matching: Vec<&policy::PodDisruptionBudget> = pdbs
        .iter()
        .filter(|b| b.metadata.namespace == p.metadata.namespace)
        .filter(|b| selector(b.spec.as_ref().and_then(|s| s.selector.as_ref())).matches(&labels))
        .map(|b| &**b)
        .collect();
    let unready = || {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "False"))
    };
    match matching.as_slice() {
        [] => false,
        [b] => {
            let spec = b.spec.as_ref();
            if spec.and_then(|s| s.unhealthy_pod_eviction_policy.as_deref()) == Some("AlwaysAllow") && unready() {
                return false;
            }
            spec_fully_blocking(spec)
        }
        // The eviction API refuses a pod more than one budget selects.
        _ => true,
    }
}

/// A PodDisruptionBudget that allows no disruption whatever the count: `maxUnavailable: 0`
/// or `0%`, `minAvailable: 100%`.
fn spec_fully_blocking(spec: Option<&policy::PodDisruptionBudgetSpec>) -> bool {
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    matches!(spec.and_then(|s| s.max_unavailable.as_ref()), Some(IntOrString::Int(0)))
        || matches!(spec.and_then(|s| s.max_unavailable.as_ref()), Some(IntOrString::String(v)) if v == "0%")
        || matches!(spec.and_then(|s| s.min_available.as_ref()), Some(IntOrString::String(v)) if v == "100%")
}

/// Whether a DaemonSet owns the pod (it comes with every node; nothing provisions for it).
pub fn is_daemon(p: &cached_pod::Pod) -> bool {
    p.metadata.owner_references.iter().flatten().any(|o| o.kind == "DaemonSet")
}

/// `namespace/name`.
pub fn pod_key(p: &cached_pod::Pod) -> String {
    format!("{}/{}", p.metadata.namespace.as_deref().unwrap_or(""), p.metadata.name.as_deref().unwrap_or(""))
}

/// Whether a bound pod still uses its node's resources.
pub fn is_active(p: &cached_pod::Pod) -> bool {
    !matches!(p.status.as_ref().and_then(|s| s.phase.as_deref()), Some("Succeeded" | "Failed"))
}

/// A pod's scheduling-relevant facts.
pub fn pod(p: &cached_pod::Pod) -> Result<Pod, ConvertError> {
    let ns = p.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let name = p.metadata.name.clone().unwrap_or_default();
    let object = format!("Pod {ns}/{name}");
    let spec = p.spec.as_ref().ok_or_else(|| err(&object, "spec", "missing"))?;
    let labels = p.metadata.labels.clone().unwrap_or_default();
    let node_selector = Requirements::from_iter(
        spec.node_selector.iter().flatten().map(|(k, v)| Requirement::in_values(normalized_label(k), [v.clone()])),
    )
    .compact();
    let affinity = spec.affinity.as_ref();
    let node_aff = affinity.and_then(|a| a.node_affinity.as_ref());
    let required_node_affinity = node_aff
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.as_ref())
        .map(|sel| sel.node_selector_terms.iter().map(term_requirements).collect())
        .unwrap_or_default();
    let mut preferred_node_affinity: Vec<(i32, Requirements)> = node_aff
        .and_then(|n| n.preferred_during_scheduling_ignored_during_execution.as_ref())
        .map(|ts| ts.iter().map(|t| (t.weight, term_requirements(&t.preference))).collect())
        .unwrap_or_default();
    preferred_node_affinity.sort_by_key(|t| std::cmp::Reverse(t.0));
    let pod_aff = affinity.and_then(|a| a.pod_affinity.as_ref());
    let anti = affinity.and_then(|a| a.pod_anti_affinity.as_ref());
    let terms = |ts: Option<&Vec<core::PodAffinityTerm>>| {
        ts.into_iter().flatten().map(|t| affinity_term(t, &labels)).collect::<Vec<_>>()
    };
    let weighted = |ts: Option<&Vec<core::WeightedPodAffinityTerm>>| {
        let mut v: Vec<(i32, AffinityTerm)> =
            ts.into_iter().flatten().map(|t| (t.weight, affinity_term(&t.pod_affinity_term, &labels))).collect();
        v.sort_by_key(|t| std::cmp::Reverse(t.0));
        v
    };
    let spread = spec.topology_spread_constraints.iter().flatten().map(|c| spread_constraint(c, &labels)).collect();
    let host_ports = spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
        .flat_map(|c| c.ports.iter().flatten())
        .filter_map(|p| {
            Some(HostPort {
                ip: p.host_ip.clone().unwrap_or_default(),
                port: p.host_port?,
                protocol: p.protocol.clone().unwrap_or_else(|| "TCP".into()),
            })
        })
        .collect();
    let owner = p.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true)).or(p
        .metadata
        .owner_references
        .iter()
        .flatten()
        .next());
    Ok(Pod {
        namespace: ns,
        name,
        uid: p.metadata.uid.clone().unwrap_or_default(),
        annotations: p.metadata.annotations.clone().unwrap_or_default(),
        requests: pod_requests(spec, &object)?,
        node_selector,
        required_node_affinity,
        preferred_node_affinity,
        volume_requirements: Vec::new(),
        tolerations: spec.tolerations.iter().flatten().map(toleration).collect(),
        spread,
        affinity: terms(pod_aff.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())),
        preferred_affinity: weighted(
            pod_aff.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
        ),
        anti_affinity: terms(anti.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref())),
        preferred_anti_affinity: weighted(
            anti.and_then(|a| a.preferred_during_scheduling_ignored_during_execution.as_ref()),
        ),
        host_ports,
        // Resolved with the cluster's claims and volumes (`snapshot`).
        volumes: Default::default(),
        termination_grace_seconds: spec.termination_grace_period_seconds.unwrap_or(30),
        deleted_at: p.metadata.deletion_timestamp.as_ref().map(|t| t.0.as_second()),
        critical: matches!(
            spec.priority_class_name.as_deref(),
            Some("system-cluster-critical" | "system-node-critical")
        ),
        resource_claims: spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty())
            || spec
                .containers
                .iter()
                .chain(spec.init_containers.iter().flatten())
                .any(|c| c.resources.as_ref().and_then(|r| r.claims.as_ref()).is_some_and(|c| !c.is_empty())),
        priority: spec.priority.unwrap_or(0),
        unready: p
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "False")),
        node_name: spec.node_name.clone(),
        created: p.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
        started: p.status.as_ref().and_then(|s| s.start_time.as_ref()).map(|t| t.0.as_second()),
        owner_kind: owner.map(|o| o.kind.clone()),
        owner_name: owner.map(|o| o.name.clone()),
        labels,
    })
}

/// The claim behind each of a pod's volumes that has one, with the field naming it: the
/// claim a `persistentVolumeClaim` volume names, or the one the ephemeral volume controller
/// creates for an `ephemeral` volume (`<pod>-<volume>`).
pub(crate) fn pod_claims(p: &cached_pod::Pod) -> Vec<(String, String)> {
    let pod = p.metadata.name.as_deref().unwrap_or("");
    let volumes = p.spec.iter().flat_map(|s| s.volumes.iter().flatten()).enumerate();
    volumes
        .filter_map(|(i, v)| {
            if let Some(src) = &v.persistent_volume_claim {
                Some((src.claim_name.clone(), format!("spec.volumes[{i}].persistentVolumeClaim.claimName")))
            } else {
                v.ephemeral.as_ref().map(|_| (format!("{pod}-{}", v.name), format!("spec.volumes[{i}].ephemeral")))
            }
        })
        .collect()
}

pub(crate) fn find_claim<'a>(
    claims: &'a [Arc<core::PersistentVolumeClaim>],
    ns: &str,
    name: &str,
) -> Option<&'a core::PersistentVolumeClaim> {
    claims
        .iter()
        .find(|c| c.metadata.namespace.as_deref() == Some(ns) && c.metadata.name.as_deref() == Some(name))
        .map(|c| &**c)
}

pub(crate) fn find_named<'a, T: k8s_openapi::Metadata<Ty = meta::ObjectMeta>>(
    objects: &'a [Arc<T>],
    name: &str,
) -> Option<&'a T> {
    objects.iter().find(|o| o.metadata().name.as_deref() == Some(name)).map(|o| &**o)
}

/// Set by the PV controller once a claim's binding is complete.
const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";

/// Requirements from a pod's persistent volumes, as ORed alternatives: a bound volume's node
/// affinity terms (without the hostname of a local or hostPath volume, which pins the old
/// node, not the data), or an unbound claim's StorageClass `allowedTopologies` terms. With
/// several volumes, every combination of their terms that can hold at once, in order. Empty
/// when no volume constrains the node; one impossible alternative when none can hold.
pub fn volume_requirements(
    p: &cached_pod::Pod,
    claims: &[Arc<core::PersistentVolumeClaim>],
    volumes: &[Arc<core::PersistentVolume>],
    classes: &[Arc<storage::StorageClass>],
) -> Vec<Requirements> {
    let ns = p.metadata.namespace.as_deref().unwrap_or("default");
    let mut out: Vec<Requirements> = Vec::new();
    for (name, _) in pod_claims(p) {
        let Some(pvc) = find_claim(claims, ns, &name) else { continue };
        let spec = pvc.spec.as_ref();
        let mut options: Vec<Requirements> = Vec::new();
        if let Some(pv_name) = spec.and_then(|s| s.volume_name.as_deref()).filter(|n| !n.is_empty()) {
            let Some(pv) = find_named(volumes, pv_name).and_then(|pv| pv.spec.as_ref()) else { continue };
            let local = pv.local.is_some() || pv.host_path.is_some();
            let terms = pv.node_affinity.as_ref().and_then(|a| a.required.as_ref()).map(|s| &s.node_selector_terms);
            for term in terms.into_iter().flatten() {
                options.push(Requirements::from_iter(
                    term.match_expressions
                        .iter()
                        .flatten()
                        .filter(|e| !(local && e.key == LABEL_HOSTNAME))
                        .map(|e| requirement(&e.key, &e.operator, e.values.as_deref().unwrap_or(&[]))),
                ));
            }
        } else if let Some(sc) = spec.and_then(|s| s.storage_class_name.as_deref()).and_then(|n| find_named(classes, n))
        {
            for term in sc.allowed_topologies.iter().flatten() {
                options.push(Requirements::from_iter(
                    term.match_label_expressions
                        .iter()
                        .flatten()
                        .map(|e| Requirement::in_values(normalized_label(&e.key), e.values.iter().cloned())),
                ));
            }
        }
        // A term left with nothing (a local volume's hostname) leaves the volume unconstrained.
        if options.is_empty() || options.iter().any(Requirements::is_empty) {
            continue;
        }
        out = if out.is_empty() {
            options
        } else {
            let combined: Vec<Requirements> = out
                .iter()
                .flat_map(|a| options.iter().map(move |b| (a, b)))
                .filter(|(a, b)| a.is_compatible(b))
                .map(|(a, b)| {
                    let mut r = a.clone();
                    r.add_all(b);
                    r
                })
                .collect();
            if combined.is_empty() {
                // No zone serves every volume: nothing can place the pod.
                return vec![Requirements::from_iter([Requirement::in_values(LABEL_ZONE, Vec::<String>::new())])];
            }
            combined
        };
    }
    out
}

/// Why kube-scheduler would not place the pod for its volumes, so provisioning for it would
/// launch a node it never uses (Karpenter's PVC validation): the claim is missing, being
/// deleted or Lost; its volume is missing or being deleted; it names a volume but is not
/// bound yet; or it is unbound and its StorageClass is missing, unnamed or binds Immediately.
pub fn volume_problem(
    p: &cached_pod::Pod,
    claims: &[Arc<core::PersistentVolumeClaim>],
    volumes: &[Arc<core::PersistentVolume>],
    classes: &[Arc<storage::StorageClass>],
) -> Option<ConvertError> {
    let ns = p.metadata.namespace.as_deref().unwrap_or("default");
    let object = format!("Pod {ns}/{}", p.metadata.name.as_deref().unwrap_or(""));
    for (name, field) in pod_claims(p) {
        let fail = |message: String| Some(err(&object, &field, message));
        let Some(pvc) = find_claim(claims, ns, &name) else {
            return fail(format!(
                "PersistentVolumeClaim {ns}/{name} not found; create it (an ephemeral volume's claim is created by Kubernetes shortly after the pod)"
            ));
        };
        if pvc.metadata.deletion_timestamp.is_some() {
            return fail(format!(
                "PersistentVolumeClaim {ns}/{name} is being deleted; recreate the pod with a claim that is not"
            ));
        }
        let spec = pvc.spec.as_ref();
        let volume_name = spec.and_then(|s| s.volume_name.as_deref()).filter(|n| !n.is_empty());
        if pvc.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Lost") {
            return fail(format!(
                "PersistentVolumeClaim {ns}/{name} is Lost: its PersistentVolume {} no longer exists; restore the volume or replace the claim",
                volume_name.unwrap_or("")
            ));
        }
        let class = spec.and_then(|s| s.storage_class_name.as_deref()).unwrap_or("");
        if let Some(pv_name) = volume_name {
            match find_named(volumes, pv_name) {
                None => {
                    return fail(format!(
                        "PersistentVolumeClaim {ns}/{name} names PersistentVolume {pv_name}, which does not exist; create the volume or fix spec.volumeName"
                    ));
                }
                Some(pv) if pv.metadata.deletion_timestamp.is_some() => {
                    return fail(format!("PersistentVolume {pv_name} of claim {ns}/{name} is being deleted"));
                }
                Some(_) => {}
            }
            // kube-scheduler treats a claim naming a volume as unbound until the PV
            // controller has marked the binding complete.
            if !pvc.metadata.annotations.as_ref().is_some_and(|a| a.contains_key(ANN_BIND_COMPLETED)) {
                return fail(format!(
                    "PersistentVolumeClaim {ns}/{name} names PersistentVolume {pv_name} but is not bound yet (no {ANN_BIND_COMPLETED} annotation)"
                ));
            }
        } else {
            if class.is_empty() {
                return fail(format!(
                    "PersistentVolumeClaim {ns}/{name} is unbound and names no StorageClass; set spec.storageClassName or bind it to a volume"
                ));
            }
            let Some(sc) = find_named(classes, class) else {
                return fail(format!(
                    "StorageClass {class} of unbound claim {ns}/{name} not found; create it or fix spec.storageClassName"
                ));
            };
            if sc.volume_binding_mode.as_deref() == Some("Immediate") {
                return fail(format!(
                    "PersistentVolumeClaim {ns}/{name} is unbound and StorageClass {class} binds Immediately, so its volume decides the node; wait for it to bind or use volumeBindingMode: WaitForFirstConsumer"
                ));
            }
        }
    }
    None
}

/// Taints a node carries only while it starts: not a reason to avoid it when simulating.
fn ephemeral(t: &Taint, startup: &[Taint]) -> bool {
    t.key == TAINT_UNREGISTERED
        || t.key == "node.kubernetes.io/not-ready"
        || t.key == "node.kubernetes.io/unreachable"
        || t.key == "node.cloudprovider.kubernetes.io/uninitialized"
        || startup.iter().any(|s| s.key == t.key && s.effect == t.effect)
}

/// A Node. `managed` holds its NodePool's startup taints when a NodeClaim manages it: they
/// and the known ephemeral taints are ignored until it is initialized. A node no NodeClaim
/// manages counts as initialized, whatever its labels say (Karpenter's `StateNode`).
pub fn node(n: &core::Node, managed: Option<&[Taint]>) -> Result<Node, ConvertError> {
    let name = n.metadata.name.clone().unwrap_or_default();
    let object = format!("Node {name}");
    let labels = n.metadata.labels.clone().unwrap_or_default();
    let spec = n.spec.as_ref();
    let taints: Vec<Taint> = spec.and_then(|s| s.taints.as_ref()).into_iter().flatten().filter_map(taint).collect();
    let disrupted = taints.iter().any(|t| t.key == tenon_api::wellknown::TAINT_DISRUPTED);
    let initialized =
        managed.is_none() || labels.get(tenon_api::wellknown::LABEL_INITIALIZED).is_some_and(|v| v == "true");
    let startup_taints = managed.unwrap_or_default();
    let status = n.status.as_ref();
    Ok(Node {
        name,
        nodepool: labels.get(LABEL_NODEPOOL).cloned(),
        requirements: Requirements::from_iter(labels.iter().map(|(k, v)| Requirement::in_values(k, [v.clone()])))
            .compact(),
        // Until a managed node is initialized its startup and not-ready taints are passing;
        // after, any of them back on the node (a kubelet gone NotReady) is real.
        taints: taints.into_iter().filter(|t| initialized || !ephemeral(t, startup_taints)).collect(),
        allocatable: resources(status.and_then(|s| s.allocatable.as_ref()), &object, "status.allocatable")?,
        capacity: resources(status.and_then(|s| s.capacity.as_ref()), &object, "status.capacity")?,
        in_flight: false,
        unschedulable: spec.and_then(|s| s.unschedulable).unwrap_or(false)
            || n.metadata.deletion_timestamp.is_some()
            || disrupted,
        claim: None,
        labels,
    })
}

/// A NodeClaim that has no Node yet. Until launch reports its allocatable, the capacity it
/// was planned for (`spec.resources.requests`) stands in, so pods planned onto it are not
/// provisioned for twice.
pub fn in_flight_nodeclaim(nc: &NodeClaim) -> Result<Node, ConvertError> {
    let name = nc.metadata.name.clone().unwrap_or_default();
    let object = format!("NodeClaim {name}");
    let labels = nc.metadata.labels.clone().unwrap_or_default();
    let mut reqs = requirements_with_min_values(&nc.spec.requirements);
    for (k, v) in &labels {
        reqs.add(Requirement::in_values(k, [v.clone()]));
    }
    let status = nc.status.as_ref();
    let planned = resources(Some(&nc.spec.resources.requests), &object, "spec.resources.requests")?;
    let allocatable = match status.filter(|s| !s.allocatable.is_empty()) {
        Some(s) => resources(Some(&s.allocatable), &object, "status.allocatable")?,
        None => planned.clone(),
    };
    let capacity = match status.filter(|s| !s.capacity.is_empty()) {
        Some(s) => resources(Some(&s.capacity), &object, "status.capacity")?,
        None => allocatable.clone(),
    };
    Ok(Node {
        name,
        nodepool: labels.get(LABEL_NODEPOOL).cloned(),
        requirements: reqs,
        labels,
        taints: nc.spec.taints.iter().filter_map(api_taint).collect(),
        allocatable,
        capacity,
        in_flight: true,
        unschedulable: nc.metadata.deletion_timestamp.is_some(),
        claim: None,
    })
}

/// DaemonSet `ds` as the pod it puts on a node: `running`, the newest pod it controls, if
/// any (a LimitRange or a webhook may have changed its requests from the template's), with
/// the template's required node affinity (the DaemonSet controller pins each pod to its node
/// by name); otherwise the template (Karpenter's `getDaemonSetPods`).
pub fn daemonset(ds: &apps::DaemonSet, running: Option<&cached_pod::Pod>) -> Result<DaemonSet, ConvertError> {
    let ns = ds.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    let name = ds.metadata.name.clone().unwrap_or_default();
    let template = ds.spec.as_ref().map(|s| s.template.clone()).unwrap_or_default();
    let template_required = template
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| n.required_during_scheduling_ignored_during_execution.clone());
    let as_pod = match running {
        Some(p) => {
            let mut p = p.clone();
            if let Some(spec) = p.spec.as_mut() {
                let node_affinity = spec
                    .affinity
                    .get_or_insert_with(Default::default)
                    .node_affinity
                    .get_or_insert_with(Default::default);
                node_affinity.required_during_scheduling_ignored_during_execution = template_required;
            }
            p
        }
        None => {
            let mut spec = template.spec;
            // The API server defaults a Pod's missing requests to its limits, but not a template's.
            for c in spec.iter_mut().flat_map(|s| s.containers.iter_mut().chain(s.init_containers.iter_mut().flatten()))
            {
                let Some(r) = c.resources.as_mut() else { continue };
                let limits = r.limits.clone().unwrap_or_default();
                let requests = r.requests.get_or_insert_with(Default::default);
                for (k, v) in limits {
                    requests.entry(k).or_insert(v);
                }
            }
            cached_pod::Pod {
                metadata: template.metadata.unwrap_or_default(),
                spec: spec.map(Into::into),
                status: None,
            }
        }
    };
    let mut p = pod(&as_pod).map_err(|e| err(&format!("DaemonSet {ns}/{name}"), &e.field, e.message))?;
    p.namespace = ns.clone();
    p.name = format!("{name}-template");
    p.owner_kind = Some("DaemonSet".into());
    p.owner_name = Some(name.clone());
    Ok(DaemonSet { namespace: ns, name, pod: p })
}

/// The newest pod each DaemonSet controls, by namespace and DaemonSet name, with the UID of
/// the DaemonSet its owner reference names.
fn daemonset_pods(pods: &[Arc<cached_pod::Pod>]) -> HashMap<(&str, &str), (&cached_pod::Pod, &str)> {
    let mut out: HashMap<(&str, &str), (&cached_pod::Pod, &str)> = HashMap::new();
    for p in pods {
        let Some(owner) = p.metadata.owner_references.iter().flatten().find(|o| o.controller == Some(true)) else {
            continue;
        };
        if owner.kind != "DaemonSet" {
            continue;
        }
        let key = (p.metadata.namespace.as_deref().unwrap_or("default"), owner.name.as_str());
        let created = |p: &cached_pod::Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
        match out.get(&key) {
            Some((seen, _)) if created(seen) >= created(p) => {}
            _ => {
                out.insert(key, (p, owner.uid.as_str()));
            }
        }
    }
    out
}

pub fn pdb(p: &policy::PodDisruptionBudget) -> PodDisruptionBudget {
    PodDisruptionBudget {
        namespace: p.metadata.namespace.clone().unwrap_or_else(|| "default".into()),
        name: p.metadata.name.clone().unwrap_or_default(),
        selector: selector(p.spec.as_ref().and_then(|s| s.selector.as_ref())),
        disruptions_allowed: p.status.as_ref().map_or(0, |s| s.disruptions_allowed),
        unhealthy_always_allow: p.spec.as_ref().and_then(|s| s.unhealthy_pod_eviction_policy.as_deref())
            == Some("AlwaysAllow"),
        fully_blocking: spec_fully_blocking(p.spec.as_ref()),
    }
}

/// A NodePool as a template: its requirements, its labels as requirements, and its own name
/// as `karpenter.sh/nodepool`.
pub fn nodepool(np: &NodePool, instance_types: Arc<Vec<InstanceType>>) -> Result<NodePoolTemplate, ConvertError> {
    let name = np.metadata.name.clone().unwrap_or_default();
    let object = format!("NodePool {name}");
    let t = &np.spec.template;
    let mut reqs = requirements_with_min_values(&t.spec.requirements);
    for (k, v) in &t.metadata.labels {
        reqs.add(Requirement::in_values(k, [v.clone()]));
    }
    reqs.add(Requirement::in_values(LABEL_NODEPOOL, [name.clone()]));
    let mut limits = BTreeMap::new();
    for (res, q) in &np.spec.limits {
        let v = if res == "cpu" { parse_milli(&q.0) } else { parse_units(&q.0) }
            .map_err(|e| err(&object, &format!("spec.limits.{res}"), e))?;
        limits.insert(res.clone(), if res == NODES { parse_units(&q.0).unwrap_or(0) as i64 } else { v as i64 });
    }
    let d = &np.spec.disruption;
    let nillable = |v: &str, field: &str| {
        parse_nillable_duration(v).map(|o| o.map(|d| d.as_secs() as i64)).map_err(|e| err(&object, field, e))
    };
    let disruption = DisruptionSettings {
        consolidation_policy: match d.consolidation_policy.as_str() {
            "WhenEmpty" => ConsolidationPolicy::WhenEmpty,
            "Balanced" => ConsolidationPolicy::Balanced,
            _ => ConsolidationPolicy::WhenEmptyOrUnderutilized,
        },
        consolidate_after: nillable(
            d.consolidate_after.as_deref().unwrap_or("0s"),
            "spec.disruption.consolidateAfter",
        )?,
        budgets: d.budgets.iter().map(budget).collect(),
    };
    let expire_after = nillable(&t.spec.expire_after, "spec.template.spec.expireAfter")?;
    let termination_grace_period = match &t.spec.termination_grace_period {
        Some(v) => {
            Some(parse_duration(v).map_err(|e| err(&object, "spec.template.spec.terminationGracePeriod", e))?.as_secs()
                as i64)
        }
        None => None,
    };
    Ok(NodePoolTemplate {
        hash: np.template_hash(),
        disruption,
        expire_after,
        termination_grace_period,
        name,
        weight: np.weight(),
        requirements: reqs,
        labels: t.metadata.labels.clone(),
        taints: t.spec.taints.iter().filter_map(api_taint).collect(),
        startup_taints: t.spec.startup_taints.iter().filter_map(api_taint).collect(),
        limits,
        instance_types,
        replicas: np.spec.replicas,
        unavailable: if np.metadata.deletion_timestamp.is_some() {
            Some("being deleted".into())
        } else {
            np.status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready" && c.status == "False"))
                .map(|c| format!("not Ready ({})", if c.message.is_empty() { &c.reason } else { &c.message }))
        },
    })
}

/// A budget as written; anything unparsable fails closed rather than failing the NodePool.
pub fn budget(b: &tenon_api::nodepool::Budget) -> Budget {
    let nodes = match b.nodes.strip_suffix('%') {
        Some(p) => p.parse().ok().filter(|p| *p <= 100).map_or(BudgetNodes::Invalid, BudgetNodes::Percent),
        None => b.nodes.parse().map_or(BudgetNodes::Invalid, BudgetNodes::Count),
    };
    let reasons = b.reasons.as_ref().map(|rs| rs.iter().filter_map(|r| DisruptionReason::parse(r)).collect());
    let window = match (&b.schedule, &b.duration) {
        (None, None) => None,
        (Some(s), Some(d)) => Some(CronSchedule::parse(s).map_err(|e| format!("schedule {s:?}: {e}")).and_then(|c| {
            parse_budget_duration(d).map(|d| (c, d.as_secs() as i64)).map_err(|e| format!("duration {d:?}: {e}"))
        })),
        _ => Some(Err("schedule and duration must be set together".into())),
    };
    Budget { nodes, reasons, window }
}

/// A NodeClaim's `spec.expireAfter` in seconds; `None` for `Never` (and for a value the
/// API server's validation would have refused).
pub fn nodeclaim_expire_after(nc: &NodeClaim) -> Option<i64> {
    parse_nillable_duration(&nc.spec.expire_after).ok().flatten().map(|d| d.as_secs() as i64)
}

/// Disruption facts of a managed node, from its NodeClaim.
pub fn claim_info(nc: &NodeClaim, node: &core::Node, instance_types: &[InstanceType]) -> ClaimInfo {
    let labels = nc.metadata.labels.clone().unwrap_or_default();
    let node_labels = node.metadata.labels.clone().unwrap_or_default();
    let label = |k: &str| node_labels.get(k).or(labels.get(k)).cloned().unwrap_or_default();
    let status = nc.status.as_ref();
    let cond = |t: &str| status.and_then(|s| tenon_api::common::find_condition(&s.conditions, t));
    let instance_type = label(LABEL_INSTANCE_TYPE);
    let zone = label(LABEL_ZONE);
    let capacity_type = label(tenon_api::wellknown::LABEL_CAPACITY_TYPE);
    let price = instance_types
        .iter()
        .find(|t| t.name == instance_type)
        .and_then(|t| t.offerings.iter().find(|o| o.zone == zone && o.capacity_type == capacity_type))
        .map_or(0.0, |o| o.price);
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
    let annotations = nc.metadata.annotations.clone().unwrap_or_default();
    let mut all_annotations = node.metadata.annotations.clone().unwrap_or_default();
    all_annotations.extend(annotations.clone());
    let initialized_at =
        cond(condition::INITIALIZED).filter(|c| c.is_true()).map(|c| c.last_transition_time.0.as_second());
    let tainted_disrupted = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|ts| ts.iter().any(|t| t.key == tenon_api::wellknown::TAINT_DISRUPTED));
    ClaimInfo {
        nodeclaim: nc.metadata.name.clone().unwrap_or_default(),
        created: nc.metadata.creation_timestamp.as_ref().map_or(0, |t| t.0.as_second()),
        expire_after: nodeclaim_expire_after(nc),
        // The NodeClaim's condition alone, as Karpenter's StateNode reads a managed node.
        initialized: initialized_at.is_some(),
        ready,
        disrupting: nc.metadata.deletion_timestamp.is_some()
            || node.metadata.deletion_timestamp.is_some()
            || tainted_disrupted,
        last_pod_event: status.and_then(|s| s.last_pod_event_time.as_ref()).map(|t| t.0.as_second()).or(initialized_at),
        annotations: all_annotations,
        instance_type,
        zone,
        capacity_type,
        price,
        nodepool_hash: annotations.get(tenon_api::wellknown::ANNOTATION_NODEPOOL_HASH).cloned(),
        nodepool_hash_version: annotations.get(tenon_api::wellknown::ANNOTATION_NODEPOOL_HASH_VERSION).cloned(),
        drift: cond(condition::DRIFTED).filter(|c| c.is_true()).map(|c| c.reason.clone()),
        drifted_since: cond(condition::DRIFTED).filter(|c| c.is_true()).map(|c| c.last_transition_time.0.as_second()),
    }
}

/// Requirements written back as API requirements (a NodeClaim's `spec.requirements`): one
/// entry per constraint a requirement carries (`NotIn` plus `Gt`/`Lt` bounds become several).
pub fn api_requirements(reqs: &Requirements) -> Vec<NodeSelectorRequirementWithMinValues> {
    let mut out = Vec::new();
    for r in reqs.iter() {
        let mut parts: Vec<(&str, Vec<String>)> = Vec::new();
        let (gt, lt) = r.bounds();
        match (r.is_complement(), r.values().is_empty()) {
            (false, false) => parts.push(("In", r.values().to_vec())),
            (false, true) => parts.push(("DoesNotExist", vec![])),
            (true, false) => parts.push(("NotIn", r.values().to_vec())),
            (true, true) => {}
        }
        if let Some(g) = gt {
            parts.push(("Gt", vec![g.to_string()]));
        }
        if let Some(l) = lt {
            parts.push(("Lt", vec![l.to_string()]));
        }
        if parts.is_empty() {
            parts.push(("Exists", vec![]));
        }
        for (i, (op, values)) in parts.into_iter().enumerate() {
            out.push(NodeSelectorRequirementWithMinValues {
                key: r.key.clone(),
                operator: op.to_string(),
                values,
                min_values: if i == 0 { r.min_values.map(i64::from) } else { None },
            });
        }
    }
    out
}

/// `objects`, each behind its own [`Arc`], as [`ClusterObjects`] holds them.
pub fn shared<T>(objects: impl IntoIterator<Item = T>) -> Vec<Arc<T>> {
    objects.into_iter().map(Arc::new).collect()
}

/// Everything read from the API server that a decision needs, and the kube-scheduler
/// settings it mirrors. The objects are the cache's own, shared: a view of ten thousand pods
/// costs ten thousand pointers, not ten thousand copies.
#[derive(Clone, Debug, Default)]
pub struct ClusterObjects {
    pub nodepools: Vec<Arc<NodePool>>,
    pub nodeclaims: Vec<Arc<NodeClaim>>,
    pub nodes: Vec<Arc<core::Node>>,
    pub pods: Vec<Arc<cached_pod::Pod>>,
    pub daemonsets: Vec<Arc<apps::DaemonSet>>,
    pub pdbs: Vec<Arc<policy::PodDisruptionBudget>>,
    pub namespaces: Vec<Arc<core::Namespace>>,
    pub claims: Vec<Arc<core::PersistentVolumeClaim>>,
    pub volumes: Vec<Arc<core::PersistentVolume>>,
    pub storage_classes: Vec<Arc<storage::StorageClass>>,
    /// Volumes attached to nodes: a node's termination waits for them to detach.
    pub volume_attachments: Vec<Arc<storage::VolumeAttachment>>,
    /// Each node's CSI drivers and how many volumes they can attach there.
    pub csi_nodes: Vec<Arc<storage::CSINode>>,
    /// What selects pods, for default spread constraints (read only when they are set).
    pub services: Vec<Arc<core::Service>>,
    pub replica_sets: Vec<Arc<apps::ReplicaSet>>,
    pub stateful_sets: Vec<Arc<apps::StatefulSet>>,
    pub replication_controllers: Vec<Arc<core::ReplicationController>>,
    /// The cluster's kube-scheduler settings the simulation mirrors (`SCHEDULER_CONFIG`).
    pub scheduler: SchedulerConfig,
    /// When the pods on each node (by name) last changed as the pod watch saw it, Unix
    /// seconds. `status.lastPodEventTime` is written after the change and reaches the cache
    /// later still; a decision that sees the pods must see the time too.
    pub pod_changes: std::collections::BTreeMap<String, i64>,
}

/// Builds the snapshot a decision sees. Objects that cannot be read are left out and
/// returned as errors (so one bad pod cannot stop provisioning for the rest); `catalog`
/// gives each NodePool the instance types its NodeClass can launch. Pods that are neither
/// bound nor provisionable (gated, terminal, DaemonSet-owned, not yet tried by
/// kube-scheduler) are left out; NodeClaims whose Node exists are represented by the Node.
pub fn snapshot(
    objects: &ClusterObjects,
    catalog: &dyn Fn(&NodePool) -> Arc<Vec<InstanceType>>,
    now: i64,
) -> (crate::ClusterSnapshot, Vec<ConvertError>) {
    let mut errors = Vec::new();
    let mut snap = crate::ClusterSnapshot { now, ..Default::default() };
    for np in &objects.nodepools {
        match nodepool(np, catalog(np)) {
            Ok(t) => snap.nodepools.push(t),
            Err(e) => errors.push(e),
        }
    }
    let startup = |pool: Option<&String>| -> Vec<Taint> {
        pool.and_then(|p| snap.nodepools.iter().find(|t| &t.name == p))
            .map(|t| t.startup_taints.clone())
            .unwrap_or_default()
    };
    let mut node_names = std::collections::BTreeSet::new();
    let mut nodes = Vec::new();
    for n in &objects.nodes {
        let pool = n.metadata.labels.as_ref().and_then(|l| l.get(LABEL_NODEPOOL));
        let name = n.metadata.name.as_deref();
        let provider_id = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
        let claim = objects.nodeclaims.iter().filter(|nc| crate::nodeclaim::is_managed(nc)).find(|nc| {
            let st = nc.status.as_ref();
            (name.is_some() && st.and_then(|s| s.node_name.as_deref()) == name)
                || (provider_id.is_some() && st.and_then(|s| s.provider_id.as_deref()) == provider_id)
        });
        let startup_taints = claim.map(|_| startup(pool));
        match node(n, startup_taints.as_deref()) {
            Ok(mut converted) => {
                if let Some(nc) = claim {
                    let types = pool
                        .and_then(|p| snap.nodepools.iter().find(|t| &t.name == p))
                        .map(|t| t.instance_types.clone())
                        .unwrap_or_default();
                    let mut info = claim_info(nc, n, &types);
                    if let Some(&seen) = objects.pod_changes.get(&converted.name) {
                        info.last_pod_event = Some(info.last_pod_event.map_or(seen, |t| t.max(seen)));
                    }
                    converted.claim = Some(info);
                    // Until the kubelet reports allocatable, the NodeClaim's (from launch)
                    // stands in, so the pods it was made for are not provisioned for again.
                    if converted.allocatable == Resources::default()
                        && let Some(st) = nc.status.as_ref().filter(|s| !s.allocatable.is_empty())
                        && let Ok(a) = resources(
                            Some(&st.allocatable),
                            &format!("NodeClaim {}", converted.name),
                            "status.allocatable",
                        )
                    {
                        converted.allocatable = a;
                    }
                }
                node_names.insert(converted.name.clone());
                nodes.push(converted);
            }
            Err(e) => errors.push(e),
        }
    }
    for nc in &objects.nodeclaims {
        let has_node = nc.status.as_ref().and_then(|s| s.node_name.as_ref()).is_some_and(|n| node_names.contains(n));
        if has_node || !crate::nodeclaim::is_managed(nc) {
            continue;
        }
        match in_flight_nodeclaim(nc) {
            Ok(n) => nodes.push(n),
            Err(e) => errors.push(e),
        }
    }
    snap.nodes = nodes;
    snap.volume_limits = objects
        .csi_nodes
        .iter()
        .filter(|c| c.metadata.name.as_ref().is_some_and(|n| node_names.contains(n)))
        .map(|c| (c.metadata.name.clone().unwrap_or_default(), crate::volume_usage::limits(c)))
        .filter(|(_, l)| !l.is_empty())
        .collect();
    let mut default_spread = DefaultSpread::new(
        objects.scheduler.default_constraints(),
        Selecting {
            services: &objects.services,
            replica_sets: &objects.replica_sets,
            stateful_sets: &objects.stateful_sets,
            replication_controllers: &objects.replication_controllers,
        },
    );
    snap.pods.reserve_exact(objects.pods.len());
    for p in &objects.pods {
        let bound = p.spec.as_ref().is_some_and(|s| s.node_name.is_some());
        let counts = (bound && is_active(p)) || is_provisionable(p);
        if !counts {
            continue;
        }
        match pod(p) {
            Ok(mut converted) => {
                if !bound
                    && let Some(e) = volume_problem(p, &objects.claims, &objects.volumes, &objects.storage_classes)
                {
                    errors.push(e);
                    continue;
                }
                converted.volume_requirements =
                    volume_requirements(p, &objects.claims, &objects.volumes, &objects.storage_classes);
                converted.volumes =
                    crate::volume_usage::pod_volumes(p, &objects.claims, &objects.volumes, &objects.storage_classes);
                let defaults = default_spread.for_pod(p);
                converted.spread.extend(defaults.iter().map(|c| spread_constraint(c, &converted.labels)));
                snap.pods.push(converted);
            }
            Err(e) => errors.push(e),
        }
    }
    let running = daemonset_pods(&objects.pods);
    for ds in &objects.daemonsets {
        let key = (ds.metadata.namespace.as_deref().unwrap_or("default"), ds.metadata.name.as_deref().unwrap_or(""));
        // Its pod, unless the name is an earlier DaemonSet's (by UID, when the object has one).
        let pod =
            running.get(&key).filter(|(_, uid)| ds.metadata.uid.as_deref().is_none_or(|u| u == *uid)).map(|&(p, _)| p);
        match daemonset(ds, pod) {
            Ok(d) => snap.daemonsets.push(d),
            Err(e) => errors.push(e),
        }
    }
    snap.pdbs = objects.pdbs.iter().map(|p| pdb(p)).collect();
    snap.namespaces = objects
        .namespaces
        .iter()
        .filter_map(|n| Some((n.metadata.name.clone()?, n.metadata.labels.clone().unwrap_or_default())))
        .collect();
    (snap, errors)
}
