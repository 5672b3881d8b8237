//! One experiment, measured: preflight → baseline → load → warmup → thermal floor →
//! measurement window → teardown → artefacts.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use llem_config::model::PhaseSplit;
use llem_config::{EnergySampler, ExperimentConfig};
use llem_energy::baseline::{BaselineIdentity, BaselineOutcome};
use llem_energy::host_load::{self, HostLoad};
use llem_energy::{Meter, MeterConfig, SensorEnv, Telemetry};
use llem_engines::workload::dataset::{self, LoadedDataset};
use llem_engines::{
    Engine, EngineInfo, ModelInfo, RequestSink, RunSummary, Session, Step, Workload, registry,
};
use llem_results::result::{PhaseSpan, WarmupResult};
use llem_results::{RequestRecord, ResultsError};

use crate::assemble::{self, Measured};
use crate::environment;
pub use crate::error::HarnessError;
use crate::progress::{Event, Phase, Progress};
pub use crate::request::{ExperimentOutcome, ExperimentRequest};
use crate::verdict;
use llem_results::layout;

/// The methodology's recommended minimum thermal floor, s.
pub const RECOMMENDED_THERMAL_FLOOR_S: f64 = 30.0;

/// Collects the requests of a phase and reports progress at most every 100 ms.
struct Collector<'a> {
    epoch: Instant,
    phase_start: f64,
    records: Vec<RequestRecord>,
    steps: Vec<Step>,
    tokens: u64,
    last_report: f64,
    progress: &'a mut dyn Progress,
    meter: Option<&'a Meter>,
    cancel: &'a AtomicBool,
    /// Report each finished request (the measurement window, not a run beside it, with live
    /// metrics on).
    per_request: bool,
}

impl Collector<'_> {
    fn report(&mut self, force: bool) {
        let now = self.now_s();
        if !force && now - self.last_report < 0.1 {
            return;
        }
        self.last_report = now;
        self.progress.event(Event::Advance {
            done: self.records.len() as u64,
            tokens: self.tokens,
            elapsed_s: now - self.phase_start,
            power_w: self.meter.and_then(Meter::live_power_w),
        });
    }
}

impl RequestSink for Collector<'_> {
    fn now_s(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
    fn on_tokens(&mut self, _: u32, _: f64, n: u32) {
        self.tokens += u64::from(n);
        self.report(false);
    }
    fn on_done(&mut self, r: RequestRecord) {
        if self.per_request {
            let tpot_s = match (r.ttft_s(), r.output_tokens) {
                (Some(ttft), n) if n > 1 => Some((r.e2e_s() - ttft) / f64::from(n - 1)),
                _ => None,
            };
            self.progress.event(Event::Request {
                success: r.success,
                input_tokens: r.input_tokens,
                output_tokens: r.output_tokens,
                ttft_s: r.ttft_s(),
                tpot_s,
            });
        }
        self.records.push(r);
        self.report(true);
    }
    fn on_step(&mut self, step: Step) {
        self.steps.push(step);
    }
    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

fn check_cancel(cancel: &AtomicBool) -> Result<(), HarnessError> {
    if cancel.load(Ordering::Relaxed) {
        Err(HarnessError::Cancelled)
    } else {
        Ok(())
    }
}

/// Sleeps `d` in short steps so a cancel is seen promptly.
fn sleep_cancellable(d: Duration, cancel: &AtomicBool) -> Result<(), HarnessError> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        check_cancel(cancel)?;
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(100)));
    }
    Ok(())
}

/// A cancellable wait that reports each second passed, so a long idle phase (baseline,
/// thermal floor) is a countdown the user can watch end.
fn countdown(
    d: Duration,
    cancel: &AtomicBool,
    progress: &mut dyn Progress,
) -> Result<(), HarnessError> {
    let t = Instant::now();
    while let Some(left) = d.checked_sub(t.elapsed()).filter(|l| !l.is_zero()) {
        sleep_cancellable(left.min(Duration::from_secs(1)), cancel)?;
        progress.event(Event::Advance {
            done: t.elapsed().as_secs_f64().floor() as u64,
            tokens: 0,
            elapsed_s: t.elapsed().as_secs_f64(),
            power_w: None,
        });
    }
    Ok(())
}

