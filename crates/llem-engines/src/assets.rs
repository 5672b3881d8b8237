//! The asset cache that `scripts/fetch-assets.sh` fills: models and datasets available
//! offline, found by file name.

use std::path::{Path, PathBuf};

/// llem's cache: `$XDG_CACHE_HOME/llem`, else `~/.cache/llem` (assets, baseline cache).
pub fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"))
        .join("llem")
}

/// `$LLEM_ASSETS`, else `<cache>/assets`.
pub fn assets_dir(llem_assets: Option<&str>) -> PathBuf {
    match llem_assets.filter(|a| !a.is_empty()) {
        Some(a) => PathBuf::from(a),
        None => cache_dir().join("assets"),
    }
}

/// A model given as a path (a file, or a directory holding exactly one GGUF file and no
/// Hugging Face `config.json`), or as a bare file name found in the asset cache (directly or
/// one directory down, where fetch-assets puts each asset).
pub fn resolve_model(model: &str, assets: &Path) -> Option<PathBuf> {
    let p = Path::new(model);
    if p.is_file() {
        return Some(p.to_path_buf());
    }
    if p.is_dir() {
        let ggufs = ggufs_in(p);
        return match ggufs.as_slice() {
            [one] if !p.join("config.json").exists() => Some(one.clone()),
            _ => None,
        };
    }
    if p.components().count() != 1 {
        return None;
    }
    let direct = assets.join(p);
    if direct.is_file() {
        return Some(direct);
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(assets)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|d| d.is_dir())
        .collect();
    dirs.sort();
    dirs.into_iter().map(|d| d.join(p)).find(|c| c.is_file())
}

pub use llem_config::infer::ggufs_in;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn finds_models_by_name_in_the_cache() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("smol")).unwrap();
        std::fs::write(d.path().join("smol/m.gguf"), b"x").unwrap();
        assert_eq!(
            resolve_model("m.gguf", d.path()),
            Some(d.path().join("smol/m.gguf"))
        );
        assert_eq!(resolve_model("other.gguf", d.path()), None);
        assert_eq!(resolve_model("sub/m.gguf", d.path()), None);
        let abs = d.path().join("smol/m.gguf");
        assert_eq!(
            resolve_model(abs.to_str().unwrap(), d.path()),
            Some(abs.clone())
        );
        // A directory holding one GGUF file is that file; with two, or as a Hugging Face
        // model directory, it is not one.
        let dir = d.path().join("smol");
        assert_eq!(resolve_model(dir.to_str().unwrap(), d.path()), Some(abs));
        std::fs::write(dir.join("config.json"), b"{}").unwrap();
        assert_eq!(resolve_model(dir.to_str().unwrap(), d.path()), None);
        std::fs::remove_file(dir.join("config.json")).unwrap();
        std::fs::write(dir.join("n.GGUF"), b"x").unwrap();
        assert_eq!(resolve_model(dir.to_str().unwrap(), d.path()), None);
        assert_eq!(ggufs_in(&dir).len(), 2);
    }
}
