//! The three CustomResourceDefinitions, as `tenon crds` prints them and the charts ship them.

use crate::{EC2NodeClass, NodeClaim, NodePool};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

/// NodePool, NodeClaim and EC2NodeClass, in that order.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![NodePool::crd(), NodeClaim::crd(), EC2NodeClass::crd()]
}

/// The CRDs as one multi-document YAML stream.
pub fn crds_yaml() -> Result<String, serde_yaml::Error> {
    let docs = crds().iter().map(serde_yaml::to_string).collect::<Result<Vec<_>, _>>()?;
    Ok(docs.iter().map(|d| format!("---\n{d}")).collect())
}
