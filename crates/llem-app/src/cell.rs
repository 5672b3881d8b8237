//! One study cell, measured in the child process a study started for it: its spec as the
//! runner wrote it, the runner credentials handed down in the environment, this machine's
//! user config.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use llem_harness::{ExperimentOutcome, HarnessError, Progress};
use llem_study::CellSpec;

use crate::AppError;
use crate::single::{CellTarget, experiment_request};

/// Measures the cell `spec` describes. The spec holds runner URLs redacted; the real ones
/// come from [`llem_config::credentials::RUNNER_CREDENTIALS_ENV`].
pub fn run_cell(
    mut spec: CellSpec,
    progress: &mut dyn Progress,
    cancel: Arc<AtomicBool>,
) -> Result<ExperimentOutcome, AppError> {
    let credentials = std::env::var(llem_config::credentials::RUNNER_CREDENTIALS_ENV).ok();
    llem_config::credentials::restore(&mut spec.config, credentials.as_deref())?;
    // The plan was checked with the user config; a file broken since fails the cell, never
    // quietly measures with defaults.
    let user = llem_config::UserSettings::load(
        &llem_config::Env::from_process(),
        &mut llem_config::source::SourceMap::new(),
    )
    .map_err(AppError::Config)?
    .config;
    // On a Slurm node this is the first llem to run since a task there may have died.
    for r in crate::device::restore_leftovers() {
        progress.event(llem_harness::Event::Note(crate::device::describe(&r)));
    }
    // Live metrics: the sampler's figures go to the study's parent, which serves them, and
    // to a Pushgateway when asked (the only way out of a Slurm task).
    let sampling = Duration::from_secs_f64((spec.sampling_interval_ms / 1000.0).clamp(0.001, 60.0));
    let pushing = match &spec.metrics_push {
        Some(url) => push_exports(&spec, url, sampling)?,
        None => None,
    };
    let board = match &pushing {
        Some(x) => Some(x.metrics.board()),
        None => spec.live_interval_ms.map(|_| llem_energy::LiveBoard::new()),
    };
    let _relay = board.clone().zip(spec.live_interval_ms).map(|(b, ms)| {
        crate::live::relay::Relay::start(
            b,
            Duration::from_secs_f64((ms / 1000.0).clamp(0.05, 60.0)),
            llem_study::child::emit,
        )
    });
    let request = experiment_request(
        CellTarget {
            config: &spec.config,
            config_hash: &spec.config_hash,
            experiment_id: spec.experiment_id.clone(),
            cell_dir: spec.cell_dir.clone(),
            plan_warnings: spec.plan_warnings.clone(),
        },
        &user,
        spec.baseline_cache_dir.clone(),
        sampling,
        cancel,
        // `run_study` checked every configuration before its first cell.
        true,
        board,
    );
    let outcome = match &pushing {
        Some(x) => {
            let mut tee = crate::live::ProgressTee {
                inner: &mut *progress,
                metrics: &x.metrics,
            };
            llem_harness::run_experiment(&request, &mut tee)
        }
        None => llem_harness::run_experiment(&request, progress),
    };
    drop(request);
    // The final push carries the cell's whole figures; a gateway that refused is said.
    for note in pushing
        .map(crate::live::LiveExports::finish)
        .unwrap_or_default()
    {
        progress.event(llem_harness::Event::Note(note));
    }
    Ok(outcome?)
}

/// The Pushgateway export of a cell: its group is the study, the cell and the node.
fn push_exports(
    spec: &CellSpec,
    url: &str,
    sampling: Duration,
) -> Result<Option<crate::live::LiveExports>, AppError> {
    let study = spec
        .cell_dir
        .parent()
        .and_then(|d| d.file_name())
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let opts = crate::live::LiveOptions {
        push_gateway: Some(url.to_string()),
        ..crate::live::LiveOptions::default()
    };
    let grouping = [
        ("study", study.clone()),
        ("cell", spec.index.to_string()),
        ("node", crate::host::hostname()),
    ];
    let exports = crate::live::LiveExports::start(&opts, "cell", &study, &grouping)?;
    if let Some(x) = &exports {
        x.metrics.staleness(sampling);
        x.metrics.configuration(
            spec.label.as_deref().unwrap_or(&spec.config_hash),
            &spec.config_hash,
            &spec.config.model,
        );
    }
    Ok(exports)
}

/// The `error_type` a failed cell reports to its study (the manifest's, as the Python llem
/// names them).
pub fn error_type(e: &AppError) -> &'static str {
    match e {
        AppError::Harness(h) => match h {
            HarnessError::Config(_) => "ConfigError",
            HarnessError::Dataset(_) => "DatasetError",
            HarnessError::Engine(_) => "EngineError",
            HarnessError::Energy(_) => "EnergyError",
            HarnessError::Results(_) => "ResultsError",
            HarnessError::NothingMeasured(_) => "NothingMeasured",
            HarnessError::RequestsFailed(_) => "RequestsFailed",
            HarnessError::Device(_) => "DeviceSettingsError",
            HarnessError::DeviceRestore(_) => "DeviceRestoreError",
            HarnessError::Cancelled => "Interrupted",
        },
        AppError::Cancelled => "Interrupted",
        AppError::Option { .. } | AppError::Credentials(_) => "SpecError",
        AppError::Config(_) | AppError::ConfigNotFound { .. } => "ConfigError",
        _ => "EngineError",
    }
}
