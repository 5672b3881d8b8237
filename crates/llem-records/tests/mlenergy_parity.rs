//! llem's records equal what the reference reader `mlenergy-data` 0.4.0 derives from the
//! same raw tree: every field of every run (stability flags and reasons, the cascade, the
//! derived metrics, ITL percentiles), per-request output lengths, inter-token latencies and
//! power timelines. The tree is written here by `support/mlenergy_tree.rs`; the reference's
//! output was recorded from PyPI `mlenergy-data==0.4.0` by `scripts/record-mlenergy-parity.sh`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    missing_docs
)]

use llem_testkit::mlenergy_tree as tree;

use std::path::Path;

use llem_records::raw_tree::{RawOptions, load_raw};
use llem_records::run::{FieldKind, FieldValue, LLM_FIELDS};
use llem_records::{Runs, load_any};
use serde_json::Value;

fn fixture() -> Value {
    let text = include_str!("fixtures/mlenergy_parity.json");
    serde_json::from_str(text).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= 1e-12 * a.abs().max(b.abs())
}

fn rel(root: &Path, p: &str) -> String {
    Path::new(p)
        .strip_prefix(root)
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

fn load(root: &Path) -> Runs {
    let l = load_raw(&[root.to_path_buf()], &RawOptions::default()).unwrap();
    Runs::new(l.runs, l.issues)
}

#[test]
fn every_run_and_field_equals_the_reference_reader() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    tree::write_parity_tree(&root);
    let runs = load(&root);
    let want = fixture();
    let want_runs = want["runs"].as_array().unwrap();
    assert_eq!(runs.len(), want_runs.len(), "run count");
    for (got, exp) in runs.iter().zip(want_runs) {
        let who = format!(
            "{} {} {} b={} seed={:?}",
            got.task, got.model_id, got.gpu_model, got.max_num_seqs, got.seed
        );
        for (name, kind) in LLM_FIELDS {
            let e = &exp[*name];
            let g = got.field(name).unwrap();
            let ok = match (kind, g) {
                (_, FieldValue::Null) => e.is_null(),
                (FieldKind::Float | FieldKind::OptFloat, FieldValue::Float(x)) => {
                    e.as_f64().is_some_and(|y| close(x, y)) || (x.is_nan() && e.is_null())
                }
                (_, FieldValue::Int(i)) => e.as_i64() == Some(i),
                (_, FieldValue::Str(s)) => e.as_str() == Some(s),
                (_, FieldValue::Bool(b)) => e.as_bool() == Some(b),
                _ => false,
            };
            assert!(ok, "{who}: {name}: llem {g:?}, mlenergy-data {e}");
        }
        assert_eq!(
            rel(&root, &got.results_path),
            exp["results_path"].as_str().unwrap()
        );
        assert_eq!(
            rel(&root, &got.prometheus_path),
            exp["prometheus_path"].as_str().unwrap()
        );
    }
    // The cascade fired where the tree was built to make it fire.
    let reasons: Vec<&str> = runs.iter().map(|r| r.unstable_reason.as_str()).collect();
    assert!(reasons.contains(&"low_batch_utilization:0.712500"));
    assert!(reasons.contains(&"cascade_from_unstable_batch:32"));
    assert!(reasons.contains(&"cascade_from_unstable_batch:8"));
    assert!(reasons.contains(&"short_steady_state:17.0"));
    // The runs the reference drops are reported here with their reasons.
    let issues: Vec<String> = runs.issues().iter().map(|i| i.reason.clone()).collect();
    assert_eq!(issues.len(), 2, "{issues:?}");
    assert!(issues.iter().any(|r| r.contains("model_info.json")));
    assert!(issues.iter().any(|r| r.starts_with("results.json")));
}

