//! Seed 004's configuration dialect read as llem's: recognised as a whole, translated field
//! by field, or refused once with every replacement listed.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::{Files, plan_text};

/// The example configuration of seed 004, as written there.
const SEED_EXAMPLE: &str = "\
# === CORE ===
config_name: llama-3.2-3b-vllm-benchmark
model_name: meta-llama/Llama-3.2-3B
backend: vllm                          # pytorch | vllm | tensorrt

# === PRECISION ===
fp_precision: float16                  # float32 | float16 | bfloat16

# === QUANTIZATION (PyTorch) ===
quantization:
  load_in_4bit: false
  load_in_8bit: false

# === GPU SETUP ===
gpus: [0, 1, 2, 3]
num_processes: 4

# === BATCHING ===
batching:
  strategy: sorted_dynamic             # static | dynamic | sorted_static | sorted_dynamic
  batch_size: 32
  max_tokens_per_batch: 4096           # Token budget for dynamic strategies

# === TRAFFIC SIMULATION ===
traffic_simulation:
  enabled: true
  mode: poisson                        # constant | poisson
  target_qps: 10.0

# === DECODER ===
decoder:
  preset: deterministic                # deterministic | standard | creative | factual
  max_new_tokens: 256

# === SHARDING (Multi-GPU) ===
sharding:
  strategy: tensor_parallel            # none | tensor_parallel | pipeline_parallel
  num_shards: 4

# === BACKEND-SPECIFIC CONFIG ===
vllm:
  gpu_memory_utilization: 0.9
  enable_prefix_caching: true
  max_model_len: 4096
";

/// The seed's own example: what llem cannot honour is refused in one error, each field with
/// its replacement, instead of one key at a time with hints that point elsewhere.
#[test]
fn the_seed_example_is_refused_once_with_every_replacement() {
    let e = plan_text(SEED_EXAMPLE).unwrap_err();
    let d = &e.diagnostics;
    assert_eq!(d.len(), 3, "{e}");
    assert!(
        d[0].message
            .contains("seed 004's configuration dialect; 2 of its fields"),
        "{}",
        d[0].message
    );
    let gpus = &d[1];
    assert!(gpus.message.contains("`gpus`"), "{}", gpus.message);
    assert_eq!(gpus.location.as_ref().unwrap().line, 15);
    assert!(
        gpus.help
            .as_deref()
            .unwrap()
            .contains("CUDA_VISIBLE_DEVICES=0,1,2,3")
    );
    let strategy = &d[2];
    assert!(strategy.message.contains("`batching.strategy`"));
    assert!(
        strategy
            .help
            .as_deref()
            .unwrap()
            .contains("vllm.engine.max_num_seqs")
    );
    // No hint sends `backend` to tensorrt or `quantization` to sglang.
    let text = e.to_string();
    assert!(
        !text.contains("tensorrt.backend") && !text.contains("sglang"),
        "{text}"
    );
}

/// With those two fields replaced, the file plans as llem's, field by field.
#[test]
fn the_rest_of_the_seed_example_plans_translated() {
    let text = SEED_EXAMPLE
        .replace("gpus: [0, 1, 2, 3]\n", "")
        .replace("  strategy: sorted_dynamic             # static | dynamic | sorted_static | sorted_dynamic\n", "");
    let p = plan_text(&text).unwrap();
    assert_eq!(p.configs.len(), 1);
    let c = serde_json::to_value(&p.configs[0].config).unwrap();
    assert_eq!(c["name"], "llama-3.2-3b-vllm-benchmark");
    assert_eq!(c["model"], "meta-llama/Llama-3.2-3B");
    assert_eq!(c["engine"], "vllm");
    assert_eq!(c["dtype"], "float16");
    assert_eq!(c["max_output_tokens"], 256);
    assert_eq!(c["decoder"]["preset"], "deterministic");
    assert_eq!(c["traffic"]["arrival"], "poisson");
    assert_eq!(c["traffic"]["rate_qps"], 10.0);
    let v = &c["vllm"]["engine"];
    assert_eq!(v["gpu_memory_utilization"], 0.9);
    assert_eq!(v["enable_prefix_caching"], true);
    assert_eq!(v["max_model_len"], 4096);
    assert_eq!(v["max_num_seqs"], 32);
    assert_eq!(v["max_num_batched_tokens"], 4096);
    assert_eq!(v["tensor_parallel_size"], 4);
    let json = serde_json::to_value(&p).unwrap();
    assert_eq!(json["dialect"], "seed004");
}

/// The PyTorch backend: quantisation, batching strategies and tensor parallelism go to the
/// transformers section; traffic, which an offline engine cannot honour, is refused.
#[test]
fn a_pytorch_file_maps_to_the_transformers_engine() {
    let base = "config_name: pt\nmodel_name: gpt2\nbackend: pytorch\nfp_precision: bfloat16\n\
                quantization: {load_in_4bit: true}\n\
                batching: {strategy: sorted_dynamic, batch_size: 8, max_tokens_per_batch: 2048}\n\
                sharding: {strategy: tensor_parallel, num_shards: 2}\nnum_processes: 2\n";
    let p = plan_text(base).unwrap();
    let c = serde_json::to_value(&p.configs[0].config).unwrap();
    assert_eq!(c["engine"], "transformers");
    let t = &c["transformers"];
    assert_eq!(t["load_in_4bit"], true);
    assert_eq!(t["batching_strategy"], "sorted_dynamic");
    assert_eq!(t["batch_size"], 8);
    assert_eq!(t["max_tokens_per_batch"], 2048);
    assert_eq!(t["tp_size"], 2);
    assert_eq!(t["tp_plan"], "auto");
    let e = plan_text(&format!(
        "{base}traffic_simulation: {{enabled: true, mode: poisson, target_qps: 2}}\n"
    ))
    .unwrap_err();
    assert!(e.to_string().contains("needs a served engine"), "{e}");
    // A disabled traffic simulation asks for nothing.
    assert!(plan_text(&format!("{base}traffic_simulation: {{enabled: false}}\n")).is_ok());
    // Data-parallel processes are refused; they must match the shards.
    let e = plan_text(&base.replace("num_processes: 2", "num_processes: 4")).unwrap_err();
    assert!(e.to_string().contains("no data-parallel"), "{e}");
}

/// `llem config convert` writes the file as llem's YAML, which plans to the same hash.
#[test]
fn convert_writes_a_seed_004_file_as_llems() {
    let f = Files::new();
    let src = f.write(
        "pt.yaml",
        "config_name: pt\nmodel_name: gpt2\nbackend: pytorch\nfp_precision: float16\n\
         decoder: {preset: deterministic, max_new_tokens: 32}\n",
    );
    let text =
        llem_config::dialect07::convert(&src, llem_config::dialect07::Dialect::Llem).unwrap();
    assert!(text.contains("engine: transformers"), "{text}");
    assert!(text.contains("max_output_tokens: 32"), "{text}");
    assert!(!text.contains("model_name"), "{text}");
    let converted = f.write("converted.yaml", &text);
    let a = common::plan_path(&src).unwrap();
    let b = common::plan_path(&converted).unwrap();
    assert_eq!(a.configs[0].digest, b.configs[0].digest);
}
