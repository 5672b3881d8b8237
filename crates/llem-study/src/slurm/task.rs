//! One array task on a compute node: the cell its index names, run as `llem run` runs a cell
//! (child process in its own group, timeout, log), between the node's device locks, with the
//! circuit breaker ([`super::breaker`]) and the wall-clock limit checked across the whole
//! array first. Its only writes outside the cell directory are the breaker's records.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use llem_results::layout;
use llem_results::time::{iso8601_utc, unix_now_s};

use super::breaker::{self, Gate};
use super::compile::jobs_of;
use super::record::{
    self, CONTROL_CELL, CONTROL_STATUS, ControlRecord, JobsRecord, NodeIdentity, SubmissionRecord,
    TASK_STATUS, TaskState, TaskStatus,
};
use crate::StudyError;
use crate::locks::{self, DeviceLocks, Holder, LockError};
use crate::protocol::{CellMessage, CellSpec};
use crate::resume::load_manifest;
use crate::runner::read_result;
use crate::supervise::{self, CellEnd, CellLimits, CellRun, Launcher, StopCause, StopRequest};

/// Which task this is.
#[derive(Clone, Debug)]
pub struct TaskArgs {
    /// The study directory (shared storage).
    pub dir: PathBuf,
    /// The submission.
    pub submission: u32,
    /// The cycle of its array.
    pub cycle: u32,
    /// `SLURM_ARRAY_TASK_ID`.
    pub task_index: usize,
    /// `SLURM_JOB_ID`.
    pub job_id_raw: String,
    /// This node.
    pub node: NodeIdentity,
    /// The devices to lock on this node when Slurm names them (`gpu2` for `SLURM_JOB_GPUS=2`);
    /// `None` keeps the submission's.
    pub lock_resources: Option<Vec<String>>,
    /// SIGTERM/SIGINT count (Slurm sends SIGTERM on scancel and at the time limit).
    pub interrupts: Arc<AtomicUsize>,
}

struct StatusFile {
    path: PathBuf,
    status: TaskStatus,
}

impl StatusFile {
    fn save(&self) -> Result<(), StudyError> {
        llem_results::write_json_atomic(&self.path, &self.status).map_err(Into::into)
    }

    /// Records how the task ended; returns that state.
    fn end(
        &mut self,
        state: TaskState,
        error: Option<(&str, String)>,
        elapsed_s: Option<f64>,
    ) -> Result<TaskState, StudyError> {
        self.status.state = state;
        self.status.finished_at = Some(iso8601_utc(unix_now_s()));
        self.status.elapsed_s = elapsed_s;
        if let Some((t, m)) = error {
            self.status.error_type = Some(t.to_string());
            self.status.error_message = Some(m);
        }
        self.save()?;
        Ok(state)
    }

    /// Records the end of the cell's process (`signalled`: Slurm sent the task a signal).
    fn end_of(&mut self, run: CellRun, signalled: bool) -> Result<TaskState, StudyError> {
        let elapsed = Some(run.elapsed_s);
        match run.end {
            CellEnd::Completed { result_file } if read_result(&result_file).is_some() => {
                self.end(TaskState::Completed, None, elapsed)
            }
            CellEnd::Completed { result_file } => {
                let m = format!("{} does not parse as a result", result_file.display());
                self.end(TaskState::Failed, Some(("BadResult", m)), elapsed)
            }
            CellEnd::Stopped {
                cause: StopCause::WallClock,
                message,
            } => self.end(
                TaskState::Failed,
                Some(("WallClockTimeout", message)),
                elapsed,
            ),
            CellEnd::Stopped { message, .. } => self.end(
                TaskState::Interrupted,
                Some(("Interrupted", message)),
                elapsed,
            ),
            // A signal from Slurm reaches the cell too, which may report it as its own
            // failure: a task that was signalled says so, and `sacct` later names the reason.
            CellEnd::Failed { .. } if signalled => {
                let m = "a signal (scancel, the time limit, preemption) stopped the cell".into();
                self.end(TaskState::Interrupted, Some(("Interrupted", m)), elapsed)
            }
            CellEnd::Failed {
                error_type,
                message,
            } => self.end(TaskState::Failed, Some((&error_type, message)), elapsed),
        }
    }
}

