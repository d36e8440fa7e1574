//! The Helm charts: lint, render with default and full values, apply to the API emulator,
//! CRDs identical to `tenon crds`, the default policy bundle identical to a fresh build, and
//! RBAC that grants exactly what the controller calls in an end-to-end run.

use base64::Engine;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use tenon_e2e::scenario::{INFLATE_NS, apply_lab_general, nodeclass_ready, patch_nodepool, scale_inflate};
use tenon_e2e::{CONTROLLER_TOKEN, Cluster, eventually, repo, run_tool, tenon_bin};

fn run(cmd: &str, args: &[&str]) -> String {
    run_tool(cmd, args, &[])
}

fn docs(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .filter_map(|d| serde_yaml::with::singleton_map_recursive::deserialize::<Option<Value>, _>(d).ok().flatten())
        .filter(|v| !v.is_null())
        .collect()
}

fn render(values: &str) -> Vec<Value> {
    docs(&run("helm", &["template", "tenon", "charts/tenon", "--namespace", "kube-system", "-f", values]))
}

#[test]
fn both_charts_lint_clean_in_strict_mode() {
    for values in ["charts/tenon/ci/default-values.yaml", "charts/tenon/ci/full-values.yaml"] {
        run("helm", &["lint", "--strict", "charts/tenon", "-f", values]);
    }
    run("helm", &["lint", "--strict", "charts/tenon-crd"]);
}

#[test]
fn the_chart_refuses_to_render_without_a_cluster_name() {
    let out = Command::new("helm").args(["template", "tenon", "charts/tenon"]).current_dir(repo()).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("settings.clusterName is required"));
}

#[test]
fn the_crd_chart_renders_exactly_tenon_crds() {
    let rendered = docs(&run("helm", &["template", "tenon-crd", "charts/tenon-crd"]));
    let generated = docs(&run(tenon_bin().to_str().unwrap(), &["crds"]));
    assert_eq!(rendered.len(), 3);
    assert_eq!(rendered, generated);
}

#[test]
fn the_policy_store_holds_the_default_bundle_of_a_fresh_build() {
    let fresh =
        PathBuf::from(std::env::var_os("TENON_POLICY_DIR").expect("TENON_POLICY_DIR: the freshly built policies"));
    let objects = render("charts/tenon/ci/default-values.yaml");
    let cm = objects
        .iter()
        .find(|o| o["kind"] == "ConfigMap" && o["metadata"]["name"] == "tenon-default-policies")
        .expect("the bundle ConfigMap");
    let readme = std::fs::read_to_string(repo().join("charts/tenon/README.md")).unwrap();
    for name in ["default-scoring", "default-consolidation", "default-budget"] {
        let b64 =
            cm["binaryData"][format!("{name}.wasm")].as_str().unwrap_or_else(|| panic!("{name}.wasm in the bundle"));
        let bytes = base64::engine::general_purpose::STANDARD.decode(b64).unwrap();
        assert!(bytes.len() < 1 << 20, "{name}: a ConfigMap holds at most 1 MiB");
        let built = std::fs::read(fresh.join(format!("{}.wasm", name.replace('-', "_")))).unwrap();
        assert!(
            bytes == built,
            "charts/tenon/policies/{name}.wasm differs from a fresh build: run scripts/bundle-policies"
        );
        let path = repo().join(format!("charts/tenon/policies/{name}.wasm"));
        let inspect = run(tenon_bin().to_str().unwrap(), &["policy", "inspect", path.to_str().unwrap()]);
        let digest = inspect.lines().find_map(|l| l.strip_prefix("sha256:")).unwrap().trim().to_string();
        assert!(
            readme.contains(&format!("| `{name}` | `sha256:{digest}` |")),
            "the chart README lists {name}'s digest {digest}"
        );
    }
    let deploy = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let spec = &deploy["spec"]["template"]["spec"];
    let sources = spec["volumes"].as_array().unwrap().iter().find(|v| v["name"] == "policies").unwrap();
    assert_eq!(sources["projected"]["sources"][0]["configMap"]["name"], "tenon-default-policies");
    assert_eq!(deploy["spec"]["replicas"], 2);
    let c = &spec["containers"][0];
    assert!(
        c["env"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["name"] == "TENON_POLICY_DIR" && e["value"] == "/etc/tenon/policies")
    );
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(spec["priorityClassName"], "system-cluster-critical");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_objects_apply_to_the_api_server_with_default_and_full_values() {
    let c = Cluster::start("chart-apply").await;
    // The full values ask for a ServiceMonitor: its CRD, as prometheus-operator installs it.
    c.apply_yaml(
        "servicemonitor-crd",
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: servicemonitors.monitoring.coreos.com}
spec:
  group: monitoring.coreos.com
  scope: Namespaced
  names: {kind: ServiceMonitor, plural: servicemonitors, singular: servicemonitor, listKind: ServiceMonitorList}
  versions:
    - name: v1
      served: true
      storage: true
      schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
"#,
    );
    c.apply_yaml("namespace", "apiVersion: v1\nkind: Namespace\nmetadata: {name: kube-system}\n");
    for (i, values) in ["charts/tenon/ci/default-values.yaml", "charts/tenon/ci/full-values.yaml"].iter().enumerate() {
        let rendered = run("helm", &["template", "tenon", "charts/tenon", "--namespace", "kube-system", "-f", values]);
        c.apply_yaml(&format!("rendered-{i}"), &rendered);
    }
    let out = c.kubectl(&["get", "deployments", "-n", "kube-system", "-o", "name"]);
    assert!(out.contains("deployment.apps/tenon") && out.contains("deployment.apps/tenon-controller"), "{out}");
    let out = c.kubectl(&["get", "servicemonitors", "-n", "kube-system", "-o", "name"]);
    assert!(out.contains("tenon-controller"), "{out}");
}

