//! OTLP/HTTP metric export: the live state as an `ExportMetricsServiceRequest` in OTLP's
//! JSON encoding (protobuf JSON: 64-bit integers as strings, enums as numbers), POSTed to
//! the receiver every interval and once more at the end. Sums are cumulative from the
//! moment the metrics started.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::histogram::Histogram;
use super::{LiveMetrics, State};
use crate::LiveError;

/// OTLP's `AGGREGATION_TEMPORALITY_CUMULATIVE`.
const CUMULATIVE: u8 = 2;

/// Where to POST: host, port, path.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Endpoint {
    host: String,
    port: u16,
    path: String,
}

/// An `http://HOST[:PORT][/PATH]` URL; the port defaults to OTLP/HTTP's 4318 and an empty
/// path to `/v1/metrics`.
pub(crate) fn endpoint(url: &str) -> Result<Endpoint, LiveError> {
    let bad = |message: &str| LiveError::BadEndpoint {
        url: url.to_string(),
        message: message.to_string(),
    };
    let rest = url.strip_prefix("http://").ok_or_else(|| {
        bad(
            "llem sends OTLP over plain http:// (point it at a local collector, which may \
             forward over TLS)",
        )
    })?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (rest.get(..i).unwrap_or(""), rest.get(i..).unwrap_or("/")),
        None => (rest, ""),
    };
    if authority.contains('@') {
        return Err(bad(
            "credentials in the URL are not sent; use a local collector",
        ));
    }
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (
            h.to_string(),
            p.parse::<u16>()
                .map_err(|_| bad("the port is not a number"))?,
        ),
        _ => (authority.to_string(), 4318),
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    let path = if path.is_empty() || path == "/" {
        "/v1/metrics".to_string()
    } else {
        path.to_string()
    };
    Ok(Endpoint { host, port, path })
}

fn attr(key: &str, value: &str) -> Value {
    json!({"key": key, "value": {"stringValue": value}})
}

fn point(attrs: Vec<Value>, start_ns: u128, now_ns: u128, v: f64) -> Value {
    json!({
        "attributes": attrs,
        "startTimeUnixNano": start_ns.to_string(),
        "timeUnixNano": now_ns.to_string(),
        "asDouble": v,
    })
}

fn histogram_point(attrs: Vec<Value>, start_ns: u128, now_ns: u128, h: &Histogram) -> Value {
    json!({
        "attributes": attrs,
        "startTimeUnixNano": start_ns.to_string(),
        "timeUnixNano": now_ns.to_string(),
        "count": h.count().to_string(),
        "sum": h.sum(),
        "bucketCounts": h.counts().iter().map(u64::to_string).collect::<Vec<_>>(),
        "explicitBounds": h.bounds(),
    })
}

fn sum(name: &str, unit: &str, help: &str, points: Vec<Value>) -> Value {
    json!({
        "name": name, "unit": unit, "description": help,
        "sum": {"dataPoints": points, "aggregationTemporality": CUMULATIVE, "isMonotonic": true},
    })
}

fn gauge(name: &str, unit: &str, help: &str, points: Vec<Value>) -> Value {
    json!({"name": name, "unit": unit, "description": help, "gauge": {"dataPoints": points}})
}

