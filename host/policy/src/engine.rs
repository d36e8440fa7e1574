//! The wasmtime engine Tenon runs policies with: component model, Cranelift, async calls
//! (so a call can be abandoned at its deadline), epoch interruption driven by a 1 ms ticker
//! thread, optional fuel, and a private, authenticated cache of precompiled components keyed
//! by (sha256 of the component, engine compatibility hash) (cache.rs).

use crate::cache::PrecompileCache;
use crate::error::PolicyError;
use crate::policy::{LoadedPolicy, World};
use crate::sandbox::Limits;
use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;
use wasmtime::component::Component;
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Policy calls that may be in flight at once across all threads.
pub const MAX_CONCURRENT_CALLS: u32 = 64;

/// One epoch tick; deadlines are counted in ticks.
pub const TICK: Duration = Duration::from_millis(1);

/// The thread that advances the engine's epoch every [`TICK`] while a call is under way,
/// and sleeps otherwise: a controller with nothing to decide makes no calls, and a thread
/// waking a thousand times a second was most of its idle CPU.
struct Ticker {
    stop: Arc<AtomicBool>,
    /// Calls under way.
    calls: Arc<AtomicUsize>,
    /// Epochs advanced so far (read by the tests).
    #[cfg_attr(not(test), allow(dead_code))]
    ticks: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    fn start(engine: Engine) -> Result<Ticker, PolicyError> {
        let (stop, calls, ticks) =
            (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicU64::new(0)));
        let thread = {
            let (stop, calls, ticks) = (stop.clone(), calls.clone(), ticks.clone());
            std::thread::Builder::new()
                .name("tenon-policy-epoch".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        // A call's start unparks it (before or during the park: it returns).
                        if calls.load(Ordering::Acquire) == 0 {
                            std::thread::park();
                            continue;
                        }
                        std::thread::sleep(TICK);
                        engine.increment_epoch();
                        ticks.fetch_add(1, Ordering::Relaxed);
                    }
                })
                .map_err(|e| PolicyError::Engine(e.to_string()))?
        };
        Ok(Ticker { stop, calls, ticks, thread: Some(thread) })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// A call under way: the epoch advances until it is dropped.
pub(crate) struct Ticking<'a>(&'a Ticker);

impl Drop for Ticking<'_> {
    fn drop(&mut self) {
        self.0.calls.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(crate) struct Shared {
    pub(crate) engine: Engine,
    ticker: Ticker,
}

impl Shared {
    /// Marks a call under way (deadlines count epochs only while one is).
    pub(crate) fn ticking(&self) -> Ticking<'_> {
        if self.ticker.calls.fetch_add(1, Ordering::AcqRel) == 0
            && let Some(t) = &self.ticker.thread
        {
            t.thread().unpark();
        }
        Ticking(&self.ticker)
    }
}

/// Compiles, caches and loads policies with one configuration.
#[derive(Clone)]
pub struct PolicyEngine {
    pub(crate) shared: Arc<Shared>,
    pub(crate) limits: Limits,
    cache: Option<Arc<PrecompileCache>>,
    /// Why the cache directory given was not used (the engine then compiles in memory).
    cache_refused: Option<String>,
}

/// Lower-case hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// How a loaded component was obtained (`tenon policy bench` checks it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LoadPath {
    Compiled,
    FromCache,
    /// The cache held an entry that failed its checks (why): compiled again and replaced.
    Recompiled(String),
}

impl PolicyEngine {
    /// An engine with `limits`; precompiled components are cached in `cache_dir` if given
    /// and private to this user (see [`PolicyEngine::cache_refused`] otherwise).
    pub fn new(limits: Limits, cache_dir: Option<PathBuf>) -> Result<Self, PolicyError> {
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        config.consume_fuel(limits.fuel.is_some());
        config.cranelift_opt_level(wasmtime::OptLevel::Speed);
        // A fresh instance per call is cheap when its memory comes from a pre-reserved slot
        // with a copy-on-write image instead of a new mapping.
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(MAX_CONCURRENT_CALLS)
            .total_core_instances(MAX_CONCURRENT_CALLS * 8)
            .total_memories(MAX_CONCURRENT_CALLS * 4)
            .total_tables(MAX_CONCURRENT_CALLS * 8)
            .max_memory_size(limits.memory_bytes)
            .max_memories_per_component(4)
            .max_core_instances_per_component(16)
            .total_stacks(MAX_CONCURRENT_CALLS);
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        let engine = Engine::new(&config).map_err(|e| PolicyError::Engine(format!("{e:#}")))?;
        let ticker = Ticker::start(engine.clone())?;
        let (cache, cache_refused) = match cache_dir.as_deref().map(PrecompileCache::open) {
            None => (None, None),
            Some(Ok(c)) => (Some(Arc::new(c)), None),
            Some(Err(e)) => (None, Some(e.to_string())),
        };
        Ok(PolicyEngine { shared: Arc::new(Shared { engine, ticker }), limits, cache, cache_refused })
    }

