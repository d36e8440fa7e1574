//! The differential test's two sides. A scenario of `examples/scenarios/differential/` (the
//! one list both sides read) runs through the real controller here — its manifests applied
//! with kubectl, its timeline played in real time against the API emulator and moto, its
//! `exhaust` steps as capacity errors from CreateFleet — and through `tenon simulate`,
//! pinned to the instance types the controller resolved and started at the same wall-clock
//! time (for a scenario with cron budget windows, the start of an even minute, so they fall
//! alike). Each side yields a [`Trace`]: the decisions without their times.
//!
//! A trace lists, in creation order, every NodeClaim (NodePool, and the instance type, zone
//! and capacity type it launched as, or why its launch failed); every disruption carried out
//! (method, candidates, replacements); and which of the decision Events each object got.
//! NodeClaims are named by their creation order (`#1`, `#2`…): their names differ by nature.

use super::{Cluster, eventually};
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tenon_api::wellknown as wk;
use tenon_api::{EC2NodeClass, NodeClaim};
use tenon_sim::Scenario;

/// The Event reasons a trace keeps: what the decisions said, not the progress reports
/// (`DisruptionWaitingReadiness` depends on when a pass looks, not on a decision).
pub const DECISION_EVENTS: &[&str] = &[
    "InsufficientCapacityError",
    "DisruptionBlocked",
    "ConsolidationCandidate",
    "ConsolidationRejected",
    "DisruptionLaunching",
    "DisruptionTerminating",
    "Expired",
];

/// A candidate blocked because pending pods would go to it: whether a round falls in the
/// moment between a scale-up and the binding depends on the clock, not on a decision.
const NOMINATED: &str = "Node is nominated for a pending pod";

/// The shared scenario list.
pub fn scenarios() -> Vec<PathBuf> {
    let dir = super::repo().join("examples/scenarios/differential");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    v.sort();
    v
}

pub fn scenario(name: &str) -> PathBuf {
    super::repo().join(format!("examples/scenarios/differential/{name}.yaml"))
}

/// Decisions without their times.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Trace {
    pub nodeclaims: Vec<String>,
    pub disruptions: BTreeSet<String>,
    pub events: BTreeSet<String>,
}

impl std::fmt::Display for Trace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for l in self.nodeclaims.iter().chain(&self.disruptions).chain(&self.events) {
            writeln!(f, "  {l}")?;
        }
        Ok(())
    }
}

/// Builds a trace from NodeClaims in creation order, disruptions and events by object.
#[derive(Default)]
struct Builder {
    ordinal: BTreeMap<String, usize>,
    trace: Trace,
}

impl Builder {
    fn nodeclaim(&mut self, name: &str, line: String) {
        let n = self.ordinal.len() + 1;
        self.ordinal.insert(name.to_string(), n);
        self.trace.nodeclaims.push(format!("nodeclaim #{n} {line}"));
    }

    fn name(&self, name: &str) -> String {
        self.ordinal.get(name).map_or_else(|| format!("?{name}"), |n| format!("#{n}"))
    }

    fn disruption(&mut self, method: &str, candidates: &[String], replacements: &[String]) {
        let names = |v: &[String]| {
            let mut v: Vec<String> = v.iter().map(|n| self.name(n)).collect();
            v.sort();
            v.join(",")
        };
        let line = format!("disruption {method} [{}] -> [{}]", names(candidates), names(replacements));
        self.trace.disruptions.insert(line);
    }

    /// An event on `kind/name` (a NodeClaim's name becomes its ordinal).
    fn event(&mut self, kind: &str, name: &str, reason: &str, message: &str) {
        // A drain a PDB holds, on whichever node: two drains under one budget evict in
        // name order, and Node names are each side's own.
        if kind == "Node" && reason == "FailedDraining" {
            self.trace.events.insert(format!("event Node {reason}"));
            return;
        }
        // A Node's disruption Events repeat its NodeClaim's, and Node names are the
        // cluster's own (the simulator names a node after its NodeClaim).
        if !DECISION_EVENTS.contains(&reason) || message == NOMINATED || kind == "Node" {
            return;
        }
        let object = if kind == "NodeClaim" { self.name(name) } else { name.to_string() };
        self.trace.events.insert(format!("event {kind}/{object} {reason}"));
    }
}

