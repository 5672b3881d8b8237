//! `llamacpp:` — llama.cpp, embedded in-process (runner `embedded`) or as `llama-server`.
//!
//! llem owns this engine, so its defaults are concrete values rather than "engine default":
//! the resolved config says exactly what runs, and equal settings hash equally.

use std::num::NonZeroU32;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::names::{BatchingStrategy, str_enum};

str_enum! {
    /// Flash attention in llama.cpp.
    pub enum FlashAttn {
        /// llama.cpp decides per backend.
        Auto = "auto",
        /// Always on.
        On = "on" | "true" | "enabled",
        /// Always off.
        Off = "off" | "false" | "disabled",
    }
}

str_enum! {
    /// KV cache element type in llama.cpp.
    pub enum KvCacheType {
        /// 32-bit float.
        F32 = "f32",
        /// 16-bit float (llama.cpp default).
        F16 = "f16",
        /// bfloat16.
        Bf16 = "bf16",
        /// 8-bit quantised.
        Q8_0 = "q8_0",
        /// 4-bit quantised.
        Q4_0 = "q4_0",
        /// 4-bit quantised with offset.
        Q4_1 = "q4_1",
        /// 4-bit non-linear.
        Iq4Nl = "iq4_nl",
        /// 5-bit quantised.
        Q5_0 = "q5_0",
        /// 5-bit quantised with offset.
        Q5_1 = "q5_1",
    }
}

/// llama.cpp settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct LlamaCppConfig {
    /// Sequences decoded together in one batch (llama.cpp sequence ids); `--parallel` for
    /// llama-server.
    pub batch_size: NonZeroU32,
    /// static, sorted_static, dynamic, sorted_dynamic.
    pub batching_strategy: BatchingStrategy,
    /// Token budget per batch for the dynamic strategies (null = bounded by batch_size only).
    #[schemars(range(min = 1))]
    pub max_tokens_per_batch: Option<u32>,
    /// Context size in tokens (null = sized to fit batch_size x (input + output) tokens).
    #[schemars(range(min = 1))]
    pub n_ctx: Option<u32>,
    /// CPU threads (null = all physical cores).
    #[schemars(range(min = 1))]
    pub n_threads: Option<u32>,
    /// Layers offloaded to the GPU (-1 = all; 0 = CPU only).
    #[schemars(range(min = -1))]
    pub n_gpu_layers: i32,
    /// Flash attention: auto, on, off.
    pub flash_attn: FlashAttn,
    /// KV cache type (f16, q8_0, ...).
    pub kv_cache_type: KvCacheType,
    /// Memory-map the model file.
    pub use_mmap: bool,
}

impl Default for LlamaCppConfig {
    fn default() -> Self {
        LlamaCppConfig {
            batch_size: NonZeroU32::MIN,
            batching_strategy: BatchingStrategy::Static,
            max_tokens_per_batch: None,
            n_ctx: None,
            n_threads: None,
            n_gpu_layers: 0,
            flash_attn: FlashAttn::Auto,
            kv_cache_type: KvCacheType::F16,
            use_mmap: true,
        }
    }
}
