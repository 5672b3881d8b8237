//! AMD GPUs through the amdgpu driver's hwmon files, without ROCm.
//!
//! Under `$LLEM_SYSFS_ROOT` (default `/sys`): `class/drm/card<N>/device/hwmon/hwmon<M>/` with
//! `name` = `amdgpu` holds `power1_average` or `power1_input` (µW), `energy1_input` (µJ,
//! cumulative, on cards that have it), `temp1_input` (m°C) and `freq1_input` (sclk, Hz);
//! `card<N>/device/` holds `mem_info_vram_used`/`mem_info_vram_total` (bytes) and
//! `gpu_busy_percent`.

use std::path::{Path, PathBuf};

use crate::sensor::{Domain, DomainKind, Reading, Sensor, SensorError, SensorKind, read_u64};
use crate::value_file::ValueFile;

/// One AMD GPU.
#[derive(Debug)]
pub struct AmdgpuSensor {
    domain: Domain,
    hwmon: PathBuf,
    device: PathBuf,
    power_file: Option<ValueFile>,
    energy_file: Option<ValueFile>,
    last_raw: Option<u64>,
    accumulated_uj: u128,
}

fn optional_u64(path: &Path) -> Option<u64> {
    read_u64(path, "").ok()
}

impl AmdgpuSensor {
    fn open(index: u32, card: &Path, hwmon: PathBuf) -> Result<AmdgpuSensor, SensorError> {
        let device = card.join("device");
        // A file that reads as a number now is the one the sampler keeps.
        let readable = |name: &str| {
            let mut f = ValueFile::open(hwmon.join(name), "");
            f.read_u64().is_ok().then_some(f)
        };
        let power_file = ["power1_average", "power1_input"]
            .into_iter()
            .find_map(readable);
        let energy_file = readable("energy1_input");
        let model = std::fs::read_to_string(device.join("product_name"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "AMD GPU".into());
        let mut s = AmdgpuSensor {
            domain: Domain {
                name: format!("gpu{index}"),
                kind: DomainKind::Gpu,
                index,
                device: format!("{model} ({})", card.display()),
            },
            hwmon,
            device,
            power_file,
            energy_file,
            last_raw: None,
            accumulated_uj: 0,
        };
        s.read(false)?;
        s.accumulated_uj = 0;
        Ok(s)
    }
}

impl Sensor for AmdgpuSensor {
    fn domain(&self) -> &Domain {
        &self.domain
    }

    fn kind(&self) -> SensorKind {
        SensorKind::Amdgpu
    }

    fn has_counter(&self) -> bool {
        self.energy_file.is_some()
    }

    fn has_power(&self) -> bool {
        self.power_file.is_some()
    }

