//! Property tests: expansion counts, hash invariance, reproducible shuffles, Williams balance.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use crate::common;

use common::{Files, env, plan_with};
use llem_config::order::{execution_order, williams_row_count};
use llem_config::{ExperimentOrder, Overrides};
use proptest::prelude::*;

const AXIS_FIELDS: [&str; 4] = [
    "random_seed",
    "dataset.n_prompts",
    "max_output_tokens",
    "max_input_tokens",
];
const GROUP_FIELDS: [&str; 3] = [
    "decoder.top_k",
    "warmup.n_warmup",
    "baseline.validation_interval",
];

/// Sweep YAML with the given axis lengths and groups (entry sizes; 0 = `{}` baseline).
fn sweep_yaml(axes: &[usize], groups: &[Vec<usize>]) -> String {
    let mut y = String::from("model: m\nsweep:\n");
    for (i, &len) in axes.iter().enumerate() {
        let values: Vec<String> = (1..=len).map(|v| v.to_string()).collect();
        y.push_str(&format!("  {}: [{}]\n", AXIS_FIELDS[i], values.join(", ")));
    }
    for (j, entries) in groups.iter().enumerate() {
        y.push_str(&format!("  group{j}:\n"));
        for (k, &m) in entries.iter().enumerate() {
            let base = 100 * (k + 1);
            match m {
                0 => y.push_str("    - {}\n"),
                1 => y.push_str(&format!("    - {{{}: {}}}\n", GROUP_FIELDS[j], base)),
                _ => {
                    let vals: Vec<String> = (0..m).map(|v| (base + v).to_string()).collect();
                    y.push_str(&format!(
                        "    - {{{}: [{}]}}\n",
                        GROUP_FIELDS[j],
                        vals.join(", ")
                    ));
                }
            }
        }
    }
    y
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn expansion_count_is_the_product_of_axes_and_group_sizes(
        axes in prop::collection::vec(1usize..5, 0..4),
        groups in prop::collection::vec(prop::collection::vec(0usize..4, 1..4), 0..3),
    ) {
        let yaml = sweep_yaml(&axes, &groups);
        let f = Files::new();
        let path = f.write("s.yaml", &yaml);
        let p = plan_with(&path, Overrides::default(), false, &env()).unwrap();
        let axes_product: usize = axes.iter().product();
        let groups_product: usize = groups.iter().map(|g| g.iter().map(|&m| m.max(1)).sum::<usize>()).product();
        prop_assert_eq!(p.configs.len(), axes_product * groups_product, "{}", yaml);
        prop_assert_eq!(p.runs.len(), p.configs.len() * 3);
    }
}

fn float_spelling(v: f64, style: u8) -> String {
    match style % 4 {
        0 => format!("{v}"),
        1 => format!("{v:.3}"),
        2 => format!("{v:e}"),
        _ => format!("{v:.2}0"),
    }
}

