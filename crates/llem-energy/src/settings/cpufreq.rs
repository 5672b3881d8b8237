//! A CPU's highest frequency and governor through cpufreq
//! (`devices/system/cpu/cpuN/cpufreq`): `scaling_max_freq` in kHz, bounded by
//! `cpuinfo_min_freq`/`cpuinfo_max_freq`; `scaling_governor`, one of
//! `scaling_available_governors`.

use std::path::PathBuf;

use super::powercap::{read_u64, write};
use super::{Allowed, DeviceSetting, SettingError, Value};

/// `scaling_max_freq` of one CPU.
pub struct MaxFrequency {
    dir: PathBuf,
}

impl MaxFrequency {
    /// The CPU whose `cpufreq` directory is `dir`.
    pub fn new(dir: PathBuf) -> MaxFrequency {
        MaxFrequency { dir }
    }
}

impl DeviceSetting for MaxFrequency {
    fn read(&self) -> Result<Option<Value>, SettingError> {
        Ok(Some(Value::Khz(read_u64(
            &self.dir.join("scaling_max_freq"),
        )?)))
    }

    fn allowed(&self) -> Result<Allowed, SettingError> {
        Ok(Allowed::Khz(
            read_u64(&self.dir.join("cpuinfo_min_freq"))?,
            read_u64(&self.dir.join("cpuinfo_max_freq"))?,
        ))
    }

    fn may_change(&self) -> bool {
        super::writable(&self.dir.join("scaling_max_freq"))
    }

    fn apply(&self, v: &Value) -> Result<(), SettingError> {
        let Value::Khz(k) = v else {
            return Err(SettingError::WrongValue {
                knob: "cpu_max_frequency_mhz",
                value: v.to_string(),
            });
        };
        write(&self.dir.join("scaling_max_freq"), &k.to_string())
    }
}

/// `scaling_governor` of one CPU.
pub struct Governor {
    dir: PathBuf,
}

impl Governor {
    /// The CPU whose `cpufreq` directory is `dir`.
    pub fn new(dir: PathBuf) -> Governor {
        Governor { dir }
    }
}

impl DeviceSetting for Governor {
    fn read(&self) -> Result<Option<Value>, SettingError> {
        let path = self.dir.join("scaling_governor");
        let text = std::fs::read_to_string(&path).map_err(|source| SettingError::Io {
            what: "read",
            path,
            source,
        })?;
        Ok(Some(Value::Governor(text.trim().to_string())))
    }

    fn allowed(&self) -> Result<Allowed, SettingError> {
        let path = self.dir.join("scaling_available_governors");
        match std::fs::read_to_string(&path) {
            Ok(text) => Ok(Allowed::Governors(
                text.split_whitespace().map(str::to_string).collect(),
            )),
            Err(_) => Ok(Allowed::Unknown),
        }
    }

    fn may_change(&self) -> bool {
        super::writable(&self.dir.join("scaling_governor"))
    }

    fn apply(&self, v: &Value) -> Result<(), SettingError> {
        let Value::Governor(g) = v else {
            return Err(SettingError::WrongValue {
                knob: "cpu_governor",
                value: v.to_string(),
            });
        };
        write(&self.dir.join("scaling_governor"), g)
    }
}
