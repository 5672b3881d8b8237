//! `llem run` without `--dry-run`: measure the planned experiment and print its headline.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use llem_config::StudyPlan;
use llem_energy::SensorEnv;
use llem_harness::{ExperimentRequest, HarnessError};
use llem_results::ExperimentResult;
use llem_results::layout;

use crate::cli::RunArgs;
use crate::exit;

/// Logs to stderr at info (`-v`) or debug (`-vv`); `LLEM_LOG` overrides the filter. Engine
/// warnings are kept for error messages at any verbosity ([`crate::engine_log`]).
pub fn init_logging(verbose: u8) {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::{EnvFilter, Layer as _};
    let printed = (verbose > 0).then(|| {
        let level = if verbose == 1 { "info" } else { "debug" };
        let filter = EnvFilter::try_from_env("LLEM_LOG").unwrap_or_else(|_| EnvFilter::new(level));
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .with_filter(filter)
    });
    let _ = tracing_subscriber::registry()
        .with(printed)
        .with(crate::engine_log::EngineWarnings)
        .try_init();
}

fn opt(v: Option<f64>, unit: &str, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$} {unit}"))
}

/// The headline of a result, for the terminal.
fn headline(r: &ExperimentResult, dir: &Path) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n {} on {} ({})",
        r.model_name, r.engine, r.measurement_config_hash
    );
    let _ = writeln!(
        s,
        "   tokens      {} in + {} out in {:.2} s",
        r.total_input_tokens, r.total_output_tokens, r.total_inference_time_sec
    );
    let _ = writeln!(
        s,
        "   throughput  {:.1} tok/s out, {:.1} tok/s total",
        r.avg_tokens_per_second, r.avg_total_tokens_per_second
    );
    let source = r.energy_source.as_deref().unwrap_or("not measured");
    let scope = match r.energy_scope.as_deref() {
        Some("gpu") => "GPU",
        Some("cpu") => "CPU package + DRAM",
        _ => "all domains",
    };
    let _ = writeln!(
        s,
        "   energy      {:.2} J {scope} ({source}); system {}",
        r.total_energy_j,
        opt(r.system_energy_j, "J", 2)
    );
    // The headline figure with its bound: resolution at the window's edges, coverage and
    // the sensors' documented accuracy (energy.md, "How sure a figure is").
    let total = match (r.mj_per_tok_total, r.energy_uncertainty.as_ref()) {
        (Some(x), Some(u)) => match u.mj_per_tok {
            Some(b) => format!("{x:.2} ± {b:.2} mJ"),
            None if u.bound_j.is_none() => format!("{x:.2} mJ (an estimate: no bound)"),
            None => format!("{x:.2} mJ"),
        },
        (x, _) => opt(x, "mJ", 2),
    };
    let _ = writeln!(
        s,
        "   per token   {total} total, {} above a {} baseline",
        opt(r.mj_per_tok_adjusted, "mJ", 2),
        opt(r.baseline_power_w, "W", 2)
    );
    if let Some(u) = &r.energy_uncertainty
        && !u.notes.is_empty()
    {
        for n in &u.notes {
            let _ = writeln!(s, "   bound       {n}");
        }
    }
    if let Some(b) = &r.energy_breakdown
        && let (Some(p), Some(d), Some(i)) = (b.prefill_j, b.decode_j, b.idle_j)
    {
        let share = |x: f64| x / (p + d + i).max(f64::MIN_POSITIVE) * 100.0;
        let per_request = r.energy_per_request_j.map_or_else(String::new, |e| {
            format!(
                "; {:.2} J per request (p50 {:.2}, p99 {:.2})",
                e.mean, e.p50, e.p99
            )
        });
        let _ = writeln!(
            s,
            "   split       prefill {p:.1} J ({:.0} %), decode {d:.1} J ({:.0} %), idle {i:.1} J{per_request}",
            share(p),
            share(d)
        );
    }
    if let Some(d) = r
        .energy_breakdown
        .as_ref()
        .and_then(|b| b.difference.as_ref())
    {
        let _ = writeln!(
            s,
            "   difference  prefill {:.1} J (the prompts again for one token: {:.2} s), decode {:.1} J",
            d.prefill_j, d.prefill_run_s, d.decode_j
        );
    }
    if let Some(l) = r.lifecycle_energy_j {
        // What each phase cost, in the order they ran: a cold start is paid once per run.
        let parts: Vec<String> = r
            .phases
            .iter()
            .map(|p| format!("{} {}", p.phase.replace('_', " "), opt(p.energy_j, "J", 1)))
            .collect();
        let _ = writeln!(s, "   lifecycle   {l:.1} J in all: {}", parts.join(", "));
    }
    if let Some(e) = &r.emissions {
        let _ = writeln!(
            s,
            "   CO2         {} (system {}) at {} gCO2/kWh{}, PUE {}",
            opt(e.co2_g, "g", 3),
            opt(e.system_co2_g, "g", 3),
            e.carbon_intensity_gco2_kwh,
            if e.intensity_source == "configured" {
                ""
            } else {
                " (world average)"
            },
            e.datacenter_pue
        );
    }
    if let Some(l) = &r.latency_stats {
        let _ = writeln!(
            s,
            "   latency     TTFT {} median, {} p99; ITL {} mean (trimmed); TPOT {} mean",
            opt(l.ttft_median_ms, "ms", 1),
            opt(l.ttft_p99_ms, "ms", 1),
            opt(l.itl_mean_ms, "ms", 2),
            opt(l.tpot_mean_ms, "ms", 2)
        );
    }
    if let Some(f) = &r.flops {
        let _ = writeln!(
            s,
            "   FLOPs       {:.3e} ({} estimate, {} confidence)",
            f.value, f.method, f.confidence
        );
    }
    for w in &r.measurement_warnings {
        let _ = writeln!(s, "   warning: {w}");
    }
    let _ = writeln!(s, "\n   {}", dir.display());
    s
}

