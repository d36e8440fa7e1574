//! The controller's one error type, as controller-rs has it: each variant is a metric label,
//! and every reconciler returns it so the runner can count it and decide the requeue.

use tenon_core::cloud::CloudError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The API server refused or did not answer a request.
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// The cloud provider refused or did not answer.
    #[error("{what}: {source}")]
    Cloud {
        what: String,
        #[source]
        source: CloudError,
    },
    /// Something that must hold did not (several Nodes for one NodeClaim, a decision that
    /// panicked).
    #[error("invariant: {0}")]
    Invariant(String),
}

impl Error {
    pub fn kube(what: impl Into<String>, source: kube::Error) -> Error {
        Error::Kube { what: what.into(), source }
    }

    pub fn cloud(what: impl Into<String>, source: CloudError) -> Error {
        Error::Cloud { what: what.into(), source }
    }

    /// The `error` label of `tenon_controller_reconcile_errors_total` (where a launch, which
    /// runs on its own task, counts as `launch`).
    pub fn label(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "kube",
            Error::Cloud { .. } => "cloud",
            Error::Invariant(_) => "invariant",
        }
    }

    /// A conflict or a missing object: the cache is behind, and the next reconcile (on
    /// the change that brings it up to date) sees it right. Not worth a backoff.
    pub fn is_stale_read(&self) -> bool {
        matches!(self, Error::Kube { source: kube::Error::Api(s), .. } if s.code == 409 || s.code == 404)
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The errors of one reconcile that goes on past a failing object (one NodePool's status
/// write failing must not keep the others from theirs): every failure logged where it
/// happens, the first one returned.
#[derive(Debug, Default)]
pub struct Failures {
    first: Option<Error>,
    more: usize,
}

impl Failures {
    /// Keeps `result`'s error, if any; its value otherwise.
    pub fn keep<T>(&mut self, result: Result<T>) -> Option<T> {
        match result {
            Ok(v) => Some(v),
            Err(e) => {
                self.push(e);
                None
            }
        }
    }

    /// A stale read (a conflict, an object gone) is only logged: the change behind it wakes
    /// the next reconcile, as Karpenter's controllers requeue without an error.
    pub fn push(&mut self, e: Error) {
        if e.is_stale_read() {
            tracing::debug!(error = %e, "stale read; looked at again on the next change");
            return;
        }
        tracing::warn!(error = %e, "reconcile step failed");
        match self.first {
            None => self.first = Some(e),
            Some(_) => self.more += 1,
        }
    }

    /// Nothing has failed (a stale read is no failure).
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// `Ok` when nothing failed; the first failure (saying how many more) otherwise.
    pub fn finish(self) -> Result<()> {
        match self.first {
            None => Ok(()),
            Some(e) if self.more == 0 => Err(e),
            Some(Error::Kube { what, source }) => {
                Err(Error::Kube { what: format!("{what} (and {} more failure(s))", self.more), source })
            }
            Some(Error::Cloud { what, source }) => {
                Err(Error::Cloud { what: format!("{what} (and {} more failure(s))", self.more), source })
            }
            Some(e) => Err(e),
        }
    }
}
