//! One cell of a study: its directory and spec, its process under supervision, and what its
//! end means for the manifest.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Instant;

use llem_config::plan::PlannedConfig;
use llem_results::layout;
use llem_results::time::{iso8601_utc, unix_now_s};
use llem_results::{CellStatus, ManifestEntry};

use super::prepare::{fill_completed, read_result};
use super::{Checkpoint, Halt, Observer, StudyEvent, StudyRun, io_err, study_stamp};
use crate::StudyError;
use crate::protocol::{CellMessage, CellSpec};
use crate::supervise::{self, CellEnd, CellRun, StopCause, StopRequest};

/// How a cell ended, for the loop.
pub(super) enum CellOutcome {
    Completed,
    Failed,
    Stopped(Halt),
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

/// How a cell reports its live figures: `live` lines to the runner every interval, and
/// pushes to a Pushgateway.
#[derive(Clone, Debug, Default)]
pub(crate) struct Reporting {
    pub(crate) live_interval: Option<std::time::Duration>,
    pub(crate) metrics_push: Option<String>,
}

/// What any process that runs a cell (here, or a Slurm task) needs first: the cell's directory
/// made fresh (an earlier attempt's set aside) and its spec written. Returns both paths.
pub(crate) fn stage_cell(
    study_dir: &Path,
    entry: &ManifestEntry,
    pc: &PlannedConfig,
    sampling_interval: std::time::Duration,
    reporting: &Reporting,
) -> Result<(PathBuf, PathBuf), StudyError> {
    let cell = study_dir.join(&entry.cell_dir);
    set_aside(&cell, entry.attempts)?;
    std::fs::create_dir_all(&cell).map_err(io_err("cannot create", &cell))?;
    let spec = CellSpec {
        config: pc.config.clone(),
        config_hash: entry.config_hash.clone(),
        experiment_id: layout::experiment_id(&study_stamp(study_dir), entry.index, entry.cycle),
        cell_dir: cell.clone(),
        baseline_cache_dir: study_dir.join(layout::STUDY_ARTEFACTS),
        sampling_interval_ms: sampling_interval.as_secs_f64() * 1000.0,
        index: entry.index,
        cycle: entry.cycle,
        plan_warnings: pc.warnings.clone(),
        live_interval_ms: reporting.live_interval.map(|d| d.as_secs_f64() * 1000.0),
        metrics_push: reporting.metrics_push.clone(),
        label: Some(crate::runner::label_of(pc)),
    };
    let spec_path = cell.join(layout::CELL_SPEC);
    llem_results::write_json_atomic(&spec_path, &spec)?;
    Ok((cell, spec_path))
}

/// The cell staged, and its manifest entry marked running.
fn prepare_cell(
    cp: &mut Checkpoint,
    i: usize,
    entry: &ManifestEntry,
    pc: &PlannedConfig,
    run: &StudyRun<'_>,
) -> Result<(PathBuf, PathBuf), StudyError> {
    let (cell, spec_path) = stage_cell(
        &run.dir,
        entry,
        pc,
        run.opts.sampling_interval,
        &Reporting {
            live_interval: run.opts.live_interval,
            metrics_push: run.opts.metrics_push.clone(),
        },
    )?;
    if let Some(e) = cp.entry_mut(i) {
        e.status = CellStatus::Running;
        e.attempts += 1;
        e.started_at = Some(iso8601_utc(unix_now_s()));
        e.completed_at = None;
        e.log_file = Some(format!("{}/{}", entry.cell_dir, layout::CELL_LOG));
        e.error_type = None;
        e.error_message = None;
        e.result_file = None;
    }
    Ok((cell, spec_path))
}

/// Runs the cell's process: the manifest records its pid as soon as it exists, its lines go to
/// the observer, and Ctrl-C or the wall-clock limit stop it.
fn supervise_cell(
    cp: &mut Checkpoint,
    i: usize,
    entry: &ManifestEntry,
    paths: (&Path, &Path),
    run: &StudyRun<'_>,
    obs: &mut dyn Observer,
) -> Result<CellRun, supervise::SpawnError> {
    let (cell, spec_path) = paths;
    let mut view = entry.clone();
    view.status = CellStatus::Running;
    let obs_cell = std::cell::RefCell::new(&mut *obs);
    let mut on_spawn = |pid: u32| {
        if let Some(e) = cp.entry_mut(i) {
            e.pid = Some(pid);
        }
        cp.checkpoint();
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
    let interrupts = run.opts.interrupts.clone();
    let deadline = run.deadline;
    let mut stop = || match interrupts.load(Ordering::SeqCst) {
        0 if deadline.is_some_and(|d| Instant::now() >= d) => {
            StopRequest::Terminate(StopCause::WallClock)
        }
        0 => StopRequest::None,
        1 => StopRequest::Terminate(StopCause::User),
        _ => StopRequest::Kill(StopCause::User),
    };
    supervise::run_cell(
        &run.launcher,
        spec_path,
        &cell.join(layout::CELL_LOG),
        run.limits,
        &mut on_spawn,
        &mut on_message,
        &mut stop,
    )
}

/// Processes of the cell that outlived it: a warning in the manifest and to the observer.
fn note_leftovers(cp: &mut Checkpoint, entry: &ManifestEntry, r: &CellRun, obs: &mut dyn Observer) {
    let mut notes = Vec::new();
    if !r.survivors.is_empty() {
        notes.push(format!(
            "cell #{:03} (cycle {}): processes {:?} of its group outlived SIGKILL (stuck in the \
             kernel?); the device may not be free for the next cell",
            entry.index, entry.cycle, r.survivors
        ));
    }
    if !r.orphaned_servers.is_empty() {
        notes.push(format!(
            "cell #{:03} (cycle {}): its server (processes {:?}) was still running after the \
             cell ended; the runner killed it",
            entry.index, entry.cycle, r.orphaned_servers
        ));
    }
    for msg in notes {
        obs.event(StudyEvent::Note(&msg));
        cp.manifest.summary.warnings.push(msg);
    }
}

/// What the cell's end means for its manifest entry and for the loop.
fn record_end(cp: &mut Checkpoint, i: usize, entry: &ManifestEntry, r: CellRun) -> CellOutcome {
    let now = iso8601_utc(unix_now_s());
    match r.end {
        CellEnd::Completed { result_file } => match read_result(&result_file) {
            Some(res) => {
                if let Some(e) = cp.entry_mut(i) {
                    e.completed_at = Some(now);
                    let rel = format!("{}/{}", entry.cell_dir, layout::RESULT);
                    fill_completed(e, &res, rel, Some(r.elapsed_s));
                }
                CellOutcome::Completed
            }
            None => {
                let message = format!("{} does not parse as a result", result_file.display());
                fail(cp, i, "BadResult", message, &now, r.elapsed_s);
                CellOutcome::Failed
            }
        },
        CellEnd::Failed {
            error_type,
            message,
        } => {
            fail(cp, i, &error_type, message, &now, r.elapsed_s);
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
                e.elapsed_seconds = Some(r.elapsed_s);
                e.pid = None;
            }
            CellOutcome::Stopped(match cause {
                StopCause::User => Halt::User,
                StopCause::WallClock => Halt::WallClock,
            })
        }
    }
}

/// Runs cell `i` of the manifest.
pub(super) fn run_one(
    cp: &mut Checkpoint,
    i: usize,
    pc: &PlannedConfig,
    run: &StudyRun<'_>,
    obs: &mut dyn Observer,
) -> Result<CellOutcome, StudyError> {
    let Some(entry) = cp.entry(i).cloned() else {
        return Ok(CellOutcome::Failed);
    };
    let (cell, spec_path) = prepare_cell(cp, i, &entry, pc, run)?;
    let r = match supervise_cell(cp, i, &entry, (&cell, &spec_path), run, obs) {
        Ok(r) => r,
        Err(e) => {
            // Not a cell failure: llem itself cannot be started, so nothing else can run.
            if let Some(en) = cp.entry_mut(i) {
                en.status = CellStatus::Failed;
                en.error_type = Some("SpawnError".into());
                en.error_message = Some(e.to_string());
                en.pid = None;
            }
            cp.checkpoint();
            return Err(e.into());
        }
    };
    note_leftovers(cp, &entry, &r, obs);
    let outcome = record_end(cp, i, &entry, r);
    cp.checkpoint();
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