/// Whether this build can run a configuration here (engine, runner, model file, server
/// CLI, the transformers worker's Python), without loading anything: the study runner checks
/// every configuration before its first cell. Returns the model file when the engine reads
/// one (llama.cpp, a GGUF for transformers). `python` is the user config's interpreter.
pub fn check_runnable(
    cfg: &llem_config::ExperimentConfig,
    assets_dir: &std::path::Path,
    python: Option<&str>,
) -> Result<Option<PathBuf>, HarnessError> {
    check(cfg, assets_dir, python, true)
}

/// [`check_runnable`], with the transformers Python probe only when `probe_python`.
fn check(
    cfg: &llem_config::ExperimentConfig,
    assets_dir: &std::path::Path,
    python: Option<&str>,
    probe_python: bool,
) -> Result<Option<PathBuf>, HarnessError> {
    registry::check_runnable(cfg, assets_dir, python, probe_python).map_err(HarnessError::Config)
}

fn preflight(
    req: &ExperimentRequest<'_>,
) -> Result<(Option<PathBuf>, LoadedDataset), HarnessError> {
    let cfg = req.config;
    let model = check(
        cfg,
        &req.assets_dir,
        req.python.as_deref(),
        !req.runnable_checked,
    )?;
    let data = dataset::load(
        &cfg.dataset,
        cfg.dataset.n_prompts as usize,
        cfg.random_seed,
        &req.assets_dir,
    )?;
    if req.cell_dir.join(layout::RESULT).exists() {
        return Err(HarnessError::Config(format!(
            "{} already holds a result; refusing to overwrite it",
            req.cell_dir.display()
        )));
    }
    std::fs::create_dir_all(&req.cell_dir).map_err(|source| ResultsError::Io {
        what: "cannot create",
        path: req.cell_dir.clone(),
        source,
    })?;
    Ok((model, data))
}

/// The energy sensors of an experiment.
type Sensors = Vec<Box<dyn llem_energy::Sensor>>;

/// The sensors for `sampler` (none for `null`).
fn sensors(
    sampler: Option<EnergySampler>,
    env: &SensorEnv,
) -> Result<(Sensors, Vec<String>), HarnessError> {
    match sampler {
        None => Ok((
            Vec::new(),
            vec!["energy_sampler is null: no energy measured".into()],
        )),
        Some(s) => {
            let sel =
                llem_energy::select(s, env).map_err(|e| HarnessError::Energy(e.to_string()))?;
            Ok((sel.sensors, sel.notes))
        }
    }
}

/// GPUs visible to this process: those with a sensor, or those NVML lists when the sampler
/// reads none (`rapl` on a GPU host).
fn visible_gpus(env: &SensorEnv, with_sensor: usize) -> u32 {
    let listed = if env.nvml {
        llem_energy::sensors::nvml::visible_indices(env.cuda_visible_devices.as_deref()).len()
    } else {
        0
    };
    u32::try_from(with_sensor.max(listed)).unwrap_or(u32::MAX)
}

/// The sensors of an experiment and what the result says of them.
struct SensorSet {
    sensors: Sensors,
    /// `name: device` of each.
    names: Vec<String>,
    /// The GPUs among them.
    gpus: Vec<String>,
    /// NVIDIA's driver version, when a GPU sensor knows it.
    gpu_driver: Option<String>,
    /// The device settings the cell runs under (`device=setting=value`): a baseline under
    /// other settings is another machine's idle.
    settings: Vec<String>,
}