/// Sleeps `seconds` unless a signal comes first; `false` if one did.
pub(super) fn rest(seconds: f64, interrupts: &AtomicUsize) -> bool {
    if !(seconds.is_finite() && seconds > 0.0) {
        return true;
    }
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    while Instant::now() < end {
        if interrupts.load(Ordering::SeqCst) > 0 {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100).min(end - Instant::now()));
    }
    true
}

/// A node name as a directory name.
fn dir_safe(node: &str) -> String {
    let s: String = node
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        "node".into()
    } else {
        s
    }
}

/// `node_control`: the first task on a node (the one whose `create_dir` of the node's
/// directory succeeds, under the node's device locks) measures the control configuration
/// there before its own cell. Its end goes into `control.json` beside it; a failed control is
/// recorded, and the task's own cell runs all the same.
fn run_control(
    a: &TaskArgs,
    sub: &SubmissionRecord,
    ctl: &ControlRecord,
    launcher: &Launcher,
    limits: CellLimits,
    stop: &mut dyn FnMut() -> StopRequest,
    on_message: &mut dyn FnMut(&CellMessage),
) -> Result<(), StudyError> {
    let nodes = record::submission_dir(&a.dir, sub.number).join("nodes");
    let io = |what: &'static str, path: &Path| {
        let path = path.to_path_buf();
        move |source| StudyError::Io { what, path, source }
    };
    std::fs::create_dir_all(&nodes).map_err(io("cannot create", &nodes))?;
    let node_dir = nodes.join(dir_safe(&a.node.node));
    match std::fs::create_dir(&node_dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Ok(()),
        Err(e) => return Err(io("cannot create", &node_dir)(e)),
    }
    let cell = node_dir.join(CONTROL_CELL);
    std::fs::create_dir_all(&cell).map_err(io("cannot create", &cell))?;
    let mut spec: CellSpec = record::read(&a.dir.join(&ctl.spec))?
        .ok_or_else(|| StudyError::Refused(format!("{} is missing", ctl.spec)))?;
    spec.cell_dir = cell.clone();
    spec.experiment_id = format!("{}_{}", spec.experiment_id, dir_safe(&a.node.node));
    let spec_path = cell.join(layout::CELL_SPEC);
    llem_results::write_json_atomic(&spec_path, &spec)?;
    let mut status = StatusFile {
        path: node_dir.join(CONTROL_STATUS),
        status: TaskStatus::started(
            sub.number,
            format!("control on {}", a.node.node),
            &a.job_id_raw,
            &a.node,
        ),
    };
    status.save()?;
    on_message(&CellMessage::Note {
        message: format!(
            "node control: {} ({}) measured on {} first",
            ctl.label, ctl.config_hash, a.node.node
        ),
    });
    let r = supervise::run_cell(
        launcher,
        &spec_path,
        &cell.join(layout::CELL_LOG),
        limits,
        &mut |_| {},
        on_message,
        stop,
    );
    let signalled = a.interrupts.load(Ordering::SeqCst) > 0;
    match r {
        Ok(r) => status.end_of(r, signalled).map(|_| ()),
        Err(e) => status
            .end(TaskState::Failed, Some(("SpawnError", e.to_string())), None)
            .map(|_| ()),
    }
}

/// What a task reads before it starts: its submission, its array's job id and its cell.
struct Placement {
    jobs: JobsRecord,
    sub: SubmissionRecord,
    array_job_id: String,
    cell_dir: String,
    /// Every cell of the study, in manifest order (the breaker looks across them).
    cells: Vec<String>,
}

