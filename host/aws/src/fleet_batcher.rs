//! CreateFleet batching, as Karpenter's provider does it: identical launch requests (the same
//! templates, overrides, capacity type and shared tags) arriving within an idle window become
//! one call asking for as many instances, and each caller takes one of them. A wave of a
//! thousand NodeClaims of one NodePool then costs a handful of CreateFleet calls, not a
//! thousand, which is what an account's EC2 request quota needs.
//!
//! A batch of one is sent exactly as before (its NodeClaim's own tags on the instance); a
//! larger one carries the shared tags, and each caller tags its instance with its NodeClaim
//! afterwards (as Karpenter's tagging does).

use crate::Fence;
use aws_sdk_ec2::operation::create_fleet::CreateFleetOutput;
use aws_sdk_ec2::types::{
    DefaultTargetCapacityType, FleetLaunchTemplateConfigRequest, FleetOnDemandAllocationStrategy, FleetType,
    OnDemandOptionsRequest, ResourceType, SpotAllocationStrategy, SpotOptionsRequest, Tag, TagSpecification,
    TargetCapacitySpecificationRequest,
};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// A batch is sent once no request has joined it for this long…
pub const IDLE: Duration = Duration::from_millis(35);
/// …or this long after it opened, whichever comes first (Karpenter's windows).
pub const MAX_WAIT: Duration = Duration::from_secs(1);
/// The most instances one call asks for.
pub const MAX_BATCH: usize = 500;

/// One launch request, as a batch sends it.
#[derive(Clone, Debug)]
pub struct FleetRequest {
    pub configs: Vec<FleetLaunchTemplateConfigRequest>,
    pub spot: bool,
    /// EC2 is to honour the overrides' priorities (a scoring policy ranked them).
    pub prioritized: bool,
    /// The tags every instance of a batch carries (no NodeClaim's own).
    pub shared_tags: BTreeMap<String, String>,
    /// What makes the client token: the cluster and the placements.
    pub token_seed: String,
    /// The NodeClass' `spec.context` (a reserved-capacity or pricing context EC2 applies).
    pub context: Option<String>,
}

impl FleetRequest {
    /// Requests with the same key can share a call.
    pub fn key(&self) -> String {
        format!(
            "{:?}|{}|{}|{:?}|{}|{:?}",
            self.configs, self.spot, self.prioritized, self.shared_tags, self.token_seed, self.context
        )
    }
}

/// A caller in a batch: its NodeClaim, attempt, and all its instance's tags.
#[derive(Clone, Debug)]
pub struct Member {
    pub nodeclaim: String,
    pub attempt: u32,
    pub tags: BTreeMap<String, String>,
}

/// What the call answered (shared by the batch), or its error's code and message.
pub type Answer = Result<Arc<CreateFleetOutput>, (Option<String>, String)>;

/// A caller's share: its place in the batch, the batch's size, the answer.
pub struct Share {
    pub index: usize,
    pub size: usize,
    pub answer: Answer,
}

struct Batch {
    request: FleetRequest,
    members: Vec<(Member, oneshot::Sender<Share>)>,
    opened: Instant,
    last_join: Instant,
    sealed: bool,
}

#[derive(Default)]
pub struct FleetBatcher {
    /// Batches still taking members, by request key.
    open: Arc<Mutex<HashMap<String, Arc<Mutex<Batch>>>>>,
}

impl FleetBatcher {
    /// Joins (or opens) the batch for `request` and waits for its answer.
    pub async fn launch(
        &self,
        ec2: &aws_sdk_ec2::Client,
        fence: &Fence,
        request: FleetRequest,
        member: Member,
    ) -> Share {
        let key = request.key();
        let (tx, rx) = oneshot::channel();
        let now = Instant::now();
        let mut joining = Some((member, tx));
        let opened = {
            let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(b) = open.get(&key) {
                let mut b = b.lock().unwrap_or_else(|e| e.into_inner());
                if !b.sealed && b.members.len() < MAX_BATCH {
                    b.members.extend(joining.take());
                    b.last_join = now;
                }
            }
            joining.map(|m| {
                let batch = Arc::new(Mutex::new(Batch {
                    request,
                    members: vec![m],
                    opened: now,
                    last_join: now,
                    sealed: false,
                }));
                open.insert(key.clone(), batch.clone());
                batch
            })
        };
        if let Some(batch) = opened {
            tokio::spawn(flush(self.open.clone(), key, batch, ec2.clone(), fence.clone()));
        }
        rx.await.unwrap_or_else(|_| Share {
            index: 0,
            size: 1,
            answer: Err((None, "the CreateFleet batch was dropped before it was sent".into())),
        })
    }
}

