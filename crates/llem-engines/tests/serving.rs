//! The streaming client, traffic and accounting against a real HTTP server on loopback that
//! streams on a known schedule (llem-testkit's `fake_openai`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::time::{Duration, Instant};

use llem_config::ExperimentConfig;
use llem_engines::serving::{ServeOptions, ServerEngine};
use llem_engines::workload::{Prompt, PromptInput};
use llem_engines::{Engine, RequestSink, RunSummary};
use llem_results::RequestRecord;
use llem_testkit::fake_openai::{self, FakeConfig};

struct Sink {
    epoch: Instant,
    records: Vec<RequestRecord>,
    tokens: u64,
}

impl RequestSink for Sink {
    fn now_s(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
    fn on_tokens(&mut self, _: u32, _: f64, n: u32) {
        self.tokens += u64::from(n);
    }
    fn on_done(&mut self, r: RequestRecord) {
        self.records.push(r);
    }
}

fn config(url: &str, traffic: serde_json::Value, max_out: u32) -> ExperimentConfig {
    serde_json::from_value(serde_json::json!({
        "model": "fake-model",
        "engine": "openai",
        "runners": {"openai": format!("external:{url}")},
        "max_output_tokens": max_out,
        "traffic": traffic,
    }))
    .unwrap()
}

fn prompt(text: &str, chat: bool) -> Prompt {
    Prompt {
        dataset_index: 0,
        input: PromptInput::Text {
            text: text.into(),
            chat,
        },
        group: None,
        reference_output: None,
        output_tokens: None,
        ignore_eos: false,
        follow_ups: Vec::new(),
    }
}

fn start(cfg: &ExperimentConfig, stall_s: u64) -> ServerEngine {
    start_with_key(cfg, stall_s, None)
}

fn start_with_key(cfg: &ExperimentConfig, stall_s: u64, key: Option<&str>) -> ServerEngine {
    let dir = tempfile::tempdir().unwrap();
    let mut opts = ServeOptions::new(dir.path().to_path_buf());
    opts.api_key = key.map(String::from);
    opts.stall_timeout = Duration::from_secs(stall_s);
    opts.scrape_interval = Duration::from_millis(200);
    ServerEngine::start(cfg, None, dir.path().join("server.log"), opts).unwrap()
}

fn run(
    cfg: &ExperimentConfig,
    prompts: Vec<Prompt>,
    stall_s: u64,
) -> (Vec<RequestRecord>, RunSummary) {
    let engine = start(cfg, stall_s);
    let plan = llem_engines::registry::context_plan(cfg, 1);
    let mut session = engine.open(plan).unwrap();
    let wl = llem_engines::registry::workload(cfg, prompts);
    let mut sink = Sink {
        epoch: Instant::now(),
        records: Vec::new(),
        tokens: 0,
    };
    let summary = session.run(&wl, &mut sink).unwrap();
    let mut records = sink.records;
    records.sort_by_key(|r| r.request_id);
    (records, summary)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[test]
fn ttft_and_itl_match_the_servers_schedule() {
    let _serial = crate::support::exclusive();
    let url = fake_openai::spawn(FakeConfig {
        first_token_ms: 80,
        gap_ms: 25,
        ..FakeConfig::default()
    });
    let cfg = config(&url, serde_json::json!({"max_concurrency": 4}), 12);
    let (records, summary) = run(
        &cfg,
        (0..4).map(|i| prompt(&format!("p {i}"), false)).collect(),
        30,
    );
    assert_eq!(records.len(), 4);
    for r in &records {
        assert!(r.success, "{:?}", r.error);
        assert_eq!(r.output_tokens, 12);
        assert_eq!(r.token_times_s.len(), 12);
        let ttft = r.ttft_s().unwrap();
        assert!((ttft - 0.080).abs() < 0.015, "ttft {ttft}");
        let itl: Vec<f64> = r.token_times_s.windows(2).map(|w| w[1] - w[0]).collect();
        let m = median(itl.clone());
        assert!((m - 0.025).abs() < 0.005, "median itl {m}");
        // The whole stream took what the server scheduled: 80 + 11 x 25 ms.
        let span = r.token_times_s[11] - r.submit_s;
        assert!((span - 0.355).abs() < 0.03, "span {span}");
        assert_eq!(r.input_tokens, 2, "usage's prompt count");
    }
    assert_eq!(summary.latency_mode, Some("true_streaming"));
    let t = summary.traffic.unwrap();
    assert_eq!(t.token_count_source, "usage");
    assert_eq!(t.requests_sent, 4);
    assert!(
        summary
            .server_metrics
            .iter()
            .any(|s| s.metric == "vllm:num_requests_running")
    );
    assert!(
        !summary
            .server_metrics
            .iter()
            .any(|s| s.metric.ends_with("_bucket"))
    );
}

#[test]
fn a_role_only_first_chunk_does_not_count_as_the_first_token() {
    let _serial = crate::support::exclusive();
    let url = fake_openai::spawn(FakeConfig {
        first_token_ms: 120,
        gap_ms: 10,
        role_chunk: true,
        ..FakeConfig::default()
    });
    let cfg = config(&url, serde_json::json!({}), 5);
    let (records, _) = run(&cfg, vec![prompt("hello there", true)], 30);
    let r = &records[0];
    assert!(r.success, "{:?}", r.error);
    assert_eq!(r.output_tokens, 5);
    let ttft = r.ttft_s().unwrap();
    assert!(ttft > 0.105, "TTFT {ttft} was taken at the role-only chunk");
}

#[test]
fn multi_token_chunks_are_split_over_their_gap() {
    let _serial = crate::support::exclusive();
    let url = fake_openai::spawn(FakeConfig {
        first_token_ms: 40,
        gap_ms: 40,
        tokens_per_chunk: 4,
        ..FakeConfig::default()
    });
    let cfg = config(&url, serde_json::json!({}), 12);
    let (records, summary) = run(&cfg, vec![prompt("a b c", false)], 30);
    let r = &records[0];
    // 3 chunks of 4; usage says 12: the first chunk's 4 arrive together, the next 8 are
    // spread 10 ms apart over the two 40 ms gaps.
    assert_eq!(r.output_tokens, 12);
    assert_eq!(r.token_times_s[0], r.token_times_s[3]);
    let later: Vec<f64> = r.token_times_s[3..]
        .windows(2)
        .map(|w| w[1] - w[0])
        .collect();
    for d in &later {
        assert!((d - 0.010).abs() < 0.004, "split gap {d}");
    }
    assert_eq!(summary.latency_mode, Some("proportional"));

    // The same with cumulative usage on every chunk (vLLM's continuous_usage_stats).
    let url = fake_openai::spawn(FakeConfig {
        first_token_ms: 40,
        gap_ms: 40,
        tokens_per_chunk: 3,
        continuous_usage: true,
        ..FakeConfig::default()
    });
    let mut cfg = config(&url, serde_json::json!({}), 9);
    cfg.engine = llem_config::Engine::Vllm;
    cfg.runners.insert(
        llem_config::Engine::Vllm,
        format!("external:{url}").parse().unwrap(),
    );
    let (records, summary) = run(&cfg, vec![prompt("a b c", false)], 30);
    assert_eq!(records[0].output_tokens, 9);
    assert_eq!(summary.latency_mode, Some("proportional"));
}

#[test]
fn without_usage_the_client_counts_chunks_and_warns() {
    let _serial = crate::support::exclusive();
    let url = fake_openai::spawn(FakeConfig {
        first_token_ms: 10,
        gap_ms: 5,
        usage: false,
        ..FakeConfig::default()
    });
    let cfg = config(&url, serde_json::json!({}), 7);
    let (records, summary) = run(&cfg, vec![prompt("x", false)], 30);
    assert_eq!(records[0].output_tokens, 7);
    assert_eq!(records[0].input_tokens, 0);
    assert_eq!(summary.traffic.unwrap().token_count_source, "client");
    assert!(
        summary
            .warnings
            .iter()
            .any(|w| w.contains("no token usage"))
    );
}

#[test]
fn failures_stalls_and_error_chunks_are_recorded_per_request() {
    let _serial = crate::support::exclusive();
    let url = fake_openai::spawn(FakeConfig {
        first_token_ms: 10,
        gap_ms: 10,
        ..FakeConfig::default()
    });
    let cfg = config(&url, serde_json::json!({}), 6);
    let t = Instant::now();
    let (records, summary) = run(
        &cfg,
        vec![
            prompt("ok", false),
            prompt("FAIL", false),
            prompt("STALL", false),
            prompt("ERRCHUNK", false),
        ],
        1,
    );
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "a stalled stream held the run"
    );
    assert!(records[0].success);
    assert!(
        records[1].error.as_deref().unwrap().contains("HTTP 500"),
        "{:?}",
        records[1].error
    );
    assert!(
        records[2].error.as_deref().unwrap().contains("stalled"),
        "{:?}",
        records[2].error
    );
    assert!(
        records[3]
            .error
            .as_deref()
            .unwrap()
            .contains("server error"),
        "{:?}",
        records[3].error
    );
    assert_eq!(summary.traffic.unwrap().requests_failed, 3);
}

#[test]
fn a_page_or_an_empty_stream_is_a_failed_request_not_a_success() {
    let _serial = crate::support::exclusive();
    let url = fake_openai::spawn(FakeConfig::default());
    let cfg = config(&url, serde_json::json!({}), 6);
    let (records, summary) = run(
        &cfg,
        vec![
            prompt("ok", false),
            prompt("HTML", false),
            prompt("EMPTY", false),
        ],
        1,
    );
    assert!(records[0].success && records[0].output_tokens > 0);
    let html = records[1].error.as_deref().unwrap_or_default();
    assert!(
        !records[1].success
            && html.contains("content-type text/html")
            && html.contains("Please log in"),
        "{:?}",
        records[1]
    );
    assert!(
        !records[2].success
            && records[2]
                .error
                .as_deref()
                .unwrap_or_default()
                .contains("without a single event"),
        "{:?}",
        records[2]
    );
    assert_eq!(summary.traffic.unwrap().requests_failed, 2);
}

#[test]
fn every_misbehaviour_of_a_server_is_a_failed_request_with_its_reason() {
    let _serial = crate::support::exclusive();
    let url = fake_openai::spawn(FakeConfig::default());
    let cfg = config(&url, serde_json::json!({}), 6);
    let modes = [
        "RATELIMIT",
        "BROKEN",
        "BADSSE",
        "BADUSAGE",
        "HUGE",
        "ECHOAUTH",
    ];
    let mut prompts = vec![prompt("ok", false)];
    prompts.extend(modes.iter().map(|m| prompt(m, false)));
    let engine = start_with_key(&cfg, 5, Some("sk-secret-in-flight-0123456789"));
    let plan = llem_engines::registry::context_plan(&cfg, 1);
    let wl = llem_engines::registry::workload(&cfg, prompts);
    let mut sink = Sink {
        epoch: Instant::now(),
        records: Vec::new(),
        tokens: 0,
    };
    let summary = engine.open(plan).unwrap().run(&wl, &mut sink).unwrap();
    let mut records = sink.records;
    records.sort_by_key(|r| r.request_id);
    assert!(
        records[0].success && records[0].output_tokens > 0,
        "{:?}",
        records[0]
    );
    let expected = [
        "HTTP 429",
        "stream broken",
        "unreadable stream chunk",
        "unreadable stream chunk",
        "longer than 4 MiB",
        "HTTP 400",
    ];
    for ((mode, want), r) in modes.iter().zip(expected).zip(&records[1..]) {
        let err = r.error.as_deref().unwrap_or_default();
        assert!(!r.success && err.contains(want), "{mode}: {r:?}");
    }
    let echoed = records[6].error.as_deref().unwrap_or_default();
    assert!(
        echoed.contains("[REDACTED]") && !echoed.contains("sk-secret-in-flight"),
        "{echoed}"
    );
    assert_eq!(summary.traffic.unwrap().requests_failed, 6);
}

/// A server that ignores `max_tokens`, or closes its stream without `data: [DONE]`, is not
/// taken at its word: the tokens are counted as received, and the run says what happened.
#[test]
fn tokens_beyond_the_cap_and_a_stream_without_done_are_warned_about() {
    let _serial = crate::support::exclusive();
    let url = fake_openai::spawn(FakeConfig::default());
    let cfg = config(&url, serde_json::json!({}), 6);
    let prompts = vec![
        prompt("ok", false),
        prompt("OVERRUN", false),
        prompt("NODONE", false),
    ];
    let (records, summary) = run(&cfg, prompts, 5);
    assert!(records.iter().all(|r| r.success), "{records:?}");
    assert_eq!(
        records.iter().map(|r| r.output_tokens).collect::<Vec<_>>(),
        [6, 60, 6]
    );
    let w = summary.warnings.join("\n");
    assert!(
        w.contains(
            "1 of 3 requests received more tokens than their max_tokens (up to 60 against 6)"
        ),
        "{w}"
    );
    assert!(
        w.contains("1 of 3 streams ended without `data: [DONE]`"),
        "{w}"
    );
    // A well-behaved server draws neither warning.
    let (_, quiet) = run(&cfg, vec![prompt("ok", false), prompt("ok", true)], 5);
    let w = quiet.warnings.join("\n");
    assert!(!w.contains("max_tokens") && !w.contains("[DONE]"), "{w}");
}

/// A loopback port nothing listens on (bound, then released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Reads one HTTP/1.1 request (head and Content-Length body): its request line, or None at
/// the end of the connection.
fn read_request(r: &mut std::io::BufReader<std::net::TcpStream>) -> Option<String> {
    use std::io::{BufRead, Read};
    let mut first = String::new();
    r.read_line(&mut first).ok().filter(|n| *n > 0)?;
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        r.read_line(&mut line).ok().filter(|n| *n > 0)?;
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    Some(first)
}

/// Writes one keep-alive response.
fn respond(w: &mut std::net::TcpStream, status: &str, content_type: &str, body: &str) {
    use std::io::Write;
    let head = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\
         connection: keep-alive\r\n\r\n",
        body.len()
    );
    let _ = w.write_all(head.as_bytes());
    let _ = w.write_all(body.as_bytes());
    let _ = w.flush();
}

