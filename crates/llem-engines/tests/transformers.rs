//! The transformers engine: the real worker script under the Python of
//! `scripts/engines-env.sh` (CPU torch, transformers, gguf from PyPI) on the real
//! SmolLM2 GGUF from `scripts/fetch-assets.sh`. `make test` prepares both; `LLEM_PYTHON`
//! points elsewhere.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::support::prompts;

use llem_testkit::lora;

use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use llem_config::ExperimentConfig;
use llem_config::model::engines::LlamaCppConfig;
use llem_engines::llamacpp::LlamaCppEngine;
use llem_engines::transformers::{TransformersEngine, WorkerOptions};
use llem_engines::workload::{Prompt, Workload};
use llem_engines::{Engine, RequestSink, assets};
use llem_results::{FinishReason, RequestRecord};
use prompts::{batching, chat, plain, plan, synthetic, workload};

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

fn assets_dir() -> PathBuf {
    assets::assets_dir(std::env::var("LLEM_ASSETS").ok().as_deref())
}

fn model_path() -> PathBuf {
    assets::resolve_model(MODEL, &assets_dir()).unwrap_or_else(|| {
        panic!(
            "SmolLM2 is not in the asset cache {}: run scripts/fetch-assets.sh",
            assets_dir().display()
        )
    })
}

/// `LLEM_PYTHON`, else the venv `scripts/engines-env.sh` makes.
fn python() -> String {
    if let Ok(p) = std::env::var("LLEM_PYTHON")
        && !p.is_empty()
    {
        return p;
    }
    let venv =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/pyenv-engines/bin/python");
    assert!(
        venv.exists(),
        "no Python with torch and transformers: run scripts/engines-env.sh (or set \
         LLEM_PYTHON)"
    );
    venv.display().to_string()
}

fn config(extra: serde_json::Value) -> ExperimentConfig {
    let mut v = serde_json::json!({
        "model": MODEL,
        "engine": "transformers",
        "dtype": "float32",
        "decoder": {"do_sample": false, "temperature": 0.0},
    });
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    serde_json::from_value(v).unwrap()
}

fn options(dir: &tempfile::TempDir) -> WorkerOptions {
    WorkerOptions::new(python(), dir.path().join("worker.log"), assets_dir())
}

fn start(cfg: &ExperimentConfig, opts: &WorkerOptions) -> TransformersEngine {
    TransformersEngine::start(cfg, opts, &mut |_, _| {}).unwrap()
}

/// One greedy float32 engine shared by the tests that only read from it.
fn shared() -> MutexGuard<'static, TransformersEngine> {
    static ENGINE: OnceLock<(tempfile::TempDir, Mutex<TransformersEngine>)> = OnceLock::new();
    let (_, e) = ENGINE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let e = start(&config(serde_json::json!({})), &options(&dir));
        (dir, Mutex::new(e))
    });
    e.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

type Hook = Box<dyn FnMut(&TransformersEngineRef)>;

/// The worker's pid, for hooks that signal it.
struct TransformersEngineRef {
    pid: u32,
}

struct Records {
    epoch: Instant,
    done: Vec<RequestRecord>,
    tokens: u64,
    on_first_token: Option<(u32, Hook)>,
}

impl Records {
    fn new() -> Records {
        Records {
            epoch: Instant::now(),
            done: Vec::new(),
            tokens: 0,
            on_first_token: None,
        }
    }
}

