//! measurement_config_hash: stable, environment-blind, equal for equivalent configurations.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::{Files, env, plan_text, plan_with};
use llem_config::Overrides;

fn hash(text: &str) -> String {
    plan_text(text).unwrap().configs[0].digest.short()
}

#[test]
fn golden_hash_is_stable_across_machines_and_releases() {
    // If this changes, every stored result's hash changes: only on purpose, with a note.
    assert_eq!(
        hash("model: gpt2\nengine: transformers\n"),
        "adda6711d4ca5528"
    );
}

#[test]
fn environment_fields_and_labels_do_not_change_the_hash() {
    let base = hash("model: m.gguf\nengine: vllm\n");
    assert_eq!(
        base,
        hash(
            "model: m.gguf\nengine: vllm\nname: label\noutput_dir: /x\nrunners: {vllm: local, sglang: docker}\nimages: {vllm: img:1}\ngpu_telemetry: false\n"
        )
    );
    // What runs is part of what is measured: another runner (a container, an endpoint) is
    // another configuration, and its image is part of it (docs/configuration.md, Hashes).
    let docker = hash("model: m.gguf\nengine: vllm\nrunners: {vllm: docker}\n");
    assert_ne!(base, docker);
    assert_ne!(
        docker,
        hash("model: m.gguf\nengine: vllm\nrunners: {vllm: docker}\nimages: {vllm: img:1}\n")
    );
    assert_eq!(
        hash("model: m.gguf\nengine: vllm\nrunners: {vllm: docker}\nimages: {vllm: img:1}\n"),
        hash("model: m.gguf\nengine: vllm\nrunners: {vllm: \"docker:img:1\"}\n")
    );
    assert_ne!(base, hash("model: m.gguf\nengine: vllm\ndtype: float16\n"));
    assert_ne!(
        base,
        hash("model: m.gguf\nengine: vllm\nmeasurement: {latency_profiling: true}\n")
    );
}

#[test]
fn explicit_defaults_and_presets_hash_like_their_values() {
    assert_eq!(
        hash("model: m.gguf\n"),
        hash(
            "model: m.gguf\nengine: llamacpp\nrandom_seed: 42\nmax_output_tokens: 256\nllamacpp: {batch_size: 1}\n"
        )
    );
    assert_eq!(
        hash("model: m.gguf\ndecoder: {preset: deterministic}\n"),
        hash("model: m.gguf\ndecoder: {temperature: 0, do_sample: false}\n")
    );
    assert_eq!(
        hash("model: m.gguf\nengine: vllm\nvllm: {engine: {}}\n"),
        hash("model: m.gguf\nengine: vllm\n")
    );
    assert_eq!(
        hash("model: m.gguf\npassthrough_kwargs: {a: 1.0}\n"),
        hash("model: m.gguf\npassthrough_kwargs: {a: 1}\n")
    );
    assert_ne!(
        hash("model: m.gguf\nmax_output_tokens: null\n"),
        hash("model: m.gguf\n")
    );
}

#[test]
fn equivalent_configurations_run_once_unless_no_dedup() {
    let text = "model: m.gguf\nsweep:\n  decoding:\n    - decoder.preset: deterministic\n    - {decoder.temperature: 0.0, decoder.do_sample: false}\n    - decoder.preset: creative\n";
    let p = plan_text(text).unwrap();
    assert_eq!(p.configs.len(), 2);
    assert_eq!(p.duplicates.len(), 1);
    assert_eq!(p.duplicates[0].duplicate_of, 0);
    assert_eq!(p.runs.len(), 6);

    let f = Files::new();
    let path = f.write("s.yaml", text);
    let p = plan_with(&path, Overrides::default(), false, &env()).unwrap();
    assert_eq!(p.configs.len(), 3);
    assert!(p.duplicates.is_empty());
    assert!(!p.execution.deduplicate_equivalent);
}

#[test]
fn anchors_do_not_change_the_hash() {
    assert_eq!(
        hash("model: m.gguf\ndataset: &d {n_prompts: 7, source: sharegpt}\n"),
        hash("model: m.gguf\ndataset: {source: sharegpt, n_prompts: 7}\n")
    );
    assert_eq!(
        hash("model: m.gguf\ndecoder: &dec {top_k: 5}\nmeasurement: {latency_profiling: false}\n"),
        hash("model: m.gguf\ndecoder: {top_k: 5}\n")
    );
}

/// Two endpoints that differ only in `runners:` are two configurations: the plan keeps
/// both (no "equivalent" collapse), and each cell is keyed by what actually runs.
#[test]
fn configurations_that_differ_only_in_their_runner_are_not_merged() {
    let text = "model: m\nengine: openai\nsweep:\n  runners.openai: [\"external:http://10.0.0.1:8000\", \"external:http://10.0.0.2:8000\"]\n";
    let p = plan_text(text).unwrap();
    assert_eq!(p.configs.len(), 2, "{:?}", p.duplicates);
    assert!(p.duplicates.is_empty());
    assert_ne!(p.configs[0].digest, p.configs[1].digest);
    let runner = |i: usize| p.configs[i].config.runner().unwrap().to_string();
    assert_eq!(runner(0), "external:http://10.0.0.1:8000");
    assert_eq!(runner(1), "external:http://10.0.0.2:8000");
}