fn answer(w: &mut std::net::TcpStream, content_type: &str, body: &str) {
    respond(w, "200 OK", content_type, body);
}

/// A raw HTTP/1.1 server on loopback that answers each connection's first completion and,
/// like a server closing idle keep-alive connections, closes the connection when a second
/// one arrives on it, without answering (GETs, the readiness probes, are always answered).
/// Returns its base URL and the count of completions answered.
fn server_closing_reused_connections() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::BufReader;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let answered = std::sync::Arc::new(AtomicUsize::new(0));
    let count = answered.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(64) {
            let Ok(conn) = conn else { continue };
            let count = count.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(conn.try_clone().unwrap());
                let mut w = conn;
                let mut completions = 0;
                while let Some(line) = read_request(&mut r) {
                    if line.starts_with("GET") {
                        // Probes get a connection of their own, closed after the answer (the
                        // client sees that while it is idle), so the pool holds only
                        // connections that served a completion.
                        if line.starts_with("GET /v1/models") {
                            answer(
                                &mut w,
                                "application/json",
                                r#"{"data":[{"id":"fake-model"}]}"#,
                            );
                        } else if line.starts_with("GET /metrics") {
                            // No metrics: a scraper would take the pooled connections.
                            respond(&mut w, "404 Not Found", "text/plain", "");
                        } else {
                            answer(&mut w, "application/json", "{}");
                        }
                        break;
                    } else if completions == 0 {
                        completions += 1;
                        // Slow enough that requests sent together each hold a connection.
                        std::thread::sleep(Duration::from_millis(200));
                        answer(
                            &mut w,
                            "text/event-stream",
                            "data: {\"choices\":[{\"index\":0,\"text\":\"tok \",\"finish_reason\":\"length\"}]}\n\n\
                             data: {\"choices\":[],\"usage\":{\"prompt_tokens\":1,\"completion_tokens\":1}}\n\n\
                             data: [DONE]\n\n",
                        );
                        count.fetch_add(1, Ordering::SeqCst);
                    } else {
                        // Read and dropped with the connection: it never reached a handler.
                        count.fetch_add(1000, Ordering::SeqCst);
                        break;
                    }
                }
                let _ = w.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    (url, answered)
}

