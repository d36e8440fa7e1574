//! Bounded reads from one registry, for pulls: the OCI distribution API's manifest and blob
//! GETs with its token dance, written here rather than left to `oci-client` because a
//! registry a NodePool names is untrusted input to the most privileged process in the
//! cluster. Every body is read up to a limit; a registry's error text is cut short and
//! stripped of control characters; redirects and token realms go only to the registry's own
//! host or hosts the admin listed; a credential is offered only to the registry it is filed
//! under (and its listed token service), never on a redirect elsewhere.

use crate::credentials::Credential;
use base64::Engine;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, WWW_AUTHENTICATE};
use reqwest::{Client, StatusCode, Url};

/// The most of a registry's error body read, and of its text kept in a message.
const ERROR_BODY_BYTES: u64 = 4096;
const ERROR_TEXT_CHARS: usize = 200;
/// A token answer is a small JSON document.
const TOKEN_BYTES: u64 = 64 << 10;

/// Why a read from a registry failed, in words for a NodePool's condition.
#[derive(Debug)]
pub struct FetchError(pub String);

/// What a registry's own text may add to a message: printable, short.
pub fn sanitize(text: &str) -> String {
    let clean: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    let clean = clean.split_whitespace().collect::<Vec<_>>().join(" ");
    match clean.char_indices().nth(ERROR_TEXT_CHARS) {
        Some((i, _)) => format!("{}…", &clean[..i]),
        None => clean,
    }
}

/// Whether a URL's host (and port) is the registry's or one of `extra`.
pub fn allowed_host(url: &Url, registry: &str, extra: &[String]) -> bool {
    let Some(host) = url.host_str() else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let with_port = match url.port() {
        Some(p) if host.contains(':') => format!("[{host}]:{p}"),
        Some(p) => format!("{host}:{p}"),
        None => host.to_string(),
    };
    let matches = |allowed: &str| {
        let allowed = allowed.to_ascii_lowercase();
        allowed == with_port.to_ascii_lowercase() || (url.port().is_none() && allowed == host.to_ascii_lowercase())
    };
    matches(registry) || extra.iter().any(|e| matches(e))
}

/// One repository's reads, holding the token the registry handed out.
pub struct Session<'a> {
    pub http: &'a Client,
    /// `http://HOST[:PORT]` or `https://…`.
    pub base: Url,
    pub registry: &'a str,
    pub repository: &'a str,
    pub credential: Option<&'a Credential>,
    /// Token services and blob stores the admin allows besides the registry itself.
    pub extra_hosts: &'a [String],
    pub authorization: Option<String>,
}

struct Challenge {
    realm: String,
    service: Option<String>,
    scope: Option<String>,
}

/// `Bearer realm="…",service="…",scope="…"`.
fn bearer_challenge(header: &str) -> Option<Challenge> {
    let rest = header.trim().strip_prefix("Bearer ").or_else(|| header.trim().strip_prefix("bearer "))?;
    let mut realm = None;
    let (mut service, mut scope) = (None, None);
    // Values are quoted and may hold commas (scopes do): split on `",`.
    for part in rest.split("\",") {
        let Some((k, v)) = part.split_once('=') else { continue };
        let v = v.trim().trim_matches('"').to_string();
        match k.trim() {
            "realm" => realm = Some(v),
            "service" => service = Some(v),
            "scope" => scope = Some(v),
            _ => {}
        }
    }
    Some(Challenge { realm: realm?, service, scope })
}

impl Session<'_> {
    fn basic(&self) -> Option<String> {
        self.credential.map(|c| {
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{}:{}", c.username, c.password));
            format!("Basic {token}")
        })
    }

    /// GETs `/v2/REPOSITORY/{path}`, answering one authentication challenge.
    pub async fn get(&mut self, path: &str, accept: &str) -> Result<reqwest::Response, FetchError> {
        let url = self
            .base
            .join(&format!("/v2/{}/{path}", self.repository))
            .map_err(|e| FetchError(format!("bad URL: {e}")))?;
        let send = |authorization: Option<String>| {
            let mut req = self.http.get(url.clone()).header(ACCEPT, accept);
            if let Some(a) = authorization {
                req = req.header(AUTHORIZATION, a);
            }
            req.send()
        };
        let resp = send(self.authorization.clone()).await.map_err(|e| FetchError(transport(e)))?;
        if resp.status() != StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        let challenge =
            resp.headers().get(WWW_AUTHENTICATE).and_then(|h| h.to_str().ok()).unwrap_or_default().to_string();
        self.authorization = if challenge.to_ascii_lowercase().starts_with("basic") {
            Some(self.basic().ok_or_else(|| {
                FetchError(format!(
                    "{} asks for credentials and none are filed under it (policies.oci.registryConfig)",
                    self.registry
                ))
            })?)
        } else {
            let c = bearer_challenge(&challenge)
                .ok_or_else(|| FetchError(format!("401 with an unreadable challenge: {}", sanitize(&challenge))))?;
            Some(format!("Bearer {}", self.token(&c).await?))
        };
        send(self.authorization.clone()).await.map_err(|e| FetchError(transport(e)))
    }

    /// Fetches a token from the challenge's realm, which must be the registry's own host or
    /// one the admin listed: a realm is a URL the registry chose, and the controller fetching
    /// it (with a credential) is what a hostile registry would want.
    async fn token(&self, c: &Challenge) -> Result<String, FetchError> {
        let mut realm =
            Url::parse(&c.realm).map_err(|e| FetchError(format!("token realm {:?}: {e}", sanitize(&c.realm))))?;
        if !allowed_host(&realm, self.registry, self.extra_hosts) {
            return Err(FetchError(format!(
                "the registry's token service {} is not the registry's host; list it in policies.oci.extraHosts if it is the registry's own",
                sanitize(realm.host_str().unwrap_or_default())
            )));
        }
        if realm.scheme() != self.base.scheme() && realm.scheme() != "https" {
            return Err(FetchError(format!("token realm {} is not HTTPS", sanitize(realm.as_str()))));
        }
        {
            let mut q = realm.query_pairs_mut();
            if let Some(s) = &c.service {
                q.append_pair("service", s);
            }
            if let Some(s) = &c.scope {
                q.append_pair("scope", s);
            }
        }
        let mut req = self.http.get(realm);
        if let Some(b) = self.basic() {
            req = req.header(AUTHORIZATION, b);
        }
        let resp = req.send().await.map_err(|e| FetchError(transport(e)))?;
        let resp = ok(resp, "token").await?;
        let body = read_bounded(resp, TOKEN_BYTES, "the token answer").await?;
        #[derive(serde::Deserialize)]
        struct Token {
            token: Option<String>,
            access_token: Option<String>,
        }
        let t: Token =
            serde_json::from_slice(&body).map_err(|e| FetchError(format!("unreadable token answer: {e}")))?;
        t.token.or(t.access_token).ok_or_else(|| FetchError("the token answer holds no token".to_string()))
    }
}

