//! Trace replay on a real `llama-server` (scripts/build-llama-server.sh) serving SmolLM2: a
//! small trace in each published layout (Azure, BurstGPT, Mooncake) and one with its columns
//! named, written here byte for byte in the published headers, replayed by `llem run`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::Path;

use llem_results::manifest::{CellStatus, Manifest};
use llem_results::{ExperimentResult, RequestRecord, read_requests, read_timeline};

use crate::common;

/// One trace of the test: its file, the `trace:` block replaying it, and what each replayed
/// request must be (arrival s after scaling, input tokens, output tokens, prefix tokens it
/// shares with an earlier request).
struct Case {
    name: &'static str,
    file: &'static str,
    text: &'static str,
    trace: &'static str,
    want: &'static [(f64, u32, u32, u32)],
    skipped: (u32, u32),
}

const CASES: &[Case] = &[
    Case {
        name: "azure",
        file: "AzureLLMInferenceTrace_conv.csv",
        text: "TIMESTAMP,ContextTokens,GeneratedTokens\n\
               2023-11-16 18:15:46.6805900,120,6\n\
               2023-11-16 18:15:47.1805900,300,8\n\
               2023-11-16 18:15:47.2305900,64,5\n\
               2023-11-16 18:15:50.6805900,410,7\n",
        trace: "{path: AzureLLMInferenceTrace_conv.csv, format: azure, time_scale: 0.5}",
        want: &[
            (0.0, 120, 6, 0),
            (0.25, 300, 8, 0),
            (0.275, 64, 5, 0),
            (2.0, 410, 7, 0),
        ],
        skipped: (0, 0),
    },
    Case {
        name: "burstgpt",
        file: "BurstGPT_1.csv",
        text: "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n\
               3,ChatGPT,80,6,86,Conversation log\n\
               4,GPT-4,200,9,209,Conversation log\n\
               4,ChatGPT,150,5,155,Conversation log\n\
               5,ChatGPT,60,0,60,Conversation log\n\
               6,ChatGPT,220,7,227,API log\n",
        trace: "{path: BurstGPT_1.csv, format: burstgpt, model: ChatGPT}",
        want: &[(0.0, 80, 6, 0), (1.0, 150, 5, 0), (3.0, 220, 7, 0)],
        skipped: (1, 1),
    },
    Case {
        name: "mooncake",
        file: "mooncake_trace.jsonl",
        text: "{\"timestamp\": 0, \"input_length\": 1100, \"output_length\": 4, \"hash_ids\": [1, 2, 3]}\n\
               {\"timestamp\": 6000, \"input_length\": 1200, \"output_length\": 4, \"hash_ids\": [1, 2, 4]}\n\
               {\"timestamp\": 12000, \"input_length\": 300, \"output_length\": 5, \"hash_ids\": [9]}\n\
               {\"timestamp\": 18000, \"input_length\": 600, \"output_length\": 4, \"hash_ids\": [1, 5]}\n",
        trace: "{path: mooncake_trace.jsonl, format: mooncake}",
        want: &[
            (0.0, 1100, 4, 0),
            (6.0, 1200, 4, 1024),
            (12.0, 300, 5, 0),
            (18.0, 600, 4, 512),
        ],
        skipped: (0, 0),
    },
    Case {
        name: "csv",
        file: "gateway-log.csv",
        text: "arrived_ms,prompt_len,reply_len,blocks\n\
               0,600,5,7 8\n\
               5000,700,6,7 9\n\
               5100,50,4,\n",
        trace: "{path: gateway-log.csv, format: csv, columns: {timestamp: arrived_ms, \
                time_unit: ms, input_tokens: prompt_len, output_tokens: reply_len, \
                hash_ids: blocks}}",
        want: &[(0.0, 600, 5, 0), (5.0, 700, 6, 512), (5.1, 50, 4, 0)],
        skipped: (0, 0),
    },
];

