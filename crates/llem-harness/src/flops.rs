//! FLOPs of the measured window, by the three-strategy chain of seed 004, adapted to what a
//! GGUF file tells (llem has no graph tracer, so the chain starts at the analytical formula):
//!
//! 1. `architecture` (high): per token and layer, the attention projections
//!    (`2·h·d·(2·n_heads + 2·n_kv_heads)`), the feed-forward (`6·h·f` gated, `4·h·f` plain),
//!    and the attention itself (`4·n_heads·d` per attended position, summed over every
//!    request's actual positions), plus the LM head (`2·h·V`) per generated token.
//! 2. `palm_formula` (medium): `2 · N_non-embedding · tokens` (Kaplan/PaLM), attention
//!    omitted.
//! 3. `parameter_estimate` (low): `2 · N · tokens` with all parameters.

use llem_engines::ModelInfo;
use llem_results::result::FlopsEstimate;

use crate::window::{TokenShare, tokens_of};

fn sum_positions(from: u64, n: u64) -> f64 {
    // Σ_{p=from}^{from+n-1} (p + 1): keys attended by the tokens at those positions.
    let (a, b) = (from as f64 + 1.0, (from + n) as f64);
    if n == 0 {
        0.0
    } else {
        (a + b) * n as f64 / 2.0
    }
}

fn architecture(m: &ModelInfo, shares: &[TokenShare]) -> Option<FlopsEstimate> {
    let l = f64::from(m.layers?);
    let h = f64::from(m.hidden_size?);
    let nh = f64::from(m.attention_heads?);
    let nkv = f64::from(m.kv_heads?);
    let d = f64::from(m.head_dim?);
    let f = f64::from(m.ffn_size?);
    let v = f64::from(m.vocab_size?);
    let plain = llem_engines::model_config::plain_ffn(m);
    let ffn = if plain { 4.0 * h * f } else { 6.0 * h * f };
    let linear = l * (2.0 * h * d * (2.0 * nh + 2.0 * nkv) + ffn);
    let attn = l * 4.0 * nh * d;
    let head = 2.0 * h * v;
    let (mut prefill, mut decode) = (0.0, 0.0);
    for s in shares {
        let i = s.prompt_len;
        if s.prefill {
            prefill += i as f64 * linear + attn * sum_positions(0, i);
        }
        let o = s.output_n;
        decode += o as f64 * (linear + head) + attn * sum_positions(i + s.output_from, o);
    }
    Some(FlopsEstimate {
        value: prefill + decode,
        method: "architecture".into(),
        confidence: "high".into(),
        precision: m.dtype.clone().unwrap_or_else(|| "n/a".into()),
        prefill_flops: prefill,
        decode_flops: decode,
        notes: Some(format!(
            "{} layers, hidden {h}, {nh} heads ({nkv} KV) x {d}, {} FFN {f}, vocab {v}; \
             attention over each request's actual positions",
            l,
            if plain { "plain" } else { "gated" }
        )),
    })
}

fn by_parameters(
    n: f64,
    method: &str,
    confidence: &str,
    note: String,
    m: &ModelInfo,
    shares: &[TokenShare],
) -> FlopsEstimate {
    let (input, output) = tokens_of(shares);
    let (input, output) = (input as f64, output as f64);
    FlopsEstimate {
        value: 2.0 * n * (input + output),
        method: method.into(),
        confidence: confidence.into(),
        precision: m.dtype.clone().unwrap_or_else(|| "n/a".into()),
        prefill_flops: 2.0 * n * input,
        decode_flops: 2.0 * n * output,
        notes: Some(note),
    }
}

