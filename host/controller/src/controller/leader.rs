//! Leader election on a `coordination.k8s.io/v1` Lease, as client-go's leaderelection does it
//! for Karpenter: a follower takes the Lease only when it has seen it unchanged for a whole
//! lease duration, measured on its own monotonic clock (never by comparing the holder's
//! timestamps with its own clock, which skew would fool); the holder renews it and may act
//! only while its last renewal is younger than the renew deadline, which is shorter than the
//! lease. A watchdog exits the process at that deadline even when a renewal is stuck in a
//! call, so the old leader has stopped before any follower can take over (crash-only, as
//! controller-runtime: the restart comes back as a follower).

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Reads and writes a release makes before giving up (each one retry period at most).
const RELEASE_TRIES: usize = 3;

/// Why the renewals ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Kept {
    /// Another replica holds the Lease.
    Lost,
    /// This replica released it (shutting down).
    Released,
}

#[derive(Debug)]
pub struct Election {
    pub namespace: String,
    /// The Lease's name (`LEADER_ELECTION_NAME`).
    pub name: String,
    pub identity: String,
    pub lease_duration: Duration,
    /// How long the holder may go without a renewal before it stops acting (and exits).
    pub renew_deadline: Duration,
    /// How often the holder renews and a follower tries to take the Lease.
    pub retry_period: Duration,
    /// Held by each write of a Lease this replica holds; true once released. A release
    /// raced by a renewal would carry a stale resourceVersion and be refused, leaving the
    /// followers to wait out the whole lease.
    writes: tokio::sync::Mutex<bool>,
}

impl Election {
    /// client-go's (and Karpenter's) defaults: 15 s lease, 10 s renew deadline, 2 s retry.
    pub fn new(namespace: String, name: String, identity: String) -> Election {
        Election {
            namespace,
            name,
            identity,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            writes: tokio::sync::Mutex::new(false),
        }
    }
}

/// Whether this process may act: always without leader election; with it, while the last
/// renewal (timed from when it was sent) is younger than the renew deadline.
#[derive(Debug)]
pub struct Leadership {
    deadline: Option<Duration>,
    renewed: Mutex<Option<Instant>>,
    /// Another provisioner leads the cluster (`foreign_lease`): nothing acts meanwhile.
    standing_down: AtomicBool,
}

impl Leadership {
    /// No leader election: the only replica always acts.
    pub fn sole() -> Leadership {
        Leadership { deadline: None, renewed: Mutex::new(None), standing_down: AtomicBool::new(false) }
    }

    pub fn elected(renew_deadline: Duration) -> Leadership {
        Leadership { deadline: Some(renew_deadline), renewed: Mutex::new(None), standing_down: AtomicBool::new(false) }
    }

    /// Whether leader election is on (a sole replica holds no Lease).
    pub fn is_elected(&self) -> bool {
        self.deadline.is_some()
    }

    pub fn leading(&self) -> bool {
        self.leading_at(Instant::now())
    }

    /// Whether this process may act: it leads, and no other provisioner does.
    pub fn may_act(&self) -> bool {
        !self.standing_down.load(Ordering::Relaxed) && self.leading()
    }

    /// While `yes`, [`Leadership::may_act`] is false (leadership itself is kept).
    pub fn stand_down(&self, yes: bool) {
        self.standing_down.store(yes, Ordering::Relaxed);
    }

    fn leading_at(&self, now: Instant) -> bool {
        let Some(deadline) = self.deadline else { return true };
        let renewed = self.renewed.lock().map(|r| *r).unwrap_or(None);
        renewed.is_some_and(|t| now.saturating_duration_since(t) < deadline)
    }

