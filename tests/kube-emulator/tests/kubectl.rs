//! The emulator as real kubectl sees it: applying Karpenter's CRDs and the runbooks'
//! manifests, printer columns, label/annotate/patch, finalizers, watches, and a drain held by
//! a PodDisruptionBudget.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};
use tenon_kube_emulator::Emulator;

fn repo() -> PathBuf {
    Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("run under cargo test")).join("../..")
}

struct Kubectl {
    emu: Emulator,
    config: PathBuf,
}

impl Kubectl {
    fn start(name: &str) -> Kubectl {
        let emu = Emulator::start().expect("emulator listens");
        let dir = std::env::temp_dir().join(format!("tenon-kubectl-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let config = dir.join("kubeconfig");
        std::fs::write(&config, emu.kubeconfig()).unwrap();
        Kubectl { emu, config }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new("kubectl");
        c.args(args).env("KUBECONFIG", &self.config).current_dir(repo());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("kubectl on PATH (scripts/setup-tools installs it)")
    }

    /// Runs kubectl and returns stdout, failing the test with stderr when it fails.
    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "kubectl {args:?} failed:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn apply_karpenter(&self) {
        self.ok(&["apply", "-f", "charts/tenon-crd/templates/crds.yaml"]);
        self.ok(&["apply", "-f", "examples/seeds/lab-general/ec2nodeclass-lab-general.yaml"]);
        self.ok(&["apply", "-f", "examples/seeds/lab-general/nodepool-lab-general.yaml"]);
        self.ok(&["apply", "-f", "examples/seeds/lab-general/karpenter-positive.yaml"]);
        self.ok(&["apply", "-f", "examples/seeds/lab-general/karpenter-negative.yaml"]);
        self.ok(&["apply", "-k", "examples/seeds/amd-fallback"]);
        // The runbook's test workload is applied on its own (it is not in the kustomization).
        self.ok(&["apply", "-f", "examples/seeds/amd-fallback/test.yaml"]);
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        if let Some(dir) = self.config.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Table rows as whitespace-separated cells.
fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines().map(|l| l.split_whitespace().map(str::to_string).collect()).collect()
}

#[test]
fn karpenter_crds_and_every_seed_manifest_apply() {
    let k = Kubectl::start("apply");
    k.apply_karpenter();
    let out = k.ok(&["get", "nodepools"]);
    let r = rows(&out);
    assert_eq!(r[0], ["NAME", "NODECLASS", "NODES", "READY", "AGE"], "Karpenter's printer columns:\n{out}");
    let names: Vec<&str> = r[1..].iter().map(|row| row[0].as_str()).collect();
    assert_eq!(names, ["default-amd", "default-fallback", "lab-general"]);
    assert_eq!(r[3][1], "lab-general", "NODECLASS of lab-general");
    let wide = rows(&k.ok(&["get", "nodepools", "-o", "wide"]));
    assert_eq!(wide[0], ["NAME", "NODECLASS", "NODES", "READY", "AGE", "WEIGHT", "CPU", "MEMORY"]);
    assert_eq!(wide[1][5], "100", "default-amd's weight");
    assert_eq!(rows(&k.ok(&["get", "ec2nc"]))[0], ["NAME", "READY", "AGE"], "short name and columns of EC2NodeClass");
    assert!(k.ok(&["get", "deploy", "-n", "karpenter-lab"]).contains("inflate"));
    assert!(k.ok(&["get", "deploy", "-A", "-o", "name"]).contains("deployment.apps/test-karpenter"));
    assert!(
        k.ok(&["get", "pod", "impossible-arch", "-n", "karpenter-lab", "-o", "name"]).contains("pod/impossible-arch")
    );
    let described = k.ok(&["describe", "nodepool", "lab-general"]);
    assert!(described.contains("Consolidation Policy:  WhenEmptyOrUnderutilized"), "{described}");
    // Applying again changes nothing.
    let again = k.ok(&["apply", "-f", "examples/seeds/lab-general/nodepool-lab-general.yaml"]);
    assert!(again.contains("unchanged"), "{again}");
    let o = k.run(&["get", "nodepool", "missing"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("nodepools.karpenter.sh \"missing\" not found"));
}

#[test]
fn label_annotate_patch_and_finalizers_behave_like_a_cluster() {
    let k = Kubectl::start("edit");
    k.apply_karpenter();
    k.ok(&["label", "nodepool", "lab-general", "team=platform"]);
    k.ok(&["annotate", "nodepool", "lab-general", "tenon.dev/policy-mode=shadow"]);
    let meta = k.ok(&[
        "get",
        "nodepool",
        "lab-general",
        "-o",
        "jsonpath={.metadata.labels.team} {.metadata.annotations.tenon\\.dev/policy-mode} {.metadata.generation}",
    ]);
    assert_eq!(meta, "platform shadow 1", "metadata edits do not bump generation");
    k.ok(&["patch", "nodepool", "lab-general", "--type", "merge", "-p", r#"{"spec":{"weight":5}}"#]);
    k.ok(&[
        "patch",
        "nodepool",
        "lab-general",
        "--type",
        "json",
        "-p",
        r#"[{"op":"replace","path":"/spec/weight","value":7}]"#,
    ]);
    assert_eq!(
        k.ok(&["get", "nodepool", "lab-general", "-o", "jsonpath={.spec.weight} {.metadata.generation}"]),
        "7 3"
    );
    k.ok(&["scale", "deploy", "inflate", "-n", "karpenter-lab", "--replicas=3"]);
    assert_eq!(k.ok(&["get", "deploy", "inflate", "-n", "karpenter-lab", "-o", "jsonpath={.spec.replicas}"]), "3");
    // Status is its own subresource.
    k.ok(&[
        "patch",
        "nodepool",
        "lab-general",
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"resources":{"nodes":"2"}}}"#,
    ]);
    assert_eq!(
        k.ok(&["get", "nodepool", "lab-general", "-o", "jsonpath={.status.resources.nodes} {.metadata.generation}"]),
        "2 3"
    );

    // A finalizer holds the deletion until it is removed.
    k.ok(&[
        "patch",
        "nodepool",
        "lab-general",
        "--type",
        "merge",
        "-p",
        r#"{"metadata":{"finalizers":["karpenter.sh/termination"]}}"#,
    ]);
    k.ok(&["delete", "nodepool", "lab-general", "--wait=false"]);
    let ts = k.ok(&["get", "nodepool", "lab-general", "-o", "jsonpath={.metadata.deletionTimestamp}"]);
    assert!(ts.ends_with('Z'), "deletionTimestamp set: {ts:?}");
    k.ok(&["patch", "nodepool", "lab-general", "--type", "merge", "-p", r#"{"metadata":{"finalizers":null}}"#]);
    let o = k.run(&["get", "nodepool", "lab-general"]);
    assert!(!o.status.success(), "gone once the finalizer is removed");
}

#[test]
fn get_watch_streams_changes() {
    let k = Kubectl::start("watch");
    k.apply_karpenter();
    let mut w = k
        .cmd(&["get", "ec2nodeclasses", "-w", "--request-timeout=20s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let lines = read_lines(w.stdout.take().unwrap());
    // The header and the list first: the watch is open.
    let mut seen = take_lines(&lines, 3);
    k.ok(&["label", "ec2nc", "lab-general", "x=y"]);
    k.ok(&["delete", "ec2nc", "default"]);
    seen.extend(take_lines(&lines, 2));
    let _ = w.kill();
    let _ = w.wait();
    let text = seen.join("\n");
    let names: Vec<&str> = seen.iter().skip(1).filter_map(|l| l.split_whitespace().next()).collect();
    // The list (default, lab-general), then lab-general's label, then default's deletion.
    assert_eq!(names, ["default", "lab-general", "lab-general", "default"], "{text}");
}

#[test]
fn drain_retries_while_a_pdb_refuses_and_finishes_once_it_allows() {
    let k = Kubectl::start("drain");
    let manifest = std::env::temp_dir().join(format!("tenon-drain-{}.yaml", std::process::id()));
    std::fs::write(
        &manifest,
        r#"
apiVersion: v1
kind: Node
metadata: {name: node-a}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: default
  labels: {app: web}
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web-5d9c, uid: 6b1f8a52-1111-4a5e-9c1e-0d2f3c4b5a69, controller: true}]
spec:
  nodeName: node-a
  terminationGracePeriodSeconds: 5
  containers: [{name: app, image: nginx}]
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: default}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
"#,
    )
    .unwrap();
    k.ok(&["apply", "-f", manifest.to_str().unwrap()]);
    let _ = std::fs::remove_file(&manifest);
    k.ok(&[
        "patch",
        "pod",
        "web-1",
        "--subresource=status",
        "--type",
        "merge",
        "-p",
        r#"{"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True"}]}}"#,
    ]);
    assert_eq!(
        k.ok(&["get", "pdb", "web", "-o", "jsonpath={.status.disruptionsAllowed} {.status.currentHealthy}"]),
        "0 1"
    );
    let started = Instant::now();
    let mut drain = k
        .cmd(&["drain", "node-a", "--ignore-daemonsets", "--timeout=60s"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let said_to = std::sync::mpsc::channel();
    read_lines_to(drain.stdout.take().unwrap(), said_to.0.clone());
    read_lines_to(drain.stderr.take().unwrap(), said_to.0);
    let lines = said_to.1;
    // Until kubectl says the PDB refused an eviction.
    let mut said = Vec::new();
    while !said.iter().any(|l: &String| l.contains("Cannot evict pod")) {
        said.extend(take_lines(&lines, 1));
    }
    assert_eq!(k.ok(&["get", "pod", "web-1", "-o", "name"]).trim(), "pod/web-1", "the PDB holds the pod");
    assert_eq!(k.ok(&["get", "node", "node-a", "-o", "jsonpath={.spec.unschedulable}"]), "true", "cordoned first");
    k.ok(&["patch", "pdb", "web", "--type", "merge", "-p", r#"{"spec":{"minAvailable":0}}"#]);
    let status = drain.wait().unwrap();
    said.extend(lines.iter());
    let text = said.join("\n");
    assert!(status.success(), "{text}");
    assert!(
        text.contains("error when evicting pods/\"web-1\" -n \"default\" (will retry after 5s): Cannot evict pod as it would violate the pod's disruption budget."),
        "{text}"
    );
    assert!(text.contains("node/node-a drained"), "{text}");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(k.ok(&["get", "pods", "-o", "name"]).is_empty());
    // Injected faults reach kubectl as the server's errors.
    k.emu.fail_next("get", "nodes", 500, 1);
    let o = k.run(&["get", "node", "node-a"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("injected fault"), "{}", String::from_utf8_lossy(&o.stderr));
    k.ok(&["get", "node", "node-a"]);
}

#[test]
fn writes_are_admitted_against_the_crds_schema_and_cel_rules() {
    let k = Kubectl::start("admission");
    k.ok(&["apply", "-f", "charts/tenon-crd/templates/crds.yaml"]);
    let dir = k.config.parent().expect("the test's directory").to_path_buf();
    let write = |name: &str, yaml: &str| {
        let p = dir.join(name);
        std::fs::write(&p, yaml).unwrap();
        p.display().to_string()
    };
    let pool = |labels: &str| {
        format!(
            r#"apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {{name: workers}}
spec:
  template:
    metadata:
      labels: {{{labels}}}
    spec:
      requirements: [{{key: kubernetes.io/arch, operator: In, values: [amd64]}}]
      nodeClassRef: {{group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}}
  disruption:
    consolidationPolicy: Balanced
"#
        )
    };
    // A label in Karpenter's own domain breaks a CEL rule: 422 with the rule's message.
    let bad = write("bad.yaml", &pool("karpenter.sh/team: a"));
    let o = k.run(&["apply", "-f", &bad]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "refused");
    assert!(
        err.contains(r#"The NodePool "workers" is invalid: spec.template.metadata.labels: Invalid value: "object": label domain "karpenter.sh" is restricted"#),
        "{err}"
    );
    // Kubernetes-domain labels are the user's; consolidateAfter defaults to 0s.
    let good = write("good.yaml", &pool(r#"node-role.kubernetes.io/worker: """#));
    k.ok(&["apply", "-f", &good]);
    let after = k.ok(&["get", "nodepool", "workers", "-o", "jsonpath={.spec.disruption.consolidateAfter}"]);
    assert_eq!(after, "0s");
    // Transition rules: nodeClassRef.kind cannot change.
    let o = k.run(&[
        "patch",
        "nodepool",
        "workers",
        "--type",
        "merge",
        "-p",
        r#"{"spec":{"template":{"spec":{"nodeClassRef":{"kind":"OtherNodeClass"}}}}}"#,
    ]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("nodeClassRef.kind is immutable"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // A NodeClaim's spec cannot be edited.
    let claim = write(
        "claim.yaml",
        r#"apiVersion: karpenter.sh/v1
kind: NodeClaim
metadata: {name: workers-abcde}
spec:
  requirements: [{key: kubernetes.io/arch, operator: In, values: [amd64]}]
  nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
"#,
    );
    k.ok(&["apply", "-f", &claim]);
    let o =
        k.run(&["patch", "nodeclaim", "workers-abcde", "--type", "merge", "-p", r#"{"spec":{"expireAfter":"1h"}}"#]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("spec: Invalid value: \"object\": spec is immutable"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Its metadata can.
    k.ok(&["label", "nodeclaim", "workers-abcde", "team=a"]);
    // Unknown fields are pruned, as a structural schema prunes them.
    let extra = write(
        "extra.yaml",
        &pool(r#"node-role.kubernetes.io/worker: """#).replace("  disruption:\n", "  notAField: 1\n  disruption:\n"),
    );
    k.ok(&["apply", "--validate=false", "-f", &extra]);
    let spec = k.ok(&["get", "nodepool", "workers", "-o", "jsonpath={.spec}"]);
    assert!(!spec.contains("notAField"), "{spec}");
}

#[test]
fn an_ec2nodeclass_with_every_karpenter_field_round_trips() {
    let k = Kubectl::start("every-field");
    k.ok(&["apply", "-f", "charts/tenon-crd/templates/crds.yaml"]);
    let file = "tests/fixtures/ec2nodeclass-every-field.yaml";
    k.ok(&["apply", "-f", file]);
    let sent: serde_json::Value = serde_yaml::from_str(&std::fs::read_to_string(repo().join(file)).unwrap()).unwrap();
    let stored: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "ec2nodeclass", "every-field", "-o", "json"])).unwrap();
    assert_eq!(stored["spec"], sent["spec"], "every field kept as written");
    // Status, through the status subresource, keeps what Karpenter writes there too.
    let reservation = serde_json::json!({
        "availabilityZone": "us-east-1a", "id": "cr-56fac701cc1951b03", "instanceMatchCriteria": "targeted",
        "instanceType": "p5.48xlarge", "ownerID": "012345678901", "reservationType": "capacity-block",
        "state": "active", "interruptible": true, "endTime": "2026-12-31T00:00:00Z",
    });
    let patch = serde_json::json!({"status": {"capacityReservations": [reservation]}}).to_string();
    k.ok(&["patch", "ec2nodeclass", "every-field", "--subresource=status", "--type=merge", "-p", &patch]);
    let stored: serde_json::Value =
        serde_json::from_str(&k.ok(&["get", "ec2nodeclass", "every-field", "-o", "json"])).unwrap();
    assert_eq!(stored["status"]["capacityReservations"][0], reservation);
    assert_eq!(stored["spec"], sent["spec"]);
}

/// The lines `from` writes, as they come (read on a thread of their own).
fn read_lines(from: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    read_lines_to(from, tx);
    rx
}

/// Sends each line `from` writes to `to`, until it closes.
fn read_lines_to(from: impl std::io::Read + Send + 'static, to: std::sync::mpsc::Sender<String>) {
    use std::io::BufRead;
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(from).lines().map_while(Result::ok) {
            if to.send(line).is_err() {
                break;
            }
        }
    });
}

/// The next `n` lines, waiting up to 30 s for each.
fn take_lines(lines: &std::sync::mpsc::Receiver<String>, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| lines.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|e| panic!("line {i} of {n}: {e}")))
        .collect()
}
