//! Serving engines: vLLM, SGLang, TensorRT-LLM, TGI and llama.cpp's `llama-server` driven over
//! their OpenAI-compatible HTTP APIs, plus any OpenAI-compatible URL (`engine: openai`).
//!
//! [`ServerEngine::start`] launches the server (a local process, a container) or attaches to
//! a URL and waits until it is healthy; its session sends the workload on the traffic
//! schedule while a scraper reads `/metrics` every second. Dropping the engine stops the
//! server. One tokio runtime per engine, kept for warmup and measurement alike.

pub mod accounting;
pub mod chunk;
pub mod client;
pub mod flags;
pub mod launch;
pub mod prometheus;
pub mod sse;
pub mod traffic;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use llem_config::{Engine as EngineName, ExperimentConfig, RunnerSpec};
use llem_results::result::TrafficSummary;
use llem_results::{MetricSample, stats};

use crate::engine::{
    ContextPlan, Engine, EngineError, EngineInfo, ModelInfo, RequestSink, RunSummary, Session,
};
use crate::workload::{PromptInput, Workload};
use accounting::TimingMode;
use client::{Api, BodyParams, Clock, Endpoint, Prepared, Shared};
use launch::ServerProcess;
use traffic::TrafficPlan;

/// Settings of a serving run that are not in the experiment config.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// How long the server may take to become healthy.
    pub ready_timeout: Duration,
    /// A server that logs nothing for this long while starting is taken as hung.
    pub log_silence_timeout: Duration,
    /// A streamed request with no data for this long fails.
    pub stall_timeout: Duration,
    /// Prometheus scrape interval.
    pub scrape_interval: Duration,
    /// Python for `python -m sglang.launch_server`.
    pub python: String,
    /// The `llama-server` binary (else `llama-server` on PATH, else llem's tool cache).
    pub llama_server: Option<PathBuf>,
    /// Host directory mounted as the model cache in containers.
    pub model_cache_dir: Option<PathBuf>,
    /// Extra options files and the like go here (the cell directory).
    pub work_dir: PathBuf,
    /// Bearer token for the server (from `LLEM_API_KEY` or `OPENAI_API_KEY`); sent with
    /// every request, never written to results or logs.
    pub api_key: Option<String>,
    /// Set to give up waiting for readiness (Ctrl-C during a long model load).
    pub cancel: Option<Arc<std::sync::atomic::AtomicBool>>,
}

impl ServeOptions {
    /// Defaults for a run writing into `work_dir`.
    pub fn new(work_dir: PathBuf) -> ServeOptions {
        ServeOptions {
            ready_timeout: Duration::from_secs(1200),
            log_silence_timeout: Duration::from_secs(600),
            stall_timeout: Duration::from_secs(300),
            scrape_interval: Duration::from_secs(1),
            python: std::env::var("LLEM_PYTHON").unwrap_or_else(|_| "python3".into()),
            llama_server: std::env::var_os("LLEM_LLAMA_SERVER").map(PathBuf::from),
            model_cache_dir: None,
            work_dir,
            api_key: API_KEY_ENV
                .iter()
                .find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty())),
            cancel: None,
        }
    }
}

/// Environment variables an external endpoint's API key is read from, in order.
pub const API_KEY_ENV: &[&str] = &["LLEM_API_KEY", "OPENAI_API_KEY"];

/// The default container image of each engine (`images:` overrides it).
pub fn default_image(engine: EngineName) -> Option<&'static str> {
    Some(match engine {
        EngineName::Vllm => "vllm/vllm-openai:v0.11.0",
        EngineName::Sglang => "lmsysorg/sglang:v0.5.3-cu126",
        EngineName::Tgi => "ghcr.io/huggingface/text-generation-inference:3.3.6",
        EngineName::TensorRt => "nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
        EngineName::LlamaCpp => "ghcr.io/ggml-org/llama.cpp:server",
        // The image Hugging Face builds for its own GPU CI: torch, transformers, accelerate.
        EngineName::Transformers => "huggingface/transformers-pytorch-gpu:latest",
        _ => return None,
    })
}

/// `docker run --gpus` value: the devices `CUDA_VISIBLE_DEVICES` names, else all.
pub fn docker_gpus() -> String {
    match std::env::var("CUDA_VISIBLE_DEVICES") {
        Ok(v) if !v.trim().is_empty() => format!("\"device={}\"", v.trim()),
        _ => "all".into(),
    }
}

