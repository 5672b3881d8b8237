//! SGLang: `python -m sglang.launch_server`.

use llem_config::ExperimentConfig;

use super::{Listen, LocalProgram, MetricNames, ServerArgs, ServerSpec};
use crate::placement::Placement;
use crate::serving::flags::{Flag, Flag::*, append, to_value};

/// SGLang's launch, metrics and batch limit.
pub static SPEC: ServerSpec = ServerSpec {
    local: LocalProgram::PythonModule("sglang.launch_server"),
    install_hint: "pip install \"sglang[all]\"",
    container_entry: &["python3", "-m", "sglang.launch_server"],
    default_image: "lmsysorg/sglang:v0.5.23",
    container_port: 30000,
    health_path: "/health",
    continuous_usage: true,
    truncates_prompts: false,
    metrics: MetricNames {
        running: &["sglang:num_running_reqs"],
        waiting: &["sglang:num_queue_reqs"],
        kv_cache_usage: &["sglang:token_usage"],
        prefix_hit_rate: &["sglang:cache_hit_rate"],
        ..MetricNames::NONE
    },
    batch_limit: |cfg| cfg.sglang.as_deref().and_then(|s| s.max_running_requests),
    args,
    request_fields: super::no_request_fields,
    wants_gpus: super::always,
    placement,
    kv_element,
    served_model: super::configured_model,
    lora_listing: super::LoraListing::None,
    prefix_cache_reset: Some(super::PrefixCacheReset::Post {
        route: "/flush_cache",
        env: &[],
    }),
    prompt_cache_off: None,
    tokenize: None,
    flags_version: Some("0.5.23"),
};

/// `sglang.*` → `sglang.launch_server` flags.
const FLAGS: &[(&str, Flag)] = &[
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
    // 0.5.23 splits CUDA graphs into decode and prefill: the seed's one cap is the decode
    // graph's, and `disable_cuda_graph` is both backends `disabled` (see args).
    ("cuda_graph_max_bs", Val("--cuda-graph-max-bs-decode")),
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

/// Tensor × data parallel GPUs.
fn placement(cfg: &ExperimentConfig, visible_gpus: u32) -> Placement {
    let s = cfg.sglang.as_deref();
    super::parallel_gpus(
        s.and_then(|s| s.tp_size),
        s.and_then(|s| s.dp_size),
        visible_gpus,
    )
}

/// `kv_cache_dtype: fp8*` is one byte an element.
fn kv_element(cfg: &ExperimentConfig) -> Option<(f64, String)> {
    super::fp8_kv(
        cfg.sglang
            .as_deref()
            .and_then(|s| s.kv_cache_dtype)
            .map(|d| d.as_str()),
    )
}

fn args(cfg: &ExperimentConfig, at: &Listen<'_>) -> Result<ServerArgs, crate::LaunchError> {
    let mut args: Vec<String> = vec!["--model-path".into(), at.model.into()];
    args.extend(["--host".into(), at.host.into()]);
    args.extend(["--port".into(), at.port.to_string()]);
    args.extend(["--random-seed".into(), cfg.random_seed.to_string()]);
    args.push("--enable-metrics".into());
    if let Some(d) = cfg.dtype {
        args.extend(["--dtype".into(), d.to_string()]);
    }
    let mut section = to_value(cfg.sglang.as_deref())?;
    // `--disable-cuda-graph` is deprecated in 0.5.23 in favour of a backend per phase.
    if let Some(o) = section.as_object_mut()
        && o.remove("disable_cuda_graph") == Some(serde_json::Value::Bool(true))
    {
        args.extend(DISABLE_CUDA_GRAPH.iter().map(|a| (*a).to_string()));
    }
    append(&mut args, "sglang", section, FLAGS, &mut None)?;
    Ok(ServerArgs::plain(args))
}

/// `sglang.disable_cuda_graph: true` on the command line.
const DISABLE_CUDA_GRAPH: [&str; 4] = [
    "--cuda-graph-backend-decode",
    "disabled",
    "--cuda-graph-backend-prefill",
    "disabled",
];

/// Every flag llem may pass to `sglang.launch_server`, for checking against its parser.
pub(crate) fn cli_flags() -> Vec<String> {
    let fixed = serde_json::json!({
        "model": "m", "engine": "sglang", "dtype": "float16",
        "sglang": {"disable_cuda_graph": true},
    });
    crate::serving::flags::cli_flags(args, fixed, FLAGS, &[])
}
