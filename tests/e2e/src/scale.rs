//! (Long: one benchmark; its figures and how each is read from the controller.)
//! The scale benchmark: the real controller against the emulator and moto, with waves of
//! pending pods that grow the cluster to hundreds of nodes and are then taken away again.
//! It measures; it asserts nothing about time (`src/bin/scale.rs` runs it, `docs/benchmarks.md`
//! holds its figures).
//!
//! A wave: `pods` pods created in a namespace of their own (as fast as the API takes them,
//! each marked `PodScheduled=False/Unschedulable` as kube-scheduler would), until every pod is
//! bound to a Node that joined for it; once every pod runs and the writes that follow have
//! settled, a steady state of `steady`; then the pods and every
//! NodeClaim are deleted and the wave ends when no NodeClaim is left. The controller's
//! process is measured from `/proc` (RSS, peak RSS, CPU time), its log (when each batch
//! closed, each NodeClaim was created, each instance launched) and `/metrics` (passes).

use crate::{Cluster, eventually, scenario};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tenon_api::NodeClaim;
use tenon_fault_proxy::Fault;

/// What a run does.
#[derive(Clone, Debug)]
pub struct Options {
    pub pods: usize,
    pub waves: usize,
    /// How long the steady state (every pod running, nothing changing) is measured for.
    pub steady: Duration,
    /// CPU each pod requests, in millicores; nodes are 16-vCPU types, so 1500m makes ten
    /// pods a node.
    pub pod_cpu_millis: u32,
    /// How long a wave may take to get every pod bound before the run gives up.
    pub timeout: Duration,
    /// The share of EC2 calls (percent) that fail throughout the waves: 503 Unavailable,
    /// 503 RequestLimitExceeded, 500 InternalError, or no answer for 35 s, in turn.
    pub brownout_percent: u32,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            pods: 10_000,
            waves: 3,
            steady: Duration::from_secs(30),
            pod_cpu_millis: 1500,
            timeout: Duration::from_secs(1800),
            brownout_percent: 0,
        }
    }
}

/// One wave's figures (seconds unless named otherwise).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Wave {
    pub pods: usize,
    pub nodeclaims: usize,
    /// From the first pod's create to the last pod marked Unschedulable.
    pub pods_created_seconds: f64,
    /// Provisioning decisions (closed batches) that created NodeClaims.
    pub decisions: usize,
    /// From a batch closing to the last NodeClaim its decision created, the longest of the
    /// wave's decisions.
    pub batch_close_to_last_nodeclaim_seconds: f64,
    /// From the first pod's create to the first instance launched (CreateFleet answered).
    pub first_pod_to_first_launch_seconds: f64,
    /// From the first batch closing to the first instance launched.
    pub first_batch_close_to_first_launch_seconds: f64,
    /// From the first pod's create until every pod was bound.
    pub all_bound_seconds: f64,
    /// EC2 calls the controller made from the wave's start until every pod was bound
    /// (`aws_sdk_go_request_total{service="EC2"}`), and attempts (retries included).
    pub ec2_calls: f64,
    pub ec2_attempts: f64,
    /// `ec2_calls` over the NodeClaims launched.
    pub ec2_calls_per_node: f64,
    /// `ec2_calls` by EC2 action.
    pub ec2_calls_by_action: BTreeMap<String, f64>,
    /// The controller's CPU seconds per control-loop pass during the steady state.
    pub steady_cpu_seconds_per_pass: f64,
    /// Passes per second during the steady state.
    pub steady_passes_per_second: f64,
    /// The steady state's passes by reconciler.
    pub steady_passes_by_controller: BTreeMap<String, f64>,
    /// The controller's CPU seconds per second during the steady state.
    pub steady_cpu_seconds_per_second: f64,
    /// The controller's resident set after the wave's steady state, MiB.
    pub rss_mib: f64,
    /// The anonymous part of it (heap and stacks; the rest is the binary's pages), MiB.
    pub rss_anon_mib: f64,
    /// From deleting the pods and NodeClaims until no NodeClaim was left.
    pub teardown_seconds: f64,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Report {
    pub pods: usize,
    pub controller: String,
    /// The share of EC2 calls that failed throughout (`Options::brownout_percent`).
    pub brownout_percent: u32,
    /// The controller's peak resident set over the whole run (VmHWM), MiB.
    pub peak_rss_mib: f64,
    /// RSS after the last wave over RSS after the first.
    pub rss_growth: f64,
    /// Where the controller's log was kept.
    pub controller_log: String,
    pub waves: Vec<Wave>,
}

