//! What a launch asks CreateFleet for, as it reaches EC2 (read through a proxy in front of
//! moto), and what EC2's answers do to offerings: `InsufficientInstanceCapacity` (moto never
//! answers so; the proxy does) makes them unavailable the way it does in a cluster.

use crate::support;

use support::Moto;
use support::lab::*;
use tenon_api::ec2nodeclass::EC2NodeClass;
use tenon_api::wellknown as wk;
use tenon_aws::AwsProvider;
use tenon_core::cloud::{CloudError, CloudProvider, UnavailableOffering};
use tenon_core::instancetype::InstanceType;
use tenon_core::orchestration::launch;
use tenon_core::requirements::{Requirement, Requirements};

/// EC2's CreateFleet answer when `instance_type` has no capacity in any of `subnets`.
fn insufficient_capacity(instance_type: &str, subnets: &[&str]) -> String {
    let items: String = subnets
        .iter()
        .map(|s| {
            format!(
                "<item><launchTemplateAndOverrides><overrides><instanceType>{instance_type}</instanceType>\
                 <subnetId>{s}</subnetId></overrides></launchTemplateAndOverrides>\
                 <errorCode>InsufficientInstanceCapacity</errorCode>\
                 <errorMessage>We currently do not have sufficient {instance_type} capacity.</errorMessage></item>"
            )
        })
        .collect();
    let body = format!(
        "<CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r</requestId>\
         <fleetId>fleet-1</fleetId><errorSet>{items}</errorSet><fleetInstanceSet/></CreateFleetResponse>"
    );
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// A provider whose first `failures` CreateFleet calls find no capacity for `instance_type`
/// in any subnet of a resolved three-zone NodeClass; the proxy stays up while it is held.
async fn short_of(
    moto: &Moto,
    cluster: &str,
    instance_type: &str,
    failures: usize,
) -> (AwsProvider, EC2NodeClass, tenon_fault_proxy::Throttle) {
    let setup = moto.provider(cluster).await;
    let lab = lab(&setup, cluster).await;
    let nc = three_zone_nodeclass(&setup, &lab, cluster).await;
    let subnets: Vec<&str> = nc.status.as_ref().unwrap().subnets.iter().map(|s| s.id.as_str()).collect();
    let answer = insufficient_capacity(instance_type, &subnets);
    let proxy = tenon_fault_proxy::fault_matching(&moto.url, failures, "Action=CreateFleet", answer).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(proxy.url.clone());
    let p = AwsProvider::connect(&conn, setup.settings.clone()).await.unwrap();
    p.resolve(&nc).await.expect("resolved through the proxy");
    (p, nc, proxy)
}

/// The launch options a NodeClaim for `instance_type` and `capacity_types` gets, cheapest
/// first (before `launch::fleet_request` narrows them to one request's overrides).
fn options_for(
    types: &[InstanceType],
    instance_type: &str,
    capacity_types: &[&str],
) -> Vec<tenon_core::cloud::LaunchOption> {
    let reqs = Requirements::from_iter([
        Requirement::in_values(wk::LABEL_CAPACITY_TYPE, capacity_types.iter().copied()),
        Requirement::in_values(wk::LABEL_INSTANCE_TYPE, [instance_type]),
    ]);
    let ranking = launch::price_ranking(&reqs, &Default::default(), types);
    launch::options(&ranking, &reqs, types)
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2255
#[tokio::test]
async fn a_type_out_of_capacity_everywhere_is_listed_with_no_offering_available() {
    let moto = Moto::start();
    let (p, nc, _proxy) = short_of(&moto, "ice-all", "m5.xlarge", 2).await;
    let before = p.instance_types(&nc).await.unwrap();
    assert_eq!(available(&before, "m5.xlarge").len(), 6, "3 zones × 2 capacity types");
    for ct in ["on-demand", "spot"] {
        let req = request(&format!("ice-all-{ct}"), &nc, options_for(&before, "m5.xlarge", &[ct]));
        assert_eq!(req.options.len(), 3, "{ct} in every zone");
        let e = p.create(&req).await.unwrap_err();
        assert!(matches!(e, CloudError::InsufficientCapacity { .. }), "{e:?}");
    }
    let after = p.instance_types(&nc).await.unwrap();
    assert_eq!(after.len(), before.len(), "every instance type still listed");
    assert!(available(&after, "m5.xlarge").is_empty(), "{:?}", available(&after, "m5.xlarge"));
    assert_eq!(available(&after, "m5.large").len(), 6, "other types keep their offerings");
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2173
#[tokio::test]
async fn an_offering_out_of_capacity_launches_again_once_its_cache_entry_is_gone() {
    let moto = Moto::start();
    let (p, nc, _proxy) = short_of(&moto, "ice-expiry", "m5.xlarge", 1).await;
    let types = p.instance_types(&nc).await.unwrap();
    let only = |types: &[InstanceType]| {
        options_for(types, "m5.xlarge", &["on-demand"])
            .into_iter()
            .filter(|o| o.zone == "us-east-1a")
            .collect::<Vec<_>>()
    };
    let req = request("ice-expiry-a", &nc, only(&types));
    assert_eq!(req.options.len(), 1);
    let e = p.create(&req).await.unwrap_err();
    assert!(matches!(e, CloudError::InsufficientCapacity { .. }), "{e:?}");
    // While the entry lasts the offering is out of the instance types: nothing to launch.
    let types = p.instance_types(&nc).await.unwrap();
    assert!(only(&types).is_empty(), "m5.xlarge on-demand in us-east-1a is unavailable");
    // The shortage is over and the entry expires: the same NodeClaim launches there.
    p.unavailable.forget(&UnavailableOffering {
        instance_type: "m5.xlarge".into(),
        zone: "us-east-1a".into(),
        capacity_type: "on-demand".into(),
    });
    let types = p.instance_types(&nc).await.unwrap();
    let i = p.create(&request("ice-expiry-a", &nc, only(&types))).await.expect("launched");
    assert_eq!((i.instance_type.as_str(), i.zone.as_str()), ("m5.xlarge", "us-east-1a"));
    let seen = p.get_many(std::slice::from_ref(&i.id)).await.unwrap();
    assert_eq!(seen[&i.id].instance_type, "m5.xlarge", "EC2 has the instance");
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:2437
#[tokio::test]
async fn a_nodeclaim_flexible_to_both_capacity_types_launches_spot() {
    let moto = Moto::start();
    let p = moto.provider("flexible").await;
    let lab = lab(&p, "flexible").await;
    let nc = three_zone_nodeclass(&p, &lab, "flexible").await;
    let types = p.instance_types(&nc).await.unwrap();
    let options = options_for(&types, "m5.large", &["spot", "on-demand"]);
    let kinds: std::collections::BTreeSet<&str> = options.iter().map(|o| o.capacity_type.as_str()).collect();
    assert_eq!(kinds.into_iter().collect::<Vec<_>>(), ["on-demand", "spot"], "offered both ways");
    let i = p.create(&request("flexible-a", &nc, launch::fleet_request(&options))).await.expect("launched");
    assert_eq!(i.capacity_type, "spot");
    // EC2's own record of the instance says spot too.
    let seen = p.get_many(std::slice::from_ref(&i.id)).await.unwrap();
    assert_eq!(seen[&i.id].capacity_type, "spot");
}

/// The parameters of a query-protocol request body, decoded.
fn params_of(body: &str) -> Vec<(String, String)> {
    form_urlencoded::parse(body.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())).collect()
}

/// A provider whose CreateFleet calls are recorded by a proxy in front of moto, and a
/// three-zone NodeClass with one image and one maxPods: every type shares one launch template
/// (Karpenter's cases have one launch template config), as templates differ by image and
/// kubelet settings.
async fn one_template_watched(moto: &Moto, cluster: &str) -> (AwsProvider, EC2NodeClass, tenon_fault_proxy::Throttle) {
    let setup = moto.provider(cluster).await;
    let lab = lab(&setup, cluster).await;
    let mut nc = three_zone_nodeclass(&setup, &lab, cluster).await;
    nc.spec.kubelet = Some(tenon_api::ec2nodeclass::KubeletConfiguration { max_pods: Some(110), ..Default::default() });
    let nc = resolved(&setup, nc).await;
    let proxy = tenon_fault_proxy::slow_matching(&moto.url, "Action=CreateFleet", std::time::Duration::ZERO).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(proxy.url.clone());
    let p = AwsProvider::connect(&conn, setup.settings.clone()).await.unwrap();
    p.resolve(&nc).await.expect("resolved through the proxy");
    (p, nc, proxy)
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:476
#[tokio::test]
async fn a_flexible_launch_asks_only_for_spot_cheaper_than_the_cheapest_on_demand() {
    let moto = Moto::start();
    let (p, nc, proxy) = one_template_watched(&moto, "cheap").await;
    // moto prices every spot offering the same; here spot costs 90% of on-demand, so the
    // larger types' spot is dearer than the cheapest on-demand that fits.
    let mut types: Vec<InstanceType> = (*p.instance_types(&nc).await.unwrap()).clone();
    for t in &mut types {
        let on_demand = t.offerings.iter().find(|o| o.capacity_type == "on-demand").map(|o| o.price);
        for o in t.offerings.iter_mut().filter(|o| o.capacity_type == "spot") {
            o.price = on_demand.map_or(o.price, |p| p * 0.9);
        }
    }
    // A NodeClaim for one CPU, spot or on-demand, as the scheduler makes it (amd64: Karpenter's
    // fake types are).
    let reqs = Requirements::from_iter([
        Requirement::in_values(wk::LABEL_CAPACITY_TYPE, ["spot", "on-demand"]),
        Requirement::in_values(wk::LABEL_ARCH, ["amd64"]),
    ]);
    let requests = tenon_core::resources::Resources::new(1000, 0, 1);
    // The overrides of one request, as the lifecycle reconciler makes them.
    let options = launch::options(&launch::price_ranking(&reqs, &requests, &types), &reqs, &types);
    p.create(&request("cheap-a", &nc, launch::fleet_request(&options))).await.expect("launched");

    let bodies = proxy.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1, "one CreateFleet call");
    let params = params_of(&bodies[0]);
    let get = |k: &str| params.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    assert!(!params.iter().any(|(k, _)| k.starts_with("LaunchTemplateConfigs.2.")), "one launch template config");
    assert_eq!(get("TargetCapacitySpecification.DefaultTargetCapacityType"), Some("spot"));
    let zone_of: std::collections::BTreeMap<&str, &str> =
        nc.status.as_ref().unwrap().subnets.iter().map(|s| (s.id.as_str(), s.zone.as_str())).collect();
    let price = |name: &str, zone: &str, ct: &str| {
        let t = types.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{name} offered"));
        t.offerings.iter().find(|o| o.zone == zone && o.capacity_type == ct).map(|o| o.price)
    };
    let overrides = overrides_of(&params, &zone_of);
    assert!(!overrides.is_empty());
    let cheapest_on_demand = overrides
        .iter()
        .filter_map(|(t, z)| price(t, z, "on-demand"))
        .min_by(f64::total_cmp)
        .expect("on-demand prices of the override types");
    for (t, z) in &overrides {
        let spot = price(t, z, "spot").expect("a spot price");
        assert!(spot < cheapest_on_demand, "{t} in {z}: spot {spot} is not below on-demand {cheapest_on_demand}");
    }
    // Options of both capacity types handed over as they are: the on-demand ones do not go
    // out as spot overrides.
    p.create(&request("cheap-b", &nc, options)).await.expect("launched");
    let second = proxy.bodies.lock().unwrap()[1].clone();
    assert_eq!(overrides_of(&params_of(&second), &zone_of), overrides);
}

/// The (instance type, zone) of each override of a CreateFleet request's one launch template
/// config.
fn overrides_of(
    params: &[(String, String)],
    zone_of: &std::collections::BTreeMap<&str, &str>,
) -> Vec<(String, String)> {
    let get = |k: &str| params.iter().find(|(key, _)| key == k).map(|(_, v)| v.as_str());
    let mut out = Vec::new();
    for n in 1.. {
        let key = |field: &str| format!("LaunchTemplateConfigs.1.Overrides.{n}.{field}");
        let Some(t) = get(&key("InstanceType")) else { break };
        let subnet = get(&key("SubnetId")).expect("each override names its subnet");
        out.push((t.to_string(), zone_of[subnet].to_string()));
    }
    out
}

/// karpenter-provider-aws:pkg/providers/launchtemplate/suite_test.go:312
#[tokio::test]
async fn each_launch_template_config_names_a_template_made_for_it_at_latest() {
    let moto = Moto::start();
    let setup = moto.provider("templates").await;
    let lab = lab(&setup, "templates").await;
    // No kubelet settings: types with different ENI-limited max pods get templates of their own.
    let nc = three_zone_nodeclass(&setup, &lab, "templates").await;
    let proxy = tenon_fault_proxy::slow_matching(&moto.url, "Action=CreateFleet", std::time::Duration::ZERO).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(proxy.url.clone());
    let p = AwsProvider::connect(&conn, setup.settings.clone()).await.unwrap();
    p.resolve(&nc).await.expect("resolved through the proxy");
    let types: Vec<InstanceType> = (*p.instance_types(&nc).await.unwrap()).clone();
    let reqs = Requirements::from_iter([
        Requirement::in_values(wk::LABEL_CAPACITY_TYPE, ["on-demand"]),
        Requirement::in_values(wk::LABEL_ARCH, ["amd64"]),
    ]);
    let requests = tenon_core::resources::Resources::new(1000, 0, 1);
    let options = launch::options(&launch::price_ranking(&reqs, &requests, &types), &reqs, &types);
    let made = templates_made_by(&setup, async {
        p.create(&request("templates-a", &nc, launch::fleet_request(&options))).await.expect("launched");
    })
    .await;
    let bodies = proxy.bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 1, "one CreateFleet call");
    let params = params_of(&bodies[0]);
    let get = |k: String| params.iter().find(|(key, _)| *key == k).map(|(_, v)| v.clone());
    let configs: Vec<(String, String)> = (1..)
        .map_while(|n| {
            let spec = |f: &str| get(format!("LaunchTemplateConfigs.{n}.LaunchTemplateSpecification.{f}"));
            Some((spec("LaunchTemplateName")?, spec("Version").unwrap_or_default()))
        })
        .collect();
    assert!(configs.len() > 1, "types of different max pods need templates of their own: {configs:?}");
    assert_eq!(configs.len(), made.len(), "one config per template made: {configs:?}");
    let names = templates(&setup).await;
    for (name, version) in &configs {
        assert_eq!(version, "$Latest", "{name}: the template's latest version");
        let data = names.get(name).unwrap_or_else(|| panic!("{name} is a template EC2 holds"));
        assert!(made.contains(data), "{name} was made for this launch");
        let root = &data.block_device_mappings()[0];
        assert_eq!(root.ebs().and_then(|e| e.encrypted()), Some(true), "{name}: an encrypted root volume");
    }
}

/// EC2's CreateFleet answer when `subnet` has no free address for `instance_type`.
fn subnet_full(instance_type: &str, subnet: &str) -> String {
    let body = format!(
        "<CreateFleetResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>r</requestId>\
         <fleetId>fleet-1</fleetId><errorSet><item><launchTemplateAndOverrides><overrides>\
         <instanceType>{instance_type}</instanceType><subnetId>{subnet}</subnetId></overrides>\
         </launchTemplateAndOverrides><errorCode>InsufficientFreeAddressesInSubnet</errorCode>\
         <errorMessage>There are not enough free addresses in subnet '{subnet}' to satisfy the requested number of instances.</errorMessage>\
         </item></errorSet><fleetInstanceSet/></CreateFleetResponse>"
    );
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Not a Karpenter case of the manifest (issue 47; Karpenter's instance provider case
/// "should deprioritize subnets on subsequent launches after subnet IP exhaustion").
#[tokio::test]
async fn a_subnet_out_of_addresses_is_passed_over_while_its_zone_has_another() {
    let moto = Moto::start();
    let setup = moto.provider("full").await;
    let lab = lab(&setup, "full").await;
    // A second, larger subnet in us-east-1a: listed first (the most free addresses).
    let ec2 = &setup.clients.ec2;
    let (first_1a, _) = lab.subnets.iter().find(|(_, z)| z == "us-east-1a").unwrap().clone();
    let described = ec2.describe_subnets().subnet_ids(&first_1a).send().await.unwrap();
    let vpc = described.subnets()[0].vpc_id().unwrap().to_string();
    let big = ec2
        .create_subnet()
        .vpc_id(&vpc)
        .cidr_block("10.20.16.0/20")
        .availability_zone("us-east-1a")
        .send()
        .await
        .unwrap();
    let big = big.subnet().unwrap().subnet_id().unwrap().to_string();
    let mut nc = lab_nodeclass("full");
    nc.spec.subnet_selector_terms = [big.clone(), first_1a.clone()]
        .into_iter()
        .map(|id| tenon_api::ec2nodeclass::SubnetSelectorTerm { id: Some(id), tags: None })
        .collect();
    let nc = resolved(&setup, nc).await;
    let listed: Vec<&str> = nc.status.as_ref().unwrap().subnets.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(listed, [big.as_str(), first_1a.as_str()], "the larger subnet first");
    // The first CreateFleet finds the larger subnet out of addresses.
    let proxy =
        tenon_fault_proxy::fault_matching(&moto.url, 1, "Action=CreateFleet", subnet_full("m5.large", &big)).await;
    let mut conn = moto.connection();
    conn.endpoint_url = Some(proxy.url.clone());
    let p = AwsProvider::connect(&conn, setup.settings.clone()).await.unwrap();
    p.resolve(&nc).await.expect("resolved through the proxy");
    let e = p.create(&request("full-a", &nc, vec![option("m5.large", "us-east-1a", "amd64")])).await.unwrap_err();
    assert!(matches!(e, CloudError::InsufficientCapacity { .. }), "{e:?}");
    // The zone still has a subnet with addresses: its offerings stay, and the next launch
    // (of another type) goes to that subnet.
    let types = p.instance_types(&nc).await.unwrap();
    assert!(available(&types, "m5.xlarge").iter().any(|(z, _)| z == "us-east-1a"), "us-east-1a still offered");
    let i =
        p.create(&request("full-b", &nc, vec![option("m5.xlarge", "us-east-1a", "amd64")])).await.expect("launched");
    assert_eq!(i.subnet_id, first_1a, "the subnet with addresses");
    let seen = p.get_many(std::slice::from_ref(&i.id)).await.unwrap();
    assert_eq!(seen[&i.id].subnet_id, first_1a, "EC2 placed it there");
    // Once that one is out of addresses too, the zone offers nothing for now.
    p.unavailable.mark_subnet(&first_1a, std::time::Instant::now());
    let types = p.instance_types(&nc).await.unwrap();
    assert!(types.iter().all(|t| !available(&types, &t.name).iter().any(|(z, _)| z == "us-east-1a")));
}

/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:546
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:581
/// karpenter-provider-aws:pkg/providers/instancetype/suite_test.go:600
#[tokio::test]
async fn metal_and_gpu_types_reach_create_fleet_only_when_asked_for() {
    let moto = Moto::start();
    let (p, nc, proxy) = one_template_watched(&moto, "metal").await;
    let types = p.instance_types(&nc).await.unwrap();
    let zone_of: std::collections::BTreeMap<&str, &str> =
        nc.status.as_ref().unwrap().subnets.iter().map(|s| (s.id.as_str(), s.zone.as_str())).collect();
    for (i, min_values) in [None, Some(1)].into_iter().enumerate() {
        // A NodeClaim for one CPU of spot, with the NodePool's minValues on capacity type.
        let reqs = Requirements::from_iter([
            Requirement::in_values(wk::LABEL_CAPACITY_TYPE, ["spot"]).with_min_values(min_values),
            Requirement::in_values(wk::LABEL_ARCH, ["amd64"]),
        ]);
        let requests = tenon_core::resources::Resources::new(1000, 0, 1);
        let options = launch::options(&launch::price_ranking(&reqs, &requests, &types), &reqs, &types);
        p.create(&request(&format!("metal-{i}"), &nc, launch::fleet_request(&options))).await.expect("launched");
        let body = proxy.bodies.lock().unwrap()[i].clone();
        let params = params_of(&body);
        assert!(!params.iter().any(|(k, _)| k.starts_with("LaunchTemplateConfigs.2.")), "one launch template config");
        let overrides = overrides_of(&params, &zone_of);
        let metal = overrides.iter().any(|(t, _)| t.contains("metal"));
        assert_eq!(metal, min_values.is_some(), "minValues {min_values:?}: {overrides:?}");
        if min_values.is_none() {
            assert!(!overrides.iter().any(|(t, _)| t.starts_with('g')), "{overrides:?}");
        }
    }
    // GPU types too are left out while a generic type fits, however cheap.
    let reqs = Requirements::from_iter([
        Requirement::in_values(wk::LABEL_CAPACITY_TYPE, ["spot"]),
        Requirement::in_values(wk::LABEL_INSTANCE_TYPE, ["m5.large", "g4dn.xlarge"]),
    ]);
    assert!(types.iter().any(|t| t.name == "g4dn.xlarge" && t.cheapest(&reqs).is_some()), "g4dn.xlarge offered");
    let requests = tenon_core::resources::Resources::new(1000, 0, 1);
    let options = launch::options(&launch::price_ranking(&reqs, &requests, &types), &reqs, &types);
    p.create(&request("metal-gpu", &nc, launch::fleet_request(&options))).await.expect("launched");
    let body = proxy.bodies.lock().unwrap()[2].clone();
    let overrides = overrides_of(&params_of(&body), &zone_of);
    assert!(!overrides.is_empty() && overrides.iter().all(|(t, _)| t == "m5.large"), "{overrides:?}");
}
