//! The `transformers` engine: Hugging Face models run by a Python worker process
//! (`worker.py`, shipped inside the binary), driven over JSON lines.
//!
//! llem keeps the measurement: it tokenizes through the worker, plans batches with the
//! workload's batching strategy, sends one `generate()` call per batch and places the
//! worker's token times (CLOCK_MONOTONIC) on the experiment clock. With
//! `measurement.latency_profiling` every token is streamed (one request per batch, mode
//! `true_streaming`); otherwise a batch is timed as a whole (mode `per_request_batch`).

mod process;
pub mod protocol;
mod source;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use llem_config::{Engine as EngineName, ExperimentConfig};
use llem_results::{FinishReason, RequestRecord};

use process::Wait;
pub use process::{Launch, SCRIPT, WorkerProcess};
use protocol::{Event, Op, PromptOp, RequestOp};
pub use source::{ModelSource, check_python, resolve_source};

use crate::engine::{
    ContextPlan, Engine, EngineError, EngineInfo, EngineMemory, ModelInfo, RequestSink, RunSummary,
    Session,
};
use crate::workload::{PromptInput, Workload, batching};

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
pub fn batch_plan(cfg: &ExperimentConfig) -> (bool, u32) {
    let t = cfg.transformers.as_deref().cloned().unwrap_or_default();
    let beams = t.num_beams.unwrap_or(1);
    let stream = cfg.measurement.latency_profiling && beams <= 1;
    let configured = t.batch_size.unwrap_or(1).max(1);
    (stream, if stream { 1 } else { configured })
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
fn worker_error(python: &str, kind: &str, message: &str, extra: ErrorExtra<'_>) -> String {
    let tail = |tb: Option<&str>| {
        tb.map(|t| {
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
    match kind {
        "missing_package" => {
            let pkg = extra.package.unwrap_or("a package");
            format!(
                "the transformers engine's Python ({python}) cannot import {pkg}: {message}. \
                 Install what it needs: `{python} -m pip install torch transformers accelerate` \
                 (add `gguf` for GGUF models, `bitsandbytes` for 4/8-bit), or point `python:` \
                 in the user config or LLEM_PYTHON at a Python that has them"
            )
        }
        "rejected" => format!(
            "the installed transformers rejected `{}`: {message}",
            extra.field.unwrap_or("a setting")
        ),
        "oom" => format!(
            "out of memory in the transformers worker ({message}); lower \
             transformers.batch_size or max_output_tokens, or load a smaller dtype{}",
            tail(extra.traceback)
        ),
        _ => format!("{message}{}", tail(extra.traceback)),
    }
}

/// Temporary container names are unique per process and call.
static CONTAINER_SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

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
        .or_else(|| crate::serving::default_image(EngineName::Transformers).map(String::from))
        .unwrap_or_default();
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
        hf_cache: crate::serving::hf_cache(opts.model_cache_dir.as_ref()),
        // A host without NVIDIA's device nodes has no GPUs to hand over (and docker refuses
        // --gpus there).
        gpus: std::path::Path::new("/dev/nvidiactl")
            .exists()
            .then(crate::serving::docker_gpus),
        ranks,
    }
}

/// Words an event that is not the reply an op expects: an `error` event by its kind,
/// anything else as out of order.
fn unexpected(python: &str, ev: Event, expected: &str) -> String {
    match ev {
        Event::Error {
            kind,
            message,
            package,
            field,
            traceback,
        } => worker_error(
            python,
            &kind,
            &message,
            ErrorExtra {
                package: package.as_deref(),
                field: field.as_deref(),
                traceback: traceback.as_deref(),
            },
        ),
        other => format!("the worker sent {other:?} where {expected} was expected"),
    }
}

/// The optional parts of an `error` event.
#[derive(Clone, Copy, Default)]
struct ErrorExtra<'a> {
    package: Option<&'a str>,
    field: Option<&'a str>,
    traceback: Option<&'a str>,
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
        let (py_version, executable) = match worker.reply(Wait::Total(Duration::from_secs(60)))? {
            Event::Hello {
                protocol,
                python,
                executable,
            } => {
                if protocol != protocol::PROTOCOL {
                    // It cannot be asked to shut down in a language it may not speak.
                    worker.kill();
                    return Err(fail_load(
                        &src.model,
                        format!(
                            "the worker speaks protocol {protocol}, this llem speaks {}",
                            protocol::PROTOCOL
                        ),
                    ));
                }
                (python, executable.unwrap_or_else(|| opts.python.clone()))
            }
            other => {
                return Err(fail_load(
                    &src.model,
                    unexpected(&opts.python, other, "hello"),
                ));
            }
        };
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
        let t = cfg.transformers.as_deref().cloned().unwrap_or_default();
        let sampling = crate::sampling::SamplingParams::from_config(cfg);
        let load = Op::Load {
            model: src.model.clone(),
            gguf_file: src.gguf_file.clone(),
            dtype: cfg.dtype.map(|d| d.as_str().to_string()),
            transformers: serde_json::to_value(&t).unwrap_or_default(),
            sampling: serde_json::to_value(&sampling).unwrap_or_default(),
            passthrough_kwargs: serde_json::to_value(&cfg.passthrough_kwargs).unwrap_or_default(),
        };
        worker.send(&load)?;
        let loaded = match worker.reply(Wait::Total(opts.load_timeout))? {
            Event::Loaded(l) => *l,
            other => {
                return Err(fail_load(
                    &src.model,
                    unexpected(&opts.python, other, "loaded"),
                ));
            }
        };
        let (stream, _) = batch_plan(cfg);
        let configured_batch = t.batch_size.unwrap_or(1).max(1);
        let on_gpu = loaded.device.starts_with("cuda");
        let device = match &loaded.device_name {
            Some(n) if on_gpu => format!("{} ({n})", loaded.device),
            _ => loaded.device.clone(),
        };
        let info = EngineInfo {
            name: "transformers",
            version: Some(format!("transformers {transformers}")),
            system_info: Some(format!(
                "torch {torch}{}, Python {py_version} ({executable}), device {device}{}",
                cuda.map(|c| format!(" (CUDA {c})")).unwrap_or_default(),
                if devices.is_empty() {
                    String::new()
                } else {
                    format!(", visible GPUs: {}", devices.join(", "))
                }
            )),
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

    /// Runs `workload` and returns every request's generated token ids in request order
    /// (tests: batch invariance, agreement with other engines).
    pub fn generate_ids(
        &mut self,
        workload: &Workload,
        sink: &mut dyn RequestSink,
    ) -> Result<Vec<Vec<i64>>, EngineError> {
        self.return_ids = true;
        let out = TransformersSession { engine: self }.run_inner(workload, sink);
        self.return_ids = false;
        out.map(|(_, ids)| ids)
    }
}

/// Seconds between CLOCK_MONOTONIC and the sink's clock: worker time minus this is
/// experiment time.
fn clock_offset(sink: &dyn RequestSink) -> f64 {
    let mono = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as f64 + t.tv_nsec() as f64 * 1e-9)
        .unwrap_or(0.0);
    mono - sink.now_s()
}

/// A request finished by the worker, waiting for its batch's timing.
struct Finished {
    request: u32,
    output_tokens: u32,
    finish: FinishReason,
    end_t: f64,
    ids: Option<Vec<i64>>,
}

/// Runs workloads on a loaded worker.
pub struct TransformersSession<'e> {
    engine: &'e TransformersEngine,
}

