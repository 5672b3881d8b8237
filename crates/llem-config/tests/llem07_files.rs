//! The Python llem 0.7's own YAML — the study files under `configs/` and every ```yaml block
//! of `docs/` in the `llenergymeasure` 0.7.0 sdist (scripts/fetch-assets.sh fetches it,
//! checksum pinned) — planned by llem: every example llem 0.7 itself plans, llem plans into as
//! many configurations (what 0.7 made of each is tests/fixtures/llem07-plans.json, written by
//! scripts/llem07-plans.sh running llenergymeasure 0.7.0). A block without `serving_mode` is
//! a fragment, planned merged onto a minimal 0.7 experiment exactly as that script does.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use llem_config::dialect07::Dialect;
use llem_config::source::SourceId;
use serde_json::Value;

fn sdist() -> PathBuf {
    let assets = std::env::var_os("LLEM_ASSETS")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|c| Path::new(&c).join("llem/assets")))
        .unwrap_or_else(|| {
            Path::new(&std::env::var_os("HOME").unwrap()).join(".cache/llem/assets")
        });
    let dir = assets.join("llem07/llenergymeasure-0.7.0");
    assert!(
        dir.join("configs").is_dir() && dir.join("docs").is_dir(),
        "{} lacks the llenergymeasure 0.7.0 sdist: run scripts/fetch-assets.sh",
        dir.display()
    );
    dir
}

fn walk(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, ext, out);
        } else if p.is_file() && p.extension().is_some_and(|x| x == ext) {
            out.push(p);
        }
    }
}

/// Every example, by the name the fixture uses: `configs/...yaml`, `docs/...md:LINE`.
fn examples(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut files = Vec::new();
    walk(&root.join("configs"), "yaml", &mut files);
    for f in files {
        let name = f.strip_prefix(root).unwrap().display().to_string();
        out.insert(name, std::fs::read_to_string(&f).unwrap());
    }
    let mut docs = Vec::new();
    walk(&root.join("docs"), "md", &mut docs);
    for f in docs {
        let text = std::fs::read_to_string(&f).unwrap();
        let rel = f.strip_prefix(root).unwrap().display().to_string();
        let mut from = 0;
        while let Some(start) = text[from..].find("```yaml\n").map(|i| i + from) {
            let body_start = start + "```yaml\n".len();
            let Some(end) = text[body_start..].find("```").map(|i| i + body_start) else {
                break;
            };
            let line = text[..start].matches('\n').count() + 1;
            out.insert(format!("{rel}:{line}"), text[body_start..end].to_string());
            from = end + 3;
        }
    }
    out
}

/// A fragment merged onto the minimal 0.7 experiment the fixture's script used (an error for
/// one that is not YAML to llem: a duplicate key, which PyYAML lets the last copy win).
fn completed(text: &str) -> Result<String, String> {
    let frag = llem_config::yaml::parse(text, SourceId(0)).map_err(|e| e.message)?;
    let server = frag.as_map().is_some_and(|m| m.contains("server"));
    let skeleton = if server {
        "serving_mode: server\ntask: {model: gpt2}\nengine: vllm\n"
    } else {
        "serving_mode: offline\ntask: {model: gpt2}\n"
    };
    let skel = llem_config::yaml::parse(skeleton, SourceId(0)).unwrap();
    Ok(llem_config::emit::to_yaml(&llem_config::yaml::deep_merge(
        &skel, &frag,
    )))
}