/// The request body for `s` at `now_ns`, sums counted from `start_ns`.
pub(crate) fn request(s: &State, start_ns: u128, now_ns: u128) -> Value {
    let devices = s.devices();
    let dev_attrs = |id: &str, t: Option<&str>| {
        let mut a = vec![attr("hw.id", id)];
        if let Some(t) = t {
            a.push(attr("hw.type", t));
        }
        a
    };
    let (node, parts): (Vec<_>, Vec<_>) = devices.iter().partition(|d| d.hw_type.is_none());
    let energy = |list: &[&super::DeviceFigures]| -> Vec<Value> {
        list.iter()
            .map(|d| point(dev_attrs(&d.id, d.hw_type), start_ns, now_ns, d.energy_j))
            .collect()
    };
    let power = |list: &[&super::DeviceFigures]| -> Vec<Value> {
        list.iter()
            .filter_map(|d| {
                d.power_w
                    .map(|p| point(dev_attrs(&d.id, d.hw_type), start_ns, now_ns, p))
            })
            .collect()
    };
    let mut metrics = vec![
        sum(
            "hw.energy",
            "J",
            "Energy the device used while llem measured it.",
            energy(&parts),
        ),
        gauge("hw.power", "W", "The device's latest power.", power(&parts)),
    ];
    if !node.is_empty() {
        metrics.push(sum(
            "hw.host.energy",
            "J",
            "Energy the whole node used while llem measured it (BMC or wall meter).",
            energy(&node),
        ));
        metrics.push(gauge(
            "hw.host.power",
            "W",
            "The whole node's latest power.",
            power(&node),
        ));
    }
    let cfg = |label: &str, model: &str| {
        vec![
            attr("llem.config", label),
            attr("gen_ai.request.model", model),
        ]
    };
    let mut usage = Vec::new();
    let (mut ttft, mut tpot, mut requests) = (Vec::new(), Vec::new(), Vec::new());
    for (label, r) in &s.requests {
        for (t, h) in [("input", &r.input_tokens), ("output", &r.output_tokens)] {
            let mut a = cfg(label, &r.model);
            a.push(attr("gen_ai.token.type", t));
            usage.push(histogram_point(a, start_ns, now_ns, h));
        }
        ttft.push(histogram_point(
            cfg(label, &r.model),
            start_ns,
            now_ns,
            &r.ttft_s,
        ));
        tpot.push(histogram_point(
            cfg(label, &r.model),
            start_ns,
            now_ns,
            &r.tpot_s,
        ));
        for (outcome, n) in [("success", r.succeeded), ("failure", r.failed)] {
            let mut a = cfg(label, &r.model);
            a.push(attr("llem.outcome", outcome));
            requests.push(point(a, start_ns, now_ns, n as f64));
        }
    }
    let hist = |name: &str, unit: &str, help: &str, points: Vec<Value>| {
        json!({"name": name, "unit": unit, "description": help,
               "histogram": {"dataPoints": points, "aggregationTemporality": CUMULATIVE}})
    };
    metrics.push(hist(
        "gen_ai.client.token.usage",
        "{token}",
        "Tokens per measured request.",
        usage,
    ));
    metrics.push(hist(
        "gen_ai.server.time_to_first_token",
        "s",
        "Time to first token.",
        ttft,
    ));
    metrics.push(hist(
        "gen_ai.server.time_per_output_token",
        "s",
        "Time per output token after the first.",
        tpot,
    ));
    metrics.push(sum(
        "llem.requests",
        "{request}",
        "Measured requests by outcome.",
        requests,
    ));
    let jpt: Vec<Value> = s
        .energy_per_token()
        .iter()
        .map(|(label, j)| point(vec![attr("llem.config", label)], start_ns, now_ns, *j))
        .collect();
    metrics.push(gauge(
        "llem.energy_per_output_token",
        "J",
        "Running energy of the measured devices (the node excepted) per output token of the \
         measurement window.",
        jpt,
    ));
    let (label, hash) = s
        .config
        .as_ref()
        .map_or(("-", "-"), |c| (c.0.as_str(), c.1.as_str()));
    metrics.push(gauge(
        "llem.run",
        "1",
        "What llem runs: the study or experiment, the configuration and its phase.",
        vec![point(
            vec![
                attr("llem.kind", s.run_kind),
                attr("llem.name", &s.name),
                attr("llem.config", label),
                attr("llem.config_hash", hash),
                attr("llem.phase", s.phase.as_deref().unwrap_or("-")),
            ],
            start_ns,
            now_ns,
            1.0,
        )],
    ));
    if s.run_kind == "study" {
        let cells = [
            ("planned", s.cells_planned),
            ("completed", s.cells_completed),
            ("failed", s.cells_failed),
        ]
        .iter()
        .map(|(state, n)| point(vec![attr("llem.state", state)], start_ns, now_ns, *n as f64))
        .collect();
        metrics.push(gauge(
            "llem.study.cells",
            "{cell}",
            "The study's cells by state.",
            cells,
        ));
    }
    json!({"resourceMetrics": [{
        "resource": {"attributes": [attr("service.name", "llem"),
                                    attr("service.version", crate::host::VERSION)]},
        "scopeMetrics": [{"scope": {"name": "llem", "version": crate::host::VERSION},
                          "metrics": metrics}],
    }]})
}

