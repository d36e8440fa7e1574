//! Tenon's policy annotations on a NodePool: which Wasm policies decide for
//! it, their configuration, and whether they act or only shadow the defaults.

use crate::wellknown::{
    ANNOTATION_CONSOLIDATION_CONFIG, ANNOTATION_CONSOLIDATION_POLICY, ANNOTATION_DISRUPTION_CONFIG,
    ANNOTATION_DISRUPTION_POLICY, ANNOTATION_POLICY_CONFIG, ANNOTATION_POLICY_MODE, ANNOTATION_SCORING_CONFIG,
    ANNOTATION_SCORING_POLICY, TENON_DOMAIN, TENON_NODEPOOL_ANNOTATIONS,
};
use std::collections::BTreeMap;
use std::fmt;
use thiserror::Error;

/// A reference to a policy in the policy store.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyRef {
    /// The policy's name in the store (its `.wasm` file name without the extension).
    pub name: String,
    /// Lower-case hex sha256 the component must have, when pinned.
    pub sha256: Option<String>,
}

impl fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.sha256 {
            Some(d) => write!(f, "{}@sha256:{d}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PolicyRefError {
    #[error("empty policy reference")]
    Empty,
    #[error(
        "policy name {0:?} must be lowercase letters, digits, '-', '_' or '.', starting with a letter or digit, at most 63 characters"
    )]
    BadName(String),
    #[error("digest {0:?} must be sha256:<64 lowercase hex digits>")]
    BadDigest(String),
    #[error("reference scheme {0:?} is not supported yet")]
    UnsupportedScheme(String),
}

impl PolicyRef {
    pub fn parse(s: &str) -> Result<Self, PolicyRefError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(PolicyRefError::Empty);
        }
        if let Some((scheme, _)) = s.split_once("://") {
            return Err(PolicyRefError::UnsupportedScheme(scheme.to_string()));
        }
        let (name, digest) = match s.split_once('@') {
            Some((n, d)) => (n, Some(d)),
            None => (s, None),
        };
        let valid_name = !name.is_empty()
            && name.len() <= 63
            && name.as_bytes()[0].is_ascii_alphanumeric()
            && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.'));
        if !valid_name {
            return Err(PolicyRefError::BadName(name.to_string()));
        }
        let sha256 = match digest {
            None => None,
            Some(d) => {
                let hex = d.strip_prefix("sha256:").ok_or_else(|| PolicyRefError::BadDigest(d.to_string()))?;
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                    return Err(PolicyRefError::BadDigest(d.to_string()));
                }
                Some(hex.to_string())
            }
        };
        Ok(PolicyRef { name: name.to_string(), sha256 })
    }
}

/// Whether a NodePool's policies act (`enforce`) or are only compared with the defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PolicyMode {
    #[default]
    Enforce,
    Shadow,
}

/// The three decisions a NodePool's policies make, each named by its own annotations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PolicyHook {
    Scoring,
    Consolidation,
    Disruption,
}

impl PolicyHook {
    pub const ALL: [PolicyHook; 3] = [PolicyHook::Scoring, PolicyHook::Consolidation, PolicyHook::Disruption];

    /// The annotation naming the hook's policy.
    pub fn policy_annotation(self) -> &'static str {
        match self {
            PolicyHook::Scoring => ANNOTATION_SCORING_POLICY,
            PolicyHook::Consolidation => ANNOTATION_CONSOLIDATION_POLICY,
            PolicyHook::Disruption => ANNOTATION_DISRUPTION_POLICY,
        }
    }

    /// The annotation holding the hook's own configuration.
    pub fn config_annotation(self) -> &'static str {
        match self {
            PolicyHook::Scoring => ANNOTATION_SCORING_CONFIG,
            PolicyHook::Consolidation => ANNOTATION_CONSOLIDATION_CONFIG,
            PolicyHook::Disruption => ANNOTATION_DISRUPTION_CONFIG,
        }
    }
}

