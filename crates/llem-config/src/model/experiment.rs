//! One experiment: every field of the seed's config reference, with its default.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::engines::{
    LlamaCppConfig, SglangConfig, TensorRtConfig, TgiConfig, TransformersConfig, VllmConfig,
};
use super::names::{Dtype, EnergySampler, Engine};
use super::runner::{RunnerMap, RunnerSpec};
use super::sections::{
    BaselineConfig, DatasetConfig, DecoderConfig, LoraConfig, MeasurementConfig, TrafficConfig,
    WarmupConfig,
};

impl Default for Engine {
    fn default() -> Self {
        Engine::DEFAULT
    }
}

fn default_random_seed() -> i64 {
    42
}

fn default_token_limit() -> Option<u32> {
    Some(256)
}

fn default_energy_sampler() -> Option<EnergySampler> {
    Some(EnergySampler::Auto)
}

fn default_true() -> bool {
    true
}

/// An experiment: model, engine, workload, decoding, measurement protocol and engine
/// settings. Only `model` is required.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExperimentConfig {
    /// A label for this experiment (directory names, tables); not part of the config hash.
    #[serde(default)]
    pub name: Option<String>,
    /// Hugging Face model id, local model directory, or GGUF file (llamacpp).
    pub model: String,
    /// Inference engine: llamacpp, transformers (or pytorch), vllm, tensorrt, sglang, tgi,
    /// openai. Omitted: the one engine section given, else llamacpp for a `.gguf` model and
    /// transformers for a Hugging Face id or directory (the plan says which and why).
    #[serde(default)]
    pub engine: Engine,
    /// Prompts.
    #[serde(default)]
    pub dataset: DatasetConfig,
    /// Weight/compute dtype: float32, float16, bfloat16 (null = bfloat16 for engines that load
    /// Hugging Face weights; llamacpp uses the GGUF file's own types).
    #[serde(default)]
    pub dtype: Option<Dtype>,
    /// Seed for the inference RNG and dataset ordering.
    #[serde(default = "default_random_seed")]
    pub random_seed: i64,
    /// Truncate prompts to this many tokens (null = no truncation).
    #[serde(default = "default_token_limit")]
    #[schemars(range(min = 1))]
    pub max_input_tokens: Option<u32>,
    /// Generate at most this many tokens per request (null = until EOS or context end).
    #[serde(default = "default_token_limit")]
    #[schemars(range(min = 1))]
    pub max_output_tokens: Option<u32>,
    /// Decoding parameters shared by all engines.
    #[serde(default)]
    pub decoder: DecoderConfig,
    /// Warmup phase.
    #[serde(default)]
    pub warmup: WarmupConfig,
    /// Idle power measurement.
    #[serde(default)]
    pub baseline: BaselineConfig,
    /// Energy backend (null = measure throughput and latency only).
    #[serde(default = "default_energy_sampler")]
    pub energy_sampler: Option<EnergySampler>,
    /// Write the telemetry timeseries (timeseries.parquet); telemetry is sampled either way.
    #[serde(default = "default_true")]
    pub gpu_telemetry: bool,
    /// Measurement window and latency detail.
    #[serde(default)]
    pub measurement: MeasurementConfig,
    /// Request traffic (serving engines only).
    #[serde(default)]
    pub traffic: Option<Box<TrafficConfig>>,
    /// Device settings (power limits, locked clocks, CPU frequency) the cell runs under,
    /// put back after it.
    #[serde(default)]
    pub device: Option<Box<super::device::DeviceConfig>>,
    /// llama.cpp settings (engine llamacpp).
    #[serde(default)]
    pub llamacpp: Option<Box<LlamaCppConfig>>,
    /// Hugging Face transformers settings (engine transformers; also written `pytorch:`).
    #[serde(default)]
    pub transformers: Option<Box<TransformersConfig>>,
    /// vLLM settings (engine vllm).
    #[serde(default)]
    pub vllm: Option<Box<VllmConfig>>,
    /// TensorRT-LLM settings (engine tensorrt).
    #[serde(default)]
    pub tensorrt: Option<Box<TensorRtConfig>>,
    /// SGLang settings (engine sglang).
    #[serde(default)]
    pub sglang: Option<Box<SglangConfig>>,
    /// TGI settings (engine tgi).
    #[serde(default)]
    pub tgi: Option<Box<TgiConfig>>,
    /// LoRA adapter.
    #[serde(default)]
    pub lora: Option<Box<LoraConfig>>,
    /// Extra keyword arguments handed to the engine as written (part of the config hash).
    #[serde(default)]
    pub passthrough_kwargs: Option<BTreeMap<String, serde_json::Value>>,
    /// Results directory (environment; not part of the config hash).
    #[serde(default)]
    pub output_dir: Option<String>,
    /// How each engine runs: embedded, local, docker, docker:<image>, external:<url>
    /// (environment; not part of the config hash).
    #[serde(default)]
    pub runners: RunnerMap,
    /// Container image per engine (environment; not part of the config hash).
    #[serde(default)]
    pub images: BTreeMap<Engine, String>,
}

