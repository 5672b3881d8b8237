//! The serving engines llem can launch, one file each: the CLI and its flag table, the default
//! image and container port, readiness, the Prometheus series llem reads, and which config
//! field is the engine's batch limit. [`crate::registry`] maps an engine name to its spec.

pub(crate) mod llama_server;
pub(crate) mod sglang;
pub(crate) mod tensorrt;
pub(crate) mod tgi;
pub(crate) mod vllm;

use serde_json::{Map, Value};

use llem_config::ExperimentConfig;

use crate::placement::Placement;

/// What a local run starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalProgram {
    /// A program on `PATH` and its leading arguments (`["vllm", "serve"]`).
    Cli(&'static [&'static str]),
    /// A Python module, run by the configured interpreter (`python -m sglang.launch_server`).
    PythonModule(&'static str),
    /// `llama-server`, found by [`crate::serving::find_llama_server`].
    LlamaServer,
}

/// The Prometheus series of an engine that llem reads (every other series is kept as is).
#[derive(Clone, Copy, Debug, Default)]
pub struct MetricNames {
    /// Gauges of the sequences being decoded (the batch in flight).
    pub running: &'static [&'static str],
    /// Gauges of the requests queued.
    pub waiting: &'static [&'static str],
    /// Gauges of the KV cache in use, fraction 0-1.
    pub kv_cache_usage: &'static [&'static str],
    /// Counters of prefix-cache hits (their ratio to queries over a window is the hit rate).
    pub prefix_cache_hits: &'static [&'static str],
    /// Counters of prefix-cache queries.
    pub prefix_cache_queries: &'static [&'static str],
    /// Gauges of the prefix-cache hit rate, fraction 0-1.
    pub prefix_hit_rate: &'static [&'static str],
}

impl MetricNames {
    /// An engine that exposes none of the series llem reads.
    pub const NONE: MetricNames = MetricNames {
        running: &[],
        waiting: &[],
        kv_cache_usage: &[],
        prefix_cache_hits: &[],
        prefix_cache_queries: &[],
        prefix_hit_rate: &[],
    };
}

/// Where a launched server listens and what it serves.
#[derive(Clone, Copy, Debug)]
pub struct Listen<'a> {
    /// The model argument: a hub id, a directory or a GGUF path, as the server reads it.
    pub model: &'a str,
    /// Interface to bind.
    pub host: &'a str,
    /// Port to bind.
    pub port: u16,
}

/// The engine-specific part of a server's command line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerArgs {
    /// Everything after the program, model and port included.
    pub args: Vec<String>,
    /// An options file passed by path: its flag and contents (TensorRT-LLM).
    pub extra_options: Option<(String, Value)>,
}

impl ServerArgs {
    /// A command line with no options file.
    pub(crate) fn plain(args: Vec<String>) -> ServerArgs {
        ServerArgs {
            args,
            extra_options: None,
        }
    }
}

/// One serving engine: how it is launched, reached and read.
#[derive(Debug)]
pub struct ServerSpec {
    /// What a local run starts.
    pub local: LocalProgram,
    /// How to install it, for the error when it is missing.
    pub install_hint: &'static str,
    /// What follows the image in `docker run` when the image's entrypoint is not the server.
    pub container_entry: &'static [&'static str],
    /// The container image used when `images:` names none.
    pub default_image: &'static str,
    /// The port the server listens on inside that image.
    pub container_port: u16,
    /// The endpoint that answers 200 once the model is loaded.
    pub health_path: &'static str,
    /// Reports usage in every streamed chunk when asked (`continuous_usage_stats`).
    pub continuous_usage: bool,
    /// Cuts prompts to `max_input_tokens` itself, per request.
    pub truncates_prompts: bool,
    /// Its Prometheus series.
    pub metrics: MetricNames,
    /// The config field that caps how many requests it runs at once, when the config sets it.
    pub batch_limit: fn(&ExperimentConfig) -> Option<std::num::NonZeroU32>,
    /// The engine-specific command line for `cfg` listening on `listen`.
    pub args: fn(&ExperimentConfig, &Listen<'_>) -> Result<ServerArgs, crate::LaunchError>,
    /// Per-request fields of the engine's config section, beyond the standard sampling ones.
    pub request_fields: fn(&ExperimentConfig) -> Map<String, Value>,
    /// True when its container needs GPUs for `cfg`.
    pub wants_gpus: fn(&ExperimentConfig) -> bool,
    /// The GPUs `cfg` occupies with this many visible (its parallelism settings): the
    /// devices a cell locks and the scope of its energy.
    pub placement: fn(&ExperimentConfig, u32) -> Placement,
    /// Bytes per KV-cache element and the type's name when `cfg` sets the cache's type
    /// (an FP8 cache is one byte); `None` when it holds the model's dtype.
    pub kv_element: fn(&ExperimentConfig) -> Option<(f64, String)>,
    /// The `model` requests name, when it is not `cfg.model` (a LoRA adapter served beside
    /// the base model under its own name).
    pub served_model: fn(&ExperimentConfig) -> Option<&'static str>,
    /// Where the running server lists its LoRA adapters, checked before the run.
    pub lora_listing: LoraListing,
    /// How a server llem started empties its prefix cache before each run.
    pub prefix_cache_reset: Option<PrefixCacheReset>,
    /// The request field that, sent as `false` in every request, keeps the server from
    /// reusing a cached prompt (llama-server's `cache_prompt`): the prefill of every prompt
    /// is measured even on a server whose cache cannot be emptied.
    pub prompt_cache_off: Option<&'static str>,
    /// How the server turns text into its token ids (a trace replay's prompts); null where
    /// it has no such route.
    pub tokenize: Option<TokenizeRoute>,
    /// The engine version whose CLI llem's flag table was checked against (in a test, against
    /// that version's own parser), which `default_image` also runs; null where no check runs.
    /// A server of another version gets a warning: a flag it lacks stops it at launch, and one
    /// whose meaning changed would go unnoticed.
    pub flags_version: Option<&'static str>,
}

