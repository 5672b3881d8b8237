//! What a front end asks for, typed: the CLI builds these from its flags, the Python package
//! from keyword arguments. Values are checked where they are built ([`interval`],
//! [`positive_hours`]), so both front ends refuse the same things with the same words.

use std::path::PathBuf;
use std::time::Duration;

pub use llem_config::Overrides;
pub use llem_study::{Launcher, ResumeFrom};

use crate::AppError;

/// What to plan: a file (or overrides alone) and the command-line style overrides.
#[derive(Clone, Debug, Default)]
pub struct PlanOptions {
    /// The experiment or study file; `None` plans one experiment from `overrides.model`.
    pub config: Option<PathBuf>,
    /// Where the file's relative paths resolve when not beside it (a file written for a
    /// caller whose paths are relative to its working directory).
    pub config_dir: Option<PathBuf>,
    /// Model, engine, prompt count, output directory, cycles, order.
    pub overrides: Overrides,
    /// Merge configurations with the same `measurement_config_hash` (the default).
    pub dedup: bool,
}

/// How one experiment runs in this process.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Take the advisory device locks (the default): two measurements on one device would
    /// each measure the other's load.
    pub lock: bool,
    /// Wait while another run holds a device (`--wait`), instead of refusing.
    pub wait_for_devices: bool,
    /// The energy sampler's interval.
    pub sampling_interval: Duration,
    /// Where the sampler publishes its running figures for live metrics (none: nowhere).
    pub live: Option<llem_energy::LiveBoard>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            lock: true,
            wait_for_devices: false,
            sampling_interval: DEFAULT_SAMPLING_INTERVAL,
            live: None,
        }
    }
}

/// The sampler's interval when none is given.
pub const DEFAULT_SAMPLING_INTERVAL: Duration = Duration::from_millis(100);

/// Where a study's cells run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ExecutorChoice {
    /// As the file says (`study_execution.executor`), or where a resumed study ran.
    #[default]
    AsPlanned,
    /// On this host, whatever the file says.
    Local,
    /// As a Slurm job array, whatever the file says.
    Slurm,
}

/// `sbatch` settings given by the caller; each overrides the file's field of the same name
/// (the settings a Slurm study records, all unset by default).
pub use llem_study::slurm::SlurmOptions as SlurmOverrides;

/// How a study runs.
#[derive(Clone, Debug)]
pub struct StudyOptions {
    /// A new study, the latest unfinished one, or the one in a directory.
    pub resume: ResumeFrom,
    /// Stop at the first failed cell.
    pub fail_fast: bool,
    /// Stop after `study_execution.max_consecutive_failures` failures in a row (the
    /// default); `false` never stops early.
    pub circuit_breaker: bool,
    /// The study's wall-clock limit, over the file's.
    pub timeout_hours: Option<f64>,
    /// Keep the file's gaps between cells and cycles (the default).
    pub gaps: bool,
    /// Take the advisory device locks (the default).
    pub lock: bool,
    /// Wait while another run holds a device (`--wait`), instead of refusing.
    pub wait_for_devices: bool,
    /// The energy sampler's interval in each cell.
    pub sampling_interval: Duration,
    /// Where the cells run.
    pub executor: ExecutorChoice,
    /// `sbatch` settings for a Slurm study.
    pub slurm: SlurmOverrides,
    /// How a cell is started: this program with these arguments, then the cell's spec file.
    pub launcher: Launcher,
    /// Have each local cell report its sampler's running figures, for live metrics.
    pub live_reports: bool,
    /// Have each cell push its live metrics to this Prometheus Pushgateway.
    pub metrics_push: Option<String>,
}

impl StudyOptions {
    /// A new local study with the defaults, cells started by `launcher`.
    pub fn new(launcher: Launcher) -> Self {
        StudyOptions {
            resume: ResumeFrom::New,
            fail_fast: false,
            circuit_breaker: true,
            timeout_hours: None,
            gaps: true,
            lock: true,
            wait_for_devices: false,
            sampling_interval: DEFAULT_SAMPLING_INTERVAL,
            executor: ExecutorChoice::AsPlanned,
            slurm: SlurmOverrides::default(),
            launcher,
            live_reports: false,
            metrics_push: None,
        }
    }
}

/// A sampling interval as written (`100ms`, `1s`, `0.5s`), or why not; `option` names it in
/// the error.
pub fn interval(option: &str, text: &str) -> Result<Duration, AppError> {
    llem_config::schedule::parse_duration(text, llem_config::schedule::MAX_DURATION_S)
        .map_err(|e| AppError::option(option, e.reason))
}

/// A wall-clock limit in hours: above 0, at most a year.
pub fn positive_hours(option: &str, hours: f64) -> Result<f64, AppError> {
    if hours.is_finite() && hours > 0.0 && hours <= 8760.0 {
        Ok(hours)
    } else {
        Err(AppError::option(
            option,
            "must be a number of hours from 0 to 8760, a year (e.g. 12, 0.5)",
        ))
    }
}

/// A count of at least one (cycles, prompts).
pub fn positive_count(option: &str, n: i64) -> Result<u32, AppError> {
    u32::try_from(n)
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| AppError::option(option, format!("{n} is not a whole number from 1 up")))
}

/// A cell order by name (`interleave`, `shuffle`, ...).
pub fn order(option: &str, name: &str) -> Result<llem_config::ExperimentOrder, AppError> {
    name.parse()
        .map_err(|e: llem_config::UnknownName| AppError::option(option, e.to_string()))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn values_are_refused_with_the_option_named() {
        let e = positive_count("cycles", -1).unwrap_err();
        assert_eq!(e.to_string(), "cycles: -1 is not a whole number from 1 up");
        assert_eq!(e.kind(), crate::ErrorKind::Option);
        assert_eq!(positive_count("cycles", 3).unwrap(), 3);
        assert!(positive_count("cycles", 0).is_err());
        assert!(positive_count("cycles", i64::from(u32::MAX) + 1).is_err());
        assert!(positive_hours("timeout_hours", 0.0).is_err());
        assert!(positive_hours("timeout_hours", f64::NAN).is_err());
        assert_eq!(positive_hours("timeout_hours", 1.5).unwrap(), 1.5);
        assert_eq!(
            interval("sampling_interval", "50ms").unwrap(),
            Duration::from_millis(50)
        );
        assert!(
            interval("sampling_interval", "fast")
                .unwrap_err()
                .to_string()
                .starts_with("sampling_interval: ")
        );
        let e = order("order", "sideways").unwrap_err().to_string();
        assert!(e.starts_with("order: "), "{e}");
        assert_eq!(
            order("order", "interleaved").unwrap(),
            llem_config::ExperimentOrder::Interleave
        );
    }
}
