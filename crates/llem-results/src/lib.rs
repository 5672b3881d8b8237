//! llem's on-disk results: atomically written JSON and Parquet sidecars.
//!
//! This crate owns file formats, not measurements: it knows the columns of
//! `timeseries.parquet`, not how a sensor produced them. Reading collections of results back
//! (the records API, exports, the report) is `llem-records`.

mod atomic;
pub mod figures;
pub mod layout;
pub mod manifest;
pub mod parquet_io;
pub mod requests;
pub mod result;
mod server_metrics;
mod snapshot;
pub mod stats;
mod study_result;
pub mod time;
mod timeline;
mod timeseries;

pub use atomic::{remove_stale_temps, write_atomic, write_json_atomic};
pub use manifest::{CellStatus, Manifest, ManifestEntry, StudyStatus, StudySummary};
pub use requests::{
    FinishReason, RequestEnergy, RequestRecord, SessionTurn, read_requests, write_requests,
};
pub use result::ExperimentResult;
pub use server_metrics::{MetricSample, read_server_metrics, write_server_metrics};
pub use snapshot::EnvironmentSnapshot;
pub use study_result::{ConfigurationStatistics, MetricStatistics, NamedStatistics, StudyResult};
pub use timeline::{TimeBin, read_timeline, write_timeline};
pub use timeseries::{TimeseriesColumns, read_timeseries, write_timeseries};

/// A failure writing or reading a result file.
#[derive(Debug, thiserror::Error)]
pub enum ResultsError {
    /// A file system operation failed.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// JSON serialisation failed.
    #[error("cannot serialise {path}: {source}")]
    Json {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
    /// Parquet or Arrow failed.
    #[error("parquet {path}: {message}")]
    Parquet {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        message: String,
    },
}
