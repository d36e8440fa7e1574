//! client-go's request series, as Karpenter registers them (operatorpkg's adapters): every
//! request to the API server counted by status code and method, and its latency by verb,
//! group, version, resource and subresource. A layer on the kube client's service stack.

use super::metrics::{Metrics, catalog};
use http::{Method, Request, Response};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;
use tower::{Layer, Service};

/// What a request path names: group, version, resource and subresource, and whether one
/// object (by name) rather than a collection.
#[derive(Debug, PartialEq)]
pub struct Target<'a> {
    pub group: &'a str,
    pub version: &'a str,
    pub resource: &'a str,
    pub subresource: &'a str,
    pub named: bool,
}

/// Reads `/api/v1/...` and `/apis/GROUP/VERSION/...` paths; `None` for anything else
/// (`/version`, discovery).
pub fn target(path: &str) -> Option<Target<'_>> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let (group, rest) = match *parts.first()? {
        "api" => ("", &parts[1..]),
        "apis" => (*parts.get(1)?, parts.get(2..)?),
        _ => return None,
    };
    let (version, mut rest) = rest.split_first()?;
    // A namespaced resource (a namespace's own path is `namespaces/NAME`).
    if rest.first() == Some(&"namespaces") && rest.len() > 2 {
        rest = &rest[2..];
    }
    let resource = rest.first()?;
    Some(Target {
        group,
        version,
        resource,
        subresource: rest.get(2).copied().unwrap_or_default(),
        named: rest.len() > 1,
    })
}

/// client-go's verb for the latency series: POST creates, a GET of a collection (a watch
/// too) lists, a PUT updates a named object.
pub fn verb(method: &Method, named: bool) -> &'static str {
    match *method {
        Method::POST => "CREATE",
        Method::GET if !named => "LIST",
        Method::GET => "GET",
        Method::PUT if named => "UPDATE",
        Method::PUT => "CREATE",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        _ => "OTHER",
    }
}

#[derive(Clone)]
pub struct RequestMetricsLayer(pub Arc<Metrics>);

impl<S> Layer<S> for RequestMetricsLayer {
    type Service = RequestMetrics<S>;

    fn layer(&self, inner: S) -> RequestMetrics<S> {
        RequestMetrics { inner, metrics: self.0.clone() }
    }
}

#[derive(Clone)]
pub struct RequestMetrics<S> {
    inner: S,
    metrics: Arc<Metrics>,
}

type Observed<F> = Pin<Box<dyn Future<Output = F> + Send>>;

impl<S, B, R> Service<Request<B>> for RequestMetrics<S>
where
    S: Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    S::Error: 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = Observed<Result<Response<R>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let method = req.method().clone();
        let path = req.uri().path().to_string();
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let answer = self.inner.call(req);
        Box::pin(async move {
            let out = answer.await;
            let code = match &out {
                Ok(r) => r.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            metrics.add(catalog::CLIENT_GO_REQUESTS, &[("code", &code), ("method", method.as_str())], 1);
            if let Some(t) = target(&path) {
                let labels = [
                    ("verb", verb(&method, t.named)),
                    ("group", t.group),
                    ("version", t.version),
                    ("kind", t.resource),
                    ("subresource", t.subresource),
                ];
                metrics.observe(catalog::CLIENT_GO_DURATION, &labels, started.elapsed().as_secs_f64());
            }
            out
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_their_group_version_resource_and_subresource() {
        let t = |g, v, r, s, named| Some(Target { group: g, version: v, resource: r, subresource: s, named });
        assert_eq!(target("/api/v1/pods"), t("", "v1", "pods", "", false));
        assert_eq!(target("/api/v1/namespaces/kube-system/pods"), t("", "v1", "pods", "", false));
        assert_eq!(target("/api/v1/namespaces/default/pods/p/eviction"), t("", "v1", "pods", "eviction", true));
        assert_eq!(target("/api/v1/namespaces/default"), t("", "v1", "namespaces", "", true));
        assert_eq!(
            target("/apis/karpenter.sh/v1/nodeclaims/a/status"),
            t("karpenter.sh", "v1", "nodeclaims", "status", true)
        );
        assert_eq!(
            target("/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/karpenter-leader-election"),
            t("coordination.k8s.io", "v1", "leases", "", true)
        );
        assert_eq!(target("/version"), None);
        assert_eq!(target("/apis"), None);
    }

    #[test]
    fn verbs_are_client_gos() {
        assert_eq!(verb(&Method::GET, false), "LIST");
        assert_eq!(verb(&Method::GET, true), "GET");
        assert_eq!(verb(&Method::POST, false), "CREATE");
        assert_eq!(verb(&Method::PUT, true), "UPDATE");
        assert_eq!(verb(&Method::PATCH, true), "PATCH");
        assert_eq!(verb(&Method::DELETE, true), "DELETE");
    }

    #[test]
    fn each_request_is_counted_and_timed() {
        use tower::ServiceExt;
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let metrics = Arc::new(Metrics::default());
        rt.block_on(async {
            let svc = tower::service_fn(|req: Request<()>| async move {
                let status = if req.method() == Method::DELETE { 404 } else { 200 };
                Ok::<_, std::convert::Infallible>(Response::builder().status(status).body(()).unwrap())
            });
            let mut observed = RequestMetricsLayer(metrics.clone()).layer(svc);
            for (method, path) in [
                (Method::GET, "/apis/karpenter.sh/v1/nodeclaims"),
                (Method::GET, "/apis/karpenter.sh/v1/nodeclaims"),
                (Method::DELETE, "/apis/karpenter.sh/v1/nodeclaims/a"),
            ] {
                let req = Request::builder().method(method).uri(path).body(()).unwrap();
                observed.ready().await.unwrap().call(req).await.unwrap();
            }
        });
        assert_eq!(metrics.value(catalog::CLIENT_GO_REQUESTS, &[("code", "200"), ("method", "GET")]), Some(2.0));
        assert_eq!(metrics.value(catalog::CLIENT_GO_REQUESTS, &[("code", "404"), ("method", "DELETE")]), Some(1.0));
        let list = [
            ("verb", "LIST"),
            ("group", "karpenter.sh"),
            ("version", "v1"),
            ("kind", "nodeclaims"),
            ("subresource", ""),
        ];
        assert_eq!(metrics.value(catalog::CLIENT_GO_DURATION, &list), Some(2.0));
    }
}
