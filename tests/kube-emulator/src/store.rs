//! The in-memory object store: one global resourceVersion, a bounded change log for watches,
//! Kubernetes' create/update/delete semantics (generateName, optimistic concurrency,
//! generation, status subresource, finalizers and deletionTimestamp), CRD registration and
//! PodDisruptionBudget status.

use crate::registry::{self, ResourceType};
use serde_json::{Value, json};
use std::collections::{BTreeMap, VecDeque};

/// Changes kept for watches; older resourceVersions get 410 Gone.
pub const LOG_CAPACITY: usize = 20_000;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    pub group: String,
    pub plural: String,
    pub namespace: String,
    pub name: String,
}

#[derive(Clone, Debug)]
pub struct Change {
    pub rv: u64,
    pub group: String,
    pub plural: String,
    pub namespace: String,
    pub kind: &'static str,
    pub object: Value,
}

/// An API error as a `Status`.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// Sent as `Retry-After` (client-go then retries by itself). The PDB refusal of an
    /// eviction has none, so kubectl drain sees it and reports it, as against a real server.
    pub retry_after: Option<u32>,
}

impl ApiError {
    pub fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        ApiError { code, reason, message: message.into(), details: None, retry_after: None }
    }

    pub fn not_found(t: &ResourceType, name: &str) -> Self {
        let resource = if t.group.is_empty() { t.plural.clone() } else { format!("{}.{}", t.plural, t.group) };
        ApiError {
            details: Some(json!({"name": name, "group": t.group, "kind": t.plural})),
            ..ApiError::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
        }
    }

    pub fn status(&self) -> Value {
        let mut s = json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

pub struct Store {
    pub rv: u64,
    pub types: Vec<ResourceType>,
    objects: BTreeMap<Key, Value>,
    log: VecDeque<Change>,
    /// The oldest resourceVersion a watch may resume from.
    pub oldest: u64,
    uid: u64,
    /// Clock for timestamps, seconds since the epoch (tests may move it).
    pub now: fn() -> i64,
}

fn system_now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// A custom resource pruned, defaulted and validated against its CRD's schema, as the API
/// server admits it (`old`: the stored object, on an update); refused with `422 Invalid`.
fn admit(t: &ResourceType, obj: &mut Value, old: Option<&Value>) -> Result<(), ApiError> {
    let Some(schema) = &t.schema else { return Ok(()) };
    tenon_admission::admit(schema, obj, old).map_err(|errors| {
        let invalid = tenon_admission::Invalid::new(&t.kind, &t.group, meta_str(obj, "name"), &errors);
        ApiError { details: Some(invalid.details), ..ApiError::new(422, "Invalid", invalid.message) }
    })
}

pub fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Seconds since the epoch of an RFC 3339 time this emulator wrote (`…Z`, whole seconds).
fn parse_rfc3339(s: &str) -> Option<i64> {
    let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (hh, mm, ss) = (n(11..13)?, n(14..16)?, n(17..19)?);
    // Days from civil (Howard Hinnant's algorithm), the inverse of `rfc3339`.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some((era * 146_097 + doe - 719_468) * 86_400 + hh * 3600 + mm * 60 + ss)
}

impl Default for Store {
    fn default() -> Self {
        let mut s = Store {
            rv: 1,
            types: registry::builtins(),
            objects: BTreeMap::new(),
            log: VecDeque::new(),
            oldest: 1,
            uid: 0,
            now: system_now,
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let t = s.find("", "namespaces").expect("namespaces is built in");
            let _ = s.create(&t, "", json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}), false);
        }
        s
    }
}

fn meta_str<'a>(o: &'a Value, f: &str) -> &'a str {
    o["metadata"][f].as_str().unwrap_or_default()
}

/// The object without metadata and status: what a change to bumps `generation`.
fn spec_part(o: &Value) -> Value {
    let mut c = o.clone();
    if let Some(m) = c.as_object_mut() {
        m.remove("metadata");
        m.remove("status");
    }
    c
}

