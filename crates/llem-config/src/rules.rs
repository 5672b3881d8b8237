//! What depends on more than one field: resolution of engine-dependent defaults, the
//! cross-field rules, and warnings about settings that have no effect.

use crate::model::engines::transformers::AttnImplementation;
use crate::model::engines::{
    LlamaCppConfig, SglangConfig, TensorRtConfig, TgiConfig, TransformersConfig, VllmConfig,
};
use std::num::NonZeroU32;
use std::path::Path;

use crate::model::{
    Arrival, BatchingStrategy, Dtype, Engine, ExperimentConfig, LoraConfig, Methodology,
    RunnerKind, RunnerSpec, TrafficConfig,
};
use crate::schema::Violation;

/// Where results go when nothing else says.
pub const DEFAULT_OUTPUT_DIR: &str = "./results";

fn violation(path: &[&str], message: String) -> Violation {
    Violation {
        path: path.iter().map(|s| (*s).to_string()).collect(),
        message,
    }
}

/// `lora:` applied, or refused with the reason: each engine's way of applying an adapter,
/// and the adapter file itself, checked before anything runs.
fn check_lora(cfg: &ExperimentConfig, l: &LoraConfig, out: &mut Vec<Violation>) {
    if l.adapter_id.is_some() == l.adapter_path.is_some() {
        out.push(violation(
            &["lora"],
            "`lora:` needs exactly one of `adapter_id` and `adapter_path`".into(),
        ));
        return;
    }
    let engine = cfg.engine;
    let runner = cfg.runner().map(|r| r.kind());
    if runner == Some(RunnerKind::External) {
        out.push(violation(
            &["lora"],
            format!(
                "`lora:` on a server llem did not start (`runners: {{{engine}: external:...}}`): \
                 llem cannot load an adapter into it; start the server with the adapter and \
                 name it in `model`"
            ),
        ));
        return;
    }
    let refuse = |field: &str, why: String, out: &mut Vec<Violation>| {
        out.push(violation(&["lora", field], why));
    };
    match engine {
        Engine::LlamaCpp => {
            if l.adapter_id.is_some() {
                refuse(
                    "adapter_id",
                    "llamacpp applies GGUF LoRA adapters from a file: set `lora.adapter_path` \
                     to one (llama.cpp's convert_lora_to_gguf.py converts a PEFT adapter)"
                        .into(),
                    out,
                );
            }
            if l.merge_weights {
                refuse(
                    "merge_weights",
                    "llamacpp applies adapters at run time and cannot merge them into the \
                     weights; merge them into a GGUF model instead"
                        .into(),
                    out,
                );
            }
            if runner == Some(RunnerKind::Docker) {
                out.push(violation(
                    &["lora"],
                    "`lora:` with `runners: {llamacpp: docker}`: llem does not mount adapters \
                     into the container; run llama-server locally"
                        .into(),
                ));
            }
        }
        Engine::Transformers => {
            if runner == Some(RunnerKind::Docker) && l.adapter_path.is_some() {
                out.push(violation(
                    &["lora"],
                    "`lora.adapter_path` with `runners: {transformers: docker}`: llem does not \
                     mount adapters into the container; use `adapter_id` or a local runner"
                        .into(),
                ));
            }
        }
        Engine::Vllm => {
            if l.adapter_id.is_some() {
                refuse(
                    "adapter_id",
                    "vllm serves adapters from a local directory: set `lora.adapter_path`".into(),
                    out,
                );
            }
            if (l.scale - 1.0).abs() > f64::EPSILON {
                refuse(
                    "scale",
                    format!(
                        "vllm applies an adapter at full strength only; `scale: {}` cannot be honoured",
                        l.scale
                    ),
                    out,
                );
            }
            if l.merge_weights {
                refuse(
                    "merge_weights",
                    "vllm serves adapters beside the base weights and cannot merge them".into(),
                    out,
                );
            }
            if runner == Some(RunnerKind::Docker) {
                out.push(violation(
                    &["lora"],
                    "`lora:` with `runners: {vllm: docker}`: llem does not mount adapters into \
                     the container; run vllm locally or bake the adapter into the image"
                        .into(),
                ));
            }
        }
        Engine::Sglang | Engine::Tgi | Engine::TensorRt | Engine::OpenAi => {
            out.push(violation(
                &["lora"],
                format!(
                    "llem does not apply LoRA adapters on {engine}: it would measure the base \
                     model under the adapter's name; use llamacpp, transformers or vllm"
                ),
            ));
        }
    }
    if let Some(p) = &l.adapter_path
        && !Path::new(p).exists()
    {
        refuse(
            "adapter_path",
            format!("adapter `{p}` not found (paths are relative to the working directory)"),
            out,
        );
    }
}