impl RequestSink for Records {
    fn now_s(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
    fn on_tokens(&mut self, _: u32, _: f64, n: u32) {
        self.tokens += u64::from(n);
        if let Some((pid, mut hook)) = self.on_first_token.take() {
            hook(&TransformersEngineRef { pid });
        }
    }
    fn on_done(&mut self, r: RequestRecord) {
        self.done.push(r);
    }
}

#[test]
fn greedy_answer_matches_the_llamacpp_engine() {
    let _g = crate::support::exclusive();
    let wl = workload(chat(&["What is the capital of France?"]), 24);
    let reference = {
        let e = LlamaCppEngine::load(&model_path(), &LlamaCppConfig::default()).unwrap();
        let mut s = e.session(plan(1, 256)).unwrap();
        s.generate_ids(&wl).unwrap()
    };
    let mut e = shared();
    let ours = e
        .generate_ids(batching(1), &wl, &mut Records::new())
        .unwrap();
    let (a, b) = (&reference[0], &ours[0]);
    // Same GGUF, same vocabulary: the prompts tokenize alike, and greedy decoding agrees
    // until the two backends' arithmetic (llama.cpp's Q4_1 x Q8 dot products, torch's
    // dequantised float32) first picks a different token, if it ever does.
    let same = a
        .iter()
        .zip(b.iter())
        .take_while(|(x, y)| i64::from(**x) == **y)
        .count();
    assert!(
        same >= 6,
        "llama.cpp {a:?} vs transformers {b:?}: only {same} tokens agree"
    );
    let model = e.model_info().clone();
    assert_eq!(model.architecture.as_deref(), Some("llama"));
    assert_eq!(model.layers, Some(30));
    assert_eq!(model.kv_heads, Some(3));
    assert_eq!(model.dtype.as_deref(), Some("float32"));
    assert!(e.has_chat_template());
    assert_eq!(e.info().name, "transformers");
}

#[test]
fn a_batch_of_four_generates_the_tokens_of_batch_one() {
    let _g = crate::support::exclusive();
    let prompts = chat(&[
        "What is the capital of France?",
        "Write one sentence about the sea.",
        "List three colours.",
        "Say hello.",
        "What is 2 + 2?",
        "Name a famous scientist.",
    ]);
    let mut e = shared();
    let one = e
        .generate_ids(
            batching(1),
            &workload(prompts.clone(), 32),
            &mut Records::new(),
        )
        .unwrap();
    let mut sink = Records::new();
    let four = e
        .generate_ids(batching(4), &workload(prompts, 32), &mut sink)
        .unwrap();
    assert_eq!(one.len(), 6);
    assert!(one.iter().all(|t| !t.is_empty()));
    for (i, (a, b)) in one.iter().zip(&four).enumerate() {
        assert_eq!(a, b, "request {i}: batch 4 diverged from batch 1");
    }
    // Per-batch timing: every request of a batch starts and ends with its generate() call.
    assert_eq!(sink.done.len(), 6);
    for r in &sink.done {
        assert!(r.first_token_s.is_none() && r.token_times_s.is_empty());
        assert!(r.end_s > r.submit_s);
        assert_eq!(
            r.output_tokens as usize,
            four[r.request_id as usize].len(),
            "request {}",
            r.request_id
        );
    }
    let batch0: Vec<&RequestRecord> = sink
        .done
        .iter()
        .filter(|r| r.batch_index == Some(0))
        .collect();
    assert_eq!(batch0.len(), 4);
    assert!(batch0.iter().all(|r| r.end_s == batch0[0].end_s));
    assert_eq!(
        sink.tokens,
        sink.done
            .iter()
            .map(|r| u64::from(r.output_tokens))
            .sum::<u64>()
    );
}

#[test]
fn synthetic_prompts_run_to_their_own_limits_in_one_batch() {
    let _g = crate::support::exclusive();
    let prompts: Vec<Prompt> = [(16, 12), (24, 5), (8, 9)]
        .iter()
        .enumerate()
        .map(|(i, &(n, out))| synthetic(i as u32, n, i as u64, out))
        .collect();
    let mut e = shared();
    let mut sink = Records::new();
    let wl = workload(prompts, 64);
    let ids = e.generate_ids(batching(3), &wl, &mut sink).unwrap();
    assert_eq!(ids.iter().map(Vec::len).collect::<Vec<_>>(), vec![12, 5, 9]);
    let mut done = sink.done.clone();
    done.sort_by_key(|r| r.request_id);
    assert_eq!(
        done.iter().map(|r| r.input_tokens).collect::<Vec<_>>(),
        vec![16, 24, 8]
    );
    assert!(done.iter().all(|r| r.finish_reason == FinishReason::Length));
    // Same seeds, same prompts: a second run draws the same tokens.
    let again = e
        .generate_ids(batching(3), &wl, &mut Records::new())
        .unwrap();
    assert_eq!(ids, again);
}

#[test]
fn profiling_streams_every_token_on_the_experiment_clock() {
    let _g = crate::support::exclusive();
    let dir = tempfile::tempdir().unwrap();
    // Sampled decoding, so the decoder's settings are seen to reach generate() too.
    let cfg = config(serde_json::json!({
        "transformers": {"batch_size": 4},
        "measurement": {"latency_profiling": true},
        "decoder": {"do_sample": true, "temperature": 0.7, "top_k": 20, "top_p": 0.9,
                    "min_p": 0.05, "repetition_penalty": 1.1},
    }));
    let e = start(&cfg, &options(&dir));
    assert!(e.streams());
    let log = std::fs::read_to_string(dir.path().join("worker.log")).unwrap();
    let generate = log.lines().find(|l| l.contains("generate() gets")).unwrap();
    for kw in [
        "do_sample=True",
        "temperature=0.7",
        "top_k=20",
        "top_p=0.9",
        "min_p=0.05",
        "repetition_penalty=1.1",
    ] {
        assert!(generate.contains(kw), "{kw} missing from: {generate}");
    }
    let mut s = e.open(plan(4, 256)).unwrap();
    let mut sink = Records::new();
    let t_before = sink.now_s();
    let summary = s
        .run(
            &workload(
                chat(&["Write a long story about a dragon.", "Say hello."]),
                20,
            ),
            &mut sink,
        )
        .unwrap();
    let t_after = sink.now_s();
    assert_eq!(summary.latency_mode, Some("true_streaming"));
    assert_eq!(
        summary.num_batches, 2,
        "profiling runs one request per batch"
    );
    assert!(
        summary
            .warnings
            .iter()
            .any(|w| w.contains("batch_size 4 ran as 1")),
        "{:?}",
        summary.warnings
    );
    assert_eq!(sink.done.len(), 2);
    for r in &sink.done {
        assert_eq!(r.token_times_s.len(), r.output_tokens as usize);
        assert!(r.output_tokens > 0);
        let first = r.first_token_s.unwrap();
        // Worker times land inside the run on llem's clock.
        assert!(t_before <= r.submit_s && r.submit_s <= first, "{r:?}");
        assert!(r.token_times_s.windows(2).all(|w| w[0] <= w[1]));
        assert!(r.end_s >= *r.token_times_s.last().unwrap() && r.end_s <= t_after);
    }
    let story = sink.done.iter().find(|r| r.request_id == 0).unwrap();
    assert_eq!(story.output_tokens, 20);
    assert_eq!(story.finish_reason, FinishReason::Length);
    let m = summary.memory.unwrap();
    assert_eq!(m.source, "worker_rss");
    assert!(m.peak_mib > 100.0, "{m:?}");
}

fn long_workload() -> Workload {
    let mut wl = workload(vec![synthetic(0, 8, 1, 4000)], 4000);
    wl.max_input_tokens = None;
    wl
}

fn streaming_engine(dir: &tempfile::TempDir, silence: Duration) -> TransformersEngine {
    let cfg = config(serde_json::json!({"measurement": {"latency_profiling": true}}));
    let mut opts = options(dir);
    opts.silence_timeout = silence;
    start(&cfg, &opts)
}

fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).unwrap();
}

