//! Names the controller gives the objects it creates, and what a failed create means.

use std::hash::{BuildHasher, Hasher};

/// The API server's `generateName` alphabet (no vowels, no look-alikes).
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// Five random characters, as the API server appends for `generateName`.
pub fn suffix() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    let mut x = h.finish();
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// Whether a create that failed with `e` may have been stored all the same: the server
/// timed out or failed after accepting it (5xx), or the answer never came back. A refusal
/// (4xx) stored nothing.
pub fn maybe_stored(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(s) => s.code >= 500,
        kube::Error::SerdeError(_) | kube::Error::BuildRequest(_) | kube::Error::InferConfig(_) => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_look_like_the_api_servers_and_differ() {
        let a = suffix();
        assert_eq!(a.len(), 5);
        assert!(a.bytes().all(|b| ALPHABET.contains(&b)), "{a}");
        let many: std::collections::BTreeSet<String> = (0..200).map(|_| suffix()).collect();
        assert!(many.len() > 190, "{} distinct of 200", many.len());
    }

    #[test]
    fn only_answers_that_did_not_refuse_may_have_stored() {
        let api = |code: u16| kube::Error::Api(Box::new(kube::core::Status::failure("x", "y").with_code(code)));
        assert!(maybe_stored(&api(504)) && maybe_stored(&api(500)));
        assert!(!maybe_stored(&api(409)) && !maybe_stored(&api(422)) && !maybe_stored(&api(429)));
    }
}
