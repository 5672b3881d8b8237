//! The manifest and `study_result.json` of a Slurm study, compiled from what its tasks wrote
//! (`slurm_task.json` per cell), what Slurm still has queued (`squeue`) and how the other jobs
//! ended (`sacct`): a task killed before it could write its end carries Slurm's reason
//! (TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, CANCELLED, ...).

use std::collections::HashMap;
use std::path::Path;

use llem_results::layout;
use llem_results::time::{iso8601_utc, unix_now_s};
use llem_results::{CellStatus, Manifest, ManifestEntry, StudyResult, StudyStatus};

use super::commands::{self, Ended, QueuedTask};
use super::record::{
    self, BREAKER, BreakerTrip, CONTROL_CELL, CONTROL_STATUS, DESIGN, JOBS, JobsRecord,
    NODE_CONTROLS, NodeControl, PROBE, ProbeClaim, SubmissionRecord, TASK_STATUS, TaskState,
    TaskStatus,
};
use crate::StudyError;
use crate::design::StudyDesign;
use crate::resume::load_manifest;
use crate::runner::{assemble, fill_completed, read_result};

/// A Slurm study as its files and Slurm say it stands now.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The manifest, every cell's state current.
    pub manifest: Manifest,
    /// The study result, once no cell is queued or running.
    pub result: Option<StudyResult>,
    /// Where the end of a task that wrote none came from (`accounting`, `the job completion
    /// log`), when Slurm was asked.
    pub asked_slurm: Option<&'static str>,
    /// The submission record.
    pub jobs: JobsRecord,
    /// Each node's control cell (`node_control`), every submission's.
    pub controls: Vec<NodeControl>,
    /// The circuit breaker when it is not closed: tripped (why), or open with its half-open
    /// probe out (which task, since when, why).
    pub breaker: Option<String>,
}

/// The control cells the nodes measured; one whose task ended before it did (nothing of the
/// study queued any more) is `interrupted`.
fn node_controls(dir: &Path, jobs: &JobsRecord, settled: bool) -> Vec<NodeControl> {
    let mut out = Vec::new();
    for sub in &jobs.submissions {
        let nodes = record::submission_dir(dir, sub.number).join("nodes");
        let Ok(entries) = std::fs::read_dir(&nodes) else {
            continue;
        };
        let mut dirs: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        dirs.sort();
        for d in dirs {
            let Ok(Some(s)) = record::read::<TaskStatus>(&d.join(CONTROL_STATUS)) else {
                continue;
            };
            let rel = |p: &Path| p.strip_prefix(dir).unwrap_or(p).display().to_string();
            let result_path = d.join(CONTROL_CELL).join(layout::RESULT);
            let result = (s.state == TaskState::Completed)
                .then(|| read_result(&result_path))
                .flatten();
            let stale = s.state == TaskState::Running
                && (settled || sub.number < jobs.submissions.len() as u32);
            out.push(NodeControl {
                submission: sub.number,
                node: s.node.node.clone(),
                state: if stale {
                    TaskState::Interrupted
                } else {
                    s.state
                },
                error_type: if stale {
                    Some("Lost".into())
                } else {
                    s.error_type.clone()
                },
                error_message: if stale {
                    Some("its task ended before the control cell did".into())
                } else {
                    s.error_message.clone()
                },
                result_file: result.as_ref().map(|_| rel(&result_path)),
                mj_per_tok: result.as_ref().and_then(|r| r.mj_per_tok_total),
                tokens_per_s: result.as_ref().map(|r| r.avg_tokens_per_second),
                gpus: s.node.gpus.clone(),
            });
        }
    }
    out
}

/// The jobs record of a Slurm study; an error naming the directory when it is not one.
pub fn jobs_of(dir: &Path) -> Result<JobsRecord, StudyError> {
    record::read::<JobsRecord>(&record::slurm_dir(dir).join(JOBS))?.ok_or_else(|| {
        StudyError::Refused(format!(
            "{} was not run under Slurm (it has no {}/{JOBS})",
            dir.display(),
            record::SLURM_DIR
        ))
    })
}

/// Where each cell of `sub` runs: manifest position -> `ARRAYJOB_TASK`.
fn task_keys(sub: &SubmissionRecord) -> HashMap<usize, String> {
    let mut m = HashMap::new();
    for a in &sub.arrays {
        for (t, &cell) in a.cells.iter().enumerate() {
            m.insert(cell, format!("{}_{t}", a.job_id));
        }
    }
    m
}

fn set_failed(e: &mut ManifestEntry, error_type: &str, message: String) {
    e.status = CellStatus::Failed;
    e.error_type = Some(error_type.to_string());
    e.error_message = Some(message);
    e.pid = None;
}

