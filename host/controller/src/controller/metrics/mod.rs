//! (Long: a third of it is the tests of the registry and its text format.)
//! The controller's Prometheus series, kept in prometheus-client families (HELP and TYPE
//! from [`catalog`]) and rendered in the Prometheus text format. Also the readiness flag and
//! the reconcile clocks `/readyz` and `/healthz` read.

pub mod catalog;
pub mod cluster;
pub mod offerings;
pub mod pods;
pub mod publish;
pub mod status;
pub mod summary;

use super::health::Reconciles;
use catalog::{CATALOG, Family, Kind};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabel, EncodeLabelSet, EncodeMetric, LabelSetEncoder};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::{Family as Series, MetricConstructor};
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;
use summary::Window;

/// A series' labels, in the order they are exposed.
pub type Labels = Vec<(&'static str, String)>;

/// A gauge series' labels: those it shares with the other series of its object (a node's
/// twenty, kept once for its thirty series), then its own. Compared, hashed and exposed as
/// the pairs in order, however they are split.
#[derive(Clone, Debug, Default)]
pub struct SeriesLabels {
    shared: Arc<Labels>,
    own: Labels,
}

impl SeriesLabels {
    pub fn new(shared: &Arc<Labels>, own: Labels) -> SeriesLabels {
        SeriesLabels { shared: shared.clone(), own }
    }

    pub fn pairs(&self) -> impl Iterator<Item = &(&'static str, String)> {
        self.shared.iter().chain(&self.own)
    }
}

impl From<Labels> for SeriesLabels {
    fn from(own: Labels) -> SeriesLabels {
        SeriesLabels { shared: Arc::default(), own }
    }
}

impl PartialEq for SeriesLabels {
    fn eq(&self, other: &SeriesLabels) -> bool {
        self.pairs().eq(other.pairs())
    }
}

impl Eq for SeriesLabels {}

impl std::hash::Hash for SeriesLabels {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        for pair in self.pairs() {
            pair.hash(state);
        }
    }
}

impl EncodeLabelSet for SeriesLabels {
    fn encode(&self, encoder: &mut LabelSetEncoder) -> Result<(), std::fmt::Error> {
        for pair in self.pairs() {
            pair.encode(encoder.encode_label())?;
        }
        Ok(())
    }
}