/// The best estimate the model's metadata allows for the tokens of `shares` (the measured
/// window's, so that FLOPs, tokens and time describe the same slice); `None` without a
/// parameter count.
pub fn estimate(m: &ModelInfo, shares: &[TokenShare]) -> Option<FlopsEstimate> {
    if let Some(e) = architecture(m, shares) {
        return Some(e);
    }
    let params = m.parameters? as f64;
    if let (Some(h), Some(v)) = (m.hidden_size, m.vocab_size) {
        let embed = f64::from(h)
            * f64::from(v)
            * if m.tied_embeddings == Some(false) {
                2.0
            } else {
                1.0
            };
        let n = (params - embed).max(0.0);
        return Some(by_parameters(
            n,
            "palm_formula",
            "medium",
            format!(
                "PaLM formula: 2 x {n:.0} non-embedding parameters x tokens; attention omitted"
            ),
            m,
            shares,
        ));
    }
    Some(by_parameters(
        params,
        "parameter_estimate",
        "low",
        format!("2 x {params:.0} parameters (embeddings included) x tokens"),
        m,
        shares,
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn rec(i: u32, o: u32) -> TokenShare {
        TokenShare {
            prompt_len: u64::from(i),
            prefill: true,
            output_from: 0,
            output_n: u64::from(o),
        }
    }

    fn smollm2() -> ModelInfo {
        ModelInfo {
            architecture: Some("llama".into()),
            parameters: Some(134_515_008),
            layers: Some(30),
            hidden_size: Some(576),
            attention_heads: Some(9),
            kv_heads: Some(3),
            head_dim: Some(64),
            ffn_size: Some(1536),
            vocab_size: Some(49152),
            tied_embeddings: Some(true),
            ..ModelInfo::default()
        }
    }

    #[test]
    fn architecture_formula_by_hand() {
        let m = smollm2();
        let e = estimate(&m, &[rec(1, 1)]).unwrap();
        assert_eq!(e.method, "architecture");
        // One prompt token at position 0, one generated at position 1.
        let linear = 30.0 * (2.0 * 576.0 * 64.0 * (18.0 + 6.0) + 6.0 * 576.0 * 1536.0);
        let attn = 30.0 * 4.0 * 9.0 * 64.0;
        let head = 2.0 * 576.0 * 49152.0;
        let want = (linear + attn * 1.0) + (linear + head + attn * 2.0);
        assert!((e.value - want).abs() < 1e-3, "{} vs {want}", e.value);
        // The linear part is ~2 x non-embedding parameters per token.
        let non_embed = 134_515_008.0 - 576.0 * 49152.0;
        assert!((linear / (2.0 * non_embed) - 1.0).abs() < 0.01);
    }

    #[test]
    fn the_chain_falls_back_with_falling_confidence() {
        let mut m = smollm2();
        m.ffn_size = None;
        let e = estimate(&m, &[rec(10, 5)]).unwrap();
        assert_eq!(
            (e.method.as_str(), e.confidence.as_str()),
            ("palm_formula", "medium")
        );
        m.hidden_size = None;
        let e = estimate(&m, &[rec(10, 5)]).unwrap();
        assert_eq!(
            (e.method.as_str(), e.confidence.as_str()),
            ("parameter_estimate", "low")
        );
        assert_eq!(e.value, 2.0 * 134_515_008.0 * 15.0);
        m.parameters = None;
        assert!(estimate(&m, &[rec(10, 5)]).is_none());
    }

    #[test]
    fn a_window_counts_only_the_prompts_and_positions_it_holds() {
        let m = smollm2();
        let whole = estimate(&m, &[rec(10, 6)]).unwrap();
        // The same request seen by a window that opens after its prefill and its first two
        // tokens, and closes before its last one: tokens at positions 12..15.
        let part = TokenShare {
            prompt_len: 10,
            prefill: false,
            output_from: 2,
            output_n: 3,
        };
        let e = estimate(&m, &[part]).unwrap();
        assert_eq!(e.prefill_flops, 0.0);
        let linear = 30.0 * (2.0 * 576.0 * 64.0 * (18.0 + 6.0) + 6.0 * 576.0 * 1536.0);
        let attn = 30.0 * 4.0 * 9.0 * 64.0;
        let head = 2.0 * 576.0 * 49152.0;
        let want = 3.0 * (linear + head) + attn * (13.0 + 14.0 + 15.0);
        assert!(
            (e.decode_flops - want).abs() < 1e-3,
            "{} vs {want}",
            e.decode_flops
        );
        assert!(e.value < whole.value);
        // A window that holds no token holds no FLOPs.
        let none = TokenShare {
            prefill: false,
            output_n: 0,
            ..part
        };
        assert_eq!(estimate(&m, &[none]).unwrap().value, 0.0);
        let mut p = m.clone();
        p.ffn_size = None;
        let e = estimate(&p, &[part]).unwrap();
        assert_eq!(e.method, "palm_formula");
        assert_eq!(e.prefill_flops, 0.0);
    }
}
