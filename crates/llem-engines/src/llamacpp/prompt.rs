//! Prompts to tokens: the model's chat template, `max_input_tokens` truncation, and
//! synthetic prompts drawn from the vocabulary.

use llama_cpp_2::model::LlamaChatMessage;
use llama_cpp_2::token::LlamaToken;
use llem_config::rng::SplitMix64;

use super::LlamaCppEngine;
use crate::workload::{Prompt, PromptInput};

/// A prompt ready to decode.
pub(super) struct Tokenized {
    pub tokens: Vec<LlamaToken>,
    pub truncated: bool,
}

impl LlamaCppEngine {
    fn templated(&self, text: &str) -> Option<String> {
        let t = self.template.as_ref()?;
        let msg = LlamaChatMessage::new("user".into(), text.to_string()).ok()?;
        self.model.apply_chat_template(t, &[msg], true).ok()
    }

    fn with_special(&self, text: &str) -> Vec<LlamaToken> {
        self.model.vocab().tokenize(text.as_bytes(), true, true)
    }

    /// The tokens of `prompt`, cut to `max_input` tokens. A chat prompt is cut inside the
    /// user turn so the template (and the assistant header the model answers after) stays
    /// whole.
    pub(super) fn tokenize_prompt(&self, prompt: &Prompt, max_input: Option<u32>) -> Tokenized {
        let max = max_input.map_or(usize::MAX, |m| m.max(1) as usize);
        match &prompt.input {
            PromptInput::Tokens { n_tokens, seed } => {
                let n = (*n_tokens as usize).min(max).max(1);
                let vocab = self.model.vocab();
                let mut tokens = Vec::with_capacity(n);
                if vocab.should_add_bos() {
                    tokens.push(vocab.bos());
                }
                let mut r = SplitMix64::new(*seed);
                while tokens.len() < n {
                    let i = r.below(self.text_tokens.len() as u64) as usize;
                    match self.text_tokens.get(i) {
                        Some(&t) => tokens.push(t),
                        None => break,
                    }
                }
                Tokenized {
                    tokens,
                    truncated: (*n_tokens as usize) > n,
                }
            }
            PromptInput::TokenIds(ids) => {
                let tokens: Vec<LlamaToken> = ids
                    .iter()
                    .take(max)
                    .map(|&t| LlamaToken::new(i32::try_from(t).unwrap_or(i32::MAX)))
                    .collect();
                Tokenized {
                    truncated: ids.len() > tokens.len(),
                    tokens,
                }
            }
            PromptInput::Text { text, chat } => {
                let templated = if *chat { self.templated(text) } else { None };
                let Some(full) = templated else {
                    let mut tokens = self.model.vocab().tokenize(text.as_bytes(), true, false);
                    let truncated = tokens.len() > max;
                    tokens.truncate(max);
                    return Tokenized { tokens, truncated };
                };
                let tokens = self.with_special(&full);
                if tokens.len() <= max {
                    return Tokenized {
                        tokens,
                        truncated: false,
                    };
                }
                let overhead = self
                    .templated("")
                    .map_or(0, |e| self.with_special(&e).len());
                let keep = max.saturating_sub(overhead).max(1);
                let body = self.tokenize(text);
                let cut = self.detokenize(body.get(..keep.min(body.len())).unwrap_or_default());
                let mut tokens = self
                    .templated(&cut)
                    .map_or_else(|| self.with_special(&cut), |t| self.with_special(&t));
                // Re-tokenising the cut text can merge differently; never exceed the limit.
                tokens.truncate(max);
                Tokenized {
                    tokens,
                    truncated: true,
                }
            }
        }
    }
}
