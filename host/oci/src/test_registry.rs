//! Registries for tests, on 127.0.0.1: a real one (the CNCF distribution registry,
//! `docker-registry`, which `scripts/setup-tools` installs) storing into a temporary
//! directory, stopped and removed on drop; a scripted one for what no real registry does
//! (hostile answers, and a log of each request's Authorization header); and a cosign signer.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub struct TestRegistry {
    child: Child,
    dir: PathBuf,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl TestRegistry {
    /// Starts a registry; panics with what to do when `docker-registry` is not installed.
    pub fn start(name: &str) -> TestRegistry {
        let dir = std::env::temp_dir().join(format!("tenon-registry-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).expect("registry directory");
        let config = dir.join("config.yml");
        // Port 0: the registry picks a free port and logs it, so no port can be taken
        // between choosing and binding it.
        let yaml = format!(
            "version: 0.1\nlog:\n  level: info\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:0\n",
            dir.join("data").display()
        );
        std::fs::write(&config, yaml).expect("registry config");
        let mut child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("docker-registry: {e} (scripts/setup-tools installs it into $TENON_CACHE/bin)"));
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line.split("listening on ").nth(1) {
                    let addr = addr.split(['"', ' ']).next().unwrap_or_default().to_string();
                    if let Some(tx) = tx.take() {
                        let _ = tx.send(addr);
                    }
                }
            }
        });
        let addr = rx.recv_timeout(Duration::from_secs(20)).expect("docker-registry did not say where it listens");
        TestRegistry { child, dir, addr }
    }
}

impl TestRegistry {
    /// Where the registry keeps its blobs and manifests.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A cosign key pair for tests: signs artefacts in a [`TestRegistry`] the way
/// `cosign sign --key` does (see cosign.rs).
pub struct TestSigner {
    key: ring::signature::EcdsaKeyPair,
}

impl Default for TestSigner {
    fn default() -> Self {
        Self::generate()
    }
}

impl TestSigner {
    pub fn generate() -> Self {
        use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair};
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).expect("a key pair");
        let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng).expect("a key pair");
        TestSigner { key }
    }

    /// The public key as `cosign.pub` holds it.
    pub fn public_pem(&self) -> String {
        use ring::signature::KeyPair;
        crate::cosign::TrustedKey::pem_of_point(self.key.public_key().as_ref())
    }

    /// Pushes a signature of manifest `sha256:digest_hex` to `registry` (`127.0.0.1:PORT`),
    /// repository `repository`, under cosign's tag for it.
    pub async fn sign(&self, registry: &str, repository: &str, digest_hex: &str) {
        use base64::Engine;
        use oci_client::client::{ClientConfig, ClientProtocol};
        let payload = crate::cosign::payload(&format!("{registry}/{repository}"), digest_hex);
        let signature = self.key.sign(&ring::rand::SystemRandom::new(), &payload).expect("signing");
        let client = oci_client::Client::new(ClientConfig { protocol: ClientProtocol::Http, ..Default::default() });
        let image = oci_client::Reference::with_tag(
            registry.to_string(),
            repository.to_string(),
            crate::cosign::signature_tag(digest_hex),
        );
        let anonymous = oci_client::secrets::RegistryAuth::Anonymous;
        client.auth(&image, &anonymous, oci_client::RegistryOperation::Push).await.expect("registry auth");
        let config = b"{}".to_vec();
        let (pd, cd) =
            (format!("sha256:{}", crate::sha256_hex(&payload)), format!("sha256:{}", crate::sha256_hex(&config)));
        client.push_blob(&image, payload.clone(), &pd).await.expect("push the payload");
        client.push_blob(&image, config.clone(), &cd).await.expect("push the config");
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cd, "size": config.len()},
            "layers": [{
                "mediaType": crate::cosign::SIGNATURE_LAYER,
                "digest": pd,
                "size": payload.len(),
                "annotations": {
                    crate::cosign::SIGNATURE_ANNOTATION: base64::engine::general_purpose::STANDARD.encode(signature.as_ref()),
                },
            }],
        }))
        .expect("a JSON value serialises");
        let content_type = http::HeaderValue::from_static("application/vnd.oci.image.manifest.v1+json");
        client.push_manifest_raw(&image, manifest, content_type).await.expect("push the signature");
    }
}

