//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use llem_config::{ConfigError, Env, Overrides, PlanRequest, StudyPlan};

/// An environment that never reads the developer's own user config.
pub fn env() -> Env {
    Env::from_pairs([("LLEM_CONFIG_PATH", "/nonexistent/llem-tests/config.yaml")])
}

/// `examples/` at the repository root.
pub fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Plans a file with default options.
pub fn plan_path(path: &Path) -> Result<StudyPlan, ConfigError> {
    plan_with(path, Overrides::default(), true, &env())
}

/// Plans a file with options.
pub fn plan_with(
    path: &Path,
    overrides: Overrides,
    dedup: bool,
    env: &Env,
) -> Result<StudyPlan, ConfigError> {
    llem_config::plan(&PlanRequest {
        config: Some(path),
        config_dir: None,
        overrides,
        dedup,
        env,
    })
}

/// A temporary directory holding YAML files.
pub struct Files {
    pub dir: tempfile::TempDir,
}

impl Files {
    pub fn new() -> Files {
        Files {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn plan(&self, name: &str, text: &str) -> Result<StudyPlan, ConfigError> {
        let p = self.write(name, text);
        plan_path(&p)
    }
}

/// Plans YAML text written to a temporary `study.yaml`.
pub fn plan_text(text: &str) -> Result<StudyPlan, ConfigError> {
    Files::new().plan("study.yaml", text)
}

/// The resolved configurations as JSON, in plan order.
pub fn configs_json(plan: &StudyPlan) -> Vec<serde_json::Value> {
    plan.configs
        .iter()
        .map(|c| serde_json::to_value(&c.config).unwrap())
        .collect()
}
