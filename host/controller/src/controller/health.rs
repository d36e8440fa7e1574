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

#[derive(Default)]
pub struct Metrics {
    ready: AtomicBool,
    /// name{labels} → value.
    values: Mutex<BTreeMap<String, f64>>,
}

impl Metrics {
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::SeqCst);
    }

    pub fn add(&self, series: &str, v: f64) {
        if let Ok(mut m) = self.values.lock() {
            *m.entry(series.to_string()).or_insert(0.0) += v;
        }
    }

    pub fn set(&self, series: &str, v: f64) {
        if let Ok(mut m) = self.values.lock() {
            m.insert(series.to_string(), v);
        }
    }

    fn render(&self) -> String {
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
        out
    }
}

/// Serves the probes and `/metrics` (the controller's series, then the policy runtime's).
pub async fn serve(
    metrics: Arc<Metrics>,
    policy_metrics: Arc<tenon_policy::metrics::Metrics>,
    addr: &str,
    health_port: u16,
    metrics_port: u16,
) -> anyhow::Result<()> {
    let health = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(m): State<Arc<Metrics>>| async move {
                if m.ready.load(Ordering::SeqCst) {
                    (StatusCode::OK, "ok")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
                }
            }),
        )
        .with_state(metrics.clone());
    type Both = (Arc<Metrics>, Arc<tenon_policy::metrics::Metrics>);
    let metrics_app = Router::new()
        .route("/metrics", get(|State((m, p)): State<Both>| async move { m.render() + &p.render() }))
        .with_state((metrics, policy_metrics));
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
