//! The `LLMRun` record of seed 002, field for field, plus the fields llem's own cells add,
//! and name-based access to every field (filters, grouping, exports go through it).

use std::sync::Arc;

use serde_json::{Map, Value};

/// Where a run was loaded from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RunSource {
    /// An ML.ENERGY raw tree (`results.json` + `prometheus.json`).
    MlEnergyRaw,
    /// An ML.ENERGY compiled `runs/llm.parquet`, or a parquet llem exported.
    Compiled,
    /// A llem cell directory (`result.json` + sidecars).
    Llem,
    /// A cell of the Python llem, `llenergymeasure` 0.7 (bundle 2.0).
    Llem07,
}

impl RunSource {
    /// The name written in the `source` column.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MlEnergyRaw => "mlenergy-raw",
            Self::Compiled => "compiled",
            Self::Llem => "llem",
            Self::Llem07 => "llem07",
        }
    }

    /// The inverse of [`RunSource::as_str`].
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "mlenergy-raw" => Some(Self::MlEnergyRaw),
            "compiled" => Some(Self::Compiled),
            "llem" => Some(Self::Llem),
            "llem07" => Some(Self::Llem07),
            _ => None,
        }
    }
}

/// One LLM benchmark run (seed 002 `LLMRun`; derivations in the reference format §6).
#[derive(Clone, Debug, PartialEq)]
pub struct LlmRun {
    /// Always `llm`.
    pub domain: String,
    /// Benchmark task (ML.ENERGY) or dataset (llem).
    pub task: String,
    /// Model id (`org/model`, or what the llem config named).
    pub model_id: String,
    /// Display name.
    pub nickname: String,
    /// `Dense`, `MoE`, or the architecture the model file names.
    pub architecture: String,
    /// Total parameters, billions.
    pub total_params_billions: f64,
    /// Parameters active per token, billions.
    pub activated_params_billions: f64,
    /// Weight precision (`bfloat16`, `fp8`, `Q4_1`, ...).
    pub weight_precision: String,
    /// GPU model, upper-cased (`CPU` for llem runs without a GPU).
    pub gpu_model: String,
    /// GPUs used.
    pub num_gpus: i64,
    /// Maximum batch (concurrent sequences).
    pub max_num_seqs: i64,
    /// Random seed.
    pub seed: Option<i64>,
    /// Request repetitions.
    pub num_request_repeats: Option<i64>,
    /// Tensor parallel degree.
    pub tensor_parallel: i64,
    /// Expert parallel degree.
    pub expert_parallel: i64,
    /// Data parallel degree.
    pub data_parallel: i64,
    /// Energy over the steady state (all GPUs), J.
    pub steady_state_energy_joules: f64,
    /// Steady-state duration, s.
    pub steady_state_duration_seconds: f64,
    /// Steady-state energy per output token, J (as written, even when <= 0).
    pub energy_per_token_joules: f64,
    /// Energy per request, J.
    pub energy_per_request_joules: Option<f64>,
    /// Steady-state output tokens per second.
    pub output_throughput_tokens_per_sec: f64,
    /// Steady-state requests per second.
    pub request_throughput_req_per_sec: Option<f64>,
    /// Average power over the steady state (all GPUs), W.
    pub avg_power_watts: f64,
    /// Output tokens over the whole benchmark.
    pub total_output_tokens: Option<f64>,
    /// Successful requests over the whole benchmark.
    pub completed_requests: Option<f64>,
    /// Mean output length, tokens.
    pub avg_output_len: Option<f64>,
    /// Mean smoothed inter-token latency, ms.
    pub mean_itl_ms: f64,
    /// Median ITL, ms.
    pub median_itl_ms: f64,
    /// 50th percentile ITL, ms (equal to the median).
    pub p50_itl_ms: f64,
    /// 90th percentile ITL, ms.
    pub p90_itl_ms: f64,
    /// 95th percentile ITL, ms.
    pub p95_itl_ms: f64,
    /// 99th percentile ITL, ms.
    pub p99_itl_ms: f64,
    /// Mean running batch over the steady state.
    pub avg_batch_size: Option<f64>,
    /// Passed the stability rules.
    pub is_stable: bool,
    /// `rule:detail`, empty when stable.
    pub unstable_reason: String,
    /// The raw results file (`results.json` / llem `result.json`).
    pub results_path: String,
    /// `prometheus.json` (ML.ENERGY) or `server_metrics.parquet` (llem); may not exist.
    pub prometheus_path: String,
    /// What llem adds; empty for ML.ENERGY runs except `source` and `engine`.
    pub extra: LlemFields,
}

