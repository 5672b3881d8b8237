//! Studies on a real Slurm cluster: Debian's slurm-wlm (munged, slurmctld, slurmd) started by
//! `scripts/slurm-cluster.sh` as a one-node cluster with four CPU slots, one per test, torn
//! down after it. The real `llem` submits through `sbatch`; its tasks run the real SmolLM2
//! cells on the node; the tests scancel, kill -9 and time tasks out, and resume.
//!
//! Without Slurm installed the tests say so and pass, unless `LLEM_REQUIRE_SLURM=1` (set by
//! `make test`, which installs it) makes that a failure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime};

use llem_results::{CellStatus, Manifest, StudyResult, StudyStatus};
use llem_study::slurm::record::{JobsRecord, TaskState, TaskStatus};

use crate::common;
use common::assets;

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// A cluster of its own, in a temporary directory; stopped when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
}

impl Cluster {
    /// Starts one, or `None` when Slurm is not installed and not required.
    fn start() -> Option<Cluster> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm-cluster.sh");
        let dir = tempfile::tempdir().unwrap();
        let o = Command::new("bash")
            .arg(&script)
            .arg("start")
            .arg(dir.path().join("cluster"))
            .output()
            .unwrap();
        if o.status.code() == Some(3) && std::env::var("LLEM_REQUIRE_SLURM").as_deref() != Ok("1") {
            eprintln!(
                "Slurm is not installed (apt-get install slurm-wlm munge); the Slurm tests did \
                 not run. `make test` installs it and requires them."
            );
            return None;
        }
        assert!(
            o.status.success(),
            "the test cluster did not start: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let conf = PathBuf::from(String::from_utf8_lossy(&o.stdout).lines().last().unwrap());
        Some(Cluster { dir, conf })
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn results(&self) -> PathBuf {
        self.root().join("results")
    }

    fn yaml(&self, name: &str, text: &str) -> PathBuf {
        let p = self.root().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn env(&self, c: &mut Command) {
        for d in ["powercap", "sys", "cache", "home"] {
            std::fs::create_dir_all(self.root().join(d)).unwrap();
        }
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.root().join("home"))
            .env("XDG_CACHE_HOME", self.root().join("cache"))
            .env("LLEM_CONFIG_PATH", self.root().join("no-user-config.yaml"))
            .env("LLEM_ASSETS", assets())
            .env("LLEM_POWERCAP_ROOT", self.root().join("powercap"))
            .env("LLEM_SYSFS_ROOT", self.root().join("sys"))
            .env("SLURM_CONF", &self.conf);
    }

    fn llem(&self, args: &[&str]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_llem"));
        self.env(&mut c);
        c.current_dir(self.root()).args(args).output().unwrap()
    }

    fn slurm(&self, program: &str, args: &[&str]) -> String {
        let mut c = Command::new(program);
        self.env(&mut c);
        let o = c.args(args).output().unwrap();
        assert!(
            o.status.success(),
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// `llem run YAML -o OUT ARGS`.
    fn run_into(&self, yaml: &Path, out: &Path, args: &[&str]) -> Output {
        let mut all = vec!["run", yaml.to_str().unwrap(), "-o", out.to_str().unwrap()];
        all.extend_from_slice(args);
        self.llem(&all)
    }

    /// `llem run YAML -o results ARGS`, which must succeed; its stderr.
    fn submit(&self, yaml: &Path, args: &[&str]) -> String {
        let o = self.run_into(yaml, &self.results(), args);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert_eq!(o.status.code(), Some(0), "{err}");
        err
    }

    /// Waits until the cluster has no job left (the compile job included).
    fn wait_idle(&self, timeout: Duration) {
        let start = Instant::now();
        loop {
            if self.slurm("squeue", &["-h"]).trim().is_empty() {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "jobs still queued after {timeout:?}:\n{}",
                self.slurm("squeue", &[])
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn only_study(&self) -> PathBuf {
        let d: Vec<PathBuf> = std::fs::read_dir(self.results())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(d.len(), 1, "{d:?}");
        d[0].clone()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm-cluster.sh");
        let _ = Command::new("bash")
            .arg(script)
            .arg("stop")
            .arg(self.root().join("cluster"))
            .output();
    }
}

fn read<T: serde::de::DeserializeOwned>(p: &Path) -> T {
    serde_json::from_str(
        &std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())),
    )
    .unwrap()
}

fn manifest(dir: &Path) -> Manifest {
    read(&dir.join("manifest.json"))
}

fn study_yaml(name: &str, prompts: u32, out_tokens: u32, extra: &str) -> String {
    format!(
        "name: {name}\nmodel: {MODEL}\n\
         dataset: {{source: synthetic, n_prompts: {prompts}, synthetic: {{input_tokens: 16, output_tokens: {out_tokens}}}}}\n\
         warmup: {{enabled: false}}\nbaseline: {{enabled: false}}\n{extra}"
    )
}

/// Unix seconds of a `YYYY-MM-DDTHH:MM:SS.mmmZ` time.
fn unix_s(iso: &str) -> f64 {
    let n = |a: usize, b: usize| iso[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    // Days from the civil date (March-based years).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs: f64 = iso[17..23].parse().unwrap();
    (days * 86_400 + n(11, 13) * 3600 + n(14, 16) * 60) as f64 + secs
}

/// Each cell's status, in plan order.
fn cell_states(m: &Manifest) -> Vec<CellStatus> {
    m.experiments.iter().map(|e| e.status).collect()
}

fn task_statuses(dir: &Path) -> Vec<TaskStatus> {
    let m = manifest(dir);
    m.experiments
        .iter()
        .filter_map(|e| {
            let p = dir.join(&e.cell_dir).join("slurm_task.json");
            std::fs::read_to_string(p)
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok())
        })
        .collect()
}

#[test]
fn a_two_by_two_study_in_two_cycles_runs_as_job_arrays_and_loads_like_a_local_one() {
    let _machine = common::shared();
    let Some(c) = Cluster::start() else { return };
    let yaml = c.yaml(
        "grid.yaml",
        &study_yaml(
            "grid",
            2,
            4,
            "sweep:\n  llamacpp.batch_size: [1, 2]\n  max_output_tokens: [3, 4]\n\
             study_execution: {n_cycles: 2, experiment_order: interleave, \
             experiment_gap_seconds: 0, cycle_gap_seconds: 0, node_control: true, \
             executor: {slurm: {max_parallel: 3, time: \"00:10:00\"}}}\n",
        ),
    );
    // The dry run: two arrays, task -> cell in planned order, GPU-hours at most.
    let o = c.llem(&[
        "run",
        yaml.to_str().unwrap(),
        "--dry-run",
        "--json",
        "--gres",
        "gpu:1",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let arrays = v["slurm"]["arrays"].as_array().unwrap();
    assert_eq!(arrays.len(), 2);
    let idx: Vec<Vec<u64>> = arrays
        .iter()
        .map(|a| {
            a["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["index"].as_u64().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(idx, [vec![1, 2, 3, 4], vec![5, 6, 7, 8]]);
    // 8 cells x 1 GPU x 10 min.
    let h = v["slurm"]["gpu_hours_reserved"].as_f64().unwrap();
    assert!((h - 8.0 / 6.0).abs() < 1e-9, "{h}");
    let o = c.llem(&["run", yaml.to_str().unwrap(), "--dry-run"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("task   3 -> #004"), "{text}");
    assert!(text.contains("--array=0-3%3"), "{text}");
    assert!(
        text.contains("node control: each node measures #1's"),
        "{text}"
    );

    // The real thing (the test node has no GPU resource to ask for).
    let err = c.submit(&yaml, &["--quiet"]);
    assert!(err.contains("8 cells in 2 job arrays"), "{err}");
    let dir = c.only_study();
    let jobs: JobsRecord = read(&dir.join("_slurm/jobs.json"));
    let sub = jobs.latest().unwrap();
    assert_eq!(sub.arrays.len(), 2);
    assert_eq!(sub.arrays[0].cells, [0, 1, 2, 3]);
    c.wait_idle(Duration::from_secs(240));

    let m = manifest(&dir);
    assert_eq!(m.status, StudyStatus::Completed, "{:#?}", m.experiments);
    let host = llem_app::host::hostname();
    for (i, e) in m.experiments.iter().enumerate() {
        assert_eq!(e.status, CellStatus::Completed, "{e:?}");
        assert_eq!(e.node.as_deref(), Some(host.as_str()));
        let array = &sub.arrays[i / 4];
        assert_eq!(
            e.slurm_job.as_deref(),
            Some(format!("{}_{}", array.job_id, i % 4).as_str())
        );
        assert_eq!(e.attempts, 1);
        assert!(e.mj_per_tok.is_some());
    }
    // Cycle 1 began after cycle 0 ended (afterany): its earliest start is after cycle 0's
    // last end.
    let st = task_statuses(&dir);
    let (c0, c1): (Vec<&TaskStatus>, Vec<&TaskStatus>) = st.iter().partition(|s| {
        s.slurm_job
            .starts_with(&format!("{}_", sub.arrays[0].job_id))
    });
    let last0 = c0
        .iter()
        .filter_map(|s| s.finished_at.clone())
        .max()
        .unwrap();
    let first1 = c1.iter().map(|s| s.started_at.clone()).min().unwrap();
    assert!(first1 >= last0, "{first1} < {last0}");
    // The node's identity is recorded per cell.
    assert!(
        st.iter()
            .all(|s| s.node.node == host && s.state == TaskState::Completed)
    );

    // The node measured the control configuration once, first, apart from the study's runs.
    let controls: Vec<llem_study::slurm::record::NodeControl> =
        read(&dir.join("_slurm/node_controls.json"));
    assert_eq!(controls.len(), 1, "{controls:?}");
    assert_eq!(controls[0].node, host);
    assert_eq!(controls[0].state, TaskState::Completed, "{controls:?}");
    assert!(controls[0].mj_per_tok.is_some_and(|x| x > 0.0));
    let control_status: TaskStatus = read(
        &dir.join("_slurm/sub-001/nodes")
            .join(&host)
            .join("control.json"),
    );
    let first_end = st
        .iter()
        .map(|s| s.finished_at.clone().unwrap())
        .min()
        .unwrap();
    assert!(control_status.finished_at.unwrap() <= first_end);

    let r: StudyResult = read(&dir.join("study_result.json"));
    assert_eq!(r.experiments.len(), 8);
    assert_eq!(r.statistics.len(), 4);
    assert_eq!(r.status, StudyStatus::Completed);

    // `llem study status`, `llem results` and `llem report` read it like a local study.
    let o = c.llem(&["study", "status", dir.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["status"], "completed");
    assert_eq!(s["nodes"][&host]["completed"], 8);
    assert_eq!(s["node_controls"].as_array().unwrap().len(), 1);
    let o = c.llem(&["results", "show", dir.to_str().unwrap()]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let report = c.root().join("report.html");
    let o = c.llem(&[
        "report",
        dir.to_str().unwrap(),
        "-o",
        report.to_str().unwrap(),
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(!html.contains("id=\"nodes\""), "one node, no node section");
    // Had cycle 1 run on a second node (a one-node cluster cannot: its results are relabelled
    // here), the report and the records group by node.
    for e in &m.experiments[4..] {
        let p = dir.join(&e.cell_dir).join("result.json");
        let mut v: serde_json::Value = read(&p);
        v["environment"]["hostname"] = "node-b".into();
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
    }
    let o = c.llem(&[
        "report",
        dir.to_str().unwrap(),
        "-o",
        report.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(0));
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(
        html.contains(&format!("<th>node-b</th><th>{host}</th>"))
            || html.contains(&format!("<th>{host}</th><th>node-b</th>")),
        "{html}"
    );
    let o = c.llem(&[
        "results",
        "query",
        dir.to_str().unwrap(),
        "--group-by",
        "host",
        "--json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("node-b") && text.contains(&host), "{text}");
    // The control cell is not one of the study's runs.
    let o = c.llem(&[
        "results",
        "export",
        dir.to_str().unwrap(),
        "--format",
        "json",
    ]);
    let runs: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(runs.len(), 8);
}

#[test]
fn scancel_and_kill_9_of_tasks_carry_slurms_reason_and_resume_reruns_only_those() {
    let _machine = common::shared();
    let Some(c) = Cluster::start() else { return };
    // Cells of a few seconds, all three tasks started at once: one runs, two wait for the
    // node's CPU lock.
    let yaml = c.yaml(
        "fault.yaml",
        &study_yaml(
            "fault",
            4,
            48,
            "sweep:\n  llamacpp.batch_size: [1, 2, 4]\n\
             study_execution: {n_cycles: 1, experiment_order: sequential, \
             experiment_gap_seconds: 0, cycle_gap_seconds: 0, executor: slurm}\n",
        ),
    );
    c.submit(&yaml, &["--max-parallel", "3", "--quiet"]);
    let dir = c.only_study();
    let jobs: JobsRecord = read(&dir.join("_slurm/jobs.json"));
    let array = jobs.latest().unwrap().arrays[0].job_id.clone();
    let start = Instant::now();
    let running = loop {
        let st = task_statuses(&dir);
        if st.len() == 3 && st.iter().all(|s| s.state == TaskState::Running) {
            break st;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "{st:?}");
        std::thread::sleep(Duration::from_millis(100));
    };
    // Task 1 is scancelled; task 2's process is killed as a dying node would kill it.
    c.slurm("scancel", &[&format!("{array}_1")]);
    let t2 = running
        .iter()
        .find(|s| s.slurm_job == format!("{array}_2"))
        .unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(t2.pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    c.wait_idle(Duration::from_secs(240));
    let m = manifest(&dir);
    assert_eq!(m.status, StudyStatus::Failed);
    let e = &m.experiments;
    assert_eq!(e[0].status, CellStatus::Completed, "{:?}", e[0]);
    assert_eq!(e[1].status, CellStatus::Failed);
    assert_eq!(e[1].error_type.as_deref(), Some("CANCELLED"), "{:?}", e[1]);
    assert_eq!(e[2].status, CellStatus::Failed);
    assert!(
        e[2].error_type.as_deref() != Some("Lost")
            && e[2]
                .error_message
                .as_deref()
                .unwrap()
                .contains(&format!("Slurm task {array}_2")),
        "{:?}",
        e[2]
    );
    // Status names the failed cells with their reasons.
    let o = c.llem(&["study", "status", dir.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("CANCELLED"), "{text}");
    assert!(text.contains("1 of 3 cells completed"), "{text}");

    // Resume: the file says slurm; only the two cells that did not complete are submitted.
    let done = dir.join(&e[0].cell_dir).join("result.json");
    let before: SystemTime = std::fs::metadata(&done).unwrap().modified().unwrap();
    let err = c.submit(&yaml, &["--resume", "--quiet"]);
    assert!(
        err.contains("resubmitted") && err.contains("2 cells"),
        "{err}"
    );
    let jobs: JobsRecord = read(&dir.join("_slurm/jobs.json"));
    assert_eq!(jobs.submissions.len(), 2);
    assert_eq!(jobs.latest().unwrap().arrays[0].cells, [1, 2]);
    c.wait_idle(Duration::from_secs(240));
    let m = manifest(&dir);
    assert_eq!(m.status, StudyStatus::Completed, "{:#?}", m.experiments);
    let attempts: Vec<u32> = m.experiments.iter().map(|e| e.attempts).collect();
    assert_eq!(attempts, [1, 2, 2]);
    assert_eq!(
        std::fs::metadata(&done).unwrap().modified().unwrap(),
        before
    );
    // The failed attempts' directories are kept beside the reruns.
    for e in &m.experiments[1..] {
        assert!(dir.join(format!("{}.attempt1", e.cell_dir)).is_dir());
    }
    let r: StudyResult = read(&dir.join("study_result.json"));
    assert_eq!(r.experiments.len(), 3);

    // Slurm runs a task again under its id (requeued after a node failure or preemption;
    // here by hand): the cell it completed is not measured twice.
    let status_before = std::fs::read(dir.join(&e[0].cell_dir).join("slurm_task.json")).unwrap();
    c.slurm("scontrol", &["requeue", &format!("{array}_0")]);
    // A requeued job waits before it is eligible again; not this one.
    c.slurm(
        "scontrol",
        &["update", &format!("JobId={array}_0"), "StartTime=now"],
    );
    c.wait_idle(Duration::from_secs(120));
    let out = std::fs::read_to_string(dir.join("_slurm/sub-001/cycle-0_0.out")).unwrap();
    assert!(out.contains("the cell is not measured twice"), "{out}");
    assert_eq!(
        std::fs::metadata(&done).unwrap().modified().unwrap(),
        before
    );
    assert_eq!(
        std::fs::read(dir.join(&e[0].cell_dir).join("slurm_task.json")).unwrap(),
        status_before
    );
}

#[test]
fn a_task_past_its_time_limit_is_a_timeout_and_the_breaker_stops_the_array() {
    let _machine = common::shared();
    let Some(c) = Cluster::start() else { return };
    // A cell far longer than its one-minute limit.
    let long = c.yaml(
        "long.yaml",
        &study_yaml(
            "long",
            64,
            256,
            "study_execution: {experiment_gap_seconds: 0, executor: {slurm: {time: \"1\"}}}\n",
        ),
    );
    c.submit(&long, &["--quiet"]);
    let long_dir = c.only_study();

    // Meanwhile, in a second results directory, the circuit breaker: the first cell fails
    // (a broken model), the next task finds one failure in a row with --fail-fast and stops
    // the array; the cells never started are skipped, not failed.
    let broken = c.root().join("broken.gguf");
    std::fs::write(&broken, b"GGUF\x03\x00\x00\x00 this is not a model").unwrap();
    let yaml = c.yaml(
        "breaker.yaml",
        &study_yaml(
            "breaker",
            2,
            4,
            &format!(
                "sweep:\n  model: [{}, {MODEL}]\n\
                 study_execution: {{n_cycles: 2, experiment_order: sequential, \
                 experiment_gap_seconds: 0, cycle_gap_seconds: 0, executor: slurm}}\n",
                broken.display()
            ),
        ),
    );
    let out2 = c.root().join("results2");
    let o = c.run_into(
        &yaml,
        &out2,
        &["--fail-fast", "--max-parallel", "1", "--no-lock", "--quiet"],
    );
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let bdir = std::fs::read_dir(&out2)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let start = Instant::now();
    let m = loop {
        let m = manifest(&bdir);
        if m.status != StudyStatus::Running {
            break m;
        }
        assert!(start.elapsed() < Duration::from_secs(120), "{m:#?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        m.status,
        StudyStatus::CircuitBreaker,
        "{:#?}",
        m.experiments
    );
    let st = cell_states(&m);
    assert_eq!(
        st,
        [
            CellStatus::Failed,
            CellStatus::Skipped,
            CellStatus::Skipped,
            CellStatus::Skipped
        ]
    );
    assert_eq!(m.experiments[0].error_type.as_deref(), Some("EngineError"));
    assert!(bdir.join("_slurm/breaker.json").is_file());

    // The long cell: Slurm ends it at its limit, and the manifest says TIMEOUT.
    c.wait_idle(Duration::from_secs(300));
    let m = manifest(&long_dir);
    assert_eq!(m.status, StudyStatus::Failed);
    let e = &m.experiments[0];
    assert_eq!(e.error_type.as_deref(), Some("TIMEOUT"), "{e:?}");
    assert!(
        !long_dir.join(&e.cell_dir).join("result.json").exists(),
        "a timed-out cell has no result"
    );
}

/// The breaker across an array as the seed has it: after `max_consecutive_failures` failed
/// cells in a row, a cooldown, then one half-open probe cell; the study goes on when it
/// completes and stops when it fails.
#[test]
fn after_failures_in_a_row_a_probe_cell_decides_whether_the_array_goes_on() {
    let _machine = common::shared();
    let Some(c) = Cluster::start() else { return };
    let broken: Vec<String> = (1..=3)
        .map(|i| {
            let p = c.root().join(format!("broken{i}.gguf"));
            std::fs::write(&p, b"GGUF\x03\x00\x00\x00 this is not a model").unwrap();
            p.display().to_string()
        })
        .collect();
    let study = |name: &str, models: &[&str]| {
        let yaml = c.yaml(
            &format!("{name}.yaml"),
            &study_yaml(
                name,
                2,
                4,
                &format!(
                    "sweep:\n  model: [{}]\n\
                     study_execution: {{n_cycles: 1, experiment_order: sequential, \
                     experiment_gap_seconds: 0, cycle_gap_seconds: 0, \
                     max_consecutive_failures: 2, circuit_breaker_cooldown_seconds: 1, \
                     executor: slurm}}\n",
                    models.join(", ")
                ),
            ),
        );
        let out = c.root().join(name);
        let o = c.run_into(
            &yaml,
            &out,
            &["--max-parallel", "1", "--no-lock", "--quiet"],
        );
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::read_dir(&out)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path()
    };
    // Two failures, then a cell that works: it is the probe, and it closes the breaker.
    let passes = study("passes", &[&broken[0], &broken[1], MODEL]);
    // Three failures: the third is the probe, and the fourth cell never runs.
    let fails = study("fails", &[&broken[0], &broken[1], &broken[2], MODEL]);
    c.wait_idle(Duration::from_secs(300));

    let m = manifest(&passes);
    let st = cell_states(&m);
    assert_eq!(
        st,
        [
            CellStatus::Failed,
            CellStatus::Failed,
            CellStatus::Completed
        ],
        "{:#?}",
        m.experiments
    );
    assert_eq!(m.status, StudyStatus::Failed);
    assert!(!passes.join("_slurm/breaker.json").exists());
    assert!(
        !passes.join("_slurm/probe.json").exists(),
        "the claim goes with the probe"
    );
    let out = std::fs::read_to_string(passes.join("_slurm/sub-001/cycle-0_2.out")).unwrap();
    assert!(
        out.contains("2 cells failed in a row")
            && out.contains("half-open probe, after a 1 s cooldown"),
        "{out}"
    );
    // The probe task rested the cooldown before its cell: its time exceeds the cell's by it.
    let probe = &task_statuses(&passes)[2];
    let task_s = unix_s(probe.finished_at.as_deref().unwrap()) - unix_s(&probe.started_at);
    assert!(
        task_s >= probe.elapsed_s.unwrap() + 1.0,
        "{task_s} s vs cell {:?} s",
        probe.elapsed_s
    );

    let m = manifest(&fails);
    let st = cell_states(&m);
    assert_eq!(
        st,
        [
            CellStatus::Failed,
            CellStatus::Failed,
            CellStatus::Failed,
            CellStatus::Skipped
        ],
        "{:#?}",
        m.experiments
    );
    assert_eq!(m.status, StudyStatus::CircuitBreaker);
    let trip: llem_study::slurm::record::BreakerTrip = read(&fails.join("_slurm/breaker.json"));
    assert!(
        trip.message.contains("the half-open probe failed too"),
        "{trip:?}"
    );
    assert!(!fails.join("_slurm/probe.json").exists());
    let o = c.llem(&["study", "status", fails.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("circuit breaker tripped at") && text.contains("half-open probe failed"),
        "{text}"
    );
    let o = c.llem(&["study", "status", passes.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["circuit_breaker"].is_null(), "closed again: {v}");
}

#[test]
fn an_sbatch_refusal_is_reported_and_leaves_nothing_queued() {
    let _machine = common::shared();
    let Some(c) = Cluster::start() else { return };
    let yaml = c.yaml(
        "p.yaml",
        &study_yaml(
            "nopart",
            2,
            4,
            "sweep:\n  llamacpp.batch_size: [1, 2]\nstudy_execution: {n_cycles: 2, \
             experiment_gap_seconds: 0, cycle_gap_seconds: 0}\n",
        ),
    );
    let out = c.results();
    let o = c.run_into(
        &yaml,
        &out,
        &["--executor", "slurm", "--partition", "nosuchpartition"],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("sbatch") && err.contains("partition"), "{err}");
    assert!(c.slurm("squeue", &["-h"]).trim().is_empty());
    let dir = c.only_study();
    let m = manifest(&dir);
    assert_eq!(m.status, StudyStatus::Failed);
    assert!(
        m.summary
            .warnings
            .iter()
            .any(|w| w.contains("not submitted")),
        "{m:?}"
    );
    // Resumed with a partition the cluster has, the whole study is submitted and runs.
    let o = c.run_into(&yaml, &out, &["--executor", "slurm", "--resume", "--quiet"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("4 cells in 2 job arrays"), "{err}");
    c.wait_idle(Duration::from_secs(240));
    assert_eq!(manifest(&dir).status, StudyStatus::Completed);
    // Slurm flags on a local study are refused, not ignored.
    let o = c.llem(&[
        "run",
        yaml.to_str().unwrap(),
        "--gres",
        "gpu:1",
        "--dry-run",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--gres only apply"));
    let local = c.yaml(
        "l.yaml",
        &study_yaml("local", 2, 4, "study_execution: {node_control: true}\n"),
    );
    let o = c.llem(&["run", local.to_str().unwrap(), "--dry-run"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("node_control"));
}

#[test]
fn a_search_runs_its_batches_as_arrays_each_picked_by_the_job_after_the_last() {
    let _machine = common::shared();
    let Some(c) = Cluster::start() else { return };
    let yaml = c.yaml(
        "search.yaml",
        &study_yaml(
            "search",
            2,
            4,
            "sweep:\n  llamacpp.batch_size: [1, 2]\n  max_output_tokens: [3, 4]\n\
             search:\n  objective: mj_per_tok_total\n  constraints: [\"itl_p90_ms <= 5000\"]\n  \
             budget: 6\n  batch: 2\n  seed: 5\n\
             study_execution: {n_cycles: 2, experiment_gap_seconds: 0, cycle_gap_seconds: 0, \
             executor: {slurm: {time: \"00:10:00\"}}}\n",
        ),
    );
    let o = c.llem(&["run", yaml.to_str().unwrap(), "--dry-run"]);
    assert_eq!(o.status.code(), Some(0));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("the search submits its proposals 2 at a time")
            && text.contains("(at most 6 cells)")
            && text.contains("--array=0-1"),
        "{text}"
    );
    let o = c.llem(&["run", yaml.to_str().unwrap(), "--dry-run", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["slurm"]["search_batch"], 2);
    assert_eq!(v["slurm"]["cells"], 6);

    let err = c.submit(&yaml, &["--quiet"]);
    assert!(err.contains("its first batch of 2 cells as job"), "{err}");
    let dir = c.only_study();
    // The job that would pick the second batch is cancelled: the first batch is measured, and
    // the search stands still, interrupted, until --resume.
    let jobs: JobsRecord = read(&dir.join("_slurm/jobs.json"));
    let first = jobs.latest().unwrap().clone();
    assert!(first.search);
    assert_eq!(first.arrays.len(), 1);
    c.slurm("scancel", &[first.compile_job.as_deref().unwrap()]);
    c.wait_idle(Duration::from_secs(240));
    let o = c.llem(&["study", "status", dir.to_str().unwrap(), "--json"]);
    let st: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(st["status"], "interrupted", "{st}");
    assert_eq!(st["completed"], 2, "{st}");
    let s: serde_json::Value = read(&dir.join("search.json"));
    assert!(s["stop_reason"].is_null());

    // Resumed, it goes on from what the first batch measured: each compile job submits the
    // next batch until the search stops; then nothing is queued.
    let err = c.submit(&yaml, &["--resume", "--quiet"]);
    assert!(err.contains("resubmitted search"), "{err}");
    c.wait_idle(Duration::from_secs(400));

    let jobs: JobsRecord = read(&dir.join("_slurm/jobs.json"));
    assert_eq!(jobs.submissions.len(), 2);
    let arrays: Vec<&llem_study::slurm::record::ArrayRecord> =
        jobs.submissions.iter().flat_map(|s| &s.arrays).collect();
    assert!(arrays.len() >= 3, "{arrays:?}");
    let m = manifest(&dir);
    assert_eq!(m.status, StudyStatus::Completed, "{:#?}", m.experiments);
    assert!(
        m.experiments.len() <= 6,
        "{} runs for a budget of 6",
        m.experiments.len()
    );
    // Batch k of a submission is its array k: its cells are the manifest's next ones, at most
    // two, each run by its own task, and every batch began after the one before had ended.
    let mut next = 0;
    let mut previous_end: Option<String> = None;
    for sub in &jobs.submissions {
        for (k, a) in sub.arrays.iter().enumerate() {
            assert_eq!(a.cycle as usize, k + 1);
            assert!(!a.cells.is_empty() && a.cells.len() <= 2, "{a:?}");
            let starts: Vec<String> = a
                .cells
                .iter()
                .enumerate()
                .map(|(t, &i)| {
                    assert_eq!(i, next);
                    next += 1;
                    let e = &m.experiments[i];
                    assert_eq!(e.status, CellStatus::Completed, "{e:?}");
                    assert_eq!(e.attempts, 1, "{e:?}");
                    assert_eq!(
                        e.slurm_job.as_deref(),
                        Some(format!("{}_{t}", a.job_id).as_str())
                    );
                    e.started_at.clone().unwrap()
                })
                .collect();
            if let Some(end) = &previous_end {
                assert!(starts.iter().all(|s| s >= end), "{starts:?} before {end}");
            }
            previous_end = a
                .cells
                .iter()
                .filter_map(|&i| m.experiments[i].completed_at.clone())
                .max();
        }
    }
    assert_eq!(next, m.experiments.len());

    let s: serde_json::Value = read(&dir.join("search.json"));
    assert_eq!(s["phase"], "done");
    assert!(
        ["identified", "budget_spent", "unresolved"].contains(&s["stop_reason"].as_str().unwrap()),
        "{}",
        s["stop_reason"]
    );
    assert_eq!(
        s["runs_used"].as_u64().unwrap() as usize,
        m.experiments.len()
    );
    assert!(s["answer"]["objective_mean"].as_f64().unwrap() > 0.0);
    let r: StudyResult = read(&dir.join("study_result.json"));
    assert_eq!(r.status, StudyStatus::Completed);
    assert_eq!(r.experiments.len(), m.experiments.len());

    let o = c.llem(&["study", "status", dir.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let st: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(st["status"], "completed");
    // A finished search is not resumed.
    let o = c.run_into(&yaml, &c.results(), &["--resume", "--quiet"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("a completed study is not resumed"), "{err}");
}

/// Live metrics of a Slurm study: its tasks run where nothing scrapes them, so each cell
/// pushes its figures to a Pushgateway (`--metrics-push`), which keeps one group per cell;
/// the endpoint of a local study (`--metrics-listen`) is refused with the way that works.
#[test]
fn slurm_tasks_push_their_live_metrics_to_a_pushgateway() {
    let _machine = common::shared();
    let Some(c) = Cluster::start() else { return };
    let Some((_gateway, gw)) = crate::live::pushgateway(c.root()) else {
        return;
    };
    let yaml = c.yaml(
        "pushed.yaml",
        &study_yaml(
            "pushed",
            2,
            4,
            "study_execution: {n_cycles: 2, experiment_gap_seconds: 0, cycle_gap_seconds: 0, \
             executor: {slurm: {time: \"00:10:00\"}}}\n",
        ),
    );
    let o = c.run_into(&yaml, &c.results(), &["--metrics-listen", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("use --metrics-push"));
    c.submit(
        &yaml,
        &[
            "--quiet",
            "--metrics-push",
            &format!("http://127.0.0.1:{gw}"),
        ],
    );
    c.wait_idle(Duration::from_secs(240));
    let dir = c.only_study();
    let m = manifest(&dir);
    assert_eq!(m.status, StudyStatus::Completed, "{:#?}", m.experiments);
    let (status, text) = crate::live::get(gw, "/metrics").unwrap();
    assert_eq!(status, 200);
    let study = format!("study=\"{}\"", dir.file_name().unwrap().to_string_lossy());
    for e in &m.experiments {
        let r: llem_results::ExperimentResult =
            read(&dir.join(&e.cell_dir).join(llem_results::layout::RESULT));
        let measured_j: f64 = r.phases.iter().filter_map(|p| p.energy_j).sum();
        let cell = format!("cell=\"{}\"", e.index);
        let pushed: f64 = crate::live::exposed(&text, "hw_energy_joules_total", &[&study, &cell])
            .iter()
            .sum();
        assert!(
            (pushed - measured_j).abs() <= 0.1 * measured_j + 0.5,
            "cell {}: pushed {pushed} J, measured {measured_j} J\n{text}",
            e.index
        );
        let requests = crate::live::exposed(
            &text,
            "llem_requests_total",
            &[&cell, "outcome=\"success\""],
        );
        assert_eq!(requests, [2.0], "cell {}", e.index);
    }
}
