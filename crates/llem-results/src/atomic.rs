//! Atomic file writes: a temporary file in the same directory, fsync, rename, fsync of the
//! directory. A killed run leaves the old file or the new one, never half of one.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::ResultsError;

fn io<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> ResultsError + 'a {
    move |source| ResultsError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

/// Removes the temporary files that writers killed mid-write left in `dir` and the
/// directories right under it (`.manifest.json.tmp-<pid>`), other than this process's own.
/// Call only while holding the lock that makes this process the directory's one writer.
pub fn remove_stale_temps(dir: &Path) -> usize {
    let mine = format!(".tmp-{}", std::process::id());
    let mut removed = 0;
    let mut sweep = |d: &Path| {
        for e in fs::read_dir(d).into_iter().flatten().flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            let stale = name.starts_with('.')
                && name.rsplit_once(".tmp-").is_some_and(|(_, pid)| {
                    !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit())
                })
                && !name.ends_with(&mine);
            if stale
                && e.file_type().is_ok_and(|t| t.is_file())
                && fs::remove_file(e.path()).is_ok()
            {
                removed += 1;
            }
        }
    };
    sweep(dir);
    for e in fs::read_dir(dir).into_iter().flatten().flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            sweep(&e.path());
        }
    }
    removed
}

/// Writes `bytes` to `path` atomically, creating the parent directory if needed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ResultsError> {
    write_atomic_with(path, |f| f.write_all(bytes))
}

/// Writes a file atomically through `fill`, which writes the content to the open file.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> Result<(), ResultsError> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io("cannot create directory", dir))?;
    let tmp = temp_path(path);
    let result = (|| {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .map_err(io("cannot create", &tmp))?;
        fill(&mut f).map_err(io("cannot write", &tmp))?;
        f.sync_all().map_err(io("cannot sync", &tmp))?;
        fs::rename(&tmp, path).map_err(io("cannot rename into place", path))?;
        // The rename is durable only once the directory entry is.
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(())
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

/// Writes `value` as pretty JSON (with a trailing newline) atomically.
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> Result<(), ResultsError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| ResultsError::Json {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    write_atomic(path, &bytes)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn replaces_the_file_and_leaves_no_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/result.json");
        write_json_atomic(&p, &serde_json::json!({"a": 1})).unwrap();
        write_json_atomic(&p, &serde_json::json!({"a": 2})).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
        assert_eq!(v["a"], 2);
        let names: Vec<String> = fs::read_dir(p.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["result.json"]);
    }

    #[test]
    fn a_failed_fill_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.txt");
        write_atomic(&p, b"old").unwrap();
        let e = write_atomic_with(&p, |f| {
            f.write_all(b"partial")?;
            Err(std::io::Error::other("disk on fire"))
        });
        assert!(e.is_err());
        assert_eq!(fs::read(&p).unwrap(), b"old");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
