//! `tenon check` and `tenon crds` as a user runs them: real binary, real files.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use support::{repo, tenon};

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn error_lines(out: &str) -> Vec<&str> {
    out.lines()
        .filter(|l| {
            !l.starts_with("checked ") && !l.contains(": warning: ") && !l.ends_with("skipped (not a Tenon kind)")
        })
        .collect()
}

fn fixtures(dir: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo().join(dir)).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
}

fn expected_path(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix("# expect: "))
        .unwrap_or_else(|| panic!("{} has no '# expect:' line", file.display()))
        .to_string()
}

#[test]
fn seed_examples_are_valid() {
    let o = tenon(&["check", "examples/seeds/"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(error_lines(&out).is_empty(), "{out}");
    assert!(out.contains("3 NodePool"), "all three seed NodePools were checked: {out}");
    assert!(out.contains("2 EC2NodeClass"), "{out}");
    assert!(out.contains("Pod/impossible-arch: skipped"), "other kinds are reported as skipped: {out}");
    // Everything under examples/ is valid, and simulator scenarios are recognised as such.
    let o = tenon(&["check", "examples/"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("lab-general-rollout.yaml:1: skipped (a tenon simulate scenario"), "{out}");
    assert!(out.contains("examples/eks/cloudformation.yaml:1: skipped (a CloudFormation template)"), "{out}");
    assert!(out.contains("examples/eks/values.yaml:1: skipped (Helm values)"), "{out}");
    assert!(out.contains("examples/policies/price-per-vcpu/fixtures/cases.yaml:1: skipped (policy fixtures"), "{out}");
}

#[test]
fn karpenters_own_examples_pass_but_the_one_its_pattern_rejects() {
    let o = tenon(&["check", "tests/fixtures/karpenter-examples/"]);
    let out = stdout(&o);
    let errors = error_lines(&out);
    // Karpenter's CRD refuses a nodeClassRef group containing '/' (`^[^/]*$`); this example
    // writes `karpenter.k8s.aws/v1` there.
    assert_eq!(errors.len(), 1, "{out}");
    assert!(
        errors[0].starts_with("tests/fixtures/karpenter-examples/windows-custom-userdata.yaml:")
            && errors[0].contains("spec.template.spec.nodeClassRef.group"),
        "{out}"
    );
    assert!(out.contains(" in 22 file(s) "), "every example was read: {out}");
}

#[test]
fn a_document_without_kind_is_an_error_not_skipped() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tenon"))
        .args(["check", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"metadata: {name: x}\nspec: {}\n").unwrap();
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("kind: kind is required") && out.contains("apiVersion: apiVersion is required"), "{out}");
}

#[test]
fn every_invalid_fixture_fails_on_its_field_and_only_there() {
    let files = fixtures("tests/fixtures/invalid");
    assert!(files.len() >= 15, "at least 15 invalid fixtures");
    for f in files {
        let expect = expected_path(&f);
        let o = tenon(&["check", f.to_str().unwrap()]);
        let out = stdout(&o);
        assert_eq!(o.status.code(), Some(1), "{}: {out}", f.display());
        let errors = error_lines(&out);
        assert_eq!(errors.len(), 1, "{} should break exactly one rule: {out}", f.display());
        assert!(errors[0].contains(&format!(": {expect}: ")), "{} should name {expect}: {out}", f.display());
        assert!(errors[0].contains("(hint: "), "every error carries a fix hint: {out}");
    }
}

#[test]
fn unreadable_input_exits_2_with_line_and_column() {
    for f in fixtures("tests/fixtures/unreadable") {
        let o = tenon(&["check", f.to_str().unwrap()]);
        let out = stdout(&o);
        assert_eq!(o.status.code(), Some(2), "{out}");
        assert!(out.contains("YAML syntax error") && out.contains(" line ") && out.contains(" column "), "{out}");
    }
    let o = tenon(&["check", "does/not/exist.yaml"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("does/not/exist.yaml: cannot read"));
}

#[test]
fn unreadable_outranks_invalid_and_every_file_is_reported() {
    let o = tenon(&[
        "check",
        "tests/fixtures/invalid/nodepool-weight-out-of-range.yaml",
        "tests/fixtures/unreadable/unclosed-flow.yaml",
        "examples/",
    ]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("spec.weight"), "{out}");
    assert!(out.contains("YAML syntax error"), "{out}");
}

#[test]
fn reads_standard_input_and_multi_document_streams() {
    let np = std::fs::read_to_string(repo().join("examples/seeds/lab-general/nodepool-lab-general.yaml")).unwrap();
    let bad =
        std::fs::read_to_string(repo().join("tests/fixtures/invalid/nodepool-budget-percent-over-100.yaml")).unwrap();
    let stream = format!("{np}---\n{bad}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tenon"))
        .args(["check", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), stream.as_bytes()).unwrap();
    let o = child.wait_with_output().unwrap();
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(
        out.contains("<stdin>:2: NodePool/pct: spec.disruption.budgets[0].nodes"),
        "second document is numbered 2: {out}"
    );
    // lab-general's EC2NodeClass is not in this input.
    assert!(out.contains("<stdin>:1: NodePool/lab-general: warning: spec.template.spec.nodeClassRef.name: EC2NodeClass \"lab-general\" is not in the input"), "{out}");
}

#[test]
fn crds_output_is_the_chart_file_byte_for_byte() {
    let o = tenon(&["crds"]);
    assert_eq!(o.status.code(), Some(0));
    let chart = std::fs::read(repo().join("charts/tenon-crd/templates/crds.yaml")).unwrap();
    assert!(
        o.stdout == chart,
        "charts/tenon-crd/templates/crds.yaml is stale: run `cargo run -q -p tenon -- crds > charts/tenon-crd/templates/crds.yaml`"
    );
}
