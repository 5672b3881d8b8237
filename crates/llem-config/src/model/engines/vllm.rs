//! `vllm:` — vLLM, with its three sub-sections `engine:` (engine arguments), `sampling:`
//! (SamplingParams extensions) and `beam_search:`. Null means "vLLM's own default".

use std::num::NonZeroU32;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::model::names::str_enum;

str_enum! {
    /// KV cache storage dtype.
    pub enum VllmKvCacheDtype {
        /// The model dtype.
        Auto = "auto",
        /// FP8 (backend default format).
        Fp8 = "fp8",
        /// FP8 E5M2.
        Fp8E5m2 = "fp8_e5m2",
        /// FP8 E4M3.
        Fp8E4m3 = "fp8_e4m3",
    }
}

str_enum! {
    /// Weight quantisation method (needs a pre-quantised checkpoint).
    pub enum VllmQuantization {
        /// AWQ.
        Awq = "awq",
        /// AWQ with Marlin kernels.
        AwqMarlin = "awq_marlin",
        /// GPTQ.
        Gptq = "gptq",
        /// GPTQ with Marlin kernels.
        GptqMarlin = "gptq_marlin",
        /// FP8.
        Fp8 = "fp8",
        /// FP8 E5M2.
        Fp8E5m2 = "fp8_e5m2",
        /// FP8 E4M3.
        Fp8E4m3 = "fp8_e4m3",
        /// Marlin.
        Marlin = "marlin",
        /// BitsAndBytes.
        Bitsandbytes = "bitsandbytes",
        /// compressed-tensors checkpoints.
        CompressedTensors = "compressed-tensors",
    }
}

impl VllmQuantization {
    /// True for the FP8 formats, which need a 16-bit dtype.
    pub fn is_fp8(self) -> bool {
        matches!(
            self,
            VllmQuantization::Fp8 | VllmQuantization::Fp8E5m2 | VllmQuantization::Fp8E4m3
        )
    }
}

str_enum! {
    /// Multi-GPU executor.
    pub enum DistributedExecutorBackend {
        /// Python multiprocessing.
        Mp = "mp",
        /// Ray.
        Ray = "ray",
    }
}

/// vLLM settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct VllmConfig {
    /// Engine arguments (`vllm serve` flags / `LLM()` arguments).
    pub engine: Option<VllmEngineConfig>,
    /// vLLM-specific sampling parameters; exclusive with beam_search.
    pub sampling: Option<VllmSamplingConfig>,
    /// Beam search instead of sampling; exclusive with sampling.
    pub beam_search: Option<VllmBeamSearchConfig>,
}

/// vLLM engine arguments.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct VllmEngineConfig {
    /// Fraction of GPU memory vLLM may use (null = 0.9); exclusive with kv_cache_memory_bytes.
    #[schemars(extend("exclusiveMinimum" = 0), range(max = 1.0))]
    pub gpu_memory_utilization: Option<f64>,
    /// CPU swap space for the KV cache, in GiB (refused: vLLM 0.32 has no `--swap-space`).
    #[schemars(range(min = 0.0))]
    pub swap_space: Option<f64>,
    /// CPU RAM for offloaded weights, in GiB.
    #[schemars(range(min = 0.0))]
    pub cpu_offload_gb: Option<f64>,
    /// KV cache block size in tokens: 8, 16 or 32 (null = 16).
    #[schemars(extend("enum" = [8, 16, 32, null]))]
    pub block_size: Option<u32>,
    /// KV cache dtype: auto, fp8, fp8_e5m2, fp8_e4m3.
    pub kv_cache_dtype: Option<VllmKvCacheDtype>,
    /// Disable CUDA graphs.
    pub enforce_eager: Option<bool>,
    /// Split long prefills across scheduler steps.
    pub enable_chunked_prefill: Option<bool>,
    /// Most sequences per scheduler step (the serving batch size).
    pub max_num_seqs: Option<NonZeroU32>,
    /// Most tokens per scheduler step.
    #[schemars(range(min = 1))]
    pub max_num_batched_tokens: Option<u32>,
    /// Longest sequence (input + output) in tokens.
    #[schemars(range(min = 1))]
    pub max_model_len: Option<u32>,
    /// GPUs the model is sharded across (tensor parallelism).
    #[schemars(range(min = 1))]
    pub tensor_parallel_size: Option<u32>,
    /// Pipeline-parallel stages.
    #[schemars(range(min = 1))]
    pub pipeline_parallel_size: Option<u32>,
    /// Automatic prefix caching.
    pub enable_prefix_caching: Option<bool>,
    /// Weight quantisation method.
    pub quantization: Option<VllmQuantization>,
    /// Multi-step scheduling (refused: gone with vLLM's V0 engine).
    #[schemars(range(min = 1))]
    pub num_scheduler_steps: Option<u32>,
    /// Longest sequence captured in CUDA graphs (refused: vLLM 0.32 sets graph sizes in
    /// `compilation_config`).
    #[schemars(range(min = 1))]
    pub max_seq_len_to_capture: Option<u32>,
    /// mp or ray.
    pub distributed_executor_backend: Option<DistributedExecutorBackend>,
    /// Speculative decoding (also accepted as `speculative:`).
    pub speculative_config: Option<VllmSpeculativeConfig>,
    /// Layer groups for CPU offloading.
    pub offload_group_size: Option<u32>,
    /// Layers offloaded per group.
    #[schemars(range(min = 1))]
    pub offload_num_in_group: Option<u32>,
    /// Prefetch steps ahead for CPU offloading.
    pub offload_prefetch_step: Option<u32>,
    /// Parameter names to offload.
    pub offload_params: Option<Vec<String>>,
    /// Disable the custom all-reduce kernel.
    pub disable_custom_all_reduce: Option<bool>,
    /// KV cache size in bytes; exclusive with gpu_memory_utilization.
    #[schemars(range(min = 1))]
    pub kv_cache_memory_bytes: Option<u64>,
    /// vLLM CompilationConfig, passed through as written.
    pub compilation_config: Option<BTreeMap<String, serde_json::Value>>,
    /// Attention backend settings.
    pub attention: Option<VllmAttentionConfig>,
}

