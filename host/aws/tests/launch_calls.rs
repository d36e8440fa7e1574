//! What a launch costs in EC2 calls, counted at the wire (a pass-through proxy in front of
//! moto): launch templates are described once, not per launch, and again only when EC2 says
//! one is gone.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::Moto;
use support::lab::*;
use tenon_aws::AwsProvider;
use tenon_core::cloud::CloudProvider;
use tenon_fault_proxy::Fault;

/// EC2's answer to CreateFleet naming a launch template that no longer exists.
fn template_gone() -> String {
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>InvalidLaunchTemplateName.NotFoundException</Code><Message>The specified launch template, with template name tenon/x, does not exist.</Message></Error></Errors><RequestID>gone</RequestID></Response>";
    format!(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn a_template_is_described_once_and_again_only_when_ec2_says_it_is_gone() {
    let moto = Moto::start();
    // `&` ends the action's name: not DescribeLaunchTemplateVersions.
    let described =
        tenon_fault_proxy::slow_matching(&moto.url, "Action=DescribeLaunchTemplates&", Duration::ZERO).await;
    let deleted = Arc::new(AtomicBool::new(false));
    let fleet =
        tenon_fault_proxy::fault_while(&described.url, "Action=CreateFleet", template_gone(), deleted.clone()).await;
    let setup = moto.provider("lt-calls").await;
    lab(&setup, "lt-calls").await;
    let nc = resolved(&setup, lab_nodeclass("lt-calls")).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(fleet.url.clone());
    let p = AwsProvider::connect(&conn, setup.settings.clone()).await.expect("the connection names its region");
    let launch = |i: usize| {
        let req = request(&format!("lt-calls-{i}"), &nc, vec![option("m5.large", "us-east-1a", "amd64")]);
        let p = &p;
        async move { p.create(&req).await }
    };
    for i in 0..3 {
        launch(i).await.unwrap();
    }
    let descriptions = || described.seen.load(Ordering::SeqCst);
    assert_eq!(descriptions(), 1, "three launches of one template describe it once");

    // EC2 says the template is gone: the launch describes (and makes) it again and tries
    // once more at once; EC2 still says so, and the launch fails.
    deleted.store(true, Ordering::SeqCst);
    let e = launch(3).await.expect_err("EC2 says the template is gone").to_string();
    assert!(e.contains("NotFound"), "{e}");
    assert_eq!(descriptions(), 2, "described again for the launch's second try");
    deleted.store(false, Ordering::SeqCst);
    launch(4).await.unwrap();
    assert_eq!(descriptions(), 3, "described (and made) again after EC2 said it was gone");
    launch(5).await.unwrap();
    assert_eq!(descriptions(), 3);
}

/// A wave: 50 NodeClaims of one NodePool, launched at once (as the controller launches a
/// provisioning batch, one task per NodeClaim), then deleted at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wave_of_fifty_nodeclaims_launches_and_terminates_in_a_few_calls() {
    let moto = Moto::start();
    // Pass-through proxies, each counting one kind of call (every EC2 call, by its Action).
    let all = tenon_fault_proxy::slow_matching(&moto.url, "Action=", Duration::ZERO).await;
    let fleets = tenon_fault_proxy::slow_matching(&all.url, "Action=CreateFleet", Duration::ZERO).await;
    let lookups = tenon_fault_proxy::slow_matching(&fleets.url, "Action=DescribeInstances&", Duration::ZERO).await;
    let described =
        tenon_fault_proxy::slow_matching(&lookups.url, "Action=DescribeLaunchTemplates&", Duration::ZERO).await;
    let terminations =
        tenon_fault_proxy::slow_matching(&described.url, "Action=TerminateInstances", Duration::ZERO).await;
    let setup = moto.provider("wave").await;
    lab(&setup, "wave").await;
    let nc = resolved(&setup, lab_nodeclass("wave")).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(terminations.url.clone());
    let p = AwsProvider::connect(&conn, setup.settings.clone()).await.expect("the connection names its region");
    let reqs: Vec<_> = (0..50)
        .map(|i| {
            request(
                &format!("wave-{i}"),
                &nc,
                vec![option("m5.large", "us-east-1a", "amd64"), option("m5.large", "us-east-1b", "amd64")],
            )
        })
        .collect();
    let launched = futures_util::future::join_all(reqs.iter().map(|r| p.create(r))).await;
    let mut ids = std::collections::BTreeSet::new();
    for (r, l) in reqs.iter().zip(&launched) {
        let i = l.as_ref().unwrap_or_else(|e| panic!("{}: {e}", r.nodeclaim));
        assert!(ids.insert(i.id.clone()), "{} got an instance another NodeClaim has", r.nodeclaim);
        // Each instance carries its own NodeClaim's tags, as EC2 reports them.
        assert_eq!(i.tags.get("karpenter.sh/nodeclaim"), Some(&r.nodeclaim), "{:?}", i.tags);
        assert_eq!(i.tags.get("Name"), Some(&format!("lab-general/{}", r.nodeclaim)));
    }
    let calls = fleets.seen.load(Ordering::SeqCst);
    let (describes, total) = (lookups.seen.load(Ordering::SeqCst), all.seen.load(Ordering::SeqCst));
    eprintln!(
        "launch calls: 50 NodeClaims, {total} EC2 calls in all (the catalog's included): {calls} CreateFleet, {describes} DescribeInstances, {} DescribeLaunchTemplates",
        described.seen.load(Ordering::SeqCst)
    );
    assert!(calls <= 5, "{calls} CreateFleet calls for 50 NodeClaims");
    assert_eq!(described.seen.load(Ordering::SeqCst), 1, "the template is described once");
    assert!(describes <= 8, "{describes} DescribeInstances calls for 50 NodeClaims (two each unbatched)");
    assert!(total <= 75, "{total} EC2 calls for 50 NodeClaims: more than 1.5 each");
    // A NodeClaim launched again finds its instance by its tag, launching nothing.
    let again = p.create(&reqs[7]).await.unwrap();
    assert_eq!(again.id, launched[7].as_ref().unwrap().id);
    assert_eq!(fleets.seen.load(Ordering::SeqCst), calls);

    // The wave consolidated away: 50 deletions at once, one TerminateInstances.
    let ids: Vec<String> = launched.iter().map(|l| l.as_ref().unwrap().id.clone()).collect();
    let before = lookups.seen.load(Ordering::SeqCst);
    let deleted = futures_util::future::join_all(ids.iter().map(|id| p.delete(std::slice::from_ref(id)))).await;
    assert!(deleted.iter().all(Result::is_ok), "{deleted:?}");
    let terminated = terminations.seen.load(Ordering::SeqCst);
    assert!(terminated <= 2, "{terminated} TerminateInstances calls for 50 deletions");
    assert!(lookups.seen.load(Ordering::SeqCst) - before <= 2, "their states read in one call");
    let gone = p.get_many(&ids).await.unwrap();
    assert!(gone.values().all(|i| !i.state.is_live()), "every instance terminated");
}

/// A NodeClaim this process created and never launched needs no lookup before its launch
/// (no instance can carry its tag yet) and none after (CreateFleet's answer says what was
/// launched, where, from which override): a wave of them describes no instance, and what
/// each launch reports is what EC2 then describes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_launched_nodeclaims_launch_without_describing_an_instance() {
    let moto = Moto::start();
    let lookups = tenon_fault_proxy::slow_matching(&moto.url, "Action=DescribeInstances&", Duration::ZERO).await;
    let setup = moto.provider("fresh").await;
    lab(&setup, "fresh").await;
    let nc = resolved(&setup, lab_nodeclass("fresh")).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(lookups.url.clone());
    let p = AwsProvider::connect(&conn, setup.settings.clone()).await.expect("the connection names its region");
    // Two requests, so two batches; and one alone (a batch of one).
    let reqs: Vec<_> = (0..21)
        .map(|i| {
            let options = match i % 2 {
                0 => vec![option("m5.large", "us-east-1a", "amd64"), option("m5.large", "us-east-1b", "amd64")],
                _ => vec![option("c5.xlarge", "us-east-1b", "amd64"), option("m5.large", "us-east-1a", "amd64")],
            };
            let mut r = request(&format!("fresh-{i}"), &nc, options);
            r.never_launched = true;
            r
        })
        .collect();
    let (alone, wave) = reqs.split_last().unwrap();
    let mut launched = futures_util::future::join_all(wave.iter().map(|r| p.create(r))).await;
    launched.push(p.create(alone).await);
    let launched: Vec<_> = launched.into_iter().map(|l| l.expect("launched")).collect();
    assert_eq!(lookups.seen.load(Ordering::SeqCst), 0, "no DescribeInstances for NodeClaims never launched");
    let ids: Vec<String> = launched.iter().map(|i| i.id.clone()).collect();
    let described = p.get_many(&ids).await.unwrap();
    let made = templates(&p).await;
    let mut groups = made.values().map(|t| {
        let mut g = t.security_group_ids().to_vec();
        g.extend(t.network_interfaces().iter().flat_map(|n| n.groups().iter().cloned()));
        g.sort();
        g
    });
    let template_groups = groups.next().expect("a launch template");
    assert!(!template_groups.is_empty() && groups.all(|g| g == template_groups), "{made:?}");
    for (r, i) in reqs.iter().zip(&launched) {
        let d = &described[&i.id];
        assert_eq!(
            (&i.provider_id, &i.instance_type, &i.zone, &i.capacity_type, &i.image_id, &i.subnet_id),
            (&d.provider_id, &d.instance_type, &d.zone, &d.capacity_type, &d.image_id, &d.subnet_id),
            "{}",
            r.nodeclaim
        );
        // moto leaves a fleet's instances without the template's groups: read them there.
        let mut ours = i.security_groups.clone();
        ours.sort();
        assert_eq!(ours, template_groups, "{}", r.nodeclaim);
        assert_eq!(i.tags, d.tags, "{}", r.nodeclaim);
        assert!(i.state.is_live());
        let (ours, ec2s) = (i.launched_at.unwrap(), d.launched_at.unwrap());
        assert!((ours - ec2s).abs() <= 5, "{}: launched at {ours}, EC2 says {ec2s}", r.nodeclaim);
    }
    // moto launches the odd requests' second override: not read off the first placement.
    assert!(launched.iter().any(|i| i.zone == "us-east-1a") && reqs[1].options[0].zone == "us-east-1b");
}

