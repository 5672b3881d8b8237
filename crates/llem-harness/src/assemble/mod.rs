//! The `ExperimentResult` from what the lifecycle measured, and the artefacts on disk.
//!
//! [`result`] is a pure function of [`Measured`]: tokens of the window, its energy (through
//! the one window pipeline, [`llem_energy::window`]), FLOPs, latency, and the extended
//! metrics, each built by its own module.

mod attributed;
mod device;
mod energy;
mod metrics;
mod notes;
#[cfg(test)]
mod tests;
mod windows;

use llem_energy::Telemetry;
use llem_energy::baseline::BaselineOutcome;
use llem_engines::placement::Placement;
use llem_engines::{EngineInfo, ModelInfo, RunSummary};
use llem_results::result::{
    EnergyBreakdown, Environment, ModelDescription, SCHEMA_VERSION, WarmupResult,
};
use llem_results::{ExperimentResult, RequestRecord, ResultsError};

use crate::request::ExperimentRequest;
use crate::{flops, latency};
use llem_results::layout;

/// Host memory of the llem process, MiB.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostMemory {
    /// Peak over the whole process.
    pub peak_rss_mib: Option<f64>,
}

/// The difference method's second run: the window's prompts, one output token each.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DifferenceRun {
    /// When it ran, s since the experiment start.
    pub span: (f64, f64),
    /// Output tokens it produced (one per successful request).
    pub output_tokens: u64,
    /// Requests that succeeded.
    pub requests: usize,
}

/// Everything the lifecycle gathered.
pub struct Measured<'a> {
    /// The request.
    pub request: &'a ExperimentRequest<'a>,
    /// When each phase ran (`result.json` `phases`).
    pub phases: Vec<llem_results::result::PhaseSpan>,
    /// Where the engine computed: the scope of the headline energy.
    pub placement: Placement,
    /// Engine identity.
    pub engine: &'a EngineInfo,
    /// Model facts.
    pub model: &'a ModelInfo,
    /// Requests of the window, by id.
    pub records: &'a [RequestRecord],
    /// The engine's forward passes during the run (empty for engines that do not log them).
    pub steps: &'a [llem_engines::Step],
    /// The difference method's one-token run, when `measurement.phase_split` asks for it.
    pub difference: Option<DifferenceRun>,
    /// The engine's run summary.
    pub summary: &'a RunSummary,
    /// Telemetry of the experiment.
    pub telemetry: &'a Telemetry,
    /// The measured window, s since the experiment start (the whole workload for
    /// methodology total).
    pub window: (f64, f64),
    /// When the workload ran, s since the experiment start.
    pub workload_span: (f64, f64),
    /// What the window is: `total`, `steady_state` or `windowed`.
    pub methodology: &'static str,
    /// Window details and stability.
    pub steady_state: Option<llem_results::result::SteadyStateInfo>,
    /// A serving engine ran the workload.
    pub served: bool,
    /// The batch the cell was configured to run under (the registry's one resolution).
    pub configured_batch_size: Option<u32>,
    /// Experiment start, Unix s.
    pub start_unix: f64,
    /// Experiment end, Unix s.
    pub end_unix: f64,
    /// Baseline.
    pub baseline: Option<&'a BaselineOutcome>,
    /// Warmup.
    pub warmup: Option<WarmupResult>,
    /// Warnings so far.
    pub warnings: Vec<String>,
    /// Sensors (`name: device`).
    pub sensors: Vec<String>,
    /// GPU names.
    pub gpus: Vec<String>,
    /// NVIDIA driver version.
    pub gpu_driver: Option<String>,
    /// Model load time, s.
    pub load_s: f64,
    /// Host memory.
    pub memory: HostMemory,
    /// CPU time of the llem process during the window, s.
    pub process_cpu_s: Option<f64>,
    /// The device settings the run was measured under, put back.
    pub device_settings: Option<&'a crate::device_settings::Restored>,
}

impl Measured<'_> {
    /// True when the embedded engine ran layers on a GPU (its memory is then the GPU's).
    fn offloaded(&self) -> bool {
        self.request
            .config
            .llamacpp
            .as_deref()
            .is_some_and(|l| l.n_gpu_layers != 0)
    }
}

/// `x / d` when both are positive.
fn per(x: f64, d: u64) -> Option<f64> {
    (x > 0.0 && d > 0).then(|| x / d as f64)
}

/// `x / d`, or 0 when `d` is not positive (the seed's schema has these as plain numbers).
fn ratio_or_zero(x: f64, d: f64) -> f64 {
    if d > 0.0 { x / d } else { 0.0 }
}