/// Builds [`Labels`] from borrowed values.
pub fn labels(pairs: &[(&'static str, &str)]) -> Labels {
    pairs.iter().map(|(k, v)| (*k, v.to_string())).collect()
}

#[derive(Debug, Clone, Copy)]
struct Buckets(&'static [f64]);

impl MetricConstructor<Histogram> for Buckets {
    fn new_metric(&self) -> Histogram {
        Histogram::new(self.0.iter().copied())
    }
}

#[derive(Debug)]
enum Store {
    Counter(Series<Labels, Counter>),
    Gauge(Series<SeriesLabels, Gauge<f64, AtomicU64>>),
    Histogram(Series<Labels, Histogram, Buckets>),
    Summary(Mutex<BTreeMap<Labels, Window>>),
}

#[derive(Debug)]
struct Families {
    by_name: BTreeMap<&'static str, (&'static Family, Store)>,
    /// Held for writing while a gauge family is replaced, for reading while encoding: a
    /// scrape sees the old set or the new one.
    swap: RwLock<()>,
}

impl Collector for Families {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let _whole = self.swap.read().unwrap_or_else(|e| e.into_inner());
        for family in CATALOG {
            let Some((_, store)) = self.by_name.get(family.name) else { continue };
            // As `Registry::register` writes them.
            let help = format!("{}.", family.help);
            match store {
                Store::Counter(s) if !s.is_empty() => {
                    let name = family.name.strip_suffix("_total").unwrap_or(family.name);
                    s.encode(encoder.encode_descriptor(name, &help, None, MetricType::Counter)?)?;
                }
                Store::Gauge(s) if !s.is_empty() => {
                    s.encode(encoder.encode_descriptor(family.name, &help, None, MetricType::Gauge)?)?;
                }
                Store::Histogram(s) if !s.is_empty() => {
                    s.encode(encoder.encode_descriptor(family.name, &help, None, MetricType::Histogram)?)?;
                }
                _ => {}
            }
        }
        Ok(())
    }
}

pub struct Metrics {
    ready: AtomicBool,
    families: Arc<Families>,
    registry: Registry,
    reconciles: Mutex<Reconciles>,
    /// The last render's length: the next is written into a buffer of about that size.
    rendered: AtomicUsize,
}

impl Default for Metrics {
    fn default() -> Self {
        let by_name = CATALOG
            .iter()
            .map(|f| {
                let store = match f.kind {
                    Kind::Counter => Store::Counter(Series::default()),
                    Kind::Gauge => Store::Gauge(Series::default()),
                    Kind::Histogram(b) => Store::Histogram(Series::new_with_constructor(Buckets(b))),
                    Kind::Summary => Store::Summary(Mutex::default()),
                };
                (f.name, (*f, store))
            })
            .collect();
        let families = Arc::new(Families { by_name, swap: RwLock::new(()) });
        let mut registry = Registry::default();
        registry.register_collector(Box::new(families.clone()));
        let metrics = Metrics {
            ready: AtomicBool::new(false),
            families,
            registry,
            reconciles: Mutex::default(),
            rendered: AtomicUsize::new(0),
        };
        metrics.set(catalog::BUILD_INFO, &build_info(), 1.0);
        metrics
    }
}

/// `karpenter_build_info`'s labels. Karpenter's `goversion`/`goarch` carry the Rust compiler
/// and Go's name for the architecture.
fn build_info() -> Vec<(&'static str, &'static str)> {
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    vec![
        ("version", env!("CARGO_PKG_VERSION")),
        ("goversion", option_env!("TENON_RUSTC_VERSION").unwrap_or("rust")),
        ("goarch", arch),
        ("commit", option_env!("TENON_COMMIT").unwrap_or("unknown")),
    ]
}

impl Metrics {
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }

    /// Starts a reconcile of `controller` (the runner calls it; `/healthz` reads it).
    pub fn reconcile_started(&self, controller: &'static str) {
        if let Ok(mut r) = self.reconciles.lock() {
            r.started(controller, Instant::now());
        }
    }

    /// Ends a reconcile of `controller` begun at `started`, as controller-runtime counts
    /// one: its time, its result, and what failed (`error`'s label).
    pub fn reconcile_finished(&self, controller: &'static str, started: Instant, error: Option<&'static str>) {
        let now = Instant::now();
        if let Ok(mut r) = self.reconciles.lock() {
            r.finished(controller, now);
        }
        let name = [("controller", controller)];
        self.observe(catalog::RECONCILE_TIME, &name, now.duration_since(started).as_secs_f64());
        let result = if error.is_some() { "error" } else { "success" };
        self.add(catalog::RECONCILE_TOTAL, &[("controller", controller), ("result", result)], 1);
        // Every series exists from the first reconcile, at zero, as controller-runtime has them.
        let other = if error.is_some() { "success" } else { "error" };
        self.add(catalog::RECONCILE_TOTAL, &[("controller", controller), ("result", other)], 0);
        self.add(catalog::RECONCILE_ERRORS, &name, u64::from(error.is_some()));
        if let Some(kind) = error {
            self.add(catalog::RECONCILE_ERROR_KINDS, &[("controller", controller), ("error", kind)], 1);
        }
    }

    pub fn reconciles(&self) -> Reconciles {
        self.reconciles.lock().map(|r| r.clone()).unwrap_or_default()
    }

    fn store(&self, family: &'static Family) -> &Store {
        match self.families.by_name.get(family.name) {
            Some((_, store)) => store,
            // CATALOG lists every family constant, so this cannot happen.
            None => unreachable!("{} is not in the catalog", family.name),
        }
    }

    /// Adds `n` to counter `family`'s series `labels`.
    pub fn add(&self, family: &'static Family, labels: &[(&'static str, &str)], n: u64) {
        self.add_labelled(family, self::labels(labels), n);
    }

    /// Advances a counter kept elsewhere (an atomic another component owns) to `total`.
    pub fn advance_to(&self, family: &'static Family, labels: &[(&'static str, &str)], total: u64) {
        if let Store::Counter(s) = self.store(family) {
            let c = s.get_or_create(&self::labels(labels));
            c.inc_by(total.saturating_sub(c.get()));
        }
    }

    /// As [`Metrics::add`], with owned labels.
    pub fn add_labelled(&self, family: &'static Family, labels: Labels, n: u64) {
        if let Store::Counter(s) = self.store(family) {
            s.get_or_create(&labels).inc_by(n);
        }
    }

    /// As [`Metrics::observe`], with owned labels (histograms only).
    pub fn observe_labelled(&self, family: &'static Family, labels: Labels, v: f64) {
        if let Store::Histogram(s) = self.store(family) {
            s.get_or_create(&labels).observe(v);
        }
    }

    pub fn set(&self, family: &'static Family, labels: &[(&'static str, &str)], v: f64) {
        if let Store::Gauge(s) = self.store(family) {
            s.get_or_create(&self::labels(labels).into()).set(v);
        }
    }

    /// Records `v` in histogram or summary `family`.
    pub fn observe(&self, family: &'static Family, labels: &[(&'static str, &str)], v: f64) {
        match self.store(family) {
            Store::Histogram(s) => s.get_or_create(&self::labels(labels)).observe(v),
            Store::Summary(m) => {
                if let Ok(mut m) = m.lock() {
                    m.entry(self::labels(labels)).or_default().observe(Instant::now(), v);
                }
            }
            _ => {}
        }
    }

    /// Replaces gauge `family`'s series by `series` at once: a family whose label values
    /// come and go (deleted nodes leave it).
    pub fn replace<L: Into<SeriesLabels>>(&self, family: &'static Family, series: impl IntoIterator<Item = (L, f64)>) {
        if let Store::Gauge(s) = self.store(family) {
            let _whole = self.families.swap.write().unwrap_or_else(|e| e.into_inner());
            s.clear();
            for (labels, v) in series {
                s.get_or_create(&labels.into()).set(v);
            }
        }
    }

    /// A counter's or gauge's value, or a histogram's or summary's count.
    #[cfg(test)]
    pub fn value(&self, family: &'static Family, labels: &[(&'static str, &str)]) -> Option<f64> {
        let l = self::labels(labels);
        match self.store(family) {
            Store::Counter(s) => s.get(&l).map(|c| c.get() as f64),
            Store::Gauge(s) => s.get(&l.clone().into()).map(|g| g.get()),
            Store::Histogram(s) => s.get(&l).map(|h| h.count() as f64),
            Store::Summary(m) => m.lock().ok()?.get(&l).map(|w| w.count() as f64),
        }
    }

    /// Counts `nc` in `karpenter_nodeclaims_disrupted_total` with Karpenter's labels:
    /// `consolidation_policy` is the NodePool's in snake_case for consolidation, empty otherwise.
    pub fn nodeclaim_disrupted(&self, nc: &tenon_api::NodeClaim, reason: &str, consolidation_policy: &str) {
        let labels = disruption_labels(nc, reason, consolidation_policy);
        self.add(catalog::NODECLAIMS_DISRUPTED, &label_refs(&labels), 1);
    }

    /// As [`Metrics::nodeclaim_disrupted`], and `pods` (its reschedulable pods) counted in
    /// `karpenter_pods_disruption_initiated_total` with the same labels: what Karpenter's
    /// disruption queue, expiration and garbage collection record.
    pub fn nodeclaim_and_pods_disrupted(
        &self,
        nc: &tenon_api::NodeClaim,
        reason: &str,
        consolidation_policy: &str,
        pods: u64,
    ) {
        let labels = disruption_labels(nc, reason, consolidation_policy);
        self.add(catalog::NODECLAIMS_DISRUPTED, &label_refs(&labels), 1);
        self.add(catalog::PODS_DISRUPTION_INITIATED, &label_refs(&labels), pods);
    }

    /// The Prometheus text exposition (version 0.0.4) of every series.
    #[cfg(test)]
    pub fn render(&self) -> String {
        self.render_with_room(0)
    }

    /// [`Metrics::render`], with `room` bytes to spare for what the caller appends. At
    /// 10,000 pods the text is tens of megabytes; written into a buffer sized by the last
    /// render (an eighth more for growth), it is not grown by doubling nor copied to append.
    pub fn render_with_room(&self, room: usize) -> String {
        let last = self.rendered.load(Ordering::Relaxed);
        let mut out = String::with_capacity(last + last / 8 + room);
        if prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry).is_err() {
            tracing::warn!("could not encode the controller's metrics");
        }
        let now = Instant::now();
        for family in CATALOG.iter().filter(|f| f.kind == Kind::Summary) {
            let Store::Summary(m) = self.store(family) else { continue };
            let m = m.lock().map(|m| m.clone()).unwrap_or_default();
            if m.is_empty() {
                continue;
            }
            out.push_str(&format!("# HELP {} {}.\n# TYPE {} summary\n", family.name, family.help, family.name));
            for (labels, window) in &m {
                let labels: Vec<String> =
                    labels.iter().map(|(k, v)| format!("{k}=\"{}\"", summary::escape(v))).collect();
                window.encode(&mut out, family.name, &labels.join(","), now);
            }
        }
        self.rendered.store(out.len(), Ordering::Relaxed);
        out
    }
}