/// Finds the cell this task's index names in its submission's array for its cycle.
fn place(a: &TaskArgs) -> Result<Placement, StudyError> {
    let jobs = jobs_of(&a.dir)?;
    let sub = jobs
        .submissions
        .iter()
        .find(|s| s.number == a.submission)
        .cloned()
        .ok_or_else(|| StudyError::Refused(format!("no submission {} recorded", a.submission)))?;
    let array = sub
        .arrays
        .iter()
        .find(|x| x.cycle == a.cycle)
        .ok_or_else(|| StudyError::Refused(format!("no array for cycle {}", a.cycle)))?;
    let manifest = load_manifest(&a.dir)?;
    let position = array.cells.get(a.task_index).copied().ok_or_else(|| {
        StudyError::Refused(format!(
            "array task {} is beyond the {} cells of cycle {}",
            a.task_index,
            array.cells.len(),
            a.cycle
        ))
    })?;
    let entry = manifest
        .experiments
        .get(position)
        .ok_or_else(|| StudyError::Refused(format!("no cell {position} in the manifest")))?;
    Ok(Placement {
        array_job_id: array.job_id.clone(),
        cell_dir: entry.cell_dir.clone(),
        cells: manifest
            .experiments
            .iter()
            .map(|e| e.cell_dir.clone())
            .collect(),
        jobs,
        sub,
    })
}

/// Runs the task's cell; `on_message` sees the cell's progress lines.
pub fn run_task(
    a: &TaskArgs,
    on_message: &mut dyn FnMut(&CellMessage),
) -> Result<TaskState, StudyError> {
    let Placement {
        jobs,
        sub,
        array_job_id,
        cell_dir,
        cells,
    } = place(a)?;
    let cell = a.dir.join(&cell_dir);
    // Slurm may run a task again under the same id (requeued after a node failure or a
    // preemption, or by `scontrol requeue`): a cell this submission already completed is
    // never measured twice, and its record stays as it was (the cell would refuse to
    // overwrite its result, and the task record that it failed).
    if let Some(earlier) = record::read::<TaskStatus>(&cell.join(TASK_STATUS))?
        && earlier.submission == sub.number
        && earlier.state == TaskState::Completed
    {
        on_message(&CellMessage::Note {
            message: format!(
                "{cell_dir} was completed by an earlier run of this task ({}, {}); Slurm ran \
                 the task again, the cell is not measured twice",
                earlier.slurm_job, earlier.node.node
            ),
        });
        return Ok(TaskState::Completed);
    }
    let mut status = StatusFile {
        path: cell.join(TASK_STATUS),
        status: TaskStatus::started(
            sub.number,
            format!("{array_job_id}_{}", a.task_index),
            &a.job_id_raw,
            &a.node,
        ),
    };
    status.save()?;

    let me = breaker::Me {
        cell: &cell_dir,
        slurm_job: &status.status.slurm_job,
    };
    let probe = match breaker::gate(&a.dir, &sub, &cells, &me, &a.interrupts, on_message)? {
        Gate::Run(probe) => probe,
        Gate::Skip(message) => {
            return status.end(TaskState::Skipped, Some(("Skipped", message)), None);
        }
        Gate::Interrupted => {
            return status.end(
                TaskState::Interrupted,
                Some((
                    "Interrupted",
                    "a signal came while the circuit breaker was open".into(),
                )),
                None,
            );
        }
    };
    if let Some((state, error)) = before_start(a, &sub) {
        return status.end(state, Some(error), None);
    }
    let _locks = match node_locks(a, &sub, &status.status.slurm_job, on_message) {
        Ok(locks) => locks,
        Err((state, error)) => return status.end(state, Some(error), None),
    };
    let launcher = cell_launcher(&jobs);
    let limits = CellLimits {
        timeout: Duration::from_secs_f64(sub.experiment_timeout_s.max(0.001)),
        kill_grace: Duration::from_secs_f64(sub.kill_grace_s.max(0.0)),
    };
    let interrupts = a.interrupts.clone();
    let mut stop = || match interrupts.load(Ordering::SeqCst) {
        0 if past_deadline(&sub) => StopRequest::Terminate(StopCause::WallClock),
        0 => StopRequest::None,
        1 => StopRequest::Terminate(StopCause::User),
        _ => StopRequest::Kill(StopCause::User),
    };
    if let Some(ctl) = &sub.control {
        run_control(a, &sub, ctl, &launcher, limits, &mut stop, on_message)?;
    }
    let run = supervise::run_cell(
        &launcher,
        &cell.join(layout::CELL_SPEC),
        &cell.join(layout::CELL_LOG),
        limits,
        &mut |_| {},
        on_message,
        &mut stop,
    );
    let r = match run {
        Ok(r) => r,
        Err(e) => {
            return status.end(TaskState::Failed, Some(("SpawnError", e.to_string())), None);
        }
    };
    let end = status.end_of(r, a.interrupts.load(Ordering::SeqCst) > 0)?;
    if let Some(p) = probe {
        p.settle(end)?;
    }
    Ok(end)
}

