//! `tensorrt:` — TensorRT-LLM (`trtllm-serve`). Null means "TensorRT-LLM's own default".

use std::num::NonZeroU32;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::names::{Dtype, str_enum};

str_enum! {
    /// TensorRT-LLM runtime backend.
    pub enum TrtBackend {
        /// Ahead-of-time compiled TensorRT engine.
        Trt = "trt",
        /// TensorRT-LLM's PyTorch runtime.
        Pytorch = "pytorch",
        /// Experimental auto-deploy.
        AutoDeploy = "_autodeploy",
    }
}

str_enum! {
    /// Weight quantisation algorithm (TensorRT-LLM QuantAlgo names).
    pub enum TrtQuantAlgo {
        /// FP8.
        Fp8 = "FP8",
        /// INT8.
        Int8 = "INT8",
        /// 4-bit weights, 16-bit activations, AWQ.
        W4a16Awq = "W4A16_AWQ",
        /// 4-bit weights, 16-bit activations, GPTQ.
        W4a16Gptq = "W4A16_GPTQ",
        /// 8-bit weights, 16-bit activations.
        W8a16 = "W8A16",
        /// 8-bit weights, 16-bit activations, GPTQ.
        W8a16Gptq = "W8A16_GPTQ",
        /// 4-bit weights, 8-bit activations, AWQ.
        W4a8Awq = "W4A8_AWQ",
        /// No quantisation.
        NoQuant = "NO_QUANT",
    }
}

str_enum! {
    /// KV cache quantisation algorithm.
    pub enum TrtKvQuantAlgo {
        /// FP8.
        Fp8 = "FP8",
        /// INT8.
        Int8 = "INT8",
    }
}

str_enum! {
    /// Scheduler capacity policy.
    pub enum TrtCapacityPolicy {
        /// Admit only requests whose KV cache is guaranteed.
        GuaranteedNoEvict = "GUARANTEED_NO_EVICT",
        /// Fill the KV cache, evicting when needed.
        MaxUtilization = "MAX_UTILIZATION",
        /// Static batching.
        StaticBatch = "STATIC_BATCH",
    }
}

/// TensorRT-LLM settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TensorRtConfig {
    /// Largest batch (compile-time constant).
    pub max_batch_size: Option<NonZeroU32>,
    /// GPUs the model is sharded across.
    #[schemars(range(min = 1))]
    pub tensor_parallel_size: Option<u32>,
    /// Pipeline-parallel stages.
    #[schemars(range(min = 1))]
    pub pipeline_parallel_size: Option<u32>,
    /// Longest input (compile-time constant).
    #[schemars(range(min = 1))]
    pub max_input_len: Option<u32>,
    /// Longest sequence, input + output (compile-time constant).
    #[schemars(range(min = 1))]
    pub max_seq_len: Option<u32>,
    /// Most tokens per iteration.
    #[schemars(range(min = 1))]
    pub max_num_tokens: Option<u32>,
    /// Model dtype: float16 or bfloat16 (TensorRT-LLM has no float32 path).
    pub dtype: Option<Dtype>,
    /// Faster engine build, less optimisation.
    pub fast_build: Option<bool>,
    /// Runtime backend: trt, pytorch, _autodeploy (also accepted as `backend:`).
    pub engine: Option<TrtBackend>,
    /// Prebuilt engine directory.
    pub engine_path: Option<String>,
    /// Quantisation (also accepted as `quant_config:`).
    pub quant: Option<TrtQuantConfig>,
    /// KV cache.
    pub kv_cache: Option<TrtKvCacheConfig>,
    /// Scheduler.
    pub scheduler: Option<TrtSchedulerConfig>,
    /// TensorRT-LLM SamplingParams extensions.
    pub sampling: Option<TrtSamplingConfig>,
}

/// TensorRT-LLM quantisation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TrtQuantConfig {
    /// Weight quantisation algorithm.
    pub quant_algo: Option<TrtQuantAlgo>,
    /// KV cache quantisation algorithm.
    pub kv_cache_quant_algo: Option<TrtKvQuantAlgo>,
}

/// TensorRT-LLM KV cache.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TrtKvCacheConfig {
    /// Reuse KV cache blocks across requests.
    pub enable_block_reuse: Option<bool>,
    /// Fraction of free GPU memory for the KV cache.
    #[schemars(range(min = 0.0, max = 1.0))]
    pub free_gpu_memory_fraction: Option<f64>,
    /// Most tokens in the KV cache.
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
    /// Host (CPU) cache for offloading, in bytes.
    pub host_cache_size: Option<u64>,
}

/// TensorRT-LLM scheduler.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TrtSchedulerConfig {
    /// Capacity policy.
    pub capacity_scheduling_policy: Option<TrtCapacityPolicy>,
}

/// TensorRT-LLM SamplingParams extensions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct TrtSamplingConfig {
    /// Tokens before EOS may stop a sequence.
    pub min_tokens: Option<u32>,
    /// Output sequences per prompt.
    #[schemars(range(min = 1))]
    pub n: Option<u32>,
    /// Keep generating past EOS.
    pub ignore_eos: Option<bool>,
}
