//! The `transformers` engine: Hugging Face models run by a Python worker process
//! (`worker.py`, shipped inside the binary), driven over JSON lines.
//!
//! llem keeps the measurement: it tokenizes through the worker, plans batches with the
//! workload's batching strategy, sends one `generate()` call per batch and places the
//! worker's token times (CLOCK_MONOTONIC) on the experiment clock. With
//! `measurement.latency_profiling` every token is streamed (one request per batch, mode
//! `true_streaming`); otherwise a batch is timed as a whole (mode `per_request_batch`).

mod process;
pub(crate) mod protocol;
mod session;
mod source;

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use llem_config::{Engine as EngineName, ExperimentConfig};

use process::Wait;
pub use process::{Launch, SCRIPT, WorkerProcess};
use protocol::{Event, Op, WorkerFailure};
pub use session::TransformersSession;
pub use source::{ModelSource, check_python, resolve_source};

use crate::engine::{
    ContextPlan, Engine, EngineError, EngineInfo, ModelInfo, RequestSink, Session,
};
use crate::placement::Placement;
use crate::workload::{BatchingSpec, Workload};

/// The Python interpreter: the user config's `python:` (which `LLEM_PYTHON` overrides when
/// the settings were loaded), else `LLEM_PYTHON`, else `python3`.
pub fn python_for(user_python: Option<&str>) -> String {
    user_python
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .or_else(|| std::env::var("LLEM_PYTHON").ok().filter(|p| !p.is_empty()))
        .unwrap_or_else(|| "python3".to_string())
}

/// Settings of a worker run that are not in the experiment config.
#[derive(Clone, Debug)]
pub struct WorkerOptions {
    /// The Python interpreter.
    pub python: String,
    /// The worker's stderr goes here (the cell directory's `worker.log`).
    pub log_path: PathBuf,
    /// The asset cache, where bare model names are looked up.
    pub assets_dir: PathBuf,
    /// How long starting Python, importing torch and loading the model may take.
    pub load_timeout: Duration,
    /// A worker that sends nothing for this long while working is taken as hung (a decoding
    /// worker reports at least once a second).
    pub silence_timeout: Duration,
    /// Hugging Face cache (`HF_HOME` of the worker) when the user config names one.
    pub model_cache_dir: Option<PathBuf>,
    /// Set to stop at once (Ctrl-C): the worker is killed.
    pub cancel: Option<Arc<AtomicBool>>,
    /// The docker CLI, for `runners: {transformers: docker}`.
    pub docker: String,
}

/// Environment variable that shortens or lengthens the silence timeout, seconds.
pub const SILENCE_ENV: &str = "LLEM_WORKER_TIMEOUT_S";

impl WorkerOptions {
    /// Defaults: 20 min to load, 300 s of silence (or `LLEM_WORKER_TIMEOUT_S`).
    pub fn new(python: String, log_path: PathBuf, assets_dir: PathBuf) -> WorkerOptions {
        let silence = std::env::var(SILENCE_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s > 0.0)
            .map_or(Duration::from_secs(300), Duration::from_secs_f64);
        WorkerOptions {
            python,
            log_path,
            assets_dir,
            load_timeout: Duration::from_secs(1200),
            silence_timeout: silence,
            model_cache_dir: None,
            cancel: None,
            docker: "docker".into(),
        }
    }
}

/// Whether `cfg` streams tokens (latency profiling without beam search) and the batch size
/// it runs with: profiling maps one streamed token to one request, so it decodes one request
/// at a time.
pub fn batch_plan(cfg: &ExperimentConfig) -> (bool, NonZeroU32) {
    let t = cfg.transformers.as_deref().cloned().unwrap_or_default();
    let beams = t.num_beams.unwrap_or(1);
    let stream = cfg.measurement.latency_profiling && beams <= 1;
    let configured = t.batch_size.unwrap_or(NonZeroU32::MIN);
    (stream, if stream { NonZeroU32::MIN } else { configured })
}