#[test]
fn per_request_extraction_equals_the_reference_reader() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    tree::write_parity_tree(&root);
    let runs = load(&root);
    let want = fixture();

    let all = runs.output_lengths(true).unwrap();
    let exp = want["output_lengths_all"].as_array().unwrap();
    assert_eq!(all.len(), exp.len());
    for (g, e) in all.iter().zip(exp) {
        assert_eq!(g.run.task, e[0].as_str().unwrap());
        assert_eq!(g.run.model_id, e[1].as_str().unwrap());
        assert_eq!(g.run.num_gpus, e[2].as_i64().unwrap());
        assert_eq!(g.run.max_num_seqs, e[3].as_i64().unwrap());
        assert_eq!(g.output_len, e[4].as_i64().unwrap());
    }
    assert_eq!(
        runs.output_lengths(false).unwrap().len() as u64,
        want["output_lengths_ok"].as_u64().unwrap()
    );

    // ITLs, summarised per (task, model, GPUs, batch) as the reference's frame groups them.
    let itl = runs.inter_token_latencies().unwrap();
    type Key = (String, String, i64, i64);
    let mut groups: Vec<(Key, Vec<f64>)> = Vec::new();
    for s in &itl {
        let k = (
            s.run.task.clone(),
            s.run.model_id.clone(),
            s.run.num_gpus,
            s.run.max_num_seqs,
        );
        match groups.iter_mut().find(|(g, _)| *g == k) {
            Some((_, v)) => v.push(s.itl_s),
            None => groups.push((k, vec![s.itl_s])),
        }
    }
    let exp = want["itl"].as_array().unwrap();
    assert_eq!(groups.len(), exp.len());
    for ((k, v), e) in groups.iter().zip(exp) {
        assert_eq!(k.0, e["task"].as_str().unwrap());
        assert_eq!(k.3, e["max_num_seqs"].as_i64().unwrap());
        assert_eq!(v.len() as u64, e["n"].as_u64().unwrap(), "{k:?}");
        let sum: f64 = v.iter().sum();
        assert!((sum - e["sum"].as_f64().unwrap()).abs() < 1e-9, "{k:?}");
        let max = v.iter().copied().fold(f64::MIN, f64::max);
        let min = v.iter().copied().fold(f64::MAX, f64::min);
        assert!(close(max, e["max"].as_f64().unwrap()));
        assert!(close(min, e["min"].as_f64().unwrap()));
    }

    let tl = runs.timelines("power.device_instant").unwrap();
    let exp = want["timelines"].as_array().unwrap();
    assert_eq!(tl.len(), exp.len());
    for (g, e) in tl.iter().zip(exp) {
        assert_eq!(g.run.task, e[0].as_str().unwrap());
        assert_eq!(g.run.model_id, e[1].as_str().unwrap());
        assert_eq!(g.run.max_num_seqs, e[3].as_i64().unwrap());
        assert!(close(g.timestamp, e[4].as_f64().unwrap()));
        assert!((g.relative_time_s - e[5].as_f64().unwrap()).abs() < 1e-9);
        assert!(close(g.value, e[6].as_f64().unwrap()), "{g:?} vs {e}");
    }
}

#[test]
fn compiled_parquet_round_trip_and_relative_paths() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    tree::write_parity_tree(&root);
    let runs = load(&root);
    // Compile the tree the way the published dataset is laid out, then load the directory.
    runs.write_parquet(&root.join("runs/llm.parquet"), Some(&root))
        .unwrap();
    let again = Runs::from_parquet(&root.join("runs/llm.parquet"), Some(&root)).unwrap();
    assert_eq!(again.len(), runs.len());
    for (a, b) in runs.iter().zip(again.iter()) {
        let mut b = b.clone();
        assert_eq!(b.extra.source, a.extra.source);
        b.extra.source = a.extra.source;
        assert_eq!(a, &b);
    }
    // from_directory prefers the compiled file and resolves its relative paths.
    let l = load_any(std::slice::from_ref(&root)).unwrap();
    assert_eq!(l.runs.len(), runs.len());
    assert!(Path::new(&l.runs[0].results_path).is_file());
}

