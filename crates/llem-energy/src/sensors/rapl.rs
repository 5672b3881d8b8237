//! CPU package and DRAM energy from the Linux powercap tree (RAPL).
//!
//! Zones live under `$LLEM_POWERCAP_ROOT` (default `/sys/class/powercap`) as `intel-rapl:<p>`
//! (package `p`) and `intel-rapl:<p>:<s>` (its sub-zones: `dram`, `core`, `uncore`); AMD
//! machines expose the same layout as `intel-rapl:*` or `amd-rapl:*`. Each zone's `energy_uj`
//! is a cumulative counter in microjoules that wraps to 0 after `max_energy_range_uj`; a wrap
//! between two reads is undone by adding the range, and reads are kept frequent enough that
//! two wraps cannot fall between them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::sensor::{Domain, DomainKind, Reading, Sensor, SensorError, SensorKind, read_u64};
use crate::value_file::ValueFile;

/// How to fix a permission error on `energy_uj` (root-only since Linux 5.10).
pub const PERMISSION_HINT: &str = "RAPL counters are readable by root only since Linux 5.10. \
    Run llem as root, or allow reading for this boot with \
    `sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj /sys/class/powercap/intel-rapl:*:*/energy_uj` \
    (a udev rule makes it permanent), or choose another sampler (--sampler estimate).";

/// Package power assumed when the zone states no maximum, for the wrap-safe read interval.
const ASSUMED_MAX_POWER_W: f64 = 1000.0;

/// One powercap zone read as an energy domain.
#[derive(Debug)]
pub struct RaplSensor {
    domain: Domain,
    energy: ValueFile,
    max_range_uj: u64,
    max_power_w: f64,
    last_raw: Option<u64>,
    accumulated_uj: u128,
}

/// A zone found in the powercap tree.
#[derive(Clone, Debug, PartialEq)]
pub struct RaplZone {
    /// Zone directory.
    pub path: PathBuf,
    /// Content of its `name` file (`package-0`, `dram`, `psys`, ...).
    pub name: String,
    /// Package index (`intel-rapl:<p>`).
    pub package: u32,
    /// Sub-zone index, for `intel-rapl:<p>:<s>`.
    pub subzone: Option<u32>,
}

pub use crate::error::RaplUnavailable;

fn parse_zone_dir(name: &str) -> Option<(u32, Option<u32>)> {
    let rest = name
        .strip_prefix("intel-rapl:")
        .or_else(|| name.strip_prefix("amd-rapl:"))?;
    let mut parts = rest.split(':');
    let package = parts.next()?.parse().ok()?;
    let sub = match parts.next() {
        None => None,
        Some(s) => Some(s.parse().ok()?),
    };
    parts.next().is_none().then_some((package, sub))
}

/// Lists the package and sub-zones under `root`, sorted by package then sub-zone.
pub fn zones(root: &Path) -> Result<Vec<RaplZone>, RaplUnavailable> {
    let entries =
        std::fs::read_dir(root).map_err(|_| RaplUnavailable::NoTree(root.to_path_buf()))?;
    let mut found: Vec<RaplZone> = Vec::new();
    let mut add = |path: PathBuf, package: u32, subzone: Option<u32>| {
        if found
            .iter()
            .any(|z| z.package == package && z.subzone == subzone)
        {
            return;
        }
        let name = std::fs::read_to_string(path.join("name"))
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        found.push(RaplZone {
            path,
            name,
            package,
            subzone,
        });
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((package, sub)) = parse_zone_dir(&name) else {
            continue;
        };
        let path = entry.path();
        add(path.clone(), package, sub);
        // Sub-zones also appear as directories inside their package zone.
        if sub.is_none()
            && let Ok(children) = std::fs::read_dir(&path)
        {
            for child in children.flatten() {
                let cname = child.file_name().to_string_lossy().into_owned();
                if let Some((p, Some(s))) = parse_zone_dir(&cname) {
                    add(child.path(), p, Some(s));
                }
            }
        }
    }
    found.sort_by_key(|z| (z.package, z.subzone));
    Ok(found)
}

impl RaplSensor {
    /// Opens a zone as a domain (reading it once to check access).
    pub fn open(zone: &RaplZone, domain: Domain) -> Result<RaplSensor, SensorError> {
        let energy = ValueFile::open(zone.path.join("energy_uj"), PERMISSION_HINT);
        let max_range_uj = read_u64(&zone.path.join("max_energy_range_uj"), PERMISSION_HINT)?;
        // constraint_0_max_power_uw is the zone's stated maximum; absent on many machines.
        let max_power_w = read_u64(&zone.path.join("constraint_0_max_power_uw"), "")
            .ok()
            .map(|uw| uw as f64 / 1e6)
            .filter(|w| *w > 0.0)
            .unwrap_or(ASSUMED_MAX_POWER_W);
        let mut s = RaplSensor {
            domain,
            energy,
            max_range_uj,
            max_power_w,
            last_raw: None,
            accumulated_uj: 0,
        };
        s.read(false)?;
        s.accumulated_uj = 0;
        Ok(s)
    }
}

impl Sensor for RaplSensor {
    fn domain(&self) -> &Domain {
        &self.domain
    }

    fn kind(&self) -> SensorKind {
        SensorKind::Rapl
    }

    fn has_counter(&self) -> bool {
        true
    }

