//! Tagging a launched instance with its NodeClaim when its CreateFleet was shared by a batch
//! (the call carried only the tags every instance shares): bounded, so a launch reports its
//! instance well inside garbage collection's grace, and retried in the background when EC2
//! does not answer.

use crate::error::api;
use aws_sdk_ec2::types::Tag;
use std::collections::BTreeMap;
use std::time::Duration;
use tenon_core::cloud::CloudError;

/// Tags instance `id` with `tags`.
async fn tag(ec2: &aws_sdk_ec2::Client, id: &str, tags: &BTreeMap<String, String>) -> Result<(), CloudError> {
    let call = ec2
        .create_tags()
        .resources(id)
        .set_tags(Some(tags.iter().map(|(k, v)| Tag::builder().key(k).value(v).build()).collect()));
    call.send().await.map(|_| ()).map_err(|e| api("CreateTags", e))
}

/// The longest a launch waits to tag its batch's instance before reporting it (well inside
/// garbage collection's 30 s grace for an instance no NodeClaim records yet), and a
/// background try waits for its answer.
pub(crate) const TAG_INLINE_WITHIN: Duration = Duration::from_secs(5);

/// [`tag`], given up after `within`.
pub(crate) async fn tag_within(
    ec2: &aws_sdk_ec2::Client,
    id: &str,
    tags: &BTreeMap<String, String>,
    within: Duration,
) -> Result<(), CloudError> {
    match tokio::time::timeout(within, tag(ec2, id, tags)).await {
        Ok(tagged) => tagged,
        Err(_) => {
            Err(CloudError::Api { operation: "CreateTags".into(), message: format!("no answer within {within:?}") })
        }
    }
}

/// Waits between the background tries of a launched instance's tagging: about a minute in
/// all, after which the instance stays accounted for by its NodeClaim's providerID alone.
const TAG_LATER_WAITS_SECS: [u64; 6] = [1, 2, 4, 8, 16, 32];

pub(crate) async fn tag_later(ec2: aws_sdk_ec2::Client, id: String, tags: BTreeMap<String, String>) {
    for wait in TAG_LATER_WAITS_SECS {
        tokio::time::sleep(Duration::from_secs(wait)).await;
        match tag_within(&ec2, &id, &tags, TAG_INLINE_WITHIN).await {
            Ok(()) => return,
            Err(e) => tracing::debug!(instance = %id, error = %e, "tagging a launched instance failed again"),
        }
    }
    tracing::warn!(instance = %id, "gave up tagging a launched instance; its NodeClaim's providerID still accounts for it");
}
