//! The files a Slurm study keeps beside its cells. Each has one writer: `jobs.json` and
//! `design.json` the submitter, `slurm_task.json` in a cell directory the task that runs the
//! cell, `breaker.json` the first task that trips the circuit breaker. The manifest and
//! `study_result.json` are compiled from them (`compile`), never written by two tasks.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::StudyError;

pub use llem_results::layout::SLURM_DIR;
/// Submissions and their jobs.
pub const JOBS: &str = "jobs.json";
/// The parts of the plan the result is assembled from ([`crate::design::StudyDesign`]).
pub const DESIGN: &str = "design.json";
/// A search's candidates and settings, for the job that picks its next batch.
pub const SEARCH_DESIGN: &str = "search_design.json";
/// Written once, by the task that tripped the circuit breaker.
pub const BREAKER: &str = "breaker.json";
/// Written by the task whose cell is the breaker's half-open probe; removed when it ends.
pub const PROBE: &str = "probe.json";
/// A cell's own status, in its directory.
pub const TASK_STATUS: &str = "slurm_task.json";

/// `sbatch` settings of a Slurm study.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SlurmOptions {
    /// `--partition`.
    pub partition: Option<String>,
    /// `--gres` of each cell.
    pub gres: Option<String>,
    /// `--time` of each cell.
    pub time: Option<String>,
    /// `--account`.
    pub account: Option<String>,
    /// The `%M` of `--array`.
    pub max_parallel: Option<u32>,
    /// Further `sbatch` arguments.
    pub extra: Vec<String>,
}

/// How a task takes the device locks of its node (as `llem run` does on one host).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskLocks {
    /// Lock directory on the node; `None` for `--no-lock`.
    pub dir: Option<PathBuf>,
    /// Devices to lock.
    pub resources: Vec<String>,
}

/// One job array: the cells of one cycle (of a search: one batch), task `k` running `cells[k]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArrayRecord {
    /// The cycle; a search's batch number (1, 2, ...), its cells being runs of different
    /// configurations.
    pub cycle: u32,
    /// Slurm's array job id.
    pub job_id: String,
    /// Positions in the manifest's `experiments`, by array task index.
    pub cells: Vec<usize>,
}

/// One `llem run --executor slurm` (a first submission or a resume).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SubmissionRecord {
    /// 1, 2, ...
    pub number: u32,
    /// When (ISO-8601 UTC).
    pub submitted_at: String,
    /// The study's wall-clock limit as a Unix time, if it has one.
    pub deadline_unix_s: Option<f64>,
    /// The `sbatch` settings.
    pub options: SlurmOptions,
    /// Device locks on each node.
    pub locks: TaskLocks,
    /// `--no-gaps`.
    pub no_gaps: bool,
    /// Telemetry interval handed to the cells, ms.
    pub sampling_interval_ms: f64,
    /// The Pushgateway the cells push their live metrics to (`--metrics-push`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_push: Option<String>,
    /// Between SIGTERM and SIGKILL when a cell is stopped, s.
    pub kill_grace_s: f64,
    /// `experiment_timeout_seconds`.
    pub experiment_timeout_s: f64,
    /// Pauses before a cell within a cycle, and before the first of a later cycle, s.
    pub gaps_s: (f64, f64),
    /// The circuit breaker's threshold (0 = off).
    pub max_consecutive_failures: u32,
    /// `circuit_breaker_cooldown_seconds`: the pause before the half-open probe, s.
    #[serde(default)]
    pub breaker_cooldown_s: f64,
    /// The arrays, in cycle order (each after the one before).
    pub arrays: Vec<ArrayRecord>,
    /// The job that compiles the manifest and the result once the arrays are done.
    pub compile_job: Option<String>,
    /// The control cell each node measures first (`study_execution.node_control`).
    #[serde(default)]
    pub control: Option<ControlRecord>,
    /// A search: its arrays are batches of proposals (keyed by batch number in `cycle`), and
    /// its compile job submits the next batch until the search stops.
    #[serde(default)]
    pub search: bool,
}

/// `node_control`: which configuration each node measures before its first cell.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControlRecord {
    /// Its label.
    pub label: String,
    /// Its `measurement_config_hash`.
    pub config_hash: String,
    /// Its spec (the cell directory is filled in per node), relative to the study directory.
    pub spec: String,
}

/// One node's control cell, as compiled into `_slurm/node_controls.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeControl {
    /// The submission.
    pub submission: u32,
    /// The node.
    pub node: String,
    /// How it ended.
    pub state: TaskState,
    /// Why it failed.
    pub error_type: Option<String>,
    /// What went wrong.
    pub error_message: Option<String>,
    /// Its `result.json`, relative to the study directory.
    pub result_file: Option<String>,
    /// Energy per output token, mJ.
    pub mj_per_tok: Option<f64>,
    /// Output tokens per second.
    pub tokens_per_s: Option<f64>,
    /// The GPUs it ran on.
    pub gpus: Vec<GpuIdentity>,
}

