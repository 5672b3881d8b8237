//! `runs/llm.parquet` (reference §12): runs as one Arrow table, written with the reference
//! column order (llem's extra columns after it, which the reference reader ignores) and read
//! from files written by llem or by pandas/pyarrow (utf8 or large_utf8 strings, integer
//! columns with nulls stored as doubles).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{
    Array, ArrayRef, BooleanArray, Float32Array, Float64Array, Int32Array, Int64Array,
    LargeStringArray, RecordBatch, StringArray, StringViewArray,
};
use arrow_schema::{DataType, Field, Schema};

use super::run::{
    EXTRA_FIELDS, FieldKind, FieldValue, LLM_FIELDS, LlemFields, LlmRun, PATH_FIELDS, RunSource,
    all_fields,
};
use super::{LoadIssue, RecordsError};
use crate::RunError;
use llem_results::parquet_io;

/// `ROOT/runs/llm.parquet`.
pub fn llm_parquet(root: &Path) -> PathBuf {
    root.join("runs").join("llm.parquet")
}

fn data_type(k: FieldKind) -> (DataType, bool) {
    match k {
        FieldKind::Str => (DataType::Utf8, false),
        FieldKind::OptStr => (DataType::Utf8, true),
        FieldKind::Int => (DataType::Int64, false),
        FieldKind::OptInt => (DataType::Int64, true),
        FieldKind::Float => (DataType::Float64, false),
        FieldKind::OptFloat => (DataType::Float64, true),
        FieldKind::Bool => (DataType::Boolean, false),
    }
}

/// The runs as a record batch: every field in column order (paths relative to `base` when
/// given), then a column per swept configuration path (integers, numbers or text, as the
/// values are).
pub fn to_record_batch(
    runs: &[&LlmRun],
    base: Option<&Path>,
    swept: &[String],
) -> Result<RecordBatch, RunError> {
    let mut fields: Vec<(&str, FieldKind)> = all_fields().collect();
    for p in swept {
        let values: Vec<FieldValue<'_>> = runs.iter().filter_map(|r| r.field(p)).collect();
        let kind = if runs
            .iter()
            .all(|r| matches!(r.field(p), Some(FieldValue::Bool(_))))
        {
            FieldKind::Bool
        } else if values
            .iter()
            .all(|v| matches!(v, FieldValue::Int(_) | FieldValue::Null))
        {
            FieldKind::OptInt
        } else if values.iter().all(|v| {
            matches!(
                v,
                FieldValue::Int(_) | FieldValue::Float(_) | FieldValue::Null
            )
        }) {
            FieldKind::OptFloat
        } else {
            FieldKind::OptStr
        };
        fields.push((p.as_str(), kind));
    }
    let kinds: std::collections::HashMap<&str, FieldKind> = fields.iter().copied().collect();
    record_batch(runs, &fields, base, |r, n| {
        let v = r.field(n)?;
        // A numeric column of integers and floats holds them all as floats.
        Some(match (kinds.get(n), v) {
            (Some(FieldKind::OptFloat), FieldValue::Int(i)) => FieldValue::Float(i as f64),
            _ => v,
        })
    })
}