/// The parsed policy annotations of one NodePool. Absent entries mean the built-in default.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct NodePoolPolicies {
    pub scoring: Option<PolicyRef>,
    pub consolidation: Option<PolicyRef>,
    pub disruption: Option<PolicyRef>,
    /// `tenon.dev/policy-config` as written: the JSON object every hook without its own gets.
    pub config: Option<String>,
    /// Each hook's own configuration as written (`tenon.dev/scoring-config`, …).
    pub hook_configs: BTreeMap<PolicyHook, String>,
    pub mode: PolicyMode,
}

/// A problem with one annotation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnotationProblem {
    pub key: String,
    pub message: String,
    pub hint: String,
    /// Unknown `tenon.dev/` keys are warnings: accepted, but ignored.
    pub warning: bool,
}

impl NodePoolPolicies {
    /// Parses a NodePool's annotations. Every problem found is returned beside what did
    /// parse; a caller must not act on the policies while any problem is an error.
    pub fn from_annotations(annotations: &BTreeMap<String, String>) -> (Self, Vec<AnnotationProblem>) {
        let mut out = NodePoolPolicies::default();
        let mut problems = Vec::new();
        let mut err = |key: &str, message: String, hint: &str| {
            problems.push(AnnotationProblem { key: key.to_string(), message, hint: hint.to_string(), warning: false })
        };
        let ref_hint = "write NAME or NAME@sha256:<64 hex digits>, where NAME is a .wasm file in the policy store (e.g. default-scoring)";
        for (key, slot) in [
            (ANNOTATION_SCORING_POLICY, &mut out.scoring),
            (ANNOTATION_CONSOLIDATION_POLICY, &mut out.consolidation),
            (ANNOTATION_DISRUPTION_POLICY, &mut out.disruption),
        ] {
            if let Some(v) = annotations.get(key) {
                match PolicyRef::parse(v) {
                    Ok(r) => *slot = Some(r),
                    Err(e) => err(key, e.to_string(), ref_hint),
                }
            }
        }
        let shared = std::iter::once((None, ANNOTATION_POLICY_CONFIG));
        let own = PolicyHook::ALL.into_iter().map(|h| (Some(h), h.config_annotation()));
        for (hook, key) in shared.chain(own) {
            let Some(v) = annotations.get(key) else { continue };
            match serde_json::from_str::<serde_json::Value>(v) {
                Ok(serde_json::Value::Object(_)) => match hook {
                    None => out.config = Some(v.clone()),
                    Some(h) => {
                        out.hook_configs.insert(h, v.clone());
                    }
                },
                Ok(other) => err(
                    key,
                    format!("expected a JSON object, found {}", json_kind(&other)),
                    "wrap the settings in an object, e.g. '{\"maxPremiumPercent\": 10}'",
                ),
                Err(e) => {
                    err(key, format!("not valid JSON: {e}"), "write a JSON object, e.g. '{\"maxPremiumPercent\": 10}'")
                }
            }
        }
        if let Some(v) = annotations.get(ANNOTATION_POLICY_MODE) {
            match v.as_str() {
                "enforce" => out.mode = PolicyMode::Enforce,
                "shadow" => out.mode = PolicyMode::Shadow,
                other => err(ANNOTATION_POLICY_MODE, format!("unknown policy mode {other:?}"), "use enforce or shadow"),
            }
        }
        let prefix = format!("{TENON_DOMAIN}/");
        for key in annotations.keys().filter(|k| k.starts_with(&prefix)) {
            if !TENON_NODEPOOL_ANNOTATIONS.contains(&key.as_str()) {
                problems.push(AnnotationProblem {
                    key: key.clone(),
                    message: format!("unknown Tenon annotation {key:?} is ignored"),
                    hint: format!("known annotations are {}", TENON_NODEPOOL_ANNOTATIONS.join(", ")),
                    warning: true,
                });
            }
        }
        (out, problems)
    }

