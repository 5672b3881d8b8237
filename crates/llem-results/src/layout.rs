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
/// Held (flock) by the process running the study; resume refuses a study whose lock is held.
pub const STUDY_LOCK: &str = ".study.lock";

#[cfg(test)]
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
}