impl TransformersSession<'_> {
    fn run_inner(
        &mut self,
        wl: &Workload,
        sink: &mut dyn RequestSink,
    ) -> Result<(RunSummary, Vec<Vec<i64>>), EngineError> {
        let e = self.engine;
        let mut worker = e
            .worker
            .lock()
            .map_err(|_| EngineError::Inference("the worker handle was poisoned".into()))?;
        let offset = clock_offset(sink);
        let to_llem = |t: f64| t - offset;
        let prompts: Vec<PromptOp> = wl
            .prompts
            .iter()
            .map(|p| match &p.input {
                PromptInput::Text { text, chat } => PromptOp {
                    text: Some(text.clone()),
                    chat: *chat,
                    tokens: None,
                    seed: None,
                    reference: p.reference_output.clone(),
                },
                PromptInput::Tokens { n_tokens, seed } => PromptOp {
                    text: None,
                    chat: false,
                    tokens: Some(*n_tokens),
                    seed: Some(*seed),
                    reference: p.reference_output.clone(),
                },
            })
            .collect();
        worker.send(&Op::Prepare {
            prompts,
            max_input_tokens: wl.max_input_tokens,
        })?;
        let err =
            |ev: Event, expected: &str| EngineError::Inference(unexpected(&e.python, ev, expected));
        let (lengths, truncated, references) = match worker.reply(Wait::Silence(e.load_timeout))? {
            Event::Prepared {
                input_tokens,
                truncated,
                reference_tokens,
            } => (input_tokens, truncated, reference_tokens),
            other => return Err(err(other, "prepared")),
        };
        if lengths.len() != wl.prompts.len() {
            return Err(EngineError::Inference(format!(
                "the worker tokenized {} prompts of {}",
                lengths.len(),
                wl.prompts.len()
            )));
        }
        worker.send(&Op::Mark)?;
        match worker.reply(Wait::Silence(e.silence))? {
            Event::Marked => {}
            other => return Err(err(other, "marked")),
        }

        let mut spec = wl.batching;
        let mut warnings = Vec::new();
        if e.stream {
            if e.configured_batch > 1 {
                warnings.push(format!(
                    "measurement.latency_profiling streams every token, one request at a \
                     time: transformers.batch_size {} ran as 1",
                    e.configured_batch
                ));
            }
            spec.batch_size = 1;
            warnings.push(
                "latency profiling timed every token (streamer): energy and throughput are not \
                 comparable with non-profiled runs"
                    .into(),
            );
        }
        let batches = batching::plan(&spec, &lengths);
        let mut summary = RunSummary {
            num_batches: u32::try_from(batches.len()).unwrap_or(u32::MAX),
            configured_batch_size: spec.batch_size,
            truncated_prompts: u32::try_from(truncated.iter().filter(|t| **t).count())
                .unwrap_or(u32::MAX),
            latency_mode: Some(if e.stream {
                "true_streaming"
            } else {
                "per_request_batch"
            }),
            ..RunSummary::default()
        };
        let mut ids_out: Vec<Vec<i64>> = vec![Vec::new(); wl.prompts.len()];
        let (mut slot_steps, mut busy_steps) = (0u64, 0u64);
        let mut device_peak: Option<u64> = None;
        let mut rss_peak: Option<u64> = None;
        for (bi, members) in batches.iter().enumerate() {
            if sink.cancelled() {
                return Err(EngineError::Cancelled);
            }
            let bi = u32::try_from(bi).unwrap_or(u32::MAX);
            // An empty prompt has nothing to condition on: it fails alone, as in llama.cpp.
            let (empty, members): (Vec<usize>, Vec<usize>) = members
                .iter()
                .partition(|&&i| lengths.get(i).copied().unwrap_or(0) == 0);
            for i in empty {
                let now = sink.now_s();
                sink.on_done(RequestRecord {
                    request_id: u32::try_from(i).unwrap_or(u32::MAX),
                    batch_index: Some(bi),
                    input_tokens: 0,
                    output_tokens: 0,
                    reference_output_tokens: references.get(i).copied().flatten(),
                    scheduled_s: None,
                    submit_s: now,
                    first_token_s: None,
                    end_s: now,
                    success: false,
                    error: Some("empty prompt: nothing to decode".into()),
                    finish_reason: FinishReason::Error,
                    token_times_s: Vec::new(),
                });
            }
            if members.is_empty() {
                continue;
            }
            let mut requests = Vec::with_capacity(members.len());
            for &i in &members {
                let prompt = wl.prompts.get(i);
                let input = lengths.get(i).copied().unwrap_or(0);
                let room = e.context_length.saturating_sub(input).max(1);
                let limit = prompt
                    .and_then(|p| p.output_tokens)
                    .or(wl.max_output_tokens)
                    .unwrap_or(room)
                    .min(room)
                    .max(1);
                requests.push(RequestOp {
                    index: u32::try_from(i).unwrap_or(u32::MAX),
                    max_new_tokens: limit,
                    ignore_eos: prompt.is_some_and(|p| p.ignore_eos),
                });
            }
            let first = members.first().copied().unwrap_or(0) as u64;
            worker.send(&Op::Generate {
                batch: bi,
                requests,
                stream: e.stream,
                seed: wl.sampling.seed.wrapping_add(first),
                return_ids: e.return_ids,
            })?;
            let mut times: Vec<Vec<f64>> = vec![Vec::new(); members.len()];
            let mut finished: Vec<Finished> = Vec::new();
            let (t0, t1, steps) = loop {
                match worker.recv(Wait::Silence(e.silence))? {
                    Event::Token { request, t } => {
                        let t = to_llem(t);
                        if let Some(k) = members.iter().position(|&m| m as u32 == request)
                            && let Some(v) = times.get_mut(k)
                        {
                            v.push(t);
                        }
                        sink.on_tokens(request, t, 1);
                    }
                    Event::RequestDone {
                        request,
                        output_tokens,
                        finish_reason,
                        token_ids,
                        end_t,
                    } => finished.push(Finished {
                        request,
                        output_tokens,
                        finish: if finish_reason == "stop" {
                            FinishReason::Stop
                        } else {
                            FinishReason::Length
                        },
                        end_t: to_llem(end_t),
                        ids: token_ids,
                    }),
                    Event::BatchDone {
                        t0,
                        t1,
                        steps,
                        device_peak_bytes,
                        rss_peak_bytes,
                    } => {
                        device_peak = device_peak.max(device_peak_bytes);
                        rss_peak = rss_peak.max(rss_peak_bytes);
                        break (to_llem(t0), to_llem(t1), steps);
                    }
                    Event::Progress { .. } | Event::Unknown => {}
                    other => return Err(err(other, "a token or batch_done")),
                }
            };
            summary.effective_batch_size += members.len() as f64;
            slot_steps += u64::from(steps) * members.len() as u64;
            for f in finished {
                let k = members.iter().position(|&m| m as u32 == f.request);
                let mut token_times = k
                    .and_then(|k| times.get_mut(k))
                    .map(std::mem::take)
                    .unwrap_or_default();
                busy_steps += u64::from(f.output_tokens);
                if !e.stream {
                    // One generate() call: every request of the batch waited for all of it.
                    sink.on_tokens(f.request, t1, f.output_tokens);
                }
                token_times.truncate(f.output_tokens as usize);
                let idx = f.request as usize;
                if let (Some(ids), Some(slot)) = (f.ids, ids_out.get_mut(idx)) {
                    *slot = ids;
                }
                sink.on_done(RequestRecord {
                    request_id: f.request,
                    batch_index: Some(bi),
                    input_tokens: lengths.get(idx).copied().unwrap_or(0),
                    output_tokens: f.output_tokens,
                    reference_output_tokens: references.get(idx).copied().flatten(),
                    scheduled_s: None,
                    submit_s: t0,
                    first_token_s: token_times.first().copied(),
                    end_s: if e.stream { f.end_t } else { t1 },
                    success: true,
                    error: None,
                    finish_reason: f.finish,
                    token_times_s: token_times,
                });
            }
        }
        if !batches.is_empty() {
            summary.effective_batch_size /= batches.len() as f64;
        }
        summary.padding_overhead = if slot_steps > 0 {
            (1.0 - busy_steps as f64 / slot_steps as f64).max(0.0)
        } else {
            0.0
        };
        summary.memory = match device_peak {
            Some(p) if e.on_gpu => Some(EngineMemory {
                peak_mib: p as f64 / 1_048_576.0,
                total_mib: e.device_total_bytes.map(|b| b as f64 / 1_048_576.0),
                source: "torch_cuda_max_memory_allocated",
            }),
            _ => rss_peak.map(|p| EngineMemory {
                peak_mib: p as f64 / 1_048_576.0,
                total_mib: None,
                source: "worker_rss",
            }),
        };
        summary.warnings = warnings;
        Ok((summary, ids_out))
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
    fn open(&self, _plan: ContextPlan) -> Result<Box<dyn Session + '_>, EngineError> {
        Ok(Box::new(TransformersSession { engine: self }))
    }
}

