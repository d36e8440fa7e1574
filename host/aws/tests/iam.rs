//! The AWS operations the provider's source calls are exactly those `docs/iam.md` lists.

use std::collections::BTreeSet;
use std::path::Path;

const SERVICES: &[&str] = &["ec2", "eks", "iam", "pricing", "sqs", "ssm"];
const CLIENT_METHODS: &[&str] = &["clone", "config"];

fn pascal(snake: &str) -> String {
    snake.split('_').map(|w| w[..1].to_uppercase() + &w[1..]).collect()
}

/// `service:Operation` for every `<client>.<operation>()` call, however the call is wrapped
/// across lines (`p.clients\n.ec2\n.create_fleet()`).
fn called(src: &str) -> BTreeSet<String> {
    // Whitespace runs become one space, and spaces next to a `.` go (chained calls).
    let words: Vec<&str> = src.split_whitespace().collect();
    let flat = words.join(" ").replace(" .", ".").replace(". ", ".");
    let mut out = BTreeSet::new();
    for svc in SERVICES {
        let needle = format!("{svc}.");
        let mut from = 0;
        while let Some(i) = flat[from..].find(&needle) {
            let start = from + i;
            from = start + needle.len();
            let before = flat[..start].chars().last();
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            let rest = &flat[from..];
            let op: String =
                rest.chars().take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_').collect();
            // A client's own methods (`sqs.clone()`) are no AWS operation.
            if !op.is_empty() && !CLIENT_METHODS.contains(&op.as_str()) && rest[op.len()..].starts_with("()") {
                out.insert(format!("{svc}:{}", pascal(&op)));
            }
        }
    }
    out
}

#[test]
fn source_and_docs_list_the_same_operations() {
    let root = Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("run under cargo test")).to_path_buf();
    let mut calls = BTreeSet::new();
    for entry in std::fs::read_dir(root.join("src")).unwrap() {
        let path = entry.unwrap().path();
        let src = std::fs::read_to_string(&path).unwrap();
        // Unit tests may build SDK values but never call AWS; only production code counts.
        let prod = src.split("#[cfg(test)]").next().unwrap_or_default();
        calls.extend(called(prod));
    }
    let doc = std::fs::read_to_string(root.join("../../docs/iam.md")).unwrap();
    let table =
        doc.split("<!-- operations:begin -->").nth(1).and_then(|s| s.split("<!-- operations:end -->").next()).unwrap();
    let documented: BTreeSet<String> =
        table.lines().filter_map(|l| l.strip_prefix("| `")?.split('`').next().map(str::to_string)).collect();
    let undocumented: Vec<&String> = calls.difference(&documented).collect();
    let unused: Vec<&String> = documented.difference(&calls).collect();
    assert!(
        undocumented.is_empty() && unused.is_empty(),
        "called but not in docs/iam.md: {undocumented:?}; documented but not called: {unused:?}"
    );
    assert!(calls.len() >= 20, "the scanner found only {calls:?}");
}

#[test]
fn the_scanner_sees_wrapped_calls() {
    let src = "let x = p\n    .clients\n    .ec2\n    .create_fleet()\n; self.sqs.receive_message().queue_url(u); myec2.not_this(); ec2.builder_only; match ec2.terminate_instances() {} Queue::new(self.clients.sqs.clone(), q)";
    assert_eq!(
        called(src),
        BTreeSet::from([
            "ec2:CreateFleet".to_string(),
            "ec2:TerminateInstances".to_string(),
            "sqs:ReceiveMessage".to_string()
        ])
    );
}
