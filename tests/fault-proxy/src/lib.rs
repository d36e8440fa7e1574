//! A proxy in front of moto for the errors and delays moto never gives: each request is
//! read whole, matched against a needle (an operation's name, a filter value), and failed,
//! held, or forwarded unchanged; or, in a brownout, a fraction of them failed in turns.

/// A fault injector in front of moto: the first `failures` requests get an error (EC2's
/// throttling error, HTTP 503 `RequestLimitExceeded`, unless [`fault_matching`] names
/// another); the rest are forwarded to moto unchanged.
pub struct Throttle {
    pub url: String,
    pub seen: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The most matching requests that were waiting for moto's answer at one time.
    pub peak_in_flight: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// The bodies of the matching requests, in arrival order (what reached EC2, as sent).
    pub bodies: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

pub async fn throttle(upstream: &str, failures: usize) -> Throttle {
    throttle_matching(upstream, failures, "").await
}

/// As [`throttle`], counting (and throttling) only the requests whose headers or body contain
/// `needle` (an operation's name, e.g. `AmazonSSM.GetParameter`); the others pass through.
pub async fn throttle_matching(upstream: &str, failures: usize, needle: &str) -> Throttle {
    let body = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error></Errors><RequestID>throttled</RequestID></Response>";
    let resp = format!(
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    fault_matching(upstream, failures, needle, resp).await
}

/// As [`throttle_matching`], answering the matching requests with `response` (a whole HTTP
/// response) instead of the throttling error.
pub async fn fault_matching(upstream: &str, failures: usize, needle: &str, response: String) -> Throttle {
    fault_when(upstream, needle, response, std::sync::Arc::new(move |n| n < failures), std::time::Duration::ZERO).await
}

/// A proxy in front of moto that holds each request matching `needle` for `delay` before
/// forwarding it, as a loaded EC2 answers slowly; it fails none.
pub async fn slow_matching(upstream: &str, needle: &str, delay: std::time::Duration) -> Throttle {
    fault_when(upstream, needle, String::new(), std::sync::Arc::new(|_| false), delay).await
}

/// As [`fault_matching`], failing the matching requests while `failing` is set.
pub async fn fault_while(
    upstream: &str,
    needle: &str,
    response: String,
    failing: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Throttle {
    let fails = std::sync::Arc::new(move |_| failing.load(std::sync::atomic::Ordering::SeqCst));
    fault_when(upstream, needle, response, fails, std::time::Duration::ZERO).await
}

/// Which matching requests fail, by their index among the matching ones.
type Fails = std::sync::Arc<dyn Fn(usize) -> bool + Send + Sync>;

/// What happens to a matching request, by its index among the matching ones: a fault, or
/// (`None`) forwarding.
type Decide = std::sync::Arc<dyn Fn(usize) -> Option<Fault> + Send + Sync>;

async fn fault_when(
    upstream: &str,
    needle: &str,
    response: String,
    fails: Fails,
    delay: std::time::Duration,
) -> Throttle {
    let fault = Fault::Respond(response);
    serve(upstream, needle, std::sync::Arc::new(move |n| fails(n).then(|| fault.clone())), delay).await
}

async fn serve(upstream: &str, needle: &str, decide: Decide, delay: std::time::Duration) -> Throttle {
    let needle = needle.to_string();
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_string();
    let seen = Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak_in_flight = Arc::new(AtomicUsize::new(0));
    let peak = peak_in_flight.clone();
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorded = bodies.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            let count = count.clone();
            let (in_flight, peak) = (in_flight.clone(), peak.clone());
            let needle = needle.clone();
            let decide = decide.clone();
            let recorded = recorded.clone();
            tokio::spawn(async move {
                // Read one request: headers, then Content-Length bytes of body.
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                let header_end = loop {
                    let r = client.read(&mut chunk).await.unwrap_or(0);
                    if r == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..r]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("content-length")))
                    .and_then(|(_, v)| v.trim().parse().ok())
                    .unwrap_or(0);
                while buf.len() < header_end + len {
                    let r = client.read(&mut chunk).await.unwrap_or(0);
                    if r == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..r]);
                }
                let matches = String::from_utf8_lossy(&buf).contains(&needle);
                if matches && let Ok(mut b) = recorded.lock() {
                    b.push(String::from_utf8_lossy(&buf[header_end..]).to_string());
                }
                match matches.then(|| decide(count.fetch_add(1, Ordering::SeqCst))).flatten() {
                    Some(Fault::Respond(response)) => {
                        let _ = client.write_all(response.as_bytes()).await;
                        return;
                    }
                    Some(Fault::Hang(d)) => {
                        tokio::time::sleep(d).await;
                        return;
                    }
                    None => {}
                }
                if matches {
                    peak.fetch_max(in_flight.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                }
                // Forward with Connection: close so the upstream response ends at EOF.
                let head = head.replacen("\r\n", "\r\nConnection: close\r\n", 1);
                let Ok(mut up) = tokio::net::TcpStream::connect(&upstream).await else { return };
                let _ = up.write_all(head.as_bytes()).await;
                let _ = up.write_all(&buf[header_end..]).await;
                let mut resp = Vec::new();
                let _ = up.read_to_end(&mut resp).await;
                if matches {
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                }
                let _ = client.write_all(&resp).await;
            });
        }
    });
    Throttle { url, seen, peak_in_flight, bodies }
}

/// What a brownout answers a matching request with, when it picks it.
#[derive(Clone, Debug)]
pub enum Fault {
    /// This whole HTTP response.
    Respond(String),
    /// No answer for this long, then the connection is closed (a call past its timeout).
    Hang(std::time::Duration),
}

impl Fault {
    /// EC2's error `code` with HTTP `status` (e.g. 503 `Unavailable`, 503 `RequestLimitExceeded`,
    /// 500 `InternalError`).
    pub fn ec2_error(status: u16, code: &str) -> Fault {
        let body = format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code><Message>{code} (brownout)</Message></Error></Errors><RequestID>brownout</RequestID></Response>"
        );
        Fault::Respond(format!(
            "HTTP/1.1 {status} Brownout\r\nContent-Type: text/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ))
    }
}

/// A brownout in front of moto: while `active` is set, each matching request is picked with
/// probability `fraction` (a seeded sequence, the same in every run) and answered with the
/// next of `faults` in turn; the others, and every request while inactive, are forwarded.
/// `seen` counts the matching requests, `peak_in_flight` those forwarded at once.
pub async fn brownout(
    upstream: &str,
    needle: &str,
    fraction: f64,
    faults: Vec<Fault>,
    active: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> Throttle {
    let faults = std::sync::Arc::new(faults);
    let decide: Decide = std::sync::Arc::new(move |n| {
        if !active.load(std::sync::atomic::Ordering::SeqCst) || faults.is_empty() {
            return None;
        }
        (uniform(n) < fraction).then(|| faults[n % faults.len()].clone())
    });
    serve(upstream, needle, decide, std::time::Duration::ZERO).await
}

/// A draw in [0, 1) for the `n`th request: SplitMix64 of `n`, uniform and the same every run.
fn uniform(n: usize) -> f64 {
    let mut z = (n as u64).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_brownout_picks_about_its_fraction_of_requests() {
        let picked = (0..10_000).filter(|n| super::uniform(*n) < 0.3).count();
        assert!((2_800..3_200).contains(&picked), "{picked} of 10,000");
        assert!((0..10_000).all(|n| (0.0..1.0).contains(&super::uniform(n))));
    }
}
