//! TerminateInstances batching, as Karpenter's provider does it: terminations requested
//! within a short window (a consolidation or drift round deleting many NodeClaims, each on
//! its own task) become one DescribeInstances of every id and one TerminateInstances per
//! chunk of the live ones. Ids already gone are not an error.

use crate::error::{api, code};
use crate::instances::{CHUNK, get_many};
use crate::window::Window;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::oneshot;

/// How long the first termination of a batch waits for others.
pub const WINDOW: Duration = Duration::from_millis(20);

/// Why a caller's termination failed: AWS's message, and the zones of its instances that
/// were not terminated (for the failure counter).
pub type Failed = (String, Vec<String>);

type Reply = oneshot::Sender<Result<(), Failed>>;

#[derive(Default)]
pub struct TerminateBatcher {
    window: Window<(Vec<String>, Reply)>,
}

impl TerminateBatcher {
    /// Terminates `ids` with whatever else is asked within the window.
    pub async fn terminate(&self, ec2: &aws_sdk_ec2::Client, ids: &[String]) -> Result<(), Failed> {
        let (tx, rx) = oneshot::channel();
        let ec2 = ec2.clone();
        self.window.add((ids.to_vec(), tx), WINDOW, move |waiting| flush(waiting, ec2));
        rx.await.unwrap_or_else(|_| Err(("the TerminateInstances batch was dropped before it was sent".into(), vec![])))
    }
}

async fn flush(waiting: Vec<(Vec<String>, Reply)>, ec2: aws_sdk_ec2::Client) {
    let mut ids: Vec<String> = waiting.iter().flat_map(|(ids, _)| ids.iter().cloned()).collect();
    ids.sort();
    ids.dedup();
    // Per id, why it was not terminated.
    let mut failed: BTreeMap<String, String> = BTreeMap::new();
    let mut zone: BTreeMap<String, String> = BTreeMap::new();
    match get_many(&ec2, &ids).await {
        Err(e) => {
            for id in &ids {
                failed.insert(id.clone(), e.to_string());
            }
        }
        Ok(existing) => {
            zone = existing.iter().map(|(id, i)| (id.clone(), i.zone.clone())).collect();
            let live: Vec<String> = existing.values().filter(|i| i.state.is_live()).map(|i| i.id.clone()).collect();
            for chunk in live.chunks(CHUNK) {
                match ec2.terminate_instances().set_instance_ids(Some(chunk.to_vec())).send().await {
                    Ok(_) => {}
                    Err(e) if code(&e).as_deref() == Some("InvalidInstanceID.NotFound") => {}
                    Err(e) => {
                        let message = match api("TerminateInstances", e) {
                            tenon_core::cloud::CloudError::Api { message, .. } => message,
                            other => other.to_string(),
                        };
                        for id in chunk {
                            failed.insert(id.clone(), message.clone());
                        }
                    }
                }
            }
        }
    }
    for (ids, tx) in waiting {
        let mine: Vec<&String> = ids.iter().filter(|id| failed.contains_key(*id)).collect();
        let answer = match mine.first() {
            None => Ok(()),
            Some(first) => Err((failed[*first].clone(), mine.iter().filter_map(|id| zone.get(*id).cloned()).collect())),
        };
        let _ = tx.send(answer);
    }
}
