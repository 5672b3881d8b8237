//! Where llem keeps things on this machine, and what it is built from.

use std::path::PathBuf;

use llem_config::user_config::UserConfig;

/// This package's version.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git commit it was built from (`unknown` outside a checkout).
pub const GIT_COMMIT: &str = env!("LLEM_GIT_COMMIT");
/// The target triple it was built for.
pub const TARGET: &str = env!("LLEM_TARGET");
/// `version (commit)`, as `--version` prints it.
pub const VERSION_LINE: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("LLEM_GIT_COMMIT"),
    ")"
);

/// `$XDG_CACHE_HOME/llem`, else `~/.cache/llem` (baselines, locks, tools).
pub fn cache_dir() -> PathBuf {
    llem_engines::assets::cache_dir()
}

/// The device locks' directory.
pub fn lock_dir() -> PathBuf {
    cache_dir().join("locks")
}

/// Where device-settings journals live: `LLEM_DEVICE_JOURNAL_DIR`, else
/// `<cache>/device-journal`. On a machine several users share, point every user's at one
/// directory (e.g. `/var/lib/llem/device-journal`) so that any llem finds any leftover.
pub fn device_journal_dir() -> PathBuf {
    std::env::var_os("LLEM_DEVICE_JOURNAL_DIR")
        .filter(|v| !v.is_empty())
        .map_or_else(|| cache_dir().join("device-journal"), PathBuf::from)
}

/// The asset cache (`LLEM_ASSETS`, else `<cache>/assets`).
pub fn assets_dir() -> PathBuf {
    llem_engines::assets::assets_dir(std::env::var("LLEM_ASSETS").ok().as_deref())
}

/// `output.model_cache_dir` of the user config (the Hugging Face cache model metadata is
/// read from offline), `~` expanded.
pub fn model_cache_dir(user: &UserConfig) -> Option<PathBuf> {
    let d = user.output.model_cache_dir.as_deref()?;
    match d.strip_prefix("~/") {
        Some(rest) => std::env::var_os("HOME").map(|h| PathBuf::from(h).join(rest)),
        None => Some(PathBuf::from(d)),
    }
}

/// This machine's name, as results and locks record it.
pub fn hostname() -> String {
    llem_harness::environment::hostname()
}