/// Every trace layout replayed against llama-server, as one study of four experiments:
/// each request is sent at its trace time (scaled), with exactly the trace's prompt length
/// (as the server counted it) and reply length; the lateness is reported; requests that
/// share a trace prefix find it in the server's prompt cache; the time bins add up to the
/// window's energy, and their idle energy is the fake GPU's power over the stretches with
/// no request in flight.
#[test]
fn every_trace_layout_is_replayed_on_time_with_exact_lengths_and_shared_prefixes() {
    let _machine = common::exclusive();
    let home = tempfile::tempdir().unwrap();
    // llama-server runs on the CPU: its package draws a constant 20 W (a RAPL counter a
    // thread advances), so the idle energy of the bins is known exactly.
    let watts = 20.0;
    let (stop, writer) = common::rapl_zone(&home.path().join("powercap"), watts);
    let mut experiments = String::new();
    for c in CASES {
        std::fs::write(home.path().join(c.file), c.text).unwrap();
        experiments.push_str(&format!("  - {{traffic: {{trace: {}}}}}\n", c.trace));
    }
    let study = home.path().join("traces.yaml");
    std::fs::write(
        &study,
        format!(
            "name: traces\n\
             model: SmolLM2-135M-Instruct.Q4_1.gguf\n\
             engine: llamacpp\n\
             runners: {{llamacpp: local}}\n\
             dataset: {{source: sharegpt, n_prompts: 60}}\n\
             max_input_tokens: null\n\
             max_output_tokens: null\n\
             llamacpp: {{batch_size: 2, n_threads: 2, n_ctx: 4096}}\n\
             measurement: {{methodology: total, timeline_bin_seconds: 1}}\n\
             warmup: {{n_warmup: 1, thermal_floor_seconds: 0}}\n\
             baseline: {{enabled: false}}\n\
             study_execution: {{n_cycles: 1, experiment_gap_seconds: 0, cycle_gap_seconds: 0}}\n\
             experiments:\n{experiments}"
        ),
    )
    .unwrap();
    let out = home.path().join("results");
    let o = common::llem_in(home.path())
        .args(["run", study.to_str().unwrap(), "-q", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let max_gap_s = writer.join().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "llem run failed: {stderr}");
    let dir = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let m: Manifest =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m.experiments.len(), CASES.len());
    let mut prefix_hits = 0;
    for e in &m.experiments {
        assert_eq!(e.status, CellStatus::Completed, "{e:?}");
        let cell = dir.join(e.result_file.as_deref().unwrap());
        let cell = cell.parent().unwrap();
        let r: ExperimentResult =
            serde_json::from_slice(&std::fs::read(cell.join("result.json")).unwrap()).unwrap();
        let format = &r.traffic.as_ref().unwrap().trace.as_ref().unwrap().format;
        let case = CASES.iter().find(|c| c.name == format).unwrap();
        let mut reqs = read_requests(&cell.join("requests.parquet")).unwrap();
        reqs.sort_by_key(|q| q.request_id);
        prefix_hits += check_case(case, &r, &reqs);
        check_timeline(case, &r, &reqs, cell, watts, max_gap_s);
    }
    // The report draws each replay's bins: power with its idle part, requests in flight.
    let page = common::report_page(home.path(), &dir);
    for i in 0..CASES.len() {
        for chart in ["load-power", "load-requests"] {
            assert!(page.contains(&format!("id=\"{chart}-{i}\"")), "{chart}-{i}");
        }
    }
    assert!(page.contains("replay of mooncake_trace.jsonl"));
    // The shared prefixes of the Mooncake and column traces came from the server's cache
    // whenever it was idle when they were sent (all of them, unless this host is so slow
    // that a reply took longer than the trace's gap).
    assert!(prefix_hits >= 1, "no shared prefix was found in the cache");
}

