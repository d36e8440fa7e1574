//! Launching a NodeClaim, the same way in the controller and the simulator.
//!
//! The plan ranks a NodeClaim's offerings once, when the NodePool's scorer sees its pods;
//! the ranking travels on the NodeClaim ([`ANNOTATION_LAUNCH_OFFERINGS`]) so a launch, even
//! after a restart, honours it. The launch narrows the ranking as Karpenter's AWS provider
//! narrows a launch (offerings gone or cached unavailable out, exotic types and dear spot
//! out) and asks for one prioritized CreateFleet: the best option's capacity type, at most
//! [`MAX_FLEET_TYPES`] types, in ranking order. The cloud launches the first override with
//! capacity; what failed for capacity is cached unavailable; a launch nothing could serve
//! fails the NodeClaim, which is deleted so its pods get a new decision.

use crate::cloud::{LaunchOption, UnavailableOffering};
use crate::instancetype::InstanceType;
use crate::model::ClusterSnapshot;
use crate::plan::NewNodeClaim;
use crate::requirements::Requirements;
use crate::resources::Resources;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tenon_api::wellknown::{self as wk, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_SIZE};

pub use tenon_api::wellknown::ANNOTATION_LAUNCH_OFFERINGS;

/// Resources that make a type exotic: a pod that does not ask for them should not pay for them.
const EXOTIC_RESOURCES: [&str; 5] = [
    wk::RESOURCE_NVIDIA_GPU,
    wk::RESOURCE_AMD_GPU,
    wk::RESOURCE_HABANA_GAUDI,
    wk::RESOURCE_AWS_NEURON,
    wk::RESOURCE_AWS_NEURON_CORE,
];

/// Karpenter's cap on instance types per CreateFleet request.
pub const MAX_FLEET_TYPES: usize = 60;
/// A launch that failed for another reason than capacity is tried again after this long.
pub const RETRY_MS: i64 = 5_000;

/// One offering a NodeClaim may launch as.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RankedOffering {
    pub instance_type: String,
    pub zone: String,
    pub capacity_type: String,
}

/// The plan's ranking of `nc`'s offerings, best first.
pub fn ranking(nc: &NewNodeClaim, snap: &ClusterSnapshot) -> Vec<RankedOffering> {
    let cat = &snap.nodepools[nc.nodepool].instance_types;
    nc.offerings
        .iter()
        .map(|&(t, o)| {
            let it = &cat[t as usize];
            let off = &it.offerings[o as usize];
            RankedOffering {
                instance_type: it.name.clone(),
                zone: off.zone.clone(),
                capacity_type: off.capacity_type.clone(),
            }
        })
        .collect()
}

/// Whether `it` satisfies `reqs` and holds `requests`.
pub fn type_fits(it: &InstanceType, reqs: &Requirements, requests: &Resources) -> bool {
    requests.fits_in(it.allocatable())
        && reqs.iter().all(|r| match it.requirements.get(&r.key) {
            Some(a) => a.overlaps(r),
            None => true,
        })
}

/// Metal sizes and accelerator types.
fn is_exotic(it: &InstanceType) -> bool {
    it.requirements.get(LABEL_INSTANCE_SIZE).is_some_and(|r| r.values().iter().any(|s| s.contains("metal")))
        || EXOTIC_RESOURCES.iter().any(|r| it.capacity.get(r) > 0)
}

/// Karpenter's order for a NodeClaim Tenon did not plan (no ranking on it): its compatible
/// available offerings, cheapest first.
pub fn price_ranking(reqs: &Requirements, requests: &Resources, types: &[InstanceType]) -> Vec<RankedOffering> {
    let mut out: Vec<(f64, RankedOffering)> = types
        .iter()
        .filter(|it| type_fits(it, reqs, requests))
        .flat_map(|it| {
            it.offerings.iter().filter(|o| o.allowed_by(reqs)).map(move |o| {
                let r = RankedOffering {
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type.clone(),
                };
                (o.price, r)
            })
        })
        .collect();
    out.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    out.into_iter().map(|(_, r)| r).collect()
}