    fn read(&mut self, detail: bool) -> Result<Reading, SensorError> {
        let mut r = Reading::default();
        if let Some(p) = &mut self.power_file {
            r.power_w = Some(p.read_u64()? as f64 / 1e6);
        }
        if let Some(p) = &mut self.energy_file {
            let raw = p.read_u64()?;
            if let Some(prev) = self.last_raw {
                // A 64-bit counter that never wraps in practice; a decrease is a reset.
                let delta = if raw >= prev { raw - prev } else { raw };
                self.accumulated_uj += u128::from(delta);
            }
            self.last_raw = Some(raw);
            r.energy_j = Some(self.accumulated_uj as f64 / 1e6);
        }
        if detail {
            r.temperature_c =
                optional_u64(&self.hwmon.join("temp1_input")).map(|m| m as f64 / 1000.0);
            r.sm_clock_mhz =
                optional_u64(&self.hwmon.join("freq1_input")).map(|hz| hz as f64 / 1e6);
            let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
            r.memory_used_mib = optional_u64(&self.device.join("mem_info_vram_used")).map(mib);
            r.memory_total_mib = optional_u64(&self.device.join("mem_info_vram_total")).map(mib);
            r.sm_util_pct = optional_u64(&self.device.join("gpu_busy_percent")).map(|p| p as f64);
        }
        Ok(r)
    }
}

fn card_number(name: &str) -> Option<u32> {
    // `card0`, not connectors such as `card0-DP-1`.
    name.strip_prefix("card")?.parse().ok()
}

/// Finds every amdgpu card with power or energy readings, as `gpu0`, `gpu1`, ... in card
/// order. `Ok(empty)` when there are none.
pub fn discover(sysfs_root: &Path) -> Result<Vec<AmdgpuSensor>, SensorError> {
    let drm = sysfs_root.join("class/drm");
    let Ok(entries) = std::fs::read_dir(&drm) else {
        return Ok(Vec::new());
    };
    let mut cards: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|e| Some((card_number(&e.file_name().to_string_lossy())?, e.path())))
        .collect();
    cards.sort();
    let mut out = Vec::new();
    for (_, card) in cards {
        let Ok(hwmons) = std::fs::read_dir(card.join("device/hwmon")) else {
            continue;
        };
        let mut hwmons: Vec<PathBuf> = hwmons.flatten().map(|e| e.path()).collect();
        hwmons.sort();
        let Some(hwmon) = hwmons
            .into_iter()
            .find(|h| std::fs::read_to_string(h.join("name")).is_ok_and(|n| n.trim() == "amdgpu"))
        else {
            continue;
        };
        let index = u32::try_from(out.len()).unwrap_or(u32::MAX);
        let sensor = AmdgpuSensor::open(index, &card, hwmon)?;
        if sensor.has_power() || sensor.has_counter() {
            out.push(sensor);
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    /// Writes an amdgpu card; `energy` adds `energy1_input`.
    pub(crate) fn card(root: &Path, n: u32, power_uw: u64, energy: Option<u64>) -> PathBuf {
        let dev = root.join(format!("class/drm/card{n}/device"));
        let hw = dev.join("hwmon/hwmon3");
        std::fs::create_dir_all(&hw).unwrap();
        std::fs::write(hw.join("name"), "amdgpu\n").unwrap();
        std::fs::write(hw.join("power1_average"), format!("{power_uw}\n")).unwrap();
        if let Some(e) = energy {
            std::fs::write(hw.join("energy1_input"), format!("{e}\n")).unwrap();
        }
        std::fs::write(hw.join("temp1_input"), "45000\n").unwrap();
        std::fs::write(hw.join("freq1_input"), "2100000000\n").unwrap();
        std::fs::write(
            dev.join("mem_info_vram_used"),
            format!("{}\n", 512 * 1024 * 1024),
        )
        .unwrap();
        std::fs::write(
            dev.join("mem_info_vram_total"),
            format!("{}\n", 64u64 << 30),
        )
        .unwrap();
        std::fs::write(dev.join("gpu_busy_percent"), "97\n").unwrap();
        std::fs::write(dev.join("product_name"), "AMD Instinct MI300X\n").unwrap();
        hw
    }

    #[test]
    fn power_only_card() {
        let d = tempfile::tempdir().unwrap();
        card(d.path(), 1, 215_000_000, None);
        std::fs::create_dir_all(d.path().join("class/drm/card1-DP-1")).unwrap();
        let mut s = discover(d.path()).unwrap();
        assert_eq!(s.len(), 1);
        let g = &mut s[0];
        assert_eq!(g.domain().name, "gpu0");
        assert!(g.has_power() && !g.has_counter());
        let r = g.read(true).unwrap();
        assert_eq!(r.power_w, Some(215.0));
        assert_eq!(r.temperature_c, Some(45.0));
        assert_eq!(r.sm_clock_mhz, Some(2100.0));
        assert_eq!(r.memory_used_mib, Some(512.0));
        assert_eq!(r.memory_total_mib, Some(65536.0));
        assert_eq!(r.sm_util_pct, Some(97.0));
        assert!(g.domain().device.contains("MI300X"));
    }

    #[test]
    fn power_and_energy_counter() {
        let d = tempfile::tempdir().unwrap();
        let hw = card(d.path(), 0, 300_000_000, Some(1_000_000));
        card(d.path(), 2, 100_000_000, None);
        let mut s = discover(d.path()).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[1].domain().name, "gpu1");
        let g = &mut s[0];
        assert!(g.has_counter());
        std::fs::write(hw.join("energy1_input"), "4000000\n").unwrap();
        assert_eq!(g.read(false).unwrap().energy_j, Some(3.0));
        // A reset continues from the new value.
        std::fs::write(hw.join("energy1_input"), "500000\n").unwrap();
        assert_eq!(g.read(false).unwrap().energy_j, Some(3.5));
    }

    #[test]
    fn no_drm_tree_is_no_gpus() {
        let d = tempfile::tempdir().unwrap();
        assert!(discover(d.path()).unwrap().is_empty());
    }
}
