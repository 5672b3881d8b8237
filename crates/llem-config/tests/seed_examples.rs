//! Every YAML example of seed 003 expands to exactly the counts the seed states.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::{configs_json, examples, plan_path};
use llem_config::ExperimentOrder;
use serde_json::{Value, json};

fn plan(name: &str) -> llem_config::StudyPlan {
    let path = examples().join("seed").join(name);
    match plan_path(&path) {
        Ok(p) => p,
        Err(e) => panic!("{name}: {e}"),
    }
}

#[test]
fn counts_match_the_seed() {
    // (file, configurations, cycles): seed 003's "N configs x C cycles = M runs".
    let cases = [
        ("minimal.yaml", 1, 1),
        ("fuller.yaml", 1, 1),
        ("vllm-experiment.yaml", 1, 1),
        ("dtype-sweep.yaml", 2, 3),
        ("dtype-n-sweep.yaml", 4, 3),
        ("batch-size-sweep.yaml", 4, 3),
        ("kv-cache-sweep.yaml", 6, 3),
        ("dataset-size-sweep.yaml", 3, 3),
        ("compare-engines.yaml", 2, 3),
        ("base-inheritance.yaml", 3, 3),
        ("mixed-study.yaml", 3, 3),
        ("compile-sweep.yaml", 6, 3),
        ("quantization-group.yaml", 3, 3),
        ("caching-group.yaml", 4, 3),
        ("cross-section-group.yaml", 2, 3),
        ("anchors-group.yaml", 4, 3),
        ("crossed-groups.yaml", 12, 3),
    ];
    for (file, configs, cycles) in cases {
        let p = plan(file);
        assert_eq!(p.configs.len(), configs, "{file}: configurations");
        assert_eq!(p.execution.n_cycles, cycles, "{file}: cycles");
        assert_eq!(p.runs.len(), configs * cycles as usize, "{file}: runs");
        assert!(p.skipped.is_empty(), "{file}: skipped {:?}", p.skipped);
        assert!(
            p.duplicates.is_empty(),
            "{file}: duplicates {:?}",
            p.duplicates
        );
    }
}

