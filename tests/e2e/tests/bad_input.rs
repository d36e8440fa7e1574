//! Bad input in NodePools: an invalid budget, an unknown policy, a policy whose pinned digest
//! does not match, requirements no instance type meets. Each is a status condition or an
//! Event on its NodePool; the controller keeps running and the healthy NodePool (running a
//! Wasm scoring policy) provisions.

use kube::Api;
use std::time::Duration;
use tenon_api::NodePool;
use tenon_e2e::scenario::{
    INFLATE_NS, all_bound, apply_lab_general, nodeclass_ready, scale_inflate, tagged_pool as pool,
};
use tenon_e2e::{Cluster, eventually};

/// (status, reason, message) of `type_` on NodePool `name`, once it is written.
async fn condition(c: &Cluster, name: &str, type_: &str) -> (String, String, String) {
    eventually(Duration::from_secs(30), &format!("{type_} on NodePool {name}"), || c.nodepool_condition(name, type_))
        .await
}

async fn event(c: &Cluster, name: &str, reason: &str) -> String {
    eventually(Duration::from_secs(30), &format!("a {reason} Event on NodePool {name}"), || async {
        let events = c.events_for(name).await;
        events.into_iter().find(|e| e.reason.as_deref() == Some(reason)).and_then(|e| e.message)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_nodepools_are_reported_and_the_good_one_provisions_through_its_wasm_policy() {
    let mut c = Cluster::start("bad-input").await;
    let store = c.policy_store(&[("default_scoring.wasm", "default-scoring.wasm")]);
    c.controller_env.push(("TENON_POLICY_DIR".into(), store.display().to_string()));

    apply_lab_general(&c);
    c.kubectl(&["annotate", "nodepool", "lab-general", "tenon.dev/scoring-policy=default-scoring"]);
    // The API server admits it (five fields, as the CRD's pattern asks); it is no cron.
    c.apply_yaml(
        "bad-budget",
        &pool("bad-budget", "", r#"{nodes: "10%", schedule: "every day at 12 noon", duration: "1h"}"#),
    );
    c.apply_yaml(
        "unknown-policy",
        &pool("unknown-policy", r#"tenon.dev/scoring-policy: no-such-policy"#, r#"{nodes: "10%"}"#),
    );
    let zeros = "0".repeat(64);
    c.apply_yaml(
        "pinned",
        &pool("pinned", &format!(r#"tenon.dev/scoring-policy: "default-scoring@sha256:{zeros}""#), r#"{nodes: "10%"}"#),
    );
    // Valid, but its requirements leave none of the catalog's instance types.
    c.apply_yaml(
        "no-types",
        &pool("no-types", "", r#"{nodes: "10%"}"#).replace(
            r#"values: ["on-demand"]"#,
            "values: [\"on-demand\"]\n        - key: node.kubernetes.io/instance-type\n          operator: In\n          values: [\"no-such-type\"]",
        ),
    );
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;

    let (status, reason, message) = condition(&c, "bad-budget", "ValidationSucceeded").await;
    assert_eq!((status.as_str(), reason.as_str()), ("False", "ValidationFailed"));
    assert!(message.contains("spec.disruption.budgets[0].schedule"), "{message}");
    assert!(event(&c, "bad-budget", "ValidationFailed").await.contains("spec.disruption.budgets[0].schedule"));

    let (status, reason, message) = condition(&c, "unknown-policy", "PolicyHealthy").await;
    assert_eq!((status.as_str(), reason.as_str()), ("False", "PolicyUnavailable"));
    assert!(message.contains("no-such-policy"), "{message}");
    assert!(event(&c, "unknown-policy", "PolicyUnavailable").await.contains("no-such-policy"));

    let (status, reason, message) = condition(&c, "pinned", "PolicyHealthy").await;
    assert_eq!((status.as_str(), reason.as_str()), ("False", "PolicyUnavailable"));
    assert!(
        message.contains("default-scoring") && message.contains(&zeros),
        "names the policy and the pinned digest: {message}"
    );
    event(&c, "pinned", "PolicyUnavailable").await;

    // The healthy NodePool is unaffected and decides through its Wasm scorer.
    let (status, _, message) = condition(&c, "lab-general", "PolicyHealthy").await;
    assert_eq!(status, "True", "{message}");
    scale_inflate(&c, 8);
    all_bound(&c, INFLATE_NS, 8, Duration::from_secs(90)).await;
    c.assert_controller_running();
    let calls = c.metric(r#"tenon_policy_calls_total{policy="default-scoring",hook="scoring"}"#).await;
    assert!(calls.is_some_and(|n| n >= 1.0), "the scorer ran: {calls:?}");
    for nc in c.nodeclaims().await {
        let pool = tenon_e2e::label(&nc.metadata.labels, "karpenter.sh/nodepool").unwrap_or_default().to_string();
        assert_eq!(pool, "lab-general", "only the healthy pool matches the inflate pods");
    }
    assert_eq!(
        event(&c, "no-types", "NoCompatibleInstanceTypes").await,
        "NodePool requirements filtered out all compatible available instance types"
    );
    let (status, _, _) = condition(&c, "bad-budget", "Ready").await;
    assert_eq!(status, "False", "an invalid NodePool is not Ready");

    // Fixing the annotation reloads the NodePool's policies.
    c.kubectl(&["annotate", "--overwrite", "nodepool", "unknown-policy", "tenon.dev/scoring-policy=default-scoring"]);
    let api: Api<NodePool> = Api::all(c.client.clone());
    eventually(Duration::from_secs(30), "PolicyHealthy=True after the fix", || async {
        let np = api.get("unknown-policy").await.ok()?;
        np.status?.conditions.iter().any(|x| x.type_ == "PolicyHealthy" && x.status == "True").then_some(())
    })
    .await;
    c.assert_controller_running();
}
