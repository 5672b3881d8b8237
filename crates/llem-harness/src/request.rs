//! What an experiment is asked to measure, and what it leaves behind.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use llem_config::ExperimentConfig;
use llem_energy::SensorEnv;
use llem_results::ExperimentResult;

/// What to run and where to put it.
pub struct ExperimentRequest<'a> {
    /// The resolved config.
    pub config: &'a ExperimentConfig,
    /// Its `measurement_config_hash`.
    pub config_hash: &'a str,
    /// `experiment_id` for the result.
    pub experiment_id: String,
    /// The cell directory (created; must not hold a result yet).
    pub cell_dir: PathBuf,
    /// The asset cache (models and datasets by name).
    pub assets_dir: PathBuf,
    /// Where the baseline cache lives (`~/.cache/llem`).
    pub cache_dir: PathBuf,
    /// Where device-settings journals are written (`~/.cache/llem/device-journal`).
    pub device_journal_dir: PathBuf,
    /// Sensor roots and settings.
    pub sensor_env: SensorEnv,
    /// Telemetry sampling interval.
    pub sampling_interval: Duration,
    /// llem's version.
    pub llem_version: &'a str,
    /// The commit llem was built from.
    pub git_commit: Option<&'a str>,
    /// Set to stop at the next decode step (Ctrl-C).
    pub cancel: Arc<AtomicBool>,
    /// Python for the transformers worker, from the user config (`python:`, `LLEM_PYTHON`).
    pub python: Option<String>,
    /// Hugging Face cache from the user config (`output.model_cache_dir`).
    pub model_cache_dir: Option<PathBuf>,
    /// The study runner already checked this configuration (a cell process): preflight skips
    /// the transformers Python probe, which imports torch (seconds) only for the worker to
    /// import it again.
    pub runnable_checked: bool,
    /// Grid carbon intensity from the user config, gCO2/kWh (null: the world average).
    pub carbon_intensity_gco2_kwh: Option<f64>,
    /// Data-centre PUE from the user config (null: 1.0).
    pub datacenter_pue: Option<f64>,
    /// The plan's warnings about this configuration (settings that will not act as
    /// written): recorded in the result, whose numbers they concern.
    pub plan_warnings: Vec<String>,
    /// Where the sampler publishes its running figures for live exports (none: nowhere).
    pub live: Option<llem_energy::LiveBoard>,
}

/// What a finished experiment left behind.
#[derive(Debug)]
pub struct ExperimentOutcome {
    /// The result, as written to `result.json`.
    pub result: ExperimentResult,
    /// The cell directory.
    pub cell_dir: PathBuf,
}
