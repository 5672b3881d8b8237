//! Studies end to end with the real `llem` binary and the real SmolLM2 model: every cell a
//! child process, the manifest, study_result.json, kill -9 and resume, crashing and hanging
//! cells, the circuit breaker, the wall-clock limit, device locks, drift, and the schedule.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use llem_results::{CellStatus, ExperimentResult, Manifest, StudyResult, StudyStatus};
use llem_study::supervise::group_members;

use crate::common;
use common::assets;

const MODEL: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// Kills a spawned runner if the test fails before it is waited for (its cells follow it).
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A sandbox: its own HOME, cache (lock files), results directory and no sensors but the
/// estimate, so studies in parallel tests do not see each other.
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

    fn results(&self) -> PathBuf {
        self.path().join("results")
    }

    fn yaml(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_llem"));
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("XDG_CACHE_HOME", self.path().join("cache"))
            .env("LLEM_CONFIG_PATH", self.path().join("no-user-config.yaml"))
            .env("LLEM_ASSETS", assets())
            .env("LLEM_POWERCAP_ROOT", self.path().join("powercap"))
            .env("LLEM_SYSFS_ROOT", self.path().join("sys"))
            .args(args);
        c
    }

    fn run(&self, yaml: &Path, extra: &[&str]) -> Output {
        let out = self.results();
        let mut args = vec!["run", yaml.to_str().unwrap(), "-o", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        self.cmd(&args).output().unwrap()
    }

    fn spawn(&self, yaml: &Path, extra: &[&str]) -> Child {
        let out = self.results();
        let mut args = vec!["run", yaml.to_str().unwrap(), "-o", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        self.cmd(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }

    fn study_dirs(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.results())
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    }

    fn only_study(&self) -> PathBuf {
        let d = self.study_dirs();
        assert_eq!(d.len(), 1, "{d:?}");
        d[0].clone()
    }
}

fn manifest(dir: &Path) -> Manifest {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap()
}

fn try_manifest(dir: &Path) -> Option<Manifest> {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).ok()?).ok()
}

