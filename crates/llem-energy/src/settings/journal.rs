//! The restore journal: what a process is about to change and the values it found, written
//! before the first change and removed after the last value is back.
//!
//! Each journal is one file, `<pid>-<ns>.json`, written to a temporary name, locked, synced
//! and renamed into place, so it appears complete and already locked. Its writer holds the
//! lock (`flock`) as long as it lives; the kernel drops it when the process dies, however it
//! dies. A journal whose lock can be taken is therefore a leftover: its owner is gone, and
//! its values are put back by the next llem that looks ([`restore_leftovers`]). A journal
//! whose values cannot all be put back stays, so that the failure is seen again.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Devices, Knob, SettingError, Value};

/// The journal's format version.
pub const VERSION: u32 = 1;

/// What one process changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Journal {
    /// Format version.
    pub version: u32,
    /// The process that changed the settings.
    pub pid: u32,
    /// This machine's name.
    pub host: String,
    /// When the journal was written, Unix s.
    pub written_unix_s: f64,
    /// Who changed them, in words (a cell of a study, `llem measure`).
    pub owner: String,
    /// The settings, in the order they are applied.
    pub entries: Vec<Entry>,
}

/// One setting changed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The device, as results name it (`gpu0`, `package-0`, `cpu3`).
    pub device: String,
    /// The knob.
    pub knob: Knob,
    /// The value found before the change.
    pub original: Value,
    /// The value asked for.
    pub requested: Value,
}

/// A journal this process holds: the lock lives as long as this value.
#[derive(Debug)]
pub struct Held {
    file: File,
    path: PathBuf,
}

fn journal_err(path: &Path, reason: impl std::fmt::Display) -> SettingError {
    SettingError::Journal {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

/// Writes `journal` into `dir` (created when missing), locked by this process.
pub fn begin(dir: &Path, journal: &Journal) -> Result<Held, SettingError> {
    std::fs::create_dir_all(dir).map_err(|e| journal_err(dir, e))?;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let name = format!("{}-{nanos}.json", std::process::id());
    let tmp = dir.join(format!(".{name}.tmp"));
    let path = dir.join(&name);
    let mut file = File::create(&tmp).map_err(|e| journal_err(&tmp, e))?;
    file.lock().map_err(|e| journal_err(&tmp, e))?;
    let text = serde_json::to_vec_pretty(journal).map_err(|e| journal_err(&tmp, e))?;
    file.write_all(&text)
        .and_then(|()| file.sync_all())
        .map_err(|e| journal_err(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| journal_err(&path, e))?;
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(Held { file, path })
}

impl Held {
    /// The journal's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Removes the journal: every value is back.
    pub fn close(self) -> Result<(), SettingError> {
        std::fs::remove_file(&self.path).map_err(|e| journal_err(&self.path, e))?;
        drop(self.file);
        Ok(())
    }
}

/// What putting one value back came to.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryOutcome {
    /// The device.
    pub device: String,
    /// The setting's name.
    pub setting: &'static str,
    /// The value written back.
    pub original: Value,
    /// The value read back (`None` where the device cannot say), or why it failed.
    pub result: Result<Option<Value>, String>,
}

impl EntryOutcome {
    /// The value is back.
    pub fn ok(&self) -> bool {
        self.result.is_ok()
    }
}

/// Writes each entry's original value back, last change first, and reads it back.
pub fn restore(entries: &[Entry], devices: &mut Devices) -> Vec<EntryOutcome> {
    entries
        .iter()
        .rev()
        .map(|e| EntryOutcome {
            device: e.device.clone(),
            setting: e.knob.setting(),
            original: e.original.clone(),
            result: put_back(e, devices),
        })
        .collect()
}

fn put_back(e: &Entry, devices: &mut Devices) -> Result<Option<Value>, String> {
    let knob = devices.open(&e.knob).map_err(|x| x.to_string())?;
    knob.apply(&e.original).map_err(|x| x.to_string())?;
    let back = knob.read().map_err(|x| x.to_string())?;
    match &back {
        Some(v) if !v.matches(&e.original) => {
            Err(format!("wrote {} but read back {v}", e.original))
        }
        _ => Ok(back),
    }
}

/// A leftover journal, restored (or not).
#[derive(Debug)]
pub struct Restored {
    /// The journal's file (removed when every value is back).
    pub path: PathBuf,
    /// Its journal; `None` when it could not be read.
    pub journal: Option<Journal>,
    /// Each value's outcome.
    pub outcomes: Vec<EntryOutcome>,
    /// Why the journal itself failed (unreadable, not removable).
    pub error: Option<String>,
}

impl Restored {
    /// Every value is back and the journal is gone.
    pub fn ok(&self) -> bool {
        self.error.is_none() && self.outcomes.iter().all(EntryOutcome::ok)
    }
}

/// Journals in `dir` whose owner is gone: their lock could be taken (held by the returned
/// files until they are dropped).
fn leftovers(dir: &Path) -> Vec<(PathBuf, File)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in rd.flatten() {
        let path = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(file) = File::open(&path) else {
            continue;
        };
        if file.try_lock().is_err() {
            continue;
        }
        // Another llem may have restored and removed it between our open and our lock.
        let same = std::fs::metadata(&path)
            .ok()
            .zip(file.metadata().ok())
            .is_some_and(|(a, b)| a.ino() == b.ino());
        if !same {
            continue;
        }
        if name.starts_with('.') && name.ends_with(".tmp") {
            // Never renamed into place: its writer died before changing anything.
            let _ = std::fs::remove_file(&path);
            continue;
        }
        if name.ends_with(".json") {
            out.push((path, file));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The journals in `dir` whose owner is gone, each restored; a journal is removed only when
/// every value is back.
pub fn restore_leftovers(dir: &Path, devices: &mut Devices) -> Vec<Restored> {
    let mut out = Vec::new();
    for (path, file) in leftovers(dir) {
        let journal = std::fs::read(&path)
            .map_err(|e| e.to_string())
            .and_then(|b| serde_json::from_slice::<Journal>(&b).map_err(|e| e.to_string()));
        let mut r = Restored {
            path: path.clone(),
            journal: None,
            outcomes: Vec::new(),
            error: None,
        };
        match journal {
            Ok(j) => {
                r.outcomes = restore(&j.entries, devices);
                r.journal = Some(j);
                if r.outcomes.iter().all(EntryOutcome::ok)
                    && let Err(e) = std::fs::remove_file(&path)
                {
                    r.error = Some(format!("cannot remove it: {e}"));
                }
            }
            Err(e) => r.error = Some(format!("cannot be read ({e}); restore its values by hand")),
        }
        drop(file);
        out.push(r);
    }
    out
}

/// Journals in `dir` held by a live process (its settings are in force now), and leftovers
/// (owner gone), without touching either: what `llem doctor` shows.
pub fn survey(dir: &Path) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let (mut live, mut dead) = (Vec::new(), Vec::new());
    let Ok(rd) = std::fs::read_dir(dir) else {
        return (live, dead);
    };
    for e in rd.flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "json") {
            continue;
        }
        let Ok(file) = File::open(&path) else {
            continue;
        };
        if file.try_lock().is_ok() {
            dead.push(path);
        } else {
            live.push(path);
        }
    }
    live.sort();
    dead.sort();
    (live, dead)
}