    fn renewed(&self, sent: Instant) {
        if let Ok(mut r) = self.renewed.lock() {
            *r = Some(sent);
        }
    }
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// What a follower last saw of the Lease and when it first saw it so.
#[derive(Debug, Default)]
pub(super) struct Observed {
    record: Option<Record>,
    at: Option<Instant>,
}

/// The parts of a Lease whose change shows its holder alive.
#[derive(Clone, Debug, PartialEq)]
struct Record {
    holder: String,
    renew_time: Option<String>,
    acquire_time: Option<String>,
    transitions: Option<i32>,
}

fn record(lease: &Lease) -> Record {
    let spec = lease.spec.clone().unwrap_or_default();
    Record {
        holder: spec.holder_identity.unwrap_or_default(),
        renew_time: spec.renew_time.map(|t| t.0.to_string()),
        acquire_time: spec.acquire_time.map(|t| t.0.to_string()),
        transitions: spec.lease_transitions,
    }
}

impl Observed {
    /// Notes `lease` as seen at `now`; true when `me` may take it: unheld, ours, or
    /// unchanged for its whole lease duration since we first saw it so.
    pub(super) fn may_take(&mut self, lease: &Lease, me: &str, now: Instant) -> bool {
        let r = record(lease);
        if self.record.as_ref() != Some(&r) {
            self.record = Some(r.clone());
            self.at = Some(now);
        }
        if r.holder.is_empty() || r.holder == me {
            return true;
        }
        let duration = lease.spec.as_ref().and_then(|s| s.lease_duration_seconds).unwrap_or(15).max(1) as u64;
        self.at.is_some_and(|at| now.saturating_duration_since(at) > Duration::from_secs(duration))
    }
}

impl Election {
    /// Waits until this replica holds the Lease.
    pub async fn acquire(&self, client: &Client, leadership: &Leadership) {
        let api: Api<Lease> = Api::namespaced(client.clone(), &self.namespace);
        let mut observed = Observed::default();
        let mut waiting_logged = false;
        loop {
            let sent = Instant::now();
            match tokio::time::timeout(self.retry_period, self.try_acquire(&api, &mut observed)).await {
                Ok(Ok(true)) => {
                    leadership.renewed(sent);
                    tracing::info!(lease = %self.name, identity = %self.identity, "acquired leadership");
                    return;
                }
                Ok(Ok(false)) if !waiting_logged => {
                    tracing::info!(lease = %self.name, "another replica leads; waiting");
                    waiting_logged = true;
                }
                Ok(Ok(false)) => {}
                Ok(Err(e)) => tracing::warn!(lease = %self.name, error = %e, "leader election failed; retrying"),
                Err(_) => tracing::warn!(lease = %self.name, "leader election timed out; retrying"),
            }
            tokio::time::sleep(self.retry_period).await;
        }
    }

    fn spec(&self) -> serde_json::Value {
        json!({
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_duration.as_secs(),
            "acquireTime": now(),
            "renewTime": now(),
        })
    }

    async fn try_acquire(&self, api: &Api<Lease>, observed: &mut Observed) -> Result<bool, kube::Error> {
        match api.get_opt(&self.name).await? {
            None => {
                let lease: Lease =
                    serde_json::from_value(json!({"metadata": {"name": self.name}, "spec": self.spec()}))
                        .expect("a Lease");
                match api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Some(lease) if observed.may_take(&lease, &self.identity, Instant::now()) => {
                // The resourceVersion makes the takeover a compare-and-swap: of two
                // replicas racing for an expired Lease, one gets 409.
                let transitions = lease.spec.as_ref().and_then(|s| s.lease_transitions).unwrap_or(0);
                let mut spec = self.spec();
                spec["leaseTransitions"] = json!(transitions + 1);
                let patch = json!({"metadata": {"resourceVersion": lease.metadata.resource_version}, "spec": spec});
                match api.patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch)).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Some(_) => Ok(false),
        }
    }

    /// Gives the Lease up (on shutdown): a follower takes over at its next try instead of
    /// waiting out the lease. Only a Lease this replica holds is touched.
    pub async fn release(&self, client: &Client) {
        let mut released = self.writes.lock().await;
        *released = true;
        let api: Api<Lease> = Api::namespaced(client.clone(), &self.namespace);
        // A renewal cut off by its timeout may still land after our read: read again.
        for _ in 0..RELEASE_TRIES {
            match tokio::time::timeout(self.retry_period, self.give_up(&api)).await {
                Ok(Ok(true)) => return tracing::info!(lease = %self.name, "leadership released"),
                Ok(Ok(false)) => return,
                Ok(Err(kube::Error::Api(e))) if e.code == 409 => continue,
                Ok(Err(e)) => return tracing::warn!(lease = %self.name, error = %e, "could not release the lease"),
                Err(_) => return tracing::warn!(lease = %self.name, "could not release the lease: timed out"),
            }
        }
        tracing::warn!(lease = %self.name, tries = RELEASE_TRIES, "could not release the lease: it kept changing");
    }

    /// Empties the holder of a Lease this replica holds: `Ok(false)` when it holds none.
    async fn give_up(&self, api: &Api<Lease>) -> Result<bool, kube::Error> {
        let Some(lease) = api.get_opt(&self.name).await? else { return Ok(false) };
        if lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) != Some(&self.identity) {
            return Ok(false);
        }
        let patch = json!({
            "metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {"holderIdentity": "", "renewTime": now()},
        });
        api.patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        Ok(true)
    }

    /// Renews the Lease every retry period; returns when another replica holds it. Each
    /// renewal may take only what is left of the renew deadline.
    pub async fn keep(&self, client: Client, leadership: &Leadership) -> Kept {
        let api: Api<Lease> = Api::namespaced(client, &self.namespace);
        loop {
            tokio::time::sleep(self.retry_period).await;
            let released = self.writes.lock().await;
            if *released {
                return Kept::Released;
            }
            let sent = Instant::now();
            let left = self.renew_deadline.saturating_sub(
                leadership.renewed.lock().ok().and_then(|r| *r).map_or(self.renew_deadline, |t| sent.duration_since(t)),
            );
            match tokio::time::timeout(left.max(Duration::from_millis(100)), self.renew(&api)).await {
                Ok(Ok(true)) => leadership.renewed(sent),
                Ok(Ok(false)) => {
                    tracing::error!(lease = %self.name, "another replica holds the lease");
                    return Kept::Lost;
                }
                Ok(Err(e)) => tracing::warn!(lease = %self.name, error = %e, "could not renew the lease"),
                Err(_) => tracing::warn!(lease = %self.name, "could not renew the lease: timed out"),
            }
        }
    }

