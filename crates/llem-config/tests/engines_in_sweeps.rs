//! Engine axes, engine-scoped axes and groups, and shared engine sections across engines.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::{configs_json, plan_text};
use llem_config::Engine;
use serde_json::Value;

fn engines(c: &[Value]) -> Vec<&str> {
    c.iter().map(|c| c["engine"].as_str().unwrap()).collect()
}

#[test]
fn engine_axis_with_scoped_and_universal_axes() {
    let p = plan_text(
        "model: m\nsweep:\n  engine: [transformers, vllm]\n  dtype: [float16, bfloat16]\n  \
         transformers.batch_size: [1, 2]\n  vllm.engine.max_num_seqs: [8, 16, 32]\n",
    )
    .unwrap();
    let c = configs_json(&p);
    // transformers: 2 dtype x 2 batch; vllm: 2 dtype x 3 max_num_seqs; engines in axis order.
    assert_eq!(c.len(), 4 + 6);
    assert_eq!(
        engines(&c),
        [vec!["transformers"; 4], vec!["vllm"; 6]].concat()
    );
    assert!(
        c[..4]
            .iter()
            .all(|c| c["vllm"].is_null() && c["transformers"]["batch_size"].is_u64())
    );
    assert!(
        c[4..]
            .iter()
            .all(|c| c["transformers"].is_null() && c["vllm"]["engine"]["max_num_seqs"].is_u64())
    );
    assert!(p.configs[0].label.starts_with("engine=transformers"));
}

#[test]
fn scoped_groups_apply_to_their_engine_only() {
    let p = plan_text(
        "model: m\nengine: [transformers, vllm]\nsweep:\n  vllm.decoding:\n    - {}\n    - vllm.beam_search.beam_width: 4\n  \
         seeds:\n    - random_seed: 1\n    - random_seed: 2\n",
    )
    .unwrap();
    let c = configs_json(&p);
    // transformers: universal group only (2); vllm: 2 x 2.
    assert_eq!(
        engines(&c),
        [
            "transformers",
            "transformers",
            "vllm",
            "vllm",
            "vllm",
            "vllm"
        ]
    );
    assert!(c[..2].iter().all(|c| c["vllm"].is_null()));
    let beams: Vec<&Value> = c[2..]
        .iter()
        .map(|c| &c["vllm"]["beam_search"]["beam_width"])
        .collect();
    assert_eq!(beams.iter().filter(|b| **b == 4).count(), 2);
}

#[test]
fn a_fixed_engine_plus_another_engines_axis_runs_both() {
    let p =
        plan_text("model: m\nengine: transformers\nsweep:\n  vllm.engine.block_size: [8, 16]\n")
            .unwrap();
    let c = configs_json(&p);
    assert_eq!(engines(&c), ["transformers", "vllm", "vllm"]);
}

#[test]
fn shared_sections_follow_their_engine() {
    let p = plan_text(
        "model: m\nengine: [transformers, vllm]\ntransformers: {batch_size: 4}\nvllm: {engine: {max_num_seqs: 64}}\n\
         sweep:\n  dtype: [float16]\n",
    )
    .unwrap();
    let c = configs_json(&p);
    assert_eq!(c[0]["transformers"]["batch_size"], 4);
    assert!(c[0]["vllm"].is_null());
    assert_eq!(c[1]["vllm"]["engine"]["max_num_seqs"], 64);
    assert!(c[1]["transformers"].is_null());
}

#[test]
fn explicit_entries_drop_inherited_foreign_sections_but_not_their_own() {
    let p = plan_text(
        "model: m\nengine: transformers\ntransformers: {batch_size: 4}\nexperiments:\n  - {}\n  - engine: vllm\n",
    )
    .unwrap();
    let c = configs_json(&p);
    assert_eq!(c[0]["transformers"]["batch_size"], 4);
    assert_eq!(c[1]["engine"], "vllm");
    assert!(c[1]["transformers"].is_null());

    let e =
        plan_text("model: m\nexperiments:\n  - engine: vllm\n    transformers: {batch_size: 2}\n")
            .unwrap_err();
    assert!(
        e.diagnostics[0]
            .message
            .contains("`transformers:` section given but `engine` is `vllm`")
    );
}

#[test]
fn unknown_engine_in_an_engine_axis() {
    let e = plan_text("model: m\nsweep:\n  engine: [vllm, tgl]\n").unwrap_err();
    assert_eq!(
        e.diagnostics[0].help.as_deref(),
        Some("did you mean `tgi`?")
    );
    assert_eq!(e.diagnostics[0].location.as_ref().unwrap().column, 18);
}

#[test]
fn an_entry_inheriting_no_engine_takes_the_one_shared_section() {
    // No engine anywhere: the one engine section says which engine is meant, and the plan
    // says so; with an explicit engine a foreign section stays a mistake to report.
    let p =
        plan_text("model: m\ntransformers: {batch_size: 2}\nexperiments:\n  - dtype: float16\n")
            .unwrap();
    assert_eq!(p.configs[0].config.engine, Engine::Transformers);
    assert_eq!(
        p.configs[0].engine_inferred.as_deref(),
        Some("the configuration has a `transformers:` section")
    );
    let e = plan_text(
        "model: m.gguf\nengine: llamacpp\ntransformers: {batch_size: 2}\nexperiments:\n  - dtype: float16\n",
    )
    .unwrap_err();
    assert!(
        e.diagnostics[0]
            .message
            .contains("`transformers:` section given but `engine` is `llamacpp`"),
        "{e}"
    );
}
