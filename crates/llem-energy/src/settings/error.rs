//! Why a device setting could not be read, applied or restored.

use std::path::PathBuf;

/// A device setting failed.
#[derive(Debug, thiserror::Error)]
pub enum SettingError {
    /// NVML could not be loaded or answered an error.
    #[error("NVML: {0}")]
    Nvml(String),
    /// The driver refused for lack of privileges.
    #[error("{what}: permission denied ({hint})")]
    Permission {
        /// What was attempted.
        what: String,
        /// How to grant it.
        hint: String,
    },
    /// No GPU with this UUID.
    #[error("no GPU {0} on this machine")]
    NoGpu(String),
    /// The device does not support the setting.
    #[error("{0} is not supported by this device")]
    Unsupported(String),
    /// A sysfs file could not be read or written.
    #[error("cannot {what} {path}: {source}")]
    Io {
        /// `read` or `write`.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A sysfs file held something unexpected.
    #[error("{path}: expected {expected}, found {text:?}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What was expected.
        expected: &'static str,
        /// What it held.
        text: String,
    },
    /// A value of the wrong kind for the knob (a journal edited by hand).
    #[error("{knob} cannot take {value}")]
    WrongValue {
        /// The setting.
        knob: &'static str,
        /// The value.
        value: String,
    },
    /// The journal could not be written, read or removed.
    #[error("device settings journal {path}: {reason}")]
    Journal {
        /// The journal file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
}

/// How to let llem change device settings without running all of it as root.
pub const PRIVILEGE_HINT: &str = "NVML's setters need root (or CAP_SYS_ADMIN): run the study \
    as root or under sudo; the powercap and cpufreq files need write access: root, or a udev \
    rule giving a group write access to them (docs/energy.md, Device settings)";
