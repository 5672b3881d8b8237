//! Resume: find the study to continue, refuse one whose design changed (saying what changed),
//! and carry its completed cells over.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use llem_config::StudyPlan;
use llem_results::layout;
use llem_results::{CellStatus, Manifest, StudyStatus};
use serde_json::Value;

use crate::StudyError;

/// Reads a study directory's manifest.
pub fn load_manifest(dir: &Path) -> Result<Manifest, StudyError> {
    let path = dir.join(layout::MANIFEST);
    let text =
        llem_config::files::read_record_string(&path).map_err(|e| StudyError::BadManifest {
            path: path.clone(),
            message: if e.kind() == std::io::ErrorKind::NotFound {
                "no manifest.json: not a study directory".to_string()
            } else {
                e.to_string()
            },
        })?;
    serde_json::from_str(&text).map_err(|e| StudyError::BadManifest {
        path,
        message: e.to_string(),
    })
}

/// The study directory `resume` names for `plan` under `results`: `None` for a new study, the
/// given directory, or the latest unfinished study of the plan's name and file.
pub fn resume_target(
    plan: &llem_config::StudyPlan,
    results: &Path,
    resume: &crate::ResumeFrom,
) -> Result<Option<PathBuf>, StudyError> {
    match resume {
        crate::ResumeFrom::New => Ok(None),
        crate::ResumeFrom::Dir(d) => Ok(Some(d.clone())),
        crate::ResumeFrom::Latest => {
            let source = plan
                .source
                .as_ref()
                .map(|p| std::fs::canonicalize(p).unwrap_or_else(|_| p.clone()));
            find_resumable(results, &plan.study_name, source.as_deref()).map(Some)
        }
    }
}

/// The most recent study of this name (and, when both know it, this file) under `results`
/// that did not complete.
pub fn find_resumable(
    results: &Path,
    study_name: &str,
    source: Option<&Path>,
) -> Result<PathBuf, StudyError> {
    let prefix = format!("{}_", layout::slug(study_name));
    let source = source.map(|s| s.display().to_string());
    let mut best: Option<(String, PathBuf)> = None;
    let entries = std::fs::read_dir(results).map_err(|_| StudyError::NothingToResume {
        name: study_name.to_string(),
        dir: results.to_path_buf(),
    })?;
    for e in entries.flatten() {
        let dir = e.path();
        let is_candidate = e
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(&prefix));
        if !is_candidate || !dir.is_dir() {
            continue;
        }
        // Unreadable manifests are not candidates; --resume-dir names one explicitly.
        let Ok(m) = load_manifest(&dir) else { continue };
        if m.study_name != study_name || m.status == StudyStatus::Completed {
            continue;
        }
        if let (Some(a), Some(b)) = (&m.source_file, &source)
            && a != b
        {
            continue;
        }
        if best.as_ref().is_none_or(|(t, _)| m.start_time > *t) {
            best = Some((m.start_time.clone(), dir));
        }
    }
    best.map(|(_, d)| d)
        .ok_or_else(|| StudyError::NothingToResume {
            name: study_name.to_string(),
            dir: results.to_path_buf(),
        })
}

