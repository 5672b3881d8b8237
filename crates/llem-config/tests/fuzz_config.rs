//! Mutation fuzzing of configuration files: every seed study in `examples/` and every
//! hostile input in `fuzz/corpus/config/`, then mutants of them (byte flips, YAML tokens,
//! deletions, splices, truncations), planned as `llem run --dry-run` would. No input may
//! panic the planner or keep it busy for more than 10 s; an error is fine, and expected.
//!
//! `LLEM_FUZZ_CASES` sets the number of mutants (3 000 by default, a few seconds; the
//! figures in issue notes come from `make fuzz`, 100 000 in release). A failing mutant is
//! written to `target/fuzz-failures/` and reproduced by its case number.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use llem_testkit::mutate;

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mutate::Rng;

/// YAML and llem tokens the mutator inserts.
const DICT: &[&[u8]] = &[
    b": ",
    b"- ",
    b"\n",
    b"\n  ",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b"&a ",
    b"*a",
    b"<<: *a\n",
    b"!!binary ",
    b"? ",
    b"|\n",
    b">-\n",
    b"'",
    b"\"",
    b"\\u0000",
    b"#",
    b"\t",
    b"\xff\xfe",
    b"\xe9",
    b"~",
    b"null",
    b".nan",
    b"-.inf",
    b"1e309",
    b"-1",
    b"0",
    b"4294967296",
    b"18446744073709551616",
    b"1e-300",
    b"_extends: ",
    b"base: ",
    b"sweep:\n  ",
    b"experiments:\n  - ",
    b"engine: [vllm, llamacpp]\n",
    b"study_execution: {n_cycles: 4294967295}\n",
    b"traffic: {arrival: gamma, rate_qps: 1e-300, burstiness: 1e300}\n",
    b"dataset.n_prompts: [1, 2]",
    b"llamacpp.batch_size: ",
    b"/dev/zero",
    b"minimal.yaml",
    b"base-experiment.yaml",
];

/// Scalars put in place of a value: wrong types, extremes, names of the wrong kind.
const VALUES: &[&[u8]] = &[
    b"0",
    b"-1",
    b"1",
    b"2",
    b"0.5",
    b"1e308",
    b"-1e308",
    b"1e-300",
    b"4294967295",
    b"4294967296",
    b"18446744073709551615",
    b".nan",
    b".inf",
    b"-.inf",
    b"null",
    b"~",
    b"true",
    b"\"\"",
    b"[]",
    b"{}",
    b"[1, 2, 3]",
    b"[float16, float32, bfloat16]",
    b"vllm",
    b"llamacpp",
    b"transformers",
    b"openai",
    b"[vllm, sglang, tgi, tensorrt, llamacpp]",
    b"poisson",
    b"gamma",
    b"shuffle",
    b"latin_square",
    b"windowed",
    b"steady_state",
    b"float16",
    b"int4",
    b"external:http://127.0.0.1:1",
    b"docker",
    b"/dev/zero",
    b"minimal.yaml",
    b"x",
];

/// Where the seeds live: the seed studies and the hostile corpus.
fn seed_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut out = Vec::new();
    for dir in [root.join("examples/seed"), root.join("fuzz/corpus/config")] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        files.sort();
        out.extend(files);
    }
    assert!(out.len() >= 20, "{out:?}");
    out
}

#[test]
fn no_configuration_file_panics_or_hangs_the_planner() {
    let seeds = seed_files();
    let texts: Vec<Vec<u8>> = seeds.iter().map(|p| std::fs::read(p).unwrap()).collect();
    // The mutants live beside copies of every seed, so `base:` and `_extends` resolve.
    let work = tempfile::tempdir().unwrap();
    for (p, t) in seeds.iter().zip(&texts) {
        std::fs::write(work.path().join(p.file_name().unwrap()), t).unwrap();
    }
    let target = work.path().join("mutant.yaml");
    let env = common::env();
    let dog = mutate::Watchdog::start("config", target.clone());

    let n = mutate::cases(3_000);
    let (mut planned, mut refused, mut panicked) = (0u64, 0u64, Vec::new());
    let mut slowest = Duration::ZERO;
    // The seeds themselves first (the hostile corpus must be refused cleanly), then mutants.
    let total = texts.len() as u64 + n;
    for case in 0..total {
        let text = match texts.get(case as usize) {
            Some(t) => t.clone(),
            None => {
                let mut rng = Rng::new(case);
                let seed = rng.pick(&texts).unwrap().clone();
                if rng.below(2) == 0 {
                    mutate::scalars(&mut rng, &seed, VALUES)
                } else {
                    mutate::bytes(&mut rng, &seed, DICT, &texts)
                }
            }
        };
        std::fs::write(&target, &text).unwrap();
        dog.begin(case);
        let t = Instant::now();
        let got =
            std::panic::catch_unwind(|| common::plan_with(&target, Default::default(), true, &env));
        slowest = slowest.max(t.elapsed());
        dog.end();
        match got {
            Ok(Ok(_)) => planned += 1,
            Ok(Err(e)) => {
                // An error always says something and renders.
                assert!(!e.diagnostics.is_empty(), "case {case}: an empty error");
                let _ = e.to_string();
                refused += 1;
            }
            Err(_) => {
                let keep = mutate::failure_dir().join(format!("config-case-{case}.yaml"));
                std::fs::write(&keep, &text).unwrap();
                panicked.push(keep);
            }
        }
    }
    println!(
        "{total} configuration files ({} seeds, {n} mutants): {planned} planned, {refused} \
         refused with an error, {} panics; slowest {:.1} ms",
        texts.len(),
        panicked.len(),
        slowest.as_secs_f64() * 1e3
    );
    assert!(panicked.is_empty(), "panics on {panicked:?}");
    assert!(
        refused > 0 && planned > 0,
        "the mutants do not reach both outcomes"
    );
}
