//! The serving client under load, for `bench/client.sh`: `R` streaming requests, at most `C`
//! in flight, against an OpenAI-compatible server (the zero-compute
//! `fake_openai_server`), through the same engine code `llem run` uses. Prints one JSON line:
//! tokens received, wall and CPU seconds of this process, tokens per CPU-second, and the
//! lateness of every token against the server's fixed schedule (first token, then one every
//! `gap_ms`): p50 and p99.
//!
//! `client_bench URL CONCURRENCY REQUESTS TOKENS GAP_MS`

use std::time::{Duration, Instant};

use llem_config::ExperimentConfig;
use llem_engines::serving::{ServeOptions, ServerEngine};
use llem_engines::workload::{Prompt, PromptInput};
use llem_engines::{Engine, RequestSink};
use llem_results::{RequestRecord, stats};

struct Sink {
    epoch: Instant,
    records: Vec<RequestRecord>,
}

impl RequestSink for Sink {
    fn now_s(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
    fn on_tokens(&mut self, _: u32, _: f64, _: u32) {}
    fn on_done(&mut self, r: RequestRecord) {
        self.records.push(r);
    }
}

fn cpu_s() -> f64 {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF);
    u.map(|u| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    })
    .unwrap_or(f64::NAN)
}

fn fail(msg: String) -> ! {
    eprintln!("client_bench: {msg}");
    std::process::exit(1)
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let [url, c, r, t, g] = a.as_slice() else {
        fail("usage: client_bench URL CONCURRENCY REQUESTS TOKENS GAP_MS".into())
    };
    let num = |s: &str| -> u32 {
        s.parse()
            .unwrap_or_else(|_| fail(format!("not a number: {s}")))
    };
    let (conc, reqs, tokens, gap_ms) = (num(c), num(r), num(t), num(g));
    let cfg: ExperimentConfig = serde_json::from_value(serde_json::json!({
        "model": "fake-model",
        "engine": "openai",
        "runners": {"openai": format!("external:{url}")},
        "max_output_tokens": tokens,
        "traffic": {"max_concurrency": conc, "n_requests": reqs},
    }))
    .unwrap_or_else(|e| fail(e.to_string()));
    let dir = std::env::temp_dir();
    let mut opts = ServeOptions::new(dir.clone());
    // The client's own cost is measured: no /metrics scraping beside it.
    opts.scrape_interval = Duration::from_secs(3600);
    let engine = ServerEngine::start(&cfg, None, dir.join("client_bench_server.log"), opts)
        .unwrap_or_else(|e| fail(e.to_string()));
    let prompt = Prompt {
        dataset_index: 0,
        input: PromptInput::Text {
            text: "bench".into(),
            chat: false,
        },
        group: None,
        reference_output: None,
        output_tokens: None,
        ignore_eos: false,
        follow_ups: Vec::new(),
    };
    let wl = llem_engines::registry::workload(&cfg, vec![prompt]);
    let plan = llem_engines::registry::context_plan(&cfg, 1);
    let mut session = engine.open(plan).unwrap_or_else(|e| fail(e.to_string()));
    let mut sink = Sink {
        epoch: Instant::now(),
        records: Vec::with_capacity(reqs as usize),
    };
    let (cpu0, t0) = (cpu_s(), Instant::now());
    session
        .run(&wl, &mut sink)
        .unwrap_or_else(|e| fail(e.to_string()));
    let (cpu1, wall) = (cpu_s(), t0.elapsed().as_secs_f64());
    let gap = f64::from(gap_ms) / 1000.0;
    let mut late: Vec<f64> = Vec::new();
    let mut ttft: Vec<f64> = Vec::new();
    let mut n_tokens = 0u64;
    let mut failed = 0;
    for r in &sink.records {
        if !r.success {
            failed += 1;
            continue;
        }
        n_tokens += u64::from(r.output_tokens);
        if let Some(t) = r.ttft_s() {
            ttft.push(t * 1000.0);
        }
        if let Some(&first) = r.token_times_s.first() {
            for (j, t) in r.token_times_s.iter().enumerate().skip(1) {
                late.push((t - (first + j as f64 * gap)) * 1e6);
            }
        }
    }
    let late = stats::sorted(late);
    let ttft = stats::sorted(ttft);
    let pct_of = |v: &[f64], p: f64| stats::percentile(v, p * 100.0).unwrap_or(f64::NAN);
    let pct = |p: f64| pct_of(&late, p);
    let cpu = cpu1 - cpu0;
    println!(
        "{}",
        serde_json::json!({
            "tool": "llem",
            "concurrency": conc,
            "requests": reqs,
            "failed": failed,
            "tokens": n_tokens,
            "wall_s": wall,
            "cpu_s": cpu,
            "tokens_per_cpu_s": n_tokens as f64 / cpu,
            "lateness_p50_us": pct(0.5),
            "lateness_p99_us": pct(0.99),
            "ttft_p50_ms": pct_of(&ttft, 0.5),
            "ttft_p99_ms": pct_of(&ttft, 0.99),
        })
    );
}