/// The start of every `docker run` llem makes: removed on exit, `-i` when llem talks to it on
/// stdin, named, labelled (`docker ps --filter label=llem` finds them all), `--gpus` when
/// given, host IPC (NCCL and torch's shared-memory tensors need it), the Hugging Face cache,
/// and the hub token passed by name.
pub fn docker_run(
    docker: &str,
    name: &str,
    engine: EngineName,
    attach_stdin: bool,
    gpus: Option<String>,
    hf_cache: Option<&std::path::Path>,
) -> Vec<String> {
    let mut argv: Vec<String> = vec![docker.into(), "run".into(), "--rm".into()];
    if attach_stdin {
        argv.push("-i".into());
    }
    argv.extend(["--name".into(), name.into()]);
    argv.extend(["--label".into(), "llem=1".into()]);
    argv.extend(["--label".into(), format!("llem.engine={engine}")]);
    argv.extend([
        "--label".into(),
        format!("llem.runner_pid={}", std::process::id()),
    ]);
    if let Some(g) = gpus {
        argv.extend(["--gpus".into(), g]);
    }
    argv.extend(["--ipc".into(), "host".into()]);
    if let Some(c) = hf_cache {
        argv.extend([
            "-v".into(),
            format!("{}:/root/.cache/huggingface", c.display()),
        ]);
    }
    for k in ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"] {
        if std::env::var_os(k).is_some() {
            // Passed by name: the value never appears on a command line or in a log.
            argv.extend(["-e".into(), k.into()]);
        }
    }
    argv
}

/// Hugging Face cache mounted into containers: the option, `HF_HOME`, else
/// `~/.cache/huggingface`.
pub fn hf_cache(option: Option<&PathBuf>) -> Option<PathBuf> {
    option.cloned().or_else(|| {
        std::env::var_os("HF_HOME").map(PathBuf::from).or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/huggingface"))
        })
    })
}

/// The requests a server runs at once: `traffic.max_concurrency`, else the engine's batch
/// setting when the config gives one.
pub fn target_concurrency(cfg: &ExperimentConfig) -> Option<u32> {
    if let Some(c) = cfg.traffic.as_deref().and_then(|t| t.max_concurrency) {
        return Some(c);
    }
    match cfg.engine {
        EngineName::Vllm => cfg
            .vllm
            .as_deref()
            .and_then(|v| v.engine.as_ref())
            .and_then(|e| e.max_num_seqs),
        EngineName::Sglang => cfg.sglang.as_deref().and_then(|s| s.max_running_requests),
        EngineName::Tgi => cfg.tgi.as_deref().and_then(|t| t.max_batch_size),
        EngineName::TensorRt => cfg.tensorrt.as_deref().and_then(|t| t.max_batch_size),
        EngineName::LlamaCpp => Some(cfg.llamacpp.as_deref().map_or(1, |l| l.batch_size.max(1))),
        _ => None,
    }
}

/// Where `llama-server` is: the option, `PATH`, or the tool cache of
/// `scripts/build-llama-server.sh`.
pub fn find_llama_server(explicit: Option<&PathBuf>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return p.is_file().then(|| p.clone());
    }
    launch::which("llama-server").or_else(|| {
        let tools = std::env::var_os("LLEM_TOOLS")
            .map(PathBuf::from)
            .unwrap_or_else(|| crate::assets::cache_dir().join("tools"));
        let p = tools.join("bin/llama-server");
        p.is_file().then_some(p)
    })
}

/// Checks, without starting anything, that `cfg`'s server can be started here: its CLI (or
/// `docker`) is installed. `Ok` for external URLs.
pub fn check_launchable(cfg: &ExperimentConfig, opts: &ServeOptions) -> Result<(), String> {
    match cfg.runner() {
        Some(RunnerSpec::External { .. }) => Ok(()),
        None => Err(format!(
            "engine `{}` needs a server URL: runners: {{{}: \"external:http://host:port\"}}",
            cfg.engine, cfg.engine
        )),
        Some(RunnerSpec::Docker { .. }) => launch::which("docker").map(|_| ()).ok_or_else(|| {
            "runner docker: `docker` is not on PATH (install Docker, or use runner local)".into()
        }),
        Some(RunnerSpec::Local) => {
            let (program, hint) = match cfg.engine {
                EngineName::Vllm => ("vllm".to_string(), "pip install vllm"),
                EngineName::Sglang => (opts.python.clone(), "pip install \"sglang[all]\""),
                EngineName::TensorRt => ("trtllm-serve".into(), "pip install tensorrt-llm"),
                EngineName::Tgi => (
                    "text-generation-launcher".into(),
                    "see huggingface/text-generation-inference, or use runner docker",
                ),
                EngineName::LlamaCpp => {
                    return find_llama_server(opts.llama_server.as_ref())
                        .map(|_| ())
                        .ok_or_else(|| {
                            "runner local for llamacpp needs `llama-server`: not on PATH, not in \
                         LLEM_LLAMA_SERVER, not in llem's tool cache (run \
                         scripts/build-llama-server.sh)"
                                .into()
                        });
                }
                _ => return Err(format!("engine `{}` has no local server", cfg.engine)),
            };
            launch::which(&program).map(|_| ()).ok_or_else(|| {
                format!(
                    "runner local for {}: `{program}` is not on PATH ({hint})",
                    cfg.engine
                )
            })
        }
        Some(RunnerSpec::Embedded) => Err(format!("engine `{}` is not a server", cfg.engine)),
    }
}

