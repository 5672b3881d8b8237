//! Device settings llem changes around a cell and always puts back: a GPU's power limit and
//! locked graphics and memory clocks (NVML), a CPU package's long-term RAPL power limit
//! (powercap) and each CPU's maximum frequency and governor (cpufreq).
//!
//! Every change goes through a [`journal`]: the original values are written (atomically,
//! under a lock the writer holds while it lives) before the first change, and the journal is
//! removed only after every value was written back and read back. A journal whose lock can be
//! taken belongs to a process that died: [`journal::restore_leftovers`] puts its values back.

pub mod cpufreq;
pub mod error;
pub mod journal;
pub mod nvml;
pub mod powercap;

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use error::SettingError;

/// One device knob, named so that another process can find it again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Knob {
    /// A GPU's power management limit.
    GpuPowerLimit {
        /// `GPU-...` UUID (indices depend on `CUDA_VISIBLE_DEVICES`).
        uuid: String,
    },
    /// A GPU's locked graphics clocks.
    GpuLockedClocks {
        /// `GPU-...` UUID.
        uuid: String,
    },
    /// A GPU's locked memory clocks.
    GpuLockedMemoryClocks {
        /// `GPU-...` UUID.
        uuid: String,
    },
    /// A package's long-term power limit (powercap constraint 0).
    CpuPowerLimit {
        /// The zone's directory (`.../intel-rapl:0`).
        zone: PathBuf,
    },
    /// A CPU's highest frequency (`scaling_max_freq`).
    CpuMaxFrequency {
        /// The CPU's `cpufreq` directory.
        cpufreq: PathBuf,
    },
    /// A CPU's frequency governor (`scaling_governor`).
    CpuGovernor {
        /// The CPU's `cpufreq` directory.
        cpufreq: PathBuf,
    },
}

impl Knob {
    /// The setting's name, as configuration and results spell it.
    pub fn setting(&self) -> &'static str {
        match self {
            Knob::GpuPowerLimit { .. } => "gpu_power_limit_w",
            Knob::GpuLockedClocks { .. } => "gpu_locked_clocks_mhz",
            Knob::GpuLockedMemoryClocks { .. } => "gpu_locked_memory_clocks_mhz",
            Knob::CpuPowerLimit { .. } => "cpu_power_limit_w",
            Knob::CpuMaxFrequency { .. } => "cpu_max_frequency_mhz",
            Knob::CpuGovernor { .. } => "cpu_governor",
        }
    }
}

/// A setting's value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    /// A power limit, W.
    Watts(f64),
    /// Locked clocks, MHz.
    ClocksMhz {
        /// Lowest.
        min: u32,
        /// Highest.
        max: u32,
    },
    /// The driver's default: clocks not locked. NVML cannot read whether clocks are locked,
    /// so this is what a reset restores.
    DriverDefault,
    /// A frequency, kHz (cpufreq's unit).
    Khz(u64),
    /// A governor's name.
    Governor(String),
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Watts(w) => write!(f, "{w} W"),
            Value::ClocksMhz { min, max } if min == max => write!(f, "{min} MHz"),
            Value::ClocksMhz { min, max } => write!(f, "{min}-{max} MHz"),
            Value::DriverDefault => f.write_str("driver default (not locked)"),
            Value::Khz(k) => write!(f, "{} MHz", *k as f64 / 1000.0),
            Value::Governor(g) => f.write_str(g),
        }
    }
}

impl Value {
    /// Whether a read-back `self` is the written `want`, give or take what hardware rounds:
    /// RAPL keeps limits in its power unit (1/8 W on most parts), cpufreq snaps to a
    /// frequency the CPU has.
    pub fn matches(&self, want: &Value) -> bool {
        match (self, want) {
            (Value::Watts(a), Value::Watts(b)) => (a - b).abs() <= (0.01 * b.abs()).max(0.125),
            (Value::Khz(a), Value::Khz(b)) => (*a as f64 - *b as f64).abs() <= 0.05 * *b as f64,
            (a, b) => a == b,
        }
    }
}

/// What a device allows for a knob.
#[derive(Clone, Debug, PartialEq)]
pub enum Allowed {
    /// Any power limit between these, W.
    Watts(f64, f64),
    /// Any clock between these, MHz (the driver rounds to a supported one).
    ClockRange(u32, u32),
    /// One of these clocks, MHz.
    Clocks(Vec<u32>),
    /// A frequency between these, kHz.
    Khz(u64, u64),
    /// One of these governors.
    Governors(Vec<String>),
    /// The device does not say.
    Unknown,
}

