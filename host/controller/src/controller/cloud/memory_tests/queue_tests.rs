//! Karpenter's disruption queue cases through the disruption reconciler: a command's Events
//! on its replacements and candidates (DisruptionLaunching, DisruptionWaitingReadiness,
//! DisruptionTerminating), its candidates deleted once the replacements are Initialized, and
//! its marks taken off when they never are.

use super::World;
use crate::controller::disruption::Disruption;
use crate::controller::runner::Reconciler;
use k8s_openapi::api::core::v1::Event;
use kube::Api;
use std::time::{Duration, Instant};

impl World {
    /// Waits (the recorder posts from its own queue) for an Event `reason` with `message` on
    /// the `kind` named `name`.
    async fn says_on(&self, kind: &str, name: &str, reason: &str, message: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let events: Vec<Event> =
                Api::<Event>::all(self.client.clone()).list(&Default::default()).await.unwrap().items;
            if events.iter().any(|e| {
                e.involved_object.kind.as_deref() == Some(kind)
                    && e.involved_object.name.as_deref() == Some(name)
                    && e.reason.as_deref() == Some(reason)
                    && e.message.as_deref() == Some(message)
            }) {
                return;
            }
            assert!(Instant::now() < deadline, "no {reason} {message:?} on {kind} {name}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A drift: NodePool `default` never consolidates, `node-0` is drifted.
    async fn drift_of_node_0(&self) {
        self.pool_disruption(serde_json::json!({"consolidateAfter": "Never"})).await;
        self.drifted("node-0").await;
    }
}

/// Four pods on `node-0`, of the dearest type, and nowhere else for them: drift replaces it.
/// Rounds run until the replacement is created.
async fn node_0_being_replaced() -> (World, Disruption) {
    let w = World::new().await;
    w.pool_with(serde_json::json!({})).await;
    let pods = [("web-0", 100), ("web-1", 100), ("web-2", 100), ("web-3", 100)];
    w.running("node-0", "fake-it-3", "on-demand", &pods).await;
    w.drift_of_node_0().await;
    let mut disruption = Disruption::new(w.ctx.clone());
    w.disruption_until(&mut disruption, "a replacement", || async { w.claims_deleting().await.len() == 2 }).await;
    (w, disruption)
}

/// karpenter:pkg/controllers/disruption/queue_test.go:209
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_says_what_it_does_and_deletes_its_candidate_once_the_replacement_is_ready() {
    let (w, mut disruption) = node_0_being_replaced().await;
    let replacement = w.replacement().await;
    // A step of the command while its replacement is not ready.
    disruption.reconcile().await.unwrap();
    w.says_on("NodeClaim", &replacement, "DisruptionLaunching", "Launching NodeClaim: Drifted").await;
    w.says_on("NodeClaim", &replacement, "DisruptionWaitingReadiness", "Waiting on readiness to continue disruption")
        .await;
    assert_eq!(w.claims_deleting().await, [(replacement.clone(), false), ("node-0".into(), false)]);
    w.replacement_up(&replacement).await;
    w.disruption_until(&mut disruption, "the candidate deleted", || async {
        w.claims_deleting().await.contains(&("node-0".to_string(), true))
    })
    .await;
    w.says_on("Node", "node-0", "DisruptionTerminating", "Disrupting Node: Drifted").await;
    w.says_on("NodeClaim", "node-0", "DisruptionTerminating", "Disrupting NodeClaim: Drifted").await;
}

/// karpenter:pkg/controllers/disruption/queue_test.go:314
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_without_replacements_deletes_its_candidate_at_once_and_says_so() {
    let w = World::new().await;
    w.pool_with(serde_json::json!({})).await;
    w.running("node-0", "fake-it-3", "on-demand", &[("web-0", 100), ("web-1", 100)]).await;
    w.running("node-1", "fake-it-3", "on-demand", &[("web-2", 100)]).await;
    w.drift_of_node_0().await;
    let mut disruption = Disruption::new(w.ctx.clone());
    w.disruption_until(&mut disruption, "the candidate deleted", || async {
        w.claims_deleting().await.contains(&("node-0".to_string(), true))
    })
    .await;
    assert_eq!(w.claims_deleting().await.len(), 2, "no replacement");
    w.says_on("Node", "node-0", "DisruptionTerminating", "Disrupting Node: Drifted").await;
    w.says_on("NodeClaim", "node-0", "DisruptionTerminating", "Disrupting NodeClaim: Drifted").await;
}

/// karpenter:pkg/controllers/disruption/queue_test.go:179
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_whose_replacement_never_gets_ready_untaints_its_candidate() {
    use k8s_openapi::api::core::v1::Node;
    let (w, mut disruption) = node_0_being_replaced().await;
    let tainted = || async {
        let node = Api::<Node>::all(w.client.clone()).get("node-0").await.unwrap();
        super::taint_keys(&node).iter().any(|t| t == tenon_api::wellknown::TAINT_DISRUPTED)
    };
    assert!(tainted().await, "tainted while it is replaced");
    // Eleven minutes without the replacement Initialized: the command is given up.
    w.ctx.advance(Duration::from_secs(11 * 60));
    w.until("the taint in the cache", |c| {
        c.stores
            .nodes
            .state()
            .iter()
            .any(|n| super::taint_keys(n).iter().any(|t| t == tenon_api::wellknown::TAINT_DISRUPTED))
    })
    .await;
    disruption.reconcile().await.unwrap();
    assert!(!tainted().await, "untainted once the command times out");
    assert!(w.claims_deleting().await.contains(&("node-0".to_string(), false)), "the candidate stays");
}