#[test]
fn every_example_llem07_plans_plans_into_as_many_configurations() {
    let root = sdist();
    let expected: BTreeMap<String, Value> = serde_json::from_str(
        &std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llem07-plans.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let found = examples(&root);
    assert_eq!(
        found.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "the sdist's examples are the ones the fixture was made from"
    );
    let files = common::Files::new();
    let (mut checked, mut ours) = (0, Vec::new());
    for (name, want) in &expected {
        let kind = want["kind"].as_str().unwrap();
        if kind != "file" && kind != "fragment" {
            continue;
        }
        let text = &found[name];
        let text = if kind == "fragment" {
            completed(text)
        } else {
            Ok(text.clone())
        };
        let got = match &text {
            Ok(t) => files.plan("x.yaml", t).map_err(|e| e.to_string()),
            Err(e) => Err(e.clone()),
        };
        let text = text.unwrap_or_default();
        if want["planned"] == true {
            let plan =
                got.unwrap_or_else(|e| panic!("{name}: llem 0.7 plans it, llem says\n{e}\n{text}"));
            assert_eq!(
                plan.configs.len() as u64,
                want["configurations"].as_u64().unwrap(),
                "{name}"
            );
            assert_eq!(plan.dialect, Dialect::Llem07, "{name}");
            checked += 1;
        } else {
            ours.push((name.clone(), got.is_ok()));
        }
    }
    // 40 examples llem 0.7 plans; the 31 it refuses (fragments without a model of their
    // own, `runners:` in a single experiment, its own engine rules) llem plans where they
    // mean something (tested in dialect07's unit tests).
    assert_eq!(checked, 40);
    assert_eq!(ours.len(), 31);
}

fn config(plan: &llem_config::StudyPlan, i: usize) -> Value {
    serde_json::to_value(&plan.configs[i].config).unwrap()
}

#[test]
fn each_07_field_lands_on_llems_own() {
    let f = common::Files::new();
    let p = f
        .plan(
            "t.yaml",
            "study_name: mapped\nserving_mode: offline\nengine: transformers\n\
             task: {model: gpt2, random_seed: 7, max_output_tokens: 32, dataset: {source: aienergyscore, n_prompts: 12}}\n\
             measurement: {energy_sampler: null, latency_profiling: true, measurement_methodology: total, baseline: {enabled: false}}\n\
             sampling_preset: deterministic\n\
             offline: {warmup: {n_prompts: 3, thermal_floor_seconds: 30}}\n\
             transformers:\n  engine_params: {dtype: float16, attn_implementation: sdpa, revision: abc}\n  \
             sampling_params: {top_k: 10}\n  llem_execution: {batch_size: 4, torch_compile: true}\n\
             output: {results_dir: out, save_timeseries: false}\n\
             runners: {transformers: \"container:img:1\"}\n",
        )
        .unwrap();
    assert_eq!(p.dialect, Dialect::Llem07);
    assert_eq!(p.study_name, "mapped");
    let c = config(&p, 0);
    assert_eq!(c["model"], "gpt2");
    assert_eq!(c["random_seed"], 7);
    assert_eq!(c["max_output_tokens"], 32);
    assert_eq!(c["dataset"]["n_prompts"], 12);
    assert!(c["energy_sampler"].is_null());
    assert_eq!(c["measurement"]["latency_profiling"], true);
    assert_eq!(c["baseline"]["enabled"], false);
    assert_eq!(c["decoder"]["preset"], "deterministic");
    assert_eq!(c["decoder"]["top_k"], 10);
    assert_eq!(c["warmup"]["n_warmup"], 3);
    assert_eq!(c["dtype"], "float16");
    assert_eq!(c["transformers"]["attn_implementation"], "sdpa");
    assert_eq!(c["transformers"]["batch_size"], 4);
    assert_eq!(c["transformers"]["torch_compile"], true);
    assert_eq!(c["passthrough_kwargs"]["revision"], "abc");
    assert_eq!(c["gpu_telemetry"], false);
    assert_eq!(c["output_dir"], "out");
    assert_eq!(c["runners"]["transformers"], "docker:img:1");

    let p = f
        .plan(
            "v.yaml",
            "serving_mode: offline\nengine: vllm\ntask: {model: gpt2}\n\
             vllm:\n  engine_params: {dtype: half, max_num_seqs: 64, enable_prefix_caching: true, attention: {backend: flashinfer}}\n  \
             sampling_params: {top_p: 0.9, presence_penalty: 0.5, ignore_eos: true}\n",
        )
        .unwrap();
    let c = config(&p, 0);
    assert_eq!(c["dtype"], "float16");
    assert_eq!(c["vllm"]["engine"]["max_num_seqs"], 64);
    assert_eq!(c["vllm"]["engine"]["attention"]["engine"], "flashinfer");
    assert_eq!(c["decoder"]["top_p"], 0.9);
    assert_eq!(c["vllm"]["sampling"]["presence_penalty"], 0.5);
    assert_eq!(c["vllm"]["sampling"]["ignore_eos"], true);
}

#[test]
fn server_mode_rate_levels_windows_and_the_composite_gate() {
    let p = common::Files::new()
        .plan(
            "s.yaml",
            "serving_mode: server\nengine: vllm\ntask: {model: gpt2}\n\
             server:\n  traffic: {rate: [2, 10], arrival: gamma, burstiness: 2.0, concurrency_cap: 16, \
             window_seconds: 120, ramp_exclusion_seconds: 10, seed: 7, slo: {ttft_ms: 500}}\n  \
             warmup: {timeout_seconds: 600}\n",
        )
        .unwrap();
    assert_eq!(p.configs.len(), 2);
    let rates: Vec<Value> = (0..2)
        .map(|i| config(&p, i)["traffic"]["rate_qps"].clone())
        .collect();
    assert_eq!(rates, [serde_json::json!(2.0), serde_json::json!(10.0)]);
    let c = config(&p, 0);
    assert_eq!(c["traffic"]["arrival"], "gamma");
    assert_eq!(c["traffic"]["max_concurrency"], 16);
    assert_eq!(c["traffic"]["seed"], 7);
    assert_eq!(c["traffic"]["slo"]["ttft_ms"], 500.0);
    assert_eq!(c["measurement"]["windows"]["window_seconds"], 120.0);
    assert_eq!(c["measurement"]["windows"]["ramp_exclusion_seconds"], 10.0);
    assert_eq!(c["warmup"]["gate"]["timeout_seconds"], 600.0);
}

#[test]
fn sweeps_ranges_and_engine_scoped_top_level_fields() {
    let p = common::Files::new()
        .plan(
            "w.yaml",
            "serving_mode: offline\ntask: {model: gpt2}\n\
             sweep:\n  engine: [transformers, vllm]\n  \
             task.dataset.n_prompts: {min: 10, max: 30, num: 3}\n  \
             vllm.engine_params.max_num_seqs: {pow2: {min: 4, max: 32}}\n  \
             transformers.engine_params.dtype: [float16, bfloat16]\n  \
             transformers.llem_execution.batch_size: {log: {min: 1, max: 100, num: 3}}\n",
        )
        .unwrap();
    let mut tf = 0;
    let mut vl = 0;
    for pc in &p.configs {
        let c = serde_json::to_value(&pc.config).unwrap();
        match c["engine"].as_str().unwrap() {
            "transformers" => {
                tf += 1;
                assert!([1, 10, 100].contains(&c["transformers"]["batch_size"].as_u64().unwrap()));
            }
            _ => {
                vl += 1;
                assert!(
                    [4, 8, 16, 32].contains(&c["vllm"]["engine"]["max_num_seqs"].as_u64().unwrap())
                );
                assert_eq!(
                    c["dtype"], "bfloat16",
                    "the transformers dtype axis leaves vllm alone"
                );
            }
        }
        assert!([10, 20, 30].contains(&c["dataset"]["n_prompts"].as_u64().unwrap()));
    }
    // transformers: 3 prompt counts x 2 dtypes x 3 batches; vllm: 3 x 4.
    assert_eq!((tf, vl), (18, 12));
}

#[test]
fn what_llem_cannot_honour_is_refused_by_name_where_it_is_written() {
    let f = common::Files::new();
    let cases = [
        (
            "serving_mode: server\nengine: vllm\ntask: {model: gpt2}\nserver:\n  traffic: {rate: 2, slo: {ttft_ms: 5, percentile: 0.9}}\n",
            "`server.traffic.slo.percentile` has no llem counterpart",
            5,
        ),
        (
            "serving_mode: server\nengine: vllm\ntask: {model: gpt2}\nserver:\n  traffic: {rate: 2}\n  warmup: {mode: fixed}\n",
            "server.warmup.mode: fixed",
            6,
        ),
        (
            "serving_mode: offline\ntask: {model: gpt2}\nstudy_execution: {gpu_indices: [0, 1]}\n",
            "`study_execution.gpu_indices` has no llem counterpart",
            3,
        ),
        (
            "serving_mode: offline\ntask: {model: gpt2}\nmeasurement: {measurement_methodology: steady_state, warmup_discard_fraction: 0.2}\n",
            "`measurement.warmup_discard_fraction` has no llem counterpart",
            3,
        ),
        (
            "serving_mode: offline\ntask: {modle: gpt2}\n",
            "unknown key `task.modle`",
            2,
        ),
        (
            "task: {model: gpt2}\nengine: vllm\n",
            "needs `serving_mode:`",
            1,
        ),
        (
            "serving_mode: server\ntask: {model: gpt2}\n",
            "needs a `server:` section",
            1,
        ),
    ];
    for (text, want, line) in cases {
        let e = f.plan("r.yaml", text).unwrap_err();
        let d = &e.diagnostics[0];
        assert!(d.message.contains(want), "{text}\n  got: {}", d.message);
        assert_eq!(
            d.location.as_ref().map(|l| l.line),
            Some(line),
            "{text}: {e}"
        );
    }
    let e = f
        .plan("r.yaml", "serving_mode: offline\ntask: {modle: gpt2}\n")
        .unwrap_err();
    assert_eq!(
        e.diagnostics[0].help.as_deref(),
        Some("did you mean `task.model`?")
    );
}

fn digests(plan: &llem_config::StudyPlan) -> Vec<String> {
    let mut d: Vec<String> = plan.configs.iter().map(|c| c.digest.short()).collect();
    d.sort();
    d
}

/// `llem config convert` both ways keeps every configuration: the converted file plans into
/// the same configuration hashes as the original.
#[test]
fn converting_keeps_every_configuration_hash() {
    let f = common::Files::new();
    let mut configs = Vec::new();
    walk(&sdist().join("configs"), "yaml", &mut configs);
    assert_eq!(configs.len(), 5);
    for file in &configs {
        let text = llem_config::dialect07::convert(file, Dialect::Llem).unwrap();
        let converted = f.write("c.yaml", &text);
        let (a, b) = (
            common::plan_path(file).unwrap(),
            common::plan_path(&converted).unwrap(),
        );
        assert_eq!(b.dialect, Dialect::Llem, "{}\n{text}", file.display());
        assert_eq!(digests(&a), digests(&b), "{}\n{text}", file.display());
    }
    let mut seed = Vec::new();
    walk(&common::examples().join("seed"), "yaml", &mut seed);
    for file in &seed {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = match llem_config::dialect07::convert(file, Dialect::Llem07) {
            Ok(t) => t,
            Err(e) => {
                assert_eq!(name, "base-inheritance.yaml", "{e}");
                assert!(e.to_string().contains("inline the base file first"), "{e}");
                continue;
            }
        };
        let converted = f.write("c07.yaml", &text);
        let b = common::plan_path(&converted).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        assert_eq!(b.dialect, Dialect::Llem07, "{name}");
        assert_eq!(
            digests(&common::plan_path(file).unwrap()),
            digests(&b),
            "{name}\n{text}"
        );
    }
    // What 0.7 cannot express is refused by name: its engines are transformers, vllm and
    // tensorrt only.
    let e = llem_config::dialect07::convert(
        &common::examples().join("quickstart.yaml"),
        Dialect::Llem07,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("llem 0.7 runs transformers, vllm and tensorrt only"),
        "{e}"
    );
    // A setting llem 0.7 keeps study-wide, written on one entry, is lifted to the study, or
    // refused when it cannot be, never dropped.
    let entry = f.write(
        "entry.yaml",
        "model: gpt2\nengine: transformers\nexperiments:\n  - dtype: float16\n    runners: {transformers: docker}\n  - dtype: bfloat16\n    output_dir: /elsewhere\n",
    );
    let e = llem_config::dialect07::convert(&entry, Dialect::Llem07).unwrap_err();
    assert!(
        e.to_string()
            .contains("sets it for the whole study, not per experiment"),
        "{e}"
    );
    let lifted = f.write(
        "lifted.yaml",
        "model: gpt2\nengine: transformers\nexperiments:\n  - dtype: float16\n    runners: {transformers: docker}\n  - dtype: bfloat16\n",
    );
    let text = llem_config::dialect07::convert(&lifted, Dialect::Llem07).unwrap();
    assert!(
        text.contains("runners:\n  transformers: container"),
        "{text}"
    );
    let clash = f.write(
        "clash.yaml",
        "model: gpt2\nengine: transformers\nexperiments:\n  - dtype: float16\n    runners: {transformers: docker}\n  - dtype: bfloat16\n    runners: {transformers: local}\n",
    );
    let e = llem_config::dialect07::convert(&clash, Dialect::Llem07).unwrap_err();
    assert!(
        e.to_string().contains("another entry sets a different one"),
        "{e}"
    );
    let e = llem_config::dialect07::convert(&configs[0], Dialect::Llem07).unwrap_err();
    assert!(e.to_string().contains("is already llem 0.7"), "{e}");
}