    fn has_power(&self) -> bool {
        false
    }

    fn read(&mut self, _detail: bool) -> Result<Reading, SensorError> {
        let raw = self.energy.read_u64()?;
        if let Some(prev) = self.last_raw {
            let delta = if raw >= prev {
                raw - prev
            } else {
                // Wrapped past max_energy_range_uj back to 0 since the last read.
                raw.saturating_add(self.max_range_uj.saturating_sub(prev))
            };
            self.accumulated_uj += u128::from(delta);
        }
        self.last_raw = Some(raw);
        Ok(Reading {
            energy_j: Some(self.accumulated_uj as f64 / 1e6),
            ..Reading::default()
        })
    }

    fn max_read_interval(&self) -> Option<Duration> {
        // At most one wrap may happen between reads: read at least twice per wrap period.
        let wrap_s = self.max_range_uj as f64 / 1e6 / self.max_power_w;
        (wrap_s.is_finite() && wrap_s > 0.0).then(|| Duration::from_secs_f64(wrap_s / 2.0))
    }
}

/// Opens every package zone (`package-*`) and DRAM sub-zone under `root` as sensors:
/// `package-<p>` and `dram-<p>`. Core/uncore sub-zones (part of the package) and `psys`
/// (the whole platform, overlapping the packages) are left out.
pub fn discover(root: &Path) -> Result<Vec<RaplSensor>, RaplUnavailable> {
    let all = zones(root)?;
    let mut sensors = Vec::new();
    for z in &all {
        let (name, kind) = match (z.subzone, z.name.as_str()) {
            (None, n) if n.starts_with("package") => {
                (format!("package-{}", z.package), DomainKind::CpuPackage)
            }
            (Some(_), "dram") => (format!("dram-{}", z.package), DomainKind::Dram),
            _ => continue,
        };
        let domain = Domain {
            name,
            kind,
            index: z.package,
            device: z.path.display().to_string(),
        };
        sensors.push(RaplSensor::open(z, domain)?);
    }
    if !sensors
        .iter()
        .any(|s| s.domain.kind == DomainKind::CpuPackage)
    {
        return Err(RaplUnavailable::NoZones(root.to_path_buf()));
    }
    Ok(sensors)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn zone(root: &Path, dir: &str, name: &str, energy: u64, range: u64) -> PathBuf {
        let p = root.join(dir);
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("name"), format!("{name}\n")).unwrap();
        std::fs::write(p.join("energy_uj"), format!("{energy}\n")).unwrap();
        std::fs::write(p.join("max_energy_range_uj"), format!("{range}\n")).unwrap();
        p
    }

    #[test]
    fn discovers_packages_and_dram_and_skips_the_rest() {
        let d = tempfile::tempdir().unwrap();
        zone(d.path(), "intel-rapl:0", "package-0", 5, 1000);
        zone(d.path(), "intel-rapl:0/intel-rapl:0:0", "core", 1, 1000);
        zone(d.path(), "intel-rapl:0/intel-rapl:0:1", "dram", 2, 1000);
        zone(d.path(), "intel-rapl:1", "psys", 3, 1000);
        zone(d.path(), "amd-rapl:2", "package-2", 4, 1000);
        let names: Vec<String> = discover(d.path())
            .unwrap()
            .iter()
            .map(|s| s.domain().name.clone())
            .collect();
        assert_eq!(names, ["package-0", "dram-0", "package-2"]);
    }

    #[test]
    fn wraparound_between_reads_is_undone() {
        let d = tempfile::tempdir().unwrap();
        let p = zone(d.path(), "intel-rapl:0", "package-0", 900, 1000);
        let mut s = discover(d.path()).unwrap().remove(0);
        std::fs::write(p.join("energy_uj"), "950\n").unwrap();
        assert_eq!(s.read(false).unwrap().energy_j, Some(50e-6));
        std::fs::write(p.join("energy_uj"), "30\n").unwrap();
        // 950 -> 1000 wraps to 0 -> 30: 80 µJ, 130 µJ in total.
        assert!((s.read(false).unwrap().energy_j.unwrap() - 130e-6).abs() < 1e-15);
    }

    #[test]
    fn read_interval_bounds_wraps() {
        let d = tempfile::tempdir().unwrap();
        let p = zone(d.path(), "intel-rapl:0", "package-0", 0, 262_143_328_850);
        std::fs::write(p.join("constraint_0_max_power_uw"), "250000000\n").unwrap();
        let s = discover(d.path()).unwrap().remove(0);
        // 262 kJ at 250 W wraps every 1048 s: read at least every 524 s.
        let secs = s.max_read_interval().unwrap().as_secs_f64();
        assert!((secs - 524.29).abs() < 0.01, "{secs}");
    }

    #[test]
    fn missing_tree_and_garbage() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            discover(&d.path().join("nope")),
            Err(RaplUnavailable::NoTree(_))
        ));
        assert!(matches!(
            discover(d.path()),
            Err(RaplUnavailable::NoZones(_))
        ));
        let p = zone(d.path(), "intel-rapl:0", "package-0", 0, 100);
        std::fs::write(p.join("energy_uj"), "lots\n").unwrap();
        let e = discover(d.path()).unwrap_err().to_string();
        assert!(
            e.contains("expected a number") && e.contains("\"lots\""),
            "{e}"
        );
    }
}