/// A flag the first SIGINT/SIGTERM sets: the harness stops at the next decode step and cleans
/// up. A second signal (the flag already set) exits at once with 130.
pub fn cancel_on_signals() -> Arc<AtomicBool> {
    let cancel = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        let _ = signal_hook::flag::register_conditional_shutdown(
            sig,
            exit::INTERRUPTED,
            cancel.clone(),
        );
        let _ = signal_hook::flag::register(sig, cancel.clone());
    }
    cancel
}

/// The user config file with `LLEM_*` variables applied (defaults when it cannot be read;
/// planning has already reported a broken file).
pub fn user_config() -> llem_config::user_config::UserConfig {
    llem_config::UserSettings::load(
        &llem_config::Env::from_process(),
        &mut llem_config::source::SourceMap::new(),
    )
    .map(|u| u.config)
    .unwrap_or_default()
}

/// `output.model_cache_dir` of the user config, `~` expanded.
pub fn model_cache_dir(u: &llem_config::user_config::UserConfig) -> Option<PathBuf> {
    let d = u.output.model_cache_dir.as_deref()?;
    match d.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(rest)),
        None => Some(PathBuf::from(d)),
    }
}

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

/// The one way this binary builds an [`ExperimentRequest`], for `llem run` of one experiment
/// and for a study's cell process alike: this machine's sensors, assets and user config.
pub fn experiment_request(
    cell: CellTarget<'_>,
    baseline_cache_dir: PathBuf,
    sampling_interval: std::time::Duration,
    cancel: Arc<AtomicBool>,
    runnable_checked: bool,
) -> ExperimentRequest<'_> {
    let user = user_config();
    ExperimentRequest {
        config: cell.config,
        config_hash: cell.config_hash,
        experiment_id: cell.experiment_id,
        cell_dir: cell.cell_dir,
        assets_dir: crate::paths::assets_dir(),
        cache_dir: baseline_cache_dir,
        sensor_env: SensorEnv::from_process(user.measurement.cpu_tdp_w),
        sampling_interval,
        llem_version: env!("CARGO_PKG_VERSION"),
        git_commit: Some(env!("LLEM_GIT_COMMIT")),
        cancel,
        python: user.python.clone(),
        model_cache_dir: model_cache_dir(&user),
        runnable_checked,
        carbon_intensity_gco2_kwh: user.measurement.carbon_intensity_gco2_kwh,
        datacenter_pue: user.measurement.datacenter_pue,
        plan_warnings: cell.plan_warnings,
    }
}

/// Removes directories this run created but left empty (a failed or cancelled run).
fn remove_if_empty(dirs: &[&Path]) {
    for d in dirs {
        let _ = std::fs::remove_dir(d);
    }
}

/// Why one experiment measured nothing.
pub enum SingleError {
    /// Before the harness ran: the plan holds no experiment, a device lock or the run
    /// directory could not be had.
    Setup(String),
    /// The harness failed (or was cancelled).
    Harness(HarnessError),
}

impl std::fmt::Display for SingleError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Setup(m) => f.write_str(m),
            Self::Harness(e) => write!(f, "{e}"),
        }
    }
}

