//! Compiles that may take longer than a caller can wait. A component is compiled on a thread
//! of its own and waited for up to a bound; past it the caller hears "still compiling" and
//! goes on, the compile finishes in the background (Cranelift cannot be interrupted), and
//! its outcome is kept for the next caller to ask. One compile at a time: a second slow
//! component waits its turn rather than taking another core.

use crate::engine::PolicyEngine;
use crate::error::PolicyError;
use crate::policy::LoadedPolicy;
use std::collections::VecDeque;
use std::sync::mpsc::RecvTimeoutError;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Finished outcomes kept for a caller that stopped waiting; the oldest go first.
const KEPT: usize = 4;

type Outcome = Result<Arc<LoadedPolicy>, PolicyError>;

#[derive(Default)]
struct State {
    /// The compile running now: its component's sha256, the policy's name, since when.
    running: Option<(String, String, Instant)>,
    finished: VecDeque<(String, Outcome)>,
}

pub struct BackgroundCompiles {
    wait: Duration,
    state: Arc<Mutex<State>>,
}

impl BackgroundCompiles {
    /// Callers wait up to `wait` for a compile.
    pub fn new(wait: Duration) -> Self {
        BackgroundCompiles { wait, state: Arc::default() }
    }

    /// Loads `bytes` (whose sha256 is `sha`), waiting at most the bound.
    pub fn load(&self, engine: &PolicyEngine, name: &str, sha: &str, bytes: Vec<u8>) -> Outcome {
        let rx = {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(i) = st.finished.iter().position(|(s, _)| s == sha) {
                return st.finished.remove(i).map(|(_, o)| o).expect("found at i");
            }
            if let Some((running, other, since)) = &st.running {
                let seconds = since.elapsed().as_secs();
                return Err(if running == sha {
                    PolicyError::StillCompiling { name: name.to_string(), seconds }
                } else {
                    PolicyError::CompilerBusy { name: name.to_string(), other: other.clone(), seconds }
                });
            }
            st.running = Some((sha.to_string(), name.to_string(), Instant::now()));
            let (tx, rx) = std::sync::mpsc::channel::<Outcome>();
            let (engine, state, name, sha) = (engine.clone(), self.state.clone(), name.to_string(), sha.to_string());
            let spawned = std::thread::Builder::new().name("tenon-policy-compile".into()).spawn(move || {
                let outcome = engine.load(&name, &bytes).map(|(p, _)| Arc::new(p));
                // Under the lock: the caller either still waits (and gets it) or has let go
                // under the same lock (and the outcome is kept for the next one).
                let mut st = state.lock().unwrap_or_else(|e| e.into_inner());
                st.running = None;
                if let Err(std::sync::mpsc::SendError(outcome)) = tx.send(outcome) {
                    st.finished.push_back((sha, outcome));
                    while st.finished.len() > KEPT {
                        st.finished.pop_front();
                    }
                }
            });
            if let Err(e) = spawned {
                st.running = None;
                return Err(PolicyError::Engine(format!("cannot start a compile thread: {e}")));
            }
            rx
        };
        match rx.recv_timeout(self.wait) {
            Ok(outcome) => outcome,
            Err(RecvTimeoutError::Disconnected) => Err(PolicyError::Load("the compile thread died".into())),
            Err(RecvTimeoutError::Timeout) => {
                let _st = self.state.lock().unwrap_or_else(|e| e.into_inner());
                match rx.try_recv() {
                    Ok(outcome) => outcome,
                    // Dropped under the lock: the thread now keeps what it finishes.
                    Err(_) => Err(PolicyError::StillCompiling { name: name.to_string(), seconds: self.wait.as_secs() }),
                }
            }
        }
    }
}