/// Runs a long streamed request and sends the worker `sig` at its first token; returns the
/// run's error, how long the run took, and the worker's pid.
fn signalled_run(silence: Duration, sig: nix::sys::signal::Signal) -> (String, Duration, u32) {
    let dir = tempfile::tempdir().unwrap();
    let e = streaming_engine(&dir, silence);
    let pid = e.worker_pid().unwrap();
    let mut s = e.open(plan(1, 4096)).unwrap();
    let mut sink = Records::new();
    sink.on_first_token = Some((pid, Box::new(move |w| signal(w.pid, sig))));
    let t = Instant::now();
    let err = s.run(&long_workload(), &mut sink).unwrap_err().to_string();
    (err, t.elapsed(), pid)
}

#[test]
fn a_killed_worker_fails_the_run_with_its_log_tail() {
    let _g = crate::support::exclusive();
    let (err, took, _) = signalled_run(Duration::from_secs(300), nix::sys::signal::Signal::SIGKILL);
    assert!(err.contains("killed by SIGKILL"), "{err}");
    assert!(err.contains("worker.log"), "{err}");
    assert!(err.contains("llem-worker: generate batch 0"), "{err}");
    assert!(took < Duration::from_secs(60));
}

#[test]
fn a_hung_worker_is_killed_after_the_silence_timeout() {
    let _g = crate::support::exclusive();
    // SIGSTOP freezes it mid-generation: alive, silent.
    let (err, took, pid) = signalled_run(Duration::from_secs(3), nix::sys::signal::Signal::SIGSTOP);
    assert!(err.contains("sent nothing for 3 s (hung)"), "{err}");
    assert!(took < Duration::from_secs(30));
    // It was killed and reaped, not left stopped.
    let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), None);
    assert!(gone.is_err(), "worker {pid} still exists");
}

