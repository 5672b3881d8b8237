//! The hwmon node meter: the ACPI power meter (`name` = `power_meter`: `power1_average` in
//! µW over `power1_average_interval` ms) or any hwmon device named in the config, through its
//! `energy*_input` counter (µJ) where it has one.

use std::path::{Path, PathBuf};

use super::{NodeReading, NodeSource, NodeUnavailable};
use crate::sensor::{SensorError, SensorKind};
use crate::value_file::ValueFile;

/// The hwmon `name` of the ACPI power meter driver (`acpi_power_meter`).
pub const ACPI_POWER_METER: &str = "power_meter";

const HINT: &str = "the hwmon files are readable by every user on most kernels; check the \
                    device's permissions";

/// A hwmon device read as the node meter.
pub struct HwmonMeter {
    dir: PathBuf,
    name: String,
    energy: Option<ValueFile>,
    power: Option<ValueFile>,
    /// `power1_average_interval`, s.
    interval_s: Option<f64>,
    accuracy: Option<String>,
}

/// The hwmon directory whose `name` (or `device/name`) is `name`.
fn find(root: &Path, name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    dirs.sort();
    dirs.into_iter().find_map(|d| {
        [d.clone(), d.join("device")]
            .into_iter()
            .find(|dir| std::fs::read_to_string(dir.join("name")).is_ok_and(|n| n.trim() == name))
    })
}

fn file(dir: &Path, f: &str) -> Option<ValueFile> {
    let p = dir.join(f);
    p.is_file().then(|| ValueFile::open(p, HINT))
}

impl HwmonMeter {
    /// Opens the device called `name` under `root`.
    pub fn open(root: &Path, name: &str) -> Result<HwmonMeter, NodeUnavailable> {
        let dir = find(root, name).ok_or_else(|| NodeUnavailable::NoHwmon {
            name: name.into(),
            root: root.to_path_buf(),
        })?;
        let energy = (1..=8).find_map(|i| file(&dir, &format!("energy{i}_input")));
        let power = file(&dir, "power1_average").or_else(|| file(&dir, "power1_input"));
        if energy.is_none() && power.is_none() {
            return Err(NodeUnavailable::NoHwmonReading(dir));
        }
        let interval_s = file(&dir, "power1_average_interval")
            .and_then(|mut f| f.read_u64().ok())
            .map(|ms| ms as f64 / 1000.0);
        let accuracy = std::fs::read_to_string(dir.join("power1_accuracy"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        Ok(HwmonMeter {
            dir,
            name: name.into(),
            energy,
            power,
            interval_s,
            accuracy,
        })
    }
}

impl NodeSource for HwmonMeter {
    fn describe(&self) -> String {
        format!("hwmon {} ({})", self.name, self.dir.display())
    }
    fn kind(&self) -> SensorKind {
        SensorKind::Hwmon
    }
    fn has_counter(&self) -> bool {
        self.energy.is_some()
    }
    fn poll(&mut self) -> Result<NodeReading, SensorError> {
        let energy_j = match &mut self.energy {
            Some(f) => Some(f.read_u64()? as f64 * 1e-6),
            None => None,
        };
        let average_w = match &mut self.power {
            Some(f) => Some(f.read_u64()? as f64 * 1e-6),
            None => None,
        };
        Ok(NodeReading {
            power_w: None,
            average_w,
            period_s: average_w.and(self.interval_s),
            energy_j,
        })
    }
    fn notes(&self) -> Vec<String> {
        self.accuracy
            .iter()
            .map(|a| format!("hwmon {}: the meter states its accuracy as {a}", self.name))
            .collect()
    }
}
