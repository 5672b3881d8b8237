//! Why a sensor, the meter, or a sampler cannot do what was asked.

use std::path::PathBuf;
use std::time::Duration;

use llem_config::EnergySampler;
use nvml_wrapper::error::NvmlError;

/// A sensor could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SensorError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file is readable only by root (RAPL since Linux 5.10).
    #[error("cannot read {path}: permission denied. {hint}")]
    PermissionDenied {
        /// The file.
        path: PathBuf,
        /// How to fix it.
        hint: String,
    },
    /// A file held something else than a number.
    #[error("{path}: expected a number, found {text:?}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What it held.
        text: String,
    },
    /// An NVML call failed.
    #[error("NVML: {0}")]
    Nvml(String),
    /// A node power source (BMC, power meter) gave no reading.
    #[error("{source_name}: {message}")]
    Node {
        /// `ipmi`, `redfish`, `hwmon`.
        source_name: &'static str,
        /// What went wrong, credentials left out.
        message: String,
    },
}

/// Why no node power source is read.
#[derive(Debug, thiserror::Error)]
pub enum NodeUnavailable {
    /// A source is configured without what it needs.
    #[error("measurement.node_power.{key} is required for the {source_name} source")]
    Missing {
        /// The source.
        source_name: &'static str,
        /// The missing key.
        key: &'static str,
    },
    /// No hwmon device of that name.
    #[error("no hwmon device named {name:?} under {} (the ACPI power meter is `power_meter`)", root.display())]
    NoHwmon {
        /// The name looked for.
        name: String,
        /// Where.
        root: PathBuf,
    },
    /// The device has neither an energy counter nor a power reading.
    #[error("{}: no energy*_input, power1_average or power1_input", .0.display())]
    NoHwmonReading(PathBuf),
    /// The first reading failed.
    #[error(transparent)]
    Sensor(#[from] SensorError),
    /// The BMC reports that its power reading is switched off.
    #[error(
        "{0}: the BMC's power reading is deactivated (DCMI power reading state); it reports no node power"
    )]
    Deactivated(&'static str),
    /// No source is configured or found (`auto`).
    #[error("no node power source: no hwmon power meter under {}, and no ipmi or redfish BMC in the user config (measurement.node_power)", .0.display())]
    NoneFound(PathBuf),
}

/// The meter cannot start.
#[derive(Debug, thiserror::Error)]
pub enum MeterError {
    /// The interval is zero.
    #[error("the sampling interval must be positive")]
    ZeroInterval,
    /// The interval would let a wrapping counter wrap twice between reads.
    #[error(
        "a {interval:?} interval is too long for {domain}, whose counter needs a read at least every {max:?}"
    )]
    IntervalTooLong {
        /// Requested interval.
        interval: Duration,
        /// The domain.
        domain: String,
        /// Longest safe interval.
        max: Duration,
    },
    /// The thread could not be started.
    #[error("cannot start the sampler thread: {0}")]
    Spawn(std::io::Error),
    /// The sampler thread died (a sensor panicked): its samples are lost, so the window
    /// has no energy.
    #[error("the energy sampler died: {0}")]
    SamplerDied(String),
}

/// A sampler that cannot run here.
#[derive(Debug, thiserror::Error)]
#[error("energy sampler `{sampler}` is not available: {reason}")]
pub struct Unavailable {
    /// The sampler.
    pub sampler: EnergySampler,
    /// Why.
    pub reason: String,
}

/// Why NVML cannot give llem the GPUs it should measure.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    /// NVML itself failed (no driver, no permission, a call refused).
    #[error("{}", describe_nvml(.0))]
    Nvml(NvmlError),
    /// A MIG instance in `CUDA_VISIBLE_DEVICES`.
    #[error(
        "CUDA_VISIBLE_DEVICES names MIG instance {0}: NVML reports energy for the whole GPU, not \
         per MIG instance, so llem cannot attribute it; measure whole GPUs"
    )]
    MigInstance(String),
    /// An index NVML does not have.
    #[error("CUDA_VISIBLE_DEVICES names GPU {index}, but NVML sees {count} GPUs")]
    NoSuchIndex {
        /// The index given.
        index: u32,
        /// How many GPUs NVML sees.
        count: usize,
    },
    /// A UUID (prefix) that matches no GPU.
    #[error("CUDA_VISIBLE_DEVICES names {0}, which matches no GPU")]
    NoSuchUuid(String),
    /// A UUID prefix that matches more than one GPU.
    #[error("CUDA_VISIBLE_DEVICES entry {0} matches several GPUs")]
    Ambiguous(String),
    /// One GPU named twice.
    #[error("CUDA_VISIBLE_DEVICES names GPU {0} twice")]
    Twice(String),
    /// A GPU in MIG mode.
    #[error(
        "GPU {index} ({uuid}) is in MIG mode: NVML reports energy for the whole GPU, not per MIG \
         instance, so llem cannot attribute it; disable MIG (`nvidia-smi -i {index} -mig 0`) to \
         measure it"
    )]
    MigMode {
        /// Its NVML index.
        index: u32,
        /// Its UUID.
        uuid: String,
    },
    /// The counter-only sampler on a GPU without the counter.
    #[error(
        "GPU {index} ({name}) has no energy counter (it needs Volta or later); use --sampler nvml"
    )]
    NoCounter {
        /// Its CUDA index.
        index: u32,
        /// Its name.
        name: String,
    },
}

/// NVML's failure in words a user can act on.
pub(crate) fn describe_nvml(e: &NvmlError) -> String {
    match e {
        NvmlError::LibloadingError(_) | NvmlError::LibraryNotFound => {
            "no NVIDIA driver (libnvidia-ml.so.1 not found)".into()
        }
        NvmlError::DriverNotLoaded => "the NVIDIA kernel driver is not loaded".into(),
        NvmlError::NoPermission => "no permission to query the NVIDIA driver".into(),
        other => format!("NVML: {other}"),
    }
}

/// Why a sensor family has nothing to measure on this machine.
#[derive(Debug, thiserror::Error)]
pub enum Absent {
    /// NVML is switched off (`LLEM_NO_NVML`, tests).
    #[error("NVML disabled")]
    NvmlDisabled,
    /// NVML works but no GPU is visible.
    #[error("NVML found no visible GPUs")]
    NoVisibleGpus,
    /// No amdgpu hwmon directories.
    #[error("no amdgpu hwmon under {}", .0.display())]
    NoAmdgpu(PathBuf),
    /// The GPUs cannot be measured.
    #[error(transparent)]
    Gpu(#[from] GpuError),
    /// A sensor cannot be read.
    #[error(transparent)]
    Sensor(#[from] SensorError),
    /// No RAPL zone is readable.
    #[error(transparent)]
    Rapl(#[from] RaplUnavailable),
}

/// Why idle power could not be had.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The meter could not run.
    #[error(transparent)]
    Meter(#[from] MeterError),
    /// The baseline cache could not be written.
    #[error(transparent)]
    Cache(#[from] llem_results::ResultsError),
    /// The user stopped the idle measurement.
    #[error("cancelled")]
    Cancelled,
}

/// Why RAPL cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RaplUnavailable {
    /// No powercap tree.
    #[error("no powercap tree at {0} (not Linux, or no RAPL driver)")]
    NoTree(PathBuf),
    /// A tree without package zones.
    #[error("no RAPL package zones under {0}")]
    NoZones(PathBuf),
    /// A zone could not be read.
    #[error(transparent)]
    Unreadable(#[from] SensorError),
}