/// A healthy server and the client that talks to it.
pub struct ServerEngine {
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    endpoint: Arc<Endpoint>,
    process: Option<Mutex<ServerProcess>>,
    info: EngineInfo,
    model: ModelInfo,
    cfg: ExperimentConfig,
    opts: ServeOptions,
    metrics_available: bool,
}

impl ServerEngine {
    /// Launches (or attaches to) `cfg`'s server, logging to `log_path`, and waits until it
    /// answers its health check. `model_file` is the GGUF for `llama-server`.
    pub fn start(
        cfg: &ExperimentConfig,
        model_file: Option<PathBuf>,
        log_path: PathBuf,
        opts: ServeOptions,
    ) -> Result<ServerEngine, EngineError> {
        Self::start_reporting(cfg, model_file, log_path, opts, &mut |_, _| {})
    }

    /// [`ServerEngine::start`], telling `on_launch` the server's process group and container
    /// as soon as it is spawned — before it is healthy, which can take many minutes — so a
    /// supervisor can stop it if this process dies first.
    pub fn start_reporting(
        cfg: &ExperimentConfig,
        model_file: Option<PathBuf>,
        log_path: PathBuf,
        opts: ServeOptions,
        on_launch: &mut dyn FnMut(Option<u32>, Option<String>),
    ) -> Result<ServerEngine, EngineError> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .thread_name("llem-client")
            .build()
            .map_err(|e| EngineError::Config(format!("cannot start the HTTP runtime: {e}")))?;
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(usize::MAX)
            // Shorter than the usual server keep-alive (5 s in llama-server's httplib), so
            // the pool rarely hands out a connection the server is closing.
            .pool_idle_timeout(Duration::from_secs(3))
            .tcp_nodelay(true)
            .build()
            .map_err(|e| EngineError::Config(format!("cannot build the HTTP client: {e}")))?;
        let runner = cfg.runner().cloned().ok_or_else(|| {
            EngineError::Config(format!(
                "engine `{}` needs runners: {{{}: \"external:<url>\"}}",
                cfg.engine, cfg.engine
            ))
        })?;
        check_launchable(cfg, &opts).map_err(EngineError::Config)?;
        let model_arg = match (&model_file, cfg.engine) {
            (Some(f), EngineName::LlamaCpp) => flags::ModelArg::File(f.clone()),
            _ => flags::ModelArg::Name(cfg.model.clone()),
        };
        let (base_url, process, health_path) = match &runner {
            RunnerSpec::External { url } => {
                (url.trim_end_matches('/').to_string(), None, "/health")
            }
            RunnerSpec::Local => {
                let port = launch::free_port()?;
                let cl = flags::command_line(cfg, &model_arg, "127.0.0.1", port, &opts.python)
                    .map_err(EngineError::Config)?;
                let mut argv = cl.program.clone();
                if cfg.engine == EngineName::LlamaCpp
                    && let Some(p) = find_llama_server(opts.llama_server.as_ref())
                {
                    argv = vec![p.display().to_string()];
                }
                argv.extend(cl.args.iter().cloned());
                if let Some((flag, value)) = &cl.extra_options {
                    let path = opts.work_dir.join("engine_extra_options.yaml");
                    write_extra(&path, value)?;
                    argv.extend([flag.clone(), path.display().to_string()]);
                }
                tracing::info!(command = %argv.join(" "), "starting server");
                let p = ServerProcess::spawn_local(&argv, &[], &log_path)?;
                on_launch(Some(p.pid()), None);
                (format!("http://127.0.0.1:{port}"), Some(p), cl.health_path)
            }
            RunnerSpec::Docker { image } => {
                let port = launch::free_port()?;
                let image = image
                    .clone()
                    .or_else(|| cfg.images.get(&cfg.engine).cloned())
                    .or_else(|| default_image(cfg.engine).map(String::from))
                    .ok_or_else(|| {
                        EngineError::Config(format!("no container image for `{}`", cfg.engine))
                    })?;
                let (argv, name) = docker_argv(cfg, &model_arg, &image, port, &opts)?;
                tracing::info!(command = %argv.join(" "), "starting container");
                let p = ServerProcess::spawn_container(&argv, &name, &log_path)?;
                on_launch(Some(p.pid()), Some(name));
                (format!("http://127.0.0.1:{port}"), Some(p), "/health")
            }
            RunnerSpec::Embedded => {
                return Err(EngineError::Config(format!(
                    "engine `{}` with runner embedded is not a server",
                    cfg.engine
                )));
            }
        };
        let api_key = opts.api_key.clone();
        let mut engine = ServerEngine {
            rt,
            http,
            endpoint: Arc::new(Endpoint {
                base_url,
                api_key,
                model: cfg.model.clone(),
                continuous_usage: matches!(cfg.engine, EngineName::Vllm | EngineName::Sglang),
                stall_timeout: opts.stall_timeout,
            }),
            process: process.map(Mutex::new),
            info: EngineInfo {
                name: cfg.engine.as_str(),
                version: None,
                system_info: Some(format!("runner {runner}")),
            },
            model: ModelInfo::default(),
            cfg: cfg.clone(),
            opts,
            metrics_available: false,
        };
        engine.wait_ready(health_path)?;
        engine.discover();
        Ok(engine)
    }

    /// The server's process id, for local and container runs.
    pub fn server_pid(&self) -> Option<u32> {
        self.process
            .as_ref()
            .and_then(|p| p.lock().ok().map(|p| p.pid()))
    }

    /// `Some(why)` when a launched server has died, with its log tail.
    fn server_died(&self) -> Option<String> {
        let p = self.process.as_ref()?;
        let mut p = p.lock().ok()?;
        p.exited().map(|status| {
            format!(
                "the server exited ({status}); its log ends:\n{}",
                p.log_tail(20)
            )
        })
    }

    fn get(&self, path: &str, timeout: Duration) -> Result<(u16, String), String> {
        let url = format!("{}{}", self.endpoint.base_url, path);
        let mut rb = self.http.get(&url).timeout(timeout);
        if let Some(k) = &self.endpoint.api_key {
            rb = rb.bearer_auth(k);
        }
        self.rt.block_on(async move {
            let r = rb.send().await.map_err(|e| client::error_chain(&e))?;
            let status = r.status().as_u16();
            let body = r.text().await.map_err(|e| client::error_chain(&e))?;
            Ok((status, body))
        })
    }

    fn wait_ready(&mut self, health_path: &str) -> Result<(), EngineError> {
        let start = Instant::now();
        let mut last;
        loop {
            if self
                .opts
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed))
            {
                return Err(EngineError::Cancelled);
            }
            if let Some(died) = self.server_died() {
                return Err(EngineError::Load {
                    model: self.cfg.model.clone(),
                    reason: died,
                });
            }
            match self.get(health_path, Duration::from_secs(5)) {
                Ok((200, _)) => return Ok(()),
                Ok((code, body)) => last = format!("HTTP {code} {}", body.trim()),
                Err(e) => last = e,
            }
            // An external server with no /health: a model list is as good.
            if self.process.is_none()
                && matches!(self.get("/v1/models", Duration::from_secs(5)), Ok((200, _)))
            {
                return Ok(());
            }
            let elapsed = start.elapsed();
            let silence = self
                .process
                .as_ref()
                .and_then(|p| p.lock().ok().and_then(|p| p.log_silence()));
            let hung = silence.is_some_and(|s| s > self.opts.log_silence_timeout);
            if elapsed > self.opts.ready_timeout || hung {
                let tail = self
                    .process
                    .as_ref()
                    .and_then(|p| p.lock().ok().map(|p| p.log_tail(20)))
                    .unwrap_or_default();
                return Err(EngineError::Load {
                    model: self.cfg.model.clone(),
                    reason: format!(
                        "{} did not become healthy {} (last: {last}){}",
                        self.endpoint.base_url,
                        if hung {
                            format!(
                                "and logged nothing for {:.0} s",
                                self.opts.log_silence_timeout.as_secs_f64()
                            )
                        } else {
                            format!("within {:.0} s", self.opts.ready_timeout.as_secs_f64())
                        },
                        if tail.is_empty() {
                            String::new()
                        } else {
                            format!("; its log ends:\n{tail}")
                        }
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Reads the served model's name and limits, the server version and whether `/metrics`
    /// answers (best effort: servers differ).
    fn discover(&mut self) {
        if let Ok((200, body)) = self.get("/v1/models", Duration::from_secs(10))
            && let Ok(v) = serde_json::from_str::<Value>(&body)
            && let Some(data) = v.get("data").and_then(Value::as_array)
        {
            let ids: Vec<&str> = data.iter().filter_map(|m| m.get("id")?.as_str()).collect();
            if !ids.contains(&self.cfg.model.as_str())
                && let [only] = ids.as_slice()
            {
                let mut e = (*self.endpoint).clone();
                e.model = (*only).to_string();
                self.endpoint = Arc::new(e);
            }
            if let Some(first) = data.first() {
                self.model.context_length = first
                    .get("max_model_len")
                    .or_else(|| first.pointer("/meta/n_ctx_train"))
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok());
                self.model.parameters = first.pointer("/meta/n_params").and_then(Value::as_u64);
                self.model.vocab_size = first
                    .pointer("/meta/n_vocab")
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok());
                self.model.hidden_size = first
                    .pointer("/meta/n_embd")
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok());
                self.model.file_size_bytes = first.pointer("/meta/size").and_then(Value::as_u64);
            }
        }
        if let Ok((200, body)) = self.get("/version", Duration::from_secs(5))
            && let Ok(v) = serde_json::from_str::<Value>(&body)
        {
            self.info.version = v.get("version").and_then(Value::as_str).map(String::from);
        }
        if self.info.version.is_none()
            && let Ok((200, body)) = self.get("/props", Duration::from_secs(5))
            && let Ok(v) = serde_json::from_str::<Value>(&body)
        {
            self.info.version = v
                .get("build_info")
                .and_then(Value::as_str)
                .map(String::from);
        }
        self.metrics_available =
            matches!(self.get("/metrics", Duration::from_secs(5)), Ok((200, _)));
    }

    fn body_params(&self, workload: &Workload, max_tokens: u32, ignore_eos: bool) -> BodyParams {
        let s = &workload.sampling;
        let mut standard = Map::new();
        if s.greedy {
            standard.insert("temperature".into(), json!(0.0));
        } else {
            standard.insert("temperature".into(), json!(s.temperature));
            if s.top_p < 1.0 {
                standard.insert("top_p".into(), json!(s.top_p));
            }
        }
        standard.insert("seed".into(), json!(s.seed));
        let mut extended = Map::new();
        if !s.greedy && s.top_k > 0 {
            extended.insert("top_k".into(), json!(s.top_k));
        }
        if let Some(p) = s.min_p.filter(|_| !s.greedy) {
            extended.insert("min_p".into(), json!(p));
        }
        if (s.repetition_penalty - 1.0).abs() > f64::EPSILON {
            extended.insert("repetition_penalty".into(), json!(s.repetition_penalty));
        }
        if let Some(m) = s.min_new_tokens {
            extended.insert("min_tokens".into(), json!(m));
        }
        if ignore_eos {
            extended.insert("ignore_eos".into(), Value::Bool(true));
        }
        // Per-request fields of the engine sections.
        let section: Option<Value> = match self.cfg.engine {
            EngineName::Vllm => self
                .cfg
                .vllm
                .as_deref()
                .and_then(|v| v.sampling.as_ref())
                .and_then(|s| serde_json::to_value(s).ok()),
            EngineName::TensorRt => self
                .cfg
                .tensorrt
                .as_deref()
                .and_then(|t| t.sampling.as_ref())
                .and_then(|s| serde_json::to_value(s).ok()),
            _ => None,
        };
        if let Some(Value::Object(m)) = section {
            for (k, v) in m {
                if !v.is_null() && k != "max_tokens" {
                    extended.insert(k, v);
                }
            }
        }
        if let Some(b) = self
            .cfg
            .vllm
            .as_deref()
            .and_then(|v| v.beam_search.as_ref())
            && self.cfg.engine == EngineName::Vllm
        {
            extended.insert("use_beam_search".into(), Value::Bool(true));
            if let Some(w) = b.beam_width {
                extended.insert("best_of".into(), json!(w));
            }
            if let Some(l) = b.length_penalty {
                extended.insert("length_penalty".into(), json!(l));
            }
            if let Some(e) = b.early_stopping {
                extended.insert("early_stopping".into(), json!(e));
            }
        }
        BodyParams {
            max_tokens,
            standard,
            extended,
        }
    }

    fn prepare(&self, workload: &Workload) -> Vec<Prepared> {
        let default_max = workload.max_output_tokens.unwrap_or(256);
        workload
            .prompts
            .iter()
            .map(|p| {
                let max_tokens = p.output_tokens.unwrap_or(default_max).max(1);
                let params = self.body_params(workload, max_tokens, p.ignore_eos);
                let (api, text) = match &p.input {
                    PromptInput::Text { text, chat: true } => (Api::Chat, text.clone()),
                    PromptInput::Text { text, chat: false } => (Api::Completions, text.clone()),
                    PromptInput::Tokens { n_tokens, seed } => {
                        (Api::Completions, synthetic_text(*n_tokens, *seed))
                    }
                };
                Prepared {
                    api,
                    body: Arc::new(client::body(&self.endpoint, api, &text, &params)),
                    max_tokens,
                }
            })
            .collect()
    }
}