/// A request sent on a pooled keep-alive connection that the server closes as it arrives is
/// sent again once, on a new connection, not failed; even when the other pooled connections
/// were closed by the server too (so a retry through the pool would fail again).
#[test]
fn a_request_on_a_connection_the_server_closed_is_retried_on_a_new_one() {
    let _serial = crate::support::exclusive();
    let (url, answered) = server_closing_reused_connections();
    // Three requests at once open three connections, which go back to the pool; each later
    // request takes one of them, whose next completion the server drops.
    let cfg = config(&url, serde_json::json!({"max_concurrency": 3}), 1);
    let engine = start(&cfg, 5);
    let plan = llem_engines::registry::context_plan(&cfg, 1);
    let mut session = engine.open(plan).unwrap();
    for (round, n) in [3, 1, 1].into_iter().enumerate() {
        let prompts = (0..n).map(|_| prompt("ok", false)).collect();
        let wl = llem_engines::registry::workload(&cfg, prompts);
        let mut sink = Sink {
            epoch: Instant::now(),
            records: Vec::new(),
            tokens: 0,
        };
        session.run(&wl, &mut sink).unwrap();
        assert_eq!(sink.records.len(), n);
        for r in &sink.records {
            assert!(r.success && r.output_tokens == 1, "round {round}: {r:?}");
        }
    }
    // Thousands count the requests dropped on a reused connection, units those answered.
    let counted = answered.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(counted % 1000, 5, "{counted}");
    assert!(counted / 1000 >= 2, "the scenario happened: {counted}");
}

