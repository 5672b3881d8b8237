//! A real two-configuration llem study (`fuzz/corpus/results/`: `llamacpp.batch_size` 1 and
//! 2): each run is labelled by what its study varied, the swept field is a field (filters,
//! groups) and a column of every export.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::indexing_slicing)]

use std::path::{Path, PathBuf};

use llem_records::export::Format;
use llem_records::runs::Condition;
use llem_records::{FieldValue, Runs};

fn study() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/results")
}

#[test]
fn runs_are_labelled_by_what_the_study_varied() {
    let runs = Runs::from_directory(study()).unwrap();
    assert_eq!(runs.len(), 2);
    let labels: Vec<String> = runs
        .column("label")
        .unwrap()
        .iter()
        .map(FieldValue::display)
        .collect();
    assert_eq!(labels, ["llamacpp.batch_size=1", "llamacpp.batch_size=2"]);
    assert_eq!(runs.swept_paths(), ["llamacpp.batch_size"]);
}

#[test]
fn a_configuration_path_filters_and_groups() {
    let runs = Runs::from_directory(study()).unwrap();
    let c = Condition::parse("llamacpp.batch_size=2").unwrap();
    let two = runs.filter(|r| c.matches(r));
    assert_eq!(two.len(), 1);
    assert_eq!(
        two.column("llamacpp.batch_size").unwrap(),
        [FieldValue::Int(2)]
    );
    let c = Condition::parse("dataset.source=synthetic").unwrap();
    assert_eq!(runs.filter(|r| c.matches(r)).len(), 2);
    let groups = runs.group_by(&["llamacpp.batch_size"]).unwrap();
    assert_eq!(groups.len(), 2);
    // Neither a record field nor a configuration path: refused with a hint.
    let e = Condition::parse("preset=creative").unwrap_err().to_string();
    assert!(
        e.contains("configuration path such as `decoder.preset`"),
        "{e}"
    );
}

#[test]
fn every_export_carries_the_label_and_the_swept_field() {
    let runs = Runs::from_directory(study()).unwrap();
    let csv = String::from_utf8(Format::Csv.exporter().serialize(&runs).unwrap()).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert!(header.contains(&"label"), "{header:?}");
    // The swept path is the last column: every row ends with its value.
    assert_eq!(header.last(), Some(&"llamacpp.batch_size"));
    assert!(csv.contains(",llamacpp.batch_size=2,"), "{csv}");
    assert!(csv.trim_end().ends_with(",2"), "{csv}");

    let json: serde_json::Value =
        serde_json::from_slice(&Format::Json.exporter().serialize(&runs).unwrap()).unwrap();
    assert_eq!(json[0]["llamacpp.batch_size"], 1);
    assert_eq!(json[0]["label"], "llamacpp.batch_size=1");

    let md = String::from_utf8(Format::Markdown.exporter().serialize(&runs).unwrap()).unwrap();
    assert!(
        md.lines().next().unwrap().starts_with("| label | cycle |"),
        "{md}"
    );
    assert!(md.contains("| llamacpp.batch_size=2 | 0 |"), "{md}");

    let batch = runs.to_record_batch().unwrap();
    let schema = batch.schema();
    let f = schema.field_with_name("llamacpp.batch_size").unwrap();
    assert_eq!(f.data_type(), &arrow_schema::DataType::Int64);
}

#[test]
fn a_figure_has_one_name_and_one_unit_in_results_records_and_comparisons() {
    let runs = Runs::from_directory(study()).unwrap();
    for m in llem_records::compare::METRICS {
        // Every compared metric is a record field of the same name, in the same unit.
        let col = runs.column(m.name).unwrap();
        for (r, v) in runs.iter().zip(col) {
            assert_eq!(v.as_f64(), (m.get)(r), "{}", m.name);
        }
    }
    for r in runs.iter() {
        let res: llem_results::ExperimentResult =
            serde_json::from_slice(&std::fs::read(&r.results_path).unwrap()).unwrap();
        let mj = r.field("mj_per_tok_total").unwrap().as_f64().unwrap();
        assert!((mj - res.mj_per_tok_total.unwrap()).abs() < 1e-9 * mj.abs());
        assert_eq!(
            r.field("mj_per_tok_adjusted").unwrap().as_f64(),
            res.mj_per_tok_adjusted
        );
    }
}