/// The annotation's value: the names once each, then the ranking as indices into them
/// (`v1;<types>;<zones>;<capacity types>;<t.z.c> …`), so 600 types in every zone and
/// capacity type stay well under Kubernetes' 256 KiB annotation limit.
pub fn encode(ranking: &[RankedOffering]) -> String {
    fn index<'a>(names: &mut Vec<&'a str>, at: &mut BTreeMap<&'a str, usize>, name: &'a str) -> usize {
        *at.entry(name).or_insert_with(|| {
            names.push(name);
            names.len() - 1
        })
    }
    let (mut types, mut zones, mut cts) = (Vec::new(), Vec::new(), Vec::new());
    let (mut ti, mut zi, mut ci) = (BTreeMap::new(), BTreeMap::new(), BTreeMap::new());
    let entries: Vec<String> = ranking
        .iter()
        .map(|r| {
            let t = index(&mut types, &mut ti, &r.instance_type);
            let z = index(&mut zones, &mut zi, &r.zone);
            let c = index(&mut cts, &mut ci, &r.capacity_type);
            format!("{t}.{z}.{c}")
        })
        .collect();
    format!("v1;{};{};{};{}", types.join(","), zones.join(","), cts.join(","), entries.join(" "))
}

/// Reads [`encode`]'s value back.
pub fn decode(s: &str) -> Result<Vec<RankedOffering>, String> {
    let parts: Vec<&str> = s.splitn(5, ';').collect();
    let [version, types, zones, cts, entries] = parts[..] else {
        return Err("expected v1;<types>;<zones>;<capacity types>;<entries>".into());
    };
    if version != "v1" {
        return Err(format!("unknown version {version:?}"));
    }
    let list = |s: &str| -> Vec<String> { s.split(',').filter(|x| !x.is_empty()).map(str::to_string).collect() };
    let (types, zones, cts) = (list(types), list(zones), list(cts));
    entries
        .split_whitespace()
        .map(|e| {
            let ix: Vec<usize> = e.split('.').map(|n| n.parse::<usize>()).collect::<Result<_, _>>().map_err(|_| e)?;
            match ix[..] {
                [t, z, c] if t < types.len() && z < zones.len() && c < cts.len() => Ok(RankedOffering {
                    instance_type: types[t].clone(),
                    zone: zones[z].clone(),
                    capacity_type: cts[c].clone(),
                }),
                _ => Err(e),
            }
        })
        .collect::<Result<_, _>>()
        .map_err(|e: &str| format!("entry {e:?} does not name a listed type, zone and capacity type"))
}

/// What a launch offers the cloud, best first: the ranking's offerings still in `types` and
/// available there (the catalog a launch sees has cached-unavailable offerings marked),
/// narrowed as Karpenter's AWS provider narrows a launch unless a requirement sets
/// minValues (whose flexibility the narrowing would undo): exotic types (metal,
/// accelerators) out while a generic one is left, and, when both capacity types are
/// allowed, spot offerings dearer than the cheapest on-demand one out.
pub fn options(ranking: &[RankedOffering], reqs: &Requirements, types: &[InstanceType]) -> Vec<LaunchOption> {
    let by_name: BTreeMap<&str, &InstanceType> = types.iter().map(|t| (t.name.as_str(), t)).collect();
    // One label map per type, shared by its offerings.
    let mut labels: BTreeMap<&str, Arc<BTreeMap<String, String>>> = BTreeMap::new();
    let mut out: Vec<(LaunchOption, bool)> = ranking
        .iter()
        .filter_map(|r| {
            let it = by_name.get(r.instance_type.as_str())?;
            let o = it.offerings.iter().find(|o| o.zone == r.zone && o.capacity_type == r.capacity_type)?;
            o.available.then(|| {
                let option = LaunchOption {
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type.clone(),
                    price: o.price,
                    labels: labels.entry(it.name.as_str()).or_insert_with(|| Arc::new(it.labels())).clone(),
                };
                (option, is_exotic(it))
            })
        })
        .collect();
    if reqs.iter().any(|r| r.min_values.is_some()) {
        return out.into_iter().map(|(o, _)| o).collect();
    }
    if out.iter().any(|(_, exotic)| !exotic) {
        out.retain(|(_, exotic)| !exotic);
    }
    let both = reqs
        .get(LABEL_CAPACITY_TYPE)
        .is_none_or(|r| r.has(wk::CAPACITY_TYPE_SPOT) && r.has(wk::CAPACITY_TYPE_ON_DEMAND));
    let cheapest_on_demand = out
        .iter()
        .filter(|(o, _)| o.capacity_type == wk::CAPACITY_TYPE_ON_DEMAND)
        .map(|(o, _)| o.price)
        .min_by(f64::total_cmp);
    if both && let Some(limit) = cheapest_on_demand {
        out.retain(|(o, _)| o.capacity_type != wk::CAPACITY_TYPE_SPOT || o.price <= limit);
    }
    out.into_iter().map(|(o, _)| o).collect()
}

