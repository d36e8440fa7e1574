//! The simulated EC2 and the launch of a NodeClaim into it. A NodeClaim is created from a
//! plan (carrying the ranking the NodePool's scorer made) and launched as the controller
//! launches: `orchestration::launch` narrows the ranking into one CreateFleet request; this
//! EC2 answers like a prioritized instant fleet (the first override with capacity; the ones
//! before it fail for capacity and are cached unavailable for 3 minutes); a launch nothing
//! could serve fails the NodeClaim with `InsufficientCapacityError` and deletes it.

use super::objects::{NodeClaimRecord, Phase, SimError, SimNode};
use super::{World, err};
use crate::scenario::Settings;
use std::collections::BTreeMap;
use std::sync::Arc;
use tenon_api::wellknown as wk;
use tenon_core::catalog::{AwsCatalogOptions, aws};
use tenon_core::cloud::{LaunchOption, UnavailableOffering};
use tenon_core::instancetype::InstanceType;
use tenon_core::model::{ClusterSnapshot, NodePoolTemplate};
use tenon_core::orchestration::ice::UnavailableOfferings;
use tenon_core::orchestration::launch::{self, AfterFailure, LaunchFailure, RankedOffering};
use tenon_core::plan::NewNodeClaim;
use tenon_core::requirements::{Requirement, Requirements};

/// A NodeClaim to create: what the NodeClaim object carries in the controller.
#[derive(Clone, Debug)]
pub(super) struct Planned {
    pub(super) nodepool: String,
    pub(super) requirements: Requirements,
    pub(super) ranking: Vec<RankedOffering>,
    pub(super) pods: usize,
}

impl Planned {
    pub(super) fn new(nc: &NewNodeClaim, snap: &ClusterSnapshot) -> Planned {
        let requirements = nc.requirements.iter().filter(|r| r.key != wk::LABEL_HOSTNAME).cloned().collect();
        Planned {
            nodepool: nc.nodepool_name.clone(),
            requirements,
            ranking: launch::ranking(nc, snap),
            pods: nc.pods.len(),
        }
    }
}

/// EC2 as the world sees it.
pub(super) struct Cloud {
    /// Every instance type and offering, as EC2 lists them.
    base: Arc<Vec<InstanceType>>,
    /// The same with the cached-unavailable offerings marked: what decisions see.
    view: Arc<Vec<InstanceType>>,
    ice: UnavailableOfferings,
    /// How many entries the view was built with (an expired entry changes it).
    ice_entries: usize,
    /// Offerings with no capacity: (instance type or `prefix*`, zone, capacity type).
    exhausted: Vec<(String, Option<String>, Option<String>)>,
    /// Spot prices are the bundled model's, not a pinned catalog's.
    modelled: bool,
}

impl Cloud {
    pub(super) fn new(settings: &Settings, pinned: Option<&Vec<InstanceType>>) -> Result<Cloud, SimError> {
        if let Some(types) = pinned {
            let base = Arc::new(types.clone());
            return Ok(Cloud::from(base, false));
        }
        let opts = AwsCatalogOptions { region: settings.region.clone(), ..AwsCatalogOptions::default() };
        let mut catalog = aws(&opts).map_err(err)?;
        for t in &mut catalog {
            let od: BTreeMap<String, f64> = t
                .offerings
                .iter()
                .filter(|o| o.capacity_type == wk::CAPACITY_TYPE_ON_DEMAND)
                .map(|o| (o.zone.clone(), o.price))
                .collect();
            for o in t.offerings.iter_mut().filter(|o| o.capacity_type == wk::CAPACITY_TYPE_SPOT) {
                o.price = od.get(&o.zone).copied().unwrap_or(o.price) * settings.spot_price_factor;
            }
        }
        Ok(Cloud::from(Arc::new(catalog), true))
    }

    fn from(base: Arc<Vec<InstanceType>>, modelled: bool) -> Cloud {
        Cloud {
            view: base.clone(),
            base,
            ice: UnavailableOfferings::default(),
            ice_entries: 0,
            exhausted: Vec::new(),
            modelled,
        }
    }

    pub(super) fn catalog(&self) -> Arc<Vec<InstanceType>> {
        self.view.clone()
    }

    pub(super) fn spot_prices_are_modelled(&self) -> bool {
        self.modelled
    }

    /// No capacity from now on for the offerings `pattern` (a type or `prefix*`) names.
    pub(super) fn exhaust(&mut self, pattern: &str, zone: Option<String>, capacity_type: Option<String>) {
        self.exhausted.push((pattern.to_string(), zone, capacity_type));
    }

    fn has_capacity(&self, o: &LaunchOption) -> bool {
        !self.exhausted.iter().any(|(p, z, c)| {
            let m = match p.strip_suffix('*') {
                Some(prefix) => o.instance_type.starts_with(prefix),
                None => *p == o.instance_type,
            };
            m && z.as_deref().is_none_or(|z| z == o.zone) && c.as_deref().is_none_or(|c| c == o.capacity_type)
        })
    }

