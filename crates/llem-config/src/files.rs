//! Reading files whose names come from outside (configs, `base:`, results trees): regular
//! files only, and no more than a cap.
//!
//! A FIFO, a device or a socket where a file is expected would block the reader forever
//! (`/dev/zero`, a FIFO named `result.json`) or feed it without end (`/dev/urandom`); one
//! more check at open time costs nothing next to a hung `llem results` on a shared box.

use std::fs::File;
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

/// The largest configuration file llem reads (a 200-cell study is a few KiB).
pub const CONFIG_MAX_BYTES: u64 = 8 << 20;
/// The largest JSON record llem reads from a results tree (`result.json`, manifests).
pub const RECORD_MAX_BYTES: u64 = 512 << 20;

/// Opens `path` for reading if it is a regular file (after symlinks); never blocks on a
/// FIFO.
pub fn open_regular(path: &Path) -> io::Result<File> {
    open_regular_sized(path).map(|(f, _)| f)
}

/// [`open_regular`] with the file's length, from the same `fstat` (a records load opens
/// tens of thousands of files).
fn open_regular_sized(path: &Path) -> io::Result<(File, u64)> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        // Opening a FIFO for reading blocks until a writer appears; non-blocking open
        // returns at once, and the type check below refuses it. Regular files ignore it.
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)?;
    let meta = file.metadata()?;
    let ft = meta.file_type();
    if ft.is_file() {
        return Ok((file, meta.len()));
    }
    let what = if ft.is_dir() {
        "a directory"
    } else if ft.is_fifo() {
        "a FIFO"
    } else if ft.is_char_device() {
        "a character device"
    } else if ft.is_block_device() {
        "a block device"
    } else if ft.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{what}, not a regular file"),
    ))
}

/// The bytes of the regular file at `path`, refused past `max_bytes`.
pub fn read_regular(path: &Path, max_bytes: u64) -> io::Result<Vec<u8>> {
    let (file, len) = open_regular_sized(path)?;
    if len > max_bytes {
        return Err(too_large(max_bytes));
    }
    let mut out = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    // The file may grow while it is read: the cap holds for what is read, not only the size.
    file.take(max_bytes + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max_bytes {
        return Err(too_large(max_bytes));
    }
    Ok(out)
}

/// [`read_regular`] as UTF-8 text.
pub fn read_regular_string(path: &Path, max_bytes: u64) -> io::Result<String> {
    String::from_utf8(read_regular(path, max_bytes)?)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.utf8_error()))
}

/// A JSON record of a results tree, as bytes ([`RECORD_MAX_BYTES`] at most).
pub fn read_record(path: impl AsRef<Path>) -> io::Result<Vec<u8>> {
    read_regular(path.as_ref(), RECORD_MAX_BYTES)
}

/// A text file of a results tree or a study ([`RECORD_MAX_BYTES`] at most).
pub fn read_record_string(path: impl AsRef<Path>) -> io::Result<String> {
    read_regular_string(path.as_ref(), RECORD_MAX_BYTES)
}

fn too_large(max_bytes: u64) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("larger than {} MiB", max_bytes >> 20),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn fifos_devices_and_directories_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("result.json");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let t = Instant::now();
        let e = read_regular(&fifo, 1024).unwrap_err();
        assert!(t.elapsed() < Duration::from_secs(1));
        assert_eq!(e.to_string(), "a FIFO, not a regular file");
        for (p, what) in [
            ("/dev/zero", "a character device"),
            ("/dev/urandom", "a character device"),
            ("/tmp", "a directory"),
        ] {
            let e = read_regular(Path::new(p), 1024).unwrap_err();
            assert_eq!(e.to_string(), format!("{what}, not a regular file"), "{p}");
        }
    }

    #[test]
    fn regular_files_are_read_up_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.yaml");
        std::fs::write(&p, "model: m\n").unwrap();
        assert_eq!(read_regular_string(&p, 1 << 20).unwrap(), "model: m\n");
        std::fs::write(&p, vec![b'x'; (1 << 20) + 1]).unwrap();
        let e = read_regular(&p, 1 << 20).unwrap_err();
        assert_eq!(e.to_string(), "larger than 1 MiB");
    }
}
