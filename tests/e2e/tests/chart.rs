//! (Long: tests only, one per chart behaviour; rendering helpers at the top.)
//! The Helm charts: lint, render with default, full and Karpenter's values, apply to the API
//! emulator, CRDs identical to `tenon crds`, the default policy bundle identical to a fresh
//! build, RBAC that grants exactly what the controller calls in an end-to-end run, and a
//! controller started with what a Karpenter values file renders.

use base64::Engine;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use tenon_e2e::scenario::{INFLATE_NS, apply_lab_general, nodeclass_ready, patch_nodepool, scale_inflate};
use tenon_e2e::{CONTROLLER_TOKEN, Cluster, eventually, repo, run_tool, tenon_bin};

fn run(cmd: &str, args: &[&str]) -> String {
    run_tool(cmd, args, &[])
}

/// Every document, parsed strictly: a duplicate key (which some tools silently resolve and
/// others refuse) fails the test.
fn docs(yaml: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(yaml)
        .filter_map(|d| {
            serde_yaml::with::singleton_map_recursive::deserialize::<Option<Value>, _>(d)
                .unwrap_or_else(|e| panic!("a rendered document does not parse: {e}\n{yaml}"))
        })
        .filter(|v| !v.is_null())
        .collect()
}

/// The Karpenter (chart 1.14) values file a platform team brings.
const KARPENTER_VALUES: &str = "charts/tenon/ci/karpenter-values.yaml";

fn render(values: &str) -> Vec<Value> {
    render_with(values, &[])
}

/// Rendered as on a cluster that serves prometheus-operator's ServiceMonitor.
fn render_with(values: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["template", "tenon", "charts/tenon", "--namespace", "kube-system", "-f", values];
    args.extend(["--api-versions", "monitoring.coreos.com/v1"]);
    args.extend(extra);
    docs(&run("helm", &args))
}

/// `helm template`'s error when it refuses to render.
fn refusal(args: &[&str]) -> String {
    let out = Command::new("helm")
        .args(["template", "tenon", "charts/tenon", "--set", "settings.clusterName=lab"])
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(!out.status.success(), "helm rendered {args:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn kind<'a>(objects: &'a [Value], kind: &str) -> Vec<&'a Value> {
    objects.iter().filter(|o| o["kind"] == kind).collect()
}

/// The controller container's environment, name → value (`valueFrom` entries as `None`);
/// fails on a name given twice.
fn env(objects: &[Value]) -> BTreeMap<String, Option<String>> {
    let deployment = kind(objects, "Deployment")[0];
    let mut out = BTreeMap::new();
    for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap().to_string();
        let prior = out.insert(name.clone(), e["value"].as_str().map(String::from));
        assert!(prior.is_none(), "{name} is set twice");
    }
    out
}