/// Checks one replay against its trace; returns how many shared prefixes were cache hits.
fn check_case(c: &Case, r: &ExperimentResult, reqs: &[RequestRecord]) -> usize {
    let name = c.name;
    let t = r.traffic.as_ref().unwrap();
    assert_eq!(t.arrival, "trace", "{name}");
    let tr = t.trace.as_ref().unwrap();
    assert_eq!(tr.requests as usize, c.want.len(), "{name}");
    assert_eq!(
        (tr.skipped_other_model, tr.skipped_no_output),
        c.skipped,
        "{name}"
    );
    assert_eq!(
        tr.inputs_inexact,
        Some(0),
        "{name}: the server counted the prompts"
    );
    assert_eq!(tr.short_replies, 0, "{name}");
    assert!(t.dispatch_lag_p50_ms.is_some() && t.dispatch_lag_p99_ms.is_some());
    let shared: u64 = c.want.iter().map(|w| u64::from(w.3)).sum();
    assert_eq!(tr.shared_prefix_tokens, shared, "{name}");
    assert_eq!(reqs.len(), c.want.len(), "{name}");
    let t0 = reqs[0].scheduled_s.unwrap();
    let mut hits = 0;
    for (q, &(at, input, output, prefix)) in reqs.iter().zip(c.want) {
        let id = q.request_id;
        assert!(q.success, "{name} request {id}: {:?}", q.error);
        assert_eq!(q.input_tokens, input, "{name} request {id}: prompt length");
        assert_eq!(q.output_tokens, output, "{name} request {id}: reply length");
        let scheduled = q.scheduled_s.unwrap() - t0;
        assert!(
            (scheduled - at).abs() < 1e-3,
            "{name} request {id}: scheduled at {scheduled} s, the trace says {at} s"
        );
        // Sent on time or late, never early; the lateness is what the result reports.
        assert!(q.submit_s >= q.scheduled_s.unwrap() - 1e-6, "{name} {id}");
        let cached = q.cached_input_tokens.unwrap();
        assert!(cached <= input, "{name} {id}");
        let idle_at_send = reqs
            .iter()
            .filter(|o| o.request_id < id)
            .all(|o| o.end_s < q.submit_s);
        if prefix > 0 && idle_at_send {
            // The whole shared prefix, less the last prompt token the server always
            // evaluates.
            assert!(
                cached >= prefix.min(input - 1),
                "{name} request {id}: {cached} cached tokens, {prefix} shared"
            );
            hits += 1;
        }
        if prefix == 0 && idle_at_send {
            assert!(
                cached < 64,
                "{name} request {id}: {cached} cached, nothing shared"
            );
        }
    }
    let lags: Vec<f64> = reqs
        .iter()
        .map(|q| (q.submit_s - q.scheduled_s.unwrap()) * 1e3)
        .collect();
    let most = lags.iter().copied().fold(0.0, f64::max);
    assert!(t.dispatch_lag_p99_ms.unwrap() <= most + 1e-9, "{name}");
    assert_eq!(
        tr.kept_up,
        t.dispatch_lag_p99_ms.unwrap() <= tr.late_threshold_ms
    );
    hits
}

/// The time bins add up to the window's energy; their idle energy is the package's constant
/// power over the stretches of the window with no request in flight (give or take what the
/// counter's writer lagged at most, `lag_s`, at each end of a stretch).
fn check_timeline(
    c: &Case,
    r: &ExperimentResult,
    reqs: &[RequestRecord],
    cell: &Path,
    w: f64,
    lag_s: f64,
) {
    let name = c.name;
    let tl = r.timeline.as_ref().unwrap();
    let bins = read_timeline(&cell.join("timeline.parquet")).unwrap();
    assert_eq!(bins.len(), tl.bins, "{name}");
    let binned: f64 = bins.iter().map(|b| b.energy_j).sum();
    let tolerance_j = common::cut_tolerance_j(r, w, lag_s);
    assert!(
        (binned - r.total_energy_j).abs() <= tolerance_j,
        "{name}: bins {binned} J, window {} J, tolerance {tolerance_j} J",
        r.total_energy_j
    );
    let [a, b] = r.measurement_window_s.unwrap();
    let mut busy: Vec<(f64, f64)> = reqs
        .iter()
        .map(|q| (q.submit_s.max(a), q.end_s.min(b)))
        .filter(|(x, y)| y > x)
        .collect();
    busy.sort_by(|x, y| x.0.total_cmp(&y.0));
    let (mut idle_s, mut at) = (0.0, a);
    for (x, y) in busy {
        idle_s += (x - at).max(0.0);
        at = at.max(y);
    }
    idle_s += (b - at).max(0.0);
    // Each request may end one idle stretch and begin another.
    let stretches = reqs.len() + 1;
    let idle_j: f64 = bins.iter().map(|b| b.idle_energy_j).sum();
    assert!((tl.idle_energy_j - idle_j).abs() < 1e-6, "{name}");
    let slack = 0.01 * w * idle_s + 2.0 * w * (lag_s + 0.01) * stretches as f64;
    assert!(
        (idle_j - w * idle_s).abs() <= slack,
        "{name}: idle {idle_j} J, {w} W over {idle_s} s idle is {} J",
        w * idle_s
    );
    // The idle share is what the request times say, whatever this machine's speed (on a
    // fast one, Mooncake's six-second gaps between short requests leave most of it idle).
    let share = tl.idle_energy_share.unwrap();
    assert!(
        (share * r.total_energy_j - w * idle_s).abs()
            <= slack + common::cut_tolerance_j(r, w, lag_s),
        "{name}: {tl:?}, {idle_s} s idle"
    );
}

