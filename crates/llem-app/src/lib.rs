//! `llem-app`: the one way into llem for every front end. The CLI and the Python package
//! build typed options ([`PlanOptions`], [`RunOptions`], [`StudyOptions`]), then call
//! [`plan()`], [`run_one`] or [`run_study`] with an observer for progress and a cancel flag;
//! what goes wrong comes back as one [`AppError`]. Nothing here parses a command line or
//! prints.

pub mod cell;
pub mod command;
pub mod device;
pub mod doctor;
mod error;
pub mod events;
pub mod host;
pub mod live;
pub mod logging;
pub mod memory;
pub mod options;
pub mod plan;
pub mod schedule;
pub mod single;
pub mod slurm;
pub mod status;
pub mod study;

pub use error::{AppError, ErrorKind, LiveError, ProbeError};
pub use llem_harness::{Event, ExperimentOutcome, Phase, Progress, Silent};
pub use llem_study::{CellMessage, Execution, Observer, StudyEvent, StudyOutcome};
pub use options::{
    ExecutorChoice, Launcher, PlanOptions, ResumeFrom, RunOptions, SlurmOverrides, StudyOptions,
};
pub use plan::plan;
pub use single::run_one;
pub use study::run_study;
