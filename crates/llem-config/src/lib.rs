//! Experiment and study configuration for llem.
//!
//! YAML files are read into a tree that remembers where every value was written
//! ([`yaml`]), expanded (`_extends`, `base:`, `sweep:`, `experiments:`), typed into
//! [`ExperimentConfig`]s with located errors, validated, hashed and put in execution order:
//! the result is a [`StudyPlan`] ([`plan::plan`]).

mod aliases;
mod block;
mod canonical;
pub mod credentials;
mod de;
pub mod dialect004;
pub mod dialect07;
pub mod duration;
pub mod emit;
mod error;
pub mod files;
pub mod infer;
mod load;
pub mod model;
pub mod order;
pub mod plan;
pub mod redact;
pub mod reference;
pub mod rng;
mod rules;
pub mod schedule;
pub mod schema;
pub mod search;
pub mod source;
mod sweep;
pub mod user_config;
mod walk;
pub mod yaml;

pub use canonical::{ConfigDigest, digest_of};
pub use error::{
    ConfigError, Diagnostic, ErrorKind, RunnerError, UnknownName, ValueError, ValueKind,
    did_you_mean,
};
pub use model::*;
pub use plan::{Overrides, PlanKind, PlanRequest, StudyPlan, plan};
pub use user_config::{Env, UserSettings};
