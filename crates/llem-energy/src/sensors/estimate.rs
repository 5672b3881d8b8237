//! Power estimates for machines without readable counters (laptops, CI, VMs).
//!
//! - CPU: `TDP x utilisation`, utilisation from `/proc/stat` between reads (read at most
//!   every 100 ms; before the first interval, the 1-minute load average per CPU). TDP is
//!   `measurement.cpu_tdp_w` from the user config (or `LLEM_CPU_TDP_W`); else the part's
//!   entry in [`TDP_TABLE`] scaled to the logical CPUs visible (a VM gets its share); else
//!   [`DEFAULT_TDP_W_PER_CPU`] per online logical CPU, kept within
//!   [`DEFAULT_TDP_MIN_W`]..[`DEFAULT_TDP_MAX_W`]. Current server and laptop parts draw
//!   about 2-4 W per hardware thread at full load (e.g. 360 W / 192 threads, 28 W / 8
//!   threads), so the default is an upper-end figure; set the real TDP for your machine.
//! - DRAM: [`DRAM_W_PER_GIB`] per GiB of installed memory (`MemTotal`), constant — the figure
//!   CodeCarbon uses (3 W per 8 GB).
//!
//! Every result from these sensors is labelled `estimate` and carries a warning.

use std::path::Path;

use crate::sensor::{Domain, DomainKind, Reading, Sensor, SensorError, SensorKind};
use crate::value_file::ValueFile;

/// Default CPU TDP per online logical CPU, W.
pub const DEFAULT_TDP_W_PER_CPU: f64 = 4.0;
/// Lower bound of the default TDP, W.
pub const DEFAULT_TDP_MIN_W: f64 = 10.0;
/// Upper bound of the default TDP, W.
pub const DEFAULT_TDP_MAX_W: f64 = 400.0;
/// DRAM power per GiB of installed memory, W.
pub const DRAM_W_PER_GIB: f64 = 0.375;

/// Known parts: `(model-name substring, TDP W, hardware threads)`, from the vendors' published
/// specifications. The TDP is scaled to the logical CPUs this machine sees, so a VM with a
/// few vCPUs of a large part gets its share.
pub const TDP_TABLE: &[(&str, f64, u32)] = &[
    ("EPYC 9654", 360.0, 192),
    ("EPYC 9554", 360.0, 128),
    ("EPYC 9454", 290.0, 96),
    ("EPYC 7763", 280.0, 128),
    ("EPYC 7742", 225.0, 128),
    ("EPYC 7543", 225.0, 64),
    ("Xeon(R) Platinum 8480", 350.0, 112),
    ("Xeon(R) Platinum 8380", 270.0, 80),
    ("Xeon(R) Platinum 8358", 250.0, 64),
    ("Xeon(R) Gold 6338", 205.0, 64),
    ("Core(TM) i9-13900K", 125.0, 32),
    ("Core(TM) i7-1165G7", 28.0, 8),
    ("Ryzen 9 7950X", 170.0, 32),
    ("Ryzen 9 5950X", 105.0, 32),
];

/// Where the CPU TDP of an estimate came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Tdp {
    /// Watts.
    pub watts: f64,
    /// `measurement.cpu_tdp_w`, the table entry, or the default rule with the CPU count.
    pub origin: String,
}

/// The TDP to use: the configured one; else the table entry for `model` scaled to `cpus`
/// logical CPUs; else the documented default rule for `cpus`.
pub fn tdp(configured: Option<f64>, model: &str, cpus: usize) -> Tdp {
    if let Some(w) = configured {
        return Tdp {
            watts: w,
            origin: "measurement.cpu_tdp_w".into(),
        };
    }
    if let Some((name, watts, threads)) = TDP_TABLE.iter().find(|(n, _, _)| model.contains(n)) {
        let share = (cpus as f64 / f64::from(*threads)).min(1.0);
        return Tdp {
            watts: (watts * share).max(1.0),
            origin: format!("table: {name} {watts} W / {threads} threads x {cpus} logical CPUs"),
        };
    }
    Tdp {
        watts: (DEFAULT_TDP_W_PER_CPU * cpus as f64).clamp(DEFAULT_TDP_MIN_W, DEFAULT_TDP_MAX_W),
        origin: format!("default: {DEFAULT_TDP_W_PER_CPU} W x {cpus} logical CPUs"),
    }
}

