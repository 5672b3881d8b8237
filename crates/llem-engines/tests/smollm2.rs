//! The embedded engine on the real SmolLM2-135M-Instruct (Q4_1 GGUF) from
//! scripts/fetch-assets.sh (`make test` fetches it first).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::support::prompts;

use llem_testkit::lora;

use std::path::PathBuf;

use llem_config::model::engines::LlamaCppConfig;
use llem_engines::ContextPlan;
use llem_engines::llamacpp::LlamaCppEngine;
use llem_engines::sampling::SamplingParams;
use llem_engines::{RequestSink, assets};
use llem_results::{FinishReason, RequestRecord};
use prompts::{chat, plain, synthetic, workload};

fn model_path() -> PathBuf {
    let dir = assets::assets_dir(std::env::var("LLEM_ASSETS").ok().as_deref());
    assets::resolve_model("SmolLM2-135M-Instruct.Q4_1.gguf", &dir).unwrap_or_else(|| {
        panic!(
            "SmolLM2 is not in the asset cache {}: run scripts/fetch-assets.sh",
            dir.display()
        )
    })
}

fn engine() -> LlamaCppEngine {
    let p = model_path();
    LlamaCppEngine::load(&p, &LlamaCppConfig::default()).unwrap()
}

fn plan(slots: u32) -> ContextPlan {
    prompts::plan(slots, 256)
}

#[derive(Default)]
struct Records {
    epoch: Option<std::time::Instant>,
    done: Vec<RequestRecord>,
    token_calls: usize,
}

impl RequestSink for Records {
    fn now_s(&self) -> f64 {
        self.epoch.map_or(0.0, |e| e.elapsed().as_secs_f64())
    }
    fn on_tokens(&mut self, _: u32, _: f64, n: u32) {
        self.token_calls += n as usize;
    }
    fn on_done(&mut self, r: RequestRecord) {
        self.done.push(r);
    }
}

#[test]
fn model_facts_come_from_the_gguf_metadata() {
    let _machine = crate::support::shared();
    let e = engine();
    let m = e.model_info();
    assert_eq!(m.architecture.as_deref(), Some("llama"));
    assert_eq!(m.layers, Some(30));
    assert_eq!(m.hidden_size, Some(576));
    assert_eq!(m.attention_heads, Some(9));
    assert_eq!(m.kv_heads, Some(3));
    assert_eq!(m.ffn_size, Some(1536));
    assert_eq!(m.vocab_size, Some(49152));
    assert_eq!(m.dtype.as_deref(), Some("Q4_1"));
    assert_eq!(m.tied_embeddings, Some(true));
    let p = m.parameters.unwrap();
    assert!((130_000_000..140_000_000).contains(&p), "{p}");
    assert!(e.has_chat_template());
}

#[test]
fn tokenizer_round_trips() {
    let _machine = crate::support::shared();
    let e = engine();
    for text in [
        "The capital of France is Paris.",
        "  leading spaces, émojis 🙂 and numbers 12345\nnew line",
        "def f(x):\n    return x ** 2",
    ] {
        let t = e.tokenize(text);
        assert!(!t.is_empty());
        assert_eq!(e.detokenize(&t), text);
    }
}

#[test]
fn greedy_answer_is_coherent_english() {
    let _machine = crate::support::shared();
    let e = engine();
    let mut s = e.session(plan(1)).unwrap();
    let out = s
        .complete("What is the capital of France?", true, 24)
        .unwrap();
    assert!(out.contains("Paris"), "{out:?}");
}

#[test]
fn batch_of_four_decodes_exactly_the_tokens_of_batch_one() {
    let _machine = crate::support::shared();
    let prompts = chat(&[
        "What is the capital of France?",
        "Write one sentence about the sea.",
        "List three colours.",
        "Say hello.",
        "What is 2 + 2?",
        "Name a famous scientist.",
    ]);
    let e = engine();
    let one = {
        let mut s = e.session(plan(1)).unwrap();
        s.generate_ids(&workload(prompts.clone(), 48)).unwrap()
    };
    let four = {
        let mut s = e.session(plan(4)).unwrap();
        s.generate_ids(&workload(prompts.clone(), 48)).unwrap()
    };
    assert_eq!(one.len(), 6);
    assert!(one.iter().all(|t| !t.is_empty()));
    for (i, (a, b)) in one.iter().zip(&four).enumerate() {
        assert_eq!(a, b, "request {i}: batch 4 diverged from batch 1");
    }
}

