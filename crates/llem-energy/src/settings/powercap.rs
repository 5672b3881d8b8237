//! A CPU package's long-term power limit through powercap (`intel-rapl:N`): constraint 0,
//! which the kernel names `long_term`, in µW; its range ends at `constraint_0_max_power_uw`
//! where the zone has one.

use std::path::{Path, PathBuf};

use super::error::PRIVILEGE_HINT;
use super::{Allowed, DeviceSetting, SettingError, Value};

/// The long-term limit of one zone.
pub struct PowerLimit {
    zone: PathBuf,
}

impl PowerLimit {
    /// The zone at `zone`.
    pub fn new(zone: PathBuf) -> PowerLimit {
        PowerLimit { zone }
    }
}

/// Reads a sysfs number.
pub(super) fn read_u64(path: &Path) -> Result<u64, SettingError> {
    let text = std::fs::read_to_string(path).map_err(|source| SettingError::Io {
        what: "read",
        path: path.to_path_buf(),
        source,
    })?;
    text.trim().parse().map_err(|_| SettingError::Parse {
        path: path.to_path_buf(),
        expected: "a whole number",
        text: text.trim().to_string(),
    })
}

/// Writes a sysfs value; permission denied says how to grant it.
pub(super) fn write(path: &Path, text: &str) -> Result<(), SettingError> {
    std::fs::write(path, format!("{text}\n")).map_err(|source| {
        if source.kind() == std::io::ErrorKind::PermissionDenied {
            SettingError::Permission {
                what: format!("writing {}", path.display()),
                hint: PRIVILEGE_HINT.into(),
            }
        } else {
            SettingError::Io {
                what: "write",
                path: path.to_path_buf(),
                source,
            }
        }
    })
}

impl DeviceSetting for PowerLimit {
    fn read(&self) -> Result<Option<Value>, SettingError> {
        let uw = read_u64(&self.zone.join("constraint_0_power_limit_uw"))?;
        Ok(Some(Value::Watts(uw as f64 / 1e6)))
    }

    fn allowed(&self) -> Result<Allowed, SettingError> {
        let name = self.zone.join("constraint_0_name");
        if let Ok(n) = std::fs::read_to_string(&name)
            && n.trim() != "long_term"
        {
            return Err(SettingError::Parse {
                path: name,
                expected: "long_term",
                text: n.trim().to_string(),
            });
        }
        match read_u64(&self.zone.join("constraint_0_max_power_uw")) {
            Ok(max) if max > 0 => Ok(Allowed::Watts(1.0, max as f64 / 1e6)),
            _ => Ok(Allowed::Unknown),
        }
    }

    fn may_change(&self) -> bool {
        super::writable(&self.zone.join("constraint_0_power_limit_uw"))
    }

    fn apply(&self, v: &Value) -> Result<(), SettingError> {
        let Value::Watts(w) = v else {
            return Err(SettingError::WrongValue {
                knob: "cpu_power_limit_w",
                value: v.to_string(),
            });
        };
        let uw = (w * 1e6).round() as u64;
        write(
            &self.zone.join("constraint_0_power_limit_uw"),
            &uw.to_string(),
        )
    }
}