/// The CPU model name from `cpuinfo` (empty when unknown).
pub fn cpu_model(proc_root: &Path) -> String {
    std::fs::read_to_string(proc_root.join("cpuinfo"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_default()
}

/// CPU busy and total jiffies from the aggregate `cpu` line, the first of `/proc/stat`.
fn cpu_times(stat: &mut ValueFile) -> Result<(u64, u64), SensorError> {
    let mut buf = [0u8; 256];
    let n = stat.read_prefix(&mut buf)?;
    let text = String::from_utf8_lossy(buf.get(..n).unwrap_or_default()).into_owned();
    let bad = || SensorError::Parse {
        path: stat.path().to_path_buf(),
        text: text.lines().next().unwrap_or("").chars().take(60).collect(),
    };
    aggregate_cpu_times(&text).ok_or_else(bad)
}

/// Busy and total jiffies from the text of `/proc/stat` (its first, aggregate `cpu` line).
pub(crate) fn aggregate_cpu_times(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().next().filter(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(str::parse)
        .collect::<Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal (guest time is already in user/nice).
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// Shortest time between reads of `/proc/stat`: the kernel formats the whole file (with its
/// long `intr` line) on every read, and its counters move at 100 Hz anyway.
pub const MIN_STAT_INTERVAL: std::time::Duration = std::time::Duration::from_millis(100);

/// CPU package power estimate: TDP x utilisation since the previous read.
#[derive(Debug)]
pub struct CpuEstimate {
    domain: Domain,
    stat: ValueFile,
    tdp_w: f64,
    last: (u64, u64),
    last_util: f64,
    last_read: std::time::Instant,
}

impl CpuEstimate {
    /// Opens the estimate over `proc_root/stat`.
    pub fn open(proc_root: &Path, tdp: &Tdp) -> Result<CpuEstimate, SensorError> {
        let mut stat = ValueFile::open(proc_root.join("stat"), "");
        let last = cpu_times(&mut stat)?;
        // Until a first interval of /proc/stat has passed, the 1-minute load average per CPU
        // stands in for utilisation (so a short run is not estimated at 0 W).
        let prior = std::fs::read_to_string(proc_root.join("loadavg"))
            .ok()
            .and_then(|t| t.split_whitespace().next()?.parse::<f64>().ok())
            .map_or(0.0, |load| (load / logical_cpus() as f64).clamp(0.0, 1.0));
        Ok(CpuEstimate {
            domain: Domain {
                name: "package-0".into(),
                kind: DomainKind::CpuPackage,
                index: 0,
                device: format!(
                    "estimate: {:.0} W TDP ({}) x CPU utilisation",
                    tdp.watts, tdp.origin
                ),
            },
            stat,
            tdp_w: tdp.watts,
            last,
            last_util: prior,
            last_read: std::time::Instant::now(),
        })
    }
}

impl Sensor for CpuEstimate {
    fn domain(&self) -> &Domain {
        &self.domain
    }
    fn kind(&self) -> SensorKind {
        SensorKind::Estimate
    }
    fn has_counter(&self) -> bool {
        false
    }
    fn has_power(&self) -> bool {
        true
    }
    fn changes_every(&self) -> Option<std::time::Duration> {
        Some(MIN_STAT_INTERVAL)
    }
    fn read(&mut self, _detail: bool) -> Result<Reading, SensorError> {
        if self.last_read.elapsed() < MIN_STAT_INTERVAL {
            return Ok(Reading {
                power_w: Some(self.tdp_w * self.last_util),
                ..Reading::default()
            });
        }
        self.last_read = std::time::Instant::now();
        let (busy, total) = cpu_times(&mut self.stat)?;
        let (dbusy, dtotal) = (
            busy.saturating_sub(self.last.0),
            total.saturating_sub(self.last.1),
        );
        // /proc/stat ticks at 100 Hz: between two fast reads nothing may have moved.
        if dtotal > 0 {
            self.last_util = (dbusy as f64 / dtotal as f64).clamp(0.0, 1.0);
            self.last = (busy, total);
        }
        Ok(Reading {
            power_w: Some(self.tdp_w * self.last_util),
            sm_util_pct: None,
            ..Reading::default()
        })
    }
}

/// DRAM power estimate: a constant per GiB of installed memory.
#[derive(Debug)]
pub struct DramEstimate {
    domain: Domain,
    power_w: f64,
}

/// Installed memory in GiB from `meminfo`.
pub fn mem_total_gib(proc_root: &Path) -> Result<f64, SensorError> {
    let path = proc_root.join("meminfo");
    let text = std::fs::read_to_string(&path).map_err(|source| SensorError::Io {
        path: path.clone(),
        source,
    })?;
    let kib: Option<f64> = text
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok());
    kib.map(|k| k / (1024.0 * 1024.0))
        .ok_or(SensorError::Parse {
            path,
            text: "no MemTotal line".into(),
        })
}

impl DramEstimate {
    /// Opens the estimate for the memory in `proc_root/meminfo`.
    pub fn open(proc_root: &Path) -> Result<DramEstimate, SensorError> {
        let gib = mem_total_gib(proc_root)?;
        Ok(DramEstimate {
            domain: Domain {
                name: "dram-0".into(),
                kind: DomainKind::Dram,
                index: 0,
                device: format!("estimate: {DRAM_W_PER_GIB} W/GiB x {gib:.1} GiB"),
            },
            power_w: DRAM_W_PER_GIB * gib,
        })
    }
}

impl Sensor for DramEstimate {
    fn domain(&self) -> &Domain {
        &self.domain
    }
    fn kind(&self) -> SensorKind {
        SensorKind::Estimate
    }
    fn has_counter(&self) -> bool {
        false
    }
    fn has_power(&self) -> bool {
        true
    }
    fn changes_every(&self) -> Option<std::time::Duration> {
        // A constant: it never changes; the CPU estimate beside it sets the pace.
        Some(std::time::Duration::MAX)
    }
    fn read(&mut self, _detail: bool) -> Result<Reading, SensorError> {
        Ok(Reading {
            power_w: Some(self.power_w),
            ..Reading::default()
        })
    }
}

/// Online logical CPUs.
pub fn logical_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    #[test]
    fn tdp_rule_and_table() {
        assert_eq!(tdp(None, "AMD EPYC", 2).watts, 10.0);
        assert_eq!(tdp(None, "", 16).watts, 64.0);
        assert_eq!(tdp(None, "", 256).watts, 400.0);
        assert_eq!(
            tdp(Some(95.0), "AMD EPYC 9654 96-Core Processor", 256).watts,
            95.0
        );
        // A 16-vCPU slice of a 192-thread, 360 W part: 30 W.
        let t = tdp(None, "AMD EPYC 9654 96-Core Processor", 16);
        assert_eq!(t.watts, 30.0);
        assert!(t.origin.starts_with("table: EPYC 9654"));
        // The whole part (or more CPUs than it has threads) is capped at its TDP.
        assert_eq!(
            tdp(None, "Intel(R) Xeon(R) Platinum 8480+", 224).watts,
            350.0
        );
    }

    #[test]
    fn utilisation_from_proc_stat_deltas() {
        let d = tempfile::tempdir().unwrap();
        let stat = d.path().join("stat");
        std::fs::write(&stat, "cpu  100 0 100 800 0 0 0 0 0 0\ncpu0 1 2 3\n").unwrap();
        let mut s = CpuEstimate::open(d.path(), &tdp(Some(100.0), "", 1)).unwrap();
        let wait = || std::thread::sleep(MIN_STAT_INTERVAL);
        // +300 busy, +100 idle: 75 % busy.
        std::fs::write(&stat, "cpu  300 0 200 900 0 0 0 0 0 0\n").unwrap();
        wait();
        assert_eq!(s.read(false).unwrap().power_w, Some(75.0));
        // Within the read interval: the last estimate, without reading.
        std::fs::write(&stat, "garbage\n").unwrap();
        assert_eq!(s.read(false).unwrap().power_w, Some(75.0));
        // No tick since: keep the last utilisation.
        std::fs::write(&stat, "cpu  300 0 200 900 0 0 0 0 0 0\n").unwrap();
        wait();
        assert_eq!(s.read(false).unwrap().power_w, Some(75.0));
        std::fs::write(&stat, "garbage\n").unwrap();
        wait();
        assert!(s.read(false).is_err());
    }

    #[test]
    fn dram_from_meminfo() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("meminfo"),
            "MemTotal:       16777216 kB\nMemFree: 1 kB\n",
        )
        .unwrap();
        let mut s = DramEstimate::open(d.path()).unwrap();
        assert_eq!(s.read(false).unwrap().power_w, Some(6.0));
    }

    #[test]
    fn this_machine() {
        let root = Path::new("/proc");
        let mut cpu =
            CpuEstimate::open(root, &tdp(None, &cpu_model(root), logical_cpus())).unwrap();
        std::thread::sleep(MIN_STAT_INTERVAL);
        assert!(cpu.read(false).unwrap().power_w.is_some());
        let mut dram = DramEstimate::open(root).unwrap();
        assert!(dram.read(false).unwrap().power_w.unwrap() > 0.0);
    }
}