/// The simulator's trace from `tenon simulate --json`'s report.
pub fn from_report(report: &serde_json::Value) -> Trace {
    let mut b = Builder::default();
    for nc in report["nodeclaims"].as_array().into_iter().flatten() {
        let outcome = match (&nc["launched"], nc["failed"].as_str()) {
            (serde_json::Value::Array(l), _) => {
                let s: Vec<&str> = l.iter().filter_map(|v| v.as_str()).collect();
                s.join(" ")
            }
            (_, Some(why)) => format!("failed {why}"),
            _ => "not launched".into(),
        };
        b.nodeclaim(
            nc["name"].as_str().unwrap_or_default(),
            format!("{} {outcome}", nc["nodepool"].as_str().unwrap_or_default()),
        );
    }
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array().into_iter().flatten().filter_map(|x| x.as_str().map(String::from)).collect()
    };
    for d in report["disruptionCommands"].as_array().into_iter().flatten() {
        b.disruption(
            d["method"].as_str().unwrap_or_default(),
            &strings(&d["candidates"]),
            &strings(&d["replacements"]),
        );
    }
    for e in report["events"].as_array().into_iter().flatten() {
        let object = e["object"].as_str().unwrap_or_default();
        let (kind, name) = object.split_once('/').unwrap_or(("", object));
        b.event(kind, name, e["reason"].as_str().unwrap_or_default(), e["message"].as_str().unwrap_or_default());
    }
    b.trace
}

/// NodeClaims as a watch sees them: in creation order, with their last labels.
#[derive(Default)]
struct Claims {
    order: Vec<String>,
    labels: BTreeMap<String, BTreeMap<String, String>>,
}

fn watch_claims(c: &Cluster) -> (Arc<Mutex<Claims>>, tokio::task::JoinHandle<()>) {
    let seen: Arc<Mutex<Claims>> = Arc::default();
    let log = seen.clone();
    let stream = watcher(Api::<NodeClaim>::all(c.client.clone()), watcher::Config::default()).default_backoff();
    let task = tokio::spawn(stream.for_each(move |ev| {
        let log = log.clone();
        async move {
            let (watcher::Event::Apply(nc) | watcher::Event::InitApply(nc)) = (match ev {
                Ok(ev) => ev,
                Err(_) => return,
            }) else {
                return;
            };
            let name = nc.metadata.name.clone().unwrap_or_default();
            let mut s = log.lock().unwrap_or_else(|e| e.into_inner());
            if !s.labels.contains_key(&name) {
                s.order.push(name.clone());
            }
            s.labels.insert(name, nc.metadata.labels.clone().unwrap_or_default());
        }
    }));
    (seen, task)
}

/// The controller's trace: NodeClaims from the watch, failures and disruptions from the
/// Events the controller published.
async fn controller_trace(c: &Cluster, claims: &Claims) -> Trace {
    let events: Vec<Event> =
        Api::<Event>::all(c.client.clone()).list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    let mut by_object: BTreeMap<(String, String), Vec<&Event>> = BTreeMap::new();
    for e in &events {
        let kind = e.involved_object.kind.clone().unwrap_or_default();
        let name = e.involved_object.name.clone().unwrap_or_default();
        by_object.entry((kind, name)).or_default().push(e);
    }
    let reasons = |kind: &str, name: &str| -> Vec<&Event> {
        by_object.get(&(kind.to_string(), name.to_string())).cloned().unwrap_or_default()
    };
    let mut b = Builder::default();
    for name in &claims.order {
        let l = &claims.labels[name];
        let pool = l.get(wk::LABEL_NODEPOOL).cloned().unwrap_or_default();
        let launched = [wk::LABEL_INSTANCE_TYPE, wk::LABEL_ZONE, wk::LABEL_CAPACITY_TYPE].map(|k| l.get(k).cloned());
        let failed = reasons("NodeClaim", name).into_iter().find_map(|e| {
            matches!(e.reason.as_deref(), Some("InsufficientCapacityError" | "NodeClassNotReady"))
                .then(|| e.reason.clone().unwrap_or_default())
        });
        let outcome = match (launched, failed) {
            ([Some(t), Some(z), Some(ct)], _) => format!("{t} {z} {ct}"),
            (_, Some(why)) => format!("failed {why}"),
            _ => "not launched".into(),
        };
        b.nodeclaim(name, format!("{pool} {outcome}"));
    }
    // Disruptions: the controller logs each command's NodeClaims as it deletes the
    // candidates (Karpenter's Events name no command); an expiry is its own.
    for line in c.controller_log().lines().filter(|l| l.contains("deleting the candidates")) {
        let field = |key: &str| {
            line.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('=')).unwrap_or_default()
        };
        let names = |v: &str| v.split(',').filter(|n| !n.is_empty()).map(String::from).collect::<Vec<_>>();
        b.disruption(field("method"), &names(field("candidates")), &names(field("replacements")));
    }
    for name in &claims.order {
        for e in reasons("NodeClaim", name) {
            if e.reason.as_deref() == Some("Expired") {
                b.disruption("expiration", std::slice::from_ref(name), &[]);
            }
        }
    }
    for ((kind, name), evs) in &by_object {
        for e in evs {
            b.event(kind, name, e.reason.as_deref().unwrap_or_default(), e.message.as_deref().unwrap_or_default());
        }
    }
    b.trace
}

