//! What happens to capacity from outside: interruption messages on the SQS queue, EC2's
//! status checks, and instances no NodeClaim accounts for.

use aws_sdk_ec2::types::{InstanceType, ResourceType, Tag, TagSpecification};
use kube::Api;
use std::time::{Duration, Instant};
use tenon_api::EC2NodeClass;
use tenon_e2e::scenario::{INFLATE_NS, all_bound, lab_general_running};
use tenon_e2e::{CLUSTER, Cluster, eventually};

fn message(detail_type: &str, detail: serde_json::Value) -> String {
    serde_json::json!({
        "version": "0", "id": "6f2d3c1b", "detail-type": detail_type, "source": "aws.ec2",
        "account": "123456789012", "time": "2026-11-30T10:00:00Z", "region": "us-east-1",
        "resources": [], "detail": detail,
    })
    .to_string()
}

/// A cluster whose controller reads the interruption queue, running `replicas` inflate pods;
/// returns the queue's URL and the first NodeClaim's name and instance id.
async fn with_queue(c: &mut Cluster, replicas: u32) -> (String, String, String) {
    let queue = c.aws.clients.sqs.create_queue().queue_name("tenon-interruption").send().await.unwrap();
    let url = queue.queue_url().unwrap().to_string();
    c.controller_env.push(("INTERRUPTION_QUEUE".into(), "tenon-interruption".into()));
    lab_general_running(c, replicas).await;
    let old = c.nodeclaims().await.remove(0);
    let pid = old.status.as_ref().and_then(|s| s.provider_id.clone()).unwrap();
    let id = pid.rsplit('/').next().unwrap().to_string();
    (url, old.metadata.name.clone().unwrap(), id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_interruption_replaces_the_node_and_a_rebalance_is_only_an_event() {
    let mut c = Cluster::start("interruption").await;
    let (url, old_name, id) = with_queue(&mut c, 8).await;

    let send = |body: String| {
        let sqs = c.aws.clients.sqs.clone();
        let url = url.clone();
        async move { sqs.send_message().queue_url(url).message_body(body).send().await.unwrap() }
    };
    send(message("EC2 Instance Rebalance Recommendation", serde_json::json!({"instance-id": id}))).await;
    eventually(Duration::from_secs(60), "a SpotRebalanceRecommendation Event", || async {
        c.events_for(&old_name)
            .await
            .iter()
            .any(|e| e.reason.as_deref() == Some("SpotRebalanceRecommendation"))
            .then_some(())
    })
    .await;
    // The message handled to the end (deleted from the queue), and the cluster looked at
    // again since.
    eventually(Duration::from_secs(30), "the rebalance message deleted from the queue", || async {
        c.metric("karpenter_interruption_deleted_messages_total").await.filter(|n| *n >= 1.0)
    })
    .await;
    c.reconciled("node.termination", 4).await;
    let still = c.nodeclaims().await;
    assert!(
        still.iter().all(|nc| nc.metadata.deletion_timestamp.is_none()),
        "a rebalance recommendation disrupts nothing"
    );

    let sent = Instant::now();
    send(message(
        "EC2 Spot Instance Interruption Warning",
        serde_json::json!({"instance-id": id, "instance-action": "terminate"}),
    ))
    .await;
    eventually(Duration::from_secs(60), "the interrupted NodeClaim gone", || async {
        c.nodeclaims().await.iter().all(|nc| nc.metadata.name.as_deref() != Some(old_name.as_str())).then_some(())
    })
    .await;
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(60)).await;
    let took = sent.elapsed();
    c.assert_controller_running();
    let events = c.events_for(&old_name).await;
    for reason in ["SpotInterrupted", "TerminatingOnInterruption"] {
        assert!(events.iter().any(|e| e.reason.as_deref() == Some(reason)), "no {reason} Event: {events:#?}");
    }
    // Karpenter's words on each object, the Node named as the Node.
    let all = c.events().await;
    let said = |kind: &str, message: &str| {
        all.iter().any(|e| {
            e.involved_object.kind.as_deref() == Some(kind)
                && e.reason.as_deref() == Some("TerminatingOnInterruption")
                && e.message.as_deref() == Some(message)
        })
    };
    assert!(said("NodeClaim", "Interruption triggered termination for the NodeClaim"));
    assert!(said("Node", "Interruption triggered termination for the Node"));
    let queued = c.metric("karpenter_interruption_message_queue_duration_seconds_count").await;
    assert!(queued.is_some_and(|n| n >= 1.0), "the message's time on the queue is measured: {queued:?}");
    let claims = c.nodeclaims().await;
    assert_eq!(claims.len(), 1, "one replacement");
    let live = c.instances().await;
    assert!(live.iter().all(|i| i.id != id), "the interrupted instance is terminated");
    assert_eq!(live.len(), 1);
    eprintln!("e2e interruption: 8 pods running on a replacement {:.1}s after the spot warning", took.as_secs_f64());
}

/// Karpenter deletes a message only once it was handled: a NodeClaim delete that fails
/// leaves the warning on the queue, and its redelivery (20 s visibility timeout) finishes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spot_warning_whose_nodeclaim_delete_fails_is_handled_on_redelivery() {
    let mut c = Cluster::start("interruption-retry").await;
    let (url, old_name, id) = with_queue(&mut c, 2).await;
    c.emu.fail_next("delete", "nodeclaims", 500, 1);
    let sent = Instant::now();
    let body = message(
        "EC2 Spot Instance Interruption Warning",
        serde_json::json!({"instance-id": id, "instance-action": "terminate"}),
    );
    c.aws.clients.sqs.send_message().queue_url(&url).message_body(body).send().await.unwrap();
    eventually(Duration::from_secs(30), "the interrupted NodeClaim deleted despite one failed delete", || async {
        let claims = c.nodeclaims().await;
        let old = claims.iter().find(|nc| nc.metadata.name.as_deref() == Some(old_name.as_str()));
        old.is_none_or(|nc| nc.metadata.deletion_timestamp.is_some()).then_some(())
    })
    .await;
    let took = sent.elapsed();
    assert!(took >= Duration::from_secs(15), "deleted after {took:?}: the injected 500 was never hit");
    c.assert_controller_running();
    eprintln!("e2e interruption: NodeClaim deleted {:.1}s after the warning, on redelivery", took.as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_with_the_clusters_tags_but_no_nodeclaim_is_terminated() {
    let mut c = Cluster::start("gc").await;
    lab_general_running(&mut c, 8).await;
    let nc: EC2NodeClass = Api::all(c.client.clone()).get("lab-general").await.unwrap();
    let st = nc.status.unwrap();
    let tag = |k: &str, v: &str| Tag::builder().key(k).value(v).build();
    let out = c
        .aws
        .clients
        .ec2
        .run_instances()
        .image_id(&st.amis[0].id)
        .instance_type(InstanceType::M5Large)
        .subnet_id(&st.subnets[0].id)
        .min_count(1)
        .max_count(1)
        .tag_specifications(
            TagSpecification::builder()
                .resource_type(ResourceType::Instance)
                .tags(tag(&format!("kubernetes.io/cluster/{CLUSTER}"), "owned"))
                .tags(tag("karpenter.sh/nodepool", "lab-general"))
                .tags(tag("karpenter.sh/nodeclaim", "lab-general-ghost"))
                .build(),
        )
        .send()
        .await
        .unwrap();
    let stray = out.instances()[0].instance_id().unwrap().to_string();
    let launched = Instant::now();
    let legit: Vec<String> =
        c.nodeclaims().await.iter().filter_map(|n| n.status.as_ref()?.provider_id.clone()).collect();
    eventually(Duration::from_secs(60), "the stray instance terminated", || async {
        (!c.instances().await.iter().any(|i| i.id == stray)).then_some(())
    })
    .await;
    let after = launched.elapsed();
    assert!(after >= Duration::from_secs(30), "collected {after:?} after launch, inside the 30 s grace");
    let live: Vec<String> = c.instances().await.into_iter().map(|i| i.provider_id).collect();
    assert_eq!(live, legit, "the NodeClaims' instances are untouched");
    c.assert_controller_running();
    eprintln!(
        "e2e garbage collection: stray instance terminated {:.1}s after launch (grace 30 s, period 10 s)",
        after.as_secs_f64()
    );
}

/// Karpenter's instance health checks, with no interruption queue: an instance whose system
/// reachability check has failed is terminated without waiting for its drain (a PDB that
/// allows no eviction does not hold it), and its pods run again on a replacement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_failing_its_status_checks_is_replaced_without_waiting_for_its_drain() {
    let mut c = Cluster::start("instance-health").await;
    lab_general_running(&mut c, 4).await;
    let old = c.nodeclaims().await.remove(0);
    let name = old.metadata.name.clone().unwrap();
    let pid = old.status.as_ref().and_then(|s| s.provider_id.clone()).unwrap();
    let id = pid.rsplit('/').next().unwrap().to_string();
    c.apply_yaml(
        "pdb",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: inflate, namespace: karpenter-lab}\nspec:\n  maxUnavailable: 0\n  selector: {matchLabels: {app: inflate}}\n",
    );
    let impaired = Instant::now();
    c.moto.impair(&[id.as_str()]);
    // The checks are read once a minute.
    eventually(Duration::from_secs(150), "the unhealthy NodeClaim gone", || async {
        c.nodeclaims().await.iter().all(|nc| nc.metadata.name.as_deref() != Some(name.as_str())).then_some(())
    })
    .await;
    let took = impaired.elapsed();
    all_bound(&c, INFLATE_NS, 4, Duration::from_secs(60)).await;
    let events = c.events_for(&name).await;
    for reason in ["InstanceUnhealthy", "TerminatingOnInterruption"] {
        assert!(events.iter().any(|e| e.reason.as_deref() == Some(reason)), "no {reason} Event: {events:#?}");
    }
    assert!(c.instances().await.iter().all(|i| i.id != id), "the unhealthy instance is terminated");
    c.assert_controller_running();
    eprintln!("e2e instance health: unhealthy NodeClaim gone {:.1}s after its check failed", took.as_secs_f64());
}