/// Preflight: the config can run here, the prompts load, the sensors open.
fn preflight_phase(
    req: &ExperimentRequest<'_>,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<(Option<PathBuf>, LoadedDataset, SensorSet), HarnessError> {
    let cfg = req.config;
    progress.event(Event::Start {
        phase: Phase::Preflight,
        total: None,
        detail: cfg.model.clone(),
    });
    let (model_path, data) = preflight(req)?;
    warnings.extend(data.notes.iter().cloned());
    let (sensors, sensor_notes) = sensors(cfg.energy_sampler, &req.sensor_env)?;
    warnings.extend(sensor_notes);
    let set = SensorSet {
        names: sensors
            .iter()
            .map(|s| format!("{}: {}", s.domain().name, s.domain().device))
            .collect(),
        gpus: sensors
            .iter()
            .filter(|s| s.domain().kind == llem_energy::DomainKind::Gpu)
            .map(|s| s.domain().device.clone())
            .collect(),
        gpu_driver: sensors.iter().find_map(|s| s.driver_version()),
        sensors,
        settings: Vec::new(),
    };
    progress.event(Event::Finish {
        phase: Phase::Preflight,
        summary: format!(
            "{} prompts from {}, {} energy domains",
            data.prompts.len(),
            data.name,
            set.sensors.len()
        ),
    });
    Ok((model_path, data, set))
}

/// The idle baseline (recorded as a phase unless it came from the cache), then the meter
/// that samples from here to the end: the timeseries shows load, warmup and the window.
fn baseline_and_meter(
    req: &ExperimentRequest<'_>,
    set: &mut SensorSet,
    epoch: Instant,
    progress: &mut dyn Progress,
    phases: &mut Phases,
) -> Result<(Option<BaselineOutcome>, Option<Meter>), HarnessError> {
    let meter_cfg = MeterConfig {
        interval: req.sampling_interval,
        ..MeterConfig::default()
    };
    let baseline_start = epoch.elapsed().as_secs_f64();
    let baseline = baseline_phase(req, set, meter_cfg, epoch, progress)?;
    let baseline_end = epoch.elapsed().as_secs_f64();
    check_cancel(&req.cancel)?;
    let meter = start_meter(&mut set.sensors, meter_cfg, epoch, req.live.clone())?;
    // A cached baseline took no time and spent nothing on this run.
    if baseline
        .as_ref()
        .is_some_and(|b| b.origin != llem_energy::baseline::BaselineOrigin::Cached)
    {
        phases.add("baseline", baseline_start, baseline_end);
    }
    Ok((baseline, meter))
}

/// Baseline, before anything of the experiment is loaded: measured, or taken from the cache.
/// The sensors are lent to it and come back.
fn baseline_phase(
    req: &ExperimentRequest<'_>,
    set: &mut SensorSet,
    meter_cfg: MeterConfig,
    epoch: Instant,
    progress: &mut dyn Progress,
) -> Result<Option<BaselineOutcome>, HarnessError> {
    let cfg = req.config;
    if !cfg.baseline.enabled || set.sensors.is_empty() {
        return Ok(None);
    }
    progress.event(Event::Start {
        phase: Phase::Baseline,
        // Seconds of idle sampling; a cached baseline finishes without counting.
        total: Some(cfg.baseline.duration_seconds.ceil() as u64),
        detail: format!(
            "{} ({} s)",
            cfg.baseline.strategy, cfg.baseline.duration_seconds
        ),
    });
    let identity = BaselineIdentity {
        host: environment::hostname(),
        sampler: cfg
            .energy_sampler
            .map_or_else(|| "none".into(), |s| s.to_string()),
        devices: set.names.iter().chain(&set.settings).cloned().collect(),
    };
    let (got, back) = llem_energy::baseline::obtain_with_sensors(
        &cfg.baseline,
        &identity,
        &req.cache_dir,
        std::mem::take(&mut set.sensors),
        // The idle mean needs no update period (it is measured once, for the run's meter,
        // whose windows are bounded by it).
        MeterConfig {
            update_period_budget: Duration::ZERO,
            ..meter_cfg
        },
        epoch,
        &mut |d| {
            countdown(d, &req.cancel, progress).map_err(|_| llem_energy::BaselineError::Cancelled)
        },
    );
    set.sensors = back;
    check_cancel(&req.cancel)?;
    let outcome = got.map_err(|e| HarnessError::Energy(e.to_string()))?;
    progress.event(Event::Finish {
        phase: Phase::Baseline,
        summary: format!(
            "{:.2} W ({})",
            outcome.record.total_power_w,
            outcome.origin.describe()
        ),
    });
    Ok(Some(outcome))
}

