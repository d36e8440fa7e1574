//! Kubernetes Events with Karpenter's reasons, each (object, reason, message) published once
//! per controller lifetime so a stuck pod does not flood the API server.

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use std::collections::BTreeSet;
use std::sync::Mutex;

#[derive(Default)]
pub struct Recorder {
    sent: Mutex<BTreeSet<(String, String, String)>>,
}

pub struct Involved {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: Option<String>,
}

impl Involved {
    /// A cluster-scoped object (NodePool, NodeClaim, EC2NodeClass).
    pub fn cluster_scoped(api_version: &str, kind: &str, meta: &ObjectMeta) -> Involved {
        Involved {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: None,
            name: meta.name.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
        }
    }

    /// A pod as read from the API server.
    pub fn pod_object(p: &k8s_openapi::api::core::v1::Pod) -> Involved {
        Involved {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: p.metadata.namespace.clone(),
            name: p.metadata.name.clone().unwrap_or_default(),
            uid: p.metadata.uid.clone(),
        }
    }

    pub fn pod(p: &tenon_core::model::Pod) -> Involved {
        Involved {
            api_version: "v1".into(),
            kind: "Pod".into(),
            namespace: Some(p.namespace.clone()),
            name: p.name.clone(),
            uid: Some(p.uid.clone()),
        }
    }
}

impl Recorder {
    pub async fn publish(&self, client: &Client, obj: &Involved, type_: &str, reason: &str, message: &str) {
        let key = (
            format!("{}/{}/{}", obj.kind, obj.namespace.as_deref().unwrap_or(""), obj.name),
            reason.to_string(),
            message.to_string(),
        );
        if let Ok(mut s) = self.sent.lock()
            && !s.insert(key)
        {
            return;
        }
        let ns = obj.namespace.clone().unwrap_or_else(|| "default".into());
        let now = super::conditions::now_time();
        let ev = Event {
            metadata: ObjectMeta {
                generate_name: Some(format!("{}.", obj.name)),
                namespace: Some(ns.clone()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                api_version: Some(obj.api_version.clone()),
                kind: Some(obj.kind.clone()),
                name: Some(obj.name.clone()),
                namespace: obj.namespace.clone(),
                uid: obj.uid.clone(),
                ..Default::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some(type_.into()),
            source: Some(EventSource { component: Some("karpenter".into()), host: None }),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now.clone()),
            event_time: Some(MicroTime(now.0)),
            reporting_component: Some("karpenter".into()),
            reporting_instance: Some("tenon".into()),
            action: Some(reason.into()),
            count: Some(1),
            ..Default::default()
        };
        if let Err(e) = Api::<Event>::namespaced(client.clone(), &ns).create(&PostParams::default(), &ev).await {
            tracing::warn!(reason, error = %e, "could not publish an event");
        }
    }
}
