//! The WASI a policy gets: only what Rust `std` guests import, and nothing in it can block or
//! tell real time. Clocks read the decision's time and never advance; their pollables are
//! ready at once (so `std::thread::sleep` returns immediately); randomness is seeded; stderr
//! is kept, up to [`STDERR_BYTES`], for the failure message; stdin is closed, stdout
//! discarded; no directory is preopened. `wasi:sockets` is not linked at all: a component
//! that imports it does not load.

use crate::sandbox::CallState;
use rand_core::TryRng;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime::component::{HasData, Linker, Resource, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream, WasiCli, WasiCliView};
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random};
use wasmtime_wasi::p2::{DynPollable, OutputStream, Pollable, StreamError, subscribe};

/// How much of a guest's stderr is kept (its panic message); the rest is dropped.
pub const STDERR_BYTES: usize = 4096;

/// The largest `get-random-bytes` request answered; a larger one traps.
pub const RANDOM_BYTES: u64 = 64 << 10;

/// Interface families a policy may import, for the load error of one that imports more.
pub const LINKED: &str = "wasi:cli, wasi:io, wasi:clocks, wasi:random and wasi:filesystem (nothing preopened)";

/// Adds the policy WASI subset to `linker`.
pub(crate) fn link(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    let l = linker;
    wasmtime_wasi_io::add_to_linker_async(l)?;
    clocks::wall_clock::add_to_linker::<CallState, Virtual>(l, CallState::clock)?;
    clocks::monotonic_clock::add_to_linker::<CallState, Virtual>(l, CallState::clock)?;
    random::random::add_to_linker::<CallState, Seeded>(l, |s| &mut s.rng)?;
    random::insecure::add_to_linker::<CallState, Seeded>(l, |s| &mut s.rng)?;
    random::insecure_seed::add_to_linker::<CallState, Seeded>(l, |s| &mut s.rng)?;
    cli::exit::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::environment::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stdin::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stdout::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::stderr::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_input::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_output::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdin::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stdout::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    cli::terminal_stderr::add_to_linker::<CallState, WasiCli>(l, CallState::cli)?;
    filesystem::preopens::add_to_linker::<CallState, WasiFilesystem>(l, CallState::filesystem)?;
    filesystem::types::add_to_linker::<CallState, WasiFilesystem>(l, CallState::filesystem)?;
    Ok(())
}

/// The clocks of one call: the decision's time, standing still.
pub(crate) struct VirtualClock<'a> {
    pub(crate) now_ns: u64,
    pub(crate) table: &'a mut ResourceTable,
}

pub(crate) struct Virtual;

impl HasData for Virtual {
    type Data<'a> = VirtualClock<'a>;
}

/// A pollable that is always ready: waiting on a virtual clock takes no time.
struct Elapsed;

#[wasmtime_wasi::async_trait]
impl Pollable for Elapsed {
    async fn ready(&mut self) {}
}

impl VirtualClock<'_> {
    fn ready(&mut self) -> wasmtime::Result<Resource<DynPollable>> {
        let r = self.table.push(Elapsed)?;
        subscribe(self.table, r)
    }
}

impl clocks::monotonic_clock::Host for VirtualClock<'_> {
    fn now(&mut self) -> wasmtime::Result<u64> {
        Ok(self.now_ns)
    }
    fn resolution(&mut self) -> wasmtime::Result<u64> {
        Ok(1_000_000_000)
    }
    fn subscribe_instant(&mut self, _when: u64) -> wasmtime::Result<Resource<DynPollable>> {
        self.ready()
    }
    fn subscribe_duration(&mut self, _duration: u64) -> wasmtime::Result<Resource<DynPollable>> {
        self.ready()
    }
}

impl clocks::wall_clock::Host for VirtualClock<'_> {
    fn now(&mut self) -> wasmtime::Result<clocks::wall_clock::Datetime> {
        Ok(clocks::wall_clock::Datetime { seconds: self.now_ns / 1_000_000_000, nanoseconds: 0 })
    }
    fn resolution(&mut self) -> wasmtime::Result<clocks::wall_clock::Datetime> {
        Ok(clocks::wall_clock::Datetime { seconds: 1, nanoseconds: 0 })
    }
}

