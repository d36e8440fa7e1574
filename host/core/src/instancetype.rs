//! Instance types and their offerings (zone × capacity type, with price and availability).

use crate::requirements::{Operator, Requirement, Requirements};
use crate::resources::Resources;
use tenon_api::wellknown::{
    CAPACITY_TYPE_ON_DEMAND, CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT, LABEL_CAPACITY_TYPE, LABEL_ZONE, LABEL_ZONE_ID,
};

#[derive(Clone, Debug, PartialEq)]
pub struct Offering {
    pub zone: String,
    /// The zone's ID (`use1-az1`), where the cloud names it: `topology.k8s.aws/zone-id`.
    pub zone_id: Option<String>,
    pub capacity_type: String,
    /// USD per hour.
    pub price: f64,
    pub available: bool,
}

impl Offering {
    /// Whether it is available in a zone (by name and ID) and capacity type `reqs` allow.
    pub fn allowed_by(&self, reqs: &Requirements) -> bool {
        self.available
            && reqs.get(LABEL_ZONE).is_none_or(|z| z.has(&self.zone))
            && reqs.get(LABEL_ZONE_ID).is_none_or(|z| match &self.zone_id {
                Some(id) => z.has(id),
                // A zone without an ID meets only requirements that allow its absence.
                None => matches!(z.operator(), Operator::NotIn | Operator::DoesNotExist),
            })
            && reqs.get(LABEL_CAPACITY_TYPE).is_none_or(|c| c.has(&self.capacity_type))
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct InstanceType {
    pub name: String,
    /// Label requirements the type satisfies (`In [value]` per label), including the zones and
    /// capacity types of its offerings.
    pub requirements: Requirements,
    pub capacity: Resources,
    /// Reserved for the kubelet, the system and eviction.
    pub overhead: Resources,
    pub offerings: Vec<Offering>,
    allocatable: Resources,
}

impl InstanceType {
    pub fn new(
        name: &str,
        mut requirements: Requirements,
        capacity: Resources,
        overhead: Resources,
        offerings: Vec<Offering>,
    ) -> Self {
        let mut zones: Vec<&str> = offerings.iter().map(|o| o.zone.as_str()).collect();
        zones.sort();
        zones.dedup();
        let mut cts: Vec<&str> = offerings.iter().map(|o| o.capacity_type.as_str()).collect();
        cts.sort();
        cts.dedup();
        requirements.add(Requirement::in_values(LABEL_ZONE, zones));
        let mut zone_ids: Vec<&str> = offerings.iter().filter_map(|o| o.zone_id.as_deref()).collect();
        zone_ids.sort();
        zone_ids.dedup();
        if !zone_ids.is_empty() {
            requirements.add(Requirement::in_values(LABEL_ZONE_ID, zone_ids));
        }
        requirements.add(Requirement::in_values(LABEL_CAPACITY_TYPE, cts));
        let mut allocatable = capacity.clone();
        allocatable.sub(&overhead);
        InstanceType { name: name.to_string(), requirements, capacity, overhead, offerings, allocatable }
    }

    pub fn allocatable(&self) -> &Resources {
        &self.allocatable
    }

    /// Available offerings whose zone and capacity type `reqs` allow.
    pub fn compatible_offerings<'a>(&'a self, reqs: &'a Requirements) -> impl Iterator<Item = &'a Offering> + 'a {
        self.offerings.iter().filter(move |o| o.allowed_by(reqs))
    }

    /// The cheapest available offering `reqs` allow.
    pub fn cheapest<'a>(&'a self, reqs: &'a Requirements) -> Option<&'a Offering> {
        self.compatible_offerings(reqs).min_by(|a, b| a.price.total_cmp(&b.price))
    }

    /// Karpenter's `WorstLaunchPrice`: the dearest available offering `reqs` allow of the
    /// first capacity type that has one, reserved, then spot, then on-demand (what a launch
    /// could cost at worst, since CreateFleet picks among them).
    pub fn worst_launch_price(&self, reqs: &Requirements) -> Option<f64> {
        [CAPACITY_TYPE_RESERVED, CAPACITY_TYPE_SPOT, CAPACITY_TYPE_ON_DEMAND].iter().find_map(|ct| {
            self.compatible_offerings(reqs).filter(|o| o.capacity_type == *ct).map(|o| o.price).max_by(f64::total_cmp)
        })
    }

    /// Its single-valued labels (zones and capacity types, which vary by offering, are left out).
    pub fn labels(&self) -> std::collections::BTreeMap<String, String> {
        self.requirements
            .iter()
            .filter(|r| r.values().len() == 1 && !r.is_complement())
            .map(|r| (r.key.clone(), r.values()[0].clone()))
            .collect()
    }

    /// A label value of this type (`karpenter.k8s.aws/instance-cpu` → `8`).
    pub fn label(&self, key: &str) -> Option<&str> {
        self.requirements.get(key).and_then(|r| if r.values().len() == 1 { r.any() } else { None })
    }
}
