//! Why an experiment failed.

use llem_engines::EngineError;
use llem_engines::workload::dataset::DatasetError;
use llem_results::ResultsError;

/// An experiment failed.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The config cannot run here.
    #[error("{0}")]
    Config(String),
    /// The dataset cannot be loaded.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// The engine failed.
    #[error(transparent)]
    Engine(EngineError),
    /// The energy meter failed.
    #[error("energy meter: {0}")]
    Energy(String),
    /// Writing an artefact failed.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// The run produced nothing to measure: no request returned a token.
    #[error("{0}")]
    NothingMeasured(String),
    /// More requests failed than `measurement.max_failed_request_fraction` allows.
    #[error("{0}")]
    RequestsFailed(String),
    /// A device setting could not be applied (every one applied was put back).
    #[error("device settings: {0}")]
    Device(String),
    /// A device setting could not be put back after the run: the machine is not as it was
    /// found. Its journal stays for `llem restore`.
    #[error("device settings NOT restored: {0}")]
    DeviceRestore(String),
    /// Stopped by the user.
    #[error("cancelled")]
    Cancelled,
}

impl From<EngineError> for HarnessError {
    /// An engine stopped by the user is a cancelled experiment, not a failed one.
    fn from(e: EngineError) -> HarnessError {
        match e {
            EngineError::Cancelled => HarnessError::Cancelled,
            e => HarnessError::Engine(e),
        }
    }
}
