//! Why a call into llem did not do what it was asked: one enum for every front end, which the
//! CLI maps to exit codes and the Python package to exception types, each in one place.

use std::path::PathBuf;

use llem_config::ConfigError;
use llem_harness::HarnessError;
use llem_study::StudyError;

/// What went wrong, by kind: front ends choose an exit code or an exception type from the
/// variant, never from the message.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The configuration file (or one it inherits from) does not exist.
    #[error("{error}")]
    ConfigNotFound {
        /// The file asked for.
        path: PathBuf,
        /// What planning said about it.
        error: ConfigError,
    },
    /// The configuration is invalid: each diagnostic names file, line, column and the
    /// nearest valid key.
    #[error("{0}")]
    Config(ConfigError),
    /// An option given to the call is invalid (a negative cycle count, a Slurm flag for a
    /// local study); `option` is its name as the caller spelled it.
    #[error("{option}: {message}")]
    Option {
        /// The option, as the front end names it (`cycles`, `--partition`).
        option: String,
        /// What is wrong with it.
        message: String,
    },
    /// Options that cannot go together, or with what the file says (Slurm flags for a local
    /// study); the message names them.
    #[error("{0}")]
    Conflict(String),
    /// A study's cell was not handed its runner credentials.
    #[error(transparent)]
    Credentials(#[from] llem_config::credentials::CredentialsError),
    /// Configurations that cannot run on this machine (a model file that is not there, an
    /// engine not installed); nothing was started.
    #[error("this study cannot run; nothing was started:{}", .0.iter().map(|p| format!("\n  - {p}")).collect::<String>())]
    NotRunnable(Vec<String>),
    /// The devices are in use by another measurement.
    #[error(transparent)]
    Locked(#[from] llem_study::LockError),
    /// A directory or file llem needs could not be made.
    #[error("{what} {}: {source}", .path.display())]
    Io {
        /// What was being done ("cannot create a run directory in").
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The experiment failed (or was cancelled: see [`AppError::is_cancelled`]).
    #[error(transparent)]
    Harness(HarnessError),
    /// The study could not run, resume or submit.
    #[error(transparent)]
    Study(#[from] StudyError),
    /// Live metrics could not be set up (`--metrics-listen`, `--otlp-endpoint`).
    #[error(transparent)]
    Live(#[from] LiveError),
    /// Stopped by the caller's flag; what had started was cleaned up.
    #[error("cancelled")]
    Cancelled,
}

/// Why live metrics could not start.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// The listen address is not one.
    #[error("--metrics-listen {addr}: {message}")]
    BadAddress {
        /// As given.
        addr: String,
        /// What is wrong.
        message: String,
    },
    /// Nothing could listen there.
    #[error("cannot serve metrics on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// A push URL is not one llem can send to.
    #[error("{flag} {url}: {message}")]
    BadEndpoint {
        /// The option (`--otlp-endpoint`, `--metrics-push`).
        flag: String,
        /// As given.
        url: String,
        /// What is wrong.
        message: String,
    },
    /// An exporter's thread could not start.
    #[error("cannot start a live metrics thread: {0}")]
    Thread(std::io::Error),
}

/// The class of an [`AppError`], for a front end's one mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// A configuration file that is not there.
    NotFound,
    /// An invalid configuration or plan.
    Config,
    /// An invalid option of the call.
    Option,
    /// Stopped by the user.
    Cancelled,
    /// Anything else: the measurement or study failed.
    Failed,
}

impl AppError {
    /// Its class.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::ConfigNotFound { .. } => ErrorKind::NotFound,
            Self::Config(_) | Self::NotRunnable(_) | Self::Credentials(_) => ErrorKind::Config,
            Self::Option { .. } | Self::Conflict(_) => ErrorKind::Option,
            Self::Cancelled
            | Self::Harness(HarnessError::Cancelled)
            | Self::Study(StudyError::Cancelled) => ErrorKind::Cancelled,
            Self::Harness(HarnessError::Config(_) | HarnessError::Dataset(_)) => ErrorKind::Config,
            Self::Study(StudyError::Drift { .. } | StudyError::NothingToResume { .. }) => {
                ErrorKind::Config
            }
            Self::Live(LiveError::BadAddress { .. } | LiveError::BadEndpoint { .. }) => {
                ErrorKind::Option
            }
            Self::Locked(_)
            | Self::Io { .. }
            | Self::Harness(_)
            | Self::Study(_)
            | Self::Live(LiveError::Listen { .. } | LiveError::Thread(_)) => ErrorKind::Failed,
        }
    }

    /// Whether the user stopped it.
    pub fn is_cancelled(&self) -> bool {
        self.kind() == ErrorKind::Cancelled
    }

    /// The located diagnostics of a configuration error (empty for other kinds).
    pub fn diagnostics(&self) -> &[llem_config::Diagnostic] {
        match self {
            Self::Config(e) | Self::ConfigNotFound { error: e, .. } => &e.diagnostics,
            _ => &[],
        }
    }

    /// An invalid option.
    pub fn option(option: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Option {
            option: option.into(),
            message: message.into(),
        }
    }
}

impl From<HarnessError> for AppError {
    fn from(e: HarnessError) -> Self {
        match e {
            HarnessError::Cancelled => Self::Cancelled,
            e => Self::Harness(e),
        }
    }
}

/// Why the doctor learned nothing from a program it ran (a version, whether a daemon
/// answers).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// It could not be started.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// It did not end within the limit (it was killed).
    #[error("`{command}` did not answer within {limit_s} s")]
    TimedOut {
        /// The command line.
        command: String,
        /// The limit, s.
        limit_s: u64,
    },
    /// Waiting for it failed.
    #[error("`{program}`: {source}")]
    Wait {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// It ran and failed, saying this (the last line of a Python traceback).
    #[error("{0}")]
    Said(String),
    /// The program is not on `PATH`.
    #[error("`{0}` is not on PATH")]
    NotOnPath(String),
    /// No llama-server anywhere llem looks.
    #[error("llama-server is not on PATH, in LLEM_LLAMA_SERVER or in llem's tool cache")]
    NoLlamaServer,
    /// The Python cannot import the engine's package.
    #[error("`{python}` cannot import {package}: {source}")]
    CannotImport {
        /// The Python.
        python: String,
        /// The package.
        package: String,
        /// Why.
        source: Box<ProbeError>,
    },
}