/// What happened to a task that left no end of its own, from `sacct`.
fn slurm_end(
    e: &mut ManifestEntry,
    key: &str,
    raw: Option<&str>,
    started: bool,
    ended: &HashMap<String, Ended>,
) {
    let found = raw
        .and_then(|r| ended.get(r))
        .or_else(|| ended.get(key))
        .filter(|x| !x.state.is_empty());
    let what = if started {
        "stopped before it could record its end"
    } else {
        "never started its cell"
    };
    match found {
        Some(x) => {
            let node = x
                .nodes
                .as_deref()
                .map_or_else(String::new, |n| format!(" on {n}"));
            let exit = x
                .exit_code
                .as_deref()
                .map_or_else(String::new, |c| format!(", exit {c}"));
            set_failed(
                e,
                &x.state,
                format!("Slurm task {key}{node} {what}: {}{exit}", x.state),
            );
        }
        None => set_failed(
            e,
            "Lost",
            format!(
                "Slurm task {key} {what}, and Slurm has no record of how it ended \
                 (accounting off, or the record expired)"
            ),
        ),
    }
}

/// Applies a task's own status to its entry; `false` when the task left no end (it is
/// still running, or it was killed).
fn apply_status(e: &mut ManifestEntry, dir: &Path, s: &TaskStatus) -> bool {
    e.node = Some(s.node.node.clone());
    e.started_at = Some(s.started_at.clone());
    e.completed_at = s.finished_at.clone();
    e.elapsed_seconds = s.elapsed_s;
    e.log_file = Some(format!("{}/{}", e.cell_dir, layout::CELL_LOG));
    let message = || s.error_message.clone().unwrap_or_default();
    match s.state {
        TaskState::Completed => {
            let rel = format!("{}/{}", e.cell_dir, layout::RESULT);
            match read_result(&dir.join(&rel)) {
                Some(r) => fill_completed(e, &r, rel, s.elapsed_s),
                None => set_failed(e, "BadResult", format!("{rel} does not parse as a result")),
            }
            true
        }
        TaskState::Failed => {
            let t = s.error_type.clone().unwrap_or_else(|| "Failed".into());
            set_failed(e, &t, message());
            true
        }
        TaskState::Skipped => {
            e.status = CellStatus::Skipped;
            e.error_type = Some(s.error_type.clone().unwrap_or_else(|| "Skipped".into()));
            e.error_message = s.error_message.clone();
            e.pid = None;
            true
        }
        TaskState::Running | TaskState::Interrupted => {
            e.status = CellStatus::Running;
            e.pid = Some(s.pid);
            false
        }
    }
}

/// Compiles the study in `dir` (nothing is written).
pub fn compile(dir: &Path) -> Result<Compiled, StudyError> {
    compile_with(dir, false)
}

/// Where a search stands: `Some(true)` once it stopped by its own rule (`search.json` says
/// why), `Some(false)` while it has not, `None` for a study that is no search.
fn search_stopped(dir: &Path, sub: &SubmissionRecord) -> Result<Option<bool>, StudyError> {
    if !sub.search {
        return Ok(None);
    }
    let doc: Option<serde_json::Value> = record::read(&dir.join(crate::runner::SEARCH_FILE))?;
    Ok(Some(doc.is_some_and(|d| {
        d.get("stop_reason").is_some_and(|r| !r.is_null())
    })))
}