/// Where transformers puts the weights: a tensor-parallel plan over `tp_size` GPUs (else
/// all), else the device map (`cpu`, one `cuda:N`, or `auto`-like maps over every GPU), else
/// the first GPU.
pub(crate) fn placement(cfg: &ExperimentConfig, visible_gpus: u32) -> Placement {
    let Some(t) = cfg.transformers.as_deref() else {
        return Placement::first_gpus(1, visible_gpus);
    };
    if t.tp_plan.is_some() {
        return match t.tp_size {
            Some(n) => Placement::first_gpus(n, visible_gpus),
            None => Placement::all(visible_gpus),
        };
    }
    match t.device_map.as_deref() {
        Some("cpu") => Placement::Cpu,
        // `auto`, `balanced`, `sequential` spread the weights over every GPU.
        Some(m) if !m.starts_with("cuda") && m.parse::<u32>().is_err() => {
            Placement::all(visible_gpus)
        }
        Some(m) => {
            let idx = m
                .trim_start_matches("cuda")
                .trim_start_matches(':')
                .parse::<u32>()
                .unwrap_or(0);
            if idx < visible_gpus {
                Placement::Gpus(vec![idx])
            } else {
                Placement::Cpu
            }
        }
        None => Placement::first_gpus(1, visible_gpus),
    }
}

/// A loaded model in a worker.
pub struct TransformersEngine {
    worker: Mutex<WorkerProcess>,
    info: EngineInfo,
    model: ModelInfo,
    context_length: u32,
    chat_template: bool,
    stream: bool,
    configured_batch: u32,
    device_total_bytes: Option<u64>,
    on_gpu: bool,
    silence: Duration,
    load_timeout: Duration,
    /// Ask the worker for generated ids (tests).
    return_ids: bool,
    /// The interpreter, for error messages.
    python: String,
}

fn fail_load(model: &str, reason: String) -> EngineError {
    EngineError::Load {
        model: model.to_string(),
        reason,
    }
}

/// Words an `error` event.
fn worker_error(python: &str, f: &WorkerFailure) -> String {
    let message = &f.message;
    let tail = || {
        f.traceback
            .as_deref()
            .map(|t| {
                let lines: Vec<&str> = t.lines().collect();
                format!(
                    "\nworker traceback (last lines):\n{}",
                    lines
                        .get(lines.len().saturating_sub(12)..)
                        .unwrap_or_default()
                        .join("\n")
                )
            })
            .unwrap_or_default()
    };
    match f.kind.as_str() {
        "missing_package" => {
            let package = f.package.as_deref();
            let extra = package.filter(|p| !["torch", "transformers", "accelerate"].contains(p));
            format!(
                "the transformers engine's Python ({python}) cannot import {}: {message}. \
                 Install what it needs: {}",
                package.unwrap_or("a package"),
                source::install_advice(python, extra)
            )
        }
        "rejected" => format!(
            "the installed transformers rejected `{}`: {message}",
            f.field.as_deref().unwrap_or("a setting")
        ),
        "oom" => format!(
            "out of memory in the transformers worker ({message}); lower \
             transformers.batch_size or max_output_tokens, or load a smaller dtype{}",
            tail()
        ),
        _ => format!("{message}{}", tail()),
    }
}

/// Temporary container names are unique per process and call.
static CONTAINER_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The image of `runners: {transformers: docker}` when `images:` names none: the one Hugging
/// Face builds for its own GPU CI (torch, transformers, accelerate).
pub const DEFAULT_IMAGE: &str = "huggingface/transformers-pytorch-gpu:latest";

