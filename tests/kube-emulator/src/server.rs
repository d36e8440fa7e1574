//! (Long: one dispatch over every verb and subresource the API server answers; the store,
//! patches, selectors and tables are modules of their own.)
//! HTTP: the Kubernetes REST layout over the store, watches as chunked JSON lines, fault
//! injection.

use crate::patch::{self, PatchError};
use crate::registry::{self, ResourceType};
use crate::selectors;
use crate::store::{ApiError, Change, Store};
use crate::table;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, watch};

/// A fault to inject: the next `remaining` requests matching `verb`, `resource` and
/// `client` fail with `status`.
#[derive(Clone, Debug, Default)]
pub struct Fault {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, or `*`.
    pub verb: String,
    /// A plural (`pods`), `plural/subresource` (`pods/eviction`), or `*`.
    pub resource: String,
    /// The answer's status; 0 answers the request as usual (after `delay`).
    pub status: u16,
    pub remaining: usize,
    /// Only requests with this bearer token (one replica of several); any when `None`.
    pub client: Option<String>,
    /// The request is carried out and stored first, then answered with `status` (a write
    /// that reached etcd but whose answer was lost: a 504 from the API server's timeout).
    pub after_storing: bool,
    /// A 429 without `Retry-After` (API Priority and Fairness sends one; a PDB's refusal
    /// does not).
    pub no_retry_after: bool,
    /// The request waits this long before it is failed or answered (a slow webhook, an
    /// overloaded API server).
    pub delay: Duration,
    /// Another client's write to the request's object, stored just before the request is
    /// served: a concurrent writer between the client's read and its write.
    pub concurrent: Option<ConcurrentWrite>,
}

/// A change another client makes to an object (a CNI agent removing its startup taint, an
/// operator labelling a Node), as a function of the object as stored.
#[derive(Clone)]
pub struct ConcurrentWrite(pub Arc<dyn Fn(&mut Value) + Send + Sync>);

impl std::fmt::Debug for ConcurrentWrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ConcurrentWrite")
    }
}

/// Stores `write` to `target`'s object as another client would (a new resourceVersion, watch
/// events), through the status subresource when the request is for it; nothing when the
/// object does not exist.
fn write_concurrently(s: &Shared, target: &Target, write: &ConcurrentWrite) {
    let (Some(name), Ok(mut store)) = (target.name.as_deref(), s.store.lock()) else { return };
    let ns = target.namespace.clone().unwrap_or_default();
    let Ok(mut o) = store.get(&target.t, &ns, name) else { return };
    (write.0)(&mut o);
    o["metadata"]["resourceVersion"] = Value::Null;
    let status = target.sub.as_deref() == Some("status");
    if store.update(&target.t, &ns, name, o, status, false).is_ok() {
        let _ = s.changed.send(store.rv);
    }
}

pub struct Shared {
    pub store: Mutex<Store>,
    pub changed: broadcast::Sender<u64>,
    pub faults: Mutex<Vec<Fault>>,
    /// Resource requests made with a bearer token, counted by (token, API group, resource,
    /// verb): what RBAC would have to allow that identity, and how often it asked.
    pub audit: Mutex<BTreeMap<(String, String, String, String), u64>>,
    pub latency: Mutex<Duration>,
    /// Extra latency for requests with a bearer token (one client slower than the others).
    pub client_latency: Mutex<BTreeMap<String, Duration>>,
    /// Resource plural → until when its watches deliver nothing (held open and silent);
    /// afterwards they deliver what was held back.
    pub silent_watches: Mutex<BTreeMap<String, tokio::time::Instant>>,
    /// Bearer token → how far that client's clock is off, seconds: Lease times it writes
    /// are moved by it, and Lease times it reads by its opposite, so it sees the Lease as a
    /// process with that clock would.
    pub clock_offset: Mutex<BTreeMap<String, i64>>,
    /// Bumped to cut every open watch.
    pub watch_epoch: watch::Sender<u64>,
    /// The longest a bound pod's graceful deletion takes (the kubelet stand-in).
    pub pod_grace_cap: Duration,
    pub addr: String,
}