#[test]
fn a_keyword_transformers_rejects_is_named_before_the_run() {
    let _g = crate::support::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(serde_json::json!({"passthrough_kwargs": {"frobnicate_level": 3}}));
    let err = TransformersEngine::start(&cfg, &options(&dir), &mut |_, _| {})
        .err()
        .expect("an unknown generate() keyword must fail the load")
        .to_string();
    assert!(
        err.contains("rejected `passthrough_kwargs.frobnicate_level`"),
        "{err}"
    );
}

#[test]
fn a_python_without_torch_gets_the_pip_command() {
    let _g = crate::support::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let venv = dir.path().join("bare");
    let ok = std::process::Command::new("python3")
        .args(["-m", "venv", "--without-pip"])
        .arg(&venv)
        .status()
        .unwrap();
    assert!(ok.success());
    let py = venv.join("bin/python").display().to_string();
    let opts = WorkerOptions::new(py.clone(), dir.path().join("worker.log"), assets_dir());
    let err = TransformersEngine::start(&config(serde_json::json!({})), &opts, &mut |_, _| {})
        .err()
        .expect("no torch, no engine")
        .to_string();
    assert!(err.contains("cannot import torch"), "{err}");
    assert!(
        err.contains(&format!("{py} -m pip install torch transformers")),
        "{err}"
    );
}

#[test]
fn tensor_parallel_over_three_ranks_decodes_like_one_process() {
    let _g = crate::support::exclusive();
    let dir = tempfile::tempdir().unwrap();
    // SmolLM2's 9 heads, 3 KV heads and 1536-wide FFN split three ways; torchrun with gloo
    // stands in for NCCL on this CPU-only machine.
    let cfg = config(serde_json::json!({"transformers": {"tp_plan": "auto", "tp_size": 3}}));
    let mut tp = start(&cfg, &options(&dir));
    let wl = workload(chat(&["What is the capital of France?", "Say hello."]), 12);
    let split = tp
        .generate_ids(batching(2), &wl, &mut Records::new())
        .unwrap();
    drop(tp);
    let log = std::fs::read_to_string(dir.path().join("worker.log")).unwrap();
    assert!(log.contains("llem-worker rank 2: loaded"), "{log}");
    let whole = shared()
        .generate_ids(batching(2), &wl, &mut Records::new())
        .unwrap();
    for (i, (a, b)) in whole.iter().zip(&split).enumerate() {
        let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
        assert!(same >= 6, "request {i}: {a:?} vs tensor parallel {b:?}");
    }
}

#[test]
fn every_configured_setting_reaches_from_pretrained_and_generate() {
    let _g = crate::support::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(serde_json::json!({
        "transformers": {
            "batch_size": 2, "attn_implementation": "eager", "use_cache": true,
            "num_beams": 2, "early_stopping": true, "length_penalty": 1.2,
            "no_repeat_ngram_size": 1, "device_map": "cpu", "max_memory": {"cpu": "8GiB"},
            "low_cpu_mem_usage": true, "allow_tf32": true,
        },
        "passthrough_kwargs": {"output_scores": false,
                               "from_pretrained": {"use_safetensors": false}},
    }));
    let mut e = start(&cfg, &options(&dir));
    let wl = workload(
        chat(&["Write a long story about a dragon.", "List ten animals."]),
        24,
    );
    let ids = e
        .generate_ids(batching(2), &wl, &mut Records::new())
        .unwrap();
    drop(e);
    // no_repeat_ngram_size 1 took effect: no token twice in one answer.
    for out in &ids {
        let mut seen = std::collections::BTreeSet::new();
        assert!(out.iter().all(|t| seen.insert(*t)), "{out:?}");
    }
    let log = std::fs::read_to_string(dir.path().join("worker.log")).unwrap();
    let loading = log.lines().find(|l| l.contains("loading")).unwrap();
    for kw in [
        "attn_implementation='eager'",
        "device_map='cpu'",
        "max_memory={'cpu': '8GiB'}",
        "low_cpu_mem_usage=True",
        "use_safetensors=False",
        "dtype=torch.float32",
    ] {
        assert!(loading.contains(kw), "{kw} missing from: {loading}");
    }
    let generate = log.lines().find(|l| l.contains("generate() gets")).unwrap();
    for kw in [
        "num_beams=2",
        "early_stopping=True",
        "length_penalty=1.2",
        "no_repeat_ngram_size=1",
        "use_cache=True",
        "do_sample=False",
        "output_scores=False",
    ] {
        assert!(generate.contains(kw), "{kw} missing from: {generate}");
    }
}