/// Runs the benchmark on a cluster of its own; `progress` hears what it is doing.
pub async fn run(opts: &Options, mut progress: impl FnMut(&str)) -> Report {
    let mut c = Cluster::start("scale").await;
    c.kubectl(&["apply", "-f", &format!("{}/ec2nodeclass-lab-general.yaml", scenario::LAB)]);
    c.apply_yaml("nodepool-scale", NODEPOOL);
    let brownout = Arc::new(AtomicBool::new(false));
    // Kept for the run: the proxy serves as long as it lives.
    let _proxy = if opts.brownout_percent > 0 {
        let faults = vec![
            Fault::ec2_error(503, "Unavailable"),
            Fault::ec2_error(503, "RequestLimitExceeded"),
            Fault::ec2_error(500, "InternalError"),
            Fault::Hang(Duration::from_secs(35)),
        ];
        // EC2's query API only (its requests name its API version; IAM, SSM and SQS do not).
        let fraction = f64::from(opts.brownout_percent) / 100.0;
        let proxy =
            tenon_fault_proxy::brownout(&c.moto.url, "Version=2016-11-15", fraction, faults, brownout.clone()).await;
        c.controller_env.push(("AWS_ENDPOINT_URL".into(), proxy.url.clone()));
        Some(proxy)
    } else {
        None
    };
    c.start_controller();
    scenario::nodeclass_ready(&c, "lab-general").await;
    brownout.store(true, Ordering::SeqCst);
    let pid = c.replica_pid(0).expect("the controller runs");
    let mut report = Report {
        pods: opts.pods,
        controller: crate::tenon_bin().display().to_string(),
        brownout_percent: opts.brownout_percent,
        ..Report::default()
    };
    for w in 0..opts.waves {
        progress(&format!("wave {}: creating {} pods", w + 1, opts.pods));
        let wave = wave(&mut c, pid, w, opts, &mut progress).await;
        progress(&format!("wave {}: {wave:?}", w + 1));
        report.waves.push(wave);
    }
    report.peak_rss_mib = proc_status_kib(pid, "VmHWM:").unwrap_or(0.0) / 1024.0;
    if let (Some(first), Some(last)) = (report.waves.first(), report.waves.last()) {
        report.rss_growth = last.rss_mib / first.rss_mib.max(f64::MIN_POSITIVE);
    }
    c.assert_controller_running();
    // Stopped as a rollout stops it: a controller built with `dhat-heap` then writes its
    // heap profile.
    c.terminate_replica(0);
    let kept = std::env::temp_dir().join("tenon-scale-controller.log");
    if std::fs::write(&kept, c.controller_log()).is_ok() {
        report.controller_log = kept.display().to_string();
    }
    report
}

/// How long the steady state waits after the last pod started, for the writes that follow.
const SETTLE: Duration = Duration::from_secs(15);