/// A record batch of `rows` with `fields`, values from `get`; the path columns
/// (`results_path`, `prometheus_path`) relative to `base` when given.
pub(crate) fn record_batch<'r, T: 'r>(
    rows: &[&'r T],
    fields: &[(&str, FieldKind)],
    base: Option<&Path>,
    get: impl Fn(&'r T, &str) -> Option<FieldValue<'r>>,
) -> Result<RecordBatch, RunError> {
    let mut schema = Vec::new();
    let mut columns: Vec<ArrayRef> = Vec::new();
    for &(name, kind) in fields {
        let (dt, nullable) = data_type(kind);
        schema.push(Field::new(name, dt, nullable));
        let values = rows.iter().map(|r| {
            let v = get(r, name).unwrap_or(FieldValue::Null);
            match (name, base, v) {
                ("results_path" | "prometheus_path", Some(b), FieldValue::Str(s)) => {
                    FieldText::Owned(relative_to(s, b))
                }
                (_, _, v) => FieldText::Value(v),
            }
        });
        let col: ArrayRef = match kind {
            FieldKind::Str | FieldKind::OptStr => {
                Arc::new(values.map(|v| v.text()).collect::<StringArray>())
            }
            FieldKind::Int | FieldKind::OptInt => Arc::new(
                values
                    .map(|v| match v {
                        FieldText::Value(FieldValue::Int(i)) => Some(i),
                        _ => None,
                    })
                    .collect::<Int64Array>(),
            ),
            FieldKind::Float | FieldKind::OptFloat => Arc::new(
                values
                    .map(|v| match v {
                        FieldText::Value(FieldValue::Float(f)) => Some(f),
                        _ => None,
                    })
                    .collect::<Float64Array>(),
            ),
            FieldKind::Bool => Arc::new(
                values
                    .map(|v| match v {
                        FieldText::Value(FieldValue::Bool(b)) => Some(b),
                        _ => None,
                    })
                    .collect::<BooleanArray>(),
            ),
        };
        columns.push(col);
    }
    RecordBatch::try_new(Arc::new(Schema::new(schema)), columns)
        .map_err(|e| RunError::Arrow(e.to_string()))
}

enum FieldText<'a> {
    Value(FieldValue<'a>),
    Owned(String),
}

impl FieldText<'_> {
    fn text(&self) -> Option<String> {
        match self {
            Self::Owned(s) => Some(s.clone()),
            Self::Value(FieldValue::Null) => None,
            Self::Value(v) => Some(v.display()),
        }
    }
}

fn relative_to(path: &str, base: &Path) -> String {
    Path::new(path).strip_prefix(base).map_or_else(
        |_| path.to_string(),
        |r| {
            r.components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join("/")
        },
    )
}

/// Writes `runs` to `path` (atomically, zstd), paths relative to `base` when given.
pub fn write_parquet(
    runs: &[&LlmRun],
    path: &Path,
    base: Option<&Path>,
    swept: &[String],
) -> Result<(), RecordsError> {
    let batch = to_record_batch(runs, base, swept).map_err(|e| RecordsError::Invalid {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    parquet_io::write_batch(path, &batch, &[("llem.records", "llm".to_string())])?;
    Ok(())
}

/// One column read leniently into optional values.
pub(crate) enum Col {
    Str(Vec<Option<String>>),
    Int(Vec<Option<i64>>),
    Float(Vec<Option<f64>>),
    Bool(Vec<Option<bool>>),
}

pub(crate) fn read_col(name: &str, a: &dyn Array, kind: FieldKind) -> Result<Col, RunError> {
    let wrong = |wanted: &'static str| RunError::ColumnType {
        name: name.to_string(),
        found: a.data_type().to_string(),
        wanted,
    };
    let any = a.as_any();
    let n = a.len();
    let opt = |i: usize| a.is_valid(i);
    let floats = || -> Option<Vec<Option<f64>>> {
        if let Some(x) = any.downcast_ref::<Float64Array>() {
            Some((0..n).map(|i| opt(i).then(|| x.value(i))).collect())
        } else if let Some(x) = any.downcast_ref::<Float32Array>() {
            Some(
                (0..n)
                    .map(|i| opt(i).then(|| f64::from(x.value(i))))
                    .collect(),
            )
        } else if let Some(x) = any.downcast_ref::<Int64Array>() {
            Some((0..n).map(|i| opt(i).then(|| x.value(i) as f64)).collect())
        } else {
            any.downcast_ref::<Int32Array>().map(|x| {
                (0..n)
                    .map(|i| opt(i).then(|| f64::from(x.value(i))))
                    .collect()
            })
        }
    };
    Ok(match kind {
        FieldKind::Str | FieldKind::OptStr => {
            let v: Vec<Option<String>> = if let Some(x) = any.downcast_ref::<StringArray>() {
                (0..n)
                    .map(|i| opt(i).then(|| x.value(i).to_string()))
                    .collect()
            } else if let Some(x) = any.downcast_ref::<LargeStringArray>() {
                (0..n)
                    .map(|i| opt(i).then(|| x.value(i).to_string()))
                    .collect()
            } else if let Some(x) = any.downcast_ref::<StringViewArray>() {
                (0..n)
                    .map(|i| opt(i).then(|| x.value(i).to_string()))
                    .collect()
            } else {
                return Err(wrong("a string"));
            };
            Col::Str(v)
        }
        FieldKind::Int | FieldKind::OptInt => {
            if let Some(x) = any.downcast_ref::<Int64Array>() {
                Col::Int((0..n).map(|i| opt(i).then(|| x.value(i))).collect())
            } else if let Some(x) = any.downcast_ref::<Int32Array>() {
                Col::Int(
                    (0..n)
                        .map(|i| opt(i).then(|| i64::from(x.value(i))))
                        .collect(),
                )
            } else if let Some(f) = floats() {
                // pandas stores an integer column with nulls as float64 with NaN.
                Col::Int(
                    f.into_iter()
                        .map(|v| v.filter(|x| x.is_finite()).map(|x| x as i64))
                        .collect(),
                )
            } else {
                return Err(wrong("an integer"));
            }
        }
        FieldKind::Float | FieldKind::OptFloat => {
            Col::Float(floats().ok_or_else(|| wrong("a float"))?)
        }
        FieldKind::Bool => {
            let x = any
                .downcast_ref::<BooleanArray>()
                .ok_or_else(|| wrong("a boolean"))?;
            Col::Bool((0..n).map(|i| opt(i).then(|| x.value(i))).collect())
        }
    })
}

/// Columns read from one batch, looked up by name.
pub(crate) struct Table {
    pub(crate) cols: Vec<(&'static str, Col)>,
}

impl Table {
    /// Reads `required` (an error when absent) and `optional` columns of `batch`.
    pub(crate) fn read(
        batch: &RecordBatch,
        required: &[(&'static str, FieldKind)],
        optional: &[(&'static str, FieldKind)],
    ) -> Result<Self, RunError> {
        let mut cols = Vec::new();
        for (name, kind) in required.iter().chain(optional) {
            let Some(a) = batch.column_by_name(name) else {
                if required.iter().any(|(n, _)| n == name) {
                    return Err(RunError::MissingColumn((*name).to_string()));
                }
                continue;
            };
            cols.push((*name, read_col(name, a.as_ref(), *kind)?));
        }
        Ok(Self { cols })
    }

    fn col(&self, name: &str) -> Option<&Col> {
        self.cols.iter().find(|(n, _)| *n == name).map(|(_, c)| c)
    }
    pub(crate) fn s(&self, name: &str, i: usize) -> Option<String> {
        match self.col(name)? {
            Col::Str(v) => v.get(i).cloned().flatten(),
            _ => None,
        }
    }
    pub(crate) fn i(&self, name: &str, i: usize) -> Option<i64> {
        match self.col(name)? {
            Col::Int(v) => v.get(i).copied().flatten(),
            _ => None,
        }
    }
    pub(crate) fn f(&self, name: &str, i: usize) -> Option<f64> {
        match self.col(name)? {
            // NaN is how pandas writes a missing optional value.
            Col::Float(v) => v.get(i).copied().flatten().filter(|x| !x.is_nan()),
            _ => None,
        }
    }
    pub(crate) fn fl(&self, name: &str, i: usize) -> f64 {
        self.f(name, i).unwrap_or(f64::NAN)
    }
    pub(crate) fn b(&self, name: &str, i: usize) -> Option<bool> {
        match self.col(name)? {
            Col::Bool(v) => v.get(i).copied().flatten(),
            _ => None,
        }
    }
}

pub(crate) fn resolve(p: Option<String>, base: Option<&Path>) -> String {
    let p = p.unwrap_or_default();
    match base {
        Some(b) if !p.is_empty() && Path::new(&p).is_relative() => {
            b.join(&p).to_string_lossy().into_owned()
        }
        _ => p,
    }
}

/// Reads `path`; relative path columns are resolved against `base` when given. Every
/// public column (and the two path columns) is required; llem's extras are optional.
/// Rows with a null in a required integer column are reported, not loaded.
pub fn read_parquet(
    path: &Path,
    base: Option<&Path>,
) -> Result<(Vec<LlmRun>, Vec<LoadIssue>), RecordsError> {
    let invalid = |message: String| RecordsError::Invalid {
        path: path.to_path_buf(),
        message,
    };
    let reader = parquet_io::open(path)?;
    let mut runs = Vec::new();
    let mut issues = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| invalid(e.to_string()))?;
        let required: Vec<_> = LLM_FIELDS.iter().chain(PATH_FIELDS).copied().collect();
        let t = Table::read(&batch, &required, EXTRA_FIELDS).map_err(|e| invalid(e.to_string()))?;
        let swept = swept_columns(&batch).map_err(|e| invalid(e.to_string()))?;
        for i in 0..batch.num_rows() {
            match row(&t, i, base) {
                Ok(mut r) => {
                    r.extra.config = swept_config(&swept, i);
                    runs.push(r);
                }
                Err(e) => issues.push(LoadIssue::new(path, format!("row {i}: {e}"))),
            }
        }
    }
    super::raw_tree::sort_runs(&mut runs);
    Ok((runs, issues))
}

/// The columns an export wrote for swept configuration paths (`decoder.preset`), read back.
fn swept_columns(batch: &RecordBatch) -> Result<Vec<(String, Col)>, RunError> {
    let schema = batch.schema();
    let mut out = Vec::new();
    for (f, a) in schema.fields().iter().zip(batch.columns()) {
        let name = f.name();
        if super::run::field_kind(name).is_some() || !super::run::is_config_path(name) {
            continue;
        }
        let kind = match f.data_type() {
            DataType::Boolean => FieldKind::Bool,
            DataType::Int64 => FieldKind::OptInt,
            DataType::Float64 | DataType::Float32 => FieldKind::OptFloat,
            _ => FieldKind::OptStr,
        };
        out.push((name.clone(), read_col(name, a.as_ref(), kind)?));
    }
    Ok(out)
}

/// The part of a run's configuration its swept columns hold; null without any.
fn swept_config(swept: &[(String, Col)], i: usize) -> Option<Arc<serde_json::Value>> {
    use serde_json::Value;
    if swept.is_empty() {
        return None;
    }
    let mut root = Value::Object(serde_json::Map::new());
    for (path, col) in swept {
        let v = match col {
            Col::Str(v) => v.get(i).cloned().flatten().map(Value::String),
            Col::Int(v) => v.get(i).copied().flatten().map(Value::from),
            Col::Float(v) => v.get(i).copied().flatten().map(Value::from),
            Col::Bool(v) => v.get(i).copied().flatten().map(Value::Bool),
        }
        .unwrap_or(Value::Null);
        let mut at = &mut root;
        let segments: Vec<&str> = path.split('.').collect();
        for (k, seg) in segments.iter().enumerate() {
            let Some(obj) = at.as_object_mut() else { break };
            if k + 1 == segments.len() {
                obj.insert((*seg).to_string(), v.clone());
                break;
            }
            at = obj
                .entry((*seg).to_string())
                .or_insert_with(|| Value::Object(serde_json::Map::new()));
        }
    }
    Some(Arc::new(root))
}

fn row(t: &Table, i: usize, base: Option<&Path>) -> Result<LlmRun, RunError> {
    let req_i = |n: &str| t.i(n, i).ok_or_else(|| RunError::Null(n.to_string()));
    let s = |n: &str| t.s(n, i).unwrap_or_default();
    Ok(LlmRun {
        domain: s("domain"),
        task: s("task"),
        model_id: s("model_id"),
        nickname: s("nickname"),
        architecture: s("architecture"),
        total_params_billions: t.fl("total_params_billions", i),
        activated_params_billions: t.fl("activated_params_billions", i),
        weight_precision: s("weight_precision"),
        gpu_model: s("gpu_model"),
        num_gpus: req_i("num_gpus")?,
        max_num_seqs: req_i("max_num_seqs")?,
        seed: t.i("seed", i),
        num_request_repeats: t.i("num_request_repeats", i),
        tensor_parallel: req_i("tensor_parallel")?,
        expert_parallel: req_i("expert_parallel")?,
        data_parallel: req_i("data_parallel")?,
        steady_state_energy_joules: t.fl("steady_state_energy_joules", i),
        steady_state_duration_seconds: t.fl("steady_state_duration_seconds", i),
        energy_per_token_joules: t.fl("energy_per_token_joules", i),
        energy_per_request_joules: t.f("energy_per_request_joules", i),
        output_throughput_tokens_per_sec: t.fl("output_throughput_tokens_per_sec", i),
        request_throughput_req_per_sec: t.f("request_throughput_req_per_sec", i),
        avg_power_watts: t.fl("avg_power_watts", i),
        total_output_tokens: t.f("total_output_tokens", i),
        completed_requests: t.f("completed_requests", i),
        avg_output_len: t.f("avg_output_len", i),
        mean_itl_ms: t.fl("mean_itl_ms", i),
        median_itl_ms: t.fl("median_itl_ms", i),
        p50_itl_ms: t.fl("p50_itl_ms", i),
        p90_itl_ms: t.fl("p90_itl_ms", i),
        p95_itl_ms: t.fl("p95_itl_ms", i),
        p99_itl_ms: t.fl("p99_itl_ms", i),
        avg_batch_size: t.f("avg_batch_size", i),
        is_stable: t
            .b("is_stable", i)
            .ok_or_else(|| RunError::Null("is_stable".into()))?,
        unstable_reason: s("unstable_reason"),
        results_path: resolve(t.s("results_path", i), base),
        prometheus_path: resolve(t.s("prometheus_path", i), base),
        extra: LlemFields {
            source: Some(
                t.s("source", i)
                    .and_then(|s| RunSource::parse(&s))
                    .unwrap_or(RunSource::Compiled),
            ),
            engine: t.s("engine", i),
            study: t.s("study", i),
            cycle: t.i("cycle", i),
            label: t.s("label", i),
            config: None,
            config_hash: t.s("config_hash", i),
            experiment_id: t.s("experiment_id", i),
            host: t.s("host", i),
            measurement_methodology: t.s("measurement_methodology", i),
            energy_source: t.s("energy_source", i),
            energy_scope: t.s("energy_scope", i),
            system_energy_joules: t.f("system_energy_joules", i),
            system_scope: t.s("system_scope", i),
            node_energy_joules: t.f("node_energy_joules", i),
            unattributed_energy_joules: t.f("unattributed_energy_joules", i),
            energy_adjusted_joules: t.f("energy_adjusted_joules", i),
            // Files exported before the mJ name carried it in J.
            mj_per_tok_adjusted: t.f("mj_per_tok_adjusted", i).or_else(|| {
                t.f("energy_per_token_adjusted_joules", i)
                    .map(|j| j * 1000.0)
            }),
            ttft_median_ms: t.f("ttft_median_ms", i),
            ttft_p99_ms: t.f("ttft_p99_ms", i),
            tpot_median_ms: t.f("tpot_median_ms", i),
            e2e_p99_ms: t.f("e2e_p99_ms", i),
            prefill_energy_joules: t.f("prefill_energy_joules", i),
            decode_energy_joules: t.f("decode_energy_joules", i),
            idle_energy_joules: t.f("idle_energy_joules", i),
            energy_per_request_p50_joules: t.f("energy_per_request_p50_joules", i),
            energy_per_request_p99_joules: t.f("energy_per_request_p99_joules", i),
            difference_prefill_energy_joules: t.f("difference_prefill_energy_joules", i),
            difference_decode_energy_joules: t.f("difference_decode_energy_joules", i),
            goodput_fraction: t.f("goodput_fraction", i),
            goodput_req_per_sec: t.f("goodput_req_per_sec", i),
            energy_per_good_request_joules: t.f("energy_per_good_request_joules", i),
            warnings: t.s("warnings", i),
        },
    })
}

impl crate::Runs {
    /// Loads a compiled parquet; relative paths resolve against `base_dir` when given.
    pub fn from_parquet(
        path: &std::path::Path,
        base_dir: Option<&std::path::Path>,
    ) -> Result<Self, RecordsError> {
        let (runs, issues) = read_parquet(path, base_dir)?;
        Ok(Self::new(runs, issues))
    }

    /// The runs as one Arrow record batch (reference column order, then llem's, then a
    /// column per configuration path the runs differ in).
    pub fn to_record_batch(&self) -> Result<arrow_array::RecordBatch, RecordsError> {
        let v: Vec<&crate::LlmRun> = self.iter().collect();
        to_record_batch(&v, None, &self.swept_paths())
            .map_err(|e| RecordsError::Usage(e.to_string()))
    }

    /// Writes `runs/llm.parquet`-style Parquet; paths relative to `base` when given.
    pub fn write_parquet(
        &self,
        path: &std::path::Path,
        base: Option<&std::path::Path>,
    ) -> Result<(), RecordsError> {
        let v: Vec<&crate::LlmRun> = self.iter().collect();
        write_parquet(&v, path, base, &self.swept_paths())
    }
}
