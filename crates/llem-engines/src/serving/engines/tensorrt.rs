//! TensorRT-LLM: `trtllm-serve`, with an extra options file for what has no flag.

use serde_json::{Map, Value};

use llem_config::ExperimentConfig;

use super::{Listen, LocalProgram, MetricNames, ServerArgs, ServerSpec};
use crate::placement::Placement;
use crate::serving::flags::{Flag, Flag::*, append, to_value};

/// TensorRT-LLM's launch, metrics and batch limit.
pub static SPEC: ServerSpec = ServerSpec {
    local: LocalProgram::Cli(&["trtllm-serve"]),
    install_hint: "pip install tensorrt-llm",
    container_entry: &["trtllm-serve"],
    default_image: "nvcr.io/nvidia/tensorrt-llm/release:1.0.0",
    container_port: 8000,
    health_path: "/health",
    continuous_usage: false,
    truncates_prompts: false,
    metrics: MetricNames::NONE,
    batch_limit: |cfg| cfg.tensorrt.as_deref().and_then(|t| t.max_batch_size),
    args,
    request_fields,
    wants_gpus: super::always,
    placement,
    kv_element,
    served_model: super::configured_model,
    lora_listing: super::LoraListing::None,
    prefix_cache_reset: None,
    prompt_cache_off: None,
    tokenize: None,
    flags_version: None,
};

/// `tensorrt.*` → `trtllm-serve` flags and extra options.
const FLAGS: &[(&str, Flag)] = &[
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

/// Tensor × pipeline parallel GPUs.
fn placement(cfg: &ExperimentConfig, visible_gpus: u32) -> Placement {
    let t = cfg.tensorrt.as_deref();
    super::parallel_gpus(
        t.and_then(|t| t.tensor_parallel_size),
        t.and_then(|t| t.pipeline_parallel_size),
        visible_gpus,
    )
}

/// TensorRT-LLM quantises its KV cache to FP8 or INT8 (`quant.kv_cache_quant_algo`): one
/// byte an element either way.
fn kv_element(cfg: &ExperimentConfig) -> Option<(f64, String)> {
    cfg.tensorrt
        .as_deref()
        .and_then(|t| t.quant.as_ref())
        .and_then(|q| q.kv_cache_quant_algo)
        .map(|a| (1.0, a.as_str().to_ascii_lowercase()))
}

fn args(cfg: &ExperimentConfig, at: &Listen<'_>) -> Result<ServerArgs, crate::LaunchError> {
    let mut args: Vec<String> = vec![at.model.into(), "--host".into(), at.host.into()];
    args.extend(["--port".into(), at.port.to_string()]);
    let mut extra = None;
    let section = to_value(cfg.tensorrt.as_deref())?;
    append(&mut args, "tensorrt", section, FLAGS, &mut extra)?;
    Ok(ServerArgs {
        args,
        extra_options: extra.map(|v| ("--extra_llm_api_options".to_string(), v)),
    })
}

/// `tensorrt.sampling.*` goes with every request.
fn request_fields(cfg: &ExperimentConfig) -> Map<String, Value> {
    super::request_section(cfg.tensorrt.as_deref().and_then(|t| t.sampling.as_ref()))
}