/// What differs between the plan a study started with (its `_study-artefacts/plan.json`) and
/// the plan now, one line per difference (at most 12).
pub fn drift_details(dir: &Path, plan: &StudyPlan) -> Vec<String> {
    let old_path = dir
        .join(layout::STUDY_ARTEFACTS)
        .join(crate::artefacts::PLAN);
    let old: Option<Value> = llem_config::files::read_record_string(&old_path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let Some(old) = old else {
        return vec![format!(
            "{} is missing, so the fields that changed cannot be named",
            old_path.display()
        )];
    };
    let new = serde_json::to_value(plan).unwrap_or_default();
    let (old_cfgs, new_cfgs) = (configs_of(&old), configs_of(&new));
    let mut out = Vec::new();
    if old_cfgs.len() != new_cfgs.len() {
        out.push(format!(
            "number of configurations: {} then, {} now",
            old_cfgs.len(),
            new_cfgs.len()
        ));
    }
    for (i, (o, n)) in old_cfgs.iter().zip(&new_cfgs).enumerate() {
        let mut diffs = Vec::new();
        diff_values("", &o.1, &n.1, &mut diffs);
        for d in diffs {
            out.push(format!("configuration {} ({}): {d}", i + 1, n.0));
        }
    }
    if out.is_empty() {
        out.push("the configurations' order or hashing changed".to_string());
    }
    if out.len() > 12 {
        let more = out.len() - 12;
        out.truncate(12);
        out.push(format!("... and {more} more"));
    }
    out
}

/// `(label, config)` of each distinct configuration in a serialised plan, in index order:
/// its `configurations`, or (a plan.json written before those) the configuration its runs
/// carried.
fn configs_of(plan: &Value) -> Vec<(String, Value)> {
    let mut by_index: BTreeMap<u64, (String, Value)> = BTreeMap::new();
    let listed = plan.get("configurations").and_then(Value::as_array);
    let entries = listed.or_else(|| plan.get("runs").and_then(Value::as_array));
    let index_key = if listed.is_some() {
        "index"
    } else {
        "config_index"
    };
    for run in entries.into_iter().flatten() {
        let Some(i) = run.get(index_key).and_then(Value::as_u64) else {
            continue;
        };
        let label = run
            .get("label")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let config = run.get("config").cloned().unwrap_or(Value::Null);
        by_index.entry(i).or_insert((label, config));
    }
    by_index.into_values().collect()
}

fn diff_values(path: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                let (x, y) = (
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                );
                diff_values(&p, x, y, out);
            }
        }
        _ if old != new => out.push(format!("{path}: {old} then, {new} now")),
        _ => {}
    }
}

/// Carries completed cells of `old` into `fresh` (built from the plan now), by
/// (configuration hash, cycle); everything else starts again as pending. Keeps the old start
/// time, accumulated wall time and warnings.
pub fn merge(old: &Manifest, mut fresh: Manifest) -> Manifest {
    for e in &mut fresh.experiments {
        if let Some(o) = old
            .experiments
            .iter()
            .find(|o| o.config_hash == e.config_hash && o.cycle == e.cycle)
        {
            e.attempts = o.attempts;
            if o.status == CellStatus::Completed {
                let index = e.index;
                *e = o.clone();
                e.index = index;
            } else if o.cell_dir != e.cell_dir {
                // Keep the directory the earlier attempt used, so its log sits beside the rerun.
                e.cell_dir = o.cell_dir.clone();
            }
        }
    }
    fresh.start_time = old.start_time.clone();
    fresh.summary.total_wall_time_s = old.summary.total_wall_time_s;
    fresh.summary.warnings = old.summary.warnings.clone();
    fresh.recount();
    fresh
}

