//! How the llama.cpp context is sized for a config: tokens per slot (the slots are the
//! batch, decided by the registry) and threads. Shared by the embedded engine and
//! `llama-server`, so both allocate the same context for the same config. Needs no llama.cpp
//! library.

use std::num::NonZeroU32;

use llem_config::ExperimentConfig;

use crate::placement::Placement;

/// Tokens a slot needs when the config leaves a limit open.
pub(crate) const OPEN_INPUT_TOKENS: u32 = 2048;
pub(crate) const OPEN_OUTPUT_TOKENS: u32 = 1024;

/// The sequences llama.cpp decodes together for `cfg`: its section's batch size (the embedded
/// engine's batch, llama-server's `-np`).
pub(crate) fn slots(cfg: &ExperimentConfig) -> NonZeroU32 {
    cfg.llamacpp
        .as_deref()
        .map_or(NonZeroU32::MIN, |l| l.batch_size)
}

/// Tokens each of `slots` sequences may hold (prompt + output) for `cfg` on a model trained
/// with `n_ctx_train` positions: `llamacpp.n_ctx` shared by the slots, else room for the
/// config's lengths.
pub fn tokens_per_slot(cfg: &ExperimentConfig, n_ctx_train: u32, slots: NonZeroU32) -> u32 {
    let input = cfg.max_input_tokens.unwrap_or(OPEN_INPUT_TOKENS);
    let output = cfg.max_output_tokens.unwrap_or(OPEN_OUTPUT_TOKENS);
    if let Some(s) = &cfg.dataset.synthetic
        && cfg.dataset.source == "synthetic"
    {
        // Room for the long tail of drawn lengths (3 spreads above the mean).
        let spread = if s.distribution == llem_config::LengthDistribution::Fixed {
            0.0
        } else {
            s.spread
        };
        let hi = |m: u32| (f64::from(m) * (1.0 + 3.0 * spread)).ceil() as u32;
        let input = hi(s.input_tokens).min(input);
        let need = input.saturating_add(hi(s.output_tokens)).saturating_add(16);
        return need.min(n_ctx_train.max(1));
    }
    match cfg.llamacpp.as_deref().and_then(|l| l.n_ctx) {
        Some(n) => (n / slots).max(1),
        None => input
            .saturating_add(output)
            .saturating_add(16)
            .min(n_ctx_train.max(1)),
    }
}

/// `llamacpp.n_threads`, else the CPUs this process may run on.
pub(crate) fn threads(cfg: &ExperimentConfig) -> i32 {
    cfg.llamacpp
        .as_deref()
        .and_then(|l| l.n_threads)
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .ok()
                .and_then(|n| i32::try_from(n.get()).ok())
                .unwrap_or(1)
        })
}

/// llama.cpp offloads to every GPU its backend sees (split by layer) unless told to keep the
/// layers on the CPU.
pub(crate) fn placement(cfg: &ExperimentConfig, visible_gpus: u32) -> Placement {
    let layers = cfg.llamacpp.as_deref().map_or(0, |l| l.n_gpu_layers);
    if layers == 0 {
        Placement::Cpu
    } else {
        Placement::all(visible_gpus)
    }
}

/// Bytes per KV-cache element and the type's name (`kv_cache_type`, f16 by default), for the
/// memory estimate: ggml blocks of 32 elements plus their scale (and offset).
pub(crate) fn kv_element(cfg: &ExperimentConfig) -> Option<(f64, String)> {
    let t = cfg
        .llamacpp
        .as_deref()
        .map(|l| l.kv_cache_type.as_str())
        .unwrap_or("f16");
    let bytes = match t {
        "f32" => 4.0,
        "q8_0" => 34.0 / 32.0,
        "q4_0" | "iq4_nl" => 18.0 / 32.0,
        "q4_1" => 20.0 / 32.0,
        "q5_0" => 22.0 / 32.0,
        "q5_1" => 24.0 / 32.0,
        _ => 2.0,
    };
    Some((bytes, t.to_string()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cfg(v: serde_json::Value) -> ExperimentConfig {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn context_plans() {
        let c =
            cfg(serde_json::json!({"model": "m", "llamacpp": {"batch_size": 4, "n_threads": 3}}));
        let p = crate::registry::context_plan(&c, 8192);
        assert_eq!(
            (p.batching.batch_size.get(), p.tokens_per_slot, p.n_threads),
            (4, 256 + 256 + 16, 3)
        );
        // Capped by the training context.
        assert_eq!(crate::registry::context_plan(&c, 300).tokens_per_slot, 300);
        let c =
            cfg(serde_json::json!({"model": "m", "llamacpp": {"batch_size": 4, "n_ctx": 1000}}));
        assert_eq!(crate::registry::context_plan(&c, 8192).tokens_per_slot, 250);
        let c = cfg(
            serde_json::json!({"model": "m", "dataset": {"source": "synthetic",
            "synthetic": {"input_tokens": 100, "output_tokens": 50, "distribution": "fixed"}}}),
        );
        assert_eq!(crate::registry::context_plan(&c, 8192).tokens_per_slot, 166);
    }
}