/// Fills what depends on other fields so the config says exactly what will run: the active
/// engine's section, its runner, dtype, gamma burstiness; drops a `measurement.window` that
/// the methodology does not use.
pub fn resolve(cfg: &mut ExperimentConfig, warnings: &mut Vec<String>) {
    match cfg.engine {
        Engine::LlamaCpp => {
            cfg.llamacpp
                .get_or_insert_with(|| Box::new(LlamaCppConfig::default()));
        }
        Engine::Transformers => {
            cfg.transformers
                .get_or_insert_with(|| Box::new(TransformersConfig::default()));
        }
        Engine::Vllm => {
            cfg.vllm
                .get_or_insert_with(|| Box::new(VllmConfig::default()));
        }
        Engine::TensorRt => {
            cfg.tensorrt
                .get_or_insert_with(|| Box::new(TensorRtConfig::default()));
        }
        Engine::Sglang => {
            cfg.sglang
                .get_or_insert_with(|| Box::new(SglangConfig::default()));
        }
        Engine::Tgi => {
            cfg.tgi
                .get_or_insert_with(|| Box::new(TgiConfig::default()));
        }
        Engine::OpenAi => {}
    }
    if !cfg.runners.contains_key(&cfg.engine)
        && let Some(r) = RunnerSpec::default_for(cfg.engine)
    {
        cfg.runners.insert(cfg.engine, r);
    }
    if cfg.dtype.is_none() {
        let trt = cfg.tensorrt.as_ref().and_then(|t| t.dtype);
        cfg.dtype = match cfg.engine {
            Engine::TensorRt if trt.is_some() => trt,
            e => e.uses_dtype().then_some(Dtype::Bfloat16),
        };
    }
    if let Some(t) = cfg.traffic.as_mut()
        && t.arrival == Arrival::Gamma
        && t.burstiness.is_none()
    {
        t.burstiness = Some(1.0);
    }
    if cfg.measurement.methodology != Methodology::Windowed && cfg.measurement.window.is_some() {
        cfg.measurement.window = None;
        warnings.push(format!(
            "measurement.window is ignored: methodology is {}",
            cfg.measurement.methodology
        ));
    }
    if cfg.output_dir.is_none() {
        cfg.output_dir = Some(DEFAULT_OUTPUT_DIR.to_string());
    }
    // Synthetic lengths are part of what is measured: write them out so the hash and the
    // effective config say exactly which lengths ran.
    if cfg.dataset.source == "synthetic" && cfg.dataset.synthetic.is_none() {
        cfg.dataset.synthetic = Some(crate::model::SyntheticConfig::default());
    }
}

/// The rules that involve more than one field. Violations make a configuration invalid;
/// warnings are reported with the plan.
pub fn check(cfg: &ExperimentConfig, out: &mut Vec<Violation>, warnings: &mut Vec<String>) {
    if cfg.model.trim().is_empty() {
        out.push(violation(&["model"], "`model` must not be empty".into()));
    }
    if cfg.dataset.source.trim().is_empty() {
        out.push(violation(
            &["dataset", "source"],
            "`dataset.source` must not be empty".into(),
        ));
    }
    if cfg.dataset.synthetic.is_some() && cfg.dataset.source != "synthetic" {
        out.push(violation(
            &["dataset", "synthetic"],
            format!(
                "`dataset.synthetic` applies to `source: synthetic` only (source is `{}`)",
                cfg.dataset.source
            ),
        ));
    }
    check_engine_sections(cfg, out);
    check_runners(cfg, out);
    check_device(cfg, out);
    check_traffic(cfg, out);
    rate_methodology_warning(cfg, warnings);
    check_common(cfg, out, warnings);
    check_dtype(cfg, out, warnings);
    if let Some(t) = &cfg.transformers {
        check_transformers(cfg, t, out, warnings);
    }
    if let Some(v) = &cfg.vllm {
        check_vllm(cfg, v, out, warnings);
    }
    if let Some(l) = &cfg.llamacpp {
        check_llamacpp(cfg, l, out, warnings);
    }
}

/// `steady_state` at a request rate: the ML.ENERGY rule trusts a window only when the batch
/// is nearly full, which an open-loop rate below the server's capacity never makes it, so
/// every rate of a sweep would read as unstable. Said before the night is spent.
fn rate_methodology_warning(cfg: &ExperimentConfig, warnings: &mut Vec<String>) {
    if cfg.measurement.methodology != crate::Methodology::SteadyState || !cfg.is_served() {
        return;
    }
    let t = cfg.effective_traffic();
    if t.arrival == crate::Arrival::AllAtOnce || t.rate_qps.is_none() {
        return;
    }
    warnings.push(format!(
        "measurement.methodology steady_state with traffic at {} req/s ({}): the steady state \
         is trusted only at a batch utilisation of 85 % or more, which a rate below the \
         server's capacity does not reach, so such a cell reads as unstable; to measure a \
         deployment at given rates use methodology `windows` (docs/serving.md, \"my server at \
         three rates\")",
        crate::schema::fmt_num(t.rate_qps.unwrap_or_default()),
        t.arrival
    ));
}

fn check_engine_sections(cfg: &ExperimentConfig, out: &mut Vec<Violation>) {
    for &e in Engine::WITH_SECTIONS {
        if e != cfg.engine && cfg.has_section(e) {
            out.push(violation(
                &[e.as_str()],
                format!(
                    "`{e}:` section given but `engine` is `{}`; remove the section or set \
                     `engine: {e}`",
                    cfg.engine
                ),
            ));
        }
    }
}

