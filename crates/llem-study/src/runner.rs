//! The study loop: cells in the plan's order, each in its own process, with gaps, the circuit
//! breaker, the wall-clock limit, Ctrl-C, and a manifest checkpoint on every state change.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use llem_config::StudyPlan;
use llem_config::plan::PlannedConfig;
use llem_results::layout;
use llem_results::time::{dir_stamp_utc, iso8601_utc, unix_now_s};
use llem_results::{
    CellStatus, ExperimentResult, Manifest, ManifestEntry, StudyResult, StudyStatus, StudySummary,
};

use crate::breaker::{CircuitBreaker, Verdict};
use crate::locks::{self, DeviceLocks, Holder};
use crate::protocol::{CellMessage, CellSpec};
use crate::supervise::{self, CellEnd, CellLimits, Launcher, StopCause, StopRequest};
use crate::{StudyError, artefacts, cycle_stats, resume};

/// Which study directory to use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ResumeFrom {
    /// Start a new study.
    New,
    /// `--resume`: the most recent unfinished study of this name under the results directory.
    Latest,
    /// `--resume-dir PATH`.
    Dir(PathBuf),
}

/// How to run a study (the plan says what).
#[derive(Clone, Debug)]
pub struct StudyOptions {
    /// How to start a cell process.
    pub launcher: Launcher,
    /// Where study directories go.
    pub results_dir: PathBuf,
    /// New study or resume.
    pub resume: ResumeFrom,
    /// Directory of the device lock files; `None` for `--no-lock`.
    pub lock_dir: Option<PathBuf>,
    /// Devices to lock (`gpu0`, ..., or `cpu` when the study uses no GPU).
    pub lock_resources: Vec<String>,
    /// `--no-gaps`: no pauses between cells and cycles.
    pub no_gaps: bool,
    /// Between SIGTERM and SIGKILL when a cell is stopped.
    pub kill_grace: Duration,
    /// Telemetry sampling interval handed to each cell.
    pub sampling_interval: Duration,
    /// llem version for the manifest.
    pub llem_version: String,
    /// Environment snapshot for `_study-artefacts/`.
    pub environment: llem_results::EnvironmentSnapshot,
    /// Host name, for the manifest and the lock holder.
    pub host: String,
    /// Ctrl-C / SIGTERM count: 1 stops after terminating the current cell, 2 kills it at once.
    pub interrupts: Arc<AtomicUsize>,
}

/// Why the runner is pausing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WaitReason {
    /// `experiment_gap_seconds`.
    ExperimentGap,
    /// `cycle_gap_seconds`.
    CycleGap,
    /// The circuit breaker's cooldown before its probe.
    Cooldown,
}

/// What happens, for a display.
#[derive(Debug)]
pub enum StudyEvent<'a> {
    /// The study (or its resumption) starts.
    Started {
        /// Study directory.
        dir: &'a Path,
        /// The manifest.
        manifest: &'a Manifest,
        /// Resumed rather than new.
        resumed: bool,
    },
    /// A cell's process starts.
    CellStarted {
        /// Its entry (status running).
        entry: &'a ManifestEntry,
        /// The whole manifest.
        manifest: &'a Manifest,
    },
    /// A cell's progress line.
    Cell {
        /// Its entry.
        entry: &'a ManifestEntry,
        /// The line.
        message: &'a CellMessage,
    },
    /// A cell ended (completed, failed or interrupted).
    CellFinished {
        /// Its entry.
        entry: &'a ManifestEntry,
        /// The whole manifest.
        manifest: &'a Manifest,
    },
    /// A pause begins.
    Waiting {
        /// Why.
        reason: WaitReason,
        /// How long, s.
        seconds: f64,
    },
    /// Something to tell the user.
    Note(&'a str),
}

/// Receives [`StudyEvent`]s.
pub trait Observer {
    /// One event.
    fn event(&mut self, e: StudyEvent<'_>);
}

/// A study that ran (to the end or until it was stopped).
#[derive(Clone, Debug)]
pub struct StudyOutcome {
    /// Study directory.
    pub dir: PathBuf,
    /// Final manifest.
    pub manifest: Manifest,
    /// Final record (also written as `study_result.json`).
    pub result: StudyResult,
}

/// Why the loop stopped early.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Halt {
    User,
    WallClock,
    Breaker,
}

