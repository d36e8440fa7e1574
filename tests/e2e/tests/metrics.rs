//! `/metrics` end to end: a scale-up with a scoring policy, then a scale to zero. Every
//! metric name Karpenter v1.14's Grafana dashboards use (`tests/fixtures/`) and every one
//! Tenon's own dashboards use (`charts/tenon/dashboards/`) must have appeared, unless it is
//! a listed departure; every family carries HELP and TYPE.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tenon_e2e::scenario::{
    INFLATE_NS, all_bound, apply_lab_general, nodeclass_ready, scale_inflate, small_nodes_quick_consolidation,
};
use tenon_e2e::{Cluster, eventually};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Tenon's own dashboards' series that only exist once a policy fails, disagrees in shadow
/// mode or is skipped by its breaker (`host/policy` tests cover them).
const ONLY_AFTER_POLICY_FAILURES: [&str; 3] =
    ["tenon_policy_failures_total", "tenon_policy_shadow_disagreements_total", "tenon_policy_skipped_calls_total"];

/// A scrape: sample names, and per family its TYPE and whether it has HELP.
#[derive(Default)]
struct Scraped {
    samples: BTreeSet<String>,
    types: BTreeMap<String, String>,
    helped: BTreeSet<String>,
    lines: Vec<String>,
}

impl Scraped {
    fn add(&mut self, text: &str) {
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut it = rest.split(' ');
                if let (Some(name), Some(kind)) = (it.next(), it.next()) {
                    self.types.insert(name.to_string(), kind.to_string());
                }
            } else if let Some(rest) = line.strip_prefix("# HELP ") {
                self.helped.insert(rest.split(' ').next().unwrap_or_default().to_string());
            } else if !line.is_empty() && !line.starts_with('#') {
                let end = line.find(['{', ' ']).unwrap_or(line.len());
                self.samples.insert(line[..end].to_string());
                self.lines.push(line.to_string());
            }
        }
    }

    /// The family a sample belongs to (a histogram's or summary's suffixes stripped).
    fn family_of(&self, sample: &str) -> Option<String> {
        if self.types.contains_key(sample) {
            return Some(sample.to_string());
        }
        ["_bucket", "_sum", "_count"]
            .iter()
            .filter_map(|s| sample.strip_suffix(s))
            .find(|f| matches!(self.types.get(*f).map(String::as_str), Some("histogram" | "summary")))
            .map(str::to_string)
    }

    /// The value of the first sample whose line starts with `prefix` and contains every `part`.
    fn value(&self, prefix: &str, parts: &[&str]) -> Option<f64> {
        self.lines
            .iter()
            .filter(|l| l.starts_with(prefix) && parts.iter().all(|p| l.contains(p)))
            .find_map(|l| l.rsplit(' ').next()?.parse().ok())
    }
}

/// The fixture's `metric_as_used` column, and the departures with their reasons.
fn karpenter_dashboard_names() -> (BTreeSet<String>, BTreeMap<String, String>) {
    let rows = |file: &str| -> Vec<Vec<String>> {
        let text = std::fs::read_to_string(format!("{ROOT}/tests/fixtures/{file}")).expect(file);
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .skip(1)
            .map(|l| l.split('\t').map(str::to_string).collect())
            .collect()
    };
    let used = rows("karpenter-dashboard-metrics.tsv").into_iter().map(|r| r[1].clone()).collect();
    let departures =
        rows("karpenter-dashboard-departures.tsv").into_iter().map(|r| (r[0].clone(), r[1].clone())).collect();
    (used, departures)
}

/// Metric names in a PromQL expression: Tenon's and Karpenter's prefixes, string literals
/// (label values) left out.
fn names_in(expr: &str, out: &mut BTreeSet<String>) {
    let mut unquoted = String::new();
    let mut quoted = false;
    for ch in expr.chars() {
        if ch == '"' {
            quoted = !quoted;
        } else if !quoted {
            unquoted.push(ch);
        }
    }
    for token in unquoted.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':')) {
        if ["karpenter_", "controller_runtime_", "tenon_"].iter().any(|p| token.starts_with(p)) {
            out.insert(token.to_string());
        }
    }
}

