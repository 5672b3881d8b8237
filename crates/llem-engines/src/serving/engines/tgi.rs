//! Hugging Face Text Generation Inference: `text-generation-launcher`.

use llem_config::ExperimentConfig;

use super::{Listen, LocalProgram, MetricNames, ServerArgs, ServerSpec};
use crate::placement::Placement;
use crate::serving::flags::{Flag, Flag::*, append, to_value};

/// TGI's launch, metrics and batch limit.
pub static SPEC: ServerSpec = ServerSpec {
    local: LocalProgram::Cli(&["text-generation-launcher"]),
    install_hint: "see huggingface/text-generation-inference, or use runner docker",
    container_entry: &[],
    default_image: "ghcr.io/huggingface/text-generation-inference:3.3.6",
    container_port: 80,
    health_path: "/health",
    continuous_usage: false,
    truncates_prompts: false,
    metrics: MetricNames {
        running: &["tgi_batch_current_size"],
        waiting: &["tgi_queue_size"],
        ..MetricNames::NONE
    },
    batch_limit: |cfg| cfg.tgi.as_deref().and_then(|t| t.max_batch_size),
    args,
    request_fields: super::no_request_fields,
    wants_gpus: super::always,
    placement,
    kv_element,
    served_model: super::configured_model,
    lora_listing: super::LoraListing::None,
    prefix_cache_reset: None,
    prompt_cache_off: None,
    tokenize: None,
    flags_version: Some("3.3.6"),
};

/// `tgi.*` → `text-generation-launcher` flags.
const FLAGS: &[(&str, Flag)] = &[
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

/// TGI shards over every visible GPU unless `num_shard` says otherwise.
fn placement(cfg: &ExperimentConfig, visible_gpus: u32) -> Placement {
    match cfg.tgi.as_deref().and_then(|t| t.num_shard) {
        Some(n) => Placement::first_gpus(n, visible_gpus),
        None => Placement::all(visible_gpus),
    }
}

/// `kv_cache_dtype: fp8*` is one byte an element.
fn kv_element(cfg: &ExperimentConfig) -> Option<(f64, String)> {
    super::fp8_kv(
        cfg.tgi
            .as_deref()
            .and_then(|t| t.kv_cache_dtype)
            .map(|d| d.as_str()),
    )
}

fn args(cfg: &ExperimentConfig, at: &Listen<'_>) -> Result<ServerArgs, crate::LaunchError> {
    let mut args: Vec<String> = vec!["--model-id".into(), at.model.into()];
    args.extend(["--hostname".into(), at.host.into()]);
    args.extend(["--port".into(), at.port.to_string()]);
    if let Some(d) = cfg.dtype {
        args.extend(["--dtype".into(), d.to_string()]);
    }
    append(
        &mut args,
        "tgi",
        to_value(cfg.tgi.as_deref())?,
        FLAGS,
        &mut None,
    )?;
    Ok(ServerArgs::plain(args))
}

/// Every flag llem may pass to `text-generation-launcher`, for checking against the flags of
/// its `Args` at the pinned tag (tests/reference/tgi-launcher-flags.txt).
pub(crate) fn cli_flags() -> Vec<String> {
    let fixed = serde_json::json!({"model": "m", "engine": "tgi", "dtype": "float16"});
    crate::serving::flags::cli_flags(args, fixed, FLAGS, &[])
}
