//! API faults (conflicts, server errors, throttling, dropped and compacted watches) while
//! the lab-general experiment runs: no work lost, none duplicated.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tenon_e2e::Cluster;
use tenon_e2e::scenario::{INFLATE_NS, all_bound, apply_lab_general, nodeclass_ready, scale_inflate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_faults_neither_lose_nor_duplicate_nodeclaims() {
    let mut c = Cluster::start("faults").await;
    apply_lab_general(&c);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;

    // Only the controller creates NodeClaims, writes their status and watches: the
    // stand-ins and this test read with plain lists.
    c.emu.fail_next("create", "nodeclaims", 409, 2);
    c.emu.fail_next("create", "nodeclaims", 500, 1);
    c.emu.fail_next("create", "nodeclaims", 429, 1);
    c.emu.fail_next("patch", "nodeclaims/status", 429, 3);
    c.emu.fail_next("patch", "nodeclaims", 500, 2);
    c.emu.fail_next("watch", "nodeclaims", 500, 2);
    c.emu.fail_next("watch", "pods", 500, 2);
    let stop = Arc::new(AtomicBool::new(false));
    let cutter = {
        let stop = stop.clone();
        let emu_cut = c.emu.cutter();
        tokio::spawn(async move {
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(700)).await;
                emu_cut.cut(n % 4 == 3);
                n += 1;
            }
        })
    };
    scale_inflate(&c, 8);
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(120)).await;
    stop.store(true, Ordering::SeqCst);
    let _ = cutter.await;
    // Several more passes with the watches healthy: nothing more happens.
    c.reconciled("provisioner", 8).await;
    c.assert_controller_running();
    assert_eq!(c.emu.faults_pending(), 0, "every injected fault was hit");
    let claims = c.nodeclaims().await;
    let instances = c.instances().await;
    // 8 pods of 1 CPU fit one node of the cheapest admissible type: one NodeClaim, as
    // without faults (seeds.rs), and one instance for it.
    assert_eq!(claims.len(), 1, "one NodeClaim for the batch: {claims:#?}");
    assert_eq!(instances.len(), 1, "one instance: {instances:#?}");
    assert_eq!(instances[0].nodeclaim(), claims[0].metadata.name.as_deref());
}
