//! Experiment and study configuration for llem.
//!
//! YAML files are read into a tree that remembers where every value was written
//! ([`yaml`]), expanded (`_extends`, `base:`, `sweep:`, `experiments:`), typed into
//! [`ExperimentConfig`]s with located errors, validated, hashed and put in execution order:
//! the result is a [`StudyPlan`].

pub mod de;
pub mod error;
pub mod source;
pub mod yaml;
pub mod model;

pub use model::*;
pub mod aliases;
pub mod schema;
pub mod user_config;
