//! Serving engines: vLLM, SGLang, TensorRT-LLM, TGI and llama.cpp's `llama-server` driven over
//! their OpenAI-compatible HTTP APIs, plus any OpenAI-compatible URL (`engine: openai`).
//!
//! [`ServerEngine::start`] launches the server (a local process, a container) or attaches to
//! a URL and waits until it is healthy; its session sends the workload on the traffic
//! schedule while a scraper reads `/metrics` every second. Dropping the engine stops the
//! server. One tokio runtime per engine, kept for warmup and measurement alike.

pub(crate) mod accounting;
pub(crate) mod chunk;
pub(crate) mod client;
pub(crate) mod engines;
pub(crate) mod flags;
pub mod probe;
pub mod prometheus;
mod request;
mod session;
pub(crate) mod sse;
mod start;
mod tokenize;

pub use start::{check_launchable, find_llama_server};

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use llem_config::{ExperimentConfig, RunnerSpec};

use crate::engine::{ContextPlan, Engine, EngineError, EngineInfo, ModelInfo, Session};
use crate::launch::ServerProcess;
use client::Endpoint;
use engines::{PrefixCacheReset, ServerSpec};
use session::ServerSession;

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
            ready_timeout: Duration::from_secs_f64(llem_config::SERVER_READY_TIMEOUT_S),
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

/// How long an external URL may refuse connections before the run fails: long enough for a
/// server that is being restarted to open its port, far short of a launch's ready timeout.
pub const EXTERNAL_UNREACHABLE_GRACE: Duration = Duration::from_secs(5);

/// What emptying the prefix cache before a run did.
pub(crate) struct CacheReset {
    /// The request that emptied it.
    pub done: Option<String>,
    /// Why it is not known to be empty.
    pub warning: Option<String>,
}

/// A request outside the workload that failed.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
struct CallFailure {
    /// Why.
    message: String,
    /// No server took the connection.
    unreachable: bool,
}