/// Model load: the engine in-process, its worker or its server, through the registry.
fn load_phase(
    req: &ExperimentRequest<'_>,
    model_path: Option<&PathBuf>,
    progress: &mut dyn Progress,
) -> Result<Box<dyn Engine>, HarnessError> {
    let cfg = req.config;
    progress.event(Event::Start {
        phase: Phase::Load,
        total: None,
        detail: model_path.map_or_else(|| cfg.model.clone(), |p| p.display().to_string()),
    });
    let load_opts = registry::LoadOptions {
        model_file: model_path.cloned(),
        work_dir: req.cell_dir.clone(),
        assets_dir: req.assets_dir.clone(),
        python: req.python.clone(),
        model_cache_dir: req.model_cache_dir.clone(),
        cancel: req.cancel.clone(),
    };
    Ok(registry::load(cfg, &load_opts, &mut |pgid, container| {
        progress.event(Event::ServerStarted { pgid, container })
    })?)
}

/// The thermal floor after warmup: a cancellable wait, recorded in the warmup result.
fn thermal_floor_phase(
    cfg: &ExperimentConfig,
    warmup: Option<&mut WarmupResult>,
    on_gpu: bool,
    progress: &mut dyn Progress,
    cancel: &AtomicBool,
    warnings: &mut Vec<String>,
) -> Result<(), HarnessError> {
    let floor = if cfg.warmup.enabled {
        cfg.warmup.thermal_floor_seconds
    } else {
        0.0
    };
    if floor > 0.0 {
        // A counter, second by second: a long floor is a wait the user can see end.
        progress.event(Event::Start {
            phase: Phase::ThermalFloor,
            total: Some(floor.ceil() as u64),
            detail: format!("{floor} s idle"),
        });
        let t = Instant::now();
        countdown(Duration::from_secs_f64(floor), cancel, progress)?;
        if let Some(w) = warmup {
            w.thermal_floor_wait_s = t.elapsed().as_secs_f64();
        }
        progress.event(Event::Finish {
            phase: Phase::ThermalFloor,
            summary: format!("{floor} s"),
        });
    }
    if cfg.warmup.enabled && floor < RECOMMENDED_THERMAL_FLOOR_S && on_gpu {
        warnings.push(format!(
            "thermal floor of {floor} s is below the {RECOMMENDED_THERMAL_FLOOR_S} s the \
             methodology recommends for GPUs"
        ));
    }
    Ok(())
}

/// What the measurement window produced.
struct MeasuredRun {
    records: Vec<RequestRecord>,
    /// The engine's forward passes, when it logs them.
    steps: Vec<Step>,
    summary: RunSummary,
    /// When the workload ran, s since the experiment start.
    span: (f64, f64),
    process_cpu_s: Option<f64>,
    peak_rss_mib: Option<f64>,
    /// The CPU used by this process tree and by every other process while it ran.
    host_load: Option<HostLoad>,
}