#[test]
fn open_loop_schedules_are_kept_without_drift_under_load() {
    let _serial = crate::support::exclusive();
    let url = fake_openai::spawn(FakeConfig {
        first_token_ms: 20,
        gap_ms: 10,
        ..FakeConfig::default()
    });
    // 200 requests at 80/s, each streaming for ~0.3 s: ~25 in flight all the time.
    let cfg = config(
        &url,
        serde_json::json!({"arrival": "constant", "rate_qps": 80.0, "n_requests": 200}),
        30,
    );
    let (records, summary) = run(
        &cfg,
        (0..10).map(|i| prompt(&format!("q{i}"), false)).collect(),
        30,
    );
    assert_eq!(records.len(), 200);
    let first = records[0].scheduled_s.unwrap();
    for r in &records {
        let sched = r.scheduled_s.unwrap();
        // Absolute targets: request i is due at i / 80 s after the first, whatever happened
        // before it.
        let due = first + f64::from(r.request_id) / 80.0;
        assert!(
            (sched - due).abs() < 1e-6,
            "request {} scheduled at {sched}, due {due}",
            r.request_id
        );
        let lag = r.submit_s - sched;
        assert!(
            (-0.001..0.025).contains(&lag),
            "request {} sent {lag} s late",
            r.request_id
        );
        assert!(r.success, "{:?}", r.error);
    }
    let t = summary.traffic.unwrap();
    assert!(
        (t.achieved_rate_qps.unwrap() - 80.0).abs() < 2.0,
        "{:?}",
        t.achieved_rate_qps
    );
}