/// A healthy server and the client that talks to it.
pub struct ServerEngine {
    rt: tokio::runtime::Runtime,
    /// The workload's client, whose pool keeps connections between requests.
    http: reqwest::Client,
    /// The client for requests outside the workload (health, slots, metrics, resets).
    control: reqwest::Client,
    endpoint: Arc<Endpoint>,
    process: Option<Mutex<ServerProcess>>,
    /// The engine's launch and metrics; null for a plain OpenAI-compatible URL.
    spec: Option<&'static ServerSpec>,
    info: EngineInfo,
    model: ModelInfo,
    /// What the result must say about the model description.
    notes: Vec<String>,
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
        let spec = crate::registry::server(cfg.engine);
        Self::start_reporting(cfg, spec, model_file, log_path, opts, &mut |_, _| {})
    }

    /// [`ServerEngine::start`], telling `on_launch` the server's process group and container
    /// as soon as it is spawned — before it is healthy, which can take many minutes — so a
    /// supervisor can stop it if this process dies first. `spec`: the engine's server, as
    /// the registry gave it (`None`: reachable by URL only).
    pub fn start_reporting(
        cfg: &ExperimentConfig,
        spec: Option<&'static ServerSpec>,
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
        // Requests outside the workload come seconds apart, longer than a server keeps an
        // idle connection open: a pooled one may be closed under the request ("connection
        // closed before message completed"), so each opens a connection of its own.
        let control = reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .tcp_nodelay(true)
            .build()
            .map_err(|e| EngineError::Config(format!("cannot build the HTTP client: {e}")))?;
        let runner = cfg.runner().cloned().ok_or_else(|| {
            EngineError::Config(format!(
                "engine `{}` needs runners: {{{}: \"external:<url>\"}}",
                cfg.engine, cfg.engine
            ))
        })?;
        check_launchable(cfg, spec, &opts).map_err(|e| EngineError::Config(e.to_string()))?;
        // The architecture for FLOPs: from the GGUF llama-server loads, or a config.json.
        let (model, notes) = match crate::model_config::describe(
            &cfg.model,
            model_file.as_deref(),
            opts.model_cache_dir.as_deref(),
        ) {
            Ok((m, _)) => (m, Vec::new()),
            Err(why) => (
                ModelInfo::default(),
                vec![format!(
                    "FLOPs not estimated: the model's architecture is unknown to llem ({why})"
                )],
            ),
        };
        let (base_url, process, health_path) = match (&runner, spec) {
            (RunnerSpec::External { url }, _) => {
                (url.trim_end_matches('/').to_string(), None, "/health")
            }
            (_, Some(spec)) => {
                let launched = start::launch(spec, cfg, model_file, &runner, &opts, &log_path)?;
                on_launch(Some(launched.process.pid()), launched.container.clone());
                (launched.base_url, Some(launched.process), spec.health_path)
            }
            (_, None) => {
                return Err(EngineError::Config(format!(
                    "engine `{}` with runner `{runner}` is not a server llem can start",
                    cfg.engine
                )));
            }
        };
        let api_key = opts.api_key.clone();
        let mut engine = ServerEngine {
            rt,
            http,
            control,
            endpoint: Arc::new(Endpoint {
                base_url,
                api_key,
                model: spec
                    .and_then(|s| (s.served_model)(cfg))
                    .map_or_else(|| cfg.model.clone(), String::from),
                continuous_usage: spec.is_some_and(|s| s.continuous_usage),
                stall_timeout: opts.stall_timeout,
            }),
            process: process.map(Mutex::new),
            spec,
            info: EngineInfo {
                name: cfg.engine.as_str(),
                version: None,
                system_info: Some(format!("runner {runner}")),
                placement: None,
            },
            model,
            notes,
            cfg: cfg.clone(),
            opts,
            metrics_available: false,
        };
        engine.wait_ready(health_path)?;
        engine.discover();
        engine.verify_lora()?;
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

    /// [`Self::server_died`], waiting up to `grace` for a launched server's exit to show: a
    /// dying server's connections close before the kernel reports its exit, so the requests
    /// it failed can all be in before it is seen dead.
    fn server_died_within(&self, grace: Duration) -> Option<String> {
        self.process.as_ref()?;
        let until = Instant::now() + grace;
        loop {
            if let Some(died) = self.server_died() {
                return Some(died);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn get(&self, path: &str, timeout: Duration) -> Result<(u16, String), CallFailure> {
        self.call(reqwest::Method::GET, path, timeout)
    }

    fn post(&self, path: &str, timeout: Duration) -> Result<(u16, String), CallFailure> {
        self.call(reqwest::Method::POST, path, timeout)
    }

    /// One request to the server outside the workload: its status and body.
    fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        timeout: Duration,
    ) -> Result<(u16, String), CallFailure> {
        let url = format!("{}{}", self.endpoint.base_url, path);
        let mut rb = self.control.request(method, &url).timeout(timeout);
        if let Some(k) = &self.endpoint.api_key {
            rb = rb.bearer_auth(k);
        }
        let failure = |e: reqwest::Error| CallFailure {
            unreachable: probe::unreachable(&e),
            message: client::error_chain(&e),
        };
        self.rt.block_on(async move {
            let r = rb.send().await.map_err(failure)?;
            let status = r.status().as_u16();
            let body = r.text().await.map_err(failure)?;
            Ok((status, body))
        })
    }

    /// Empties the server's prefix cache, so every run (each warmup iteration, then the
    /// measurement, and a run repeated later with the same seeded prompts) starts from the
    /// same state: no prompt is a cached hit that skips its prefill. Returns the request made
    /// and, when the cache could not be emptied, a warning for the result. A server llem
    /// started must reset (it is launched to allow it); an external one is asked, and when it
    /// refuses, or its engine has no reset route, the run goes on with a warning.
    pub(crate) fn reset_prefix_cache(&self) -> Result<CacheReset, EngineError> {
        let external = self.process.is_none();
        let Some(reset) = self.spec.and_then(|s| s.prefix_cache_reset) else {
            return Ok(CacheReset {
                done: None,
                warning: external.then(|| {
                    format!(
                        "llem cannot empty the prefix cache of this external {} server (its \
                         engine has no reset route): prompts it has seen before (the same \
                         random_seed sends the same prompts) may be served from its cache, \
                         with their prefill skipped; see the prompt cache hit rate where the \
                         server reports one",
                        self.cfg.engine
                    )
                }),
            });
        };
        // A server told in every request not to reuse its cache needs no reset to be trusted.
        let per_request = self.spec.and_then(|s| s.prompt_cache_off);
        match (self.reset_with(reset), per_request) {
            (Ok(done), _) => Ok(CacheReset {
                done: Some(done),
                warning: None,
            }),
            (Err(e), Some(field)) if external => Ok(CacheReset {
                done: Some(format!(
                    "{field}: false on every request ({})",
                    e.to_string()
                        .trim_start_matches("inference failed: ")
                        .chars()
                        .take(300)
                        .collect::<String>()
                )),
                warning: None,
            }),
            (Err(e), None) if external => Ok(CacheReset {
                done: None,
                warning: Some(format!(
                    "{e}; prompts this external server has seen before (the same random_seed \
                     sends the same prompts) may be served from its cache, with their prefill \
                     skipped"
                )),
            }),
            (Err(e), _) => Err(e),
        }
    }

    /// Runs one reset; the request made.
    fn reset_with(&self, reset: PrefixCacheReset) -> Result<String, EngineError> {
        match reset {
            PrefixCacheReset::Post { route, .. } => {
                self.post_ok(route)?;
                Ok(format!("POST {route}"))
            }
            PrefixCacheReset::EraseSlots => {
                let slots = self.slot_ids()?;
                for id in &slots {
                    self.post_ok(&format!("/slots/{id}?action=erase"))?;
                }
                Ok(format!(
                    "POST /slots/<id>?action=erase ({} slots)",
                    slots.len()
                ))
            }
        }
    }

    /// POSTs `route` for the prefix-cache reset; anything but 200 fails the run.
    fn post_ok(&self, route: &str) -> Result<(), EngineError> {
        let fail = |why: String| {
            EngineError::Inference(format!(
                "the server did not reset its prefix cache (POST {route}): {why}"
            ))
        };
        match self.post(route, Duration::from_secs(30)) {
            Ok((200, _)) => Ok(()),
            Ok((code, body)) => Err(fail(format!(
                "HTTP {code} {}",
                body.trim().chars().take(200).collect::<String>()
            ))),
            Err(e) => Err(fail(e.message)),
        }
    }

    /// The ids of llama-server's slots (`GET /slots`).
    fn slot_ids(&self) -> Result<Vec<u64>, EngineError> {
        let fail = |why: String| {
            EngineError::Inference(format!(
                "the server did not list its slots for the prefix-cache reset (GET /slots): {why}"
            ))
        };
        let (code, body) = self
            .get("/slots", Duration::from_secs(30))
            .map_err(|f| fail(f.message))?;
        if code != 200 {
            return Err(fail(format!(
                "HTTP {code} {}",
                body.trim().chars().take(200).collect::<String>()
            )));
        }
        let slots: Vec<Value> =
            serde_json::from_str(&body).map_err(|e| fail(format!("not a list of slots: {e}")))?;
        let ids: Vec<u64> = slots
            .iter()
            .filter_map(|s| s.get("id").and_then(Value::as_u64))
            .collect();
        if ids.is_empty() || ids.len() != slots.len() {
            return Err(fail("no slot ids in the answer".into()));
        }
        Ok(ids)
    }

    fn wait_ready(&mut self, health_path: &str) -> Result<(), EngineError> {
        let start = Instant::now();
        let mut last;
        // An external server that has never answered: refused connections for a few seconds
        // mean nothing is there (a server that is starting answers, if only with a 503).
        let mut answered = false;
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
            match self.call(reqwest::Method::GET, health_path, Duration::from_secs(5)) {
                Ok((200, _)) => return Ok(()),
                Ok((code, body)) => {
                    answered = true;
                    last = format!("HTTP {code} {}", body.trim());
                }
                Err(f) => {
                    answered |= !f.unreachable;
                    if f.unreachable
                        && !answered
                        && self.process.is_none()
                        && start.elapsed() > EXTERNAL_UNREACHABLE_GRACE
                    {
                        return Err(EngineError::Load {
                            model: self.cfg.model.clone(),
                            reason: format!(
                                "nothing answers at {} (for {:.0} s): {}; start the server, or \
                                 check the URL in runners:",
                                llem_config::credentials::redact_url(&self.endpoint.base_url),
                                start.elapsed().as_secs_f64(),
                                llem_config::redact::text(&f.message, &[])
                            ),
                        });
                    }
                    last = f.message;
                }
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
                        llem_config::credentials::redact_url(&self.endpoint.base_url),
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

    /// A launched server given `lora:` must list the adapter (at its scale, where it says),
    /// or the run would measure the base model under the adapter's name. Says which adapter
    /// ran in the engine's system info.
    fn verify_lora(&mut self) -> Result<(), EngineError> {
        let (Some(l), Some(spec)) = (self.cfg.lora.as_deref(), self.spec) else {
            return Ok(());
        };
        let path = engines::adapter_path(&self.cfg).unwrap_or_default();
        let fail = |reason: String| EngineError::Load {
            model: self.cfg.model.clone(),
            reason,
        };
        let listed = |route: &str| -> Result<Value, EngineError> {
            match self.get(route, Duration::from_secs(10)) {
                Ok((200, body)) => serde_json::from_str(&body)
                    .map_err(|e| fail(format!("{route} is not JSON ({e})"))),
                Ok((code, body)) => Err(fail(format!(
                    "the server did not list its LoRA adapters: {route} answered HTTP {code} {}",
                    body.trim().chars().take(200).collect::<String>()
                ))),
                Err(e) => Err(fail(format!("{route}: {e}"))),
            }
        };
        let found = match spec.lora_listing {
            engines::LoraListing::None => {
                return Err(fail(format!(
                    "llem does not apply LoRA adapters on {}",
                    self.cfg.engine
                )));
            }
            engines::LoraListing::LoraAdapters => {
                listed("/lora-adapters")?.as_array().is_some_and(|a| {
                    a.iter().any(|x| {
                        x.get("path").and_then(Value::as_str) == Some(path.as_str())
                            && x.get("scale")
                                .and_then(Value::as_f64)
                                .is_some_and(|s| (s - l.scale).abs() < 1e-6)
                    })
                })
            }
            engines::LoraListing::Models => listed("/v1/models")?
                .get("data")
                .and_then(Value::as_array)
                .is_some_and(|a| {
                    a.iter().any(|m| {
                        m.get("id").and_then(Value::as_str) == Some(self.endpoint.model.as_str())
                    })
                }),
        };
        if !found {
            return Err(fail(format!(
                "the server does not list the LoRA adapter {path} at scale {}: it would serve \
                 the base model",
                l.scale
            )));
        }
        let note = format!(
            "LoRA adapter {path} at scale {} (listed by the server)",
            l.scale
        );
        self.info.system_info = Some(match self.info.system_info.take() {
            Some(s) => format!("{s}, {note}"),
            None => note,
        });
        Ok(())
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
                // The server's metadata fills what it reports; what llem read from the model's
                // own files (its architecture) stays where the server is silent.
                let u32_at = |p: &str| {
                    first
                        .pointer(p)
                        .and_then(Value::as_u64)
                        .and_then(|n| u32::try_from(n).ok())
                };
                let m = &mut self.model;
                m.context_length = first
                    .get("max_model_len")
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .or_else(|| u32_at("/meta/n_ctx_train"))
                    .or(m.context_length);
                m.parameters = first
                    .pointer("/meta/n_params")
                    .and_then(Value::as_u64)
                    .or(m.parameters);
                m.vocab_size = u32_at("/meta/n_vocab").or(m.vocab_size);
                m.hidden_size = u32_at("/meta/n_embd").or(m.hidden_size);
                m.file_size_bytes = first
                    .pointer("/meta/size")
                    .and_then(Value::as_u64)
                    .or(m.file_size_bytes);
            }
        }
        if let Ok((200, body)) = self.get("/version", Duration::from_secs(5))
            && let Ok(v) = serde_json::from_str::<Value>(&body)
        {
            self.info.version = v.get("version").and_then(Value::as_str).map(String::from);
        }
        // TGI says it in its info.
        if self.info.version.is_none()
            && let Ok((200, body)) = self.get("/info", Duration::from_secs(5))
            && let Ok(v) = serde_json::from_str::<Value>(&body)
        {
            self.info.version = v.get("version").and_then(Value::as_str).map(String::from);
        }
        // SGLang says it in its server info.
        if self.info.version.is_none()
            && let Ok((200, body)) = self.get("/server_info", Duration::from_secs(5))
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
        if self.process.is_some()
            && let Some(note) = self
                .spec
                .and_then(|s| version_note(s, self.cfg.engine, self.info.version.as_deref()))
        {
            self.notes.push(note);
        }
    }
}

/// A server llem launched whose version is not the one its flag table was checked against.
fn version_note(
    spec: &ServerSpec,
    engine: llem_config::Engine,
    running: Option<&str>,
) -> Option<String> {
    let checked = spec.flags_version?;
    match running {
        // vLLM's CPU build says `0.32.0+cpu`.
        Some(v) if v.split('+').next() == Some(checked) => None,
        Some(v) => Some(format!(
            "{engine} {v} is running; llem's {engine} flags were checked against {checked} \
             (the default image's): a flag this version lacks stops the server at launch, and \
             one whose meaning changed would go unnoticed"
        )),
        None => Some(format!(
            "the {engine} server did not say its version; llem's {engine} flags were checked \
             against {checked}"
        )),
    }
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
    fn load_notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    fn n_ctx_train(&self) -> u32 {
        self.model.context_length.unwrap_or(0)
    }
    fn has_chat_template(&self) -> bool {
        true
    }
    fn tokenize(&self, text: &str) -> Result<Vec<u32>, EngineError> {
        self.tokenize_text(text)
    }
    fn open(&self, plan: ContextPlan) -> Result<Box<dyn Session + '_>, EngineError> {
        Ok(Box::new(ServerSession {
            engine: self,
            batching: plan.batching,
        }))
    }
}

#[cfg(test)]
mod version_tests {
    use super::*;

    #[test]
    fn a_server_of_another_version_than_the_checked_one_is_noted() {
        let spec = &engines::vllm::SPEC;
        let vllm = llem_config::Engine::Vllm;
        assert_eq!(version_note(spec, vllm, Some("0.32.0")), None);
        assert_eq!(version_note(spec, vllm, Some("0.32.0+cpu")), None);
        let note = version_note(spec, vllm, Some("0.11.0")).unwrap_or_default();
        assert!(
            note.starts_with(
                "vllm 0.11.0 is running; llem's vllm flags were checked against 0.32.0"
            ),
            "{note}"
        );
        assert!(version_note(spec, vllm, None).is_some());
        assert_eq!(
            version_note(&engines::tgi::SPEC, llem_config::Engine::Tgi, Some("3.3.6")),
            None
        );
        assert_eq!(
            version_note(
                &engines::tensorrt::SPEC,
                llem_config::Engine::TensorRt,
                Some("1.0.0")
            ),
            None
        );
    }
}
