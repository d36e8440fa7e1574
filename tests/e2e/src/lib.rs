//! (Long: the one `Cluster` a test drives, and its waits; stand-ins, scenarios and the
//! differential sides are modules of their own.)
//! End-to-end harness: the real `tenon controller` binary against the Kubernetes API emulator
//! and moto, with the parts of a cluster Tenon does not provide played by stand-ins:
//!
//! - a kubelet ([`kubelet`]): a Node appears [`JOIN_DELAY`] after moto reports an instance of
//!   the cluster running (providerID, kubelet labels, capacity of the real instance type, and
//!   the labels and taints its user data registers) and turns Ready [`READY_DELAY`] later;
//! - a scheduler ([`scheduler`]): binds pending pods to Ready nodes they fit and tolerate, and
//!   marks the rest `PodScheduled=False/Unschedulable`, which is what Tenon watches for;
//! - a Deployment controller ([`deployments`]): keeps `spec.replicas` pods of each Deployment;
//! - a CSI attacher ([`attacher`]): VolumeAttachments for the volumes pods on a node use.
//!
//! Each test starts its own emulator, moto and controller, all on 127.0.0.1, and stops them
//! when the [`Cluster`] is dropped (printing the controller's log when the test failed).

pub mod attacher;
pub mod deployments;
pub mod differential;
pub mod kubelet;
pub mod moto;
pub mod observe;
pub mod scale;
pub mod scenario;
pub mod scheduler;

use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::ListParams;
use kube::{Api, Client};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_api::{NodeClaim, NodePool};
use tenon_aws::{AwsProvider, ClusterInfo, Connection, Settings};
use tenon_core::cloud::{CloudProvider, Instance};
use tenon_kube_emulator::Emulator;

/// The cluster name every test runs as (the lab runbook's).
pub const CLUSTER: &str = "lab-cluster";
/// kube-system/kube-dns's ClusterIP in every test cluster.
pub const CLUSTER_DNS: &str = "172.20.0.10";
/// The runbooks' second cluster (the amd-fallback EC2NodeClass discovers its subnets by it).
pub const OTHER_CLUSTER: &str = "my-cluster";
/// From moto reporting an instance running to its Node object (the node booting).
pub const JOIN_DELAY: Duration = Duration::from_secs(1);
/// From the Node object to its Ready condition (kubelet and CNI starting).
pub const READY_DELAY: Duration = Duration::from_secs(1);
/// The controller's bearer token: the emulator records what each token calls (RBAC tests).
pub const CONTROLLER_TOKEN: &str = "tenon-controller";
/// Replica `i`'s bearer token: replica 0's is [`CONTROLLER_TOKEN`].
pub fn replica_token(i: usize) -> String {
    if i == 0 { CONTROLLER_TOKEN.to_string() } else { format!("{CONTROLLER_TOKEN}-{i}") }
}

/// How often the stand-ins look at the cluster.
pub const STANDIN_PERIOD: Duration = Duration::from_millis(200);

/// How often a stand-in looks although nothing in the cluster changed.
pub const STANDIN_IDLE_PERIOD: Duration = Duration::from_secs(2);

/// A stand-in's pace: a round every [`STANDIN_PERIOD`] when the cluster changed since the
/// last one (or the stand-in has work under way), else every [`STANDIN_IDLE_PERIOD`]; once
/// rounds take longer (a cluster of thousands of pods), a pause as long as the last round.
/// So the stand-ins leave the machine's cores to the controller they stand around, and
/// several end-to-end tests share two cores: most of a test's time nothing changes.
pub struct Pace {
    versions: tenon_kube_emulator::Versions,
    round_started: Option<Instant>,
    seen: Option<u64>,
}

impl Pace {
    pub fn new(versions: tenon_kube_emulator::Versions) -> Pace {
        Pace { versions, round_started: None, seen: None }
    }

    /// Waits until the next round is due; `busy`: the stand-in waits on time, not on the
    /// cluster (a node about to join), so every period is a round.
    pub async fn next(&mut self, busy: bool) {
        loop {
            let last = self.round_started.map_or(Duration::ZERO, |t| t.elapsed());
            tokio::time::sleep(STANDIN_PERIOD.max(last)).await;
            let version = self.versions.current();
            let idle = self.round_started.is_some_and(|t| t.elapsed() < STANDIN_IDLE_PERIOD);
            if busy || self.seen != Some(version) || !idle {
                self.seen = Some(version);
                self.round_started = Some(Instant::now());
                return;
            }
        }
    }
}

