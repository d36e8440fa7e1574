//! `/healthz`, `/readyz` and `/metrics`. Metric names follow Karpenter's where the meaning is
//! the same (`karpenter_*`), Tenon's own are `tenon_*`.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A control-loop pass running longer than this makes `/healthz` fail (the kubelet then
/// restarts the controller): something it waits on is stuck. A pass takes well under a
/// second; the AWS calls it makes give up an attempt after 30 s.
pub const STUCK_AFTER: Duration = Duration::from_secs(60);

/// Each control-loop pass's duration.
const PASS_SECONDS: &str = "tenon_controller_pass_duration_seconds";
const PASS_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0];

#[derive(Default)]
pub struct Metrics {
    ready: AtomicBool,
    /// name{labels} → value.
    values: Mutex<BTreeMap<String, f64>>,
    /// name → labels → observations: histograms (with buckets) and summaries (without).
    observed: Mutex<BTreeMap<String, BTreeMap<String, Observations>>>,
    passes: Mutex<Passes>,
}

/// `n` buckets 1, 2, 4, … seconds (Karpenter's for NodeClaim termination durations).
pub fn doubling_buckets(n: u32) -> Vec<f64> {
    (0..n).map(|i| f64::from(1u32 << i)).collect()
}

/// Karpenter's buckets for a node's lifetime in seconds (15 minutes to 30 days).
pub const LIFETIME_BUCKETS: &[f64] = &[
    900.0,
    1800.0,
    2700.0,
    3600.0,
    7200.0,
    14_400.0,
    21_600.0,
    28_800.0,
    43_200.0,
    86_400.0,
    172_800.0,
    604_800.0,
    1_209_600.0,
    2_592_000.0,
];

#[derive(Clone, Debug, Default)]
struct Observations {
    /// Cumulative counts per upper bound (empty for a summary).
    buckets: Vec<(f64, u64)>,
    sum: f64,
    count: u64,
}

/// When the control loop's current pass started, and when the last one completed.
#[derive(Clone, Copy, Debug, Default)]
pub struct Passes {
    pub running_since: Option<Instant>,
    pub last_completed: Option<Instant>,
}

impl Passes {
    /// `/healthz`: failing while a pass has run longer than `stuck_after`. A replica that is
    /// not leading runs no passes and stays healthy.
    pub fn check(&self, now: Instant, stuck_after: Duration) -> Result<String, String> {
        let ago = |t: Instant| format!("{:.1}s ago", now.duration_since(t).as_secs_f64());
        match self.running_since {
            Some(t) if now.duration_since(t) > stuck_after => Err(format!(
                "the control loop is stuck: its pass started {} and has not completed (last completed: {})",
                ago(t),
                self.last_completed.map_or("never".to_string(), ago)
            )),
            _ => Ok(format!("ok: last pass completed {}", self.last_completed.map_or("never".to_string(), ago))),
        }
    }
}

impl Metrics {
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    pub fn pass_started(&self) {
        if let Ok(mut p) = self.passes.lock() {
            p.running_since = Some(Instant::now());
        }
    }

    /// Ends the pass, recording how long it took in `tenon_controller_pass_duration_seconds`
    /// (its count is the number of passes: a benchmark divides CPU time by it).
    pub fn pass_completed(&self) {
        let now = Instant::now();
        let started = self.passes.lock().ok().and_then(|mut p| {
            p.last_completed = Some(now);
            p.running_since.take()
        });
        if let Some(started) = started {
            self.observe(PASS_SECONDS, "", now.duration_since(started).as_secs_f64(), PASS_BUCKETS);
        }
    }

    fn passes(&self) -> Passes {
        self.passes.lock().map(|p| *p).unwrap_or_default()
    }

    pub fn add(&self, series: &str, v: f64) {
        if let Ok(mut m) = self.values.lock() {
            *m.entry(series.to_string()).or_insert(0.0) += v;
        }
    }

    /// Records `v` in histogram `name` (a summary when `buckets` is empty) for `labels`
    /// (`a="x",b="y"`).
    pub fn observe(&self, name: &str, labels: &str, v: f64, buckets: &[f64]) {
        if let Ok(mut m) = self.observed.lock() {
            let o = m.entry(name.to_string()).or_default().entry(labels.to_string()).or_insert_with(|| Observations {
                buckets: buckets.iter().map(|b| (*b, 0)).collect(),
                ..Observations::default()
            });
            for (le, n) in &mut o.buckets {
                if v <= *le {
                    *n += 1;
                }
            }
            o.sum += v;
            o.count += 1;
        }
    }

    pub fn set(&self, series: &str, v: f64) {
        if let Ok(mut m) = self.values.lock() {
            m.insert(series.to_string(), v);
        }
    }

    /// Replaces every series starting with `prefix` by `series` at once (a scrape sees the
    /// old set or the new one): a gauge family whose label values come and go.
    pub fn replace(&self, prefix: &str, series: impl IntoIterator<Item = (String, f64)>) {
        if let Ok(mut m) = self.values.lock() {
            m.retain(|k, _| !k.starts_with(prefix));
            m.extend(series);
        }
    }

