//! Creating the NodeClaims a decision planned (provisioning's, and a disruption's
//! replacements): named here, created together, each outcome booked in the shared state.

use crate::controller::context::Context;
use crate::controller::error::{Error, Failures};
use crate::controller::metrics::catalog as mc;
use crate::controller::names;
use kube::Api;
use kube::api::PostParams;
use std::time::Instant;
use tenon_api::NodeClaim;
use tenon_api::wellknown as wk;
use tenon_core::convert::ClusterObjects;

/// The NodeClaim object of a planned NodeClaim, planned over `snap`.
pub fn planned_nodeclaim(
    planned: &tenon_core::plan::NewNodeClaim,
    snap: &tenon_core::ClusterSnapshot,
    objects: &ClusterObjects,
) -> Option<NodeClaim> {
    let np = objects.nodepools.iter().find(|np| np.metadata.name.as_deref() == Some(planned.nodepool_name.as_str()))?;
    Some(tenon_core::nodeclaim::nodeclaim(planned, np, snap))
}

/// Creates `nc` (provisioning or a disruption's replacement); its name, or `None` when
/// the API refused it (logged). The name is chosen here rather than by `generateName`,
/// so a create whose answer was lost (a 504, a timeout) names the NodeClaim that may
/// exist: decisions wait until the cache shows it or a read says it does not.
pub async fn create_nodeclaim(ctx: &Context, nc: &NodeClaim, reason: &str, failures: &mut Failures) -> Option<String> {
    create_nodeclaims(ctx, vec![nc.clone()], reason, failures).await.pop().flatten()
}

/// Creates NodeClaims together (as Karpenter does a decision's: the client's rate limit
/// paces them, not one round trip after another); each one's name, or `None`, in order.
pub async fn create_nodeclaims(
    ctx: &Context,
    mut ncs: Vec<NodeClaim>,
    reason: &str,
    failures: &mut Failures,
) -> Vec<Option<String>> {
    for nc in &mut ncs {
        if nc.metadata.name.is_none()
            && let Some(prefix) = nc.metadata.generate_name.take()
        {
            nc.metadata.name = Some(format!("{prefix}{}", names::suffix()));
        }
    }
    // Booked before the creates: the lifecycle may see a NodeClaim in its cache and launch
    // it before its create returns, and that first launch is the one that need not look.
    ctx.cluster().created(ncs.iter().filter_map(|nc| nc.metadata.name.as_deref()), Instant::now());
    let outcomes = create_all(&ctx.client, &ncs).await;
    let mut names = Vec::with_capacity(ncs.len());
    for (nc, outcome) in ncs.iter().zip(outcomes) {
        names.push(created(ctx, nc, outcome, reason, failures));
    }
    names
}

/// Books the outcome of creating `nc`: its name, or `None` when the API refused it (logged).
fn created(
    ctx: &Context,
    nc: &NodeClaim,
    outcome: kube::Result<NodeClaim>,
    reason: &str,
    failures: &mut Failures,
) -> Option<String> {
    let pool = nc.metadata.labels.as_ref().and_then(|l| l.get(wk::LABEL_NODEPOOL)).cloned().unwrap_or_default();
    let name = nc.metadata.name.clone().unwrap_or_default();
    match outcome {
        Ok(created) => {
            let name = created.metadata.name.clone().unwrap_or_default();
            ctx.cluster().unobserved.insert(name.clone(), Instant::now());
            // As Karpenter: what the NodeClaim says of its minValues, "false" if it says nothing.
            let relaxed =
                nc.metadata.annotations.as_ref().and_then(|a| a.get(wk::ANNOTATION_NODECLAIM_MIN_VALUES_RELAXED));
            let labels = [
                ("reason", reason),
                ("nodepool", &pool),
                ("min_values_relaxed", relaxed.map_or("false", String::as_str)),
            ];
            ctx.metrics.add(mc::NODECLAIMS_CREATED, &labels, 1);
            tracing::info!(nodeclaim = %name, nodepool = %pool, %reason, "created NodeClaim");
            Some(name)
        }
        Err(e) if names::maybe_stored(&e) => {
            tracing::warn!(nodeclaim = %name, nodepool = %pool, "could not tell whether the NodeClaim was created; decisions wait until that is known");
            ctx.cluster().unobserved.insert(name.clone(), Instant::now());
            failures.push(Error::kube(format!("creating NodeClaim {name} (NodePool {pool})"), e));
            None
        }
        Err(e) => {
            failures.push(Error::kube(format!("creating NodeClaim {name} (NodePool {pool})"), e));
            None
        }
    }
}

/// NodeClaim creates in flight at once.
const CREATES_IN_FLIGHT: usize = 32;

/// Creates each of `ncs` (named already), [`CREATES_IN_FLIGHT`] at a time; the outcomes in
/// the same order.
async fn create_all(client: &kube::Client, ncs: &[NodeClaim]) -> Vec<kube::Result<NodeClaim>> {
    use futures_util::StreamExt;
    let api: Api<NodeClaim> = Api::all(client.clone());
    // Each create owns its NodeClaim: the stream is then Send for the reconciler's task.
    futures_util::stream::iter(ncs.iter().cloned().map(move |nc| {
        let api = api.clone();
        async move { api.create(&PostParams::default(), &nc).await }
    }))
    .buffered(CREATES_IN_FLIGHT)
    .collect()
    .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_decisions_nodeclaims_are_created_together_not_one_round_trip_after_another() {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let emu = tenon_kube_emulator::Emulator::start().unwrap();
        rt.block_on(async {
            let config = kube::Config::new(emu.url.parse().unwrap());
            let client = crate::controller::client_policy::client(
                config,
                &crate::controller::ratelimit::RateLimitLayer { qps: 200, burst: 300 },
                std::sync::Arc::default(),
            )
            .unwrap();
            let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
            for doc in tenon_api::crds::crds_yaml().unwrap().split("\n---\n") {
                let crd: CustomResourceDefinition = serde_yaml::from_str(doc).unwrap();
                crds.create(&PostParams::default(), &crd).await.unwrap();
            }
            let ncs: Vec<NodeClaim> = (0..40)
                .map(|i| {
                    serde_yaml::from_str(&format!("apiVersion: karpenter.sh/v1\nkind: NodeClaim\nmetadata: {{name: nc-{i:02}}}\nspec:\n  nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}\n  requirements: []\n")).unwrap()
                })
                .collect();
            // An API server 100 ms away: forty creates one after another take 4 s.
            emu.set_latency(Duration::from_millis(100));
            let started = Instant::now();
            let outcomes = create_all(&client, &ncs).await;
            let took = started.elapsed();
            let names: Vec<String> = outcomes.into_iter().map(|o| o.unwrap().metadata.name.unwrap()).collect();
            let expected: Vec<String> = (0..40).map(|i| format!("nc-{i:02}")).collect();
            assert_eq!(names, expected, "every outcome, in order");
            assert!(took < Duration::from_secs(1), "forty creates took {took:?}");
        });
        drop(rt);
    }
}
