//! The command line of each serving engine: which CLI to start and how every field of the
//! config's engine section becomes a flag. One table per engine; a field the table does not
//! know is an error naming it (never silently dropped, or two configurations that differ
//! only in that field would measure the same server).

use serde_json::Value;

use llem_config::{Engine, ExperimentConfig};

/// How one config field is written on the command line.
#[derive(Clone, Copy, Debug)]
enum Flag {
    /// `--flag VALUE`.
    Val(&'static str),
    /// `--flag` when true, nothing when false.
    Switch(&'static str),
    /// `--flag` when true, `--no-flag` when false.
    Pair(&'static str, &'static str),
    /// `--flag '{"json": ...}'`.
    Json(&'static str),
    /// `--flag a,b,c`.
    List(&'static str),
    /// A request parameter, not a server flag (sampling sections).
    Request,
    /// Goes into the engine's extra options file under this key (TensorRT-LLM's
    /// `--extra_llm_api_options`).
    Extra(&'static str),
}

use Flag::*;

const VLLM: &[(&str, Flag)] = &[
    ("gpu_memory_utilization", Val("--gpu-memory-utilization")),
    ("swap_space", Val("--swap-space")),
    ("cpu_offload_gb", Val("--cpu-offload-gb")),
    ("block_size", Val("--block-size")),
    ("kv_cache_dtype", Val("--kv-cache-dtype")),
    ("enforce_eager", Switch("--enforce-eager")),
    (
        "enable_chunked_prefill",
        Pair("--enable-chunked-prefill", "--no-enable-chunked-prefill"),
    ),
    ("max_num_seqs", Val("--max-num-seqs")),
    ("max_num_batched_tokens", Val("--max-num-batched-tokens")),
    ("max_model_len", Val("--max-model-len")),
    ("tensor_parallel_size", Val("--tensor-parallel-size")),
    ("pipeline_parallel_size", Val("--pipeline-parallel-size")),
    (
        "enable_prefix_caching",
        Pair("--enable-prefix-caching", "--no-enable-prefix-caching"),
    ),
    ("quantization", Val("--quantization")),
    ("num_scheduler_steps", Val("--num-scheduler-steps")),
    ("max_seq_len_to_capture", Val("--max-seq-len-to-capture")),
    (
        "distributed_executor_backend",
        Val("--distributed-executor-backend"),
    ),
    ("speculative_config", Json("--speculative-config")),
    ("offload_group_size", Val("--offload-group-size")),
    ("offload_num_in_group", Val("--offload-num-in-group")),
    ("offload_prefetch_step", Val("--offload-prefetch-step")),
    ("offload_params", List("--offload-params")),
    (
        "disable_custom_all_reduce",
        Switch("--disable-custom-all-reduce"),
    ),
    ("kv_cache_memory_bytes", Val("--kv-cache-memory-bytes")),
    ("compilation_config", Json("--compilation-config")),
    ("attention", Json("--attention-config")),
];

const SGLANG: &[(&str, Flag)] = &[
    ("tp_size", Val("--tp-size")),
    ("dp_size", Val("--dp-size")),
    ("mem_fraction_static", Val("--mem-fraction-static")),
    ("max_running_requests", Val("--max-running-requests")),
    ("max_total_tokens", Val("--max-total-tokens")),
    ("chunked_prefill_size", Val("--chunked-prefill-size")),
    ("max_prefill_tokens", Val("--max-prefill-tokens")),
    ("schedule_policy", Val("--schedule-policy")),
    (
        "schedule_conservativeness",
        Val("--schedule-conservativeness"),
    ),
    ("attention_backend", Val("--attention-backend")),
    ("sampling_backend", Val("--sampling-backend")),
    ("quantization", Val("--quantization")),
    ("kv_cache_dtype", Val("--kv-cache-dtype")),
    ("context_length", Val("--context-length")),
    ("disable_radix_cache", Switch("--disable-radix-cache")),
    ("enable_torch_compile", Switch("--enable-torch-compile")),
    ("torch_compile_max_bs", Val("--torch-compile-max-bs")),
    ("disable_cuda_graph", Switch("--disable-cuda-graph")),
    ("cuda_graph_max_bs", Val("--cuda-graph-max-bs")),
    ("enable_mixed_chunk", Switch("--enable-mixed-chunk")),
    ("stream_interval", Val("--stream-interval")),
    ("speculative_algorithm", Val("--speculative-algorithm")),
    (
        "speculative_draft_model_path",
        Val("--speculative-draft-model-path"),
    ),
    ("speculative_num_steps", Val("--speculative-num-steps")),
    ("speculative_eagle_topk", Val("--speculative-eagle-topk")),
    (
        "speculative_num_draft_tokens",
        Val("--speculative-num-draft-tokens"),
    ),
];

const TGI: &[(&str, Flag)] = &[
    ("num_shard", Val("--num-shard")),
    ("quantize", Val("--quantize")),
    ("kv_cache_dtype", Val("--kv-cache-dtype")),
    ("max_concurrent_requests", Val("--max-concurrent-requests")),
    ("max_total_tokens", Val("--max-total-tokens")),
    (
        "max_batch_prefill_tokens",
        Val("--max-batch-prefill-tokens"),
    ),
    ("max_batch_total_tokens", Val("--max-batch-total-tokens")),
    ("max_batch_size", Val("--max-batch-size")),
    ("max_waiting_tokens", Val("--max-waiting-tokens")),
    ("waiting_served_ratio", Val("--waiting-served-ratio")),
    ("cuda_graphs", List("--cuda-graphs")),
    ("disable_custom_kernels", Switch("--disable-custom-kernels")),
    ("speculate", Val("--speculate")),
];

const TENSORRT: &[(&str, Flag)] = &[
    ("max_batch_size", Val("--max_batch_size")),
    ("tensor_parallel_size", Val("--tp_size")),
    ("pipeline_parallel_size", Val("--pp_size")),
    ("max_input_len", Extra("max_input_len")),
    ("max_seq_len", Val("--max_seq_len")),
    ("max_num_tokens", Val("--max_num_tokens")),
    ("dtype", Extra("dtype")),
    ("fast_build", Extra("fast_build")),
    ("engine", Val("--backend")),
    ("engine_path", Extra("engine_dir")),
    ("quant", Extra("quant_config")),
    ("kv_cache", Extra("kv_cache_config")),
    ("scheduler", Extra("scheduler_config")),
    ("sampling", Request),
];

/// The launch of one engine: the program and its arguments (model and port included).
#[derive(Clone, Debug, PartialEq)]
pub struct CommandLine {
    /// Program and leading arguments for a local run (`["vllm", "serve"]`).
    pub program: Vec<String>,
    /// What to put after the image in `docker run` when the image's entrypoint is not the
    /// server itself.
    pub container_entry: Vec<String>,
    /// Everything after the program.
    pub args: Vec<String>,
    /// Contents of an extra options file, passed by path (TensorRT-LLM).
    pub extra_options: Option<(String, Value)>,
    /// The health endpoint.
    pub health_path: &'static str,
}

/// The port an engine's server listens on inside its default container (local runs use a
/// free port instead).
pub fn container_port(engine: Engine) -> u16 {
    match engine {
        Engine::Sglang => 30000,
        Engine::Tgi => 80,
        Engine::LlamaCpp => 8080,
        _ => 8000,
    }
}

/// Where a served model comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelArg {
    /// A hub id or a directory, passed as written.
    Name(String),
    /// A local GGUF file (llama-server).
    File(std::path::PathBuf),
}

/// The command that starts `cfg`'s engine on `host:port` with `model`.
pub fn command_line(
    cfg: &ExperimentConfig,
    model: &ModelArg,
    host: &str,
    port: u16,
    python: &str,
) -> Result<CommandLine, String> {
    let model_s = match model {
        ModelArg::Name(n) => n.clone(),
        ModelArg::File(p) => p.display().to_string(),
    };
    let port_s = port.to_string();
    let dtype = cfg.dtype.map(|d| d.to_string());
    let seed = cfg.random_seed.to_string();
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let mut cl = match cfg.engine {
        Engine::Vllm => {
            let mut args = vec![
                model_s,
                "--host".into(),
                host.into(),
                "--port".into(),
                port_s,
            ];
            args.extend(["--seed".into(), seed]);
            if let Some(d) = dtype {
                args.extend(["--dtype".into(), d]);
            }
            let section = cfg.vllm.as_deref();
            let engine = section.and_then(|v| v.engine.as_ref());
            append(&mut args, "vllm.engine", to_value(engine)?, VLLM, &mut None)?;
            CommandLine {
                program: s(&["vllm", "serve"]),
                container_entry: vec![],
                args,
                extra_options: None,
                health_path: "/health",
            }
        }
        Engine::Sglang => {
            let mut args = vec!["--model-path".into(), model_s, "--host".into(), host.into()];
            args.extend(["--port".into(), port_s, "--random-seed".into(), seed]);
            args.push("--enable-metrics".into());
            if let Some(d) = dtype {
                args.extend(["--dtype".into(), d]);
            }
            append(
                &mut args,
                "sglang",
                to_value(cfg.sglang.as_deref())?,
                SGLANG,
                &mut None,
            )?;
            CommandLine {
                program: vec![python.into(), "-m".into(), "sglang.launch_server".into()],
                container_entry: s(&["python3", "-m", "sglang.launch_server"]),
                args,
                extra_options: None,
                health_path: "/health",
            }
        }
        Engine::Tgi => {
            let mut args = vec![
                "--model-id".into(),
                model_s,
                "--hostname".into(),
                host.into(),
            ];
            args.extend(["--port".into(), port_s]);
            if let Some(d) = dtype {
                args.extend(["--dtype".into(), d]);
            }
            append(
                &mut args,
                "tgi",
                to_value(cfg.tgi.as_deref())?,
                TGI,
                &mut None,
            )?;
            CommandLine {
                program: s(&["text-generation-launcher"]),
                container_entry: vec![],
                args,
                extra_options: None,
                health_path: "/health",
            }
        }
        Engine::TensorRt => {
            let mut args = vec![
                model_s,
                "--host".into(),
                host.into(),
                "--port".into(),
                port_s,
            ];
            let mut extra = None;
            append(
                &mut args,
                "tensorrt",
                to_value(cfg.tensorrt.as_deref())?,
                TENSORRT,
                &mut extra,
            )?;
            CommandLine {
                program: s(&["trtllm-serve"]),
                container_entry: s(&["trtllm-serve"]),
                args,
                extra_options: extra.map(|v| ("--extra_llm_api_options".to_string(), v)),
                health_path: "/health",
            }
        }
        Engine::LlamaCpp => llama_server(cfg, model_s, host, port_s)?,
        Engine::Transformers | Engine::OpenAi => {
            return Err(format!("engine `{}` has no server to launch", cfg.engine));
        }
    };
    if let Some(extra) = cfg.passthrough_kwargs.as_ref() {
        for (k, v) in extra {
            let flag = format!("--{}", k.replace('_', "-"));
            match v {
                Value::Bool(true) => cl.args.push(flag),
                Value::Bool(false) | Value::Null => {}
                Value::String(x) => cl.args.extend([flag, x.clone()]),
                other => cl.args.extend([flag, other.to_string()]),
            }
        }
    }
    Ok(cl)
}

fn llama_server(
    cfg: &ExperimentConfig,
    model: String,
    host: &str,
    port: String,
) -> Result<CommandLine, String> {
    let l = cfg.llamacpp.as_deref().cloned().unwrap_or_default();
    if l.batching_strategy != llem_config::BatchingStrategy::Static {
        return Err(format!(
            "llamacpp.batching_strategy `{}` applies to the embedded engine only; llama-server \
             batches continuously (set traffic: to shape the load)",
            l.batching_strategy
        ));
    }
    let slots = l.batch_size.max(1);
    // llama-server's context is shared by its slots, as llamacpp.n_ctx is: the same total
    // the embedded engine would allocate.
    let plan = crate::llamacpp::plan_for_config(cfg, u32::MAX);
    let mut args = vec![
        "-m".into(),
        model,
        "--host".into(),
        host.into(),
        "--port".into(),
        port,
    ];
    args.extend(["--metrics".into(), "--no-webui".into()]);
    args.extend(["-np".into(), slots.to_string()]);
    // Unless n_ctx says otherwise, a margin over the embedded engine's sizing: the server
    // tokenises text llem only estimated (synthetic prompts), and a request that does not fit
    // fails instead of being cut.
    let per_slot = match l.n_ctx {
        Some(_) => plan.tokens_per_slot,
        None => plan
            .tokens_per_slot
            .saturating_add(plan.tokens_per_slot / 4 + 32),
    };
    args.extend(["-c".into(), plan.slots.saturating_mul(per_slot).to_string()]);
    args.extend(["--seed".into(), cfg.random_seed.to_string()]);
    if let Some(t) = l.n_threads {
        args.extend(["-t".into(), t.to_string()]);
    }
    if let Some(b) = l.max_tokens_per_batch {
        args.extend(["-b".into(), b.to_string()]);
    }
    args.extend(["-ngl".into(), l.n_gpu_layers.to_string()]);
    args.extend(["-fa".into(), l.flash_attn.to_string()]);
    args.extend(["-ctk".into(), l.kv_cache_type.to_string()]);
    args.extend(["-ctv".into(), l.kv_cache_type.to_string()]);
    if !l.use_mmap {
        args.push("--no-mmap".into());
    }
    Ok(CommandLine {
        program: vec!["llama-server".into()],
        container_entry: vec![],
        args,
        extra_options: None,
        health_path: "/health",
    })
}

fn to_value<T: serde::Serialize>(section: Option<&T>) -> Result<Value, String> {
    match section {
        None => Ok(Value::Null),
        Some(s) => serde_json::to_value(s).map_err(|e| e.to_string()),
    }
}

/// Appends the flags of `section` (fields left null are the engine's default: no flag).
fn append(
    args: &mut Vec<String>,
    path: &str,
    section: Value,
    table: &[(&str, Flag)],
    extra: &mut Option<Value>,
) -> Result<(), String> {
    let Value::Object(fields) = section else {
        return Ok(());
    };
    for (key, value) in fields {
        if value.is_null() {
            continue;
        }
        let Some((_, flag)) = table.iter().find(|(k, _)| *k == key) else {
            return Err(format!(
                "{path}.{key} has no command-line flag in llem's table for this engine; \
                 remove it or pass the flag through passthrough_kwargs"
            ));
        };
        let scalar = |v: &Value| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match *flag {
            Val(f) => args.extend([f.to_string(), scalar(&value)]),
            Switch(f) => {
                if value == Value::Bool(true) {
                    args.push(f.into());
                }
            }
            Pair(on, off) => args.push(if value == Value::Bool(true) { on } else { off }.into()),
            Json(f) => args.extend([f.to_string(), without_nulls(value).to_string()]),
            List(f) => {
                let items: Vec<String> = match &value {
                    Value::Array(a) => a.iter().map(scalar).collect(),
                    other => vec![scalar(other)],
                };
                args.extend([f.to_string(), items.join(",")]);
            }
            Request => {}
            Extra(k) => {
                let map = extra.get_or_insert_with(|| Value::Object(Default::default()));
                if let Value::Object(m) = map {
                    m.insert(k.to_string(), without_nulls(value));
                }
            }
        }
    }
    Ok(())
}

/// `value` with null fields removed (null means "the engine's default").
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        other => other,
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
    fn vllm_fields_become_flags() {
        let c = cfg(
            serde_json::json!({"model": "m", "engine": "vllm", "vllm": {"engine": {"max_num_seqs": 128, "gpu_memory_utilization": 0.9, "enforce_eager": true, "enable_prefix_caching": false, "compilation_config": {"level": 3}}}}),
        );
        let cl = command_line(
            &c,
            &ModelArg::Name("m".into()),
            "127.0.0.1",
            9000,
            "python3",
        )
        .unwrap();
        assert_eq!(cl.program, vec!["vllm", "serve"]);
        let a = cl.args.join(" ");
        for want in [
            "m --host 127.0.0.1 --port 9000",
            "--max-num-seqs 128",
            "--gpu-memory-utilization 0.9",
            "--enforce-eager",
            "--no-enable-prefix-caching",
            "--compilation-config {\"level\":3}",
        ] {
            assert!(a.contains(want), "{want} not in {a}");
        }
    }

    #[test]
    fn llama_server_and_tensorrt_extra_options() {
        let c = cfg(
            serde_json::json!({"model": "x.gguf", "engine": "llamacpp", "runners": {"llamacpp": "local"}, "llamacpp": {"batch_size": 4, "n_ctx": 512, "n_threads": 2}}),
        );
        let cl = command_line(
            &c,
            &ModelArg::File("/m/x.gguf".into()),
            "127.0.0.1",
            8123,
            "python3",
        )
        .unwrap();
        let a = cl.args.join(" ");
        assert!(
            a.contains("-m /m/x.gguf")
                && a.contains("-np 4")
                && a.contains("-c 512")
                && a.contains("--metrics")
                && a.contains("-t 2"),
            "{a}"
        );
        let t = cfg(
            serde_json::json!({"model": "m", "engine": "tensorrt", "tensorrt": {"max_batch_size": 8, "kv_cache": {"free_gpu_memory_fraction": 0.8}}}),
        );
        let cl = command_line(&t, &ModelArg::Name("m".into()), "0.0.0.0", 8000, "python3").unwrap();
        assert!(cl.args.join(" ").contains("--max_batch_size 8"));
        let (flag, v) = cl.extra_options.unwrap();
        assert_eq!(flag, "--extra_llm_api_options");
        assert_eq!(v["kv_cache_config"]["free_gpu_memory_fraction"], 0.8);
    }

    #[test]
    fn unknown_table_entries_are_errors() {
        let mut args = Vec::new();
        let e = append(
            &mut args,
            "vllm.engine",
            serde_json::json!({"bogus": 1}),
            VLLM,
            &mut None,
        )
        .unwrap_err();
        assert!(e.contains("vllm.engine.bogus"), "{e}");
    }
}
