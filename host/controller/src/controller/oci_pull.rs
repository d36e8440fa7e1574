//! Pulls the `oci://` policies NodePools name into the OCI cache, off the control loop: a
//! NodePool naming one not yet pulled is unavailable until the pull lands, then resolved
//! again (the cached file appearing changes its stamp). Failed pulls are retried on the
//! NodePool's backoff and their last error is reported with it. Pulls run a few at a time
//! (a hostile registry holds one slot, not the runtime) and each is bounded by the
//! registry's limits; when the trust policy requires signatures, an artefact is kept only
//! with a signature one of its keys made.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use tenon_api::policy::OciSource;
use tenon_oci::Registry;
use tenon_oci::cosign::TrustedKey;
use tenon_policy::oci_cache::OciCache;

pub struct Puller {
    registry: Arc<Registry>,
    cache: Arc<OciCache>,
    /// Signatures by one of these are required; none: not required.
    keys: Arc<Vec<TrustedKey>>,
    slots: Arc<tokio::sync::Semaphore>,
    runtime: tokio::runtime::Handle,
    /// References being pulled now, so that a pass does not start a second pull.
    in_flight: Arc<Mutex<BTreeSet<String>>>,
    /// The last failure per reference, until it is pulled.
    failed: Arc<Mutex<BTreeMap<String, String>>>,
}

impl Puller {
    /// A puller spawning onto the runtime this is called from, `max_pulls` at a time.
    pub fn new(registry: Registry, cache: OciCache, keys: Vec<TrustedKey>, max_pulls: usize) -> anyhow::Result<Puller> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|e| anyhow::anyhow!("pulling OCI policies needs a Tokio runtime: {e}"))?;
        Ok(Puller {
            registry: Arc::new(registry),
            cache: Arc::new(cache),
            keys: Arc::new(keys),
            slots: Arc::new(tokio::sync::Semaphore::new(max_pulls.max(1))),
            runtime,
            in_flight: Arc::default(),
            failed: Arc::default(),
        })
    }

    /// Whether `src` is cached as the trust policy needs it: signed by a trusted key when
    /// signatures are required (a key added since the pull means pulling its signatures).
    fn cached(&self, src: &OciSource) -> bool {
        self.cache.holds(src)
            && (self.keys.is_empty() || {
                let signers = self.cache.signers(src);
                self.keys.iter().any(|k| signers.iter().any(|s| s == k.fingerprint()))
            })
    }

    /// Starts pulling `src` unless it is cached or being pulled.
    pub fn request(&self, src: &OciSource) {
        if self.cached(src) {
            return;
        }
        let key = src.to_string();
        if !self.in_flight.lock().unwrap_or_else(|e| e.into_inner()).insert(key.clone()) {
            return;
        }
        let (registry, cache, keys, slots, in_flight, failed) = (
            self.registry.clone(),
            self.cache.clone(),
            self.keys.clone(),
            self.slots.clone(),
            self.in_flight.clone(),
            self.failed.clone(),
        );
        let src = src.clone();
        self.runtime.spawn(async move {
            let _slot = slots.acquire_owned().await;
            let started = std::time::Instant::now();
            let outcome = pull(&registry, &cache, &keys, &src).await;
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

/// Pulls, checks signatures when keys are given, and keeps the artefact; its digest.
async fn pull(registry: &Registry, cache: &OciCache, keys: &[TrustedKey], src: &OciSource) -> Result<String, String> {
    let p = registry.pull(src, !keys.is_empty()).await.map_err(|e| e.to_string())?;
    let signers = if keys.is_empty() {
        Vec::new()
    } else {
        tenon_oci::cosign::verify(keys, &p.digest, &p.signatures)
            .map_err(|e| format!("{src}: refused by the trust policy (policies.trust.signatureKeys): {e}"))?
    };
    cache.put(src, &p.digest, &p.manifest, &p.component, &signers).map_err(|e| e.to_string())?;
    Ok(p.digest)
}
