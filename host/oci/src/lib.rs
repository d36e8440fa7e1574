//! The network side of `oci://` policy references: pulling a policy artefact from a
//! registry (manifest and component, both checked against their digests by the client)
//! and pushing one, through `oci-client`. What is pulled is kept and checked again by the
//! policy store's OCI cache; this crate keeps nothing.
//!
//! Registries on the loopback interface, and those listed as insecure, are spoken to over
//! plain HTTP, as Docker does; all others over HTTPS with the system's roots and any CA
//! bundle given. Pulls are bounded in size and time (see fetch.rs); pushes go through
//! `oci-client`, for the CLI, to a registry its user names.

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference, RegistryOperation};
use sha2::{Digest, Sha256};
use std::time::Duration;
use tenon_api::policy::{OciSource, oci_media};
use thiserror::Error;

pub mod cosign;
pub mod credentials;
pub mod fetch;

pub use credentials::{Credential, Credentials};

#[derive(Debug, Error)]
pub enum OciError {
    #[error("{reference}: {source}")]
    Registry {
        reference: String,
        #[source]
        source: oci_client::errors::OciDistributionError,
    },
    #[error("{reference}: {why}")]
    Pull { reference: String, why: String },
    #[error("{reference}: not a Tenon policy artefact: {why}")]
    NotAPolicy { reference: String, why: String },
    #[error("{reference}: {why}")]
    Reference { reference: String, why: String },
    #[error("registry settings: {0}")]
    Settings(String),
}

/// How much a pull may read and how long it may take: a registry a NodePool names may be
/// hostile, and the controller must outlive it.
#[derive(Clone, Debug)]
pub struct PullLimits {
    /// The largest manifest read (a policy's is under 1 KiB).
    pub manifest_bytes: u64,
    /// The largest component read; never more than [`oci_media::MAX_LAYER_BYTES`].
    pub component_bytes: u64,
    /// The whole pull, signatures included.
    pub total: Duration,
    /// The longest wait for a connection, and for the next bytes of an answer.
    pub stall: Duration,
}

impl Default for PullLimits {
    fn default() -> Self {
        PullLimits {
            manifest_bytes: 4 << 20,
            component_bytes: oci_media::MAX_LAYER_BYTES,
            total: Duration::from_secs(120),
            stall: Duration::from_secs(30),
        }
    }
}

/// The most signature layers read per artefact, and the largest signature payload.
const MAX_SIGNATURES: usize = 16;
const SIGNATURE_PAYLOAD_BYTES: u64 = 64 << 10;

/// How to reach registries.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `host[:port]` of registries spoken to over plain HTTP besides loopback ones.
    pub insecure: Vec<String>,
    /// Credentials by registry; a registry without one is spoken to anonymously.
    pub credentials: Credentials,
    /// Hosts registries may redirect to (blob storage) or send for tokens (a token
    /// service) besides themselves; credentials go to token services only.
    pub extra_hosts: Vec<String>,
    /// PEM certificates trusted besides the system's roots (a private registry's CA).
    pub ca_bundle: Option<Vec<u8>>,
    pub limits: PullLimits,
}

impl Options {
    /// `TENON_OCI_USERNAME` and `TENON_OCI_PASSWORD`, when both are set, for `registry`
    /// only (the CLI names one registry per command); else the user's Docker config
    /// (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`) when there is one.
    pub fn cli_credentials(registry: &str) -> Result<Credentials, OciError> {
        if let (Ok(user), Ok(password)) = (std::env::var("TENON_OCI_USERNAME"), std::env::var("TENON_OCI_PASSWORD")) {
            return Ok(Credentials::single(registry, user, password));
        }
        let dir = std::env::var_os("DOCKER_CONFIG")
            .map(std::path::PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join(".docker")));
        match dir.map(|d| d.join("config.json")).filter(|f| f.is_file()) {
            Some(f) => Credentials::read(&f).map_err(|e| OciError::Settings(e.to_string())),
            None => Ok(Credentials::default()),
        }
    }
}

/// A policy artefact as pulled: the manifest's digest (hex) and bytes, the component, and
/// the cosign signatures found for it (when asked for).
pub struct Pulled {
    pub digest: String,
    pub manifest: Vec<u8>,
    pub component: Vec<u8>,
    pub signatures: Vec<cosign::Signature>,
}

