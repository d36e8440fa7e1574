//! A client whose clock is off: the Lease times it writes and reads, moved by its offset.
//! Leader election is the only place where replicas compare each other's clocks, so
//! moving Lease times is all a clock offset changes in what the API server sees.

use axum::body::Bytes;
use serde_json::Value;

/// The Lease time fields (`coordination.k8s.io/v1` `spec`).
const FIELDS: [&str; 2] = ["renewTime", "acquireTime"];

/// A request body with its Lease times moved by `secs` (unchanged if it is not JSON).
pub fn shift_lease_body(body: &Bytes, secs: i64) -> Bytes {
    match serde_json::from_slice::<Value>(body) {
        Ok(mut v) => {
            shift_lease_times(&mut v, secs);
            Bytes::from(v.to_string())
        }
        Err(_) => body.clone(),
    }
}

/// Moves the Lease times of a Lease, or of every Lease of a list, by `secs`.
pub fn shift_lease_times(v: &mut Value, secs: i64) {
    if let Some(items) = v.get_mut("items").and_then(Value::as_array_mut) {
        items.iter_mut().for_each(|i| shift_lease_times(i, secs));
        return;
    }
    let Some(spec) = v.get_mut("spec").and_then(Value::as_object_mut) else { return };
    for f in FIELDS {
        if let Some(Value::String(t)) = spec.get_mut(f)
            && let Ok(ts) = t.parse::<jiff::Timestamp>()
            && let Ok(moved) = ts.checked_add(jiff::SignedDuration::from_secs(secs))
        {
            *t = moved.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn lease_times_move_by_the_offset_in_objects_and_lists() {
        let mut lease = json!({"spec": {"holderIdentity": "a", "renewTime": "2026-12-02T14:00:00.250000Z"}});
        shift_lease_times(&mut lease, 60);
        assert_eq!(lease["spec"]["renewTime"], "2026-12-02T14:01:00.250000Z");
        let mut list = json!({"items": [lease]});
        shift_lease_times(&mut list, -120);
        assert_eq!(list["items"][0]["spec"]["renewTime"], "2026-12-02T13:59:00.250000Z");
        assert_eq!(list["items"][0]["spec"]["holderIdentity"], "a");
    }
}
