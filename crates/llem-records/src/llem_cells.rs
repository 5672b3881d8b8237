//! The `LlemRun` view: llem's own cells (`result.json` + `effective_config.json` +
//! `requests.parquet`) as [`LlmRun`] records, so they filter, group and export with ML.ENERGY
//! runs. The mapping, field by field, is in `docs/records.md`; in short the measurement
//! window plays the steady state, the dataset plays the task, and the ITL statistics are
//! recomputed from the per-token timestamps with the reference smoothing.

use llem_results::result::LatencyStatistics;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::itl;
use super::raw_tree::{default_workers, parallel_map, sort_runs};
use super::run::{self, LlemFields, LlmRun, RunSource};
use super::stability::{self, RunFacts};
use super::{LoadIssue, RecordsError, RunError};
use llem_results::layout;
use llem_results::result::ExperimentResult;

/// Inside an earlier attempt (`<cell>.attemptN`), the study's artefacts directory, or a Slurm
/// study's own directory (its per-node control cells are not runs of the study).
fn is_earlier_attempt(p: &Path) -> bool {
    p.components().any(|c| {
        let s = c.as_os_str().to_string_lossy();
        s.contains(".attempt") || s == layout::STUDY_ARTEFACTS || s == layout::SLURM_DIR
    })
}

/// The files a walk for llem cells looks for: `result.json`, `cell_spec.json`.
pub const CELL_FILES: [&str; 2] = [layout::RESULT, layout::CELL_SPEC];

/// Of the `result.json` and `cell_spec.json` files a walk found, the llem cells' results
/// (earlier attempts and other tools' files left out) and the specs of cells that never
/// finished.
pub fn cells_of(mut results: Vec<PathBuf>, specs: Vec<PathBuf>) -> (Vec<PathBuf>, Vec<PathBuf>) {
    results.retain(|p| !is_earlier_attempt(p) && looks_like_llem(p));
    let unfinished = specs
        .into_iter()
        .filter(|s| !is_earlier_attempt(s) && !s.with_file_name(layout::RESULT).exists())
        .collect();
    (results, unfinished)
}

/// ML.ENERGY writes `results.json`; a llem cell's `result.json` sits next to its config (a
/// llem 0.7 cell's next to `config.json` and `system.json`).
fn looks_like_llem(p: &Path) -> bool {
    p.with_file_name(layout::EFFECTIVE_CONFIG).exists()
        || p.with_file_name(layout::REQUESTS).exists()
        || p.with_file_name(layout::CELL_SPEC).exists()
        || super::llem07::looks_like_cell(p)
}

/// A cell as read: llem's own, or the Python llem 0.7's three files.
enum Read {
    Llem(Box<Cell>),
    Llem07 {
        result: Value,
        config: Value,
        system: Value,
    },
}

fn read_any(path: &Path) -> Result<Read, RunError> {
    let bytes = llem_config::files::read_record(path).map_err(|e| RunError::Read(e.to_string()))?;
    if !super::llem07::is_bundle(&bytes) {
        return read_cell(path, &bytes).map(|c| Read::Llem(Box::new(c)));
    }
    let v: Value = serde_json::from_slice(&bytes).map_err(|e| RunError::file("result.json", e))?;
    let sidecar = |name: &str| -> Result<Value, RunError> {
        let p = path.with_file_name(name);
        let b = llem_config::files::read_record(&p).map_err(|e| RunError::file(name, e))?;
        serde_json::from_slice(&b).map_err(|e| RunError::file(name, e))
    };
    Ok(Read::Llem07 {
        result: v,
        config: sidecar("config.json")?,
        system: sidecar("system.json")?,
    })
}

struct Cell {
    result: ExperimentResult,
    config: Value,
    /// Successful requests and their token timestamps, when `requests.parquet` exists.
    requests: Option<(usize, Vec<Vec<f64>>)>,
}

fn read_cell(path: &Path, bytes: &[u8]) -> Result<Cell, RunError> {
    let mut result: ExperimentResult =
        serde_json::from_slice(bytes).map_err(|e| RunError::file("result.json", e))?;
    // Not loaded, and said: an impossible figure would enter every mean and frontier.
    let impossible = result.impossible_values();
    if !impossible.is_empty() {
        return Err(RunError::Impossible(impossible));
    }
    // The result's own copy first (moved, not copied: the view keeps one); results from
    // before it had one have the sibling file.
    let config = match result.effective_config.take() {
        Some(c) if c.is_object() => c,
        _ => llem_config::files::read_record(path.with_file_name(layout::EFFECTIVE_CONFIG))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null),
    };
    let req_path = path.with_file_name(layout::REQUESTS);
    let requests = if req_path.exists() {
        let recs = llem_results::requests::read_requests(&req_path)
            .map_err(|e| RunError::Read(e.to_string()))?;
        let ok: Vec<_> = recs.into_iter().filter(|r| r.success).collect();
        let n = ok.len();
        Some((n, ok.into_iter().map(|r| r.token_times_s).collect()))
    } else {
        None
    };
    Ok(Cell {
        result,
        config,
        requests,
    })
}