/// Every query of a Grafana dashboard: panel targets' `expr` and templating queries.
fn queries(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr", serde_json::Value::String(s)) => out.push(s.clone()),
                    ("query", serde_json::Value::String(s)) => out.push(s.clone()),
                    _ => queries(v, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|v| queries(v, out)),
        _ => {}
    }
}

fn tenon_dashboard_names() -> BTreeSet<String> {
    let dir = format!("{ROOT}/charts/tenon/dashboards");
    let mut names = BTreeSet::new();
    let mut files = 0;
    for entry in std::fs::read_dir(&dir).expect("charts/tenon/dashboards") {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "json") {
            let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let mut q = Vec::new();
            queries(&json, &mut q);
            assert!(!q.is_empty(), "{} has no queries", path.display());
            for expr in &q {
                assert!(!expr.contains("job="), "{}: {expr} assumes a scrape job name", path.display());
                names_in(expr, &mut names);
            }
            files += 1;
        }
    }
    assert!(files >= 3, "capacity, performance and policy dashboards: {files} found");
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_dashboard_metric_appears_with_help_and_type() {
    let (karpenter, departures) = karpenter_dashboard_names();
    for name in departures.keys() {
        assert!(karpenter.contains(name), "departure {name} is not a dashboard name");
    }
    let ours = tenon_dashboard_names();

    let mut c = Cluster::start("metrics").await;
    apply_lab_general(&c);
    small_nodes_quick_consolidation(&c);
    c.kubectl(&["annotate", "nodepool", "lab-general", "tenon.dev/scoring-policy=default-scoring"]);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 8);
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(90)).await;
    // Karpenter's consistency check found each Node the shape its NodeClaim expected.
    eventually(Duration::from_secs(30), "ConsistentStateFound on every NodeClaim", || async {
        let claims = c.nodeclaims().await;
        claims.iter().all(|nc| tenon_e2e::has_condition(nc, "ConsistentStateFound")).then_some(())
    })
    .await;
    let mut seen = Scraped::default();
    // Node and pod series are published at the end of a pass; a pod's startup once a pass
    // sees it Ready.
    let running = eventually(Duration::from_secs(30), "node, pod and startup series", || async {
        let text = c.metrics_text()?;
        let mut scrape = Scraped::default();
        scrape.add(&text);
        // Every inflate pod has started (so was bound) before the scale-down deletes them.
        let started =
            ["karpenter_pods_startup_duration_seconds_count ", "karpenter_pods_bound_duration_seconds_count "]
                .iter()
                .all(|f| scrape.value(f, &[]).is_some_and(|n| n >= 8.0));
        (text.contains("karpenter_nodes_allocatable{") && started).then_some(text)
    })
    .await;
    seen.add(&running);

    scale_inflate(&c, 0);
    let emptied = Instant::now();
    while !c.nodeclaims().await.is_empty() {
        assert!(emptied.elapsed() < Duration::from_secs(150), "empty nodes still there after 150 s");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Each series comes from its own reconciler: read them once every one has seen the nodes go.
    let after = eventually(Duration::from_secs(30), "termination series, nodes and cost settled", || async {
        let text = c.metrics_text()?;
        let mut now = Scraped::default();
        now.add(&text);
        let settled = text.contains("karpenter_nodes_terminated_total{")
            && !now.samples.contains("karpenter_nodes_allocatable")
            && now.value("karpenter_nodepools_cost_total{", &["nodepool=\"lab-general\""]) == Some(0.0);
        settled.then_some(text)
    })
    .await;
    let mut end = Scraped::default();
    end.add(&after);
    seen.add(&after);
    c.assert_controller_running();

    let missing: Vec<&String> =
        karpenter.iter().filter(|n| !departures.contains_key(*n) && !seen.samples.contains(*n)).collect();
    assert!(missing.is_empty(), "Karpenter's dashboards use {missing:?}, never exposed; seen {:?}", seen.samples);
    for name in departures.keys() {
        assert!(!seen.samples.contains(name), "{name} is listed as a departure but is exposed");
    }
    let missing: Vec<&String> = ours
        .iter()
        .filter(|n| !ONLY_AFTER_POLICY_FAILURES.contains(&n.as_str()) && !seen.samples.contains(*n))
        .collect();
    assert!(missing.is_empty(), "Tenon's dashboards use {missing:?}, never exposed; seen {:?}", seen.samples);

    for sample in &seen.samples {
        let family = seen.family_of(sample).unwrap_or_else(|| panic!("{sample} has no # TYPE"));
        assert!(seen.helped.contains(&family), "{family} has no # HELP");
    }

    // The values mean what Karpenter's do.
    let limit = seen.value("karpenter_nodepools_limit{", &["nodepool=\"lab-general\"", "resource_type=\"cpu\""]);
    assert_eq!(limit, Some(64.0), "the NodePool's spec.limits.cpu");
    let created: f64 = end
        .lines
        .iter()
        .filter(|l| l.starts_with("karpenter_nodes_created_total{nodepool=\"lab-general\",zone=\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(created >= 3.0, "three nodes or more registered: {created}");
    let empty =
        end.value("karpenter_voluntary_disruption_decisions_total{", &["decision=\"delete\"", "reason=\"empty\""]);
    assert!(empty.is_some_and(|n| n >= 1.0), "emptiness deleted nodes: {empty:?}");
    let by_pool = end.value(
        "karpenter_voluntary_disruption_decisions_by_nodepool_total{",
        &["nodepool=\"lab-general\"", "decision=\"delete\"", "reason=\"empty\""],
    );
    assert!(by_pool.is_some_and(|n| n >= 1.0), "emptiness decisions by NodePool: {by_pool:?}");
    let evaluated = end.value("karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count{", &[]);
    assert!(evaluated.is_some_and(|n| n >= 1.0), "disruption rounds are timed: {evaluated:?}");
    let consuming =
        seen.value("karpenter_nodepools_nodes_consuming_budgets{", &["nodepool=\"lab-general\"", "reason=\"Empty\""]);
    assert!(consuming.is_some(), "nodes consuming the NodePool's budget, by reason");
    let disrupted =
        end.value("karpenter_nodeclaims_disrupted_total{", &["reason=\"empty\"", "nodepool=\"lab-general\""]);
    assert!(disrupted.is_some_and(|n| n >= 1.0), "disrupted NodeClaims by reason and NodePool: {disrupted:?}");
    assert!(
        !end.samples.contains("karpenter_nodes_allocatable"),
        "deleted nodes leave the node series: {:?}",
        end.lines.iter().filter(|l| l.starts_with("karpenter_nodes_allocatable")).collect::<Vec<_>>()
    );
    for name in ["karpenter_cluster_state_synced", "karpenter_cluster_state_unsynced_time_seconds"] {
        let settled = if name.ends_with("_synced") { 1.0 } else { 0.0 };
        assert_eq!(end.value(&format!("{name} "), &[]), Some(settled), "{name} once settled");
    }
    let launches =
        seen.value("karpenter_cloudprovider_duration_seconds_count{", &["method=\"Create\"", "provider=\"aws\""]);
    assert!(launches.is_some_and(|n| n >= 3.0), "each launch is a timed Create call: {launches:?}");
    let calls = seen.value("tenon_policy_calls_total{", &["policy=\"default-scoring\"", "hook=\"scoring\""]);
    assert!(calls.is_some_and(|n| n >= 1.0), "the scoring policy was called: {calls:?}");

    // The API clients' series: the API server's and AWS's.
    let listed = seen.value("client_go_request_duration_seconds_count{", &["verb=\"LIST\"", "kind=\"nodeclaims\""]);
    assert!(listed.is_some_and(|n| n >= 1.0), "NodeClaims were listed: {listed:?}");
    assert!(seen.value("client_go_request_total{", &["code=\"201\"", "method=\"POST\""]).is_some());
    let fleets =
        seen.value("aws_sdk_go_request_total{", &["service=\"EC2\"", "action=\"CreateFleet\"", "code=\"200\""]);
    // Launches are CreateFleet calls; identical ones in flight together share one.
    assert!(fleets.is_some_and(|n| n >= 1.0), "launches are CreateFleet calls: {fleets:?}");

    // What the cloud offers and what the NodePool costs.
    let cost = seen.value("karpenter_nodepools_cost_total{", &["nodepool=\"lab-general\""]);
    assert!(cost.is_some_and(|usd| usd > 0.0), "the NodePool's nodes cost something: {cost:?}");
    assert_eq!(end.value("karpenter_nodepools_cost_total{", &["nodepool=\"lab-general\""]), Some(0.0));
    for family in [
        "karpenter_cloudprovider_instance_type_cpu_cores{",
        "karpenter_cloudprovider_instance_type_memory_bytes{",
        "karpenter_cloudprovider_instance_type_offering_price_estimate{",
    ] {
        // The price of the on-demand offering (a reserved placeholder's is 0).
        let v = seen
            .value(family, &["instance_type=\"m5.large\"", "capacity_type=\"on-demand\""])
            .or_else(|| seen.value(family, &["instance_type=\"m5.large\"}"]));
        assert!(v.is_some_and(|v| v > 0.0), "{family}m5.large: {v:?}");
    }
    let on_demand = seen.value(
        "karpenter_cloudprovider_instance_type_offering_available{",
        &["instance_type=\"m5.large\"", "capacity_type=\"on-demand\""],
    );
    assert_eq!(on_demand, Some(1.0));

    // Pod latencies: every inflate pod was seen waiting, decided on, bound and started.
    for family in [
        "karpenter_pods_bound_duration_seconds_count",
        "karpenter_pods_provisioning_bound_duration_seconds_count",
        "karpenter_pods_provisioning_startup_duration_seconds_count",
        "karpenter_pods_scheduling_decision_duration_seconds_count",
    ] {
        let n = end.value(&format!("{family} "), &[]);
        assert!(n.is_some_and(|n| n >= 8.0), "{family}: {n:?}");
    }
    let depth = end.value("karpenter_scheduler_queue_depth{", &["controller=\"provisioner\"", "scheduling_id=\""]);
    assert_eq!(depth, Some(0.0), "the last simulation placed its whole queue");
    assert!(!end.samples.contains("karpenter_scheduler_unfinished_work_seconds"), "no simulation under way");

    // operatorpkg's status series, as Karpenter registers them.
    let initialized = seen.value(
        "operator_nodeclaim_status_condition_count{",
        &["type=\"Initialized\"", "status=\"True\"", "karpenter_sh_nodepool=\"lab-general\""],
    );
    assert_eq!(initialized, Some(1.0), "each Initialized NodeClaim's condition is counted");
    let became = seen.value(
        "operator_nodeclaim_status_condition_transitions_total{",
        &["type=\"Initialized\"", "status=\"True\"", "karpenter_sh_nodepool=\"lab-general\""],
    );
    assert!(became.is_some_and(|n| n >= 3.0), "three NodeClaims or more became Initialized: {became:?}");
    for (family, parts) in [
        ("operator_nodeclaim_status_condition_transition_seconds_count{", &["type=\"Initialized\""][..]),
        ("operator_status_condition_count{", &["kind=\"NodePool\"", "group=\"karpenter.sh\"", "type=\"Ready\""]),
        ("operator_ec2nodeclass_status_condition_count{", &["name=\"lab-general\"", "type=\"Ready\""]),
        ("operator_node_status_condition_count{", &["type=\"Ready\"", "karpenter_sh_nodepool=\"lab-general\""]),
    ] {
        assert!(seen.value(family, parts).is_some(), "no {family}{parts:?}");
    }
    let gone =
        end.value("operator_nodeclaim_termination_duration_seconds_count{", &["karpenter_sh_nodepool=\"lab-general\""]);
    assert!(gone.is_some_and(|n| n >= 3.0), "each deleted NodeClaim was timed until gone: {gone:?}");
    let events = c.events().await;
    let transitioned = events.iter().any(|e| {
        e.involved_object.kind.as_deref() == Some("NodeClaim")
            && e.reason.as_deref() == Some("Initialized")
            && e.message.as_deref().is_some_and(|m| {
                m.starts_with("Status condition transitioned, Type: Initialized, Status: Unknown -> True")
            })
    });
    assert!(transitioned, "no Initialized transition Event on a NodeClaim");
    let finalized = events.iter().any(|e| {
        e.involved_object.kind.as_deref() == Some("NodeClaim")
            && e.reason.as_deref() == Some("Finalized")
            && e.message.as_deref() == Some("Finalized karpenter.sh/termination")
    });
    assert!(finalized, "no Finalized Event on a deleted NodeClaim");
}
