//! Scenario files: the manifests a user applies, a timeline of changes, and expectations
//! checked at given times, so a scenario is a test.
//!
//! ```yaml
//! name: lab-general rollout
//! manifests: [../seeds/lab-general/]          # files or directories, relative to this file
//! duration: 15m
//! settings: {start: "2026-11-30T08:30:00Z"}   # optional: the wall clock at 0s
//! timeline:
//!   - at: 0s
//!     scale: {deployment: karpenter-lab/inflate, replicas: 8}
//! expect:
//!   - at: 2m
//!     pendingPods: 0
//!     nodeclaims: {lab-general: {min: 1}}
//! ```

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tenon_api::duration::parse_duration;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ScenarioError {
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

fn invalid(path: &Path, message: impl ToString) -> ScenarioError {
    ScenarioError::Invalid { path: path.display().to_string(), message: message.to_string() }
}

/// Virtual time written as a duration (`90s`, `10m`, `1h30m`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct At(pub i64);

impl<'de> Deserialize<'de> for At {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        parse_duration(&s)
            .map(|d| At(d.as_secs() as i64))
            .map_err(|e| serde::de::Error::custom(format!("{e} (write e.g. 90s, 10m, 1h)")))
    }
}

fn rfc3339<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Time>, D::Error> {
    let s = String::deserialize(d)?;
    serde_json::from_value(serde_json::Value::String(s.clone())).map(Some).map_err(|e| {
        serde::de::Error::custom(format!(
            "start must be an RFC 3339 time, got {s:?} ({e}); write e.g. \"2026-11-30T08:30:00Z\""
        ))
    })
}

/// Latencies of the simulated cloud and kubelet, seconds.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Settings {
    pub region: String,
    /// From CreateFleet to the instance running.
    pub launch_seconds: i64,
    /// From running to the Node registered.
    pub register_seconds: i64,
    /// From registered to Ready with startup taints removed.
    pub initialize_seconds: i64,
    /// Provisioning batches close after this much quiet...
    pub batch_idle_seconds: i64,
    /// ...or this long after they opened.
    pub batch_max_seconds: i64,
    /// How often disruption is considered.
    pub disruption_interval_seconds: i64,
    /// Spot is offered at this fraction of the on-demand price (a model, not data).
    pub spot_price_factor: f64,
    /// The wall-clock time the scenario starts at (RFC 3339, `2026-11-30T08:30:00Z`): what
    /// cron budgets and policies see as now. Default: the Unix epoch.
    #[serde(deserialize_with = "rfc3339")]
    pub start: Option<Time>,
    /// A pinned catalog (a JSON file, relative to the scenario): the instance types,
    /// offerings and prices to simulate instead of the bundled EC2 data.
    pub catalog: Option<String>,
    /// Karpenter's `SpotToSpotConsolidation` feature gate (as the controller's
    /// `FEATURE_GATES`): spot nodes may be replaced by cheaper spot nodes.
    pub spot_to_spot_consolidation: bool,
}

