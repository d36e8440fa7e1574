//! (Long: the annotations, references and OCI sources are read here, with their tests.)
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

/// A reference to a policy: a file in the policy store, or an artefact in an OCI registry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PolicyRef {
    /// The policy's name in the store (its `.wasm` file name without the extension); for an
    /// OCI reference, the last component of the repository.
    pub name: String,
    /// Lower-case hex sha256 the component must have, when pinned (store references only:
    /// an OCI reference pins its manifest in [`OciSource::digest`]).
    pub sha256: Option<String>,
    /// Where in a registry the policy is, for `oci://` references.
    pub oci: Option<OciSource>,
}

/// Media types of a policy artefact in a registry. Tenon pushes the CNCF Wasm layout and
/// also accepts Kubewarden's on pull.
pub mod oci_media {
    /// The manifest Tenon pushes and accepts.
    pub const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
    /// The config blob Tenon pushes (CNCF TAG Runtime Wasm artefact layout).
    pub const CONFIG: &str = "application/vnd.wasm.config.v0+json";
    /// The component layer Tenon pushes.
    pub const LAYER: &str = "application/wasm";
    /// Layers accepted as the policy component.
    pub const LAYERS_ACCEPTED: [&str; 2] = [LAYER, "application/vnd.wasm.content.layer.v1+wasm"];
    /// The largest component pulled (the default bundle's are ~0.3 MiB).
    pub const MAX_LAYER_BYTES: u64 = 64 << 20;

    #[derive(serde::Deserialize)]
    struct Manifest {
        #[serde(rename = "schemaVersion")]
        schema_version: u32,
        #[serde(default)]
        layers: Vec<Descriptor>,
    }

    #[derive(serde::Deserialize)]
    struct Descriptor {
        #[serde(rename = "mediaType")]
        media_type: String,
        digest: String,
        size: u64,
    }

    /// The policy layer an image manifest names: its sha256 (hex) and size; or why the
    /// manifest is not a policy artefact's.
    pub fn policy_layer(manifest: &[u8]) -> Result<(String, u64), String> {
        let m: Manifest = serde_json::from_slice(manifest).map_err(|e| format!("unreadable image manifest: {e}"))?;
        if m.schema_version != 2 {
            return Err(format!("manifest schemaVersion {}, expected 2", m.schema_version));
        }
        let wasm: Vec<&Descriptor> =
            m.layers.iter().filter(|l| LAYERS_ACCEPTED.contains(&l.media_type.as_str())).collect();
        let [layer] = wasm.as_slice() else {
            let found: Vec<&str> = m.layers.iter().map(|l| l.media_type.as_str()).collect();
            return Err(format!(
                "expected exactly one layer of type {}, found {found:?}",
                LAYERS_ACCEPTED.join(" or ")
            ));
        };
        let hex = layer
            .digest
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| format!("layer digest {:?} is not sha256", layer.digest))?;
        if layer.size > MAX_LAYER_BYTES {
            return Err(format!("the layer is {} bytes, more than {MAX_LAYER_BYTES}", layer.size));
        }
        Ok((hex.to_string(), layer.size))
    }
}

/// `oci://REGISTRY/REPOSITORY[:TAG][@sha256:DIGEST]`: a policy published to an OCI registry.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OciSource {
    /// `host[:port]`.
    pub registry: String,
    /// Slash-separated path components, lower case.
    pub repository: String,
    pub tag: Option<String>,
    /// Lower-case hex sha256 of the manifest (what a registry and `tenon policy push` print).
    pub digest: Option<String>,
}

impl fmt::Display for OciSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "oci://{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@sha256:{d}")?;
        }
        Ok(())
    }
}

impl OciSource {
    /// The registry's host without its port (an IPv6 address without its brackets).
    pub fn host(&self) -> &str {
        let r = self.registry.as_str();
        if let Some(rest) = r.strip_prefix('[') {
            return rest.split_once(']').map_or(rest, |(h, _)| h);
        }
        match r.rsplit_once(':') {
            Some((h, port)) if port.bytes().all(|b| b.is_ascii_digit()) => h,
            _ => r,
        }
    }

