//! `llem results query|compare` selection on a real ML.ENERGY tree (the parity tree): a query
//! selects what a filter written by hand selects, grouped as asked; a pick that matches
//! nothing and a field with one value are usage errors.
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::Path;

use llem_records::query::{Query, configuration, groups_to_compare};
use llem_records::raw_tree::RawOptions;
use llem_records::{RecordsError, Runs};
use llem_testkit::mlenergy_tree as tree;

fn parity_runs(root: &Path) -> Runs {
    tree::write_parity_tree(root);
    Runs::from_raw_results(&[root.to_path_buf()], &RawOptions::default()).unwrap()
}

#[test]
fn a_query_selects_what_a_filter_by_hand_selects_grouped_as_asked() {
    let d = tempfile::tempdir().unwrap();
    let all = parity_runs(d.path());
    let q = Query::parse(&["max_num_seqs>=64".into()], &["gpu_model".into()], false).unwrap();
    assert_eq!(q.field_names(), ["gpu_model"]);
    let groups = q.run(&all).unwrap();
    let by_hand = all.filter(|r| r.max_num_seqs >= 64);
    assert!(!by_hand.is_empty() && by_hand.len() < all.len());
    assert_eq!(
        groups.iter().map(|g| g.runs.len()).sum::<usize>(),
        by_hand.len()
    );
    for g in &groups {
        assert!(
            g.runs
                .iter()
                .all(|r| r.gpu_model == g.key[0] && r.max_num_seqs >= 64)
        );
    }
    let mut skus: Vec<&str> = by_hand.iter().map(|r| r.gpu_model.as_str()).collect();
    skus.sort_unstable();
    skus.dedup();
    assert_eq!(groups.len(), skus.len());

    // Stable only, no grouping: one group, the stable subset.
    let stable = Query::parse(&[], &[], true).unwrap().run(&all).unwrap();
    assert_eq!(stable.len(), 1);
    assert!(stable[0].key.is_empty());
    assert_eq!(stable[0].runs.len(), all.stable().len());
    assert!(all.stable().len() < all.len(), "the tree has unstable runs");
}

#[test]
fn bad_conditions_fields_and_picks_are_usage_errors() {
    assert!(matches!(
        Query::parse(&["max_num_seqs".into()], &[], false),
        Err(RecordsError::Usage(_))
    ));
    // A figure has one name: the short names of old are refused with the field to write.
    for (short, field) in [
        ("batch", "max_num_seqs"),
        ("gpu", "gpu_model"),
        ("stable", "is_stable"),
    ] {
        let e = Query::parse(&[format!("{short}>=2")], &[], false).unwrap_err();
        assert!(e.to_string().contains(&format!("write `{field}`")), "{e}");
        assert!(Query::parse(&[], &[short.into()], false).is_err());
    }
    assert!(Query::parse(&[], &["no_such_field".into()], false).is_err());
    let d = tempfile::tempdir().unwrap();
    let all = parity_runs(d.path());
    // ML.ENERGY runs carry no llem label or configuration hash.
    let e = configuration(&all, "fast").unwrap_err();
    assert!(
        e.to_string().contains("--pick \"fast\" matches no run"),
        "{e}"
    );
    let one = all.filter(|r| r.num_gpus == all.get(0).unwrap().num_gpus);
    let e = groups_to_compare(&one, "num_gpus", d.path()).unwrap_err();
    assert!(e.to_string().contains("nothing to compare"), "{e}");
    let (field, groups) = groups_to_compare(&all, "max_num_seqs", d.path()).unwrap();
    assert_eq!(field, "max_num_seqs");
    assert!(groups.len() >= 2);
}
