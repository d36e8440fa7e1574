//! Expiration as Karpenter's own controller: each NodeClaim expires from its own
//! `spec.expireAfter`, and nothing elsewhere in the cluster holds it back.

use std::time::{Duration, Instant};
use tenon_e2e::scenario::{
    INFLATE_NS, all_bound, apply_lab_general, nodeclass_ready, patch_nodepool, scale_inflate, small_deployment,
};
use tenon_e2e::{Cluster, eventually};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_nodeclaim_expires_from_its_own_expire_after_even_while_a_drain_is_held() {
    let mut c = Cluster::start("expiration").await;
    apply_lab_general(&c);
    // Drift (the template change below) must not replace anything: only expiration acts.
    patch_nodepool(
        &c,
        "lab-general",
        r#"{"spec":{"disruption":{"budgets":[{"nodes":"0","reasons":["Drifted"]}]}}}"#,
        false,
    );
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 4);
    all_bound(&c, INFLATE_NS, 4, Duration::from_secs(90)).await;
    let first = c.nodeclaims().await.remove(0);
    let first_name = first.metadata.name.clone().unwrap();
    assert_eq!(first.spec.expire_after, "720h");

    // Lowering the NodePool's expireAfter moves no existing NodeClaim's date: once the first
    // NodeClaim is older than the new 40 s and expiration has looked again, it is still there.
    patch_nodepool(&c, "lab-general", r#"{"spec":{"template":{"spec":{"expireAfter":"40s"}}}}"#, false);
    let created = first.metadata.creation_timestamp.as_ref().expect("a creation time").0;
    eventually(Duration::from_secs(60), "the first NodeClaim older than 40 s", || async {
        let age = k8s_openapi::jiff::Timestamp::now().duration_since(created);
        (age.as_secs() > 41).then_some(())
    })
    .await;
    c.reconciled("nodeclaim.expiration", 4).await;
    let still = c.nodeclaims().await;
    let kept = still.iter().find(|nc| nc.metadata.name.as_deref() == Some(first_name.as_str()));
    assert!(
        kept.is_some_and(|nc| nc.metadata.deletion_timestamp.is_none()),
        "{first_name} (expireAfter 720h) deleted after the NodePool's expireAfter was lowered"
    );

    // A PDB holds the first node's drain (its pods are not reschedulable, so nothing
    // launches for them). A new pod gets a new NodeClaim, stamped with the new 40 s, which
    // expires on time although the drain is still held.
    c.apply_yaml(
        "pdb",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: inflate, namespace: karpenter-lab}\nspec:\n  maxUnavailable: 0\n  selector: {matchLabels: {app: inflate}}\n",
    );
    c.kubectl(&["delete", "nodeclaim", &first_name, "--wait=false"]);
    small_deployment(&c, "extra", 1);
    let second = eventually(Duration::from_secs(60), "a NodeClaim for the new pod", || async {
        c.nodeclaims().await.into_iter().find(|nc| nc.metadata.name.as_deref() != Some(first_name.as_str()))
    })
    .await;
    let second_name = second.metadata.name.clone().unwrap();
    assert_eq!(second.spec.expire_after, "40s");
    let seen = Instant::now();
    eventually(Duration::from_secs(75), "the 40 s NodeClaim expired", || async {
        let claims = c.nodeclaims().await;
        let s = claims.iter().find(|nc| nc.metadata.name.as_deref() == Some(second_name.as_str()));
        s.is_none_or(|nc| nc.metadata.deletion_timestamp.is_some()).then_some(())
    })
    .await;
    // The Event is written just after the deletion it reports.
    eventually(Duration::from_secs(10), "an Expired Event on the 40 s NodeClaim", || async {
        let events = c.events_for(&second_name).await;
        events.iter().any(|e| e.reason.as_deref() == Some("Expired")).then_some(())
    })
    .await;
    let held = c.nodeclaims().await;
    assert!(
        held.iter().any(|nc| nc.metadata.name.as_deref() == Some(first_name.as_str())),
        "the PDB still holds the first drain"
    );
    eprintln!("e2e expiration: 40 s NodeClaim deleted {:.1}s after it was seen", seen.elapsed().as_secs_f64());

    c.assert_controller_running();
}
