//! The engine registry: the one place that maps an engine name to what llem knows of it —
//! where it runs (in-process, a Python worker, a server), its server spec, its batch, its
//! context — and loads it. Every match over engine names here is exhaustive, so a new engine
//! does not compile until each question has its answer.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use llem_config::{BatchingStrategy, Engine as EngineName, ExperimentConfig, RunnerKind};
use llem_results::layout;

use crate::engine::{ContextPlan, Engine, EngineError};
pub use crate::serving::engines::LocalProgram;
use crate::serving::engines::{ServerSpec, llama_server, sglang, tensorrt, tgi, vllm};
use crate::serving::prometheus::Gauge;
use crate::serving::{ServeOptions, ServerEngine};
use crate::workload::{BatchingSpec, Prompt, Workload};
use crate::{assets, llamacpp, transformers};

/// Where an engine's inference runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// In llem's own process (llama.cpp through llama-cpp-2).
    Embedded,
    /// In a Python worker llem drives over JSON lines (transformers).
    Worker,
    /// In a server reached over HTTP (launched by llem or external).
    Server,
}

/// The server spec of `engine`, when llem can launch it as a server.
pub fn server(engine: EngineName) -> Option<&'static ServerSpec> {
    match engine {
        EngineName::LlamaCpp => Some(&llama_server::SPEC),
        EngineName::Vllm => Some(&vllm::SPEC),
        EngineName::Sglang => Some(&sglang::SPEC),
        EngineName::Tgi => Some(&tgi::SPEC),
        EngineName::TensorRt => Some(&tensorrt::SPEC),
        // Reached by URL only; the worker is no server.
        EngineName::OpenAi | EngineName::Transformers => None,
    }
}

/// Every command-line flag llem may pass to `engine`'s server, for checking against the
/// server's own parser (vLLM's, SGLang's, llama-server's; TGI's from its source at the pinned
/// tag; empty for TensorRT-LLM, whose CLI cannot be installed here).
pub fn cli_flags(engine: EngineName) -> Vec<String> {
    match engine {
        EngineName::Vllm => vllm::cli_flags(),
        EngineName::LlamaCpp => llama_server::cli_flags(),
        EngineName::Sglang => sglang::cli_flags(),
        EngineName::Tgi => tgi::cli_flags(),
        EngineName::TensorRt | EngineName::OpenAi | EngineName::Transformers => Vec::new(),
    }
}

/// The engine version `engine`'s flag table was checked against, where a test checks it.
pub fn flags_version(engine: EngineName) -> Option<&'static str> {
    server(engine).and_then(|s| s.flags_version)
}

/// Every server spec llem knows (the metric names of any of them may show up in a scrape).
pub fn servers() -> impl Iterator<Item = &'static ServerSpec> {
    EngineName::ALL.iter().filter_map(|e| server(*e))
}

/// What `name` means to llem: a gauge some registered engine names in its spec (vLLM v0 and
/// v1, SGLang, llama.cpp, TGI).
pub fn gauge_of(name: &str) -> Option<Gauge> {
    let has = |names: &[&str]| names.contains(&name);
    servers().find_map(|s| {
        let m = &s.metrics;
        if has(m.running) {
            Some(Gauge::Running)
        } else if has(m.waiting) {
            Some(Gauge::Waiting)
        } else if has(m.kv_cache_usage) {
            Some(Gauge::KvCacheUsage)
        } else {
            None
        }
    })
}

/// Prefix-cache counters, whose hits-to-queries ratio over a window is the hit rate:
/// `Some(true)` for hits, `Some(false)` for queries, `None` for other names.
pub fn prefix_cache_counter(name: &str) -> Option<bool> {
    servers().find_map(|s| {
        if s.metrics.prefix_cache_hits.contains(&name) {
            Some(true)
        } else if s.metrics.prefix_cache_queries.contains(&name) {
            Some(false)
        } else {
            None
        }
    })
}

/// Prefix-cache hit-rate gauges (vLLM v0, SGLang), fraction 0-1.
pub fn is_prefix_hit_rate_gauge(name: &str) -> bool {
    servers().any(|s| s.metrics.prefix_hit_rate.contains(&name))
}

/// Where `cfg`'s engine runs, given its runner.
pub fn runtime(cfg: &ExperimentConfig) -> Runtime {
    match cfg.engine {
        EngineName::Transformers => Runtime::Worker,
        EngineName::LlamaCpp if !cfg.is_served() => Runtime::Embedded,
        EngineName::LlamaCpp
        | EngineName::Vllm
        | EngineName::Sglang
        | EngineName::Tgi
        | EngineName::TensorRt
        | EngineName::OpenAi => Runtime::Server,
    }
}