/// 16-vCPU on-demand nodes of the lab's EC2NodeClass, no limits, no consolidation: the
/// benchmark takes the nodes away itself between waves.
const NODEPOOL: &str = r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: scale}
spec:
  template:
    metadata:
      labels: {scale.tenon.dev/pool: scale}
    spec:
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
        - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
        - {key: karpenter.k8s.aws/instance-category, operator: In, values: [c, m, r]}
        - {key: karpenter.k8s.aws/instance-cpu, operator: In, values: ["16"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: lab-general}
      expireAfter: Never
  disruption:
    consolidationPolicy: WhenEmpty
    consolidateAfter: Never
"#;

async fn wave(c: &mut Cluster, pid: u32, w: usize, opts: &Options, progress: &mut impl FnMut(&str)) -> Wave {
    let ns = format!("scale-wave-{}", w + 1);
    let log_from = c.controller_log().len();
    let namespaces: Api<Namespace> = Api::all(c.client.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": ns}})).expect("a Namespace");
    namespaces.create(&PostParams::default(), &namespace).await.expect("namespace created");
    let (calls0, attempts0, actions0) = ec2_calls(c);
    let first_pod = wall_now();
    let started = Instant::now();
    create_pending_pods(c, &ns, opts).await;
    let pods_created = started.elapsed();
    progress(&format!(
        "{} pods pending after {:.1}s; waiting for them to be bound",
        opts.pods,
        pods_created.as_secs_f64()
    ));
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), &ns);
    let mut last_report = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let bound = pods.list(&Default::default()).await.map(|l| scenario::bound(&l.items)).unwrap_or(0);
        if bound == opts.pods {
            break;
        }
        assert!(started.elapsed() < opts.timeout, "only {bound} of {} pods bound after {:?}", opts.pods, opts.timeout);
        if last_report.elapsed() > Duration::from_secs(30) {
            last_report = Instant::now();
            let ncs = c.nodeclaims().await.len();
            progress(&format!("  {bound} of {} pods bound, {ncs} NodeClaims", opts.pods));
        }
    }
    let all_bound = started.elapsed();
    let (calls1, attempts1, actions1) = ec2_calls(c);
    let nodeclaims = c.nodeclaims().await.len();
    progress(&format!(
        "all bound after {:.1}s on {nodeclaims} NodeClaims; waiting for them to run",
        all_bound.as_secs_f64()
    ));
    // The steady state starts once the kubelets have started every pod and the controller
    // has written what follows (lastPodEventTime, Consolidatable): nothing changes then.
    eventually(opts.timeout, "every pod Running", || async {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let pods = pods.list(&Default::default()).await.ok()?;
        let running = |p: &&Pod| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
        (pods.items.iter().filter(running).count() == opts.pods).then_some(())
    })
    .await;
    tokio::time::sleep(SETTLE).await;
    progress("steady state");
    let (cpu0, passes0) = (cpu_seconds(pid), passes(c).await);
    let by_controller0 =
        by_label(&c.metrics_text().unwrap_or_default(), "controller_runtime_reconcile_total", "", "controller");
    let steady_started = Instant::now();
    tokio::time::sleep(opts.steady).await;
    let (cpu1, passes1) = (cpu_seconds(pid), passes(c).await);
    let by_controller1 =
        by_label(&c.metrics_text().unwrap_or_default(), "controller_runtime_reconcile_total", "", "controller");
    let steady = steady_started.elapsed().as_secs_f64();
    let rss_mib = proc_status_kib(pid, "VmRSS:").unwrap_or(0.0) / 1024.0;
    let rss_anon_mib = proc_status_kib(pid, "RssAnon:").unwrap_or(0.0) / 1024.0;
    let log = c.controller_log();
    let timeline = Timeline::read(log.get(log_from..).unwrap_or_default());
    let dpasses = (passes1 - passes0).max(1.0);
    let since_first_pod = |t: Option<f64>| t.map_or(f64::NAN, |t| t - first_pod);
    let mut wave = Wave {
        pods: opts.pods,
        nodeclaims,
        pods_created_seconds: pods_created.as_secs_f64(),
        decisions: timeline.creating_decisions().len(),
        batch_close_to_last_nodeclaim_seconds: timeline
            .creating_decisions()
            .iter()
            .map(|(closed, last)| last - closed)
            .fold(f64::NAN, f64::max),
        first_pod_to_first_launch_seconds: since_first_pod(timeline.launched.first().copied()),
        first_batch_close_to_first_launch_seconds: match (timeline.decisions.first(), timeline.launched.first()) {
            (Some(closed), Some(launched)) => launched - closed,
            _ => f64::NAN,
        },
        all_bound_seconds: all_bound.as_secs_f64(),
        ec2_calls: calls1 - calls0,
        ec2_attempts: attempts1 - attempts0,
        ec2_calls_per_node: (calls1 - calls0) / (nodeclaims.max(1) as f64),
        ec2_calls_by_action: growth(&actions0, actions1),
        steady_cpu_seconds_per_pass: (cpu1 - cpu0) / dpasses,
        steady_passes_per_second: (passes1 - passes0) / steady,
        steady_passes_by_controller: growth(&by_controller0, by_controller1),
        steady_cpu_seconds_per_second: (cpu1 - cpu0) / steady,
        rss_mib,
        rss_anon_mib,
        teardown_seconds: 0.0,
    };
    progress(&format!("measured before the teardown: {wave:?}"));
    progress("tearing down: deleting the pods and every NodeClaim");
    let teardown = Instant::now();
    delete_all(c, &ns).await;
    eventually(opts.timeout, "every NodeClaim gone", || async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        c.nodeclaims().await.is_empty().then_some(())
    })
    .await;
    wave.teardown_seconds = teardown.elapsed().as_secs_f64();
    wave
}