impl ExperimentConfig {
    /// Top-level keys, for collision checks and suggestions.
    pub const KEYS: &'static [&'static str] = &[
        "name",
        "model",
        "engine",
        "dataset",
        "dtype",
        "random_seed",
        "max_input_tokens",
        "max_output_tokens",
        "decoder",
        "warmup",
        "baseline",
        "energy_sampler",
        "gpu_telemetry",
        "measurement",
        "traffic",
        "device",
        "llamacpp",
        "transformers",
        "vllm",
        "tensorrt",
        "sglang",
        "tgi",
        "lora",
        "passthrough_kwargs",
        "output_dir",
        "runners",
        "images",
    ];

    /// Top-level keys that describe the environment, not the measurement; they are left out
    /// of `measurement_config_hash`, as is `decoder.preset` (already expanded into values).
    pub const ENVIRONMENT_KEYS: &'static [&'static str] =
        &["name", "output_dir", "runners", "images", "gpu_telemetry"];

    /// The runner this experiment's engine uses (after resolution it is always present,
    /// except for `openai` without an `external:` URL, which validation rejects).
    pub fn runner(&self) -> Option<&RunnerSpec> {
        self.runners.get(&self.engine)
    }

    /// Seconds a cell of this configuration waits whatever the engine's speed: its baseline
    /// (when measured; a cached one is measured by the first cell), its thermal floor, and
    /// traffic sent for a fixed time (methodology `windows`: the ramp and every window).
    /// A cell limit below this kills every cell.
    pub fn fixed_cell_seconds(&self) -> f64 {
        self.baseline_seconds().unwrap_or(0.0)
            + self.thermal_floor_seconds()
            + self.timed_traffic_seconds().unwrap_or(0.0)
    }

    /// Seconds of idle baseline a run measures, when it measures one (enabled, with a
    /// sampler); a cached strategy measures it in the first cell only.
    pub fn baseline_seconds(&self) -> Option<f64> {
        (self.baseline.enabled && self.energy_sampler.is_some())
            .then_some(self.baseline.duration_seconds)
    }

    /// Seconds of thermal floor after warmup (0 without warmup).
    pub fn thermal_floor_seconds(&self) -> f64 {
        if self.warmup.enabled {
            self.warmup.thermal_floor_seconds
        } else {
            0.0
        }
    }

    /// Seconds a served run sends traffic for, when it sends for a time rather than a
    /// number of requests (a trace replay: its slice's duration, scaled; unknown without
    /// reading the trace when the slice runs to its end).
    pub fn timed_traffic_seconds(&self) -> Option<f64> {
        if !self.is_served() {
            return None;
        }
        let t = self.effective_traffic();
        if let Some(trace) = &t.trace {
            return trace.duration_seconds.map(|d| d * trace.time_scale);
        }
        t.n_requests
            .is_none()
            .then_some(t.duration_seconds)
            .flatten()
    }

    /// The traffic a served run sends: `traffic:` (defaults when absent), with methodology
    /// `windows` sending for the ramp and every window unless a duration is given.
    pub fn effective_traffic(&self) -> TrafficConfig {
        let mut t = self.traffic.as_deref().cloned().unwrap_or_default();
        if self.measurement.methodology == crate::Methodology::Windows
            && t.duration_seconds.is_none()
            && t.n_requests.is_none()
        {
            t.duration_seconds = Some(self.measurement.windows_or_default().span_s());
        }
        t
    }

    /// True when the engine is reached as a server, so `traffic:` applies.
    pub fn is_served(&self) -> bool {
        match self.runner() {
            Some(r) => r.is_server(self.engine),
            None => self.engine == Engine::OpenAi,
        }
    }

    /// The engine section present for `engine`, as a YAML key.
    pub fn has_section(&self, engine: Engine) -> bool {
        match engine {
            Engine::LlamaCpp => self.llamacpp.is_some(),
            Engine::Transformers => self.transformers.is_some(),
            Engine::Vllm => self.vllm.is_some(),
            Engine::TensorRt => self.tensorrt.is_some(),
            Engine::Sglang => self.sglang.is_some(),
            Engine::Tgi => self.tgi.is_some(),
            Engine::OpenAi => false,
        }
    }
}