impl Allowed {
    /// Why `v` is outside what the device allows; `None` when it is inside (or unknown).
    pub fn refuses(&self, v: &Value) -> Option<String> {
        match (self, v) {
            (Allowed::Watts(lo, hi), Value::Watts(w)) => (*w < lo - 1e-9 || *w > hi + 1e-9)
                .then(|| format!("{w} W is outside the device's range {lo}-{hi} W")),
            (Allowed::ClockRange(lo, hi), Value::ClocksMhz { min, max }) => {
                (min < lo || max > hi || min > max)
                    .then(|| format!("{v} is outside the device's supported clocks {lo}-{hi} MHz"))
            }
            (Allowed::Clocks(list), Value::ClocksMhz { min, max }) => {
                (!list.contains(min) || !list.contains(max) || min > max).then(|| {
                    let names: Vec<String> = list.iter().map(u32::to_string).collect();
                    format!(
                        "{v} is not among the device's clocks ({} MHz)",
                        names.join(", ")
                    )
                })
            }
            (Allowed::Khz(lo, hi), Value::Khz(k)) => (k < lo || k > hi).then(|| {
                format!(
                    "{v} is outside the CPU's range {}-{} MHz",
                    *lo as f64 / 1000.0,
                    *hi as f64 / 1000.0
                )
            }),
            (Allowed::Governors(list), Value::Governor(g)) => (!list.contains(g)).then(|| {
                format!(
                    "governor {g} is not available (this CPU has: {})",
                    list.join(", ")
                )
            }),
            _ => None,
        }
    }
}

/// Read, apply and restore one device knob.
pub trait DeviceSetting {
    /// The value in force; `None` when the device cannot say (NVML's locked clocks).
    fn read(&self) -> Result<Option<Value>, SettingError>;
    /// What the device allows.
    fn allowed(&self) -> Result<Allowed, SettingError>;
    /// Sets `v`; [`Value::DriverDefault`] resets.
    fn apply(&self, v: &Value) -> Result<(), SettingError>;
    /// Whether this process may change it (a sysfs file it can write; NVML: root or
    /// `CAP_SYS_ADMIN`, as the driver asks of its setters).
    fn may_change(&self) -> bool;
}

/// Whether this process may write the sysfs file `path`.
pub(crate) fn writable(path: &std::path::Path) -> bool {
    nix::unistd::access(path, nix::unistd::AccessFlags::W_OK).is_ok()
}

/// Opens the backend of `knob`; NVML is loaded on first need and kept.
pub struct Devices {
    nvml: Option<Arc<nvml_wrapper::Nvml>>,
}

impl Devices {
    /// No backend loaded yet.
    pub fn new() -> Devices {
        Devices { nvml: None }
    }

    /// The knob's backend.
    pub fn open(&mut self, knob: &Knob) -> Result<Box<dyn DeviceSetting>, SettingError> {
        Ok(match knob {
            Knob::GpuPowerLimit { uuid }
            | Knob::GpuLockedClocks { uuid }
            | Knob::GpuLockedMemoryClocks { uuid } => {
                let nvml = match &self.nvml {
                    Some(n) => n.clone(),
                    None => {
                        let n = crate::sensors::nvml::init()
                            .map_err(|e| SettingError::Nvml(e.to_string()))?;
                        self.nvml = Some(n.clone());
                        n
                    }
                };
                Box::new(nvml::GpuKnob::new(nvml, knob.clone(), uuid.clone()))
            }
            Knob::CpuPowerLimit { zone } => Box::new(powercap::PowerLimit::new(zone.clone())),
            Knob::CpuMaxFrequency { cpufreq } => {
                Box::new(cpufreq::MaxFrequency::new(cpufreq.clone()))
            }
            Knob::CpuGovernor { cpufreq } => Box::new(cpufreq::Governor::new(cpufreq.clone())),
        })
    }
}

impl Default for Devices {
    fn default() -> Self {
        Devices::new()
    }
}

/// Whether this process is privileged as NVML's setters ask: root, or `CAP_SYS_ADMIN` in
/// its effective set.
pub fn privileged() -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 21) != 0)
}