/// A transport error in words, without the URL's query (it may hold a token's scope).
fn transport(e: reqwest::Error) -> String {
    let e = e.without_url();
    let what = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else if e.is_redirect() {
        "refused redirect"
    } else {
        "transport error"
    };
    let mut text = format!("{what}: {e}");
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    sanitize(&text)
}

/// The response if it is a success; else an error naming the status and the registry's text.
pub async fn ok(resp: reqwest::Response, what: &str) -> Result<reqwest::Response, FetchError> {
    if resp.status().is_success() {
        return Ok(resp);
    }
    let status = resp.status();
    let body = read_bounded(resp, ERROR_BODY_BYTES, "an error body").await.unwrap_or_default();
    let text = sanitize(&String::from_utf8_lossy(&body));
    Err(FetchError(if text.is_empty() { format!("{what}: {status}") } else { format!("{what}: {status}: {text}") }))
}

/// At most `limit` bytes of a body; more is an error that names `what` and the limit, found
/// from the declared length before anything is read when the registry declares one. An
/// error body past its limit is cut, not refused.
pub async fn read_bounded(mut resp: reqwest::Response, limit: u64, what: &str) -> Result<Vec<u8>, FetchError> {
    let too_large = |n: u64| FetchError(format!("{what} is {n} bytes or more, over the limit of {limit}"));
    let declared = resp.headers().get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    let cut = !resp.status().is_success();
    if let Some(n) = declared.filter(|n| *n > limit && !cut) {
        return Err(too_large(n));
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0).min(limit) as usize);
    while let Some(chunk) = resp.chunk().await.map_err(|e| FetchError(format!("reading {what}: {}", transport(e))))? {
        if body.len() as u64 + chunk.len() as u64 > limit {
            if cut {
                body.extend_from_slice(&chunk[..(limit as usize - body.len())]);
                break;
            }
            return Err(too_large(body.len() as u64 + chunk.len() as u64));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_text_is_short_and_printable() {
        assert_eq!(sanitize("a\r\nb\u{1b}[31m c"), "a b [31m c");
        let long = sanitize(&"x".repeat(10_000));
        assert_eq!(long.chars().count(), ERROR_TEXT_CHARS + 1);
    }

    #[test]
    fn only_the_registry_s_host_and_listed_hosts_are_allowed() {
        let u = |s: &str| Url::parse(s).unwrap();
        assert!(allowed_host(&u("https://reg.example/token"), "reg.example", &[]));
        assert!(allowed_host(&u("http://127.0.0.1:5000/v2/"), "127.0.0.1:5000", &[]));
        assert!(!allowed_host(&u("http://127.0.0.1:5001/v2/"), "127.0.0.1:5000", &[]));
        assert!(!allowed_host(&u("http://169.254.169.254/latest/meta-data"), "reg.example", &[]));
        assert!(!allowed_host(&u("https://reg.example.evil.io/"), "reg.example", &[]));
        assert!(allowed_host(&u("https://auth.docker.io/token"), "registry-1.docker.io", &["auth.docker.io".into()]));
    }

    #[test]
    fn reads_a_bearer_challenge_with_commas_in_its_scope() {
        let c =
            bearer_challenge(r#"Bearer realm="https://r/token",service="r",scope="repository:a/b:pull,push""#).unwrap();
        assert_eq!((c.realm.as_str(), c.service.as_deref()), ("https://r/token", Some("r")));
        assert_eq!(c.scope.as_deref(), Some("repository:a/b:pull,push"));
        assert!(bearer_challenge("Basic realm=\"x\"").is_none());
    }
}