/// SplitMix64: reproducible "randomness" for guests that ask (std's HashMap seeds).
pub(crate) struct Seeded(pub(crate) u64);

impl HasData for Seeded {
    type Data<'a> = &'a mut Seeded;
}

impl TryRng for Seeded {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        Ok(self.try_next_u64()? as u32)
    }
    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Ok(z ^ (z >> 31))
    }
    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        for chunk in dst.chunks_mut(8) {
            let v = self.try_next_u64()?.to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
        Ok(())
    }
}

impl Seeded {
    fn bytes(&mut self, len: u64) -> wasmtime::Result<Vec<u8>> {
        if len > RANDOM_BYTES {
            wasmtime::bail!("asked for {len} random bytes; a policy gets at most {RANDOM_BYTES} per request");
        }
        let mut out = vec![0; len as usize];
        let Ok(()) = self.try_fill_bytes(&mut out);
        Ok(out)
    }
    fn u64(&mut self) -> u64 {
        let Ok(v) = self.try_next_u64();
        v
    }
}

impl random::random::Host for Seeded {
    fn get_random_bytes(&mut self, len: u64) -> wasmtime::Result<Vec<u8>> {
        self.bytes(len)
    }
    fn get_random_u64(&mut self) -> wasmtime::Result<u64> {
        Ok(self.u64())
    }
}

impl random::insecure::Host for Seeded {
    fn get_insecure_random_bytes(&mut self, len: u64) -> wasmtime::Result<Vec<u8>> {
        self.bytes(len)
    }
    fn get_insecure_random_u64(&mut self) -> wasmtime::Result<u64> {
        Ok(self.u64())
    }
}

impl random::insecure_seed::Host for Seeded {
    fn insecure_seed(&mut self) -> wasmtime::Result<(u64, u64)> {
        Ok((self.u64(), self.u64()))
    }
}

/// A guest's stderr: the first [`STDERR_BYTES`] are kept, the rest counted and dropped.
/// Writing never fails and never waits.
#[derive(Clone, Default)]
pub(crate) struct Stderr(Arc<Mutex<Captured>>);

#[derive(Default)]
struct Captured {
    kept: Vec<u8>,
    dropped: usize,
}

impl Stderr {
    fn take(&self, bytes: &[u8]) {
        let mut c = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let room = STDERR_BYTES - c.kept.len();
        let n = room.min(bytes.len());
        c.kept.extend_from_slice(&bytes[..n]);
        c.dropped += bytes.len() - n;
    }

    /// What the guest wrote, trimmed, with a note of what was dropped.
    pub(crate) fn text(&self) -> String {
        let c = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut s = String::from_utf8_lossy(&c.kept).trim().to_string();
        if c.dropped > 0 {
            s.push_str(&format!(" … [stderr truncated: {} more bytes]", c.dropped));
        }
        s
    }
}

impl OutputStream for Stderr {
    fn write(&mut self, bytes: wasmtime_wasi_io::bytes::Bytes) -> Result<(), StreamError> {
        self.take(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> Result<(), StreamError> {
        Ok(())
    }
    fn check_write(&mut self) -> Result<usize, StreamError> {
        Ok(64 << 10)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Stderr {
    async fn ready(&mut self) {}
}

impl IsTerminal for Stderr {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl tokio::io::AsyncWrite for Stderr {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.take(buf);
        Poll::Ready(Ok(buf.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl StdoutStream for Stderr {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_keeps_the_head_and_counts_the_rest() {
        let s = Stderr::default();
        s.take(b"panicked at src/lib.rs:1: ");
        s.take(&vec![b'x'; 10_000]);
        let text = s.text();
        assert!(text.starts_with("panicked at src/lib.rs:1: xxx"));
        assert!(text.ends_with(&format!("[stderr truncated: {} more bytes]", 26 + 10_000 - STDERR_BYTES)), "{text}");
    }

    #[test]
    fn seeded_randomness_is_reproducible_and_bounded() {
        let (mut a, mut b) = (Seeded(7), Seeded(7));
        assert_eq!(a.bytes(33).unwrap(), b.bytes(33).unwrap());
        assert!(a.bytes(RANDOM_BYTES + 1).is_err());
    }
}
