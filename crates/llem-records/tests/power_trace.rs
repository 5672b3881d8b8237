//! The power timeline the report draws, on real llem output: the fuzz corpus's first cell
//! (SmolLM2 on the embedded engine, CPU package and DRAM from RAPL, each domain read a few
//! microseconds after the other in every tick).
#![allow(clippy::unwrap_used, clippy::indexing_slicing)]

use std::path::Path;

use llem_records::Runs;
use llem_records::extract::power_trace;

#[test]
fn a_cpu_run_plots_package_plus_dram_at_every_tick() {
    let tree = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/results");
    let runs = Runs::from_directory(&tree).unwrap();
    let run = runs
        .iter()
        .find(|r| r.results_path.contains("001_c0_"))
        .unwrap();
    let ts = llem_results::read_timeseries(
        &Path::new(&run.results_path).with_file_name(llem_results::layout::TIMESERIES),
    )
    .unwrap();
    let of = |domain: &str| -> Vec<f64> {
        (0..ts.len())
            .filter(|&i| ts.domain[i] == domain)
            .map(|i| ts.power_w[i].unwrap())
            .collect()
    };
    let (package, dram) = (of("package-0"), of("dram-0"));
    assert_eq!(package.len(), dram.len());
    let (trace, _) = power_trace(run).unwrap();
    let plotted: Vec<f64> = trace.iter().map(|(_, w)| *w).collect();
    let expected: Vec<f64> = package.iter().zip(&dram).map(|(p, d)| p + d).collect();
    assert_eq!(plotted.len(), expected.len());
    for (got, want) in plotted.iter().zip(&expected) {
        assert!((got - want).abs() < 1e-9, "{plotted:?} vs {expected:?}");
    }
}
