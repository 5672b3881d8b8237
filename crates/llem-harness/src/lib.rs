//! llem's harness: one experiment, measured.
//!
//! [`lifecycle::run_experiment`] takes a resolved config through preflight, baseline, model
//! load, warmup (fixed or CV-converged), thermal floor and the measurement window, then
//! assembles the [`llem_results::ExperimentResult`] (tokens, energy, adjusted energy, FLOPs,
//! latency statistics, extended metrics, warnings) and writes the cell's artefacts. It does
//! not schedule experiments.

mod assemble;
pub mod attribution;
pub mod command;
pub mod device_settings;
pub mod devices;
pub mod environment;
mod error;
mod flops;
mod gate;
mod goodput;
mod latency;
pub mod lifecycle;
mod progress;
mod replay;
mod request;
mod sessions;
pub mod timeline;
mod verdict;
mod warmup;
mod window;

pub use lifecycle::{ExperimentOutcome, ExperimentRequest, HarnessError, run_experiment};
pub use progress::{Event, Phase, Progress, Silent};
