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
    let text = std::fs::read_to_string(&path).map_err(|e| StudyError::BadManifest {
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
    let old: Option<Value> = std::fs::read_to_string(&old_path)
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

/// `(label, config)` of each distinct configuration in a serialised plan, in index order.
fn configs_of(plan: &Value) -> Vec<(String, Value)> {
    let mut by_index: BTreeMap<u64, (String, Value)> = BTreeMap::new();
    for run in plan
        .get("runs")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(i) = run.get("config_index").and_then(Value::as_u64) else {
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use serde_json::json;

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
