//! Per-NodePool policies: each NodePool's `tenon.dev/*` annotations resolved through the
//! policy store. A NodePool is resolved again when its annotations or labels change, when a
//! policy file it names changes (a ConfigMap volume update swaps the file under us), and,
//! while its policy is unavailable, on a backoff until it appears. A NodePool whose policy
//! cannot be loaded or last failed is reported (`PolicyHealthy=False` + Event) and decided
//! with the fallbacks (price order, no consolidation plans, no disruptions), the same in
//! both cases; other NodePools are unaffected and keep their policies' call records.
//! `oci://` policies are pulled in the background when a NodePool needing them is resolved
//! (see oci_pull.rs) and resolved from the OCI cache once there. Resolving (compiling a
//! component, asking it to validate its configuration) runs off the control loop too (see
//! resolution.rs): a pass never waits on it for more than a moment.

use super::oci_pull::Puller;
use super::policy_sources::PolicySources;
use resolution::{INLINE_WAIT, Resolving};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tenon_api::NodePool;
use tenon_api::policy::NodePoolPolicies;
use tenon_policy::cache::PrecompileCache;
use tenon_policy::cluster::{ClusterPolicies, NodePoolInfo};
use tenon_policy::metrics::Metrics;
use tenon_policy::oci_cache::OciCache;
use tenon_policy::{FileStamp, Limits, PolicyEngine, PolicyStore};

/// A NodePool as its policies see it: template labels and `tenon.dev/*` annotations.
type PolicyInput = (BTreeMap<String, String>, BTreeMap<String, String>);

/// The first retry of an unavailable policy, doubled at each failure up to [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_secs(1);
const RETRY_MAX: Duration = Duration::from_secs(60);
/// The longest a resolution waits for one component to compile; a slower one finishes in
/// the background and is used from the retry after (the default bundle's take ~0.1 s).
const COMPILE_WAIT: Duration = Duration::from_secs(5);

/// What one NodePool's policies were resolved from, and how that went.
struct Resolved {
    input: PolicyInput,
    /// The files its annotations name, as they were when resolved.
    files: Vec<Option<FileStamp>>,
    /// Why its policies could not be loaded.
    problem: Option<String>,
    /// When a NodePool with a problem is tried again, and the wait before that.
    retry: Option<(Instant, Duration)>,
}

pub struct Policies {
    /// Shared with the resolution running off the control loop.
    store: Option<Arc<PolicyStore>>,
    resolving: Option<Resolving>,
    /// NodePools failing safe until a resolution loads the policies they now name.
    loading: BTreeSet<String>,
    /// Shared with the decisions, which run off the control loop's thread.
    pub active: Arc<ClusterPolicies>,
    resolved: BTreeMap<String, Resolved>,
    pub metrics: Arc<Metrics>,
    puller: Option<Puller>,
}

impl Policies {
    /// Without a directory, NodePools naming a policy are reported and fail safe, never
    /// silently ignored.
    pub fn new(dir: Option<&Path>, deadline_ms: u64) -> anyhow::Result<Policies> {
        let store = match dir {
            Some(d) => {
                let limits = Limits { deadline_ms, ..Limits::default() };
                let engine = PolicyEngine::new(limits, PrecompileCache::default_dir())?;
                if let Some(why) = engine.cache_refused() {
                    tracing::warn!(%why, "policy precompile cache not used; policies are compiled at every start");
                }
                Some(Arc::new(PolicyStore::new(d, engine).with_compile_wait(COMPILE_WAIT)))
            }
            None => None,
        };
        let metrics = Arc::new(Metrics::default());
        let active = Arc::new(ClusterPolicies::empty(metrics.clone()));
        Ok(Policies {
            store,
            resolving: None,
            loading: BTreeSet::new(),
            active,
            resolved: BTreeMap::new(),
            metrics,
            puller: None,
        })
    }

    /// Holds the store to the cluster admin's trust policy and, when it names OCI sources,
    /// resolves `oci://` references from them, pulling on the current Tokio runtime. Without
    /// a cache directory they stay unavailable, with that reason.
    pub fn with_sources(mut self, sources: PolicySources) -> anyhow::Result<Policies> {
        // Built before any resolution starts: the only holder of the store.
        let Some(store) = self.store.take().and_then(Arc::into_inner) else { return Ok(self) };
        let store = store.with_trust(sources.trust.clone());
        if sources.trust.oci_sources.is_empty() {
            self.store = Some(Arc::new(store));
            return Ok(self);
        }
        let Some(dir) = sources.cache.or_else(OciCache::default_dir) else {
            tracing::warn!(
                "no directory for pulled policies (set TENON_POLICY_OCI_CACHE); oci:// references stay unavailable"
            );
            self.store = Some(Arc::new(store));
            return Ok(self);
        };
        let registry = tenon_oci::Registry::new(sources.registry)?;
        self.puller = Some(Puller::new(registry, OciCache::new(&dir), sources.keys, sources.max_pulls)?);
        self.store = Some(Arc::new(store.with_oci(OciCache::new(dir), sources.trust.allow_tags)));
        Ok(self)
    }

