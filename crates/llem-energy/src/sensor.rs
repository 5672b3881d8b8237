//! What a sensor is: one energy domain, read on demand.

use std::time::Duration;

pub use crate::error::SensorError;
use serde::Serialize;

/// The kind of device an energy domain is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DomainKind {
    /// A GPU.
    Gpu,
    /// A CPU package (socket).
    CpuPackage,
    /// DRAM attached to a package.
    Dram,
    /// The whole node (BMC or wall meter): it encloses every other domain, so it is never
    /// summed with them.
    Node,
}

impl DomainKind {
    /// Its name in results (`gpu`, `cpu_package`, `dram`, `node`), as it serialises.
    pub fn as_str(self) -> &'static str {
        match self {
            DomainKind::Gpu => "gpu",
            DomainKind::CpuPackage => "cpu_package",
            DomainKind::Dram => "dram",
            DomainKind::Node => "node",
        }
    }
}

/// One energy domain: `gpu0`, `package-0`, `dram-0`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Domain {
    /// Name used in results: `gpu<i>`, `package-<i>`, `dram-<i>`.
    pub name: String,
    /// Device kind.
    pub kind: DomainKind,
    /// Index within the kind (CUDA-visible GPU index, package index).
    pub index: u32,
    /// What the domain is, for humans: GPU model and UUID, powercap zone path, ...
    pub device: String,
}

/// Which family of sensor produced a series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SensorKind {
    /// NVIDIA GPU through NVML.
    Nvml,
    /// AMD GPU through amdgpu hwmon.
    Amdgpu,
    /// CPU package or DRAM through Linux powercap (RAPL).
    Rapl,
    /// A model (TDP x utilisation, per-GiB DRAM power), not a measurement.
    Estimate,
    /// A hwmon device (the ACPI power meter).
    Hwmon,
    /// A BMC's DCMI power reading over IPMI.
    Ipmi,
    /// A BMC's chassis power over Redfish.
    Redfish,
}

impl SensorKind {
    /// The name used in results: `nvml`, `amdgpu`, `rapl`, `estimate`.
    pub fn as_str(self) -> &'static str {
        match self {
            SensorKind::Nvml => "nvml",
            SensorKind::Amdgpu => "amdgpu",
            SensorKind::Rapl => "rapl",
            SensorKind::Estimate => "estimate",
            SensorKind::Hwmon => "hwmon",
            SensorKind::Ipmi => "ipmi",
            SensorKind::Redfish => "redfish",
        }
    }
}

/// How a domain's energy was obtained, weakest first: the weakest source among the domains
/// is the source of a total.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EnergySource {
    /// A model of power, not a measurement.
    Estimate,
    /// Measured power, integrated over time (trapezoids).
    Integrated,
    /// A hardware energy counter, differenced.
    Counter,
}

impl EnergySource {
    /// The name used in results: `estimate`, `integrated`, `counter`.
    pub fn as_str(self) -> &'static str {
        match self {
            EnergySource::Estimate => "estimate",
            EnergySource::Integrated => "integrated",
            EnergySource::Counter => "counter",
        }
    }
}

/// One reading of a sensor. Every field is optional: sensors fill what their hardware has.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reading {
    /// Cumulative energy in joules since the sensor was opened (wraparound already undone).
    pub energy_j: Option<f64>,
    /// Power in watts: instantaneous where the device reports it.
    pub power_w: Option<f64>,
    /// The device's own 1-s average power, W, where it reports one beside `power_w`.
    pub power_avg_w: Option<f64>,
    /// Temperature, °C.
    pub temperature_c: Option<f64>,
    /// Device memory in use, MiB.
    pub memory_used_mib: Option<f64>,
    /// Device memory, MiB.
    pub memory_total_mib: Option<f64>,
    /// SM clock, MHz.
    pub sm_clock_mhz: Option<f64>,
    /// SM utilisation, percent.
    pub sm_util_pct: Option<f64>,
    /// Memory-controller utilisation, percent.
    pub mem_util_pct: Option<f64>,
    /// Clock throttle reasons (NVML bitmask).
    pub throttle_reasons: Option<u64>,
    /// How long before the read the values hold, s: a slow source (a BMC polled once a
    /// second, a reading averaged over its period) hands back an older value; the sampler
    /// stamps it that much earlier.
    pub age_s: Option<f64>,
}

/// One energy domain, read on demand by the sampler thread.
pub trait Sensor: Send {
    /// The domain this sensor measures.
    fn domain(&self) -> &Domain;
    /// The sensor family.
    fn kind(&self) -> SensorKind;
    /// True when readings carry a cumulative energy counter.
    fn has_counter(&self) -> bool;
    /// True when readings carry power.
    fn has_power(&self) -> bool;
    /// Reads the sensor. `detail` also asks for the slow fields (temperature, memory,
    /// clocks, utilisation, throttle reasons), which the sampler reads less often.
    fn read(&mut self, detail: bool) -> Result<Reading, SensorError>;
    /// Longest time between reads that keeps a wrapping counter unambiguous.
    fn max_read_interval(&self) -> Option<Duration> {
        None
    }
    /// Version of the device driver behind the sensor (NVIDIA driver), for the result's
    /// environment.
    fn driver_version(&self) -> Option<String> {
        None
    }
    /// Facts about the setup that weaken the measurement (persistence mode off, ...).
    fn notes(&self) -> Vec<String> {
        Vec::new()
    }
    /// The shortest time in which the reading can change, for a sensor whose inputs move
    /// slower than any sampler would tick (`/proc/stat` every 100 ms, a polled BMC); `None`
    /// for hardware read directly (any tick may see a new value). The sampler ticks no
    /// faster than the fastest sensor present can change.
    fn changes_every(&self) -> Option<Duration> {
        None
    }
    /// How often the values moved while sampling, s, for sensors that can only tell after
    /// the fact (a polled BMC); replaces the period measured before sampling.
    fn observed_update_period_s(&self) -> Option<f64> {
        None
    }
}

/// A sensor error for an I/O failure on `path`; permission errors carry `hint` (how to fix).
pub(crate) fn io_error(path: &std::path::Path, hint: &str, source: std::io::Error) -> SensorError {
    if source.kind() == std::io::ErrorKind::PermissionDenied {
        SensorError::PermissionDenied {
            path: path.to_path_buf(),
            hint: hint.to_string(),
        }
    } else {
        SensorError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Reads a sysfs-style file holding one unsigned integer, once.
pub(crate) fn read_u64(path: &std::path::Path, hint: &'static str) -> Result<u64, SensorError> {
    crate::value_file::ValueFile::open(path.to_path_buf(), hint).read_u64()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::DomainKind;

    #[test]
    fn a_kind_is_named_as_it_serialises() {
        for k in [
            DomainKind::Gpu,
            DomainKind::CpuPackage,
            DomainKind::Dram,
            DomainKind::Node,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
    }
}