/// How `cfg`'s runner starts the worker: the local Python, or `python3` in a container
/// (`runners: {transformers: docker}` or `docker:<image>`, else `images:`, else the default
/// image) with the script, the model directory and the Hugging Face cache mounted.
pub fn launch_for(
    cfg: &ExperimentConfig,
    opts: &WorkerOptions,
    src: &ModelSource,
    ranks: Option<String>,
) -> Launch {
    let Some(llem_config::RunnerSpec::Docker { image }) = cfg.runner() else {
        return Launch::Local {
            python: opts.python.clone(),
            ranks,
        };
    };
    let image = image
        .clone()
        .or_else(|| cfg.images.get(&EngineName::Transformers).cloned())
        .unwrap_or_else(|| DEFAULT_IMAGE.to_string());
    let mounts = src
        .local
        .as_ref()
        .map(|p| {
            if p.is_file() {
                p.parent().map(PathBuf::from)
            } else {
                Some(p.clone())
            }
        })
        .into_iter()
        .flatten()
        .collect();
    let n = CONTAINER_SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Launch::Docker {
        docker: opts.docker.clone(),
        image,
        name: format!("llem-transformers-{}-{n}", std::process::id()),
        mounts,
        hf_cache: crate::launch::hf_cache(opts.model_cache_dir.as_ref()),
        // A host without NVIDIA's device nodes has no GPUs to hand over (and docker refuses
        // --gpus there).
        gpus: std::path::Path::new("/dev/nvidiactl")
            .exists()
            .then(crate::launch::docker_gpus),
        ranks,
    }
}

/// Words an event that is not the reply an op expects: an `error` event by its kind,
/// anything else as out of order.
fn unexpected(python: &str, ev: Event, expected: &str) -> String {
    match ev {
        Event::Error(f) => worker_error(python, &f),
        other => format!("the worker sent {other:?} where {expected} was expected"),
    }
}

/// The worker's first words: its protocol (another version is killed at once) and its
/// Python version and interpreter.
fn handshake(
    worker: &mut WorkerProcess,
    model: &str,
    python: &str,
) -> Result<(String, String), EngineError> {
    match worker.reply(Wait::Total(Duration::from_secs(60)))? {
        Event::Hello {
            protocol,
            python: version,
            executable,
        } => {
            if protocol != protocol::PROTOCOL {
                // It cannot be asked to shut down in a language it may not speak.
                worker.kill();
                return Err(fail_load(
                    model,
                    format!(
                        "the worker speaks protocol {protocol}, this llem speaks {}",
                        protocol::PROTOCOL
                    ),
                ));
            }
            Ok((version, executable.unwrap_or_else(|| python.to_string())))
        }
        other => Err(fail_load(model, unexpected(python, other, "hello"))),
    }
}

/// Sends the model, every `transformers` field, the decoder and the passthrough keywords;
/// waits for the worker to have loaded it (and probed `generate()` with them).
/// The `lora:` section for the worker, whose working directory is not necessarily llem's:
/// a relative adapter path is made absolute.
fn lora_op(cfg: &ExperimentConfig) -> serde_json::Value {
    let Some(l) = cfg.lora.as_deref() else {
        return serde_json::Value::Null;
    };
    let mut l = l.clone();
    l.adapter_path = l.absolute_adapter_path();
    serde_json::to_value(&l).unwrap_or_default()
}

fn load_model(
    worker: &mut WorkerProcess,
    cfg: &ExperimentConfig,
    src: &ModelSource,
    opts: &WorkerOptions,
) -> Result<protocol::Loaded, EngineError> {
    let t = cfg.transformers.as_deref().cloned().unwrap_or_default();
    let sampling = crate::sampling::SamplingParams::from_config(cfg);
    let load = Op::Load {
        model: src.model.clone(),
        gguf_file: src.gguf_file.clone(),
        dtype: cfg.dtype.map(|d| d.as_str().to_string()),
        transformers: serde_json::to_value(&t).unwrap_or_default(),
        sampling: serde_json::to_value(&sampling).unwrap_or_default(),
        passthrough_kwargs: serde_json::to_value(&cfg.passthrough_kwargs).unwrap_or_default(),
        lora: lora_op(cfg),
    };
    worker.send(&load)?;
    match worker.reply(Wait::Total(opts.load_timeout))? {
        Event::Loaded(l) => Ok(*l),
        other => Err(fail_load(
            &src.model,
            unexpected(&opts.python, other, "loaded"),
        )),
    }
}

