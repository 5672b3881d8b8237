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
pub mod devices;
pub mod environment;
mod flops;
mod gate;
mod goodput;
mod latency;
pub mod lifecycle;
mod progress;
mod verdict;
mod warmup;
mod window;

pub use lifecycle::{ExperimentOutcome, ExperimentRequest, HarnessError, run_experiment};

/// What the CLI needs to know of engines, reached through the harness (the binary does not
/// depend on `llem-engines`).
pub mod engines {
    pub use llem_engines::assets::{assets_dir, cache_dir, resolve_model};
    pub use llem_engines::engine_log;
    pub use llem_engines::llamacpp::describe_gguf;
    pub use llem_engines::memory::{DescribedModel, MemoryEstimate, describe_model, estimate};
    pub use llem_engines::registry::{LocalProgram, availability, default_image, local_program};
    pub use llem_engines::serving::find_llama_server;
    pub use llem_engines::serving::probe::{EndpointProbe, probe as probe_endpoint};
    pub use llem_engines::which;
}
pub use progress::{Event, Phase, Progress, Silent};
