//! NodeClaims end to end beyond the happy path: NodePool deletion, and a controller killed
//! between CreateFleet and writing the NodeClaim's status.

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use kube::api::ListParams;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};
use tenon_e2e::scenario::{
    INFLATE_NS, all_bound, apply_lab_general, lab_general_running, nodeclass_ready, scale_inflate,
};
use tenon_e2e::{Cluster, eventually, has_condition};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_the_nodepool_drains_then_terminates_then_releases_its_nodeclaims() {
    let mut c = Cluster::start("delete-nodepool").await;
    lab_general_running(&mut c, 8).await;
    let claims = c.nodeclaims().await;
    // NodeClaim → (node, providerID)
    let owned: BTreeMap<String, (String, String)> = claims
        .iter()
        .map(|nc| {
            let st = nc.status.as_ref().unwrap();
            (nc.metadata.name.clone().unwrap(), (st.node_name.clone().unwrap(), st.provider_id.clone().unwrap()))
        })
        .collect();
    assert!(!owned.is_empty());

    // A PDB that allows no eviction holds the drain: what happens while it holds shows the
    // order (nothing is terminated under running pods).
    c.apply_yaml(
        "pdb",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: inflate, namespace: karpenter-lab}\nspec:\n  maxUnavailable: 0\n  selector: {matchLabels: {app: inflate}}\n",
    );
    c.kubectl(&["delete", "nodepool", "lab-general", "--wait=false"]);
    eventually(Duration::from_secs(30), "the NodeClaims to be deleting", || async {
        let current = c.nodeclaims().await;
        (current.len() == owned.len() && current.iter().all(|nc| nc.metadata.deletion_timestamp.is_some()))
            .then_some(())
    })
    .await;
    // Every drain is held (FailedDraining names the PDB), and the controller has looked again
    // since.
    for (node, _) in owned.values() {
        eventually(Duration::from_secs(30), "FailedDraining on every node", || async {
            let events = c.events_for(node).await;
            events.iter().any(|e| e.reason.as_deref() == Some("FailedDraining")).then_some(())
        })
        .await;
    }
    c.reconciled("node.termination", 4).await;
    let nodes: Vec<Node> = Api::<Node>::all(c.client.clone()).list(&ListParams::default()).await.unwrap().items;
    let live: BTreeSet<String> = c.instances().await.into_iter().map(|i| i.provider_id).collect();
    let pods = c.pods(INFLATE_NS).await;
    for (name, (node, pid)) in &owned {
        let n = nodes.iter().find(|n| n.metadata.name.as_deref() == Some(node)).expect("the node is kept while held");
        let taints = n.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
        assert!(taints.iter().any(|t| t.key == "karpenter.sh/disrupted" && t.effect == "NoSchedule"), "{node} tainted");
        assert!(live.contains(pid), "{name}: instance terminated while the PDB holds its pods");
        assert!(
            pods.iter().any(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node)),
            "{name}: pods evicted despite the PDB"
        );
    }
    c.kubectl(&["delete", "pdb", "inflate", "-n", INFLATE_NS]);
    let deleted = Instant::now();
    // First moment each NodeClaim was seen deleting, its node empty, its instance gone, and
    // the NodeClaim itself gone.
    let mut deleting: BTreeMap<String, Instant> = BTreeMap::new();
    let mut drained: BTreeMap<String, Instant> = BTreeMap::new();
    let mut terminated: BTreeMap<String, Instant> = BTreeMap::new();
    let mut released: BTreeMap<String, Instant> = BTreeMap::new();
    while released.len() < owned.len() {
        assert!(deleted.elapsed() < Duration::from_secs(90), "NodeClaims still present after 90 s: {released:?}");
        let now = Instant::now();
        let current = c.nodeclaims().await;
        let pods = c.pods(INFLATE_NS).await;
        let live: BTreeSet<String> = c.instances().await.into_iter().map(|i| i.provider_id).collect();
        for (name, (node, pid)) in &owned {
            match current.iter().find(|nc| nc.metadata.name.as_deref() == Some(name)) {
                Some(nc) if nc.metadata.deletion_timestamp.is_some() => {
                    deleting.entry(name.clone()).or_insert(now);
                }
                Some(_) => {}
                None => {
                    released.entry(name.clone()).or_insert(now);
                }
            }
            let on_node = pods.iter().any(|p| p.spec.as_ref().and_then(|s| s.node_name.as_deref()) == Some(node));
            if !on_node {
                drained.entry(name.clone()).or_insert(now);
            }
            if !live.contains(pid) {
                terminated.entry(name.clone()).or_insert(now);
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.assert_controller_running();
    for name in owned.keys() {
        let (d, t, r) = (drained[name], terminated[name], released[name]);
        assert!(deleting.get(name).is_none_or(|x| *x <= d), "{name}: drained before it was being deleted");
        assert!(d <= t, "{name}: instance terminated before its node was drained");
        assert!(t <= r, "{name}: NodeClaim released before its instance was terminated");
    }
    assert!(c.instances().await.is_empty(), "no instance left behind");
    eprintln!(
        "e2e timing (delete NodePool): {} NodeClaim(s) released {:.2}s after the PDB holding the drain was removed",
        owned.len(),
        released.values().max().unwrap().duration_since(deleted).as_secs_f64()
    );
    // The pods the Deployment recreates have no NodePool now: nothing new is launched.
    c.reconciled("provisioner", 8).await;
    assert!(c.nodeclaims().await.is_empty());
    assert!(c.instances().await.is_empty());

    // The EC2NodeClass goes last, taking its launch templates and instance profile along.
    let classes: Api<tenon_api::EC2NodeClass> = Api::all(c.client.clone());
    let fins = classes.get("lab-general").await.unwrap().metadata.finalizers.unwrap_or_default();
    assert!(fins.contains(&"karpenter.k8s.aws/termination".to_string()), "{fins:?}");
    assert!(!c.aws.clients.ec2.describe_launch_templates().send().await.unwrap().launch_templates().is_empty());
    c.kubectl(&["delete", "ec2nodeclass", "lab-general", "--wait=false"]);
    eventually(Duration::from_secs(30), "the EC2NodeClass released", || async {
        classes.get_opt("lab-general").await.ok()?.is_none().then_some(())
    })
    .await;
    assert!(c.aws.clients.ec2.describe_launch_templates().send().await.unwrap().launch_templates().is_empty());
    let profiles = c.aws.clients.iam.list_instance_profiles().send().await.unwrap();
    assert!(profiles.instance_profiles().is_empty(), "{:?}", profiles.instance_profiles());
    c.assert_controller_running();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn controller_killed_after_create_fleet_leaks_no_instance() {
    let mut c = Cluster::start("crash").await;
    apply_lab_general(&c);
    // Every NodeClaim status write fails: the controller launches but cannot record it.
    c.emu.fail_next("patch", "nodeclaims/status", 500, 1_000_000);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 8);
    let first = eventually(Duration::from_secs(60), "an instance launched", || async {
        c.instances().await.into_iter().next()
    })
    .await;
    c.kill_controller();
    assert!(
        c.nodeclaims().await.iter().all(|nc| !has_condition(nc, "Launched")),
        "the status write was supposed to fail"
    );
    c.emu.clear_faults();
    c.start_controller();
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(90)).await;
    c.assert_controller_running();
    let claims = c.nodeclaims().await;
    let instances = c.instances().await;
    let names: BTreeSet<String> = claims.iter().filter_map(|nc| nc.metadata.name.clone()).collect();
    let tagged: Vec<&str> = instances.iter().filter_map(|i| i.nodeclaim()).collect();
    assert_eq!(instances.len(), claims.len(), "exactly one instance per NodeClaim: {instances:#?}");
    assert_eq!(tagged.iter().copied().collect::<BTreeSet<_>>().len(), tagged.len(), "no NodeClaim has two instances");
    assert!(tagged.iter().all(|n| names.contains(*n)), "every instance belongs to a NodeClaim");
    let adopted = claims
        .iter()
        .find(|nc| nc.status.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(first.provider_id.as_str()));
    assert!(adopted.is_some(), "the instance launched before the crash was adopted, not replaced");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_one_leads_and_the_other_takes_over_when_it_dies() {
    let mut c = Cluster::start("leader").await;
    c.leader_election = true;
    apply_lab_general(&c);
    c.start_replica(0);
    eventually(Duration::from_secs(60), "replica 0 to lead", || async {
        c.replica_log(0).contains("acquired leadership").then_some(())
    })
    .await;
    c.start_replica(1);
    eventually(Duration::from_secs(60), "replica 1 to wait", || async {
        c.replica_log(1).contains("another replica leads").then_some(())
    })
    .await;
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 8);
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(90)).await;
    assert_eq!(c.nodeclaims().await.len(), 1, "one actor: no NodeClaim twice");
    assert_eq!(c.instances().await.len(), 1);
    assert!(!c.replica_log(1).contains("created NodeClaim"), "the follower does not act");

    c.kill_replica(0);
    let killed = Instant::now();
    eventually(Duration::from_secs(45), "replica 1 to take over", || async {
        c.replica_log(1).contains("acquired leadership").then_some(())
    })
    .await;
    let takeover = killed.elapsed();
    scale_inflate(&c, 16);
    all_bound(&c, INFLATE_NS, 16, Duration::from_secs(90)).await;
    assert!(c.replica_log(1).contains("created NodeClaim"), "the new leader provisions");
    c.assert_controller_running();
    eprintln!(
        "e2e timing (leader election): follower took over {:.1}s after the leader was killed (lease 15 s)",
        takeover.as_secs_f64()
    );
}