#[test]
fn poisson_dispatch_times_are_exponential_and_concurrency_is_capped() {
    let _serial = crate::support::exclusive();
    let url = fake_openai::spawn(FakeConfig {
        first_token_ms: 5,
        gap_ms: 5,
        ..FakeConfig::default()
    });
    let cfg = config(
        &url,
        serde_json::json!({"arrival": "poisson", "rate_qps": 100.0, "n_requests": 300, "seed": 7}),
        4,
    );
    let (records, _) = run(&cfg, vec![prompt("z", false)], 30);
    let mut sent: Vec<f64> = records.iter().map(|r| r.submit_s).collect();
    sent.sort_by(f64::total_cmp);
    let mut gaps: Vec<f64> = sent.windows(2).map(|w| w[1] - w[0]).collect();
    gaps.sort_by(f64::total_cmp);
    let n = gaps.len() as f64;
    let rate = 1.0 / (gaps.iter().sum::<f64>() / n);
    // Kolmogorov-Smirnov against the exponential with the fitted rate, on what was actually
    // sent (timer granularity included); alpha = 0.01.
    let d = gaps
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let cdf = 1.0 - (-rate * x).exp();
            (cdf - i as f64 / n)
                .abs()
                .max(((i + 1) as f64 / n - cdf).abs())
        })
        .fold(0.0, f64::max);
    assert!(d < 1.628 / n.sqrt(), "KS {d} at rate {rate}");
    assert!((rate - 100.0).abs() < 20.0, "rate {rate}");

    // Closed loop: never more than 3 in flight.
    let cfg = config(
        &url,
        serde_json::json!({"max_concurrency": 3, "n_requests": 30}),
        6,
    );
    let (records, _) = run(&cfg, vec![prompt("z", false)], 30);
    let mut events: Vec<(f64, i32)> = records
        .iter()
        .flat_map(|r| [(r.submit_s, 1), (r.end_s, -1)])
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut now = 0;
    let peak = events
        .iter()
        .map(|e| {
            now += e.1;
            now
        })
        .max()
        .unwrap();
    assert_eq!(peak, 3);
}

#[test]
fn a_server_that_never_becomes_healthy_fails_with_its_log() {
    let _serial = crate::support::exclusive();
    let dir = tempfile::tempdir().unwrap();
    // A local "server" that prints and exits: vLLM's CLI is not installed here, so start a
    // llama.cpp server config whose binary is a script that dies at once.
    let script = dir.path().join("llama-server");
    std::fs::write(
        &script,
        "#!/bin/sh\necho 'error: model file is corrupt' >&2\nexit 7\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cfg: ExperimentConfig = serde_json::from_value(serde_json::json!({
        "model": "m.gguf", "engine": "llamacpp", "runners": {"llamacpp": "local"}
    }))
    .unwrap();
    let mut opts = ServeOptions::new(dir.path().to_path_buf());
    opts.llama_server = Some(script);
    let t = Instant::now();
    let err = ServerEngine::start(
        &cfg,
        Some(dir.path().join("m.gguf")),
        dir.path().join("server.log"),
        opts,
    )
    .err()
    .expect("a dead server must not start");
    let msg = err.to_string();
    assert!(
        msg.contains("exited") && msg.contains("model file is corrupt"),
        "{msg}"
    );
    assert!(t.elapsed() < Duration::from_secs(10));
}

