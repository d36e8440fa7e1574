//! The network side of `oci://` policy references: pulling a policy artefact from a
//! registry (manifest and component, both checked against their digests by the client)
//! and pushing one, through `oci-client`. What is pulled is kept and checked again by the
//! policy store's OCI cache; this crate keeps nothing.
//!
//! Registries on the loopback interface, and those listed as insecure, are spoken to over
//! plain HTTP, as Docker does; all others over HTTPS with the system's roots.

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use sha2::{Digest, Sha256};
use std::time::Duration;
use tenon_api::policy::{OciSource, oci_media};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum OciError {
    #[error("{reference}: {source}")]
    Registry {
        reference: String,
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    #[error("{reference}: not a Tenon policy artefact: {why}")]
    NotAPolicy { reference: String, why: String },
    #[error("{reference}: {why}")]
    Reference { reference: String, why: String },
}

/// How to reach registries.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `host[:port]` of registries spoken to over plain HTTP besides loopback ones.
    pub insecure: Vec<String>,
    /// Basic-auth user name and password; anonymous without.
    pub credentials: Option<(String, String)>,
}

impl Options {
    /// `TENON_OCI_USERNAME` and `TENON_OCI_PASSWORD`, when both are set.
    pub fn credentials_from_env() -> Option<(String, String)> {
        Some((std::env::var("TENON_OCI_USERNAME").ok()?, std::env::var("TENON_OCI_PASSWORD").ok()?))
    }
}

/// A policy artefact as pulled: the manifest's digest (hex) and bytes, and the component.
pub struct Pulled {
    pub digest: String,
    pub manifest: Vec<u8>,
    pub component: Vec<u8>,
}

pub struct Registry {
    options: Options,
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

impl Registry {
    pub fn new(options: Options) -> Self {
        // oci-client's HTTP client is built without a TLS provider; ring is the one the rest
        // of the binary uses. An error only means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Registry { options }
    }

    fn client(&self, src: &OciSource) -> Client {
        let plain = src.is_loopback() || self.options.insecure.contains(&src.registry);
        Client::new(ClientConfig {
            protocol: if plain { ClientProtocol::Http } else { ClientProtocol::Https },
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            // A policy is one artefact, never an index of platforms.
            platform_resolver: None,
            user_agent: concat!("tenon/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        })
    }

    fn auth(&self) -> RegistryAuth {
        match &self.options.credentials {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }

    fn reference(src: &OciSource) -> Reference {
        match (&src.digest, &src.tag) {
            (Some(d), _) => Reference::with_digest(src.registry.clone(), src.repository.clone(), format!("sha256:{d}")),
            (None, tag) => Reference::with_tag(
                src.registry.clone(),
                src.repository.clone(),
                tag.clone().unwrap_or_else(|| "latest".to_string()),
            ),
        }
    }

    /// Pulls the artefact `src` names. A pinned reference gets exactly the pinned manifest,
    /// and every blob is checked against the digest the manifest gives it.
    pub async fn pull(&self, src: &OciSource) -> Result<Pulled, OciError> {
        let reference = src.to_string();
        let registry = |source| OciError::Registry { reference: reference.clone(), source };
        let not = |why: String| OciError::NotAPolicy { reference: reference.clone(), why };
        let client = self.client(src);
        let image = Self::reference(src);
        let (manifest, digest) =
            client.pull_manifest_raw(&image, &self.auth(), &[oci_media::MANIFEST]).await.map_err(registry)?;
        let (layer, size) = oci_media::policy_layer(&manifest).map_err(not)?;
        let layer = OciDescriptor { digest: format!("sha256:{layer}"), size: size as i64, ..Default::default() };
        let mut component = Vec::with_capacity(size as usize);
        client.pull_blob(&image, &layer, &mut component).await.map_err(registry)?;
        let digest = digest.strip_prefix("sha256:").map(str::to_string).ok_or_else(|| OciError::Reference {
            reference: reference.clone(),
            why: format!("manifest digest {digest} is not sha256"),
        })?;
        Ok(Pulled { digest, manifest: manifest.to_vec(), component })
    }

    /// Pushes `component` as `dest` (a tag reference) and returns the manifest digest (hex)
    /// that pins it.
    pub async fn push(&self, component: &[u8], dest: &OciSource) -> Result<String, OciError> {
        let reference = dest.to_string();
        if dest.digest.is_some() || dest.tag.is_none() {
            let why = "push to a tag (oci://REGISTRY/REPOSITORY:TAG); the digest is what the push prints".to_string();
            return Err(OciError::Reference { reference, why });
        }
        let registry = |source| OciError::Registry { reference: reference.clone(), source };
        let client = self.client(dest);
        let image = Self::reference(dest);
        client.auth(&image, &self.auth(), RegistryOperation::Push).await.map_err(registry)?;
        let layer_digest = format!("sha256:{}", sha256_hex(component));
        // The CNCF Wasm artefact config: what the layer is and what runs it.
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": "wasm",
            "os": "wasip2",
            "layerDigests": [layer_digest],
        }))
        .expect("a JSON value serialises");
        let config_digest = format!("sha256:{}", sha256_hex(&config));
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": oci_media::MANIFEST,
            "artifactType": oci_media::LAYER,
            "config": {"mediaType": oci_media::CONFIG, "digest": config_digest, "size": config.len()},
            "layers": [{"mediaType": oci_media::LAYER, "digest": layer_digest, "size": component.len()}],
            "annotations": {"org.opencontainers.image.title": dest.repository.rsplit('/').next().unwrap_or_default()},
        }))
        .expect("a JSON value serialises");
        client.push_blob(&image, component.to_vec(), &layer_digest).await.map_err(registry)?;
        client.push_blob(&image, config, &config_digest).await.map_err(registry)?;
        let content_type = http::HeaderValue::from_static(oci_media::MANIFEST);
        client.push_manifest_raw(&image, manifest.clone(), content_type).await.map_err(registry)?;
        Ok(sha256_hex(&manifest))
    }
}
pub mod test_registry;