    /// Resolves the NodePools that need it (see the module docs); `now` times the retries.
    pub fn refresh(&mut self, pools: &[Arc<NodePool>], now: Instant) {
        let inputs: BTreeMap<String, PolicyInput> = pools
            .iter()
            .filter(|np| np.metadata.deletion_timestamp.is_none())
            .map(|np| {
                let annotations: BTreeMap<String, String> = np
                    .metadata
                    .annotations
                    .clone()
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|(k, _)| k.starts_with("tenon.dev/"))
                    .collect();
                (np.metadata.name.clone().unwrap_or_default(), (np.spec.template.metadata.labels.clone(), annotations))
            })
            .collect();
        self.loading.retain(|name| inputs.contains_key(name));
        let info = |(name, (labels, annotations)): (&String, &PolicyInput)| NodePoolInfo {
            name: name.clone(),
            labels: labels.clone(),
            annotations: annotations.clone(),
        };
        // One resolution at a time: NodePools that change meanwhile are resolved after it;
        // one created meanwhile fails safe until then.
        self.finish(now, None);
        if let Some(r) = &self.resolving {
            let new: Vec<NodePoolInfo> = inputs
                .iter()
                .filter(|(name, (_, annotations))| {
                    !annotations.is_empty()
                        && !self.resolved.contains_key(*name)
                        && !r.stale.contains_key(*name)
                        && !self.loading.contains(*name)
                })
                .map(info)
                .collect();
            self.fail_safe_while_loading(new);
            return;
        }
        let files: BTreeMap<String, Vec<Option<FileStamp>>> =
            inputs.iter().map(|(name, (_, annotations))| (name.clone(), self.stamps(annotations))).collect();
        let stale: BTreeMap<String, (PolicyInput, Vec<Option<FileStamp>>)> = inputs
            .iter()
            .filter(|(name, input)| match self.resolved.get(*name) {
                None => true,
                Some(r) => r.input != **input || r.files != files[*name] || r.retry.is_some_and(|(at, _)| now >= at),
            })
            .map(|(name, input)| (name.clone(), (input.clone(), files[name].clone())))
            .collect();
        let gone = self.resolved.keys().any(|name| !inputs.contains_key(name));
        if stale.is_empty() && !gone {
            return;
        }
        let infos: Vec<NodePoolInfo> = inputs.iter().map(info).collect();
        self.pull(stale.values().map(|(input, _)| &input.1));
        // A NodePool that names other policies than it did fails safe until they are loaded;
        // one whose files changed keeps the version it has.
        let changed: Vec<NodePoolInfo> = infos
            .iter()
            .filter(|i| {
                stale
                    .get(&i.name)
                    .is_some_and(|(input, _)| self.resolved.get(&i.name).is_none_or(|r| r.input != *input))
            })
            .cloned()
            .collect();
        let resolving = Resolving::start(self.active.clone(), self.store.clone(), infos, stale);
        self.fail_safe_while_loading(changed);
        self.resolving = Some(resolving);
        self.finish(now, Some(INLINE_WAIT));
    }

    /// `pools` fail safe (and are reported loading) until a resolution loads their policies.
    fn fail_safe_while_loading(&mut self, pools: Vec<NodePoolInfo>) {
        if pools.is_empty() {
            return;
        }
        self.active = Arc::new(self.active.pending(&pools, "being loaded"));
        self.loading.extend(pools.into_iter().map(|i| i.name));
    }

    /// Takes in the running resolution's outcome if it has finished (waiting up to `wait`).
    fn finish(&mut self, now: Instant, wait: Option<Duration>) {
        let Some(outcome) = self.resolving.as_ref().and_then(|r| r.outcome(wait)) else { return };
        let Some(resolving) = self.resolving.take() else { return };
        let (active, problems) = outcome;
        self.loading.retain(|name| !resolving.stale.contains_key(name));
        // Load problems are reported below and by the NodePool's condition.
        let _ = tenon_core::disruption::PolicySet::take_failures(&active);
        self.active = Arc::new(active);
        if let Some(store) = &self.store {
            store.retain(&self.active.digests());
        }
        let mut found: BTreeMap<&str, String> = BTreeMap::new();
        for (pool, problem) in &problems {
            let all = found.entry(pool.as_str()).or_default();
            if !all.is_empty() {
                all.push_str("; ");
            }
            all.push_str(problem);
        }
        self.resolved.retain(|name, _| resolving.pools.contains(name));
        for (name, (input, files)) in &resolving.stale {
            let problem = found.remove(name.as_str()).map(|p| self.with_pull_failures(p, &input.1));
            let before = self.resolved.get(name);
            let retry = problem.as_ref().map(|_| {
                // Waits double while nothing the NodePool names changes; a change starts over.
                let wait = match before {
                    Some(b) if b.input == *input && b.files == *files => {
                        b.retry.map_or(RETRY_FIRST, |(_, w)| (w * 2).min(RETRY_MAX))
                    }
                    _ => RETRY_FIRST,
                };
                (now + wait, wait)
            });
            if let Some(p) = &problem {
                tracing::warn!(nodepool = %name, problem = %p, "NodePool policy unavailable; its fail-safe applies");
            }
            let r = Resolved { input: input.clone(), files: files.clone(), problem, retry };
            self.resolved.insert(name.clone(), r);
        }
        let unavailable = self.resolved.values().filter(|r| r.problem.is_some()).count();
        tracing::info!(
            nodepools = resolving.pools.len(),
            resolved = resolving.stale.len(),
            unavailable,
            seconds = resolving.started.elapsed().as_secs_f64(),
            "NodePool policies resolved"
        );
    }

    /// Refreshes and waits for the resolution it starts (tests: a pass never waits).
    #[cfg(test)]
    pub fn refresh_and_wait(&mut self, pools: &[Arc<NodePool>], now: Instant) {
        self.refresh(pools, now);
        self.finish(now, Some(Duration::from_secs(120)));
        assert!(self.resolving.is_none(), "the resolution did not finish in 120 s");
    }

    /// The files a NodePool's policy annotations name, in hook order.
    fn stamps(&self, annotations: &BTreeMap<String, String>) -> Vec<Option<FileStamp>> {
        let Some(store) = &self.store else { return Vec::new() };
        let (parsed, _) = NodePoolPolicies::from_annotations(annotations);
        parsed.named().map(|(_, r)| store.stamp(r)).collect()
    }

    /// Starts pulling the `oci://` policies these NodePools name that are not cached.
    fn pull<'a>(&self, annotations: impl Iterator<Item = &'a BTreeMap<String, String>>) {
        let (Some(puller), Some(store)) = (&self.puller, &self.store) else { return };
        for a in annotations {
            let (parsed, _) = NodePoolPolicies::from_annotations(a);
            for (_, r) in parsed.named() {
                // Nothing outside the trust policy is fetched: its refusal is the problem
                // resolving reports.
                let admitted = store.trust().is_none_or(|t| t.admit(r).is_ok());
                if let Some(src) = &r.oci
                    && admitted
                {
                    puller.request(src);
                }
            }
        }
    }

    /// A NodePool's problem, with why the last pull of each policy it names failed.
    fn with_pull_failures(&self, mut problem: String, annotations: &BTreeMap<String, String>) -> String {
        let Some(puller) = &self.puller else { return problem };
        let (parsed, _) = NodePoolPolicies::from_annotations(annotations);
        for src in parsed.named().filter_map(|(_, r)| r.oci.as_ref()) {
            if let Some(e) = puller.failure(src) {
                problem.push_str(&format!("; the last pull failed: {e}"));
            }
        }
        problem
    }

    /// When an unavailable NodePool's policies are next tried, if they are.
    #[cfg(test)]
    pub fn retry_at(&self, pool: &str) -> Option<Instant> {
        self.resolved.get(pool)?.retry.map(|(at, _)| at)
    }

    /// Why `pool`'s policies are unhealthy: still being loaded, a load problem, or its
    /// policies' last failures.
    pub fn unhealthy(&self, pool: &str) -> Option<(&'static str, String)> {
        if self.loading.contains(pool) {
            let why = self.resolving.as_ref().and_then(|r| r.slow(pool)).unwrap_or_else(|| {
                "its policies are being loaded; its fail-safe applies until they are loaded".to_string()
            });
            return Some(("PolicyUnavailable", why));
        }
        if let Some(p) = self.resolved.get(pool).and_then(|r| r.problem.as_ref()) {
            return Some(("PolicyUnavailable", p.clone()));
        }
        let failing = self.active.health(pool);
        (!failing.is_empty()).then(|| ("PolicyFailed", failing.join("; ")))
    }

    /// Logs the policy failures since the last pass.
    pub fn log_failures(&self) {
        use tenon_core::disruption::PolicySet;
        for f in self.active.take_failures() {
            tracing::warn!(nodepool = %f.nodepool, policy = %f.policy, hook = %f.hook, kind = %f.kind, message = %f.message, fallback = %f.fallback, "policy failed");
        }
    }
}