/// The machine, software and model of the result.
fn environment(m: &Measured<'_>, sampler: String, interval_ms: f64) -> Environment {
    let req = m.request;
    Environment {
        llem_version: req.llem_version.to_string(),
        llem_git_commit: req.git_commit.map(String::from),
        hostname: crate::environment::hostname(),
        os: crate::environment::os(),
        cpu_model: crate::environment::cpu_model(),
        cpu_count: crate::environment::cpu_count(),
        memory_total_mib: crate::environment::memory_total_mib(),
        gpus: m.gpus.clone(),
        gpu_driver: m.gpu_driver.clone(),
        energy_sampler: sampler,
        sensors: m.sensors.clone(),
        sampling_interval_ms: interval_ms,
        engine_system_info: m.engine.system_info.clone(),
        model: Some(ModelDescription {
            load_time_s: Some(m.load_s),
            ..m.model.clone()
        }),
    }
}

/// The sampling interval the telemetry achieved, else the one asked for, ms.
fn interval_ms(m: &Measured<'_>) -> f64 {
    let achieved = m.telemetry.stats.interval_s * 1000.0;
    if achieved > 0.0 {
        achieved
    } else {
        m.request.sampling_interval.as_secs_f64() * 1000.0
    }
}

/// Builds the result (the tests' view of [`assembled`]).
#[cfg(test)]
pub fn result(m: &Measured<'_>) -> ExperimentResult {
    assembled(m).result
}

/// A cell's result and the sidecars it points to.
#[derive(Clone, Debug)]
pub struct Assembled {
    /// `result.json`.
    pub result: ExperimentResult,
    /// The requests with the energy attributed to each (`requests.parquet`).
    pub records: Vec<RequestRecord>,
    /// The window in time bins (`timeline.parquet`); empty when it could not be cut.
    pub timeline: Vec<llem_results::TimeBin>,
}

