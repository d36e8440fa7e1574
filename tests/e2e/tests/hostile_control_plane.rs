//! A control plane that throttles, times out, stalls and disagrees about the time, and an
//! EC2 that hangs: the controller neither stops provisioning, nor acts twice, nor keeps
//! acting once it cannot tell that it leads.

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use std::time::{Duration, Instant, SystemTime};
use tenon_e2e::scenario::{
    INFLATE_NS, a_new_pod_is_nominated_within_5s, all_bound, apply_lab_general, four_vcpu_nodes, nodeclass_ready,
    patch_nodepool, scale_inflate, two_nodes_under_one_pdb,
};
use tenon_e2e::{CONTROLLER_TOKEN, Cluster, eventually, replica_token};
use tenon_kube_emulator::Fault;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_drains_held_by_one_pdb_stop_no_provisioning() {
    let mut c = Cluster::start("hostile-pdb").await;
    let claims = two_nodes_under_one_pdb(&mut c).await;
    // The API server refuses the first evictions as a PDB does (429, no Retry-After): a race
    // the controller's own PDB arithmetic cannot see (another drain, another controller).
    c.emu.inject(Fault {
        verb: "create".into(),
        resource: "pods/eviction".into(),
        status: 429,
        remaining: 4,
        no_retry_after: true,
        ..Fault::default()
    });
    for nc in &claims {
        c.kubectl(&["delete", "nodeclaim", nc.metadata.name.as_deref().unwrap(), "--wait=false"]);
    }
    // Both drains under way and refused.
    eventually(Duration::from_secs(30), "evictions refused with 429", || async {
        c.metric("karpenter_pods_eviction_requests_total{code=\"429\"}").await.filter(|n| *n >= 2.0)
    })
    .await;
    a_new_pod_is_nominated_within_5s(&c, "hostile").await;
    c.assert_controller_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_create_stored_then_answered_504_makes_one_nodeclaim() {
    let mut c = Cluster::start("hostile-504").await;
    apply_lab_general(&c);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    c.emu.inject(Fault {
        verb: "create".into(),
        resource: "nodeclaims".into(),
        status: 504,
        remaining: 1,
        client: Some(CONTROLLER_TOKEN.into()),
        after_storing: true,
        ..Fault::default()
    });
    scale_inflate(&c, 2);
    all_bound(&c, INFLATE_NS, 2, Duration::from_secs(120)).await;
    assert_eq!(c.emu.faults_pending(), 0, "the 504 was hit");
    // Several more passes: nothing more happens.
    c.reconciled("provisioner", 16).await;
    let claims = c.nodeclaims().await;
    assert_eq!(claims.len(), 1, "one NodeClaim for two 1-CPU pods: {claims:#?}");
    assert_eq!(c.instances().await.len(), 1, "one instance");
    c.assert_controller_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_nodeclaim_watch_neither_duplicates_nodeclaims_nor_breaks_the_limit() {
    let mut c = Cluster::start("hostile-stall").await;
    apply_lab_general(&c);
    four_vcpu_nodes(&c);
    patch_nodepool(&c, "lab-general", r#"{"spec":{"limits":{"cpu":"20"}}}"#, false);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 3);
    all_bound(&c, INFLATE_NS, 3, Duration::from_secs(120)).await;
    // The NodeClaim watch stays open and says nothing for a minute while the workload grows.
    c.emu.silence_watches("nodeclaims", Duration::from_secs(60));
    let silenced = Instant::now();
    scale_inflate(&c, 12);
    all_bound(&c, INFLATE_NS, 12, Duration::from_secs(150)).await;
    c.reconciled("provisioner", 10).await;
    let claims = c.nodeclaims().await;
    let cpu: i64 = claims
        .iter()
        .filter_map(|nc| nc.metadata.labels.as_ref()?.get("karpenter.k8s.aws/instance-cpu")?.parse::<i64>().ok())
        .sum();
    // Without the stall: twelve pods, three per 4-vCPU node.
    assert_eq!(claims.len(), 4, "four NodeClaims as without the stall");
    assert!(cpu <= 20, "the NodePool's 20-CPU limit holds: {cpu} CPUs");
    eprintln!(
        "e2e timing (hostile): 12 pods bound {:.1}s after a 60 s NodeClaim watch stall began",
        silenced.elapsed().as_secs_f64()
    );
    c.assert_controller_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_createfleet_fails_healthz_and_stops_no_other_nodepool() {
    let mut c = Cluster::start("hostile-hung").await;
    apply_lab_general(&c);
    let other = std::fs::read_to_string(tenon_e2e::repo().join("examples/seeds/lab-general/nodepool-lab-general.yaml"))
        .expect("the lab NodePool")
        .replace("name: lab-general\nspec:", "name: other\nspec:")
        .replace("capacity.example.io/pool: lab-general", "capacity.example.io/pool: other");
    c.apply_yaml("other", &other);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    c.moto.hang(&["CreateFleet"]);
    let hung = Instant::now();
    scale_inflate(&c, 1);
    eventually(Duration::from_secs(30), "a NodeClaim for inflate", || async {
        (!c.nodeclaims().await.is_empty()).then_some(())
    })
    .await;
    // A pod of another NodePool while lab-general's launch hangs.
    c.apply_yaml(
        "other-pod",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: other-pod, namespace: karpenter-lab}\nspec:\n  nodeSelector: {capacity.example.io/pool: other}\n  containers: [{name: pause, image: public.ecr.aws/eks-distro/kubernetes/pause:3.10, resources: {requests: {cpu: 500m}}}]\n",
    );
    let asked = Instant::now();
    eventually(Duration::from_secs(10), "a NodeClaim of NodePool other within 10 s", || async {
        c.nodeclaims()
            .await
            .iter()
            .any(|nc| {
                nc.metadata.labels.as_ref().and_then(|l| l.get("karpenter.sh/nodepool")).map(String::as_str)
                    == Some("other")
            })
            .then_some(())
    })
    .await;
    let provisioned = asked.elapsed();
    let why = eventually(Duration::from_secs(60), "/healthz to fail within 60 s of the hang", || async {
        c.healthz(0).filter(|(ok, _)| !ok).map(|(_, why)| why)
    })
    .await;
    let unhealthy = hung.elapsed();
    assert!(why.contains("CreateFleet"), "/healthz names the call: {why}");
    c.moto.hang(&[]);
    eventually(Duration::from_secs(90), "/healthz healthy again once EC2 answers", || async {
        c.healthz(0).filter(|(ok, _)| *ok).map(|_| ())
    })
    .await;
    // inflate's pod and other-pod, both launched once EC2 answers.
    all_bound(&c, INFLATE_NS, 2, Duration::from_secs(90)).await;
    eprintln!(
        "e2e timing (hostile): other NodePool's NodeClaim {:.1}s after its pod; /healthz failed {:.1}s after CreateFleet hung",
        provisioned.as_secs_f64(),
        unhealthy.as_secs_f64()
    );
    c.assert_controller_running();
}

/// The Lease's `renewTime` as the API server holds it.
async fn renew_time(c: &Cluster) -> SystemTime {
    let lease = Api::<Lease>::namespaced(c.client.clone(), "kube-system")
        .get("tenon-leader-election")
        .await
        .expect("the Lease");
    let t = lease.spec.and_then(|s| s.renew_time).expect("renewTime").0;
    SystemTime::UNIX_EPOCH + Duration::from_micros(t.as_microsecond() as u64)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_stops_before_a_skewed_follower_takes_over() {
    let mut c = Cluster::start("hostile-lease").await;
    c.leader_election = true;
    apply_lab_general(&c);
    c.start_replica(0);
    eventually(Duration::from_secs(60), "replica 0 to lead", || async {
        c.replica_log(0).contains("acquired leadership").then_some(())
    })
    .await;
    // The follower's clock runs a minute ahead: the leader's renewals look a minute old to it.
    c.emu.set_clock_offset(&replica_token(1), 60);
    c.start_replica(1);
    eventually(Duration::from_secs(60), "replica 1 to start electing", || async {
        let log = c.replica_log(1);
        (log.contains("another replica leads") || log.contains("acquired leadership")).then_some(())
    })
    .await;
    nodeclass_ready(&c, "lab-general").await;
    // A follower that judged the Lease by its own skewed clock would take it on its first
    // look; it looks every 2 s (the retry period).
    let looked = c.emu.call_count(&replica_token(1), "leases", "get");
    eventually(Duration::from_secs(60), "replica 1 to look at the Lease five more times", || async {
        (c.emu.call_count(&replica_token(1), "leases", "get") >= looked + 5).then_some(())
    })
    .await;
    assert!(!c.replica_log(1).contains("acquired leadership"), "the skewed follower took a fresh Lease");
    c.assert_controller_running();

    // The leader's renewals now fail (503), while it has work under way.
    let last_seen_renewal = renew_time(&c).await;
    c.emu.inject(Fault {
        verb: "patch".into(),
        resource: "leases".into(),
        status: 503,
        remaining: usize::MAX,
        client: Some(replica_token(0)),
        ..Fault::default()
    });
    scale_inflate(&c, 2);
    let (mut exited, mut acquired) = (None, None);
    let start = Instant::now();
    while (exited.is_none() || acquired.is_none()) && start.elapsed() < Duration::from_secs(60) {
        if exited.is_none() && c.replica_exited(0) {
            exited = Some((Instant::now(), SystemTime::now()));
        }
        if acquired.is_none() && c.replica_log(1).contains("acquired leadership") {
            acquired = Some(Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (exited_at, exited_wall) = exited.expect("the leader exited");
    let acquired_at = acquired.expect("the follower took over");
    // The leader renewed last at or after the renewTime read before the fault.
    let after_renewal = exited_wall.duration_since(last_seen_renewal).unwrap_or_default();
    assert!(after_renewal <= Duration::from_secs(15), "the leader acted {after_renewal:?} after its last renewal");
    assert!(exited_at < acquired_at, "the follower led while the old leader still ran");
    assert!(c.replica_log(0).contains("not renewed within the renew deadline"), "{}", c.replica_log(0));
    // More than the old leader's node holds: the new leader provisions.
    scale_inflate(&c, 10);
    all_bound(&c, INFLATE_NS, 10, Duration::from_secs(120)).await;
    assert!(c.replica_log(1).contains("created NodeClaim"), "the new leader provisions");
    eprintln!(
        "e2e timing (hostile): leader exited {:.1}s after its last renewal; follower led {:.1}s after that",
        after_renewal.as_secs_f64(),
        acquired_at.duration_since(exited_at).as_secs_f64()
    );
}

/// EC2NodeClass `name`'s `Ready` condition: (status, reason, message).
async fn nodeclass_ready_condition(c: &Cluster, name: &str) -> Option<(String, String, String)> {
    let nc = Api::<tenon_api::EC2NodeClass>::all(c.client.clone()).get(name).await.ok()?;
    let cond = nc.status?.conditions.into_iter().find(|x| x.type_ == "Ready")?;
    Some((cond.status, cond.reason, cond.message))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ec2nodeclass_aws_refuses_is_not_ready_says_why_and_backs_off() {
    let mut c = Cluster::start("hostile-denied").await;
    // The controller's role may not DescribeSubnets.
    c.moto.refuse(&["DescribeSubnets"]);
    apply_lab_general(&c);
    c.start_controller();
    let message = eventually(Duration::from_secs(60), "Ready=False with AWS's error", || async {
        nodeclass_ready_condition(&c, "lab-general")
            .await
            .filter(|(status, reason, _)| status == "False" && reason == "ResolutionFailed")
            .map(|(_, _, message)| message)
    })
    .await;
    assert!(message.contains("UnauthorizedOperation"), "the condition names the error: {message}");
    eventually(Duration::from_secs(30), "a ResolutionFailed Event", || async {
        let events = c.events_for("lab-general").await;
        events.iter().any(|e| e.reason.as_deref() == Some("ResolutionFailed")).then_some(())
    })
    .await;
    // Tried again with a backoff (1, 2, 4, 8 s…), not on every look (twice a second).
    let first = Instant::now();
    c.reconciled("nodeclass", 20).await;
    let tries = c.controller_log().matches("could not resolve EC2NodeClass").count();
    assert!(tries <= 8, "{tries} resolutions in 20 looks over {:.0} s", first.elapsed().as_secs_f64());
    c.moto.refuse(&[]);
    nodeclass_ready(&c, "lab-general").await;
    c.assert_controller_running();
}
