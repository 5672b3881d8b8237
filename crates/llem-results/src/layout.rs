//! Where a study's and an experiment's files go and what they are called (seed 001).

use std::path::{Path, PathBuf};

/// A name safe in a directory name: letters, digits, `.`, `_`, `-`; anything else `-`.
pub fn slug(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let out = out.trim_matches('-').to_string();
    if out.is_empty() { "x".into() } else { out }
}

/// The model part of a cell name: the file stem of a GGUF path, the last segment of a hub id.
pub fn model_slug(model: &str) -> String {
    let last = model.rsplit('/').next().unwrap_or(model);
    let stem = last.strip_suffix(".gguf").unwrap_or(last);
    slug(stem)
}

/// `<NNN>_c<cycle>_<model>-<engine>_<hash>`.
pub fn cell_dir_name(index: usize, cycle: u32, model: &str, engine: &str, hash: &str) -> String {
    format!("{index:03}_c{cycle}_{}-{engine}_{hash}", model_slug(model))
}

/// `experiment_id` of a cell, single runs and study cells alike: `<study directory
/// name>_<NNN>_c<cycle>`, unique within a results directory.
pub fn experiment_id(study_dir_name: &str, index: usize, cycle: u32) -> String {
    format!("{study_dir_name}_{index:03}_c{cycle}")
}

/// Most suffixes tried for one name and second before giving up.
const MAX_SAME_SECOND: u32 = 10_000;

/// Creates a new study directory, `<results>/<name>_<stamp>`, or `<name>_<stamp>_2`, `_3`, ...
/// when another run of the same name took that second, and returns it. The claim is
/// exclusive (`create_dir`, not an existence check): two processes never get one directory,
/// so one run's `result.json` never replaces another's.
pub fn create_study_dir(results: &Path, name: &str, stamp: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(results)?;
    for n in 1..=MAX_SAME_SECOND {
        let dir = if n == 1 {
            study_dir(results, name, stamp)
        } else {
            study_dir(results, name, &format!("{stamp}_{n}"))
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AlreadyExists,
        format!(
            "{MAX_SAME_SECOND} runs named `{name}` already started at {stamp} in {}",
            results.display()
        ),
    ))
}

/// `<results>/<name>_<UTC stamp>`.
pub fn study_dir(results: &Path, name: &str, stamp: &str) -> PathBuf {
    results.join(format!("{}_{stamp}", slug(name)))
}

/// File names inside a cell directory.
pub const RESULT: &str = "result.json";
/// The resolved config.
pub const EFFECTIVE_CONFIG: &str = "effective_config.json";
/// Telemetry sidecar.
pub const TIMESERIES: &str = "timeseries.parquet";
/// Per-request sidecar.
pub const REQUESTS: &str = "requests.parquet";
/// The measurement window in time bins, one row per bin.
pub const TIMELINE: &str = "timeline.parquet";
/// The serving engine's Prometheus series, one row per sample.
pub const SERVER_METRICS: &str = "server_metrics.parquet";
/// The serving engine's own log (stdout and stderr of the server or container).
pub const SERVER_LOG: &str = "server.log";
/// The transformers worker's stderr (library logs, Python tracebacks).
pub const WORKER_LOG: &str = "worker.log";
/// What the study runner hands a cell's child process (config, hash, paths).
pub const CELL_SPEC: &str = "cell_spec.json";
/// The cell process's stderr.
pub const CELL_LOG: &str = "cell.log";

/// File names inside a study directory.
pub const MANIFEST: &str = "manifest.json";
/// The final study record.
pub const STUDY_RESULT: &str = "study_result.json";
/// Study-level artefacts (YAML as given, plan, skipped points, environment, baseline cache).
pub const STUDY_ARTEFACTS: &str = "_study-artefacts";
/// A Slurm study's jobs, scripts, task outputs and per-node control cells.
pub const SLURM_DIR: &str = "_slurm";
/// Held (flock) by the process running the study; resume refuses a study whose lock is held.
pub const STUDY_LOCK: &str = ".study.lock";

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_seed_layout() {
        assert_eq!(
            cell_dir_name(1, 0, "SmolLM2-135M-Instruct.Q4_1.gguf", "llamacpp", "ab12"),
            "001_c0_SmolLM2-135M-Instruct.Q4_1-llamacpp_ab12"
        );
        assert_eq!(model_slug("meta-llama/Llama-3.1-8B"), "Llama-3.1-8B");
        assert_eq!(model_slug("/m/dir with space/x y.gguf"), "x-y");
        assert_eq!(slug("///"), "x");
        assert_eq!(
            study_dir(Path::new("results"), "quick start", "2026-11-21T10-00-00"),
            PathBuf::from("results/quick-start_2026-11-21T10-00-00")
        );
    }

    #[test]
    fn two_runs_of_one_name_in_one_second_get_two_directories() {
        let d = tempfile::tempdir().unwrap();
        let results = d.path().join("results");
        let a = create_study_dir(&results, "quick start", "2026-11-24T05-00-00").unwrap();
        let b = create_study_dir(&results, "quick start", "2026-11-24T05-00-00").unwrap();
        assert_ne!(a, b);
        assert!(a.is_dir() && b.is_dir());
        assert!(b.to_string_lossy().ends_with("_2"), "{}", b.display());
    }
}