impl Store {
    pub fn find(&self, group: &str, plural: &str) -> Option<ResourceType> {
        self.types.iter().find(|t| t.group == group && t.plural == plural).cloned()
    }

    pub fn find_version(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        self.types.iter().find(|t| t.group == group && t.version == version && t.plural == plural).cloned()
    }

    fn key(t: &ResourceType, ns: &str, name: &str) -> Key {
        Key {
            group: t.group.clone(),
            plural: t.plural.clone(),
            namespace: if t.namespaced { ns.into() } else { String::new() },
            name: name.into(),
        }
    }

    fn record(&mut self, t: &ResourceType, ns: &str, kind: &'static str, object: Value) {
        self.log.push_back(Change {
            rv: self.rv,
            group: t.group.clone(),
            plural: t.plural.clone(),
            namespace: if t.namespaced { ns.into() } else { String::new() },
            kind,
            object,
        });
        while self.log.len() > LOG_CAPACITY {
            if let Some(c) = self.log.pop_front() {
                self.oldest = c.rv;
            }
        }
    }

    /// Forgets the change log up to now: watches from older versions get 410 Gone.
    pub fn compact(&mut self) {
        self.log.clear();
        self.oldest = self.rv;
    }

    /// Changes after `rv` to (group, plural[, namespace]); `Err` when `rv` is too old.
    pub fn changes_since(&self, rv: u64, group: &str, plural: &str, ns: Option<&str>) -> Result<Vec<Change>, ApiError> {
        // Changes after `rv` are complete only if nothing after it was dropped.
        if rv < self.oldest {
            return Err(ApiError::new(410, "Expired", format!("too old resource version: {rv} ({})", self.oldest)));
        }
        Ok(self
            .log
            .iter()
            .filter(|c| c.rv > rv && c.group == group && c.plural == plural && ns.is_none_or(|n| c.namespace == n))
            .cloned()
            .collect())
    }

    /// The object as served in `t`'s version.
    fn served(t: &ResourceType, mut o: Value) -> Value {
        o["apiVersion"] = json!(t.api_version());
        o["kind"] = json!(t.kind);
        o
    }

    pub fn get(&self, t: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.objects
            .get(&Self::key(t, ns, name))
            .cloned()
            .map(|o| Self::served(t, o))
            .ok_or_else(|| ApiError::not_found(t, name))
    }