fn json_response(code: u16, v: &Value) -> Response {
    let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = (status, v.to_string()).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    r
}

fn error(e: ApiError) -> Response {
    let mut r = json_response(e.code, &e.status());
    if let Some(secs) = e.retry_after
        && let Ok(v) = header::HeaderValue::from_str(&secs.to_string())
    {
        r.headers_mut().insert(header::RETRY_AFTER, v);
    }
    r
}

fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn query(uri: &Uri) -> BTreeMap<String, String> {
    uri.query()
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// What a resource URL names.
struct Target {
    t: ResourceType,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn resolve(store: &Store, segs: &[&str]) -> Option<Result<Target, ApiError>> {
    let (group, version, rest) = match segs {
        ["api", v, rest @ ..] => ("", *v, rest),
        ["apis", g, v, rest @ ..] => (*g, *v, rest),
        _ => return None,
    };
    let (namespace, rest) = match rest {
        ["namespaces", ns, plural, more @ ..]
            if store.find_version(group, version, plural).is_some_and(|t| t.namespaced) =>
        {
            (Some(ns.to_string()), [&[*plural][..], more].concat())
        }
        _ => (None, rest.to_vec()),
    };
    let plural = rest.first()?;
    let Some(t) = store.find_version(group, version, plural) else {
        return Some(Err(ApiError::new(
            404,
            "NotFound",
            format!("the server could not find the requested resource ({group}/{version} {plural})"),
        )));
    };
    Some(Ok(Target { t, namespace, name: rest.get(1).map(|s| s.to_string()), sub: rest.get(2).map(|s| s.to_string()) }))
}

fn verb(method: &Method, named: bool, q: &BTreeMap<String, String>) -> &'static str {
    let watching = q.get("watch").is_some_and(|v| v == "true" || v == "1");
    match (method.as_str(), named) {
        ("GET", _) if watching => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", _) => "delete",
        _ => "other",
    }
}

fn take_fault(s: &Shared, verb: &str, resource: &str, token: Option<&str>) -> Option<Fault> {
    let mut faults = s.faults.lock().ok()?;
    let f = faults.iter_mut().find(|f| {
        f.remaining > 0
            && (f.verb == "*" || f.verb == verb)
            && (f.resource == "*" || f.resource == resource)
            && f.client.as_deref().is_none_or(|c| Some(c) == token)
    })?;
    f.remaining -= 1;
    Some(f.clone())
}

fn injected(f: &Fault) -> ApiError {
    let e = injected_status(f.status);
    if f.no_retry_after { ApiError { retry_after: None, ..e } } else { e }
}

fn injected_status(code: u16) -> ApiError {
    match code {
        409 => ApiError::new(
            409,
            "Conflict",
            "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again (injected)",
        ),
        429 => ApiError {
            retry_after: Some(1),
            ..ApiError::new(
                429,
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later (injected)",
            )
        },
        504 => ApiError::new(
            504,
            "Timeout",
            "The request did not complete in time; it may have been stored (injected): the server was unable to return a response in the time allotted, but may still be processing the request",
        ),
        503 => {
            ApiError::new(503, "ServiceUnavailable", "the server is currently unable to handle the request (injected)")
        }
        c => ApiError::new(
            c,
            "InternalError",
            "an error on the server (\"injected fault\") has prevented the request from succeeding",
        ),
    }
}

fn wants_table(headers: &HeaderMap) -> bool {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|a| a.contains("as=Table"))
}