fn cfg_str<'a>(c: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(c, |v, k| v.get(k))?.as_str()
}

fn cfg_int(c: &Value, path: &[&str]) -> Option<i64> {
    path.iter().try_fold(c, |v, k| v.get(k))?.as_i64()
}

/// The batch limit a llem cell ran under: the one its run resolved and wrote
/// (`extended_metrics.batch.configured_batch_size`); else, for results written before that
/// field existed, the window's target concurrency, the traffic cap, or the engine section's
/// batch field as the typed config names it; else 1.
fn max_num_seqs(r: &ExperimentResult, c: &Value) -> i64 {
    batch_limit(
        r.extended_metrics.batch.configured_batch_size,
        r.steady_state.as_ref().and_then(|s| s.target_concurrency),
        r.traffic.as_ref().and_then(|t| t.max_concurrency),
        &r.engine,
        c,
    )
}

fn batch_limit(
    configured: Option<u32>,
    window_target: Option<u32>,
    traffic_cap: Option<u32>,
    engine: &str,
    c: &Value,
) -> i64 {
    configured
        .or(window_target)
        .or(traffic_cap)
        .map(i64::from)
        .or_else(|| cfg_int(c, &[engine, "engine", "max_num_seqs"]))
        .or_else(|| cfg_int(c, &[engine, "max_running_requests"]))
        .or_else(|| cfg_int(c, &[engine, "max_batch_size"]))
        .or_else(|| cfg_int(c, &[engine, "batch_size"]))
        .unwrap_or(1)
}

/// The task of a cell: `synthetic`, else its dataset's source.
fn task_of(c: &Value) -> String {
    if c.pointer("/dataset/synthetic")
        .is_some_and(|v| !v.is_null())
    {
        "synthetic".to_string()
    } else {
        cfg_str(c, &["dataset", "source"])
            .unwrap_or("unknown")
            .to_string()
    }
}

/// Inter-token latency mean, p50, p90, p95, p99 (ms): recomputed from the request log's token
/// times with the reference smoothing, else the result's own figures (NaN when absent).
fn itl_of(cell: &Cell, lat: &LatencyStatistics) -> (f64, f64, f64, f64, f64) {
    let itl = cell.requests.as_ref().and_then(|(_, t)| {
        let lists: Vec<Vec<f64>> = t.iter().map(|x| itl::gaps(x)).collect();
        itl::run_stats(lists.iter().map(Vec::as_slice))
    });
    let fallback = |v: Option<f64>| v.unwrap_or(f64::NAN);
    match itl {
        Some(s) => (s.mean_ms, s.p50_ms, s.p90_ms, s.p95_ms, s.p99_ms),
        None => (
            fallback(lat.itl_mean_ms),
            fallback(lat.itl_median_ms),
            fallback(lat.itl_p90_ms),
            fallback(lat.itl_p95_ms),
            fallback(lat.itl_p99_ms),
        ),
    }
}

/// The study a cell's `result.json` belongs to, and its cycle (from `NNN_c<cycle>_...`).
fn placement(path: &Path) -> (Option<String>, Option<i64>) {
    let study = path
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned());
    let cycle = path.parent().and_then(Path::file_name).and_then(|n| {
        let n = n.to_string_lossy();
        let rest = n.split('_').nth(1)?.strip_prefix('c')?.to_string();
        rest.parse().ok()
    });
    (study, cycle)
}