impl TransformersEngine {
    /// Starts a worker for `cfg`, tells `on_spawn` its process id and container (so a
    /// supervisor can stop it if this process dies), and loads the model.
    pub fn start(
        cfg: &ExperimentConfig,
        opts: &WorkerOptions,
        on_spawn: &mut dyn FnMut(u32, Option<String>),
    ) -> Result<TransformersEngine, EngineError> {
        if cfg.engine != EngineName::Transformers {
            return Err(EngineError::Config(format!(
                "engine `{}` is not transformers",
                cfg.engine
            )));
        }
        let src = resolve_source(cfg, &opts.assets_dir).map_err(EngineError::Config)?;
        let mut env: Vec<(String, String)> = Vec::new();
        if let Some(d) = &opts.model_cache_dir {
            env.push(("HF_HOME".into(), d.display().to_string()));
        }
        let tp = cfg.transformers.as_deref().filter(|t| t.tp_plan.is_some());
        let ranks = tp.map(|t| {
            t.tp_size
                .map_or_else(|| "auto".to_string(), |n| n.to_string())
        });
        let launch = launch_for(cfg, opts, &src, ranks);
        let mut worker = WorkerProcess::spawn(&launch, &opts.log_path, &env, opts.cancel.clone())?;
        on_spawn(worker.pid(), worker.container().map(String::from));
        let (py_version, executable) = handshake(&mut worker, &src.model, &opts.python)?;
        let (torch, transformers, cuda, devices) =
            match worker.reply(Wait::Total(opts.load_timeout))? {
                Event::Ready {
                    torch,
                    transformers,
                    cuda,
                    devices,
                } => (torch, transformers, cuda, devices),
                other => {
                    return Err(fail_load(
                        &src.model,
                        unexpected(&opts.python, other, "ready"),
                    ));
                }
            };
        let loaded = load_model(&mut worker, cfg, &src, opts)?;
        let (stream, _) = batch_plan(cfg);
        let configured_batch = cfg
            .transformers
            .as_deref()
            .and_then(|t| t.batch_size)
            .map_or(1, NonZeroU32::get);
        let on_gpu = loaded.device.starts_with("cuda");
        let device = match &loaded.device_name {
            Some(n) if on_gpu => format!("{} ({n})", loaded.device),
            _ => loaded.device.clone(),
        };
        // Under torchrun every rank holds a shard on its own GPU; the worker answering is
        // rank 0, which sees only its own.
        let placement = if tp.is_some() {
            crate::placement::planned(cfg, u32::try_from(devices.len()).unwrap_or(u32::MAX))
        } else if on_gpu && !loaded.gpus.is_empty() {
            crate::placement::Placement::Gpus(loaded.gpus.clone())
        } else {
            crate::placement::Placement::Cpu
        };
        let info = EngineInfo {
            name: "transformers",
            version: Some(format!("transformers {transformers}")),
            system_info: Some(format!(
                "torch {torch}{}, Python {py_version} ({executable}), device {device}{}{}",
                cuda.map(|c| format!(" (CUDA {c})")).unwrap_or_default(),
                if devices.is_empty() {
                    String::new()
                } else {
                    format!(", visible GPUs: {}", devices.join(", "))
                },
                cfg.lora.as_deref().map_or_else(String::new, |l| format!(
                    ", LoRA adapter {} at scale {}{}",
                    l.adapter_path
                        .as_deref()
                        .or(l.adapter_id.as_deref())
                        .unwrap_or_default(),
                    l.scale,
                    if l.merge_weights { ", merged" } else { "" }
                ))
            )),
            placement: Some(placement),
        };
        let mut model: ModelInfo = loaded.model.clone();
        model.file_size_bytes = model.file_size_bytes.or(src.file_size_bytes);
        model.load_time_s = None;
        let context_length = model.context_length.unwrap_or(2048);
        Ok(TransformersEngine {
            worker: Mutex::new(worker),
            info,
            model,
            context_length,
            chat_template: loaded.chat_template,
            stream,
            configured_batch,
            device_total_bytes: loaded.device_total_bytes,
            on_gpu,
            silence: opts.silence_timeout,
            load_timeout: opts.load_timeout,
            return_ids: false,
            python: opts.python.clone(),
        })
    }