fn study_result(dir: &Path) -> StudyResult {
    serde_json::from_str(&std::fs::read_to_string(dir.join("study_result.json")).unwrap()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A small synthetic workload; `extra` adds YAML lines (sweep, study_execution).
fn study_yaml(name: &str, prompts: u32, out_tokens: u32, extra: &str) -> String {
    format!(
        "name: {name}\nmodel: {MODEL}\n\
         dataset: {{source: synthetic, n_prompts: {prompts}, synthetic: {{input_tokens: 16, output_tokens: {out_tokens}}}}}\n\
         warmup: {{enabled: false}}\nbaseline: {{enabled: false}}\n{extra}"
    )
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &Child, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
}

#[test]
fn a_williams_ordered_study_runs_every_cell_and_its_records_agree() {
    let _serial = common::exclusive();
    let sb = Sandbox::new();
    let yaml = sb.yaml(
        "sweep.yaml",
        &study_yaml(
            "williams",
            3,
            6,
            "sweep:\n  llamacpp.batch_size: [1, 2, 3]\n\
             study_execution: {n_cycles: 3, experiment_order: latin_square, \
             experiment_gap_seconds: 0.1, cycle_gap_seconds: 0.2}\n",
        ),
    );
    // The plan, as --dry-run prints it.
    let dry = sb.run(&yaml, &["--dry-run", "--json"]);
    assert!(dry.status.success(), "{}", stderr(&dry));
    let plan: serde_json::Value = serde_json::from_slice(&dry.stdout).unwrap();
    let planned: Vec<(String, u64)> = plan["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["config_hash"].as_str().unwrap().to_string(),
                r["cycle"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(planned.len(), 9);

    let o = sb.run(&yaml, &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("mean ± 95 % CI over cycles"), "{err}");
    assert!(
        err.contains("study completed: 9 of 9 cells completed"),
        "{err}"
    );

    let dir = sb.only_study();
    let m = manifest(&dir);
    assert_eq!(m.status, StudyStatus::Completed);
    assert_eq!(
        m.study_design_hash,
        plan["study_design_hash"].as_str().unwrap()
    );
    // Execution order recorded in the manifest is the plan's Williams order, and the cells ran
    // in that order (start times increase along it).
    let recorded: Vec<(String, u64)> = m
        .experiments
        .iter()
        .map(|e| (e.config_hash.clone(), u64::from(e.cycle)))
        .collect();
    assert_eq!(recorded, planned);
    let starts: Vec<&String> = m
        .experiments
        .iter()
        .map(|e| e.started_at.as_ref().unwrap())
        .collect();
    assert!(starts.windows(2).all(|w| w[0] < w[1]), "{starts:?}");
    assert_eq!(
        (
            m.summary.total_experiments,
            m.summary.completed,
            m.summary.failed
        ),
        (9, 9, 0)
    );
    assert_eq!(m.summary.unique_configurations, Some(3));
    assert!(m.end_time.is_some() && m.runner_pid.is_none());
    // What the study spent in all (every phase of every cell) holds its windows' energy.
    let lifecycle = m.summary.total_lifecycle_energy_j.unwrap();
    assert!(lifecycle > m.summary.total_energy_j, "{lifecycle} J");
    assert!(
        m.experiments
            .iter()
            .all(|e| e.lifecycle_energy_joules.unwrap() >= e.energy_joules.unwrap()),
        "{:?}",
        m.experiments
            .iter()
            .map(|e| (e.lifecycle_energy_joules, e.energy_joules))
            .collect::<Vec<_>>()
    );
    assert!(err.contains("the study used"), "{err}");

    // Every cell's manifest figures are its result's; each ran in its own process.
    let mut pids = std::collections::HashSet::new();
    let mut energy = 0.0;
    for e in &m.experiments {
        assert_eq!(e.status, CellStatus::Completed);
        assert_eq!(e.attempts, 1);
        let cell = dir.join(&e.cell_dir);
        // Seed 001: each manifest entry carries its resolved configuration, the one the cell
        // wrote as effective_config.json.
        let effective: serde_json::Value =
            serde_json::from_slice(&std::fs::read(cell.join("effective_config.json")).unwrap())
                .unwrap();
        assert_eq!(e.config.as_ref().unwrap().to_value().unwrap(), effective);
        for f in [
            "result.json",
            "effective_config.json",
            "cell.log",
            "cell_spec.json",
        ] {
            assert!(cell.join(f).is_file(), "{} lacks {f}", cell.display());
        }
        let r: ExperimentResult = serde_json::from_str(
            &std::fs::read_to_string(dir.join(e.result_file.as_ref().unwrap())).unwrap(),
        )
        .unwrap();
        assert_eq!(r.measurement_config_hash, e.config_hash);
        assert_eq!(e.energy_joules, Some(r.total_energy_j));
        assert_eq!(e.throughput_tok_s, Some(r.avg_tokens_per_second));
        assert_eq!(e.mj_per_tok, r.mj_per_tok_total);
        energy += r.total_energy_j;
        let spec: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(cell.join("cell_spec.json")).unwrap())
                .unwrap();
        assert_eq!(spec["cycle"].as_u64(), Some(u64::from(e.cycle)));
        pids.insert(r.experiment_id.clone());
    }
    assert_eq!(pids.len(), 9, "each cell has its own experiment id");
    assert!((m.summary.total_energy_j - energy).abs() < 1e-6);

    // study_result.json: the results in order, and statistics recomputed by hand.
    let sr = study_result(&dir);
    assert_eq!(sr.status, StudyStatus::Completed);
    assert_eq!(sr.experiments.len(), 9);
    assert_eq!(sr.result_files.len(), 9);
    assert_eq!(sr.statistics.len(), 3);
    for c in &sr.statistics {
        let vals: Vec<f64> = sr
            .experiments
            .iter()
            .filter(|r| r.measurement_config_hash == c.config_hash)
            .map(|r| r.avg_tokens_per_second)
            .collect();
        assert_eq!(vals.len(), 3);
        let mean = vals.iter().sum::<f64>() / 3.0;
        let sd = (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
        let s = c.metric("avg_tokens_per_second").unwrap();
        assert_eq!(s.n, 3);
        assert!((s.mean - mean).abs() < 1e-9);
        // t(0.975, 2) = 4.302653.
        assert!((s.ci95_half_width.unwrap() - 4.302_653 * sd / 3f64.sqrt()).abs() < 1e-4);
        assert!(c.metric("mj_per_tok_total").is_some());
    }
    // The study artefacts.
    let a = dir.join("_study-artefacts");
    for f in [
        "study.yaml",
        "plan.json",
        "skipped_experiments.json",
        "equivalence_groups.json",
        "environment.json",
    ] {
        assert!(a.join(f).is_file(), "missing {f}");
    }
    assert_eq!(
        std::fs::read_to_string(a.join("study.yaml")).unwrap(),
        std::fs::read_to_string(&yaml).unwrap()
    );
}

#[test]
fn kill_9_of_the_runner_leaves_no_orphan_and_resume_finishes_without_rerunning() {
    let _serial = common::exclusive();
    let sb = Sandbox::new();
    let yaml = sb.yaml(
        "k.yaml",
        &study_yaml(
            "kill9",
            12,
            48,
            "sweep:\n  llamacpp.batch_size: [1, 4]\n\
             study_execution: {n_cycles: 2, experiment_order: interleave, \
             experiment_gap_seconds: 0, cycle_gap_seconds: 0}\n",
        ),
    );
    let mut child = Reaper(sb.spawn(&yaml, &[]));
    let dir = wait_for("the study directory", Duration::from_secs(60), || {
        sb.study_dirs().into_iter().next()
    });
    // Wait until the first cell completed and the second is running.
    let (running_pid, first) = wait_for("a second cell running", Duration::from_secs(120), || {
        let m = try_manifest(&dir)?;
        let first = m.experiments.first()?.clone();
        let second = m.experiments.get(1)?;
        (first.status == CellStatus::Completed && second.status == CellStatus::Running)
            .then_some(())?;
        Some((second.pid?, first))
    });
    assert!(
        !group_members(running_pid).is_empty(),
        "the cell runs in its own group"
    );
    signal(&child.0, nix::sys::signal::Signal::SIGKILL);
    child.0.wait().unwrap();
    // The cell notices its runner is gone and takes its whole group down at once, long before
    // its few seconds of work would have ended it anyway.
    wait_for("the orphaned cell to exit", Duration::from_secs(2), || {
        group_members(running_pid).is_empty().then_some(())
    });
    let m = manifest(&dir);
    assert_eq!(
        m.status,
        StudyStatus::Running,
        "a killed runner cannot write its end"
    );
    assert_eq!(m.experiments[1].status, CellStatus::Running);
    // `results list` does not believe the manifest: the runner's lock is free.
    let listed = sb
        .cmd(&["results", "list", sb.results().to_str().unwrap()])
        .output()
        .unwrap();
    let listed = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(
        listed.contains("(interrupted: its runner is gone, --resume continues it"),
        "{listed}"
    );

    // What a writer killed mid-write would have left; and a study_result.json that cannot
    // be written (a directory in its place).
    std::fs::write(dir.join(".manifest.json.tmp-999999"), "{\"half\":").unwrap();
    let cell0 = dir.join(&m.experiments[0].cell_dir);
    std::fs::write(cell0.join(".result.json.tmp-999998"), "{").unwrap();
    let blocker = dir.join("study_result.json");
    std::fs::create_dir_all(blocker.join("occupied")).unwrap();
    let o = sb.run(&yaml, &["--resume"]);
    assert_ne!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("study_result.json"), "{}", stderr(&o));
    assert!(!dir.join(".manifest.json.tmp-999999").exists());
    assert!(!cell0.join(".result.json.tmp-999998").exists());
    let m = manifest(&dir);
    assert_eq!(
        m.status,
        StudyStatus::Interrupted,
        "not ended without its result"
    );
    assert_eq!(m.summary.completed, 4);
    std::fs::remove_dir_all(&blocker).unwrap();

    let o = sb.run(&yaml, &["--resume"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("resuming 'kill9'"), "{}", stderr(&o));
    assert_eq!(sb.study_dirs(), vec![dir.clone()], "resumed in place");
    let m = manifest(&dir);
    assert_eq!(m.status, StudyStatus::Completed);
    assert_eq!(m.summary.completed, 4);
    // The completed cell was kept as it was, not run again.
    assert_eq!(m.experiments[0], first);
    assert_eq!(m.experiments[0].attempts, 1);
    // The killed one ran again; its first attempt is set aside with its log.
    assert_eq!(m.experiments[1].attempts, 2);
    let aside = dir.join(format!("{}.attempt1", m.experiments[1].cell_dir));
    assert!(aside.join("cell.log").is_file(), "{}", aside.display());
    assert_eq!(study_result(&dir).experiments.len(), 4);
    // Nothing left to resume.
    let again = sb.run(&yaml, &["--resume"]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("no study named 'kill9' to resume"));
}

/// A manifest the disk refuses (here: a directory where its temporary file goes, as full or
/// read-only storage refuses it) while the study runs: the study goes on with its cells, but
/// it does not end as "completed" with exit 0 and a manifest stuck at `running`; it fails
/// naming the file, and --resume repairs the record once the disk takes it again.
#[test]
fn a_manifest_the_disk_refuses_fails_the_study_and_resume_repairs_it() {
    let _serial = common::exclusive();
    let sb = Sandbox::new();
    let yaml = sb.yaml(
        "m.yaml",
        &format!(
            "name: refused\nmodel: {MODEL}\n\
             dataset: {{source: synthetic, n_prompts: 2, synthetic: {{input_tokens: 16, output_tokens: 8}}}}\n\
             warmup: {{n_warmup: 1, thermal_floor_seconds: 0}}\nbaseline: {{enabled: false}}\n\
             sweep:\n  llamacpp.batch_size: [1, 2]\n\
             study_execution: {{n_cycles: 1, experiment_gap_seconds: 0, cycle_gap_seconds: 0}}\n"
        ),
    );
    let out = sb.results();
    // Its output to a file: a pipe nobody reads until the end would fill and stop it.
    let log = sb.path().join("runner.log");
    let mut child = sb
        .cmd(&["run", yaml.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    let dir = wait_for("the study directory", Duration::from_secs(60), || {
        sb.study_dirs().into_iter().next()
    });
    wait_for("the cell running", Duration::from_secs(120), || {
        let m = try_manifest(&dir)?;
        (m.experiments.first()?.status == CellStatus::Running).then_some(())
    });
    let blocker = dir.join(format!(".manifest.json.tmp-{pid}"));
    std::fs::create_dir_all(blocker.join("occupied")).unwrap();
    let status = child.wait().unwrap();
    let err = std::fs::read_to_string(&log).unwrap();
    assert_ne!(status.code(), Some(0), "{err}");
    assert!(err.contains("manifest.json"), "{err}");
    assert!(!err.contains("study completed"), "{err}");
    assert_eq!(
        manifest(&dir).status,
        StudyStatus::Running,
        "the last manifest that could be written"
    );
    std::fs::remove_dir_all(&blocker).unwrap();
    let o = sb.run(&yaml, &["--resume"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m = manifest(&dir);
    assert_eq!(m.status, StudyStatus::Completed);
    assert_eq!(m.summary.completed, 2);
    let sr = study_result(&dir);
    assert_eq!(sr.experiments.len(), 2);
    // The plan's warning reached the cell's result through its spec.
    assert!(
        sr.experiments[0]
            .measurement_warnings
            .iter()
            .any(|w| w.contains("thermal_floor_seconds is 0 s")),
        "{:?}",
        sr.experiments[0].measurement_warnings
    );
}

/// A file with a GGUF name that llama.cpp cannot load: the engine fails, the cell fails.
fn broken_model(sb: &Sandbox, name: &str) -> String {
    let p = sb.path().join(name);
    std::fs::write(&p, b"GGUF\x03\x00\x00\x00 this is not a model").unwrap();
    p.to_str().unwrap().to_string()
}

#[test]
fn the_circuit_breaker_trips_cools_down_and_its_probe_closes_it() {
    let _serial = common::exclusive();
    let sb = Sandbox::new();
    let broken = broken_model(&sb, "broken.gguf");
    let yaml = sb.yaml(
        "b.yaml",
        &study_yaml(
            "probe",
            2,
            4,
            &format!(
                "sweep:\n  model: [{broken}, {MODEL}]\n\
                 study_execution: {{n_cycles: 2, experiment_order: sequential, \
                 experiment_gap_seconds: 0, cycle_gap_seconds: 0, \
                 max_consecutive_failures: 2, circuit_breaker_cooldown_seconds: 0.5}}\n"
            ),
        ),
    );
    let o = sb.run(&yaml, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    let m = manifest(&sb.only_study());
    let st: Vec<CellStatus> = m.experiments.iter().map(|e| e.status).collect();
    assert_eq!(
        st,
        [
            CellStatus::Failed,
            CellStatus::Failed,
            CellStatus::Completed,
            CellStatus::Completed
        ]
    );
    // Honest final status: cells failed, so not "completed".
    assert_eq!(m.status, StudyStatus::Failed);
    let e = &m.experiments[0];
    assert_eq!(e.error_type.as_deref(), Some("EngineError"), "{e:?}");
    // llama.cpp's own reason, not the bindings' bare "null result".
    let why = e.error_message.as_deref().unwrap_or_default();
    assert!(
        why.contains("failed to read header") && !why.contains("null result"),
        "{why}"
    );
    assert!(
        m.summary
            .warnings
            .iter()
            .any(|w| w.contains("circuit breaker open"))
    );
    assert!(err.contains("circuit breaker open"), "{err}");
}

#[test]
fn a_failed_probe_aborts_and_fail_fast_stops_at_the_first_failure() {
    let _serial = common::exclusive();
    let sb = Sandbox::new();
    let models: Vec<String> = (1..=3)
        .map(|i| broken_model(&sb, &format!("broken{i}.gguf")))
        .collect();
    let yaml = sb.yaml(
        "a.yaml",
        &study_yaml(
            "abort",
            2,
            4,
            &format!(
                "sweep:\n  model: [{}]\n\
                 study_execution: {{n_cycles: 2, experiment_order: sequential, \
                 experiment_gap_seconds: 0, cycle_gap_seconds: 0, \
                 max_consecutive_failures: 2, circuit_breaker_cooldown_seconds: 0.2}}\n",
                models.join(", ")
            ),
        ),
    );
    let o = sb.run(&yaml, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let m = manifest(&sb.only_study());
    assert_eq!(m.status, StudyStatus::CircuitBreaker);
    // Two failures trip it, the probe fails, the other three are skipped.
    assert_eq!(
        (m.summary.failed, m.summary.skipped, m.summary.completed),
        (3, 3, 0)
    );
    assert!(
        m.experiments[3..]
            .iter()
            .all(|e| e.status == CellStatus::Skipped && e.attempts == 0)
    );
    assert_eq!(
        study_result(&sb.only_study()).status,
        StudyStatus::CircuitBreaker
    );

    std::fs::remove_dir_all(sb.results()).unwrap();
    let o = sb.run(&yaml, &["--fail-fast"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let m = manifest(&sb.only_study());
    assert_eq!(m.status, StudyStatus::CircuitBreaker);
    assert_eq!((m.summary.failed, m.summary.skipped), (1, 5));
}

#[test]
fn a_hanging_cell_times_out_and_the_study_goes_on_then_the_wall_clock_stops_it() {
    let _serial = common::exclusive();
    let sb = Sandbox::new();
    // batch_size 1 with 400 x 256 tokens runs for minutes: far past an 8 s cell timeout.
    let yaml = sb.yaml(
        "t.yaml",
        &format!(
            "name: hang\nmodel: {MODEL}\nwarmup: {{enabled: false}}\nbaseline: {{enabled: false}}\n\
             dataset: {{source: synthetic, n_prompts: 2, synthetic: {{input_tokens: 16, output_tokens: 4}}}}\n\
             experiments:\n\
             - dataset: {{source: synthetic, n_prompts: 400, synthetic: {{input_tokens: 16, output_tokens: 256}}}}\n\
             - llamacpp: {{batch_size: 2}}\n\
             study_execution: {{n_cycles: 1, experiment_order: sequential, \
             experiment_gap_seconds: 0, cycle_gap_seconds: 0, experiment_timeout_seconds: 8}}\n"
        ),
    );
    let o = sb.run(&yaml, &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let m = manifest(&sb.only_study());
    assert_eq!(m.status, StudyStatus::Failed);
    let hung = &m.experiments[0];
    assert_eq!(hung.status, CellStatus::Failed);
    assert_eq!(hung.error_type.as_deref(), Some("Timeout"), "{hung:?}");
    assert!(
        hung.error_message
            .as_deref()
            .unwrap()
            .contains("experiment_timeout_seconds = 8"),
        "{hung:?}"
    );
    assert!(hung.elapsed_seconds.unwrap() < 30.0);
    assert_eq!(
        m.experiments[1].status,
        CellStatus::Completed,
        "the study went on"
    );

    // Wall-clock limit of 3.6 s: the long cell is stopped at the limit and the rest skipped.
    std::fs::remove_dir_all(sb.results()).unwrap();
    let o = sb.run(&yaml, &["--timeout", "0.001"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let m = manifest(&sb.only_study());
    assert_eq!(m.status, StudyStatus::TimedOut);
    assert_eq!(m.experiments[0].status, CellStatus::Interrupted);
    assert_eq!(
        m.experiments[0].error_type.as_deref(),
        Some("WallClockTimeout")
    );
    assert_eq!(m.experiments[1].status, CellStatus::Skipped);
    assert_eq!(study_result(&sb.only_study()).status, StudyStatus::TimedOut);
}

#[test]
fn a_second_study_on_the_same_devices_fails_fast_naming_the_holder() {
    let _serial = common::exclusive();
    let sb = Sandbox::new();
    let long = study_yaml(
        "holder",
        400,
        256,
        "sweep:\n  llamacpp.batch_size: [1, 2]\nstudy_execution: {n_cycles: 1}\n",
    );
    let yaml = sb.yaml("h.yaml", &long);
    let mut first = Reaper(sb.spawn(&yaml, &["--no-gaps"]));
    let dir = wait_for(
        "the first study to run a cell",
        Duration::from_secs(60),
        || {
            let d = sb.study_dirs().into_iter().next()?;
            let m = try_manifest(&d)?;
            (m.summary.running == 1).then_some(d)
        },
    );
    let other = sb.yaml(
        "o.yaml",
        &study_yaml("other", 2, 4, "study_execution: {n_cycles: 2}\n"),
    );
    let t = Instant::now();
    let o = sb.run(&other, &["--no-gaps"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(t.elapsed() < Duration::from_secs(20), "fails fast");
    assert!(
        err.contains(&format!("cpu is locked by PID {}", first.0.id())) && err.contains("holder"),
        "{err}"
    );
    assert!(err.contains("--no-lock"), "{err}");
    assert_eq!(
        sb.study_dirs(),
        vec![dir.clone()],
        "no directory for the refused study"
    );
    // A single experiment takes the same locks: refused too, before creating anything.
    let single = sb.yaml(
        "single.yaml",
        &format!(
            "name: single\nmodel: {MODEL}\n\
             dataset: {{source: synthetic, n_prompts: 2, synthetic: {{input_tokens: 8, output_tokens: 4}}}}\n\
             warmup: {{enabled: false}}\nbaseline: {{enabled: false}}\n"
        ),
    );
    let o = sb.run(&single, &[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("cpu is locked by PID {}", first.0.id())),
        "{err}"
    );
    assert_eq!(sb.study_dirs(), vec![dir.clone()], "nothing created");
    // With --wait it waits instead, saying who holds the devices, and runs once they are free.
    let log = sb.path().join("waiter.log");
    let results = sb.results();
    let mut waiter = Reaper(
        sb.cmd(&[
            "run",
            single.to_str().unwrap(),
            "-o",
            results.to_str().unwrap(),
            "--wait",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap(),
    );
    let holder = format!("waiting for cpu, held by PID {}", first.0.id());
    wait_for(
        "the waiting run to say who holds the devices",
        Duration::from_secs(60),
        || {
            let said = std::fs::read_to_string(&log).ok()?;
            said.contains(&holder).then_some(())
        },
    );
    assert_eq!(
        sb.study_dirs(),
        vec![dir.clone()],
        "nothing created while waiting"
    );

    // The first study is stopped with Ctrl-C: its cell is terminated and marked interrupted.
    signal(&first.0, nix::sys::signal::Signal::SIGINT);
    let status = first.0.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    let m = manifest(&dir);
    assert_eq!(m.status, StudyStatus::Interrupted);
    assert_eq!(m.experiments[0].status, CellStatus::Interrupted);
    assert_eq!(m.experiments[1].status, CellStatus::Pending);
    // The waiting run took the free devices and measured.
    let status = waiter.0.wait().unwrap();
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(status.code(), Some(0), "{said}");
    assert_eq!(sb.study_dirs().len(), 2, "{said}");

    // The design changed since: resume refuses and says what drifted.
    std::fs::write(&yaml, long.replace("n_prompts: 400", "n_prompts: 300")).unwrap();
    let o = sb.run(&yaml, &["--resume"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("study design changed"), "{err}");
    assert!(
        err.contains("dataset.n_prompts: 400 then, 300 now"),
        "{err}"
    );
}

#[test]
fn schedule_every_runs_a_new_study_each_time() {
    let _serial = common::exclusive();
    let sb = Sandbox::new();
    let yaml = sb.yaml(
        "s.yaml",
        &study_yaml("sched", 2, 4, "study_execution: {n_cycles: 1}\n"),
    );
    let out = sb.results();
    let o = sb
        .cmd(&[
            "schedule",
            yaml.to_str().unwrap(),
            "--every",
            "1s",
            "--runs",
            "2",
            "-o",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let dirs = sb.study_dirs();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    for d in dirs {
        assert_eq!(manifest(&d).status, StudyStatus::Completed);
    }
}

/// A file's enabled `schedule:` block (the Python llem's daemon mode) is honoured by `llem run`:
/// it runs the study again at the interval until the total duration is spent, then says so.
#[test]
fn a_schedule_block_in_the_file_runs_until_its_total_duration() {
    let _serial = common::exclusive();
    let sb = Sandbox::new();
    let yaml = sb.yaml(
        "s.yaml",
        &study_yaml(
            "sched",
            2,
            4,
            "study_execution: {n_cycles: 1}\n\
             schedule: {enabled: true, interval: 1s, total_duration: 3s}\n",
        ),
    );
    let out = sb.results();
    let o = sb
        .cmd(&["run", yaml.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .output()
        .unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("llem: schedule every 1s, for 3s"), "{err}");
    let dirs = sb.study_dirs();
    assert!(
        err.contains(&format!(
            "schedule over (its total duration is spent) after {} runs",
            dirs.len()
        )),
        "{err}"
    );
    assert!(!dirs.is_empty());
    for d in dirs {
        assert_eq!(manifest(&d).status, StudyStatus::Completed);
    }
}

/// A search study on the embedded engine: it shows its budget in the dry run, proposes no
/// more runs than the budget, survives `kill -9` mid-search (`--resume` keeps what was
/// measured and goes on with the same search), and writes its answer and why it stopped.
#[test]
fn a_search_study_keeps_its_budget_resumes_after_kill_9_and_writes_its_answer() {
    let _serial = common::exclusive();
    let sb = Sandbox::new();
    let yaml = sb.yaml(
        "s.yaml",
        &study_yaml(
            "search",
            4,
            8,
            "sweep:\n  llamacpp.batch_size: [1, 2, 4, 8]\n  llamacpp.n_threads: [1, 2]\n\
             search:\n  objective: mj_per_tok_total\n  constraints: [\"itl_p90_ms <= 5000\"]\n  \
             budget: 9\n  seed: 3\n\
             study_execution: {n_cycles: 2, experiment_gap_seconds: 0, cycle_gap_seconds: 0}\n",
        ),
    );
    let dry = sb
        .cmd(&["run", yaml.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&dry.stdout);
    assert!(
        text.contains("minimise mj_per_tok_total subject to itl_p90_ms <= 5000; at most 9 runs of the grid's 16 runs"),
        "{text}"
    );

    let mut child = Reaper(sb.spawn(&yaml, &[]));
    let dir = wait_for("the study directory", Duration::from_secs(60), || {
        sb.study_dirs().into_iter().next()
    });
    let before = wait_for(
        "three runs measured, a fourth running",
        Duration::from_secs(180),
        || {
            let m = try_manifest(&dir)?;
            let done = m
                .experiments
                .iter()
                .filter(|e| e.status == CellStatus::Completed)
                .count();
            let running = m
                .experiments
                .iter()
                .any(|e| e.status == CellStatus::Running);
            (done >= 3 && running).then_some(m)
        },
    );
    signal(&child.0, nix::sys::signal::Signal::SIGKILL);
    child.0.wait().unwrap();
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("search.json")).unwrap()).unwrap();
    assert_eq!(state["phase"], "explore");
    assert!(state["stop_reason"].is_null());
    assert!(state["evaluations"].as_array().unwrap().len() >= 3);

    let o = sb.run(&yaml, &["--resume"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("search: "), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("llem: resuming search 'search' (")
            && stderr(&o).contains("among 8 configurations, at most 9 runs;"),
        "{}",
        stderr(&o)
    );
    let m = manifest(&dir);
    assert_eq!(m.status, StudyStatus::Completed);
    assert!(
        m.experiments.len() <= 9,
        "{} runs for a budget of 9",
        m.experiments.len()
    );
    // What was measured before the kill is kept as it was; the rest of the search follows it.
    for (a, b) in before
        .experiments
        .iter()
        .zip(&m.experiments)
        .filter(|(a, _)| a.status == CellStatus::Completed)
    {
        assert_eq!(a, b);
    }
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("search.json")).unwrap()).unwrap();
    assert_eq!(s["phase"], "done");
    let reason = s["stop_reason"].as_str().unwrap();
    assert!(
        ["identified", "budget_spent", "unresolved"].contains(&reason),
        "{reason}"
    );
    assert_eq!(s["grid_runs"], 16);
    assert_eq!(s["budget_runs"], 9);
    let used = s["runs_used"].as_u64().unwrap();
    assert!(used <= 9 && used as usize == m.experiments.len(), "{used}");
    assert_eq!(s["evaluations"].as_array().unwrap().len() as u64, used);
    let candidates = s["candidates"].as_array().unwrap();
    assert_eq!(candidates.len(), 8);
    // Every candidate has the model's prediction of both figures, measured or not.
    for c in candidates {
        for f in ["mj_per_tok_total", "itl_p90_ms"] {
            let p = &c["predicted"][f];
            assert!(
                p["low"].as_f64().unwrap() <= p["high"].as_f64().unwrap(),
                "{c}"
            );
        }
    }
    let answer = &s["answer"];
    assert!(answer["objective_mean"].as_f64().unwrap() > 0.0, "{answer}");
    assert!(answer["runs"].as_u64().unwrap() >= 1);
    let axes: Vec<&str> = s["axes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(axes, ["llamacpp.batch_size", "llamacpp.n_threads"]);
    assert!(!study_result(&dir).statistics.is_empty());
    let shown = sb
        .cmd(&["results", "show", dir.to_str().unwrap()])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout).into_owned();
    assert!(
        shown.contains("search: minimise mj_per_tok_total subject to itl_p90_ms <= 5000: ")
            && shown.contains("  answer     llamacpp.batch_size=")
            && shown.contains(" of a budget of 9 (the whole study: 16)"),
        "{shown}"
    );
    // The report leads with the search: its answer, the candidate map, every candidate.
    let report = sb.path().join("report.html");
    let o = sb
        .cmd(&[
            "report",
            dir.to_str().unwrap(),
            "-o",
            report.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(
        html.contains("<section id=\"search\">")
            && html.contains("<p id=\"search-answer\">Answer: llamacpp.batch_size=")
            && html.contains("id=\"search-map\"")
            && html.contains("itl_p90_ms &lt;= 5000"),
        "{html}"
    );
    let rows = html.matches("<tr class=").count();
    assert!(rows >= 8, "every candidate has a row: {rows}");
}
