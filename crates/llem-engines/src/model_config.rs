//! What llem knows of a model another process serves: its architecture from the GGUF file
//! llama-server loads, or from the Hugging Face `config.json` of a model directory or of the
//! local Hugging Face cache. FLOPs are estimated from it; without it they are unknown.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::engine::ModelInfo;

/// Architectures whose feed-forward has two matrices, not the gated three.
const PLAIN_FFN: &[&str] = &[
    "gpt2",
    "gptj",
    "gptneox",
    "bloom",
    "falcon",
    "mpt",
    "starcoder",
    "phi2",
    "bert",
];

/// True when `m`'s feed-forward is two matrices (up, down) rather than gated three.
pub fn plain_ffn(m: &ModelInfo) -> bool {
    m.architecture
        .as_deref()
        .is_some_and(|a| PLAIN_FFN.contains(&a))
}

/// Parameters of `m`: its own count, else counted from its shape (embeddings, attention,
/// feed-forward; norms and biases left out, well under 1 %).
pub fn parameter_count(m: &ModelInfo) -> Option<u64> {
    if let Some(p) = m.parameters {
        return Some(p);
    }
    let l = u64::from(m.layers?);
    let h = u64::from(m.hidden_size?);
    let nh = u64::from(m.attention_heads?);
    let nkv = u64::from(m.kv_heads?);
    let d = u64::from(m.head_dim?);
    let f = u64::from(m.ffn_size?);
    let v = u64::from(m.vocab_size?);
    let attention = h * d * (2 * nh + 2 * nkv);
    let ffn = if plain_ffn(m) { 2 * h * f } else { 3 * h * f };
    let embeddings = if m.tied_embeddings == Some(false) {
        2 * v * h
    } else {
        v * h
    };
    Some(l * (attention + ffn) + embeddings)
}

/// The model's description and where it came from, or why there is none.
pub fn describe(
    model: &str,
    model_file: Option<&Path>,
    hf_cache: Option<&Path>,
) -> Result<(ModelInfo, String), String> {
    if let Some(f) = model_file.filter(|f| f.extension().is_some_and(|e| e == "gguf")) {
        return crate::llamacpp::describe_gguf(f)
            .map(|m| (m, format!("GGUF metadata of {}", f.display())));
    }
    let local = Path::new(model).join("config.json");
    let found = if local.is_file() {
        Some(local)
    } else {
        find_in_hf_cache(model, hf_cache)
    };
    let Some(path) = found else {
        return Err(format!(
            "no config.json for {model} in a model directory or the Hugging Face cache"
        ));
    };
    let bytes = llem_config::files::read_regular(&path, 1 << 20)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let v: Value =
        serde_json::from_slice(&bytes).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok((from_hf_config(&v), format!("{}", path.display())))
}

/// `config.json` of `model` (`org/name`) in a Hugging Face hub cache: the most recent
/// snapshot under `models--org--name/snapshots/`.
fn find_in_hf_cache(model: &str, hf_cache: Option<&Path>) -> Option<PathBuf> {
    if !model.contains('/') || model.starts_with('/') || model.contains("..") {
        return None;
    }
    let repo = format!("models--{}", model.replace('/', "--"));
    let env = |k: &str| std::env::var_os(k).map(PathBuf::from);
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(c) = hf_cache {
        roots.push(c.join("hub"));
        roots.push(c.to_path_buf());
    }
    roots.extend(env("HF_HUB_CACHE"));
    roots.extend(env("HF_HOME").map(|h| h.join("hub")));
    roots.extend(env("HOME").map(|h| h.join(".cache/huggingface/hub")));
    roots.into_iter().find_map(|root| {
        let snapshots = root.join(&repo).join("snapshots");
        let mut found: Vec<(std::time::SystemTime, PathBuf)> = std::fs::read_dir(&snapshots)
            .ok()?
            .flatten()
            .map(|e| e.path().join("config.json"))
            .filter(|p| p.is_file())
            .filter_map(|p| Some((p.metadata().ok()?.modified().ok()?, p)))
            .collect();
        found.sort();
        found.pop().map(|(_, p)| p)
    })
}

/// The fields of a Hugging Face `config.json` that the FLOPs formula needs (with the GPT-2
/// spellings some architectures keep).
fn from_hf_config(v: &Value) -> ModelInfo {
    let num = |keys: &[&str]| -> Option<u32> {
        keys.iter()
            .find_map(|k| v.get(*k).and_then(Value::as_u64))
            .and_then(|n| u32::try_from(n).ok())
    };
    let hidden = num(&["hidden_size", "n_embd", "d_model"]);
    let heads = num(&["num_attention_heads", "n_head"]);
    ModelInfo {
        architecture: v
            .get("model_type")
            .and_then(Value::as_str)
            .map(String::from),
        layers: num(&["num_hidden_layers", "n_layer"]),
        hidden_size: hidden,
        attention_heads: heads,
        kv_heads: num(&["num_key_value_heads"]).or(heads),
        head_dim: num(&["head_dim"]).or_else(|| Some(hidden? / heads.filter(|h| *h > 0)?)),
        ffn_size: num(&["intermediate_size", "n_inner"]).or_else(|| hidden.map(|h| 4 * h)),
        vocab_size: num(&["vocab_size"]),
        context_length: num(&["max_position_embeddings", "n_positions"]),
        tied_embeddings: v.get("tie_word_embeddings").and_then(Value::as_bool),
        dtype: v
            .get("torch_dtype")
            .and_then(Value::as_str)
            .map(String::from),
        ..ModelInfo::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_config_json_in_the_hf_cache_describes_the_model() {
        let cache = tempfile::tempdir().unwrap();
        let snap = cache
            .path()
            .join("hub/models--HuggingFaceTB--SmolLM2-135M-Instruct/snapshots/abc123");
        std::fs::create_dir_all(&snap).unwrap();
        std::fs::write(
            snap.join("config.json"),
            r#"{"model_type": "llama", "num_hidden_layers": 30, "hidden_size": 576,
                "num_attention_heads": 9, "num_key_value_heads": 3, "intermediate_size": 1536,
                "vocab_size": 49152, "max_position_embeddings": 8192, "tie_word_embeddings": true}"#,
        )
        .unwrap();
        let (m, from) = describe(
            "HuggingFaceTB/SmolLM2-135M-Instruct",
            None,
            Some(cache.path()),
        )
        .unwrap();
        assert!(from.ends_with("snapshots/abc123/config.json"), "{from}");
        assert_eq!(m.layers, Some(30));
        assert_eq!(m.head_dim, Some(64));
        assert_eq!(m.kv_heads, Some(3));
        assert_eq!(m.ffn_size, Some(1536));
        assert_eq!(m.architecture.as_deref(), Some("llama"));
        let e = describe("nobody/nothing", None, Some(cache.path())).unwrap_err();
        assert!(e.contains("no config.json for nobody/nothing"), "{e}");
        // GPT-2 spellings.
        let g = from_hf_config(&serde_json::json!({"model_type": "gpt2", "n_layer": 12,
            "n_embd": 768, "n_head": 12, "vocab_size": 50257}));
        assert_eq!(
            (g.layers, g.head_dim, g.ffn_size),
            (Some(12), Some(64), Some(3072))
        );
    }
}
