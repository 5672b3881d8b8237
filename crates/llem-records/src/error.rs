//! Why a whole load, extraction or export failed.

use std::path::PathBuf;

/// A failure of a whole load or extraction (single bad runs are [`crate::LoadIssue`]s instead).
#[derive(Debug, thiserror::Error)]
pub enum RecordsError {
    /// The path does not exist or is not a directory.
    #[error("{0}: no such directory")]
    NotFound(PathBuf),
    /// Nothing loadable was found.
    #[error("{0}: no llem study, ML.ENERGY raw tree or compiled runs/llm.parquet found here")]
    NothingFound(PathBuf),
    /// Sources were found, but not one run loaded from them (each reason is a
    /// [`crate::LoadIssue`]).
    #[error("{0}: no run could be loaded from it")]
    NoRuns(PathBuf),
    /// A file could not be read or written.
    #[error(transparent)]
    Results(#[from] llem_results::ResultsError),
    /// A file is not what it should be.
    #[error("{path}: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A request the collection cannot answer (unknown field, unstable() after stable-only).
    #[error("{0}")]
    Usage(String),
}