/// Fields beyond the seed's `LLMRun`, filled for llem cells (see `docs/records.md`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LlemFields {
    /// Where the run was loaded from.
    pub source: Option<RunSource>,
    /// Inference engine (`vllm` for ML.ENERGY runs).
    pub engine: Option<String>,
    /// Study directory name.
    pub study: Option<String>,
    /// Cycle of the study.
    pub cycle: Option<i64>,
    /// What sets the configuration apart within its study (`llamacpp.batch_size=4,
    /// decoder.preset=creative`): the configuration paths whose values differ between its
    /// runs; the model and engine when nothing does.
    pub label: Option<String>,
    /// The resolved configuration (`effective_config.json`); its paths are fields too
    /// (`decoder.preset`).
    pub config: Option<Arc<Value>>,
    /// Configuration hash (equal across the cycles of one configuration).
    pub config_hash: Option<String>,
    /// Experiment id.
    pub experiment_id: Option<String>,
    /// The host the run measured on (`result.json` `environment.hostname`); a Slurm study's
    /// nodes differ.
    pub host: Option<String>,
    /// `total`, `steady_state` or `windowed`.
    pub measurement_methodology: Option<String>,
    /// Energy source (`nvml`, `rapl`, `estimate`, ...).
    pub energy_source: Option<String>,
    /// What the energy figures hold: `gpu` (the engine's GPUs) or `cpu` (packages + DRAM).
    pub energy_scope: Option<String>,
    /// The system figure over the window, J: the whole node where a node power sensor
    /// measured it (`system_scope` `node`), else every measured domain (GPUs, CPU, DRAM).
    pub system_energy_joules: Option<f64>,
    /// `node` or `components`: what `system_energy_joules` is.
    pub system_scope: Option<String>,
    /// The whole node's energy over the window (BMC or power meter), J.
    pub node_energy_joules: Option<f64>,
    /// The node less the measured components, J (fans, NICs, storage, PSU losses).
    pub unattributed_energy_joules: Option<f64>,
    /// Baseline-adjusted energy over the window, J.
    pub energy_adjusted_joules: Option<f64>,
    /// Baseline-adjusted energy per output token, mJ (`mj_per_tok_adjusted`, as `result.json`
    /// names it).
    pub mj_per_tok_adjusted: Option<f64>,
    /// Median time to first token, ms.
    pub ttft_median_ms: Option<f64>,
    /// 99th percentile TTFT, ms.
    pub ttft_p99_ms: Option<f64>,
    /// Median time per output token, ms.
    pub tpot_median_ms: Option<f64>,
    /// 99th percentile end-to-end latency, ms.
    pub e2e_p99_ms: Option<f64>,
    /// Of the window's energy: prefill passes (served: requests awaiting their first
    /// token), J.
    pub prefill_energy_joules: Option<f64>,
    /// Of the window's energy: decode passes (served: requests streaming), J.
    pub decode_energy_joules: Option<f64>,
    /// Of the window's energy: no pass running (served: nothing in flight), J.
    pub idle_energy_joules: Option<f64>,
    /// Median energy attributed to a request wholly inside the window, J.
    pub energy_per_request_p50_joules: Option<f64>,
    /// 99th percentile of the same, J.
    pub energy_per_request_p99_joules: Option<f64>,
    /// The difference method's prefill: the prompts run again for one token each, J.
    pub difference_prefill_energy_joules: Option<f64>,
    /// The window's energy less that, J.
    pub difference_decode_energy_joules: Option<f64>,
    /// Share of the window's requests meeting every latency objective set (`goodput.
    /// goodput_fraction`); null where no SLO was set.
    pub goodput_fraction: Option<f64>,
    /// Requests meeting every objective per second of the window, req/s.
    pub goodput_req_per_sec: Option<f64>,
    /// The window's energy over the requests meeting every objective, J.
    pub energy_per_good_request_joules: Option<f64>,
    /// Measurement warnings, one per line.
    pub warnings: Option<String>,
}

