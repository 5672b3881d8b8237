//! Result bundles of the Python llem, `llenergymeasure` 0.7 (`bundle_version` 2.0:
//! `result.json`, `config.json`, `system.json` per cell, a study `manifest.json`), read as
//! [`LlmRun`]s so they list, query, compare and export beside llem's own. The mapping, field by
//! field, is in `docs/records.md`.
//!
//! Two honesty rules the Python tool does not keep: energy it did not measure (its
//! `energy_measurement_unavailable` warning, or 0 J over a positive duration, which no
//! powered device draws) is NaN here, not 0; and its `avg_tokens_per_second` counts input
//! tokens too, so output throughput is recomputed from `output_tokens`.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::run::{self, LlemFields, LlmRun, RunSource};
use super::stability::RunFacts;
use llem_results::layout;

/// True when `bytes` (a `result.json`) are a llem 0.7 bundle's: it has `bundle_version`.
/// Scanned without building the document, since llem's own cells are read typed after.
pub fn is_bundle(bytes: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        bundle_version: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Probe>(bytes).is_ok_and(|p| p.bundle_version.is_some())
}

/// True when the directory of `result` looks like a llem 0.7 cell (its sidecars beside it).
pub fn looks_like_cell(result: &Path) -> bool {
    result.with_file_name("config.json").is_file() && result.with_file_name("system.json").is_file()
}

fn f(v: &Value, ptr: &str) -> Option<f64> {
    v.pointer(ptr).and_then(Value::as_f64)
}

fn s<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

fn i(v: &Value, ptr: &str) -> Option<i64> {
    v.pointer(ptr).and_then(Value::as_i64)
}

/// The batch limit the run was declared with: the engine's own field, else the server's
/// concurrency cap, else the batch it ran.
fn batch_of(declared: &Value, engine: &str, result: &Value) -> i64 {
    let key = match engine {
        "transformers" => "/transformers/llem_execution/batch_size",
        "vllm" => "/vllm/engine_params/max_num_seqs",
        "tensorrt" => "/tensorrt/engine_params/max_batch_size",
        _ => "",
    };
    i(declared, key)
        .or_else(|| i(declared, "/server/traffic/concurrency_cap"))
        .or_else(|| f(result, "/extended_metrics/batch/effective_batch_size").map(|b| b as i64))
        .unwrap_or(1)
}

/// The cell's run and the facts the stability rules judge, from its three files.
pub fn view(
    path: &Path,
    result: &Value,
    config: &Value,
    system: &Value,
    placement: (Option<String>, Option<i64>),
) -> (LlmRun, RunFacts) {
    let declared = config.get("declared_config").unwrap_or(&Value::Null);
    let engine = s(result, "/engine")
        .or_else(|| s(config, "/engine"))
        .unwrap_or("unknown")
        .to_string();
    let model_id = s(declared, "/task/model")
        .or_else(|| s(result, "/model_name"))
        .unwrap_or("unknown")
        .to_string();
    let task = s(declared, "/task/dataset/source")
        .unwrap_or("unknown")
        .to_string();
    let warnings: Vec<String> = result
        .get("measurement_warnings")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|w| w.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let duration = f(result, "/total_inference_time_sec").unwrap_or(f64::NAN);
    let Energy {
        unmeasured,
        raw: raw_energy,
        total: energy,
        per_token: e_per_tok,
    } = energy_of(result, declared, &warnings, duration);
    let output_tokens = f(result, "/output_tokens");
    let completed = f(
        result,
        "/extended_metrics/request_latency/e2e_latency_samples",
    )
    .filter(|n| *n > 0.0)
    .or_else(|| f(declared, "/task/dataset/n_prompts"));
    let output_throughput = output_tokens
        .filter(|_| duration > 0.0)
        .map(|t| t / duration);
    let derived = run::derive(
        energy,
        duration,
        e_per_tok,
        output_throughput,
        completed,
        output_tokens,
    );
    let lat = result.get("latency_stats").unwrap_or(&Value::Null);
    let ms = |k: &str| f(lat, &format!("/{k}")).unwrap_or(f64::NAN);
    let gpu = s(system, "/hardware/gpu/name").map(String::from);
    let num_gpus = result
        .get("energy_per_device_j")
        .and_then(Value::as_array)
        .map(|a| a.len() as i64)
        .or_else(|| i(result, "/aggregation/num_processes"))
        .unwrap_or(i64::from(gpu.is_some()));
    let precision = precision_of(declared, config, &engine);
    let b = batch_of(declared, &engine, result);
    let avg_batch = f(result, "/extended_metrics/batch/effective_batch_size");
    let notes = notes_of(warnings, result, unmeasured, raw_energy, energy);
    let extra = llem_fields(
        (result, config, declared),
        &engine,
        placement,
        unmeasured,
        &notes,
    );
    let gpu_model = gpu.unwrap_or_else(|| "CPU".into());
    let run = LlmRun {
        domain: "llm".into(),
        task,
        nickname: layout::model_slug(&model_id),
        model_id,
        architecture: "Dense".into(),
        total_params_billions: f64::NAN,
        activated_params_billions: f64::NAN,
        weight_precision: precision,
        gpu_model,
        num_gpus,
        max_num_seqs: b,
        seed: i(declared, "/task/random_seed"),
        num_request_repeats: None,
        tensor_parallel: num_gpus.max(1),
        expert_parallel: 1,
        data_parallel: 1,
        steady_state_energy_joules: energy,
        steady_state_duration_seconds: duration,
        energy_per_token_joules: e_per_tok,
        energy_per_request_joules: derived.and_then(|x| x.energy_per_request_joules),
        output_throughput_tokens_per_sec: derived
            .map(|x| x.output_throughput_tokens_per_sec)
            .or(output_throughput)
            .unwrap_or(f64::NAN),
        request_throughput_req_per_sec: derived.and_then(|x| x.request_throughput_req_per_sec),
        avg_power_watts: derived.map_or(f64::NAN, |x| x.avg_power_watts),
        total_output_tokens: output_tokens,
        completed_requests: completed,
        avg_output_len: derived.and_then(|x| x.avg_output_len),
        mean_itl_ms: ms("itl_mean_ms"),
        median_itl_ms: ms("itl_median_ms"),
        p50_itl_ms: ms("itl_median_ms"),
        p90_itl_ms: ms("itl_p90_ms"),
        p95_itl_ms: ms("itl_p95_ms"),
        p99_itl_ms: ms("itl_p99_ms"),
        avg_batch_size: avg_batch,
        is_stable: true,
        unstable_reason: String::new(),
        results_path: path.to_string_lossy().into_owned(),
        prometheus_path: String::new(),
        extra,
    };
    let facts = facts_of(&run, engine);
    (run, facts)
}

