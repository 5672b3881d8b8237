//! Advisory device locks: one `flock`ed file per device under the cache directory, taken
//! all-or-none. The kernel drops a `flock` when its holder dies (SIGKILL included), so a lock
//! is never stale; the holder writes who it is into the file for the next one's error.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Who holds a lock (written into the lock file once it is held).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Holder {
    /// Process id.
    pub pid: u32,
    /// Host name.
    pub host: String,
    /// When it took the lock (ISO-8601 UTC).
    pub started_at: String,
    /// What it is doing (study name and directory).
    pub purpose: String,
}

/// A lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it.
    #[error("{resource} is locked by {}; another llem run is using it. Wait for it, or pass --no-lock if something else schedules the devices", describe(.holder.as_ref()))]
    Held {
        /// The device (`gpu0`, `cpu`).
        resource: String,
        /// Who, when the file says.
        holder: Option<Holder>,
    },
    /// The lock file could not be opened or written.
    #[error("lock file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
}

fn describe(h: Option<&Holder>) -> String {
    match h {
        Some(h) => format!(
            "PID {} on {} since {} ({})",
            h.pid, h.host, h.started_at, h.purpose
        ),
        None => "a process that has not written its name yet".to_string(),
    }
}

/// Locks held; dropping this releases them.
#[derive(Debug)]
pub struct DeviceLocks {
    files: Vec<(String, File)>,
}

impl DeviceLocks {
    /// The resources held, in order.
    pub fn resources(&self) -> Vec<&str> {
        self.files.iter().map(|(r, _)| r.as_str()).collect()
    }
}

/// The lock file of a resource.
pub fn lock_path(dir: &Path, resource: &str) -> PathBuf {
    dir.join(format!("{resource}.lock"))
}

/// Reads who holds a lock file, if it says.
pub fn read_holder(path: &Path) -> Option<Holder> {
    let mut s = String::new();
    llem_config::files::open_regular(path)
        .ok()?
        .take(64 * 1024)
        .read_to_string(&mut s)
        .ok()?;
    serde_json::from_str(&s).ok()
}