#[test]
fn a_setting_that_cannot_work_here_is_refused_naming_its_field() {
    let _g = crate::support::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let cfg =
        config(serde_json::json!({"transformers": {"cache_implementation": "offloaded_static"}}));
    let err = TransformersEngine::start(&cfg, &options(&dir), &mut |_, _| {})
        .err()
        .expect("an offloaded cache needs a GPU")
        .to_string();
    assert!(
        err.contains("rejected `transformers.cache_implementation`"),
        "{err}"
    );
}

#[test]
fn an_empty_prompt_fails_alone_and_its_batch_goes_on() {
    let _g = crate::support::exclusive();
    let mut prompts = chat(&["Say hello."]);
    prompts.push(plain(1, ""));
    let mut sink = Records::new();
    let ids = shared()
        .generate_ids(batching(2), &workload(prompts, 8), &mut sink)
        .unwrap();
    assert!(!ids[0].is_empty());
    let failed = sink.done.iter().find(|r| r.request_id == 1).unwrap();
    assert!(!failed.success);
    assert_eq!(failed.finish_reason, FinishReason::Error);
    assert!(failed.error.as_deref().unwrap().contains("empty prompt"));
    assert!(
        sink.done
            .iter()
            .find(|r| r.request_id == 0)
            .unwrap()
            .success
    );
}

#[test]
fn dynamic_batches_follow_the_prompt_token_budget() {
    let _g = crate::support::exclusive();
    // Synthetic prompts of 40, 10, 30 and 20 tokens under a 50-token budget, sorted first:
    // [10, 20] (30 would make 60), [30], [40].
    let prompts: Vec<Prompt> = [40u32, 10, 30, 20]
        .iter()
        .enumerate()
        .map(|(i, &n)| synthetic(i as u32, n, i as u64, 3))
        .collect();
    let wl = workload(prompts, 3);
    let mut plan = plan(4, 256);
    plan.batching.strategy = llem_config::BatchingStrategy::SortedDynamic;
    plan.batching.max_tokens_per_batch = Some(50);
    let e = shared();
    let mut s = e.open(plan).unwrap();
    let mut sink = Records::new();
    let summary = s.run(&wl, &mut sink).unwrap();
    assert_eq!(summary.num_batches, 3);
    let batch_of = |id: u32| {
        sink.done
            .iter()
            .find(|r| r.request_id == id)
            .unwrap()
            .batch_index
    };
    assert_eq!(batch_of(1), batch_of(3));
    assert_eq!(batch_of(1), Some(0));
    assert_eq!(batch_of(2), Some(1));
    assert_eq!(batch_of(0), Some(2));
    assert_eq!(summary.latency_mode, Some("per_request_batch"));
    assert!((summary.effective_batch_size - 4.0 / 3.0).abs() < 1e-9);
}

/// A stand-in interpreter: a shell script that ignores the worker script and runs `body`.
fn fake_python(dir: &tempfile::TempDir, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.path().join("python");
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.display().to_string()
}

#[test]
fn a_worker_of_another_protocol_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let py = fake_python(
        &dir,
        r#"echo '{"event":"hello","protocol":99,"python":"3.0","t":1.0}'; sleep 30"#,
    );
    let opts = WorkerOptions::new(py, dir.path().join("worker.log"), assets_dir());
    let t = Instant::now();
    let err = TransformersEngine::start(&config(serde_json::json!({})), &opts, &mut |_, _| {})
        .err()
        .expect("protocol 99 is not this llem's")
        .to_string();
    assert!(err.contains("speaks protocol 99"), "{err}");
    // The worker was killed rather than waited for.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[test]