/// What a local run of `engine`'s server starts (`llem doctor` asks it for its version).
pub fn local_program(engine: EngineName) -> Option<LocalProgram> {
    server(engine).map(|s| s.local)
}

/// The container image of `engine` when `images:` names none.
pub fn default_image(engine: EngineName) -> Option<&'static str> {
    match engine {
        EngineName::Transformers => Some(transformers::DEFAULT_IMAGE),
        EngineName::LlamaCpp
        | EngineName::Vllm
        | EngineName::Sglang
        | EngineName::Tgi
        | EngineName::TensorRt
        | EngineName::OpenAi => server(engine).map(|s| s.default_image),
    }
}

/// The batch a cell runs under — the one resolution every reader uses (the window's target,
/// batch utilisation, `result.json`'s `extended_metrics.batch.configured_batch_size`, the
/// records' `max_num_seqs`): for a server, what it can run at once — the smaller of
/// `traffic.max_concurrency` (what the client sends) and its batch limit field (what the
/// server admits), either when only one is set, null when neither is (the server decides);
/// for the embedded engine its
/// `batch_size`; for transformers the rows of one `generate()` (1 under latency profiling,
/// which streams one request at a time).
pub fn configured_batch_size(cfg: &ExperimentConfig) -> Option<NonZeroU32> {
    match runtime(cfg) {
        Runtime::Server => {
            let sent = cfg.traffic.as_deref().and_then(|t| t.max_concurrency);
            let admitted = server(cfg.engine).and_then(|s| (s.batch_limit)(cfg));
            match (sent, admitted) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        }
        Runtime::Embedded => Some(llamacpp::plan::slots(cfg)),
        Runtime::Worker => Some(transformers::batch_plan(cfg).1),
    }
}

/// Requests a warmup iteration sends to a server whose batch the config leaves open.
const OPEN_SERVER_BATCH: NonZeroU32 = NonZeroU32::new(8).expect("8 is not 0");

/// How `cfg`'s prompts are grouped: the engine section's strategy and token budget, and the
/// configured batch (a server batches by itself; "a batch" is then what it runs at once,
/// which is what a warmup iteration sends).
pub fn batching(cfg: &ExperimentConfig) -> BatchingSpec {
    let batch_size = configured_batch_size(cfg).unwrap_or(OPEN_SERVER_BATCH);
    match runtime(cfg) {
        Runtime::Worker => {
            let t = cfg.transformers.as_deref().cloned().unwrap_or_default();
            BatchingSpec {
                strategy: t.batching_strategy.unwrap_or(BatchingStrategy::Static),
                batch_size,
                max_tokens_per_batch: t.max_tokens_per_batch,
            }
        }
        Runtime::Embedded | Runtime::Server => {
            let l = cfg.llamacpp.as_deref().cloned().unwrap_or_default();
            BatchingSpec {
                strategy: l.batching_strategy,
                batch_size,
                max_tokens_per_batch: l.max_tokens_per_batch,
            }
        }
    }
}

/// The workload of `cfg` over `prompts`.
pub fn workload(cfg: &ExperimentConfig, prompts: Vec<Prompt>) -> Workload {
    Workload::new(cfg, prompts)
}

/// The session plan for `cfg` on a model trained with `n_ctx_train` positions: its
/// [`batching`], and a context of that many slots (the worker's "slots" are the rows of one
/// `generate()`, padded to the longest prompt).
pub fn context_plan(cfg: &ExperimentConfig, n_ctx_train: u32) -> ContextPlan {
    let batching = batching(cfg);
    ContextPlan {
        batching,
        tokens_per_slot: llamacpp::plan::tokens_per_slot(cfg, n_ctx_train, batching.batch_size),
        n_threads: llamacpp::plan::threads(cfg),
    }
}

/// Whether `engine` can run here, in a few words (`llem config`).
pub fn availability(engine: EngineName, python: Option<&str>) -> String {
    match engine {
        EngineName::LlamaCpp => {
            "built in (llama.cpp through llama-cpp-2); llama-server when served".into()
        }
        EngineName::Transformers => {
            let py = transformers::python_for(python);
            match transformers::check_python(&py, false) {
                Ok(()) => format!("worker ready: {py} imports torch and transformers"),
                Err(why) => format!("unavailable: {why}"),
            }
        }
        EngineName::OpenAi => "any OpenAI-compatible URL".into(),
        EngineName::Vllm | EngineName::Sglang | EngineName::Tgi | EngineName::TensorRt => {
            "launched as a server (local or docker) or reached at external:<url>".into()
        }
    }
}