/// The type of a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// Text.
    Str,
    /// Integer.
    Int,
    /// Integer or null.
    OptInt,
    /// Float.
    Float,
    /// Float or null.
    OptFloat,
    /// Boolean.
    Bool,
    /// Text or null.
    OptStr,
}

/// One field's value, borrowed from a record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FieldValue<'a> {
    /// Text.
    Str(&'a str),
    /// Integer.
    Int(i64),
    /// Float.
    Float(f64),
    /// Boolean.
    Bool(bool),
    /// Missing.
    Null,
}

impl FieldValue<'_> {
    /// The value as a float (integers and booleans convert), if numeric.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Self::Int(i) => Some(i as f64),
            Self::Float(f) if !f.is_nan() => Some(f),
            Self::Bool(b) => Some(if b { 1.0 } else { 0.0 }),
            _ => None,
        }
    }

    /// The value as text, the way tables and group keys print it.
    pub fn display(&self) -> String {
        match *self {
            Self::Str(s) => s.to_string(),
            Self::Int(i) => i.to_string(),
            Self::Float(f) => format!("{f}"),
            Self::Bool(b) => b.to_string(),
            Self::Null => String::new(),
        }
    }

    /// The value as JSON (NaN becomes null).
    pub fn to_json(&self) -> Value {
        match *self {
            Self::Str(s) => Value::String(s.to_string()),
            Self::Int(i) => Value::from(i),
            Self::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
            Self::Bool(b) => Value::Bool(b),
            Self::Null => Value::Null,
        }
    }
}

/// The seed's public fields, in the column order of `runs/llm.parquet` (reference §12).
pub const LLM_FIELDS: &[(&str, FieldKind)] = &[
    ("domain", FieldKind::Str),
    ("task", FieldKind::Str),
    ("model_id", FieldKind::Str),
    ("nickname", FieldKind::Str),
    ("architecture", FieldKind::Str),
    ("total_params_billions", FieldKind::Float),
    ("activated_params_billions", FieldKind::Float),
    ("weight_precision", FieldKind::Str),
    ("gpu_model", FieldKind::Str),
    ("num_gpus", FieldKind::Int),
    ("max_num_seqs", FieldKind::Int),
    ("seed", FieldKind::OptInt),
    ("num_request_repeats", FieldKind::OptInt),
    ("tensor_parallel", FieldKind::Int),
    ("expert_parallel", FieldKind::Int),
    ("data_parallel", FieldKind::Int),
    ("steady_state_energy_joules", FieldKind::Float),
    ("steady_state_duration_seconds", FieldKind::Float),
    ("energy_per_token_joules", FieldKind::Float),
    ("energy_per_request_joules", FieldKind::OptFloat),
    ("output_throughput_tokens_per_sec", FieldKind::Float),
    ("request_throughput_req_per_sec", FieldKind::OptFloat),
    ("avg_power_watts", FieldKind::Float),
    ("total_output_tokens", FieldKind::OptFloat),
    ("completed_requests", FieldKind::OptFloat),
    ("avg_output_len", FieldKind::OptFloat),
    ("mean_itl_ms", FieldKind::Float),
    ("median_itl_ms", FieldKind::Float),
    ("p50_itl_ms", FieldKind::Float),
    ("p90_itl_ms", FieldKind::Float),
    ("p95_itl_ms", FieldKind::Float),
    ("p99_itl_ms", FieldKind::Float),
    ("avg_batch_size", FieldKind::OptFloat),
    ("is_stable", FieldKind::Bool),
    ("unstable_reason", FieldKind::Str),
];

/// The two path columns that follow the public fields in `runs/llm.parquet`.
pub const PATH_FIELDS: &[(&str, FieldKind)] = &[
    ("results_path", FieldKind::Str),
    ("prometheus_path", FieldKind::Str),
];

