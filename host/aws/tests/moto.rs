//! (Long: tests only, one per provider behaviour against moto; the setup lives in support/.)
//! The EC2 provider against moto, a real AWS API emulator: every call goes over HTTP through
//! the SDK exactly as it would to AWS.

use crate::support;

use std::collections::BTreeMap;
use support::Moto;
use support::lab::*;
use tenon_api::wellknown as wk;
use tenon_aws::AwsProvider;
use tenon_core::cloud::{CloudError, CloudProvider, UnavailableOffering};
use tenon_core::orchestration::launch;

#[tokio::test]
async fn catalog_comes_from_describe_calls_with_the_bundled_price_fallback() {
    let moto = Moto::start();
    let p = moto.provider("cat").await;
    let raw = p.catalog().await.unwrap();
    assert!(raw.types.len() > 100, "{} types from DescribeInstanceTypes", raw.types.len());
    assert!(
        raw.zones.get("m5.large").is_some_and(|z| z.contains(&"us-east-1a".to_string())),
        "{:?}",
        raw.zones.get("m5.large")
    );
    // moto has no Price List API: the bundled us-east-1 table prices the catalog.
    assert_eq!(raw.on_demand_source, "bundled-us-east-1");
    let lab = lab(&p, "cat").await;
    let nc = resolved(&p, lab_nodeclass("cat")).await;
    let types = p.instance_types(&nc).await.unwrap();
    let m5 = types.iter().find(|t| t.name == "m5.large").expect("m5.large offered");
    let zones: Vec<&str> = m5.offerings.iter().map(|o| o.zone.as_str()).collect();
    assert!(zones.iter().all(|z| lab.subnets.iter().any(|(_, sz)| sz == z)), "only the subnets' zones: {zones:?}");
    assert!(!zones.contains(&"us-east-1c"), "us-east-1c has no selected subnet");
    assert_eq!(m5.label(wk::LABEL_INSTANCE_FAMILY), Some("m5"));
    assert_eq!(m5.label(wk::LABEL_ARCH), Some("amd64"));
    assert_eq!(m5.capacity.pods, 3 * (10 - 1) + 2, "max pods from 3 ENIs × 10 IPv4 addresses");
    let od = m5.offerings.iter().find(|o| o.capacity_type == "on-demand").unwrap();
    assert!((od.price - 0.096).abs() < 1e-9, "bundled on-demand price, got {}", od.price);
    // Spot prices are DescribeSpotPriceHistory's, per zone (moto reports $0.00001).
    let spot_1a = raw
        .spot
        .get(&("m5.large".to_string(), "us-east-1a".to_string()))
        .copied()
        .expect("a spot price for m5.large in us-east-1a");
    let spot = m5.offerings.iter().find(|o| o.capacity_type == "spot" && o.zone == "us-east-1a").unwrap();
    assert_eq!(spot.price, spot_1a);

    // An offering that just failed for capacity is offered as unavailable for a while.
    p.unavailable.mark(
        UnavailableOffering {
            instance_type: "m5.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: "on-demand".into(),
        },
        std::time::Instant::now(),
    );
    let types = p.instance_types(&nc).await.unwrap();
    let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
    for o in &m5.offerings {
        assert_eq!(o.available, !(o.zone == "us-east-1a" && o.capacity_type == "on-demand"), "{o:?}");
    }
}

#[tokio::test]
async fn catalog_labels_come_from_every_describe_instance_types_field_they_read() {
    let moto = Moto::start();
    let p = moto.provider("lbl").await;
    lab(&p, "lbl").await;
    let nc = resolved(&p, lab_nodeclass("lbl")).await;
    let types = p.instance_types(&nc).await.unwrap();
    let label = |t: &str, k: &str| types.iter().find(|x| x.name == t).unwrap().label(k).map(str::to_string);
    // Nitro Enclaves: c5.2xlarge supports them, m5.large does not.
    assert_eq!(label("c5.2xlarge", wk::LABEL_INSTANCE_NITRO_ENCLAVES).as_deref(), Some("true"));
    assert_eq!(label("m5.large", wk::LABEL_INSTANCE_NITRO_ENCLAVES).as_deref(), Some("false"));
    // EBS-optimized by default: the EBS bandwidth is published.
    assert_eq!(label("m5.large", wk::LABEL_INSTANCE_EBS_BANDWIDTH).as_deref(), Some("4750"));
}

