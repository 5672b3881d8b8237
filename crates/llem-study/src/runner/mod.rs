//! The study loop: cells in the plan's order, each in its own process, with gaps, the circuit
//! breaker, the wall-clock limit, Ctrl-C, and a manifest checkpoint on every state change.

pub(crate) mod cell;
mod prepare;
pub(crate) mod search;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use llem_config::StudyPlan;
use llem_config::plan::PlannedConfig;
use llem_results::layout;
use llem_results::time::{iso8601_utc, unix_now_s};
use llem_results::{
    CellStatus, ExperimentResult, Manifest, ManifestEntry, StudyResult, StudyStatus,
};

use crate::breaker::{CircuitBreaker, Verdict};
use crate::design::StudyDesign;
use crate::protocol::CellMessage;
use crate::supervise::{CellLimits, Launcher};
use crate::{StudyError, cycle_stats};
use cell::{CellOutcome, run_one};

pub(crate) use cell::stage_cell;
pub(crate) use prepare::{fill_completed, prepare, read_result};
pub use prepare::{fresh_manifest, label_of};
pub use search::{SEARCH_FILE, SEARCH_SCHEMA_VERSION};

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
    /// `--wait`: while another run holds a device, wait for it (saying who holds it) instead
    /// of refusing; Ctrl-C stops the wait.
    pub lock_wait: bool,
    /// `--no-gaps`: no pauses between cells and cycles.
    pub no_gaps: bool,
    /// Between SIGTERM and SIGKILL when a cell is stopped.
    pub kill_grace: Duration,
    /// Telemetry sampling interval handed to each cell.
    pub sampling_interval: Duration,
    /// How often each cell reports its sampler's running figures (`live` lines), for live
    /// metrics; `None`: never.
    pub live_interval: Option<Duration>,
    /// The Prometheus Pushgateway each cell pushes its live metrics to (`--metrics-push`).
    pub metrics_push: Option<String>,
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
    /// A pause goes on: sent about once a second, for a countdown.
    WaitLeft {
        /// Why.
        reason: WaitReason,
        /// Seconds left.
        left_s: f64,
        /// The whole pause, s.
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
    /// Writes the manifest as it stands.
    fn save(&mut self) -> Result<(), llem_results::ResultsError> {
        self.manifest.recount();
        self.manifest.summary.total_wall_time_s =
            self.wall_before_s + self.session_start.elapsed().as_secs_f64();
        llem_results::write_json_atomic(&self.path, &self.manifest)
    }

    /// A checkpoint between cells: the cells' own files are intact, so a study goes on when
    /// its manifest cannot be written, warned once; the write that ends the study is the
    /// one that must succeed ([`Checkpoint::save`]).
    fn checkpoint(&mut self) {
        if let Err(e) = self.save()
            && !self.warned
        {
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

/// The study directory's name, the stem of every experiment id.
pub(crate) fn study_stamp(dir: &Path) -> String {
    dir.file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("study")
        .to_string()
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StudyError {
    let path = path.to_path_buf();
    move |source| StudyError::Io { what, path, source }
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

/// Pauses `seconds`, counting down to `obs`; ends early when `halt` says so.
fn pause(
    seconds: f64,
    reason: WaitReason,
    halt: &dyn Fn() -> Option<Halt>,
    obs: &mut dyn Observer,
) -> WaitEnd {
    if seconds <= 0.0 || !seconds.is_finite() {
        return WaitEnd::Done;
    }
    obs.event(StudyEvent::Waiting { reason, seconds });
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(seconds);
    let mut told = 0;
    while Instant::now() < end {
        if let Some(h) = halt() {
            return WaitEnd::Halt(h);
        }
        std::thread::sleep(Duration::from_millis(50).min(end - Instant::now()));
        let whole = start.elapsed().as_secs();
        if whole > told {
            told = whole;
            obs.event(StudyEvent::WaitLeft {
                reason,
                left_s: (end - Instant::now().min(end)).as_secs_f64(),
                seconds,
            });
        }
    }
    WaitEnd::Done
}

/// What the loop does after a failed cell.
enum AfterFailure {
    GoOn,
    /// The breaker cooled down; its probe cell comes next, without a gap.
    Probe,
    Stop(Halt),
}

/// What every cell of one session of a study shares.
pub(super) struct StudyRun<'a> {
    plan: &'a StudyPlan,
    opts: &'a StudyOptions,
    /// The options' launcher, with the runner URLs' credentials for the cells.
    launcher: crate::supervise::Launcher,
    /// The study directory.
    dir: PathBuf,
    /// When the wall-clock limit passes.
    deadline: Option<Instant>,
    /// Timeout and kill grace of a cell.
    limits: CellLimits,
    /// Pauses between cells of one cycle, and between cycles, s.
    gaps: (f64, f64),
}

impl<'a> StudyRun<'a> {
    fn new(plan: &'a StudyPlan, opts: &'a StudyOptions, dir: PathBuf) -> StudyRun<'a> {
        let exec = &plan.execution;
        let mut launcher = opts.launcher.clone();
        launcher.env.extend(llem_config::credentials::env_var(
            plan.configs.iter().map(|c| &c.config),
        ));
        StudyRun {
            plan,
            opts,
            launcher,
            dir,
            deadline: exec
                .wall_clock_timeout_hours
                .filter(|h| h.is_finite() && *h > 0.0)
                .map(|h| Instant::now() + Duration::from_secs_f64(h * 3600.0)),
            limits: CellLimits {
                timeout: Duration::from_secs_f64(exec.experiment_timeout_seconds.max(0.001)),
                kill_grace: opts.kill_grace,
            },
            gaps: if opts.no_gaps {
                (0.0, 0.0)
            } else {
                (exec.experiment_gap_seconds, exec.cycle_gap_seconds)
            },
        }
    }

    /// The gap before the next cell: within a cycle, or between cycles.
    fn gap_before(&self, obs: &mut dyn Observer, previous: u32, cycle: u32) -> WaitEnd {
        let (gap, reason) = if previous == cycle {
            (self.gaps.0, WaitReason::ExperimentGap)
        } else {
            (self.gaps.1, WaitReason::CycleGap)
        };
        pause(gap, reason, &|| halt_now(self.opts, self.deadline), obs)
    }

    /// After a failed cell: go on, stop, or cool down and probe.
    fn after_failure(
        &self,
        breaker: &mut CircuitBreaker,
        cp: &mut Checkpoint,
        obs: &mut dyn Observer,
    ) -> AfterFailure {
        let exec = &self.plan.execution;
        match breaker.record_failure() {
            Verdict::Continue => AfterFailure::GoOn,
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
                AfterFailure::Stop(Halt::Breaker)
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
                cp.checkpoint();
                let cooldown = exec.circuit_breaker_cooldown_seconds;
                if let WaitEnd::Halt(h) = pause(
                    cooldown,
                    WaitReason::Cooldown,
                    &|| halt_now(self.opts, self.deadline),
                    obs,
                ) {
                    return AfterFailure::Stop(h);
                }
                breaker.start_probe();
                AfterFailure::Probe
            }
        }
    }

    /// Runs every cell not completed yet, in the manifest's order, until the end or a halt;
    /// a search adds its proposals at the end until it stops.
    fn run_cells(
        &self,
        cp: &mut Checkpoint,
        obs: &mut dyn Observer,
        mut planner: Option<&mut search::SearchPlanner>,
    ) -> Result<Option<Halt>, StudyError> {
        let by_hash: HashMap<String, &PlannedConfig> = self
            .plan
            .configs
            .iter()
            .map(|c| (c.digest.short(), c))
            .collect();
        let mut breaker = CircuitBreaker::new(self.plan.execution.max_consecutive_failures);
        let mut previous_cycle: Option<u32> = None;
        let mut i = 0;
        loop {
            if i >= cp.manifest.experiments.len() {
                let extended = planner
                    .as_deref_mut()
                    .is_some_and(|p| p.extend(&mut cp.manifest, &self.dir));
                if !extended {
                    break;
                }
                cp.checkpoint();
                continue;
            }
            let Some(entry) = cp.entry(i) else { break };
            i += 1;
            // A search's failed run is one of its measurements, not a cell to run again.
            if entry.status == CellStatus::Completed
                || (planner.is_some() && entry.status == CellStatus::Failed)
            {
                continue;
            }
            let i = i - 1;
            let (hash, cycle) = (entry.config_hash.clone(), entry.cycle);
            if let Some(h) = halt_now(self.opts, self.deadline) {
                return Ok(Some(h));
            }
            // A search's "cycle" is a configuration's n-th run: its cells are paced as the
            // cells of one cycle.
            let gap_cycle = if planner.is_some() { 0 } else { cycle };
            if let Some(prev) = previous_cycle
                && let WaitEnd::Halt(h) = self.gap_before(obs, prev, gap_cycle)
            {
                return Ok(Some(h));
            }
            previous_cycle = Some(gap_cycle);
            let Some(pc) = by_hash.get(&hash) else {
                continue;
            };
            let outcome = match run_one(cp, i, pc, self, obs) {
                Ok(o) => o,
                Err(e) => {
                    stopped_by_error(cp, &e);
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
                CellOutcome::Stopped(h) => return Ok(Some(h)),
                CellOutcome::Failed => match self.after_failure(&mut breaker, cp, obs) {
                    AfterFailure::GoOn => {}
                    // The probe follows the cooldown directly.
                    AfterFailure::Probe => previous_cycle = None,
                    AfterFailure::Stop(h) => return Ok(Some(h)),
                },
            }
        }
        Ok(None)
    }
}

/// The study cannot go on (llem cannot be started, the disk refuses): the manifest says so,
/// and resume picks it up once that is fixed.
fn stopped_by_error(cp: &mut Checkpoint, e: &StudyError) {
    cp.manifest.status = StudyStatus::Failed;
    cp.manifest.end_time = Some(iso8601_utc(unix_now_s()));
    cp.manifest.runner_pid = None;
    cp.manifest
        .summary
        .warnings
        .push(format!("study stopped: {e}"));
    // The error that stopped the study is the one reported; this write is best effort.
    cp.checkpoint();
}

/// How the study ended, from why the loop stopped.
fn final_status(halt: Option<Halt>, manifest: &Manifest) -> StudyStatus {
    match halt {
        Some(Halt::User) => StudyStatus::Interrupted,
        Some(Halt::WallClock) => StudyStatus::TimedOut,
        Some(Halt::Breaker) => StudyStatus::CircuitBreaker,
        None if manifest
            .experiments
            .iter()
            .all(|e| e.status == CellStatus::Completed) =>
        {
            StudyStatus::Completed
        }
        None => StudyStatus::Failed,
    }
}

/// Cells a wall-clock limit or the circuit breaker left pending are skipped, with the reason.
fn skip_remaining(halt: Option<Halt>, manifest: &mut Manifest, timeout_hours: Option<f64>) {
    let why = match halt {
        Some(Halt::WallClock) => "the study's wall-clock limit passed first",
        Some(Halt::Breaker) => "the circuit breaker stopped the study",
        Some(Halt::User) | None => return,
    };
    for e in &mut manifest.experiments {
        if e.status == CellStatus::Pending {
            e.status = CellStatus::Skipped;
            e.error_type = Some("Skipped".into());
            e.error_message = Some(why.into());
        }
    }
    if halt == Some(Halt::WallClock) {
        manifest.summary.warnings.push(format!(
            "wall-clock limit of {} h reached; the remaining cells are skipped",
            timeout_hours.unwrap_or_default()
        ));
    }
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
    let prepared = prepare::prepare(plan, opts, obs)?;
    let dir = prepared.dir.clone();
    if prepared.resumed && crate::slurm::record::slurm_dir(&dir).exists() {
        // Its tasks may still be queued; running its cells here too would measure them twice.
        return Err(StudyError::Refused(format!(
            "{} was submitted to Slurm; resume it with --executor slurm",
            dir.display()
        )));
    }
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
    // A study that cannot record that it runs does not start.
    cp.save()?;
    obs.event(StudyEvent::Started {
        dir: &dir,
        manifest: &cp.manifest,
        resumed: prepared.resumed,
    });

    let run = StudyRun::new(plan, opts, dir.clone());
    let gpus = opts
        .lock_resources
        .iter()
        .filter(|r| r.starts_with("gpu"))
        .count();
    let mut planner = search::SearchPlanner::of(plan, gpus);
    let halt = run.run_cells(&mut cp, obs, planner.as_mut())?;
    let search_done = planner.as_ref().and_then(|p| p.stopped);
    if let Some(reason) = search_done {
        let msg = format!("search: {}; {}", reason.describe(), search::SEARCH_FILE);
        obs.event(StudyEvent::Note(&msg));
    }
    skip_remaining(
        halt,
        &mut cp.manifest,
        plan.execution.wall_clock_timeout_hours,
    );
    cp.manifest.status = match (halt, search_done) {
        // A search that stopped by its own rule is complete, failed candidates included.
        (None, Some(_)) => StudyStatus::Completed,
        _ => final_status(halt, &cp.manifest),
    };
    cp.manifest.end_time = Some(iso8601_utc(unix_now_s()));
    cp.manifest.runner_pid = None;
    let result = assemble(&StudyDesign::of(plan), &dir, &mut cp.manifest);
    // The result first: a manifest that says the study ended while its result is missing
    // would make --resume refuse the one thing that can write it.
    if let Err(e) = llem_results::write_json_atomic(&dir.join(layout::STUDY_RESULT), &result) {
        cp.manifest.status = StudyStatus::Interrupted;
        cp.manifest.summary.warnings.push(format!(
            "{} could not be written ({e}); --resume writes it",
            layout::STUDY_RESULT
        ));
        cp.checkpoint();
        return Err(e.into());
    }
    // The manifest that says how the study ended: without it the study reads as still
    // running, so it is an error (--resume writes it), never a "completed" study.
    cp.save()?;
    Ok(StudyOutcome {
        dir,
        manifest: cp.manifest,
        result,
    })
}

/// The study result: completed cells' results in execution order and statistics per
/// configuration; CV warnings go into the manifest's summary too.
pub(crate) fn assemble(design: &StudyDesign, dir: &Path, manifest: &mut Manifest) -> StudyResult {
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
    for c in &design.configs {
        let results: Vec<&ExperimentResult> = by_hash
            .get(&c.config_hash)
            .into_iter()
            .flatten()
            .filter_map(|&k| experiments.get(k))
            .collect();
        if results.is_empty() {
            continue;
        }
        let (s, warnings) = cycle_stats::configuration_statistics(
            &c.config_hash,
            &c.label,
            design.n_cycles,
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
        skipped_experiments: design.skipped_experiments.clone(),
        statistics,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// Records the pause events it is sent.
    #[derive(Default)]
    struct Pauses(Vec<(f64, f64)>);

    impl Observer for Pauses {
        fn event(&mut self, e: StudyEvent<'_>) {
            match e {
                StudyEvent::Waiting { seconds, .. } => self.0.push((seconds, seconds)),
                StudyEvent::WaitLeft {
                    left_s, seconds, ..
                } => self.0.push((left_s, seconds)),
                _ => {}
            }
        }
    }

    #[test]
    fn a_pause_counts_down_each_second_and_stops_when_halted() {
        let mut obs = Pauses::default();
        let t = Instant::now();
        assert!(matches!(
            pause(2.2, WaitReason::ExperimentGap, &|| None, &mut obs),
            WaitEnd::Done
        ));
        assert!(t.elapsed() >= Duration::from_millis(2200));
        // The start, then one tick per whole second passed: 2.2 s left, ~1.2, ~0.2.
        let left: Vec<f64> = obs.0.iter().map(|p| p.0).collect();
        assert_eq!(left.len(), 3, "{left:?}");
        assert!(
            (left[1] - 1.2).abs() < 0.15 && (left[2] - 0.2).abs() < 0.15,
            "{left:?}"
        );
        assert!(obs.0.iter().all(|p| p.1 == 2.2));

        let mut obs = Pauses::default();
        let t = Instant::now();
        assert!(matches!(
            pause(60.0, WaitReason::CycleGap, &|| Some(Halt::User), &mut obs),
            WaitEnd::Halt(Halt::User)
        ));
        assert!(t.elapsed() < Duration::from_secs(1));
    }
}