/// llem's extra columns, written after the reference columns (readers ignore them).
pub const EXTRA_FIELDS: &[(&str, FieldKind)] = &[
    ("source", FieldKind::OptStr),
    ("engine", FieldKind::OptStr),
    ("study", FieldKind::OptStr),
    ("cycle", FieldKind::OptInt),
    ("label", FieldKind::OptStr),
    ("config_hash", FieldKind::OptStr),
    ("experiment_id", FieldKind::OptStr),
    ("host", FieldKind::OptStr),
    ("measurement_methodology", FieldKind::OptStr),
    ("energy_source", FieldKind::OptStr),
    ("energy_scope", FieldKind::OptStr),
    ("system_energy_joules", FieldKind::OptFloat),
    ("system_scope", FieldKind::OptStr),
    ("node_energy_joules", FieldKind::OptFloat),
    ("unattributed_energy_joules", FieldKind::OptFloat),
    ("energy_adjusted_joules", FieldKind::OptFloat),
    ("mj_per_tok_total", FieldKind::OptFloat),
    ("mj_per_tok_adjusted", FieldKind::OptFloat),
    ("system_mj_per_tok", FieldKind::OptFloat),
    ("ttft_median_ms", FieldKind::OptFloat),
    ("ttft_p99_ms", FieldKind::OptFloat),
    ("tpot_median_ms", FieldKind::OptFloat),
    ("e2e_p99_ms", FieldKind::OptFloat),
    ("prefill_energy_joules", FieldKind::OptFloat),
    ("decode_energy_joules", FieldKind::OptFloat),
    ("idle_energy_joules", FieldKind::OptFloat),
    ("energy_per_request_p50_joules", FieldKind::OptFloat),
    ("energy_per_request_p99_joules", FieldKind::OptFloat),
    ("difference_prefill_energy_joules", FieldKind::OptFloat),
    ("difference_decode_energy_joules", FieldKind::OptFloat),
    ("goodput_fraction", FieldKind::OptFloat),
    ("goodput_req_per_sec", FieldKind::OptFloat),
    ("energy_per_good_request_joules", FieldKind::OptFloat),
    ("warnings", FieldKind::OptStr),
];

/// Every field name in column order: public, paths, extras.
pub fn all_fields() -> impl Iterator<Item = (&'static str, FieldKind)> {
    LLM_FIELDS
        .iter()
        .chain(PATH_FIELDS)
        .chain(EXTRA_FIELDS)
        .copied()
}

/// The kind of field `name`, if it is one.
pub fn field_kind(name: &str) -> Option<FieldKind> {
    all_fields().find(|(n, _)| *n == name).map(|(_, k)| k)
}

/// The scalar at dotted `path` of a configuration (`decoder.preset`), if there is one.
pub fn config_value<'a>(config: &'a Value, path: &str) -> Option<FieldValue<'a>> {
    let v = path.split('.').try_fold(config, |v, k| v.get(k))?;
    Some(match v {
        Value::String(s) => FieldValue::Str(s),
        Value::Bool(b) => FieldValue::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => FieldValue::Int(i),
            None => FieldValue::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::Null => FieldValue::Null,
        Value::Array(_) | Value::Object(_) => return None,
    })
}

fn opt_f(v: Option<f64>) -> FieldValue<'static> {
    v.map_or(FieldValue::Null, FieldValue::Float)
}

fn opt_i(v: Option<i64>) -> FieldValue<'static> {
    v.map_or(FieldValue::Null, FieldValue::Int)
}

fn opt_s(v: &Option<String>) -> FieldValue<'_> {
    v.as_deref().map_or(FieldValue::Null, FieldValue::Str)
}