/// GPU settings apply to the GPUs llem measures on this host; a server llem did not start
/// runs wherever it runs, and a sampler that reads no GPU names none to set.
fn check_device(cfg: &ExperimentConfig, out: &mut Vec<Violation>) {
    let Some(d) = cfg.device.as_deref().filter(|d| d.touches_gpus()) else {
        return;
    };
    if let Some(RunnerSpec::External { url }) = cfg.runner() {
        out.push(violation(
            &["device"],
            format!(
                "GPU settings cannot be honoured for an external server ({url}): llem does not \
                 know which GPUs it runs on; set them on the server's host (nvidia-smi) and note \
                 them, or let llem start the server (runner local or docker)"
            ),
        ));
    }
    let sampler = cfg.energy_sampler;
    if matches!(
        sampler,
        None | Some(
            crate::EnergySampler::Rapl
                | crate::EnergySampler::Estimate
                | crate::EnergySampler::Amdgpu
        )
    ) {
        let key = [
            ("gpu_power_limit_w", d.gpu_power_limit_w.is_some()),
            ("gpu_locked_clocks_mhz", d.gpu_locked_clocks_mhz.is_some()),
            (
                "gpu_locked_memory_clocks_mhz",
                d.gpu_locked_memory_clocks_mhz.is_some(),
            ),
        ]
        .into_iter()
        .find_map(|(k, set)| set.then_some(k))
        .unwrap_or("gpu_power_limit_w");
        out.push(violation(
            &["device", key],
            format!(
                "GPU settings apply to the NVIDIA GPUs the cell measures (through NVML), and \
                 energy_sampler `{}` measures none; use `auto`, `nvml` or `zeus`",
                sampler.map_or("null", |s| s.as_str())
            ),
        ));
    }
}

fn runner_choices(engine: Engine) -> &'static str {
    match engine {
        Engine::LlamaCpp => "embedded, local, docker, docker:<image> or external:<url>",
        Engine::Transformers => "local, docker or docker:<image>",
        Engine::OpenAi => "external:<url>",
        Engine::Vllm | Engine::TensorRt | Engine::Sglang | Engine::Tgi => {
            "local, docker, docker:<image> or external:<url>"
        }
    }
}

fn check_runners(cfg: &ExperimentConfig, out: &mut Vec<Violation>) {
    for (engine, runner) in &cfg.runners {
        if !runner.supports(*engine) {
            out.push(violation(
                &["runners", engine.as_str()],
                format!(
                    "engine `{engine}` cannot run as `{runner}`; use {}",
                    runner_choices(*engine)
                ),
            ));
        }
    }
    if cfg.engine == Engine::OpenAi && cfg.runner().is_none() {
        out.push(violation(
            &["engine"],
            "engine `openai` needs the server's URL: `runners: {openai: \
             \"external:http://host:port\"}`"
                .into(),
        ));
    }
}

fn check_traffic(cfg: &ExperimentConfig, out: &mut Vec<Violation>) {
    let Some(t) = &cfg.traffic else {
        return;
    };
    if !cfg.is_served() {
        let msg = match cfg.engine {
            Engine::LlamaCpp => "`traffic:` needs llama.cpp as a server: set `runners: \
                                 {llamacpp: local}` (llama-server) or `external:<url>`"
                .to_string(),
            e => format!("`traffic:` applies to serving engines; {e} runs offline batches"),
        };
        out.push(violation(&["traffic"], msg));
    }
    if let Some(trace) = &t.trace {
        check_replaced_traffic(cfg, t, "a trace replay", out);
        check_trace(cfg, trace, out);
    }
    if let Some(c) = &t.conversations {
        check_replaced_traffic(cfg, t, "conversations", out);
        check_conversations(cfg, c, out);
    }
    match t.arrival {
        Arrival::Constant | Arrival::Poisson | Arrival::Gamma if t.rate_qps.is_none() => {
            out.push(violation(
                &["traffic", "arrival"],
                format!("`traffic.arrival: {}` needs `traffic.rate_qps`", t.arrival),
            ));
        }
        Arrival::AllAtOnce if t.rate_qps.is_some() => out.push(violation(
            &["traffic", "rate_qps"],
            "`traffic.rate_qps` applies to constant, poisson and gamma arrivals, not \
             all_at_once"
                .into(),
        )),
        _ => {}
    }
    let eff = cfg.effective_traffic();
    if eff.arrival == Arrival::AllAtOnce
        && eff.duration_seconds.is_some()
        && eff.n_requests.is_none()
        && eff.max_concurrency.is_none()
    {
        out.push(violation(
            &["traffic", "arrival"],
            "`traffic.arrival: all_at_once` for a duration sends requests without pause: set \
             `traffic.max_concurrency` (a closed loop) or a rate (constant, poisson, gamma)"
                .into(),
        ));
    }
    if t.burstiness.is_some() && t.arrival != Arrival::Gamma {
        out.push(violation(
            &["traffic", "burstiness"],
            "`traffic.burstiness` applies to gamma arrivals only".into(),
        ));
    }
    check_schedule_length(cfg, &cfg.effective_traffic(), out);
}

/// A trace replay or conversations are the whole schedule: the fields that would shape
/// another one are refused instead of silently lost.
fn check_replaced_traffic(
    cfg: &ExperimentConfig,
    t: &TrafficConfig,
    what: &str,
    out: &mut Vec<Violation>,
) {
    let clash = |field: &str, why: &str| {
        violation(
            &["traffic", field],
            format!("`traffic.{field}` does not apply to {what}: {why}"),
        )
    };
    let own = if t.trace.is_some() {
        "the trace's own times are the arrivals"
    } else {
        "each conversation sends its turns after the replies and think times"
    };
    if t.arrival != Arrival::AllAtOnce {
        out.push(clash("arrival", own));
    }
    if t.rate_qps.is_some() {
        out.push(clash(
            "rate_qps",
            if t.trace.is_some() {
                "scale the trace's gaps with `trace.time_scale`"
            } else {
                "space the conversations with `conversations.session_interval_seconds`"
            },
        ));
    }
    if t.burstiness.is_some() {
        out.push(clash("burstiness", own));
    }
    if t.duration_seconds.is_some() {
        out.push(clash(
            "duration_seconds",
            if t.trace.is_some() {
                "use `trace.duration_seconds`"
            } else {
                "the conversations last as long as their turns"
            },
        ));
    }
    if t.n_requests.is_some() {
        out.push(clash(
            "n_requests",
            if t.trace.is_some() {
                "use `trace.max_requests`"
            } else {
                "use `conversations.sessions` and `turns`"
            },
        ));
    }
    if t.max_concurrency.is_some() {
        out.push(clash(
            "max_concurrency",
            "a cap would hold requests back from the times they are due",
        ));
    }
    if t.trace.is_some() && t.conversations.is_some() {
        out.push(violation(
            &["traffic", "conversations"],
            "`traffic.conversations` and `traffic.trace` are two schedules; use one".into(),
        ));
    }
    if cfg.measurement.methodology == Methodology::Windows {
        out.push(violation(
            &["measurement", "methodology"],
            format!(
                "`methodology: windows` sends traffic for the windows' length; {what} lasts as \
                 long as its own schedule (use total, or steady_state)"
            ),
        ));
    }
}