#[test]
fn both_charts_lint_clean_in_strict_mode() {
    for values in ["charts/tenon/ci/default-values.yaml", "charts/tenon/ci/full-values.yaml", KARPENTER_VALUES] {
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
        let rendered = run(
            "helm",
            &[
                "template",
                "tenon",
                "charts/tenon",
                "--namespace",
                "kube-system",
                "-f",
                values,
                "--api-versions",
                "monitoring.coreos.com/v1",
            ],
        );
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

#[test]
fn a_karpenter_values_file_renders_what_it_means_in_karpenter() {
    let objects = render(KARPENTER_VALUES);
    // fullnameOverride names every object; additionalLabels and additionalAnnotations reach all.
    for o in &objects {
        let name = o["metadata"]["name"].as_str().unwrap();
        assert!(name.starts_with("karpenter"), "{} {name}", o["kind"]);
        assert_eq!(o["metadata"]["labels"]["team"], "platform", "{} {name}", o["kind"]);
        assert_eq!(o["metadata"]["annotations"]["example.com/owner"], "platform-team", "{} {name}", o["kind"]);
    }
    let env = env(&objects);
    let value = |k: &str| env.get(k).cloned().flatten().unwrap_or_else(|| panic!("{k} in {env:?}"));
    // Karpenter's feature-gate map becomes Karpenter's FEATURE_GATES string.
    assert_eq!(
        value("FEATURE_GATES"),
        "ReservedCapacity=true,SpotToSpotConsolidation=true,NodeRepair=false,NodeOverlay=false,StaticCapacity=false,CapacityBuffer=false"
    );
    // controller.env passes through (the region, proxies, web identity).
    assert_eq!(value("AWS_REGION"), "eu-west-1");
    assert_eq!(value("HTTPS_PROXY"), "http://proxy.internal.example.com:3128");
    assert_eq!(value("AWS_WEB_IDENTITY_TOKEN_FILE"), "/var/run/secrets/eks.amazonaws.com/serviceaccount/token");
    assert_eq!(value("INTERRUPTION_QUEUE"), "Karpenter-prod-eu1");
    assert_eq!(value("CLUSTER_NAME"), "prod-eu1");
    let pod = &kind(&objects, "Deployment")[0]["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "tenon/controller:0.1.0", "Tenon's image, whatever Karpenter's chart would pull");
    assert_eq!(container["resources"]["limits"]["cpu"], "1", "controller.resources");
    assert_eq!(container["securityContext"]["appArmorProfile"]["type"], "RuntimeDefault");
    assert_eq!(container["volumeMounts"][2]["name"], "aws-iam-token", "controller.extraVolumeMounts");
    assert_eq!(pod["volumes"][2]["name"], "aws-iam-token", "extraVolumes");
    assert_eq!(pod["securityContext"]["fsGroup"], 65532, "podSecurityContext");
    assert_eq!(pod["terminationGracePeriodSeconds"], 60);
    assert_eq!(pod["dnsConfig"]["options"][0]["name"], "ndots");
    assert_eq!(pod["serviceAccountName"], "karpenter");
    // Selectors are filled in only where the user gave none (the anti-affinity term and the
    // zone spread); the hostname spread keeps its own.
    let own =
        serde_json::json!({"matchLabels": {"app.kubernetes.io/name": "tenon", "app.kubernetes.io/instance": "tenon"}});
    assert_eq!(
        pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]["labelSelector"],
        own
    );
    let spread = pod["topologySpreadConstraints"].as_array().unwrap();
    assert_eq!(spread[0]["labelSelector"], own);
    assert_eq!(spread[1]["labelSelector"]["matchLabels"]["app.kubernetes.io/name"], "karpenter");
    assert_eq!(kind(&objects, "PodDisruptionBudget")[0]["metadata"]["name"], "karpenter");
    assert_eq!(kind(&objects, "Service")[0]["metadata"]["annotations"]["prometheus.io/scrape"], "false");
    let monitor = kind(&objects, "ServiceMonitor")[0];
    assert_eq!(monitor["spec"]["sampleLimit"], 50000);
    assert_eq!(monitor["spec"]["endpoints"][0]["metricRelabelings"][0]["action"], "drop");
    let rules = kind(&objects, "ClusterRole")[0]["rules"].as_array().unwrap();
    assert!(rules.iter().any(|r| r["resources"][0] == "configmaps"), "additionalClusterRoleRules");
}

#[test]
fn the_service_monitor_is_rendered_only_where_its_crd_is_served() {
    let with = render_with(KARPENTER_VALUES, &[]);
    assert_eq!(kind(&with, "ServiceMonitor").len(), 1);
    let without = docs(&run("helm", &["template", "tenon", "charts/tenon", "-f", KARPENTER_VALUES]));
    assert!(kind(&without, "ServiceMonitor").is_empty(), "no ServiceMonitor without monitoring.coreos.com/v1");
}

#[test]
fn controller_env_overrides_the_charts_own_without_a_duplicate() {
    let objects = render_with(
        "charts/tenon/ci/default-values.yaml",
        &["--set", "controller.env[0].name=LOG_LEVEL", "--set", "controller.env[0].value=debug"],
    );
    assert_eq!(env(&objects)["LOG_LEVEL"].as_deref(), Some("debug"));
}

#[test]
fn keys_tenon_cannot_honour_are_refused_by_name() {
    // Not a key of either chart: the schema names it (a typo would otherwise do nothing).
    assert!(refusal(&["--set", "settings.batchMaxDurations=5s"]).contains("batchMaxDurations"));
    assert!(refusal(&["--set", "image.repository=x"]).contains("Additional property image is not allowed"));
    // Karpenter's keys whose meaning Tenon does not implement, when asked for.
    for (set, says) in [
        ("settings.featureGates.nodeRepair=true", "settings.featureGates.nodeRepair: Tenon does not implement"),
        ("settings.featureGates.capacityBuffer=true", "settings.featureGates.capacityBuffer: Tenon does not implement"),
        ("settings.awsFeatureGates.nodeClassCEL=true", "settings.awsFeatureGates.nodeClassCEL"),
        ("settings.enableZonalShift=true", "settings.enableZonalShift"),
        ("settings.isolatedVPC=true", "settings.isolatedVPC"),
        ("settings.ignoreDRARequests=false", "settings.ignoreDRARequests"),
        ("controller.image.repository=public.ecr.aws/karpenter/controller", "is Karpenter's image"),
    ] {
        let err = refusal(&["--set", set]);
        assert!(err.contains(says), "{set}: {err}");
    }
    // A gate string is taken as given; the same gates as a map render the same string.
    let objects = render_with(
        "charts/tenon/ci/default-values.yaml",
        &["--set", "settings.featureGates=SpotToSpotConsolidation=true"],
    );
    assert_eq!(env(&objects)["FEATURE_GATES"].as_deref(), Some("SpotToSpotConsolidation=true"));
}

#[test]
fn the_min_values_policy_reaches_the_controller() {
    let objects = render_with("charts/tenon/ci/default-values.yaml", &["--set", "settings.minValuesPolicy=BestEffort"]);
    assert_eq!(env(&objects)["MIN_VALUES_POLICY"].as_deref(), Some("BestEffort"));
    let objects = render_with("charts/tenon/ci/default-values.yaml", &[]);
    assert_eq!(env(&objects)["MIN_VALUES_POLICY"].as_deref(), Some("Strict"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_controller_a_karpenter_values_file_renders_provisions() {
    let mut c = Cluster::start("karpenter-values").await;
    c.leader_election = true;
    let objects = render_with(KARPENTER_VALUES, &["--set", &format!("settings.clusterName={}", tenon_e2e::CLUSTER)]);
    // Started with the container's environment as rendered, except what only has a meaning
    // inside the pod or this test's cluster: the ports (free ones here), the image's paths,
    // the region (moto's resources are in us-east-1), the values' proxy (not on this network;
    // in a pod the client's in-cluster configuration ignores it, where the kubeconfig this
    // test runs with would send the API server's traffic to it) and the fields the kubelet
    // fills in.
    let keep_harness = [
        "METRICS_PORT",
        "HEALTH_PROBE_PORT",
        "TENON_POLICY_DIR",
        "XDG_CACHE_HOME",
        "AWS_REGION",
        "HTTPS_PROXY",
        "NO_PROXY",
    ];
    for (name, value) in env(&objects) {
        if let (Some(value), false) = (value, keep_harness.contains(&name.as_str())) {
            c.controller_env.push((name, value));
        }
    }
    c.aws.clients.sqs.create_queue().queue_name("Karpenter-prod-eu1").send().await.expect("the values' queue");
    apply_lab_general(&c);
    c.start_controller();
    nodeclass_ready(&c, "lab-general").await;
    scale_inflate(&c, 3);
    bound_inflate(&c, 3).await;
    c.assert_controller_running();
    let log = c.controller_log();
    assert!(log.contains("SpotToSpotConsolidation"), "the rendered feature gates were read:\n{log}");
}

/// Karpenter's Lease is a setting, read through a Role naming it in its namespace; unset,
/// neither the Role nor a read.
#[test]
fn karpenters_lease_is_read_by_name_and_not_at_all_when_unset() {
    let objects = render("charts/tenon/ci/default-values.yaml");
    assert_eq!(env(&objects)["TENON_KARPENTER_LEASE"].as_deref(), Some("kube-system/karpenter-leader-election"));
    let roles = kind(&objects, "Role");
    let lease = roles
        .iter()
        .find(|r| r["metadata"]["name"].as_str().is_some_and(|n| n.ends_with("-karpenter-lease")))
        .expect("the Role reading Karpenter's Lease");
    assert_eq!(lease["metadata"]["namespace"], "kube-system");
    assert_eq!(
        lease["rules"],
        serde_json::json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["karpenter-leader-election"], "verbs": ["get"]}])
    );
    let off = render_with("charts/tenon/ci/default-values.yaml", &["--set", "settings.karpenterLease="]);
    assert_eq!(env(&off)["TENON_KARPENTER_LEASE"].as_deref(), Some(""));
    assert!(
        !kind(&off, "Role")
            .iter()
            .any(|r| r["metadata"]["name"].as_str().is_some_and(|n| n.ends_with("-karpenter-lease")))
    );
    let e = refusal(&["--set", "settings.karpenterLease=karpenter-leader-election"]);
    assert!(e.contains("karpenterLease"), "{e}");
}

/// The trust policy's values reach the controller as settings and mounts; the RBAC names
/// the controller's own Lease and the kube-dns Service, nothing wider.
#[test]
fn the_trust_policy_and_narrow_rbac_render() {
    let objects = render_with(
        "charts/tenon/ci/default-values.yaml",
        &[
            "--set",
            "policies.trust.ociSources={ghcr.io/acme/policies,registry.internal:5000}",
            "--set",
            "policies.trust.signatureKeysConfigMap=cosign-keys",
            "--set",
            "policies.oci.registryConfigSecret=registry-creds",
        ],
    );
    let settings = env(&objects);
    let value = |k: &str| settings.get(k).cloned().flatten().unwrap_or_else(|| panic!("{k} in {settings:?}"));
    assert_eq!(value("TENON_POLICY_OCI_SOURCES"), "ghcr.io/acme/policies,registry.internal:5000");
    assert_eq!(value("TENON_POLICY_SIGNATURE_KEYS"), "/etc/tenon/signature-keys");
    assert_eq!(value("TENON_POLICY_OCI_REGISTRY_CONFIG"), "/etc/tenon/registry/config.json");
    let pod = &kind(&objects, "Deployment")[0]["spec"]["template"]["spec"];
    let volumes = pod["volumes"].as_array().unwrap();
    let volume = |name: &str| volumes.iter().find(|v| v["name"] == name).unwrap_or_else(|| panic!("{name}"));
    assert_eq!(volume("tmp")["emptyDir"]["sizeLimit"], "1Gi");
    assert_eq!(volume("signature-keys")["configMap"]["name"], "cosign-keys");
    assert_eq!(volume("registry-config")["secret"]["items"][0]["key"], ".dockerconfigjson");

    // By default: no OCI source, so no registry is ever contacted.
    let default = env(&render("charts/tenon/ci/default-values.yaml"));
    assert!(!default.contains_key("TENON_POLICY_OCI_SOURCES"), "{default:?}");
    // The old single credential offered to every registry is gone, loudly.
    let e = refusal(&["--set", "policies.oci.credentialsSecret=registry"]);
    assert!(e.contains("credentialsSecret is not allowed"), "{e}");

    let roles = kind(&objects, "Role");
    let rules: Vec<&Value> = roles.iter().flat_map(|r| r["rules"].as_array().unwrap()).collect();
    for rule in rules.iter().filter(|r| r["verbs"].as_array().unwrap().iter().any(|v| v == "get" || v == "patch")) {
        assert!(rule["resourceNames"].is_array(), "a get or patch without a name: {rule}");
    }
    let dns = roles.iter().find(|r| r["rules"][0]["resourceNames"][0] == "kube-dns").expect("the kube-dns Role");
    assert_eq!(dns["metadata"]["namespace"], "kube-system");
    for role in kind(&objects, "ClusterRole") {
        for rule in role["rules"].as_array().unwrap() {
            assert!(!rule["resources"].as_array().unwrap().iter().any(|r| r == "leases"), "{rule}");
            assert!(rule["resourceNames"].is_null(), "cluster-wide rule limited by name belongs in a Role: {rule}");
        }
    }
}
