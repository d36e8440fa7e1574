//! `tenon check`: validate manifests offline, one line per problem.

use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use tenon_api::decode::{Decoded, Object, decode_and_validate};
use tenon_api::validation::{Problem, Severity};

/// Exit status: every document clean (warnings allowed).
pub const EXIT_OK: u8 = 0;
/// Exit status: at least one validation error.
pub const EXIT_INVALID: u8 = 1;
/// Exit status: unreadable input or broken YAML.
pub const EXIT_UNREADABLE: u8 = 2;

struct Doc {
    file: String,
    index: usize,
    decoded: Decoded,
}

#[derive(Default)]
struct Tally {
    errors: usize,
    warnings: usize,
    unreadable: usize,
    kinds: BTreeMap<String, usize>,
    skipped: usize,
    files: usize,
}

pub fn run(paths: &[PathBuf], policy_dir: Option<&Path>, out: &mut impl Write) -> anyhow::Result<u8> {
    let mut tally = Tally::default();
    let mut docs = Vec::new();
    for input in expand(paths, out, &mut tally)? {
        tally.files += 1;
        let (label, text) = match read(&input) {
            Ok(t) => t,
            Err(e) => {
                writeln!(out, "{}: cannot read: {e}", input.display())?;
                tally.unreadable += 1;
                continue;
            }
        };
        parse_documents(&label, &text, &mut docs, out, &mut tally)?;
    }
    cross_check(&mut docs);
    if let Some(dir) = policy_dir {
        check_policies(&mut docs, dir)?;
    }
    for doc in &docs {
        report(doc, out, &mut tally)?;
    }
    let kinds: Vec<String> = tally.kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
    writeln!(
        out,
        "checked {} document(s) in {} file(s) ({}{}{} skipped): {} errors, {} warnings{}",
        docs.len(),
        tally.files,
        kinds.join(", "),
        if kinds.is_empty() { "" } else { ", " },
        tally.skipped,
        tally.errors,
        tally.warnings,
        if tally.unreadable > 0 { format!(", {} unreadable", tally.unreadable) } else { String::new() },
    )?;
    Ok(if tally.unreadable > 0 {
        EXIT_UNREADABLE
    } else if tally.errors > 0 {
        EXIT_INVALID
    } else {
        EXIT_OK
    })
}

/// Files to read: named files as given, directories searched recursively for YAML, in a
/// stable order so output is reproducible.
fn expand(paths: &[PathBuf], out: &mut impl Write, tally: &mut Tally) -> anyhow::Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.as_os_str() == "-" || p.is_file() {
            files.push(p.clone());
        } else if p.is_dir() {
            let mut found = Vec::new();
            walk(p, &mut found)?;
            found.sort();
            files.extend(found);
        } else {
            writeln!(out, "{}: cannot read: no such file or directory", p.display())?;
            tally.unreadable += 1;
        }
    }
    Ok(files)
}

fn walk(dir: &Path, found: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        let hidden = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        if path.is_dir() {
            walk(&path, found)?;
        } else if matches!(path.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            found.push(path);
        }
    }
    Ok(())
}

fn read(p: &Path) -> std::io::Result<(String, String)> {
    if p.as_os_str() == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        Ok(("<stdin>".to_string(), s))
    } else {
        Ok((p.display().to_string(), std::fs::read_to_string(p)?))
    }
}

fn parse_documents(
    file: &str,
    text: &str,
    docs: &mut Vec<Doc>,
    out: &mut impl Write,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    for (i, de) in serde_yaml::Deserializer::from_str(text).enumerate() {
        let index = i + 1;
        let value = match serde_yaml::Value::deserialize(de) {
            Ok(v) => v,
            Err(e) => {
                // serde_yaml's message already names the line and column.
                writeln!(out, "{file}:{index}: YAML syntax error: {e}")?;
                tally.unreadable += 1;
                // The parser cannot resynchronise after a syntax error; the rest of the file is unread.
                return Ok(());
            }
        };
        if value.is_null() {
            continue;
        }
        // `tenon simulate` scenarios live beside manifests; they are not Kubernetes objects.
        let scenario =
            value.get("manifests").is_some() && value.get("duration").is_some() && value.get("kind").is_none();
        if scenario {
            writeln!(out, "{file}:{index}: skipped (a tenon simulate scenario; run it with `tenon simulate {file}`)")?;
            tally.skipped += 1;
            continue;
        }
        // Deployment material kept beside manifests (examples/eks/): not Kubernetes objects.
        let no_kind = value.get("kind").is_none() && value.get("apiVersion").is_none();
        let helm_values = std::path::Path::new(file)
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("values") && (n.ends_with(".yaml") || n.ends_with(".yml")));
        let fixtures = value.get("cases").is_some_and(|c| c.is_sequence());
        if no_kind && (value.get("AWSTemplateFormatVersion").is_some() || helm_values || fixtures) {
            let what = if fixtures {
                "policy fixtures; run them with `tenon policy test POLICY.wasm FILE`"
            } else if helm_values {
                "Helm values"
            } else {
                "a CloudFormation template"
            };
            writeln!(out, "{file}:{index}: skipped ({what})")?;
            tally.skipped += 1;
            continue;
        }
        match serde_json::to_value(&value) {
            Ok(json) => docs.push(Doc { file: file.to_string(), index, decoded: decode_and_validate(json) }),
            Err(e) => {
                writeln!(out, "{file}:{index}: not a Kubernetes object: {e} (hint: mapping keys must be strings)")?;
                tally.errors += 1;
            }
        }
    }
    Ok(())
}

