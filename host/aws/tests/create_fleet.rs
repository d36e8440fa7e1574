//! Offerings made unavailable the way EC2 makes them so: CreateFleet answering
//! `InsufficientInstanceCapacity` (moto never does; a fault proxy in front of it answers).

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

/// `name`'s offerings still available, as (zone, capacity type).
fn available(types: &[InstanceType], name: &str) -> Vec<(String, String)> {
    let t = types.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{name} listed"));
    t.offerings.iter().filter(|o| o.available).map(|o| (o.zone.clone(), o.capacity_type.clone())).collect()
}

/// The launch options a NodeClaim for `instance_type` and `capacity_types` gets, cheapest first.
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
    let i = p.create(&request("flexible-a", &nc, options)).await.expect("launched");
    assert_eq!(i.capacity_type, "spot");
    // EC2's own record of the instance says spot too.
    let seen = p.get_many(std::slice::from_ref(&i.id)).await.unwrap();
    assert_eq!(seen[&i.id].capacity_type, "spot");
}
