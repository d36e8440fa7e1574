//! Cosign signatures made with a key pair (`cosign generate-key-pair`, `cosign sign --key`):
//! the signature of an artefact whose manifest is `sha256:HEX` lives in the same repository
//! under the tag `sha256-HEX.sig`, as an image whose layers are "simple signing" payloads,
//! each with its signature (base64 ASN.1 ECDSA P-256/SHA-256) in a layer annotation. A
//! payload names the manifest digest it vouches for.
//!
//! Verified with ring (already the process's TLS provider) rather than the `sigstore` crate,
//! whose crypto backend is aws-lc-rs or OpenSSL: a second crypto library and a C build for
//! one ECDSA check. Keyless (Fulcio/Rekor) signatures are not verified here.

use base64::Engine;
use ring::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
use sha2::{Digest, Sha256};
use thiserror::Error;

/// The media type of a signature layer.
pub const SIGNATURE_LAYER: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation holding the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// What a payload's `critical.type` says.
const PAYLOAD_TYPE: &str = "cosign container image signature";
/// DER of a P-256 SubjectPublicKeyInfo up to its 65-byte uncompressed point.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce,
    0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The tag cosign files the signatures of manifest `sha256:HEX` under.
pub fn signature_tag(digest_hex: &str) -> String {
    format!("sha256-{digest_hex}.sig")
}

/// The simple-signing payload cosign signs for `repository` (`REGISTRY/PATH`) at a digest.
pub fn payload(repository: &str, digest_hex: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "critical": {
            "identity": {"docker-reference": repository},
            "image": {"docker-manifest-digest": format!("sha256:{digest_hex}")},
            "type": PAYLOAD_TYPE,
        },
        "optional": null,
    }))
    .expect("a JSON value serialises")
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum KeyError {
    #[error("{name}: not a PEM public key ({why}); give the cosign.pub that `cosign generate-key-pair` wrote")]
    Pem { name: String, why: String },
    #[error(
        "{name}: not an ECDSA P-256 public key; cosign key pairs are P-256 (`cosign generate-key-pair`), other key types are not supported"
    )]
    KeyType { name: String },
}

/// A public key signatures are checked against, and its fingerprint (sha256 of its DER).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedKey {
    point: Vec<u8>,
    fingerprint: String,
}

impl TrustedKey {
    /// A `-----BEGIN PUBLIC KEY-----` PEM; `name` says where it came from in errors.
    pub fn from_pem(pem_text: &str, name: &str) -> Result<Self, KeyError> {
        let block = pem::parse(pem_text).map_err(|e| KeyError::Pem { name: name.to_string(), why: e.to_string() })?;
        if block.tag() != "PUBLIC KEY" {
            let why = format!("a {:?} block, expected \"PUBLIC KEY\"", block.tag());
            return Err(KeyError::Pem { name: name.to_string(), why });
        }
        Self::from_spki(block.contents()).ok_or_else(|| KeyError::KeyType { name: name.to_string() })
    }

    /// A DER SubjectPublicKeyInfo of a P-256 key.
    pub fn from_spki(der: &[u8]) -> Option<Self> {
        let point = der.strip_prefix(&P256_SPKI_PREFIX[..]).filter(|p| p.len() == 65 && p[0] == 4)?;
        let fingerprint = Sha256::digest(der).iter().map(|b| format!("{b:02x}")).collect();
        Some(TrustedKey { point: point.to_vec(), fingerprint })
    }

    /// The PEM of a P-256 key given as its uncompressed point (what ring's key pairs expose).
    pub fn pem_of_point(point: &[u8]) -> String {
        let der = [&P256_SPKI_PREFIX[..], point].concat();
        pem::encode(&pem::Pem::new("PUBLIC KEY", der))
    }

    /// sha256 of the key's DER, hex: how the OCI cache records who signed what it holds.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }
}

/// One signature layer as pulled: the payload blob and the annotation's base64 signature.
#[derive(Clone, Debug)]
pub struct Signature {
    pub payload: Vec<u8>,
    pub signature_b64: String,
}

#[derive(serde::Deserialize)]
struct Payload {
    critical: Critical,
}

#[derive(serde::Deserialize)]
struct Critical {
    image: Image,
    #[serde(rename = "type")]
    kind: String,
}

#[derive(serde::Deserialize)]
struct Image {
    #[serde(rename = "docker-manifest-digest")]
    digest: String,
}

