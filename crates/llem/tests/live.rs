//! Live metrics end to end: a real Prometheus (Debian's) scrapes a study's
//! `--metrics-listen` endpoint while it runs, and an OTLP receiver built on OpenTelemetry's
//! protocol package decodes what `--otlp-endpoint` pushed; both are checked against the
//! study's results.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::common;

/// The CPU package's constant power, W.
const PACKAGE_W: f64 = 20.0;

/// Kills a child when dropped.
pub(crate) struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET path` on 127.0.0.1:`port`: status and body.
pub(crate) fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        c,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut out = String::new();
    c.read_to_string(&mut out).ok()?;
    let status = out.split_whitespace().nth(1)?.parse().ok()?;
    let body = out.split_once("\r\n\r\n")?.1;
    // Prometheus answers chunked: the JSON is the part between the chunk sizes.
    let body = if out
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    Some((status, body))
}

fn dechunk(mut body: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = body.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.push_str(&rest[..n]);
        body = rest[n..].trim_start_matches("\r\n");
    }
    out
}

/// `program ARGS` on 127.0.0.1:`port`, its log in `dir`, once its `/-/ready` answers 200;
/// `None` (the test skipped, saying so) when it is not installed and not required.
fn serve_ready(dir: &Path, program: &str, args: &[String], port: u16) -> Option<Killed> {
    if Command::new(program).arg("--version").output().is_err() {
        assert!(
            std::env::var_os("LLEM_REQUIRE_PROMETHEUS").is_none(),
            "{program} is not installed: run scripts/install-prometheus.sh"
        );
        eprintln!("skipped: {program} is not installed (scripts/install-prometheus.sh)");
        return None;
    }
    let log = dir.join(format!("{program}.log"));
    let child = Command::new(program)
        .args(args)
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let child = Killed(child);
    let deadline = Instant::now() + Duration::from_secs(60);
    while get(port, "/-/ready").map(|r| r.0) != Some(200) {
        assert!(
            Instant::now() < deadline,
            "{program} not ready: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(child)
}

/// Prometheus on a free port, scraping 127.0.0.1:`target` every 250 ms; `None` (the test
/// skipped, saying so) when Prometheus is not installed and not required.
fn prometheus(dir: &Path, target: u16) -> Option<(Killed, u16)> {
    let port = common::free_port();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global: {{scrape_interval: 250ms, scrape_timeout: 200ms}}\n\
             scrape_configs:\n  - job_name: llem\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n"
        ),
    )
    .unwrap();
    let args = [
        format!("--config.file={}", config.display()),
        format!("--storage.tsdb.path={}", dir.join("tsdb").display()),
    ];
    let child = serve_ready(dir, "prometheus", &args, port)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    // Targets are picked up a few seconds after start: wait for the first scrape (of nothing
    // yet, `up` 0) so that the study is scraped from its start.
    while samples(port, "up{job=\"llem\"}").is_empty() {
        assert!(Instant::now() < deadline, "prometheus never scraped");
        std::thread::sleep(Duration::from_millis(200));
    }
    Some((child, port))
}

/// Every raw sample of `selector` Prometheus holds: (unix s, value), per series.
fn samples(port: u16, selector: &str) -> Vec<(Value, Vec<(f64, f64)>)> {
    let q: String = format!("{selector}[1h]")
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let (status, body) = get(port, &format!("/api/v1/query?query={q}")).unwrap();
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let points = s["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    (
                        p[0].as_f64().unwrap(),
                        p[1].as_str().unwrap().parse::<f64>().unwrap(),
                    )
                })
                .collect();
            (s["metric"].clone(), points)
        })
        .collect()
}

/// The receiver: an HTTP server on a free port that decodes each POSTed body as an OTLP
/// `ExportMetricsServiceRequest` (protobuf JSON, strictly: an unknown field is an error) and
/// writes it back as one JSON line, or `{"error": ...}`.
const RECEIVER: &str = r#"
import json, sys, http.server
from google.protobuf import json_format
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2 as svc
out = open(sys.argv[2], "a")
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        try:
            req = json_format.Parse(body, svc.ExportMetricsServiceRequest())
            line = json_format.MessageToDict(req)
            code = 200 if self.path == "/v1/metrics" else 404
        except Exception as e:
            line, code = {"error": repr(e)}, 400
        out.write(json.dumps(line) + "\n"); out.flush()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"#;

fn receiver(python: &Path, out: &Path) -> (Killed, u16) {
    let mut child = Command::new(python)
        .args(["-c", RECEIVER, "-"])
        .arg(out)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (Killed(child), line.trim().parse().unwrap())
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The OTLP data points of `name` in one decoded request.
fn data_points<'a>(req: &'a Value, name: &str) -> Vec<&'a Value> {
    let metrics = &req["resourceMetrics"][0]["scopeMetrics"][0]["metrics"];
    metrics
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["name"] == name)
        .flat_map(|m| {
            ["sum", "gauge", "histogram"]
                .iter()
                .filter_map(|k| m[*k]["dataPoints"].as_array())
                .flatten()
        })
        .collect()
}

fn attr<'a>(point: &'a Value, key: &str) -> Option<&'a str> {
    point["attributes"]
        .as_array()?
        .iter()
        .find(|a| a["key"] == key)?["value"]["stringValue"]
        .as_str()
}

/// `llem run` of the study `yaml` in `home`, results in `out`, with `flags`, while its CPU
/// package (a powercap tree) draws [`PACKAGE_W`]; its output, once it succeeded, and when it
/// exited (Unix s).
fn run_metered(home: &Path, yaml: &str, out: &Path, flags: &[&str]) -> (Output, f64) {
    let file = home.join("live.yaml");
    std::fs::write(&file, yaml).unwrap();
    let (stop, writer) = common::rapl_zone(&home.join("powercap"), PACKAGE_W);
    let o = common::llem_in(home)
        .args([
            "run",
            file.to_str().unwrap(),
            "-q",
            "-o",
            out.to_str().unwrap(),
        ])
        .args(flags)
        .output()
        .unwrap();
    let exited = unix_now();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    (o, exited)
}

/// What a cell's meter measured, from model load to teardown: its phases' energy, J.
fn phases_j(r: &Value) -> f64 {
    r["phases"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["energy_j"].as_f64())
        .sum()
}

/// A two-cell study with live metrics on: Prometheus's copy of the package's energy counter
/// rises monotonically and ends at the energy the cells measured, within what the package
/// drew between the last scrape and llem's exit; the final OTLP push holds exactly the
/// cells' energy, tokens and requests.
#[test]
fn a_study_is_scraped_by_prometheus_and_pushed_over_otlp_while_it_runs() {
    let _machine = common::shared();
    let Some(python) = common::checks_python() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join("sys")).unwrap();
    let listen = common::free_port();
    let Some((_prometheus, prom)) = prometheus(home, listen) else {
        return;
    };
    let pushed = home.join("otlp.jsonl");
    let (_receiver, otlp) = receiver(&python, &pushed);
    let out = home.join("results");
    let (o, exited) = run_metered(
        home,
        "name: live\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nenergy_sampler: rapl\n\
         dataset: {source: synthetic, n_prompts: 4, synthetic: {input_tokens: 16, output_tokens: 8}}\n\
         max_output_tokens: 8\n\
         warmup: {enabled: false}\nbaseline: {enabled: false}\n\
         study_execution: {n_cycles: 2, experiment_gap_seconds: 1, cycle_gap_seconds: 0}\n",
        &out,
        &[
            "--metrics-listen",
            &format!("127.0.0.1:{listen}"),
            "--otlp-endpoint",
            &format!("http://127.0.0.1:{otlp}"),
            "--otlp-interval",
            "300ms",
        ],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains(&format!(
            "live metrics at http://127.0.0.1:{listen}/metrics"
        )),
        "{stderr}"
    );

    // What the cells measured: their meters ran from model load to teardown.
    let results: Vec<Value> = common::walk(&out)
        .into_iter()
        .filter(|p| p.ends_with("result.json"))
        .map(|p: PathBuf| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect();
    assert_eq!(results.len(), 2);
    let measured_j: f64 = results.iter().map(phases_j).sum();
    let output_tokens: f64 = results
        .iter()
        .map(|r| r["total_output_tokens"].as_f64().unwrap())
        .sum();
    // A meter starts a moment before load and stops a moment after teardown.
    let meter_slack_j = PACKAGE_W * 0.25 * results.len() as f64;

    // Prometheus: monotone, and its last sample is the cells' energy less what the package
    // drew after it (the last scrape may precede llem's exit by up to a scrape interval).
    let series = samples(
        prom,
        "hw_energy_joules_total{hw_id=\"package-0\",hw_type=\"cpu\"}",
    );
    assert_eq!(
        series.len(),
        1,
        "{series:?}; up: {:?}; {}",
        samples(prom, "up"),
        std::fs::read_to_string(home.join("prometheus.log")).unwrap_or_default()
    );
    let points = &series[0].1;
    assert!(points.len() >= 4, "{points:?}");
    for w in points.windows(2) {
        assert!(w[1].1 >= w[0].1, "the counter went down: {points:?}");
    }
    let (last_t, last_j) = *points.last().unwrap();
    let unseen_j = PACKAGE_W * (exited - last_t + 0.6);
    assert!(
        last_j <= measured_j + meter_slack_j && last_j >= measured_j - unseen_j - meter_slack_j,
        "last scrape {last_j} J at {last_t}, exit at {exited}; the cells measured {measured_j} J"
    );
    let cells = samples(prom, "llem_study_cells{state=\"planned\"}");
    assert_eq!(cells[0].1.last().unwrap().1, 2.0);
    let ttft = samples(prom, "gen_ai_server_time_to_first_token_seconds_count");
    let seen: f64 = ttft.iter().map(|s| s.1.last().unwrap().1).sum();
    assert!(seen >= 4.0, "the first cell's four requests: {ttft:?}");

    // OTLP: every push decoded; the final one carries the whole study.
    let lines: Vec<Value> = std::fs::read_to_string(&pushed)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(lines.len() >= 2, "{lines:?}");
    for l in &lines {
        assert!(l.get("error").is_none(), "{l}");
    }
    let last = lines.last().unwrap();
    let energy = data_points(last, "hw.energy");
    let package = energy
        .iter()
        .find(|p| attr(p, "hw.id") == Some("package-0"))
        .unwrap();
    assert_eq!(attr(package, "hw.type"), Some("cpu"));
    let j = package["asDouble"].as_f64().unwrap();
    assert!(
        (j - measured_j).abs() <= meter_slack_j,
        "pushed {j} J, measured {measured_j} J"
    );
    eprintln!(
        "prometheus: {} samples, last {last_j:.3} J {:.2} s before llem exited; OTLP: {} pushes, \
         final {j:.3} J; the cells measured {measured_j:.3} J",
        points.len(),
        exited - last_t,
        lines.len()
    );
    let usage = data_points(last, "gen_ai.client.token.usage");
    let output = usage
        .iter()
        .find(|p| attr(p, "gen_ai.token.type") == Some("output"))
        .unwrap();
    assert_eq!(output["count"], "8", "{output}");
    assert_eq!(output["sum"].as_f64().unwrap(), output_tokens);
    assert_eq!(
        attr(output, "gen_ai.request.model"),
        Some("SmolLM2-135M-Instruct.Q4_1.gguf")
    );
    let requests = data_points(last, "llem.requests");
    let ok: f64 = requests
        .iter()
        .filter(|p| attr(p, "llem.outcome") == Some("success"))
        .map(|p| p["asDouble"].as_f64().unwrap())
        .sum();
    assert_eq!(ok, 8.0);
    // The running J/token the exports kept is the last window's (both cells share the
    // label): within its bound of what that cell's result says.
    let last_cell = results
        .iter()
        .max_by(|a, b| {
            let t = |r: &Value| r["start_time"].as_str().unwrap_or_default().to_string();
            t(a).cmp(&t(b))
        })
        .unwrap();
    let result_jpt = last_cell["total_energy_j"].as_f64().unwrap()
        / last_cell["total_output_tokens"].as_f64().unwrap();
    let live_jpt = data_points(last, "llem.energy_per_output_token")[0]["asDouble"]
        .as_f64()
        .unwrap();
    let bound = data_points(last, "llem.energy_per_output_token.bound")[0]["asDouble"]
        .as_f64()
        .unwrap();
    assert!(bound > 0.0);
    assert!(
        (live_jpt - result_jpt).abs() <= bound,
        "live {live_jpt} J/token ± {bound}, result {result_jpt}"
    );
}

/// A listen address that is not one is refused before anything runs.
#[test]
fn a_bad_listen_address_is_refused_up_front() {
    let home = tempfile::tempdir().unwrap();
    let o = common::llem_in(home.path())
        .args(["measure", "--metrics-listen", "nowhere", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--metrics-listen nowhere: expected PORT"), "{e}");
    let o = common::llem_in(home.path())
        .args([
            "measure",
            "--otlp-endpoint",
            "https://collector",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("plain http://"));
}

/// One experiment, measured in llem's own process: its sampler publishes on the board the
/// exporters read, and the final OTLP push holds the run's energy and requests.
#[test]
fn one_experiment_pushes_its_final_figures_over_otlp() {
    let _machine = common::shared();
    let Some(python) = common::checks_python() else {
        return;
    };
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join("sys")).unwrap();
    let pushed = home.join("otlp.jsonl");
    let (_receiver, otlp) = receiver(&python, &pushed);
    let out = home.join("results");
    run_metered(
        home,
        "name: one\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nenergy_sampler: rapl\n\
         dataset: {source: synthetic, n_prompts: 3, synthetic: {input_tokens: 16, output_tokens: 8}}\n\
         max_output_tokens: 8\nwarmup: {enabled: false}\nbaseline: {enabled: false}\n",
        &out,
        &[
            "--otlp-endpoint",
            &format!("http://127.0.0.1:{otlp}/v1/metrics"),
        ],
    );
    let r: Value =
        serde_json::from_slice(&std::fs::read(common::result_file(&out)).unwrap()).unwrap();
    let measured_j = phases_j(&r);
    // The last push is the one sent once the run ended.
    let text = std::fs::read_to_string(&pushed).unwrap();
    let last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert!(last.get("error").is_none(), "{last}");
    let package = data_points(&last, "hw.energy")
        .into_iter()
        .find(|p| attr(p, "hw.id") == Some("package-0"))
        .unwrap();
    let j = package["asDouble"].as_f64().unwrap();
    assert!(
        (j - measured_j).abs() <= PACKAGE_W * 0.25,
        "pushed {j} J, measured {measured_j} J"
    );
    let ttft = data_points(&last, "gen_ai.server.time_to_first_token");
    assert_eq!(ttft[0]["count"], "3", "{ttft:?}");
    assert_eq!(attr(ttft[0], "llem.config"), Some("one"));
    let run = &data_points(&last, "llem.run")[0];
    assert_eq!(attr(run, "llem.kind"), Some("experiment"));
}

/// A Pushgateway (Debian's) on a free port; `None` when not installed and not required.
pub(crate) fn pushgateway(dir: &Path) -> Option<(Killed, u16)> {
    let port = common::free_port();
    Some((serve_ready(dir, "prometheus-pushgateway", &[], port)?, port))
}

/// The value of the exposition line of `name` whose labels include every one of `labels`.
pub(crate) fn exposed(text: &str, name: &str, labels: &[&str]) -> Vec<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .filter(|l| labels.iter().all(|want| l.contains(want)))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse().ok())
        .collect()
}

/// `--metrics-push`: each cell of a study pushes its own group (study, cell, node) to a real
/// Pushgateway, which keeps it after the cell ended: each group's energy is its cell's, and
/// its requests are counted.
#[test]
fn each_cell_of_a_study_pushes_its_figures_to_a_pushgateway() {
    let _machine = common::shared();
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    std::fs::create_dir_all(home.join("sys")).unwrap();
    let Some((_gateway, gw)) = pushgateway(home) else {
        return;
    };
    let out = home.join("results");
    let (o, _) = run_metered(
        home,
        "name: pushed\nmodel: SmolLM2-135M-Instruct.Q4_1.gguf\nenergy_sampler: rapl\n\
         dataset: {source: synthetic, n_prompts: 3, synthetic: {input_tokens: 16, output_tokens: 8}}\n\
         max_output_tokens: 8\nwarmup: {enabled: false}\nbaseline: {enabled: false}\n\
         study_execution: {n_cycles: 2, experiment_gap_seconds: 0, cycle_gap_seconds: 0}\n",
        &out,
        &["--metrics-push", &format!("http://127.0.0.1:{gw}")],
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!stderr.contains("pushes failed"), "{stderr}");
    let (status, text) = get(gw, "/metrics").unwrap();
    assert_eq!(status, 200);
    for dir in common::walk(&out)
        .into_iter()
        .filter(|p| p.ends_with("result.json"))
    {
        let r: Value = serde_json::from_slice(&std::fs::read(&dir).unwrap()).unwrap();
        let measured_j = phases_j(&r);
        // `001_c0_...`: the cell's index is its directory's number.
        let cell_dir = dir.parent().unwrap().file_name().unwrap().to_string_lossy();
        let index: u32 = cell_dir[..3].parse().unwrap();
        let cell = format!("cell=\"{index}\"");
        let energy = exposed(
            &text,
            "hw_energy_joules_total",
            &[
                &cell,
                "hw_id=\"package-0\"",
                "job=\"llem\"",
                "study=\"pushed_",
            ],
        );
        assert_eq!(energy.len(), 1, "cell {index}: {text}");
        assert!(
            (energy[0] - measured_j).abs() <= PACKAGE_W * 0.25,
            "cell {index} pushed {} J, measured {measured_j} J",
            energy[0]
        );
        let requests = exposed(
            &text,
            "llem_requests_total",
            &[&cell, "outcome=\"success\""],
        );
        assert_eq!(requests, [3.0], "cell {index}");
        assert_eq!(
            exposed(
                &text,
                "llem_run_info",
                &[&cell, "kind=\"cell\"", "llem_config=\""]
            )
            .len(),
            1
        );
    }
}