/// Compiles the study; `final_step`: the search's last compile job, which settles the study
/// whatever the search's state (its own job is still in the queue).
pub(crate) fn compile_with(dir: &Path, final_step: bool) -> Result<Compiled, StudyError> {
    let jobs = jobs_of(dir)?;
    let mut manifest = load_manifest(dir)?;
    let design: StudyDesign =
        record::read(&record::slurm_dir(dir).join(DESIGN))?.ok_or_else(|| {
            StudyError::Refused(format!(
                "{} has no {}/{DESIGN}",
                dir.display(),
                record::SLURM_DIR
            ))
        })?;
    let Some(sub) = jobs.latest().cloned() else {
        return Err(StudyError::Refused(format!(
            "{} records no submission",
            dir.display()
        )));
    };
    let keys = task_keys(&sub);
    let array_ids: Vec<String> = sub.arrays.iter().map(|a| a.job_id.clone()).collect();
    let queue = commands::queued(&jobs.latest_job_ids())?;
    let breaker: Option<BreakerTrip> = record::read(&record::slurm_dir(dir).join(BREAKER))?;
    let mut ended: Option<(HashMap<String, Ended>, &'static str)> = None;

    for (i, e) in manifest.experiments.iter_mut().enumerate() {
        let Some(key) = keys.get(&i) else { continue };
        if e.status == CellStatus::Completed {
            continue;
        }
        e.slurm_job = Some(key.clone());
        let status: Option<TaskStatus> = record::read(&dir.join(&e.cell_dir).join(TASK_STATUS))?
            .filter(|s: &TaskStatus| s.submission == sub.number);
        if let Some(s) = &status
            && apply_status(e, dir, s)
        {
            continue;
        }
        let queued: Option<&QueuedTask> = queue.get(key);
        match (queued, &status) {
            (Some(q), Some(_)) if q.started() => {
                e.status = CellStatus::Running;
                continue;
            }
            (Some(q), None) => {
                e.status = if q.started() {
                    CellStatus::Running
                } else {
                    CellStatus::Pending
                };
                if let Some(n) = &q.node {
                    e.node = Some(n.clone());
                }
                continue;
            }
            _ => {}
        }
        // The task is gone and left no end: Slurm says why, unless the breaker stopped it
        // before it began.
        if status.is_none()
            && let Some(b) = &breaker
        {
            e.status = CellStatus::Skipped;
            e.error_type = Some("Skipped".into());
            e.error_message = Some(format!(
                "the circuit breaker stopped the study: {}",
                b.message
            ));
            continue;
        }
        if ended.is_none() {
            ended = Some(commands::ended(&array_ids)?);
        }
        let empty = HashMap::new();
        let map = ended.as_ref().map_or(&empty, |(m, _)| m);
        slurm_end(
            e,
            key,
            status.as_ref().map(|s| s.job_id_raw.as_str()),
            status.is_some(),
            map,
        );
    }
    manifest.recount();
    let search = search_stopped(dir, &sub)?;
    // Between a search's batches no cell is open, yet its compile job is about to submit the
    // next batch: the study is still running while that job is queued.
    let next_batch_due = search == Some(false)
        && !final_step
        && sub
            .compile_job
            .as_ref()
            .is_some_and(|j| queue.contains_key(j));
    let open = next_batch_due
        || manifest
            .experiments
            .iter()
            .any(|e| matches!(e.status, CellStatus::Pending | CellStatus::Running));
    manifest.runner_pid = None;
    let result = if open {
        manifest.status = StudyStatus::Running;
        manifest.end_time = None;
        None
    } else {
        settle(&mut manifest, breaker.as_ref(), search);
        Some(assemble(&design, dir, &mut manifest))
    };
    let controls = node_controls(dir, &jobs, !open);
    let probe: Option<ProbeClaim> = record::read(&record::slurm_dir(dir).join(PROBE))?;
    let breaker = breaker_state(breaker, probe, open.then_some(sub.number));
    Ok(Compiled {
        manifest,
        result,
        asked_slurm: ended.map(|(_, s)| s),
        jobs,
        controls,
        breaker,
    })
}

/// A study with no task left to run: its end status (the breaker, the wall clock, a search
/// that stopped by its rule or did not, every cell completed, or failed), the breaker's
/// warning, and its end time (the last cell's).
fn settle(manifest: &mut Manifest, breaker: Option<&BreakerTrip>, search: Option<bool>) {
    manifest.status = if breaker.is_some() {
        StudyStatus::CircuitBreaker
    } else if manifest
        .experiments
        .iter()
        .any(|e| e.error_type.as_deref() == Some("WallClockTimeout"))
    {
        StudyStatus::TimedOut
    } else if let Some(stopped) = search {
        // A search's failed runs are measurements; it is complete once it stopped by its
        // rule, and interrupted (--resume continues it) when nothing is left to pick its
        // next batch.
        if stopped {
            StudyStatus::Completed
        } else {
            StudyStatus::Interrupted
        }
    } else if manifest
        .experiments
        .iter()
        .all(|e| e.status == CellStatus::Completed)
    {
        StudyStatus::Completed
    } else {
        StudyStatus::Failed
    };
    if let Some(b) = breaker {
        let w = format!("circuit breaker: {}", b.message);
        if !manifest.summary.warnings.contains(&w) {
            manifest.summary.warnings.push(w);
        }
    }
    manifest.end_time = Some(
        manifest
            .experiments
            .iter()
            .filter_map(|e| e.completed_at.clone())
            .max()
            .unwrap_or_else(|| iso8601_utc(unix_now_s())),
    );
}

/// The circuit breaker's state for the status line: tripped, or half-open with its probe
/// (`open_submission`: the submission whose tasks are still running).
fn breaker_state(
    breaker: Option<BreakerTrip>,
    probe: Option<ProbeClaim>,
    open_submission: Option<u32>,
) -> Option<String> {
    match (breaker, probe) {
        (Some(b), _) => Some(format!("tripped at {}: {}", b.at, b.message)),
        (None, Some(p)) if open_submission == Some(p.submission) => Some(format!(
            "open: {}; the half-open probe is {} ({}), claimed at {}",
            p.message, p.slurm_job, p.cell, p.at
        )),
        _ => None,
    }
}

/// Compiles and writes: `study_result.json` once the study is settled, then the manifest (a
/// manifest that says "ended" always has its result beside it).
pub fn compile_and_write(dir: &Path) -> Result<Compiled, StudyError> {
    let c = compile(dir)?;
    write_compiled(dir, &c)?;
    Ok(c)
}

/// Writes what `c` compiled: the node controls, the result once settled, then the manifest.
pub(crate) fn write_compiled(dir: &Path, c: &Compiled) -> Result<(), StudyError> {
    if !c.controls.is_empty() {
        llem_results::write_json_atomic(&record::slurm_dir(dir).join(NODE_CONTROLS), &c.controls)?;
    }
    if let Some(r) = &c.result {
        llem_results::write_json_atomic(&dir.join(layout::STUDY_RESULT), r)?;
    }
    llem_results::write_json_atomic(&dir.join(layout::MANIFEST), &c.manifest)?;
    Ok(())
}