    pub(crate) fn render(&self) -> String {
        let m = self.values.lock().map(|m| m.clone()).unwrap_or_default();
        let mut out = String::new();
        let mut last_name = String::new();
        for (series, v) in m {
            let name = series.split('{').next().unwrap_or_default().to_string();
            if name != last_name {
                let kind = if name.ends_with("_total") { "counter" } else { "gauge" };
                out.push_str(&format!("# TYPE {name} {kind}\n"));
                last_name = name;
            }
            out.push_str(&format!("{series} {v}\n"));
        }
        let observed = self.observed.lock().map(|m| m.clone()).unwrap_or_default();
        for (name, by_labels) in observed {
            let histogram = by_labels.values().any(|o| !o.buckets.is_empty());
            out.push_str(&format!("# TYPE {name} {}\n", if histogram { "histogram" } else { "summary" }));
            for (labels, o) in by_labels {
                let sep = if labels.is_empty() { "" } else { "," };
                for (le, n) in &o.buckets {
                    out.push_str(&format!("{name}_bucket{{{labels}{sep}le=\"{le}\"}} {n}\n"));
                }
                if histogram {
                    out.push_str(&format!("{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}\n", o.count));
                }
                out.push_str(&format!("{name}_sum{{{labels}}} {}\n{name}_count{{{labels}}} {}\n", o.sum, o.count));
            }
        }
        out
    }
}

/// Serves the probes and `/metrics` (the controller's series, the policy runtime's, the
/// EC2 provider's).
pub async fn serve(
    metrics: Arc<Metrics>,
    policy_metrics: Arc<tenon_policy::metrics::Metrics>,
    provider: Arc<tenon_aws::AwsProvider>,
    addr: &str,
    health_port: u16,
    metrics_port: u16,
) -> anyhow::Result<()> {
    let health = Router::new()
        .route(
            "/healthz",
            get(|State((m, aws)): State<(Arc<Metrics>, Arc<tenon_aws::AwsProvider>)>| async move {
                let now = Instant::now();
                match m.passes().check(now, STUCK_AFTER).and_then(|ok| aws.clients.calls.check(now).map(|()| ok)) {
                    Ok(text) => (StatusCode::OK, text),
                    Err(text) => (StatusCode::SERVICE_UNAVAILABLE, text),
                }
            }),
        )
        .route(
            "/readyz",
            get(|State((m, _)): State<(Arc<Metrics>, Arc<tenon_aws::AwsProvider>)>| async move {
                if m.ready.load(Ordering::SeqCst) {
                    (StatusCode::OK, "ok")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
                }
            }),
        )
        .with_state((metrics.clone(), provider.clone()));
    type All = (Arc<Metrics>, Arc<tenon_policy::metrics::Metrics>, Arc<tenon_aws::AwsProvider>);
    let metrics_app = Router::new()
        .route(
            "/metrics",
            get(|State((m, p, aws)): State<All>| async move { m.render() + &p.render() + &aws.metrics.render() }),
        )
        .with_state((metrics, policy_metrics, provider));
    let h = tokio::net::TcpListener::bind((addr, health_port)).await?;
    let mm = tokio::net::TcpListener::bind((addr, metrics_port)).await?;
    tokio::spawn(async move {
        let _ = axum::serve(h, health).await;
    });
    tokio::spawn(async move {
        let _ = axum::serve(mm, metrics_app).await;
    });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_completed_pass_is_counted_with_its_duration() {
        let m = Metrics::default();
        m.pass_completed();
        assert!(!m.render().contains(PASS_SECONDS), "a pass that never started is not one");
        for _ in 0..3 {
            m.pass_started();
            m.pass_completed();
        }
        let text = m.render();
        assert!(text.lines().any(|l| l == format!("{PASS_SECONDS}_count{{}} 3")), "{text}");
        assert!(text.contains(&format!("# TYPE {PASS_SECONDS} histogram")), "{text}");
    }

    #[test]
    fn histograms_count_cumulatively_and_summaries_sum() {
        let m = Metrics::default();
        m.observe("x_seconds", "nodepool=\"a\"", 0.7, &[0.5, 1.0]);
        m.observe("x_seconds", "nodepool=\"a\"", 3.0, &[0.5, 1.0]);
        m.observe("y_seconds", "", 2.0, &[]);
        let text = m.render();
        for line in [
            "# TYPE x_seconds histogram",
            "x_seconds_bucket{nodepool=\"a\",le=\"0.5\"} 0",
            "x_seconds_bucket{nodepool=\"a\",le=\"1\"} 1",
            "x_seconds_bucket{nodepool=\"a\",le=\"+Inf\"} 2",
            "x_seconds_sum{nodepool=\"a\"} 3.7",
            "x_seconds_count{nodepool=\"a\"} 2",
            "# TYPE y_seconds summary",
            "y_seconds_count{} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line:?} missing from\n{text}");
        }
    }

    #[test]
    fn healthz_fails_only_while_a_pass_is_stuck() {
        let t0 = Instant::now();
        let stuck = Duration::from_secs(60);
        let later = |s: u64| t0 + Duration::from_secs(s);
        assert!(Passes::default().check(later(1000), stuck).is_ok(), "a follower runs no passes");
        let running = Passes { running_since: Some(t0), last_completed: None };
        assert!(running.check(later(10), stuck).is_ok());
        let err = running.check(later(61), stuck).unwrap_err();
        assert!(err.contains("stuck") && err.contains("61.0s ago"), "{err}");
        let done = Passes { running_since: None, last_completed: Some(later(200)) };
        assert!(done.check(later(1000), stuck).unwrap().contains("800.0s ago"));
    }
}