/// The overrides of one CreateFleet request, best first: the best option's capacity type,
/// and of that capacity type the options of the first [`MAX_FLEET_TYPES`] types.
pub fn fleet_request(options: &[LaunchOption]) -> Vec<LaunchOption> {
    let Some(first) = options.first() else { return Vec::new() };
    let mut types: BTreeSet<&str> = BTreeSet::new();
    options
        .iter()
        .filter(|o| o.capacity_type == first.capacity_type)
        .filter(|o| {
            types.contains(o.instance_type.as_str()) || types.len() < MAX_FLEET_TYPES && types.insert(&o.instance_type)
        })
        .cloned()
        .collect()
}

/// How a prioritized instant fleet answers: the first override with capacity, and every
/// override before it, which failed for capacity (all of them when none had capacity).
pub fn prioritized(
    overrides: &[LaunchOption],
    has_capacity: impl Fn(&LaunchOption) -> bool,
) -> (Option<&LaunchOption>, Vec<UnavailableOffering>) {
    let mut failed = Vec::new();
    for o in overrides {
        if has_capacity(o) {
            return (Some(o), failed);
        }
        failed.push(UnavailableOffering {
            instance_type: o.instance_type.clone(),
            zone: o.zone.clone(),
            capacity_type: o.capacity_type.clone(),
        });
    }
    (None, failed)
}

/// Why a launch failed, as far as what happens next depends on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaunchFailure {
    /// No option had capacity (each is cached unavailable now).
    InsufficientCapacity(String),
    /// The NodeClass cannot launch (no subnets, AMIs, instance profile…).
    NodeClassNotReady(String),
    /// Anything else: the `Launched` condition's reason (Karpenter's `CreateError` reason,
    /// `LaunchFailed` when the cloud gave none) and message.
    Other { reason: String, message: String },
}

/// Karpenter's cap on a launch error's message in the `Launched` condition.
const MESSAGE_LIMIT: usize = 300;

impl LaunchFailure {
    /// A failure the cloud gave no reason for: `LaunchFailed`, its message capped as
    /// Karpenter caps it.
    pub fn unnamed(message: &str) -> LaunchFailure {
        let message = match message.char_indices().nth(MESSAGE_LIMIT) {
            Some((at, _)) => format!("{}...", &message[..at]),
            None => message.to_string(),
        };
        LaunchFailure::Other { reason: "LaunchFailed".into(), message }
    }
}

/// What a failed launch does to its NodeClaim (Karpenter's launch controller).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AfterFailure {
    /// Delete the NodeClaim: its pods get a new decision, which sees what is unavailable now.
    /// `event` is the reason of the Warning Event published on the NodeClaim first.
    Delete { event: &'static str, message: String },
    /// Keep it (`Launched` Unknown with `reason` and `message`) and try again at `at` (ms).
    Retry { at: i64, reason: String, message: String },
}

