//! Tenon beside Karpenter (a migration, a rollback): while Karpenter's leader-election Lease
//! is held and renewed, Tenon acts on nothing; once it lapses, Tenon provisions.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;
use std::time::Duration;
use tenon_e2e::scenario::{INFLATE_NS, all_bound, apply_lab_general, scale_inflate};
use tenon_e2e::{Cluster, eventually};

const LEASE: &str = "karpenter-leader-election";
const HELD: &str = r#"tenon_other_provisioner_leads{lease="kube-system/karpenter-leader-election"}"#;

fn now() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// Karpenter's Lease, just acquired by a Karpenter pod, lasting `seconds` unrenewed.
async fn karpenters_lease(c: &Cluster, seconds: i32) -> Api<Lease> {
    let leases: Api<Lease> = Api::namespaced(c.client.clone(), "kube-system");
    let lease = serde_json::from_value(json!({
        "metadata": {"name": LEASE, "namespace": "kube-system"},
        "spec": {"holderIdentity": "karpenter-6f7b9c_0b1d", "leaseDurationSeconds": seconds, "renewTime": now(), "acquireTime": now()},
    }))
    .unwrap();
    leases.create(&PostParams::default(), &lease).await.expect("Karpenter's Lease");
    leases
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_karpenters_lease_is_renewed_tenon_launches_nothing_then_proceeds() {
    let mut c = Cluster::start("karpenter-lease").await;
    let leases = karpenters_lease(&c, 15).await;
    apply_lab_general(&c);
    c.start_controller();
    scale_inflate(&c, 2);
    eventually(Duration::from_secs(30), "Tenon standing down for Karpenter's Lease", || async {
        (c.metric(HELD).await == Some(1.0)).then_some(())
    })
    .await;
    // Karpenter renews every 2 s; the pods stay pending, as Karpenter would have them.
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let renewal = json!({"spec": {"renewTime": now()}});
        leases.patch(LEASE, &PatchParams::default(), &Patch::Merge(&renewal)).await.expect("renewed");
        assert!(c.nodeclaims().await.is_empty(), "a NodeClaim while Karpenter leads");
        assert!(c.instances().await.is_empty(), "an instance launched while Karpenter leads");
        assert_eq!(c.metric(HELD).await, Some(1.0));
    }
    let renewed_last = std::time::Instant::now();
    let renewed_at = k8s_openapi::jiff::Timestamp::now();
    let said = c.events_for(LEASE).await;
    let held =
        said.iter().find(|e| e.reason.as_deref() == Some("OtherProvisionerLeads")).expect("a Warning on the Lease");
    assert_eq!(held.type_.as_deref(), Some("Warning"));
    assert!(held.message.as_deref().unwrap_or_default().contains("TENON_KARPENTER_LEASE"), "{held:?}");
    // Karpenter stops (scaled to zero without releasing): the Lease lapses after its 15 s.
    all_bound(&c, INFLATE_NS, 2, Duration::from_secs(120)).await;
    let first =
        c.nodeclaims().await.iter().filter_map(|nc| nc.metadata.creation_timestamp.clone()).min().expect("a NodeClaim");
    let since_last = renewed_last.elapsed().as_secs_f64();
    eprintln!("e2e timing (Karpenter's Lease): bound {since_last:.1}s after its last renewal");
    // Not before the Lease went unrenewed for its whole duration (creation times are whole
    // seconds).
    let lapsed = first.0.as_second() - renewed_at.as_second();
    assert!(lapsed >= 14, "the first NodeClaim came {lapsed}s after Karpenter's last renewal");
    assert_eq!(c.metric(HELD).await, Some(0.0));
    assert!(c.events_for(LEASE).await.iter().any(|e| e.reason.as_deref() == Some("OtherProvisionerStopped")));
    c.assert_controller_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_override_tenon_acts_beside_a_held_lease() {
    let mut c = Cluster::start("karpenter-lease-override").await;
    karpenters_lease(&c, 3600).await;
    c.controller_env.push(("TENON_KARPENTER_LEASE".into(), String::new()));
    apply_lab_general(&c);
    c.start_controller();
    scale_inflate(&c, 1);
    all_bound(&c, INFLATE_NS, 1, Duration::from_secs(120)).await;
    assert_eq!(c.metric(HELD).await, None, "not watched");
}