fn a_worker_that_exits_at_start_reports_its_status_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let py = fake_python(
        &dir,
        "echo 'not an event'; echo 'Fatal Python error: init' >&2; exit 7",
    );
    let opts = WorkerOptions::new(py, dir.path().join("worker.log"), assets_dir());
    let err = TransformersEngine::start(&config(serde_json::json!({})), &opts, &mut |_, _| {})
        .err()
        .expect("it exited")
        .to_string();
    assert!(err.contains("exited with status 7"), "{err}");
    assert!(err.contains("Fatal Python error: init"), "{err}");
}

#[test]
fn the_docker_runner_mounts_the_script_and_model_and_removes_its_container() {
    let _g = crate::support::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let calls = dir.path().join("docker-calls");
    // A stand-in docker CLI: records its arguments, runs `run`'s command (after the image)
    // with the test's Python in place of the image's `python3`, and accepts `rm`.
    let docker = dir.path().join("docker");
    std::fs::write(
        &docker,
        format!(
            "#!/bin/sh\necho \"$@\" >> {calls}\ncase \"$1\" in\n  run) shift\n    \
             while [ $# -gt 0 ]; do case \"$1\" in --rm|-i) shift;; \
             --name|--label|--ipc|--gpus|-v|-e) shift 2;; *) break;; esac; done\n    \
             shift; [ \"$1\" = python3 ] && shift\n    exec {py} \"$@\";;\n  rm) exit 0;;\n\
             esac\nexit 9\n",
            calls = calls.display(),
            py = python()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&docker, std::fs::Permissions::from_mode(0o755)).unwrap();
    let cfg = config(serde_json::json!({
        "runners": {"transformers": "docker:example/transformers:1"},
    }));
    let mut opts = options(&dir);
    opts.docker = docker.display().to_string();
    let mut container = None;
    let mut e = TransformersEngine::start(&cfg, &opts, &mut |_, c| container = c).unwrap();
    let name = container.expect("a container name");
    assert!(name.starts_with("llem-transformers-"), "{name}");
    let ids = e
        .generate_ids(
            batching(1),
            &workload(chat(&["What is the capital of France?"]), 8),
            &mut Records::new(),
        )
        .unwrap();
    assert!(!ids[0].is_empty());
    drop(e);
    let log = std::fs::read_to_string(&calls).unwrap();
    let run = log.lines().find(|l| l.starts_with("run ")).unwrap();
    assert!(run.contains(&format!("--rm -i --name {name}")), "{run}");
    let model_dir = model_path().parent().unwrap().display().to_string();
    assert!(
        run.contains(&format!("-v {model_dir}:{model_dir}:ro")),
        "{run}"
    );
    assert!(run.contains("llem-transformers-worker-"), "{run}");
    assert!(
        run.contains("example/transformers:1 python3 -u /"),
        "the image, then its python3 on the mounted script: {run}"
    );
    assert!(
        log.lines().any(|l| l == format!("rm -f {name}")),
        "the container is removed: {log}"
    );
}

/// PEFT in the worker: an adapter the test made (random weights on v_proj/o_proj) changes
/// the greedy output; at scale 0 the output is the base model's, merged or not.
#[test]
fn a_peft_adapter_changes_the_output_and_at_scale_zero_is_the_base_model() {
    let _one = crate::support::exclusive();
    let dir = tempfile::tempdir().unwrap();
    let (peft, _) = lora::make(&model_path(), dir.path());
    let prompts = chat(&["What is the capital of France?", "List three colours."]);
    let wl = workload(prompts, 16);
    let base = shared()
        .generate_ids(batching(2), &wl, &mut Records::new())
        .unwrap();
    let ids = |lora: serde_json::Value| {
        let e = start(&config(serde_json::json!({ "lora": lora })), &options(&dir));
        let info = e.info().system_info.unwrap_or_default();
        assert!(info.contains("LoRA adapter"), "{info}");
        let mut e = e;
        e.generate_ids(batching(2), &wl, &mut Records::new())
            .unwrap()
    };
    let p = peft.display().to_string();
    let adapted = ids(serde_json::json!({"adapter_path": p}));
    assert_ne!(adapted, base, "the adapter changed nothing");
    // Merged into the weights, the adapter still applies (float sums in another order, so
    // not necessarily the same tokens as unmerged).
    assert_ne!(
        ids(serde_json::json!({"adapter_path": p, "merge_weights": true})),
        base,
        "the merged adapter changed nothing"
    );
    assert_eq!(
        ids(serde_json::json!({"adapter_path": p, "scale": 0.0})),
        base,
        "scale 0 is the base model"
    );
}
