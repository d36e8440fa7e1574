//! DescribeInstances batching, as Karpenter's provider does it: the lookups launches make
//! (an instance by id, the instance tagged with a NodeClaim) arriving within a short window
//! become one call per kind, with every id or NodeClaim name as a filter value, and each
//! caller gets its own part of the answer. A wave of launches then describes in a handful of
//! calls instead of two per NodeClaim.

use crate::instances::{CHUNK, describe};
use crate::window::Window;
use aws_sdk_ec2::types::Filter;
use std::collections::BTreeMap;
use std::time::Duration;
use tenon_api::wellknown as wk;
use tenon_core::cloud::{CloudError, Instance, InstanceState};
use tokio::sync::oneshot;

/// How long the first lookup of a batch waits for others: Karpenter's batcher idles 100 ms
/// (at most 1 s). At 20 ms a wave of launches, paced by the CreateFleet slots, made two
/// DescribeInstances calls for every three nodes.
pub const WINDOW: Duration = Duration::from_millis(100);
/// NodeClaim names per tag filter.
const TAG_VALUES: usize = 200;

type Reply = oneshot::Sender<Result<Vec<Instance>, String>>;

/// A lookup waiting for its window: by instance id, or by the NodeClaim an instance is
/// tagged with.
enum Lookup {
    Id(String, Reply),
    NodeClaim(String, Reply),
}

#[derive(Default)]
pub struct DescribeBatcher {
    window: Window<Lookup>,
}

fn failed(message: String) -> CloudError {
    CloudError::Api { operation: "DescribeInstances".into(), message }
}

impl DescribeBatcher {
    /// The live instance `id` (`NotFound` when EC2 does not know it or it is terminated).
    pub async fn get(&self, ec2: &aws_sdk_ec2::Client, cluster: &str, id: &str) -> Result<Instance, CloudError> {
        let found = self.ask(ec2, cluster, |tx| Lookup::Id(id.to_string(), tx)).await?;
        found
            .into_iter()
            .find(|i| i.state != InstanceState::Terminated)
            .ok_or_else(|| CloudError::NotFound(id.to_string()))
    }

    /// The earliest launched live instance of this cluster tagged with `nodeclaim`.
    pub async fn find_by_nodeclaim(
        &self,
        ec2: &aws_sdk_ec2::Client,
        cluster: &str,
        nodeclaim: &str,
    ) -> Result<Option<Instance>, CloudError> {
        let mut found = self.ask(ec2, cluster, |tx| Lookup::NodeClaim(nodeclaim.to_string(), tx)).await?;
        found.sort_by(|a, b| a.launched_at.cmp(&b.launched_at).then(a.id.cmp(&b.id)));
        Ok(found.into_iter().next())
    }

    async fn ask(
        &self,
        ec2: &aws_sdk_ec2::Client,
        cluster: &str,
        lookup: impl FnOnce(Reply) -> Lookup,
    ) -> Result<Vec<Instance>, CloudError> {
        let (tx, rx) = oneshot::channel();
        let (ec2, cluster) = (ec2.clone(), cluster.to_string());
        self.window.add(lookup(tx), WINDOW, move |lookups| flush(lookups, ec2, cluster));
        match rx.await {
            Ok(answer) => answer.map_err(failed),
            Err(_) => Err(failed("the DescribeInstances batch was dropped before it was sent".into())),
        }
    }
}

async fn flush(lookups: Vec<Lookup>, ec2: aws_sdk_ec2::Client, cluster: String) {
    let (mut by_id, mut by_nodeclaim) = (Vec::new(), Vec::new());
    for l in lookups {
        match l {
            Lookup::Id(id, tx) => by_id.push((id, tx)),
            Lookup::NodeClaim(name, tx) => by_nodeclaim.push((name, tx)),
        }
    }
    if !by_id.is_empty() {
        let ids: Vec<String> = by_id.iter().map(|(id, _)| id.clone()).collect();
        let mut answer: Result<BTreeMap<String, Vec<Instance>>, String> = Ok(BTreeMap::new());
        for chunk in ids.chunks(CHUNK) {
            // An id filter (unlike InstanceIds) ignores ids EC2 does not know.
            let filter = Filter::builder().name("instance-id").set_values(Some(dedup(chunk))).build();
            merge(&mut answer, describe(&ec2, vec![filter]).await, |i| Some(i.id.clone()));
        }
        reply(by_id, answer);
    }
    if !by_nodeclaim.is_empty() {
        let names: Vec<String> = by_nodeclaim.iter().map(|(n, _)| n.clone()).collect();
        let mut answer: Result<BTreeMap<String, Vec<Instance>>, String> = Ok(BTreeMap::new());
        for chunk in names.chunks(TAG_VALUES) {
            let filters = vec![
                Filter::builder().name(format!("tag:{}", wk::TAG_NODECLAIM)).set_values(Some(dedup(chunk))).build(),
                Filter::builder().name(format!("tag:{}{cluster}", wk::TAG_CLUSTER_PREFIX)).values("owned").build(),
                Filter::builder().name("instance-state-name").values("pending").values("running").build(),
            ];
            merge(&mut answer, describe(&ec2, filters).await, |i| i.tags.get(wk::TAG_NODECLAIM).cloned());
        }
        reply(by_nodeclaim, answer);
    }
}

fn dedup(values: &[String]) -> Vec<String> {
    let mut v = values.to_vec();
    v.sort();
    v.dedup();
    v
}

/// Files a call's instances under `key`; the first error is the whole answer's.
fn merge(
    answer: &mut Result<BTreeMap<String, Vec<Instance>>, String>,
    call: Result<Vec<Instance>, CloudError>,
    key: impl Fn(&Instance) -> Option<String>,
) {
    match (answer.as_mut(), call) {
        (Ok(found), Ok(instances)) => {
            for i in instances {
                if let Some(k) = key(&i) {
                    found.entry(k).or_default().push(i);
                }
            }
        }
        (Ok(_), Err(e)) => *answer = Err(e.to_string()),
        (Err(_), _) => {}
    }
}

fn reply(waiting: Vec<(String, Reply)>, answer: Result<BTreeMap<String, Vec<Instance>>, String>) {
    for (key, tx) in waiting {
        let mine = match &answer {
            Ok(found) => Ok(found.get(&key).cloned().unwrap_or_default()),
            Err(e) => Err(e.clone()),
        };
        let _ = tx.send(mine);
    }
}
