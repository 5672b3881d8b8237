//! The device memory a configuration needs, estimated before anything loads (`--dry-run`):
//! the weights (the GGUF file's size, or parameters x bytes per parameter from the model's
//! `config.json`) plus the KV cache at the configured batch and lengths. Activations, the CUDA
//! context and allocator slack are not in it, and an engine that reserves memory up front
//! (vLLM's `gpu_memory_utilization`) takes what it reserves whatever this says.

use std::path::Path;

use llem_config::{Dtype, Engine as EngineName, ExperimentConfig};

use crate::engine::ModelInfo;
use crate::model_config;
use crate::registry::{self, Runtime};

/// An estimate and what it rests on.
#[derive(Clone, Debug, PartialEq)]
pub struct MemoryEstimate {
    /// Weights, bytes.
    pub weights_bytes: u64,
    /// KV cache, bytes.
    pub kv_cache_bytes: u64,
    /// Tokens the KV cache holds (sequences x tokens per sequence).
    pub kv_tokens: u64,
    /// What the figures come from, in words.
    pub basis: String,
}

impl MemoryEstimate {
    /// Weights plus KV cache, bytes.
    pub fn total_bytes(&self) -> u64 {
        self.weights_bytes.saturating_add(self.kv_cache_bytes)
    }
}

/// Bytes per KV-cache element and the type's name: the engine's own answer where its config
/// sets the cache's type (its spec, or llama.cpp's ggml types), else the model dtype (the
/// transformers worker; an OpenAI endpoint's server is not llem's to know).
fn kv_element(cfg: &ExperimentConfig) -> (f64, String) {
    let set_by_engine = match registry::runtime(cfg) {
        Runtime::Embedded => crate::llamacpp::kv_element(cfg),
        Runtime::Server => registry::server(cfg.engine).and_then(|spec| (spec.kv_element)(cfg)),
        Runtime::Worker => None,
    };
    set_by_engine.unwrap_or_else(|| match cfg.dtype {
        Some(Dtype::Float32) => (4.0, "float32".into()),
        _ => (2.0, "16-bit".into()),
    })
}

/// Bytes per weight and why, for a model loaded from Hugging Face weights.
fn weight_bytes(cfg: &ExperimentConfig) -> (f64, String) {
    let t = cfg.transformers.as_deref();
    if t.and_then(|t| t.load_in_4bit) == Some(true) {
        return (0.5, "4-bit (bitsandbytes)".into());
    }
    if t.and_then(|t| t.load_in_8bit) == Some(true) {
        return (1.0, "8-bit (bitsandbytes)".into());
    }
    match cfg.dtype {
        Some(Dtype::Float32) => (4.0, "float32".into()),
        Some(d) => (2.0, d.as_str().to_string()),
        None => (2.0, "bfloat16".into()),
    }
}

/// A model's metadata, read once for every configuration that loads it.
#[derive(Clone, Debug)]
pub struct DescribedModel {
    /// Its shape.
    pub info: ModelInfo,
    /// The GGUF file, when the model is one (its size is the weights').
    pub gguf: Option<std::path::PathBuf>,
    /// Where the metadata came from.
    pub source: String,
}

/// Reads `model`'s metadata: the GGUF file it names (through `describe_gguf`, which loads its
/// vocabulary only), else the `config.json` of a model directory or the Hugging Face cache.
pub fn describe_model(
    model: &str,
    assets_dir: &Path,
    hf_cache: Option<&Path>,
    describe_gguf: &dyn Fn(&Path) -> Result<ModelInfo, String>,
) -> Result<DescribedModel, String> {
    let gguf = crate::assets::resolve_model(model, assets_dir).filter(|p| {
        p.extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("gguf"))
    });
    match gguf {
        Some(path) => Ok(DescribedModel {
            info: describe_gguf(&path)?,
            source: format!("GGUF file {}", path.display()),
            gguf: Some(path),
        }),
        None => {
            let (info, source) = model_config::describe(model, None, hf_cache)?;
            Ok(DescribedModel {
                info,
                gguf: None,
                source,
            })
        }
    }
}

