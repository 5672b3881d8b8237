//! The records benchmark's llem side: `records_bench raw ROOT` or `records_bench parquet
//! FILE ROOT` loads, filters and groups, and prints `seconds runs groups` (best of 3).
#![allow(clippy::unwrap_used, missing_docs)]

use std::path::PathBuf;
use std::time::Instant;

use llem_records::Runs;
use llem_records::raw_tree::RawOptions;

fn work(load: &dyn Fn() -> Runs) -> (f64, usize, usize) {
    let t = Instant::now();
    let runs = load();
    let picked = runs.task("gpqa").batch_range(16..=512).stable();
    let groups = runs.group_by(&["model_id", "num_gpus"]).unwrap();
    let e: f64 = picked.data().energy_per_token_joules.iter().sum();
    assert!(e.is_finite());
    (t.elapsed().as_secs_f64(), runs.len(), groups.len())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let load: Box<dyn Fn() -> Runs> = match args.get(1..) {
        Some([mode, root]) if mode == "raw" => {
            let root = PathBuf::from(root);
            Box::new(move || {
                Runs::from_raw_results(std::slice::from_ref(&root), &RawOptions::default()).unwrap()
            })
        }
        Some([mode, file, root]) if mode == "parquet" => {
            let (file, root) = (PathBuf::from(file), PathBuf::from(root));
            Box::new(move || Runs::from_parquet(&file, Some(&root)).unwrap())
        }
        Some([mode, root, out]) if mode == "compile" => {
            let runs =
                Runs::from_raw_results(&[PathBuf::from(root)], &RawOptions::default()).unwrap();
            runs.write_parquet(&PathBuf::from(out), Some(&PathBuf::from(root)))
                .unwrap();
            return;
        }
        _ => {
            eprintln!("usage: records_bench raw ROOT | parquet FILE ROOT | compile ROOT OUT");
            std::process::exit(2);
        }
    };
    let best = (0..3)
        .map(|_| work(&*load))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .unwrap();
    println!("{:.4} {} {}", best.0, best.1, best.2);
}