#[test]
fn each_sequence_stops_on_its_own_eos_and_frees_its_slot() {
    let _machine = crate::support::shared();
    // Short answers end on EOS at different steps; the long request runs to its limit.
    let prompts = chat(&[
        "Say hello.",
        "Write a long story about a dragon.",
        "What is 2 + 2?",
        "Reply with one word: yes or no?",
    ]);
    let e = engine();
    let mut s = e.session(plan(4)).unwrap();
    let mut sink = Records {
        epoch: Some(std::time::Instant::now()),
        ..Records::default()
    };
    let summary = s.run(&workload(prompts, 80), &mut sink).unwrap();
    assert_eq!(sink.done.len(), 4);
    let by_id = |id: u32| sink.done.iter().find(|r| r.request_id == id).unwrap();
    let story = by_id(1);
    assert_eq!(story.finish_reason, FinishReason::Length);
    assert_eq!(story.output_tokens, 80);
    let stopped: Vec<&RequestRecord> = sink
        .done
        .iter()
        .filter(|r| r.finish_reason == FinishReason::Stop)
        .collect();
    assert!(stopped.len() >= 2, "{:?}", sink.done);
    for r in &sink.done {
        assert_eq!(r.token_times_s.len(), r.output_tokens as usize);
        assert!(r.token_times_s.windows(2).all(|w| w[0] <= w[1]));
        assert!(r.first_token_s.unwrap() >= r.submit_s);
        assert!(r.end_s >= *r.token_times_s.last().unwrap());
    }
    // Stopped sequences ended before the long one and left idle slots behind.
    assert!(stopped.iter().all(|r| r.end_s < story.end_s));
    assert!(summary.padding_overhead > 0.0);
    assert_eq!(summary.num_batches, 1);
    assert_eq!(
        sink.token_calls,
        sink.done
            .iter()
            .map(|r| r.output_tokens as usize)
            .sum::<usize>()
    );
    // The slot of a finished sequence is reusable: a second run on the same session works.
    let again = s
        .run(&workload(chat(&["Say hello."]), 8), &mut sink)
        .unwrap();
    assert_eq!(again.num_batches, 1);
}

#[test]
fn sampling_is_seeded_per_request() {
    let _machine = crate::support::shared();
    let e = engine();
    let mut wl = workload(chat(&["Tell me a joke.", "Tell me a joke."]), 24);
    wl.sampling = SamplingParams {
        greedy: false,
        temperature: 1.0,
        top_k: 50,
        top_p: 0.95,
        min_p: Some(0.05),
        repetition_penalty: 1.1,
        min_new_tokens: Some(10),
        seed: 7,
    };
    let mut s = e.session(plan(2)).unwrap();
    let a = s.generate_ids(&wl).unwrap();
    let b = s.generate_ids(&wl).unwrap();
    assert_eq!(a, b, "same seed, same tokens");
    assert!(
        a.iter().all(|t| t.len() >= 10),
        "min_new_tokens holds EOS back"
    );
    // Requests 0 and 1 have the same prompt but their own seeds.
    assert_ne!(a[0], a[1]);
}

#[test]
fn synthetic_prompts_are_token_exact_and_ignore_eos() {
    let _machine = crate::support::shared();
    let e = engine();
    let prompts = vec![synthetic(0, 40, 3, 30)];
    let mut s = e.session(plan(1)).unwrap();
    let mut sink = Records {
        epoch: Some(std::time::Instant::now()),
        ..Records::default()
    };
    s.run(&workload(prompts, 256), &mut sink).unwrap();
    assert_eq!(sink.done[0].input_tokens, 40);
    assert_eq!(sink.done[0].output_tokens, 30);
}