/// Conversations need messages of their own: a dataset of conversations (ShareGPT) or
/// synthetic ones, and a conversation for every session.
fn check_conversations(
    cfg: &ExperimentConfig,
    c: &crate::ConversationsConfig,
    out: &mut Vec<Violation>,
) {
    let source = cfg.dataset.source.as_str();
    let conversational = source == "sharegpt" || source == "synthetic" || source.ends_with(".json");
    if !conversational {
        out.push(violation(
            &["dataset", "source"],
            format!(
                "conversations take their messages from a dataset of conversations (sharegpt, or \
                 a ShareGPT-style .json file) or from synthetic ones; `{source}` has single \
                 prompts"
            ),
        ));
    }
    let needed = if source == "synthetic" {
        u64::from(c.sessions) * u64::from(c.turns)
    } else {
        u64::from(c.sessions)
    };
    if u64::from(cfg.dataset.n_prompts) < needed {
        out.push(violation(
            &["dataset", "n_prompts"],
            format!(
                "{} conversations{} need {needed} {} from the dataset; `dataset.n_prompts` is {}",
                c.sessions,
                if source == "synthetic" {
                    format!(" of {} turns", c.turns)
                } else {
                    String::new()
                },
                if source == "synthetic" {
                    "messages"
                } else {
                    "conversations"
                },
                cfg.dataset.n_prompts
            ),
        ));
    }
    for (field, v) in [
        ("think_time_seconds", c.think_time_seconds),
        ("session_interval_seconds", c.session_interval_seconds),
    ] {
        if !(v.is_finite() && v >= 0.0) {
            out.push(violation(
                &["traffic", "conversations", field],
                format!("must be 0 or more, not {v}"),
            ));
        }
    }
}

/// A trace's own settings: its columns, its slice, its filter, and text to cut prompts from.
fn check_trace(cfg: &ExperimentConfig, trace: &crate::TraceConfig, out: &mut Vec<Violation>) {
    use crate::TraceFormatName as F;
    if cfg.dataset.source == "synthetic" {
        out.push(violation(
            &["dataset", "source"],
            "a trace replay cuts its prompts from the dataset's text: use sharegpt, \
             aienergyscore or a JSONL file, not synthetic"
                .into(),
        ));
    }
    let at = |field: &'static str| ["traffic", "trace", field];
    match (trace.format, &trace.columns) {
        (F::Csv | F::Jsonl, None) => out.push(violation(
            &at("format"),
            format!(
                "`format: {}` needs `columns:` naming `timestamp`, `input_tokens` and \
             `output_tokens` (and optionally `time_unit`, `hash_ids`, `model`)",
                trace.format
            ),
        )),
        (F::Azure | F::BurstGpt | F::Mooncake, Some(_)) => out.push(violation(
            &at("columns"),
            format!(
                "`format: {}` has fixed columns; `columns:` is for csv and jsonl traces",
                trace.format
            ),
        )),
        _ => {}
    }
    if !(trace.start_seconds.is_finite() && trace.start_seconds >= 0.0) {
        out.push(violation(
            &at("start_seconds"),
            format!("must be 0 or more, not {}", trace.start_seconds),
        ));
    }
    if let Some(d) = trace.duration_seconds
        && !(d.is_finite() && d > 0.0 && d <= TrafficConfig::MAX_SCHEDULE_S)
    {
        out.push(violation(
            &at("duration_seconds"),
            format!(
                "must be more than 0 and at most {} s (30 days), not {d}",
                TrafficConfig::MAX_SCHEDULE_S
            ),
        ));
    }
    if !(trace.time_scale.is_finite() && trace.time_scale > 0.0) {
        out.push(violation(
            &at("time_scale"),
            format!("must be more than 0, not {}", trace.time_scale),
        ));
    }
    let has_model_column = match trace.format {
        F::BurstGpt => true,
        F::Azure | F::Mooncake => false,
        F::Csv | F::Jsonl => trace.columns.as_ref().is_some_and(|c| c.model.is_some()),
    };
    if let Some(m) = &trace.model
        && !has_model_column
    {
        out.push(violation(
            &at("model"),
            format!(
                "`model: {m}` keeps one model's requests, but a {} trace has no model column{}",
                trace.format,
                if matches!(trace.format, F::Csv | F::Jsonl) {
                    " (name it in `columns.model`)"
                } else {
                    ""
                }
            ),
        ));
    }
}