/// A batch's instances carry only the shared tags until each caller tags its own with its
/// NodeClaim. When that tagging fails (EC2 browning out), the instance is still the caller's:
/// the launch reports it, and it is tagged once EC2 answers again. Failing the launch instead
/// left the instance to garbage collection and launched another (a 10,000-pod run under a
/// 10 % brownout terminated 227 such instances).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batched_launch_whose_tagging_fails_keeps_its_instance_and_tags_it_later() {
    let moto = Moto::start();
    let fleets = tenon_fault_proxy::slow_matching(&moto.url, "Action=CreateFleet", Duration::ZERO).await;
    // Every CreateTags fails while EC2 is down: answered 503, or not answered at all.
    let down = Arc::new(AtomicBool::new(true));
    let faults = vec![Fault::ec2_error(503, "Unavailable"), Fault::Hang(Duration::from_secs(60))];
    let tagging = tenon_fault_proxy::brownout(&fleets.url, "Action=CreateTags", 1.0, faults, down.clone()).await;
    let setup = moto.provider("untagged").await;
    lab(&setup, "untagged").await;
    let nc = resolved(&setup, lab_nodeclass("untagged")).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(tagging.url.clone());
    conn.max_attempts = 2;
    let p = AwsProvider::connect(&conn, setup.settings.clone()).await.expect("the connection names its region");
    let reqs: Vec<_> = (0..3)
        .map(|i| {
            let mut r = request(&format!("untagged-{i}"), &nc, vec![option("m5.large", "us-east-1a", "amd64")]);
            r.never_launched = true;
            r
        })
        .collect();
    let started = std::time::Instant::now();
    let launched = futures_util::future::join_all(reqs.iter().map(|r| p.create(r))).await;
    // Well inside garbage collection's 30 s grace for an instance no NodeClaim records.
    assert!(started.elapsed() < Duration::from_secs(15), "reported after {:?}", started.elapsed());
    assert_eq!(fleets.seen.load(Ordering::SeqCst), 1, "one batch");
    assert!(tagging.seen.load(Ordering::SeqCst) >= 3, "each caller tried to tag its instance");
    let ids: Vec<String> = launched
        .iter()
        .zip(&reqs)
        .map(|(l, r)| l.as_ref().unwrap_or_else(|e| panic!("{}: {e}", r.nodeclaim)).id.clone())
        .collect();
    assert_eq!(ids.iter().collect::<std::collections::BTreeSet<_>>().len(), 3, "{ids:?}");
    let live = |all: &std::collections::BTreeMap<String, tenon_core::cloud::Instance>| {
        all.values().filter(|i| i.state.is_live()).map(|i| i.id.clone()).collect::<std::collections::BTreeSet<_>>()
    };
    let everything = p.list().await.unwrap().into_iter().map(|i| (i.id.clone(), i)).collect();
    assert_eq!(live(&everything), ids.iter().cloned().collect(), "EC2 holds exactly the three reported");
    // EC2 answers again: each instance gets its NodeClaim's tag without another launch.
    down.store(false, Ordering::SeqCst);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let now = p.get_many(&ids).await.unwrap();
        let named: Vec<_> = ids.iter().map(|id| now[id].tags.get("karpenter.sh/nodeclaim").cloned()).collect();
        let wanted: Vec<_> = reqs.iter().map(|r| Some(r.nodeclaim.clone())).collect();
        if named == wanted {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not tagged: {named:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(fleets.seen.load(Ordering::SeqCst), 1, "nothing launched again");
}

/// EC2 throttling one kind of call slows every EC2 call of the process (the gate is
/// account-wide), and the series say so.
#[tokio::test]
async fn throttling_slows_every_ec2_call_and_the_series_show_the_rate() {
    let moto = Moto::start();
    // DescribeSubnets is throttled three times; other calls pass.
    let proxy = tenon_fault_proxy::throttle_matching(&moto.url, 3, "Action=DescribeSubnets").await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(proxy.url.clone());
    conn.max_attempts = 5;
    let p = AwsProvider::connect(&conn, moto.provider("gate").await.settings.clone())
        .await
        .expect("the connection names its region");
    assert_eq!(p.clients.ec2_gate.rate(), tenon_aws::rate_gate::MAX_RATE);
    p.clients.ec2.describe_subnets().send().await.expect("retried past the throttles");
    let slowed = p.clients.ec2_gate.rate();
    assert!(slowed < tenon_aws::rate_gate::MAX_RATE, "the gate slowed down: {slowed}");
    let text = p.metrics.render();
    let line = |name: &str| text.lines().find(|l| l.starts_with(name)).map(str::to_string);
    assert!(line("tenon_aws_ec2_throttled_total").is_some_and(|l| l.ends_with(" 3")), "{text}");
    assert_eq!(line("tenon_aws_ec2_request_rate_limit "), Some(format!("tenon_aws_ec2_request_rate_limit {slowed:?}")));
    // Another operation, never throttled itself, now waits on the same gate: of a burst of
    // calls, EC2 sees in the first second only what the slowed rate allows (its tokens, at
    // most the rate, and a second's worth).
    let counted = tenon_fault_proxy::slow_matching(&proxy.url, "Action=DescribeInstances&", Duration::ZERO).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(counted.url.clone());
    let gated = AwsProvider::connect(&conn, p.settings.clone()).await.expect("the connection names its region");
    gated.clients.ec2_gate.throttled(std::time::Instant::now());
    let rate = gated.clients.ec2_gate.rate();
    let ec2 = gated.clients.ec2.clone();
    let burst =
        tokio::spawn(
            async move { futures_util::future::join_all((0..300).map(|_| ec2.describe_instances().send())).await },
        );
    tokio::time::sleep(Duration::from_secs(1)).await;
    let first_second = counted.seen.load(Ordering::SeqCst);
    eprintln!("gate: {first_second} of 300 DescribeInstances reached EC2 in the first second at {rate}/s");
    assert!(first_second as f64 <= 2.0 * rate + 5.0, "{first_second} calls in a second at {rate}/s");
    assert!(burst.await.unwrap().iter().all(Result::is_ok));
}

/// Not a Karpenter case (issue 47): without a scoring policy a launch asks EC2 for
/// Karpenter's strategies (lowest price on demand, price and capacity for spot); a policy's
/// ranking is launched with the prioritized strategies, which honour its order.
#[tokio::test]
async fn a_launch_asks_for_karpenters_allocation_strategy_unless_a_policy_ranked_it() {
    let moto = Moto::start();
    let seen = |needle: &'static str, upstream: String| async move {
        tenon_fault_proxy::slow_matching(&upstream, needle, Duration::ZERO).await
    };
    let lowest = seen("OnDemandOptions.AllocationStrategy=lowest-price", moto.url.clone()).await;
    let price_capacity = seen("SpotOptions.AllocationStrategy=price-capacity-optimized", lowest.url.clone()).await;
    let prioritized = seen("OnDemandOptions.AllocationStrategy=prioritized", price_capacity.url.clone()).await;
    let capacity = seen("SpotOptions.AllocationStrategy=capacity-optimized-prioritized", prioritized.url.clone()).await;
    let setup = moto.provider("strategy").await;
    lab(&setup, "strategy").await;
    let nc = resolved(&setup, lab_nodeclass("strategy")).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(capacity.url.clone());
    let p = AwsProvider::connect(&conn, setup.settings.clone()).await.expect("the connection names its region");
    let counts = || [&lowest, &price_capacity, &prioritized, &capacity].map(|proxy| proxy.seen.load(Ordering::SeqCst));
    for (i, (spot, ranked, want)) in [
        (false, false, [1, 0, 0, 0]),
        (true, false, [1, 1, 0, 0]),
        (false, true, [1, 1, 1, 0]),
        (true, true, [1, 1, 1, 1]),
    ]
    .into_iter()
    .enumerate()
    {
        let mut o = option("m5.large", "us-east-1a", "amd64");
        if spot {
            o.capacity_type = "spot".into();
        }
        let mut req = request(&format!("strategy-{i}"), &nc, vec![o]);
        req.ranked = ranked;
        p.create(&req).await.unwrap();
        assert_eq!(counts(), want, "spot {spot}, ranked by a policy {ranked}");
    }
}

