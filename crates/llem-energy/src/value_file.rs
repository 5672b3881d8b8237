//! Small kernel value files (`energy_uj`, `power1_average`, `/proc/stat`), read cheaply.
//!
//! sysfs and procfs regenerate a file's content on every read at offset 0, so a descriptor
//! kept open and read with one `pread` sees fresh values at a third of the cost of
//! open/read/close — the sampler reads these files up to 100 times a second. Files on other
//! file systems (the trees tests write, which writers replace by rename) are reopened on
//! every read.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use nix::sys::statfs::{PROC_SUPER_MAGIC, SYSFS_MAGIC, statfs};

use crate::sensor::{SensorError, io_error};

/// A value file read on demand.
#[derive(Debug)]
pub struct ValueFile {
    path: PathBuf,
    kept: Option<File>,
    hint: &'static str,
}

impl ValueFile {
    /// Opens `path`; `hint` is added to permission errors.
    pub fn open(path: PathBuf, hint: &'static str) -> ValueFile {
        let kernel = statfs(&path).is_ok_and(|s| {
            let t = s.filesystem_type();
            t == SYSFS_MAGIC || t == PROC_SUPER_MAGIC
        });
        let kept = if kernel { File::open(&path).ok() } else { None };
        ValueFile { path, kept, hint }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the start of the file into `buf`; returns the bytes read.
    pub fn read_prefix(&mut self, buf: &mut [u8]) -> Result<usize, SensorError> {
        let r = match &self.kept {
            Some(f) => f.read_at(buf, 0),
            None => File::open(&self.path).and_then(|mut f| f.read(buf)),
        };
        r.map_err(|e| io_error(&self.path, self.hint, e))
    }

    /// Reads one unsigned integer.
    pub fn read_u64(&mut self) -> Result<u64, SensorError> {
        let mut buf = [0u8; 32];
        let n = self.read_prefix(&mut buf)?;
        let text = buf.get(..n).unwrap_or_default();
        std::str::from_utf8(text)
            .ok()
            .map(str::trim)
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| SensorError::Parse {
                path: self.path.clone(),
                text: String::from_utf8_lossy(text)
                    .trim()
                    .chars()
                    .take(40)
                    .collect(),
            })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_reopened_so_replacements_are_seen() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("energy_uj");
        std::fs::write(&p, "10\n").unwrap();
        let mut f = ValueFile::open(p.clone(), "");
        assert_eq!(f.read_u64().unwrap(), 10);
        std::fs::write(d.path().join("t"), "20\n").unwrap();
        std::fs::rename(d.path().join("t"), &p).unwrap();
        assert_eq!(f.read_u64().unwrap(), 20);
        std::fs::write(&p, "x\n").unwrap();
        assert!(
            f.read_u64()
                .unwrap_err()
                .to_string()
                .contains("expected a number")
        );
    }

    #[test]
    fn procfs_files_are_kept_open_and_stay_fresh() {
        let mut f = ValueFile::open("/proc/self/stat".into(), "");
        assert!(f.kept.is_some());
        let mut a = [0u8; 64];
        let n = f.read_prefix(&mut a).unwrap();
        assert!(n > 0);
        // /proc/uptime changes between reads: a kept descriptor must see it move.
        let mut up = ValueFile::open("/proc/uptime".into(), "");
        let mut b1 = [0u8; 32];
        let mut b2 = [0u8; 32];
        up.read_prefix(&mut b1).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(30));
        up.read_prefix(&mut b2).unwrap();
        assert_ne!(b1, b2);
    }
}