/// A schedule must fit [`TrafficConfig::MAX_SCHEDULE_S`]: a send duration past it, a gamma
/// burstiness past [`TrafficConfig::MAX_BURSTINESS`], or a rate so low that the requests
/// would be spread past it (unless a duration stops them first) is refused here, before
/// anything runs.
fn check_schedule_length(cfg: &ExperimentConfig, t: &TrafficConfig, out: &mut Vec<Violation>) {
    let max_s = TrafficConfig::MAX_SCHEDULE_S;
    if let Some(d) = t.duration_seconds.filter(|d| d.is_nan() || *d > max_s) {
        out.push(violation(
            &["traffic", "duration_seconds"],
            format!(
                "`traffic.duration_seconds` is {d:?} s; llem sends schedules of at most {max_s} s \
                 (30 days)"
            ),
        ));
    }
    if let Some(b) = t
        .burstiness
        .filter(|b| b.is_nan() || *b > TrafficConfig::MAX_BURSTINESS)
    {
        out.push(violation(
            &["traffic", "burstiness"],
            format!(
                "`traffic.burstiness` is {b:?}; gamma arrivals burstier than {} degenerate into a \
                 few astronomically long gaps",
                TrafficConfig::MAX_BURSTINESS
            ),
        ));
    }
    let Some(rate) = t.rate_qps.filter(|_| t.arrival != Arrival::AllAtOnce) else {
        return;
    };
    if let Some(d) = t.duration_seconds {
        let expected = rate * d;
        let cap = f64::from(TrafficConfig::MAX_REQUESTS);
        if t.n_requests.is_none() && (expected.is_nan() || expected > cap) {
            out.push(violation(
                &["traffic", "rate_qps"],
                format!(
                    "`traffic.rate_qps: {rate:?}` for {d:?} s schedules about {expected:.3e} \
                     requests; one cell sends at most {cap} (set `traffic.n_requests`, or lower \
                     the rate or the duration)"
                ),
            ));
        }
        return;
    }
    let n = t.n_requests.unwrap_or(cfg.dataset.n_prompts);
    let span = f64::from(n) / rate;
    if span.is_nan() || span > max_s {
        out.push(violation(
            &["traffic", "rate_qps"],
            format!(
                "`traffic.rate_qps: {rate:?}` spreads {n} requests over {span:.3e} s; llem sends \
                 schedules of at most {max_s} s (30 days): raise the rate or set \
                 `traffic.duration_seconds`"
            ),
        ));
    }
}

/// Methodology `windows` measures a server under traffic sent on time: a served engine, and
/// a schedule that lasts the ramp and every window.
fn check_windows(cfg: &ExperimentConfig, out: &mut Vec<Violation>) {
    let w = cfg.measurement.windows_or_default();
    if !cfg.is_served() {
        out.push(violation(
            &["measurement", "methodology"],
            format!(
                "`methodology: windows` measures a server under sustained traffic; {} runs a \
                 fixed set of prompts offline (serve it, or use total or steady_state)",
                cfg.engine
            ),
        ));
        return;
    }
    let Some(t) = cfg.traffic.as_deref() else {
        out.push(violation(
            &["measurement", "methodology"],
            "`methodology: windows` needs `traffic:`: a rate (constant, poisson, gamma with \
             `rate_qps`) or a closed loop (`max_concurrency`)"
                .into(),
        ));
        return;
    };
    if t.n_requests.is_some() {
        out.push(violation(
            &["traffic", "n_requests"],
            "`methodology: windows` sends traffic for a time, not a count: leave out \
             `traffic.n_requests` (the windows set the duration)"
                .into(),
        ));
    }
    if let Some(d) = t.duration_seconds
        && d < w.span_s()
    {
        out.push(violation(
            &["traffic", "duration_seconds"],
            format!(
                "`traffic.duration_seconds: {}` ends before the windows do: the ramp and {} \
                 windows of {} s need {} s (leave it out to send for exactly that long)",
                crate::schema::fmt_num(d),
                w.n_windows,
                crate::schema::fmt_num(w.window_seconds),
                crate::schema::fmt_num(w.span_s())
            ),
        ));
    }
}

/// `max_output_tokens` is a hard cap on every engine: synthetic replies asked to be longer
/// are cut to it, and the plan says so.
fn check_output_cap(cfg: &ExperimentConfig, warnings: &mut Vec<String>) {
    let (Some(cap), Some(s)) = (cfg.max_output_tokens, cfg.dataset.synthetic.as_ref()) else {
        return;
    };
    if cfg.dataset.source != "synthetic" {
        return;
    }
    if s.output_tokens > cap {
        warnings.push(format!(
            "dataset.synthetic.output_tokens ({}) exceeds max_output_tokens ({cap}): every \
             reply is capped at {cap} tokens",
            s.output_tokens
        ));
    } else if s.distribution != crate::model::LengthDistribution::Fixed
        && f64::from(s.output_tokens) * (1.0 + s.spread) > f64::from(cap)
    {
        warnings.push(format!(
            "dataset.synthetic.output_tokens is drawn around {} with spread {}: replies drawn \
             above max_output_tokens ({cap}) are capped at it",
            s.output_tokens,
            crate::schema::fmt_num(s.spread)
        ));
    }
}