/// Waits until the start of the next even minute of the wall clock (budget windows are cron
/// minutes): a scenario starts there on both sides.
async fn next_even_minute() -> SystemTime {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).expect("clock after 1970");
    let next = Duration::from_secs((now.as_secs() / 120 + 1) * 120);
    tokio::time::sleep(next - now).await;
    SystemTime::UNIX_EPOCH + next
}

/// Waits until the next whole second (the simulator's clock has no finer grain).
async fn whole_second() -> SystemTime {
    let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).expect("clock after 1970");
    let next = Duration::from_secs(now.as_secs() + 1);
    tokio::time::sleep(next - now).await;
    SystemTime::UNIX_EPOCH + next
}

fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(SystemTime::UNIX_EPOCH).expect("after 1970").as_secs() as i64;
    k8s_openapi::jiff::Timestamp::from_second(secs).expect("a valid time").to_string()
}

/// What the controller side produced: its trace, and the simulator's pinned scenario.
pub struct ControllerRun {
    pub trace: Trace,
    pub pinned: PathBuf,
}

/// Runs scenario `path` through the controller; writes the simulator's pinned copy of it
/// (the controller's catalog, the same start time) next to the test's files.
pub async fn through_controller(c: &mut Cluster, path: &Path) -> ControllerRun {
    let scenario = Scenario::load(path).unwrap_or_else(|e| panic!("{e}"));
    let manifests = c.dir.join("manifests.yaml");
    let docs: Vec<String> = scenario.documents.iter().map(|d| serde_yaml::to_string(d).expect("YAML")).collect();
    std::fs::write(&manifests, docs.join("---\n")).expect("manifests file");
    c.kubectl(&["apply", "-f", manifests.to_str().expect("UTF-8 path")]);
    if let Some(dir) = std::env::var_os("TENON_POLICY_DIR") {
        c.controller_env.push(("TENON_POLICY_DIR".into(), dir.to_string_lossy().into_owned()));
    }
    c.controller_env.push(("TENON_POLICY_DEADLINE_MS".into(), POLICY_DEADLINE_MS.into()));
    c.start_controller();
    let classes: Vec<String> = scenario
        .documents
        .iter()
        .filter(|d| d["kind"] == "EC2NodeClass")
        .filter_map(|d| d["metadata"]["name"].as_str().map(String::from))
        .collect();
    assert_eq!(classes.len(), 1, "a differential scenario has one EC2NodeClass (one pinned catalog)");
    super::scenario::nodeclass_ready(c, &classes[0]).await;
    policies_compiled(c, &scenario).await;
    let nodeclass = Api::<EC2NodeClass>::all(c.client.clone()).get(&classes[0]).await.expect("the EC2NodeClass");
    let types = c.aws.instance_types(&nodeclass).await.expect("instance types from moto");
    let catalog = c.dir.join("catalog.json");
    std::fs::write(&catalog, tenon_core::catalog_file::to_json(&types).to_string()).expect("catalog file");
    let (claims, task) = watch_claims(c);
    // Cron budget windows fall alike on both sides only from a common minute.
    let cron = scenario.documents.iter().any(|d| d["kind"] == "NodePool" && d.to_string().contains("\"schedule\""));
    let start = if cron { next_even_minute().await } else { whole_second().await };
    let t0 = Instant::now();
    let mut exhausted = Vec::new();
    for (step, docs) in &scenario.timeline {
        tokio::time::sleep_until((t0 + Duration::from_secs(step.at.0 as u64)).into()).await;
        c.assert_controller_running();
        if let Some(s) = &step.scale {
            let (ns, name) = s.deployment.split_once('/').unwrap_or(("default", &s.deployment));
            c.kubectl(&["scale", "deployment", name, "-n", ns, "--replicas", &s.replicas.to_string()]);
        }
        if !docs.is_empty() {
            let file = c.dir.join(format!("step-{}.yaml", step.at.0));
            let yaml: Vec<String> = docs.iter().map(|d| serde_yaml::to_string(d).expect("YAML")).collect();
            std::fs::write(&file, yaml.join("---\n")).expect("step manifests");
            c.kubectl(&["apply", "-f", file.to_str().expect("UTF-8 path")]);
        }
        if let Some(np) = &step.delete_nodepool {
            c.kubectl(&["delete", "nodepool", np, "--wait=false"]);
        }
        if let Some(x) = &step.exhaust {
            exhausted.extend(x.instance_types.iter().map(|t| (t.clone(), x.zone.clone(), x.capacity_type.clone())));
            c.moto.exhaust(&exhausted);
        }
        assert!(step.interrupt_spot.is_none(), "spot interruptions are not driven by the differential harness");
    }
    tokio::time::sleep_until((t0 + Duration::from_secs(scenario.duration as u64)).into()).await;
    c.assert_controller_running();
    // Anything still on its way settles before the trace is read.
    eventually(Duration::from_secs(30), "no NodeClaim being deleted", || async {
        c.nodeclaims().await.iter().all(|nc| nc.metadata.deletion_timestamp.is_none()).then_some(())
    })
    .await;
    task.abort();
    let claims = std::mem::take(&mut *claims.lock().unwrap_or_else(|e| e.into_inner()));
    let trace = controller_trace(c, &claims).await;
    let pinned = pin(path, &catalog, start, &c.dir);
    ControllerRun { trace, pinned }
}

