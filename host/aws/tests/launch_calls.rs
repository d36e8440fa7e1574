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

    deleted.store(true, Ordering::SeqCst);
    let e = launch(3).await.expect_err("EC2 says the template is gone").to_string();
    assert!(e.contains("NotFound"), "{e}");
    deleted.store(false, Ordering::SeqCst);
    launch(4).await.unwrap();
    assert_eq!(descriptions(), 2, "described (and made) again after EC2 said it was gone");
    launch(5).await.unwrap();
    assert_eq!(descriptions(), 2);
}
