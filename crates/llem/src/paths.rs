//! Where llem keeps things on this machine.

use std::path::PathBuf;

/// `$XDG_CACHE_HOME/llem`, else `~/.cache/llem` (baseline cache).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"))
        .join("llem")
}

/// The asset cache (`LLEM_ASSETS`, else `<cache>/assets`).
pub fn assets_dir() -> PathBuf {
    llem_engines::assets::assets_dir(std::env::var("LLEM_ASSETS").ok().as_deref())
}