/// One experiment written with the given key orders and float spellings.
fn experiment_yaml(top: &[usize], nested: &[usize], style: u8) -> String {
    let decoder_items = [
        format!("temperature: {}", float_spelling(0.5, style)),
        format!("top_p: {}", float_spelling(0.75, style.wrapping_add(1))),
        "top_k: 5".to_string(),
    ];
    let mut decoder: Vec<&String> = Vec::new();
    for &i in nested {
        decoder.push(&decoder_items[i]);
    }
    let blocks = [
        "model: m".to_string(),
        "random_seed: 7".to_string(),
        "max_output_tokens: 64".to_string(),
        "dataset: {n_prompts: 10, order: shuffled, source: sharegpt}".to_string(),
        format!(
            "decoder:\n{}",
            decoder
                .iter()
                .map(|d| format!("  {d}\n"))
                .collect::<String>()
                .trim_end()
        ),
        format!(
            "warmup: {{thermal_floor_seconds: {}, n_warmup: 3}}",
            float_spelling(30.0, style)
        ),
    ];
    top.iter()
        .map(|&i| blocks[i].clone())
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn hashes_ignore_key_order_and_number_spelling(
        top_a in Just((0..6).collect::<Vec<usize>>()).prop_shuffle(),
        top_b in Just((0..6).collect::<Vec<usize>>()).prop_shuffle(),
        nested_a in Just((0..3).collect::<Vec<usize>>()).prop_shuffle(),
        nested_b in Just((0..3).collect::<Vec<usize>>()).prop_shuffle(),
        style_a in 0u8..4,
        style_b in 0u8..4,
    ) {
        let f = Files::new();
        let a = f.write("a.yaml", &experiment_yaml(&top_a, &nested_a, style_a));
        let b = f.write("b.yaml", &experiment_yaml(&top_b, &nested_b, style_b));
        let pa = plan_with(&a, Overrides::default(), true, &env()).unwrap();
        let pb = plan_with(&b, Overrides::default(), true, &env()).unwrap();
        prop_assert_eq!(pa.configs[0].digest, pb.configs[0].digest);
        prop_assert_eq!(pa.design, pb.design);
    }

    #[test]
    fn shuffle_is_reproducible_and_a_permutation_per_cycle(k in 1usize..12, cycles in 1u32..6, seed in any::<Option<i32>>()) {
        let values: Vec<String> = (0..k).map(|v| v.to_string()).collect();
        let seed_line = seed.map(|s| format!("  shuffle_seed: {s}\n")).unwrap_or_default();
        let yaml = format!(
            "model: m\nsweep:\n  random_seed: [{}]\nstudy_execution:\n  n_cycles: {cycles}\n  experiment_order: shuffle\n{seed_line}",
            values.join(", ")
        );
        let f = Files::new();
        let path = f.write("s.yaml", &yaml);
        let p1 = plan_with(&path, Overrides::default(), true, &env()).unwrap();
        // Same content, different formatting: same order.
        let reformatted = f.write("t.yaml", &yaml.replace("sweep:\n  random_seed:", "sweep: \n  random_seed :"));
        let p2 = plan_with(&reformatted, Overrides::default(), true, &env()).unwrap();
        prop_assert_eq!(&p1.runs, &p2.runs);
        for c in 0..cycles {
            let mut seen: Vec<usize> = p1.runs.iter().filter(|r| r.cycle == c).map(|r| r.config).collect();
            seen.sort_unstable();
            prop_assert_eq!(seen, (0..k).collect::<Vec<_>>());
        }
        if let Some(s) = seed {
            prop_assert_eq!(p1.shuffle_seed, Some(i64::from(s) as u64));
        } else {
            prop_assert_eq!(p1.shuffle_seed, Some(p1.design.seed()));
        }
    }

    #[test]
    fn latin_square_balances_carryover_over_whole_sets_of_rows(k in 1usize..16, sets in 1u32..3) {
        let rows = williams_row_count(k) as u32;
        let runs = execution_order(k, rows * sets, ExperimentOrder::LatinSquare, 0);
        let per = if k % 2 == 0 { sets as usize } else { 2 * sets as usize };
        let mut follows = vec![vec![0usize; k]; k];
        let mut first = vec![0usize; k];
        for c in 0..rows * sets {
            let row: Vec<usize> = runs.iter().filter(|r| r.cycle == c).map(|r| r.config).collect();
            let mut sorted = row.clone();
            sorted.sort_unstable();
            prop_assert_eq!(sorted, (0..k).collect::<Vec<_>>());
            first[row[0]] += 1;
            for w in row.windows(2) {
                follows[w[0]][w[1]] += 1;
            }
        }
        for (a, row) in follows.iter().enumerate() {
            prop_assert_eq!(first[a], per, "condition {} first", a);
            for (b, &n) in row.iter().enumerate() {
                prop_assert_eq!(n, if a == b { 0 } else { per }, "{} before {}", a, b);
            }
        }
    }
}

#[test]
fn design_hash_ignores_execution_settings_but_not_config_order() {
    let f = Files::new();
    let a = f.write(
        "a.yaml",
        "model: m\nsweep: {random_seed: [1, 2, 3]}\nstudy_execution: {n_cycles: 2}\n",
    );
    let b = f.write("b.yaml", "model: m\nsweep: {random_seed: [1, 2, 3]}\nstudy_execution: {n_cycles: 5, experiment_order: reverse, cycle_gap_seconds: 1}\n");
    let c = f.write("c.yaml", "model: m\nsweep: {random_seed: [3, 2, 1]}\n");
    let pa = plan_with(&a, Overrides::default(), true, &env()).unwrap();
    let pb = plan_with(&b, Overrides::default(), true, &env()).unwrap();
    let pc = plan_with(&c, Overrides::default(), true, &env()).unwrap();
    assert_eq!(pa.design, pb.design);
    assert_ne!(pa.design, pc.design);
}
