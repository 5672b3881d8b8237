//! `llem run` on the transformers engine: the real worker under the Python of
//! `scripts/engines-env.sh`, the real SmolLM2 GGUF, real child processes and signals.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::assets;
use llem_results::manifest::{CellStatus, Manifest};
use serde_json::Value;

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

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

struct Sandbox {
    home: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let home = tempfile::tempdir().unwrap();
        for d in ["powercap", "sys", "cache"] {
            std::fs::create_dir_all(home.path().join(d)).unwrap();
        }
        Sandbox { home }
    }

    fn path(&self) -> &Path {
        self.home.path()
    }

    fn cmd(&self, python: &str, yaml: &str) -> Command {
        let file = self.path().join("exp.yaml");
        std::fs::write(&file, yaml).unwrap();
        let mut c = Command::new(env!("CARGO_BIN_EXE_llem"));
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("XDG_CACHE_HOME", self.path().join("cache"))
            .env("LLEM_CONFIG_PATH", self.path().join("no-user-config.yaml"))
            .env("LLEM_ASSETS", assets())
            .env("LLEM_POWERCAP_ROOT", self.path().join("powercap"))
            .env("LLEM_SYSFS_ROOT", self.path().join("sys"))
            .env("LLEM_PYTHON", python)
            .args(["run", file.to_str().unwrap(), "-o"])
            .arg(self.path().join("results"));
        c
    }

    fn study(&self) -> PathBuf {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(self.path().join("results"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        dirs.sort();
        assert_eq!(dirs.len(), 1, "{dirs:?}");
        dirs.remove(0)
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn manifest(dir: &Path) -> Manifest {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

fn cell_dir(study: &Path, cell: &llem_results::manifest::ManifestEntry) -> PathBuf {
    study.join(&cell.cell_dir)
}

#[test]
fn a_study_runs_profiled_and_batched_cells_through_the_worker() {
    let _g = common::exclusive();
    let sb = Sandbox::new();
    let yaml = format!(
        "name: tf\nmodel: {MODEL}\nengine: transformers\ndtype: float32\n\
         decoder: {{preset: deterministic}}\nbaseline: {{enabled: false}}\n\
         warmup: {{enabled: true, n_warmup: 1, thermal_floor_seconds: 0}}\n\
         max_output_tokens: 12\n\
         experiments:\n\
         - transformers: {{batch_size: 4, attn_implementation: sdpa}}\n  \
           measurement: {{latency_profiling: true}}\n  \
           dataset: {{source: aienergyscore, n_prompts: 3}}\n\
         - transformers: {{batch_size: 2, batching_strategy: sorted_static}}\n  \
           dataset: {{source: synthetic, n_prompts: 4, synthetic: {{input_tokens: 16, output_tokens: 8}}}}\n\
         study_execution: {{n_cycles: 1, experiment_order: sequential, \
         experiment_gap_seconds: 0, cycle_gap_seconds: 0}}\n"
    );
    let o = sb.cmd(&python(), &yaml).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let study = sb.study();
    let m = manifest(&study);
    assert!(
        m.experiments
            .iter()
            .all(|e| e.status == CellStatus::Completed),
        "{:?}",
        m.experiments
    );

    // Profiled: every token streamed, one request per batch.
    let dir = cell_dir(&study, &m.experiments[0]);
    let r = json(&dir.join("result.json"));
    assert_eq!(r["engine"], "transformers", "{r}");
    let lat = &r["latency_stats"];
    assert_eq!(lat["measurement_mode"], "true_streaming");
    assert_eq!(lat["ttft_samples"], 3);
    assert!(lat["itl_full_samples"].as_u64().unwrap() >= 3, "{lat}");
    assert!(lat["ttft_median_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(
        r["extended_metrics"]["memory"]["memory_source"],
        "worker_rss"
    );
    assert!(
        r["extended_metrics"]["memory"]["peak_memory_mb"]
            .as_f64()
            .unwrap()
            > 100.0
    );
    let warnings = r["measurement_warnings"].to_string();
    assert!(warnings.contains("batch_size 4 ran as 1"), "{warnings}");
    assert_eq!(r["extended_metrics"]["batch"]["num_batches"], 3);
    let log = std::fs::read_to_string(dir.join("worker.log")).unwrap();
    assert!(log.contains("llem-worker: loaded on cpu"), "{log}");
    assert!(log.contains("streamed"), "{log}");
    let req = llem_results::requests::read_requests(&dir.join("requests.parquet")).unwrap();
    assert_eq!(req.len(), 3);
    for q in &req {
        assert_eq!(q.token_times_s.len(), q.output_tokens as usize);
        assert!(q.first_token_s.unwrap() >= q.submit_s);
    }
    let out: u64 = req.iter().map(|q| u64::from(q.output_tokens)).sum();
    assert_eq!(r["total_output_tokens"].as_u64(), Some(out), "{r}");

    // Batched: per-batch timing, no TTFT/ITL, two batches of two.
    let dir = cell_dir(&study, &m.experiments[1]);
    let r = json(&dir.join("result.json"));
    assert!(r["latency_stats"].is_null(), "{}", r["latency_stats"]);
    assert_eq!(r["extended_metrics"]["batch"]["num_batches"], 2);
    assert_eq!(
        r["extended_metrics"]["request_latency"]["e2e_latency_samples"],
        4
    );
    assert_eq!(r["total_output_tokens"], 32);
    assert_eq!(r["total_input_tokens"], 64);
    let req = llem_results::requests::read_requests(&dir.join("requests.parquet")).unwrap();
    assert_eq!(req.len(), 4);
    assert!(req.iter().all(|q| q.first_token_s.is_none()));
    // The worker logged every forward pass: the window is split by them, and every request
    // of a batch has its share of the batch's prefill and decode.
    let b = &r["energy_breakdown"];
    assert_eq!(b["attribution"], "engine_steps", "{b}");
    let (p, d) = (
        b["prefill_j"].as_f64().unwrap(),
        b["decode_j"].as_f64().unwrap(),
    );
    assert!(p > 0.0 && d > 0.0, "{b}");
    let sum: f64 = req.iter().map(|q| q.energy.unwrap().energy_j).sum();
    let raw = b["raw_j"].as_f64().unwrap();
    assert!(
        (sum / raw - 1.0).abs() < 0.005,
        "requests {sum} J vs window {raw} J"
    );
    assert!(
        req.iter().all(|q| q
            .energy
            .is_some_and(|e| e.prefill_energy_j > 0.0 && e.decode_energy_j > 0.0)),
        "{req:?}"
    );
}

#[test]
fn a_worker_killed_mid_batch_fails_its_cell_and_the_study_goes_on() {
    let _g = common::exclusive();
    let sb = Sandbox::new();
    let yaml = format!(
        "name: crash\nmodel: {MODEL}\nengine: transformers\ndtype: float32\n\
         decoder: {{preset: deterministic}}\nbaseline: {{enabled: false}}\nwarmup: {{enabled: false}}\n\
         experiments:\n\
         - dataset: {{source: synthetic, n_prompts: 2, synthetic: {{input_tokens: 16, output_tokens: 3000}}}}\n\
         - dataset: {{source: synthetic, n_prompts: 2, synthetic: {{input_tokens: 16, output_tokens: 4}}}}\n\
         study_execution: {{n_cycles: 1, experiment_order: sequential, \
         experiment_gap_seconds: 0, cycle_gap_seconds: 0}}\n"
    );
    let mut child = sb.cmd(&python(), &yaml).spawn().unwrap();
    // The first cell's worker, once its first batch is decoding, dies by SIGKILL.
    let results = sb.path().join("results");
    let start = Instant::now();
    let pid = loop {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "the first batch never started"
        );
        let logs: Vec<PathBuf> = common::walk(&results)
            .into_iter()
            .filter(|p| p.ends_with("worker.log"))
            .collect();
        let started = logs.iter().find_map(|l| {
            let text = std::fs::read_to_string(l).ok()?;
            text.contains("generate batch 0").then_some(text)
        });
        if started.is_some() {
            break worker_pid().expect("a worker process");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    let study = sb.study();
    let m = manifest(&study);
    let dead = &m.experiments[0];
    assert_eq!(dead.status, CellStatus::Failed, "{dead:?}");
    let msg = dead.error_message.as_deref().unwrap_or_default();
    assert!(msg.contains("killed by SIGKILL"), "{msg}");
    assert!(msg.contains("generate batch 0"), "the log tail: {msg}");
    assert_eq!(
        m.experiments[1].status,
        CellStatus::Completed,
        "the study went on"
    );
}

#[test]
fn a_python_without_torch_is_refused_before_anything_runs() {
    let _g = common::exclusive();
    let sb = Sandbox::new();
    let venv = sb.path().join("bare");
    assert!(
        Command::new("python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv)
            .status()
            .unwrap()
            .success()
    );
    let py = venv.join("bin/python").display().to_string();
    let yaml = format!(
        "model: {MODEL}\nengine: transformers\nbaseline: {{enabled: false}}\n\
         warmup: {{enabled: false}}\ndataset: {{n_prompts: 1}}\n"
    );
    let o = sb.cmd(&py, &yaml).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("cannot import torch"), "{err}");
    assert!(err.contains("-m pip install torch transformers"), "{err}");
    assert!(
        !sb.path().join("results").exists() || common::walk(&sb.path().join("results")).is_empty()
    );
}

/// The pid of the one running transformers worker (found by its script's name).
fn worker_pid() -> Option<i32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(e.path().join("cmdline")).ok()?;
        String::from_utf8_lossy(&cmd)
            .contains("llem-transformers-worker-")
            .then_some(pid)
    })
}
