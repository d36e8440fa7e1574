//! A loaded policy: which world it implements, and one call per decision, each in a fresh
//! store from a pre-instantiated component, with the failure classified.

use crate::bindings::{budget, consolidator, scorer};
use crate::engine::PolicyEngine;
use crate::error::{Failure, FailureKind, PolicyError};
use crate::sandbox::CallState;
use wasmtime::component::{Component, Linker};
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

    pub(crate) fn from_exports(exports: &[String]) -> Option<World> {
        let has = |i: &str| exports.iter().any(|e| e.starts_with(&format!("tenon:policy/{i}@0.1")));
        if has("scoring") {
            Some(World::Scorer)
        } else if has("consolidation") {
            Some(World::Consolidator)
        } else if has("budgets") {
            Some(World::DisruptionBudget)
        } else {
            None
        }
    }
}

enum Bound {
    Scorer(scorer::ScorerPre<CallState>),
    Consolidator(consolidator::ConsolidatorPre<CallState>),
    Budget(budget::DisruptionBudgetPre<CallState>),
}

pub struct LoadedPolicy {
    pub name: String,
    /// sha256 of the component's bytes.
    pub sha256: String,
    pub world: World,
    pub exports: Vec<String>,
    pub imports: Vec<String>,
    engine: PolicyEngine,
    bound: Bound,
}

fn load_err(e: wasmtime::Error) -> PolicyError {
    PolicyError::Load(format!("{e:#}"))
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
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker).map_err(load_err)?;
        let pre = linker.instantiate_pre(component).map_err(load_err)?;
        let bound = match world {
            World::Scorer => Bound::Scorer(scorer::ScorerPre::new(pre).map_err(load_err)?),
            World::Consolidator => Bound::Consolidator(consolidator::ConsolidatorPre::new(pre).map_err(load_err)?),
            World::DisruptionBudget => Bound::Budget(budget::DisruptionBudgetPre::new(pre).map_err(load_err)?),
        };
        Ok(LoadedPolicy { name: name.to_string(), sha256, world, exports, imports, engine, bound })
    }

    fn store(&self, now: i64) -> Store<CallState> {
        let limits = &self.engine.limits;
        let mut store = Store::new(&self.engine.shared.engine, CallState::new(limits, now));
        store.limiter(|s| &mut s.limiter);
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

    /// Scores the offerings of `input`.
    pub fn rank(&self, input: &scorer::ScoringInput, now: i64) -> Result<Vec<f64>, Failure> {
        let Bound::Scorer(pre) = &self.bound else { return Err(self.wrong_world(World::Scorer)) };
        let mut store = self.store(now);
        let out = pre.instantiate(&mut store).and_then(|i| i.tenon_policy_scoring().call_rank(&mut store, input));
        settle(out, &store)
    }

    pub fn review(
        &self,
        input: &consolidator::ConsolidationInput,
        now: i64,
    ) -> Result<consolidator::PlanReview, Failure> {
        let Bound::Consolidator(pre) = &self.bound else { return Err(self.wrong_world(World::Consolidator)) };
        let mut store = self.store(now);
        let out =
            pre.instantiate(&mut store).and_then(|i| i.tenon_policy_consolidation().call_review(&mut store, input));
        settle(out, &store)
    }

    pub fn allowed(&self, input: &budget::BudgetInput, now: i64) -> Result<budget::Allowance, Failure> {
        let Bound::Budget(pre) = &self.bound else { return Err(self.wrong_world(World::DisruptionBudget)) };
        let mut store = self.store(now);
        let out = pre.instantiate(&mut store).and_then(|i| i.tenon_policy_budgets().call_allowed(&mut store, input));
        settle(out, &store)
    }
}

/// Classifies the outcome of a call.
fn settle<T>(out: wasmtime::Result<Result<T, String>>, store: &Store<CallState>) -> Result<T, Failure> {
    match out {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(msg)) => Err(Failure::new(FailureKind::PolicyError, msg)),
        Err(e) => {
            let kind = match e.downcast_ref::<Trap>() {
                Some(Trap::Interrupt | Trap::OutOfFuel) => FailureKind::Timeout,
                _ if store.data().limiter.refused => FailureKind::OutOfMemory,
                Some(_) => FailureKind::Trap,
                None if format!("{e:#}").contains("resource limit") => FailureKind::OutOfMemory,
                None => FailureKind::Trap,
            };
            Err(Failure::new(kind, format!("{e:#}").lines().next().unwrap_or_default().to_string()))
        }
    }
}