#[test]
fn long_prompts_are_cut_inside_the_user_turn() {
    let _machine = crate::support::shared();
    let e = engine();
    let long = "word ".repeat(500);
    let mut sink = Records {
        epoch: Some(std::time::Instant::now()),
        ..Records::default()
    };
    let mut wl = workload(chat(&[&long]), 4);
    wl.max_input_tokens = Some(64);
    let mut s = e.session(plan(1)).unwrap();
    let summary = s.run(&wl, &mut sink).unwrap();
    assert_eq!(summary.truncated_prompts, 1);
    assert!(sink.done[0].input_tokens <= 64);
    assert!(sink.done[0].input_tokens >= 56);
}

#[test]
fn bad_model_files_are_clear_errors() {
    let _machine = crate::support::shared();
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("x.gguf");
    std::fs::write(&p, b"not a model").unwrap();
    let e = LlamaCppEngine::load(&p, &LlamaCppConfig::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("not a GGUF file"), "{e}");
    let e = LlamaCppEngine::load(&d.path().join("none.gguf"), &LlamaCppConfig::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("none.gguf"), "{e}");
}

#[test]
fn an_empty_or_oversized_prompt_fails_alone() {
    let _machine = crate::support::shared();
    let e = engine();
    let mut prompts = chat(&["Say hello."]);
    prompts.push(plain(1, ""));
    prompts.extend(chat(&[&"many words ".repeat(200)]));
    let mut wl = workload(prompts, 8);
    wl.max_input_tokens = None;
    let mut s = e.session(plan(4)).unwrap();
    let mut sink = Records {
        epoch: Some(std::time::Instant::now()),
        ..Records::default()
    };
    s.run(&wl, &mut sink).unwrap();
    let by_id = |id: u32| sink.done.iter().find(|r| r.request_id == id).unwrap();
    assert!(by_id(0).success && by_id(0).output_tokens > 0);
    assert!(!by_id(1).success);
    assert!(by_id(1).error.as_deref().unwrap().contains("empty prompt"));
    assert!(!by_id(2).success);
    assert!(by_id(2).error.as_deref().unwrap().contains("does not fit"));
}

/// A LoRA adapter made here (PEFT with random weights, converted by llama.cpp's own script)
/// changes what the model says; at scale 0 the output is the base model's, token for token.
#[test]
fn a_lora_adapter_changes_the_output_and_at_scale_zero_is_the_base_model() {
    let _machine = crate::support::shared();
    let dir = tempfile::tempdir().unwrap();
    let (_, adapter) = lora::make(&model_path(), dir.path());
    let prompts = chat(&["What is the capital of France?", "List three colours."]);
    let ids = |e: &LlamaCppEngine| {
        let mut s = e.session(plan(2)).unwrap();
        s.generate_ids(&workload(prompts.clone(), 24)).unwrap()
    };
    let base = ids(&engine());
    let mut on = engine();
    on.apply_lora(&adapter, 1.0).unwrap();
    assert_eq!(on.lora().map(|(_, s)| s), Some(1.0));
    assert!(
        on.engine_info()
            .system_info
            .unwrap_or_default()
            .contains("LoRA adapter"),
        "the result says which adapter ran"
    );
    let adapted = ids(&on);
    assert_ne!(adapted, base, "the adapter changed nothing");
    let mut zero = engine();
    zero.apply_lora(&adapter, 0.0).unwrap();
    assert_eq!(ids(&zero), base, "scale 0 is the base model");

    // Not an adapter: a clear error, nothing loaded.
    let mut e = engine();
    let err = e
        .apply_lora(&model_path().with_extension("nope"), 1.0)
        .unwrap_err();
    assert!(err.to_string().contains("LoRA adapter"), "{err}");
    let not_gguf = dir.path().join("peft/adapter_config.json");
    let err = e.apply_lora(&not_gguf, 1.0).unwrap_err();
    assert!(err.to_string().contains("not a GGUF file"), "{err}");
}
