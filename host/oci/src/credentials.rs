//! Registry credentials in Docker's `config.json` format (what `docker login` writes and a
//! `kubernetes.io/dockerconfigjson` Secret holds), one per registry. A credential is only
//! ever offered to the registry it is filed under, never to one a reference names.

use base64::Engine;
use std::collections::BTreeMap;
use std::path::Path;
use thiserror::Error;

#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credential({}, ***)", self.username)
    }
}

/// Credentials by registry (`host[:port]`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Credentials(BTreeMap<String, Credential>);

#[derive(Debug, Error)]
pub enum CredentialsError {
    #[error("{path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error(
        "{path}: not a Docker config.json ({why}); write {{\"auths\": {{\"REGISTRY\": {{\"auth\": \"base64(user:password)\"}}}}}}, as `docker login` or `kubectl create secret docker-registry` does"
    )]
    Format { path: String, why: String },
}

#[derive(serde::Deserialize)]
struct DockerConfig {
    #[serde(default)]
    auths: BTreeMap<String, DockerAuth>,
}

#[derive(serde::Deserialize)]
struct DockerAuth {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
}

/// `https://index.docker.io/v1/` and `registry.example:5000` alike → `host[:port]`.
fn registry_key(key: &str) -> String {
    let key = key.split_once("://").map_or(key, |(_, rest)| rest);
    key.split('/').next().unwrap_or_default().to_ascii_lowercase()
}

impl Credentials {
    /// One credential for one registry (the CLI's `TENON_OCI_USERNAME`/`_PASSWORD`).
    pub fn single(registry: &str, username: String, password: String) -> Self {
        Credentials([(registry_key(registry), Credential { username, password })].into())
    }

    /// Parses a Docker `config.json`; `path` names it in errors.
    pub fn parse(json: &[u8], path: &str) -> Result<Self, CredentialsError> {
        let bad = |why: String| CredentialsError::Format { path: path.to_string(), why };
        let config: DockerConfig = serde_json::from_slice(json).map_err(|e| bad(e.to_string()))?;
        let mut out = BTreeMap::new();
        for (key, a) in config.auths {
            let credential = match (a.auth, a.username, a.password) {
                (Some(auth), _, _) => {
                    let decoded = base64::engine::general_purpose::STANDARD
                        .decode(auth.trim())
                        .map_err(|e| bad(format!("auths.{key:?}.auth is not base64: {e}")))?;
                    let text =
                        String::from_utf8(decoded).map_err(|_| bad(format!("auths.{key:?}.auth is not UTF-8")))?;
                    let (username, password) = text
                        .split_once(':')
                        .ok_or_else(|| bad(format!("auths.{key:?}.auth must encode user:password")))?;
                    Credential { username: username.to_string(), password: password.to_string() }
                }
                (None, Some(username), Some(password)) => Credential { username, password },
                _ => return Err(bad(format!("auths.{key:?} has neither auth nor username and password"))),
            };
            out.insert(registry_key(&key), credential);
        }
        Ok(Credentials(out))
    }

    pub fn read(path: &Path) -> Result<Self, CredentialsError> {
        let bytes =
            std::fs::read(path).map_err(|source| CredentialsError::Io { path: path.display().to_string(), source })?;
        Self::parse(&bytes, &path.display().to_string())
    }

    /// The credential filed under exactly this registry.
    pub fn for_registry(&self, registry: &str) -> Option<&Credential> {
        self.0.get(&registry.to_ascii_lowercase())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_docker_login_writes_and_files_each_under_its_registry() {
        let json = br#"{"auths": {
            "registry-a:5000": {"auth": "YWxpY2U6czNjcjN0"},
            "https://index.docker.io/v1/": {"username": "bob", "password": "pw"}
        }}"#;
        let c = Credentials::parse(json, "config.json").unwrap();
        assert_eq!(c.for_registry("registry-a:5000").map(|c| c.username.as_str()), Some("alice"));
        assert_eq!(c.for_registry("registry-a:5000").map(|c| c.password.as_str()), Some("s3cr3t"));
        assert_eq!(c.for_registry("index.docker.io").map(|c| c.username.as_str()), Some("bob"));
        assert_eq!(c.for_registry("registry-a"), None, "another port is another registry");
        assert_eq!(c.for_registry("registry-b:5000"), None);
        assert!(!format!("{c:?}").contains("s3cr3t"), "never logged");
    }

    #[test]
    fn a_bad_file_says_what_to_write() {
        for bad in [&b"\"x\""[..], br#"{"auths": {"r": {"auth": "!!"}}}"#, br#"{"auths": {"r": {}}}"#] {
            let e = Credentials::parse(bad, "creds.json").unwrap_err().to_string();
            assert!(e.starts_with("creds.json: not a Docker config.json"), "{e}");
        }
    }
}