    /// The configuration `hook`'s policy gets: its own annotation, else the shared
    /// `tenon.dev/policy-config`, else `{}`; with the annotation it came from.
    pub fn config_for(&self, hook: PolicyHook) -> (&str, Option<&'static str>) {
        match (self.hook_configs.get(&hook), &self.config) {
            (Some(own), _) => (own, Some(hook.config_annotation())),
            (None, Some(shared)) => (shared, Some(ANNOTATION_POLICY_CONFIG)),
            (None, None) => ("{}", None),
        }
    }
}

fn json_kind(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn parses_references() {
        assert_eq!(
            PolicyRef::parse("default-scoring").unwrap(),
            PolicyRef { name: "default-scoring".into(), sha256: None }
        );
        let hex = "a".repeat(64);
        assert_eq!(PolicyRef::parse(&format!("amd-first@sha256:{hex}")).unwrap().sha256.as_deref(), Some(hex.as_str()));
        assert!(matches!(PolicyRef::parse("x@sha256:abc"), Err(PolicyRefError::BadDigest(_))));
        assert!(matches!(PolicyRef::parse(&format!("x@sha256:{}", "A".repeat(64))), Err(PolicyRefError::BadDigest(_))));
        assert!(matches!(PolicyRef::parse("Bad Name"), Err(PolicyRefError::BadName(_))));
        assert!(matches!(PolicyRef::parse("oci://r/x@sha256:00"), Err(PolicyRefError::UnsupportedScheme(_))));
    }

    #[test]
    fn parses_annotations_and_reports_every_problem() {
        let (ok, problems) = NodePoolPolicies::from_annotations(&ann(&[
            ("tenon.dev/scoring-policy", "amd-first"),
            ("tenon.dev/policy-config", "{\"maxPremiumPercent\": 10}"),
            ("tenon.dev/policy-mode", "shadow"),
        ]));
        assert!(problems.is_empty());
        assert_eq!(ok.scoring.unwrap().name, "amd-first");
        assert_eq!(ok.mode, PolicyMode::Shadow);

        let (_, errs) = NodePoolPolicies::from_annotations(&ann(&[
            ("tenon.dev/policy-config", "[1,2]"),
            ("tenon.dev/policy-mode", "yolo"),
            ("tenon.dev/disruption-policy", "x@sha1:00"),
            ("tenon.dev/scoring-polcy", "typo"),
        ]));
        assert_eq!(errs.len(), 4);
        assert_eq!(errs.iter().filter(|p| p.warning).count(), 1);
    }

    #[test]
    fn each_hook_takes_its_own_config_else_the_shared_one() {
        let (p, problems) = NodePoolPolicies::from_annotations(&ann(&[
            ("tenon.dev/scoring-policy", "amd-first"),
            ("tenon.dev/disruption-policy", "business-hours"),
            ("tenon.dev/policy-config", r#"{"shared": 1}"#),
            ("tenon.dev/scoring-config", r#"{"maxPremiumPercent": 25}"#),
        ]));
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(
            p.config_for(PolicyHook::Scoring),
            (r#"{"maxPremiumPercent": 25}"#, Some("tenon.dev/scoring-config"))
        );
        assert_eq!(p.config_for(PolicyHook::Disruption), (r#"{"shared": 1}"#, Some("tenon.dev/policy-config")));
        assert_eq!(NodePoolPolicies::default().config_for(PolicyHook::Consolidation), ("{}", None));

        let (_, problems) =
            NodePoolPolicies::from_annotations(&ann(&[("tenon.dev/disruption-config", r#""Asia/Shanghai""#)]));
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].key, "tenon.dev/disruption-config");
        assert!(problems[0].message.contains("expected a JSON object, found a string"), "{}", problems[0].message);
        assert!(!problems[0].warning, "a known annotation, not an unknown one");
    }
}
