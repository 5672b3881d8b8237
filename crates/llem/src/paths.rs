//! Where llem keeps things on this machine.

use std::path::PathBuf;

/// `$XDG_CACHE_HOME/llem`, else `~/.cache/llem` (baseline cache).
pub fn cache_dir() -> PathBuf {
    llem_harness::engines::cache_dir()
}

/// The asset cache (`LLEM_ASSETS`, else `<cache>/assets`).
pub fn assets_dir() -> PathBuf {
    llem_harness::engines::assets_dir(std::env::var("LLEM_ASSETS").ok().as_deref())
}
