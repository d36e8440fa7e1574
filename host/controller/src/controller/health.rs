//! `/healthz`, `/readyz` and `/metrics` (the controller's series, see `metrics`, then the
//! policy runtime's and the EC2 provider's).

use super::metrics::Metrics;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A control-loop pass running longer than this makes `/healthz` fail (the kubelet then
/// restarts the controller): something it waits on is stuck. A pass takes well under a
/// second; the AWS calls it makes give up an attempt after 30 s.
pub const STUCK_AFTER: Duration = Duration::from_secs(60);

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
                if m.is_ready() {
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
            get(|State((m, p, aws)): State<All>| async move {
                let body = m.render() + &p.render() + &aws.metrics.render();
                ([(axum::http::header::CONTENT_TYPE, prometheus_client::encoding::prometheus_text::CONTENT_TYPE)], body)
            }),
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