/// Checks that need several documents: NodeClass references and duplicate names.
fn cross_check(docs: &mut [Doc]) {
    let classes: BTreeSet<String> = docs
        .iter()
        .filter_map(|d| match &d.decoded.object {
            Some(Object::EC2NodeClass(nc)) => Some(d.decoded.name.clone()).filter(|_| nc.metadata.name.is_some()),
            _ => None,
        })
        .collect();
    let mut seen: BTreeSet<(String, String)> = BTreeSet::new();
    for doc in docs.iter_mut() {
        let d = &mut doc.decoded;
        let (path, ncr) = match &d.object {
            Some(Object::NodePool(np)) => {
                ("spec.template.spec.nodeClassRef.name", np.spec.template.spec.node_class_ref.clone())
            }
            Some(Object::NodeClaim(nc)) => ("spec.nodeClassRef.name", nc.spec.node_class_ref.clone()),
            _ => ("", None),
        };
        if let Some(ncr) = ncr
            && ncr.kind == "EC2NodeClass"
            && !ncr.name.is_empty()
            && !classes.contains(&ncr.name)
        {
            d.problems.push(Problem {
                severity: Severity::Warning,
                path: path.to_string(),
                message: format!("EC2NodeClass {:?} is not in the input", ncr.name),
                hint: "check the name, or include the EC2NodeClass; until it exists the NodePool is not Ready"
                    .to_string(),
            });
        }
        let tenon_kind = matches!(d.object, Some(Object::NodePool(_) | Object::NodeClaim(_) | Object::EC2NodeClass(_)));
        if tenon_kind && !d.name.is_empty() && !seen.insert((d.kind.clone(), d.name.clone())) {
            d.problems.push(Problem {
                severity: Severity::Warning,
                path: "metadata.name".to_string(),
                message: format!("another {} named {:?} appears earlier in the input", d.kind, d.name),
                hint: "the later one replaces the earlier when applied; rename one of them".to_string(),
            });
        }
    }
}

/// Each NodePool's policy annotations against the store in `dir`: the component must be
/// there, match a pinned digest, load, and implement the world of the hook that names it.
fn check_policies(docs: &mut [Doc], dir: &Path) -> anyhow::Result<()> {
    use tenon_policy::adapters::Hook;
    use tenon_policy::cluster::{annotation, refused_config, wrong_world};
    use tenon_policy::oci_cache::{OciCache, OciCacheError};
    use tenon_policy::{PolicyEngine, PolicyError, PolicyStore};
    let mut store = PolicyStore::new(dir, PolicyEngine::new(tenon_policy::Limits::default(), None)?);
    if let Some(cache) = OciCache::default_dir() {
        store = store.with_oci(OciCache::new(cache), false);
    }
    for doc in docs.iter_mut() {
        let Some(Object::NodePool(np)) = &doc.decoded.object else { continue };
        let annotations = np.metadata.annotations.clone().unwrap_or_default();
        let (parsed, _) = tenon_api::policy::NodePoolPolicies::from_annotations(&annotations);
        for (hook, r) in parsed.named() {
            let hook = Hook::named(hook);
            let key = annotation(hook);
            let problem = |severity, message: String, hint: &str| Problem {
                severity,
                path: format!("metadata.annotations.{key}"),
                message,
                hint: hint.to_string(),
            };
            let found = match store.resolve(r) {
                Ok(policy) => match wrong_world(hook, &policy) {
                    Some(m) => Some(problem(Severity::Error, m, "each annotation takes a policy of its own kind")),
                    None => {
                        let (config, from) = parsed.config_for(hook.annotated());
                        refused_config(&policy, config, from).map(|m| Problem {
                            severity: Severity::Error,
                            path: format!("metadata.annotations.{}", from.unwrap_or(key)),
                            message: m,
                            hint: "fix the configuration the policy's documentation describes".to_string(),
                        })
                    }
                },
                Err(e @ PolicyError::NotFound { .. }) => Some(problem(
                    Severity::Warning,
                    e.to_string(),
                    "until it is in the controller's policy store the NodePool reports PolicyUnavailable and fails safe",
                )),
                Err(e @ PolicyError::Oci(OciCacheError::NotPulled { .. })) => Some(problem(
                    Severity::Warning,
                    format!("{e} on this machine, so it was not checked"),
                    "`tenon policy pull REFERENCE` fetches it here; the controller pulls it itself",
                )),
                Err(e @ PolicyError::TagRefused { .. }) => Some(problem(
                    Severity::Warning,
                    e.to_string(),
                    "a controller started with --policy-allow-tags takes it; others report PolicyUnavailable",
                )),
                Err(e) => Some(problem(Severity::Error, e.to_string(), "build and pin the component you mean")),
            };
            doc.decoded.problems.extend(found);
        }
    }
    Ok(())
}

fn report(doc: &Doc, out: &mut impl Write, tally: &mut Tally) -> anyhow::Result<()> {
    let d = &doc.decoded;
    let who = format!(
        "{}/{}",
        if d.kind.is_empty() { "<no kind>" } else { &d.kind },
        if d.name.is_empty() { "<unnamed>" } else { &d.name }
    );
    let at = format!("{}:{}", doc.file, doc.index);
    if let Some(Object::Other { .. }) = d.object {
        tally.skipped += 1;
        writeln!(out, "{at}: {who}: skipped (not a Tenon kind)")?;
        return Ok(());
    }
    *tally.kinds.entry(d.kind.clone()).or_default() += 1;
    for p in &d.problems {
        match p.severity {
            Severity::Error => tally.errors += 1,
            Severity::Warning => tally.warnings += 1,
        }
        writeln!(out, "{at}: {who}: {p}")?;
    }
    Ok(())
}
