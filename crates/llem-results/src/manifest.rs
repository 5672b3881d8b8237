//! `manifest.json`: the study checkpoint, rewritten atomically on every state change (seed 001).
//!
//! Field names follow seed 001 (`study_name`, `study_design_hash`, `start_time`, `end_time`,
//! `experiments`, `summary`); the per-cell fields follow the Python original's checkpoint
//! entries, plus what resume and a live reader need (cell directory, process id, attempts).

use serde::{Deserialize, Serialize};

/// Manifest schema version.
pub const MANIFEST_SCHEMA_VERSION: &str = "2.0";

/// State of one cell (a configuration in a cycle).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CellStatus {
    /// Not started yet.
    Pending,
    /// Its process is running.
    Running,
    /// Finished with a result.
    Completed,
    /// Finished without a result (error, crash, timeout).
    Failed,
    /// Not run: the study stopped first (circuit breaker, wall-clock limit).
    Skipped,
    /// Stopped by the user or the study's wall-clock limit while running.
    Interrupted,
}

impl CellStatus {
    /// Name as written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            CellStatus::Pending => "pending",
            CellStatus::Running => "running",
            CellStatus::Completed => "completed",
            CellStatus::Failed => "failed",
            CellStatus::Skipped => "skipped",
            CellStatus::Interrupted => "interrupted",
        }
    }
}

/// State of the whole study.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StudyStatus {
    /// Cells are running (or the runner died: see [`crate::layout::STUDY_LOCK`]).
    Running,
    /// Every cell completed.
    Completed,
    /// Ran to the end, but at least one cell failed.
    Failed,
    /// Stopped by the user.
    Interrupted,
    /// The circuit breaker stopped it; the remaining cells are skipped.
    CircuitBreaker,
    /// The wall-clock limit stopped it; the remaining cells are skipped.
    TimedOut,
}

impl StudyStatus {
    /// Name as written in the manifest.
    pub fn as_str(self) -> &'static str {
        match self {
            StudyStatus::Running => "running",
            StudyStatus::Completed => "completed",
            StudyStatus::Failed => "failed",
            StudyStatus::Interrupted => "interrupted",
            StudyStatus::CircuitBreaker => "circuit_breaker",
            StudyStatus::TimedOut => "timed_out",
        }
    }
}

/// One cell's checkpoint record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ManifestEntry {
    /// 1-based position in execution order.
    pub index: usize,
    /// `measurement_config_hash` of the configuration.
    pub config_hash: String,
    /// What distinguishes the configuration within the study.
    pub config_summary: String,
    /// Cycle, from 0.
    pub cycle: u32,
    /// State.
    pub status: CellStatus,
    /// Cell directory, relative to the study directory.
    pub cell_dir: String,
    /// `result.json`, relative to the study directory, once completed.
    pub result_file: Option<String>,
    /// The cell process's stderr, relative to the study directory.
    pub log_file: Option<String>,
    /// Class of failure: `EngineError`, `Crashed`, `Timeout`, `Interrupted`, ...
    pub error_type: Option<String>,
    /// What went wrong, in words.
    pub error_message: Option<String>,
    /// When the cell's process started (ISO-8601 UTC).
    pub started_at: Option<String>,
    /// When it ended (ISO-8601 UTC).
    pub completed_at: Option<String>,
    /// Process id of the cell's process while it runs (its process group id too).
    pub pid: Option<u32>,
    /// Times this cell was started (resume re-runs count).
    #[serde(default)]
    pub attempts: u32,
    /// The host the cell ran on, when the study ran under Slurm (its nodes differ).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The Slurm job of its last attempt, `ARRAYJOB_TASK` (array job id, task index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<String>,
    /// Wall-clock seconds of the cell process.
    pub elapsed_seconds: Option<f64>,
    /// `total_inference_time_sec` of the result.
    pub inference_seconds: Option<f64>,
    /// `total_energy_j`.
    pub energy_joules: Option<f64>,
    /// `energy_adjusted_j`.
    pub adj_energy_joules: Option<f64>,
    /// `energy_scope` of the result (`gpu` or `cpu`).
    #[serde(default)]
    pub energy_scope: Option<String>,
    /// `system_energy_j`.
    #[serde(default)]
    pub system_energy_joules: Option<f64>,
    /// `node_energy_j`: the whole node (BMC or power meter).
    #[serde(default)]
    pub node_energy_joules: Option<f64>,
    /// `unattributed_j`: the node less the measured components.
    #[serde(default)]
    pub unattributed_joules: Option<f64>,
    /// `emissions.co2_g`.
    #[serde(default)]
    pub co2_g: Option<f64>,
    /// `emissions.system_co2_g`.
    #[serde(default)]
    pub system_co2_g: Option<f64>,
    /// `avg_tokens_per_second`.
    pub throughput_tok_s: Option<f64>,
    /// `mj_per_tok_total`.
    pub mj_per_tok: Option<f64>,
    /// `mj_per_tok_adjusted`.
    pub mj_per_tok_adjusted: Option<f64>,
    /// Median time to first token, ms.
    pub ttft_p50_ms: Option<f64>,
    /// `lifecycle_energy_j`: every phase of the cell (baseline, load, warmup, floor, window,
    /// teardown) on the headline's devices, J.
    #[serde(default)]
    pub lifecycle_energy_joules: Option<f64>,
    /// The resolved configuration (seed 001: each entry carries it), as `effective_config.json`
    /// of the cell holds it; absent in manifests written before llem wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<RawConfig>,
}

/// A configuration as compact JSON text, kept unparsed: a large study's manifest holds
/// thousands, and is read and rewritten at every checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RawConfig(pub Box<serde_json::value::RawValue>);