impl SingleError {
    /// The exit code `llem run` ends with.
    pub fn exit_code(&self) -> i32 {
        match self {
            Self::Setup(_) => exit::FAILURE,
            Self::Harness(HarnessError::Cancelled) => exit::INTERRUPTED,
            Self::Harness(HarnessError::Config(_) | HarnessError::Dataset(_)) => exit::CONFIG,
            Self::Harness(_) => exit::FAILURE,
        }
    }
}

/// Measures the plan's one experiment in this process: device locks, a fresh run
/// directory, then the harness. `cancel` stops it cleanly at the next decode step; a
/// failed or cancelled run leaves no empty directories behind.
pub fn measure_one(
    plan: &StudyPlan,
    no_lock: bool,
    interval: std::time::Duration,
    progress: &mut dyn llem_harness::Progress,
    cancel: Arc<AtomicBool>,
) -> Result<llem_harness::ExperimentOutcome, SingleError> {
    let (Some(run), Some(_)) = (plan.runs.first(), plan.configs.first()) else {
        return Err(SingleError::Setup("the plan holds no experiment".into()));
    };
    let Some(pc) = plan.configs.get(run.config) else {
        return Err(SingleError::Setup("the plan holds no experiment".into()));
    };
    let cfg = &pc.config;
    // The devices a study would lock are locked for a single run too, before anything is
    // created: two measurements on one device would each measure the other's load.
    let _device_locks = if no_lock {
        None
    } else {
        Some(
            llem_study::lock_for_experiment(
                &crate::paths::cache_dir().join("locks"),
                &super::study::lock_resources(plan),
                &llem_harness::environment::hostname(),
                format!("experiment '{}'", plan.study_name),
            )
            .map_err(|e| SingleError::Setup(e.to_string()))?,
        )
    };
    let hash = pc.digest.short();
    let stamp = llem_results::time::dir_stamp_utc(llem_results::time::unix_now_s());
    let results = PathBuf::from(cfg.output_dir.as_deref().unwrap_or(&plan.output_dir));
    // Claimed now, exclusively: two runs into one directory in the same second must not
    // share a cell (one result.json would replace the other).
    let study_dir = layout::create_study_dir(&results, &plan.study_name, &stamp).map_err(|e| {
        SingleError::Setup(format!(
            "cannot create a run directory in {}: {e}",
            results.display()
        ))
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
        crate::paths::cache_dir(),
        interval,
        cancel,
        false,
    );
    llem_harness::run_experiment(&request, progress).map_err(|e| {
        remove_if_empty(&[&cell_dir, &study_dir]);
        SingleError::Harness(e)
    })
}

/// Runs the plan's experiment; returns the exit code.
pub fn execute(plan: &StudyPlan, args: &RunArgs) -> i32 {
    init_logging(args.verbose);
    let resume = if let Some(d) = &args.resume_dir {
        Some(llem_study::ResumeFrom::Dir(d.clone()))
    } else if args.resume {
        Some(llem_study::ResumeFrom::Latest)
    } else {
        None
    };
    // A study (or any resume) runs each cell in its own process with a manifest; one
    // experiment runs here, in this process.
    let on_slurm = args.executor == Some(crate::cli::ExecutorArg::Slurm)
        || matches!(
            plan.execution.executor,
            llem_config::ExecutorConfig::Slurm(_)
        );
    if plan.runs.len() != 1 || resume.is_some() || on_slurm {
        let mut plan = plan.clone();
        super::study::apply_overrides(&mut plan, args);
        return super::study::run_study(&plan, args, resume.unwrap_or(llem_study::ResumeFrom::New));
    }
    if let Some(pc) = plan.configs.first() {
        for w in &pc.warnings {
            eprintln!("llem: warning: {w}");
        }
    }
    let cancel = cancel_on_signals();
    let outcome = if args.quiet {
        measure_one(
            plan,
            args.no_lock,
            args.interval,
            &mut llem_harness::Silent,
            cancel,
        )
    } else {
        let mut bars = crate::progress::Bars::new();
        measure_one(plan, args.no_lock, args.interval, &mut bars, cancel)
    };
    match outcome {
        Ok(o) => {
            if args.json {
                match serde_json::to_string_pretty(&o.result) {
                    Ok(s) => println!("{s}"),
                    Err(e) => eprintln!("llem: {e}"),
                }
            }
            eprint!("{}", headline(&o.result, &o.cell_dir));
            exit::OK
        }
        Err(e) => {
            eprintln!("llem: {e}");
            e.exit_code()
        }
    }
}
