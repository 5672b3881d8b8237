//! Writes an ML.ENERGY raw benchmark tree: `mlenergy_tree parity DIR` (the tree the parity
//! test checks against `mlenergy-data`) or `mlenergy_tree bench DIR N` (N runs, for `bench/`).
#![allow(clippy::unwrap_used, missing_docs)]

#[path = "../tests/support/mlenergy_tree.rs"]
mod tree;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1..) {
        Some([mode, dir]) if mode == "parity" => tree::write_parity_tree(std::path::Path::new(dir)),
        Some([mode, dir, n]) if mode == "bench" => {
            let root = std::path::Path::new(dir);
            let specs = tree::bench_specs(n.parse().unwrap());
            for s in &specs {
                tree::write_run(root, s);
            }
            tree::write_configs(root, &specs);
        }
        _ => {
            eprintln!("usage: mlenergy_tree parity DIR | mlenergy_tree bench DIR N");
            std::process::exit(2);
        }
    }
}
