//! `tgi:` — Hugging Face Text Generation Inference launcher arguments. Null means "TGI's
//! own default".

use std::num::NonZeroU32;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::names::str_enum;

str_enum! {
    /// Weight quantisation (`--quantize`).
    pub enum TgiQuantize {
        /// AWQ.
        Awq = "awq",
        /// compressed-tensors.
        CompressedTensors = "compressed-tensors",
        /// EETQ 8-bit.
        Eetq = "eetq",
        /// ExLlamaV2.
        Exl2 = "exl2",
        /// GPTQ.
        Gptq = "gptq",
        /// Marlin.
        Marlin = "marlin",
        /// BitsAndBytes 8-bit.
        Bitsandbytes = "bitsandbytes",
        /// BitsAndBytes NF4.
        BitsandbytesNf4 = "bitsandbytes-nf4",
        /// BitsAndBytes FP4.
        BitsandbytesFp4 = "bitsandbytes-fp4",
        /// FP8.
        Fp8 = "fp8",
    }
}

str_enum! {
    /// KV cache dtype (`--kv-cache-dtype`).
    pub enum TgiKvCacheDtype {
        /// FP8 E4M3.
        Fp8E4m3fn = "fp8_e4m3fn",
        /// FP8 E5M2.
        Fp8E5m2 = "fp8_e5m2",
    }
}

/// TGI settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TgiConfig {
    /// Shards (GPUs) the model is split across.
    #[schemars(range(min = 1))]
    pub num_shard: Option<u32>,
    /// Weight quantisation.
    pub quantize: Option<TgiQuantize>,
    /// KV cache dtype.
    pub kv_cache_dtype: Option<TgiKvCacheDtype>,
    /// Most concurrent requests the router accepts.
    #[schemars(range(min = 1))]
    pub max_concurrent_requests: Option<u32>,
    /// Longest input + output in tokens.
    #[schemars(range(min = 1))]
    pub max_total_tokens: Option<u32>,
    /// Most tokens in one prefill batch.
    #[schemars(range(min = 1))]
    pub max_batch_prefill_tokens: Option<u32>,
    /// Most tokens in a running batch.
    #[schemars(range(min = 1))]
    pub max_batch_total_tokens: Option<u32>,
    /// Most requests in a batch.
    pub max_batch_size: Option<NonZeroU32>,
    /// Decode steps a waiting request may be held before forcing a prefill.
    pub max_waiting_tokens: Option<u32>,
    /// Ratio of waiting to running requests that triggers a prefill.
    #[schemars(range(min = 0.0))]
    pub waiting_served_ratio: Option<f64>,
    /// Batch sizes captured in CUDA graphs.
    pub cuda_graphs: Option<Vec<u32>>,
    /// Disable custom CUDA kernels.
    pub disable_custom_kernels: Option<bool>,
    /// Speculative tokens (Medusa / n-gram).
    #[schemars(range(min = 1))]
    pub speculate: Option<u32>,
}