/// Builds the result, the requests with the energy attributed to each (as
/// `requests.parquet` holds them) and the window's time bins.
pub fn assembled(m: &Measured<'_>) -> Assembled {
    let req = m.request;
    let cfg = req.config;
    let (t0, t1) = m.window;
    let duration = (t1 - t0).max(0.0);
    // One slice for tokens and FLOPs, so that per-token and per-second figures divide like
    // by like.
    let shares = crate::window::window_shares(m.records, m.window, m.workload_span);
    let (input, output) = crate::window::tokens_of(&shares);
    // Baselines are subtracted per scope below; the window's own figure is the system's.
    let summary = llem_energy::window(m.telemetry, t0, t1, None);
    let window = &summary.energy;
    let energies = energy::Energies::of(m, window);
    let have_energy = energies.head.energy_j.is_some();
    let total_j = energies.head.energy_j.unwrap_or(0.0);
    let adjusted = energies.head.adjusted_j;
    let mut warnings = m.warnings.clone();
    warnings.extend(summary.warnings.iter().cloned());
    warnings.extend(energies.warning(m, window));
    let emissions = energy::emissions(m, &energies, &mut warnings);
    let processes = energy::processes(m, window, &energies, (input, output), duration);
    let (phases, lifecycle_energy_j, lifecycle_node_energy_j) =
        energy::phase_energies(m, &energies);
    let curve = attributed::curve(m, &energies, &mut warnings);
    let attribution = attributed::attribute(m, &energies, curve.as_ref(), &mut warnings);
    let (timeline, bins) = attributed::timeline(m, curve.as_ref()).unzip();
    let difference = attributed::difference(m, &energies, &phases, &mut warnings);
    let node_attribution = attributed::node_attribution(m);
    let node = energy::node_record(m, window, &energies, &mut warnings)
        .map(|n| attributed::node_phases(n, node_attribution.as_ref()));
    let records = attributed::annotated(m.records, attribution.as_ref(), node_attribution.as_ref());
    let (energy_per_request_j, energy_per_response_token_mj) =
        attributed::distributions(&records, m.window);
    let fl = flops::estimate(m.model, &shares);
    if fl.is_none() {
        flops_warning(&mut warnings);
    }
    let per_tok = |j: f64| (output > 0 && have_energy).then(|| j / output as f64 * 1000.0);
    let total_flops = fl.as_ref().map(|f| f.value);
    let lat = latency::statistics(m.records, m.summary.latency_mode);
    let rates = metrics::Rates {
        output,
        tokens_per_s: ratio_or_zero(output as f64, duration),
        tokens_per_joule: ratio_or_zero(output as f64, total_j),
        total_j,
    };
    let extended = metrics::extended(m, &rates, lat.as_ref());
    warnings.extend(metrics::prefix_cache_warning(cfg, &extended.kv_cache));
    warnings.extend(adjusted.and_then(|adj| degenerate_warning(adj, total_j)));
    let windows = windows::windows(m);
    let steady_state = checked_steady_state(m, windows.as_ref(), &mut warnings);
    let throttle = energy::throttle_info(m.telemetry, t0, t1, &summary.throttle);
    let sampler = cfg
        .energy_sampler
        .map_or_else(|| "none".to_string(), |s| s.to_string());
    let interval_ms = interval_ms(m);
    let device_settings = m
        .device_settings
        .map(|d| device::record(m.telemetry, &summary, d, &mut warnings));
    let result = ExperimentResult {
        schema_version: SCHEMA_VERSION.into(),
        experiment_id: req.experiment_id.clone(),
        measurement_config_hash: req.config_hash.to_string(),
        llenergymeasure_version: Some(format!("llem {}", req.llem_version)),
        engine: m.engine.name.to_string(),
        engine_version: m.engine.version.clone(),
        model_name: cfg.model.clone(),
        measurement_methodology: m.methodology.into(),
        steady_state_window: (m.methodology != "total").then_some([t0, t1]),
        measurement_window_s: Some([t0, t1]),
        total_tokens: output,
        total_input_tokens: input,
        total_output_tokens: output,
        total_energy_j: total_j,
        energy_adjusted_j: adjusted,
        total_inference_time_sec: duration,
        avg_tokens_per_second: rates.tokens_per_s,
        avg_total_tokens_per_second: ratio_or_zero((input + output) as f64, duration),
        avg_energy_per_token_j: ratio_or_zero(total_j, output as f64),
        mj_per_tok_total: per_tok(total_j),
        mj_per_tok_adjusted: adjusted.and_then(per_tok),
        tokens_per_joule: rates.tokens_per_joule,
        energy_source: energies.head.energy_source.map(|s| s.as_str().to_string()),
        energy_scope: Some(energies.scope.as_str().into()),
        system_energy_j: energies.system.energy_j,
        system_mj_per_tok: energies
            .system
            .energy_j
            .and_then(|j| (output > 0).then(|| j / output as f64 * 1000.0)),
        system_scope: Some(energies.system_scope().into()),
        node_energy_j: node.as_ref().map(|n| n.energy_j),
        unattributed_j: node.as_ref().map(|n| n.unattributed_j),
        emissions,
        total_flops,
        flops_per_output_token: fl.as_ref().and_then(|f| per(f.decode_flops, output)),
        flops_per_input_token: fl.as_ref().and_then(|f| per(f.prefill_flops, input)),
        flops_per_second: total_flops
            .and_then(|t| (t > 0.0 && duration > 0.0).then(|| t / duration)),
        flops: fl,
        baseline_power_w: energies.head.baseline_power_w,
        energy_per_device_j: energy::per_gpu_j(window, &energies.scope),
        energy_breakdown: Some(EnergyBreakdown {
            node: node.clone(),
            ..attributed::with_phases(
                energy::breakdown(m, window, &energies),
                attribution.as_ref(),
                difference,
                cfg.measurement.phase_split,
            )
        }),
        multi_gpu: processes.multi_gpu,
        process_results: processes.results,
        aggregation: processes.aggregation,
        measurement_warnings: warnings,
        warmup_excluded_samples: m.warmup.as_ref().map(|w| w.iterations_completed),
        reproducibility_notes: notes::reproducibility_notes(m, &sampler, interval_ms),
        thermal_throttle: Some(throttle),
        warmup_result: m.warmup.clone(),
        start_time: llem_results::time::iso8601_utc(m.start_unix),
        end_time: llem_results::time::iso8601_utc(m.end_unix),
        duration_sec: m.end_unix - m.start_unix,
        timeseries: cfg.gpu_telemetry.then(|| layout::TIMESERIES.to_string()),
        requests: Some(layout::REQUESTS.to_string()),
        latency_stats: lat,
        extended_metrics: extended,
        steady_state,
        windows,
        effective_config: serde_json::to_value(cfg).ok(),
        phases,
        lifecycle_energy_j,
        lifecycle_node_energy_j,
        goodput: goodput(m, have_energy.then_some(total_j)),
        traffic: m.summary.traffic.clone(),
        server_metrics: (!m.summary.server_metrics.is_empty())
            .then(|| layout::SERVER_METRICS.to_string()),
        environment: environment(m, sampler, interval_ms),
        energy_per_request_j,
        energy_per_response_token_mj,
        energy_uncertainty: energy::uncertainty(m, window, &energies, output),
        timeline,
        conversations: crate::sessions::summary(cfg, &records),
        device_settings,
    };
    Assembled {
        result,
        records,
        timeline: bins.unwrap_or_default(),
    }
}

