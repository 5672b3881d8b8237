//! `sglang:` — SGLang server arguments (`python -m sglang.launch_server`), named as SGLang
//! names them. Null means "SGLang's own default".

use std::num::NonZeroU32;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::names::str_enum;

str_enum! {
    /// Request scheduling policy.
    pub enum SglangSchedulePolicy {
        /// Longest prefix match.
        Lpm = "lpm",
        /// Random.
        Random = "random",
        /// First come, first served.
        Fcfs = "fcfs",
        /// Depth-first search weighting.
        DfsWeight = "dfs-weight",
    }
}

str_enum! {
    /// KV cache dtype.
    pub enum SglangKvCacheDtype {
        /// The model dtype.
        Auto = "auto",
        /// FP8 E5M2.
        Fp8E5m2 = "fp8_e5m2",
        /// FP8 E4M3.
        Fp8E4m3 = "fp8_e4m3",
    }
}

/// SGLang settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SglangConfig {
    /// Tensor-parallel size.
    #[schemars(range(min = 1))]
    pub tp_size: Option<u32>,
    /// Data-parallel size.
    #[schemars(range(min = 1))]
    pub dp_size: Option<u32>,
    /// Fraction of GPU memory for weights and KV cache.
    #[schemars(extend("exclusiveMinimum" = 0), range(max = 1.0))]
    pub mem_fraction_static: Option<f64>,
    /// Most requests running at once (the serving batch size).
    pub max_running_requests: Option<NonZeroU32>,
    /// Most tokens in the KV cache pool.
    #[schemars(range(min = 1))]
    pub max_total_tokens: Option<u32>,
    /// Chunked prefill size in tokens (-1 disables chunking).
    #[schemars(range(min = -1))]
    pub chunked_prefill_size: Option<i32>,
    /// Most tokens in one prefill batch.
    #[schemars(range(min = 1))]
    pub max_prefill_tokens: Option<u32>,
    /// lpm, random, fcfs, dfs-weight.
    pub schedule_policy: Option<SglangSchedulePolicy>,
    /// How conservatively new requests are admitted (higher = fewer retractions).
    #[schemars(range(min = 0.0))]
    pub schedule_conservativeness: Option<f64>,
    /// Attention backend (flashinfer, triton, fa3, ...).
    pub attention_backend: Option<String>,
    /// Sampling backend (flashinfer, pytorch).
    pub sampling_backend: Option<String>,
    /// Weight quantisation method (awq, gptq, fp8, ...).
    pub quantization: Option<String>,
    /// KV cache dtype.
    pub kv_cache_dtype: Option<SglangKvCacheDtype>,
    /// Context length override.
    #[schemars(range(min = 1))]
    pub context_length: Option<u32>,
    /// Disable the radix (prefix) cache.
    pub disable_radix_cache: Option<bool>,
    /// torch.compile the model.
    pub enable_torch_compile: Option<bool>,
    /// Largest batch compiled with torch.compile.
    #[schemars(range(min = 1))]
    pub torch_compile_max_bs: Option<u32>,
    /// Disable CUDA graphs (decode and prefill: `--cuda-graph-backend-{decode,prefill}
    /// disabled`).
    pub disable_cuda_graph: Option<bool>,
    /// Largest batch captured in the decode CUDA graph (`--cuda-graph-max-bs-decode`).
    #[schemars(range(min = 1))]
    pub cuda_graph_max_bs: Option<u32>,
    /// Mix prefill and decode in one batch.
    pub enable_mixed_chunk: Option<bool>,
    /// Tokens between streamed chunks.
    #[schemars(range(min = 1))]
    pub stream_interval: Option<u32>,
    /// Speculative decoding algorithm (EAGLE, EAGLE3, NEXTN, ...).
    pub speculative_algorithm: Option<String>,
    /// Draft model path.
    pub speculative_draft_model_path: Option<String>,
    /// Speculative steps.
    #[schemars(range(min = 1))]
    pub speculative_num_steps: Option<u32>,
    /// Top-k branches per speculative step.
    #[schemars(range(min = 1))]
    pub speculative_eagle_topk: Option<u32>,
    /// Draft tokens verified per step.
    #[schemars(range(min = 1))]
    pub speculative_num_draft_tokens: Option<u32>,
}
