//! Mutation fuzzing of a results tree: a real llem study (`fuzz/corpus/results/`, two cells
//! of SmolLM2 on the embedded engine) with one of its files mutated per case — JSON by value
//! (wrong types, extremes, dropped keys) or by byte, Parquet by byte — then loaded, exported
//! in every format and rendered as the HTML report, as `llem results` and `llem report` do.
//! Nothing may panic or take more than 10 s; a run that still loads has no infinite figure.
//!
//! `LLEM_FUZZ_CASES` sets the number of mutants (400 by default; `make fuzz` runs 10 000 in
//! release). A failing mutant is written to `target/fuzz-failures/`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use llem_testkit::mutate;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use llem_records::export::Format;
use llem_records::{Runs, load_any};
use mutate::Rng;

const DICT: &[&[u8]] = &[
    b"\"",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"null",
    b"NaN",
    b"-Infinity",
    b"1e999",
    b"-1",
    b"\\u0000",
    b"\xff",
    b"PAR1",
    b"\0\0\0\0",
];

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/results")
}

fn copy_tree(from: &Path, to: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    std::fs::create_dir_all(to).unwrap();
    let mut entries: Vec<_> = std::fs::read_dir(from)
        .unwrap()
        .map(|e| e.unwrap())
        .collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            files.extend(copy_tree(&e.path(), &dst));
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
            files.push(dst);
        }
    }
    files
}

/// What `llem results export` and `llem report` do with a tree; the number of runs loaded.
fn consume(dir: &Path) -> Result<usize, String> {
    let loaded = load_any(&[dir.to_path_buf()]).map_err(|e| e.to_string())?;
    for issue in &loaded.issues {
        assert!(!issue.reason.is_empty(), "an issue without a reason");
    }
    let runs = Runs::new(loaded.runs, loaded.issues);
    for r in runs.iter() {
        for (name, v) in [
            ("energy_per_token_joules", Some(r.energy_per_token_joules)),
            (
                "steady_state_energy_joules",
                Some(r.steady_state_energy_joules),
            ),
            ("total_output_tokens", r.total_output_tokens),
        ] {
            // NaN marks a figure the source did not have; an infinity is never a figure.
            assert!(!v.is_some_and(f64::is_infinite), "{name} loaded as {v:?}");
        }
    }
    for f in [
        Format::Csv,
        Format::Json,
        Format::Markdown,
        Format::Parquet,
        Format::Boamps,
    ] {
        let _ = f.exporter().serialize(&runs);
    }
    let none = llem_records::DiffusionRuns::default();
    let _ = llem_records::report::render(&runs, &none, None, "fuzz");
    let _ = llem_records::report::render(&runs.stable(), &none, None, "fuzz");
    Ok(runs.len())
}

#[test]
fn no_mutated_results_file_panics_or_hangs_loading_export_or_report() {
    let work = tempfile::tempdir().unwrap();
    let tree = work.path().join("results");
    let files = copy_tree(&corpus(), &tree);
    let originals: Vec<Vec<u8>> = files.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert_eq!(consume(&tree), Ok(2), "the seed tree loads whole");

    // Mutants that once failed (`<file name>--<what>`) stand in for that file of the first
    // cell, every run.
    let regressions = corpus().join("../results-regressions");
    for e in std::fs::read_dir(&regressions).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().into_owned();
        let (target, _) = name.split_once("--").unwrap();
        let i = files.iter().position(|f| f.ends_with(target)).unwrap();
        std::fs::copy(e.path(), &files[i]).unwrap();
        let got = std::panic::catch_unwind(|| consume(&tree));
        std::fs::write(&files[i], &originals[i]).unwrap();
        assert!(got.is_ok(), "{name} panics");
    }

    // The watchdog keeps a copy of the first cell's result when a case hangs.
    let dog = mutate::Watchdog::start("results", files[0].clone());

    let n = mutate::cases(400);
    let (mut whole, mut partial, mut refused, mut panicked) = (0u64, 0u64, 0u64, Vec::new());
    let mut slowest = Duration::ZERO;
    for case in 0..n {
        let mut rng = Rng::new(case);
        let i = rng.below(files.len());
        let (path, original) = (&files[i], &originals[i]);
        let is_json = path.extension().is_some_and(|e| e == "json");
        let mutant = match serde_json::from_slice::<serde_json::Value>(original) {
            Ok(doc) if is_json && rng.below(3) != 0 => {
                serde_json::to_vec(&mutate::json(&mut rng, &doc)).unwrap()
            }
            _ => mutate::bytes(&mut rng, original, DICT, &originals),
        };
        std::fs::write(path, &mutant).unwrap();
        dog.begin(case);
        let t = Instant::now();
        let got = std::panic::catch_unwind(|| consume(&tree));
        slowest = slowest.max(t.elapsed());
        dog.end();
        match got {
            Ok(Ok(2)) => whole += 1,
            Ok(Ok(_)) => partial += 1,
            Ok(Err(_)) => refused += 1,
            Err(_) => {
                let rel = path
                    .strip_prefix(&tree)
                    .unwrap()
                    .to_string_lossy()
                    .replace('/', "__");
                let keep = mutate::failure_dir().join(format!("results-case-{case}-{rel}"));
                std::fs::write(&keep, &mutant).unwrap();
                panicked.push(keep);
            }
        }
        std::fs::write(path, original).unwrap();
    }
    println!(
        "{n} result-file mutants: {whole} loaded both runs, {partial} loaded fewer (the rest \
         reported), {refused} refused the tree, {} panics; slowest {:.1} ms",
        panicked.len(),
        slowest.as_secs_f64() * 1e3
    );
    assert!(panicked.is_empty(), "panics on {panicked:?}");
}