/// A prompt of about `n` tokens for a server whose vocabulary llem does not hold: common
/// words that are one token each in the usual BPE vocabularies. The server's usage gives the
/// exact count.
fn synthetic_text(n: u32, seed: u64) -> String {
    const WORDS: &[&str] = &[
        " the", " of", " and", " to", " in", " is", " that", " for", " it", " as", " with", " was",
        " on", " be", " at", " by", " this", " had", " not", " are", " but", " from", " or",
        " have", " an", " they", " which", " one", " you", " were",
    ];
    let mut rng = llem_config::rng::SplitMix64::new(seed);
    let mut s = String::with_capacity(n as usize * 5);
    for _ in 0..n {
        let i = rng.below(WORDS.len() as u64) as usize;
        s.push_str(WORDS.get(i).copied().unwrap_or(" the"));
    }
    s
}

fn write_extra(path: &std::path::Path, value: &Value) -> Result<(), EngineError> {
    // JSON is YAML, and TensorRT-LLM reads this file as YAML.
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    llem_results::write_atomic(path, text.as_bytes())
        .map_err(|e| EngineError::Config(format!("cannot write {}: {e}", path.display())))
}

/// `docker run` for `cfg`: named and labelled, GPUs as CUDA_VISIBLE_DEVICES says, host IPC,
/// the port published on loopback, the model cache mounted, removed on exit.
fn docker_argv(
    cfg: &ExperimentConfig,
    model: &flags::ModelArg,
    image: &str,
    port: u16,
    opts: &ServeOptions,
) -> Result<(Vec<String>, String), EngineError> {
    let mut model = model.clone();
    let mut mounts: Vec<String> = Vec::new();
    if let flags::ModelArg::File(f) = &model {
        let dir = f
            .parent()
            .map(|d| d.display().to_string())
            .unwrap_or_default();
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        mounts.extend(["-v".into(), format!("{dir}:/models:ro")]);
        model = flags::ModelArg::File(PathBuf::from("/models").join(name));
    }
    let inner = flags::container_port(cfg.engine);
    let cl = flags::command_line(cfg, &model, "0.0.0.0", inner, "python3")
        .map_err(EngineError::Config)?;
    let name = format!("llem-{}-{}-{}", cfg.engine, std::process::id(), port);
    let wants_gpus = cfg.engine != EngineName::LlamaCpp
        || cfg.llamacpp.as_deref().is_some_and(|l| l.n_gpu_layers != 0);
    let cache = hf_cache(opts.model_cache_dir.as_ref());
    let mut argv = docker_run(
        "docker",
        &name,
        cfg.engine,
        false,
        wants_gpus.then(docker_gpus),
        cache.as_deref(),
    );
    argv.extend(["-p".into(), format!("127.0.0.1:{port}:{inner}")]);
    argv.extend(mounts);
    if let Some((flag, value)) = &cl.extra_options {
        let host_path = opts.work_dir.join("engine_extra_options.yaml");
        write_extra(&host_path, value)?;
        argv.extend([
            "-v".into(),
            format!("{}:/llem/extra_options.yaml:ro", host_path.display()),
        ]);
        argv.push(image.into());
        argv.extend(cl.container_entry.iter().cloned());
        argv.extend(cl.args.iter().cloned());
        argv.extend([flag.clone(), "/llem/extra_options.yaml".into()]);
    } else {
        argv.push(image.into());
        argv.extend(cl.container_entry.iter().cloned());
        argv.extend(cl.args.iter().cloned());
    }
    Ok((argv, name))
}

