//! Process exit codes, and the one mapping of llem's errors onto them.

use llem_app::{AppError, ErrorKind};

/// Success.
pub const OK: i32 = 0;
/// A runtime failure (an experiment could not run, a file could not be written).
pub const FAILURE: i32 = 1;
/// A configuration or validation error.
pub const CONFIG: i32 = 2;
/// Interrupted by the user (Ctrl-C).
pub const INTERRUPTED: i32 = 130;

/// The exit code `e` ends the process with.
pub fn of(e: &AppError) -> i32 {
    match e.kind() {
        ErrorKind::NotFound | ErrorKind::Config | ErrorKind::Option => CONFIG,
        ErrorKind::Cancelled => INTERRUPTED,
        ErrorKind::Failed => FAILURE,
    }
}