fn check_common(cfg: &ExperimentConfig, out: &mut Vec<Violation>, warnings: &mut Vec<String>) {
    if let (Some(min), Some(max)) = (cfg.decoder.min_new_tokens, cfg.max_output_tokens)
        && min > max
    {
        out.push(violation(
            &["decoder", "min_new_tokens"],
            format!("`decoder.min_new_tokens` ({min}) exceeds `max_output_tokens` ({max})"),
        ));
    }
    // The output cap's warnings come before the warmup's, as they always have.
    check_output_cap(cfg, warnings);
    check_warmup(cfg, out, warnings);
    check_measurement(cfg, out, warnings);
    if let Some(l) = &cfg.lora {
        check_lora(cfg, l, out);
    }
    if let Some(kw) = &cfg.passthrough_kwargs {
        for key in kw.keys() {
            if ExperimentConfig::KEYS.contains(&key.as_str()) {
                out.push(violation(
                    &["passthrough_kwargs", key],
                    format!(
                        "`passthrough_kwargs.{key}` collides with the top-level field \
                         `{key}`; set `{key}` directly"
                    ),
                ));
            }
        }
    }
    if cfg.energy_sampler.is_none() {
        warnings.push(
            "energy_sampler is null: energy is not measured (throughput and latency only)".into(),
        );
    }
}

/// Convergence bounds, the thermal floor and the warmup gate.
fn check_warmup(cfg: &ExperimentConfig, out: &mut Vec<Violation>, warnings: &mut Vec<String>) {
    let w = &cfg.warmup;
    if w.enabled && w.convergence_detection {
        if w.min_prompts > w.max_prompts {
            out.push(violation(
                &["warmup", "min_prompts"],
                format!(
                    "`warmup.min_prompts` ({}) exceeds `warmup.max_prompts` ({})",
                    w.min_prompts, w.max_prompts
                ),
            ));
        }
        if w.window_size > w.max_prompts {
            out.push(violation(
                &["warmup", "window_size"],
                format!(
                    "`warmup.window_size` ({}) exceeds `warmup.max_prompts` ({})",
                    w.window_size, w.max_prompts
                ),
            ));
        }
    }
    if w.enabled && w.thermal_floor_seconds < 30.0 {
        warnings.push(format!(
            "warmup.thermal_floor_seconds is {} s, below the 30 s the methodology \
             recommends; results will be flagged",
            crate::schema::fmt_num(w.thermal_floor_seconds)
        ));
    }
    if w.gate.is_some() {
        if !w.enabled {
            out.push(violation(
                &["warmup", "gate"],
                "`warmup.gate` keeps warming until the device is steady; warmup is disabled".into(),
            ));
        }
        if cfg.energy_sampler.is_none() {
            out.push(violation(
                &["warmup", "gate"],
                "`warmup.gate` judges sampled power and temperature; `energy_sampler` is null"
                    .into(),
            ));
        }
    }
}

/// The methodology's window, phase split and windows, and latency profiling.
fn check_measurement(cfg: &ExperimentConfig, out: &mut Vec<Violation>, warnings: &mut Vec<String>) {
    let m = &cfg.measurement;
    if m.methodology == Methodology::Windowed {
        match m.window {
            None => out.push(violation(
                &["measurement", "methodology"],
                "`measurement.methodology: windowed` needs `measurement.window: [start_s, \
                 end_s]`"
                    .into(),
            )),
            Some([start, end]) => {
                if start < 0.0 {
                    out.push(violation(
                        &["measurement", "window"],
                        "`measurement.window` starts before 0 s".into(),
                    ));
                }
                if end <= start {
                    out.push(violation(
                        &["measurement", "window"],
                        "`measurement.window` must end after it starts".into(),
                    ));
                }
            }
        }
    }
    if matches!(
        m.phase_split,
        Some(crate::model::PhaseSplit::Difference | crate::model::PhaseSplit::Both)
    ) && m.methodology != Methodology::Total
    {
        out.push(violation(
            &["measurement", "phase_split"],
            format!(
                "`phase_split: {}` compares the whole run with the same prompts run for one \
                 output token; methodology {} measures a part of the run, which the one-token \
                 run has no counterpart of (use methodology total, or phase_split: attributed)",
                m.phase_split.map_or("", |p| p.as_str()),
                m.methodology
            ),
        ));
    }
    if m.methodology == Methodology::Windows {
        check_windows(cfg, out);
    } else if m.windows.is_some() {
        out.push(violation(
            &["measurement", "windows"],
            format!(
                "`measurement.windows` applies to `methodology: windows`; methodology is {}",
                m.methodology
            ),
        ));
    }
    if m.latency_profiling {
        if cfg.engine == Engine::TensorRt {
            warnings.push(
                "latency profiling is not supported by tensorrt; latency fields stay empty".into(),
            );
        } else {
            warnings.push(
                "latency profiling is on: per-token timing may perturb energy, so profiled \
                 and unprofiled runs are not directly comparable"
                    .into(),
            );
        }
    }
}

