//! `transformers:` (also written `pytorch:`) — Hugging Face transformers through a Python
//! worker. Every field is optional: null means "transformers' own default".

use std::num::NonZeroU32;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::names::{BatchingStrategy, Dtype, str_enum};

str_enum! {
    /// Attention kernel.
    pub enum AttnImplementation {
        /// PyTorch scaled-dot-product attention.
        Sdpa = "sdpa",
        /// FlashAttention 2.
        FlashAttention2 = "flash_attention_2",
        /// FlashAttention 3.
        FlashAttention3 = "flash_attention_3",
        /// Plain PyTorch.
        Eager = "eager",
    }
}

str_enum! {
    /// torch.compile mode.
    pub enum TorchCompileMode {
        /// Default.
        Default = "default",
        /// CUDA graphs to cut Python overhead.
        ReduceOverhead = "reduce-overhead",
        /// Longest compile, fastest kernels.
        MaxAutotune = "max-autotune",
        /// max-autotune without CUDA graphs.
        MaxAutotuneNoCudagraphs = "max-autotune-no-cudagraphs",
    }
}

str_enum! {
    /// BitsAndBytes 4-bit quantisation type.
    pub enum Bnb4bitQuantType {
        /// NormalFloat4.
        Nf4 = "nf4",
        /// Float4.
        Fp4 = "fp4",
    }
}

str_enum! {
    /// KV cache implementation.
    pub enum CacheImplementation {
        /// Pre-allocated static cache (enables CUDA graphs).
        Static = "static",
        /// Static cache offloaded to CPU.
        OffloadedStatic = "offloaded_static",
        /// Sliding-window cache.
        SlidingWindow = "sliding_window",
    }
}

str_enum! {
    /// Native transformers tensor-parallel plan.
    pub enum TpPlan {
        /// The model's own plan.
        Auto = "auto",
    }
}

str_enum! {
    /// torch.autocast dtype.
    pub enum AutocastDtype {
        /// float16.
        Float16 = "float16" | "fp16",
        /// bfloat16.
        Bfloat16 = "bfloat16" | "bf16",
    }
}

/// Hugging Face transformers settings, passed to `from_pretrained` / `generate`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TransformersConfig {
    /// Prompts per generate() call (null = 1).
    pub batch_size: Option<NonZeroU32>,
    /// static, sorted_static, dynamic, sorted_dynamic (null = static).
    pub batching_strategy: Option<BatchingStrategy>,
    /// Token budget per batch for the dynamic strategies.
    #[schemars(range(min = 1))]
    pub max_tokens_per_batch: Option<u32>,
    /// Attention kernel (null = sdpa).
    pub attn_implementation: Option<AttnImplementation>,
    /// torch.compile the model (null = false).
    pub torch_compile: Option<bool>,
    /// torch.compile mode; needs torch_compile: true.
    pub torch_compile_mode: Option<TorchCompileMode>,
    /// torch.compile backend (null = inductor); needs torch_compile: true.
    pub torch_compile_backend: Option<String>,
    /// BitsAndBytes 4-bit weights.
    pub load_in_4bit: Option<bool>,
    /// BitsAndBytes 8-bit weights.
    pub load_in_8bit: Option<bool>,
    /// Compute dtype for 4-bit weights; needs load_in_4bit.
    pub bnb_4bit_compute_dtype: Option<Dtype>,
    /// 4-bit quantisation type (null = nf4); needs load_in_4bit.
    pub bnb_4bit_quant_type: Option<Bnb4bitQuantType>,
    /// Double quantisation; needs load_in_4bit.
    pub bnb_4bit_use_double_quant: Option<bool>,
    /// Use the KV cache (null = true).
    pub use_cache: Option<bool>,
    /// KV cache implementation (null = dynamic).
    pub cache_implementation: Option<CacheImplementation>,
    /// Beam width (null = 1); beams need greedy decoding (do_sample: false).
    #[schemars(range(min = 1))]
    pub num_beams: Option<u32>,
    /// Stop beam search when all beams hit EOS.
    pub early_stopping: Option<bool>,
    /// Beam length penalty (>1 favours longer, <1 shorter outputs).
    pub length_penalty: Option<f64>,
    /// Forbid repeating n-grams of this size (0 = off).
    pub no_repeat_ngram_size: Option<u32>,
    /// Prompt-lookup speculative decoding: tokens drafted from the prompt.
    #[schemars(range(min = 1))]
    pub prompt_lookup_num_tokens: Option<u32>,
    /// Device placement (null = auto); exclusive with tp_plan.
    pub device_map: Option<String>,
    /// Per-device memory limits, e.g. `{0: 10GiB, cpu: 50GiB}`.
    pub max_memory: Option<BTreeMap<String, String>>,
    /// Low CPU memory use while loading.
    pub low_cpu_mem_usage: Option<bool>,
    /// Allow TF32 matmuls on Ampere and later.
    pub allow_tf32: Option<bool>,
    /// torch.autocast mixed precision.
    pub autocast_enabled: Option<bool>,
    /// torch.autocast dtype; needs autocast_enabled.
    pub autocast_dtype: Option<AutocastDtype>,
    /// Native tensor parallelism plan (launches under torchrun).
    pub tp_plan: Option<TpPlan>,
    /// Tensor-parallel ranks for tp_plan.
    #[schemars(range(min = 1))]
    pub tp_size: Option<u32>,
    /// GGUF file inside the model directory or repo, loaded through the `gguf` package.
    pub gguf_file: Option<String>,
}