/// llem's own fields of a cell's run.
fn llem_fields(path: &Path, cell: &Cell, lat: &LatencyStatistics) -> LlemFields {
    let (study, cycle) = placement(path);
    let r = &cell.result;
    let difference = r
        .energy_breakdown
        .as_ref()
        .and_then(|b| b.difference.as_ref());
    LlemFields {
        source: Some(RunSource::Llem),
        engine: Some(r.engine.clone()),
        study,
        cycle,
        // Set once every run of the study is loaded (super::labels).
        label: None,
        config: (!cell.config.is_null()).then(|| std::sync::Arc::new(cell.config.clone())),
        config_hash: Some(r.measurement_config_hash.clone()),
        experiment_id: Some(r.experiment_id.clone()),
        host: Some(r.environment.hostname.clone()).filter(|h| !h.is_empty()),
        measurement_methodology: Some(r.measurement_methodology.clone()),
        energy_source: r.energy_source.clone(),
        energy_scope: r.energy_scope.clone(),
        system_energy_joules: r.system_energy_j,
        system_scope: r.system_scope.clone(),
        node_energy_joules: r.node_energy_j,
        unattributed_energy_joules: r.unattributed_j,
        energy_adjusted_joules: r.energy_adjusted_j,
        mj_per_tok_adjusted: r.mj_per_tok_adjusted,
        ttft_median_ms: lat.ttft_median_ms,
        ttft_p99_ms: lat.ttft_p99_ms,
        tpot_median_ms: lat.tpot_median_ms,
        e2e_p99_ms: lat.e2e_p99_ms,
        prefill_energy_joules: r.energy_breakdown.as_ref().and_then(|b| b.prefill_j),
        decode_energy_joules: r.energy_breakdown.as_ref().and_then(|b| b.decode_j),
        idle_energy_joules: r.energy_breakdown.as_ref().and_then(|b| b.idle_j),
        energy_per_request_p50_joules: r.energy_per_request_j.map(|d| d.p50),
        energy_per_request_p99_joules: r.energy_per_request_j.map(|d| d.p99),
        difference_prefill_energy_joules: difference.map(|d| d.prefill_j),
        difference_decode_energy_joules: difference.map(|d| d.decode_j),
        goodput_fraction: r.goodput.as_ref().map(|g| g.goodput_fraction),
        goodput_req_per_sec: r.goodput.as_ref().and_then(|g| g.goodput_req_per_s),
        energy_per_good_request_joules: r
            .goodput
            .as_ref()
            .and_then(|g| g.energy_per_good_request_j),
        warnings: (!r.measurement_warnings.is_empty()).then(|| r.measurement_warnings.join("\n")),
    }
}

fn view(path: &Path, cell: &Cell) -> (LlmRun, RunFacts) {
    let r = &cell.result;
    let c = &cell.config;
    let model_id = cfg_str(c, &["model"]).unwrap_or(&r.model_name).to_string();
    let task = task_of(c);
    let md = r.environment.model.as_ref();
    let params_b = md
        .and_then(|m| m.parameters)
        .map_or(f64::NAN, |p| p as f64 / 1e9);
    // The GPUs the engine ran on (0 on the CPU); results from before energy scopes knew
    // only the GPUs visible.
    let num_gpus = match r.energy_scope.as_deref() {
        Some("gpu") => r.multi_gpu.as_ref().map_or(1, |m| i64::from(m.num_gpus)),
        Some(_) => 0,
        None => r.environment.gpus.len() as i64,
    };
    // A run on the CPU of a GPU host is a CPU run: its GPU took no part.
    let gpu_model = r
        .environment
        .gpus
        .first()
        .filter(|_| r.energy_scope.as_deref() != Some("cpu"))
        .map_or_else(|| "CPU".to_string(), |g| g.to_uppercase());
    let engine = r.engine.clone();
    let par = |k: &str| cfg_int(c, &[engine.as_str(), k]);
    let tensor = par("tensor_parallel_size").unwrap_or(num_gpus.max(1));
    let expert = par("expert_parallel_size").unwrap_or(1);
    let data = par("data_parallel_size").unwrap_or(1);
    let completed = cell
        .requests
        .as_ref()
        .map(|(n, _)| *n as f64)
        .or_else(|| r.latency_stats.as_ref().map(|l| l.e2e_samples as f64));
    let total_tokens = Some(r.total_output_tokens as f64);
    let e = r.avg_energy_per_token_j;
    let d = r.total_inference_time_sec;
    let derived = run::derive(
        r.total_energy_j,
        d,
        e,
        Some(r.avg_tokens_per_second),
        completed,
        total_tokens,
    );
    let lat = r.latency_stats.clone().unwrap_or_default();
    let (mean, p50, p90, p95, p99) = itl_of(cell, &lat);
    let avg_batch = r
        .steady_state
        .as_ref()
        .and_then(|s| s.avg_batch_size)
        .or(r.extended_metrics.batch.effective_batch_size);
    let b = max_num_seqs(r, c);
    let run = LlmRun {
        domain: "llm".into(),
        task: task.clone(),
        nickname: layout::model_slug(&model_id),
        model_id: model_id.clone(),
        architecture: "Dense".into(),
        total_params_billions: params_b,
        activated_params_billions: params_b,
        weight_precision: md
            .and_then(|m| m.dtype.clone())
            .or_else(|| cfg_str(c, &["dtype"]).map(String::from))
            .unwrap_or_else(|| "unknown".into()),
        gpu_model: gpu_model.clone(),
        num_gpus,
        max_num_seqs: b,
        seed: cfg_int(c, &["random_seed"]),
        num_request_repeats: None,
        tensor_parallel: tensor,
        expert_parallel: expert,
        data_parallel: data,
        steady_state_energy_joules: r.total_energy_j,
        steady_state_duration_seconds: d,
        energy_per_token_joules: e,
        energy_per_request_joules: derived.and_then(|x| x.energy_per_request_joules),
        output_throughput_tokens_per_sec: derived.map_or(r.avg_tokens_per_second, |x| {
            x.output_throughput_tokens_per_sec
        }),
        request_throughput_req_per_sec: derived.and_then(|x| x.request_throughput_req_per_sec),
        avg_power_watts: derived.map_or(f64::NAN, |x| x.avg_power_watts),
        total_output_tokens: total_tokens,
        completed_requests: completed,
        avg_output_len: derived.and_then(|x| x.avg_output_len),
        mean_itl_ms: mean,
        median_itl_ms: p50,
        p50_itl_ms: p50,
        p90_itl_ms: p90,
        p95_itl_ms: p95,
        p99_itl_ms: p99,
        avg_batch_size: avg_batch,
        is_stable: true,
        unstable_reason: String::new(),
        results_path: path.to_string_lossy().into_owned(),
        prometheus_path: path
            .with_file_name(layout::SERVER_METRICS)
            .to_string_lossy()
            .into_owned(),
        extra: llem_fields(path, cell, &lat),
    };
    let facts = RunFacts {
        model_id,
        task,
        gpu_model,
        num_gpus,
        max_num_seqs: Some(b),
        load_error: None,
        steady_state_duration_s: Some(d),
        energy_per_token_j: Some(e),
        avg_batch_size: avg_batch,
        variant: engine,
    };
    (run, facts)
}

