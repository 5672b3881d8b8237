//! Boavizta's BoAmps energy report (format 1.1.0, `crates/llem-records/assets/boamps/`), one
//! report per run: the task (inference, its model, engine and token counts), one measure (the
//! run's headline energy in kWh over its window), the system, the infrastructure's components
//! and, where the carbon intensity was configured, the environment. llem runs add what their
//! `result.json` holds (OS, CPU, memory, engine version, input tokens, the bound's quality
//! class); ML.ENERGY runs carry what their records hold.

use serde_json::{Map, Value, json};

use super::{Exporter, Record, Table, count, llem_result, num, text};
use crate::RecordsError;

/// The BoAmps format version written.
pub const FORMAT_VERSION: &str = "1.1.0";

/// Where the format is specified.
const SPEC_URI: &str = "https://github.com/Boavizta/BoAmps/tree/main/model";

/// One BoAmps report per run, as a JSON array (one object each).
pub struct BoampsExporter;

/// A UUID-shaped identifier derived from `key` (FNV-1a, two seeds): the same run exports
/// under the same `reportId` every time.
fn report_id(key: &str) -> String {
    let fnv = |seed: u64| {
        key.bytes().fold(seed, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    };
    let (a, b) = (fnv(0xcbf2_9ce4_8422_2325), fnv(0x84222325_cbf29ce4));
    let hex = format!("{a:016x}{b:016x}");
    let part = |r: std::ops::Range<usize>| hex.get(r).unwrap_or("0").to_string();
    format!(
        "{}-{}-4{}-8{}-{}",
        part(0..8),
        part(8..12),
        part(13..16),
        part(17..20),
        part(20..32)
    )
}

/// `YYYY-MM-DD HH:MM:SS` from an ISO 8601 UTC time (`2026-11-28T15:04:10.123Z`).
fn boamps_time(iso: &str) -> Option<String> {
    let date = iso.get(0..10)?;
    let time = iso.get(11..19)?;
    Some(format!("{date} {time}"))
}

/// The BoAmps quality class of a relative bound: high (±10 %), medium (±25 %), low (±50 %).
fn quality(relative: f64) -> Option<&'static str> {
    match relative {
        r if r <= 0.10 => Some("high"),
        r if r <= 0.25 => Some("medium"),
        r if r <= 0.50 => Some("low"),
        _ => None,
    }
}

/// The language the measured engine computes in, for `software`.
fn language(engine: Option<&str>) -> &'static str {
    match engine {
        Some("llamacpp") => "c++",
        Some("tensorrt") => "c++",
        Some("tgi") => "rust",
        _ => "python",
    }
}

fn put(m: &mut Map<String, Value>, k: &str, v: Option<Value>) {
    if let Some(v) = v {
        m.insert(k.into(), v);
    }
}