struct Checkpoint {
    path: PathBuf,
    manifest: Manifest,
    session_start: Instant,
    wall_before_s: f64,
    warned: bool,
}

impl Checkpoint {
    fn save(&mut self) {
        self.manifest.recount();
        self.manifest.summary.total_wall_time_s =
            self.wall_before_s + self.session_start.elapsed().as_secs_f64();
        if let Err(e) = llem_results::write_json_atomic(&self.path, &self.manifest)
            && !self.warned
        {
            // The cells' own files are intact; a study is not aborted for its checkpoint.
            tracing::warn!("cannot write the manifest: {e}");
            self.warned = true;
        }
    }

    fn entry(&self, i: usize) -> Option<&ManifestEntry> {
        self.manifest.experiments.get(i)
    }

    fn entry_mut(&mut self, i: usize) -> Option<&mut ManifestEntry> {
        self.manifest.experiments.get_mut(i)
    }
}

fn protocol_json(plan: &StudyPlan) -> serde_json::Value {
    let mut v = serde_json::to_value(&plan.execution).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "shuffle_seed_used".into(),
            serde_json::json!(plan.shuffle_seed),
        );
    }
    v
}

fn label_of(pc: &PlannedConfig) -> String {
    if pc.label.is_empty() {
        format!("{} / {}", pc.config.model, pc.config.engine.as_str())
    } else {
        pc.label.clone()
    }
}