/// An external URL where nothing listens fails the start in seconds, naming the URL (its
/// credentials redacted) and the reason, instead of waiting out the 20-minute ready timeout.
#[test]
fn an_external_url_that_refuses_connections_fails_in_seconds() {
    let _serial = crate::support::exclusive();
    let port = free_port();
    let cfg = config(
        &format!("http://user:pa55word@127.0.0.1:{port}"),
        serde_json::json!({}),
        4,
    );
    let t = Instant::now();
    let mut opts = ServeOptions::new(std::env::temp_dir());
    opts.stall_timeout = Duration::from_secs(5);
    let err = ServerEngine::start(&cfg, None, std::env::temp_dir().join("x.log"), opts)
        .err()
        .expect("nothing listens there")
        .to_string();
    let waited = t.elapsed();
    assert!(
        waited >= llem_engines::serving::EXTERNAL_UNREACHABLE_GRACE,
        "a restart's grace first: {waited:?}"
    );
    assert!(waited < Duration::from_secs(60), "{waited:?}: {err}");
    assert!(
        err.contains(&format!(
            "nothing answers at http://user:[REDACTED]@127.0.0.1:{port}"
        )),
        "{err}"
    );
    assert!(err.to_lowercase().contains("refused"), "{err}");
    assert!(!err.contains("pa55word"), "{err}");
}

/// A server that is starting is waited for: its port opens after a moment, then it answers
/// 503 while it loads (longer than the grace for refused connections), then it is healthy.
#[test]
fn an_external_server_that_is_starting_is_waited_for() {
    let _serial = crate::support::exclusive();
    let port = free_port();
    let t0 = Instant::now();
    let loading = llem_engines::serving::EXTERNAL_UNREACHABLE_GRACE + Duration::from_secs(3);
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(2));
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
        for conn in listener.incoming().take(200) {
            let Ok(conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut r = std::io::BufReader::new(conn.try_clone().unwrap());
                let mut w = conn;
                while let Some(line) = read_request(&mut r) {
                    if t0.elapsed() < loading {
                        respond(
                            &mut w,
                            "503 Service Unavailable",
                            "application/json",
                            r#"{"error":"loading model"}"#,
                        );
                    } else if line.starts_with("GET /v1/models") {
                        answer(
                            &mut w,
                            "application/json",
                            r#"{"data":[{"id":"fake-model"}]}"#,
                        );
                    } else {
                        answer(&mut w, "application/json", "{}");
                    }
                }
            });
        }
    });
    let cfg = config(
        &format!("http://127.0.0.1:{port}"),
        serde_json::json!({}),
        4,
    );
    let engine = start(&cfg, 5);
    assert!(t0.elapsed() >= loading, "{:?}", t0.elapsed());
    drop(engine);
}

#[test]
fn an_api_key_is_sent_and_a_wrong_one_fails_every_request() {
    let _serial = crate::support::exclusive();
    let url = fake_openai::spawn(FakeConfig {
        first_token_ms: 5,
        gap_ms: 5,
        api_key: Some("sk-test-123".into()),
        ..FakeConfig::default()
    });
    let cfg = config(&url, serde_json::json!({}), 3);
    let wl = llem_engines::registry::workload(&cfg, vec![prompt("k", false)]);
    let plan = llem_engines::registry::context_plan(&cfg, 1);
    for (key, ok) in [
        (Some("sk-test-123"), true),
        (Some("wrong"), false),
        (None, false),
    ] {
        let engine = start_with_key(&cfg, 30, key);
        let mut sink = Sink {
            epoch: Instant::now(),
            records: Vec::new(),
            tokens: 0,
        };
        engine.open(plan).unwrap().run(&wl, &mut sink).unwrap();
        let r = &sink.records[0];
        assert_eq!(r.success, ok, "key {key:?}: {:?}", r.error);
        if !ok {
            assert!(r.error.as_deref().unwrap().contains("401"));
        }
        // The key appears nowhere in what is recorded.
        assert!(!format!("{r:?}").contains("sk-test-123"));
    }
}

