//! The emulator as kube-rs sees it: a watcher and a reflector get every change exactly once
//! across a dropped watch, and recover from 410 Gone with a fresh list.

use futures_util::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tenon_kube_emulator::Emulator;

/// (name, resourceVersion, kind) of an event the watcher delivered.
type Seen = (String, String, &'static str);

fn cm(name: &str, v: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "data": {"v": v}})).unwrap()
}

async fn client(emu: &Emulator) -> kube::Client {
    let mut config = kube::Config::new(emu.url.parse().unwrap());
    config.default_namespace = "default".into();
    kube::Client::try_from(config).unwrap()
}

/// Waits until `f` holds, polling.
async fn eventually(what: &str, f: impl Fn() -> bool) {
    for _ in 0..200 {
        if f() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn watcher_and_reflector_see_each_change_once_across_drops_and_410() {
    let emu = Emulator::start().unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client(&emu).await);
    api.create(&PostParams::default(), &cm("a", "1")).await.unwrap();

    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let (reader, writer) = reflector::store::<ConfigMap>();
    let log = seen.clone();
    let stream = watcher(api.clone(), watcher::Config::default().timeout(30)).default_backoff();
    let task = tokio::spawn(reflector(writer, stream).for_each(move |ev| {
        let log = log.clone();
        async move {
            let Ok(ev) = ev else { return };
            let entry = |o: &ConfigMap, k| {
                (
                    o.metadata.name.clone().unwrap_or_default(),
                    o.metadata.resource_version.clone().unwrap_or_default(),
                    k,
                )
            };
            let mut l = log.lock().unwrap();
            match &ev {
                watcher::Event::Apply(o) => l.push(entry(o, "apply")),
                watcher::Event::Delete(o) => l.push(entry(o, "delete")),
                watcher::Event::InitApply(o) => l.push(entry(o, "init")),
                watcher::Event::Init | watcher::Event::InitDone => {}
            }
        }
    }));
    let store = reader.clone();
    eventually("the initial list", || store.state().len() == 1).await;

    api.create(&PostParams::default(), &cm("b", "1")).await.unwrap();
    api.replace("a", &PostParams::default(), &{
        let mut a = api.get("a").await.unwrap();
        a.data = Some(BTreeMap::from([("v".to_string(), "2".to_string())]));
        a
    })
    .await
    .unwrap();
    let store = reader.clone();
    eventually("b and a's update", || {
        store
            .get(&reflector::ObjectRef::new("a").within("default"))
            .is_some_and(|a| a.data.as_ref().unwrap()["v"] == "2")
            && store.state().len() == 2
    })
    .await;

    // The watch is cut; changes made meanwhile arrive once the watcher resumes from its
    // last resourceVersion.
    emu.cut_watches();
    api.create(&PostParams::default(), &cm("c", "1")).await.unwrap();
    api.delete("b", &DeleteParams::default()).await.unwrap();
    let store = reader.clone();
    eventually("c and b's deletion after the drop", || {
        let names: Vec<String> = store.state().iter().filter_map(|o| o.metadata.name.clone()).collect();
        names.len() == 2 && names.contains(&"c".to_string()) && !names.contains(&"b".to_string())
    })
    .await;

    // History is compacted and the watch cut: resuming gets 410 Gone, the watcher lists
    // again, and the store still matches the server.
    api.create(&PostParams::default(), &cm("d", "1")).await.unwrap();
    let store = reader.clone();
    eventually("d", || store.state().len() == 3).await;
    // Re-watches fail until e exists and the log is compacted, so the watcher resumes from d's
    // resourceVersion only then: 410, and a re-list that brings e. (With a single failing
    // re-watch, a fast retry under load could resume before the compaction and see e as a
    // plain change.)
    emu.fail_next("watch", "configmaps", 500, 1_000);
    emu.cut_watches();
    // The cut is seen once the watcher asks again (and is refused): e must not reach the
    // old stream, still open a moment after the cut.
    eventually("the re-watch after the cut", || emu.faults_pending() < 1_000).await;
    api.create(&PostParams::default(), &cm("e", "1")).await.unwrap();
    emu.compact();
    emu.clear_faults();
    let store = reader.clone();
    eventually("e after the 410", || store.state().len() == 4).await;
    let mut names: Vec<String> = reader.state().iter().filter_map(|o| o.metadata.name.clone()).collect();
    names.sort();
    assert_eq!(names, ["a", "c", "d", "e"]);

    task.abort();
    let events = seen.lock().unwrap().clone();
    // Every change outside a (re-)list is delivered exactly once.
    let changes: Vec<&(String, String, &str)> = events.iter().filter(|e| e.2 != "init").collect();
    let mut unique = changes.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), changes.len(), "a change was delivered twice: {events:?}");
    let count = |name: &str, kind: &str| changes.iter().filter(|e| e.0 == name && e.2 == kind).count();
    assert_eq!(count("b", "apply"), 1, "{events:?}");
    assert_eq!(count("a", "apply"), 1, "a's update: {events:?}");
    assert_eq!(count("c", "apply"), 1, "created while the watch was down: {events:?}");
    assert_eq!(count("b", "delete"), 1, "deleted while the watch was down: {events:?}");
    assert_eq!(count("d", "apply"), 1, "{events:?}");
    // After the 410 the re-list brings the state; e arrives either in it or as a change.
    let e_seen = events.iter().filter(|x| x.0 == "e").count();
    assert_eq!(e_seen, 1, "{events:?}");
    // The initial list and the re-list after the 410 are the only list deliveries.
    assert_eq!(events.iter().filter(|x| x.2 == "init" && x.0 == "a").count(), 2, "{events:?}");
}