type Open = Arc<Mutex<HashMap<String, Arc<Mutex<Batch>>>>>;

/// CreateFleet's tag specifications: the fleet (the policy's request-tag condition covers
/// fleet/*), its instances and their volumes, all with `tags`.
pub fn tag_specifications(tags: &BTreeMap<String, String>) -> Vec<TagSpecification> {
    [ResourceType::Fleet, ResourceType::Instance, ResourceType::Volume]
        .into_iter()
        .map(|rt| {
            TagSpecification::builder()
                .resource_type(rt)
                .set_tags(Some(tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()))
                .build()
        })
        .collect()
}

/// Waits out the batch's window, then sends it and hands each member its share.
async fn flush(open: Open, key: String, batch: Arc<Mutex<Batch>>, ec2: aws_sdk_ec2::Client, fence: Fence) {
    loop {
        let due = {
            let b = batch.lock().unwrap_or_else(|e| e.into_inner());
            (b.last_join + IDLE).min(b.opened + MAX_WAIT)
        };
        tokio::time::sleep_until(due.into()).await;
        let mut b = batch.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if now >= b.last_join + IDLE || now >= b.opened + MAX_WAIT {
            b.sealed = true;
            break;
        }
    }
    {
        let mut open = open.lock().unwrap_or_else(|e| e.into_inner());
        if open.get(&key).is_some_and(|b| Arc::ptr_eq(b, &batch)) {
            open.remove(&key);
        }
    }
    let (request, members) = {
        let mut b = batch.lock().unwrap_or_else(|e| e.into_inner());
        (b.request.clone(), std::mem::take(&mut b.members))
    };
    let size = members.len();
    let who: Vec<&Member> = members.iter().map(|(m, _)| m).collect();
    let answer = send(&ec2, &fence, &request, &who).await;
    for (index, (_, tx)) in members.into_iter().enumerate() {
        let _ = tx.send(Share { index, size, answer: answer.clone() });
    }
}

/// The same batch repeated (a retry of the call) carries the same token, so EC2 answers
/// with that call's result instead of launching again; a new attempt does not.
fn client_token(seed: &str, members: &[&Member]) -> String {
    let mut who: Vec<String> = members.iter().map(|m| format!("{}#{}", m.nodeclaim, m.attempt)).collect();
    who.sort();
    let mut h = Sha256::new();
    h.update(seed.as_bytes());
    for w in who {
        h.update(format!("|{w}").as_bytes());
    }
    h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

async fn send(ec2: &aws_sdk_ec2::Client, fence: &Fence, request: &FleetRequest, members: &[&Member]) -> Answer {
    fence.check("CreateFleet").map_err(|e| (None, e.to_string()))?;
    let tags = match members {
        [one] => &one.tags,
        _ => &request.shared_tags,
    };
    let mut fleet = ec2
        .create_fleet()
        .set_context(request.context.clone())
        .r#type(FleetType::Instant)
        .set_launch_template_configs(Some(request.configs.clone()))
        .target_capacity_specification(
            TargetCapacitySpecificationRequest::builder()
                .total_target_capacity(members.len() as i32)
                .default_target_capacity_type(if request.spot {
                    DefaultTargetCapacityType::Spot
                } else {
                    DefaultTargetCapacityType::OnDemand
                })
                .build(),
        )
        .set_tag_specifications(Some(tag_specifications(tags)))
        .client_token(client_token(&request.token_seed, members));
    fleet = match (request.spot, request.prioritized) {
        (true, true) => fleet.spot_options(
            SpotOptionsRequest::builder()
                .allocation_strategy(SpotAllocationStrategy::CapacityOptimizedPrioritized)
                .build(),
        ),
        (true, false) => fleet.spot_options(
            SpotOptionsRequest::builder().allocation_strategy(SpotAllocationStrategy::PriceCapacityOptimized).build(),
        ),
        (false, true) => fleet.on_demand_options(
            OnDemandOptionsRequest::builder().allocation_strategy(FleetOnDemandAllocationStrategy::Prioritized).build(),
        ),
        (false, false) => fleet.on_demand_options(
            OnDemandOptionsRequest::builder().allocation_strategy(FleetOnDemandAllocationStrategy::LowestPrice).build(),
        ),
    };
    match fleet.send().await {
        Ok(out) => Ok(Arc::new(out)),
        Err(e) => {
            let code = crate::error::code(&e);
            let message = match crate::error::api("CreateFleet", e) {
                tenon_core::cloud::CloudError::Api { message, .. } => message,
                other => other.to_string(),
            };
            Err((code, message))
        }
    }
}