pub fn after_failure(failure: LaunchFailure, now: i64) -> AfterFailure {
    match failure {
        LaunchFailure::InsufficientCapacity(m) => {
            AfterFailure::Delete { event: "InsufficientCapacityError", message: m }
        }
        LaunchFailure::NodeClassNotReady(m) => AfterFailure::Delete { event: "NodeClassNotReady", message: m },
        LaunchFailure::Other { reason, message } => AfterFailure::Retry { at: now + RETRY_MS, reason, message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::instancetype::Offering;
    use crate::requirements::{Operator, Requirement};

    fn offer(t: &str, z: &str, c: &str) -> RankedOffering {
        RankedOffering { instance_type: t.into(), zone: z.into(), capacity_type: c.into() }
    }

    fn it(name: &str, size: &str, offerings: &[(&str, &str, f64)]) -> InstanceType {
        let reqs = Requirements::from_iter([
            Requirement::in_values(wk::LABEL_INSTANCE_TYPE, [name]),
            Requirement::in_values(wk::LABEL_INSTANCE_SIZE, [size]),
        ]);
        let offerings = offerings
            .iter()
            .map(|(z, c, p)| Offering {
                zone_id: None,
                zone: z.to_string(),
                capacity_type: c.to_string(),
                price: *p,
                available: true,
            })
            .collect();
        InstanceType::new(name, reqs, Resources::new(4000, 8 << 30, 10), Resources::default(), offerings)
    }

    #[test]
    fn the_annotation_round_trips_and_stays_small() {
        let ranking = vec![
            offer("c6a.large", "us-east-1a", "spot"),
            offer("m6a.large", "us-east-1b", "on-demand"),
            offer("c6a.large", "us-east-1b", "on-demand"),
        ];
        let s = encode(&ranking);
        assert_eq!(s, "v1;c6a.large,m6a.large;us-east-1a,us-east-1b;spot,on-demand;0.0.0 1.1.1 0.1.1");
        assert_eq!(decode(&s).unwrap(), ranking);
        assert_eq!(decode(&encode(&[])).unwrap(), vec![]);
        // 600 types × 6 zones × 2 capacity types.
        let big: Vec<RankedOffering> = (0..600)
            .flat_map(|t| {
                (0..6).flat_map(move |z| {
                    ["spot", "on-demand"].map(|c| offer(&format!("type{t}.48xlarge"), &format!("us-east-1{z}"), c))
                })
            })
            .collect();
        let s = encode(&big);
        assert!(s.len() < 128 * 1024, "{} bytes", s.len());
        assert_eq!(decode(&s).unwrap(), big);
    }

    #[test]
    fn a_bad_annotation_is_an_error_not_a_guess() {
        for bad in ["", "v2;a;b;c;0.0.0", "v1;a;b;c;0.0.1", "v1;a;b;c;x.0.0", "v1;a;b;c;0.0"] {
            assert!(decode(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_keep_the_ranking_and_drop_what_is_gone_exotic_or_dear_spot() {
        let mut types = vec![
            it("m5.large", "large", &[("a", "on-demand", 0.10), ("a", "spot", 0.04), ("b", "spot", 0.20)]),
            it("c5.large", "large", &[("a", "on-demand", 0.09)]),
            it("m5.metal", "metal", &[("a", "on-demand", 5.0)]),
        ];
        types[1].offerings[0].available = false;
        let ranking = vec![
            offer("m5.metal", "a", "on-demand"),
            offer("m5.large", "b", "spot"),
            offer("c5.large", "a", "on-demand"),
            offer("m5.large", "a", "on-demand"),
            offer("gone.large", "a", "on-demand"),
            offer("m5.large", "a", "spot"),
        ];
        let got: Vec<(String, String, String)> = options(&ranking, &Requirements::default(), &types)
            .into_iter()
            .map(|o| (o.instance_type, o.zone, o.capacity_type))
            .collect();
        // metal: exotic; m5.large/b/spot: dearer than on-demand; c5.large: unavailable; gone.large: not in the catalog.
        let want = [("m5.large", "a", "on-demand"), ("m5.large", "a", "spot")];
        assert_eq!(got, want.map(|(t, z, c)| (t.into(), z.into(), c.into())));
        // minValues keeps everything the catalog still offers.
        let mv = Requirements::from_iter([{
            let mut r = Requirement::new(wk::LABEL_INSTANCE_TYPE, Operator::Exists, Vec::<String>::new());
            r.min_values = Some(2);
            r
        }]);
        assert_eq!(options(&ranking, &mv, &types).len(), 4);
    }

    #[test]
    fn a_fleet_request_is_one_capacity_type_and_at_most_sixty_types() {
        let opt = |t: usize, c: &str| LaunchOption {
            instance_type: format!("t{t}.large"),
            zone: "a".into(),
            capacity_type: c.into(),
            price: t as f64,
            labels: Default::default(),
        };
        let mut options = vec![opt(0, "spot"), opt(1, "on-demand")];
        options.extend((2..100).map(|t| opt(t, "spot")));
        options.push(opt(2, "spot"));
        let req = fleet_request(&options);
        assert!(req.iter().all(|o| o.capacity_type == "spot"));
        let types: BTreeSet<&str> = req.iter().map(|o| o.instance_type.as_str()).collect();
        assert_eq!(types.len(), MAX_FLEET_TYPES);
        assert_eq!(req.len(), MAX_FLEET_TYPES + 1, "a kept type keeps all its offerings");
        assert_eq!(req[0].instance_type, "t0.large");
        assert!(fleet_request(&[]).is_empty());
    }

    #[test]
    fn a_prioritized_fleet_launches_the_first_override_with_capacity() {
        let opts: Vec<LaunchOption> = ["a", "b", "c"]
            .iter()
            .map(|t| LaunchOption {
                instance_type: t.to_string(),
                zone: "z".into(),
                capacity_type: "spot".into(),
                price: 1.0,
                labels: Default::default(),
            })
            .collect();
        let (got, failed) = prioritized(&opts, |o| o.instance_type != "a");
        assert_eq!(got.map(|o| o.instance_type.as_str()), Some("b"));
        assert_eq!(failed.iter().map(|f| f.instance_type.as_str()).collect::<Vec<_>>(), ["a"]);
        let (got, failed) = prioritized(&opts, |_| false);
        assert!(got.is_none());
        assert_eq!(failed.len(), 3);
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/launch_test.go:89
    /// karpenter:pkg/controllers/nodeclaim/lifecycle/launch_test.go:97
    #[test]
    fn capacity_errors_delete_the_nodeclaim_other_errors_retry() {
        assert!(matches!(
            after_failure(LaunchFailure::InsufficientCapacity("x".into()), 0),
            AfterFailure::Delete { event: "InsufficientCapacityError", .. }
        ));
        assert!(matches!(after_failure(LaunchFailure::NodeClassNotReady("x".into()), 0), AfterFailure::Delete { .. }));
        assert_eq!(
            after_failure(LaunchFailure::unnamed("x"), 1_000),
            AfterFailure::Retry { at: 6_000, reason: "LaunchFailed".into(), message: "x".into() }
        );
    }

    /// karpenter:pkg/controllers/nodeclaim/lifecycle/launch_test.go:105
    #[test]
    fn a_named_launch_error_keeps_its_reason_and_message_an_unnamed_one_is_capped() {
        let named = LaunchFailure::Other { reason: "CustomReason".into(), message: "custom message".into() };
        assert_eq!(
            after_failure(named, 0),
            AfterFailure::Retry { at: RETRY_MS, reason: "CustomReason".into(), message: "custom message".into() }
        );
        let LaunchFailure::Other { reason, message } = LaunchFailure::unnamed(&"é".repeat(400)) else { panic!() };
        assert_eq!(reason, "LaunchFailed");
        assert_eq!(message, format!("{}...", "é".repeat(300)));
    }
}
