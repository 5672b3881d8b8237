//! Model facts from the GGUF metadata, as llama.cpp loaded them.

use llama_cpp_2::model::LlamaModel;

use crate::engine::ModelInfo;

/// `general.file_type` (llama.cpp's `llama_ftype`) as the quantisation name.
pub fn file_type_name(ftype: u32) -> Option<&'static str> {
    Some(match ftype {
        0 => "F32",
        1 => "F16",
        2 => "Q4_0",
        3 => "Q4_1",
        7 => "Q8_0",
        8 => "Q5_0",
        9 => "Q5_1",
        10 => "Q2_K",
        11 => "Q3_K_S",
        12 => "Q3_K_M",
        13 => "Q3_K_L",
        14 => "Q4_K_S",
        15 => "Q4_K_M",
        16 => "Q5_K_S",
        17 => "Q5_K_M",
        18 => "Q6_K",
        19 => "IQ2_XXS",
        20 => "IQ2_XS",
        21 => "Q2_K_S",
        22 => "IQ3_XS",
        23 => "IQ3_XXS",
        24 => "IQ1_S",
        25 => "IQ4_NL",
        26 => "IQ3_S",
        27 => "IQ3_M",
        28 => "IQ2_S",
        29 => "IQ2_M",
        30 => "IQ4_XS",
        31 => "IQ1_M",
        32 => "BF16",
        36 => "TQ1_0",
        37 => "TQ2_0",
        38 => "MXFP4_MOE",
        _ => return None,
    })
}

fn meta_u32(model: &LlamaModel, key: &str) -> Option<u32> {
    model.meta_val_str(key).ok()?.trim().parse().ok()
}

/// What FLOPs estimation and the result need, from the loaded model.
pub fn model_info(model: &LlamaModel, file_size: Option<u64>) -> ModelInfo {
    let arch = model.meta_val_str("general.architecture").ok();
    let key = |k: &str| arch.as_ref().map(|a| format!("{a}.{k}"));
    let get = |k: &str| key(k).and_then(|k| meta_u32(model, &k));
    let hidden = get("embedding_length").or_else(|| u32::try_from(model.n_embd()).ok());
    let heads = get("attention.head_count").or_else(|| Some(model.n_head()));
    let head_dim = get("attention.key_length").or_else(|| match (hidden, heads) {
        (Some(h), Some(n)) if n > 0 => Some(h / n),
        _ => None,
    });
    let vocab = u32::try_from(model.n_vocab()).ok();
    let params = model.n_params();
    let layers = get("block_count").or_else(|| Some(model.n_layer()));
    let ffn = get("feed_forward_length");
    let kv_heads = get("attention.head_count_kv").or_else(|| Some(model.n_head_kv()));
    let tied = tied_embeddings(
        params, layers, hidden, heads, kv_heads, head_dim, ffn, vocab,
    );
    ModelInfo {
        architecture: arch.clone(),
        parameters: Some(params),
        layers,
        hidden_size: hidden,
        attention_heads: heads,
        kv_heads,
        head_dim,
        ffn_size: ffn,
        vocab_size: vocab,
        context_length: get("context_length").or_else(|| Some(model.n_ctx_train())),
        dtype: meta_u32(model, "general.file_type")
            .and_then(file_type_name)
            .map(String::from),
        file_size_bytes: file_size,
        weights_bytes: Some(model.size()),
        tied_embeddings: tied,
        load_time_s: None,
    }
}

/// Whether the output projection shares the token embedding: the parameter count of a
/// standard decoder (attention + gated FFN per layer) plus one or two vocab x hidden
/// matrices, whichever is nearer to what llama.cpp counted.
#[allow(clippy::too_many_arguments)]
fn tied_embeddings(
    params: u64,
    layers: Option<u32>,
    hidden: Option<u32>,
    heads: Option<u32>,
    kv_heads: Option<u32>,
    head_dim: Option<u32>,
    ffn: Option<u32>,
    vocab: Option<u32>,
) -> Option<bool> {
    let (l, h, nh, nkv, d, f, v) = (
        f64::from(layers?),
        f64::from(hidden?),
        f64::from(heads?),
        f64::from(kv_heads?),
        f64::from(head_dim?),
        f64::from(ffn?),
        f64::from(vocab?),
    );
    let per_layer = h * nh * d * 2.0 + h * nkv * d * 2.0 + 3.0 * h * f + 2.0 * h;
    let body = l * per_layer + h;
    let p = params as f64;
    let tied = (p - (body + v * h)).abs();
    let untied = (p - (body + 2.0 * v * h)).abs();
    // Only answer when one hypothesis fits within 5 %.
    (tied.min(untied) < 0.05 * p).then_some(tied < untied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tie_detection_on_smollm2_shapes() {
        // SmolLM2-135M: 30 layers, 576 hidden, 9 heads, 3 KV heads, 64 head dim, 1536 FFN,
        // 49152 vocab, 134,515,008 parameters with tied embeddings.
        let t = tied_embeddings(
            134_515_008,
            Some(30),
            Some(576),
            Some(9),
            Some(3),
            Some(64),
            Some(1536),
            Some(49152),
        );
        assert_eq!(t, Some(true));
        assert_eq!(file_type_name(3), Some("Q4_1"));
        assert_eq!(file_type_name(999), None);
    }
}
