//! `_study-artefacts/`: what a study was asked to do, as given and as resolved, so a study
//! directory explains itself years later.

use std::path::Path;

use llem_config::StudyPlan;
use serde::Serialize;

use crate::StudyError;

/// The resolved plan (the same JSON as `llem run --dry-run --json`).
pub const PLAN: &str = "plan.json";
/// The study file as given.
pub const STUDY_YAML: &str = "study.yaml";
/// Grid points skipped by validation.
pub const SKIPPED: &str = "skipped_experiments.json";
/// Configurations with equal hashes, and which one ran.
pub const EQUIVALENCE_GROUPS: &str = "equivalence_groups.json";
/// Host, software and devices when the study (or a resume of it) started.
pub const ENVIRONMENT: &str = "environment.json";

#[derive(Serialize)]
struct EquivalenceGroup<'a> {
    config_hash: String,
    kept: &'a str,
    duplicates: Vec<&'a str>,
}

/// Groups of configurations that hash the same: the kept one and the ones not run.
pub fn equivalence_groups(plan: &StudyPlan) -> serde_json::Value {
    let mut groups: Vec<EquivalenceGroup<'_>> = Vec::new();
    for d in &plan.duplicates {
        let Some(kept) = plan.configs.get(d.duplicate_of) else {
            continue;
        };
        match groups.iter_mut().find(|g| g.config_hash == d.config_hash) {
            Some(g) => g.duplicates.push(&d.label),
            None => groups.push(EquivalenceGroup {
                config_hash: d.config_hash.clone(),
                kept: &kept.label,
                duplicates: vec![&d.label],
            }),
        }
    }
    serde_json::to_value(groups).unwrap_or_default()
}

/// Skipped grid points as seed 001's `{raw_config, reason, errors}`.
pub fn skipped_experiments(plan: &StudyPlan) -> Vec<serde_json::Value> {
    plan.skipped
        .iter()
        .map(|s| {
            serde_json::json!({
                "label": s.label,
                "raw_config": s.config,
                "reason": s.reason,
                "errors": s.errors,
            })
        })
        .collect()
}

fn create(dir: &Path) -> Result<(), StudyError> {
    std::fs::create_dir_all(dir).map_err(|source| StudyError::Io {
        what: "cannot create",
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes the artefacts of a new study.
pub fn write_new(
    dir: &Path,
    plan: &StudyPlan,
    environment: &llem_results::EnvironmentSnapshot,
) -> Result<(), StudyError> {
    create(dir)?;
    if let Some(src) = &plan.source {
        let bytes = std::fs::read(src).map_err(|source| StudyError::Io {
            what: "cannot read",
            path: src.clone(),
            source,
        })?;
        // The copy keeps the file as written, less the credentials of its runner URLs.
        let secrets = llem_config::credentials::secrets(plan.configs.iter().map(|c| &c.config));
        let bytes = if secrets.is_empty() {
            bytes
        } else {
            let known: Vec<&str> = secrets.iter().map(String::as_str).collect();
            llem_config::redact::text(&String::from_utf8_lossy(&bytes), &known)
                .into_owned()
                .into_bytes()
        };
        llem_results::write_atomic(&dir.join(STUDY_YAML), &bytes)?;
    }
    llem_results::write_json_atomic(&dir.join(PLAN), plan)?;
    llem_results::write_json_atomic(&dir.join(SKIPPED), &skipped_experiments(plan))?;
    llem_results::write_json_atomic(&dir.join(EQUIVALENCE_GROUPS), &equivalence_groups(plan))?;
    llem_results::write_json_atomic(&dir.join(ENVIRONMENT), environment)?;
    Ok(())
}

/// Records the environment of a resumed session beside the first one's.
pub fn write_resumed(
    dir: &Path,
    stamp: &str,
    environment: &llem_results::EnvironmentSnapshot,
) -> Result<(), StudyError> {
    create(dir)?;
    let name = format!("environment_resumed_{stamp}.json");
    llem_results::write_json_atomic(&dir.join(name), environment)?;
    Ok(())
}