/// The manifest of a new study: every run pending, in execution order.
pub fn fresh_manifest(plan: &StudyPlan, llem_version: &str, host: &str) -> Manifest {
    let experiments = plan
        .runs
        .iter()
        .filter_map(|r| {
            let pc = plan.configs.get(r.config)?;
            let hash = pc.digest.short();
            Some(ManifestEntry {
                index: r.index,
                cell_dir: layout::cell_dir_name(
                    r.index,
                    r.cycle,
                    &pc.config.model,
                    pc.config.engine.as_str(),
                    &hash,
                ),
                config_hash: hash,
                config_summary: label_of(pc),
                cycle: r.cycle,
                status: CellStatus::Pending,
                result_file: None,
                log_file: None,
                error_type: None,
                error_message: None,
                started_at: None,
                completed_at: None,
                pid: None,
                attempts: 0,
                elapsed_seconds: None,
                inference_seconds: None,
                energy_joules: None,
                adj_energy_joules: None,
                throughput_tok_s: None,
                mj_per_tok: None,
                mj_per_tok_adjusted: None,
                ttft_p50_ms: None,
            })
        })
        .collect();
    let mut m = Manifest {
        schema_version: llem_results::manifest::MANIFEST_SCHEMA_VERSION.to_string(),
        study_name: plan.study_name.clone(),
        study_design_hash: plan.study_design_hash(),
        llem_version: llem_version.to_string(),
        source_file: plan
            .source
            .as_ref()
            .map(|p| absolute(p).display().to_string()),
        start_time: iso8601_utc(unix_now_s()),
        end_time: None,
        status: StudyStatus::Running,
        runner_pid: Some(std::process::id()),
        host: host.to_string(),
        measurement_protocol: protocol_json(plan),
        experiments,
        summary: StudySummary {
            unique_configurations: Some(plan.configs.len()),
            ..StudySummary::default()
        },
    };
    m.recount();
    m
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StudyError {
    let path = path.to_path_buf();
    move |source| StudyError::Io { what, path, source }
}

/// Holds the study directory's lock for the runner's lifetime; a held lock means "running".
fn lock_study_dir(dir: &Path) -> Result<std::fs::File, StudyError> {
    let path = dir.join(layout::STUDY_LOCK);
    match locks::try_lock_file(&path).map_err(io_err("cannot lock", &path))? {
        Some(f) => Ok(f),
        None => {
            let holder = resume::load_manifest(dir)
                .ok()
                .and_then(|m| m.runner_pid)
                .map_or_else(|| "another process".to_string(), |p| format!("PID {p}"));
            Err(StudyError::StillRunning {
                dir: dir.to_path_buf(),
                holder,
            })
        }
    }
}

fn take_device_locks(
    opts: &StudyOptions,
    plan: &StudyPlan,
    where_: &Path,
) -> Result<Option<DeviceLocks>, StudyError> {
    let Some(dir) = &opts.lock_dir else {
        return Ok(None);
    };
    let holder = Holder {
        pid: std::process::id(),
        host: opts.host.clone(),
        started_at: iso8601_utc(unix_now_s()),
        purpose: format!("study '{}' in {}", plan.study_name, where_.display()),
    };
    Ok(Some(locks::acquire(dir, &opts.lock_resources, &holder)?))
}

/// Where the study lives and what it already did.
struct Prepared {
    dir: PathBuf,
    manifest: Manifest,
    resumed: bool,
    _study_lock: std::fs::File,
    _device_locks: Option<DeviceLocks>,
}

fn prepare(plan: &StudyPlan, opts: &StudyOptions) -> Result<Prepared, StudyError> {
    let fresh = fresh_manifest(plan, &opts.llem_version, &opts.host);
    let stamp = dir_stamp_utc(unix_now_s());
    let resume_dir = match &opts.resume {
        ResumeFrom::New => None,
        ResumeFrom::Latest => Some(resume::find_resumable(
            &opts.results_dir,
            &plan.study_name,
            fresh.source_file.as_deref().map(Path::new),
        )?),
        ResumeFrom::Dir(d) => Some(d.clone()),
    };
    if let Some(dir) = resume_dir {
        let old = resume::load_manifest(&dir)?;
        let study_lock = lock_study_dir(&dir)?;
        if old.study_design_hash != fresh.study_design_hash {
            return Err(StudyError::Drift {
                details: resume::drift_details(&dir, plan),
                dir,
                old: old.study_design_hash,
                new: fresh.study_design_hash,
            });
        }
        let device_locks = take_device_locks(opts, plan, &dir)?;
        let mut manifest = resume::merge(&old, fresh);
        recover_finished_cells(&dir, &old, &mut manifest);
        artefacts::write_resumed(
            &dir.join(layout::STUDY_ARTEFACTS),
            &stamp,
            &opts.environment,
        )?;
        return Ok(Prepared {
            dir,
            manifest,
            resumed: true,
            _study_lock: study_lock,
            _device_locks: device_locks,
        });
    }
    let mut dir = layout::study_dir(&opts.results_dir, &plan.study_name, &stamp);
    // Two studies of one name started in the same second get distinct directories.
    let mut n = 1;
    while dir.exists() {
        n += 1;
        dir = layout::study_dir(&opts.results_dir, &plan.study_name, &format!("{stamp}_{n}"));
    }
    let device_locks = take_device_locks(opts, plan, &dir)?;
    std::fs::create_dir_all(&dir).map_err(io_err("cannot create", &dir))?;
    let study_lock = lock_study_dir(&dir)?;
    artefacts::write_new(&dir.join(layout::STUDY_ARTEFACTS), plan, &opts.environment)?;
    Ok(Prepared {
        dir,
        manifest: fresh,
        resumed: false,
        _study_lock: study_lock,
        _device_locks: device_locks,
    })
}

/// A cell whose result was written just before the runner died (it was `running` in the old
/// manifest, and its `result.json` reads): adopt it rather than measure it again.
fn recover_finished_cells(dir: &Path, old: &Manifest, manifest: &mut Manifest) {
    for e in &mut manifest.experiments {
        let was_running = old.experiments.iter().any(|o| {
            o.config_hash == e.config_hash && o.cycle == e.cycle && o.status == CellStatus::Running
        });
        if !was_running || e.status == CellStatus::Completed {
            continue;
        }
        let rel = format!("{}/{}", e.cell_dir, layout::RESULT);
        if let Some(r) = read_result(&dir.join(&rel)) {
            fill_completed(e, &r, rel, None);
        }
    }
    manifest.recount();
}

fn read_result(path: &Path) -> Option<ExperimentResult> {
    let text = std::fs::read_to_string(path).ok()?;
    serde_json::from_str(&text).ok()
}

fn fill_completed(e: &mut ManifestEntry, r: &ExperimentResult, rel: String, elapsed: Option<f64>) {
    e.status = CellStatus::Completed;
    e.result_file = Some(rel);
    e.error_type = None;
    e.error_message = None;
    e.pid = None;
    e.completed_at
        .get_or_insert_with(|| iso8601_utc(unix_now_s()));
    if elapsed.is_some() {
        e.elapsed_seconds = elapsed;
    }
    e.inference_seconds = Some(r.total_inference_time_sec);
    e.energy_joules = Some(r.total_energy_j);
    e.adj_energy_joules = r.energy_adjusted_j;
    e.throughput_tok_s = Some(r.avg_tokens_per_second);
    e.mj_per_tok = r.mj_per_tok_total;
    e.mj_per_tok_adjusted = r.mj_per_tok_adjusted;
    e.ttft_p50_ms = r.latency_stats.as_ref().and_then(|l| l.ttft_median_ms);
}

/// Moves an earlier attempt's directory aside so the rerun starts clean and its log survives.
fn set_aside(cell: &Path, attempts: u32) -> Result<(), StudyError> {
    if !cell.exists() {
        return Ok(());
    }
    let mut k = attempts.max(1);
    loop {
        let mut name = cell.as_os_str().to_owned();
        name.push(format!(".attempt{k}"));
        let to = PathBuf::from(name);
        if !to.exists() {
            return std::fs::rename(cell, &to).map_err(io_err("cannot move aside", cell));
        }
        k += 1;
    }
}

enum WaitEnd {
    Done,
    Halt(Halt),
}

fn halt_now(opts: &StudyOptions, deadline: Option<Instant>) -> Option<Halt> {
    if opts.interrupts.load(Ordering::SeqCst) > 0 {
        return Some(Halt::User);
    }
    if deadline.is_some_and(|d| Instant::now() >= d) {
        return Some(Halt::WallClock);
    }
    None
}

fn pause(
    seconds: f64,
    reason: WaitReason,
    opts: &StudyOptions,
    deadline: Option<Instant>,
    obs: &mut dyn Observer,
) -> WaitEnd {
    if seconds <= 0.0 || !seconds.is_finite() {
        return WaitEnd::Done;
    }
    obs.event(StudyEvent::Waiting { reason, seconds });
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        if let Some(h) = halt_now(opts, deadline) {
            return WaitEnd::Halt(h);
        }
        std::thread::sleep(Duration::from_millis(50).min(end - Instant::now()));
    }
    WaitEnd::Done
}

