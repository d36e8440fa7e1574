//! Karpenter's NodeClaim consistency check (its "node shape" check): an Initialized
//! NodeClaim whose Node reports less than 90% of a requested resource's expected capacity
//! gets a `FailedConsistencyCheck` Warning per resource and `ConsistentStateFound=False`.
//! Each NodeClaim is checked at most every [`SCAN_EVERY_MS`].

use crate::resources::Resources;
use std::collections::BTreeMap;

/// How often one NodeClaim is checked.
pub const SCAN_EVERY_MS: i64 = 600_000;

/// A quantity as a number (cpu in cores), `None` when unreadable.
fn amount(resource: &str, q: &str) -> Option<f64> {
    Resources::approximate(resource, q).ok()
}

/// One message per resource the NodeClaim requests whose Node capacity (`found`) is below
/// 90% of the NodeClaim's `status.capacity` (`expected`); quantities as the objects spell them.
pub fn node_shape_issues<'a>(
    requests: impl IntoIterator<Item = (&'a str, &'a str)>,
    expected: &BTreeMap<&str, &str>,
    found: &BTreeMap<&str, &str>,
) -> Vec<String> {
    let mut issues = Vec::new();
    for (resource, requested) in requests {
        let Some(want) = expected.get(resource).copied() else { continue };
        let (Some(r), Some(e)) = (amount(resource, requested), amount(resource, want)) else { continue };
        if r == 0.0 || e == 0.0 {
            continue;
        }
        let have = found.get(resource).copied().unwrap_or("0");
        let pct = amount(resource, have).unwrap_or(0.0) / e;
        if pct < 0.90 {
            issues.push(format!(
                "expected {want} of resource {resource}, but found {have} ({:.1}% of expected)",
                pct * 100.0
            ));
        }
    }
    issues
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list<'a>(pairs: &[(&'a str, &'a str)]) -> BTreeMap<&'a str, &'a str> {
        pairs.iter().copied().collect()
    }

    #[test]
    fn a_node_short_of_a_requested_resource_is_reported() {
        let expected = list(&[("cpu", "4"), ("memory", "16Gi"), ("pods", "58")]);
        let found = list(&[("cpu", "4"), ("memory", "8Gi"), ("pods", "58")]);
        let issues = node_shape_issues([("cpu", "2"), ("memory", "1Gi")], &expected, &found);
        assert_eq!(issues, ["expected 16Gi of resource memory, but found 8Gi (50.0% of expected)"]);
    }

    #[test]
    fn unrequested_resources_and_small_shortfalls_are_not() {
        let expected = list(&[("cpu", "4"), ("memory", "16Gi")]);
        let found = list(&[("cpu", "3800m"), ("memory", "1Gi")]);
        assert!(node_shape_issues([("cpu", "1")], &expected, &found).is_empty(), "95% of the cpu, memory not asked");
        assert!(node_shape_issues([("cpu", "0")], &expected, &list(&[])).is_empty(), "a zero request");
        let missing = node_shape_issues([("cpu", "1")], &expected, &list(&[]));
        assert_eq!(missing, ["expected 4 of resource cpu, but found 0 (0.0% of expected)"]);
    }
}