impl Drop for ServerEngine {
    fn drop(&mut self) {
        if let Some(p) = self.process.take()
            && let Ok(mut p) = p.into_inner()
        {
            p.stop();
        }
    }
}

impl Engine for ServerEngine {
    fn info(&self) -> EngineInfo {
        self.info.clone()
    }
    fn model_info(&self) -> &ModelInfo {
        &self.model
    }
    fn n_ctx_train(&self) -> u32 {
        self.model.context_length.unwrap_or(0)
    }
    fn has_chat_template(&self) -> bool {
        true
    }
    fn open(&self, _plan: ContextPlan) -> Result<Box<dyn Session + '_>, EngineError> {
        Ok(Box::new(ServerSession { engine: self }))
    }
}

/// Sends workloads to a running server.
struct ServerSession<'a> {
    engine: &'a ServerEngine,
}

impl Session for ServerSession<'_> {
    fn run(
        &mut self,
        workload: &Workload,
        sink: &mut dyn RequestSink,
    ) -> Result<RunSummary, EngineError> {
        let e = self.engine;
        let requests = Arc::new(e.prepare(workload));
        let plan = workload
            .traffic
            .clone()
            .unwrap_or_else(|| TrafficPlan::all_at_once(requests.len() as u32));
        let offsets = plan.offsets(requests.len()).map_err(EngineError::Config)?;
        let clock = Clock {
            epoch: Instant::now()
                .checked_sub(Duration::from_secs_f64(sink.now_s().max(0.0)))
                .unwrap_or_else(Instant::now),
        };
        let shared = Arc::new(Shared::default());
        let (tx, rx) = mpsc::channel();
        // The scraper's first reading is taken before the first request is sent, so counters
        // (tokens generated, requests served) difference cleanly over the run.
        let (first_tx, first_rx) = tokio::sync::oneshot::channel();
        let scraper = e.metrics_available.then(|| {
            e.rt.spawn(scrape(
                e.http.clone(),
                format!("{}/metrics", e.endpoint.base_url),
                e.opts.scrape_interval,
                clock,
                shared.clone(),
                first_tx,
            ))
        });
        if scraper.is_some() {
            let _ = e
                .rt
                .block_on(async { tokio::time::timeout(Duration::from_secs(5), first_rx).await });
        }
        let driver = e.rt.spawn(client::drive(client::Dispatch {
            http: e.http.clone(),
            endpoint: e.endpoint.clone(),
            requests: requests.clone(),
            plan: plan.clone(),
            offsets,
            clock,
            shared: shared.clone(),
            done: tx,
        }));
        // What the summary needs of each request; the records themselves go to the sink.
        let (mut lags_ms, mut submits) = (Vec::new(), Vec::new());
        let (mut succeeded, mut failed) = (0usize, 0usize);
        let (mut mode, mut all_usage, mut all_input_usage) =
            (TimingMode::TrueStreaming, true, true);
        let mut reported_tokens = 0u64;
        let outcome: Result<(), EngineError> = loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(f) => {
                    mode = mode.max(f.mode);
                    all_usage &= f.from_usage || !f.record.success;
                    all_input_usage &= f.input_from_usage || !f.record.success;
                    let r = &f.record;
                    submits.push(r.submit_s);
                    lags_ms.extend(r.scheduled_s.map(|s| (r.submit_s - s) * 1000.0));
                    if r.success {
                        succeeded += 1;
                    } else {
                        failed += 1;
                    }
                    sink.on_done(f.record);
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break Ok(()),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let tokens = shared.tokens.load(Ordering::Relaxed);
            if tokens > reported_tokens {
                let n = u32::try_from(tokens - reported_tokens).unwrap_or(u32::MAX);
                sink.on_tokens(u32::MAX, sink.now_s(), n);
                reported_tokens = tokens;
            }
            if sink.cancelled() {
                break Err(EngineError::Cancelled);
            }
            if let Some(died) = e.server_died() {
                break Err(EngineError::Inference(died));
            }
        };
        shared.stop.store(true, Ordering::Relaxed);
        shared.stopped.notify_one();
        driver.abort();
        let samples = match scraper {
            Some(h) => e.rt.block_on(h).unwrap_or_default(),
            None => Vec::new(),
        };
        outcome?;
        let mut warnings = Vec::new();
        if let Some(n) = workload
            .max_input_tokens
            .filter(|_| e.cfg.engine != EngineName::Vllm)
        {
            warnings.push(format!(
                "max_input_tokens = {n} is not enforced by the {} server (no per-request \
                 truncation in its API): prompts were sent whole",
                e.cfg.engine
            ));
        }
        if succeeded > 0 && !all_usage {
            warnings.push(
                "the server reported no token usage for some requests: their output tokens are \
                 llem's count of streamed chunks (one token per chunk)"
                    .into(),
            );
        }
        if succeeded > 0 && !all_input_usage {
            warnings.push(
                "the server reported no prompt token counts for some requests: their input \
                 tokens are recorded as 0"
                    .into(),
            );
        }
        let lags_ms = stats::sorted(lags_ms);
        let send_span = {
            let lo = submits.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = submits.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            (hi - lo).max(0.0)
        };
        let sent = submits.len();
        let target = target_concurrency(&e.cfg).or(plan.max_concurrency);
        Ok(RunSummary {
            num_batches: 0,
            effective_batch_size: 0.0,
            configured_batch_size: target.unwrap_or(0),
            padding_overhead: 0.0,
            truncated_prompts: 0,
            kv_cache_bytes: None,
            warnings,
            latency_mode: Some(mode.as_str()),
            memory: None,
            server_metrics: samples,
            traffic: Some(TrafficSummary {
                arrival: plan.arrival.to_string(),
                rate_qps: plan.rate_qps,
                burstiness: plan.burstiness,
                max_concurrency: plan.max_concurrency,
                seed: plan.seed,
                requests_sent: sent as u32,
                requests_failed: failed as u32,
                achieved_rate_qps: (send_span > 0.0 && sent > 1)
                    .then(|| (sent - 1) as f64 / send_span),
                dispatch_lag_p50_ms: stats::percentile(&lags_ms, 50.0),
                dispatch_lag_p99_ms: stats::percentile(&lags_ms, 99.0),
                endpoint: e.endpoint.base_url.clone(),
                api: if requests.iter().any(|r| r.api == Api::Chat) {
                    "chat_completions".into()
                } else {
                    "completions".into()
                },
                token_count_source: if all_usage { "usage" } else { "client" }.into(),
            }),
        })
    }

    fn kv_cache_bytes(&self) -> Option<u64> {
        None
    }
}

