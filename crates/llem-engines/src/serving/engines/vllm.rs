//! vLLM: `vllm serve` and its OpenAI-compatible server.

use serde_json::{Map, Value, json};

use llem_config::ExperimentConfig;

use super::{Listen, LocalProgram, MetricNames, ServerArgs, ServerSpec};
use crate::placement::Placement;
use crate::serving::flags::{Flag, Flag::*, append, to_value};

/// vLLM's launch, metrics and batch limit.
pub static SPEC: ServerSpec = ServerSpec {
    local: LocalProgram::Cli(&["vllm", "serve"]),
    install_hint: "pip install vllm",
    container_entry: &[],
    default_image: "vllm/vllm-openai:v0.32.0",
    container_port: 8000,
    health_path: "/health",
    continuous_usage: true,
    truncates_prompts: true,
    metrics: MetricNames {
        running: &["vllm:num_requests_running"],
        waiting: &["vllm:num_requests_waiting"],
        // v0, then v1.
        kv_cache_usage: &["vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"],
        prefix_cache_hits: &["vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"],
        prefix_cache_queries: &[
            "vllm:prefix_cache_queries_total",
            "vllm:prefix_cache_queries",
        ],
        prefix_hit_rate: &["vllm:gpu_prefix_cache_hit_rate"],
    },
    batch_limit,
    args,
    request_fields,
    wants_gpus: super::always,
    placement,
    kv_element,
    served_model,
    lora_listing: super::LoraListing::Models,
    prefix_cache_reset: Some(super::PrefixCacheReset::Post {
        route: "/reset_prefix_cache",
        env: &[("VLLM_SERVER_DEV_MODE", "1")],
    }),
    prompt_cache_off: None,
    tokenize: Some(super::TokenizeRoute::Prompt),
    flags_version: Some("0.32.0"),
};

/// Tensor × pipeline parallel GPUs.
fn placement(cfg: &ExperimentConfig, visible_gpus: u32) -> Placement {
    let e = cfg.vllm.as_deref().and_then(|v| v.engine.as_ref());
    super::parallel_gpus(
        e.and_then(|e| e.tensor_parallel_size),
        e.and_then(|e| e.pipeline_parallel_size),
        visible_gpus,
    )
}

/// `kv_cache_dtype: fp8*` is one byte an element.
fn kv_element(cfg: &ExperimentConfig) -> Option<(f64, String)> {
    super::fp8_kv(
        cfg.vllm
            .as_deref()
            .and_then(|v| v.engine.as_ref())
            .and_then(|e| e.kv_cache_dtype)
            .map(|d| d.as_str()),
    )
}

/// The name `--lora-modules` gives the adapter; requests ask for it to get the adapter.
pub const LORA_NAME: &str = "llem-lora";

fn served_model(cfg: &ExperimentConfig) -> Option<&'static str> {
    cfg.lora.is_some().then_some(LORA_NAME)
}

/// `--max-lora-rank` values vLLM accepts.
const LORA_RANKS: &[u32] = &[1, 8, 16, 32, 64, 128, 256, 320, 512];

/// vLLM's LoRA flags: the adapter under [`LORA_NAME`], and a maximum rank that admits it
/// (vLLM's default, 16, refuses a larger adapter at the first request).
fn lora_args(cfg: &ExperimentConfig) -> Result<Vec<String>, crate::LaunchError> {
    let Some(path) = super::adapter_path(cfg) else {
        return Ok(Vec::new());
    };
    let mut out = vec![
        "--enable-lora".to_string(),
        "--lora-modules".into(),
        format!("{LORA_NAME}={path}"),
    ];
    let config = std::path::Path::new(&path).join("adapter_config.json");
    let rank = llem_config::files::read_regular(&config, llem_config::files::CONFIG_MAX_BYTES)
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|v| v.get("r").and_then(Value::as_u64))
        .and_then(|r| u32::try_from(r).ok());
    if let Some(r) = rank {
        let max = LORA_RANKS
            .iter()
            .copied()
            .find(|m| *m >= r)
            .ok_or_else(|| {
                crate::LaunchError::Refused(format!(
                    "the LoRA adapter's rank {r} is above vLLM's largest, 512"
                ))
            })?;
        out.extend(["--max-lora-rank".into(), max.to_string()]);
    }
    Ok(out)
}