/// (group, resource, verb) the rendered RBAC grants.
fn granted(objects: &[Value]) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for o in objects.iter().filter(|o| o["kind"] == "ClusterRole" || o["kind"] == "Role") {
        for rule in o["rules"].as_array().into_iter().flatten() {
            let list = |k: &str| rule[k].as_array().cloned().unwrap_or_default();
            for g in list("apiGroups") {
                for r in list("resources") {
                    for v in list("verbs") {
                        let s = |x: &Value| x.as_str().unwrap_or_default().to_string();
                        out.insert((s(&g), s(&r), s(&v)));
                    }
                }
            }
        }
    }
    out
}

/// `n` inflate pods bound (impossible-arch shares the namespace and stays pending).
async fn bound_inflate(c: &Cluster, n: usize) {
    eventually(Duration::from_secs(90), &format!("{n} inflate pods bound"), || async {
        let pods = c.pods(INFLATE_NS).await;
        let inflate = pods.iter().filter(|p| p.metadata.name.as_deref().is_some_and(|x| x.starts_with("inflate-")));
        (inflate.filter(|p| p.spec.as_ref().is_some_and(|s| s.node_name.is_some())).count() == n).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbac_grants_exactly_what_the_controller_calls() {
    let mut c = Cluster::start("rbac").await;
    // Every path: leader election, provisioning and registration, events, a disruption
    // (marking), a drain by eviction, a NodePool deletion whose drain a PDB holds past
    // terminationGracePeriod (forced pod deletion), and the EC2NodeClass finalizer.
    c.leader_election = true;
    apply_lab_general(&c);
    patch_nodepool(
        &c,
        "lab-general",
        r#"{"spec":{"template":{"spec":{"terminationGracePeriod":"5s"}},"disruption":{"consolidateAfter":"2s"}}}"#,
        false,
    );
    c.kubectl(&["apply", "-f", "examples/seeds/lab-general/karpenter-negative.yaml"]);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 8);
    bound_inflate(&c, 8).await;
    scale_inflate(&c, 0);
    eventually(Duration::from_secs(90), "the empty node consolidated", || async {
        c.nodeclaims().await.is_empty().then_some(())
    })
    .await;
    scale_inflate(&c, 4);
    bound_inflate(&c, 4).await;
    // A NodeClaim deleted by hand: its pods are evicted and land on a new node.
    let first = c.nodeclaims().await[0].metadata.name.clone().unwrap();
    c.kubectl(&["delete", "nodeclaim", &first, "--wait=false"]);
    eventually(Duration::from_secs(90), "the deleted NodeClaim replaced", || async {
        let claims = c.nodeclaims().await;
        (claims.len() == 1 && claims[0].metadata.name.as_deref() != Some(first.as_str())).then_some(())
    })
    .await;
    bound_inflate(&c, 4).await;
    c.apply_yaml(
        "pdb",
        "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: inflate, namespace: karpenter-lab}\nspec:\n  maxUnavailable: 0\n  selector: {matchLabels: {app: inflate}}\n",
    );
    c.kubectl(&["delete", "nodepool", "lab-general", "--wait=false"]);
    eventually(Duration::from_secs(90), "the NodeClaims released past their grace period", || async {
        c.nodeclaims().await.is_empty().then_some(())
    })
    .await;
    c.kubectl(&["delete", "ec2nodeclass", "lab-general", "--wait=false"]);
    let classes: kube::Api<tenon_api::EC2NodeClass> = kube::Api::all(c.client.clone());
    eventually(Duration::from_secs(30), "the EC2NodeClass released", || async {
        classes.get_opt("lab-general").await.ok()?.is_none().then_some(())
    })
    .await;
    c.assert_controller_running();

    let called = c.emu.calls_by(CONTROLLER_TOKEN);
    let granted = granted(&render("charts/tenon/ci/default-values.yaml"));
    let missing: Vec<_> = called.difference(&granted).collect();
    let unused: Vec<_> = granted.difference(&called).collect();
    assert!(
        missing.is_empty() && unused.is_empty(),
        "RBAC and the controller disagree.\ncalled but not granted: {missing:#?}\ngranted but never called: {unused:#?}"
    );
}