/// A search's manifest on resume: its entries are the proposals made so far, kept as they were
/// (a failed run is one of the search's measurements, not a cell to run again); one that was
/// running when the runner died runs again.
pub fn merge_search(old: &Manifest, mut fresh: Manifest) -> Manifest {
    fresh.experiments = old.experiments.clone();
    for e in &mut fresh.experiments {
        if e.status == CellStatus::Running {
            e.status = CellStatus::Pending;
            e.pid = None;
        }
    }
    fresh.start_time = old.start_time.clone();
    fresh.summary.total_wall_time_s = old.summary.total_wall_time_s;
    fresh.summary.warnings = old.summary.warnings.clone();
    fresh.recount();
    fresh
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;

    #[test]
    fn configurations_are_read_from_either_plan_layout() {
        let new = serde_json::json!({
            "configurations": [{"index": 0, "label": "a", "config": {"x": 1}}],
            "runs": [{"config_index": 0, "label": "a"}]
        });
        let old = serde_json::json!({"runs": [
            {"config_index": 0, "label": "a", "config": {"x": 1}},
            {"config_index": 0, "label": "a", "config": {"x": 1}}
        ]});
        let want = vec![("a".to_string(), serde_json::json!({"x": 1}))];
        assert_eq!(configs_of(&new), want);
        assert_eq!(configs_of(&old), want);
    }
    use serde_json::json;

    fn entry(index: usize, hash: &str, cycle: u32, status: &str, dir: &str) -> Value {
        json!({"index": index, "config_hash": hash, "config_summary": hash, "cycle": cycle,
               "status": status, "cell_dir": dir, "result_file": null, "log_file": null,
               "error_type": null, "error_message": null, "started_at": null,
               "completed_at": null, "pid": null, "attempts": 1, "elapsed_seconds": null,
               "inference_seconds": null, "energy_joules": 2.0, "adj_energy_joules": null,
               "throughput_tok_s": null, "mj_per_tok": null, "mj_per_tok_adjusted": null,
               "ttft_p50_ms": null})
    }

    fn manifest(name: &str, start: &str, status: &str, entries: Vec<Value>) -> Manifest {
        serde_json::from_value(json!({
            "schema_version": "2.0", "study_name": name, "study_design_hash": "h",
            "llem_version": "0", "source_file": null, "start_time": start, "end_time": null,
            "status": status, "runner_pid": null, "host": "x", "measurement_protocol": {},
            "experiments": entries,
            "summary": {"total_experiments": 0, "completed": 0, "failed": 0, "skipped": 0,
                        "interrupted": 0, "pending": 0, "running": 0,
                        "total_wall_time_s": 12.5, "total_energy_j": 0.0,
                        "unique_configurations": null, "warnings": ["old"]}
        }))
        .unwrap()
    }

    #[test]
    fn merge_keeps_completed_pairs_and_reruns_the_rest_in_their_old_directories() {
        let old = manifest(
            "s",
            "2026-01-01T00:00:00.000Z",
            "interrupted",
            vec![
                entry(1, "a", 0, "completed", "001_a"),
                entry(2, "a", 1, "failed", "002_a"),
            ],
        );
        let mut fresh = manifest(
            "s",
            "2026-02-01T00:00:00.000Z",
            "running",
            vec![
                entry(2, "a", 0, "pending", "002_a_new"),
                entry(1, "a", 1, "pending", "001_a_new"),
                entry(3, "b", 0, "pending", "003_b"),
            ],
        );
        for e in &mut fresh.experiments {
            e.attempts = 0;
        }
        let m = merge(&old, fresh);
        let e = &m.experiments;
        assert_eq!(e[0].status, CellStatus::Completed);
        assert_eq!((e[0].index, e[0].cell_dir.as_str()), (2, "001_a"));
        assert_eq!(e[1].status, CellStatus::Pending);
        assert_eq!((e[1].cell_dir.as_str(), e[1].attempts), ("002_a", 1));
        assert_eq!((e[2].cell_dir.as_str(), e[2].attempts), ("003_b", 0));
        assert_eq!(m.start_time, "2026-01-01T00:00:00.000Z");
        assert_eq!(m.summary.total_wall_time_s, 12.5);
        assert_eq!((m.summary.completed, m.summary.pending), (1, 2));
        assert_eq!(m.summary.total_energy_j, 2.0);
    }

    #[test]
    fn the_most_recent_unfinished_study_of_the_name_is_found() {
        let root = tempfile::tempdir().unwrap();
        let write = |dir: &str, m: &Manifest| {
            let d = root.path().join(dir);
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("manifest.json"), serde_json::to_string(m).unwrap()).unwrap();
        };
        let at = |t: &str, st: &str| manifest("sweep", t, st, vec![]);
        write("sweep_1", &at("2026-01-01T00:00:00.000Z", "interrupted"));
        write("sweep_2", &at("2026-03-01T00:00:00.000Z", "timed_out"));
        write("sweep_3", &at("2026-04-01T00:00:00.000Z", "completed"));
        write(
            "sweepx_4",
            &manifest("sweepx", "2026-05-01T00:00:00.000Z", "failed", vec![]),
        );
        std::fs::create_dir_all(root.path().join("sweep_5")).unwrap();
        let found = find_resumable(root.path(), "sweep", None).unwrap();
        assert_eq!(found, root.path().join("sweep_2"));
        assert!(matches!(
            find_resumable(root.path(), "other", None),
            Err(StudyError::NothingToResume { .. })
        ));
    }

    #[test]
    fn diff_names_changed_leaves() {
        let mut out = Vec::new();
        diff_values(
            "",
            &json!({"model": "a", "dataset": {"n_prompts": 10, "source": "x"}}),
            &json!({"model": "a", "dataset": {"n_prompts": 20, "source": "x"}, "dtype": "f16"}),
            &mut out,
        );
        assert_eq!(
            out,
            vec![
                "dataset.n_prompts: 10 then, 20 now".to_string(),
                "dtype: null then, \"f16\" now".to_string()
            ]
        );
    }
}