/// Karpenter's labels of a disruption: reason, NodePool, capacity type, consolidation policy
/// (snake_case) and termination mode (graceful without a grace period, forceful at zero).
fn disruption_labels(
    nc: &tenon_api::NodeClaim,
    reason: &str,
    consolidation_policy: &str,
) -> [(&'static str, String); 5] {
    use tenon_api::wellknown as wk;
    let label = |k: &str| nc.metadata.labels.as_ref().and_then(|l| l.get(k)).cloned().unwrap_or_default();
    let grace = nc.spec.termination_grace_period.as_deref().map(tenon_api::duration::parse_duration);
    let mode = match grace {
        None | Some(Err(_)) => "graceful",
        Some(Ok(d)) if d.is_zero() => "forceful",
        Some(Ok(_)) => "eventual",
    };
    [
        ("reason", reason.to_string()),
        ("nodepool", label(wk::LABEL_NODEPOOL)),
        ("capacity_type", label(wk::LABEL_CAPACITY_TYPE)),
        ("consolidation_policy", snake_case(consolidation_policy)),
        ("termination_mode", mode.to_string()),
    ]
}

fn label_refs<'a>(labels: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    labels.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// `WhenEmptyOrUnderutilized` → `when_empty_or_underutilized`.
pub fn snake_case(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            out.push('_');
        }
        out.extend(c.to_lowercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::catalog::*;
    use super::*;

    #[test]
    fn each_reconcile_is_counted_by_result_and_a_failure_by_its_kind() {
        let m = Metrics::default();
        let started = Instant::now();
        m.reconcile_started("nodepool.status");
        m.reconcile_finished("nodepool.status", started, None);
        m.reconcile_finished("nodepool.status", started, Some("kube"));
        m.reconcile_finished("nodepool.status", started, Some("kube"));
        let text = m.render();
        for line in [
            "controller_runtime_reconcile_total{controller=\"nodepool.status\",result=\"success\"} 1",
            "controller_runtime_reconcile_total{controller=\"nodepool.status\",result=\"error\"} 2",
            "controller_runtime_reconcile_errors_total{controller=\"nodepool.status\"} 2",
            "tenon_controller_reconcile_errors_total{controller=\"nodepool.status\",error=\"kube\"} 2",
            "controller_runtime_reconcile_time_seconds_count{controller=\"nodepool.status\"} 3",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
        }
    }

    /// A scrape of a large cluster is tens of megabytes of text: grown by doubling, and then
    /// copied to append the other registries, it held up to three times that at once.
    #[test]
    fn a_render_is_written_into_one_buffer_sized_by_the_last() {
        let m = Metrics::default();
        let series = |n: usize| {
            let labels: Vec<_> = (0..n)
                .map(|i| {
                    (
                        SeriesLabels::from(vec![("node_name", format!("node-{i:05}")), ("zone", "us-east-1a".into())]),
                        1.0,
                    )
                })
                .collect();
            m.replace(NODES_ALLOCATABLE, labels);
        };
        series(7_200);
        let room = 50_000;
        let first = m.render_with_room(room);
        series(7_300);
        let second = m.render_with_room(room);
        assert!(second.len() > first.len());
        let held = second.capacity();
        assert!(held >= second.len() + room, "room for the rest of the body: {held} for {}", second.len());
        assert!(held <= first.len() + first.len() / 8 + room + 4096, "{held} held for {} bytes", second.len());
    }

    #[test]
    fn every_family_has_help_type_and_karpenters_suffixes() {
        let m = Metrics::default();
        for f in CATALOG {
            let labels = [("nodepool", "a\"b")];
            match f.kind {
                Kind::Counter => m.add(f, &labels, 2),
                Kind::Gauge => m.set(f, &labels, 1.5),
                Kind::Histogram(_) | Kind::Summary => m.observe(f, &labels, 0.7),
            }
        }
        let text = m.render();
        for f in CATALOG {
            let kind = match f.kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
                Kind::Histogram(_) => "histogram",
                Kind::Summary => "summary",
            };
            assert!(text.contains(&format!("# HELP {} {}.\n", f.name, f.help)), "{} lacks HELP:\n{text}", f.name);
            assert!(text.contains(&format!("# TYPE {} {kind}\n", f.name)), "{} lacks TYPE:\n{text}", f.name);
            // Karpenter's one gauge named like a counter.
            let total_gauge = *f == NODEPOOLS_COST;
            assert_eq!(f.kind == Kind::Counter || total_gauge, f.name.ends_with("_total"), "{}", f.name);
        }
        assert!(text.contains("karpenter_nodes_created_total{nodepool=\"a\\\"b\"} 2\n"), "{text}");
        assert!(text.contains("karpenter_pods_startup_duration_seconds{nodepool=\"a\\\"b\",quantile=\"0.99\"} 0.7\n"));
        assert!(text.contains("karpenter_nodes_lifetime_duration_seconds_bucket{nodepool=\"a\\\"b\",le=\"900\"} 1\n"));
        let names: std::collections::BTreeSet<_> = CATALOG.iter().map(|f| f.name).collect();
        assert_eq!(names.len(), CATALOG.len(), "a family is listed twice");
    }

    #[test]
    fn histograms_count_cumulatively() {
        let m = Metrics::default();
        m.observe(NODES_LIFETIME, &[("nodepool", "a")], 1000.0);
        m.observe(NODES_LIFETIME, &[("nodepool", "a")], 5000.0);
        let text = m.render();
        let bucket = |le: &str| {
            text.lines()
                .find(|l| l.starts_with("karpenter_nodes_lifetime_duration_seconds_bucket") && l.contains(le))
                .map(|l| l.rsplit(' ').next().unwrap_or_default().to_string())
        };
        assert_eq!(bucket("le=\"900\"").as_deref(), Some("0"), "{text}");
        assert_eq!(bucket("le=\"1800\"").as_deref(), Some("1"), "{text}");
        assert_eq!(bucket("le=\"7200\"").as_deref(), Some("2"), "{text}");
        assert_eq!(bucket("le=\"+Inf\"").as_deref(), Some("2"), "{text}");
        assert_eq!(m.value(NODES_LIFETIME, &[("nodepool", "a")]), Some(2.0));
    }

    #[test]
    fn replacing_a_gauge_family_drops_series_that_went() {
        let m = Metrics::default();
        let series = |names: &[&str]| names.iter().map(|n| (labels(&[("node_name", n)]), 1.0)).collect::<Vec<_>>();
        m.replace(NODES_CURRENT_LIFETIME, series(&["a", "b"]));
        m.replace(NODES_CURRENT_LIFETIME, series(&["b"]));
        assert_eq!(m.value(NODES_CURRENT_LIFETIME, &[("node_name", "a")]), None);
        assert_eq!(m.value(NODES_CURRENT_LIFETIME, &[("node_name", "b")]), Some(1.0));
    }

    #[test]
    fn a_counter_kept_elsewhere_only_advances() {
        let m = Metrics::default();
        m.advance_to(EVENTS_DROPPED, &[], 3);
        m.advance_to(EVENTS_DROPPED, &[], 5);
        m.advance_to(EVENTS_DROPPED, &[], 4);
        assert_eq!(m.value(EVENTS_DROPPED, &[]), Some(5.0));
    }

    #[test]
    fn disrupted_nodeclaims_carry_karpenters_labels() {
        let m = Metrics::default();
        let nc: tenon_api::NodeClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodeClaim",
            "metadata": {"name": "a", "labels": {"karpenter.sh/nodepool": "p", "karpenter.sh/capacity-type": "spot"}},
            "spec": {"terminationGracePeriod": "0s", "requirements": [],
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "d"}}
        }))
        .unwrap();
        m.nodeclaim_disrupted(&nc, "underutilized", "WhenEmptyOrUnderutilized");
        let labels = [
            ("reason", "underutilized"),
            ("nodepool", "p"),
            ("capacity_type", "spot"),
            ("consolidation_policy", "when_empty_or_underutilized"),
            ("termination_mode", "forceful"),
        ];
        assert_eq!(m.value(NODECLAIMS_DISRUPTED, &labels), Some(1.0));
    }

    #[test]
    fn the_metrics_reference_lists_every_family() {
        let doc = include_str!("../../../../../docs/metrics.md");
        let missing: Vec<&str> = CATALOG.iter().map(|f| f.name).filter(|n| !doc.contains(&format!("`{n}`"))).collect();
        assert!(missing.is_empty(), "docs/metrics.md does not list {missing:?}");
    }

    /// Every family of Karpenter v1.14's metrics reference is exposed (by the controller or
    /// its AWS provider) unless it is a departure `docs/metrics.md` names.
    #[test]
    fn every_karpenter_family_is_exposed_or_a_documented_departure() {
        let reference = include_str!("../../../../../tests/fixtures/karpenter-metrics-reference.tsv");
        let doc = include_str!("../../../../../docs/metrics.md");
        let aws = tenon_aws::metrics::Metrics::default();
        let ours: std::collections::BTreeSet<&str> = CATALOG.iter().map(|f| f.name).collect();
        let mut rows = 0;
        for line in reference.lines().filter(|l| !l.starts_with('#')).skip(1) {
            let cols: Vec<&str> = line.split('\t').collect();
            let (name, status) = (cols[0], cols[1]);
            let described = |n: &str| aws.names().contains(&n);
            let exposed = ours.contains(name) || described(name) || described(name.trim_end_matches("_total"));
            match status {
                "exposed" => assert!(exposed, "{name} is listed as exposed but no family has that name"),
                "departure" => {
                    assert!(!exposed, "{name} is listed as a departure but is exposed");
                    assert!(!cols[2].is_empty(), "{name}: a departure says why");
                    assert!(doc.contains(&format!("`{name}`")), "docs/metrics.md does not name the departure {name}");
                }
                other => panic!("{name}: unknown status {other}"),
            }
            rows += 1;
        }
        assert!(rows >= 120, "the v1.14 reference lists 126 families; the fixture has {rows}");
    }

    #[test]
    fn build_info_is_always_there() {
        let text = Metrics::default().render();
        let line = text.lines().find(|l| l.starts_with("karpenter_build_info{")).unwrap_or_default();
        assert!(
            line.contains(&format!("version=\"{}\"", env!("CARGO_PKG_VERSION"))) && line.ends_with(" 1.0"),
            "{text}"
        );
    }
}
