//! SDK errors as the provider reports them: the operation, the service's code and message.

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use tenon_core::cloud::CloudError;

/// The error code of a failed call, if the service sent one.
pub(crate) fn code<E: ProvideErrorMetadata, R>(e: &SdkError<E, R>) -> Option<String> {
    match e {
        SdkError::ServiceError(s) => s.err().code().map(str::to_string),
        _ => None,
    }
}

pub(crate) fn api<E: ProvideErrorMetadata + std::error::Error + 'static, R: std::fmt::Debug>(
    operation: &str,
    e: SdkError<E, R>,
) -> CloudError {
    let message = match &e {
        SdkError::ServiceError(s) => {
            let err = s.err();
            format!("{}: {}", err.code().unwrap_or("Unknown"), err.message().unwrap_or("no message"))
        }
        other => {
            // The Display of a dispatch or timeout failure is terse; its source says why.
            let mut m = other.to_string();
            let mut src = std::error::Error::source(other);
            while let Some(s) = src {
                m.push_str(": ");
                m.push_str(&s.to_string());
                src = s.source();
            }
            m
        }
    };
    CloudError::Api { operation: operation.to_string(), message }
}