impl Default for Settings {
    fn default() -> Self {
        // 1-10 s batching + 30 s launch + 10 s registration + 10 s initialization: the seed
        // runbooks' 40-60 s from Pending to running.
        Settings {
            region: "us-east-1".into(),
            launch_seconds: 30,
            register_seconds: 10,
            initialize_seconds: 10,
            batch_idle_seconds: 1,
            batch_max_seconds: 10,
            disruption_interval_seconds: 10,
            spot_price_factor: tenon_core::catalog::SPOT_PRICE_MODEL_FACTOR,
            start: None,
            catalog: None,
            spot_to_spot_consolidation: false,
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Scale {
    /// `namespace/name`, or `name` in `default`.
    pub deployment: String,
    pub replicas: u32,
}

/// One change at a time.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Step {
    pub at: At,
    pub scale: Option<Scale>,
    /// Apply more manifests (files or directories, relative to the scenario).
    pub apply: Option<Vec<String>>,
    /// Delete a NodePool: its nodes are drained and terminated.
    pub delete_nodepool: Option<String>,
    /// Make an instance type's offerings unavailable (insufficient capacity), optionally in one zone.
    pub exhaust: Option<Exhaust>,
    /// Send a spot interruption warning to the oldest spot node(s) of a NodePool: the node is
    /// drained at once and its instance reclaimed two minutes later.
    pub interrupt_spot: Option<Interrupt>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Interrupt {
    pub nodepool: String,
    #[serde(default = "one")]
    pub count: usize,
}

fn one() -> usize {
    1
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Exhaust {
    /// Instance types, or families with a trailing `*` (`m6a.*`).
    pub instance_types: Vec<String>,
    pub zone: Option<String>,
    pub capacity_type: Option<String>,
}

#[derive(Clone, Debug, Deserialize, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct Count {
    pub min: Option<usize>,
    pub max: Option<usize>,
}

/// What must hold at a time; every given field is checked.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Expectation {
    pub at: At,
    /// Pods not bound to a node.
    pub pending_pods: Option<usize>,
    /// Pods bound and running.
    pub running_pods: Option<usize>,
    /// Live NodeClaims per NodePool.
    #[serde(default)]
    pub nodeclaims: BTreeMap<String, Count>,
    /// Pods bound to the nodes of each NodePool, DaemonSet pods included.
    #[serde(default)]
    #[serde(rename = "podsByNodePool")]
    pub pods_by_nodepool: BTreeMap<String, Count>,
    /// NodeClaims ever created, over all NodePools.
    pub nodeclaims_created: Option<Count>,
    /// Every live node's instance type has these labels (values listed are allowed).
    #[serde(default)]
    pub instance_labels: BTreeMap<String, Vec<String>>,
    /// An event whose reason (and optionally message) matches happened by now.
    pub event: Option<EventMatch>,
    pub cost_per_hour_at_most: Option<f64>,
    /// Voluntary disruptions (nodes) so far.
    pub disruptions: Option<Count>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EventMatch {
    pub reason: String,
    pub message: Option<String>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
struct File {
    name: String,
    #[serde(default)]
    description: String,
    manifests: Vec<String>,
    duration: At,
    #[serde(default)]
    settings: Settings,
    #[serde(default)]
    timeline: Vec<Step>,
    #[serde(default)]
    expect: Vec<Expectation>,
}

/// A loaded scenario: its documents read, paths resolved.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub path: PathBuf,
    pub duration: i64,
    pub settings: Settings,
    /// Kubernetes documents in order.
    pub documents: Vec<serde_json::Value>,
    pub timeline: Vec<(Step, Vec<serde_json::Value>)>,
    pub expect: Vec<Expectation>,
    /// The pinned catalog's instance types (`settings.catalog`), read.
    pub catalog: Option<Vec<tenon_core::instancetype::InstanceType>>,
}

/// YAML documents from files or directories (recursively, `*.yaml|*.yml`, sorted).
pub fn read_documents(base: &Path, paths: &[String]) -> Result<Vec<serde_json::Value>, ScenarioError> {
    let mut files = Vec::new();
    for p in paths {
        let path = base.join(p);
        collect(&path, &mut files).map_err(|e| invalid(&path, e))?;
    }
    let mut docs = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| invalid(&f, e))?;
        for de in serde_yaml::Deserializer::from_str(&text) {
            let v: serde_yaml::Value = Deserialize::deserialize(de).map_err(|e| invalid(&f, e))?;
            if !v.is_null() {
                docs.push(serde_json::to_value(v).map_err(|e| invalid(&f, e))?);
            }
        }
    }
    Ok(docs)
}

fn collect(path: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(path)?.map(|e| e.map(|e| e.path())).collect::<Result<_, _>>()?;
        entries.sort();
        for e in entries {
            if e.is_dir() || matches!(e.extension().and_then(|x| x.to_str()), Some("yaml" | "yml")) {
                collect(&e, out)?;
            }
        }
        Ok(())
    } else if path.is_file() {
        out.push(path.to_path_buf());
        Ok(())
    } else {
        Err(std::io::Error::new(std::io::ErrorKind::NotFound, "no such file or directory"))
    }
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|e| invalid(path, e))?;
        let file: File = serde_yaml::from_str(&text).map_err(|e| invalid(path, e))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let documents = read_documents(base, &file.manifests)?;
        let mut timeline = Vec::new();
        for step in file.timeline {
            let docs = match &step.apply {
                Some(p) => read_documents(base, p)?,
                None => Vec::new(),
            };
            timeline.push((step, docs));
        }
        timeline.sort_by_key(|(s, _)| s.at);
        let catalog = match &file.settings.catalog {
            None => None,
            Some(c) => {
                let at = base.join(c);
                let text = std::fs::read_to_string(&at).map_err(|e| invalid(&at, e))?;
                let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| invalid(&at, e))?;
                let types = tenon_core::catalog_file::from_json(&value)
                    .map_err(|e| invalid(&at, format!("settings.catalog: {e}")))?;
                Some(types)
            }
        };
        Ok(Scenario {
            name: file.name,
            description: file.description,
            path: path.to_path_buf(),
            duration: file.duration.0,
            settings: file.settings,
            documents,
            timeline,
            expect: file.expect,
            catalog,
        })
    }
}