    /// Registries on the loopback interface speak plain HTTP, as Docker assumes. Decided by
    /// address (`127.0.0.0/8`, `::1`) or the name `localhost`, never by a name's prefix:
    /// `127.example.com` is a name like any other.
    pub fn is_loopback(&self) -> bool {
        let host = self.host();
        host == "localhost" || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

impl fmt::Display for PolicyRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.oci, &self.sha256) {
            (Some(o), _) => o.fmt(f),
            (None, Some(d)) => write!(f, "{}@sha256:{d}", self.name),
            (None, None) => f.write_str(&self.name),
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
    #[error(
        "reference scheme {0:?} is not supported: use NAME[@sha256:DIGEST] or oci://REGISTRY/REPOSITORY@sha256:DIGEST"
    )]
    UnsupportedScheme(String),
    #[error("OCI reference {reference:?}: {why}")]
    BadOci { reference: String, why: String },
}

fn is_hex_digest(hex: &str) -> bool {
    hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `sha256:<64 lowercase hex>` → the hex.
fn parse_digest(d: &str) -> Result<String, PolicyRefError> {
    match d.strip_prefix("sha256:") {
        Some(hex) if is_hex_digest(hex) => Ok(hex.to_string()),
        _ => Err(PolicyRefError::BadDigest(d.to_string())),
    }
}

/// A repository path component as the OCI distribution spec allows it.
fn valid_component(c: &str) -> bool {
    let b = c.as_bytes();
    !b.is_empty()
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && c.bytes().all(|x| x.is_ascii_lowercase() || x.is_ascii_digit() || matches!(x, b'.' | b'_' | b'-'))
}

impl OciSource {
    /// Parses what follows `oci://`.
    pub fn parse(rest: &str) -> Result<Self, PolicyRefError> {
        let bad = |why: &str| PolicyRefError::BadOci { reference: format!("oci://{rest}"), why: why.to_string() };
        let (path, digest) = match rest.split_once('@') {
            Some((p, d)) => (p, Some(parse_digest(d)?)),
            None => (rest, None),
        };
        let (registry, repo_tag) = path
            .split_once('/')
            .ok_or_else(|| bad("name the registry and the repository: oci://HOST[:PORT]/REPOSITORY"))?;
        let registry_ok = !registry.is_empty()
            && registry.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
        if !registry_ok {
            return Err(bad("the registry must be HOST or HOST:PORT"));
        }
        // A tag follows the last ':' of the repository part (a registry port is before the '/').
        let (repository, tag) = match repo_tag.rsplit_once(':') {
            Some((r, t)) => (r, Some(t)),
            None => (repo_tag, None),
        };
        if !repository.split('/').all(valid_component) {
            return Err(bad("repository components are lowercase letters, digits and '.', '_' or '-' between them"));
        }
        if let Some(t) = tag {
            let ok = !t.is_empty()
                && t.len() <= 128
                && t.as_bytes()[0] != b'.'
                && t.as_bytes()[0] != b'-'
                && t.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
            if !ok {
                return Err(bad("a tag is up to 128 letters, digits, '.', '_' or '-', not starting with '.' or '-'"));
            }
        }
        if tag.is_none() && digest.is_none() {
            return Err(bad("pin a digest (@sha256:…) or, where tags are allowed, name a tag (:TAG)"));
        }
        Ok(OciSource {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: tag.map(str::to_string),
            digest,
        })
    }
}

impl PolicyRef {
    pub fn parse(s: &str) -> Result<Self, PolicyRefError> {
        let s = s.trim();
        if s.is_empty() {
            return Err(PolicyRefError::Empty);
        }
        if let Some(rest) = s.strip_prefix("oci://") {
            let oci = OciSource::parse(rest)?;
            let name = oci.repository.rsplit('/').next().unwrap_or_default().to_string();
            return Ok(PolicyRef { name, sha256: None, oci: Some(oci) });
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
        let sha256 = digest.map(parse_digest).transpose()?;
        Ok(PolicyRef { name: name.to_string(), sha256, oci: None })
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
        let ref_hint = "write NAME or NAME@sha256:<64 hex digits>, where NAME is a .wasm file in the policy store (e.g. default-scoring), or oci://REGISTRY/REPOSITORY@sha256:<manifest digest>";
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

    /// The policy each hook names, in hook order.
    pub fn named(&self) -> impl Iterator<Item = (PolicyHook, &PolicyRef)> {
        [
            (PolicyHook::Scoring, &self.scoring),
            (PolicyHook::Consolidation, &self.consolidation),
            (PolicyHook::Disruption, &self.disruption),
        ]
        .into_iter()
        .filter_map(|(hook, named)| Some((hook, named.as_ref()?)))
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
            PolicyRef { name: "default-scoring".into(), sha256: None, oci: None }
        );
        let hex = "a".repeat(64);
        assert_eq!(PolicyRef::parse(&format!("amd-first@sha256:{hex}")).unwrap().sha256.as_deref(), Some(hex.as_str()));
        assert!(matches!(PolicyRef::parse("x@sha256:abc"), Err(PolicyRefError::BadDigest(_))));
        assert!(matches!(PolicyRef::parse(&format!("x@sha256:{}", "A".repeat(64))), Err(PolicyRefError::BadDigest(_))));
        assert!(matches!(PolicyRef::parse("Bad Name"), Err(PolicyRefError::BadName(_))));
        assert!(matches!(PolicyRef::parse("https://r/x"), Err(PolicyRefError::UnsupportedScheme(_))));
    }

    #[test]
    fn loopback_is_decided_by_address_not_by_a_name_s_prefix() {
        let src =
            |registry: &str| OciSource { registry: registry.into(), repository: "p".into(), tag: None, digest: None };
        for r in ["127.0.0.1:5000", "127.1.2.3", "localhost:5000", "[::1]:5000", "[::1]"] {
            assert!(src(r).is_loopback(), "{r}");
        }
        for r in ["127.evil.example", "127.evil.example:80", "localhost.evil.example", "10.0.0.1:5000", "[::2]:5000"] {
            assert!(!src(r).is_loopback(), "{r}");
        }
        assert_eq!(src("[::1]:5000").host(), "::1");
        assert_eq!(src("ghcr.io").host(), "ghcr.io");
    }

    #[test]
    fn parses_oci_references() {
        let hex = "b".repeat(64);
        let pinned = PolicyRef::parse(&format!("oci://127.0.0.1:5000/team/amd-first@sha256:{hex}")).unwrap();
        let oci = pinned.oci.as_ref().unwrap();
        assert_eq!((oci.registry.as_str(), oci.repository.as_str()), ("127.0.0.1:5000", "team/amd-first"));
        assert_eq!((oci.tag.as_deref(), oci.digest.as_deref()), (None, Some(hex.as_str())));
        assert_eq!((pinned.name.as_str(), pinned.sha256.as_deref()), ("amd-first", None));
        assert!(oci.is_loopback());
        assert_eq!(pinned.to_string(), format!("oci://127.0.0.1:5000/team/amd-first@sha256:{hex}"));

        let tagged = PolicyRef::parse("oci://ghcr.io/acme/policies/scorer:v1.2").unwrap();
        let oci = tagged.oci.unwrap();
        assert_eq!(
            (oci.repository.as_str(), oci.tag.as_deref(), oci.digest.as_deref()),
            ("acme/policies/scorer", Some("v1.2"), None)
        );
        assert!(!oci.is_loopback());
        let both = PolicyRef::parse(&format!("oci://ghcr.io/acme/scorer:v1@sha256:{hex}")).unwrap();
        assert_eq!(both.oci.unwrap().tag.as_deref(), Some("v1"));

        for bad in [
            "oci://ghcr.io/acme/scorer".to_string(),
            "oci://scorer@sha256:".to_string() + &hex,
            format!("oci://ghcr.io/Acme/scorer@sha256:{hex}"),
            format!("oci://ghcr.io/acme//scorer@sha256:{hex}"),
            "oci://ghcr.io/acme/scorer:-x".to_string(),
            "oci://ghcr.io/acme/scorer@sha256:abc".to_string(),
        ] {
            assert!(PolicyRef::parse(&bad).is_err(), "{bad} must be refused");
        }
        let (_, problems) = NodePoolPolicies::from_annotations(&ann(&[("tenon.dev/scoring-policy", "oci://x/y")]));
        assert!(problems[0].message.contains("pin a digest"), "{problems:?}");
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