/// Why no trusted signature vouches for an artefact.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum Unverified {
    #[error("no cosign signature (nothing at the tag {tag})")]
    None { tag: String },
    #[error("{count} cosign signature(s), none made by a trusted key")]
    UntrustedKeys { count: usize },
    #[error("a trusted key's signature vouches for {found}, not this artefact (sha256:{want})")]
    OtherArtefact { want: String, found: String },
}

/// The fingerprints of the `keys` that signed manifest `sha256:digest_hex` among
/// `signatures`; an error when none did.
pub fn verify(keys: &[TrustedKey], digest_hex: &str, signatures: &[Signature]) -> Result<Vec<String>, Unverified> {
    let mut signers = Vec::new();
    let mut other = None;
    for s in signatures {
        let Ok(sig) = base64::engine::general_purpose::STANDARD.decode(s.signature_b64.trim()) else { continue };
        for key in keys {
            if UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &key.point).verify(&s.payload, &sig).is_err() {
                continue;
            }
            match serde_json::from_slice::<Payload>(&s.payload) {
                Ok(p)
                    if p.critical.kind == PAYLOAD_TYPE && p.critical.image.digest == format!("sha256:{digest_hex}") =>
                {
                    if !signers.contains(&key.fingerprint) {
                        signers.push(key.fingerprint.clone());
                    }
                }
                Ok(p) => other = Some(p.critical.image.digest),
                Err(_) => other = Some("an unreadable payload".to_string()),
            }
        }
    }
    match (signers.is_empty(), other) {
        (false, _) => Ok(signers),
        (true, Some(found)) => Err(Unverified::OtherArtefact { want: digest_hex.to_string(), found }),
        (true, None) if signatures.is_empty() => Err(Unverified::None { tag: signature_tag(digest_hex) }),
        (true, None) => Err(Unverified::UntrustedKeys { count: signatures.len() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};

    fn key_pair() -> EcdsaKeyPair {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng).unwrap()
    }

    fn sign(k: &EcdsaKeyPair, payload: Vec<u8>) -> Signature {
        let sig = k.sign(&SystemRandom::new(), &payload).unwrap();
        Signature { payload, signature_b64: base64::engine::general_purpose::STANDARD.encode(sig.as_ref()) }
    }

    fn trusted(k: &EcdsaKeyPair) -> TrustedKey {
        TrustedKey::from_pem(&TrustedKey::pem_of_point(k.public_key().as_ref()), "test").unwrap()
    }

    #[test]
    fn only_a_trusted_key_s_signature_of_this_digest_verifies() {
        let (ours, theirs) = (key_pair(), key_pair());
        let d = "ab".repeat(32);
        let good = sign(&ours, payload("r/p", &d));
        let key = trusted(&ours);
        assert_eq!(
            verify(std::slice::from_ref(&key), &d, std::slice::from_ref(&good)),
            Ok(vec![key.fingerprint().to_string()])
        );

        assert_eq!(
            verify(std::slice::from_ref(&key), &d, &[]),
            Err(Unverified::None { tag: format!("sha256-{d}.sig") })
        );
        let foreign = sign(&theirs, payload("r/p", &d));
        assert_eq!(
            verify(std::slice::from_ref(&key), &d, std::slice::from_ref(&foreign)),
            Err(Unverified::UntrustedKeys { count: 1 })
        );
        let replayed = sign(&ours, payload("r/p", &"cd".repeat(32)));
        assert!(matches!(verify(std::slice::from_ref(&key), &d, &[replayed]), Err(Unverified::OtherArtefact { .. })));
        let mut forged = good.clone();
        forged.payload[10] ^= 1;
        assert!(verify(std::slice::from_ref(&key), &d, &[forged]).is_err(), "a changed payload");
        // Any one trusted signature suffices.
        assert!(verify(&[key, trusted(&theirs)], &d, &[foreign, good]).unwrap().len() == 2);
    }

    #[test]
    fn a_key_that_is_not_a_p256_public_key_is_refused_with_what_to_give() {
        let e = TrustedKey::from_pem("not pem", "keys/a.pub").unwrap_err().to_string();
        assert!(e.contains("keys/a.pub: not a PEM public key"), "{e}");
        let rsa_ish = pem::encode(&pem::Pem::new("PUBLIC KEY", vec![0x30, 0x82, 1, 0]));
        let e = TrustedKey::from_pem(&rsa_ish, "keys/b.pub").unwrap_err().to_string();
        assert!(e.contains("not an ECDSA P-256 public key"), "{e}");
        let private = pem::encode(&pem::Pem::new("PRIVATE KEY", vec![1, 2]));
        assert!(TrustedKey::from_pem(&private, "k").unwrap_err().to_string().contains("\"PRIVATE KEY\""));
    }
}
