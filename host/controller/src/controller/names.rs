//! Names the controller gives the objects it creates, and what a failed create means.

use std::hash::{BuildHasher, Hasher};

/// The API server's `generateName` alphabet (no vowels, no look-alikes).
const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

/// 64 unpredictable bits (a randomly keyed hash of the time).
fn random() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish()
}

/// A random UUID (version 4), as Karpenter names each scheduling simulation.
pub fn uuid() -> String {
    let (a, b) = (random(), random());
    let b = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

/// Five random characters, as the API server appends for `generateName`.
pub fn suffix() -> String {
    let mut x = random();
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
    fn uuids_are_version_4_and_differ() {
        let (a, b) = (uuid(), uuid());
        assert_ne!(a, b);
        let parts: Vec<&str> = a.split('-').collect();
        assert_eq!(parts.iter().map(|p| p.len()).collect::<Vec<_>>(), vec![8, 4, 4, 4, 12], "{a}");
        assert!(parts[2].starts_with('4') && "89ab".contains(&parts[3][..1]), "{a}");
        assert!(a.chars().all(|c| c == '-' || c.is_ascii_hexdigit()), "{a}");
    }

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