/// Compiled node controls.
pub const NODE_CONTROLS: &str = "node_controls.json";
/// A node's control cell, in `_slurm/sub-NNN/nodes/<node>/`.
pub const CONTROL_CELL: &str = "control";
/// Its status, beside it.
pub const CONTROL_STATUS: &str = "control.json";

/// `_slurm/sub-NNN`.
pub fn submission_dir(study: &Path, number: u32) -> PathBuf {
    slurm_dir(study).join(format!("sub-{number:03}"))
}

/// `_slurm/jobs.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobsRecord {
    /// How a compute node starts llem (`/path/to/llem`, or `python -m llem`).
    pub command: Vec<String>,
    /// Every submission, oldest first.
    pub submissions: Vec<SubmissionRecord>,
}

impl JobsRecord {
    /// The submission being run now.
    pub fn latest(&self) -> Option<&SubmissionRecord> {
        self.submissions.last()
    }

    /// Every job id of the latest submission (arrays and the compile job).
    pub fn latest_job_ids(&self) -> Vec<String> {
        self.latest().map_or_else(Vec::new, |s| {
            s.arrays
                .iter()
                .map(|a| a.job_id.clone())
                .chain(s.compile_job.clone())
                .collect()
        })
    }
}

/// Where a task stands with its cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// The cell is running.
    Running,
    /// Its result is written.
    Completed,
    /// It ended without a result.
    Failed,
    /// It was stopped by a signal (scancel, time limit, node failure, preemption).
    Interrupted,
    /// The task did not run it (circuit breaker, wall-clock limit).
    Skipped,
}

/// A GPU the task saw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuIdentity {
    /// NVML index on the node.
    pub index: u32,
    /// `GPU-...` UUID.
    pub uuid: String,
    /// Board name.
    pub name: String,
}

/// The node a task ran on, as the task saw it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeIdentity {
    /// Host name.
    pub node: String,
    /// The GPUs allocated to the job (all the node's when Slurm names none).
    pub gpus: Vec<GpuIdentity>,
    /// NVIDIA driver version.
    pub gpu_driver: Option<String>,
}

/// `slurm_task.json`: one cell's attempt, written only by its task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    /// Where it stands.
    pub state: TaskState,
    /// The submission it belongs to.
    pub submission: u32,
    /// `ARRAYJOB_TASK`.
    pub slurm_job: String,
    /// Slurm's own id of this task's job (`SLURM_JOB_ID`), what `sacct` names it by.
    pub job_id_raw: String,
    /// Where it ran.
    #[serde(flatten)]
    pub node: NodeIdentity,
    /// The task's process id on the node.
    pub pid: u32,
    /// When the task started (ISO-8601 UTC).
    pub started_at: String,
    /// When it ended.
    pub finished_at: Option<String>,
    /// Seconds the cell's process ran.
    pub elapsed_s: Option<f64>,
    /// Class of failure.
    pub error_type: Option<String>,
    /// What went wrong.
    pub error_message: Option<String>,
}

impl TaskStatus {
    /// A task's status as it starts: running, as this process, now.
    pub fn started(
        submission: u32,
        slurm_job: String,
        job_id_raw: &str,
        node: &NodeIdentity,
    ) -> TaskStatus {
        TaskStatus {
            state: TaskState::Running,
            submission,
            slurm_job,
            job_id_raw: job_id_raw.to_string(),
            node: node.clone(),
            pid: std::process::id(),
            started_at: llem_results::time::iso8601_utc(llem_results::time::unix_now_s()),
            finished_at: None,
            elapsed_s: None,
            error_type: None,
            error_message: None,
        }
    }
}

/// `breaker.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BreakerTrip {
    /// When.
    pub at: String,
    /// Why.
    pub message: String,
}

/// `probe.json`: which task runs the half-open probe.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbeClaim {
    /// The submission it belongs to.
    pub submission: u32,
    /// When it was claimed.
    pub at: String,
    /// Why the breaker opened.
    pub message: String,
    /// The probe's cell directory, relative to the study directory.
    pub cell: String,
    /// `ARRAYJOB_TASK` of the probe.
    pub slurm_job: String,
}

/// Reads a JSON record; `Ok(None)` when the file does not exist.
pub fn read<T: serde::de::DeserializeOwned>(path: &Path) -> Result<Option<T>, StudyError> {
    match llem_config::files::read_record_string(path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| StudyError::BadManifest {
                path: path.to_path_buf(),
                message: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(StudyError::Io {
            what: "cannot read",
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// `_slurm/` of a study directory.
pub fn slurm_dir(study: &Path) -> PathBuf {
    study.join(SLURM_DIR)
}