/// A server's text-to-token-ids route.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenizeRoute {
    /// llama-server: `POST /tokenize {"content", "add_special"}` answers `{"tokens"}`.
    Content,
    /// vLLM: `POST /tokenize {"model", "prompt", "add_special_tokens"}` answers
    /// `{"tokens", "count", ...}`.
    Prompt,
}

/// How a server's prefix cache is emptied, and what its launch needs for that to work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefixCacheReset {
    /// `POST` one route (vLLM `/reset_prefix_cache`, SGLang `/flush_cache`).
    Post {
        /// The path.
        route: &'static str,
        /// Environment of the server process (vLLM serves the route in dev mode only).
        env: &'static [(&'static str, &'static str)],
    },
    /// Erase every slot's cache: `GET /slots` lists them, `POST /slots/<id>?action=erase`
    /// each (llama-server, which allows slot actions only when launched with
    /// `--slot-save-path`; its args add it).
    EraseSlots,
}

impl PrefixCacheReset {
    /// Environment the server process needs for the reset.
    pub fn env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            PrefixCacheReset::Post { env, .. } => env,
            PrefixCacheReset::EraseSlots => &[],
        }
    }
}

/// How a server shows that it loaded the LoRA adapter llem asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoraListing {
    /// llem applies no adapter on this engine (the plan refuses `lora:`).
    None,
    /// `GET /lora-adapters`: `[{path, scale}]` (llama-server).
    LoraAdapters,
    /// `GET /v1/models` lists the adapter's served name (vLLM).
    Models,
}

/// For engines whose requests name the configured model.
pub(crate) fn configured_model(_: &ExperimentConfig) -> Option<&'static str> {
    None
}

/// A local adapter path as the server will read it: absolute, since the server's working
/// directory is its cell's, not llem's.
pub(crate) fn adapter_path(cfg: &ExperimentConfig) -> Option<String> {
    cfg.lora.as_deref()?.absolute_adapter_path()
}

/// An FP8 KV-cache type (`fp8`, `fp8_e5m2`, `fp8_e4m3`): one byte an element.
pub(crate) fn fp8_kv(name: Option<&str>) -> Option<(f64, String)> {
    name.filter(|n| n.starts_with("fp8"))
        .map(|n| (1.0, n.to_string()))
}

/// The first `tp × other` visible GPUs (an unset size is 1).
pub(crate) fn parallel_gpus(tp: Option<u32>, other: Option<u32>, visible_gpus: u32) -> Placement {
    let n = tp.unwrap_or(1).saturating_mul(other.unwrap_or(1));
    Placement::first_gpus(n, visible_gpus)
}

/// For engines whose server always runs on GPUs.
pub(crate) fn always(_: &ExperimentConfig) -> bool {
    true
}

/// For engines that take no per-request fields from their section.
pub(crate) fn no_request_fields(_: &ExperimentConfig) -> Map<String, Value> {
    Map::new()
}

/// The non-null fields of a serialised config section, `max_tokens` aside (the output limit
/// has one owner: the workload).
pub(crate) fn request_section<T: serde::Serialize>(section: Option<&T>) -> Map<String, Value> {
    match section.and_then(|s| serde_json::to_value(s).ok()) {
        Some(Value::Object(m)) => m
            .into_iter()
            .filter(|(k, v)| !v.is_null() && k != "max_tokens")
            .collect(),
        _ => Map::new(),
    }
}