/// Estimates `cfg`'s device memory from its model's metadata; `Err` says why it cannot.
pub fn estimate(cfg: &ExperimentConfig, model: &DescribedModel) -> Result<MemoryEstimate, String> {
    if cfg.engine == EngineName::OpenAi {
        return Err("an external server's memory is its own".into());
    }
    let info = &model.info;
    let (weights, basis) = match &model.gguf {
        Some(path) => {
            let size = info
                .file_size_bytes
                .or_else(|| std::fs::metadata(path).ok().map(|m| m.len()))
                .ok_or_else(|| format!("cannot read the size of {}", path.display()))?;
            (size, model.source.clone())
        }
        None => {
            let params = model_config::parameter_count(info)
                .ok_or_else(|| format!("{} does not give the model's shape", model.source))?;
            let (per, what) = weight_bytes(cfg);
            (
                (params as f64 * per) as u64,
                format!(
                    "{}: {params} parameters x {per} bytes ({what})",
                    model.source
                ),
            )
        }
    };
    let per_token = |elem: f64| -> Option<f64> {
        Some(
            2.0 * f64::from(info.layers?)
                * f64::from(info.kv_heads?)
                * f64::from(info.head_dim?)
                * elem,
        )
    };
    let kv_tokens = match registry::runtime(cfg) {
        Runtime::Embedded => {
            let plan = registry::context_plan(cfg, info.context_length.unwrap_or(u32::MAX));
            u64::from(plan.batching.batch_size.get()) * u64::from(plan.tokens_per_slot)
        }
        Runtime::Worker | Runtime::Server => {
            // The batch the run is planned with (a server's open batch as warmup sends it) and
            // the lengths a slot is sized for when the config leaves them open.
            let batch = registry::batching(cfg).batch_size.get();
            let input = cfg
                .max_input_tokens
                .or(info.context_length)
                .unwrap_or(crate::llamacpp::plan::OPEN_INPUT_TOKENS);
            let output = cfg
                .max_output_tokens
                .unwrap_or(crate::llamacpp::plan::OPEN_OUTPUT_TOKENS);
            u64::from(batch) * (u64::from(input) + u64::from(output))
        }
    };
    let (elem, kv_type) = kv_element(cfg);
    let kv = per_token(elem)
        .map(|b| (b * kv_tokens as f64) as u64)
        .ok_or("the model's metadata does not give layers, KV heads and head size")?;
    Ok(MemoryEstimate {
        weights_bytes: weights,
        kv_cache_bytes: kv,
        kv_tokens,
        basis: format!("{basis}; KV cache {kv_tokens} tokens at {kv_type}"),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn cfg(yaml: serde_json::Value) -> ExperimentConfig {
        serde_json::from_value(yaml).unwrap()
    }

    /// A Llama-3.1-8B-shaped `config.json` in a Hugging Face cache.
    fn hf_cache() -> tempfile::TempDir {
        let cache = tempfile::tempdir().unwrap();
        let snap = cache
            .path()
            .join("hub/models--meta-llama--Llama-3.1-8B/snapshots/abc");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::write(
            snap.join("config.json"),
            r#"{"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336,
                "vocab_size": 128256, "max_position_embeddings": 131072,
                "tie_word_embeddings": false, "torch_dtype": "bfloat16"}"#,
        )
        .unwrap();
        cache
    }

    #[test]
    fn an_8b_model_on_vllm_weighs_16_gb_plus_its_kv_cache() {
        let cache = hf_cache();
        let c = cfg(serde_json::json!({
            "model": "meta-llama/Llama-3.1-8B", "engine": "vllm", "dtype": "bfloat16",
            "max_input_tokens": 1024, "max_output_tokens": 1024,
            "vllm": {"engine": {"max_num_seqs": 16}}
        }));
        let no_gguf = &|_: &Path| -> Result<ModelInfo, String> { Err("not a GGUF".into()) };
        let m = describe_model(
            &c.model,
            Path::new("/nonexistent"),
            Some(cache.path()),
            no_gguf,
        )
        .unwrap();
        let e = estimate(&c, &m).unwrap();
        // 8.03 B parameters x 2 bytes.
        let params = e.weights_bytes / 2;
        assert!((8_000_000_000..8_100_000_000).contains(&params), "{params}");
        // 16 sequences x 2048 tokens x (2 x 32 layers x 8 KV heads x 128 x 2 bytes).
        assert_eq!(e.kv_tokens, 16 * 2048);
        assert_eq!(e.kv_cache_bytes, 16 * 2048 * 2 * 32 * 8 * 128 * 2);
        assert!(e.basis.contains("16-bit"), "{}", e.basis);

        // fp8 KV halves the cache; 4-bit weights (transformers) quarter the weights.
        let mut c8 = c.clone();
        c8.vllm = Some(Box::new(
            serde_json::from_value(
                serde_json::json!({"engine": {"max_num_seqs": 16, "kv_cache_dtype": "fp8"}}),
            )
            .unwrap(),
        ));
        let e8 = estimate(&c8, &m).unwrap();
        assert_eq!(e8.kv_cache_bytes * 2, e.kv_cache_bytes);
        // TensorRT-LLM's FP8 KV quantisation likewise (it was estimated at 16 bits).
        let trt = |quant: serde_json::Value| {
            cfg(serde_json::json!({
                "model": "meta-llama/Llama-3.1-8B", "engine": "tensorrt", "dtype": "bfloat16",
                "max_input_tokens": 1024, "max_output_tokens": 1024,
                "tensorrt": {"max_batch_size": 16, "quant": quant}
            }))
        };
        let t16 = estimate(&trt(serde_json::json!({})), &m).unwrap();
        let t8 = estimate(&trt(serde_json::json!({"kv_cache_quant_algo": "FP8"})), &m).unwrap();
        assert_eq!(t8.kv_cache_bytes * 2, t16.kv_cache_bytes);
        assert!(t8.basis.contains("fp8"), "{}", t8.basis);

        // No metadata offline: said, not guessed.
        let err = describe_model(
            "acme/unknown",
            Path::new("/nonexistent"),
            Some(cache.path()),
            no_gguf,
        )
        .unwrap_err();
        assert!(err.contains("no config.json for acme/unknown"), "{err}");
    }
}