pub async fn handle(
    State(s): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::to_string);
    let mut latency = s.latency.lock().map(|l| *l).unwrap_or_default();
    if let Some(t) = &token {
        latency += s.client_latency.lock().ok().and_then(|l| l.get(t).copied()).unwrap_or_default();
    }
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let path = uri.path().trim_matches('/').to_string();
    let segs: Vec<&str> = path.split('/').filter(|x| !x.is_empty()).collect();
    let q = query(&uri);
    if let Some(r) = discovery(&s, &segs) {
        return r;
    }
    let target = {
        let Ok(store) = s.store.lock() else { return error(ApiError::new(500, "InternalError", "store poisoned")) };
        resolve(&store, &segs)
    };
    let target = match target {
        None => {
            return error(ApiError::new(
                404,
                "NotFound",
                format!("the server could not find the requested resource (path /{path})"),
            ));
        }
        Some(Err(e)) => return error(e),
        Some(Ok(t)) => t,
    };
    let v = verb(&method, target.name.is_some(), &q);
    let resource = match &target.sub {
        Some(sub) => format!("{}/{sub}", target.t.plural),
        None => target.t.plural.clone(),
    };
    if let Some(token) = &token
        && let Ok(mut audit) = s.audit.lock()
    {
        *audit.entry((token.clone(), target.t.group.clone(), resource.clone(), v.to_string())).or_default() += 1;
    }
    let mut fault = take_fault(&s, v, &resource, token.as_deref());
    if let Some(w) = fault.as_ref().and_then(|f| f.concurrent.clone()) {
        write_concurrently(&s, &target, &w);
    }
    if let Some(f) = &fault
        && !f.delay.is_zero()
    {
        tokio::time::sleep(f.delay).await;
    }
    fault = fault.filter(|f| f.status != 0);
    if let Some(f) = &fault
        && !f.after_storing
    {
        return error(injected(f));
    }
    if v == "watch" {
        return watch_stream(s.clone(), target, q, wants_table(&headers)).await;
    }
    let ct = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("application/json").to_string();
    let offset = match &token {
        Some(t) if target.t.plural == "leases" => s.clock_offset.lock().ok().and_then(|o| o.get(t).copied()),
        _ => None,
    };
    let body = match offset {
        Some(secs) => crate::skew::shift_lease_body(&body, secs),
        None => body,
    };
    let result = serve(&s, &target, v, &q, &ct, &body);
    if let Some(f) = &fault {
        return error(injected(f));
    }
    let result = match offset {
        Some(secs) => result.map(|(code, mut value)| {
            crate::skew::shift_lease_times(&mut value, -secs);
            (code, value)
        }),
        None => result,
    };
    match result {
        Ok((code, value)) => {
            if wants_table(&headers) && v == "get" && value.get("kind").and_then(Value::as_str) != Some("Status") {
                let now = s.store.lock().map(|st| (st.now)()).unwrap_or(0);
                let rv = value["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
                return json_response(code, &table::table(&target.t, &[value], &rv, now));
            }
            if wants_table(&headers) && v == "list" {
                let now = s.store.lock().map(|st| (st.now)()).unwrap_or(0);
                let items = value["items"].as_array().cloned().unwrap_or_default();
                let rv = value["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
                let mut t = table::table(&target.t, &items, &rv, now);
                if let Some(c) = value["metadata"].get("continue") {
                    t["metadata"]["continue"] = c.clone();
                }
                return json_response(code, &t);
            }
            json_response(code, &value)
        }
        Err(e) => error(e),
    }
}

fn discovery(s: &Shared, segs: &[&str]) -> Option<Response> {
    // Resource requests are most requests: they should not take the store lock twice.
    let is_discovery =
        matches!(segs, ["version"] | ["api"] | ["api", _] | ["apis"] | ["apis", _] | ["apis", _, _] | ["openapi", ..]);
    if !is_discovery {
        return None;
    }
    let store = s.store.lock().ok()?;
    let r = match segs {
        ["version"] => {
            json!({"major": "1", "minor": "36", "gitVersion": "v1.36.0-tenon-emulator", "platform": "linux/amd64", "goVersion": "go1.24", "compiler": "gc", "gitCommit": "", "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z"})
        }
        ["api"] => {
            json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": s.addr}]})
        }
        ["api", "v1"] => registry::resource_list(&store.types, "", "v1")?,
        ["apis"] => registry::group_list(&store.types),
        ["apis", g] => {
            let list = registry::group_list(&store.types);
            let group = list["groups"].as_array()?.iter().find(|x| x["name"] == *g)?.clone();
            let mut group = group;
            group["kind"] = json!("APIGroup");
            group["apiVersion"] = json!("v1");
            group
        }
        ["apis", g, v] => registry::resource_list(&store.types, g, v)?,
        ["openapi", "v2"] => {
            json!({"swagger": "2.0", "info": {"title": "Kubernetes", "version": "v1.33.0"}, "paths": {}, "definitions": {}})
        }
        ["openapi", "v3"] => {
            let mut paths = serde_json::Map::new();
            let mut gvs: Vec<(String, String)> =
                store.types.iter().map(|t| (t.group.clone(), t.version.clone())).collect();
            gvs.sort();
            gvs.dedup();
            for (g, v) in gvs {
                let p = if g.is_empty() { format!("api/{v}") } else { format!("apis/{g}/{v}") };
                // The hash changes when the group version's types do (a CRD), not on every
                // write, so kubectl's OpenAPI cache stays valid.
                let hash = registry::gv_hash(&store.types, &g, &v);
                paths.insert(p.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={hash:016x}")}));
            }
            json!({"paths": paths})
        }
        ["openapi", "v3", "api", v] => registry::openapi_v3(&store.types, "", v),
        ["openapi", "v3", "apis", g, v] => registry::openapi_v3(&store.types, g, v),
        _ => return None,
    };
    Some(json_response(200, &r))
}

fn selectors_of(
    q: &BTreeMap<String, String>,
) -> Result<(Vec<selectors::LabelReq>, Vec<selectors::FieldReq>), ApiError> {
    let labels = selectors::parse_labels(q.get("labelSelector").map(String::as_str).unwrap_or(""))
        .map_err(|e| ApiError::new(400, "BadRequest", e))?;
    let fields = selectors::parse_fields(q.get("fieldSelector").map(String::as_str).unwrap_or(""))
        .map_err(|e| ApiError::new(400, "BadRequest", e))?;
    Ok((labels, fields))
}

fn serve(
    s: &Arc<Shared>,
    target: &Target,
    verb: &str,
    q: &BTreeMap<String, String>,
    ct: &str,
    body: &[u8],
) -> Result<(u16, Value), ApiError> {
    let t = &target.t;
    let ns = target.namespace.clone().unwrap_or_default();
    let dry_run = q.get("dryRun").is_some_and(|v| v == "All");
    let mut store = s.store.lock().map_err(|_| ApiError::new(500, "InternalError", "store poisoned"))?;
    let before = store.rv;
    let parse_body = || -> Result<Value, ApiError> {
        serde_json::from_slice(body)
            .or_else(|_| serde_yaml::from_slice(body))
            .map_err(|e| ApiError::new(400, "BadRequest", format!("the request body is not valid JSON: {e}")))
    };
    let name = target.name.clone().unwrap_or_default();
    let result = match (verb, target.sub.as_deref()) {
        ("list", _) => {
            let (labels, fields) = selectors_of(q)?;
            let ns_filter = target.namespace.as_deref();
            let mut items: Vec<Value> = store
                .list(t, ns_filter)
                .into_iter()
                .filter(|o| selectors::labels_match(&labels, o) && selectors::fields_match(&fields, o))
                .collect();
            let limit: usize = q.get("limit").and_then(|l| l.parse().ok()).unwrap_or(0);
            let start = match q.get("continue").filter(|c| !c.is_empty()) {
                Some(c) => {
                    continue_token(c).ok_or_else(|| ApiError::new(400, "BadRequest", "invalid continue token"))?
                }
                None => String::new(),
            };
            if !start.is_empty() {
                items.retain(|o| item_key(o) > start);
            }
            let mut meta = json!({"resourceVersion": store.rv.to_string()});
            if limit > 0 && items.len() > limit {
                items.truncate(limit);
                let last = items.last().map(item_key).unwrap_or_default();
                use base64::Engine;
                meta["continue"] = json!(base64::engine::general_purpose::STANDARD.encode(last));
                meta["remainingItemCount"] = json!(0);
            }
            Ok((
                200,
                json!({"kind": format!("{}List", t.kind), "apiVersion": t.api_version(), "metadata": meta, "items": items}),
            ))
        }
        ("get", None | Some("status")) => store.get(t, &ns, &name).map(|o| (200, o)),
        ("get", Some("scale")) => store.get(t, &ns, &name).map(|o| (200, scale_of(t, &o))),
        ("create", None) => store.create(t, &ns, parse_body()?, dry_run).map(|o| (201, o)),
        ("create", Some("binding")) => {
            let b = parse_body()?;
            let node = b["target"]["name"].as_str().unwrap_or_default().to_string();
            let mut pod = store.get(t, &ns, &name)?;
            if pod["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty()) {
                return Err(ApiError::new(
                    409,
                    "Conflict",
                    format!("pod {name} is already assigned to node {:?}", pod["spec"]["nodeName"]),
                ));
            }
            pod["spec"]["nodeName"] = json!(node);
            let mut pod = store.update(t, &ns, &name, pod, false, dry_run)?;
            // As the API server's binding: the pod is marked scheduled, from now.
            if bind_condition(&mut pod, &crate::store::rfc3339((store.now)())) {
                store.update(t, &ns, &name, pod, true, dry_run)?;
            }
            Ok((201, json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201})))
        }
        ("create", Some("eviction")) => {
            let e = parse_body()?;
            check_uid(&store, t, &ns, &name, &e["deleteOptions"])?;
            let grace = e["deleteOptions"]["gracePeriodSeconds"].as_i64();
            let r = store.evict(&ns, &name, grace)?;
            schedule_pod_finish(s, &store, &ns, &name);
            Ok((201, r))
        }
        ("update", None | Some("status")) => {
            store.update(t, &ns, &name, parse_body()?, target.sub.is_some(), dry_run).map(|o| (200, o))
        }
        ("update", Some("scale")) => {
            let sc = parse_body()?;
            let mut o = store.get(t, &ns, &name)?;
            o["spec"]["replicas"] = sc["spec"]["replicas"].clone();
            let o = store.update(t, &ns, &name, o, false, dry_run)?;
            Ok((200, scale_of(t, &o)))
        }
        ("patch", sub @ (None | Some("status") | Some("scale"))) => {
            let current = store.get(t, &ns, &name)?;
            let base = if sub == Some("scale") { scale_of(t, &current) } else { current.clone() };
            let patched = patch::apply(ct, &base, body).map_err(|e| match e {
                PatchError::Unsupported(m) => ApiError::new(415, "UnsupportedMediaType", m),
                PatchError::Invalid(m) => ApiError::new(422, "Invalid", m),
            })?;
            let o = if sub == Some("scale") {
                let mut o = current;
                o["spec"]["replicas"] = patched["spec"]["replicas"].clone();
                scale_of(t, &store.update(t, &ns, &name, o, false, dry_run)?)
            } else {
                store.update(t, &ns, &name, patched, sub == Some("status"), dry_run)?
            };
            Ok((200, o))
        }
        ("delete", None) => {
            let opts: Value = if body.is_empty() { json!({}) } else { parse_body()? };
            check_uid(&store, t, &ns, &name, &opts)?;
            let grace = q
                .get("gracePeriodSeconds")
                .and_then(|g| g.parse().ok())
                .or_else(|| opts["gracePeriodSeconds"].as_i64());
            let (o, still) = store.delete(t, &ns, &name, grace, dry_run)?;
            if still && t.kind == "Pod" {
                schedule_pod_finish(s, &store, &ns, &name);
            }
            Ok((if still { 202 } else { 200 }, o))
        }
        (v, sub) => Err(ApiError::new(
            405,
            "MethodNotAllowed",
            format!("{v} is not supported on {}{}", t.plural, sub.map(|s| format!("/{s}")).unwrap_or_default()),
        )),
    };
    if store.rv != before {
        let _ = s.changed.send(store.rv);
    }
    result
}

