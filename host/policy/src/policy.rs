//! A loaded policy: which world it implements, and one call per decision, each in a fresh
//! store from a pre-instantiated component, under the wall-clock guard, with the failure
//! classified. What a guest hands the host in one call is limited ([`Limits::output_bytes`],
//! wasmtime's hostcall fuel), and every string kept is capped (`capped`).

use crate::bindings::{budget, consolidator, scorer};
use crate::deadline;
use crate::engine::PolicyEngine;
use crate::error::{Failure, FailureKind, PolicyError, capped};
use crate::sandbox::{CallState, Limits};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};
use wasmtime::component::{Component, ComponentExportIndex, ComponentNamedList, InstancePre, Lift, Linker, Lower};
use wasmtime::{Store, Trap};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum World {
    Scorer,
    Consolidator,
    DisruptionBudget,
}

impl World {
    pub fn as_str(&self) -> &'static str {
        match self {
            World::Scorer => "scorer",
            World::Consolidator => "consolidator",
            World::DisruptionBudget => "disruption-budget",
        }
    }

    /// The interface the world exports and its one function.
    fn export(&self) -> (&'static str, &'static str) {
        match self {
            World::Scorer => ("scoring", "rank"),
            World::Consolidator => ("consolidation", "review"),
            World::DisruptionBudget => ("budgets", "allowed"),
        }
    }

    fn interface_name<'a>(&self, exports: &'a [String]) -> Option<&'a str> {
        let prefix = format!("tenon:policy/{}@0.1", self.export().0);
        exports.iter().find(|e| e.starts_with(&prefix)).map(String::as_str)
    }

    pub(crate) fn from_exports(exports: &[String]) -> Option<World> {
        [World::Scorer, World::Consolidator, World::DisruptionBudget]
            .into_iter()
            .find(|w| w.interface_name(exports).is_some())
    }
}

pub struct LoadedPolicy {
    pub name: String,
    /// sha256 of the component's bytes.
    pub sha256: String,
    pub world: World,
    pub exports: Vec<String>,
    pub imports: Vec<String>,
    engine: PolicyEngine,
    pre: InstancePre<CallState>,
    /// The world's function (`rank`, `review` or `allowed`).
    func: ComponentExportIndex,
    /// Contract 0.2.0's `validate-config`, when the component exports it.
    validate: Option<ComponentExportIndex>,
}

fn load_err(e: wasmtime::Error) -> PolicyError {
    PolicyError::Load(format!("{e:#}"))
}

type Answer<T> = (Result<T, String>,);

/// The guard's deadline: the epoch deadline stops Wasm on time; this margin lets it, and
/// ends a call stalled outside Wasm shortly after.
fn guard(deadline_ms: u64) -> Duration {
    Duration::from_millis(deadline_ms + deadline_ms / 4 + 5)
}

impl LoadedPolicy {
    pub(crate) fn new(
        engine: PolicyEngine,
        name: &str,
        sha256: String,
        world: World,
        exports: Vec<String>,
        imports: Vec<String>,
        component: &Component,
    ) -> Result<Self, PolicyError> {
        let mut linker: Linker<CallState> = Linker::new(&engine.shared.engine);
        crate::wasi::link(&mut linker).map_err(load_err)?;
        crate::time::link(&mut linker).map_err(load_err)?;
        let pre = linker.instantiate_pre(component).map_err(|e| {
            let unlinked: Vec<&String> = imports
                .iter()
                .filter(|i| {
                    !["wasi:cli/", "wasi:io/", "wasi:clocks/", "wasi:random/", "wasi:filesystem/"]
                        .iter()
                        .any(|p| i.starts_with(p))
                        && i.as_str() != crate::time::INTERFACE
                })
                .collect();
            if unlinked.is_empty() {
                load_err(e)
            } else {
                PolicyError::Load(format!(
                    "the component imports {}; a policy may import only {} and {}",
                    unlinked.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "),
                    crate::wasi::LINKED,
                    crate::time::INTERFACE
                ))
            }
        })?;
        let (_, function) = world.export();
        let func = world
            .interface_name(&exports)
            .and_then(|iface| component.get_export_index(None, iface))
            .and_then(|iface| component.get_export_index(Some(&iface), function))
            .ok_or_else(|| PolicyError::Load(format!("the component exports no `{function}` function")))?;
        let validate = component.get_export_index(None, "validate-config");
        Ok(LoadedPolicy { name: name.to_string(), sha256, world, exports, imports, engine, pre, func, validate })
    }

    fn store(&self, now: i64) -> Store<CallState> {
        let limits = &self.engine.limits;
        let mut store = Store::new(&self.engine.shared.engine, CallState::new(limits, now));
        store.limiter(|s| &mut s.limiter);
        store.set_hostcall_fuel(limits.output_bytes);
        store.set_epoch_deadline(limits.deadline_ms.max(1));
        store.epoch_deadline_trap();
        if let Some(fuel) = limits.fuel {
            let _ = store.set_fuel(fuel);
        }
        store
    }

    fn wrong_world(&self, want: World) -> Failure {
        Failure::new(
            FailureKind::LoadError,
            format!("policy {} implements {}, not {}", self.name, self.world.as_str(), want.as_str()),
        )
    }