/// POSTs `body` as JSON; the status line's code.
fn post(e: &Endpoint, body: &[u8]) -> Result<u16, String> {
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
        "POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        e.path,
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
    Ok(code)
}

/// What went wrong with pushes so far.
#[derive(Debug, Default)]
struct Failures {
    pushes: u64,
    failed: u64,
    first: Option<String>,
}

/// Pushes every interval from its own thread until finished.
pub struct Pusher {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    failures: Arc<Mutex<Failures>>,
    push: Arc<dyn Fn() + Send + Sync>,
}

impl Pusher {
    /// Starts pushing `metrics` to `url` every `interval`.
    pub fn start(
        url: &str,
        interval: Duration,
        metrics: Arc<LiveMetrics>,
    ) -> Result<Pusher, LiveError> {
        let e = endpoint(url)?;
        let failures: Arc<Mutex<Failures>> = Arc::default();
        let record = failures.clone();
        let push: Arc<dyn Fn() + Send + Sync> = Arc::new(move || {
            let body = request(
                &metrics.current(),
                metrics.started_unix_ns(),
                super::unix_ns(),
            );
            let outcome = match post(&e, body.to_string().as_bytes()) {
                Ok(code) if (200..300).contains(&code) => Ok(()),
                Ok(code) => Err(format!("the receiver answered HTTP {code}")),
                Err(err) => Err(err),
            };
            if let Ok(mut f) = record.lock() {
                f.pushes += 1;
                if let Err(err) = outcome {
                    f.failed += 1;
                    f.first.get_or_insert(err);
                }
            }
        });
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, each) = (stop.clone(), push.clone());
        let interval = interval.max(Duration::from_millis(100));
        let thread = std::thread::Builder::new()
            .name("llem-otlp".into())
            .spawn(move || {
                let mut next = Instant::now() + interval;
                while !flag.load(Ordering::Acquire) {
                    let left = next.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        each();
                        next += interval;
                    } else {
                        std::thread::park_timeout(left);
                    }
                }
            })
            .map_err(|source| LiveError::Listen {
                addr: url.to_string(),
                source,
            })?;
        Ok(Pusher {
            stop,
            thread: Some(thread),
            failures,
            push,
        })
    }

    /// Stops the thread, pushes the final figures; a note when pushes failed.
    pub fn finish(mut self) -> Option<String> {
        self.stop_thread();
        (self.push)();
        let f = self.failures.lock().ok()?;
        (f.failed > 0).then(|| {
            format!(
                "OTLP export: {} of {} pushes failed ({})",
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
    fn endpoints_default_to_the_otlp_port_and_path() {
        let e = endpoint("http://127.0.0.1").unwrap();
        assert_eq!(
            (e.host.as_str(), e.port, e.path.as_str()),
            ("127.0.0.1", 4318, "/v1/metrics")
        );
        let e = endpoint("http://collector:9000/otlp/v1/metrics").unwrap();
        assert_eq!((e.port, e.path.as_str()), (9000, "/otlp/v1/metrics"));
        assert!(
            endpoint("https://x")
                .unwrap_err()
                .to_string()
                .contains("plain http://")
        );
        assert!(endpoint("http://u:p@x").is_err());
        assert!(endpoint("http://x:port").is_err());
    }
}