/// Waits until replica `i`'s log (kept across its restarts) says `line` the `n`th time, or
/// fails after 60 s.
async fn logged(c: &Cluster, i: usize, line: &str, n: usize) {
    eventually(Duration::from_secs(60), &format!("replica {i} to log {line:?} {n} time(s)"), || async {
        (c.replica_log(i).matches(line).count() >= n).then_some(())
    })
    .await;
}

async fn leads(c: &Cluster, i: usize, n: usize) {
    logged(c, i, "acquired leadership", n).await;
}

/// A replica ready and waiting for the Lease (what a rollout waits for before stopping the
/// old one).
async fn follows(c: &Cluster, i: usize, n: usize) {
    logged(c, i, "another replica leads; waiting", n).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_launch_and_mid_drain_hands_over_within_seconds_and_leaks_nothing() {
    let mut c = Cluster::start("sigterm").await;
    c.leader_election = true;
    apply_lab_general(&c);
    c.start_replica(0);
    leads(&c, 0, 1).await;
    c.start_replica(1);
    nodeclass_ready(&c, "lab-general").await;
    follows(&c, 1, 1).await;
    // Mid-launch: the leader goes the moment its NodeClaim exists.
    scale_inflate(&c, 4);
    eventually(Duration::from_secs(30), "a NodeClaim", || async { (!c.nodeclaims().await.is_empty()).then_some(()) })
        .await;
    let status = tokio::task::block_in_place(|| c.terminate_replica(0)).expect("replica 0 was running");
    let termed = Instant::now();
    assert!(status.success(), "SIGTERM is a clean exit: {status}");
    assert!(c.replica_log(0).contains("leadership released"), "the lease was given up");
    leads(&c, 1, 1).await;
    let handover = termed.elapsed();
    all_bound(&c, INFLATE_NS, 4, Duration::from_secs(90)).await;
    let claims = c.nodeclaims().await;
    let instances = c.instances().await;
    assert_eq!(instances.len(), claims.len(), "one instance per NodeClaim after the handover: {instances:#?}");
    // Mid-drain: the new leader drains a node and goes; the first comes back and finishes.
    c.start_replica(0);
    follows(&c, 0, 1).await;
    scale_inflate(&c, 0);
    let name = claims[0].metadata.name.clone().unwrap();
    let node = claims[0].status.as_ref().and_then(|s| s.node_name.clone()).expect("a registered node");
    c.kubectl(&["delete", "nodeclaim", &name, "--wait=false"]);
    eventually(Duration::from_secs(30), "the node tainted for its drain", || async {
        let n = Api::<Node>::all(c.client.clone()).get(&node).await.ok()?;
        let taints = n.spec?.taints.unwrap_or_default();
        taints.iter().any(|t| t.key == "karpenter.sh/disrupted").then_some(())
    })
    .await;
    tokio::task::block_in_place(|| c.terminate_replica(1)).expect("replica 1 was running");
    let termed = Instant::now();
    leads(&c, 0, 2).await;
    let second = termed.elapsed();
    eventually(Duration::from_secs(60), "the NodeClaim released and its instance gone", || async {
        let gone = !c.nodeclaims().await.iter().any(|nc| nc.metadata.name.as_deref() == Some(name.as_str()));
        (gone && c.instances().await.is_empty()).then_some(())
    })
    .await;
    // Followers retry every second; a released lease is theirs at the next try.
    assert!(handover < Duration::from_secs(3), "the follower led {handover:?} after the leader exited");
    assert!(second < Duration::from_secs(3), "the follower led {second:?} after the leader exited");
    eprintln!(
        "e2e timing (SIGTERM): the follower led {:.1}s and {:.1}s after the leader exited",
        handover.as_secs_f64(),
        second.as_secs_f64()
    );
}

/// Nodes join where EKS says (eks:DescribeCluster: endpoint, CA, Service CIDR) and with the
/// `karpenter.sh/unregistered` taint their user data registers them with: the kubelet
/// stand-in adds no taint of its own, so registration here is Tenon's handshake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_join_where_eks_says_tainted_by_their_user_data_until_registered() {
    let mut c = Cluster::start("node-join").await;
    lab_general_running(&mut c, 1).await;
    let eks = tenon_aws::cluster::describe(&c.aws.clients, tenon_e2e::CLUSTER).await.expect("moto's EKS cluster");
    let claims = c.nodeclaims().await;
    let pid = claims[0].status.as_ref().and_then(|s| s.provider_id.clone()).expect("launched");
    let id = pid.rsplit('/').next().unwrap().to_string();
    let user_data = tenon_e2e::kubelet::user_data(&c.aws, &id).await.expect("user data");
    for want in [
        format!("apiServerEndpoint: \"{}\"", eks.endpoint.clone().unwrap()),
        format!("certificateAuthority: \"{}\"", eks.ca_bundle.clone().unwrap()),
        "cidr: \"172.20.0.0/16\"".to_string(),
        // The kubelet's clusterDNS is kube-dns's address (read by the controller at start).
        format!("\"clusterDNS\":[\"{}\"]", tenon_e2e::CLUSTER_DNS),
    ] {
        assert!(user_data.contains(&want), "{want} missing from the user data:\n{user_data}");
    }
    let joining = tenon_e2e::kubelet::joins_with(&user_data);
    assert!(
        joining.taints.iter().any(|t| t["key"] == "karpenter.sh/unregistered" && t["effect"] == "NoExecute"),
        "{joining:?}"
    );
    // The node registered (its taint removed) without Tenon missing the taint.
    let nodes = Api::<Node>::all(c.client.clone()).list(&ListParams::default()).await.unwrap().items;
    let node = nodes.into_iter().find(|n| n.spec.as_ref().and_then(|s| s.provider_id.as_deref()) == Some(pid.as_str()));
    let node = node.expect("the node joined");
    let taints = node.spec.as_ref().and_then(|s| s.taints.clone()).unwrap_or_default();
    assert!(!taints.iter().any(|t| t.key == "karpenter.sh/unregistered"), "registration removed it: {taints:?}");
    let name = claims[0].metadata.name.clone().unwrap();
    let events = c.events_for(&name).await;
    assert!(!events.iter().any(|e| e.reason.as_deref() == Some("UnregisteredTaintMissing")), "{events:?}");
}