    /// Caches `offerings` unavailable as of `now` (ms) and refreshes what decisions see.
    pub(super) fn mark(&mut self, offerings: Vec<UnavailableOffering>, now: i64, pools: &mut [NodePoolTemplate]) {
        for o in offerings {
            self.ice.mark(o, now);
        }
        self.refresh(now, pools);
    }

    /// Drops expired cache entries (the offerings are tried again).
    pub(super) fn expire(&mut self, now: i64, pools: &mut [NodePoolTemplate]) {
        if self.ice_entries > 0 && self.ice.current(now).len() != self.ice_entries {
            self.refresh(now, pools);
        }
    }

    fn refresh(&mut self, now: i64, pools: &mut [NodePoolTemplate]) {
        let mut view = (*self.base).clone();
        self.ice.apply(&mut view, now);
        self.ice_entries = self.ice.current(now).len();
        self.view = Arc::new(view);
        for p in pools {
            p.instance_types = self.view.clone();
        }
    }
}

impl World<'_> {
    /// Creates a NodeClaim for `planned` and launches it; its name (a NodeClaim whose launch
    /// failed is already gone again).
    pub(super) fn create_nodeclaim(&mut self, planned: &Planned, reason: &str) -> String {
        self.ordinal += 1;
        let name = format!("{}-{:05x}", planned.nodepool, self.ordinal * 7919 % 0xfffff);
        self.nodeclaims_created += 1;
        let object = format!("NodeClaim/{name}");
        let options = launch::options(&planned.ranking, &planned.requirements, &self.cloud.catalog());
        let overrides = launch::fleet_request(&options);
        self.event(
            "Created",
            object.clone(),
            format!(
                "{reason}: {} pod(s), {} offering(s) ranked, {} in the fleet request",
                planned.pods,
                planned.ranking.len(),
                overrides.len()
            ),
        );
        let mut record = NodeClaimRecord {
            name: name.clone(),
            nodepool: planned.nodepool.clone(),
            reason: reason.into(),
            launched: None,
            failed: None,
        };
        let (chosen, failed) = launch::prioritized(&overrides, |o| self.cloud.has_capacity(o));
        let chosen = chosen.cloned();
        if !failed.is_empty() {
            let now = self.now_ms();
            self.cloud.mark(failed, now, &mut self.nodepools);
        }
        let Some(offering) = chosen else {
            let failure = LaunchFailure::InsufficientCapacity(if overrides.is_empty() {
                "all requested instance types were unavailable during launch".into()
            } else {
                format!("no capacity for any of {} override(s); offerings cached unavailable", overrides.len())
            });
            if let AfterFailure::Delete { event, message } = launch::after_failure(failure, self.now_ms()) {
                self.event(event, object, message);
                record.failed = Some(event.into());
            }
            self.nodeclaim_log.push(record);
            self.generation += 1;
            return name;
        };
        record.launched = Some((offering.instance_type.clone(), offering.zone.clone(), offering.capacity_type.clone()));
        self.nodeclaim_log.push(record);
        self.launch(&name, planned, &offering);
        name
    }

    /// The instance `offering` starts booting as NodeClaim `name`.
    fn launch(&mut self, name: &str, planned: &Planned, offering: &LaunchOption) {
        let catalog = self.cloud.catalog();
        let Some(it) = catalog.iter().find(|t| t.name == offering.instance_type) else { return };
        let Some(pool) = self.nodepools.iter().find(|p| p.name == planned.nodepool) else { return };
        let mut labels = it.labels();
        labels.extend(pool.labels.clone());
        for (k, v) in [
            (wk::LABEL_ZONE, offering.zone.as_str()),
            (wk::LABEL_CAPACITY_TYPE, offering.capacity_type.as_str()),
            (wk::LABEL_NODEPOOL, planned.nodepool.as_str()),
            (wk::LABEL_HOSTNAME, name),
        ] {
            labels.insert(k.to_string(), v.to_string());
        }
        let node = SimNode {
            name: name.to_string(),
            nodepool: planned.nodepool.clone(),
            instance_type: it.name.clone(),
            zone: offering.zone.clone(),
            capacity_type: offering.capacity_type.clone(),
            price: offering.price,
            created: self.now,
            expire_after: pool.expire_after,
            phase: Phase::Launching,
            next: self.now + self.settings.launch_seconds,
            requirements: labels.iter().map(|(k, v)| Requirement::in_values(k, [v.clone()])).collect(),
            labels,
            pool_taints: pool.taints.clone(),
            startup_taints: pool.startup_taints.clone(),
            taints: Vec::new(),
            allocatable: it.allocatable().clone(),
            capacity: it.capacity.clone(),
            disrupted: false,
            draining: None,
            last_pod_event: self.now,
            hash: pool.hash.clone(),
            reclaim_at: None,
            drain_blocked: None,
        };
        self.nodes.push(node);
        self.generation += 1;
    }
}