/// Says once that FLOPs could not be estimated (the engine may have said why already).
fn flops_warning(warnings: &mut Vec<String>) {
    if !warnings
        .iter()
        .any(|w| w.starts_with("FLOPs not estimated"))
    {
        warnings.push(
            "FLOPs not estimated: the model description lacks the layer, head and size \
             counts the formula needs"
                .into(),
        );
    }
}

/// A warning when the baseline-adjusted energy `adjusted_j` is too small a share of the
/// measured `total_j` to mean anything.
fn degenerate_warning(adjusted_j: f64, total_j: f64) -> Option<String> {
    llem_results::result::adjusted_is_degenerate(adjusted_j, total_j).then(|| {
        format!(
            "baseline-adjusted energy is {:.1} % of the measured {total_j:.2} J: the window drew \
             barely more than the idle baseline, so the adjusted figures (mj_per_tok_adjusted) \
             are mostly subtraction noise; read the raw figures",
            adjusted_j / total_j * 100.0
        )
    })
}

/// The steady-state verdict, made unstable (with a warning) when the measurement windows
/// disagree beyond their bound.
fn checked_steady_state(
    m: &Measured<'_>,
    windows: Option<&llem_results::result::WindowsResult>,
    warnings: &mut Vec<String>,
) -> Option<llem_results::result::SteadyStateInfo> {
    let mut steady_state = m.steady_state.clone();
    if let Some(w) = windows.filter(|w| !w.valid) {
        warnings.extend(windows::warning(w));
        if let Some(info) = steady_state.as_mut() {
            info.is_stable = false;
            info.unstable_reason.clone_from(&w.invalid_reason);
        }
    }
    steady_state
}

/// Goodput against the traffic's SLO, for a served run that set one (`energy_j`: the
/// window's energy, when measured).
fn goodput(m: &Measured<'_>, energy_j: Option<f64>) -> Option<llem_results::result::Goodput> {
    m.request
        .config
        .traffic
        .as_deref()
        .and_then(|t| t.slo.as_ref())
        .filter(|_| m.served)
        .map(|slo| crate::goodput::goodput(m.records, slo, m.window, energy_j))
}

/// Writes `result.json`, `effective_config.json`, `timeseries.parquet` (when
/// `gpu_telemetry`) and `requests.parquet`; the result last, so a directory with a
/// `result.json` is complete. When any write fails (a full disk), the artefacts this call
/// wrote are removed again: a cell holds its whole set or none of it.
pub fn write(
    req: &ExperimentRequest<'_>,
    a: &Assembled,
    telemetry: &Telemetry,
    server_metrics: &[llem_results::MetricSample],
) -> Result<(), ResultsError> {
    let written = write_set(req, a, telemetry, server_metrics);
    if written.is_err() {
        for name in [
            layout::EFFECTIVE_CONFIG,
            layout::TIMESERIES,
            layout::REQUESTS,
            layout::TIMELINE,
            layout::SERVER_METRICS,
            layout::RESULT,
        ] {
            let _ = std::fs::remove_file(req.cell_dir.join(name));
        }
    }
    written
}

fn write_set(
    req: &ExperimentRequest<'_>,
    a: &Assembled,
    telemetry: &Telemetry,
    server_metrics: &[llem_results::MetricSample],
) -> Result<(), ResultsError> {
    let (result, records) = (&a.result, &a.records);
    let dir = &req.cell_dir;
    llem_results::write_json_atomic(&dir.join(layout::EFFECTIVE_CONFIG), req.config)?;
    let meta = vec![
        ("llem.version", req.llem_version.to_string()),
        ("llem.experiment_id", result.experiment_id.clone()),
        (
            "llem.measurement_config_hash",
            result.measurement_config_hash.clone(),
        ),
        ("llem.start_time", result.start_time.clone()),
    ];
    if req.config.gpu_telemetry {
        let mut m = meta.clone();
        m.push(("llem.sampler", result.environment.energy_sampler.clone()));
        m.push((
            "llem.interval_ms",
            result.environment.sampling_interval_ms.to_string(),
        ));
        llem_results::write_timeseries(&dir.join(layout::TIMESERIES), &telemetry.to_columns(), &m)?;
    }
    llem_results::write_requests(&dir.join(layout::REQUESTS), records, &meta)?;
    if let Some(t) = &result.timeline {
        let mut m = meta.clone();
        m.push(("llem.bin_seconds", t.bin_seconds.to_string()));
        llem_results::write_timeline(&dir.join(layout::TIMELINE), &a.timeline, &m)?;
    }
    if !server_metrics.is_empty() {
        llem_results::write_server_metrics(
            &dir.join(layout::SERVER_METRICS),
            server_metrics,
            &meta,
        )?;
    }
    llem_results::write_json_atomic(&dir.join(layout::RESULT), result)
}
