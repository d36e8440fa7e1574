//! (Long: the policy author's whole harness: loading, calling and YAML fixtures.)
//! For policy authors: load a `.wasm` with the production engine configuration and call it
//! from Rust, or run declarative YAML fixtures (`tenon policy test` uses this).
//!
//! A fixture file holds `cases`; each names its input and what to expect:
//!
//! ```yaml
//! cases:
//!   - name: cheapest first
//!     nodepool: {name: general, config: {maxPremiumPercent: 10}}
//!     requests: {cpu: "1", memory: 1Gi}
//!     instanceTypes:
//!       - {name: m6a.large, labels: {karpenter.k8s.aws/instance-cpu-manufacturer: amd}, capacity: {cpu: "2", memory: 8Gi, pods: "29"}}
//!       - {name: m6i.large, capacity: {cpu: "2", memory: 8Gi, pods: "29"}}
//!     offerings:
//!       - {instanceType: m6a.large, price: 0.0864}
//!       - {instanceType: m6i.large, price: 0.096}
//!     expect: {first: m6a.large}            # or order: [...] (a prefix; [] is empty), or error: "substring"
//! ```
//!
//! An instance type may also be just its name (`- m7a.large`): its labels, capacity,
//! allocatable and offerings then come from the bundled EC2 catalog (us-east-1, real prices).
//! Without `offerings`, a case offers every catalog offering of its catalog types; an offering
//! of a catalog type may leave out `price` (the catalog's for its zone and capacity type).
//!
//! Consolidator cases give `plans` and expect `approved`/`rejected` plan indices; budget cases
//! give `reason`, `totalNodes`, `disrupting` and `budgets` (as in a NodePool) and expect
//! `allowed`.