    /// Every object of `t` (in `ns` when given), in name order.
    pub fn list(&self, t: &ResourceType, ns: Option<&str>) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|(k, _)| k.group == t.group && k.plural == t.plural && ns.is_none_or(|n| k.namespace == n))
            .map(|(_, o)| Self::served(t, o.clone()))
            .collect()
    }

    fn namespace_exists(&self, ns: &str) -> bool {
        self.objects.contains_key(&Key {
            group: String::new(),
            plural: "namespaces".into(),
            namespace: String::new(),
            name: ns.into(),
        })
    }

    pub fn create(&mut self, t: &ResourceType, ns: &str, mut obj: Value, dry_run: bool) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::new(400, "BadRequest", "the body must be a JSON object"));
        }
        if t.namespaced {
            if ns.is_empty() {
                return Err(ApiError::new(400, "BadRequest", "a namespace is required"));
            }
            if !self.namespace_exists(ns) {
                return Err(ApiError {
                    details: Some(json!({"name": ns, "kind": "namespaces"})),
                    ..ApiError::new(404, "NotFound", format!("namespaces \"{ns}\" not found"))
                });
            }
            let body_ns = meta_str(&obj, "namespace");
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::new(
                    400,
                    "BadRequest",
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        let mut name = meta_str(&obj, "name").to_string();
        if name.is_empty() {
            let prefix = meta_str(&obj, "generateName");
            if prefix.is_empty() {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    format!(
                        "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                        t.kind
                    ),
                ));
            }
            self.uid += 1;
            name = format!("{prefix}{:05x}", (self.uid * 7919 + self.rv) % 0xfffff);
        }
        let key = Self::key(t, ns, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError {
                details: Some(json!({"name": name, "group": t.group, "kind": t.plural})),
                ..ApiError::new(
                    409,
                    "AlreadyExists",
                    format!(
                        "{} \"{name}\" already exists",
                        if t.group.is_empty() { t.plural.clone() } else { format!("{}.{}", t.plural, t.group) }
                    ),
                )
            });
        }
        if t.kind == "CustomResourceDefinition" {
            obj["status"] = crd_status(&obj, (self.now)());
        } else if t.has_status() {
            // Status is written only through the status subresource, never on create.
            if let Some(m) = obj.as_object_mut() {
                m.remove("status");
            }
            // Except a pod's phase: the API server starts every pod Pending.
            if t.kind == "Pod" && t.group.is_empty() {
                obj["status"] = json!({"phase": "Pending"});
            }
        }
        self.uid += 1;
        let m = &mut obj["metadata"];
        m["name"] = json!(name);
        if t.namespaced {
            m["namespace"] = json!(ns);
        }
        m["uid"] = json!(format!("{:08x}-0000-4000-8000-{:012x}", self.uid, self.uid));
        m["creationTimestamp"] = json!(rfc3339((self.now)()));
        m["generation"] = json!(1);
        admit(t, &mut obj, None)?;
        if dry_run {
            obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
            return Ok(Self::served(t, obj));
        }
        Ok(self.commit(t, ns, key, Self::served(t, obj), "ADDED"))
    }

    /// Stores `obj` at a new resourceVersion, logs the change and runs its side effects.
    fn commit(&mut self, t: &ResourceType, ns: &str, key: Key, mut obj: Value, kind: &'static str) -> Value {
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = json!(self.rv.to_string());
        if kind == "DELETED" {
            self.objects.remove(&key);
        } else {
            self.objects.insert(key, obj.clone());
        }
        self.record(t, ns, kind, obj.clone());
        self.after_change(t, ns);
        obj
    }

    /// PUT: the whole object (`status: false`) or its status (`status: true`).
    pub fn update(
        &mut self,
        t: &ResourceType,
        ns: &str,
        name: &str,
        mut obj: Value,
        status: bool,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        let key = Self::key(t, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(ApiError::not_found(t, name));
        };
        let sent_rv = meta_str(&obj, "resourceVersion");
        if !sent_rv.is_empty() && sent_rv != meta_str(&old, "resourceVersion") {
            let resource = if t.group.is_empty() { t.plural.clone() } else { format!("{}.{}", t.plural, t.group) };
            return Err(ApiError {
                details: Some(json!({"name": name, "group": t.group, "kind": t.plural})),
                ..ApiError::new(
                    409,
                    "Conflict",
                    format!(
                        "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
                    ),
                )
            });
        }
        if meta_str(&obj, "name") != name && !meta_str(&obj, "name").is_empty() {
            return Err(ApiError::new(400, "BadRequest", "the name of the object does not match the name on the URL"));
        }
        if status {
            let mut next = old.clone();
            next["status"] = obj.get("status").cloned().unwrap_or(Value::Null);
            obj = next;
        } else {
            // Immutable and server-owned metadata stays; status changes only through /status
            // for types that have it.
            for f in ["uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"] {
                match old["metadata"].get(f) {
                    Some(v) => obj["metadata"][f] = v.clone(),
                    None => {
                        if let Some(m) = obj["metadata"].as_object_mut() {
                            m.remove(f);
                        }
                    }
                }
            }
            if t.has_status() {
                match old.get("status") {
                    Some(s) => obj["status"] = s.clone(),
                    None => {
                        if let Some(m) = obj.as_object_mut() {
                            m.remove("status");
                        }
                    }
                }
            }
            obj["metadata"]["name"] = json!(name);
            if t.namespaced {
                obj["metadata"]["namespace"] = json!(ns);
            }
            if spec_part(&obj) != spec_part(&old) {
                let g = old["metadata"]["generation"].as_i64().unwrap_or(1) + 1;
                obj["metadata"]["generation"] = json!(g);
            }
            if t.kind == "CustomResourceDefinition" {
                obj["status"] = crd_status(&obj, (self.now)());
            }
        }
        let mut obj = Self::served(t, obj);
        admit(t, &mut obj, Some(&old))?;
        if dry_run {
            return Ok(obj);
        }
        // Removing the last finalizer of an object being deleted completes the deletion.
        let deleting = obj["metadata"].get("deletionTimestamp").is_some();
        let finalizers = obj["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
        if deleting && !finalizers {
            return self.remove(t, ns, name, obj);
        }
        if spec_part(&obj) == spec_part(&old)
            && obj["metadata"] == old["metadata"]
            && obj.get("status") == old.get("status")
        {
            return Ok(old);
        }
        Ok(self.commit(t, ns, key, obj, "MODIFIED"))
    }

    fn remove(&mut self, t: &ResourceType, ns: &str, name: &str, last: Value) -> Result<Value, ApiError> {
        Ok(self.commit(t, ns, Self::key(t, ns, name), last, "DELETED"))
    }

    /// DELETE. Objects with finalizers get a deletionTimestamp and stay until their
    /// finalizers are removed; pods bound to a node with a grace period get one too (there is
    /// no kubelet to confirm: `finish_pod` removes them later); everything else goes now.
    /// Returns the object and whether it is still there.
    pub fn delete(
        &mut self,
        t: &ResourceType,
        ns: &str,
        name: &str,
        grace: Option<i64>,
        dry_run: bool,
    ) -> Result<(Value, bool), ApiError> {
        let key = Self::key(t, ns, name);
        let Some(old) = self.objects.get(&key).cloned() else {
            return Err(ApiError::not_found(t, name));
        };
        if dry_run {
            return Ok((old, false));
        }
        let finalizers = old["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
        let pod_grace = if t.kind == "Pod" && old["spec"]["nodeName"].as_str().is_some_and(|n| !n.is_empty()) {
            grace.or_else(|| old["spec"]["terminationGracePeriodSeconds"].as_i64()).unwrap_or(30)
        } else {
            0
        };
        if finalizers || pod_grace > 0 {
            if let Some(at) = old["metadata"]["deletionTimestamp"].as_str() {
                // A pod deleted again with a shorter grace goes sooner (never later).
                let sooner = (self.now)() + pod_grace;
                let current = parse_rfc3339(at).unwrap_or(i64::MAX);
                if t.kind == "Pod" && grace.is_some() && sooner < current {
                    let mut o = old.clone();
                    o["metadata"]["deletionTimestamp"] = json!(rfc3339(sooner));
                    o["metadata"]["deletionGracePeriodSeconds"] = json!(pod_grace);
                    return Ok((self.commit(t, ns, key, o, "MODIFIED"), true));
                }
                return Ok((old, true));
            }
            let mut o = old.clone();
            o["metadata"]["deletionTimestamp"] = json!(rfc3339((self.now)() + pod_grace));
            o["metadata"]["deletionGracePeriodSeconds"] = json!(pod_grace);
            // As the API server does: starting the deletion is a change of the object.
            if let Some(g) = o["metadata"]["generation"].as_i64().filter(|g| *g > 0) {
                o["metadata"]["generation"] = json!(g + 1);
            }
            return Ok((self.commit(t, ns, key, o, "MODIFIED"), true));
        }
        if t.plural == "namespaces" && t.group.is_empty() {
            let inside: Vec<Key> = self.objects.keys().filter(|k| k.namespace == name).cloned().collect();
            for k in inside {
                if let Some(ct) = self.find(&k.group, &k.plural) {
                    let o = self.objects.get(&k).cloned().unwrap_or(Value::Null);
                    self.remove(&ct, &k.namespace, &k.name, o)?;
                }
            }
        }
        Ok((self.remove(t, ns, name, old)?, false))
    }

    /// The kubelet's part of a graceful pod deletion: the pod goes once its grace is over
    /// (and it has no finalizers).
    pub fn finish_pod(&mut self, ns: &str, name: &str, uid: &str) {
        let Some(t) = self.find("", "pods") else { return };
        let key = Self::key(&t, ns, name);
        let Some(o) = self.objects.get(&key).cloned() else { return };
        let finalizers = o["metadata"]["finalizers"].as_array().is_some_and(|f| !f.is_empty());
        if meta_str(&o, "uid") == uid && o["metadata"].get("deletionTimestamp").is_some() && !finalizers {
            let _ = self.remove(&t, ns, name, o);
        }
    }

    fn after_change(&mut self, t: &ResourceType, ns: &str) {
        if t.kind == "CustomResourceDefinition" && t.group == "apiextensions.k8s.io" {
            self.register_crds();
        }
        if (t.kind == "Pod" && t.group.is_empty()) || (t.kind == "PodDisruptionBudget" && t.group == "policy") {
            self.refresh_pdbs(ns);
        }
    }

    fn register_crds(&mut self) {
        let mut types = registry::builtins();
        let crds: Vec<Value> = self
            .objects
            .iter()
            .filter(|(k, _)| k.group == "apiextensions.k8s.io" && k.plural == "customresourcedefinitions")
            .map(|(_, o)| o.clone())
            .collect();
        for crd in crds {
            types.extend(registry::from_crd(&crd));
        }
        self.types = types;
    }

    /// Pods of `ns` matching a PDB's selector.
    fn pdb_pods(&self, ns: &str, pdb: &Value) -> Vec<Value> {
        let sel = &pdb["spec"]["selector"];
        self.objects
            .iter()
            .filter(|(k, _)| k.group.is_empty() && k.plural == "pods" && k.namespace == ns)
            .map(|(_, o)| o)
            .filter(|p| selector_matches(sel, &p["metadata"]["labels"]))
            .cloned()
            .collect()
    }

    /// (desired healthy, current healthy, expected, disruptions allowed) for a PDB now.
    pub fn pdb_numbers(&self, ns: &str, pdb: &Value) -> (i64, i64, i64, i64) {
        let pods = self.pdb_pods(ns, pdb);
        let expected = pods.len() as i64;
        let healthy = pods.iter().filter(|p| is_healthy(p)).count() as i64;
        let scaled = |v: &Value, round_up: bool| -> i64 {
            match v {
                Value::Number(n) => n.as_i64().unwrap_or(0),
                Value::String(s) if s.ends_with('%') => {
                    let pct: i64 = s.trim_end_matches('%').parse().unwrap_or(0);
                    let x = pct * expected;
                    if round_up { (x + 99) / 100 } else { x / 100 }
                }
                Value::String(s) => s.parse().unwrap_or(0),
                _ => 0,
            }
        };
        let spec = &pdb["spec"];
        let desired = if let Some(min) = spec.get("minAvailable").filter(|v| !v.is_null()) {
            scaled(min, true)
        } else if let Some(max) = spec.get("maxUnavailable").filter(|v| !v.is_null()) {
            (expected - scaled(max, true)).max(0)
        } else {
            0
        };
        (desired, healthy, expected, (healthy - desired).max(0))
    }

    fn refresh_pdbs(&mut self, ns: &str) {
        let Some(t) = self.find("policy", "poddisruptionbudgets") else { return };
        let pdbs: Vec<Value> = self.list(&t, Some(ns));
        for pdb in pdbs {
            let (desired, healthy, expected, allowed) = self.pdb_numbers(ns, &pdb);
            let status = json!({
                "observedGeneration": pdb["metadata"]["generation"],
                "desiredHealthy": desired, "currentHealthy": healthy, "expectedPods": expected,
                "disruptionsAllowed": allowed,
                "conditions": [{
                    "type": "DisruptionAllowed", "status": if allowed > 0 { "True" } else { "False" },
                    "reason": if allowed > 0 { "SufficientPods" } else { "InsufficientPods" }, "message": "",
                    "observedGeneration": pdb["metadata"]["generation"],
                    "lastTransitionTime": pdb["status"]["conditions"][0]["lastTransitionTime"].as_str().map_or_else(|| json!(rfc3339((self.now)())), |s| json!(s)),
                }],
            });
            if pdb.get("status") != Some(&status) {
                let name = meta_str(&pdb, "name").to_string();
                let mut next = pdb.clone();
                next["status"] = status;
                self.rv += 1;
                next["metadata"]["resourceVersion"] = json!(self.rv.to_string());
                self.objects.insert(Self::key(&t, ns, &name), next.clone());
                self.record(&t, ns, "MODIFIED", next);
            }
        }
    }

    /// policy/v1 Eviction: deletes the pod when every PDB selecting it allows a disruption.
    pub fn evict(&mut self, ns: &str, name: &str, grace: Option<i64>) -> Result<Value, ApiError> {
        let pods = self.find("", "pods").ok_or_else(|| ApiError::new(500, "InternalError", "no pods type"))?;
        let pod = self.get(&pods, ns, name)?;
        if pod["metadata"].get("deletionTimestamp").is_some() {
            return Ok(success());
        }
        let pdb_t = self
            .find("policy", "poddisruptionbudgets")
            .ok_or_else(|| ApiError::new(500, "InternalError", "no PDB type"))?;
        let matching: Vec<Value> = self
            .list(&pdb_t, Some(ns))
            .into_iter()
            .filter(|b| selector_matches(&b["spec"]["selector"], &pod["metadata"]["labels"]))
            .collect();
        if matching.len() > 1 {
            return Err(ApiError::new(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
            ));
        }
        if let Some(pdb) = matching.first() {
            let (desired, healthy, _, allowed) = self.pdb_numbers(ns, pdb);
            // An unhealthy pod may always go (it does not count towards the budget).
            if allowed <= 0 && is_healthy(&pod) {
                let pdb_name = meta_str(pdb, "name");
                return Err(ApiError {
                    details: Some(
                        json!({"causes": [{"reason": "DisruptionBudget", "message": format!("The disruption budget {pdb_name} needs {desired} healthy pods and has {healthy} currently")}]}),
                    ),
                    ..ApiError::new(
                        429,
                        "TooManyRequests",
                        "Cannot evict pod as it would violate the pod's disruption budget.",
                    )
                });
            }
        }
        self.delete(&pods, ns, name, grace, false)?;
        Ok(success())
    }
}

fn success() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})
}