pub struct Registry {
    options: Options,
    http: reqwest::Client,
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(serde::Deserialize)]
struct SignatureManifest {
    #[serde(default)]
    layers: Vec<SignatureLayer>,
}

#[derive(serde::Deserialize)]
struct SignatureLayer {
    #[serde(rename = "mediaType")]
    media_type: String,
    digest: String,
    size: u64,
    #[serde(default)]
    annotations: std::collections::BTreeMap<String, String>,
}

impl Registry {
    pub fn new(options: Options) -> Result<Self, OciError> {
        // The HTTP clients are built without a TLS provider; ring is the one the rest of the
        // binary uses. An error only means one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let extra = options.extra_hosts.clone();
        // A redirect stays on the host first asked, or goes to a host the admin listed.
        let redirects = reqwest::redirect::Policy::custom(move |attempt| {
            let first = attempt.previous().first().cloned();
            let same = first
                .as_ref()
                .is_some_and(|f| f.host_str() == attempt.url().host_str() && f.port() == attempt.url().port());
            if attempt.previous().len() > 5 {
                attempt.error("more than 5 redirects")
            } else if same || fetch::allowed_host(attempt.url(), "", &extra) {
                attempt.follow()
            } else {
                let port = attempt.url().port().map(|p| format!(":{p}")).unwrap_or_default();
                let to = fetch::sanitize(&format!("{}{port}", attempt.url().host_str().unwrap_or_default()));
                attempt.error(format!(
                    "a redirect to {to}, which is neither the registry nor a host in policies.oci.extraHosts"
                ))
            }
        });
        let mut builder = reqwest::Client::builder()
            .redirect(redirects)
            .connect_timeout(options.limits.stall)
            .read_timeout(options.limits.stall)
            .user_agent(concat!("tenon/", env!("CARGO_PKG_VERSION")));
        if let Some(pem) = &options.ca_bundle {
            let bad =
                |why: String| OciError::Settings(format!("the registry CA bundle (TENON_POLICY_OCI_CA_BUNDLE): {why}"));
            let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| bad(e.to_string()))?;
            if certs.is_empty() {
                return Err(bad("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into()));
            }
            builder = builder.tls_certs_merge(certs);
        }
        let http = builder.build().map_err(|e| OciError::Settings(format!("the HTTP client: {e}")))?;
        Ok(Registry { options, http })
    }

    fn plain(&self, src: &OciSource) -> bool {
        src.is_loopback() || self.options.insecure.contains(&src.registry)
    }

    fn client(&self, src: &OciSource) -> Client {
        Client::new(ClientConfig {
            protocol: if self.plain(src) { ClientProtocol::Http } else { ClientProtocol::Https },
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            // A policy is one artefact, never an index of platforms.
            platform_resolver: None,
            user_agent: concat!("tenon/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        })
    }

    fn auth(&self, registry: &str) -> RegistryAuth {
        match self.options.credentials.for_registry(registry) {
            Some(c) => RegistryAuth::Basic(c.username.clone(), c.password.clone()),
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

    /// Pulls the artefact `src` names, and its cosign signatures when `signatures`. A pinned
    /// reference gets exactly the pinned manifest, and every blob is checked against the
    /// digest the manifest gives it. Bounded by [`PullLimits`].
    pub async fn pull(&self, src: &OciSource, signatures: bool) -> Result<Pulled, OciError> {
        let reference = src.to_string();
        let total = self.options.limits.total;
        match tokio::time::timeout(total, self.pull_unbounded(src, signatures)).await {
            Ok(pulled) => pulled,
            Err(_) => Err(OciError::Pull {
                reference,
                why: format!("not finished within {} s, the limit of a pull", total.as_secs_f64()),
            }),
        }
    }

    async fn pull_unbounded(&self, src: &OciSource, want_signatures: bool) -> Result<Pulled, OciError> {
        let reference = src.to_string();
        let fail = |e: fetch::FetchError| OciError::Pull { reference: reference.clone(), why: e.0 };
        let not = |why: String| OciError::NotAPolicy { reference: reference.clone(), why };
        let scheme = if self.plain(src) { "http" } else { "https" };
        let base = reqwest::Url::parse(&format!("{scheme}://{}", src.registry))
            .map_err(|e| OciError::Reference { reference: reference.clone(), why: format!("registry address: {e}") })?;
        let mut session = fetch::Session {
            http: &self.http,
            base,
            registry: &src.registry,
            repository: &src.repository,
            credential: self.options.credentials.for_registry(&src.registry),
            extra_hosts: &self.options.extra_hosts,
            authorization: None,
        };
        let limits = &self.options.limits;
        let at = match (&src.digest, &src.tag) {
            (Some(d), _) => format!("sha256:{d}"),
            (None, t) => t.clone().unwrap_or_else(|| "latest".to_string()),
        };
        let resp = session.get(&format!("manifests/{at}"), oci_media::MANIFEST).await.map_err(fail)?;
        let resp = fetch::ok(resp, "the manifest").await.map_err(fail)?;
        let manifest = fetch::read_bounded(resp, limits.manifest_bytes, "the manifest").await.map_err(fail)?;
        let digest = sha256_hex(&manifest);
        if let Some(want) = &src.digest
            && *want != digest
        {
            return Err(fail(fetch::FetchError(format!(
                "the registry answered a manifest with digest sha256:{digest}"
            ))));
        }
        let (layer, size) = oci_media::policy_layer(&manifest).map_err(not)?;
        if size > limits.component_bytes {
            return Err(not(format!("the component is {size} bytes, over the limit of {}", limits.component_bytes)));
        }
        let component = self.blob(&mut session, &layer, size, "the component").await.map_err(fail)?;
        let signatures =
            if want_signatures { self.signatures(&mut session, &digest).await.map_err(fail)? } else { Vec::new() };
        Ok(Pulled { digest, manifest, component, signatures })
    }

    /// A blob of exactly `size` bytes hashing to `digest`.
    async fn blob(
        &self,
        session: &mut fetch::Session<'_>,
        digest: &str,
        size: u64,
        what: &str,
    ) -> Result<Vec<u8>, fetch::FetchError> {
        let resp = session.get(&format!("blobs/sha256:{digest}"), "application/octet-stream").await?;
        let resp = fetch::ok(resp, what).await?;
        let bytes = fetch::read_bounded(resp, size, what).await?;
        let found = sha256_hex(&bytes);
        if bytes.len() as u64 != size || found != digest {
            return Err(fetch::FetchError(format!(
                "{what} does not match its digest: {} bytes hashing to sha256:{found}, the manifest says {size} bytes, sha256:{digest}",
                bytes.len()
            )));
        }
        Ok(bytes)
    }

    /// The signature layers cosign filed for manifest `digest`; none when there is no such tag.
    async fn signatures(
        &self,
        session: &mut fetch::Session<'_>,
        digest: &str,
    ) -> Result<Vec<cosign::Signature>, fetch::FetchError> {
        let accept = format!("{},application/vnd.docker.distribution.manifest.v2+json", oci_media::MANIFEST);
        let resp = session.get(&format!("manifests/{}", cosign::signature_tag(digest)), &accept).await?;
        if resp.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(Vec::new());
        }
        let resp = fetch::ok(resp, "the signature manifest").await?;
        let body = fetch::read_bounded(resp, self.options.limits.manifest_bytes, "the signature manifest").await?;
        let m: SignatureManifest = serde_json::from_slice(&body)
            .map_err(|e| fetch::FetchError(format!("unreadable signature manifest: {e}")))?;
        let mut out = Vec::new();
        for l in m.layers.iter().filter(|l| l.media_type == cosign::SIGNATURE_LAYER).take(MAX_SIGNATURES) {
            let (Some(hex), Some(sig)) =
                (l.digest.strip_prefix("sha256:"), l.annotations.get(cosign::SIGNATURE_ANNOTATION))
            else {
                continue;
            };
            if l.size > SIGNATURE_PAYLOAD_BYTES || hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                continue;
            }
            let payload = self.blob(session, hex, l.size, "a signature payload").await?;
            out.push(cosign::Signature { payload, signature_b64: sig.clone() });
        }
        Ok(out)
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
        client.auth(&image, &self.auth(&dest.registry), RegistryOperation::Push).await.map_err(registry)?;
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
#[cfg(any(test, feature = "test-registry"))]
pub mod test_registry;
