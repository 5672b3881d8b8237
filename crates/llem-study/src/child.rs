//! The cell's side of the child-process protocol: reading its spec, writing its JSON lines,
//! and dying with the runner.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::{getpgrp, getppid};

use crate::protocol::{CellMessage, CellSpec, PARENT_PID_ENV};

/// Writes one message to stdout, flushed, so the runner sees it live. A runner that went
/// away is the watchdog's business, not this function's.
pub fn emit(m: &CellMessage) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{}", m.to_line());
    let _ = out.flush();
}

/// Why a cell cannot read the spec its runner wrote.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file cannot be read.
    #[error("cannot read {}: {source}", .path.display())]
    Read {
        /// The spec file.
        path: std::path::PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a cell spec (another version of llem wrote it, or it is damaged).
    #[error("{} is not a cell spec: {source}", .path.display())]
    NotASpec {
        /// The spec file.
        path: std::path::PathBuf,
        /// Why.
        source: serde_json::Error,
    },
}

/// Reads the cell spec the runner wrote.
pub fn read_spec(path: &Path) -> Result<CellSpec, SpecError> {
    let text = llem_config::files::read_record_string(path).map_err(|source| SpecError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| SpecError::NotASpec {
        path: path.to_path_buf(),
        source,
    })
}

/// When the runner dies (even by SIGKILL) the cell must not live on as an orphan holding the
/// GPU: a thread watches the parent named in [`PARENT_PID_ENV`] and kills the cell's whole
/// process group, then exits with `exit_code`, once the parent changes. Nothing happens when
/// the variable is not set (a cell run by hand).
pub fn watch_parent(exit_code: i32) {
    let Some(expected) = std::env::var(PARENT_PID_ENV)
        .ok()
        .and_then(|s| s.parse::<i32>().ok())
    else {
        return;
    };
    let orphaned = move || getppid().as_raw() != expected;
    if orphaned() {
        let _ = killpg(getpgrp(), Signal::SIGKILL);
    }
    std::thread::spawn(move || {
        loop {
            std::thread::sleep(Duration::from_millis(200));
            if orphaned() {
                let _ = killpg(getpgrp(), Signal::SIGKILL);
                std::process::exit(exit_code);
            }
        }
    });
}
