//! Karpenter's CEL validation suites (`tests/conformance/cel/`, one file per Go suite) run
//! twice: each case's object is created in the emulator, which admits it against Tenon's CRDs
//! as an API server would (schema, defaults, CEL rules; updates for transition rules), and it
//! is validated as `tenon check` validates it. Admission must agree with the case's `admitted`,
//! the check with its `valid` (Karpenter's runtime validation included). The kubelet suite is
//! runtime validation only (`spec.kubelet` is an open map the API server admits as it is).
//!
//! Rows of `tests/conformance/karpenter.tsv` marked `ported` to these tests must agree on both;
//! every other case is run too and reported, so a newly passing case shows up.
//!
//! One adaptation: Karpenter's core suites reference a test NodeClass (`karpenter.test.sh`),
//! (`karpenter.test.sh`, kinds `TestNodeClass` and `TestNodeClaim`), which the CRD admits but
//! `tenon check` refuses (Tenon launches on EC2 only), so the check sees
//! `karpenter.k8s.aws`/`EC2NodeClass` in its place.

use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use tenon_api::validation::Severity;
use tenon_kube_emulator::Emulator;

fn repo() -> PathBuf {
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("run under cargo test")).join("../..")
}

#[derive(serde::Deserialize)]
struct Suite {
    base: String,
    cases: Vec<Case>,
}

#[derive(serde::Deserialize)]
struct Case {
    id: String,
    #[serde(default)]
    patch: Vec<Value>,
    #[serde(default)]
    each: Vec<Vec<Value>>,
    #[serde(default)]
    update: Option<Vec<Value>>,
    admitted: bool,
    valid: bool,
    #[serde(default)]
    defaults: BTreeMap<String, Value>,
    /// How many errors the check reports, exactly (`errors`) or at least (`min_errors`).
    errors: Option<usize>,
    min_errors: Option<usize>,
    /// Text each error must contain (the offending field's name).
    mentions: Option<String>,
}

fn patched(obj: &Value, ops: &[Value]) -> Result<Value, String> {
    let mut out = obj.clone();
    let p: json_patch::Patch = serde_json::from_value(Value::Array(ops.to_vec())).map_err(|e| e.to_string())?;
    json_patch::patch(&mut out, &p).map_err(|e| e.to_string())?;
    Ok(out)
}

/// Whether `tenon check` finds no error in `obj`.
fn check_valid(obj: &Value) -> (bool, Vec<String>) {
    let mut obj = obj.clone();
    for path in ["/spec/template/spec/nodeClassRef", "/spec/nodeClassRef"] {
        if let Some(r) = obj.pointer_mut(path) {
            if r.get("group").and_then(Value::as_str) == Some("karpenter.test.sh") {
                r["group"] = "karpenter.k8s.aws".into();
            }
            if matches!(r.get("kind").and_then(Value::as_str), Some("TestNodeClass" | "TestNodeClaim")) {
                r["kind"] = "EC2NodeClass".into();
            }
        }
    }
    let decoded = tenon_api::decode::decode_and_validate(obj);
    let errors: Vec<String> = decoded
        .problems
        .iter()
        .filter(|p| p.severity == Severity::Error)
        .map(|p| format!("{}: {}", p.path, p.message))
        .collect();
    (errors.is_empty(), errors)
}

/// The ids `karpenter.tsv` marks ported to `test`.
fn ported_to(test: &str) -> BTreeSet<String> {
    let tsv = std::fs::read_to_string(repo().join("tests/conformance/karpenter.tsv")).unwrap();
    tsv.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|f| f.len() > 5 && f[4] == "ported" && f[5] == test)
        .map(|f| f[0].to_string())
        .collect()
}

