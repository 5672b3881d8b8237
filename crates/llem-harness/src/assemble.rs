//! The `ExperimentResult` from what the lifecycle measured, and the artefacts on disk.

use llem_energy::Telemetry;
use llem_energy::baseline::{BaselineOrigin, BaselineOutcome, adjusted_energy_j};
use llem_engines::{EngineInfo, ModelInfo, RunSummary};
use llem_results::result::{
    BatchEfficiencyMetrics, DomainEnergyRecord, EnergyBreakdown, Environment,
    ExtendedEfficiencyMetrics, GpuUtilisationMetrics, KvCacheEfficiencyMetrics,
    MemoryEfficiencyMetrics, ModelDescription, ProcessResult, SCHEMA_VERSION, ThermalThrottleInfo,
    WarmupResult,
};
use llem_results::{ExperimentResult, RequestRecord, ResultsError};

use crate::lifecycle::ExperimentRequest;
use crate::{artefacts, flops, latency, stats};

/// Host memory of the llem process around the load, MiB.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostMemory {
    /// Before the model was loaded.
    pub rss_before_load_mib: Option<f64>,
    /// After model and context were loaded.
    pub rss_after_load_mib: Option<f64>,
    /// Peak over the whole process.
    pub peak_rss_mib: Option<f64>,
}

/// Everything the lifecycle gathered.
pub struct Measured<'a> {
    /// The request.
    pub request: &'a ExperimentRequest<'a>,
    /// Engine identity.
    pub engine: &'a EngineInfo,
    /// Model facts.
    pub model: &'a ModelInfo,
    /// Requests of the window, by id.
    pub records: &'a [RequestRecord],
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
}

fn name_of<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

/// Weight precision relative to 16-bit for the token efficiency index (the Python llem's
/// convention: 1.0 for FP16/FP32, 0.5 for INT8; 4-6 bit quantisations 0.25).
fn precision_factor(dtype: Option<&str>) -> f64 {
    match dtype.map(str::to_ascii_uppercase).as_deref() {
        None => 1.0,
        Some(d) if d.starts_with('F') || d.starts_with("BF") => 1.0,
        Some(d) if d.starts_with("Q8") || d.starts_with("I8") || d.contains("8BIT") => 0.5,
        Some(_) => 0.25,
    }
}

fn reproducibility_notes(m: &Measured<'_>, sampler: &str, interval_ms: f64) -> String {
    let mut n = format!(
        "Energy from the `{sampler}` sampler every {interval_ms:.0} ms over {}. ",
        if m.sensors.is_empty() {
            "no sensors".to_string()
        } else {
            m.sensors.join(", ")
        }
    );
    n.push_str(
        "NVML board energy counters are accurate to about +/-5 % (+/-30 W power readings on \
         older boards); RAPL package/DRAM counters are model-based estimates by the CPU; the \
         `estimate` sensor is TDP x utilisation, a model, not a measurement. ",
    );
    n.push_str(if m.engine.name == "transformers" {
        if m.summary.latency_mode == Some("true_streaming") {
            "Latency comes from a generate() streamer in the transformers worker timing every \
             token on CLOCK_MONOTONIC, placed on the experiment clock (one request per batch). "
        } else {
            "The transformers worker timed each generate() batch as a whole (after a device \
             sync): every request of a batch ends with it, so there are no TTFT or ITL \
             figures (set measurement.latency_profiling for them). "
        }
    } else if m.served {
        "Latency is measured by llem's streaming client on the experiment clock: TTFT at the \
         first chunk carrying a token, token times split evenly over the gap when a chunk \
         carries several (latency_stats.measurement_mode says which). "
    } else {
        "Latency uses true per-token timestamps of the embedded engine (one clock for the \
         whole experiment). "
    });
    n.push_str(
        "FLOPs are analytical estimates, not hardware counts. Results \
         vary with thermal state, clocks and background load; compare runs by \
         mj_per_tok_adjusted over several cycles.",
    );
    n
}