/// Creates the wave's pods, 32 at a time, each then marked unschedulable (as kube-scheduler
/// marks a pod no node fits). A create or mark the emulator refuses under load is tried
/// again: a pod lost here left a wave waiting for a pod that did not exist.
async fn create_pending_pods(c: &Cluster, ns: &str, opts: &Options) {
    let mut tasks = tokio::task::JoinSet::new();
    let joined = |r: Option<Result<Result<(), String>, tokio::task::JoinError>>| match r {
        Some(Ok(Err(e))) => panic!("{e}"),
        Some(Err(e)) => panic!("a pod's create panicked: {e}"),
        _ => {}
    };
    for i in 0..opts.pods {
        if tasks.len() >= 32 {
            joined(tasks.join_next().await);
        }
        let api: Api<Pod> = Api::namespaced(c.client.clone(), ns);
        let pod = pod(ns, i, opts.pod_cpu_millis);
        tasks.spawn(async move {
            let name = pod.metadata.name.clone().unwrap_or_default();
            let status = json!({"status": {"conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/0 nodes are available (scale benchmark)",
            }]}});
            for attempt in 0..6u32 {
                let created = match api.create(&PostParams::default(), &pod).await {
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                    r => r.map(|_| ()),
                };
                let marked = match created {
                    Ok(()) => {
                        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status)).await.map(|_| ())
                    }
                    Err(e) => Err(e),
                };
                match marked {
                    Ok(()) => return Ok(()),
                    Err(e) if attempt == 5 => return Err(format!("pod {name}: {e}")),
                    Err(_) => tokio::time::sleep(Duration::from_millis(100 << attempt)).await,
                }
            }
            Ok(())
        });
    }
    while let Some(r) = tasks.join_next().await {
        joined(Some(r));
    }
}

fn pod(ns: &str, i: usize, cpu_millis: u32) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("load-{i:05}"), "namespace": ns, "labels": {"app": "load"}},
        "spec": {
            "nodeSelector": {"scale.tenon.dev/pool": "scale"},
            "terminationGracePeriodSeconds": 0,
            "containers": [{
                "name": "pause",
                "image": "public.ecr.aws/eks-distro/kubernetes/pause:3.10",
                "resources": {"requests": {"cpu": format!("{cpu_millis}m"), "memory": "2Gi"}},
            }],
        },
    }))
    .expect("a Pod")
}

/// Deletes the wave's pods, then every NodeClaim (the controller drains and terminates them).
async fn delete_all(c: &Cluster, ns: &str) {
    let pods: Api<Pod> = Api::namespaced(c.client.clone(), ns);
    let names: Vec<String> = pods
        .list(&Default::default())
        .await
        .map(|l| l.items.into_iter().filter_map(|p| p.metadata.name).collect())
        .unwrap_or_default();
    let mut tasks = tokio::task::JoinSet::new();
    for name in names {
        if tasks.len() >= 32 {
            tasks.join_next().await;
        }
        let pods = pods.clone();
        tasks.spawn(async move {
            let _ = pods.delete(&name, &DeleteParams::default()).await;
        });
    }
    while tasks.join_next().await.is_some() {}
    let ncs: Api<NodeClaim> = Api::all(c.client.clone());
    for nc in c.nodeclaims().await {
        if let Some(name) = nc.metadata.name {
            let _ = ncs.delete(&name, &DeleteParams::default()).await;
        }
    }
}

/// When (seconds since the Unix epoch) the controller's log says each provisioning decision
/// began (its batch closed), each NodeClaim was created and each instance launched.
#[derive(Debug, Default)]
pub struct Timeline {
    pub decisions: Vec<f64>,
    pub created: Vec<f64>,
    pub launched: Vec<f64>,
}

impl Timeline {
    /// From the controller's text log (`LOG_FORMAT=text`: an RFC 3339 time first).
    pub fn read(log: &str) -> Timeline {
        let mut t = Timeline::default();
        for line in log.lines() {
            let line = strip_ansi(line);
            let Some(at) = line.split_whitespace().next().and_then(|s| s.parse::<k8s_openapi::jiff::Timestamp>().ok())
            else {
                continue;
            };
            let at = at.as_millisecond() as f64 / 1000.0;
            if line.contains(": found provisionable pod(s)") {
                t.decisions.push(at);
            } else if line.contains(": created NodeClaim") {
                t.created.push(at);
            } else if line.contains(": launched ") {
                t.launched.push(at);
            }
        }
        t
    }

    /// Each decision that created NodeClaims, with when it closed and when its last
    /// NodeClaim was created (a pass creates its NodeClaims before the next decision).
    pub fn creating_decisions(&self) -> Vec<(f64, f64)> {
        let mut out = Vec::new();
        for (i, &closed) in self.decisions.iter().enumerate() {
            let next = self.decisions.get(i + 1).copied().unwrap_or(f64::INFINITY);
            let last = self.created.iter().copied().filter(|&t| t >= closed && t < next).fold(f64::NAN, f64::max);
            if !last.is_nan() {
                out.push((closed, last));
            }
        }
        out
    }
}

