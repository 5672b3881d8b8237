//! What passes between the study runner and a cell's process: the spec file going in, JSON
//! lines coming out on the child's stdout.

use std::path::PathBuf;

use llem_config::ExperimentConfig;
use serde::{Deserialize, Serialize};

/// Environment variable carrying the runner's PID to the cell; the cell kills its process
/// group when its parent is no longer that process (the runner was SIGKILLed).
pub const PARENT_PID_ENV: &str = "LLEM_STUDY_PARENT_PID";

/// Everything a cell process needs, written to `cell_spec.json` in the cell directory.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellSpec {
    /// The resolved configuration.
    pub config: ExperimentConfig,
    /// Its `measurement_config_hash`.
    pub config_hash: String,
    /// `experiment_id` for the result.
    pub experiment_id: String,
    /// Where the artefacts go.
    pub cell_dir: PathBuf,
    /// Directory of the baseline cache (the study's `_study-artefacts/`).
    pub baseline_cache_dir: PathBuf,
    /// Telemetry sampling interval, ms.
    pub sampling_interval_ms: f64,
    /// 1-based position in the study's execution order.
    pub index: usize,
    /// Cycle, from 0.
    pub cycle: u32,
    /// The plan's warnings about the configuration, for the cell's result (absent in specs
    /// written before they were carried).
    #[serde(default)]
    pub plan_warnings: Vec<String>,
    /// Report the sampler's running figures (`live` lines) this often, ms; absent: never
    /// (the study exports no live metrics).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_interval_ms: Option<f64>,
    /// Push the cell's live metrics to this Prometheus Pushgateway (`--metrics-push`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_push: Option<String>,
    /// The configuration's label in its study (for the metrics' `llem_config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
}

/// One energy domain's running figures in a [`CellMessage::Live`] line.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LiveFigure {
    /// `gpu0`, `package-0`, `dram-0`, `node`.
    pub name: String,
    /// `gpu`, `cpu_package`, `dram` or `node`.
    pub kind: String,
    /// Energy since the meter started, J.
    pub energy_j: f64,
    /// Latest power, W.
    pub power_w: Option<f64>,
}

/// One line of a cell's stdout.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CellMessage {
    /// A lifecycle phase begins.
    Phase {
        /// `baseline`, `load`, `warmup`, `measure`, ...
        phase: String,
        /// Units of work, when known.
        total: Option<u64>,
        /// What is happening.
        detail: String,
    },
    /// Work within the phase.
    Advance {
        /// Units done.
        done: u64,
        /// Output tokens so far.
        tokens: u64,
        /// Seconds since the phase began.
        elapsed_s: f64,
        /// Last power sample, W.
        power_w: Option<f64>,
    },
    /// The phase ended.
    PhaseDone {
        /// The phase.
        phase: String,
        /// One-line summary.
        summary: String,
    },
    /// The sampler's running figures (for live metrics).
    Live {
        /// Which meter of the cell (totals restart at 0 with each).
        meter: u64,
        /// Every domain.
        domains: Vec<LiveFigure>,
    },
    /// A request of the measurement window finished.
    Request {
        /// Whether it succeeded.
        success: bool,
        /// Prompt tokens.
        input_tokens: u32,
        /// Generated tokens.
        output_tokens: u32,
        /// Time to first token, s.
        ttft_s: Option<f64>,
        /// Time per output token after the first, s.
        tpot_s: Option<f64>,
    },
    /// A warning.
    Note {
        /// The text.
        message: String,
    },
    /// The cell started a server outside its own process group (its own group, or a
    /// container); the runner stops it if the cell dies without doing so.
    Server {
        /// The server's process group.
        pgid: Option<u32>,
        /// The container's name.
        container: Option<String>,
    },
    /// The result is written.
    Completed {
        /// `result.json`, relative to the cell directory.
        result_file: String,
    },
    /// The experiment failed; the process exits non-zero after this.
    Failed {
        /// Class of failure (`EngineError`, `DatasetError`, ...).
        error_type: String,
        /// What went wrong.
        message: String,
    },
}

impl CellMessage {
    /// One JSON line (no newline).
    pub fn to_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Parses a line; `None` for anything that is not a message (stray output is ignored).
    pub fn parse(line: &str) -> Option<CellMessage> {
        serde_json::from_str(line.trim()).ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn messages_round_trip_as_tagged_lines() {
        let m = CellMessage::Failed {
            error_type: "EngineError".into(),
            message: "no such file".into(),
        };
        let line = m.to_line();
        assert!(line.starts_with("{\"type\":\"failed\""), "{line}");
        assert_eq!(CellMessage::parse(&line).unwrap(), m);
        assert_eq!(CellMessage::parse("llama.cpp says hello"), None);
    }
}