/// Runs (or resumes) a study to its end or until it is stopped.
///
/// Errors are for a study that could not run at all (locks held, drift on resume, an
/// unwritable results directory); failing cells are recorded in the manifest instead.
pub fn run_study(
    plan: &StudyPlan,
    opts: &StudyOptions,
    obs: &mut dyn Observer,
) -> Result<StudyOutcome, StudyError> {
    let prepared = prepare(plan, opts)?;
    let dir = prepared.dir.clone();
    let mut cp = Checkpoint {
        path: dir.join(layout::MANIFEST),
        wall_before_s: prepared.manifest.summary.total_wall_time_s,
        manifest: prepared.manifest.clone(),
        session_start: Instant::now(),
        warned: false,
    };
    cp.manifest.status = StudyStatus::Running;
    cp.manifest.end_time = None;
    cp.manifest.runner_pid = Some(std::process::id());
    cp.save();
    obs.event(StudyEvent::Started {
        dir: &dir,
        manifest: &cp.manifest,
        resumed: prepared.resumed,
    });

    let by_hash: HashMap<String, &PlannedConfig> =
        plan.configs.iter().map(|c| (c.digest.short(), c)).collect();
    let exec = &plan.execution;
    let deadline = exec
        .wall_clock_timeout_hours
        .filter(|h| h.is_finite() && *h > 0.0)
        .map(|h| Instant::now() + Duration::from_secs_f64(h * 3600.0));
    let limits = CellLimits {
        timeout: Duration::from_secs_f64(exec.experiment_timeout_seconds.max(0.001)),
        kill_grace: opts.kill_grace,
    };
    let (exp_gap, cycle_gap) = if opts.no_gaps {
        (0.0, 0.0)
    } else {
        (exec.experiment_gap_seconds, exec.cycle_gap_seconds)
    };
    let mut breaker = CircuitBreaker::new(exec.max_consecutive_failures);
    let study_stamp = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("study")
        .to_string();
    let artefacts_dir = dir.join(layout::STUDY_ARTEFACTS);

    let mut halt: Option<Halt> = None;
    let mut previous_cycle: Option<u32> = None;
    let total = cp.manifest.experiments.len();
    for i in 0..total {
        let Some(entry) = cp.entry(i) else { break };
        if entry.status == CellStatus::Completed {
            continue;
        }
        let (hash, cycle) = (entry.config_hash.clone(), entry.cycle);
        if let Some(h) = halt_now(opts, deadline) {
            halt = Some(h);
            break;
        }
        if let Some(prev) = previous_cycle {
            let (gap, reason) = if prev == cycle {
                (exp_gap, WaitReason::ExperimentGap)
            } else {
                (cycle_gap, WaitReason::CycleGap)
            };
            if let WaitEnd::Halt(h) = pause(gap, reason, opts, deadline, obs) {
                halt = Some(h);
                break;
            }
        }
        previous_cycle = Some(cycle);
        let Some(pc) = by_hash.get(&hash) else {
            continue;
        };

        let outcome = match run_one(
            &mut cp,
            i,
            pc,
            &dir,
            &artefacts_dir,
            &study_stamp,
            opts,
            limits,
            deadline,
            obs,
        ) {
            Ok(o) => o,
            Err(e) => {
                // The study cannot go on (llem cannot be started, the disk refuses); the
                // manifest says so, and resume picks it up once that is fixed.
                cp.manifest.status = StudyStatus::Failed;
                cp.manifest.end_time = Some(iso8601_utc(unix_now_s()));
                cp.manifest.runner_pid = None;
                cp.manifest
                    .summary
                    .warnings
                    .push(format!("study stopped: {e}"));
                cp.save();
                return Err(e);
            }
        };
        if let Some(e) = cp.entry(i) {
            obs.event(StudyEvent::CellFinished {
                entry: e,
                manifest: &cp.manifest,
            });
        }
        match outcome {
            CellOutcome::Completed => breaker.record_success(),
            CellOutcome::Stopped(h) => {
                halt = Some(h);
                break;
            }
            CellOutcome::Failed => match breaker.record_failure() {
                Verdict::Continue => {}
                Verdict::Abort => {
                    let msg = if exec.max_consecutive_failures == 1 {
                        "circuit breaker: a cell failed and max_consecutive_failures is 1 \
                         (fail fast); stopping the study"
                            .to_string()
                    } else {
                        "circuit breaker: the probe cell failed too; stopping the study".to_string()
                    };
                    obs.event(StudyEvent::Note(&msg));
                    cp.manifest.summary.warnings.push(msg);
                    halt = Some(Halt::Breaker);
                    break;
                }
                Verdict::Trip => {
                    let msg = format!(
                        "circuit breaker open: {} cells failed in a row; cooling down {:.0} s, \
                         then one probe cell",
                        breaker.consecutive_failures(),
                        exec.circuit_breaker_cooldown_seconds
                    );
                    obs.event(StudyEvent::Note(&msg));
                    cp.manifest.summary.warnings.push(msg);
                    cp.save();
                    if let WaitEnd::Halt(h) = pause(
                        exec.circuit_breaker_cooldown_seconds,
                        WaitReason::Cooldown,
                        opts,
                        deadline,
                        obs,
                    ) {
                        halt = Some(h);
                        break;
                    }
                    breaker.start_probe();
                    // The probe follows the cooldown directly.
                    previous_cycle = None;
                }
            },
        }
    }

    let status = match halt {
        Some(Halt::User) => StudyStatus::Interrupted,
        Some(Halt::WallClock) => StudyStatus::TimedOut,
        Some(Halt::Breaker) => StudyStatus::CircuitBreaker,
        None => {
            if cp
                .manifest
                .experiments
                .iter()
                .all(|e| e.status == CellStatus::Completed)
            {
                StudyStatus::Completed
            } else {
                StudyStatus::Failed
            }
        }
    };
    if matches!(halt, Some(Halt::WallClock | Halt::Breaker)) {
        let why = if halt == Some(Halt::WallClock) {
            "the study's wall-clock limit passed first"
        } else {
            "the circuit breaker stopped the study"
        };
        for e in &mut cp.manifest.experiments {
            if e.status == CellStatus::Pending {
                e.status = CellStatus::Skipped;
                e.error_type = Some("Skipped".into());
                e.error_message = Some(why.into());
            }
        }
        if halt == Some(Halt::WallClock) {
            let msg = format!(
                "wall-clock limit of {} h reached; the remaining cells are skipped",
                exec.wall_clock_timeout_hours.unwrap_or_default()
            );
            cp.manifest.summary.warnings.push(msg);
        }
    }
    cp.manifest.status = status;
    cp.manifest.end_time = Some(iso8601_utc(unix_now_s()));
    cp.manifest.runner_pid = None;
    let result = assemble(plan, &dir, &mut cp.manifest);
    cp.save();
    llem_results::write_json_atomic(&dir.join(layout::STUDY_RESULT), &result)?;
    Ok(StudyOutcome {
        dir,
        manifest: cp.manifest,
        result,
    })
}

