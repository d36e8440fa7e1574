//! What a policy runs in: the limits of one call, a deny-all WASI context (no files,
//! environment, arguments or network; the decision's time as a fixed clock; seeded
//! randomness; stderr captured for the failure message) and a limiter that caps the total
//! linear memory of the store and the number of instances and tables.

use crate::wasi::{Seeded, Stderr, VirtualClock};
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_io::IoView;

/// Caps on one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Wall-time budget of one call, in milliseconds.
    pub deadline_ms: u64,
    /// Total linear memory of all the store's memories, in bytes.
    pub memory_bytes: usize,
    pub instances: usize,
    pub tables: usize,
    pub table_elements: usize,
    /// Deterministic instruction budget instead of (in addition to) the deadline.
    pub fuel: Option<u64>,
    /// The most bytes a guest may hand the host in one call (its answer, or one WASI call's
    /// data); more is an invalid answer. Strings kept are capped far lower (`MAX_TEXT`).
    pub output_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            deadline_ms: 50,
            memory_bytes: 64 << 20,
            instances: 32,
            tables: 32,
            table_elements: 100_000,
            fuel: None,
            output_bytes: 16 << 20,
        }
    }
}

pub(crate) struct Limiter {
    memory_cap: usize,
    memory_used: usize,
    table_elements: usize,
    instances: usize,
    tables: usize,
    /// Set when a growth was refused: a trap that follows is an out-of-memory.
    pub(crate) refused: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let after = self.memory_used - current.min(self.memory_used) + desired;
        if after > self.memory_cap {
            self.refused = true;
            return Ok(false);
        }
        self.memory_used = after;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= self.table_elements)
    }

    fn instances(&self) -> usize {
        self.instances
    }
    fn tables(&self) -> usize {
        self.tables
    }
    fn memories(&self) -> usize {
        self.instances
    }
}

/// Store state of one call.
pub(crate) struct CallState {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
    /// The decision's time, in nanoseconds since the epoch: what every clock reads.
    now_ns: u64,
    pub(crate) rng: Seeded,
    pub(crate) stderr: Stderr,
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl IoView for CallState {
    fn table(&mut self) -> &mut ResourceTable {
        &mut self.table
    }
}

impl CallState {
    /// A fresh, deny-all state whose clocks read `now` (seconds since the epoch).
    pub(crate) fn new(limits: &Limits, now: i64) -> Self {
        let stderr = Stderr::default();
        // The builder grants nothing by default: no preopened directories, no environment,
        // no arguments; stdin is closed and stdout discarded. Clocks and randomness are not
        // taken from it (see wasi.rs).
        let wasi = WasiCtxBuilder::new().stderr(stderr.clone()).build();
        CallState {
            wasi,
            table: ResourceTable::new(),
            limiter: Limiter {
                memory_cap: limits.memory_bytes,
                memory_used: 0,
                table_elements: limits.table_elements,
                instances: limits.instances,
                tables: limits.tables,
                refused: false,
            },
            now_ns: (now.max(0) as u64).saturating_mul(1_000_000_000),
            rng: Seeded(0x7E40_0000),
            stderr,
        }
    }

    pub(crate) fn clock(&mut self) -> VirtualClock<'_> {
        VirtualClock { now_ns: self.now_ns, table: &mut self.table }
    }
}