/// The measurement window: the whole workload, every request reported to the collector.
/// `what` says which run it is when it is not the window itself.
fn measure_phase(
    session: &mut dyn Session,
    workload: &Workload,
    epoch: Instant,
    progress: &mut dyn Progress,
    (meter, what): (Option<&Meter>, Option<&str>),
    cancel: &AtomicBool,
) -> Result<MeasuredRun, HarnessError> {
    progress.event(Event::Start {
        phase: Phase::Measure,
        total: Some(workload.prompts.len() as u64),
        detail: match what {
            Some(w) => format!("{} prompts, {w}", workload.prompts.len()),
            None => format!("{} prompts", workload.prompts.len()),
        },
    });
    let cpu0 = environment::process_cpu_s();
    let load0 = host_load::start();
    let mut sink = Collector {
        epoch,
        phase_start: epoch.elapsed().as_secs_f64(),
        records: Vec::new(),
        steps: Vec::new(),
        tokens: 0,
        last_report: 0.0,
        progress,
        meter,
        cancel,
        // Live metrics only: nothing else reads per-request lines while the run goes on.
        per_request: what.is_none() && meter.is_some_and(Meter::is_live),
    };
    let t0 = sink.now_s();
    let summary: RunSummary = session.run(workload, &mut sink)?;
    let t1 = sink.now_s();
    sink.report(true);
    let mut records = std::mem::take(&mut sink.records);
    let steps = std::mem::take(&mut sink.steps);
    let cpu1 = environment::process_cpu_s();
    let host_load = host_load::since(load0);
    let peak_rss_mib = environment::peak_rss_mib();
    records.sort_by_key(|r| r.request_id);
    let out_tokens: u64 = records.iter().map(|r| u64::from(r.output_tokens)).sum();
    progress.event(Event::Finish {
        phase: Phase::Measure,
        summary: format!(
            "{out_tokens} tokens in {:.2} s ({:.1} tok/s)",
            t1 - t0,
            out_tokens as f64 / (t1 - t0).max(1e-9)
        ),
    });
    Ok(MeasuredRun {
        records,
        steps,
        summary,
        span: (t0, t1),
        process_cpu_s: cpu0.zip(cpu1).map(|(a, b)| b - a),
        host_load,
        peak_rss_mib,
    })
}

/// Warnings about what the engine did to the workload: cut prompts, capped replies, failed
/// requests.
fn run_warnings(cfg: &ExperimentConfig, workload: &Workload, run: &MeasuredRun) -> Vec<String> {
    let mut warnings = run.summary.warnings.clone();
    if let Some(cap) = workload.max_output_tokens {
        let asked = workload
            .prompts
            .iter()
            .filter(|p| p.output_tokens.is_some_and(|n| n > cap))
            .count();
        if asked > 0 {
            warnings.push(format!(
                "{asked} of {} prompts asked for more than max_output_tokens = {cap} reply \
                 tokens; their replies were capped at {cap}",
                workload.prompts.len()
            ));
        }
    }
    let limit = cfg.max_input_tokens.unwrap_or(0);
    match run.summary.truncated_prompts {
        0 => {}
        1 => warnings.push(format!("1 prompt was cut to max_input_tokens = {limit}")),
        n => warnings.push(format!(
            "{n} prompts were cut to max_input_tokens = {limit}"
        )),
    }
    let failed = run.records.iter().filter(|r| !r.success).count();
    if failed > 0 {
        warnings.push(format!("{failed} of {} requests failed", run.records.len()));
    }
    // A container's processes are not llem's descendants: they count as the others.
    let ours = if cfg.runner().map(|r| r.kind()) == Some(llem_config::RunnerKind::Docker) {
        "llem, its engine's container counted with the others,"
    } else {
        "llem and the engine it started"
    };
    warnings.extend(
        run.host_load
            .as_ref()
            .and_then(|l| host_load::warning(l, ours)),
    );
    warnings
}

