//! What polling misses: a NodeClaim whose deletion begins and ends between two looks (nothing
//! holds the drain of an empty node, so it is gone in tens of milliseconds), or the moment a
//! replacement turns Initialized when its candidates go in the next pass. A watch sees every
//! step.

use futures_util::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tenon_api::NodeClaim;

#[derive(Default)]
struct Seen {
    /// NodeClaim → when its deletion was first seen, and when it was gone.
    deletions: BTreeMap<String, (Instant, Option<Instant>)>,
    /// The most NodeClaims being deleted at the same moment.
    most: usize,
    /// NodeClaim → when it was first seen Initialized.
    initialized: BTreeMap<String, Instant>,
}

/// NodeClaim deletions, as they happen, from a watch started now.
pub struct Deletions {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Deletions {
    pub fn watch(client: &Client) -> Deletions {
        let seen: Arc<Mutex<Seen>> = Arc::default();
        let log = seen.clone();
        let stream = watcher(Api::<NodeClaim>::all(client.clone()), watcher::Config::default()).default_backoff();
        let task = tokio::spawn(stream.for_each(move |ev| {
            let log = log.clone();
            async move {
                let Ok(ev) = ev else { return };
                let now = Instant::now();
                let mut s = log.lock().unwrap_or_else(|e| e.into_inner());
                let (nc, gone) = match &ev {
                    watcher::Event::Apply(nc) | watcher::Event::InitApply(nc) => (nc, false),
                    watcher::Event::Delete(nc) => (nc, true),
                    watcher::Event::Init | watcher::Event::InitDone => return,
                };
                let name = nc.metadata.name.clone().unwrap_or_default();
                if crate::has_condition(nc, "Initialized") {
                    s.initialized.entry(name.clone()).or_insert(now);
                }
                if nc.metadata.deletion_timestamp.is_none() && !gone {
                    return;
                }
                let entry = s.deletions.entry(name).or_insert((now, None));
                if gone {
                    entry.1.get_or_insert(now);
                }
                let at_once = s.deletions.values().filter(|(_, gone)| gone.is_none()).count();
                s.most = s.most.max(at_once);
            }
        }));
        Deletions { seen, task }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// When the first deletion of any of `names` (of any NodeClaim when empty) was seen.
    pub fn first(&self, names: &BTreeSet<String>) -> Option<Instant> {
        let s = self.seen();
        s.deletions.iter().filter(|(n, _)| names.is_empty() || names.contains(*n)).map(|(_, (at, _))| *at).min()
    }

    /// When NodeClaim `name` was first seen Initialized.
    pub fn initialized(&self, name: &str) -> Option<Instant> {
        self.seen().initialized.get(name).copied()
    }

    /// The most NodeClaims seen being deleted at the same moment.
    pub fn most_at_once(&self) -> usize {
        self.seen().most
    }
}

impl Drop for Deletions {
    fn drop(&mut self) {
        self.task.abort();
    }
}