#[tokio::test]
async fn optimistic_concurrency_and_injected_faults() {
    let emu = Emulator::start().unwrap();
    let api: Api<ConfigMap> = Api::default_namespaced(client(&emu).await);
    let created = api.create(&PostParams::default(), &cm("x", "1")).await.unwrap();
    let mut stale = created.clone();
    let mut fresh = created.clone();
    fresh.data = Some(BTreeMap::from([("v".to_string(), "2".to_string())]));
    api.replace("x", &PostParams::default(), &fresh).await.unwrap();
    stale.data = Some(BTreeMap::from([("v".to_string(), "3".to_string())]));
    match api.replace("x", &PostParams::default(), &stale).await {
        Err(kube::Error::Api(s)) => assert_eq!((s.code, s.reason.as_str()), (409, "Conflict"), "{s:?}"),
        other => panic!("a stale update must conflict, got {other:?}"),
    }
    emu.fail_next("get", "configmaps", 500, 1);
    assert!(matches!(api.get("x").await, Err(kube::Error::Api(s)) if s.code == 500));
    assert_eq!(api.get("x").await.unwrap().data.unwrap()["v"], "2", "only the next request fails");
    // A 429 with Retry-After is retried by the client itself.
    emu.fail_next("create", "configmaps", 429, 1);
    emu.set_latency(Duration::from_millis(100));
    let started = std::time::Instant::now();
    api.create(&PostParams::default(), &cm("y", "1")).await.expect("retried after the 429");
    assert_eq!(emu.faults_pending(), 0, "the 429 was served");
    assert!(
        started.elapsed() >= Duration::from_millis(200),
        "latency applies to both attempts: {:?}",
        started.elapsed()
    );
}

/// The API server drops a created object's status, except that a pod starts Pending.
#[tokio::test]
async fn a_created_pod_is_pending_whatever_status_it_was_sent_with() {
    use k8s_openapi::api::core::v1::Pod;
    let emu = Emulator::start().unwrap();
    let api: Api<Pod> = Api::default_namespaced(client(&emu).await);
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
        "status": {"phase": "Running", "podIP": "10.0.0.1"}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &pod).await.unwrap();
    let status = created.status.unwrap_or_default();
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    assert_eq!(status.pod_ip, None, "the rest of the status is dropped");
}

/// Binding a pod marks it scheduled, as the API server's binding does: `PodScheduled=True`
/// from the binding on, in place of the scheduler's `Unschedulable`.
#[tokio::test]
async fn binding_a_pod_marks_it_scheduled() {
    use k8s_openapi::api::core::v1::Pod;
    let emu = Emulator::start().unwrap();
    let api: Api<Pod> = Api::default_namespaced(client(&emu).await);
    let pod: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "x"}]}
    }))
    .unwrap();
    api.create(&PostParams::default(), &pod).await.unwrap();
    let unschedulable = serde_json::json!({"status": {"conditions": [{"type": "PodScheduled", "status": "False",
        "reason": "Unschedulable", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    api.patch_status("p", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&unschedulable)).await.unwrap();
    let binding = serde_json::json!({"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}});
    let _: serde_json::Value = api.create_subresource("binding", "p", &PostParams::default(), &binding).await.unwrap();
    let bound = api.get("p").await.unwrap();
    assert_eq!(bound.spec.unwrap().node_name.as_deref(), Some("n1"));
    let conditions = bound.status.unwrap().conditions.unwrap_or_default();
    let scheduled: Vec<_> = conditions.iter().filter(|c| c.type_ == "PodScheduled").collect();
    assert_eq!(scheduled.len(), 1, "{conditions:?}");
    assert_eq!(scheduled[0].status, "True");
    assert_eq!(scheduled[0].reason, None);
    let since = scheduled[0].last_transition_time.as_ref().unwrap().0;
    assert!(since.as_second() > 1_767_225_600, "transitioned at the binding, not before: {since}");
}