/// The weight precision the declared config set for `engine`, else the one llem 0.7 saw.
fn precision_of(declared: &Value, config: &Value, engine: &str) -> String {
    s(declared, &format!("/{engine}/engine_params/dtype"))
        .map(String::from)
        .or_else(|| {
            s(config, "/observed_engine_params/dtype")
                .map(|d| d.trim_start_matches("torch.").to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

/// The facts the stability rules judge of `run`, grouped by `engine`.
fn facts_of(run: &LlmRun, engine: String) -> RunFacts {
    RunFacts {
        model_id: run.model_id.clone(),
        task: run.task.clone(),
        gpu_model: run.gpu_model.clone(),
        num_gpus: run.num_gpus,
        max_num_seqs: Some(run.max_num_seqs),
        load_error: None,
        steady_state_duration_s: Some(run.steady_state_duration_seconds),
        energy_per_token_j: Some(run.energy_per_token_joules),
        avg_batch_size: run.avg_batch_size,
        variant: engine,
    }
}

/// A llem 0.7 run's energy, read as unknown where that tool wrote none or a 0 J that is not
/// a measurement.
struct Energy {
    /// No sampler, an "unavailable" warning, or 0 J over a non-empty run.
    unmeasured: bool,
    /// `total_energy_j` as written, J.
    raw: Option<f64>,
    /// The run's energy, J (NaN when unmeasured).
    total: f64,
    /// `avg_energy_per_token_j`, J (NaN when unmeasured).
    per_token: f64,
}

/// The energy of a run lasting `duration_s` (the `result.json` and declared config of it).
fn energy_of(result: &Value, declared: &Value, warnings: &[String], duration_s: f64) -> Energy {
    let raw = f(result, "/total_energy_j");
    let unmeasured = warnings
        .iter()
        .any(|w| w.starts_with("energy_measurement_unavailable"))
        || s(declared, "/measurement/energy_sampler").is_none()
        || (raw == Some(0.0) && duration_s > 0.0);
    let measured = |v: Option<f64>| {
        if unmeasured {
            f64::NAN
        } else {
            v.unwrap_or(f64::NAN)
        }
    };
    Energy {
        unmeasured,
        raw,
        total: measured(raw),
        per_token: measured(f(result, "/avg_energy_per_token_j")),
    }
}

/// The run's warnings, then what llem reads into its numbers: a 0 J that is no measurement,
/// a baseline-adjusted energy that is mostly noise, throttling.
fn notes_of(
    mut notes: Vec<String>,
    result: &Value,
    unmeasured: bool,
    raw_energy: Option<f64>,
    energy: f64,
) -> Vec<String> {
    if unmeasured && raw_energy == Some(0.0) {
        notes.push(
            "llem 0.7 wrote 0 J for this run: not a measurement (no sampler, or too few \
             samples), read as unknown"
                .into(),
        );
    }
    let adjusted = f(result, "/energy_adjusted_j");
    if let (Some(a), false) = (adjusted, unmeasured)
        && energy > 0.0
        && a < llem_results::result::DEGENERATE_ADJUSTED_SHARE * energy
    {
        notes.push(format!(
            "baseline-adjusted energy ({a:.3} J) is under {:.0} % of the raw {energy:.3} J: the \
             run drew barely more than its baseline, so adjusted figures are mostly noise",
            llem_results::result::DEGENERATE_ADJUSTED_SHARE * 100.0
        ));
    }
    if result
        .pointer("/throttle/detected")
        .and_then(Value::as_bool)
        == Some(true)
    {
        notes.push("throttled during the run (llem 0.7 throttle.detected)".into());
    }
    notes
}

/// The llem fields of a llem 0.7 run (`files`: its result, config and declared config).
fn llem_fields(
    files: (&Value, &Value, &Value),
    engine: &str,
    placement: (Option<String>, Option<i64>),
    unmeasured: bool,
    notes: &[String],
) -> LlemFields {
    let (result, config, declared) = files;
    let lat = result.get("latency_stats").unwrap_or(&Value::Null);
    let sampler = s(declared, "/measurement/energy_sampler").map(String::from);
    let gpu_scope = matches!(sampler.as_deref(), Some("nvml" | "zeus" | "auto"));
    LlemFields {
        source: Some(RunSource::Llem07),
        engine: Some(engine.to_string()),
        study: placement.0,
        cycle: placement.1,
        label: None,
        config: (!declared.is_null()).then(|| Arc::new(declared.clone())),
        config_hash: s(result, "/declared_config_hash").map(String::from),
        experiment_id: s(result, "/experiment_id").map(String::from),
        measurement_methodology: s(config, "/measurement_methodology").map(String::from),
        energy_source: sampler,
        energy_scope: gpu_scope.then(|| "gpu".to_string()),
        system_energy_joules: None,
        system_scope: None,
        node_energy_joules: None,
        unattributed_energy_joules: None,
        energy_adjusted_joules: f(result, "/energy_adjusted_j").filter(|_| !unmeasured),
        mj_per_tok_adjusted: f(result, "/energy_per_token_mj_adjusted").filter(|_| !unmeasured),
        ttft_median_ms: f(lat, "/ttft_median_ms"),
        ttft_p99_ms: f(lat, "/ttft_p99_ms"),
        tpot_median_ms: f(result, "/extended_metrics/tpot_ms"),
        e2e_p99_ms: f(
            result,
            "/extended_metrics/request_latency/e2e_latency_p99_ms",
        ),
        warnings: (!notes.is_empty()).then(|| notes.join("\n")),
        // llem 0.7 does not split its energy.
        ..LlemFields::default()
    }
}

/// A llem 0.7 cell's GPU series from its `timeseries.parquet` (that tool's own columns:
/// `timestamp_s`, `gpu_index`, `power_w`, `temperature_c`, float32 values; not the names its
/// documentation and seed 001 give), over `config.json`'s `steady_state_window`. It records
/// no energy counter, so `power.device_average` is the instantaneous power.
pub fn series(
    r: &LlmRun,
    metric: &str,
) -> Result<(super::extract::DeviceSeries, (f64, f64)), super::RecordsError> {
    use arrow_array::{Array, Float32Array, Float64Array, Int32Array};
    use std::collections::BTreeMap;
    let result = Path::new(&r.results_path);
    let invalid = |message: String| super::RecordsError::Invalid {
        path: result.to_path_buf(),
        message,
    };
    let config: Value = llem_config::files::read_record(result.with_file_name("config.json"))
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| invalid("config.json is missing or unreadable".into()))?;
    let window = match (
        f(&config, "/steady_state_window/0"),
        f(&config, "/steady_state_window/1"),
    ) {
        (Some(a), Some(b)) => (a, b),
        _ => return Err(invalid("config.json has no steady_state_window".into())),
    };
    let ts = result.with_file_name(layout::TIMESERIES);
    let mut by_gpu: BTreeMap<i32, Vec<(f64, f64)>> = BTreeMap::new();
    for batch in llem_results::parquet_io::open(&ts)? {
        let batch = batch.map_err(|e| invalid(e.to_string()))?;
        let bad_column = |e: llem_results::parquet_io::ColumnError| invalid(e.to_string());
        let col = |n: &str| {
            llem_results::parquet_io::column::<Float32Array>(&batch, n).map_err(bad_column)
        };
        let t = llem_results::parquet_io::column::<Float64Array>(&batch, "timestamp_s")
            .map_err(bad_column)?;
        let gpu = llem_results::parquet_io::column::<Int32Array>(&batch, "gpu_index")
            .map_err(bad_column)?;
        let v = if metric == "temperature" {
            col("temperature_c")?
        } else {
            col("power_w")?
        };
        for k in 0..batch.num_rows() {
            if v.is_valid(k) && t.is_valid(k) {
                by_gpu
                    .entry(gpu.value(k))
                    .or_default()
                    .push((t.value(k), f64::from(v.value(k))));
            }
        }
    }
    Ok((by_gpu.into_values().collect(), window))
}
