//! `study_execution:` — cycles, order, pacing and robustness limits of a study.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::names::ExperimentOrder;

/// `study_execution:` as written; unset fields are filled by [`StudyExecution`] resolution
/// (command line > YAML > user config > defaults).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct StudyExecutionConfig {
    /// Times the whole list of configurations is run (default: 3 for studies, 1 for a
    /// single experiment).
    #[schemars(range(min = 1))]
    pub n_cycles: Option<u32>,
    /// sequential, interleave, shuffle, reverse, latin_square (default: shuffle for studies).
    pub experiment_order: Option<ExperimentOrder>,
    /// Seed of the shuffle order (null = derived from study_design_hash).
    pub shuffle_seed: Option<i64>,
    /// Pause between experiments in seconds (default: user config, else 60; at most a day).
    #[schemars(range(min = 0.0, max = 86400.0))]
    pub experiment_gap_seconds: Option<f64>,
    /// Pause between cycles in seconds (default: user config, else 300; at most a day).
    #[schemars(range(min = 0.0, max = 86400.0))]
    pub cycle_gap_seconds: Option<f64>,
    /// Circuit breaker: stop after this many failures in a row (0 = off, 1 = fail fast;
    /// default 10).
    pub max_consecutive_failures: Option<u32>,
    /// Pause before the circuit breaker's probe experiment, in seconds (default 60; at most a
    /// day).
    #[schemars(range(min = 0.0, max = 86400.0))]
    pub circuit_breaker_cooldown_seconds: Option<f64>,
    /// Hard limit for the whole study in hours (null = none; at most a year).
    #[schemars(extend("exclusiveMinimum" = 0), range(max = 8760.0))]
    pub wall_clock_timeout_hours: Option<f64>,
    /// Per-experiment limit in seconds; the cell is killed past it (default 600, or 1800
    /// when a cell launches a server: its 1200 s readiness wait comes first; at most 30 days).
    #[schemars(extend("exclusiveMinimum" = 0), range(max = 2592000.0))]
    pub experiment_timeout_seconds: Option<f64>,
    /// Run configurations with equal measurement_config_hash once (default true).
    pub deduplicate_equivalent: Option<bool>,
}

/// Resolved execution settings: every value concrete.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StudyExecution {
    /// Cycles.
    pub n_cycles: u32,
    /// Order across cycles.
    pub experiment_order: ExperimentOrder,
    /// Shuffle seed as configured (null = derived from the design hash).
    pub shuffle_seed: Option<i64>,
    /// Pause between experiments, seconds.
    pub experiment_gap_seconds: f64,
    /// Pause between cycles, seconds.
    pub cycle_gap_seconds: f64,
    /// Circuit breaker threshold.
    pub max_consecutive_failures: u32,
    /// Circuit breaker cooldown, seconds.
    pub circuit_breaker_cooldown_seconds: f64,
    /// Study wall-clock limit, hours.
    pub wall_clock_timeout_hours: Option<f64>,
    /// Per-experiment limit, seconds.
    pub experiment_timeout_seconds: f64,
    /// How the per-experiment limit was derived when it was not written (plans that launch
    /// a server add its readiness wait), for the plan to say.
    #[serde(skip)]
    pub experiment_timeout_derivation: Option<String>,
    /// Deduplicate equivalent configurations.
    pub deduplicate_equivalent: bool,
}

/// How long llem waits for a server it launched to become healthy, s: a cold vLLM start
/// downloads, loads and compiles for many minutes. The serving engines use this value.
pub const SERVER_READY_TIMEOUT_S: f64 = 1200.0;
/// Built-in per-experiment limit beyond any server start, s.
pub const DEFAULT_EXPERIMENT_TIMEOUT_S: f64 = 600.0;

/// Built-in pause between experiments when neither YAML nor user config sets one.
pub const DEFAULT_EXPERIMENT_GAP_SECONDS: f64 = 60.0;
/// Built-in pause between cycles when neither YAML nor user config sets one.
pub const DEFAULT_CYCLE_GAP_SECONDS: f64 = 300.0;