impl LlmRun {
    /// The value of field `name` (any of [`all_fields`]); `None` for an unknown name.
    pub fn field(&self, name: &str) -> Option<FieldValue<'_>> {
        use FieldValue::{Bool, Float, Int, Str};
        let x = &self.extra;
        Some(match name {
            "domain" => Str(&self.domain),
            "task" => Str(&self.task),
            "model_id" => Str(&self.model_id),
            "nickname" => Str(&self.nickname),
            "architecture" => Str(&self.architecture),
            "total_params_billions" => Float(self.total_params_billions),
            "activated_params_billions" => Float(self.activated_params_billions),
            "weight_precision" => Str(&self.weight_precision),
            "gpu_model" => Str(&self.gpu_model),
            "num_gpus" => Int(self.num_gpus),
            "max_num_seqs" => Int(self.max_num_seqs),
            "seed" => opt_i(self.seed),
            "num_request_repeats" => opt_i(self.num_request_repeats),
            "tensor_parallel" => Int(self.tensor_parallel),
            "expert_parallel" => Int(self.expert_parallel),
            "data_parallel" => Int(self.data_parallel),
            "steady_state_energy_joules" => Float(self.steady_state_energy_joules),
            "steady_state_duration_seconds" => Float(self.steady_state_duration_seconds),
            "energy_per_token_joules" => Float(self.energy_per_token_joules),
            "energy_per_request_joules" => opt_f(self.energy_per_request_joules),
            "output_throughput_tokens_per_sec" => Float(self.output_throughput_tokens_per_sec),
            "request_throughput_req_per_sec" => opt_f(self.request_throughput_req_per_sec),
            "avg_power_watts" => Float(self.avg_power_watts),
            "total_output_tokens" => opt_f(self.total_output_tokens),
            "completed_requests" => opt_f(self.completed_requests),
            "avg_output_len" => opt_f(self.avg_output_len),
            "mean_itl_ms" => Float(self.mean_itl_ms),
            "median_itl_ms" => Float(self.median_itl_ms),
            "p50_itl_ms" => Float(self.p50_itl_ms),
            "p90_itl_ms" => Float(self.p90_itl_ms),
            "p95_itl_ms" => Float(self.p95_itl_ms),
            "p99_itl_ms" => Float(self.p99_itl_ms),
            "avg_batch_size" => opt_f(self.avg_batch_size),
            "is_stable" => Bool(self.is_stable),
            "unstable_reason" => Str(&self.unstable_reason),
            "results_path" => Str(&self.results_path),
            "prometheus_path" => Str(&self.prometheus_path),
            "source" => x.source.map_or(FieldValue::Null, |s| Str(s.as_str())),
            "engine" => opt_s(&x.engine),
            "study" => opt_s(&x.study),
            "cycle" => opt_i(x.cycle),
            "config_hash" => opt_s(&x.config_hash),
            "experiment_id" => opt_s(&x.experiment_id),
            "host" => opt_s(&x.host),
            "measurement_methodology" => opt_s(&x.measurement_methodology),
            "energy_source" => opt_s(&x.energy_source),
            "energy_scope" => opt_s(&x.energy_scope),
            "system_energy_joules" => opt_f(x.system_energy_joules),
            "system_scope" => opt_s(&x.system_scope),
            "node_energy_joules" => opt_f(x.node_energy_joules),
            "unattributed_energy_joules" => opt_f(x.unattributed_energy_joules),
            "energy_adjusted_joules" => opt_f(x.energy_adjusted_joules),
            "mj_per_tok_total" => opt_f(self.mj_per_tok_total()),
            "mj_per_tok_adjusted" => opt_f(x.mj_per_tok_adjusted),
            "system_mj_per_tok" => opt_f(self.system_mj_per_tok()),
            "ttft_median_ms" => opt_f(x.ttft_median_ms),
            "ttft_p99_ms" => opt_f(x.ttft_p99_ms),
            "tpot_median_ms" => opt_f(x.tpot_median_ms),
            "e2e_p99_ms" => opt_f(x.e2e_p99_ms),
            "prefill_energy_joules" => opt_f(x.prefill_energy_joules),
            "decode_energy_joules" => opt_f(x.decode_energy_joules),
            "idle_energy_joules" => opt_f(x.idle_energy_joules),
            "energy_per_request_p50_joules" => opt_f(x.energy_per_request_p50_joules),
            "energy_per_request_p99_joules" => opt_f(x.energy_per_request_p99_joules),
            "difference_prefill_energy_joules" => opt_f(x.difference_prefill_energy_joules),
            "difference_decode_energy_joules" => opt_f(x.difference_decode_energy_joules),
            "goodput_fraction" => opt_f(x.goodput_fraction),
            "goodput_req_per_sec" => opt_f(x.goodput_req_per_sec),
            "energy_per_good_request_joules" => opt_f(x.energy_per_good_request_joules),
            "warnings" => opt_s(&x.warnings),
            "label" => opt_s(&x.label),
            path => return x.config.as_deref().and_then(|c| config_value(c, path)),
        })
    }

    /// Energy per output token, mJ: `energy_per_token_joules` in the unit and under the name
    /// `result.json` uses (`mj_per_tok_total`); null when it is not a finite number.
    pub fn mj_per_tok_total(&self) -> Option<f64> {
        let j = self.energy_per_token_joules;
        j.is_finite().then_some(j * 1000.0)
    }

    /// Every measured domain's energy per output token, mJ (llem runs that carry it).
    pub fn system_mj_per_tok(&self) -> Option<f64> {
        let out = self.total_output_tokens.filter(|n| *n > 0.0)?;
        self.extra.system_energy_joules.map(|j| j / out * 1000.0)
    }

    /// The record as one JSON object: the seed's field names first, then paths and extras.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        for (name, _) in all_fields() {
            if let Some(v) = self.field(name) {
                m.insert(name.to_string(), v.to_json());
            }
        }
        Value::Object(m)
    }

    /// The cascade group of the stability rules: (model, task, GPU model, GPU count).
    pub fn group_key(&self) -> (&str, &str, &str, i64) {
        (&self.model_id, &self.task, &self.gpu_model, self.num_gpus)
    }

    /// Collection order of the reference reader: task, model, GPU model, GPU count, batch.
    pub fn sort_key(&self) -> (&str, &str, &str, i64, i64) {
        (
            &self.task,
            &self.model_id,
            &self.gpu_model,
            self.num_gpus,
            self.max_num_seqs,
        )
    }
}

