//! `_study-artefacts/environment.json`: the machine a study session ran on, captured when it
//! started (and again, beside it, for every resumed session).

use serde::{Deserialize, Serialize};

/// The machine and llem build of one study session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentSnapshot {
    /// When it was captured, UTC (ISO 8601).
    pub captured_at: String,
    /// Host name.
    pub host: String,
    /// Operating system (`PRETTY_NAME` of os-release, kernel).
    pub os: String,
    /// CPU model.
    pub cpu_model: Option<String>,
    /// CPUs this process may run on.
    pub cpu_count: usize,
    /// Physical memory, MiB.
    pub memory_total_mib: Option<f64>,
    /// The devices cells are scheduled on (`gpu0`, ... or `cpu`).
    pub devices: Vec<String>,
    /// `CUDA_VISIBLE_DEVICES` as set.
    pub cuda_visible_devices: Option<String>,
    /// llem's version.
    pub llem_version: String,
    /// The commit llem was built from.
    pub git_commit: Option<String>,
}