/// Whether the study's wall-clock limit has passed.
fn past_deadline(sub: &SubmissionRecord) -> bool {
    sub.deadline_unix_s.is_some_and(|d| unix_now_s() >= d)
}

/// How a task ends before its cell starts: its state and error (type, message).
type EarlyEnd = (TaskState, (&'static str, String));

/// The wall-clock limit, then the rest between cells; `Some` when the task ends here.
fn before_start(a: &TaskArgs, sub: &SubmissionRecord) -> Option<EarlyEnd> {
    if past_deadline(sub) {
        return Some((
            TaskState::Skipped,
            (
                "WallClockTimeout",
                "the study's wall-clock limit passed first".into(),
            ),
        ));
    }
    if sub.no_gaps {
        return None;
    }
    let first_of_study =
        a.task_index == 0 && sub.arrays.first().is_some_and(|f| f.cycle == a.cycle);
    // A search's batches are not cycles: its cells are paced as the cells of one cycle, as
    // the local runner paces them.
    let gap = match (first_of_study, a.task_index) {
        (true, _) => 0.0,
        (false, 0) if !sub.search => sub.gaps_s.1,
        _ => sub.gaps_s.0,
    };
    (!rest(gap, &a.interrupts)).then(|| {
        (
            TaskState::Interrupted,
            (
                "Interrupted",
                "a signal came before the cell started".into(),
            ),
        )
    })
}

/// Takes the node's device locks, waiting while another cell holds them: two cells on one
/// node at once would share its power draw. The locks are the GPUs Slurm gave this task (or
/// the submission's, or the CPU); `None` when the study locks nothing.
fn node_locks(
    a: &TaskArgs,
    sub: &SubmissionRecord,
    slurm_job: &str,
    on_message: &mut dyn FnMut(&CellMessage),
) -> Result<Option<DeviceLocks>, EarlyEnd> {
    let Some(d) = &sub.locks.dir else {
        return Ok(None);
    };
    let resources: Vec<String> = match &a.lock_resources {
        Some(gpus) => sub
            .locks
            .resources
            .iter()
            .filter(|r| !r.starts_with("gpu"))
            .chain(gpus)
            .cloned()
            .collect(),
        None => sub.locks.resources.clone(),
    };
    let holder = Holder {
        pid: std::process::id(),
        host: a.node.node.clone(),
        started_at: iso8601_utc(unix_now_s()),
        purpose: format!("Slurm task {slurm_job} of study {}", a.dir.display()),
    };
    let stop = || a.interrupts.load(Ordering::SeqCst) > 0;
    let mut on_wait = |_: &LockError| {
        on_message(&CellMessage::Note {
            message: format!(
                "waiting for {} on this node (another cell holds it)",
                resources.join(", ")
            ),
        });
    };
    match locks::acquire_waiting(d, &resources, &holder, &stop, &mut on_wait) {
        Ok(Some(l)) => Ok(Some(l)),
        Ok(None) => Err((
            TaskState::Interrupted,
            (
                "Interrupted",
                "a signal came while the task waited for the node's locks".into(),
            ),
        )),
        Err(e) => Err((TaskState::Failed, ("LockHeld", e.to_string()))),
    }
}

/// How the node starts a cell: the submission's command, then `__cell`. The runner URLs'
/// credentials reach the task in its environment (sbatch passes the submitter's), and the
/// cell inherits them.
fn cell_launcher(jobs: &JobsRecord) -> Launcher {
    let mut command = jobs.command.iter();
    Launcher {
        program: command.next().map(PathBuf::from).unwrap_or_default(),
        args: command.map(Into::into).chain(["__cell".into()]).collect(),
        env: Vec::new(),
    }
}
