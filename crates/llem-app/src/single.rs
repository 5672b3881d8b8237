//! One experiment measured in this process (`llem run` of a single configuration,
//! `llem.run_experiment`), and the request a study's cell measures with.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use llem_config::StudyPlan;
use llem_config::user_config::UserConfig;
use llem_energy::SensorEnv;
use llem_harness::{Event, ExperimentOutcome, ExperimentRequest, Progress};
use llem_results::layout;

use crate::{AppError, RunOptions, host};

/// The cell an experiment request is for.
pub struct CellTarget<'a> {
    /// The resolved config.
    pub config: &'a llem_config::ExperimentConfig,
    /// Its `measurement_config_hash`.
    pub config_hash: &'a str,
    /// `experiment_id` for the result.
    pub experiment_id: String,
    /// The cell directory.
    pub cell_dir: PathBuf,
    /// The plan's warnings about this configuration.
    pub plan_warnings: Vec<String>,
}

/// The one way an [`ExperimentRequest`] is built, for a single experiment and for a study's
/// cell alike: this machine's sensors and assets, the user config the plan was made with.
pub fn experiment_request<'a>(
    cell: CellTarget<'a>,
    user: &UserConfig,
    baseline_cache_dir: PathBuf,
    sampling_interval: Duration,
    cancel: Arc<AtomicBool>,
    runnable_checked: bool,
    live: Option<llem_energy::LiveBoard>,
) -> ExperimentRequest<'a> {
    ExperimentRequest {
        config: cell.config,
        config_hash: cell.config_hash,
        experiment_id: cell.experiment_id,
        cell_dir: cell.cell_dir,
        assets_dir: host::assets_dir(),
        cache_dir: baseline_cache_dir,
        device_journal_dir: host::device_journal_dir(),
        sensor_env: SensorEnv::from_process(user.measurement.cpu_tdp_w)
            .with_node(&user.measurement.node_power),
        sampling_interval,
        llem_version: host::VERSION,
        git_commit: Some(host::GIT_COMMIT),
        cancel,
        python: user.python.clone(),
        model_cache_dir: host::model_cache_dir(user),
        runnable_checked,
        carbon_intensity_gco2_kwh: user.measurement.carbon_intensity_gco2_kwh,
        datacenter_pue: user.measurement.datacenter_pue,
        plan_warnings: cell.plan_warnings,
        live,
    }
}

/// Removes directories this run created but left empty (a failed or cancelled run).
fn remove_if_empty(dirs: &[&Path]) {
    for d in dirs {
        let _ = std::fs::remove_dir(d);
    }
}

/// Measures the plan's one experiment in this process: device locks, a fresh run
/// directory, then the harness. `cancel` stops it cleanly at the next decode step; a failed
/// or cancelled run leaves no empty directories behind. A plan of more than one run is a
/// study: [`crate::run_study`].
pub fn run_one(
    plan: &StudyPlan,
    opts: &RunOptions,
    progress: &mut dyn Progress,
    cancel: Arc<AtomicBool>,
) -> Result<ExperimentOutcome, AppError> {
    let single = plan
        .runs
        .first()
        .filter(|_| crate::plan::is_single(plan))
        .and_then(|run| Some((run, plan.configs.get(run.config)?)));
    let Some((run, pc)) = single else {
        return Err(AppError::option(
            "config",
            format!(
                "this configuration plans {} runs (a study): run it as a study",
                plan.runs.len()
            ),
        ));
    };
    let cfg = &pc.config;
    for r in crate::device::restore_leftovers() {
        progress.event(Event::Note(crate::device::describe(&r)));
    }
    let problems = crate::device::check(plan);
    if !problems.is_empty() {
        return Err(AppError::NotRunnable(problems));
    }
    // The devices a study would lock are locked for a single run too, before anything is
    // created: two measurements on one device would each measure the other's load.
    let _device_locks = if opts.lock {
        let stop = || cancel.load(Ordering::SeqCst);
        let mut on_wait = |e: &llem_study::LockError| {
            progress.event(Event::Note(llem_study::waiting_note(e)));
        };
        let on_held = if opts.wait_for_devices {
            llem_study::OnHeld::Wait {
                stop: &stop,
                on_wait: &mut on_wait,
            }
        } else {
            llem_study::OnHeld::Refuse
        };
        let held = llem_study::lock_for_experiment(
            &host::lock_dir(),
            &crate::study::lock_resources(plan),
            &host::hostname(),
            format!("experiment '{}'", plan.study_name),
            on_held,
        )?;
        Some(held.ok_or(AppError::Cancelled)?)
    } else {
        None
    };
    let hash = pc.digest.short();
    let stamp = llem_results::time::dir_stamp_utc(llem_results::time::unix_now_s());
    let results = PathBuf::from(cfg.output_dir.as_deref().unwrap_or(&plan.output_dir));
    // Claimed now, exclusively: two runs into one directory in the same second must not
    // share a cell (one result.json would replace the other).
    let study_dir =
        layout::create_study_dir(&results, &plan.study_name, &stamp).map_err(|e| AppError::Io {
            what: "cannot create a run directory in",
            path: results.clone(),
            source: e,
        })?;
    let cell_dir = study_dir.join(layout::cell_dir_name(
        run.index,
        run.cycle,
        &cfg.model,
        cfg.engine.as_str(),
        &hash,
    ));
    let study_name = study_dir.file_name().map_or_else(
        || plan.study_name.clone(),
        |n| n.to_string_lossy().into_owned(),
    );
    let experiment_id = layout::experiment_id(&study_name, run.index, run.cycle);
    let request = experiment_request(
        CellTarget {
            config: cfg,
            config_hash: &hash,
            experiment_id,
            cell_dir: cell_dir.clone(),
            plan_warnings: pc.warnings.clone(),
        },
        &plan.user,
        host::cache_dir(),
        opts.sampling_interval,
        cancel,
        false,
        opts.live.clone(),
    );
    llem_harness::run_experiment(&request, progress).map_err(|e| {
        remove_if_empty(&[&cell_dir, &study_dir]);
        AppError::from(e)
    })
}