/// A trace replay can be made: its server can tokenize, and its slice reads and holds
/// requests (the whole file is checked here, so a bad line fails the plan, not a cell).
fn check_trace(cfg: &ExperimentConfig) -> Result<(), String> {
    let Some(trace) = cfg.traffic.as_deref().and_then(|t| t.trace.as_ref()) else {
        return Ok(());
    };
    if server(cfg.engine).and_then(|s| s.tokenize).is_none() {
        return Err(format!(
            "traffic.trace: a replay cuts prompts to exact lengths with the server's own \
             tokenizer (`/tokenize`), which llama-server (engine llamacpp) and vllm have; the \
             {} server has none llem knows",
            cfg.engine
        ));
    }
    crate::workload::trace::replay::read(trace)
        .map(|_| ())
        .map_err(|e| format!("traffic.trace: {e}"))
}

/// Checks, loading nothing, that `cfg` can run here: engine and runner, model file, server
/// CLI or docker, the worker's Python (when `probe_python`; it imports torch, seconds).
/// Returns the model file when the engine reads one (llama.cpp, a GGUF for transformers).
pub fn check_runnable(
    cfg: &ExperimentConfig,
    assets_dir: &Path,
    python: Option<&str>,
    probe_python: bool,
) -> Result<Option<PathBuf>, String> {
    let runner = cfg.runner().map(|r| r.kind());
    match runtime(cfg) {
        Runtime::Worker => {
            let src = transformers::resolve_source(cfg, assets_dir)?;
            if runner == Some(RunnerKind::Docker) {
                // The image brings its own Python; what this host needs is the docker CLI.
                if crate::launch::which("docker").is_none() {
                    return Err(
                        "`runners: {transformers: docker}` needs the docker CLI on PATH".into(),
                    );
                }
            } else if probe_python {
                let python = transformers::python_for(python);
                transformers::check_python(&python, src.gguf_file.is_some())?;
            }
            return Ok(src.local.filter(|p| p.is_file()));
        }
        Runtime::Server => {
            let opts = ServeOptions::new(assets_dir.to_path_buf());
            crate::serving::check_launchable(cfg, server(cfg.engine), &opts)
                .map_err(|e| e.to_string())?;
            check_trace(cfg)?;
            // Only a server that reads model files (llama-server) is handed one; the others
            // load what `model` names.
            let reads_files =
                server(cfg.engine).is_some_and(|s| s.local == LocalProgram::LlamaServer);
            if !reads_files || runner == Some(RunnerKind::External) {
                return Ok(None);
            }
        }
        Runtime::Embedded => {}
    }
    assets::resolve_model(&cfg.model, assets_dir)
        .map(Some)
        .ok_or_else(|| {
            let dir = Path::new(&cfg.model);
            let ggufs = assets::ggufs_in(dir);
            if dir.is_dir() && ggufs.len() > 1 {
                let names: Vec<String> = ggufs
                    .iter()
                    .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .collect();
                return format!(
                    "model `{}` is a directory holding {} GGUF files ({}): name one",
                    cfg.model,
                    ggufs.len(),
                    names.join(", ")
                );
            }
            format!(
                "model `{}` not found: not a GGUF file or a directory holding one, and not in \
                 the asset cache {} (run scripts/fetch-assets.sh for SmolLM2, or give a path \
                 to a .gguf file)",
                cfg.model,
                assets_dir.display()
            )
        })
}

/// What loading an engine needs beyond its config.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// The model file [`check_runnable`] found.
    pub model_file: Option<PathBuf>,
    /// The cell directory: server and worker logs and option files go there.
    pub work_dir: PathBuf,
    /// The asset cache.
    pub assets_dir: PathBuf,
    /// The user config's Python (`python:`, `LLEM_PYTHON`).
    pub python: Option<String>,
    /// The user config's Hugging Face cache (`output.model_cache_dir`).
    pub model_cache_dir: Option<PathBuf>,
    /// Set to give up (Ctrl-C during a long load).
    pub cancel: Arc<AtomicBool>,
}