/// Wait before the last scrape of a run.
const FINAL_SCRAPE_SETTLE: Duration = Duration::from_millis(300);

/// Reads `/metrics` every `interval` until told to stop; returns every sample but
/// histogram buckets.
async fn scrape(
    http: reqwest::Client,
    url: String,
    interval: Duration,
    clock: Clock,
    shared: Arc<Shared>,
    first: tokio::sync::oneshot::Sender<()>,
) -> Vec<MetricSample> {
    let mut out = Vec::new();
    let mut first = Some(first);
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shared.stopped.notified() => {}
        }
        let stop = shared.stop.load(Ordering::Relaxed);
        if stop {
            // Servers update their counters just after a request's last chunk: let the
            // end-of-run reading settle so counters difference exactly over the run.
            tokio::time::sleep(FINAL_SCRAPE_SETTLE).await;
        }
        let got = async {
            let r = http
                .get(&url)
                .timeout(interval.max(Duration::from_secs(2)))
                .send()
                .await
                .ok()?;
            r.text().await.ok()
        }
        .await;
        if let Some(body) = got {
            let t = clock.now();
            out.extend(
                prometheus::parse(&body)
                    .filter(|s| !prometheus::dropped(s.name))
                    .map(|s| MetricSample {
                        t_s: t,
                        metric: s.name.to_string(),
                        labels: s.labels.to_string(),
                        value: s.value,
                    }),
            );
        }
        if let Some(f) = first.take() {
            let _ = f.send(());
        }
        if stop {
            return out;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn cfg(v: Value) -> ExperimentConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn docker_runs_are_named_labelled_published_on_loopback_and_mounted() {
        let c = cfg(
            json!({"model": "meta-llama/Llama-3.1-8B-Instruct", "engine": "vllm",
            "runners": {"vllm": "docker"}, "vllm": {"engine": {"max_num_seqs": 64}}}),
        );
        let mut opts = ServeOptions::new(std::env::temp_dir());
        opts.model_cache_dir = Some(PathBuf::from("/data/hf"));
        let (argv, name) = docker_argv(
            &c,
            &flags::ModelArg::Name(c.model.clone()),
            "vllm/vllm-openai:v0.11.0",
            40123,
            &opts,
        )
        .unwrap();
        let a = argv.join(" ");
        assert!(a.starts_with("docker run --rm --name llem-vllm-"), "{a}");
        assert!(name.starts_with("llem-vllm-"));
        for want in [
            "--label llem=1",
            "--ipc host",
            "-p 127.0.0.1:40123:8000",
            "-v /data/hf:/root/.cache/huggingface",
            "vllm/vllm-openai:v0.11.0 meta-llama/Llama-3.1-8B-Instruct --host 0.0.0.0 --port 8000",
            "--max-num-seqs 64",
        ] {
            assert!(a.contains(want), "{want} not in {a}");
        }
        assert!(a.contains("--gpus"));
        // A GGUF is mounted read-only and named inside the container; a CPU llama.cpp run
        // asks for no GPU.
        let l = cfg(
            json!({"model": "x.gguf", "engine": "llamacpp", "runners": {"llamacpp": "docker"}}),
        );
        let (argv, _) = docker_argv(
            &l,
            &flags::ModelArg::File(PathBuf::from("/models/dir/x.gguf")),
            "ghcr.io/ggml-org/llama.cpp:server",
            40124,
            &opts,
        )
        .unwrap();
        let a = argv.join(" ");
        assert!(
            a.contains("-v /models/dir:/models:ro") && a.contains("-m /models/x.gguf"),
            "{a}"
        );
        assert!(!a.contains("--gpus"), "{a}");
        assert!(a.contains("-p 127.0.0.1:40124:8080"));
    }

    #[test]
    fn launchability_names_what_is_missing() {
        let opts = ServeOptions::new(std::env::temp_dir());
        let v = cfg(json!({"model": "m", "engine": "vllm", "runners": {"vllm": "local"}}));
        if launch::which("vllm").is_none() {
            let e = check_launchable(&v, &opts).unwrap_err();
            assert!(
                e.contains("`vllm` is not on PATH") && e.contains("pip install vllm"),
                "{e}"
            );
        }
        let ext = cfg(
            json!({"model": "m", "engine": "openai", "runners": {"openai": "external:http://127.0.0.1:9"}}),
        );
        assert!(check_launchable(&ext, &opts).is_ok());
        assert_eq!(target_concurrency(&v), None);
        let t =
            cfg(json!({"model": "m", "engine": "vllm", "vllm": {"engine": {"max_num_seqs": 32}}}));
        assert_eq!(target_concurrency(&t), Some(32));
        let t = cfg(json!({"model": "m", "engine": "vllm", "traffic": {"max_concurrency": 8}}));
        assert_eq!(target_concurrency(&t), Some(8));
    }

    #[test]
    fn synthetic_text_is_seeded_and_sized() {
        let a = synthetic_text(50, 1);
        assert_eq!(a, synthetic_text(50, 1));
        assert_ne!(a, synthetic_text(50, 2));
        assert_eq!(a.split_whitespace().count(), 50);
    }
}
