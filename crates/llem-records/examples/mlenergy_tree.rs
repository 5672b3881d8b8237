//! Writes an ML.ENERGY raw benchmark tree: `mlenergy_tree parity DIR` (the tree the parity
//! test checks against `mlenergy-data`), `mlenergy_tree bench DIR N` (N runs, many per model,
//! for `bench/`) or `mlenergy_tree sparse DIR N` (N runs, about one per model).
#![allow(clippy::unwrap_used, missing_docs)]

use llem_testkit::mlenergy_tree as tree;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1..) {
        Some([mode, dir]) if mode == "parity" => tree::write_parity_tree(std::path::Path::new(dir)),
        Some([mode, dir, n]) if mode == "bench" || mode == "sparse" => {
            let root = std::path::Path::new(dir);
            let n = n.parse().unwrap();
            let specs = if mode == "bench" {
                tree::bench_specs(n)
            } else {
                tree::sparse_specs(n)
            };
            for s in &specs {
                tree::write_run(root, s);
            }
            tree::write_configs(root, &specs);
        }
        _ => {
            eprintln!("usage: mlenergy_tree parity DIR | mlenergy_tree bench|sparse DIR N");
            std::process::exit(2);
        }
    }
}
