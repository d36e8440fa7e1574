//! Validation equivalent to Karpenter's OpenAPI and CEL rules, as plain Rust.
//!
//! Every check runs and every problem is returned, each with the JSON path of the field, what
//! is wrong and how to fix it, so `tenon check` and the controller's status conditions can
//! show a user everything at once instead of one error per `kubectl apply`.

mod ec2nodeclass;
mod kubelet;
mod nodeclaim;
mod nodepool;
pub(crate) mod rules;

pub use ec2nodeclass::validate_ec2nodeclass;
pub use nodeclaim::validate_nodeclaim;
pub use nodepool::validate_nodepool;

use std::fmt;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The object would be rejected, or would not do what it says.
    Error,
    /// Accepted, but probably not what was meant.
    Warning,
}

/// One thing wrong with an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    /// JSON path of the field, e.g. `spec.template.spec.requirements[2].values`.
    pub path: String,
    pub message: String,
    /// What to change to fix it.
    pub hint: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Error => "",
            Severity::Warning => "warning: ",
        };
        write!(f, "{level}{}: {}", self.path, self.message)?;
        if !self.hint.is_empty() {
            write!(f, " (hint: {})", self.hint)?;
        }
        Ok(())
    }
}

/// A field path under construction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldPath(String);

impl FieldPath {
    pub fn root(name: &str) -> Self {
        FieldPath(name.to_string())
    }
    pub fn field(&self, name: &str) -> Self {
        if self.0.is_empty() { FieldPath(name.to_string()) } else { FieldPath(format!("{}.{name}", self.0)) }
    }
    pub fn index(&self, i: usize) -> Self {
        FieldPath(format!("{}[{i}]", self.0))
    }
    pub fn key(&self, k: &str) -> Self {
        FieldPath(format!("{}[{k}]", self.0))
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Collects problems while validating.
#[derive(Default, Debug)]
pub struct Report {
    pub problems: Vec<Problem>,
}

impl Report {
    pub fn error(&mut self, path: &FieldPath, message: impl Into<String>, hint: impl Into<String>) {
        self.push(Severity::Error, path, message.into(), hint.into());
    }
    pub fn warning(&mut self, path: &FieldPath, message: impl Into<String>, hint: impl Into<String>) {
        self.push(Severity::Warning, path, message.into(), hint.into());
    }
    fn push(&mut self, severity: Severity, path: &FieldPath, message: String, hint: String) {
        self.problems.push(Problem { severity, path: path.0.clone(), message, hint });
    }
    pub fn has_errors(&self) -> bool {
        self.problems.iter().any(|p| p.severity == Severity::Error)
    }
    pub fn into_problems(self) -> Vec<Problem> {
        self.problems
    }
}