/// The BoAmps report of one run; `result` is its `result.json` when it is a llem run.
/// `None` when the run measured no energy: BoAmps requires the measure's energy, and a 0
/// would read as a measurement.
pub fn report(r: &dyn Record, result: Option<&Value>) -> Option<Value> {
    let energy_j = num(r, "steady_state_energy_joules")?;
    let f = |k: &str| result.and_then(|v| v.pointer(k));
    let fnum = |k: &str| f(k).and_then(Value::as_f64);
    let fstr = |k: &str| f(k).and_then(Value::as_str).map(str::to_string);
    let llem = result.is_some();
    let engine = text(r, "engine");
    let when = fstr("/start_time")
        .as_deref()
        .and_then(boamps_time)
        .unwrap_or_else(|| {
            boamps_time(&llem_results::time::iso8601_utc(
                llem_results::time::unix_now_s(),
            ))
            .unwrap_or_default()
        });
    let key = text(r, "results_path")
        .or_else(|| text(r, "experiment_id"))
        .unwrap_or_default();

    let mut algorithm = Map::new();
    algorithm.insert("algorithmType".into(), json!("llm"));
    put(
        &mut algorithm,
        "foundationModelName",
        text(r, "model_id").map(Value::from),
    );
    put(
        &mut algorithm,
        "parametersNumber",
        num(r, "total_params_billions").map(Value::from),
    );
    put(&mut algorithm, "framework", engine.clone().map(Value::from));
    put(
        &mut algorithm,
        "frameworkVersion",
        fstr("/engine_version").map(Value::from),
    );
    put(
        &mut algorithm,
        "quantization",
        text(r, "weight_precision").map(Value::from),
    );

    let tokens = |usage: &str, n: Option<f64>| {
        let mut d = Map::new();
        d.insert("dataUsage".into(), json!(usage));
        d.insert("dataType".into(), json!("token"));
        put(&mut d, "dataQuantity", n.map(count));
        Value::Object(d)
    };
    let mut task = Map::new();
    task.insert("taskStage".into(), json!("inference"));
    task.insert(
        "taskFamily".into(),
        json!(text(r, "task").unwrap_or_else(|| "text generation".into())),
    );
    put(
        &mut task,
        "nbRequest",
        num(r, "completed_requests").map(count),
    );
    task.insert("algorithms".into(), json!([algorithm]));
    task.insert(
        "dataset".into(),
        json!([
            tokens("input", fnum("/total_input_tokens")),
            tokens("output", num(r, "total_output_tokens")),
        ]),
    );
    let scope = text(r, "energy_scope").unwrap_or_else(|| "gpu".into());
    task.insert(
        "taskDescription".into(),
        json!(format!(
            "energy of the measurement window on the {} ({}); measured with {}",
            if scope == "cpu" {
                "CPU packages and DRAM"
            } else {
                "GPUs the engine ran on"
            },
            text(r, "measurement_methodology").unwrap_or_else(|| "steady state".into()),
            if llem {
                "llem"
            } else {
                "the ML.ENERGY benchmark"
            }
        )),
    );

    let source = text(r, "energy_source");
    let tracking = match source.as_deref() {
        Some("estimate") => "estimate",
        Some(_) if scope == "cpu" => "rapl",
        Some(_) => "nvml",
        None => "none",
    };
    let mut measure = Map::new();
    measure.insert(
        "measurementMethod".into(),
        json!(if llem {
            "llem"
        } else {
            "ML.ENERGY benchmark (Zeus)"
        }),
    );
    put(
        &mut measure,
        "version",
        fstr("/llenergymeasure_version").map(Value::from),
    );
    measure.insert(
        if scope == "cpu" {
            "cpuTrackingMode"
        } else {
            "gpuTrackingMode"
        }
        .into(),
        json!(tracking),
    );
    measure.insert("powerConsumption".into(), json!(energy_j / 3.6e6));
    put(
        &mut measure,
        "measurementDuration",
        num(r, "steady_state_duration_seconds").map(Value::from),
    );
    measure.insert("measurementDateTime".into(), json!(when.clone()));

    let mut components = Vec::new();
    let gpus = num(r, "num_gpus").unwrap_or(0.0);
    if gpus >= 1.0 {
        let mut g = Map::new();
        g.insert("componentType".into(), json!("gpu"));
        g.insert("nbComponent".into(), json!(gpus as u64));
        put(
            &mut g,
            "componentName",
            text(r, "gpu_model").map(Value::from),
        );
        components.push(Value::Object(g));
    }
    if let Some(cpu) = fstr("/environment/cpu_model") {
        components.push(json!({
            "componentType": "cpu",
            "componentName": cpu,
            "nbComponent": fnum("/environment/cpu_count").unwrap_or(1.0) as u64,
        }));
    }
    if let Some(mib) = fnum("/environment/memory_total_mib") {
        components.push(json!({
            "componentType": "ram", "nbComponent": 1, "memorySize": mib / 1024.0,
        }));
    }
    if components.is_empty() {
        // The schema wants one; nothing more is known of a record without a result.
        components.push(json!({"componentType": "other", "nbComponent": 1}));
    }

    let mut out = Map::new();
    out.insert(
        "header".into(),
        json!({
            "formatVersion": FORMAT_VERSION,
            "formatVersionSpecificationUri": SPEC_URI,
            "reportId": report_id(&key),
            "reportDatetime": when,
            "reportStatus": "draft",
        }),
    );
    out.insert("task".into(), Value::Object(task));
    out.insert("measures".into(), json!([measure]));
    out.insert(
        "system".into(),
        json!({"os": fstr("/environment/os").unwrap_or_else(|| "linux".into())}),
    );
    out.insert(
        "software".into(),
        json!({"language": language(engine.as_deref())}),
    );
    // Whether the machine was a public cloud, a private one or on premises is not measured.
    out.insert(
        "infrastructure".into(),
        json!({"infraType": "other", "components": components}),
    );
    // A configured grid intensity is the electricity's; the world average llem falls back
    // to is not, and BoAmps wants a country, which llem does not know.
    if fstr("/emissions/intensity_source").as_deref() == Some("configured") {
        out.insert(
            "environment".into(),
            json!({
                "country": "unknown",
                "powerSourceCarbonIntensity": fnum("/emissions/carbon_intensity_gco2_kwh"),
            }),
        );
    }
    if let Some(q) = fnum("/energy_uncertainty/relative").and_then(quality) {
        out.insert("quality".into(), json!(q));
    }
    Some(Value::Object(out))
}

impl Exporter for BoampsExporter {
    fn serialize(&self, runs: &dyn Table) -> Result<Vec<u8>, RecordsError> {
        if runs.columns().iter().all(|c| c != "model_id") {
            return Err(RecordsError::Usage(
                "BoAmps reports are written for LLM runs, not diffusion runs".into(),
            ));
        }
        let mut reports = Vec::new();
        let mut unmeasured = Vec::new();
        for r in runs.rows() {
            match report(r, llem_result(r).as_ref()) {
                Some(b) => reports.push(b),
                None => unmeasured.push(
                    text(r, "label")
                        .or_else(|| text(r, "results_path"))
                        .unwrap_or_else(|| "a run".into()),
                ),
            }
        }
        if !unmeasured.is_empty() {
            return Err(RecordsError::Usage(format!(
                "no BoAmps report for {} run(s) without measured energy ({}): a report's \
                 measure needs the run's energy, and 0 would read as a measurement",
                unmeasured.len(),
                unmeasured.join(", ")
            )));
        }
        let mut bytes = serde_json::to_vec_pretty(&reports)
            .map_err(|e| RecordsError::Usage(format!("BoAmps JSON: {e}")))?;
        bytes.push(b'\n');
        Ok(bytes)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_stable_and_shaped_like_uuids() {
        let a = report_id("/r/a/result.json");
        assert_eq!(a, report_id("/r/a/result.json"));
        assert_ne!(a, report_id("/r/b/result.json"));
        let parts: Vec<usize> = a.split('-').map(str::len).collect();
        assert_eq!(parts, [8, 4, 4, 4, 12]);
        assert_eq!(
            boamps_time("2026-11-28T15:04:10.5Z").unwrap(),
            "2026-11-28 15:04:10"
        );
        assert_eq!(quality(0.08), Some("high"));
        assert_eq!(quality(0.3), Some("low"));
        assert_eq!(quality(0.9), None);
    }
}
