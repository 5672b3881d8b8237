//! The Python llem's result bundles (llenergymeasure 0.7.0, bundle 2.0), as that tool wrote
//! them here (scripts/llem07-bundle.sh): read as runs beside llem's own, every mapped figure
//! checked against the bundle's own files.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::{Path, PathBuf};

use llem_records::Runs;
use serde_json::Value;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llem07-study")
}

fn json(p: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

#[test]
fn a_llem07_study_reads_as_runs_figure_by_figure() {
    let runs = Runs::from_directory(fixture()).unwrap();
    assert!(runs.issues().is_empty(), "{:?}", runs.issues());
    assert_eq!(runs.len(), 4);
    let manifest = json(&fixture().join("manifest.json"));
    assert_eq!(manifest["llenergymeasure_version"], "0.7.0");
    for r in runs.iter() {
        let cell = Path::new(&r.results_path).parent().unwrap();
        let result = json(&cell.join("result.json"));
        let config = json(&cell.join("config.json"));
        let system = json(&cell.join("system.json"));
        assert_eq!(result["bundle_version"], "2.0");
        let declared = &config["declared_config"];
        assert_eq!(r.extra.source.unwrap().as_str(), "llem07");
        assert_eq!(r.model_id, declared["task"]["model"].as_str().unwrap());
        assert_eq!(r.extra.engine.as_deref(), Some("transformers"));
        assert_eq!(r.task, "aienergyscore");
        assert_eq!(r.weight_precision, "float32");
        assert_eq!(
            r.gpu_model,
            system["hardware"]["gpu"]["name"].as_str().unwrap()
        );
        assert_eq!(r.num_gpus, 1);
        assert_eq!(
            r.max_num_seqs,
            declared["transformers"]["llem_execution"]["batch_size"]
                .as_i64()
                .unwrap()
        );
        assert_eq!(
            r.extra.config_hash.as_deref(),
            result["declared_config_hash"].as_str()
        );
        // Energy per output token and power from the bundle's own totals.
        let e = result["total_energy_j"].as_f64().unwrap();
        let t = result["total_inference_time_sec"].as_f64().unwrap();
        let out = result["output_tokens"].as_f64().unwrap();
        assert!(e > 0.0 && t > 0.0);
        assert!((r.energy_per_token_joules - e / out).abs() < 1e-12);
        assert!(
            (r.avg_power_watts - e / t).abs() < 1e-6,
            "{}",
            r.avg_power_watts
        );
        // Its avg_tokens_per_second counts input tokens too; the output throughput does not.
        assert!((r.output_throughput_tokens_per_sec - out / t).abs() < 1e-6);
        assert!(
            result["avg_tokens_per_second"].as_f64().unwrap() > r.output_throughput_tokens_per_sec
        );
        // The stand-in GPU drew 300 W throughout.
        assert!(
            (r.avg_power_watts - 300.0).abs() < 10.0,
            "{}",
            r.avg_power_watts
        );
        // Baseline 300 W too: adjusted energy is ~0, said rather than passed off.
        let w = r.extra.warnings.clone().unwrap_or_default();
        assert!(w.contains("baseline-adjusted energy"), "{w}");
        // Cycles: llem 0.7 names them from 1; llem counts from 0.
        let dir = cell.file_name().unwrap().to_string_lossy().into_owned();
        let c: i64 = dir.split('_').nth(1).unwrap()[1..].parse().unwrap();
        assert_eq!(r.extra.cycle, Some(c - 1));
    }
    // Labels name what varies: the batch size of the sweep.
    let labels: Vec<String> = runs
        .iter()
        .map(|r| r.extra.label.clone().unwrap())
        .collect();
    assert!(
        labels.contains(&"transformers.llem_execution.batch_size=1".to_string()),
        "{labels:?}"
    );
    assert!(
        labels.contains(&"transformers.llem_execution.batch_size=4".to_string()),
        "{labels:?}"
    );
    let groups = runs
        .group_by(&["transformers.llem_execution.batch_size"])
        .unwrap();
    assert_eq!(groups.len(), 2);
}

#[test]
fn energy_llem07_did_not_measure_is_unknown_not_zero() {
    // A copy of one cell whose run had no sampler: llem 0.7 writes 0 J and says so.
    let d = tempfile::tempdir().unwrap();
    let src = fixture().join("001_c1_tiny-transformers_d2274549");
    let cell = d.path().join("s/001_c1_tiny-transformers_d2274549");
    std::fs::create_dir_all(&cell).unwrap();
    for f in ["config.json", "system.json"] {
        std::fs::copy(src.join(f), cell.join(f)).unwrap();
    }
    let mut r = json(&src.join("result.json"));
    r["total_energy_j"] = 0.0.into();
    r["avg_energy_per_token_j"] = 0.0.into();
    r["energy_per_token_mj_total"] = 0.0.into();
    r["measurement_warnings"] = serde_json::json!([
        "energy_measurement_unavailable: no energy sampler produced a measurement; reported energy is absent, not a measured zero."
    ]);
    std::fs::write(cell.join("result.json"), r.to_string()).unwrap();
    let runs = Runs::from_directory(d.path()).unwrap();
    let run = runs.get(0).unwrap();
    assert!(run.energy_per_token_joules.is_nan());
    assert!(run.steady_state_energy_joules.is_nan());
    assert!(run.avg_power_watts.is_nan());
    assert!(run.output_throughput_tokens_per_sec > 0.0);
    assert!(
        run.extra
            .warnings
            .as_deref()
            .unwrap()
            .contains("not a measurement")
    );
}