    /// One renewal: `Ok(false)` when the Lease is no longer ours.
    async fn renew(&self, api: &Api<Lease>) -> Result<bool, kube::Error> {
        let lease = api.get(&self.name).await?;
        if lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) != Some(&self.identity) {
            return Ok(false);
        }
        let patch = json!({
            "metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {"renewTime": now()},
        });
        api.patch(&self.name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
        Ok(true)
    }

    /// Exits the process the moment `leadership` lapses, whatever the renewal is doing.
    pub async fn watchdog(leadership: std::sync::Arc<Leadership>) {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if !leadership.leading() {
                tracing::error!("leader Lease not renewed within the renew deadline; exiting");
                std::process::exit(1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE_NAME: &str = "tenon-leader-election";

    fn lease(holder: &str, renew_time: &str) -> Lease {
        serde_json::from_value(json!({
            "metadata": {"name": LEASE_NAME},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": renew_time},
        }))
        .unwrap()
    }

    #[test]
    fn a_lease_is_taken_when_unheld_mine_or_unchanged_for_its_duration_on_our_clock() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut o = Observed::default();
        assert!(o.may_take(&lease("", "2026-01-01T00:00:00Z"), "a", t0));
        assert!(o.may_take(&lease("a", "2026-01-01T00:00:00Z"), "a", t0));
        // The holder's timestamps say nothing about expiry: a renewTime a year old (a
        // holder whose clock is behind ours) is fresh while it keeps changing.
        let mut o = Observed::default();
        assert!(!o.may_take(&lease("b", "2025-01-01T00:00:00Z"), "a", at(0)));
        assert!(!o.may_take(&lease("b", "2025-01-01T00:00:00Z"), "a", at(15)), "15 s is not more than 15 s");
        assert!(!o.may_take(&lease("b", "2025-01-01T00:00:02Z"), "a", at(16)), "renewed: the clock restarts");
        assert!(!o.may_take(&lease("b", "2025-01-01T00:00:02Z"), "a", at(30)));
        assert!(o.may_take(&lease("b", "2025-01-01T00:00:02Z"), "a", at(32)), "unchanged for 16 s");
    }

    #[test]
    fn the_holder_acts_only_within_the_renew_deadline_of_its_last_renewal() {
        let l = Leadership::elected(Duration::from_secs(10));
        let t0 = Instant::now();
        assert!(!l.leading_at(t0), "not before the first acquisition");
        l.renewed(t0);
        assert!(l.leading_at(t0 + Duration::from_millis(9_900)));
        assert!(!l.leading_at(t0 + Duration::from_secs(10)));
        assert!(Leadership::sole().leading(), "no election: always");
    }

    /// A shutdown releases the Lease even when a renewal lands between its read and its
    /// write (one cut off by its timeout is still in flight), and the renewals then end
    /// quietly: a release is not a lost lease, which exits 1.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_release_racing_a_renewal_still_releases_and_ends_the_renewals() {
        let emulator = tenon_kube_emulator::Emulator::start().unwrap();
        let client = Client::try_from(kube::Config::new(emulator.url.parse().unwrap())).unwrap();
        let mut election = Election::new("default".into(), LEASE_NAME.into(), "me".into());
        election.retry_period = Duration::from_millis(1_000);
        let election = std::sync::Arc::new(election);
        let leadership = std::sync::Arc::new(Leadership::elected(election.renew_deadline));
        election.acquire(&client, &leadership).await;
        let keeping = {
            let (election, client, leadership) = (election.clone(), client.clone(), leadership.clone());
            tokio::spawn(async move { election.keep(client, &leadership).await })
        };
        let api: Api<Lease> = Api::namespaced(client.clone(), "default");
        // The release's write waits; a renewal lands meanwhile, so what it read is stale.
        emulator.delay_next("patch", "leases", Duration::from_millis(400), 1);
        let releasing = {
            let (election, client) = (election.clone(), client.clone());
            tokio::spawn(async move { election.release(&client).await })
        };
        tokio::time::sleep(Duration::from_millis(150)).await;
        let renewal = json!({"spec": {"renewTime": now()}});
        api.patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&renewal)).await.unwrap();
        releasing.await.unwrap();
        let lease = api.get(LEASE_NAME).await.unwrap();
        let holder = lease.spec.and_then(|s| s.holder_identity).unwrap_or_default();
        assert_eq!(holder, "", "released: a follower takes it at its next try");
        let ended = tokio::time::timeout(Duration::from_secs(3), keeping).await;
        assert!(matches!(ended, Ok(Ok(Kept::Released))), "the renewals end as released: {ended:?}");
    }
}