    /// The worker's process id.
    pub fn worker_pid(&self) -> Option<u32> {
        self.worker.lock().ok().map(|w| w.pid())
    }

    /// True when every token is streamed (latency profiling).
    pub fn streams(&self) -> bool {
        self.stream
    }

    /// Runs `workload` batched as `batching` says and returns every request's generated token
    /// ids in request order (tests: batch invariance, agreement with other engines).
    pub fn generate_ids(
        &mut self,
        batching: BatchingSpec,
        workload: &Workload,
        sink: &mut dyn RequestSink,
    ) -> Result<Vec<Vec<i64>>, EngineError> {
        self.return_ids = true;
        let out = TransformersSession::new(self, batching).run_inner(workload, sink);
        self.return_ids = false;
        out.map(|(_, ids)| ids)
    }
}

impl Engine for TransformersEngine {
    fn info(&self) -> EngineInfo {
        self.info.clone()
    }
    fn model_info(&self) -> &ModelInfo {
        &self.model
    }
    fn n_ctx_train(&self) -> u32 {
        self.context_length
    }
    fn has_chat_template(&self) -> bool {
        self.chat_template
    }
    fn open(&self, plan: ContextPlan) -> Result<Box<dyn Session + '_>, EngineError> {
        // The worker allocates per generate() call; the plan's batching is what it keeps.
        Ok(Box::new(TransformersSession::new(self, plan.batching)))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cfg(v: serde_json::Value) -> ExperimentConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn profiling_streams_one_request_at_a_time_unless_beams() {
        let plan = |c: &ExperimentConfig| {
            let (stream, batch) = batch_plan(c);
            (stream, batch.get())
        };
        let c = cfg(serde_json::json!({"model": "m", "engine": "transformers",
            "transformers": {"batch_size": 8}, "measurement": {"latency_profiling": true}}));
        assert_eq!(plan(&c), (true, 1));
        let c = cfg(serde_json::json!({"model": "m", "engine": "transformers",
            "transformers": {"batch_size": 8, "num_beams": 2},
            "measurement": {"latency_profiling": true}}));
        assert_eq!(plan(&c), (false, 8));
        let c = cfg(serde_json::json!({"model": "m", "engine": "transformers",
            "transformers": {"batch_size": 4}}));
        assert_eq!(plan(&c), (false, 4));
        let c = cfg(serde_json::json!({"model": "m", "engine": "transformers"}));
        assert_eq!(plan(&c), (false, 1));
    }

    #[test]
    fn python_comes_from_the_user_setting_first() {
        assert_eq!(python_for(Some("/opt/py/bin/python")), "/opt/py/bin/python");
        assert!(!python_for(None).is_empty());
    }

    #[test]
    fn errors_name_the_fix() {
        let m = worker_error(
            "py",
            &WorkerFailure {
                kind: "missing_package".into(),
                message: "No module named 'torch'".into(),
                package: Some("torch".into()),
                ..WorkerFailure::default()
            },
        );
        assert!(m.contains("py -m pip install torch transformers"), "{m}");
        let m = worker_error(
            "py",
            &WorkerFailure {
                kind: "rejected".into(),
                message: "ValueError: bad".into(),
                field: Some("transformers.cache_implementation".into()),
                ..WorkerFailure::default()
            },
        );
        assert!(m.contains("`transformers.cache_implementation`"), "{m}");
    }
}
