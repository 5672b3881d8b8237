//! The Prometheus endpoint: a plain HTTP/1.1 listener answering `GET /metrics` with the
//! exposition rendered at each scrape (nothing is computed between scrapes).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use super::LiveMetrics;
use crate::LiveError;

/// The address `--metrics-listen` names: `PORT` and `:PORT` are on the loopback interface
/// (metrics say what runs on the machine; exposing them is a choice the user writes out).
pub(crate) fn listen_address(given: &str) -> Result<SocketAddr, LiveError> {
    let bad = |message: &str| LiveError::BadAddress {
        addr: given.to_string(),
        message: message.to_string(),
    };
    let t = given.trim();
    let spelled = if t.chars().all(|c| c.is_ascii_digit()) && !t.is_empty() {
        format!("127.0.0.1:{t}")
    } else if let Some(port) = t.strip_prefix(':') {
        format!("127.0.0.1:{port}")
    } else {
        t.to_string()
    };
    spelled
        .to_socket_addrs()
        .map_err(|_| {
            bad("expected PORT, :PORT or HOST:PORT (e.g. 9464, 127.0.0.1:9464, 0.0.0.0:9464)")
        })?
        .next()
        .ok_or_else(|| bad("the host resolves to no address"))
}

/// A running endpoint; stops when dropped.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Server {
    /// Listens on `given` (see [`listen_address`]) and serves `metrics`.
    pub fn start(given: &str, metrics: Arc<LiveMetrics>) -> Result<Server, LiveError> {
        let addr = listen_address(given)?;
        let listener = TcpListener::bind(addr).map_err(|source| LiveError::Listen {
            addr: addr.to_string(),
            source,
        })?;
        let addr = listener.local_addr().unwrap_or(addr);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("llem-metrics".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if flag.load(Ordering::Acquire) {
                        break;
                    }
                    if let Ok(c) = conn {
                        // One slow client must not hold the others for long.
                        let _ = serve(c, &metrics);
                    }
                }
            })
            .map_err(|source| LiveError::Listen {
                addr: addr.to_string(),
                source,
            })?;
        Ok(Server {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Where it listens (the port chosen when 0 was asked for).
    pub fn address(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the blocking accept; it sees the flag and ends.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Answers one connection: the exposition for `GET /metrics`, 404 elsewhere, 405 for other
/// methods.
fn serve(mut c: TcpStream, metrics: &LiveMetrics) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(2)))?;
    c.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
        let n = c.read(&mut chunk)?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next().unwrap_or_default().split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or_default();
    let (status, kind, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            super::prometheus::render(&metrics.current()),
        ),
        ("GET" | "HEAD", _) => ("404 Not Found", "text/plain", "see /metrics\n".to_string()),
        _ => (
            "405 Method Not Allowed",
            "text/plain",
            "GET /metrics\n".to_string(),
        ),
    };
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        response.extend_from_slice(body.as_bytes());
    }
    c.write_all(&response)?;
    c.flush()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn ports_alone_listen_on_the_loopback() {
        assert_eq!(
            listen_address("9464").unwrap().to_string(),
            "127.0.0.1:9464"
        );
        assert_eq!(
            listen_address(":9464").unwrap().to_string(),
            "127.0.0.1:9464"
        );
        assert_eq!(
            listen_address("0.0.0.0:1").unwrap().to_string(),
            "0.0.0.0:1"
        );
        let e = listen_address("nine").unwrap_err().to_string();
        assert!(e.contains("expected PORT"), "{e}");
    }

    #[test]
    fn a_scrape_gets_the_exposition_and_other_paths_404() {
        let m = LiveMetrics::new("experiment", "x");
        let s = Server::start("127.0.0.1:0", m).unwrap();
        let get = |path: &str| {
            let mut c = TcpStream::connect(s.address()).unwrap();
            write!(c, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let mut out = String::new();
            c.read_to_string(&mut out).unwrap();
            out
        };
        let ok = get("/metrics");
        assert!(ok.starts_with("HTTP/1.1 200 OK"), "{ok}");
        assert!(
            ok.contains("llem_run_info{kind=\"experiment\",name=\"x\""),
            "{ok}"
        );
        assert!(get("/").starts_with("HTTP/1.1 404"));
    }
}