async fn run(file: &str, test: &str, group: &str, kind: &str, plural: &str) {
    let suite: Suite =
        serde_yaml::from_str(&std::fs::read_to_string(repo().join("tests/conformance/cel").join(file)).unwrap())
            .unwrap();
    let base: Value = serde_yaml::from_str(&suite.base).unwrap();
    let emu = Emulator::start().expect("emulator listens");
    let client = kube::Client::try_from(kube::Config::new(emu.url.parse().unwrap())).unwrap();
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    for crd in tenon_api::crds::crds() {
        let obj: DynamicObject = serde_json::from_value(serde_json::to_value(crd).unwrap()).unwrap();
        crds.create(&PostParams::default(), &obj).await.expect("CRD created");
    }
    let resource = ApiResource::from_gvk_with_plural(&kube::core::GroupVersionKind::gvk(group, "v1", kind), plural);
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let ported = ported_to(test);
    let (mut failures, mut passing_unported, mut n) = (Vec::new(), Vec::new(), 0usize);
    for case in &suite.cases {
        let variants = if case.each.is_empty() { vec![case.patch.clone()] } else { case.each.clone() };
        let mut problems = Vec::new();
        for ops in &variants {
            n += 1;
            let mut obj = match patched(&base, ops) {
                Ok(o) => o,
                Err(e) => {
                    problems.push(format!("patch does not apply: {e}"));
                    continue;
                }
            };
            obj["metadata"]["name"] = format!("case-{n}").into();
            if case.update.is_none() {
                let (valid, errors) = check_valid(&obj);
                if valid != case.valid {
                    problems.push(format!("tenon check: valid={valid}, expected {} {errors:?}", case.valid));
                }
                if case.errors.is_some_and(|n| errors.len() != n) || case.min_errors.is_some_and(|n| errors.len() < n) {
                    problems.push(format!("tenon check: {} error(s) {errors:?}", errors.len()));
                }
                if let Some(text) = &case.mentions
                    && !errors.iter().all(|e| e.contains(text.as_str()))
                {
                    problems.push(format!("tenon check: an error does not mention {text:?}: {errors:?}"));
                }
            }
            let sent: DynamicObject = serde_json::from_value(obj.clone()).unwrap();
            let created = api.create(&PostParams::default(), &sent).await;
            let outcome = match (&case.update, created) {
                (None, r) => r.map(|o| serde_json::to_value(o).unwrap()),
                (Some(_), Err(e)) => {
                    problems.push(format!("create before the update refused: {e}"));
                    continue;
                }
                (Some(ops), Ok(o)) => {
                    let current = serde_json::to_value(&o).unwrap();
                    let next = match patched(&current, ops) {
                        Ok(n) => n,
                        Err(e) => {
                            problems.push(format!("update does not apply: {e}"));
                            continue;
                        }
                    };
                    let next: DynamicObject = serde_json::from_value(next).unwrap();
                    let name = next.metadata.name.clone().unwrap_or_default();
                    api.replace(&name, &PostParams::default(), &next).await.map(|o| serde_json::to_value(o).unwrap())
                }
            };
            match outcome {
                Ok(stored) => {
                    if !case.admitted {
                        problems.push("admitted, expected refused".into());
                    }
                    for (ptr, want) in &case.defaults {
                        if stored.pointer(ptr) != Some(want) {
                            problems.push(format!("{ptr} is {:?}, expected {want}", stored.pointer(ptr)));
                        }
                    }
                }
                Err(kube::Error::Api(e)) if e.code == 422 => {
                    if case.admitted {
                        problems.push(format!("refused, expected admitted: {}", e.message));
                    }
                }
                Err(e) => problems.push(format!("unexpected error: {e}")),
            }
        }
        match (problems.is_empty(), ported.contains(&case.id)) {
            (true, false) => passing_unported.push(case.id.clone()),
            (false, true) => failures.push(format!("{}: {}", case.id, problems.join("; "))),
            (false, false) => eprintln!("not ported, disagrees: {}: {}", case.id, problems.join("; ")),
            (true, true) => {}
        }
    }
    for id in &passing_unported {
        eprintln!("passes but is not marked ported: {id}");
    }
    assert!(failures.is_empty(), "{} ported case(s) disagree:\n{}", failures.len(), failures.join("\n"));
    let listed: BTreeSet<&String> = suite.cases.iter().map(|c| &c.id).collect();
    let stray: Vec<&String> = ported.iter().filter(|id| !listed.contains(id)).collect();
    assert!(stray.is_empty(), "rows ported to {test} that {file} does not hold: {stray:?}");
}

#[tokio::test]
async fn nodepool_cases_agree_with_karpenter() {
    let test = "tests/kube-emulator/tests/karpenter_cel.rs::nodepool_cases_agree_with_karpenter";
    run("nodepool.yaml", test, "karpenter.sh", "NodePool", "nodepools").await;
}

#[tokio::test]
async fn nodeclaim_cases_agree_with_karpenter() {
    let test = "tests/kube-emulator/tests/karpenter_cel.rs::nodeclaim_cases_agree_with_karpenter";
    run("nodeclaim.yaml", test, "karpenter.sh", "NodeClaim", "nodeclaims").await;
}

#[tokio::test]
async fn ec2nodeclass_cases_agree_with_karpenter() {
    let test = "tests/kube-emulator/tests/karpenter_cel.rs::ec2nodeclass_cases_agree_with_karpenter";
    run("ec2nodeclass.yaml", test, "karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses").await;
}

#[tokio::test]
async fn ec2nodeclass_kubelet_cases_agree_with_karpenter() {
    let test = "tests/kube-emulator/tests/karpenter_cel.rs::ec2nodeclass_kubelet_cases_agree_with_karpenter";
    run("ec2nodeclass-kubelet.yaml", test, "karpenter.k8s.aws", "EC2NodeClass", "ec2nodeclasses").await;
}
