//! Leader election on a `coordination.k8s.io/v1` Lease, as controller-runtime does it for
//! Karpenter: replicas wait until the Lease is free or expired, the holder renews it, and a
//! holder that cannot renew within the lease duration exits (the Deployment restarts it as a
//! follower) rather than risk two replicas acting.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use std::time::{Duration, Instant};

pub const LEASE_NAME: &str = "tenon-leader-election";

#[derive(Clone, Debug)]
pub struct Election {
    pub namespace: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_every: Duration,
    /// How often a follower tries to take the Lease: a leader that stops releases it, so
    /// this is how long a rollout leaves the cluster without a leader.
    pub retry_every: Duration,
}

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// True when `lease` may be taken by `me` now.
fn available(lease: &Lease, me: &str) -> bool {
    let Some(spec) = lease.spec.as_ref() else { return true };
    let holder = spec.holder_identity.as_deref().unwrap_or("");
    if holder.is_empty() || holder == me {
        return true;
    }
    let duration = spec.lease_duration_seconds.unwrap_or(15) as i64;
    let Some(renewed) = spec.renew_time.as_ref() else { return true };
    let expires = renewed.0.as_second() + duration;
    k8s_openapi::jiff::Timestamp::now().as_second() > expires
}

impl Election {
    /// Waits until this replica holds the Lease.
    pub async fn acquire(&self, client: &Client) {
        let api: Api<Lease> = Api::namespaced(client.clone(), &self.namespace);
        let mut waiting_logged = false;
        loop {
            match self.try_acquire(&api).await {
                Ok(true) => {
                    tracing::info!(lease = LEASE_NAME, identity = %self.identity, "acquired leadership");
                    return;
                }
                Ok(false) if !waiting_logged => {
                    tracing::info!(lease = LEASE_NAME, "another replica leads; waiting");
                    waiting_logged = true;
                }
                Ok(false) => {}
                Err(e) => tracing::warn!(lease = LEASE_NAME, error = %e, "leader election failed; retrying"),
            }
            tokio::time::sleep(self.retry_every).await;
        }
    }

    async fn try_acquire(&self, api: &Api<Lease>) -> Result<bool, kube::Error> {
        let spec = json!({
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.lease_duration.as_secs(),
            "acquireTime": now(),
            "renewTime": now(),
        });
        match api.get_opt(LEASE_NAME).await? {
            None => {
                let lease: Lease =
                    serde_json::from_value(json!({"metadata": {"name": LEASE_NAME}, "spec": spec})).expect("a Lease");
                match api.create(&PostParams::default(), &lease).await {
                    Ok(_) => Ok(true),
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
                    Err(e) => Err(e),
                }
            }
            Some(lease) if available(&lease, &self.identity) => {
                // The resourceVersion makes the takeover a compare-and-swap: of two
                // replicas racing for an expired Lease, one gets 409.
                let patch = json!({"metadata": {"resourceVersion": lease.metadata.resource_version}, "spec": spec});
                match api.patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&patch)).await {
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
        let api: Api<Lease> = Api::namespaced(client.clone(), &self.namespace);
        let Ok(lease) = api.get(LEASE_NAME).await else { return };
        if lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) != Some(&self.identity) {
            return;
        }
        let patch = json!({
            "metadata": {"resourceVersion": lease.metadata.resource_version},
            "spec": {"holderIdentity": "", "renewTime": now()},
        });
        match api.patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => tracing::info!(lease = LEASE_NAME, "leadership released"),
            Err(e) => tracing::warn!(lease = LEASE_NAME, error = %e, "could not release the lease"),
        }
    }

    /// Renews the Lease until it cannot for a whole lease duration (or another replica took
    /// it); then returns, and the caller exits.
    pub async fn keep(&self, client: Client) {
        let api: Api<Lease> = Api::namespaced(client, &self.namespace);
        let mut last_renewed = Instant::now();
        loop {
            tokio::time::sleep(self.renew_every).await;
            match api.get(LEASE_NAME).await {
                Ok(lease) if lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) != Some(&self.identity) => {
                    tracing::error!(lease = LEASE_NAME, "another replica holds the lease");
                    return;
                }
                Ok(lease) => {
                    let patch = json!({
                        "metadata": {"resourceVersion": lease.metadata.resource_version},
                        "spec": {"renewTime": now()},
                    });
                    match api.patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&patch)).await {
                        Ok(_) => last_renewed = Instant::now(),
                        Err(e) => tracing::warn!(lease = LEASE_NAME, error = %e, "could not renew the lease"),
                    }
                }
                Err(e) => tracing::warn!(lease = LEASE_NAME, error = %e, "could not read the lease"),
            }
            if last_renewed.elapsed() >= self.lease_duration {
                tracing::error!(lease = LEASE_NAME, "lease not renewed within its duration");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: &str, renewed_secs_ago: i64) -> Lease {
        let t = k8s_openapi::jiff::Timestamp::now().as_second() - renewed_secs_ago;
        serde_json::from_value(json!({
            "metadata": {"name": LEASE_NAME},
            "spec": {
                "holderIdentity": holder,
                "leaseDurationSeconds": 15,
                "renewTime": MicroTime(k8s_openapi::jiff::Timestamp::from_second(t).unwrap()),
            },
        }))
        .unwrap()
    }

    #[test]
    fn a_lease_is_available_when_unheld_mine_or_expired() {
        assert!(available(&lease("", 0), "a"));
        assert!(available(&lease("a", 0), "a"));
        assert!(!available(&lease("b", 3), "a"), "held and fresh");
        assert!(available(&lease("b", 20), "a"), "expired 5 s ago");
    }
}