use crate::adapters::{budget_input, consolidation_input, ranking_from_scores, review_from_wit, scoring_input};
use crate::engine::PolicyEngine;
use crate::error::{Failure, PolicyError};
use crate::policy::{LoadedPolicy, World};
use crate::sandbox::Limits;
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use tenon_core::disruption::Method;
use tenon_core::disruption::budgets::BudgetContext;
use tenon_core::disruption::consolidator::{CandidateView, PlanView, Verdict};
use tenon_core::instancetype::{InstanceType, Offering};
use tenon_core::model::DisruptionReason;
use tenon_core::requirements::{Requirement, Requirements};
use tenon_core::resources::Resources;
use tenon_core::scorer::{Candidate, ScoringInput};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum FixtureError {
    #[error(transparent)]
    Policy(#[from] PolicyError),
    #[error("{path}: {message}")]
    Invalid { path: String, message: String },
}

/// A policy loaded as production loads it.
pub struct Harness {
    policy: LoadedPolicy,
    _engine: PolicyEngine,
}

/// The outcome of one fixture case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseResult {
    pub file: String,
    pub name: String,
    pub passed: bool,
    /// What went wrong, or what was decided.
    pub detail: String,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct NodePoolSpec {
    #[serde(default = "default_name")]
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    config: Value,
}

fn default_name() -> String {
    "default".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct TypeSpec {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    capacity: BTreeMap<String, Value>,
    allocatable: Option<BTreeMap<String, Value>>,
}

/// An instance type written out, or named from the bundled catalog.
#[derive(Deserialize)]
#[serde(untagged)]
enum TypeEntry {
    Catalog(String),
    Spec(TypeSpec),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct OfferingSpec {
    instance_type: String,
    #[serde(default = "default_zone")]
    zone: String,
    #[serde(default = "default_capacity_type")]
    capacity_type: String,
    /// Optional for a catalog type (its catalog price).
    price: Option<f64>,
}

/// The bundled EC2 catalog, loaded once.
fn catalog() -> Result<&'static [InstanceType], String> {
    static CATALOG: std::sync::OnceLock<Result<Vec<InstanceType>, String>> = std::sync::OnceLock::new();
    CATALOG
        .get_or_init(|| {
            tenon_core::catalog::aws(&tenon_core::catalog::AwsCatalogOptions::default()).map_err(|e| e.to_string())
        })
        .as_ref()
        .map(Vec::as_slice)
        .map_err(|e| format!("the bundled catalog: {e}"))
}

fn default_zone() -> String {
    "zone-a".into()
}
fn default_capacity_type() -> String {
    "on-demand".into()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ReplacementSpec {
    instance_type: String,
    price: f64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PlanSpec {
    method: String,
    candidates: Vec<CandidateView>,
    replacement: Option<ReplacementSpec>,
    #[serde(default)]
    savings_per_hour: f64,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Expect {
    first: Option<String>,
    order: Option<Vec<String>>,
    error: Option<String>,
    approved: Option<Vec<usize>>,
    rejected: Option<Vec<usize>>,
    allowed: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Case {
    name: String,
    #[serde(default)]
    nodepool: NodePoolSpec,
    #[serde(default)]
    now: i64,
    requests: Option<BTreeMap<String, Value>>,
    pod_count: Option<u32>,
    instance_types: Option<Vec<TypeEntry>>,
    offerings: Option<Vec<OfferingSpec>>,
    plans: Option<Vec<PlanSpec>>,
    reason: Option<String>,
    total_nodes: Option<u32>,
    disrupting: Option<u32>,
    budgets: Option<Vec<tenon_api::nodepool::Budget>>,
    expect: Expect,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FixtureFile {
    cases: Vec<Case>,
}

fn quantities(m: &BTreeMap<String, Value>) -> Result<Resources, String> {
    let owned: Vec<(String, String)> =
        m.iter().map(|(k, v)| (k.clone(), v.as_str().map_or_else(|| v.to_string(), str::to_string))).collect();
    Resources::from_quantities(owned.iter().map(|(k, v)| (k.as_str(), v.as_str()))).map_err(|e| e.to_string())
}

fn method(s: &str) -> Result<Method, String> {
    Ok(match s {
        "emptiness" => Method::Emptiness,
        "drift" => Method::Drift,
        "multi-node-consolidation" => Method::MultiNodeConsolidation,
        "single-node-consolidation" => Method::SingleNodeConsolidation,
        "expiration" => Method::Expiration,
        other => {
            return Err(format!(
                "unknown method {other:?} (use emptiness, drift, multi-node-consolidation, single-node-consolidation)"
            ));
        }
    })
}

impl Harness {
    /// Loads `path` with the default limits (50 ms deadline, 64 MiB memory).
    pub fn load(path: &Path) -> Result<Self, PolicyError> {
        Self::with_limits(path, Limits::default())
    }

    /// Loads `path` with `limits` (e.g. fuel for deterministic runs).
    pub fn with_limits(path: &Path, limits: Limits) -> Result<Self, PolicyError> {
        let engine = PolicyEngine::new(limits, None)?;
        let policy = engine.load_file(path)?;
        Ok(Harness { policy, _engine: engine })
    }

    pub fn policy(&self) -> &LoadedPolicy {
        &self.policy
    }

    /// Runs every case of a fixture file.
    pub fn run_fixtures(&self, path: &Path) -> Result<Vec<CaseResult>, FixtureError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| FixtureError::Invalid { path: path.display().to_string(), message: e.to_string() })?;
        let file: FixtureFile = serde_yaml::from_str(&text)
            .map_err(|e| FixtureError::Invalid { path: path.display().to_string(), message: e.to_string() })?;
        let name = path.display().to_string();
        Ok(file
            .cases
            .iter()
            .map(|c| {
                let (passed, detail) = match self.run_case(c) {
                    Ok(()) => (true, String::new()),
                    Err(e) => (false, e),
                };
                CaseResult { file: name.clone(), name: c.name.clone(), passed, detail }
            })
            .collect())
    }

    fn pool(&self, c: &Case) -> (String, BTreeMap<String, String>, String) {
        let config = if c.nodepool.config.is_null() { "{}".to_string() } else { c.nodepool.config.to_string() };
        (c.nodepool.name.clone(), c.nodepool.labels.clone(), config)
    }

    fn run_case(&self, c: &Case) -> Result<(), String> {
        // A case that expects nothing cannot fail: refuse it rather than count it as passed.
        let e = &c.expect;
        let (expects, fields) = match self.policy.world {
            World::Scorer => (e.first.is_some() || e.order.is_some(), "first or order"),
            World::Consolidator => (e.approved.is_some() || e.rejected.is_some(), "approved or rejected"),
            World::DisruptionBudget => (e.allowed.is_some(), "allowed"),
        };
        if !expects && e.error.is_none() {
            return Err(format!("the case expects nothing: give expect.{fields} (or expect.error)"));
        }
        let outcome = match self.policy.world {
            World::Scorer => self.score_case(c),
            World::Consolidator => self.consolidation_case(c),
            World::DisruptionBudget => self.budget_case(c),
        };
        match (outcome, &c.expect.error) {
            (Err(f), Some(want)) if f.message.contains(want.as_str()) => Ok(()),
            (Err(f), Some(want)) => Err(format!("expected an error containing {want:?}, got {f}")),
            (Err(f), None) => Err(format!("policy failed: {f}")),
            (Ok(_), Some(want)) => Err(format!("expected an error containing {want:?}, the policy answered")),
            (Ok(check), None) => check,
        }
    }

    /// Ok(check) when the policy answered; the check compares with the expectation.
    fn score_case(&self, c: &Case) -> Result<Result<(), String>, Failure> {
        let bad = |m: String| Ok(Err(m));
        let Some(specs) = &c.instance_types else { return bad("scorer cases need instanceTypes".into()) };
        let mut types = Vec::new();
        for entry in specs {
            let t = match entry {
                TypeEntry::Spec(t) => t,
                TypeEntry::Catalog(name) => match from_catalog(name, c.offerings.as_deref()) {
                    Ok(t) => {
                        types.push(t);
                        continue;
                    }
                    Err(e) => return bad(e),
                },
            };
            let mut reqs: Requirements = t.labels.iter().map(|(k, v)| Requirement::in_values(k, [v.clone()])).collect();
            reqs.add(Requirement::in_values("node.kubernetes.io/instance-type", [t.name.clone()]));
            let capacity = match quantities(&t.capacity) {
                Ok(r) => r,
                Err(e) => return bad(format!("instance type {}: {e}", t.name)),
            };
            let allocatable = match t.allocatable.as_ref().map(quantities).transpose() {
                Ok(a) => a.unwrap_or_else(|| capacity.clone()),
                Err(e) => return bad(format!("instance type {}: {e}", t.name)),
            };
            let mut overhead = capacity.clone();
            overhead.sub(&allocatable);
            let offerings: Result<Vec<Offering>, String> = c
                .offerings
                .iter()
                .flatten()
                .filter(|o| o.instance_type == t.name)
                .map(|o| {
                    let price = o.price.ok_or_else(|| format!("offering of {}: price is required", t.name))?;
                    Ok(Offering {
                        zone_id: None,
                        zone: o.zone.clone(),
                        capacity_type: o.capacity_type.clone(),
                        price,
                        available: true,
                    })
                })
                .collect();
            let offerings = match offerings {
                Ok(o) => o,
                Err(e) => return bad(e),
            };
            types.push(InstanceType::new(&t.name, reqs, capacity, overhead, offerings));
        }
        if let Some(o) = c.offerings.iter().flatten().find(|o| !types.iter().any(|t| t.name == o.instance_type)) {
            return bad(format!("offering names unknown instance type {:?}", o.instance_type));
        }
        let mut candidates: Vec<Candidate> = types
            .iter()
            .flat_map(|t| t.offerings.iter().map(move |o| Candidate { instance_type: t, offering: o }))
            .collect();
        candidates.sort_by(|a, b| a.offering.price.total_cmp(&b.offering.price));
        let requests = match c.requests.as_ref().map(quantities).transpose() {
            Ok(r) => r.unwrap_or_default(),
            Err(e) => return bad(format!("requests: {e}")),
        };
        let input = ScoringInput {
            nodepool: &c.nodepool.name,
            now: c.now,
            requests: &requests,
            pod_count: c.pod_count.unwrap_or(1) as usize,
            candidates,
        };
        let (name, labels, config) = self.pool(c);
        let labels = labels.into_iter().map(|(key, value)| crate::bindings::scorer::Label { key, value }).collect();
        let wit = scoring_input(&input, (name, labels, config));
        let scores = self.policy.rank(&wit, c.now)?;
        let ranking = ranking_from_scores(&scores, input.candidates.len())?;
        let mut order: Vec<String> = Vec::new();
        for i in ranking {
            let n = &input.candidates[i].instance_type.name;
            if !order.contains(n) {
                order.push(n.clone());
            }
        }
        let e = &c.expect;
        Ok(if let Some(first) = e.first.as_ref().filter(|f| order.first() != Some(*f)) {
            Err(format!("expected {first} first, got order {order:?}"))
        } else if let Some(want) = e.order.as_ref().filter(|w| w.is_empty() && !order.is_empty()) {
            // `order: []` is how a case says "an empty ranking", not "any order".
            Err(format!("expected an empty ranking {want:?}, got {order:?}"))
        } else if let Some(want) = e.order.as_ref().filter(|w| !order.starts_with(w)) {
            Err(format!("expected order to start {want:?}, got {order:?}"))
        } else {
            Ok(())
        })
    }

    fn consolidation_case(&self, c: &Case) -> Result<Result<(), String>, Failure> {
        let Some(specs) = &c.plans else { return Ok(Err("consolidator cases need plans".into())) };
        let mut plans = Vec::new();
        for p in specs {
            let m = match method(&p.method) {
                Ok(m) => m,
                Err(e) => return Ok(Err(e)),
            };
            plans.push(PlanView {
                method: m,
                candidates: p.candidates.clone(),
                replacement: p.replacement.as_ref().map(|r| (r.instance_type.clone(), r.price)),
                savings_per_hour: p.savings_per_hour,
                now: c.now,
            });
        }
        let (name, labels, config) = self.pool(c);
        let labels =
            labels.into_iter().map(|(key, value)| crate::bindings::consolidator::Label { key, value }).collect();
        let review = review_from_wit(
            self.policy.review(&consolidation_input(&plans, (name, labels, config), c.now), c.now)?,
            plans.len(),
        )?;
        let approved: BTreeSet<usize> =
            review.verdicts.iter().enumerate().filter(|(_, v)| **v == Verdict::Approve).map(|(i, _)| i).collect();
        let rejected: BTreeSet<usize> = (0..plans.len()).filter(|i| !approved.contains(i)).collect();
        let e = &c.expect;
        let want = |v: &Option<Vec<usize>>| v.as_ref().map(|v| v.iter().copied().collect::<BTreeSet<usize>>());
        Ok(if let Some(w) = want(&e.approved).filter(|w| *w != approved) {
            Err(format!("expected approved {w:?}, got {approved:?} ({:?})", review.verdicts))
        } else if let Some(w) = want(&e.rejected).filter(|w| *w != rejected) {
            Err(format!("expected rejected {w:?}, got {rejected:?} ({:?})", review.verdicts))
        } else {
            Ok(())
        })
    }

    fn budget_case(&self, c: &Case) -> Result<Result<(), String>, Failure> {
        let reason = match c.reason.as_deref().map(DisruptionReason::parse) {
            Some(Some(r)) => r,
            None => DisruptionReason::Underutilized,
            Some(None) => return Ok(Err("reason must be Underutilized, Empty or Drifted".into())),
        };
        let budgets: Vec<_> = c.budgets.iter().flatten().map(tenon_core::convert::budget).collect();
        let ctx = BudgetContext {
            nodepool: &c.nodepool.name,
            reason,
            now: c.now,
            total_nodes: c.total_nodes.unwrap_or(0) as usize,
            disrupting: c.disrupting.unwrap_or(0) as usize,
            budgets: &budgets,
        };
        let (name, labels, config) = self.pool(c);
        let labels = labels.into_iter().map(|(key, value)| crate::bindings::budget::Label { key, value }).collect();
        let a = self.policy.allowed(&budget_input(&ctx, (name, labels, config)), c.now)?;
        Ok(match c.expect.allowed {
            Some(w) if w != a.allowed => Err(format!("expected allowed {w}, got {} ({})", a.allowed, a.reason)),
            _ => Ok(()),
        })
    }
}

/// Fixture files given as paths or directories (searched for `*.yaml`).
/// Catalog type `name`, offering what `offerings` name for it (catalog prices where a price is
/// left out), or all its available catalog offerings when the case names none.
fn from_catalog(name: &str, offerings: Option<&[OfferingSpec]>) -> Result<InstanceType, String> {
    let known = catalog()?.iter().find(|t| t.name == name);
    let mut t = known.cloned().ok_or_else(|| format!("instance type {name:?} is not in the bundled catalog"))?;
    let Some(offerings) = offerings else {
        t.offerings.retain(|o| o.available);
        return Ok(t);
    };
    let mut chosen = Vec::new();
    for o in offerings.iter().filter(|o| o.instance_type == name) {
        let listed = t.offerings.iter().find(|c| c.zone == o.zone && c.capacity_type == o.capacity_type);
        let price = match (o.price, listed) {
            (Some(p), _) => p,
            (None, Some(c)) => c.price,
            (None, None) => {
                return Err(format!(
                    "offering of {name}: the catalog has no {} offering in {}; give a price or a zone it has",
                    o.capacity_type, o.zone
                ));
            }
        };
        chosen.push(Offering {
            zone_id: None,
            zone: o.zone.clone(),
            capacity_type: o.capacity_type.clone(),
            price,
            available: true,
        });
    }
    t.offerings = chosen;
    Ok(t)
}

pub fn fixture_files(paths: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.path())
                .filter(|f| matches!(f.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")))
                .collect();
            found.sort();
            out.extend(found);
        } else {
            out.push(p.clone());
        }
    }
    out
}

/// Builds a cargo workspace of policies for `wasm32-wasip2` (release) into `target_dir`,
/// returning the directory holding the `.wasm` files. For tests that need real components.
pub fn build_components(manifest: &Path, target_dir: &Path) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["build", "--quiet", "--release", "--target", "wasm32-wasip2", "--manifest-path"])
        .arg(manifest)
        .env("CARGO_TARGET_DIR", target_dir)
        .output()
        .map_err(|e| format!("running cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "building {} for wasm32-wasip2 failed (is the target installed? `rustup target add wasm32-wasip2`):\n{}",
            manifest.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(target_dir.join("wasm32-wasip2/release"))
}