/// Not a Karpenter case of the manifest (issue 47; Karpenter's cloud provider cases "should
/// set context on the CreateFleet request" and "should not set context ... when min values
/// are relaxed"): a NodeClass' `spec.context` reaches CreateFleet unless the NodeClaim's
/// minValues were relaxed.
#[tokio::test]
async fn a_nodeclass_context_reaches_create_fleet_unless_min_values_were_relaxed() {
    let moto = Moto::start();
    let with_context = tenon_fault_proxy::slow_matching(&moto.url, "Context=context-1234", Duration::ZERO).await;
    let fleets = tenon_fault_proxy::slow_matching(&with_context.url, "Action=CreateFleet", Duration::ZERO).await;
    let setup = moto.provider("context").await;
    lab(&setup, "context").await;
    let mut nc = lab_nodeclass("context");
    nc.spec.context = Some("context-1234".into());
    let nc = resolved(&setup, nc).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(fleets.url.clone());
    let p = AwsProvider::connect(&conn, setup.settings.clone()).await.expect("the connection names its region");
    let seen = || (fleets.seen.load(Ordering::SeqCst), with_context.seen.load(Ordering::SeqCst));
    p.create(&request("context-a", &nc, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap();
    assert_eq!(seen(), (1, 1), "the context is sent");
    let mut relaxed = request("context-b", &nc, vec![option("m5.large", "us-east-1a", "amd64")]);
    relaxed.min_values_relaxed = true;
    p.create(&relaxed).await.unwrap();
    assert_eq!(seen(), (2, 1), "not with minValues relaxed");
}
