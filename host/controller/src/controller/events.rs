//! Kubernetes Events with Karpenter's reasons, recorded as Karpenter's recorder does: the same
//! (object, reason, message) at most once per dedupe window (2 minutes; 5 for
//! `FailedScheduling`, 1 for `NoCompatibleInstanceTypes` and a NodePool's `DisruptionBlocked`,
//! 15 for `Unconsolidatable`, whatever its message), `Nominated` rate-limited across all
//! pods (5 per second, bursts of 10), and posted from a bounded queue by a task of their own,
//! so a wave of 10,000 pending pods never waits on Event writes (an Event the full queue
//! cannot take is dropped and counted, never waited for).

use super::ratelimit::TokenBucket;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::PostParams;
use kube::{Api, Client};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Karpenter's default dedupe window.
pub const DEDUPE_FOR: Duration = Duration::from_secs(120);
/// `FailedScheduling`'s (Karpenter's `PodFailedToScheduleEvent`).
pub const FAILED_SCHEDULING_DEDUPE_FOR: Duration = Duration::from_secs(300);
/// `NoCompatibleInstanceTypes`' (Karpenter's).
pub const NO_COMPATIBLE_TYPES_DEDUPE_FOR: Duration = Duration::from_secs(60);
/// `Unconsolidatable`'s, keyed by the object alone whatever the message (Karpenter's).
pub const UNCONSOLIDATABLE_DEDUPE_FOR: Duration = Duration::from_secs(900);
/// A NodePool's `DisruptionBlocked` (its budgets can change every minute; Karpenter's).
pub const NODEPOOL_BLOCKED_DEDUPE_FOR: Duration = Duration::from_secs(60);
/// Events waiting to be posted, at most.
pub const QUEUE: usize = 1024;

type Key = (String, String, String);

pub struct Recorder {
    /// Key → until when the same Event is not posted again.
    sent: Mutex<HashMap<Key, Instant>>,
    nominations: Mutex<TokenBucket>,
    /// `None`: posted inline by `publish` (tests that look for an Event right after a step).
    queue: Option<mpsc::Sender<(Client, Event)>>,
    /// Events dropped by the rate limit or a full queue.
    pub dropped: AtomicU64,
}