fn throttle_info(t: &Telemetry, start: f64, end: f64) -> ThermalThrottleInfo {
    use llem_energy::throttle::{
        HW_POWER_BRAKE, HW_SLOWDOWN, HW_THERMAL, SW_POWER_CAP, SW_THERMAL,
    };
    let mut info = ThermalThrottleInfo::default();
    for s in &t.series {
        for i in 0..s.len() {
            let Some(&ts) = s.t_s.get(i) else { continue };
            if ts < start || ts > end {
                continue;
            }
            if let Some(temp) = s.temperature_c.get(i).copied().filter(|v| !v.is_nan()) {
                let temp = f64::from(temp);
                info.max_temperature_c = Some(info.max_temperature_c.map_or(temp, |m| m.max(temp)));
            }
            let Some(bits) = s.throttle_reasons(i) else {
                continue;
            };
            info.sw_thermal |= bits & SW_THERMAL != 0;
            info.hw_thermal |= bits & HW_THERMAL != 0;
            info.hw_power |= bits & (HW_POWER_BRAKE | HW_SLOWDOWN) != 0;
            info.power |= bits & (SW_POWER_CAP | HW_POWER_BRAKE) != 0;
            if bits & (SW_THERMAL | HW_THERMAL | SW_POWER_CAP | HW_POWER_BRAKE | HW_SLOWDOWN) != 0 {
                info.throttle_timestamps.push(ts);
            }
        }
    }
    info.thermal = info.sw_thermal || info.hw_thermal;
    info.throttle_duration_sec = llem_energy::throttle::throttling(t, start, end)
        .iter()
        .map(|th| th.thermal_s.max(th.power_cap_s).max(th.hw_slowdown_s))
        .fold(0.0, f64::max);
    info.detected = info.thermal || info.power || info.hw_power;
    info
}

fn mean_in_window(
    t: &Telemetry,
    start: f64,
    end: f64,
    col: fn(&llem_energy::telemetry::Series) -> &Vec<f32>,
    gpu_only: bool,
) -> (Option<f64>, usize) {
    let mut v = Vec::new();
    for s in t
        .series
        .iter()
        .filter(|s| !gpu_only || s.domain.kind == llem_energy::DomainKind::Gpu)
    {
        for (ts, x) in s.t_s.iter().zip(col(s)) {
            if *ts >= start && *ts <= end && !x.is_nan() {
                v.push(f64::from(*x));
            }
        }
    }
    (stats::mean(&v), v.len())
}

fn max_in_window(
    t: &Telemetry,
    start: f64,
    end: f64,
    col: fn(&llem_energy::telemetry::Series) -> &Vec<f32>,
) -> Option<f64> {
    t.series
        .iter()
        .filter(|s| s.domain.kind == llem_energy::DomainKind::Gpu)
        .flat_map(|s| s.t_s.iter().zip(col(s)))
        .filter(|(ts, x)| **ts >= start && **ts <= end && !x.is_nan())
        .map(|(_, x)| f64::from(*x))
        .reduce(f64::max)
}

