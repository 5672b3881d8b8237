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

/// Why one run (or one row of a compiled file) is not loaded: the reason its
/// [`crate::LoadIssue`] gives.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum RunError {
    /// A file of the run cannot be read or is not what it should be; `file` is its name or
    /// path, as the reason names it.
    #[error("{file}: {detail}")]
    File {
        /// The file.
        file: String,
        /// What went wrong.
        detail: String,
    },
    /// The run's results file cannot be read (the I/O error says why).
    #[error("{0}")]
    Read(String),
    /// A figure or fact the run needs is missing or unusable.
    #[error("{0}")]
    Unusable(&'static str),
    /// Figures no measurement can produce (negative energy, infinite throughput).
    #[error("result.json holds impossible values ({}): not loaded", .0.join(", "))]
    Impossible(Vec<String>),
    /// The ML.ENERGY config tree the run's facts come from is not there.
    #[error("no config directory (configs/vllm) was found or given")]
    NoConfigDir,
    /// A YAML file that does not parse.
    #[error("line {line}: {message}")]
    Yaml {
        /// Its line.
        line: u32,
        /// What is wrong.
        message: String,
    },
    /// A column a compiled file must have is not there.
    #[error("missing column {0}")]
    MissingColumn(String),
    /// A column of another type than its field's.
    #[error("column {name} is {found}, expected {wanted} column")]
    ColumnType {
        /// The column.
        name: String,
        /// Its Arrow type.
        found: String,
        /// The kind of column the field needs (`a string`, `an integer`, ...).
        wanted: &'static str,
    },
    /// A value a compiled row must have is null.
    #[error("{0} is null")]
    Null(String),
    /// One row of a compiled file.
    #[error("row {row}: {source}")]
    Row {
        /// The row, from 0.
        row: usize,
        /// Why.
        source: Box<RunError>,
    },
    /// The runs cannot be put in one Arrow table.
    #[error("{0}")]
    Arrow(String),
}

impl RunError {
    /// `file: detail`.
    pub fn file(file: impl Into<String>, detail: impl std::fmt::Display) -> Self {
        RunError::File {
            file: file.into(),
            detail: detail.to_string(),
        }
    }
}