/// `vllm.engine.*` → `vllm serve` flags.
const FLAGS: &[(&str, Flag)] = &[
    ("gpu_memory_utilization", Val("--gpu-memory-utilization")),
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

/// Every flag llem may pass to `vllm serve`: its command line's, its table's and LoRA's.
pub(crate) fn cli_flags() -> Vec<String> {
    let fixed = serde_json::json!({"model": "m", "engine": "vllm", "dtype": "float16"});
    crate::serving::flags::cli_flags(
        args,
        fixed,
        FLAGS,
        &["--enable-lora", "--lora-modules", "--max-lora-rank"],
    )
}

fn batch_limit(cfg: &ExperimentConfig) -> Option<std::num::NonZeroU32> {
    cfg.vllm
        .as_deref()
        .and_then(|v| v.engine.as_ref())
        .and_then(|e| e.max_num_seqs)
}

fn args(cfg: &ExperimentConfig, at: &Listen<'_>) -> Result<ServerArgs, crate::LaunchError> {
    let mut args: Vec<String> = vec![at.model.into(), "--host".into(), at.host.into()];
    args.extend(["--port".into(), at.port.to_string()]);
    args.extend(["--seed".into(), cfg.random_seed.to_string()]);
    // Usage then says how many prompt tokens came from the prefix cache, per request.
    args.push("--enable-prompt-tokens-details".into());
    if let Some(d) = cfg.dtype {
        args.extend(["--dtype".into(), d.to_string()]);
    }
    let engine = cfg.vllm.as_deref().and_then(|v| v.engine.as_ref());
    let mut section = to_value(engine)?;
    // llem's `attention.engine` (seed name) is AttentionConfig's `backend`.
    if let Some(a) = section.get_mut("attention").and_then(Value::as_object_mut)
        && let Some(b) = a.remove("engine")
    {
        a.insert("backend".into(), b);
    }
    append(&mut args, "vllm.engine", section, FLAGS, &mut None)?;
    args.extend(lora_args(cfg)?);
    Ok(ServerArgs::plain(args))
}

/// `vllm.sampling.*` and `vllm.beam_search` go with every request.
fn request_fields(cfg: &ExperimentConfig) -> Map<String, Value> {
    let section = cfg.vllm.as_deref();
    let mut out = super::request_section(section.and_then(|v| v.sampling.as_ref()));
    if let Some(b) = section.and_then(|v| v.beam_search.as_ref()) {
        out.insert("use_beam_search".into(), Value::Bool(true));
        if let Some(w) = b.beam_width {
            out.insert("best_of".into(), json!(w));
        }
        if let Some(l) = b.length_penalty {
            out.insert("length_penalty".into(), json!(l));
        }
        if let Some(e) = b.early_stopping {
            out.insert("early_stopping".into(), json!(e));
        }
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn unknown_table_entries_are_errors() {
        let mut args = Vec::new();
        let e = append(
            &mut args,
            "vllm.engine",
            serde_json::json!({"bogus": 1}),
            FLAGS,
            &mut None,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("vllm.engine.bogus"), "{e}");
    }

    /// `attention.engine` reaches vLLM as AttentionConfig's `backend`; the flags vLLM 0.32
    /// dropped are not in the table (the plan refuses them first).
    #[test]
    fn attention_backend_and_removed_flags() {
        let c: ExperimentConfig = serde_json::from_value(json!({
            "model": "m", "engine": "vllm",
            "vllm": {"engine": {"attention": {"engine": "FLASH_ATTN", "flash_attn_version": 3}}}
        }))
        .unwrap();
        let at = Listen {
            model: "m",
            host: "127.0.0.1",
            port: 8000,
        };
        let a = args(&c, &at).unwrap().args;
        let i = a.iter().position(|x| x == "--attention-config").unwrap();
        let v: Value = serde_json::from_str(&a[i + 1]).unwrap();
        assert_eq!(v, json!({"backend": "FLASH_ATTN", "flash_attn_version": 3}));
        for gone in [
            "swap_space",
            "num_scheduler_steps",
            "max_seq_len_to_capture",
        ] {
            assert!(FLAGS.iter().all(|(k, _)| *k != gone), "{gone}");
        }
    }

    /// A LoRA adapter is served under its own name, which requests ask for, with a maximum
    /// rank that admits it.
    #[test]
    fn a_lora_adapter_is_enabled_named_and_requested() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("adapter_config.json"), r#"{"r": 24}"#).unwrap();
        let c: ExperimentConfig = serde_json::from_value(json!({
            "model": "m", "engine": "vllm",
            "lora": {"adapter_path": dir.path().display().to_string()}
        }))
        .unwrap();
        let at = Listen {
            model: "m",
            host: "127.0.0.1",
            port: 8000,
        };
        let a = args(&c, &at).unwrap().args.join(" ");
        let want = format!(
            "--enable-lora --lora-modules {LORA_NAME}={} --max-lora-rank 32",
            dir.path().display()
        );
        assert!(a.ends_with(&want), "{a}");
        assert_eq!((SPEC.served_model)(&c), Some(LORA_NAME));
        let base: ExperimentConfig =
            serde_json::from_value(json!({"model": "m", "engine": "vllm"})).unwrap();
        assert!(!args(&base, &at).unwrap().args.join(" ").contains("lora"));
        assert_eq!((SPEC.served_model)(&base), None);
    }
}