#[test]
fn sub_roots_filters_groups_and_columns() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    tree::write_parity_tree(&root);
    // A directory inside the tree: the benchmark root is inferred; the config found there.
    let sub = root.join("llm/h100/current/run");
    let l = load_raw(
        &[sub],
        &RawOptions {
            config_dir: Some(root.join("configs/vllm")),
            ..RawOptions::default()
        },
    )
    .unwrap();
    assert_eq!(l.runs.len(), 15);
    let all = load(&root);
    let gpqa = all.task("gpqa").gpu("H100").batch_range(8..=32).stable();
    assert!(
        gpqa.iter()
            .all(|r| r.task == "gpqa" && r.max_num_seqs <= 32 && r.is_stable)
    );
    assert_eq!(gpqa.len(), 5);
    let groups = all.group_by(&["model_id", "gpu_model"]).unwrap();
    assert_eq!(groups.len(), 4);
    assert_eq!(
        groups.iter().map(|g| g.runs.len()).sum::<usize>(),
        all.len()
    );
    let data = all.task("gpqa").data();
    assert_eq!(data.energy_per_token_joules.len(), all.task("gpqa").len());
    assert!(
        all.group_by(&["modle_id"])
            .unwrap_err()
            .to_string()
            .contains("model_id")
    );
    let tasks = load_raw(
        std::slice::from_ref(&root),
        &RawOptions {
            tasks: Some(["lm-arena-chat".to_string()].into()),
            ..RawOptions::default()
        },
    )
    .unwrap();
    assert!(tasks.runs.iter().all(|r| r.task == "lm-arena-chat"));
    assert_eq!(tasks.runs.len(), 5);
}

/// Diffusion runs (reference §13): batch and degrees from the run name, per-iteration
/// energy summed over GPUs, iterations without energy or time skipped, the config's
/// defaults; and the parquet round trip.
#[test]
fn diffusion_runs_from_a_raw_tree() {
    use llem_records::diffusion;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let run = root.join(
        "diffusion/h100/current/run/diffusion/text-to-image/black-forest-labs/FLUX.1-dev/batch-4+uly-2+ring-1+size-1024x768+steps-28+tc-True",
    );
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("results.json"),
        r#"{"iteration_energy_measurements": [
            {"gpu_energy": {"0": 100.0, "1": 120.0}, "time": 2.0},
            {"gpu_energy": {"0": 110.0, "1": 130.0}, "time": 2.5},
            {"gpu_energy": null, "time": 1.0},
            {"gpu_energy": {"0": 1.0}, "time": 0}
        ], "num_frames": null}"#,
    )
    .unwrap();
    let cfg = root.join("configs/xdit/text-to-image/black-forest-labs/FLUX.1-dev");
    std::fs::create_dir_all(&cfg).unwrap();
    std::fs::write(
        cfg.join("model_info.json"),
        r#"{"total_parameters_billion": 12, "nickname": "FLUX.1 dev"}"#,
    )
    .unwrap();
    // A run without a model config is reported, not loaded.
    let orphan =
        root.join("diffusion/h100/current/run/diffusion/text-to-video/x/y/batch-1+size-8x8");
    std::fs::create_dir_all(&orphan).unwrap();
    std::fs::write(
        orphan.join("results.json"),
        r#"{"iteration_energy_measurements": [{"gpu_energy": {"0": 1}, "time": 1}]}"#,
    )
    .unwrap();

    let (runs, issues) = diffusion::load_raw(std::slice::from_ref(&root), None).unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(issues.len(), 1);
    let r = &runs[0];
    assert_eq!(r.model_id, "black-forest-labs/FLUX.1-dev");
    assert_eq!(r.nickname, "FLUX.1 dev");
    assert_eq!(r.gpu_model, "H100");
    assert_eq!(
        (r.batch_size, r.ulysses_degree, r.ring_degree, r.num_gpus),
        (4, Some(2), Some(1), 2)
    );
    assert_eq!(
        (r.height, r.width, r.inference_steps),
        (1024, 768, Some(28))
    );
    assert_eq!(r.use_torch_compile, Some(true));
    assert_eq!(r.weight_precision, "bfloat16");
    // Mean energy (220 + 240) / 2 = 230 J, mean time 2.25 s.
    assert!((r.batch_latency_s - 2.25).abs() < 1e-12);
    assert!((r.avg_power_watts - 230.0 / 2.25).abs() < 1e-9);
    assert!((r.energy_per_generation_joules - 57.5).abs() < 1e-12);
    assert!((r.throughput_generations_per_sec - 4.0 / 2.25).abs() < 1e-12);
    assert!(r.is_text_to_image() && !r.is_text_to_video());

    let pq = root.join("runs/diffusion.parquet");
    std::fs::create_dir_all(pq.parent().unwrap()).unwrap();
    diffusion::write_parquet(&runs.iter().collect::<Vec<_>>(), &pq, Some(&root)).unwrap();
    let back = diffusion::read_parquet(&pq, Some(&root)).unwrap();
    assert_eq!(back, runs);
}