/// Builds the result.
pub fn result(m: &Measured<'_>) -> ExperimentResult {
    let req = m.request;
    let cfg = req.config;
    let (t0, t1) = m.window;
    let duration = (t1 - t0).max(0.0);
    let ok = m.records.iter().filter(|r| r.success);
    // A sub-window counts the tokens that arrived inside it; the whole run counts them all
    // (the same number, without relying on every engine stamping every token).
    let (input, output) = if m.window == m.workload_span {
        (
            ok.clone().map(|r| u64::from(r.input_tokens)).sum(),
            ok.map(|r| u64::from(r.output_tokens)).sum(),
        )
    } else {
        crate::window::tokens_in(m.records, t0, t1)
    };

    let window = m.telemetry.energy(t0, t1);
    let have_energy = !window.domains.is_empty();
    let total_j = window.total_j;
    let mut warnings = m.warnings.clone();
    warnings.extend(window.warnings.iter().cloned());
    let throttle = llem_energy::throttle::throttling(m.telemetry, t0, t1);
    if have_energy {
        warnings.extend(llem_energy::quality::warnings(
            m.telemetry,
            &window,
            &throttle,
        ));
    }
    let baseline_w = m.baseline.map(|b| b.record.total_power_w);
    let adjusted = baseline_w
        .filter(|_| have_energy)
        .map(|b| adjusted_energy_j(total_j, b, duration));
    let per_tok = |j: f64| (output > 0 && have_energy).then(|| j / output as f64 * 1000.0);
    let fl = flops::estimate(m.model, m.records);
    let total_flops = fl.as_ref().map_or(0.0, |f| f.value);
    let nonzero = |x: f64, d: u64| (x > 0.0 && d > 0).then(|| x / d as f64);
    let lat = latency::statistics(m.records, m.summary.latency_mode);
    let tps = if duration > 0.0 {
        output as f64 / duration
    } else {
        0.0
    };
    let tokens_per_joule = if total_j > 0.0 {
        output as f64 / total_j
    } else {
        0.0
    };

    let domains: Vec<DomainEnergyRecord> = window
        .domains
        .iter()
        .map(|d| DomainEnergyRecord {
            name: d.name.clone(),
            kind: name_of(&d.kind),
            sensor: name_of(&d.sensor),
            energy_j: d.energy_j,
            energy_source: d.energy_source.as_str().into(),
            counter_j: d.counter_j,
            integrated_j: d.integrated_j,
            disagreement: d.disagreement,
            avg_power_w: d.avg_power_w,
            peak_power_w: d.peak_power_w,
            n_samples: d.n_samples,
        })
        .collect();
    let kind_j = |k: llem_energy::DomainKind| -> f64 {
        window
            .domains
            .iter()
            .filter(|d| d.kind == k)
            .fold(0.0, |a, d| a + d.energy_j)
    };
    let gpu_j: Vec<f64> = window
        .domains
        .iter()
        .filter(|d| d.kind == llem_energy::DomainKind::Gpu)
        .map(|d| d.energy_j)
        .collect();

    // Memory: the GPU's when layers were offloaded and NVML reports it, else host memory.
    let gpu_peak = max_in_window(m.telemetry, t0, t1, |s| &s.memory_used_mib);
    let gpu_total = max_in_window(m.telemetry, t0, t1, |s| &s.memory_total_mib);
    let settings = cfg.llamacpp.as_deref().cloned().unwrap_or_default();
    let weights_mb = m.model.weights_bytes.map(|b| b as f64 / 1_048_576.0);
    let kv_mb = m.summary.kv_cache_bytes.map(|b| b as f64 / 1_048_576.0);
    let (total_mb, peak_mb, source) = if let Some(em) = &m.summary.memory {
        // An engine in its own process (the transformers worker) knows its own peak:
        // torch's allocator on a GPU, the worker's resident set on a CPU.
        let total = em.total_mib.or(if em.source == "worker_rss" {
            crate::environment::memory_total_mib()
        } else {
            gpu_total
        });
        (total, Some(em.peak_mib), em.source)
    } else if (m.served || settings.n_gpu_layers != 0) && gpu_peak.is_some() {
        (gpu_total, gpu_peak, "nvml")
    } else if m.served {
        // llem's own memory says nothing about the server's.
        (None, None, "none")
    } else {
        (
            crate::environment::memory_total_mib(),
            m.memory.peak_rss_mib,
            "process_rss",
        )
    };
    let memory = MemoryEfficiencyMetrics {
        total_vram_mb: total_mb,
        model_memory_mb: weights_mb,
        peak_memory_mb: peak_mb,
        inference_memory_mb: peak_mb.zip(weights_mb).map(|(p, w)| (p - w).max(0.0)),
        kv_cache_mb: kv_mb,
        tokens_per_gb_vram: peak_mb
            .filter(|p| *p > 0.0)
            .map(|p| output as f64 / (p / 1024.0)),
        model_memory_utilisation: weights_mb
            .zip(total_mb)
            .filter(|(_, t)| *t > 0.0)
            .map(|(w, t)| w / t),
        kv_cache_memory_ratio: kv_mb
            .zip(peak_mb)
            .filter(|(_, p)| *p > 0.0)
            .map(|(k, p)| k / p),
        memory_source: Some(source.into()),
    };
    let (sm_mean, sm_n) = mean_in_window(m.telemetry, t0, t1, |s| &s.sm_util_pct, true);
    let (mem_mean, _) = mean_in_window(m.telemetry, t0, t1, |s| &s.mem_util_pct, true);
    let batch = if m.served {
        // A server batches continuously: its batch is what it was running, on average, in
        // the window (its own gauge when scraped, else what the client saw).
        let avg =
            crate::window::avg_batch(m.records, &m.summary.server_metrics, t0, t1).map(|(v, _)| v);
        BatchEfficiencyMetrics {
            effective_batch_size: avg,
            batch_utilisation: avg
                .zip(
                    (m.summary.configured_batch_size > 0)
                        .then_some(m.summary.configured_batch_size),
                )
                .map(|(a, b)| a / f64::from(b)),
            padding_overhead: None,
            num_batches: None,
        }
    } else {
        BatchEfficiencyMetrics {
            effective_batch_size: Some(m.summary.effective_batch_size),
            batch_utilisation: (m.summary.configured_batch_size > 0).then(|| {
                m.summary.effective_batch_size / f64::from(m.summary.configured_batch_size)
            }),
            padding_overhead: Some(m.summary.padding_overhead),
            num_batches: Some(m.summary.num_batches),
        }
    };
    let sm = &m.summary.server_metrics;
    let kv_cache = KvCacheEfficiencyMetrics {
        kv_cache_hit_rate: crate::window::prefix_hit_rate(sm, t0, t1),
        kv_cache_usage_mean: crate::window::gauge_mean(
            sm,
            llem_engines::serving::prometheus::Gauge::KvCacheUsage,
            t0,
            t1,
        ),
        num_requests_waiting_mean: crate::window::gauge_mean(
            sm,
            llem_engines::serving::prometheus::Gauge::Waiting,
            t0,
            t1,
        ),
        ..KvCacheEfficiencyMetrics::default()
    };
    let extended = ExtendedEfficiencyMetrics {
        tpot_ms: lat.as_ref().and_then(|l| l.tpot_mean_ms),
        token_efficiency_index: (tps > 0.0 && total_j > 0.0 && output > 0)
            .then(|| tps * tokens_per_joule * precision_factor(m.model.dtype.as_deref())),
        memory,
        gpu_utilisation: GpuUtilisationMetrics {
            sm_utilisation_mean: sm_mean,
            sm_utilisation_samples: sm_n,
            memory_bandwidth_utilisation: mem_mean,
            process_cpu_pct: m
                .process_cpu_s
                .filter(|_| duration > 0.0)
                .map(|c| c / duration * 100.0),
            sampler_cpu_s: m.telemetry.stats.thread_cpu_s,
        },
        batch,
        kv_cache,
        request_latency: latency::request_latency(m.records),
    };

    let sampler = cfg
        .energy_sampler
        .map_or_else(|| "none".to_string(), |s| s.to_string());
    let interval_ms = m.telemetry.stats.interval_s * 1000.0;
    let interval_ms = if interval_ms > 0.0 {
        interval_ms
    } else {
        req.sampling_interval.as_secs_f64() * 1000.0
    };
    let breakdown = EnergyBreakdown {
        raw_j: total_j,
        adjusted_j: adjusted,
        baseline_power_w: baseline_w,
        baseline_method: m.baseline.map(|b| {
            let how = match b.origin {
                BaselineOrigin::Fresh => "measured",
                BaselineOrigin::Cached => "cached",
                BaselineOrigin::Validated => "cached, spot-checked",
                BaselineOrigin::Remeasured => "re-measured after drift",
            };
            format!("{} ({how})", cfg.baseline.strategy)
        }),
        baseline_timestamp: m
            .baseline
            .map(|b| llem_results::time::iso8601_utc(b.record.measured_at_unix_s)),
        baseline_cache_age_sec: m.baseline.and_then(|b| b.age_s),
        domains,
    };
    let model_name = &cfg.model;
    let notes = reproducibility_notes(m, &sampler, interval_ms);
    ExperimentResult {
        schema_version: SCHEMA_VERSION.into(),
        experiment_id: req.experiment_id.clone(),
        measurement_config_hash: req.config_hash.to_string(),
        llenergymeasure_version: Some(format!("llem {}", req.llem_version)),
        engine: m.engine.name.to_string(),
        engine_version: m.engine.version.clone(),
        model_name: model_name.clone(),
        measurement_methodology: m.methodology.into(),
        steady_state_window: (m.methodology != "total").then_some([t0, t1]),
        measurement_window_s: Some([t0, t1]),
        total_tokens: output,
        total_input_tokens: input,
        total_output_tokens: output,
        total_energy_j: total_j,
        energy_adjusted_j: adjusted,
        total_inference_time_sec: duration,
        avg_tokens_per_second: tps,
        avg_total_tokens_per_second: if duration > 0.0 {
            (input + output) as f64 / duration
        } else {
            0.0
        },
        avg_energy_per_token_j: if output > 0 {
            total_j / output as f64
        } else {
            0.0
        },
        mj_per_tok_total: per_tok(total_j),
        mj_per_tok_adjusted: adjusted.and_then(per_tok),
        tokens_per_joule,
        energy_source: window.energy_source.map(|s| s.as_str().to_string()),
        total_flops,
        flops_per_output_token: nonzero(total_flops, output),
        flops_per_input_token: nonzero(total_flops, input),
        flops_per_second: (total_flops > 0.0 && duration > 0.0).then(|| total_flops / duration),
        flops: fl,
        baseline_power_w: baseline_w,
        energy_per_device_j: (!gpu_j.is_empty()).then_some(gpu_j),
        energy_breakdown: Some(breakdown),
        multi_gpu: None,
        process_results: vec![ProcessResult {
            process_index: 0,
            gpu_id: (settings.n_gpu_layers != 0 && !m.gpus.is_empty()).then_some(0),
            input_tokens: input,
            output_tokens: output,
            inference_time_sec: duration,
            energy_j: total_j,
            gpu_energy_j: kind_j(llem_energy::DomainKind::Gpu),
            cpu_energy_j: kind_j(llem_energy::DomainKind::CpuPackage),
            ram_energy_j: kind_j(llem_energy::DomainKind::Dram),
        }],
        aggregation: None,
        measurement_warnings: warnings,
        warmup_excluded_samples: m.warmup.as_ref().map(|w| w.iterations_completed),
        reproducibility_notes: notes,
        thermal_throttle: Some(throttle_info(m.telemetry, t0, t1)),
        warmup_result: m.warmup.clone(),
        start_time: llem_results::time::iso8601_utc(m.start_unix),
        end_time: llem_results::time::iso8601_utc(m.end_unix),
        duration_sec: m.end_unix - m.start_unix,
        timeseries: cfg.gpu_telemetry.then(|| artefacts::TIMESERIES.to_string()),
        requests: Some(artefacts::REQUESTS.to_string()),
        latency_stats: lat,
        extended_metrics: extended,
        steady_state: m.steady_state.clone(),
        goodput: cfg
            .traffic
            .as_deref()
            .and_then(|t| t.slo.as_ref())
            .filter(|_| m.served)
            .map(|slo| {
                crate::goodput::goodput(m.records, slo, (t0, t1), have_energy.then_some(total_j))
            }),
        traffic: m.summary.traffic.clone(),
        server_metrics: (!m.summary.server_metrics.is_empty())
            .then(|| artefacts::SERVER_METRICS.to_string()),
        environment: Environment {
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
        },
    }
}

/// Writes `result.json`, `effective_config.json`, `timeseries.parquet` (when
/// `gpu_telemetry`) and `requests.parquet`; the result last, so a directory with a
/// `result.json` is complete.
pub fn write(
    req: &ExperimentRequest<'_>,
    result: &ExperimentResult,
    records: &[RequestRecord],
    telemetry: &Telemetry,
    server_metrics: &[llem_results::MetricSample],
) -> Result<(), ResultsError> {
    let dir = &req.cell_dir;
    llem_results::write_json_atomic(&dir.join(artefacts::EFFECTIVE_CONFIG), req.config)?;
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
        llem_results::write_timeseries(
            &dir.join(artefacts::TIMESERIES),
            &telemetry.to_columns(),
            &m,
        )?;
    }
    llem_results::write_requests(&dir.join(artefacts::REQUESTS), records, &meta)?;
    if !server_metrics.is_empty() {
        llem_results::write_server_metrics(
            &dir.join(artefacts::SERVER_METRICS),
            server_metrics,
            &meta,
        )?;
    }
    llem_results::write_json_atomic(&dir.join(artefacts::RESULT), result)
}