#[tokio::test]
async fn selectors_resolve_subnets_security_groups_and_amis() {
    let moto = Moto::start();
    let p = moto.provider("sel").await;
    let lab = lab(&p, "sel").await;
    let nc = resolved(&p, lab_nodeclass("sel")).await;
    let st = nc.status.as_ref().unwrap();
    let mut subnets: Vec<&str> = st.subnets.iter().map(|s| s.id.as_str()).collect();
    subnets.sort();
    let mut want: Vec<&str> = lab.subnets.iter().map(|(id, _)| id.as_str()).collect();
    want.sort();
    assert_eq!(subnets, want, "the untagged subnet {} is not selected", lab.untagged_subnet);
    assert_eq!(st.security_groups.iter().map(|g| g.id.as_str()).collect::<Vec<_>>(), [lab.security_group.as_str()]);
    let amis: BTreeMap<&str, &str> =
        st.amis.iter().map(|a| (a.id.as_str(), a.requirements[0].values[0].as_str())).collect();
    assert_eq!(amis.get(lab.ami_amd64.as_str()), Some(&"amd64"));
    assert_eq!(amis.get(lab.ami_arm64.as_str()), Some(&"arm64"));
    for t in ["SubnetsReady", "SecurityGroupsReady", "AMIsReady", "InstanceProfileReady", "Ready"] {
        assert_eq!(condition(&nc, t).status, "True", "{t}: {:?}", condition(&nc, t));
    }

    // By id, by name.
    let by_id = nodeclass(&format!(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {{name: by-id}}\nspec:\n  role: KarpenterNodeRole-sel\n  amiFamily: AL2023\n  amiSelectorTerms: [{{name: sel-al2023-arm64-v20251101}}]\n  subnetSelectorTerms: [{{id: {}}}]\n  securityGroupSelectorTerms: [{{name: sel-nodes}}]\n",
        lab.untagged_subnet
    ));
    let nc = resolved(&p, by_id).await;
    let st = nc.status.as_ref().unwrap();
    assert_eq!(st.subnets.len(), 1);
    assert_eq!(st.subnets[0].id, lab.untagged_subnet);
    assert_eq!(st.subnets[0].zone, "us-east-1c");
    assert_eq!(st.security_groups[0].id, lab.security_group);
    assert_eq!(st.amis.iter().map(|a| a.id.as_str()).collect::<Vec<_>>(), [lab.ami_arm64.as_str()]);

    // The seed's first pitfall: subnets not tagged for discovery. The condition says which
    // field selected nothing and what to do.
    let untagged = nodeclass(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: untagged}\nspec:\n  role: KarpenterNodeRole-sel\n  amiFamily: AL2023\n  amiSelectorTerms: [{tags: {karpenter.sh/discovery: sel}}]\n  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: nobody}}]\n  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sel}}]\n",
    );
    let nc = resolved(&p, untagged).await;
    let c = condition(&nc, "SubnetsReady");
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "SubnetsNotFound"));
    assert!(
        c.message.contains("spec.subnetSelectorTerms") && c.message.contains("karpenter.sh/discovery=nobody"),
        "{}",
        c.message
    );
    let ready = condition(&nc, "Ready");
    assert_eq!(ready.status, "False");
    assert!(ready.message.starts_with("SubnetsReady: no subnet matches"), "{}", ready.message);
    // Launching from it is refused with the same pointer, and nothing is launched.
    let err =
        p.create(&request("nc-untagged", &nc, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap_err();
    assert!(
        matches!(&err, CloudError::NodeClassNotReady { message, .. } if message.contains("spec.subnetSelectorTerms")),
        "{err}"
    );
    assert!(p.list().await.unwrap().is_empty());

    // An alias resolves through the EKS SSM parameters, which moto does not serve: the
    // condition lists the parameters it looked for.
    let alias = nodeclass(
        "apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\nmetadata: {name: alias}\nspec:\n  role: KarpenterNodeRole-sel\n  amiSelectorTerms: [{alias: al2023@latest}]\n  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: sel}}]\n  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: sel}}]\n",
    );
    let nc = resolved(&p, alias).await;
    let c = condition(&nc, "AMIsReady");
    assert_eq!(c.status, "False");
    assert!(
        c.message
            .contains("/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id"),
        "{}",
        c.message
    );
}

#[tokio::test]
async fn managed_instance_profile_lifecycle() {
    let moto = Moto::start();
    let p = moto.provider("prof").await;
    lab(&p, "prof").await;
    let nc = resolved(&p, lab_nodeclass("prof")).await;
    let name = nc.status.as_ref().unwrap().instance_profile.clone().unwrap();
    assert_eq!(name, tenon_aws::profile::managed_name("prof", "us-east-1", "lab-general"));
    let iam = &p.clients.iam;
    let got = iam.get_instance_profile().instance_profile_name(&name).send().await.unwrap();
    let prof = got.instance_profile().unwrap();
    assert_eq!(prof.roles().iter().map(|r| r.role_name()).collect::<Vec<_>>(), ["KarpenterNodeRole-prof"]);
    let tags: BTreeMap<&str, &str> = prof.tags().iter().map(|t| (t.key(), t.value())).collect();
    assert_eq!(tags.get("kubernetes.io/cluster/prof"), Some(&"owned"));
    assert_eq!(tags.get("karpenter.k8s.aws/ec2nodeclass"), Some(&"lab-general"));

    // Reconciling again reuses it; a new role replaces the old one on the same profile.
    let again = resolved(&p, lab_nodeclass("prof")).await;
    assert_eq!(again.status.as_ref().unwrap().instance_profile.as_deref(), Some(name.as_str()));
    let mut swapped = lab_nodeclass("prof");
    swapped.spec.role = Some("OtherRole-prof".into());
    resolved(&p, swapped.clone()).await;
    let got = iam.get_instance_profile().instance_profile_name(&name).send().await.unwrap();
    assert_eq!(
        got.instance_profile().unwrap().roles().iter().map(|r| r.role_name()).collect::<Vec<_>>(),
        ["OtherRole-prof"]
    );

    // A role that does not exist is a condition, not a crash.
    let mut missing = lab_nodeclass("prof");
    missing.metadata.name = Some("missing-role".into());
    missing.spec.role = Some("NoSuchRole".into());
    let nc = resolved(&p, missing).await;
    let c = condition(&nc, "InstanceProfileReady");
    assert_eq!((c.status.as_str(), c.reason.as_str()), ("False", "RoleNotFound"), "{c:?}");

    // A user-managed profile is only checked.
    let mut unmanaged = lab_nodeclass("prof");
    unmanaged.spec.role = None;
    unmanaged.spec.instance_profile = Some("does-not-exist".into());
    let nc = resolved(&p, unmanaged.clone()).await;
    assert_eq!(condition(&nc, "InstanceProfileReady").reason, "InstanceProfileNotFound");
    p.finalize_nodeclass(&unmanaged).await.unwrap();

    // Deleting the NodeClass deletes its managed profile; twice is fine.
    p.finalize_nodeclass(&swapped).await.unwrap();
    let gone = iam.get_instance_profile().instance_profile_name(&name).send().await;
    assert!(gone.is_err(), "profile {name} should be deleted");
    p.finalize_nodeclass(&swapped).await.unwrap();
}

#[tokio::test]
async fn create_fleet_launches_the_top_ranked_option_with_tags_and_reuses_templates() {
    let moto = Moto::start();
    let p = moto.provider("fleet").await;
    let lab = lab(&p, "fleet").await;
    let nc = resolved(&p, lab_nodeclass("fleet")).await;
    let req = request(
        "lab-general-abcde",
        &nc,
        vec![option("m6a.large", "us-east-1b", "amd64"), option("m5.large", "us-east-1a", "amd64")],
    );
    let i = p.create(&req).await.unwrap();
    assert_eq!(i.instance_type, "m6a.large", "the first ranked override");
    assert_eq!(i.subnet_id, lab.subnets[1].0, "the subnet of the option's zone");
    assert_eq!(i.image_id, lab.ami_amd64, "the AMI whose requirements the type meets");
    assert_eq!(i.provider_id, format!("aws:///{}/{}", i.zone, i.id));
    assert_eq!(i.capacity_type, "on-demand");
    for (k, v) in [
        ("karpenter.sh/nodepool", "lab-general"),
        ("karpenter.sh/nodeclaim", "lab-general-abcde"),
        ("kubernetes.io/cluster/fleet", "owned"),
        ("eks:eks-cluster-name", "fleet"),
        ("karpenter.k8s.aws/ec2nodeclass", "lab-general"),
        ("Name", "lab-general/lab-general-abcde"),
        ("team", "platform"),
    ] {
        assert_eq!(i.tags.get(k).map(String::as_str), Some(v), "tag {k}: {:?}", i.tags);
    }
    let templates = p.clients.ec2.describe_launch_templates().send().await.unwrap();
    let names: Vec<&str> = templates.launch_templates().iter().filter_map(|t| t.launch_template_name()).collect();
    assert_eq!(names.len(), 1, "{names:?}");
    assert!(names[0].starts_with("tenon/"));
    // The template carries the AMI, the profile and the bootstrap user data.
    let version =
        p.clients.ec2.describe_launch_template_versions().launch_template_name(names[0]).send().await.unwrap();
    let data = version.launch_template_versions()[0].launch_template_data().unwrap();
    assert_eq!(data.image_id(), Some(lab.ami_amd64.as_str()));
    assert_eq!(
        data.iam_instance_profile().and_then(|i| i.name()),
        nc.status.as_ref().unwrap().instance_profile.as_deref()
    );
    use base64::Engine;
    let ud = String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data.user_data().unwrap()).unwrap())
        .unwrap();
    assert!(ud.contains("kind: NodeConfig") && ud.contains("name: \"fleet\""), "{ud}");
    // The node registers tainted karpenter.sh/unregistered until the controller has synced
    // the NodeClaim's labels and taints onto it.
    assert!(
        ud.contains(
            r#""registerWithTaints":[{"effect":"NoSchedule","key":"dedicated","value":"batch"},{"effect":"NoExecute","key":"karpenter.sh/unregistered"}]"#
        ),
        "{ud}"
    );

    // Another NodeClaim with the same configuration reuses the template; an arm64 option
    // needs the arm64 AMI, hence a second template.
    p.create(&request("lab-general-fghij", &nc, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap();
    let count = p.clients.ec2.describe_launch_templates().send().await.unwrap().launch_templates().len();
    assert_eq!(count, 1);
    let arm =
        p.create(&request("lab-general-arm", &nc, vec![option("m6g.large", "us-east-1a", "arm64")])).await.unwrap();
    assert_eq!(arm.image_id, lab.ami_arm64);
    let count = p.clients.ec2.describe_launch_templates().send().await.unwrap().launch_templates().len();
    assert_eq!(count, 2);

    // Options that recently failed for capacity are skipped: EC2 sees the next one first.
    p.unavailable.mark(
        UnavailableOffering {
            instance_type: "m6a.large".into(),
            zone: "us-east-1b".into(),
            capacity_type: "on-demand".into(),
        },
        std::time::Instant::now(),
    );
    let next = p
        .create(&request(
            "lab-general-ice",
            &nc,
            vec![option("m6a.large", "us-east-1b", "amd64"), option("m5.xlarge", "us-east-1a", "amd64")],
        ))
        .await
        .unwrap();
    assert_eq!(next.instance_type, "m5.xlarge");
    let all_cached =
        p.create(&request("lab-general-ice2", &nc, vec![option("m6a.large", "us-east-1b", "amd64")])).await;
    assert!(matches!(all_cached, Err(CloudError::InsufficientCapacity { .. })), "{all_cached:?}");
}

#[tokio::test]
async fn a_retried_create_never_launches_a_second_instance() {
    let moto = Moto::start();
    let p = moto.provider("idem").await;
    lab(&p, "idem").await;
    let nc = resolved(&p, lab_nodeclass("idem")).await;
    let req = request("lab-general-retry", &nc, vec![option("m5.large", "us-east-1a", "amd64")]);
    let first = p.create(&req).await.unwrap();
    let second = p.create(&req).await.unwrap();
    assert_eq!(first.id, second.id);
    let owned: Vec<_> =
        p.list().await.unwrap().into_iter().filter(|i| i.nodeclaim() == Some("lab-general-retry")).collect();
    assert_eq!(owned.len(), 1, "{owned:?}");
}

#[tokio::test]
async fn list_finds_the_clusters_instances_and_delete_terminates_them() {
    let moto = Moto::start();
    let p = moto.provider("gc").await;
    lab(&p, "gc").await;
    let nc = resolved(&p, lab_nodeclass("gc")).await;
    let a = p.create(&request("gc-a", &nc, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap();
    let b = p.create(&request("gc-b", &nc, vec![option("m5.large", "us-east-1b", "amd64")])).await.unwrap();
    // Not ours: launched outside Tenon, and another cluster's.
    let ami = p.clients.ec2.describe_images().owners("self").send().await.unwrap().images()[0]
        .image_id()
        .unwrap()
        .to_string();
    p.clients.ec2.run_instances().image_id(&ami).min_count(1).max_count(1).send().await.unwrap();
    let other = moto.provider("other-cluster").await;
    other.create(&request("other-a", &nc, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap();

    let mut listed: Vec<String> = p.list().await.unwrap().into_iter().map(|i| i.id).collect();
    listed.sort();
    let mut want = vec![a.id.clone(), b.id.clone()];
    want.sort();
    assert_eq!(listed, want);
    assert_eq!(p.get(&a.id).await.unwrap().nodeclaim(), Some("gc-a"));

    p.delete(&[a.id.clone(), "i-0123456789abcdef0".into()]).await.expect("unknown ids are not an error");
    assert!(matches!(p.get(&a.id).await, Err(CloudError::NotFound(_))));
    assert_eq!(p.list().await.unwrap().into_iter().map(|i| i.id).collect::<Vec<_>>(), [b.id.as_str()]);
    p.delete(std::slice::from_ref(&a.id)).await.expect("terminating twice is fine");
    let many = p.get_many(&[a.id.clone(), b.id.clone()]).await.unwrap();
    assert_eq!(many.len(), 2, "one DescribeInstances for both");
}

#[tokio::test]
async fn launch_templates_of_a_deleted_nodeclass_are_removed() {
    let moto = Moto::start();
    let p = moto.provider("lt").await;
    lab(&p, "lt").await;
    let nc = resolved(&p, lab_nodeclass("lt")).await;
    p.create(&request("lt-a", &nc, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap();
    assert_eq!(p.clients.ec2.describe_launch_templates().send().await.unwrap().launch_templates().len(), 1);
    p.finalize_nodeclass(&nc).await.unwrap();
    assert_eq!(p.clients.ec2.describe_launch_templates().send().await.unwrap().launch_templates().len(), 0);
}

#[tokio::test]
async fn templates_and_profiles_of_nodeclasses_that_are_gone_are_collected() {
    let moto = Moto::start();
    let p = moto.provider("orphans").await;
    lab(&p, "orphans").await;
    let kept = resolved(&p, lab_nodeclass("orphans")).await;
    let mut gone = lab_nodeclass("orphans");
    gone.metadata.name = Some("gone".into());
    let gone = resolved(&p, gone).await;
    p.create(&request("keep-a", &kept, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap();
    p.create(&request("gone-a", &gone, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap();
    let profiles = |p: &tenon_aws::AwsProvider| {
        let iam = p.clients.iam.clone();
        async move {
            let out = iam.list_instance_profiles().send().await.unwrap();
            out.instance_profiles().iter().map(|x| x.instance_profile_name().to_string()).collect::<Vec<_>>()
        }
    };
    assert_eq!(p.clients.ec2.describe_launch_templates().send().await.unwrap().launch_templates().len(), 2);
    assert_eq!(profiles(&p).await.len(), 2);
    let existing: std::collections::BTreeSet<String> = [kept.metadata.name.clone().unwrap()].into();
    assert_eq!(p.collect_orphans(&existing).await.unwrap(), 2, "one template and one profile");
    let templates = p.clients.ec2.describe_launch_templates().send().await.unwrap();
    assert_eq!(templates.launch_templates().len(), 1);
    let left = profiles(&p).await;
    assert_eq!(
        left,
        vec![tenon_aws::profile::managed_name("orphans", "us-east-1", kept.metadata.name.as_deref().unwrap())]
    );
    assert_eq!(p.collect_orphans(&existing).await.unwrap(), 0, "nothing more to collect");
}

#[tokio::test]
async fn interruption_queue_round_trip() {
    use tenon_aws::interruption::InterruptionQueue;
    let moto = Moto::start();
    let p = moto.provider("sqs").await;
    let sqs = &p.clients.sqs;
    let url = sqs.create_queue().queue_name("sqs").send().await.unwrap().queue_url().unwrap().to_string();
    let messages = support::interruption_messages();
    for (body, _, _) in &messages {
        sqs.send_message().queue_url(&url).message_body(body).send().await.unwrap();
    }
    for bad in ["{\"detail-type\": \"Object Created\", \"source\": \"aws.s3\"}", "garbage"] {
        sqs.send_message().queue_url(&url).message_body(bad).send().await.unwrap();
    }
    // By name, as the Helm chart configures it.
    let mut q = InterruptionQueue::new(sqs.clone(), "sqs").await.unwrap();
    q.wait_seconds = 1;
    let mut got = Vec::new();
    for _ in 0..10 {
        let batch = q.receive().await.unwrap();
        for r in &batch {
            q.ack(r).await.unwrap();
        }
        got.extend(batch);
        if got.len() == messages.len() && q.malformed.load(std::sync::atomic::Ordering::Relaxed) == 2 {
            break;
        }
    }
    let mut kinds: Vec<String> = got.iter().map(|r| format!("{:?} {:?}", r.event.kind, r.event.instance_ids)).collect();
    kinds.sort();
    let mut want: Vec<String> = messages.iter().map(|(_, k, ids)| format!("{k:?} {ids:?}")).collect();
    want.sort();
    assert_eq!(kinds, want);
    assert_eq!(q.malformed.load(std::sync::atomic::Ordering::Relaxed), 2, "both malformed messages counted");
    // Handled and malformed messages are all deleted: nothing comes back.
    let attrs = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .unwrap();
    for (k, v) in attrs.attributes().unwrap() {
        assert_eq!(v, "0", "{k:?}");
    }
}

#[tokio::test]
async fn throttled_calls_are_retried_with_backoff() {
    let moto = Moto::start();
    // Two throttles, then moto: the SDK's standard retry (5 attempts here) gets through.
    let proxy = tenon_fault_proxy::throttle(&moto.url, 2).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(proxy.url.clone());
    conn.max_attempts = 5;
    let p = AwsProvider::connect(&conn, moto.provider("thr").await.settings.clone())
        .await
        .expect("the connection names its region");
    let started = std::time::Instant::now();
    assert!(p.list().await.unwrap().is_empty());
    assert_eq!(
        proxy.seen.load(std::sync::atomic::Ordering::SeqCst),
        3,
        "two throttled attempts and one that reached moto"
    );
    assert!(started.elapsed() >= std::time::Duration::from_millis(50), "retries back off: {:?}", started.elapsed());
    // The SDK's series, as Karpenter's provider publishes them: one call, three attempts (two
    // answered 503), two retries.
    let text = p.metrics.render();
    let describe = "service=\"EC2\",action=\"DescribeInstances\"";
    for line in [
        format!("aws_sdk_go_request_total{{{describe},code=\"200\"}} 1"),
        format!("aws_sdk_go_request_attempt_total{{{describe},code=\"503\"}} 2"),
        format!("aws_sdk_go_request_attempt_total{{{describe},code=\"200\"}} 1"),
        format!("aws_sdk_go_request_duration_seconds_count{{{describe},code=\"200\"}} 1"),
        format!("aws_sdk_go_request_attempt_duration_seconds_count{{{describe},code=\"503\"}} 2"),
        format!("aws_sdk_go_request_retry_count_sum{{{describe},code=\"200\"}} 2.0"),
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing from\n{text}");
    }

    // More throttles than attempts: a typed error naming the operation and EC2's code.
    let proxy = tenon_fault_proxy::throttle(&moto.url, 10).await;
    conn.endpoint_url = Some(proxy.url.clone());
    conn.max_attempts = 2;
    let p = AwsProvider::connect(&conn, p.settings.clone()).await.expect("the connection names its region");
    match p.list().await {
        Err(CloudError::Api { operation, message }) => {
            assert_eq!(operation, "DescribeInstances");
            assert!(message.contains("RequestLimitExceeded"), "{message}");
        }
        other => panic!("expected a throttling error, got {other:?}"),
    }
    assert_eq!(proxy.seen.load(std::sync::atomic::Ordering::SeqCst), 2);
}

// ----- Karpenter's instance type provider suite (pkg/providers/instancetype/suite_test.go) -----

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2582
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2595
/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:2799
#[tokio::test]
async fn launch_templates_carry_the_nodeclass_metadata_options() {
    use aws_sdk_ec2::types::{
        LaunchTemplateHttpTokensState as Tokens, LaunchTemplateInstanceMetadataEndpointState as Endpoint,
        LaunchTemplateInstanceMetadataProtocolIpv6 as Ipv6,
    };
    let moto = Moto::start();
    let p = moto.provider("imds").await;
    lab(&p, "imds").await;
    let defaults = resolved(&p, lab_nodeclass("imds")).await;
    let mut custom = lab_nodeclass("imds");
    custom.metadata.name = Some("custom-imds".into());
    custom.spec.metadata_options = Some(tenon_api::ec2nodeclass::MetadataOptions {
        http_endpoint: "disabled".into(),
        http_protocol_ipv6: "enabled".into(),
        http_put_response_hop_limit: 1,
        http_tokens: "optional".into(),
    });
    let custom = resolved(&p, custom).await;
    for (nc, want) in [
        (&defaults, (Endpoint::Enabled, Ipv6::Disabled, 1, Tokens::Required)),
        (&custom, (Endpoint::Disabled, Ipv6::Enabled, 1, Tokens::Optional)),
    ] {
        let name = nc.metadata.name.clone().unwrap();
        let made = templates_made_by(&p, async {
            p.create(&request(&format!("{name}-a"), nc, vec![option("m5.large", "us-east-1a", "amd64")]))
                .await
                .unwrap();
        })
        .await;
        assert_eq!(made.len(), 1, "{name}");
        let m = made[0].metadata_options().expect("metadata options");
        let got = (
            m.http_endpoint().cloned().unwrap(),
            m.http_protocol_ipv6().cloned().unwrap(),
            m.http_put_response_hop_limit().unwrap(),
            m.http_tokens().cloned().unwrap(),
        );
        assert_eq!(got, want, "{name}");
    }
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2512
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2534 (titled AL2, run on
/// the suite's default NodeClass, AL2023)
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2548
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2563
#[tokio::test]
async fn a_snapshot_mapping_without_a_size_keeps_ebs_defaults() {
    let moto = Moto::start();
    let p = moto.provider("ebs").await;
    lab(&p, "ebs").await;
    let ec2 = &p.clients.ec2;
    let vol = ec2.create_volume().availability_zone("us-east-1a").size(30).send().await.unwrap();
    let snap = ec2.create_snapshot().volume_id(vol.volume_id().unwrap()).send().await.unwrap();
    let snap = snap.snapshot_id().unwrap().to_string();
    for (family, device) in [("Custom", "/dev/xvda"), ("AL2023", "/dev/xvda"), ("Bottlerocket", "/dev/xvdb")] {
        let name = format!("ebs-{}", family.to_lowercase());
        let nc = nodeclass(&format!(
            r#"
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata:
  name: {name}
spec:
  role: KarpenterNodeRole-ebs
  amiFamily: {family}
  amiSelectorTerms: [{{tags: {{{DISCOVERY}: ebs}}}}]
  subnetSelectorTerms: [{{tags: {{{DISCOVERY}: ebs}}}}]
  securityGroupSelectorTerms: [{{tags: {{{DISCOVERY}: ebs}}}}]
  blockDeviceMappings:
    - deviceName: {device}
      ebs: {{snapshotID: {snap}, volumeInitializationRate: 100}}
"#
        ));
        let nc = resolved(&p, nc).await;
        // The capacity model plans with EBS's 20Gi default.
        let types = p.instance_types(&nc).await.unwrap();
        let m5 = types.iter().find(|t| t.name == "m5.large").unwrap();
        assert_eq!(m5.capacity.ephemeral_storage, 20 << 30, "{family}");
        let made = templates_made_by(&p, async {
            p.create(&request(&format!("{name}-a"), &nc, vec![option("m5.large", "us-east-1a", "amd64")]))
                .await
                .unwrap();
        })
        .await;
        assert_eq!(made.len(), 1, "{family}");
        let mappings = made[0].block_device_mappings();
        assert_eq!(mappings.len(), 1, "{family}: {mappings:?}");
        assert_eq!(mappings[0].device_name(), Some(device), "{family}");
        let ebs = mappings[0].ebs().unwrap();
        assert_eq!(ebs.snapshot_id(), Some(snap.as_str()), "{family}");
        assert_eq!(ebs.volume_initialization_rate(), Some(100), "{family}");
        // No size: EC2 takes the snapshot's (a size smaller than the snapshot is refused).
        assert_eq!(ebs.volume_size(), None, "{family}");
    }
}

fn unavailable(instance_type: &str, zone: &str, capacity_type: &str) -> UnavailableOffering {
    UnavailableOffering { instance_type: instance_type.into(), zone: zone.into(), capacity_type: capacity_type.into() }
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2303
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2616
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2643
#[tokio::test]
async fn the_unavailable_offerings_cache_marks_single_offerings() {
    let moto = Moto::start();
    let p = moto.provider("ice").await;
    let lab = lab(&p, "ice").await;
    let nc = three_zone_nodeclass(&p, &lab, "ice").await;

    // One offering per (type, zone, capacity type), whether the catalog is fetched or cached.
    let first = p.instance_types(&nc).await.unwrap();
    let again = p.instance_types(&nc).await.unwrap();
    assert_eq!(first, again);
    // Shaped once per catalog and NodeClass, not once per pass: every pass (and every launch
    // holding a pass's catalog) shares one copy.
    assert!(std::sync::Arc::ptr_eq(&first, &again), "the same catalog shaped twice");
    for types in [&first, &again] {
        let mut pools = std::collections::BTreeSet::new();
        for t in types.iter() {
            for o in &t.offerings {
                assert!(
                    pools.insert((&t.name, &o.zone, &o.capacity_type)),
                    "{} {} {} twice",
                    t.name,
                    o.zone,
                    o.capacity_type
                );
            }
        }
    }
    assert_eq!(available(&first, "m5.large").len(), 6, "3 zones × 2 capacity types");

    // Marking another type changes nothing for m5.large.
    let now = std::time::Instant::now();
    p.unavailable.mark(unavailable("m5.xlarge", "us-east-1a", "spot"), now);
    p.unavailable.mark(unavailable("m5.xlarge", "us-east-1b", "spot"), now);
    assert_eq!(available(&p.instance_types(&nc).await.unwrap(), "m5.large").len(), 6);
    // Marking m5.large spot in us-east-1a takes exactly that offering away.
    p.unavailable.mark(unavailable("m5.large", "us-east-1a", "spot"), now);
    let types = p.instance_types(&nc).await.unwrap();
    let left = available(&types, "m5.large");
    assert_eq!(left.len(), 5);
    assert!(!left.contains(&("us-east-1a".into(), "spot".into())));
    p.unavailable.mark(unavailable("m5.large", "us-east-1b", "on-demand"), now);
    p.unavailable.mark(unavailable("m5.large", "us-east-1c", "on-demand"), now);
    let types = p.instance_types(&nc).await.unwrap();
    let mut left = available(&types, "m5.large");
    left.sort();
    assert_eq!(
        left,
        [
            ("us-east-1a".into(), "on-demand".into()),
            ("us-east-1b".into(), "spot".into()),
            ("us-east-1c".into(), "spot".into())
        ]
    );

    // Every offering of m5.xlarge unavailable: the type is still listed, with none available.
    for (zone, ct, _) in offerings_of(&first, "m5.xlarge") {
        p.unavailable.mark(unavailable("m5.xlarge", &zone, &ct), now);
    }
    let types = p.instance_types(&nc).await.unwrap();
    assert!(!offerings_of(&types, "m5.xlarge").is_empty());
    assert!(available(&types, "m5.xlarge").is_empty());
    // What was handed out before is not marked after the fact.
    assert_eq!(available(&first, "m5.large").len(), 6);
    assert_eq!(available(&first, "m5.xlarge").len(), 6);
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2446
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2472
#[tokio::test]
async fn spot_is_offered_only_where_spot_price_history_has_a_price() {
    use tenon_core::requirements::{Requirement, Requirements};
    let moto = Moto::start();
    let p = moto.provider("spot").await;
    // DescribeSpotPriceHistory has one price: m5.large in us-east-1a.
    let mut raw = (*p.catalog().await.unwrap()).clone();
    raw.spot = BTreeMap::from([(("m5.large".to_string(), "us-east-1a".to_string()), 0.004)]);
    let zones: Vec<String> = ["us-east-1a", "us-east-1b", "us-east-1c"].map(String::from).to_vec();
    let types = raw.instance_types(&zones, &tenon_core::catalog::AwsCatalogOptions::default());
    let candidates = |zone: Option<&str>| {
        let mut reqs = Requirements::from_iter([
            Requirement::in_values(wk::LABEL_CAPACITY_TYPE, ["spot"]),
            Requirement::in_values(wk::LABEL_INSTANCE_TYPE, ["m5.large"]),
        ]);
        if let Some(z) = zone {
            reqs.add(Requirement::in_values(wk::LABEL_ZONE, [z]));
        }
        let ranking = launch::price_ranking(&reqs, &Default::default(), &types);
        launch::options(&ranking, &reqs, &types).into_iter().map(|o| (o.zone, o.price)).collect::<Vec<_>>()
    };
    // Spot m5.large in us-east-1b: nothing to launch.
    assert_eq!(candidates(Some("us-east-1b")), []);
    // Any zone: spot m5.large launches where it has a price.
    assert_eq!(candidates(None), [("us-east-1a".to_string(), 0.004)]);
    // A NodePool of spot m5.large in us-east-1b leaves the pod unscheduled, one in us-east-1a
    // schedules it.
    for (zone, schedules) in [("us-east-1b", false), ("us-east-1a", true)] {
        let mut c = support::scheduling::Cluster::new(
            types.clone(),
            "default",
            &[
                "{key: karpenter.sh/capacity-type, operator: In, values: [spot]}",
                "{key: node.kubernetes.io/instance-type, operator: In, values: [m5.large]}",
                &format!("{{key: topology.kubernetes.io/zone, operator: In, values: [{zone}]}}"),
            ],
        );
        c.pending("p", "{cpu: 100m}");
        assert_eq!(c.decide().scheduled("p"), schedules, "{zone}");
    }
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2653
#[tokio::test]
async fn each_capacity_shaping_kubelet_setting_changes_the_instance_types() {
    use tenon_api::ec2nodeclass::KubeletConfiguration;
    let moto = Moto::start();
    let p = moto.provider("kc").await;
    lab(&p, "kc").await;
    let map = |k: &str, v: &str| BTreeMap::from([(k.to_string(), v.to_string())]);
    let base = KubeletConfiguration {
        kube_reserved: map("cpu", "1"),
        system_reserved: map("cpu", "1"),
        eviction_hard: map("memory.available", "5%"),
        eviction_soft: map("nodefs.available", "10%"),
        eviction_soft_grace_period: map("nodefs.available", "1m"),
        max_pods: Some(10),
        ..Default::default()
    };
    let changes: Vec<KubeletConfiguration> = vec![
        KubeletConfiguration { kube_reserved: map("cpu", "20"), ..base.clone() },
        KubeletConfiguration { system_reserved: map("memory", "10Gi"), ..base.clone() },
        KubeletConfiguration { eviction_hard: map("memory.available", "52%"), ..base.clone() },
        KubeletConfiguration { max_pods: Some(20), ..base.clone() },
    ];
    let mut nc = resolved(&p, lab_nodeclass("kc")).await;
    let mut lists = Vec::new();
    for kubelet in std::iter::once(base.clone()).chain(changes) {
        nc.spec.kubelet = Some(kubelet);
        // Twice: the second answer comes from the cached catalog.
        p.instance_types(&nc).await.unwrap();
        lists.push(p.instance_types(&nc).await.unwrap());
    }
    for i in 0..lists.len() {
        assert!(!lists[i].is_empty());
        for j in i + 1..lists.len() {
            assert_ne!(lists[i], lists[j], "kubelet settings {i} and {j} give the same instance types");
        }
    }
}

/// Newest-AMI drift: the selector keeps matching the image an instance was launched with,
/// but a newer image for the same architecture appears (a new release tagged for the
/// cluster). Re-resolved, the NodeClass launches the new image, and the instance on the old
/// one is drifted; an arm64 instance, whose image did not change, is not.
#[tokio::test]
async fn a_newer_image_for_the_same_architecture_drifts_instances_on_the_older_one() {
    let moto = Moto::start();
    let p = moto.provider("newami").await;
    let lab = lab(&p, "newami").await;
    let nc = resolved(&p, lab_nodeclass("newami")).await;
    let old = p.create(&request("newami-old", &nc, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap();
    let arm = p.create(&request("newami-arm", &nc, vec![option("m6g.large", "us-east-1a", "arm64")])).await.unwrap();
    assert_eq!((old.image_id.as_str(), arm.image_id.as_str()), (lab.ami_amd64.as_str(), lab.ami_arm64.as_str()));
    let amd64 = BTreeMap::from([(wk::LABEL_ARCH.to_string(), "amd64".to_string())]);
    let arm64 = BTreeMap::from([(wk::LABEL_ARCH.to_string(), "arm64".to_string())]);
    assert_eq!(p.is_drifted(&old, &amd64, &nc), None);

    // The release: an image of the old one's architecture, tagged like it, named later.
    let newer = cluster_image(&p, &lab.ami_amd64, "m5.large", "newami-al2023-x86_64-v20261201", "newami").await;

    let nc = resolved(&p, lab_nodeclass("newami")).await;
    let ids: Vec<&str> = nc.status.as_ref().unwrap().amis.iter().map(|a| a.id.as_str()).collect();
    assert!(ids.contains(&newer.as_str()) && !ids.contains(&lab.ami_amd64.as_str()), "{ids:?}");
    let reason = p.is_drifted(&old, &amd64, &nc).expect("the instance on the older image is drifted");
    assert!(reason.starts_with("AMIDrift") && reason.contains(&newer), "{reason}");
    assert_eq!(p.is_drifted(&arm, &arm64, &nc), None, "the arm64 image did not change");
    // And its replacement is launched from the new image.
    let fresh = p.create(&request("newami-new", &nc, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap();
    assert_eq!(fresh.image_id, newer);
}

/// An EC2 authorization failure, as the fault proxy answers it.
fn unauthorized() -> String {
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>UnauthorizedOperation</Code><Message>You are not authorized to perform this operation.</Message></Error></Errors><RequestID>denied</RequestID></Response>";
    format!(
        "HTTP/1.1 403 Forbidden\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

// Two workers: the background refresh (a spawned task parsing 1,400 types) runs beside the
// calls, as in the controller, instead of between them on a single test thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_catalog_refresh_serves_the_last_good_catalog_and_backs_off() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::{Duration, Instant};
    let moto = Moto::start();
    let failing = Arc::new(AtomicBool::new(true));
    let proxy = tenon_fault_proxy::fault_while(
        &moto.url,
        "Action=DescribeInstanceTypeOfferings",
        unauthorized(),
        failing.clone(),
    )
    .await;
    // Every fetch takes 2 s (its offerings call is held that long, failing or not), so a
    // call that waited on a refresh would show.
    let slow =
        tenon_fault_proxy::slow_matching(&proxy.url, "Action=DescribeInstanceTypeOfferings", Duration::from_secs(2))
            .await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(slow.url.clone());
    let mut p = AwsProvider::connect(&conn, moto.provider("cat").await.settings.clone())
        .await
        .expect("the connection names its region");
    p.catalog_ttl = Duration::ZERO;
    let calls = || proxy.seen.load(Ordering::SeqCst);
    // Never fetched: the first call waits for the fetch and fails with AWS's error.
    let e = p.catalog().await.unwrap_err().to_string();
    assert!(e.contains("UnauthorizedOperation") || e.contains("not authorized"), "{e}");
    let after_first = calls();
    // Within the backoff, calls fail at once without asking AWS again.
    for _ in 0..20 {
        assert!(p.catalog().await.is_err());
    }
    assert_eq!(calls(), after_first, "no refetch within the backoff");
    failing.store(false, Ordering::SeqCst);
    // Fetched again once the 1 s backoff has passed.
    let waiting = Instant::now();
    let good = loop {
        if let Ok(c) = p.catalog().await {
            break c;
        }
        assert!(waiting.elapsed() < Duration::from_secs(10), "still failing 10 s after AWS recovered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // Stale at once (TTL 0) and every refresh failing: the last good catalog is served.
    failing.store(true, Ordering::SeqCst);
    let mut serving = Duration::ZERO;
    for _ in 0..20 {
        let started = Instant::now();
        let served = p.catalog().await.expect("the last good catalog");
        serving += started.elapsed();
        assert!(Arc::ptr_eq(&served, &good));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Each call takes microseconds; waiting on a refresh would take 2 s.
    assert!(serving < Duration::from_secs(1), "served without waiting on the refresh: {serving:?} in 20 calls");
    let refreshes = calls();
    tokio::time::sleep(Duration::from_millis(500)).await;
    for _ in 0..20 {
        p.catalog().await.unwrap();
    }
    assert!(calls() <= refreshes + 1, "a failed refresh is not retried on every call: {} then {}", refreshes, calls());
}

#[tokio::test]
async fn launches_beyond_the_bound_wait_for_a_free_slot_instead_of_piling_onto_ec2() {
    use std::sync::atomic::Ordering;
    use std::time::Duration;
    let moto = Moto::start();
    // A loaded EC2 answers CreateFleet slowly: every launch over the bound would wait on it
    // at once (thousands in a big wave) and time out together.
    let proxy = tenon_fault_proxy::slow_matching(&moto.url, "Action=CreateFleet", Duration::from_millis(300)).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(proxy.url.clone());
    let setup = moto.provider("bound").await;
    lab(&setup, "bound").await;
    let nc = resolved(&setup, lab_nodeclass("bound")).await;
    let mut p = AwsProvider::connect(&conn, setup.settings.clone()).await.expect("the connection names its region");
    p.limit_launches(3);
    let reqs: Vec<_> =
        (0..9).map(|i| request(&format!("bound-{i}"), &nc, vec![option("m5.large", "us-east-1a", "amd64")])).collect();
    let launched = futures_util::future::join_all(reqs.iter().map(|r| p.create(r))).await;
    for (r, l) in reqs.iter().zip(&launched) {
        assert!(l.is_ok(), "{}: {l:?}", r.nodeclaim);
    }
    // Identical requests may share a call (fleet_batcher.rs); never more than one each.
    let calls = proxy.seen.load(Ordering::SeqCst);
    assert!((1..=9).contains(&calls), "{calls} CreateFleet calls for 9 NodeClaims");
    let peak = proxy.peak_in_flight.load(Ordering::SeqCst);
    assert!(peak <= 3, "{peak} CreateFleet calls waited on EC2 at once; the bound is 3");
}

/// An HTTP 200 answer from EC2 (the fault proxy's whole response).
fn ec2_ok(body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// karpenter-provider-aws:pkg/providers/instance/suite_test.go (launch failure metric):
/// each offering CreateFleet fails is counted by zone, zone ID, capacity type and reason, and
/// each instance TerminateInstances fails to terminate by zone and zone ID.
#[tokio::test]
async fn launch_and_termination_failures_are_counted_by_zone() {
    let moto = Moto::start();
    let setup = moto.provider("fails").await;
    lab(&setup, "fails").await;
    let nc = resolved(&setup, lab_nodeclass("fails")).await;
    let subnet = nc.status.as_ref().unwrap().subnets.iter().find(|s| s.zone == "us-east-1a").unwrap();
    let zone_id = subnet.zone_id.clone().unwrap_or_default();
    assert!(!zone_id.is_empty(), "moto names each subnet's zone id");
    // moto never runs out of capacity: the proxy answers CreateFleet as EC2 does when it has.
    let ice = format!(
        "<CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r</requestId>\
         <fleetId>fleet-1</fleetId><errorSet><item><launchTemplateAndOverrides><overrides>\
         <instanceType>m5.large</instanceType><subnetId>{}</subnetId></overrides></launchTemplateAndOverrides>\
         <lifecycle>on-demand</lifecycle><errorCode>InsufficientInstanceCapacity</errorCode>\
         <errorMessage>We currently do not have sufficient m5.large capacity.</errorMessage></item></errorSet>\
         <fleetInstanceSet/></CreateFleetResponse>",
        subnet.id
    );
    let proxy = tenon_fault_proxy::fault_matching(&moto.url, 1, "Action=CreateFleet", ec2_ok(&ice)).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(proxy.url.clone());
    let p = AwsProvider::connect(&conn, setup.settings.clone()).await.unwrap();
    p.resolve(&nc).await.expect("resolved through the proxy");
    let req = request("fails-a", &nc, vec![option("m5.large", "us-east-1a", "amd64")]);
    let e = p.create(&req).await.unwrap_err();
    assert!(matches!(e, CloudError::InsufficientCapacity { .. }), "{e:?}");
    let text = p.metrics.render();
    let launch = format!(
        "karpenter_cloudprovider_instance_launch_failures_total{{zone=\"us-east-1a\",zone_id=\"{zone_id}\",capacity_type=\"on-demand\",reason=\"LaunchFailed\"}} 1"
    );
    assert!(text.lines().any(|l| l == launch), "{launch} missing from\n{text}");

    let launched = setup.create(&req).await.expect("launched without the proxy");
    let proxy = tenon_fault_proxy::fault_matching(&moto.url, 1, "Action=TerminateInstances", unauthorized()).await;
    conn.endpoint_url = Some(proxy.url.clone());
    let p = AwsProvider::connect(&conn, setup.settings.clone()).await.unwrap();
    p.resolve(&nc).await.expect("resolved through the proxy");
    assert!(p.delete(std::slice::from_ref(&launched.id)).await.is_err());
    let text = p.metrics.render();
    let terminate = format!(
        "karpenter_cloudprovider_instance_termination_failures_total{{zone=\"us-east-1a\",zone_id=\"{zone_id}\"}} 1"
    );
    assert!(text.lines().any(|l| l == terminate), "{terminate} missing from\n{text}");
    p.delete(std::slice::from_ref(&launched.id)).await.expect("the second TerminateInstances reaches moto");
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:1054
#[tokio::test]
async fn a_local_zone_subnet_offers_and_launches_in_the_local_zone() {
    let moto = Moto::start();
    let p = moto.provider("local").await;
    // DescribeInstanceTypeOfferings lists m5.large in the Boston local zone too (moto knows
    // no local zones); the NodeClass' one subnet is there.
    let mut raw = (*p.catalog().await.unwrap()).clone();
    const LOCAL: &str = "us-east-1-bos-1a";
    raw.zones.get_mut("m5.large").expect("m5.large offered").push(LOCAL.to_string());
    let types = raw.instance_types(&[LOCAL.to_string()], &tenon_core::catalog::AwsCatalogOptions::default());
    let offered: Vec<&str> = types.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(offered, ["m5.large"], "only what the local zone offers");
    let mut c = support::scheduling::Cluster::new(types.clone(), "default", &[]);
    c.pending("p", "{cpu: 100m}");
    let d = c.decide();
    assert!(d.scheduled("p"));
    let nc = d.created("p");
    let reqs = tenon_core::convert::requirements_with_min_values(&nc.spec.requirements);
    let zones: Vec<String> = launch::options(&launch::price_ranking(&reqs, &Default::default(), &types), &reqs, &types)
        .into_iter()
        .map(|o| o.zone)
        .collect();
    assert!(!zones.is_empty() && zones.iter().all(|z| z == LOCAL), "{zones:?}");
}

/// Not a Karpenter case of the manifest (issue 47): offerings carry their zone's ID from the
/// NodeClass' subnets, so a requirement on `topology.k8s.aws/zone-id` picks the zone.
#[tokio::test]
async fn a_zone_id_requirement_launches_in_that_zone() {
    let moto = Moto::start();
    let p = moto.provider("zoneid").await;
    let lab = lab(&p, "zoneid").await;
    let nc = three_zone_nodeclass(&p, &lab, "zoneid").await;
    let subnets = &nc.status.as_ref().unwrap().subnets;
    let id_of = |zone: &str| subnets.iter().find(|s| s.zone == zone).and_then(|s| s.zone_id.clone());
    let wanted = id_of("us-east-1b").expect("EC2 names each subnet's zone ID");
    assert_ne!(id_of("us-east-1a").as_deref(), Some(wanted.as_str()));
    let types = (*p.instance_types(&nc).await.unwrap()).clone();
    let m5 = types.iter().find(|t| t.name == "m5.large").expect("m5.large offered");
    for o in &m5.offerings {
        assert_eq!(o.zone_id, id_of(&o.zone), "{}", o.zone);
    }
    let mut c = support::scheduling::Cluster::new(
        types.clone(),
        "default",
        &[&format!("{{key: {}, operator: In, values: [{wanted}]}}", wk::LABEL_ZONE_ID)],
    );
    c.pending("p", "{cpu: 100m}");
    let d = c.decide();
    assert!(d.scheduled("p"));
    let nc = d.created("p");
    let reqs = tenon_core::convert::requirements_with_min_values(&nc.spec.requirements);
    let zones: std::collections::BTreeSet<String> =
        launch::options(&launch::price_ranking(&reqs, &Default::default(), &types), &reqs, &types)
            .into_iter()
            .map(|o| o.zone)
            .collect();
    assert_eq!(zones.into_iter().collect::<Vec<_>>(), ["us-east-1b"]);
}