fn item_key(o: &Value) -> String {
    format!(
        "{}/{}",
        o["metadata"]["namespace"].as_str().unwrap_or_default(),
        o["metadata"]["name"].as_str().unwrap_or_default()
    )
}

fn continue_token(c: &str) -> Option<String> {
    use base64::Engine;
    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(c).ok()?).ok()
}

fn scale_of(t: &ResourceType, o: &Value) -> Value {
    json!({
        "kind": "Scale", "apiVersion": "autoscaling/v1",
        "metadata": {"name": o["metadata"]["name"], "namespace": o["metadata"]["namespace"], "resourceVersion": o["metadata"]["resourceVersion"], "uid": o["metadata"]["uid"]},
        "spec": {"replicas": o["spec"]["replicas"]},
        "status": {"replicas": o["status"]["replicas"].as_i64().unwrap_or(0), "selector": t.kind.clone()},
    })
}

/// A delete's UID precondition: 409 when the object by that name is another one.
fn check_uid(store: &Store, t: &ResourceType, ns: &str, name: &str, opts: &Value) -> Result<(), ApiError> {
    let Some(want) = opts["preconditions"]["uid"].as_str() else { return Ok(()) };
    let have = store.get(t, ns, name)?;
    if have["metadata"]["uid"].as_str() != Some(want) {
        return Err(ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": Precondition failed: UID in precondition: {want}, UID in object meta: {}",
                t.plural,
                have["metadata"]["uid"].as_str().unwrap_or_default()
            ),
        ));
    }
    Ok(())
}

