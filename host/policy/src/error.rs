//! What can go wrong with a policy, typed.

use std::fmt;
use thiserror::Error;

/// Why a call did not produce a usable answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FailureKind {
    /// Ran past its deadline (or out of fuel).
    Timeout,
    /// Tried to grow memory past the cap.
    OutOfMemory,
    /// Trapped: panic, unreachable, out-of-bounds access.
    Trap,
    /// Answered, but the answer does not fit the question (wrong length, NaN, unknown ids).
    InvalidOutput,
    /// Could not be loaded or instantiated.
    LoadError,
    /// Returned its own error (`err(message)`), e.g. bad configuration.
    PolicyError,
    /// Not called: it failed repeatedly and is skipped for a while (see breaker.rs).
    CircuitOpen,
}

impl FailureKind {
    pub fn as_str(&self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::OutOfMemory => "out_of_memory",
            FailureKind::Trap => "trap",
            FailureKind::InvalidOutput => "invalid_output",
            FailureKind::LoadError => "load_error",
            FailureKind::PolicyError => "policy_error",
            FailureKind::CircuitOpen => "circuit_open",
        }
    }
}

/// A failed call: the kind, for metrics and fallbacks, and a message for people.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.message)
    }
}

impl Failure {
    /// A failure; its message is capped at [`MAX_TEXT`] bytes.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure { kind, message: capped(&message.into()) }
    }
}

/// The most bytes of guest-provided text (a reason, an error, stderr) the host keeps.
pub const MAX_TEXT: usize = 4096;

/// `text` cut to at most [`MAX_TEXT`] bytes at a character boundary, marked when cut.
pub fn capped(text: &str) -> String {
    if text.len() <= MAX_TEXT {
        return text.to_string();
    }
    let mut end = MAX_TEXT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} … [truncated: {} bytes in all]", &text[..end], text.len())
}

/// Why a policy could not be resolved or loaded.
#[derive(Debug, Error)]
pub enum PolicyError {
    #[error("policy {name:?} not found: {path} does not exist")]
    NotFound { name: String, path: String },
    #[error("policy {name:?}: digest mismatch: the reference pins sha256:{want}, the store holds sha256:{found}")]
    DigestMismatch { name: String, want: String, found: String },
    #[error("not a WebAssembly component (a core module?): build the policy with `cargo build --target wasm32-wasip2`")]
    NotComponent,
    #[error("the component exports {found}, not the {want} world of tenon:policy@0.1.0")]
    WrongWorld { want: String, found: String },
    #[error("cannot load the component: {0}")]
    Load(String),
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error("policy {name:?} is {bytes} bytes, more than the {limit} a policy may be")]
    TooLarge { name: String, bytes: u64, limit: u64 },
    #[error(
        "policy {name:?} is still compiling after {seconds} s; it is used once compiled (a component this slow to compile is likely not a policy)"
    )]
    StillCompiling { name: String, seconds: u64 },
    #[error("policy {name:?} waits to be compiled: {other:?} has been compiling for {seconds} s")]
    CompilerBusy { name: String, other: String, seconds: u64 },
    #[error(
        "policy {name:?} is not loaded: the controller holds {limit} loaded policies, its limit; NodePools name too many distinct policies"
    )]
    TooManyLoaded { name: String, limit: usize },
    #[error("cannot start the policy engine: {0}")]
    Engine(String),
    #[error(transparent)]
    Oci(#[from] crate::oci_cache::OciCacheError),
    #[error(
        "{reference}: tag references are refused, since a tag can move: pin the manifest digest (oci://…@sha256:…, as `tenon policy push` prints), or allow tags (--policy-allow-tags)"
    )]
    TagRefused { reference: String },
    #[error("{reference}: no OCI cache is configured for this policy store")]
    NoOciCache { reference: String },
    #[error(transparent)]
    Untrusted(#[from] tenon_api::policy_trust::Untrusted),
    #[error(
        "{reference}: not signed by a trusted key: the trust policy (policies.trust.signatureKeys) requires a cosign signature by one of its keys; the pull found {found}"
    )]
    Unsigned { reference: String, found: String },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_text_is_cut_at_a_character_boundary_and_marked() {
        assert_eq!(capped("short"), "short");
        let long = "é".repeat(5000);
        let cut = capped(&long);
        assert!(cut.len() < MAX_TEXT + 64, "{}", cut.len());
        assert!(cut.ends_with("[truncated: 10000 bytes in all]"), "{}", &cut[cut.len() - 40..]);
        assert_eq!(Failure::new(FailureKind::Trap, long).message, cut);
    }
}
