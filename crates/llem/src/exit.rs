//! Process exit codes.

/// Success.
pub const OK: i32 = 0;
/// A runtime failure (an experiment could not run, a file could not be written).
pub const FAILURE: i32 = 1;
/// A configuration or validation error.
pub const CONFIG: i32 = 2;
/// Interrupted by the user (Ctrl-C).
pub const INTERRUPTED: i32 = 130;