/// Waits until each NodePool naming a policy reports it healthy. The simulator compiles a
/// policy before its first pass; the controller compiles off the loop and applies the
/// NodePool's fail-safe meanwhile, which on a loaded machine can outlast the first step.
async fn policies_compiled(c: &Cluster, scenario: &Scenario) {
    let pools = scenario.documents.iter().filter(|d| d["kind"] == "NodePool").filter(|d| {
        d["metadata"]["annotations"].as_object().is_some_and(|a| a.keys().any(|k| k.starts_with("tenon.dev/")))
    });
    for name in pools.filter_map(|d| d["metadata"]["name"].as_str()) {
        eventually(Duration::from_secs(180), &format!("PolicyHealthy=True on NodePool {name}"), || async {
            let (status, _, _) = c.nodepool_condition(name, wk::condition::POLICY_HEALTHY).await?;
            (status == "True").then_some(())
        })
        .await;
    }
}

/// A copy of the scenario at `path` with `settings.catalog` and `settings.start` set, its
/// manifest paths made absolute.
fn pin(path: &Path, catalog: &Path, start: SystemTime, dir: &Path) -> PathBuf {
    let text = std::fs::read_to_string(path).expect("scenario file");
    let mut doc: serde_yaml::Value = serde_yaml::from_str(&text).expect("scenario YAML");
    let base = path.parent().expect("the scenario's directory");
    let absolute = |v: &mut serde_yaml::Value| {
        if let Some(s) = v.as_str() {
            *v = serde_yaml::Value::String(base.join(s).to_string_lossy().into_owned());
        }
    };
    for m in doc["manifests"].as_sequence_mut().into_iter().flatten() {
        absolute(m);
    }
    for step in doc["timeline"].as_sequence_mut().into_iter().flatten() {
        for m in step["apply"].as_sequence_mut().into_iter().flatten() {
            absolute(m);
        }
    }
    let settings =
        doc.as_mapping_mut().expect("a mapping").entry("settings".into()).or_insert(serde_yaml::Mapping::new().into());
    settings["catalog"] = catalog.to_string_lossy().into_owned().into();
    settings["start"] = rfc3339(start).into();
    let out = dir.join("pinned-scenario.yaml");
    std::fs::write(&out, serde_yaml::to_string(&doc).expect("YAML")).expect("pinned scenario");
    out
}

/// Both sides' policy deadline, the most the flag allows: the comparison is of decisions, and
/// a two-core machine running the whole suite can hold a call past the production 50 ms,
/// which turns one side's decision into a failed call's. (With 2 s, one CI run saw the
/// simulator launch for the scorer scenario's two steps at once, as if its first call failed.)
const POLICY_DEADLINE_MS: &str = "10000";

/// Runs the pinned scenario through `tenon simulate --json`.
pub fn through_simulator(pinned: &Path) -> Trace {
    let out = std::process::Command::new(super::tenon_bin())
        .args(["simulate", "--json", "--policy-deadline-ms", POLICY_DEADLINE_MS])
        .arg(pinned)
        .current_dir(super::repo())
        .output()
        .expect("tenon simulate");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("tenon simulate --json: {e}\n{}", String::from_utf8_lossy(&out.stderr)));
    from_report(&report)
}