/// The kubelet stand-in: a pod being deleted goes after its grace (capped).
fn schedule_pod_finish(s: &Arc<Shared>, store: &Store, ns: &str, name: &str) {
    let Some(pods) = store.find("", "pods") else { return };
    let Ok(pod) = store.get(&pods, ns, name) else { return };
    let grace = pod["metadata"]["deletionGracePeriodSeconds"].as_u64().unwrap_or(0);
    let wait = Duration::from_secs(grace).min(s.pod_grace_cap);
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default().to_string();
    let (ns, name) = (ns.to_string(), name.to_string());
    let shared = s.clone();
    tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        if let Ok(mut st) = shared.store.lock() {
            let before = st.rv;
            st.finish_pod(&ns, &name, &uid);
            if st.rv != before {
                let _ = shared.changed.send(st.rv);
            }
        }
    });
}

/// Waits while watches of `plural` are held silent (the stream stays open, nothing is
/// sent); false when the watch was cut meanwhile.
async fn held_silent(s: &Shared, plural: &str, epoch: &mut watch::Receiver<u64>) -> bool {
    loop {
        let until = s.silent_watches.lock().ok().and_then(|m| m.get(plural).copied());
        match until {
            Some(until) if tokio::time::Instant::now() < until => {
                tokio::select! {
                    _ = tokio::time::sleep_until(until) => {}
                    _ = epoch.changed() => return false,
                }
            }
            _ => return true,
        }
    }
}