mod resolution;

#[cfg(test)]
mod trust_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A built component from the test command's policy directory.
    fn built(file: &str) -> Vec<u8> {
        let dir = std::env::var_os("TENON_POLICY_DIR")
            .expect("TENON_POLICY_DIR: the built policies (the test command builds them and sets it)");
        std::fs::read(Path::new(&dir).join(file)).unwrap_or_else(|e| panic!("{file}: {e}"))
    }

    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("tenon-policies-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn pool(name: &str, scoring: &str) -> Arc<NodePool> {
        Arc::new(
            serde_yaml::from_str(&format!(
                "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata:\n  name: {name}\n  annotations: {{tenon.dev/scoring-policy: \"{scoring}\"}}\nspec:\n  template:\n    spec:\n      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: lab}}\n      requirements: []\n"
            ))
            .unwrap(),
        )
    }

    #[test]
    fn an_unavailable_policy_is_retried_with_a_doubling_backoff() {
        let dir = Dir::new("backoff");
        let mut policies = Policies::new(Some(&dir.0), 1000).unwrap();
        let t0 = Instant::now();
        let pools = [pool("lab", "no-such-policy")];
        policies.refresh_and_wait(&pools, t0);
        assert!(policies.unhealthy("lab").is_some_and(|(reason, _)| reason == "PolicyUnavailable"));
        let mut at = t0;
        let mut waits = Vec::new();
        for _ in 0..9 {
            let next = policies.retry_at("lab").expect("a retry is scheduled");
            // Not retried before it is due.
            policies.refresh_and_wait(&pools, next - Duration::from_millis(1));
            assert_eq!(policies.retry_at("lab"), Some(next));
            waits.push((next - at).as_secs());
            at = next;
            policies.refresh_and_wait(&pools, next);
        }
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        // A change to the NodePool starts the backoff over.
        policies.refresh_and_wait(&[pool("lab", "still-no-such-policy")], at);
        assert_eq!(policies.retry_at("lab"), Some(at + RETRY_FIRST));
    }

    #[test]
    fn a_policy_file_that_appears_or_changes_is_picked_up_at_once() {
        let dir = Dir::new("appears");
        let mut policies = Policies::new(Some(&dir.0), 1000).unwrap();
        let t0 = Instant::now();
        let scorer = built("default_scoring.wasm");
        let pin = format!("team-scorer@sha256:{}", tenon_policy::engine::sha256_hex(&scorer));
        let pools = [pool("lab", &pin)];
        policies.refresh_and_wait(&pools, t0);
        assert!(policies.unhealthy("lab").is_some(), "not there yet");

        std::fs::write(dir.0.join("team-scorer.wasm"), b"an older, different file").unwrap();
        policies.refresh_and_wait(&pools, t0 + Duration::from_millis(10));
        let (_, why) = policies.unhealthy("lab").expect("the pin does not match");
        assert!(why.contains("team-scorer"), "{why}");

        std::fs::write(dir.0.join("team-scorer.wasm"), &scorer).unwrap();
        policies.refresh_and_wait(&pools, t0 + Duration::from_millis(20));
        assert_eq!(policies.unhealthy("lab"), None, "rewritten in place, long before a retry is due");
        assert_eq!(policies.retry_at("lab"), None);
    }

    #[test]
    fn an_updated_policy_s_old_version_is_not_kept() {
        let dir = Dir::new("old-versions");
        let mut policies = Policies::new(Some(&dir.0), 1000).unwrap();
        let t0 = Instant::now();
        let pools = [pool("lab", "team-scorer")];
        for (i, file) in ["default_scoring.wasm", "price_per_vcpu.wasm", "default_scoring.wasm"].iter().enumerate() {
            std::fs::write(dir.0.join("team-scorer.wasm"), built(file)).unwrap();
            policies.refresh_and_wait(&pools, t0 + Duration::from_millis(10 * i as u64));
            assert_eq!(policies.unhealthy("lab"), None, "{file}");
            assert_eq!(policies.store.as_ref().map(|s| s.loaded()), Some(1), "only {file} is held");
        }
    }
}