fn check_dtype(cfg: &ExperimentConfig, out: &mut Vec<Violation>, warnings: &mut Vec<String>) {
    if let Some(d) = cfg.dtype
        && !cfg.engine.uses_dtype()
    {
        let why = match cfg.engine {
            Engine::LlamaCpp => "weights keep the GGUF file's types",
            Engine::OpenAi
            | Engine::Transformers
            | Engine::Vllm
            | Engine::TensorRt
            | Engine::Sglang
            | Engine::Tgi => "the server decides",
        };
        warnings.push(format!("dtype {d} has no effect on {}: {why}", cfg.engine));
    }
    let f32 = cfg.dtype == Some(Dtype::Float32);
    match cfg.engine {
        Engine::TensorRt => {
            let section = cfg.tensorrt.as_ref().and_then(|t| t.dtype);
            if let (Some(a), Some(b)) = (cfg.dtype, section)
                && a != b
            {
                out.push(violation(
                    &["tensorrt", "dtype"],
                    format!("`tensorrt.dtype` ({b}) contradicts `dtype` ({a})"),
                ));
            }
            if f32 || section == Some(Dtype::Float32) {
                out.push(violation(
                    &["dtype"],
                    "TensorRT-LLM has no float32 path; use float16 or bfloat16".into(),
                ));
            }
        }
        Engine::Tgi if f32 => out.push(violation(
            &["dtype"],
            "TGI serves float16 or bfloat16 only".into(),
        )),
        Engine::Vllm if f32 => {
            let q = cfg
                .vllm
                .as_ref()
                .and_then(|v| v.engine.as_ref())
                .and_then(|e| e.quantization);
            if let Some(q) = q.filter(|q| q.is_fp8()) {
                out.push(violation(
                    &["vllm", "engine", "quantization"],
                    format!("quantization `{q}` needs dtype float16 or bfloat16, not float32"),
                ));
            }
        }
        Engine::Transformers if f32 => {
            let attn = cfg
                .transformers
                .as_ref()
                .and_then(|t| t.attn_implementation);
            if let Some(a) = attn.filter(|a| {
                matches!(
                    a,
                    AttnImplementation::FlashAttention2 | AttnImplementation::FlashAttention3
                )
            }) {
                out.push(violation(
                    &["transformers", "attn_implementation"],
                    format!("`{a}` needs dtype float16 or bfloat16, not float32"),
                ));
            }
        }
        Engine::Tgi
        | Engine::Vllm
        | Engine::Transformers
        | Engine::LlamaCpp
        | Engine::Sglang
        | Engine::OpenAi => {}
    }
}

fn check_budget(
    section: &str,
    strategy: Option<BatchingStrategy>,
    budget: Option<u32>,
    max_input: Option<u32>,
    out: &mut Vec<Violation>,
    warnings: &mut Vec<String>,
) {
    let dynamic = matches!(
        strategy,
        Some(BatchingStrategy::Dynamic | BatchingStrategy::SortedDynamic)
    );
    match (dynamic, budget) {
        (false, Some(_)) => warnings.push(format!(
            "{section}.max_tokens_per_batch has no effect with static batching"
        )),
        (true, Some(b)) => {
            if let Some(m) = max_input.filter(|m| b < *m) {
                out.push(violation(
                    &[section, "max_tokens_per_batch"],
                    format!(
                        "`{section}.max_tokens_per_batch` ({b}) is smaller than one prompt \
                         (max_input_tokens {m})"
                    ),
                ));
            }
        }
        _ => {}
    }
}

fn check_transformers(
    cfg: &ExperimentConfig,
    t: &TransformersConfig,
    out: &mut Vec<Violation>,
    warnings: &mut Vec<String>,
) {
    let s = "transformers";
    if t.load_in_4bit == Some(true) && t.load_in_8bit == Some(true) {
        out.push(violation(
            &[s, "load_in_8bit"],
            "`load_in_4bit` and `load_in_8bit` are exclusive".into(),
        ));
    }
    if t.torch_compile != Some(true) {
        if t.torch_compile_mode.is_some() {
            out.push(violation(
                &[s, "torch_compile_mode"],
                "`transformers.torch_compile_mode` needs `transformers.torch_compile: true`".into(),
            ));
        }
        if t.torch_compile_backend.is_some() {
            out.push(violation(
                &[s, "torch_compile_backend"],
                "`transformers.torch_compile_backend` needs `transformers.torch_compile: true`"
                    .into(),
            ));
        }
    }
    if t.load_in_4bit != Some(true) {
        for (set, key) in [
            (t.bnb_4bit_compute_dtype.is_some(), "bnb_4bit_compute_dtype"),
            (t.bnb_4bit_quant_type.is_some(), "bnb_4bit_quant_type"),
            (
                t.bnb_4bit_use_double_quant.is_some(),
                "bnb_4bit_use_double_quant",
            ),
        ] {
            if set {
                out.push(violation(
                    &[s, key],
                    format!("`transformers.{key}` needs `transformers.load_in_4bit: true`"),
                ));
            }
        }
    }
    if t.cache_implementation.is_some() && t.use_cache == Some(false) {
        out.push(violation(
            &[s, "cache_implementation"],
            "`transformers.cache_implementation` needs the KV cache (`use_cache` is false)".into(),
        ));
    }
    if t.tp_plan.is_some() && t.device_map.is_some() {
        out.push(violation(
            &[s, "device_map"],
            "`transformers.tp_plan` and `transformers.device_map` are exclusive".into(),
        ));
    }
    if t.tp_size.is_some() && t.tp_plan.is_none() {
        out.push(violation(
            &[s, "tp_size"],
            "`transformers.tp_size` needs `transformers.tp_plan: auto`".into(),
        ));
    }
    if t.autocast_dtype.is_some() && t.autocast_enabled != Some(true) {
        out.push(violation(
            &[s, "autocast_dtype"],
            "`transformers.autocast_dtype` needs `transformers.autocast_enabled: true`".into(),
        ));
    }
    let batch = t.batch_size.map_or(1, NonZeroU32::get);
    if t.prompt_lookup_num_tokens.is_some() && batch > 1 {
        out.push(violation(
            &[s, "prompt_lookup_num_tokens"],
            format!(
                "`transformers.prompt_lookup_num_tokens` (assisted generation) decodes one \
                 request at a time in transformers; set `transformers.batch_size: 1` (it is {batch})",
            ),
        ));
    }
    let beams = t.num_beams.unwrap_or(1);
    if beams > 1 && !cfg.decoder.is_greedy() {
        out.push(violation(
            &[s, "num_beams"],
            format!(
                "`transformers.num_beams: {beams}` needs greedy decoding: set \
                 `decoder.do_sample: false` (or `decoder.preset: deterministic`)"
            ),
        ));
    }
    if beams <= 1 && (t.early_stopping.is_some() || t.length_penalty.is_some()) {
        warnings.push(
            "transformers.early_stopping / length_penalty have no effect without num_beams > 1"
                .into(),
        );
    }
    if beams > 1 && cfg.measurement.latency_profiling {
        warnings.push(
            "latency profiling does not stream beam search; this run falls back to per-batch \
             timing"
                .into(),
        );
    }
    check_budget(
        s,
        t.batching_strategy,
        t.max_tokens_per_batch,
        cfg.max_input_tokens,
        out,
        warnings,
    );
}

