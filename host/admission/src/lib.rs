//! Admission of a custom resource against its CRD version's `openAPIV3Schema`, in the order a
//! Kubernetes API server applies it: unknown fields pruned, nulls of non-nullable fields
//! dropped, defaults filled in, then the structural schema checked and the CRD's
//! `x-kubernetes-validations` (CEL) rules evaluated, transition rules (`oldSelf`) only on
//! updates. Errors are the API server's field errors, worded as it words them.

mod cel_rules;
mod errors;
mod structural;

pub use errors::{FieldError, Invalid};
use serde_json::Value;

/// Prunes and defaults `obj` in place, then validates it (`old`: the stored object, for an
/// update). Every error is returned, as the API server reports them all at once.
pub fn admit(schema: &Value, obj: &mut Value, old: Option<&Value>) -> Result<(), Vec<FieldError>> {
    structural::prune(schema, obj, true);
    structural::default(schema, obj);
    let mut errors = Vec::new();
    structural::validate(schema, obj, &mut errors);
    cel_rules::validate(schema, obj, old, &mut errors);
    if errors.is_empty() { Ok(()) } else { Err(errors) }
}