impl RawConfig {
    /// The configuration serialised compactly.
    pub fn of<T: Serialize>(config: &T) -> Option<RawConfig> {
        serde_json::value::to_raw_value(config).ok().map(RawConfig)
    }

    /// The configuration as a JSON value.
    pub fn to_value(&self) -> Option<serde_json::Value> {
        serde_json::from_str(self.0.get()).ok()
    }
}

impl PartialEq for RawConfig {
    fn eq(&self, other: &Self) -> bool {
        self.0.get() == other.0.get()
    }
}

/// Aggregate counters (seed 001 `summary`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StudySummary {
    /// Cells planned (configurations x cycles).
    pub total_experiments: usize,
    /// Cells completed.
    pub completed: usize,
    /// Cells failed.
    pub failed: usize,
    /// Cells skipped.
    pub skipped: usize,
    /// Cells interrupted.
    pub interrupted: usize,
    /// Cells not yet run.
    pub pending: usize,
    /// Cells running now.
    pub running: usize,
    /// Wall-clock seconds since the study started (over all resumed sessions).
    pub total_wall_time_s: f64,
    /// Sum of `total_energy_j` over completed cells.
    pub total_energy_j: f64,
    /// Sum of `system_energy_j` over completed cells that have one.
    #[serde(default)]
    pub total_system_energy_j: Option<f64>,
    /// Sum of `node_energy_j` over completed cells measured with a node power sensor.
    #[serde(default)]
    pub total_node_energy_j: Option<f64>,
    /// Sum of `unattributed_j` over the same cells.
    #[serde(default)]
    pub total_unattributed_j: Option<f64>,
    /// Sum of `lifecycle_energy_j` over completed cells that have one: what the study spent
    /// on the headline's devices, its measurement windows among it.
    #[serde(default)]
    pub total_lifecycle_energy_j: Option<f64>,
    /// Sum of `emissions.co2_g` over completed cells that have one, g.
    #[serde(default)]
    pub total_co2_g: Option<f64>,
    /// Sum of `emissions.system_co2_g` over completed cells that have one, g.
    #[serde(default)]
    pub total_system_co2_g: Option<f64>,
    /// Distinct configurations: `total_experiments / n_cycles`.
    pub unique_configurations: Option<usize>,
    /// Warnings raised while the study ran.
    pub warnings: Vec<String>,
}

/// `manifest.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Manifest schema version.
    pub schema_version: String,
    /// Study name (the directory's prefix).
    pub study_name: String,
    /// 16-hex SHA-256 of the resolved experiment list (execution block excluded).
    pub study_design_hash: String,
    /// llem version that wrote it.
    pub llem_version: String,
    /// The study file, as given on the command line (absolute).
    pub source_file: Option<String>,
    /// Study start (ISO-8601 UTC).
    pub start_time: String,
    /// Study end (ISO-8601 UTC), once it stopped.
    pub end_time: Option<String>,
    /// Overall state.
    pub status: StudyStatus,
    /// Process id of the runner, while it runs.
    pub runner_pid: Option<u32>,
    /// Host it runs on.
    pub host: String,
    /// Execution settings in force (`n_cycles`, order, gaps, breaker, timeouts).
    pub measurement_protocol: serde_json::Value,
    /// One entry per cell, in execution order.
    pub experiments: Vec<ManifestEntry>,
    /// Counters.
    pub summary: StudySummary,
}

impl Manifest {
    /// Recomputes the per-status counters and the energy total from the entries.
    pub fn recount(&mut self) {
        let s = &mut self.summary;
        s.total_experiments = self.experiments.len();
        let count = |st: CellStatus| self.experiments.iter().filter(|e| e.status == st).count();
        s.completed = count(CellStatus::Completed);
        s.failed = count(CellStatus::Failed);
        s.skipped = count(CellStatus::Skipped);
        s.interrupted = count(CellStatus::Interrupted);
        s.pending = count(CellStatus::Pending);
        s.running = count(CellStatus::Running);
        s.total_energy_j = self
            .experiments
            .iter()
            .filter(|e| e.status == CellStatus::Completed)
            .filter_map(|e| e.energy_joules)
            .sum();
        let sum = |get: fn(&ManifestEntry) -> Option<f64>| {
            self.experiments
                .iter()
                .filter(|e| e.status == CellStatus::Completed)
                .filter_map(get)
                .fold(None, |a: Option<f64>, v| Some(a.unwrap_or(0.0) + v))
        };
        s.total_system_energy_j = sum(|e| e.system_energy_joules);
        s.total_node_energy_j = sum(|e| e.node_energy_joules);
        s.total_unattributed_j = sum(|e| e.unattributed_joules);
        s.total_lifecycle_energy_j = sum(|e| e.lifecycle_energy_joules);
        s.total_co2_g = sum(|e| e.co2_g);
        s.total_system_co2_g = sum(|e| e.system_co2_g);
    }

    /// The entry of a (configuration hash, cycle) pair.
    pub fn entry_mut(&mut self, config_hash: &str, cycle: u32) -> Option<&mut ManifestEntry> {
        self.experiments
            .iter_mut()
            .find(|e| e.config_hash == config_hash && e.cycle == cycle)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn statuses_are_written_in_snake_case() {
        assert_eq!(
            serde_json::to_string(&StudyStatus::CircuitBreaker).unwrap(),
            "\"circuit_breaker\""
        );
        assert_eq!(StudyStatus::TimedOut.as_str(), "timed_out");
        let s: CellStatus = serde_json::from_str("\"interrupted\"").unwrap();
        assert_eq!(s, CellStatus::Interrupted);
    }
}
