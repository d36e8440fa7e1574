//! An in-memory Kubernetes API server for Tenon's end-to-end tests.
//!
//! It serves discovery, OpenAPI enough for kubectl, CRUD with Kubernetes' semantics, watches,
//! label and field selectors, patches, status and scale subresources, pod binding and
//! eviction with PodDisruptionBudgets, and fault injection. See the crate README for what it
//! implements and what it deliberately does not. Test infrastructure: the shipped binary
//! never depends on it.

pub mod patch;
pub mod registry;
pub mod selectors;
pub mod server;
pub mod skew;
pub mod store;
pub mod table;

use server::Shared;
pub use server::{ConcurrentWrite, Fault};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use store::Store;

/// A running emulator on 127.0.0.1; stopped when dropped.
pub struct Emulator {
    pub url: String,
    shared: Arc<Shared>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

#[derive(Clone, Debug)]
pub struct Options {
    /// The longest a bound pod's graceful deletion takes (there is no kubelet: the emulator
    /// removes the pod after `min(grace period, this)`).
    pub pod_grace_cap: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options { pod_grace_cap: Duration::from_secs(1) }
    }
}

impl Emulator {
    pub fn start() -> std::io::Result<Emulator> {
        Emulator::start_with(Options::default())
    }

    pub fn start_with(opts: Options) -> std::io::Result<Emulator> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (changed, _) = tokio::sync::broadcast::channel(1024);
        let (watch_epoch, _) = tokio::sync::watch::channel(0);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::default()),
            changed,
            faults: Mutex::new(Vec::new()),
            audit: Mutex::new(Default::default()),
            latency: Mutex::new(Duration::ZERO),
            client_latency: Mutex::new(Default::default()),
            silent_watches: Mutex::new(Default::default()),
            clock_offset: Mutex::new(Default::default()),
            watch_epoch,
            pod_grace_cap: opts.pod_grace_cap,
            addr: addr.to_string(),
        });
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let state = shared.clone();
        let thread = std::thread::Builder::new().name("kube-emulator".into()).spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() else {
                return;
            };
            rt.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else { return };
                let app = axum::Router::new().fallback(server::handle).with_state(state);
                let (stopping, stopped) = tokio::sync::oneshot::channel::<()>();
                let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                    let _ = rx.await;
                    let _ = stopping.send(());
                });
                // A client still running (a controller's watchers) watches again after the
                // cut, and a graceful shutdown would wait out that watch (minutes): requests
                // under way get a second, then the runtime drops them.
                tokio::select! {
                    _ = std::future::IntoFuture::into_future(serve) => {}
                    _ = async {
                        let _ = stopped.await;
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    } => {}
                }
            });
        })?;
        Ok(Emulator { url: format!("http://{addr}"), shared, shutdown: Some(tx), thread: Some(thread) })
    }

    /// A kubeconfig pointing at this emulator (no credentials: it does no authentication).
    pub fn kubeconfig(&self) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: emulator\n  cluster:\n    server: {}\ncontexts:\n- name: emulator\n  context:\n    cluster: emulator\n    user: emulator\n    namespace: default\ncurrent-context: emulator\nusers:\n- name: emulator\n  user: {{}}\n",
            self.url
        )
    }

    /// The next `count` requests matching `verb` (`get`, `list`, `watch`, `create`, `update`,
    /// `patch`, `delete`, `*`) and `resource` (`pods`, `pods/eviction`, `*`) fail with
    /// `status` (500, 409 or 429).
    pub fn fail_next(&self, verb: &str, resource: &str, status: u16, count: usize) {
        self.inject(Fault {
            verb: verb.into(),
            resource: resource.into(),
            status,
            remaining: count,
            ..Fault::default()
        });
    }

    /// The next `count` requests matching `verb` and `resource` (as [`Emulator::fail_next`])
    /// wait `delay`, then are answered as usual.
    pub fn delay_next(&self, verb: &str, resource: &str, delay: Duration, count: usize) {
        self.inject(Fault {
            verb: verb.into(),
            resource: resource.into(),
            remaining: count,
            delay,
            ..Fault::default()
        });
    }

    /// The next `count` requests matching `verb` and `resource` from client `token` (any
    /// when `None`) are served just after another client changed their object with `write`.
    pub fn write_before_next(
        &self,
        verb: &str,
        resource: &str,
        token: Option<&str>,
        count: usize,
        write: impl Fn(&mut serde_json::Value) + Send + Sync + 'static,
    ) {
        self.inject(Fault {
            verb: verb.into(),
            resource: resource.into(),
            remaining: count,
            client: token.map(String::from),
            concurrent: Some(ConcurrentWrite(Arc::new(write))),
            ..Fault::default()
        });
    }

    /// Adds a fault (see [`Fault`]: per client, after storing, 429 without `Retry-After`).
    pub fn inject(&self, fault: Fault) {
        if let Ok(mut f) = self.shared.faults.lock() {
            f.push(fault);
        }
    }

    /// Requests with bearer token `token` wait `d` more than the others.
    pub fn set_client_latency(&self, token: &str, d: Duration) {
        if let Ok(mut l) = self.shared.client_latency.lock() {
            l.insert(token.to_string(), d);
        }
    }

    /// Watches of `plural` stay open and deliver nothing for `d` (a stalled watch); then
    /// they deliver what was held back.
    pub fn silence_watches(&self, plural: &str, d: Duration) {
        if let Ok(mut m) = self.shared.silent_watches.lock() {
            m.insert(plural.to_string(), tokio::time::Instant::now() + d);
        }
    }

    /// The client with bearer token `token` has a clock `secs` ahead (behind, if negative)
    /// of everyone else's.
    pub fn set_clock_offset(&self, token: &str, secs: i64) {
        if let Ok(mut o) = self.shared.clock_offset.lock() {
            o.insert(token.to_string(), secs);
        }
    }

    /// Every request waits this long first.
    pub fn set_latency(&self, d: Duration) {
        if let Ok(mut l) = self.shared.latency.lock() {
            *l = d;
        }
    }

    /// Ends every open watch stream (clients must re-watch).
    pub fn cut_watches(&self) {
        self.shared.watch_epoch.send_modify(|e| *e += 1);
    }

    /// Forgets the change log: watches from older resourceVersions now get 410 Gone.
    pub fn compact(&self) {
        if let Ok(mut s) = self.shared.store.lock() {
            s.compact();
        }
    }

    /// The (API group, resource, verb) of every resource request made with bearer token
    /// `token` (the emulator authenticates nobody; the token only tells clients apart).
    pub fn calls_by(&self, token: &str) -> std::collections::BTreeSet<(String, String, String)> {
        self.shared
            .audit
            .lock()
            .map(|a| {
                a.keys().filter(|(t, ..)| t == token).map(|(_, g, r, v)| (g.clone(), r.clone(), v.clone())).collect()
            })
            .unwrap_or_default()
    }

    /// How many `verb` requests on `resource` (`pods/eviction` for a subresource) the client
    /// with bearer token `token` has made.
    pub fn call_count(&self, token: &str, resource: &str, verb: &str) -> u64 {
        self.shared
            .audit
            .lock()
            .map(|a| {
                a.iter().filter(|((t, _, r, v), _)| t == token && r == resource && v == verb).map(|(_, n)| n).sum()
            })
            .unwrap_or(0)
    }

    /// A handle that reads the resource version from another task or thread.
    pub fn versions(&self) -> Versions {
        Versions { shared: self.shared.clone() }
    }

    /// A handle that cuts watches (and compacts) from another task or thread.
    pub fn cutter(&self) -> WatchCutter {
        WatchCutter { shared: self.shared.clone() }
    }

    /// Drops every injected fault not yet used up.
    pub fn clear_faults(&self) {
        if let Ok(mut f) = self.shared.faults.lock() {
            f.clear();
        }
    }

    /// Injected faults not yet used up.
    pub fn faults_pending(&self) -> usize {
        self.shared.faults.lock().map(|f| f.iter().map(|x| x.remaining).sum()).unwrap_or(0)
    }

    pub fn resource_version(&self) -> u64 {
        self.shared.store.lock().map(|s| s.rv).unwrap_or(0)
    }
}

/// Cuts an emulator's watches while a test does something else.
#[derive(Clone)]
pub struct WatchCutter {
    shared: Arc<Shared>,
}

impl WatchCutter {
    /// Ends every open watch; with `compact`, also forgets the change log first, so the
    /// clients' re-watch gets 410 Gone and they must relist.
    pub fn cut(&self, compact: bool) {
        if compact && let Ok(mut s) = self.shared.store.lock() {
            s.compact();
        }
        self.shared.watch_epoch.send_modify(|e| *e += 1);
    }
}

/// Reads the store's resource version from another task: a poller that sees it unchanged
/// knows no object changed since it last looked.
#[derive(Clone)]
pub struct Versions {
    shared: Arc<Shared>,
}

impl Versions {
    pub fn current(&self) -> u64 {
        self.shared.store.lock().map(|s| s.rv).unwrap_or(0)
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        self.cut_watches();
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