/// The seed has no llama.cpp engine: its files that omit `engine:` mean transformers, and
/// every one of them (all 18) plans onto the engines it names or implies.
#[test]
fn every_seed_example_plans_onto_the_seed_engines() {
    let mut files: Vec<_> = std::fs::read_dir(examples().join("seed"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 18);
    for f in &files {
        let p = plan_path(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        for c in &p.configs {
            let engine = c.config.engine.as_str();
            assert!(
                ["transformers", "vllm", "tensorrt"].contains(&engine),
                "{}: {} runs on {engine}",
                f.display(),
                c.label
            );
        }
    }
}

#[test]
fn cartesian_product_varies_the_last_axis_fastest() {
    let c = configs_json(&plan("dtype-n-sweep.yaml"));
    let got: Vec<(String, u64)> = c
        .iter()
        .map(|c| {
            (
                c["dtype"].as_str().unwrap().to_string(),
                c["dataset"]["n_prompts"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [
        ("float16", 50),
        ("float16", 100),
        ("bfloat16", 50),
        ("bfloat16", 100),
    ];
    assert_eq!(got, want.map(|(d, n)| (d.to_string(), n)));
}

#[test]
fn engine_scoped_paths_expand_into_the_engine_section() {
    let c = configs_json(&plan("batch-size-sweep.yaml"));
    let sizes: Vec<u64> = c
        .iter()
        .map(|c| c["transformers"]["batch_size"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [1, 2, 4, 8]);
    assert!(c.iter().all(|c| c["engine"] == "transformers"));

    let c = configs_json(&plan("kv-cache-sweep.yaml"));
    let got: Vec<(u64, &str)> = c
        .iter()
        .map(|c| {
            (
                c["vllm"]["engine"]["block_size"].as_u64().unwrap(),
                c["vllm"]["engine"]["kv_cache_dtype"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (8, "auto"),
            (8, "fp8"),
            (16, "auto"),
            (16, "fp8"),
            (32, "auto"),
            (32, "fp8")
        ]
    );
    assert!(c.iter().all(|c| c["runners"]["vllm"] == "docker"));
}

#[test]
fn explicit_experiments_merge_onto_shared_fields_in_order() {
    let p = plan("compare-engines.yaml");
    let c = configs_json(&p);
    assert_eq!(c[0]["engine"], "transformers");
    assert_eq!(c[1]["engine"], "vllm");
    assert!(c.iter().all(|c| c["dataset"]["n_prompts"] == 50));
    assert!(
        c[0]["vllm"].is_null(),
        "transformers entry carries no vllm section"
    );
    assert_eq!(c[1]["runners"]["vllm"], "docker");
    assert_eq!(p.execution.experiment_order, ExperimentOrder::Interleave);
    let order: Vec<usize> = p.runs.iter().map(|r| r.config).collect();
    assert_eq!(order, [0, 1, 0, 1, 0, 1]);
}

#[test]
fn base_file_is_the_starting_point_and_inline_fields_override() {
    let c = configs_json(&plan("base-inheritance.yaml"));
    let dtypes: Vec<&str> = c.iter().map(|c| c["dtype"].as_str().unwrap()).collect();
    assert_eq!(dtypes, ["float32", "float16", "bfloat16"]);
    for c in &c {
        assert_eq!(c["transformers"]["batch_size"], 2, "from the base file");
        assert_eq!(c["dataset"]["n_prompts"], 50, "from the base file");
        assert_eq!(c["engine"], "transformers");
    }
}

#[test]
fn mixed_study_puts_sweep_points_first() {
    let p = plan("mixed-study.yaml");
    let c = configs_json(&p);
    assert_eq!(c[0]["dtype"], "float16");
    assert_eq!(c[1]["dtype"], "bfloat16");
    // Without `engine:` the sweep points take the engine from the model, as the seed means:
    // `gpt2` is a Hugging Face id, so transformers, and the plan says why.
    assert_eq!(c[0]["engine"], "transformers");
    assert_eq!(
        p.configs[0].engine_inferred.as_deref(),
        Some("`gpt2` is a Hugging Face model id, not a GGUF file")
    );
    assert_eq!(p.configs[2].engine_inferred, None);
    assert_eq!(c[2]["engine"], "transformers");
    assert_eq!(c[2]["dtype"], "float32");
    assert_eq!(c[2]["transformers"]["load_in_4bit"], true);
    assert_eq!(p.configs[2].label, "experiments[0]");
}

#[test]
fn dependent_groups_are_unions_crossed_with_axes() {
    let c = configs_json(&plan("compile-sweep.yaml"));
    let got: Vec<(&str, bool, Value)> = c
        .iter()
        .map(|c| {
            (
                c["dtype"].as_str().unwrap(),
                c["transformers"]["torch_compile"].as_bool().unwrap(),
                c["transformers"]["torch_compile_mode"].clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("float16", false, Value::Null),
            ("bfloat16", false, Value::Null),
            ("float16", true, json!("default")),
            ("bfloat16", true, json!("default")),
            ("float16", true, json!("max-autotune")),
            ("bfloat16", true, json!("max-autotune")),
        ]
    );
}

#[test]
fn baseline_variant_overrides_nothing() {
    let c = configs_json(&plan("quantization-group.yaml"));
    let t: Vec<&Value> = c.iter().map(|c| &c["transformers"]).collect();
    assert!(t[0]["load_in_8bit"].is_null() && t[0]["load_in_4bit"].is_null());
    assert_eq!(t[1]["load_in_8bit"], true);
    assert_eq!(t[2]["load_in_4bit"], true);
    assert_eq!(t[2]["bnb_4bit_quant_type"], "nf4");
}

#[test]
fn mini_grid_inside_a_group_entry() {
    let c = configs_json(&plan("caching-group.yaml"));
    let got: Vec<Value> = c
        .iter()
        .map(|c| c["transformers"]["cache_implementation"].clone())
        .collect();
    assert_eq!(
        got,
        [
            Value::Null,
            json!("static"),
            json!("offloaded_static"),
            json!("sliding_window")
        ]
    );
    assert!(
        c[1..]
            .iter()
            .all(|c| c["transformers"]["use_cache"] == true)
    );
}

#[test]
fn group_entries_can_override_other_sections() {
    let c = configs_json(&plan("cross-section-group.yaml"));
    assert_eq!(c[0]["decoder"]["do_sample"], true);
    assert_eq!(c[1]["decoder"]["do_sample"], false);
    assert_eq!(c[1]["decoder"]["temperature"], 0.0);
    assert_eq!(c[1]["transformers"]["num_beams"], 4);
    assert_eq!(c[1]["transformers"]["early_stopping"], true);
}

#[test]
fn anchors_and_merge_keys_in_group_entries() {
    let c = configs_json(&plan("anchors-group.yaml"));
    let q: Vec<(Value, Value)> = c
        .iter()
        .map(|c| {
            (
                c["tensorrt"]["quant"]["quant_algo"].clone(),
                c["tensorrt"]["quant"]["kv_cache_quant_algo"].clone(),
            )
        })
        .collect();
    assert_eq!(
        q,
        [
            (Value::Null, Value::Null),
            (json!("INT8"), Value::Null),
            (json!("INT8"), json!("INT8")),
            (json!("W4A16_AWQ"), Value::Null),
        ]
    );
}

#[test]
fn multiple_groups_are_crossed() {
    let p = plan("crossed-groups.yaml");
    let labels: std::collections::BTreeSet<&str> =
        p.configs.iter().map(|c| c.label.as_str()).collect();
    assert_eq!(labels.len(), 12);
}

#[test]
fn presets_expand_into_concrete_values() {
    let c = configs_json(&plan("fuller.yaml"));
    assert_eq!(c[0]["decoder"]["preset"], "deterministic");
    assert_eq!(c[0]["decoder"]["temperature"], 0.0);
    assert_eq!(c[0]["decoder"]["do_sample"], false);
    assert_eq!(c[0]["transformers"]["attn_implementation"], "sdpa");
}

#[test]
fn repository_examples_plan_cleanly() {
    for name in [
        "quickstart.yaml",
        "sweep.yaml",
        "search.yaml",
        "trace-azure.yaml",
        "trace-burstgpt.yaml",
        "trace-mooncake.yaml",
        "trace-columns.yaml",
        "conversations.yaml",
        "device-sweep.yaml",
    ] {
        let p = plan_path(&examples().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(p.skipped.is_empty(), "{name}");
    }
    let search = plan_path(&examples().join("search.yaml")).unwrap();
    let spec = search.search.as_ref().unwrap();
    assert_eq!(search.configs.len(), 16);
    assert_eq!(spec.budget.runs(search.runs.len()), 15);
    let device = plan_path(&examples().join("device-sweep.yaml")).unwrap();
    assert_eq!((device.configs.len(), device.runs.len()), (4, 12));
}