/// Speculative decoding in vLLM.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct VllmSpeculativeConfig {
    /// Draft model.
    pub model: Option<String>,
    /// Tokens drafted per step.
    #[schemars(range(min = 1))]
    pub num_speculative_tokens: Option<u32>,
    /// Method: draft_model, ngram, medusa, eagle, ...
    pub method: Option<String>,
}

/// vLLM attention settings (`vllm.engine.attention`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct VllmAttentionConfig {
    /// Attention backend (flash_attn, flashinfer, ...; also accepted as `backend:`).
    pub engine: Option<String>,
    /// FlashAttention version.
    pub flash_attn_version: Option<u32>,
    /// Most splits with CUDA graphs under FlashAttention.
    pub flash_attn_max_num_splits_for_cuda_graph: Option<u32>,
    /// Use prefill-decode attention (refused: not in vLLM 0.32's AttentionConfig).
    pub use_prefill_decode_attention: Option<bool>,
    /// Quantise queries during prefill.
    pub use_prefill_query_quantization: Option<bool>,
    /// cuDNN prefill (refused: not in vLLM 0.32's AttentionConfig).
    pub use_cudnn_prefill: Option<bool>,
    /// Disable FlashInfer prefill (refused: not in vLLM 0.32's AttentionConfig).
    pub disable_flashinfer_prefill: Option<bool>,
    /// Disable FlashInfer query quantisation.
    pub disable_flashinfer_q_quantization: Option<bool>,
    /// TensorRT-LLM attention kernels.
    pub use_trtllm_attention: Option<bool>,
    /// TensorRT-LLM ragged DeepSeek prefill (refused: not in vLLM 0.32's AttentionConfig).
    pub use_trtllm_ragged_deepseek_prefill: Option<bool>,
}

/// vLLM SamplingParams extensions.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct VllmSamplingConfig {
    /// Output token limit for vLLM (null = max_output_tokens).
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
    /// Tokens before EOS may stop a sequence.
    pub min_tokens: Option<u32>,
    /// Presence penalty.
    #[schemars(range(min = -2.0, max = 2.0))]
    pub presence_penalty: Option<f64>,
    /// Frequency penalty.
    #[schemars(range(min = -2.0, max = 2.0))]
    pub frequency_penalty: Option<f64>,
    /// Keep generating past EOS (fixes output length).
    pub ignore_eos: Option<bool>,
    /// Output sequences per prompt.
    #[schemars(range(min = 1))]
    pub n: Option<u32>,
}

/// vLLM beam search.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct VllmBeamSearchConfig {
    /// Number of beams.
    #[schemars(range(min = 1))]
    pub beam_width: Option<u32>,
    /// Length penalty.
    pub length_penalty: Option<f64>,
    /// Stop when beam_width sequences are complete.
    pub early_stopping: Option<bool>,
    /// Output token limit for beam search (null = max_output_tokens).
    #[schemars(range(min = 1))]
    pub max_tokens: Option<u32>,
}
