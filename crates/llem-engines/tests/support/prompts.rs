//! Prompts and workloads the model tests of both engines share.

use std::num::NonZeroU32;

use llem_config::BatchingStrategy;
use llem_engines::ContextPlan;
use llem_engines::sampling::SamplingParams;
use llem_engines::workload::{BatchingSpec, Prompt, PromptInput, Workload};

/// Chat prompts, one per text, in order.
pub fn chat(texts: &[&str]) -> Vec<Prompt> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| Prompt {
            dataset_index: i as u32,
            input: PromptInput::Text {
                text: (*t).to_string(),
                chat: true,
            },
            group: None,
            reference_output: None,
            output_tokens: None,
            ignore_eos: false,
            follow_ups: Vec::new(),
        })
        .collect()
}

/// Static batches of `batch` prompts.
#[allow(clippy::expect_used)]
pub fn batching(batch: u32) -> BatchingSpec {
    BatchingSpec {
        strategy: BatchingStrategy::Static,
        batch_size: NonZeroU32::new(batch).expect("a batch of at least one prompt"),
        max_tokens_per_batch: None,
    }
}

/// A session of static batches of `batch`, `tokens_per_slot` tokens each, two threads.
pub fn plan(batch: u32, tokens_per_slot: u32) -> ContextPlan {
    ContextPlan {
        batching: batching(batch),
        tokens_per_slot,
        n_threads: 2,
    }
}

/// Greedy, prompts cut to 128 tokens, `max_out` new tokens.
pub fn workload(prompts: Vec<Prompt>, max_out: u32) -> Workload {
    Workload {
        prompts,
        sampling: SamplingParams::greedy(),
        max_input_tokens: Some(128),
        max_output_tokens: Some(max_out),
        traffic: None,
    }
}

/// Plain text (no chat template) at position `index`.
pub fn plain(index: u32, text: &str) -> Prompt {
    Prompt {
        dataset_index: index,
        input: PromptInput::Text {
            text: text.to_string(),
            chat: false,
        },
        group: None,
        reference_output: None,
        output_tokens: None,
        ignore_eos: false,
        follow_ups: Vec::new(),
    }
}

/// A synthetic prompt of `n_tokens` drawn with `seed`, generating exactly `output_tokens`.
pub fn synthetic(index: u32, n_tokens: u32, seed: u64, output_tokens: u32) -> Prompt {
    Prompt {
        dataset_index: index,
        input: PromptInput::Tokens { n_tokens, seed },
        group: None,
        reference_output: None,
        output_tokens: Some(output_tokens),
        ignore_eos: true,
        follow_ups: Vec::new(),
    }
}