/// A Python stand-in for `llama-server`: healthy, streams two chunks of a request, then the
/// whole process dies (an engine crash mid-run).
const CRASHING_SERVER: &str = r#"#!/usr/bin/env python3
import http.server, json, os, sys, time
port = int(sys.argv[sys.argv.index("--port") + 1])
NL = chr(10)
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        sys.stderr.write("fake-server: " + (a[0] % a[1:]) + NL); sys.stderr.flush()
    def do_GET(self):
        body = b'{"status":"ok"}' if self.path == "/health" else b'{"data":[{"id":"m"}]}'
        if self.path == "/metrics":
            body = ("llamacpp:requests_processing 1" + NL).encode()
        if self.path == "/slots":
            body = b'[{"id":0}]'
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path.startswith("/slots/"):
            body = b'{"id_slot":0,"n_erased":0}'
            self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
            return
        self.send_response(200); self.send_header("Content-Type", "text/event-stream"); self.end_headers()
        for _ in range(2):
            self.wfile.write(('data: {"choices":[{"text":"a","index":0}]}' + NL + NL).encode()); self.wfile.flush(); time.sleep(0.1)
        sys.stderr.write("fake-server: GGML_ASSERT failed, aborting" + NL); sys.stderr.flush()
        os._exit(134)
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"#;

#[test]
fn a_server_that_dies_mid_run_fails_the_run_with_its_log() {
    let _serial = crate::support::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("llama-server");
    std::fs::write(&script, CRASHING_SERVER).unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let cfg: ExperimentConfig = serde_json::from_value(serde_json::json!({
        "model": "m.gguf", "engine": "llamacpp", "runners": {"llamacpp": "local"},
        "max_output_tokens": 50
    }))
    .unwrap();
    let mut opts = ServeOptions::new(dir.path().to_path_buf());
    opts.llama_server = Some(script);
    let log = dir.path().join("server.log");
    let engine = ServerEngine::start(&cfg, Some(dir.path().join("m.gguf")), log, opts).unwrap();
    let pid = engine.server_pid().unwrap();
    let wl =
        llem_engines::registry::workload(&cfg, vec![prompt("boom", false), prompt("boom", false)]);
    let plan = llem_engines::registry::context_plan(&cfg, 1);
    let mut sink = Sink {
        epoch: Instant::now(),
        records: Vec::new(),
        tokens: 0,
    };
    let t = Instant::now();
    let err = engine
        .open(plan)
        .unwrap()
        .run(&wl, &mut sink)
        .expect_err("the run must fail");
    let msg = err.to_string();
    assert!(
        msg.contains("exited") && msg.contains("GGML_ASSERT"),
        "{msg}"
    );
    assert!(t.elapsed() < Duration::from_secs(10));
    drop(engine);
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists() || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            stat.contains(") Z ")
        }
    );
}

/// A server that was asked for a LoRA adapter but does not list it would serve the base
/// model under the adapter's name: the load fails, before any measured request.
#[test]
fn a_server_that_does_not_list_the_lora_adapter_fails_the_load() {
    let _serial = crate::support::exclusive();
    let url = fake_openai::spawn(FakeConfig::default());
    let dir = tempfile::tempdir().unwrap();
    // vLLM names its adapter in /v1/models; this server lists only its base model. (The plan
    // refuses lora: on an external server; the engine checks all the same.)
    let cfg: ExperimentConfig = serde_json::from_value(serde_json::json!({
        "model": "fake-model", "engine": "vllm",
        "runners": {"vllm": format!("external:{url}")},
        "lora": {"adapter_path": dir.path().display().to_string()},
    }))
    .unwrap();
    let opts = ServeOptions::new(dir.path().to_path_buf());
    let err = ServerEngine::start(&cfg, None, dir.path().join("server.log"), opts)
        .err()
        .expect("an unlisted adapter must fail the load");
    let msg = err.to_string();
    assert!(msg.contains("does not list the LoRA adapter"), "{msg}");
}

/// Every flag llem may pass to `vllm serve` is one the pinned vLLM's own CLI lists
/// (`vllm serve --help=all` from the engines venv of `scripts/engines-env.sh`): a flag vLLM
/// renames or drops fails here, not in a user's overnight study.
#[test]
fn every_vllm_flag_llem_passes_is_one_the_live_cli_accepts() {
    let vllm = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../target/pyenv-engines/bin/vllm");
    assert!(
        vllm.is_file(),
        "no vLLM at {}: run scripts/engines-env.sh (make test does)",
        vllm.display()
    );
    let o = std::process::Command::new(&vllm)
        .args(["serve", "--help=all"])
        .env("HF_HUB_OFFLINE", "1")
        .env("VLLM_NO_USAGE_STATS", "1")
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "vllm serve --help=all failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let listed: std::collections::HashSet<&str> = help
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| w.starts_with("--"))
        .collect();
    assert!(listed.len() > 100, "an unexpected help text:\n{help}");
    // The version the table is stamped with is the one the test ran.
    let v = std::process::Command::new(&vllm)
        .arg("--version")
        .env("VLLM_NO_USAGE_STATS", "1")
        .output()
        .unwrap();
    let installed = String::from_utf8_lossy(&v.stdout).trim().to_string();
    assert_eq!(
        installed.split('+').next(),
        llem_engines::registry::flags_version(llem_config::Engine::Vllm),
        "vllm --version said {installed:?}"
    );
    assert_llem_flags_are_listed(
        llem_config::Engine::Vllm,
        20,
        &listed,
        "this vllm serve does not have",
    );
}