/// Fields derived from the steady-state totals the same way for every source (§6.1):
/// throughput from tokens in the window, average power, per-request energy and rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Derived {
    /// Tokens per second.
    pub output_throughput_tokens_per_sec: f64,
    /// W.
    pub avg_power_watts: f64,
    /// Tokens per completed request.
    pub avg_output_len: Option<f64>,
    /// J per request.
    pub energy_per_request_joules: Option<f64>,
    /// Requests per second.
    pub request_throughput_req_per_sec: Option<f64>,
}

/// §6.1 for energy `e_total` over `duration_s`, energy per token `e`, the file's
/// whole-run throughput (used when `e <= 0`), completed requests and output tokens.
pub fn derive(
    e_total: f64,
    duration_s: f64,
    e: f64,
    fallback_throughput: Option<f64>,
    completed: Option<f64>,
    total_tokens: Option<f64>,
) -> Option<Derived> {
    let throughput = if e > 0.0 {
        (e_total / e) / duration_s
    } else {
        fallback_throughput?
    };
    let avg_len = match (completed, total_tokens) {
        (Some(c), Some(t)) if c > 0.0 => Some(t / c),
        _ => None,
    };
    let usable = avg_len.filter(|l| e > 0.0 && *l > 0.0);
    Some(Derived {
        output_throughput_tokens_per_sec: throughput,
        avg_power_watts: e_total / duration_s,
        avg_output_len: avg_len,
        energy_per_request_joules: usable.map(|l| e * l),
        request_throughput_req_per_sec: usable.map(|l| throughput / l),
    })
}

/// Whether `name` is a path of an experiment configuration (`decoder.preset`, `dtype`): its
/// first segment is a top-level key of the experiment schema. llem runs answer it from their
/// resolved configuration.
pub fn is_config_path(name: &str) -> bool {
    let first = name.split('.').next().unwrap_or_default();
    !first.is_empty()
        && llem_config::schema::experiment_schema()
            .get("properties")
            .and_then(|p| p.get(first))
            .is_some()
}
