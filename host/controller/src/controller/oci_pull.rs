//! Pulls the `oci://` policies NodePools name into the OCI cache, off the control loop: a
//! NodePool naming one not yet pulled is unavailable until the pull lands, then resolved
//! again (the cached file appearing changes its stamp). Failed pulls are retried on the
//! NodePool's backoff and their last error is reported with it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tenon_api::policy::OciSource;
use tenon_oci::Registry;
use tenon_policy::oci_cache::OciCache;

pub struct Puller {
    registry: Arc<Registry>,
    cache: Arc<OciCache>,
    runtime: tokio::runtime::Handle,
    /// References being pulled now, so that a pass does not start a second pull.
    in_flight: Arc<Mutex<BTreeSet<String>>>,
    /// The last failure per reference, until it is pulled.
    failed: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Puller {
    /// A puller spawning onto the runtime this is called from.
    pub fn new(registry: Registry, cache: OciCache) -> anyhow::Result<Puller> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| anyhow::anyhow!("pulling OCI policies needs a Tokio runtime: {e}"))?;
        Ok(Puller {
            registry: Arc::new(registry),
            cache: Arc::new(cache),
            runtime,
            in_flight: Arc::default(),
            failed: Arc::default(),
        })
    }

    /// Starts pulling `src` unless it is cached or being pulled.
    pub fn request(&self, src: &OciSource) {
        if self.cache.holds(src) {
            return;
        }
        let key = src.to_string();
        if !self.in_flight.lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone()) {
            return;
        }
        let (registry, cache, in_flight, failed) =
            (self.registry.clone(), self.cache.clone(), self.in_flight.clone(), self.failed.clone());
        let src = src.clone();
        self.runtime.spawn(async move {
            let started = std::time::Instant::now();
            let outcome = match registry.pull(&src).await {
                Ok(p) => cache.put(&src, &p.digest, &p.manifest, &p.component).map(|()| p.digest).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            let mut failures = failed.lock().unwrap_or_else(|e| e.into_inner());
            match outcome {
                Ok(digest) => {
                    tracing::info!(reference = %key, %digest, seconds = started.elapsed().as_secs_f64(), "policy pulled");
                    failures.remove(&key);
                }
                Err(e) => {
                    tracing::warn!(reference = %key, error = %e, "policy pull failed; retried with its NodePool");
                    failures.insert(key.clone(), e);
                }
            }
            in_flight.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
        });
    }

    /// Why the last pull of `src` failed, if it did and it has not been pulled since.
    pub fn failure(&self, src: &OciSource) -> Option<String> {
        self.failed.lock().unwrap_or_else(|e| e.into_inner()).get(&src.to_string()).cloned()
    }
}