/// Running and Ready, and not being deleted: what a PDB counts as healthy.
pub fn is_healthy(pod: &Value) -> bool {
    pod["metadata"].get("deletionTimestamp").is_none()
        && pod["status"]["phase"].as_str() == Some("Running")
        && pod["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|c| c["type"].as_str() == Some("Ready") && c["status"].as_str() == Some("True"))
}

/// A `LabelSelector` (matchLabels and matchExpressions) against labels.
pub fn selector_matches(sel: &Value, labels: &Value) -> bool {
    if sel.is_null() {
        return false;
    }
    let get = |k: &str| labels.get(k).and_then(Value::as_str);
    let labels_ok = sel["matchLabels"].as_object().into_iter().flatten().all(|(k, v)| get(k) == v.as_str());
    let exprs_ok = sel["matchExpressions"].as_array().into_iter().flatten().all(|e| {
        let k = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
        match e["operator"].as_str().unwrap_or_default() {
            "In" => get(k).is_some_and(|v| values.contains(&v)),
            "NotIn" => get(k).is_none_or(|v| !values.contains(&v)),
            "Exists" => get(k).is_some(),
            "DoesNotExist" => get(k).is_none(),
            _ => false,
        }
    });
    labels_ok && exprs_ok
}

fn crd_status(crd: &Value, now: i64) -> Value {
    let t = rfc3339(now);
    json!({
        "acceptedNames": crd["spec"]["names"],
        "storedVersions": crd["spec"]["versions"].as_array().into_iter().flatten().filter(|v| v["storage"].as_bool() == Some(true)).map(|v| v["name"].clone()).collect::<Vec<_>>(),
        "conditions": [
            {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": t},
            {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": t},
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1796043845), "2026-11-30T13:04:05Z");
        for t in [0, 951_782_400, 1_796_043_845, 4_102_444_799] {
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t), "{t}");
        }
    }
}