/// This crate's directory, read when the test runs (cargo sets it): a path compiled in would
/// point at whichever clone last built the shared target directory.
pub fn crate_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

pub fn repo() -> PathBuf {
    crate_dir().join("../..")
}

/// Runs a tool (`kubectl`, `helm`) from the repository root with `env` set; its stdout, or
/// the test fails with its output.
pub fn run_tool(tool: &str, args: &[&str], env: &[(&str, &std::ffi::OsStr)]) -> String {
    let out = Command::new(tool)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("{tool} on PATH (scripts/setup-tools installs it): {e}"));
    assert!(
        out.status.success(),
        "{tool} {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `tenon` binary `cargo test --workspace` built next to this test (or `$TENON_BIN`).
pub fn tenon_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("TENON_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    // A test runs from target/PROFILE/deps, a harness binary (`scale`) from target/PROFILE.
    let dir = exe.parent().expect("target/PROFILE");
    let bin = [dir.join("tenon"), dir.parent().map(|d| d.join("tenon")).unwrap_or_default()]
        .into_iter()
        .find(|b| b.exists())
        .unwrap_or_else(|| dir.join("tenon"));
    assert!(
        bin.exists(),
        "{} is missing: run the suites with `cargo nextest run --workspace` (which builds it), or build it first with `cargo nextest run --workspace --no-run`",
        bin.display()
    );
    // `cargo nextest run -p tenon-e2e` rebuilds only this crate, not the binary it runs: a stale
    // binary would test old code.
    let built = std::fs::metadata(&bin).and_then(|m| m.modified()).ok();
    let newest = newest_dependency(&bin).or_else(|| newest_source(&repo().join("host")));
    if let (Some(built), Some((newest, path))) = (built, newest) {
        assert!(
            newest <= built,
            "{} is older than {}: rebuild it with `cargo nextest run --workspace --no-run` (-p tenon-e2e does not)",
            bin.display(),
            path.display()
        );
    }
    bin
}

/// The most recently modified of the files cargo's dep-info (`<bin>.d`) says `bin` was built
/// from: exactly its sources, so a test-only module (`#[cfg(test)]`) never makes it stale.
fn newest_dependency(bin: &Path) -> Option<(std::time::SystemTime, PathBuf)> {
    let info = std::fs::read_to_string(bin.with_extension("d")).ok()?;
    let (_, deps) = info.lines().next()?.split_once(": ")?;
    deps.split_whitespace()
        .map(PathBuf::from)
        .filter_map(|p| Some((std::fs::metadata(&p).and_then(|m| m.modified()).ok()?, p)))
        .max_by_key(|(t, _)| *t)
}

/// The most recently modified source of the binary under `dir`: `.rs` files in `src/`
/// directories and `Cargo.toml`s (a crate's tests and benches do not go into the binary).
/// Whether a change to `path` can change the `tenon` binary: Rust sources and manifests, but
/// not test-only modules (`tests.rs`, `*_tests.rs`), which a build of the binary skips and so
/// never makes it newer than.
fn is_binary_source(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    if name == "Cargo.toml" {
        return true;
    }
    name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs")
}

fn newest_source(dir: &Path) -> Option<(std::time::SystemTime, PathBuf)> {
    let mut newest: Option<(std::time::SystemTime, PathBuf)> = None;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).ok()?.flatten() {
            let path = entry.path();
            let name = entry.file_name();
            if path.is_dir() {
                if !["target", "tests", "benches", "examples"].iter().any(|n| name == *n) {
                    stack.push(path);
                }
            } else if is_binary_source(&path) {
                let modified = entry.metadata().and_then(|m| m.modified()).ok()?;
                if newest.as_ref().is_none_or(|(t, _)| modified > *t) {
                    newest = Some((modified, path));
                }
            }
        }
    }
    newest
}