#[test]
fn every_llama_server_flag_llem_passes_is_one_the_live_cli_accepts() {
    let explicit = std::env::var_os("LLEM_LLAMA_SERVER").map(std::path::PathBuf::from);
    let server = llem_engines::serving::find_llama_server(explicit.as_ref())
        .expect("no llama-server: run scripts/build-llama-server.sh or set LLEM_LLAMA_SERVER");
    let o = std::process::Command::new(&server)
        .arg("--help")
        .output()
        .unwrap();
    let help = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "llama-server --help failed:\n{help}");
    let listed: std::collections::HashSet<&str> = help
        .split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| w.starts_with('-'))
        .collect();
    assert!(listed.len() > 100, "an unexpected help text:\n{help}");
    assert_llem_flags_are_listed(
        llem_config::Engine::LlamaCpp,
        15,
        &listed,
        "this llama-server does not have",
    );
}

/// Every flag llem may pass to `sglang.launch_server` is one the pinned SGLang's own argument
/// parser defines: the parser is built from the wheel (`scripts/engines-env.sh` puts it in
/// `target/pyenv-engines/sglang-cli`, without SGLang's GPU dependencies) and asked for its
/// option strings. The server itself needs a GPU and is never launched here.
#[test]
fn every_sglang_flag_llem_passes_is_one_its_parser_defines() {
    let root =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv-engines");
    let python = root.join("bin/python");
    let cli = root.join("sglang-cli");
    assert!(
        python.is_file() && cli.is_dir(),
        "no SGLang parser at {}: run scripts/engines-env.sh (make test does)",
        cli.display()
    );
    let o = std::process::Command::new(&python)
        .args([
            "-c",
            "import argparse, json\n\
             from importlib.metadata import version\n\
             from sglang.srt.server_args import ServerArgs\n\
             p = argparse.ArgumentParser()\n\
             ServerArgs.add_cli_args(p)\n\
             print(json.dumps({'version': version('sglang'), 'flags': sorted(p._option_string_actions)}))",
        ])
        .env("PYTHONPATH", &cli)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "building SGLang's parser failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["version"].as_str(),
        llem_engines::registry::flags_version(llem_config::Engine::Sglang)
    );
    let listed: std::collections::HashSet<&str> = v["flags"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert!(listed.len() > 100, "{v}");
    assert_llem_flags_are_listed(
        llem_config::Engine::Sglang,
        25,
        &listed,
        "SGLang's parser does not define",
    );
}

/// Every flag llem may pass to TGI's `text-generation-launcher` is a flag of its `Args` at the
/// pinned tag, the default image's. The launcher is a Rust binary shipped only in that image,
/// so the list is taken from its source at the tag (`scripts/tgi-launcher-flags.py`) and kept
/// in tests/reference/.
#[test]
fn every_tgi_flag_llem_passes_is_one_its_pinned_launcher_defines() {
    let reference = include_str!("reference/tgi-launcher-flags.txt");
    let tag = reference
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# text-generation-launcher v"))
        .and_then(|l| l.split(':').next());
    assert_eq!(
        tag,
        llem_engines::registry::flags_version(llem_config::Engine::Tgi),
        "the reference list is of another TGI than the table's"
    );
    let listed: std::collections::HashSet<&str> =
        reference.lines().filter(|l| l.starts_with("--")).collect();
    assert!(listed.len() > 40);
    assert_llem_flags_are_listed(
        llem_config::Engine::Tgi,
        15,
        &listed,
        "TGI's launcher does not define",
    );
}

/// Every flag llem may pass to `engine`'s server (more than `at_least`: the table is not
/// empty by mistake) is in `listed`, the flags `what` defines.
fn assert_llem_flags_are_listed(
    engine: llem_config::Engine,
    at_least: usize,
    listed: &std::collections::HashSet<&str>,
    what: &str,
) {
    let ours = llem_engines::registry::cli_flags(engine);
    assert!(ours.len() > at_least, "{ours:?}");
    let missing: Vec<&str> = ours
        .iter()
        .map(String::as_str)
        .filter(|f| !listed.contains(f))
        .collect();
    assert!(
        missing.is_empty(),
        "flags llem passes that {what}: {missing:?}"
    );
}
