//! `study_result.json`: the assembled record of a study, with statistics across cycles.

use serde::{Deserialize, Serialize};

use crate::manifest::{StudyStatus, StudySummary};
use crate::result::ExperimentResult;

/// Summary statistics of one metric over the completed cycles of a configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MetricStatistics {
    /// Cycles with a value.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation (n - 1); null for one value.
    pub std: Option<f64>,
    /// Coefficient of variation, std / |mean|; null for one value or a zero mean.
    pub cv: Option<f64>,
    /// Lower end of the 95 % confidence interval of the mean (Student t, n - 1 df).
    pub ci95_low: Option<f64>,
    /// Upper end of the 95 % confidence interval.
    pub ci95_high: Option<f64>,
    /// Half-width of the interval, t(0.975, n-1) * std / sqrt(n).
    pub ci95_half_width: Option<f64>,
}

/// Statistics of one configuration across its cycles.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigurationStatistics {
    /// `measurement_config_hash`.
    pub config_hash: String,
    /// What distinguishes the configuration.
    pub config_summary: String,
    /// Cycles planned.
    pub n_cycles: u32,
    /// Cycles completed.
    pub n_completed: usize,
    /// Metric name (`mj_per_tok_adjusted`, `avg_tokens_per_second`, ...) to statistics, in a
    /// fixed order; metrics no completed cycle has are left out.
    pub metrics: Vec<NamedStatistics>,
}

/// One metric's statistics.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NamedStatistics {
    /// Result field the values come from.
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// The statistics.
    #[serde(flatten)]
    pub stats: MetricStatistics,
    /// Energy metrics: the mean over the cycles of each cycle's measurement bound
    /// (`energy_uncertainty`), in the metric's unit; null when a cycle has none (an
    /// estimate) or for other metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurement_bound: Option<f64>,
    /// The 95 % interval's half-width and the measurement bound together (their sum: the
    /// interval then holds both the cycle-to-cycle scatter and what each cycle could not
    /// resolve); the bound alone for one cycle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub combined_half_width: Option<f64>,
}

impl ConfigurationStatistics {
    /// Statistics of a metric by name.
    pub fn metric(&self, name: &str) -> Option<&MetricStatistics> {
        self.metrics
            .iter()
            .find(|m| m.metric == name)
            .map(|m| &m.stats)
    }
}

/// `study_result.json` (seed 001 `StudyResult`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StudyResult {
    /// Study name.
    pub study_name: String,
    /// Same as the manifest's.
    pub study_design_hash: String,
    /// How the study ended.
    pub status: StudyStatus,
    /// Execution settings in force.
    pub measurement_protocol: serde_json::Value,
    /// The completed cells' results, in execution order.
    pub experiments: Vec<ExperimentResult>,
    /// Their `result.json` paths, relative to the study directory.
    pub result_files: Vec<String>,
    /// Same as the manifest's summary.
    pub summary: StudySummary,
    /// Grid points skipped by validation: `{raw_config, reason, errors}`.
    pub skipped_experiments: Vec<serde_json::Value>,
    /// Per configuration, statistics across cycles.
    pub statistics: Vec<ConfigurationStatistics>,
}