impl Default for Recorder {
    /// Posting inline.
    fn default() -> Recorder {
        Recorder::with_queue(None)
    }
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
    pub fn pod_object(p: &tenon_core::cached_pod::Pod) -> Involved {
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
    fn with_queue(queue: Option<mpsc::Sender<(Client, Event)>>) -> Recorder {
        Recorder {
            sent: Mutex::new(HashMap::new()),
            nominations: Mutex::new(TokenBucket::new(5, 10, Instant::now())),
            queue,
            dropped: AtomicU64::new(0),
        }
    }

    /// A recorder posting from a queue of [`QUEUE`] Events, by a task it starts (call within
    /// the runtime).
    pub fn queued() -> Recorder {
        let (tx, mut rx) = mpsc::channel::<(Client, Event)>(QUEUE);
        tokio::spawn(async move {
            while let Some((client, ev)) = rx.recv().await {
                post(&client, &ev).await;
            }
        });
        Recorder::with_queue(Some(tx))
    }

    /// Whether an Event with `key` may be posted at `now` (and notes it if so).
    fn admit(&self, key: Key, reason: &str, now: Instant) -> bool {
        let window = match reason {
            "FailedScheduling" => FAILED_SCHEDULING_DEDUPE_FOR,
            "NoCompatibleInstanceTypes" => NO_COMPATIBLE_TYPES_DEDUPE_FOR,
            "Unconsolidatable" => UNCONSOLIDATABLE_DEDUPE_FOR,
            "DisruptionBlocked" if key.0.starts_with("NodePool/") => NODEPOOL_BLOCKED_DEDUPE_FOR,
            _ => DEDUPE_FOR,
        };
        let Ok(mut sent) = self.sent.lock() else { return true };
        if sent.get(&key).is_some_and(|until| now < *until) {
            return false;
        }
        if reason == "Nominated" && self.nominations.lock().map(|mut b| b.take(now).is_err()).unwrap_or(false) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        // Expired keys go as new ones come: the set is bounded by what one window sees.
        if sent.len() >= QUEUE * 4 {
            sent.retain(|_, until| now < *until);
        }
        sent.insert(key, now + window);
        true
    }

    pub async fn publish(&self, client: &Client, obj: &Involved, type_: &str, reason: &str, message: &str) {
        let key = (
            format!(
                "{}/{}/{}/{}",
                obj.kind,
                obj.namespace.as_deref().unwrap_or(""),
                obj.name,
                obj.uid.as_deref().unwrap_or("")
            ),
            reason.to_string(),
            // Karpenter says why a node is not consolidatable once per window, whatever why.
            if reason == "Unconsolidatable" { String::new() } else { message.to_string() },
        );
        if !self.admit(key, reason, Instant::now()) {
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
        match &self.queue {
            None => post(client, &ev).await,
            Some(q) => {
                if q.try_send((client.clone(), ev)).is_err() {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
}

async fn post(client: &Client, ev: &Event) {
    let ns = ev.metadata.namespace.clone().unwrap_or_else(|| "default".into());
    if let Err(e) = Api::<Event>::namespaced(client.clone(), &ns).create(&PostParams::default(), ev).await {
        tracing::warn!(reason = ev.reason.as_deref().unwrap_or(""), error = %e, "could not publish an event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str, reason: &str) -> Key {
        (format!("Pod/ns/{name}/uid"), reason.into(), "m".into())
    }

    #[test]
    fn the_same_event_waits_out_its_dedupe_window() {
        let r = Recorder::default();
        let t0 = Instant::now();
        assert!(r.admit(key("a", "Evicted"), "Evicted", t0));
        assert!(!r.admit(key("a", "Evicted"), "Evicted", t0 + Duration::from_secs(119)));
        assert!(r.admit(key("a", "Evicted"), "Evicted", t0 + Duration::from_secs(121)), "the window has passed");
        assert!(r.admit(key("b", "Evicted"), "Evicted", t0), "another object");
        assert!(r.admit(key("a", "FailedScheduling"), "FailedScheduling", t0));
        assert!(!r.admit(key("a", "FailedScheduling"), "FailedScheduling", t0 + Duration::from_secs(299)));
        let minutes = |m: u64| t0 + Duration::from_secs(m * 60);
        assert!(r.admit(key("a", "Unconsolidatable"), "Unconsolidatable", t0));
        assert!(!r.admit(key("a", "Unconsolidatable"), "Unconsolidatable", minutes(14)));
        assert!(r.admit(key("a", "Unconsolidatable"), "Unconsolidatable", minutes(15) + Duration::from_secs(1)));
        let pool = ("NodePool//p/uid".to_string(), "DisruptionBlocked".to_string(), "m".to_string());
        assert!(r.admit(pool.clone(), "DisruptionBlocked", t0));
        assert!(r.admit(pool, "DisruptionBlocked", minutes(1) + Duration::from_secs(1)), "a NodePool's: 1 minute");
        assert!(r.admit(key("a", "DisruptionBlocked"), "DisruptionBlocked", t0));
        assert!(!r.admit(key("a", "DisruptionBlocked"), "DisruptionBlocked", minutes(1) + Duration::from_secs(1)));
    }

    #[test]
    fn a_queued_recorder_posts_from_its_own_task() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        rt.block_on(async {
            let emu = tenon_kube_emulator::Emulator::start().unwrap();
            let client = Client::try_from(kube::Config::new(emu.url.parse().unwrap())).unwrap();
            let r = Recorder::queued();
            let obj = Involved {
                api_version: "v1".into(),
                kind: "Pod".into(),
                namespace: Some("default".into()),
                name: "p".into(),
                uid: Some("u".into()),
            };
            r.publish(&client, &obj, "Normal", "Nominated", "Pod should schedule on: nodeclaim/x").await;
            let events: Api<Event> = Api::namespaced(client.clone(), "default");
            for _ in 0..50 {
                let items = events.list(&Default::default()).await.unwrap().items;
                if let Some(e) = items.first() {
                    assert_eq!(e.reason.as_deref(), Some("Nominated"));
                    assert_eq!(e.involved_object.name.as_deref(), Some("p"));
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            panic!("the queued Event was never posted");
        });
    }

    #[test]
    fn nominations_are_limited_to_bursts_of_ten_then_five_a_second() {
        let r = Recorder::default();
        let t0 = Instant::now();
        let admitted = (0..100).filter(|i| r.admit(key(&format!("p{i}"), "Nominated"), "Nominated", t0)).count();
        assert_eq!(admitted, 10);
        let later = t0 + Duration::from_secs(1);
        let more = (100..200).filter(|i| r.admit(key(&format!("p{i}"), "Nominated"), "Nominated", later)).count();
        assert_eq!(more, 5);
        assert_eq!(r.dropped.load(Ordering::Relaxed), 185);
        assert!(r.admit(key("x", "FailedScheduling"), "FailedScheduling", t0), "other reasons are not limited");
    }
}