/// A trace replay is checked before anything runs: where the engine cannot replay it, where
/// the file is missing or a line is wrong (file and line named), and where a traffic field
/// would be lost.
#[test]
fn a_trace_that_cannot_be_replayed_is_refused_before_anything_runs() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    std::fs::write(
        h.join("bad.csv"),
        "TIMESTAMP,ContextTokens,GeneratedTokens\n\
         2023-11-16 18:15:46.6805900,120,6\n\
         2023-11-16 18:15:47.1805900,three hundred,8\n",
    )
    .unwrap();
    std::fs::write(
        h.join("renamed.csv"),
        "TIMESTAMP,ContextToken,GeneratedTokens\n2023-11-16 18:15:46.68,120,6\n",
    )
    .unwrap();
    // Two requests an hour apart: replayed to its end, longer than a cell may take.
    std::fs::write(
        h.join("long.csv"),
        "TIMESTAMP,ContextTokens,GeneratedTokens\n\
         2023-11-16 18:00:00.0000000,120,6\n\
         2023-11-16 19:00:00.0000000,120,6\n",
    )
    .unwrap();
    let base = "model: SmolLM2-135M-Instruct.Q4_1.gguf\nengine: llamacpp\n";
    let cases: &[(&str, &str)] = &[
        (
            "runners: {llamacpp: local}\ntraffic: {trace: {path: bad.csv, format: azure}}\n",
            "bad.csv:3: `ContextTokens` is \"three hundred\"",
        ),
        (
            "runners: {llamacpp: local}\ntraffic: {trace: {path: renamed.csv, format: azure}}\n",
            "did you mean `ContextToken`",
        ),
        (
            "runners: {llamacpp: local}\ntraffic: {trace: {path: nowhere.csv, format: azure}}\n",
            "nowhere.csv",
        ),
        (
            "traffic: {trace: {path: bad.csv, format: azure}}\n",
            "needs llama.cpp as a server",
        ),
        (
            "runners: {llamacpp: local}\n\
             traffic: {arrival: poisson, rate_qps: 2, trace: {path: bad.csv, format: azure}}\n",
            "`traffic.rate_qps` does not apply to a trace replay",
        ),
        (
            "runners: {llamacpp: local}\ntraffic: {trace: {path: bad.csv, format: csv}}\n",
            "needs `columns:`",
        ),
        (
            "runners: {llamacpp: local}\ntraffic: {trace: {path: bad.csv, format: azur}}\n",
            "azure",
        ),
        (
            "runners: {llamacpp: local}\ntraffic: {trace: {path: long.csv, format: azure}}\n\
             study_execution: {n_cycles: 2, experiment_timeout_seconds: 1800}\n",
            "lasts 3600 s (to the trace's end)",
        ),
    ];
    for (i, (extra, want)) in cases.iter().enumerate() {
        let f = h.join(format!("c{i}.yaml"));
        std::fs::write(&f, format!("{base}{extra}")).unwrap();
        let o = common::llem_in(h)
            .args(["run", f.to_str().unwrap()])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "case {i} was accepted:\n{extra}");
        assert!(
            stderr.contains(want),
            "case {i}: wanted {want:?} in:\n{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
