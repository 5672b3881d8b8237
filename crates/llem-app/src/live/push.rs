//! Pushing live metrics: a plain HTTP/1.1 client for `http://` receivers (an OTLP collector,
//! a Prometheus Pushgateway) and a thread that pushes every interval and once more at the
//! end, counting what failed without ever failing the run.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::LiveError;

/// Where to send: host, port, path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Endpoint {
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) path: String,
}

/// An `http://HOST[:PORT][/PATH]` URL; `port` when it names none, `path` when it has none.
/// `flag` names the option in errors.
pub(crate) fn endpoint(
    flag: &str,
    url: &str,
    port: u16,
    path: &str,
) -> Result<Endpoint, LiveError> {
    let bad = |message: &str| LiveError::BadEndpoint {
        flag: flag.to_string(),
        url: url.to_string(),
        message: message.to_string(),
    };
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        bad(
            "llem pushes over plain http:// (point it at a local collector or gateway, which \
             may forward over TLS)",
        )
    })?;
    let (authority, given_path) = match rest.find('/') {
        Some(i) => (rest.get(..i).unwrap_or(""), rest.get(i..).unwrap_or("/")),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(bad(
            "credentials in the URL are not sent; use a local collector",
        ));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (
            h.to_string(),
            p.parse::<u16>()
                .map_err(|_| bad("the port is not a number"))?,
        ),
        None => (authority.to_string(), port),
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let path = match given_path.trim_end_matches('/') {
        "" => path.to_string(),
        p => p.to_string(),
    };
    Ok(Endpoint { host, port, path })
}

/// Sends `body` with `method` to `path` of `e`; the status code.
pub(crate) fn send(
    e: &Endpoint,
    method: &str,
    path: &str,
    content_type: &str,
    body: &[u8],
) -> Result<u16, String> {
    let addr = (e.host.as_str(), e.port)
        .to_socket_addrs()
        .map_err(|err| format!("{}:{}: {err}", e.host, e.port))?
        .next()
        .ok_or_else(|| format!("{} resolves to no address", e.host))?;
    let mut c = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|err| format!("{addr}: {err}"))?;
    let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = c.set_write_timeout(Some(Duration::from_secs(10)));
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        e.host,
        e.port,
        body.len()
    );
    c.write_all(head.as_bytes())
        .and_then(|()| c.write_all(body))
        .map_err(|err| format!("{addr}: {err}"))?;
    let mut answer = Vec::new();
    let _ = c.take(64 * 1024).read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer);
    let code = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse::<u16>().ok())
        .ok_or_else(|| format!("{addr}: no HTTP answer"))?;
    if (200..300).contains(&code) {
        Ok(code)
    } else {
        let said = text.split_once("\r\n\r\n").map_or("", |b| b.1).trim();
        Err(format!(
            "{addr} answered HTTP {code}{}",
            if said.is_empty() {
                String::new()
            } else {
                format!(": {}", said.chars().take(200).collect::<String>())
            }
        ))
    }
}

/// What went wrong with pushes so far.
#[derive(Debug, Default)]
struct Failures {
    pushes: u64,
    failed: u64,
    first: Option<String>,
}

/// One push.
type PushFn = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// Pushes every interval from its own thread until finished.
pub struct Pusher {
    what: &'static str,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    failures: Arc<Mutex<Failures>>,
    push: PushFn,
}

impl Pusher {
    /// Runs `push` every `interval`; `what` names the export in the final note.
    pub(crate) fn start(
        what: &'static str,
        interval: Duration,
        push: impl Fn() -> Result<(), String> + Send + Sync + 'static,
    ) -> Result<Pusher, LiveError> {
        let failures: Arc<Mutex<Failures>> = Arc::default();
        let record = failures.clone();
        let push: PushFn = Arc::new(move || {
            let outcome = push();
            if let Ok(mut f) = record.lock() {
                f.pushes += 1;
                if let Err(err) = &outcome {
                    f.failed += 1;
                    f.first.get_or_insert_with(|| err.clone());
                }
            }
            outcome
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, each) = (stop.clone(), push.clone());
        let interval = interval.max(Duration::from_millis(100));
        let thread = std::thread::Builder::new()
            .name("llem-push".into())
            .spawn(move || {
                let mut next = Instant::now() + interval;
                while !flag.load(Ordering::Acquire) {
                    let left = next.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        let _ = each();
                        next += interval;
                    } else {
                        std::thread::park_timeout(left);
                    }
                }
            })
            .map_err(LiveError::Thread)?;
        Ok(Pusher {
            what,
            stop,
            thread: Some(thread),
            failures,
            push,
        })
    }

    /// Stops the thread, pushes the final figures; a note when pushes failed.
    pub fn finish(mut self) -> Option<String> {
        self.stop_thread();
        let _ = (self.push)();
        let f = self.failures.lock().ok()?;
        (f.failed > 0).then(|| {
            format!(
                "{}: {} of {} pushes failed ({})",
                self.what,
                f.failed,
                f.pushes,
                f.first.as_deref().unwrap_or("unknown")
            )
        })
    }

    fn stop_thread(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        self.stop_thread();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_take_their_defaults_and_refuse_what_cannot_be_sent() {
        let e = endpoint("--otlp-endpoint", "http://127.0.0.1", 4318, "/v1/metrics").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("127.0.0.1", 4318, "/v1/metrics")
        );
        let e = endpoint(
            "--otlp-endpoint",
            "http://c:9000/otlp/v1/metrics",
            4318,
            "/v1/metrics",
        )
        .unwrap();
        assert_eq!((e.port, e.path.as_str()), (9000, "/otlp/v1/metrics"));
        let e = endpoint("--metrics-push", "http://gw:9091/", 9091, "").unwrap();
        assert_eq!(e.path, "");
        let err = endpoint("--otlp-endpoint", "https://x", 1, "").unwrap_err();
        assert!(err.to_string().contains("plain http://"), "{err}");
        assert!(endpoint("--otlp-endpoint", "http://u:p@x", 1, "").is_err());
        assert!(endpoint("--otlp-endpoint", "http://x:port", 1, "").is_err());
    }
}