fn check_vllm(
    cfg: &ExperimentConfig,
    v: &VllmConfig,
    out: &mut Vec<Violation>,
    warnings: &mut Vec<String>,
) {
    if v.sampling.is_some() && v.beam_search.is_some() {
        out.push(violation(
            &["vllm", "beam_search"],
            "`vllm.sampling` and `vllm.beam_search` are exclusive".into(),
        ));
    }
    if let Some(e) = &v.engine {
        // Checked against `vllm serve --help=all` and AttentionConfig of vLLM 0.32: fields
        // whose flag is gone are refused, never passed on to make the server exit.
        let gone: [(&str, bool, &str); 3] = [
            (
                "swap_space",
                e.swap_space.is_some(),
                "vLLM no longer has `--swap-space` (its V1 engine preempts by recomputing)",
            ),
            (
                "num_scheduler_steps",
                e.num_scheduler_steps.is_some(),
                "multi-step scheduling (`--num-scheduler-steps`) left vLLM with its V0 engine",
            ),
            (
                "max_seq_len_to_capture",
                e.max_seq_len_to_capture.is_some(),
                "vLLM no longer has `--max-seq-len-to-capture`; CUDA graph sizes are set in \
                 `compilation_config` (`cudagraph_capture_sizes`)",
            ),
        ];
        for (field, set, why) in gone {
            if set {
                out.push(violation(
                    &["vllm", "engine", field],
                    format!("{why}; remove `vllm.engine.{field}` (checked against vLLM 0.32)"),
                ));
            }
        }
        if let Some(a) = &e.attention {
            let gone = [
                (
                    "use_prefill_decode_attention",
                    a.use_prefill_decode_attention.is_some(),
                ),
                ("use_cudnn_prefill", a.use_cudnn_prefill.is_some()),
                (
                    "disable_flashinfer_prefill",
                    a.disable_flashinfer_prefill.is_some(),
                ),
                (
                    "use_trtllm_ragged_deepseek_prefill",
                    a.use_trtllm_ragged_deepseek_prefill.is_some(),
                ),
            ];
            for (field, set) in gone {
                if set {
                    out.push(violation(
                        &["vllm", "engine", "attention", field],
                        format!(
                            "`{field}` is not a field of vLLM's AttentionConfig (checked \
                             against vLLM 0.32), which would refuse it and exit"
                        ),
                    ));
                }
            }
        }
        if e.kv_cache_memory_bytes.is_some() && e.gpu_memory_utilization.is_some() {
            out.push(violation(
                &["vllm", "engine", "kv_cache_memory_bytes"],
                "`kv_cache_memory_bytes` and `gpu_memory_utilization` are exclusive".into(),
            ));
        }
        if let (Some(batched), Some(len)) = (e.max_num_batched_tokens, e.max_model_len)
            && batched < len
            && e.enable_chunked_prefill != Some(true)
        {
            out.push(violation(
                &["vllm", "engine", "max_num_batched_tokens"],
                format!(
                    "`max_num_batched_tokens` ({batched}) must be at least `max_model_len` \
                         ({len}) unless chunked prefill is enabled"
                ),
            ));
        }
    }
    let limit = v
        .sampling
        .as_ref()
        .and_then(|s| s.max_tokens)
        .or_else(|| v.beam_search.as_ref().and_then(|b| b.max_tokens));
    if let (Some(a), Some(b)) = (limit, cfg.max_output_tokens)
        && a != b
    {
        warnings.push(format!(
            "vllm max_tokens ({a}) overrides max_output_tokens ({b}) for vLLM"
        ));
    }
}

fn check_llamacpp(
    cfg: &ExperimentConfig,
    l: &LlamaCppConfig,
    out: &mut Vec<Violation>,
    warnings: &mut Vec<String>,
) {
    if let (Some(n_ctx), Some(inp), Some(outp)) =
        (l.n_ctx, cfg.max_input_tokens, cfg.max_output_tokens)
    {
        let need = u64::from(l.batch_size.get()) * (u64::from(inp) + u64::from(outp));
        if need > u64::from(n_ctx) {
            out.push(violation(
                &["llamacpp", "n_ctx"],
                format!(
                    "`llamacpp.n_ctx` ({n_ctx}) cannot hold batch_size {} x ({inp} input + \
                     {outp} output) = {need} tokens",
                    l.batch_size
                ),
            ));
        }
    }
    check_budget(
        "llamacpp",
        Some(l.batching_strategy),
        l.max_tokens_per_batch,
        cfg.max_input_tokens,
        out,
        warnings,
    );
}