enum CellOutcome {
    Completed,
    Failed,
    Stopped(Halt),
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    cp: &mut Checkpoint,
    i: usize,
    pc: &PlannedConfig,
    dir: &Path,
    artefacts_dir: &Path,
    study_stamp: &str,
    opts: &StudyOptions,
    limits: CellLimits,
    deadline: Option<Instant>,
    obs: &mut dyn Observer,
) -> Result<CellOutcome, StudyError> {
    let Some(entry) = cp.entry(i).cloned() else {
        return Ok(CellOutcome::Failed);
    };
    let cell = dir.join(&entry.cell_dir);
    set_aside(&cell, entry.attempts)?;
    std::fs::create_dir_all(&cell).map_err(io_err("cannot create", &cell))?;
    let spec = CellSpec {
        config: pc.config.clone(),
        config_hash: entry.config_hash.clone(),
        experiment_id: layout::experiment_id(study_stamp, entry.index, entry.cycle),
        cell_dir: cell.clone(),
        baseline_cache_dir: artefacts_dir.to_path_buf(),
        sampling_interval_ms: opts.sampling_interval.as_secs_f64() * 1000.0,
        index: entry.index,
        cycle: entry.cycle,
    };
    let spec_path = cell.join(layout::CELL_SPEC);
    llem_results::write_json_atomic(&spec_path, &spec)?;
    let log_rel = format!("{}/{}", entry.cell_dir, layout::CELL_LOG);
    if let Some(e) = cp.entry_mut(i) {
        e.status = CellStatus::Running;
        e.attempts += 1;
        e.started_at = Some(iso8601_utc(unix_now_s()));
        e.completed_at = None;
        e.log_file = Some(log_rel);
        e.error_type = None;
        e.error_message = None;
        e.result_file = None;
    }

    let mut view = entry.clone();
    view.status = CellStatus::Running;
    let obs_cell = std::cell::RefCell::new(&mut *obs);
    let mut on_spawn = |pid: u32| {
        if let Some(e) = cp.entry_mut(i) {
            e.pid = Some(pid);
        }
        cp.save();
        if let Some(e) = cp.entry(i) {
            obs_cell.borrow_mut().event(StudyEvent::CellStarted {
                entry: e,
                manifest: &cp.manifest,
            });
        }
    };
    let mut on_message = |m: &CellMessage| {
        obs_cell.borrow_mut().event(StudyEvent::Cell {
            entry: &view,
            message: m,
        });
    };
    let interrupts = opts.interrupts.clone();
    let mut stop = || match interrupts.load(Ordering::SeqCst) {
        0 if deadline.is_some_and(|d| Instant::now() >= d) => {
            StopRequest::Terminate(StopCause::WallClock)
        }
        0 => StopRequest::None,
        1 => StopRequest::Terminate(StopCause::User),
        _ => StopRequest::Kill(StopCause::User),
    };
    let run = supervise::run_cell(
        &opts.launcher,
        &spec_path,
        &cell.join(layout::CELL_LOG),
        limits,
        &mut on_spawn,
        &mut on_message,
        &mut stop,
    );
    let run = match run {
        Ok(r) => r,
        Err(e) => {
            // Not a cell failure: llem itself cannot be started, so nothing else can run.
            if let Some(en) = cp.entry_mut(i) {
                en.status = CellStatus::Failed;
                en.error_type = Some("SpawnError".into());
                en.error_message = Some(e.to_string());
                en.pid = None;
            }
            cp.save();
            return Err(e.into());
        }
    };

    if !run.survivors.is_empty() {
        let msg = format!(
            "cell #{:03} (cycle {}): processes {:?} of its group outlived SIGKILL (stuck in the \
             kernel?); the device may not be free for the next cell",
            entry.index, entry.cycle, run.survivors
        );
        obs.event(StudyEvent::Note(&msg));
        cp.manifest.summary.warnings.push(msg);
    }
    if !run.orphaned_servers.is_empty() {
        let msg = format!(
            "cell #{:03} (cycle {}): its server (processes {:?}) was still running after the \
             cell ended; the runner killed it",
            entry.index, entry.cycle, run.orphaned_servers
        );
        obs.event(StudyEvent::Note(&msg));
        cp.manifest.summary.warnings.push(msg);
    }
    let now = iso8601_utc(unix_now_s());
    let outcome = match run.end {
        CellEnd::Completed { result_file } => match read_result(&result_file) {
            Some(r) => {
                if let Some(e) = cp.entry_mut(i) {
                    e.completed_at = Some(now);
                    let rel = format!("{}/{}", entry.cell_dir, layout::RESULT);
                    fill_completed(e, &r, rel, Some(run.elapsed_s));
                }
                CellOutcome::Completed
            }
            None => {
                fail(
                    cp,
                    i,
                    "BadResult",
                    format!("{} does not parse as a result", result_file.display()),
                    &now,
                    run.elapsed_s,
                );
                CellOutcome::Failed
            }
        },
        CellEnd::Failed {
            error_type,
            message,
        } => {
            fail(cp, i, &error_type, message, &now, run.elapsed_s);
            CellOutcome::Failed
        }
        CellEnd::Stopped { cause, message } => {
            if let Some(e) = cp.entry_mut(i) {
                e.status = CellStatus::Interrupted;
                e.error_type = Some(
                    match cause {
                        StopCause::User => "Interrupted",
                        StopCause::WallClock => "WallClockTimeout",
                    }
                    .into(),
                );
                e.error_message = Some(message);
                e.completed_at = Some(now);
                e.elapsed_seconds = Some(run.elapsed_s);
                e.pid = None;
            }
            CellOutcome::Stopped(match cause {
                StopCause::User => Halt::User,
                StopCause::WallClock => Halt::WallClock,
            })
        }
    };
    cp.save();
    Ok(outcome)
}

