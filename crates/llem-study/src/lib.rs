//! llem's study runner: many experiments, fairly.
//!
//! [`run_study`] takes a [`llem_config::StudyPlan`] and runs each cell (a configuration in a
//! cycle) as a child process in its own process group, in the plan's order, with the gaps,
//! circuit breaker, per-cell and wall-clock timeouts, advisory device locks and a
//! `manifest.json` checkpoint rewritten atomically on every state change. A study stopped by
//! Ctrl-C, a crash or `kill -9` resumes where it stopped. At the end it computes statistics
//! across cycles and writes `study_result.json`. It measures nothing itself. The same study
//! runs on a Slurm cluster through the [`Executor`] seam ([`slurm`]).

mod artefacts;
mod breaker;
pub mod child;
mod cycle_stats;
pub mod design;
mod executor;
mod locks;
mod protocol;
mod resume;
pub mod runner;
pub mod schedule;
pub mod slurm;
pub mod supervise;

use std::path::PathBuf;

pub use breaker::{CircuitBreaker, Verdict};
pub use executor::{Execution, Executor, Local, Slurm};
pub use locks::{
    DeviceLocks, LockError, OnHeld, lock_for_experiment, study_runner_alive, waiting_note,
};
pub use protocol::{CellMessage, CellSpec, LiveFigure, PARENT_PID_ENV};
pub use resume::{find_resumable, load_manifest, resume_target};
pub use runner::{Observer, ResumeFrom, StudyEvent, StudyOptions, StudyOutcome, run_study};
pub use supervise::{Launcher, StopCause};

/// Why a study could not run (cell failures are not errors: they are recorded per cell).
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// A file system operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Writing a result file failed.
    #[error(transparent)]
    Results(#[from] llem_results::ResultsError),
    /// Another study holds a device lock.
    #[error(transparent)]
    Lock(#[from] locks::LockError),
    /// The cell process could not be started.
    #[error(transparent)]
    Spawn(#[from] supervise::SpawnError),
    /// `--resume` found nothing to resume.
    #[error(
        "no study named '{name}' to resume under {dir} (a completed study is not resumed); run without --resume to start one"
    )]
    NothingToResume {
        /// The study name.
        name: String,
        /// Where it looked.
        dir: PathBuf,
    },
    /// The study to resume is running in another process.
    #[error("{dir} is still being run by {holder}; stop that first")]
    StillRunning {
        /// The study directory.
        dir: PathBuf,
        /// Who runs it.
        holder: String,
    },
    /// The study file changed since the study started.
    #[error(
        "cannot resume {dir}: the study design changed (design hash {old} then, {new} now), so its results would mix different experiments:\n{}\nRestore the file as it was, or start a new study without --resume.",
        .details.iter().map(|d| format!("  - {d}")).collect::<Vec<_>>().join("\n")
    )]
    Drift {
        /// The study directory.
        dir: PathBuf,
        /// Design hash in the manifest.
        old: String,
        /// Design hash now.
        new: String,
        /// What differs.
        details: Vec<String>,
    },
    /// A Slurm command failed.
    #[error("{command}: {message}")]
    Slurm {
        /// `sbatch`, `squeue`, `sacct`, `scancel`.
        command: String,
        /// What it said.
        message: String,
    },
    /// The study is not one this operation applies to.
    #[error("{0}")]
    Refused(String),
    /// Stopped (Ctrl-C) while waiting for the device locks: nothing was created.
    #[error("stopped while waiting for the device locks; nothing was started")]
    Cancelled,
    /// A manifest that cannot be read.
    #[error("cannot read {path}: {message}")]
    BadManifest {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
}