impl Session for TransformersSession<'_> {
    fn run(
        &mut self,
        workload: &Workload,
        sink: &mut dyn RequestSink,
    ) -> Result<RunSummary, EngineError> {
        self.run_inner(workload, sink).map(|(s, _)| s)
    }
    fn kv_cache_bytes(&self) -> Option<u64> {
        None
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
        let c = cfg(serde_json::json!({"model": "m", "engine": "transformers",
            "transformers": {"batch_size": 8}, "measurement": {"latency_profiling": true}}));
        assert_eq!(batch_plan(&c), (true, 1));
        let c = cfg(serde_json::json!({"model": "m", "engine": "transformers",
            "transformers": {"batch_size": 8, "num_beams": 2},
            "measurement": {"latency_profiling": true}}));
        assert_eq!(batch_plan(&c), (false, 8));
        let c = cfg(serde_json::json!({"model": "m", "engine": "transformers",
            "transformers": {"batch_size": 4}}));
        assert_eq!(batch_plan(&c), (false, 4));
        let c = cfg(serde_json::json!({"model": "m", "engine": "transformers"}));
        assert_eq!(batch_plan(&c), (false, 1));
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
            "missing_package",
            "No module named 'torch'",
            ErrorExtra {
                package: Some("torch"),
                ..ErrorExtra::default()
            },
        );
        assert!(m.contains("py -m pip install torch transformers"), "{m}");
        let m = worker_error(
            "py",
            "rejected",
            "ValueError: bad",
            ErrorExtra {
                field: Some("transformers.cache_implementation"),
                ..ErrorExtra::default()
            },
        );
        assert!(m.contains("`transformers.cache_implementation`"), "{m}");
    }
}
