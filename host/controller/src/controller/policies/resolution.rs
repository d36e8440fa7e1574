//! One resolution of NodePools' policies, run on a thread of its own: loading a policy may
//! mean compiling a component (seconds for a large one, however long a hostile one makes it)
//! and calling its `validate-config`. The pass that starts it waits only [`INLINE_WAIT`],
//! enough for the usual load from the precompile cache; past that its NodePools fail safe
//! and the outcome is taken in by a later pass. Past [`SLOW`] they are reported. It also
//! keeps the precompile and OCI caches within their budgets, off the control loop.

use super::PolicyInput;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};
use tenon_api::policy::{NodePoolPolicies, PolicyRef};
use tenon_policy::cluster::{ClusterPolicies, NodePoolInfo};
use tenon_policy::{FileStamp, PolicyStore};

/// How long the pass that starts a resolution waits for it.
pub const INLINE_WAIT: Duration = Duration::from_millis(200);
/// A resolution running longer than this has its NodePools reported unavailable.
pub const SLOW: Duration = Duration::from_secs(10);

/// A resolution's outcome: the new set, and the problems per NodePool.
pub type Outcome = (ClusterPolicies, Vec<(String, String)>);

pub struct Resolving {
    /// Every NodePool there was when it started.
    pub pools: BTreeSet<String>,
    /// The NodePools it resolves, with what they are resolved from.
    pub stale: BTreeMap<String, (PolicyInput, Vec<Option<FileStamp>>)>,
    pub started: Instant,
    done: Receiver<Outcome>,
    /// What the set was when it started, and the stale NodePools: a resolution that dies
    /// leaves those failing safe.
    before: Arc<ClusterPolicies>,
    stale_pools: Vec<NodePoolInfo>,
}

impl Resolving {
    /// Resolves the `stale` NodePools of `pools` again on a new thread, keeping `active`'s
    /// policies for the others.
    pub fn start(
        active: Arc<ClusterPolicies>,
        store: Option<Arc<PolicyStore>>,
        pools: Vec<NodePoolInfo>,
        stale: BTreeMap<String, (PolicyInput, Vec<Option<FileStamp>>)>,
    ) -> Resolving {
        let (tx, done) = std::sync::mpsc::channel();
        let names: BTreeSet<String> = stale.keys().cloned().collect();
        let all = pools.iter().map(|p| p.name.clone()).collect();
        let stale_pools = pools.iter().filter(|p| names.contains(&p.name)).cloned().collect();
        let before = active.clone();
        let spawned = std::thread::Builder::new().name("tenon-policy-resolve".into()).spawn(move || {
            let keep = |name: &str| !names.contains(name);
            let outcome = active.re_resolve(store.as_deref(), &pools, &keep);
            if let Some(store) = &store {
                let named: Vec<PolicyRef> = pools
                    .iter()
                    .flat_map(|p| {
                        NodePoolPolicies::from_annotations(&p.annotations)
                            .0
                            .named()
                            .map(|(_, r)| r.clone())
                            .collect::<Vec<_>>()
                    })
                    .collect();
                store.prune_caches(&outcome.0.digests(), named.iter());
            }
            let _ = tx.send(outcome);
        });
        if let Err(e) = spawned {
            // The sender is gone with the closure: outcome() reports every NodePool.
            tracing::error!(error = %e, "cannot start a thread to resolve NodePool policies");
        }
        Resolving { pools: all, stale, started: Instant::now(), done, before, stale_pools }
    }

    /// The outcome, if it is ready (within `wait`). A resolution that died (a panic in a
    /// policy's load) gives every NodePool it resolved a problem saying so.
    pub fn outcome(&self, wait: Option<Duration>) -> Option<Outcome> {
        let died = match wait {
            Some(w) => match self.done.recv_timeout(w) {
                Ok(o) => return Some(o),
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => true,
            },
            None => match self.done.try_recv() {
                Ok(o) => return Some(o),
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => true,
            },
        };
        died.then(|| {
            let why = "resolving its policies failed unexpectedly (see the controller log); retried".to_string();
            let problems = self.stale.keys().map(|n| (n.clone(), why.clone())).collect();
            (self.before.pending(&self.stale_pools, &why), problems)
        })
    }

    /// Why `pool` is still without its policies, once the resolution has run past [`SLOW`].
    pub fn slow(&self, pool: &str) -> Option<String> {
        let elapsed = self.started.elapsed();
        (elapsed > SLOW && self.stale.contains_key(pool)).then(|| {
            format!(
                "its policies are still loading after {} s (compiling a component, checking its configuration); its fail-safe applies until they are loaded",
                elapsed.as_secs()
            )
        })
    }
}
