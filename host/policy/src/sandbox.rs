//! What a policy runs in: a deny-all WASI context (no files, environment, arguments or
//! network; the decision's time as a fixed clock; seeded randomness) and a limiter that caps
//! the total linear memory of the store and the number of instances and tables.

use rand_core::TryRng;
use std::convert::Infallible;
use std::time::Duration;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::{HostMonotonicClock, HostWallClock, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

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
}

impl WasiView for CallState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

struct FixedClock(Duration);

impl HostWallClock for FixedClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }
    fn now(&self) -> Duration {
        self.0
    }
}

impl HostMonotonicClock for FixedClock {
    fn resolution(&self) -> u64 {
        1_000_000_000
    }
    fn now(&self) -> u64 {
        self.0.as_nanos() as u64
    }
}

/// SplitMix64: reproducible "randomness" for guests that ask (std's HashMap seeds).
struct Seeded(u64);

impl TryRng for Seeded {
    type Error = Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Infallible> {
        Ok(self.try_next_u64()? as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Infallible> {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Ok(z ^ (z >> 31))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Infallible> {
        for chunk in dst.chunks_mut(8) {
            let v = self.try_next_u64()?.to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        Ok(())
    }
}

impl CallState {
    /// A fresh, deny-all state whose clocks read `now` (seconds since the epoch).
    pub(crate) fn new(limits: &Limits, now: i64) -> Self {
        let now = Duration::from_secs(now.max(0) as u64);
        // The builder grants nothing by default: no preopened directories, no environment, no
        // arguments, no sockets (inherited stdio is not requested either).
        let wasi = WasiCtxBuilder::new()
            .wall_clock(FixedClock(now))
            .monotonic_clock(FixedClock(now))
            .secure_random(Seeded(0x7E40_0000))
            .insecure_random(Seeded(0x7E40_0001))
            .insecure_random_seed(0x7E40_0002)
            .allow_tcp(false)
            .allow_udp(false)
            .allow_ip_name_lookup(false)
            .build();
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
        }
    }
}