/// Takes every resource's lock or none: in sorted order (two studies wanting overlapping sets
/// cannot deadlock), never waiting; on the first held one, the ones taken are released.
pub fn acquire(
    dir: &Path,
    resources: &[String],
    holder: &Holder,
) -> Result<DeviceLocks, LockError> {
    std::fs::create_dir_all(dir).map_err(|source| LockError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut sorted: Vec<&String> = resources.iter().collect();
    sorted.sort();
    sorted.dedup();
    let mut files = Vec::new();
    for r in sorted {
        let path = lock_path(dir, r);
        match try_lock_file(&path) {
            Ok(Some(file)) => files.push((r.clone(), file)),
            Ok(None) => {
                // `files` drops here: the locks taken so far are released.
                return Err(LockError::Held {
                    resource: r.clone(),
                    holder: read_holder(&path),
                });
            }
            Err(source) => return Err(LockError::Io { path, source }),
        }
    }
    let text = serde_json::to_string(holder).unwrap_or_default();
    for (r, f) in &mut files {
        let path = lock_path(dir, r);
        let write = |f: &mut File| -> std::io::Result<()> {
            f.set_len(0)?;
            f.seek(SeekFrom::Start(0))?;
            f.write_all(text.as_bytes())?;
            f.sync_data()
        };
        write(f).map_err(|source| LockError::Io { path, source })?;
    }
    Ok(DeviceLocks { files })
}

/// Takes the locks like [`acquire`], but while another holds one, retries every 250 ms
/// instead of refusing: `on_wait` is told once who holds it, and `stop` ends the wait
/// (`Ok(None)`). Errors other than a held lock end it at once.
pub fn acquire_waiting(
    dir: &Path,
    resources: &[String],
    holder: &Holder,
    stop: &dyn Fn() -> bool,
    on_wait: &mut dyn FnMut(&LockError),
) -> Result<Option<DeviceLocks>, LockError> {
    let mut told = false;
    loop {
        match acquire(dir, resources, holder) {
            Ok(l) => return Ok(Some(l)),
            Err(LockError::Held { .. }) if stop() => return Ok(None),
            Err(e @ LockError::Held { .. }) => {
                if !told {
                    on_wait(&e);
                    told = true;
                }
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Takes one exclusive lock on `path` without waiting; `Ok(None)` when another process holds it.
/// The file is not truncated on open: the holder's name must survive a failed attempt.
pub fn try_lock_file(path: &Path) -> std::io::Result<Option<File>> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(e)) => Err(e),
    }
}

/// How a run that finds a device locked goes on.
pub enum OnHeld<'a> {
    /// It refuses at once, naming the holder.
    Refuse,
    /// It waits (`--wait`), told once who holds the lock, until `stop` says to give up.
    Wait {
        /// True to stop waiting (Ctrl-C).
        stop: &'a dyn Fn() -> bool,
        /// Hears who holds it, once.
        on_wait: &'a mut dyn FnMut(&LockError),
    },
}

/// Takes the device locks for one experiment run outside a study (`llem run exp.yaml`): the
/// same locks as a study's, held until the value is dropped; `Ok(None)` when told to stop
/// while waiting.
pub fn lock_for_experiment(
    dir: &Path,
    resources: &[String],
    host: &str,
    purpose: String,
    on_held: OnHeld<'_>,
) -> Result<Option<DeviceLocks>, LockError> {
    let holder = Holder {
        pid: std::process::id(),
        host: host.to_string(),
        started_at: llem_results::time::iso8601_utc(llem_results::time::unix_now_s()),
        purpose,
    };
    match on_held {
        OnHeld::Refuse => acquire(dir, resources, &holder).map(Some),
        OnHeld::Wait { stop, on_wait } => acquire_waiting(dir, resources, &holder, stop, on_wait),
    }
}

/// What a run waiting for a lock says: which device, who holds it, how to stop.
pub fn waiting_note(e: &LockError) -> String {
    match e {
        LockError::Held { resource, holder } => format!(
            "waiting for {resource}, held by {} (Ctrl-C stops waiting)",
            describe(holder.as_ref())
        ),
        other => other.to_string(),
    }
}

/// Whether a runner holds the lock of the study in `dir`: `Some(false)` when the manifest
/// says running but its runner is gone (killed), `None` when there is no lock file. Opens
/// the lock read-only and creates nothing, so a read-only results tree can be asked.
pub fn study_runner_alive(dir: &Path) -> Option<bool> {
    let file = OpenOptions::new()
        .read(true)
        .open(dir.join(llem_results::layout::STUDY_LOCK))
        .ok()?;
    match file.try_lock() {
        Ok(()) => Some(false),
        Err(TryLockError::WouldBlock) => Some(true),
        Err(TryLockError::Error(_)) => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn holder(pid: u32) -> Holder {
        Holder {
            pid,
            host: "h".into(),
            started_at: "2026-11-21T00:00:00.000Z".into(),
            purpose: "study test".into(),
        }
    }

    #[test]
    fn all_or_none_and_released_on_drop() {
        let dir = tempfile::tempdir().unwrap();
        let a = acquire(dir.path(), &["gpu1".into(), "gpu0".into()], &holder(1)).unwrap();
        assert_eq!(a.resources(), ["gpu0", "gpu1"]);
        // flock locks belong to the open file description: a second open in this process
        // conflicts just as another process would.
        let err = acquire(dir.path(), &["gpu2".into(), "gpu1".into()], &holder(2)).unwrap_err();
        match err {
            LockError::Held { resource, holder } => {
                assert_eq!(resource, "gpu1");
                assert_eq!(holder.unwrap().pid, 1);
            }
            e => panic!("{e}"),
        }
        // gpu2 was taken and released again (none), so a third party can take it.
        let c = acquire(dir.path(), &["gpu2".into()], &holder(3)).unwrap();
        drop(c);
        drop(a);
        let d = acquire(dir.path(), &["gpu0".into(), "gpu1".into()], &holder(4)).unwrap();
        assert_eq!(read_holder(&lock_path(dir.path(), "gpu0")).unwrap().pid, 4);
        drop(d);
    }

    #[test]
    fn the_error_names_the_holder() {
        let dir = tempfile::tempdir().unwrap();
        let _a = acquire(dir.path(), &["cpu".into()], &holder(4242)).unwrap();
        let e = acquire(dir.path(), &["cpu".into()], &holder(7)).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("PID 4242") && msg.contains("--no-lock"),
            "{msg}"
        );
    }
}