/// The line without terminal colour codes (the log may carry them).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(ch) = chars.next() {
        if ch == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(ch);
        }
    }
    out
}

fn wall_now() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0.0, |d| d.as_secs_f64())
}

/// The reconciles completed (every reconciler's), from `/metrics`.
async fn passes(c: &Cluster) -> f64 {
    c.metric_sum("controller_runtime_reconcile_total", &[]).await
}

/// The EC2 calls and attempts the controller has made so far, and the calls by action, from
/// one read of `/metrics` (two reads let calls finish between them: attempts then counted
/// fewer than calls).
fn ec2_calls(c: &Cluster) -> (f64, f64, BTreeMap<String, f64>) {
    let body = c.metrics_text().unwrap_or_default();
    let ec2 = ["service=\"EC2\""];
    (
        crate::metric_sum_in(&body, "aws_sdk_go_request_total", &ec2),
        crate::metric_sum_in(&body, "aws_sdk_go_request_attempt_total", &ec2),
        by_label(&body, "aws_sdk_go_request_total", "service=\"EC2\"", "action"),
    )
}

/// Series `metric` of the exposition `body` whose labels include `filter` (empty: all),
/// summed by the value of label `key`.
fn by_label(body: &str, metric: &str, filter: &str, key: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (labels, value) in body.lines().filter_map(|l| l.strip_prefix(metric)?.strip_prefix('{')?.split_once("} ")) {
        let labels: Vec<&str> = labels.split(',').collect();
        if !filter.is_empty() && !labels.contains(&filter) {
            continue;
        }
        let Some(k) = labels.iter().find_map(|kv| kv.strip_prefix(key)?.strip_prefix("=\"")?.strip_suffix('"')) else {
            continue;
        };
        *out.entry(k.to_string()).or_default() += value.trim().parse::<f64>().unwrap_or(0.0);
    }
    out
}

/// How much each of `after` grew over `before` (those that did).
fn growth(before: &BTreeMap<String, f64>, after: BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    let grew =
        |(k, v): (String, f64)| Some(v - before.get(&k).copied().unwrap_or(0.0)).filter(|d| *d > 0.0).map(|d| (k, d));
    after.into_iter().filter_map(grew).collect()
}

/// A `/proc/PID/status` field in KiB (`VmRSS:`, `VmHWM:`).
fn proc_status_kib(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix(field)?.trim().strip_suffix("kB")?.trim().parse().ok())
}

/// The process's user + system CPU time so far, in seconds.
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return f64::NAN };
    // Fields after the command (which may hold spaces) closed by ')': utime and stime are
    // the 14th and 15th fields of the line, the 12th and 13th after it.
    let Some((_, rest)) = stat.rsplit_once(')') else { return f64::NAN };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(f64::NAN);
    (ticks(11) + ticks(12)) / clock_ticks()
}

fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok())
        .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_timeline_reads_the_controller_log_colours_or_not() {
        let log = "\u{1b}[2m2026-12-02T20:40:01.250000Z\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m tenon::controller::provisioner: found provisionable pod(s) pods=3\n\
                   2026-12-02T20:40:02.000000Z  INFO tenon::controller::provisioner: created NodeClaim nodeclaim=scale-abcde nodepool=scale reason=provisioning\n\
                   2026-12-02T20:40:03.500000Z  INFO tenon::controller::launch: launched nodeclaim=scale-abcde instance=i-1\n\
                   not a log line\n";
        let t = Timeline::read(log);
        assert_eq!(t.decisions.len(), 1);
        assert_eq!(t.created.len(), 1);
        assert_eq!(t.launched.len(), 1);
        assert!((t.created[0] - t.decisions[0] - 0.75).abs() < 1e-6, "{t:?}");
        assert!((t.launched[0] - t.created[0] - 1.5).abs() < 1e-6, "{t:?}");
    }

    #[test]
    fn a_batch_is_timed_to_the_last_nodeclaim_its_own_decision_created() {
        let t = Timeline { decisions: vec![10.0, 20.0, 30.0], created: vec![10.5, 12.0, 30.25], launched: vec![] };
        assert_eq!(t.creating_decisions(), vec![(10.0, 12.0), (30.0, 30.25)], "the decision at 20 created none");
    }

    #[test]
    fn this_process_has_a_resident_set_and_cpu_time() {
        let pid = std::process::id();
        assert!(proc_status_kib(pid, "VmRSS:").is_some_and(|k| k > 0.0));
        assert!(cpu_seconds(pid) >= 0.0);
    }
}
