//! llama.cpp's `llama-server`, sized like the embedded engine (`llamacpp:` section).

use llem_config::ExperimentConfig;

use crate::llamacpp::plan::slots;

use super::{Listen, LocalProgram, MetricNames, ServerArgs, ServerSpec};

/// llama-server's launch, metrics and batch limit.
pub static SPEC: ServerSpec = ServerSpec {
    local: LocalProgram::LlamaServer,
    install_hint: "run scripts/build-llama-server.sh",
    container_entry: &[],
    default_image: "ghcr.io/ggml-org/llama.cpp:server",
    container_port: 8080,
    health_path: "/health",
    continuous_usage: false,
    truncates_prompts: false,
    metrics: MetricNames {
        running: &["llamacpp:requests_processing"],
        waiting: &["llamacpp:requests_deferred"],
        kv_cache_usage: &["llamacpp:kv_cache_usage_ratio"],
        ..MetricNames::NONE
    },
    // Its slots (`-np`): the section's batch size, which the config always holds.
    batch_limit: |cfg| Some(slots(cfg)),
    args,
    request_fields: super::no_request_fields,
    // A CPU run (no layers offloaded) asks Docker for no GPU.
    wants_gpus: |cfg| cfg.llamacpp.as_deref().is_some_and(|l| l.n_gpu_layers != 0),
    // The same offload and cache types as the embedded engine.
    placement: crate::llamacpp::placement,
    kv_element: crate::llamacpp::kv_element,
    served_model: super::configured_model,
    lora_listing: super::LoraListing::LoraAdapters,
    prefix_cache_reset: Some(super::PrefixCacheReset::EraseSlots),
    prompt_cache_off: Some("cache_prompt"),
    tokenize: Some(super::TokenizeRoute::Content),
    flags_version: None,
};

/// Every flag llem may pass to `llama-server`, for checking against its `--help`: those of the
/// command line built for a configuration that sets every option llem maps.
pub(crate) fn cli_flags() -> Vec<String> {
    let every_option = serde_json::json!({
        "model": "m.gguf",
        "engine": "llamacpp",
        "llamacpp": {"n_threads": 2, "max_tokens_per_batch": 256, "use_mmap": false,
                     "n_ctx": 512},
        "lora": {"adapter_path": "/a/lora.gguf", "scale": 0.5},
    });
    crate::serving::flags::cli_flags(args, every_option, &[], &[])
}

fn args(cfg: &ExperimentConfig, at: &Listen<'_>) -> Result<ServerArgs, crate::LaunchError> {
    let l = cfg.llamacpp.as_deref().cloned().unwrap_or_default();
    if l.batching_strategy != llem_config::BatchingStrategy::Static {
        return Err(crate::LaunchError::Refused(format!(
            "llamacpp.batching_strategy `{}` applies to the embedded engine only; llama-server \
             batches continuously (set traffic: to shape the load)",
            l.batching_strategy
        )));
    }
    // llama-server's context is shared by its slots, as llamacpp.n_ctx is: the same total
    // the embedded engine would allocate.
    let slots = slots(cfg);
    let tokens_per_slot = crate::llamacpp::plan::tokens_per_slot(cfg, u32::MAX, slots);
    let mut args: Vec<String> = vec!["-m".into(), at.model.into(), "--host".into()];
    args.extend([at.host.into(), "--port".into(), at.port.to_string()]);
    args.extend(["--metrics".into(), "--no-webui".into()]);
    // Slot actions, erase included, exist only with a save path; llem saves nothing there,
    // it erases every slot before each run. /tmp exists on hosts and in the image alike.
    args.extend(["--slot-save-path".into(), "/tmp".into()]);
    args.extend(["-np".into(), slots.to_string()]);
    // Unless n_ctx says otherwise, a margin over the embedded engine's sizing: the server
    // tokenises text llem only estimated (synthetic prompts), and a request that does not fit
    // fails instead of being cut.
    let per_slot = match l.n_ctx {
        Some(_) => tokens_per_slot,
        None => tokens_per_slot.saturating_add(tokens_per_slot / 4 + 32),
    };
    args.extend([
        "-c".into(),
        slots.get().saturating_mul(per_slot).to_string(),
    ]);
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
        // Current llama-server has no `--no-mmap` (its help test caught it): loading is a
        // mode, and `none` reads the file into memory.
        args.extend(["--load-mode".into(), "none".into()]);
    }
    if let Some(lora) = cfg.lora.as_deref() {
        let path = super::adapter_path(cfg).ok_or_else(|| {
            crate::LaunchError::Refused(
                "llama-server applies `lora.adapter_path` (a GGUF adapter) only".into(),
            )
        })?;
        // `--lora-scaled` splits its value at `,` and `:`.
        if path.contains([',', ':']) {
            return Err(crate::LaunchError::Refused(format!(
                "llama-server cannot take the LoRA adapter path {path}: its `--lora-scaled` \
                 splits at `,` and `:`; move the adapter to a path without them"
            )));
        }
        args.extend(["--lora-scaled".into(), format!("{path}:{}", lora.scale)]);
    }
    Ok(ServerArgs::plain(args))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_lora_adapter_is_loaded_at_its_scale() {
        let listen = Listen {
            model: "/m/x.gguf",
            host: "127.0.0.1",
            port: 8080,
        };
        let c: ExperimentConfig = serde_json::from_value(serde_json::json!({
            "model": "x.gguf", "engine": "llamacpp",
            "lora": {"adapter_path": "/a/lora.gguf", "scale": 0.5}
        }))
        .unwrap();
        let a = args(&c, &listen).unwrap().args.join(" ");
        assert!(a.ends_with("--lora-scaled /a/lora.gguf:0.5"), "{a}");
        let bad: ExperimentConfig = serde_json::from_value(serde_json::json!({
            "model": "x.gguf", "engine": "llamacpp",
            "lora": {"adapter_path": "/a/b:c.gguf"}
        }))
        .unwrap();
        assert!(
            args(&bad, &listen)
                .unwrap_err()
                .to_string()
                .contains("splits at")
        );
    }
}
