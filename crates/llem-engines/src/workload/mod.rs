//! The workload: prompts, how they are batched, how tokens are chosen.

pub(crate) mod batching;
pub mod conversation;
pub mod dataset;
pub(crate) mod sharegpt;
pub mod trace;
pub(crate) mod traffic;

use std::num::NonZeroU32;

use llem_config::{BatchingStrategy, ExperimentConfig};

use crate::sampling::SamplingParams;
use traffic::TrafficPlan;

/// The text of a prompt.
#[derive(Clone, Debug, PartialEq)]
pub enum PromptInput {
    /// Text, tokenised by the engine (with the chat template when `chat` is set).
    Text {
        /// The prompt.
        text: String,
        /// Wrap it as a user turn in the model's chat template.
        chat: bool,
    },
    /// Exactly `n_tokens` ordinary vocabulary tokens drawn with `seed` (synthetic prompts):
    /// the engine picks them from its own vocabulary so the length is token-exact.
    Tokens {
        /// Prompt length.
        n_tokens: u32,
        /// Seed of the token draw.
        seed: u64,
    },
    /// These token ids of the model's vocabulary, sent as they are (a replayed trace's prompts,
    /// cut to exact lengths from text the server tokenized).
    TokenIds(std::sync::Arc<Vec<u32>>),
}

/// One prompt of the workload.
#[derive(Clone, Debug, PartialEq)]
pub struct Prompt {
    /// Position in the dataset as loaded (before ordering).
    pub dataset_index: u32,
    /// The prompt.
    pub input: PromptInput,
    /// Sub-source (`source` key of a JSONL record), for `grouped` ordering.
    pub group: Option<String>,
    /// The dataset's reference reply (ShareGPT's first answer), for its length.
    pub reference_output: Option<String>,
    /// Output tokens for this request (synthetic), capped by the experiment's limit.
    pub output_tokens: Option<u32>,
    /// Generate exactly `output_tokens`, ignoring end-of-sequence (synthetic).
    pub ignore_eos: bool,
    /// The conversation's later user messages (ShareGPT's later human turns), for
    /// multi-turn traffic.
    pub follow_ups: Vec<String>,
}

/// How prompts are grouped into batches.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BatchingSpec {
    /// Strategy.
    pub strategy: BatchingStrategy,
    /// Sequences per batch (never 0, by type: it divides the context and sizes chunks).
    pub batch_size: NonZeroU32,
    /// Prompt-token budget per batch (dynamic strategies).
    pub max_tokens_per_batch: Option<u32>,
}

/// Everything an engine needs to serve the measurement (or warmup) phase.
#[derive(Clone, Debug, PartialEq)]
pub struct Workload {
    /// Prompts, in submission order (batched as the session's plan says).
    pub prompts: Vec<Prompt>,
    /// Token selection.
    pub sampling: SamplingParams,
    /// Prompts longer than this are cut (keeping their start).
    pub max_input_tokens: Option<u32>,
    /// Output limit per request.
    pub max_output_tokens: Option<u32>,
    /// Arrival schedule (serving engines; null: the engine batches the prompts itself).
    pub traffic: Option<TrafficPlan>,
}

impl Workload {
    /// The workload of `cfg` over `prompts`.
    pub fn new(cfg: &ExperimentConfig, prompts: Vec<Prompt>) -> Workload {
        let traffic = cfg.is_served().then(|| {
            let t = cfg.effective_traffic();
            TrafficPlan {
                conversations: t
                    .conversations
                    .as_ref()
                    .map(|c| std::sync::Arc::new(conversation::plan(c, &prompts))),
                ..TrafficPlan::from_config(Some(&t), cfg.random_seed)
            }
        });
        Workload {
            prompts,
            traffic,
            sampling: SamplingParams::from_config(cfg),
            max_input_tokens: cfg.max_input_tokens,
            max_output_tokens: cfg.max_output_tokens,
        }
    }

    /// The workload of a trace replay: its prompts, sent on its schedule.
    pub fn replaying(&self, prompts: Vec<Prompt>, replay: trace::replay::Replay) -> Workload {
        let base = self
            .traffic
            .clone()
            .unwrap_or_else(|| TrafficPlan::all_at_once(0));
        Workload {
            prompts,
            traffic: Some(TrafficPlan {
                replay: Some(std::sync::Arc::new(replay)),
                ..base
            }),
            ..self.clone()
        }
    }

    /// The same workload over other prompts (warmup): a serving run sends them all at
    /// once, whatever the measured traffic is.
    pub fn with_prompts(&self, prompts: Vec<Prompt>) -> Workload {
        let n = u32::try_from(prompts.len()).unwrap_or(u32::MAX);
        Workload {
            prompts,
            traffic: self.traffic.as_ref().map(|_| TrafficPlan::all_at_once(n)),
            ..self.clone()
        }
    }

    /// The output limit of `prompt`, the one rule every engine applies: the prompt's own
    /// (synthetic lengths) capped by the workload's `max_output_tokens`, a hard cap on every
    /// engine and dataset; `None` means until end of sequence or the end of the context.
    pub fn output_limit(&self, prompt: Option<&Prompt>) -> Option<u32> {
        match (prompt.and_then(|p| p.output_tokens), self.max_output_tokens) {
            (Some(own), Some(cap)) => Some(own.min(cap)),
            (own, cap) => own.or(cap),
        }
    }

    /// [`Workload::output_limit`] for an engine that knows the context left after the prompt
    /// (`room` tokens): never past it.
    pub fn output_limit_within(&self, prompt: Option<&Prompt>, room: u32) -> u32 {
        self.output_limit(prompt).map_or(room, |n| n.min(room))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn max_output_tokens_caps_every_prompts_own_limit() {
        let cfg: ExperimentConfig =
            serde_json::from_value(serde_json::json!({"model": "m", "max_output_tokens": 16}))
                .unwrap();
        let wl = Workload::new(&cfg, Vec::new());
        let prompt = |n: Option<u32>| Prompt {
            dataset_index: 0,
            input: PromptInput::Text {
                text: "x".into(),
                chat: false,
            },
            group: None,
            reference_output: None,
            output_tokens: n,
            ignore_eos: n.is_some(),
            follow_ups: Vec::new(),
        };
        assert_eq!(wl.output_limit(Some(&prompt(Some(128)))), Some(16));
        assert_eq!(wl.output_limit(Some(&prompt(Some(8)))), Some(8));
        assert_eq!(wl.output_limit(Some(&prompt(None))), Some(16));
        assert_eq!(wl.output_limit(None), Some(16));
        assert_eq!(wl.output_limit_within(Some(&prompt(Some(128))), 10), 10);
        let open = Workload {
            max_output_tokens: None,
            ..wl
        };
        assert_eq!(open.output_limit(Some(&prompt(Some(128)))), Some(128));
        assert_eq!(open.output_limit(None), None);
    }
}
