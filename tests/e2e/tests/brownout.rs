//! An EC2 brownout at the controller: for 3 minutes 30 % of EC2 calls fail (503 Unavailable,
//! 503 RequestLimitExceeded, 500 InternalError, or no answer past the attempt timeout), and
//! DescribeInstanceStatus does not answer at all, while 200 pods arrive in waves. The liveness probe never restarts the controller, every pod is
//! bound within 5 minutes of the brownout's end, and no instance is leaked or launched twice.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tenon_e2e::scenario::{INFLATE_NS, all_bound, apply_lab_general, nodeclass_ready, patch_nodepool, scale_inflate};
use tenon_e2e::{Cluster, eventually};
use tenon_fault_proxy::{Fault, brownout};

const BROWNOUT: Duration = Duration::from_secs(180);
/// The kubelet's default liveness probe: every 10 s, restarting after 3 failures in a row.
const PROBE_EVERY: Duration = Duration::from_secs(10);
const FAILURES_TO_RESTART: u32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ec2_brownout_restarts_nothing_leaks_nothing_and_every_pod_is_bound_after() {
    let mut c = Cluster::start("brownout").await;
    let active = Arc::new(AtomicBool::new(false));
    let faults = vec![
        Fault::ec2_error(503, "Unavailable"),
        Fault::ec2_error(503, "RequestLimitExceeded"),
        Fault::ec2_error(500, "InternalError"),
        Fault::Hang(Duration::from_secs(35)),
    ];
    // EC2's query API only (its requests name its API version; IAM, SSM and SQS do not).
    let ec2 = brownout(&c.moto.url, "Version=2016-11-15", 0.3, faults, active.clone()).await;
    // And one operation down for the whole brownout: the instance health checks' (every
    // minute; not what launching needs) never answer.
    let status = brownout(
        &ec2.url,
        "Action=DescribeInstanceStatus",
        1.0,
        vec![Fault::Hang(Duration::from_secs(60))],
        active.clone(),
    )
    .await;
    c.controller_env.push(("AWS_ENDPOINT_URL".into(), status.url.clone()));
    apply_lab_general(&c);
    // Room for 200 one-CPU pods.
    patch_nodepool(&c, "lab-general", r#"{"spec":{"limits":{"cpu":"1000","memory":"4Ti"}}}"#, false);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;

    active.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let calls_before = ec2.seen.load(Ordering::SeqCst);
    let waves = [(0, 50), (40, 100), (80, 150), (120, 200)];
    let mut in_a_row = 0;
    let mut worst = 0;
    while started.elapsed() < BROWNOUT {
        for (at, replicas) in waves {
            let due = Duration::from_secs(at);
            if started.elapsed() >= due && started.elapsed() < due + PROBE_EVERY {
                scale_inflate(&c, replicas);
            }
        }
        match c.healthz(0) {
            Some((true, _)) => in_a_row = 0,
            other => {
                in_a_row += 1;
                worst = worst.max(in_a_row);
                assert!(in_a_row < FAILURES_TO_RESTART, "the liveness probe would restart the controller: {other:?}");
            }
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
    active.store(false, Ordering::SeqCst);
    let calls = ec2.seen.load(Ordering::SeqCst) - calls_before;
    assert!(status.seen.load(Ordering::SeqCst) > 0, "the health checks were tried, and hung");
    let ended = Instant::now();
    let bound = all_bound(&c, INFLATE_NS, 200, Duration::from_secs(300)).await;
    eprintln!(
        "e2e timing (brownout): 200 pods bound {:.0}s after a 3-minute 30 % EC2 brownout of {calls} calls; worst probe streak {worst}",
        bound.duration_since(ended).as_secs_f64()
    );
    c.assert_controller_running();
    // No instance leaked or launched twice: EC2's live instances are the NodeClaims'.
    eventually(Duration::from_secs(120), "EC2's live instances to be exactly the NodeClaims'", || async {
        let claimed: BTreeSet<String> = c
            .nodeclaims()
            .await
            .iter()
            .filter_map(|nc| nc.status.as_ref()?.provider_id.as_deref()?.rsplit('/').next().map(str::to_string))
            .collect();
        let live: BTreeSet<String> = c.instances().await.into_iter().map(|i| i.id).collect();
        (claimed == live).then_some(())
    })
    .await;
}