/// The walk resolves symbolic links once, where it follows them: a run reached twice (a
/// linked alias directory, or two overlapping roots) is loaded once, and a link back up the
/// tree is not walked forever.
#[test]
fn linked_directories_and_overlapping_roots_load_each_run_once() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    tree::write_parity_tree(&root);
    let plain = load(&root);
    let results = root.join("llm/h100/current/run/llm/gpqa/results");
    let org = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .min()
        .unwrap();
    std::os::unix::fs::symlink(results.join(&org), results.join("zz-alias")).unwrap();
    std::os::unix::fs::symlink(&root, root.join("llm/h100/current/run/llm/loop")).unwrap();
    let linked = load(&root);
    let paths = |r: &Runs| r.iter().map(|x| x.results_path.clone()).collect::<Vec<_>>();
    assert_eq!(paths(&linked), paths(&plain));
    let sub = root.join("llm/h100/current/run");
    let both = load_raw(&[root.clone(), sub], &RawOptions::default()).unwrap();
    assert_eq!(both.runs.len(), plain.len());
    // The other walks (llem cells, diffusion) share the walker and its guard.
    assert_eq!(
        load_any(std::slice::from_ref(&root)).unwrap().runs.len(),
        plain.len()
    );
}

/// A directory holding an ML.ENERGY raw tree and a llem study side by side: each is read by
/// its own loader, the walk for llem cells does not enter the raw root, and a directory
/// inside the raw tree still loads its runs as a sub-root.
#[test]
fn a_tree_with_a_raw_root_and_a_llem_study_loads_both_once() {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    let raw = top.join("mlenergy");
    tree::write_parity_tree(&raw);
    let only_raw = load_any(std::slice::from_ref(&raw)).unwrap();
    let study = top.join("study");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llem07-study");
    copy_tree(&fixture, &study);
    let only_study = Runs::from_directory(&study).unwrap();
    assert_eq!(only_study.len(), 4);

    let both = load_any(std::slice::from_ref(&top)).unwrap();
    assert_eq!(both.runs.len(), only_raw.runs.len() + only_study.len());
    assert_eq!(both.diffusion.len(), only_raw.diffusion.len());
    let kinds: Vec<_> = both
        .sources
        .iter()
        .map(|(p, k)| (p.strip_prefix(&top).unwrap().to_path_buf(), *k))
        .collect();
    assert_eq!(
        kinds,
        [
            (
                Path::new("mlenergy").to_path_buf(),
                llem_records::load::SourceKind::Raw
            ),
            (
                Path::new("").to_path_buf(),
                llem_records::load::SourceKind::Llem
            ),
        ]
    );
    let sub = load_any(&[raw.join("llm/h100/current/run")]).unwrap();
    assert_eq!(sub.runs.len(), 15);
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}