/// Loads the cells [`find_cells`] found (`results`, and the specs of `unfinished` ones,
/// each an issue); stability (seed rules and cascade, grouped by engine too) is judged over
/// all of them together.
pub fn load_found(
    files: &[PathBuf],
    unfinished: &[PathBuf],
) -> Result<(Vec<LlmRun>, Vec<LoadIssue>), RecordsError> {
    let mut issues: Vec<LoadIssue> = unfinished
        .iter()
        .map(|s| {
            LoadIssue::new(
                s,
                "cell has no result.json (failed, interrupted or still running)",
            )
        })
        .collect();
    let cells = parallel_map(files, default_workers(), |p| read_any(p));
    let mut views = Vec::new();
    for (p, c) in files.iter().zip(cells) {
        match c {
            Ok(Read::Llem(c)) => views.push(view(p, &c)),
            Ok(Read::Llem07 {
                result,
                config,
                system,
            }) => {
                // llem 0.7 numbers cycles from 1 (`001_c1_...`); llem from 0.
                let (study, cycle) = placement(p);
                let cycle = cycle.map(|c| (c - 1).max(0));
                views.push(super::llem07::view(
                    p,
                    &result,
                    &config,
                    &system,
                    (study, cycle),
                ));
            }
            Err(e) => issues.push(LoadIssue::new(p, e.to_string())),
        }
    }
    let facts: Vec<RunFacts> = views.iter().map(|(_, f)| f.clone()).collect();
    let mut runs: Vec<LlmRun> = views
        .into_iter()
        .zip(stability::judge(&facts))
        .map(|((mut r, _), v)| {
            r.is_stable = v.is_stable;
            r.unstable_reason = v.unstable_reason;
            r
        })
        .collect();
    sort_runs(&mut runs);
    Ok((runs, issues))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_a_cell_resolved_comes_first_then_the_typed_keys() {
        let vllm = serde_json::json!({"vllm": {"engine": {"max_num_seqs": 32}}});
        // What the run resolved and wrote wins over anything in the config.
        assert_eq!(batch_limit(Some(6), Some(4), Some(2), "vllm", &vllm), 6);
        // Older results: the window's target, then the traffic cap.
        assert_eq!(batch_limit(None, Some(4), Some(2), "vllm", &vllm), 4);
        assert_eq!(batch_limit(None, None, Some(2), "vllm", &vllm), 2);
        // vLLM's batch lives at vllm.engine.max_num_seqs in the typed config.
        assert_eq!(batch_limit(None, None, None, "vllm", &vllm), 32);
        let sglang = serde_json::json!({"sglang": {"max_running_requests": 16}});
        assert_eq!(batch_limit(None, None, None, "sglang", &sglang), 16);
        let llamacpp = serde_json::json!({"llamacpp": {"batch_size": 3}});
        assert_eq!(batch_limit(None, None, None, "llamacpp", &llamacpp), 3);
        assert_eq!(
            batch_limit(None, None, None, "openai", &serde_json::json!({})),
            1
        );
    }
}