/// The end of the load: what the engine is and loaded, said once.
fn finish_load(
    cfg: &ExperimentConfig,
    engine: &dyn Engine,
    plan: llem_engines::ContextPlan,
    load_s: f64,
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> (EngineInfo, ModelInfo) {
    let info: EngineInfo = engine.info();
    let model_info: ModelInfo = engine.model_info().clone();
    warnings.extend(engine.load_notes());
    if !engine.has_chat_template()
        && matches!(cfg.dataset.source.as_str(), "sharegpt" | "aienergyscore")
    {
        warnings.push("the model has no chat template: prompts were sent as plain text".into());
    }
    progress.event(Event::Finish {
        phase: Phase::Load,
        summary: format!(
            "{} {} in {load_s:.2} s, {} slots x {} tokens",
            model_info.architecture.as_deref().unwrap_or("model"),
            model_info.dtype.as_deref().unwrap_or(""),
            plan.batching.batch_size,
            plan.tokens_per_slot
        ),
    });
    (info, model_info)
}

/// Save: the result assembled from what was measured, and the cell's artefacts written.
fn save_phase(
    measured: &Measured<'_>,
    progress: &mut dyn Progress,
) -> Result<ExperimentOutcome, HarnessError> {
    let req = measured.request;
    progress.event(Event::Start {
        phase: Phase::Save,
        total: None,
        detail: req.cell_dir.display().to_string(),
    });
    let assembled = assemble::assembled(measured);
    assemble::write(
        req,
        &assembled,
        measured.telemetry,
        &measured.summary.server_metrics,
    )?;
    let result = assembled.result;
    progress.event(Event::Finish {
        phase: Phase::Save,
        summary: req.cell_dir.display().to_string(),
    });
    Ok(ExperimentOutcome {
        result,
        cell_dir: req.cell_dir.clone(),
    })
}

/// The phases of a run as they happen; their energy is filled in by the assembler, which
/// knows the headline's devices.
#[derive(Default)]
struct Phases(Vec<PhaseSpan>);

impl Phases {
    fn add(&mut self, phase: &str, start_s: f64, end_s: f64) {
        self.0.push(PhaseSpan {
            phase: phase.into(),
            start_s,
            end_s,
            energy_j: None,
            node_energy_j: None,
        });
    }
}

/// Warmup (fixed or CV-converged), then the steady-device gate when the config asks for it,
/// whose verdict joins the warmup's record and, when it is not steady, the warnings.
fn warmup_phase(
    session: &mut dyn Session,
    req: &ExperimentRequest<'_>,
    workload: &Workload,
    (meter, epoch): (Option<&Meter>, Instant),
    progress: &mut dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<Option<WarmupResult>, HarnessError> {
    let cfg = req.config;
    let cancel = req.cancel.as_ref();
    let mut warmup = crate::warmup::run(session, cfg, workload, epoch, progress, cancel)?;
    let gate = crate::gate::run(
        session,
        cfg,
        workload,
        meter,
        epoch,
        req.sampling_interval.as_secs_f64(),
        progress,
        cancel,
    )?;
    if let Some(g) = gate {
        warnings.extend(crate::gate::warning(&g));
        if let Some(w) = warmup.as_mut() {
            w.gate = Some(g);
        }
    }
    Ok(warmup)
}

/// The difference method (optimum-benchmark's), when `measurement.phase_split` asks for it:
/// the same prompts again, one output token each, right after the window and under the same
/// telemetry; its energy is the prefill.
fn difference_phase(
    session: &mut dyn Session,
    cfg: &ExperimentConfig,
    workload: &Workload,
    (meter, epoch): (Option<&Meter>, Instant),
    progress: &mut dyn Progress,
    cancel: &AtomicBool,
    phases: &mut Phases,
) -> Result<Option<assemble::DifferenceRun>, HarnessError> {
    if !matches!(
        cfg.measurement.phase_split,
        Some(PhaseSplit::Difference | PhaseSplit::Both)
    ) {
        return Ok(None);
    }
    let one = Workload {
        max_output_tokens: Some(1),
        ..workload.clone()
    };
    let d = measure_phase(
        session,
        &one,
        epoch,
        progress,
        (
            meter,
            Some("one output token each (phase_split: difference)"),
        ),
        cancel,
    )?;
    verdict::check_requests(&d.records, cfg.measurement.max_failed_request_fraction)?;
    phases.add("prefill_only", d.span.0, d.span.1);
    Ok(Some(assemble::DifferenceRun {
        span: d.span,
        output_tokens: d.records.iter().map(|r| u64::from(r.output_tokens)).sum(),
        requests: d.records.iter().filter(|r| r.success).count(),
    }))
}

/// Starts the telemetry over `sensors` (taken), or none when there are none.
fn start_meter(
    sensors: &mut Vec<Box<dyn llem_energy::Sensor>>,
    cfg: MeterConfig,
    epoch: Instant,
    live: Option<llem_energy::LiveBoard>,
) -> Result<Option<Meter>, HarnessError> {
    if sensors.is_empty() {
        return Ok(None);
    }
    Meter::start_live(std::mem::take(sensors), cfg, epoch, live)
        .map(Some)
        .map_err(|e| HarnessError::Energy(e.to_string()))
}

/// Stops the telemetry; what it sampled (nothing without a meter).
fn stop_meter(meter: Option<Meter>) -> Result<Telemetry, HarnessError> {
    Ok(meter
        .map(Meter::stop)
        .transpose()
        .map_err(|e| HarnessError::Energy(e.to_string()))?
        .unwrap_or_default())
}

/// The measurement window of `run` (total, steady state or windowed, as the config says),
/// refused when it holds nothing to measure.
fn choose_window(
    cfg: &ExperimentConfig,
    run: &MeasuredRun,
    target: Option<u32>,
) -> Result<crate::window::Window, HarnessError> {
    let chosen = crate::window::select(
        cfg,
        &run.records,
        &run.summary.server_metrics,
        target,
        run.span,
    );
    verdict::check_window(&run.records, &chosen, run.span)?;
    Ok(chosen)
}

/// The configuration's device settings, applied (journal first) and announced.
fn device_settings_phase(
    req: &ExperimentRequest<'_>,
    progress: &mut dyn Progress,
) -> Result<Option<crate::device_settings::Applied>, HarnessError> {
    let owner = format!("{} ({})", req.experiment_id, req.cell_dir.display());
    let applied = crate::device_settings::apply(
        req.config,
        &req.sensor_env,
        &req.device_journal_dir,
        &owner,
    )?;
    if let Some(a) = &applied {
        progress.event(Event::Note(format!(
            "device settings applied: {}",
            a.labels().join(", ")
        )));
    }
    Ok(applied)
}

/// Runs one experiment end to end and writes its artefacts into `req.cell_dir`.
pub fn run_experiment(
    req: &ExperimentRequest<'_>,
    progress: &mut dyn Progress,
) -> Result<ExperimentOutcome, HarnessError> {
    let cfg = req.config;
    let epoch = Instant::now();
    let start_unix = llem_results::time::unix_now_s();
    let cancel = req.cancel.as_ref();
    // What the plan said before the run stays with the numbers it concerns.
    let mut warnings: Vec<String> = req.plan_warnings.clone();

    let (model_path, data, mut set) = preflight_phase(req, progress, &mut warnings)?;
    // Before the baseline: the idle power and the window are both measured under them.
    let settings = device_settings_phase(req, progress)?;
    set.settings = settings
        .as_ref()
        .map(crate::device_settings::Applied::labels)
        .unwrap_or_default();
    let mut phases = Phases::default();
    let (baseline, meter) = baseline_and_meter(req, &mut set, epoch, progress, &mut phases)?;
    let at = || epoch.elapsed().as_secs_f64();
    let load_start = at();
    let t_load = Instant::now();
    let engine = load_phase(req, model_path.as_ref(), progress)?;
    let plan = registry::context_plan(cfg, engine.n_ctx_train());
    let mut session = engine.open(plan)?;
    let load_s = t_load.elapsed().as_secs_f64();
    let (info, model_info) =
        finish_load(cfg, engine.as_ref(), plan, load_s, progress, &mut warnings);

    let workload = crate::replay::trace_workload(
        cfg,
        engine.as_ref(),
        &data,
        registry::workload(cfg, data.prompts.clone()),
        progress,
    )?;
    let warmup_start = at();
    phases.add("load", load_start, warmup_start);
    let mut warmup_result = warmup_phase(
        session.as_mut(),
        req,
        &workload,
        (meter.as_ref(), epoch),
        progress,
        &mut warnings,
    )?;
    let on_gpu = !set.gpus.is_empty();
    let floor_start = at();
    if warmup_result.is_some() {
        phases.add("warmup", warmup_start, floor_start);
    }
    thermal_floor_phase(
        cfg,
        warmup_result.as_mut(),
        on_gpu,
        progress,
        cancel,
        &mut warnings,
    )?;
    let measure_start = at();
    if measure_start - floor_start > 0.05 {
        phases.add("thermal_floor", floor_start, measure_start);
    }
    let run = measure_phase(
        session.as_mut(),
        &workload,
        epoch,
        progress,
        (meter.as_ref(), None),
        cancel,
    )?;
    verdict::check_requests(&run.records, cfg.measurement.max_failed_request_fraction)?;
    phases.add("measure", run.span.0, run.span.1);
    let difference = difference_phase(
        session.as_mut(),
        cfg,
        &workload,
        (meter.as_ref(), epoch),
        progress,
        cancel,
        &mut phases,
    )?;

    // Teardown: free the context and the model under telemetry (what it costs is part of
    // the lifecycle), then stop it. It starts where the last measured run ended, so that no
    // joule is counted in two phases.
    let teardown_start = difference.as_ref().map_or(run.span.1, |d| d.span.1);
    drop(session);
    drop(engine);
    phases.add("teardown", teardown_start, at());
    let telemetry = stop_meter(meter)?;
    let end_unix = llem_results::time::unix_now_s();
    let device = settings.map(crate::device_settings::Applied::restore);
    if let Some(d) = device.as_ref() {
        if !d.ok {
            return Err(HarnessError::DeviceRestore(d.problems.join("; ")));
        }
        warnings.extend(d.notes.iter().cloned());
        progress.event(Event::Note(format!(
            "device settings put back ({} values, each read back where the device can)",
            d.records.len()
        )));
    }

    let target = registry::configured_batch_size(cfg).map(std::num::NonZeroU32::get);
    let chosen = choose_window(cfg, &run, target)?;
    warnings.extend(chosen.warnings.iter().cloned());
    warnings.extend(run_warnings(cfg, &workload, &run));

    let placement = info.placement.clone().unwrap_or_else(|| {
        llem_engines::placement::planned(cfg, visible_gpus(&req.sensor_env, set.gpus.len()))
    });
    let measured = Measured {
        request: req,
        phases: phases.0,
        placement,
        engine: &info,
        model: &model_info,
        records: &run.records,
        steps: &run.steps,
        difference,
        summary: &run.summary,
        telemetry: &telemetry,
        window: (chosen.start_s, chosen.end_s),
        workload_span: run.span,
        methodology: chosen.methodology,
        steady_state: chosen.info.clone(),
        served: cfg.is_served(),
        configured_batch_size: target,
        start_unix,
        end_unix,
        baseline: baseline.as_ref(),
        warmup: warmup_result,
        warnings,
        sensors: set.names,
        gpus: set.gpus,
        gpu_driver: set.gpu_driver,
        load_s,
        memory: assemble::HostMemory {
            peak_rss_mib: run.peak_rss_mib,
        },
        process_cpu_s: run.process_cpu_s,
        device_settings: device.as_ref(),
    };
    save_phase(&measured, progress)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    struct Recorder(Vec<Event>);

    impl Progress for Recorder {
        fn event(&mut self, e: Event) {
            self.0.push(e);
        }
    }

    #[test]
    fn the_thermal_floor_counts_its_seconds_down() {
        let cfg: ExperimentConfig = serde_json::from_value(serde_json::json!({
            "model": "m.gguf", "warmup": {"thermal_floor_seconds": 2.5}
        }))
        .unwrap();
        let mut rec = Recorder(Vec::new());
        let mut warnings = Vec::new();
        let t = Instant::now();
        thermal_floor_phase(
            &cfg,
            None,
            false,
            &mut rec,
            &AtomicBool::new(false),
            &mut warnings,
        )
        .unwrap();
        assert!(t.elapsed().as_secs_f64() >= 2.5);
        assert!(
            matches!(rec.0.first(), Some(Event::Start { total: Some(3), .. })),
            "{:?}",
            rec.0
        );
        let done: Vec<u64> = rec
            .0
            .iter()
            .filter_map(|e| match e {
                Event::Advance { done, .. } => Some(*done),
                _ => None,
            })
            .collect();
        assert_eq!(done, [1, 2, 2], "a tick each second, the last at the end");
        assert!(matches!(rec.0.last(), Some(Event::Finish { .. })));
    }
}
