//! OTLP/HTTP metric export: the live state as an `ExportMetricsServiceRequest` in OTLP's
//! JSON encoding (protobuf JSON: 64-bit integers as strings, enums as numbers), POSTed to
//! the receiver every interval and once more at the end. Sums are cumulative from the
//! moment the metrics started.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::histogram::Histogram;
use super::push::{Pusher, endpoint, send};
use super::{LiveMetrics, State};
use crate::LiveError;

/// OTLP's `AGGREGATION_TEMPORALITY_CUMULATIVE`.
const CUMULATIVE: u8 = 2;

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
    let per_token = s.energy_per_token();
    let figure = |pick: fn(&(f64, f64)) -> f64| -> Vec<Value> {
        per_token
            .iter()
            .map(|(label, f)| point(vec![attr("llem.config", label)], start_ns, now_ns, pick(f)))
            .collect()
    };
    metrics.push(gauge(
        "llem.energy_per_output_token",
        "J",
        "Running energy of the measured devices (the node excepted) per output token of the \
         measurement window.",
        figure(|f| f.0),
    ));
    metrics.push(gauge(
        "llem.energy_per_output_token.bound",
        "J",
        "How far the running J/token may be off: the power at each end of the window over how \
         late its energy was read, per output token.",
        figure(|f| f.1),
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

/// Pushes `metrics` to the OTLP/HTTP receiver at `url` every `interval`.
pub fn start(
    url: &str,
    interval: Duration,
    metrics: Arc<LiveMetrics>,
) -> Result<Pusher, LiveError> {
    let e = endpoint("--otlp-endpoint", url, 4318, "/v1/metrics")?;
    Pusher::start("OTLP export", interval, move || {
        let body = request(
            &metrics.current(),
            metrics.started_unix_ns(),
            super::unix_ns(),
        );
        send(
            &e,
            "POST",
            &e.path,
            "application/json",
            body.to_string().as_bytes(),
        )
        .map(|_| ())
    })
}