/// Loads `cfg`'s engine: the model in-process, the worker, or the server (launched, or
/// attached to). `on_launch` hears the process group and container of anything started
/// outside llem as soon as it exists, so a supervisor can stop it if llem dies first.
pub fn load(
    cfg: &ExperimentConfig,
    opts: &LoadOptions,
    on_launch: &mut dyn FnMut(Option<u32>, Option<String>),
) -> Result<Box<dyn Engine>, EngineError> {
    match runtime(cfg) {
        Runtime::Server => {
            let mut serve = ServeOptions::new(opts.work_dir.clone());
            serve.cancel = Some(opts.cancel.clone());
            serve.model_cache_dir = opts.model_cache_dir.clone();
            // SGLang launches through Python too: the same interpreter setting applies.
            serve.python = transformers::python_for(opts.python.as_deref());
            let log = opts.work_dir.join(layout::SERVER_LOG);
            let spec = server(cfg.engine);
            let model_file = opts.model_file.clone();
            let server =
                ServerEngine::start_reporting(cfg, spec, model_file, log, serve, on_launch)?;
            Ok(Box::new(server))
        }
        Runtime::Worker => {
            let mut worker = transformers::WorkerOptions::new(
                transformers::python_for(opts.python.as_deref()),
                opts.work_dir.join(layout::WORKER_LOG),
                opts.assets_dir.clone(),
            );
            worker.cancel = Some(opts.cancel.clone());
            worker.model_cache_dir = opts.model_cache_dir.clone();
            let engine = transformers::TransformersEngine::start(cfg, &worker, &mut |pid, c| {
                on_launch(Some(pid), c)
            })?;
            Ok(Box::new(engine))
        }
        Runtime::Embedded => {
            let path = opts.model_file.as_ref().ok_or_else(|| {
                EngineError::Config(format!("model `{}` is not a file", cfg.model))
            })?;
            let settings = cfg.llamacpp.as_deref().cloned().unwrap_or_default();
            let mut engine = llamacpp::LlamaCppEngine::load(path, &settings)?;
            if let Some(l) = cfg.lora.as_deref() {
                // The plan refused every other form of `lora:` for this engine.
                let adapter = l.adapter_path.as_deref().ok_or_else(|| {
                    EngineError::Config("llamacpp applies `lora.adapter_path` only".into())
                })?;
                #[allow(clippy::cast_possible_truncation)]
                engine.apply_lora(Path::new(adapter), l.scale as f32)?;
            }
            Ok(Box::new(engine))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn cfg(v: Value) -> ExperimentConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn one_batch_per_cell_whatever_the_engine() {
        let size = |c: &ExperimentConfig| configured_batch_size(c).map(NonZeroU32::get);
        let v = cfg(json!({"model": "m", "engine": "vllm", "runners": {"vllm": "local"}}));
        assert_eq!(size(&v), None);
        assert_eq!(batching(&v).batch_size, OPEN_SERVER_BATCH);
        let t =
            cfg(json!({"model": "m", "engine": "vllm", "vllm": {"engine": {"max_num_seqs": 32}}}));
        assert_eq!(size(&t), Some(32));
        let t = cfg(json!({"model": "m", "engine": "vllm", "traffic": {"max_concurrency": 8}}));
        assert_eq!(size(&t), Some(8));
        // The server admits at most its limit, however many the client sends (seen on a real
        // vLLM: max_num_seqs 2 under max_concurrency 4 runs 2 at once).
        let t = cfg(
            json!({"model": "m", "engine": "vllm", "traffic": {"max_concurrency": 4},
            "vllm": {"engine": {"max_num_seqs": 2}}}),
        );
        assert_eq!(size(&t), Some(2));
        let l = cfg(json!({"model": "m.gguf", "llamacpp": {"batch_size": 4}}));
        assert_eq!((runtime(&l), size(&l)), (Runtime::Embedded, Some(4)));
        let s = cfg(
            json!({"model": "m.gguf", "runners": {"llamacpp": "local"}, "llamacpp": {"batch_size": 3}}),
        );
        assert_eq!((runtime(&s), size(&s)), (Runtime::Server, Some(3)));
        let tf = cfg(json!({"model": "m", "engine": "transformers",
            "transformers": {"batch_size": 4}}));
        assert_eq!(size(&tf), Some(4));
        let profiled = cfg(json!({"model": "m", "engine": "transformers",
            "transformers": {"batch_size": 4}, "measurement": {"latency_profiling": true}}));
        assert_eq!(size(&profiled), Some(1));
        let o = cfg(json!({"model": "m", "engine": "openai",
            "runners": {"openai": "external:http://127.0.0.1:9"}}));
        assert_eq!(size(&o), None);
    }

    #[test]
    fn every_server_engine_has_a_spec_and_an_image() {
        for e in EngineName::ALL {
            let spec = server(*e);
            assert_eq!(
                spec.is_some(),
                !matches!(e, EngineName::OpenAi | EngineName::Transformers)
            );
            assert_eq!(default_image(*e).is_some(), *e != EngineName::OpenAi, "{e}");
        }
        assert_eq!(servers().count(), 5);
    }
}