fn event_line(kind: &str, object: Value) -> Bytes {
    let mut line = json!({"type": kind, "object": object}).to_string();
    line.push('\n');
    Bytes::from(line)
}

async fn watch_stream(s: Arc<Shared>, target: Target, q: BTreeMap<String, String>, as_table: bool) -> Response {
    let (labels, mut fields) = match selectors_of(&q) {
        Ok(x) => x,
        Err(e) => return error(e),
    };
    if let Some(n) = &target.name {
        fields.push(("metadata.name".into(), true, n.clone()));
    }
    let timeout = q.get("timeoutSeconds").and_then(|t| t.parse::<u64>().ok()).map(Duration::from_secs);
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let from: Option<u64> =
        q.get("resourceVersion").filter(|v| !v.is_empty() && *v != "0").and_then(|v| v.parse().ok());
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::convert::Infallible>>(64);
    let mut changed = s.changed.subscribe();
    let mut epoch = s.watch_epoch.subscribe();
    let t = target.t.clone();
    let ns = target.namespace.clone();
    let render = move |o: Value, now: i64| -> Value {
        if as_table {
            let rv = o["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
            table::table(&t, &[o], &rv, now)
        } else {
            o
        }
    };
    tokio::spawn(async move {
        let matches = |o: &Value| selectors::labels_match(&labels, o) && selectors::fields_match(&fields, o);
        let (mut last, now, initial) = {
            let Ok(st) = s.store.lock() else { return };
            let now = (st.now)();
            match from {
                Some(rv) => (rv, now, Vec::new()),
                None => {
                    let items: Vec<Value> =
                        st.list(&target.t, ns.as_deref()).into_iter().filter(|o| matches(o)).collect();
                    (st.rv, now, items)
                }
            }
        };
        if !held_silent(&s, &target.t.plural, &mut epoch).await {
            return;
        }
        for o in initial {
            if tx.send(Ok(event_line("ADDED", render(o, now)))).await.is_err() {
                return;
            }
        }
        let deadline = timeout.map(|d| tokio::time::Instant::now() + d);
        loop {
            if !held_silent(&s, &target.t.plural, &mut epoch).await {
                return;
            }
            let batch: Result<(Vec<Change>, u64, i64), ApiError> = match s.store.lock() {
                Ok(st) => st
                    .changes_since(last, &target.t.group, &target.t.plural, ns.as_deref())
                    .map(|c| (c, st.rv, (st.now)())),
                Err(_) => return,
            };
            match batch {
                Err(e) => {
                    let _ = tx.send(Ok(event_line("ERROR", e.status()))).await;
                    return;
                }
                Ok((changes, rv, now)) => {
                    for c in changes {
                        last = c.rv;
                        if matches(&c.object) && tx.send(Ok(event_line(c.kind, render(c.object, now)))).await.is_err() {
                            return;
                        }
                    }
                    last = last.max(rv);
                }
            }
            let sleep = match deadline {
                Some(d) => tokio::time::sleep_until(d),
                None => tokio::time::sleep(Duration::from_secs(3600)),
            };
            tokio::select! {
                r = changed.recv() => { if matches!(r, Err(broadcast::error::RecvError::Closed)) { return; } }
                _ = epoch.changed() => return,
                _ = sleep => return,
                _ = tokio::time::sleep(Duration::from_secs(1)), if bookmarks => {
                    let bm = json!({"kind": target.t.kind, "apiVersion": target.t.api_version(), "metadata": {"resourceVersion": last.to_string(), "annotations": {"k8s.io/initial-events-end": "true"}}});
                    if tx.send(Ok(event_line("BOOKMARK", bm))).await.is_err() { return; }
                }
            }
        }
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx);
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    r
}

/// Sets a bound pod's `PodScheduled` condition True (its transition time `now` unless it was
/// True already); whether anything changed.
fn bind_condition(pod: &mut Value, now: &str) -> bool {
    let scheduled = json!({"type": "PodScheduled", "status": "True", "lastTransitionTime": now});
    if !pod["status"].is_object() {
        pod["status"] = json!({});
    }
    let conditions = &mut pod["status"]["conditions"];
    let Some(list) = conditions.as_array_mut() else {
        *conditions = json!([scheduled]);
        return true;
    };
    match list.iter_mut().find(|c| c["type"] == "PodScheduled") {
        Some(c) if c["status"] == "True" => false,
        Some(c) => {
            *c = scheduled;
            true
        }
        None => {
            list.push(scheduled);
            true
        }
    }
}