    /// Why the precompile cache directory was refused, if it was.
    pub fn cache_refused(&self) -> Option<&str> {
        self.cache_refused.as_deref()
    }

    /// The precompile cache in use, if any.
    pub fn precompile_cache(&self) -> Option<&PrecompileCache> {
        self.cache.as_deref()
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// A hex digest of what makes precompiled code compatible with this engine.
    pub fn compatibility_hash(&self) -> String {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.shared.engine.precompile_compatibility_hash().hash(&mut h);
        format!("{:016x}", h.finish())
    }

    /// Compiles (or loads from the cache) and checks a component.
    pub fn load(&self, name: &str, bytes: &[u8]) -> Result<(LoadedPolicy, LoadPath), PolicyError> {
        // A component's preamble is `\0asm` + layer 1; a core module's is version 1.
        match bytes.get(..8) {
            Some([0, b'a', b's', b'm', 0x0d, 0, 1, 0]) => {}
            Some([0, b'a', b's', b'm', 1, 0, 0, 0]) => return Err(PolicyError::NotComponent),
            _ => return Err(PolicyError::Load("not a WebAssembly binary (truncated or another format)".into())),
        }
        let sha = sha256_hex(bytes);
        let engine = &self.shared.engine;
        let compat = self.compatibility_hash();
        let cached = self.cache.as_ref().map(|c| c.get(&sha, &compat));
        let (component, path) = match cached {
            // SAFETY: the entry was written by this cache for exactly this component and
            // engine, and authenticated with this user's key (cache.rs).
            Some(Ok(Some(code))) => match unsafe { Component::deserialize(engine, &code) } {
                Ok(c) => (c, LoadPath::FromCache),
                Err(e) => (self.compile(bytes, &sha, &compat)?, LoadPath::Recompiled(format!("{e:#}"))),
            },
            Some(Err(refused)) => (self.compile(bytes, &sha, &compat)?, LoadPath::Recompiled(refused.to_string())),
            Some(Ok(None)) | None => (self.compile(bytes, &sha, &compat)?, LoadPath::Compiled),
        };
        let ty = component.component_type();
        let exports: Vec<String> = ty.exports(engine).map(|(n, _)| n.to_string()).collect();
        let imports: Vec<String> = ty.imports(engine).map(|(n, _)| n.to_string()).collect();
        let world = World::from_exports(&exports).ok_or_else(|| PolicyError::WrongWorld {
            want: "scorer, consolidator or disruption-budget".into(),
            found: if exports.is_empty() { "nothing".into() } else { exports.join(", ") },
        })?;
        let policy = LoadedPolicy::new(self.clone(), name, sha, world, exports, imports, &component)?;
        Ok((policy, path))
    }

    fn compile(&self, bytes: &[u8], sha: &str, compat: &str) -> Result<Component, PolicyError> {
        let engine = &self.shared.engine;
        let Some(cache) = &self.cache else {
            return Component::from_binary(engine, bytes).map_err(|e| PolicyError::Load(format!("{e:#}")));
        };
        let compiled = engine.precompile_component(bytes).map_err(|e| PolicyError::Load(format!("{e:#}")))?;
        // A cache that cannot be written only costs the next start a compile.
        let _ = cache.put(sha, compat, &compiled);
        // SAFETY: produced just now by this engine.
        unsafe { Component::deserialize(engine, &compiled) }.map_err(|e| PolicyError::Load(format!("{e:#}")))
    }

    /// Loads a policy file.
    pub fn load_file(&self, path: &Path) -> Result<LoadedPolicy, PolicyError> {
        let bytes =
            std::fs::read(path).map_err(|source| PolicyError::Io { path: path.display().to_string(), source })?;
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("policy").replace('_', "-");
        Ok(self.load(&name, &bytes)?.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_advances_only_while_a_call_is_under_way() {
        let engine = PolicyEngine::new(Limits::default(), None).unwrap();
        let shared = &engine.shared;
        let ticks = || shared.ticker.ticks.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(ticks(), 0, "idle: no tick");
        {
            let _call = shared.ticking();
            let start = std::time::Instant::now();
            while ticks() < 5 {
                assert!(start.elapsed() < Duration::from_secs(5), "a call under way is ticked for");
                std::thread::sleep(TICK);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        let after = ticks();
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(ticks(), after, "idle again");
    }
}