/// One request a [`ScriptedRegistry`] received.
#[derive(Clone, Debug)]
pub struct Request {
    pub path: String,
    pub authorization: Option<String>,
}

/// What a [`ScriptedRegistry`] answers.
pub enum Answer {
    /// A complete response.
    Full { status: u16, headers: Vec<(String, String)>, body: Vec<u8> },
    /// A 200 that streams zeros: `declared` as its Content-Length (none: no length, until
    /// the client stops reading).
    Zeros { declared: Option<u64> },
    /// A 200 whose body comes one byte a second, forever.
    Trickle,
}

impl Answer {
    pub fn status(status: u16, body: &str) -> Answer {
        Answer::Full { status, headers: Vec::new(), body: body.as_bytes().to_vec() }
    }

    pub fn json(body: Vec<u8>) -> Answer {
        let headers = vec![("Content-Type".to_string(), "application/vnd.oci.image.manifest.v1+json".to_string())];
        Answer::Full { status: 200, headers, body }
    }
}

type Script = dyn Fn(&Request) -> Answer + Send + Sync;

/// A hostile or scripted registry: answers each request as the test's script says and logs
/// what it received (path and Authorization header). Plain HTTP/1.1 on 127.0.0.1, one
/// thread per connection; stops taking connections on drop.
pub struct ScriptedRegistry {
    pub addr: String,
    log: std::sync::Arc<std::sync::Mutex<Vec<Request>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl ScriptedRegistry {
    pub fn start(script: impl Fn(&Request) -> Answer + Send + Sync + 'static) -> ScriptedRegistry {
        use std::sync::atomic::Ordering;
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("bound address").to_string();
        let log = std::sync::Arc::<std::sync::Mutex<Vec<Request>>>::default();
        let stop = std::sync::Arc::<std::sync::atomic::AtomicBool>::default();
        let script: std::sync::Arc<Script> = std::sync::Arc::new(script);
        let (log2, stop2) = (log.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (log, script, stop) = (log2.clone(), script.clone(), stop2.clone());
                std::thread::spawn(move || serve(conn, &log, &*script, &stop));
            }
        });
        ScriptedRegistry { addr, log, stop }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Request> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for ScriptedRegistry {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let _ = std::net::TcpStream::connect(&self.addr);
    }
}

fn serve(
    conn: std::net::TcpStream,
    log: &std::sync::Mutex<Vec<Request>>,
    script: &Script,
    stop: &std::sync::atomic::AtomicBool,
) {
    use std::io::Write;
    let mut reader = BufReader::new(conn.try_clone().expect("clone a socket"));
    let mut out = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split_whitespace().nth(1).unwrap_or_default().to_string();
        let mut authorization = None;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).unwrap_or(0) == 0 {
                return;
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':')
                && k.eq_ignore_ascii_case("authorization")
            {
                authorization = Some(v.trim().to_string());
            }
        }
        let request = Request { path, authorization };
        log.lock().unwrap_or_else(|e| e.into_inner()).push(request.clone());
        let written = match script(&request) {
            Answer::Full { status, headers, body } => {
                let mut head = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n", body.len());
                for (k, v) in headers {
                    head.push_str(&format!("{k}: {v}\r\n"));
                }
                head.push_str("\r\n");
                out.write_all(head.as_bytes()).and_then(|()| out.write_all(&body))
            }
            Answer::Zeros { declared } => {
                let head = match declared {
                    Some(n) => format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n"),
                    None => "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_string(),
                };
                let zeros = vec![0u8; 1 << 16];
                let mut sent = 0u64;
                let mut r = out.write_all(head.as_bytes());
                while r.is_ok() && declared.is_none_or(|n| sent < n) && !stop.load(std::sync::atomic::Ordering::SeqCst)
                {
                    r = out.write_all(&zeros);
                    sent += zeros.len() as u64;
                }
                return;
            }
            Answer::Trickle => {
                let mut r = out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n");
                while r.is_ok() && !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(500));
                    r = out.write_all(b"{");
                }
                return;
            }
        };
        if written.is_err() {
            return;
        }
    }
}
