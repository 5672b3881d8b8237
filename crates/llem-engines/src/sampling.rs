//! Decoding parameters, resolved from the config (presets are expanded by llem-config).

use llem_config::ExperimentConfig;

/// How the next token is chosen (serialised as is for the transformers worker).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct SamplingParams {
    /// Greedy (argmax) decoding.
    pub greedy: bool,
    /// Temperature.
    pub temperature: f64,
    /// Top-k (0 = off).
    pub top_k: u32,
    /// Nucleus p (1 = off).
    pub top_p: f64,
    /// Min-p (null = off).
    pub min_p: Option<f64>,
    /// Repetition penalty (1 = off).
    pub repetition_penalty: f64,
    /// End-of-sequence is suppressed until this many tokens were generated.
    pub min_new_tokens: Option<u32>,
    /// Base seed; request `i` samples with `seed + i`, so a request's tokens do not depend on
    /// which batch it lands in.
    pub seed: u64,
}

impl SamplingParams {
    /// From the experiment's `decoder:` and `random_seed`.
    pub fn from_config(cfg: &ExperimentConfig) -> SamplingParams {
        let d = &cfg.decoder;
        SamplingParams {
            greedy: d.is_greedy(),
            temperature: d.temperature,
            top_k: d.top_k,
            top_p: d.top_p,
            min_p: d.min_p,
            repetition_penalty: d.repetition_penalty,
            min_new_tokens: d.min_new_tokens,
            seed: cfg.random_seed as u64,
        }
    }

    /// Greedy decoding.
    pub fn greedy() -> SamplingParams {
        SamplingParams {
            greedy: true,
            temperature: 0.0,
            top_k: 0,
            top_p: 1.0,
            min_p: None,
            repetition_penalty: 1.0,
            min_new_tokens: None,
            seed: 0,
        }
    }
}