    /// One call of the world's function: instantiate, call, and `read` the answer.
    fn call<P, R, T>(
        &self,
        want: World,
        params: P,
        now: i64,
        read: impl FnOnce(R) -> Result<T, Failure>,
    ) -> Result<T, Failure>
    where
        P: ComponentNamedList + Lower + Send + Sync,
        R: ComponentNamedList + Lift + Send + Sync + 'static,
    {
        if self.world != want {
            return Err(self.wrong_world(want));
        }
        self.call_export(&self.func, params, now, read)
    }

    /// Whether the policy accepts `config` (a hook's configuration JSON): its
    /// `validate-config` answer (contract 0.2.0), or Ok for a policy that has none (0.1.0).
    pub fn validate_config(&self, config: &str, now: i64) -> Result<(), Failure> {
        let Some(validate) = &self.validate else { return Ok(()) };
        self.call_export(validate, (config,), now, |(out,): Answer<()>| out.map_err(|m| policy_error(capped(&m))))
    }

    /// Whether the component exports `validate-config` (contract 0.2.0).
    pub fn validates_config(&self) -> bool {
        self.validate.is_some()
    }

    /// One call of export `func`, under the deadline and limits.
    fn call_export<P, R, T>(
        &self,
        func: &ComponentExportIndex,
        params: P,
        now: i64,
        read: impl FnOnce(R) -> Result<T, Failure>,
    ) -> Result<T, Failure>
    where
        P: ComponentNamedList + Lower + Send + Sync,
        R: ComponentNamedList + Lift + Send + Sync + 'static,
    {
        let _ticking = self.engine.shared.ticking();
        let mut store = self.store(now);
        let deadline_ms = self.engine.limits.deadline_ms;
        let until = Instant::now() + guard(deadline_ms);
        let out = {
            let store = &mut store;
            let call = async move {
                let instance = self.pre.instantiate_async(&mut *store).await?;
                let f = instance.get_typed_func::<P, R>(&mut *store, func)?;
                f.call_async(&mut *store, params).await
            };
            catch_unwind(AssertUnwindSafe(|| deadline::run_until(call, until)))
        };
        match out {
            Err(_) => Err(Failure::new(FailureKind::Trap, "the host panicked running the policy (a Tenon bug)")),
            Ok(None) => Err(Failure::new(
                FailureKind::Timeout,
                format!("did not return within {deadline_ms}ms: stopped while waiting outside WebAssembly"),
            )),
            Ok(Some(Err(e))) => Err(classify(&e, &store, &self.engine.limits)),
            Ok(Some(Ok(r))) => read(r),
        }
    }

    /// Scores the offerings of `input`: one score per offering, or a failure.
    pub fn rank(&self, input: &scorer::ScoringInput, now: i64) -> Result<Vec<f64>, Failure> {
        self.call(World::Scorer, (input,), now, |(out,): Answer<Vec<f64>>| out.map_err(policy_error))
    }

    /// Reviews the plans of `input` (reasons capped).
    pub fn review(
        &self,
        input: &consolidator::ConsolidationInput,
        now: i64,
    ) -> Result<consolidator::PlanReview, Failure> {
        self.call(World::Consolidator, (input,), now, |(out,): Answer<consolidator::PlanReview>| {
            let mut review = out.map_err(policy_error)?;
            for v in &mut review.verdicts {
                v.reason = capped(&v.reason);
            }
            Ok(review)
        })
    }

    /// How many nodes the budget policy allows (reason capped).
    pub fn allowed(&self, input: &budget::BudgetInput, now: i64) -> Result<budget::Allowance, Failure> {
        self.call(World::DisruptionBudget, (input,), now, |(out,): Answer<budget::Allowance>| {
            out.map(|a| budget::Allowance { allowed: a.allowed, reason: capped(&a.reason) }).map_err(policy_error)
        })
    }
}

/// The policy's own `err(message)`.
fn policy_error(message: String) -> Failure {
    Failure::new(FailureKind::PolicyError, message)
}

/// Classifies a call that did not return: out of time, out of memory, or a trap, with the
/// guest's stderr (its panic message) when it wrote one.
fn classify(e: &wasmtime::Error, store: &Store<CallState>, limits: &Limits) -> Failure {
    let text = format!("{e:#}");
    if text.contains("fuel allocated for hostcalls has been exhausted") {
        let limit = limits.output_bytes;
        return Failure::new(
            FailureKind::InvalidOutput,
            format!("handed the host more than {limit} bytes in one call (the limit per call)"),
        );
    }
    let kind = match e.downcast_ref::<Trap>() {
        Some(Trap::Interrupt | Trap::OutOfFuel) => FailureKind::Timeout,
        _ if store.data().limiter.refused => FailureKind::OutOfMemory,
        Some(_) => FailureKind::Trap,
        None if text.contains("resource limit") => FailureKind::OutOfMemory,
        None => FailureKind::Trap,
    };
    // The trap itself ("wasm `unreachable` instruction executed"), not the backtrace's header.
    let cause = match e.downcast_ref::<Trap>() {
        Some(t) => t.to_string(),
        None => e.root_cause().to_string(),
    };
    let stderr = store.data().stderr.text();
    let message = match (kind, stderr.is_empty()) {
        (FailureKind::Timeout, _) => format!("ran past its {}ms deadline ({cause})", limits.deadline_ms),
        (_, true) => cause,
        (_, false) => format!("{stderr} ({cause})"),
    };
    Failure::new(kind, message)
}