pub struct Cluster {
    pub emu: Emulator,
    pub moto: Moto,
    pub client: Client,
    /// The AWS account as the cluster's owner sees it (for assertions and the kubelet).
    pub aws: Arc<AwsProvider>,
    pub dir: PathBuf,
    /// Where each replica's log starts for its current run (by replica index): the replica
    /// listens on ports the kernel picks and logs them, so no other server can take a port
    /// between a test choosing it and the controller binding it.
    log_from: Vec<u64>,
    /// (replica, `health` or `metrics`) → the address its current run logged, once read:
    /// metrics are read every 100 ms while a test waits, and the log grows.
    served: std::sync::Mutex<BTreeMap<(usize, String), String>>,
    kubeconfig: PathBuf,
    /// Controller replicas (index 0 is the one most tests run); `None` once killed.
    controllers: Vec<Option<Child>>,
    /// Extra environment for the controller.
    pub controller_env: Vec<(String, String)>,
    /// Replicas elect a leader through a Lease (off unless a test runs several).
    pub leader_election: bool,
    standins: Vec<tokio::task::JoinHandle<()>>,
    started: Instant,
}

pub use moto::Moto;

impl Cluster {
    /// Emulator, moto, Karpenter's CRDs and the stand-ins; the controller is started with
    /// [`Cluster::start_controller`] (so tests can prepare objects or faults first).
    pub async fn start(name: &str) -> Cluster {
        let dir = std::env::temp_dir().join(format!("tenon-e2e-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("test directory");
        // Pods take their grace period to go, as on a real kubelet (the suites use real ones).
        let emu = Emulator::start_with(tenon_kube_emulator::Options { pod_grace_cap: Duration::from_secs(600) })
            .expect("emulator listens");
        let kubeconfig = dir.join("kubeconfig");
        std::fs::write(&kubeconfig, emu.kubeconfig()).expect("kubeconfig");
        let moto = Moto::start(&[CLUSTER, OTHER_CLUSTER], &dir.join("moto.log"));
        let config = kube::Config::new(emu.url.parse().expect("emulator URL"));
        let client = Client::try_from(config).expect("kube client");
        let mut conn = Connection::new("us-east-1");
        conn.endpoint_url = Some(moto.url.clone());
        conn.static_credentials = Some(("testing".into(), "testing".into()));
        let aws = AwsProvider::connect(
            &conn,
            Settings {
                cluster: ClusterInfo {
                    name: CLUSTER.into(),
                    endpoint: emu.url.clone(),
                    ca_bundle: String::new(),
                    service_cidr: "10.100.0.0/16".into(),
                },
                region: "us-east-1".into(),
                kubernetes_version: "1.33".into(),
                capacity: Default::default(),
            },
        )
        .await
        .expect("the connection names its region");
        let mut c = Cluster {
            emu,
            moto,
            client,
            aws: Arc::new(aws),
            dir,
            log_from: Vec::new(),
            served: Default::default(),
            kubeconfig,
            controllers: Vec::new(),
            controller_env: Vec::new(),
            leader_election: false,
            standins: Vec::new(),
            started: Instant::now(),
        };
        c.kubectl(&["apply", "-f", "charts/tenon-crd/templates/crds.yaml"]);
        // The cluster's DNS Service, in the Service CIDR moto's EKS cluster reports.
        c.apply_yaml(
            "kube-dns",
            &format!("apiVersion: v1\nkind: Service\nmetadata: {{name: kube-dns, namespace: kube-system}}\nspec:\n  clusterIP: {CLUSTER_DNS}\n  ports: [{{name: dns, port: 53, protocol: UDP}}]\n"),
        );
        let catalog = Arc::new(kubelet::catalog());
        let pace = || Pace::new(c.emu.versions());
        let standins = [
            tokio::spawn(kubelet::run(c.client.clone(), c.aws.clone(), catalog, pace())),
            tokio::spawn(scheduler::run(c.client.clone(), pace())),
            tokio::spawn(deployments::run(c.client.clone(), pace())),
            tokio::spawn(attacher::run(c.client.clone(), pace())),
        ];
        c.standins.extend(standins);
        c
    }

    /// Runs real kubectl against the emulator from the repository root; fails the test when
    /// kubectl fails.
    pub fn kubectl(&self, args: &[&str]) -> String {
        tokio::task::block_in_place(|| run_tool("kubectl", args, &[("KUBECONFIG", self.kubeconfig.as_os_str())]))
    }

    /// `kubectl apply` of an inline manifest.
    pub fn apply_yaml(&self, name: &str, yaml: &str) -> String {
        let path = self.dir.join(format!("{name}.yaml"));
        std::fs::write(&path, yaml).expect("manifest file");
        self.kubectl(&["apply", "-f", path.to_str().expect("UTF-8 path")])
    }

    /// Starts (or restarts) replica 0.
    pub fn start_controller(&mut self) {
        self.start_replica(0);
    }

    /// Starts controller replica `i`, logging to `controller-<i>.log` (appended on restarts).
    pub fn start_replica(&mut self, i: usize) {
        if self.controllers.len() <= i {
            self.controllers.resize_with(i + 1, || None);
        }
        assert!(self.controllers[i].is_none(), "replica {i} is already running");
        // Each replica its own token, so the emulator can tell them apart (faults, clocks).
        let kubeconfig = self.dir.join(format!("controller-{i}.kubeconfig"));
        let with_token =
            self.emu.kubeconfig().replace("  user: {}", &format!("  user:\n    token: {}", replica_token(i)));
        std::fs::write(&kubeconfig, with_token).expect("kubeconfig");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.replica_log_path(i))
            .expect("controller log");
        if self.log_from.len() <= i {
            self.log_from.resize(i + 1, 0);
        }
        self.log_from[i] = log.metadata().expect("controller log").len();
        if let Ok(mut served) = self.served.lock() {
            served.retain(|(replica, _), _| *replica != i);
        }
        let mut cmd = Command::new(tenon_bin());
        cmd.arg("controller")
            .env("KUBECONFIG", &kubeconfig)
            .env("CLUSTER_NAME", CLUSTER)
            .env("AWS_ENDPOINT_URL", &self.moto.url)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("KUBERNETES_VERSION", "1.33")
            .env("PROBE_BIND_ADDRESS", "127.0.0.1")
            .env("METRICS_PORT", "0")
            .env("HEALTH_PROBE_PORT", "0")
            .env("LOG_FORMAT", "text")
            .env("LOG_LEVEL", "info")
            .env("DISABLE_LEADER_ELECTION", (!self.leader_election).to_string())
            .env("SYSTEM_NAMESPACE", "kube-system")
            .env("POD_NAME", format!("tenon-{i}"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        for (k, v) in &self.controller_env {
            cmd.env(k, v);
        }
        self.controllers[i] = Some(cmd.spawn().expect("tenon controller starts"));
    }

    /// SIGKILL replica 0: no shutdown path runs, as when a node dies under the controller.
    pub fn kill_controller(&mut self) {
        self.kill_replica(0);
    }

    pub fn kill_replica(&mut self, i: usize) {
        if let Some(mut c) = self.controllers.get_mut(i).and_then(Option::take) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM to replica `i` (as a rollout sends it), and waits for it to exit (at most 30 s);
    /// its exit status.
    pub fn terminate_replica(&mut self, i: usize) -> Option<std::process::ExitStatus> {
        let mut child = self.controllers.get_mut(i).and_then(Option::take)?;
        let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                return child.wait().ok();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Fails the test if a started replica has exited.
    pub fn assert_controller_running(&mut self) {
        for (i, c) in self.controllers.iter_mut().enumerate() {
            if let Some(Ok(Some(status))) = c.as_mut().map(Child::try_wait) {
                let log = std::fs::read_to_string(self.dir.join(format!("controller-{i}.log"))).unwrap_or_default();
                panic!("controller replica {i} exited with {status}:\n{log}");
            }
        }
    }

    fn replica_log_path(&self, i: usize) -> PathBuf {
        self.dir.join(format!("controller-{i}.log"))
    }

    pub fn replica_log(&self, i: usize) -> String {
        std::fs::read_to_string(self.replica_log_path(i)).unwrap_or_default()
    }

    pub fn controller_log(&self) -> String {
        self.replica_log(0)
    }

    /// The address replica `i`'s current run serves `what` (`health`, `metrics`) on, once it
    /// has logged it.
    fn served_addr(&self, i: usize, what: &str) -> Option<String> {
        let key = (i, what.to_string());
        if let Some(addr) = self.served.lock().ok()?.get(&key) {
            return Some(addr.clone());
        }
        use std::io::{Read, Seek};
        let mut log = std::fs::File::open(self.replica_log_path(i)).ok()?;
        log.seek(std::io::SeekFrom::Start(*self.log_from.get(i)?)).ok()?;
        let mut run = Vec::new();
        log.read_to_end(&mut run).ok()?;
        let run = String::from_utf8_lossy(&run);
        let line = run.lines().find(|l| l.contains("serving probes and metrics"))?;
        let field = format!("{what}=");
        let addr = line.split_whitespace().find_map(|w| w.strip_prefix(field.as_str()))?.to_string();
        self.served.lock().ok()?.insert(key, addr.clone());
        Some(addr)
    }

    /// A policy store of this test's own, holding `files` (built name, name in the store)
    /// copied from `$TENON_POLICY_DIR` (the test command builds every policy there).
    pub fn policy_store(&self, files: &[(&str, &str)]) -> PathBuf {
        let built = PathBuf::from(std::env::var_os("TENON_POLICY_DIR").expect(
            "TENON_POLICY_DIR: the built policies, hostile guests included (the test command builds them and sets it)",
        ));
        let store = self.dir.join("policies");
        std::fs::create_dir_all(&store).expect("policy store");
        for (from, to) in files {
            std::fs::copy(built.join(from), store.join(to))
                .unwrap_or_else(|e| panic!("{from} in {}: {e}", built.display()));
        }
        store
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    pub async fn nodeclaims(&self) -> Vec<NodeClaim> {
        Api::<NodeClaim>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    }

    pub async fn pods(&self, namespace: &str) -> Vec<Pod> {
        Api::<Pod>::namespaced(self.client.clone(), namespace)
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
    }

    /// Every Event in the cluster.
    pub async fn events(&self) -> Vec<Event> {
        Api::<Event>::all(self.client.clone()).list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default()
    }

    /// (status, reason, message) of condition `type_` on NodePool `name`, once written.
    pub async fn nodepool_condition(&self, name: &str, type_: &str) -> Option<(String, String, String)> {
        let np = Api::<NodePool>::all(self.client.clone()).get(name).await.ok()?;
        let c = np.status?.conditions.into_iter().find(|x| x.type_ == type_)?;
        Some((c.status, c.reason, c.message))
    }

    /// Waits up to 30 s for condition `type_` on NodePool `name` to have `status`; returns
    /// (reason, message).
    pub async fn await_nodepool_condition(&self, name: &str, type_: &str, status: &str) -> (String, String) {
        eventually(Duration::from_secs(30), &format!("{type_}={status} on NodePool {name}"), || async {
            let (s, reason, message) = self.nodepool_condition(name, type_).await?;
            (s == status).then_some((reason, message))
        })
        .await
    }

    /// Events about the object named `name` (core/v1 Events).
    pub async fn events_for(&self, name: &str) -> Vec<Event> {
        Api::<Event>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name))
            .collect()
    }

    /// Live (pending or running) instances tagged as owned by the cluster.
    pub async fn instances(&self) -> Vec<Instance> {
        self.aws.list().await.expect("DescribeInstances on moto")
    }

    /// Replica `i`'s `/healthz`: (healthy, what it says), `None` when it does not answer.
    pub fn healthz(&self, i: usize) -> Option<(bool, String)> {
        let addr = self.served_addr(i, "health")?;
        let raw = tokio::task::block_in_place(|| http_get_raw(&addr, "/healthz"))?;
        let (head, body) = raw.split_once("\r\n\r\n")?;
        Some((head.lines().next()?.contains(" 200 "), body.to_string()))
    }

    /// Replica `i`'s process id, while it runs.
    pub fn replica_pid(&self, i: usize) -> Option<u32> {
        self.controllers.get(i)?.as_ref().map(Child::id)
    }

    /// Whether replica `i` has exited (or was never started).
    pub fn replica_exited(&mut self, i: usize) -> bool {
        match self.controllers.get_mut(i).and_then(Option::as_mut) {
            Some(c) => !matches!(c.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// The controller's whole `/metrics` body.
    pub fn metrics_text(&self) -> Option<String> {
        let addr = self.served_addr(0, "metrics")?;
        tokio::task::block_in_place(|| http_get(&addr, "/metrics"))
    }

    /// A sample of the controller's `/metrics` (`name` with labels, exactly as exposed).
    pub async fn metric(&self, name: &str) -> Option<f64> {
        let body = self.metrics_text()?;
        body.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    }

    /// The sum of every series of `name` whose labels include each of `labels` (`key="value"`).
    pub async fn metric_sum(&self, name: &str, labels: &[&str]) -> f64 {
        self.metrics_text().map_or(0.0, |body| metric_sum_in(&body, name, labels))
    }

    /// How many times the controller's `controller` reconciler has finished (with any result).
    pub async fn reconciles(&self, controller: &str) -> f64 {
        let labelled = format!("controller=\"{controller}\"");
        self.metric_sum("controller_runtime_reconcile_total", &[&labelled]).await
    }

    /// How many disruption rounds the controller has decided.
    pub async fn disruption_rounds(&self) -> f64 {
        self.metric_sum("karpenter_voluntary_disruption_decision_evaluation_duration_seconds_count", &[]).await
    }

    /// Waits until the controller has decided `n` more disruption rounds.
    pub async fn rounds_decided(&self, n: u32) {
        self.grown_by(&format!("{n} more disruption rounds"), n, || self.disruption_rounds()).await;
    }

    /// Waits until `controller` has reconciled `n` more times: a check that something did
    /// *not* happen stands on the controller having looked, not on a guess of how long that
    /// takes (a loaded machine makes a fixed sleep too short). A reconciler with no timed
    /// work passes only on a change, so one is made meanwhile: an annotation on a Namespace
    /// of its own, which no decision reads.
    pub async fn reconciled(&self, controller: &str, n: u32) {
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        let nudge: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": NUDGE}})).expect("a Namespace");
        let _ = namespaces.create(&Default::default(), &nudge).await;
        let nudges = async {
            for i in 0u64.. {
                let patch = serde_json::json!({"metadata": {"annotations": {"tenon.dev/e2e-nudge": i.to_string()}}});
                let _ = namespaces.patch(NUDGE, &Default::default(), &kube::api::Patch::Merge(&patch)).await;
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        };
        let what = format!("{n} more {controller} reconciles");
        let counted = self.grown_by(&what, n, || self.reconciles(controller));
        tokio::select! {
            _ = counted => {}
            _ = nudges => {}
        }
    }

    /// Waits (two minutes at most) until the counter `read` reads has grown by `n`.
    async fn grown_by<F, Fut>(&self, what: &str, n: u32, read: F)
    where
        F: Fn() -> Fut,
        Fut: Future<Output = f64>,
    {
        let from = read().await;
        eventually(Duration::from_secs(120), what, || async { (read().await >= from + f64::from(n)).then_some(()) })
            .await;
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for i in 0..self.controllers.len() {
            self.kill_replica(i);
        }
        for t in &self.standins {
            t.abort();
        }
        if std::thread::panicking() {
            for i in 0..self.controllers.len() {
                let log = self.replica_log(i);
                let tail: Vec<&str> = log.lines().rev().take(80).collect();
                eprintln!(
                    "--- controller replica {i} log (last {} lines; all in {}) ---\n{}",
                    tail.len(),
                    self.dir.display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The Namespace [`Cluster::reconciled`] changes to wake the controller's reconcilers.
const NUDGE: &str = "tenon-e2e-nudge";

/// Polls `probe` every 100 ms until it returns `Some`, or fails the test after `timeout`
/// naming `what`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn has_condition(nc: &NodeClaim, type_: &str) -> bool {
    nc.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

pub fn label<'a>(labels: &'a Option<BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    labels.as_ref().and_then(|l| l.get(key)).map(String::as_str)
}

/// A plain HTTP/1.0 GET (the metrics endpoint; no client library needed).
fn http_get(addr: &str, path: &str) -> Option<String> {
    http_get_raw(addr, path)?.split_once("\r\n\r\n").map(|(_, body)| body.to_string())
}

/// The whole answer, status line and headers included.
fn http_get_raw(addr: &str, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    Some(out)
}

/// The sum of every series of `name` in the exposition `body` whose labels include each of
/// `labels` (`key="value"`).
pub fn metric_sum_in(body: &str, name: &str, labels: &[&str]) -> f64 {
    body.lines()
        .filter_map(|l| l.strip_prefix(name))
        .filter_map(|l| match l.strip_prefix('{') {
            Some(rest) => rest.split_once("} "),
            None => l.strip_prefix(' ').map(|v| ("", v)),
        })
        .filter(|(have, _)| labels.iter().all(|want| have.split(',').any(|kv| kv == *want)))
        .filter_map(|(_, v)| v.trim().parse::<f64>().ok())
        .sum()
}
