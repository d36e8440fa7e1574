//! `/healthz`, `/readyz` and `/metrics` (the controller's series, see `metrics`, then the
//! policy runtime's and the EC2 provider's).

use super::cloud::Cloud;
use super::metrics::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A reconcile running longer than this makes `/healthz` fail (the kubelet then restarts
/// the controller): something it waits on is stuck. A reconcile takes well under a second;
/// an AWS call it makes can take 5 attempts of 30 s and their backoff (~3 minutes) and still
/// end, so only past that is a restart the way out.
pub const STUCK_AFTER: Duration = Duration::from_secs(240);

/// `/healthz`'s answer while a reconcile is stuck (the probe's body).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Stuck(pub String);

/// When each reconciler's reconcile under way started, and when its last one completed.
#[derive(Clone, Debug, Default)]
pub struct Reconciles {
    running: BTreeMap<&'static str, Instant>,
    completed: BTreeMap<&'static str, Instant>,
}

impl Reconciles {
    pub fn started(&mut self, controller: &'static str, at: Instant) {
        self.running.insert(controller, at);
    }

    pub fn finished(&mut self, controller: &'static str, at: Instant) {
        self.running.remove(controller);
        self.completed.insert(controller, at);
    }

    /// `/healthz`: failing while a reconcile has run longer than `stuck_after`, naming it. A
    /// replica that is not leading reconciles nothing and stays healthy.
    pub fn check(&self, now: Instant, stuck_after: Duration) -> Result<String, Stuck> {
        let ago = |t: Instant| format!("{:.1}s ago", now.duration_since(t).as_secs_f64());
        let stuck: Vec<String> = self
            .running
            .iter()
            .filter(|(_, t)| now.duration_since(**t) > stuck_after)
            .map(|(c, t)| {
                let last = self.completed.get(c).map_or("never".to_string(), |t| ago(*t));
                format!("{c} started {} and has not completed (last completed: {last})", ago(*t))
            })
            .collect();
        if !stuck.is_empty() {
            return Err(Stuck(format!("a reconciler is stuck: {}", stuck.join("; "))));
        }
        let last = self.completed.values().max().map_or("never".to_string(), |t| ago(*t));
        Ok(format!("ok: last reconcile completed {last}"))
    }
}

/// Serves the probes and `/metrics` (the controller's series, the policy runtime's, the
/// EC2 provider's).
pub async fn serve(
    metrics: Arc<Metrics>,
    policy_metrics: Arc<tenon_policy::metrics::Metrics>,
    cloud: Arc<dyn Cloud>,
    addr: &str,
    health_port: u16,
    metrics_port: u16,
) -> anyhow::Result<()> {
    let health = Router::new()
        .route(
            "/healthz",
            get(|State((m, cloud)): State<(Arc<Metrics>, Arc<dyn Cloud>)>| async move {
                let now = Instant::now();
                let checked = m.reconciles().check(now, STUCK_AFTER).map_err(|s| s.0);
                match checked.and_then(|ok| cloud.hung_calls(now).map_or(Ok(ok), Err)) {
                    Ok(text) => (StatusCode::OK, text),
                    Err(text) => (StatusCode::SERVICE_UNAVAILABLE, text),
                }
            }),
        )
        .route(
            "/readyz",
            get(|State((m, _)): State<(Arc<Metrics>, Arc<dyn Cloud>)>| async move {
                if m.is_ready() {
                    (StatusCode::OK, "ok")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "caches not synced")
                }
            }),
        )
        .with_state((metrics.clone(), cloud.clone()));
    type All = (Arc<Metrics>, Arc<tenon_policy::metrics::Metrics>, Arc<dyn Cloud>);
    let metrics_app = Router::new()
        .route(
            "/metrics",
            get(|State((m, p, cloud)): State<All>| async move {
                // The policies' and the cloud's few series first, so the controller's (most of
                // the text) are written once into a buffer with room for them.
                let rest = p.render() + &cloud.render_metrics();
                let mut body = m.render_with_room(rest.len());
                body.push_str(&rest);
                ([(axum::http::header::CONTENT_TYPE, prometheus_client::encoding::prometheus_text::CONTENT_TYPE)], body)
            }),
        )
        .with_state((metrics, policy_metrics, cloud));
    let h = tokio::net::TcpListener::bind((addr, health_port)).await?;
    let mm = tokio::net::TcpListener::bind((addr, metrics_port)).await?;
    // The bound addresses, not the configured ports: port 0 asks for any free one.
    tracing::info!(health = %h.local_addr()?, metrics = %mm.local_addr()?, "serving probes and metrics");
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
    fn healthz_fails_only_while_a_reconcile_is_stuck_and_names_it() {
        let t0 = Instant::now();
        let stuck = Duration::from_secs(60);
        let later = |s: u64| t0 + Duration::from_secs(s);
        assert!(Reconciles::default().check(later(1000), stuck).is_ok(), "a follower reconciles nothing");
        let mut r = Reconciles::default();
        r.started("nodeclass", t0);
        r.started("provisioner", t0);
        r.finished("provisioner", later(1));
        assert!(r.check(later(10), stuck).is_ok());
        let err = r.check(later(61), stuck).unwrap_err().to_string();
        assert!(err.contains("nodeclass started 61.0s ago") && !err.contains("provisioner"), "{err}");
        r.finished("nodeclass", later(200));
        assert!(r.check(later(1000), stuck).unwrap().contains("800.0s ago"));
    }
}