fn fail(cp: &mut Checkpoint, i: usize, error_type: &str, message: String, now: &str, elapsed: f64) {
    if let Some(e) = cp.entry_mut(i) {
        e.status = CellStatus::Failed;
        e.error_type = Some(error_type.to_string());
        e.error_message = Some(message);
        e.completed_at = Some(now.to_string());
        e.elapsed_seconds = Some(elapsed);
        e.pid = None;
    }
}

/// The study result: completed cells' results in execution order and statistics per
/// configuration; CV warnings go into the manifest's summary too.
fn assemble(plan: &StudyPlan, dir: &Path, manifest: &mut Manifest) -> StudyResult {
    let mut experiments = Vec::new();
    let mut result_files = Vec::new();
    let mut by_hash: HashMap<String, Vec<usize>> = HashMap::new();
    for e in &manifest.experiments {
        if e.status != CellStatus::Completed {
            continue;
        }
        let Some(rel) = &e.result_file else { continue };
        match read_result(&dir.join(rel)) {
            Some(r) => {
                by_hash
                    .entry(e.config_hash.clone())
                    .or_default()
                    .push(experiments.len());
                experiments.push(r);
                result_files.push(rel.clone());
            }
            None => manifest.summary.warnings.push(format!(
                "{rel} is missing or unreadable; left out of the statistics"
            )),
        }
    }
    let mut statistics = Vec::new();
    for pc in &plan.configs {
        let hash = pc.digest.short();
        let results: Vec<&ExperimentResult> = by_hash
            .get(&hash)
            .into_iter()
            .flatten()
            .filter_map(|&k| experiments.get(k))
            .collect();
        if results.is_empty() {
            continue;
        }
        let (s, warnings) = cycle_stats::configuration_statistics(
            &hash,
            &label_of(pc),
            plan.execution.n_cycles,
            &results,
        );
        for w in warnings {
            if !manifest.summary.warnings.contains(&w) {
                manifest.summary.warnings.push(w);
            }
        }
        statistics.push(s);
    }
    manifest.recount();
    StudyResult {
        study_name: manifest.study_name.clone(),
        study_design_hash: manifest.study_design_hash.clone(),
        status: manifest.status,
        measurement_protocol: manifest.measurement_protocol.clone(),
        experiments,
        result_files,
        summary: manifest.summary.clone(),
        skipped_experiments: artefacts::skipped_experiments(plan),
        statistics,
    }
}
