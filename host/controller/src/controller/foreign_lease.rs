//! Stands the controller down while another provisioner leads the cluster (Karpenter, during
//! a migration or a rollback): both acting on the same NodeClaims would launch twice, disrupt
//! each other's nodes and overwrite each other's registration writes. The other Lease is
//! judged held as client-go's followers judge it (`leader::Observed`): it has a holder and
//! changed within its lease duration on this process's clock, never by its timestamps.

use super::events::{Involved, Recorder};
use super::leader::{Leadership, Observed};
use super::metrics::{Metrics, catalog as mc};
use super::settings::LeaseRef;
use k8s_openapi::api::coordination::v1::Lease;
use kube::{Api, Client};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the other Lease is read (client-go's retry period).
const READ_EVERY: Duration = Duration::from_secs(2);

/// A read of the other Lease taking longer than this counts as failed.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Event reasons on the other provisioner's Lease.
pub const REASON_HELD: &str = "OtherProvisionerLeads";
pub const REASON_LAPSED: &str = "OtherProvisionerStopped";

pub struct Guard {
    pub client: Client,
    pub lease: LeaseRef,
    pub leadership: Arc<Leadership>,
    pub recorder: Arc<Recorder>,
    pub metrics: Arc<Metrics>,
}

/// What one read says: the other provisioner leads (`Some(true)`), does not (`Some(false)`),
/// or the read failed (`None`: the last verdict stands).
fn verdict(read: Result<Option<Lease>, ()>, observed: &mut Observed, now: Instant) -> Option<bool> {
    match read {
        Ok(None) => Some(false),
        // No identity of ours can match the other provisioner's holder.
        Ok(Some(lease)) => Some(!observed.may_take(&lease, "", now)),
        Err(()) => None,
    }
}

impl Guard {
    /// Runs forever. Until the first read answers, the controller stays stood down (the
    /// caller stands it down before anything acts).
    pub async fn run(self) {
        let api: Api<Lease> = Api::namespaced(self.client.clone(), &self.lease.namespace);
        let label = self.lease.to_string();
        let mut observed = Observed::default();
        let mut last: Option<bool> = None;
        loop {
            let read = match tokio::time::timeout(READ_TIMEOUT, api.get_opt(&self.lease.name)).await {
                Ok(Ok(lease)) => Ok(lease),
                Ok(Err(e)) => {
                    tracing::warn!(lease = %label, error = %e, "could not read the other provisioner's Lease; acting as before");
                    Err(())
                }
                Err(_) => {
                    tracing::warn!(lease = %label, "reading the other provisioner's Lease timed out; acting as before");
                    Err(())
                }
            };
            let held = verdict(read, &mut observed, Instant::now()).or(last).unwrap_or(true);
            self.leadership.stand_down(held);
            self.metrics.set(mc::OTHER_PROVISIONER_LEADS, &[("lease", &label)], if held { 1.0 } else { 0.0 });
            if last != Some(held) {
                self.announce(held, &label).await;
            }
            last = Some(held);
            tokio::time::sleep(READ_EVERY).await;
        }
    }

    async fn announce(&self, held: bool, label: &str) {
        let involved = Involved {
            api_version: "coordination.k8s.io/v1".into(),
            kind: "Lease".into(),
            namespace: Some(self.lease.namespace.clone()),
            name: self.lease.name.clone(),
            uid: None,
        };
        if held {
            let message = format!(
                "another provisioner holds Lease {label}: Tenon launches, disrupts and terminates nothing until it stops renewing it (set TENON_KARPENTER_LEASE to empty to act anyway)"
            );
            tracing::warn!(lease = %label, "{message}");
            self.recorder.publish(&self.client, &involved, "Warning", REASON_HELD, &message).await;
        } else {
            let message = format!("no other provisioner holds Lease {label}: Tenon acts");
            tracing::info!(lease = %label, "{message}");
            self.recorder.publish(&self.client, &involved, "Normal", REASON_LAPSED, &message).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lease(holder: &str, renew: &str) -> Lease {
        serde_json::from_value(json!({
            "metadata": {"name": "karpenter-leader-election", "namespace": "kube-system"},
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": renew},
        }))
        .unwrap()
    }

    #[test]
    fn another_provisioner_leads_while_its_lease_is_held_and_renewed() {
        let mut o = Observed::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert_eq!(verdict(Ok(None), &mut o, t0), Some(false), "no Lease: nobody leads");
        let renewed = lease("karpenter-7d9f_1", "2026-12-06T10:00:00.000000Z");
        assert_eq!(verdict(Ok(Some(renewed.clone())), &mut o, at(1)), Some(true));
        // Renewed every 2 s: held however far its clock is from ours.
        let again = lease("karpenter-7d9f_1", "2020-01-01T00:00:02.000000Z");
        assert_eq!(verdict(Ok(Some(again.clone())), &mut o, at(10)), Some(true));
        // Unchanged for its 15 s lease duration on our clock: it has stopped.
        assert_eq!(verdict(Ok(Some(again.clone())), &mut o, at(24)), Some(true));
        assert_eq!(verdict(Ok(Some(again)), &mut o, at(26)), Some(false));
        // Released on a clean shutdown (LeaderElectionReleaseOnCancel): at once.
        assert_eq!(verdict(Ok(Some(lease("", "2026-12-06T10:00:30.000000Z"))), &mut o, at(27)), Some(false));
        assert_eq!(verdict(Err(()), &mut o, at(28)), None, "a failed read decides nothing");
    }
}
