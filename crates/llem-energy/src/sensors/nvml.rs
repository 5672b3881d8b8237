//! NVIDIA GPUs through NVML, loaded at run time (`libnvidia-ml.so.1`): the same binary runs
//! on machines without a driver, where this sensor is simply absent with the reason.
//!
//! Per GPU: the cumulative energy counter (`nvmlDeviceGetTotalEnergyConsumption`, Volta and
//! later, mJ), instantaneous power (`NVML_FI_DEV_POWER_INSTANT`, falling back to
//! `nvmlDeviceGetPowerUsage`, which many boards average over a second) and, recorded apart,
//! the board's 1-s average (`NVML_FI_DEV_POWER_AVERAGE`, else `nvmlDeviceGetPowerUsage`); NVML
//! has no memory-power field, so none is recorded. In detail it reads
//! temperature, memory, SM clock, SM and memory utilisation and the throttle-reason bitmask.
//!
//! GPUs are named by their CUDA index: `CUDA_VISIBLE_DEVICES` (indices or `GPU-` UUID
//! prefixes) selects and orders them; indices are taken in PCI bus order, which is NVML's
//! order and CUDA's with `CUDA_DEVICE_ORDER=PCI_BUS_ID`. MIG is refused: NVML reports power
//! for the whole board, not per instance.

use std::sync::Arc;

use crate::GpuError;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::SampleValue;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::structs::device::FieldId;
use nvml_wrapper::sys_exports::field_id::{NVML_FI_DEV_POWER_AVERAGE, NVML_FI_DEV_POWER_INSTANT};

use crate::sensor::{Domain, DomainKind, Reading, Sensor, SensorError, SensorKind};

/// Which NVML readings a sampler uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvmlMode {
    /// Counter where the GPU has one, and power (`auto`).
    CounterAndPower,
    /// Power only, integrated (`nvml`).
    PowerOnly,
    /// Counter only; GPUs without one are an error (`zeus`).
    CounterOnly,
}

/// A GPU as NVML sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct NvmlGpu {
    /// NVML index (PCI bus order).
    pub nvml_index: u32,
    /// CUDA index (position among the visible devices).
    pub cuda_index: u32,
    /// `GPU-...` UUID.
    pub uuid: String,
    /// Board name.
    pub name: String,
    /// Whether the energy counter is supported.
    pub counter: bool,
    /// Whether instantaneous power is supported.
    pub instant_power: bool,
    /// Persistence mode, when known.
    pub persistence: Option<bool>,
}

fn nvml_err(e: NvmlError) -> SensorError {
    SensorError::Nvml(e.to_string())
}

/// Loads NVML; the error says why it is unavailable.
pub fn init() -> Result<Arc<Nvml>, GpuError> {
    Nvml::init().map(Arc::new).map_err(GpuError::Nvml)
}

/// Resolves `CUDA_VISIBLE_DEVICES` against NVML's GPUs `(nvml index, uuid)`: the NVML
/// indices of the visible GPUs, in CUDA order. Unset means all, in NVML order; empty means
/// none.
pub fn visible_devices(spec: Option<&str>, gpus: &[(u32, String)]) -> Result<Vec<u32>, GpuError> {
    let Some(spec) = spec else {
        return Ok(gpus.iter().map(|(i, _)| *i).collect());
    };
    let mut out: Vec<u32> = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        if entry.starts_with("MIG-") {
            return Err(GpuError::MigInstance(entry.to_string()));
        }
        let index = if let Ok(i) = entry.parse::<u32>() {
            gpus.iter()
                .find(|(n, _)| *n == i)
                .map(|(n, _)| *n)
                .ok_or(GpuError::NoSuchIndex {
                    index: i,
                    count: gpus.len(),
                })?
        } else {
            let matches: Vec<u32> = gpus
                .iter()
                .filter(|(_, u)| u.starts_with(entry))
                .map(|(n, _)| *n)
                .collect();
            match matches.as_slice() {
                [one] => *one,
                [] => return Err(GpuError::NoSuchUuid(entry.to_string())),
                _ => return Err(GpuError::Ambiguous(entry.to_string())),
            }
        };
        if out.contains(&index) {
            return Err(GpuError::Twice(entry.to_string()));
        }
        out.push(index);
    }
    Ok(out)
}

/// Instant and 1-s average power, mW, in one call; either is `None` where the board does
/// not report it.
fn field_power_mw(dev: &nvml_wrapper::Device<'_>) -> (Option<u64>, Option<u64>) {
    let Ok(samples) = dev.field_values_for(&[
        FieldId(NVML_FI_DEV_POWER_INSTANT),
        FieldId(NVML_FI_DEV_POWER_AVERAGE),
    ]) else {
        return (None, None);
    };
    let mut it = samples.into_iter().map(|s| match s.ok()?.value.ok()? {
        SampleValue::U32(v) => Some(u64::from(v)),
        SampleValue::U64(v) => Some(v),
        SampleValue::I64(v) => u64::try_from(v).ok(),
        SampleValue::F64(v) => (v >= 0.0).then_some(v as u64),
    });
    (it.next().flatten(), it.next().flatten())
}

/// NVML indices of the GPUs this process may use (all NVML GPUs, narrowed by
/// `CUDA_VISIBLE_DEVICES`); empty without a driver. For device locks, which name physical GPUs.
pub fn visible_indices(cuda_visible_devices: Option<&str>) -> Vec<u32> {
    let Ok(nvml) = init() else {
        return Vec::new();
    };
    let Ok(count) = nvml.device_count() else {
        return Vec::new();
    };
    let all: Vec<(u32, String)> = (0..count)
        .filter_map(|i| Some((i, nvml.device_by_index(i).ok()?.uuid().ok()?)))
        .collect();
    visible_devices(cuda_visible_devices, &all).unwrap_or_default()
}

/// Lists the visible GPUs with what each supports.
pub fn gpus(nvml: &Nvml, cuda_visible_devices: Option<&str>) -> Result<Vec<NvmlGpu>, GpuError> {
    let count = nvml.device_count().map_err(GpuError::Nvml)?;
    let mut all: Vec<(u32, String)> = Vec::new();
    for i in 0..count {
        let dev = nvml.device_by_index(i).map_err(GpuError::Nvml)?;
        all.push((i, dev.uuid().map_err(GpuError::Nvml)?));
    }
    let visible = visible_devices(cuda_visible_devices, &all)?;
    let mut out = Vec::new();
    for (cuda_index, nvml_index) in visible.into_iter().enumerate() {
        let dev = nvml.device_by_index(nvml_index).map_err(GpuError::Nvml)?;
        let uuid = dev.uuid().unwrap_or_default();
        if dev.mig_mode().is_ok_and(|m| m.current == 1) {
            return Err(GpuError::MigMode {
                index: nvml_index,
                uuid,
            });
        }
        out.push(NvmlGpu {
            nvml_index,
            cuda_index: u32::try_from(cuda_index).unwrap_or(u32::MAX),
            name: dev.name().unwrap_or_else(|_| "NVIDIA GPU".into()),
            counter: dev.total_energy_consumption().is_ok(),
            instant_power: field_power_mw(&dev).0.is_some(),
            persistence: dev.is_in_persistent_mode().ok(),
            uuid,
        });
    }
    Ok(out)
}

/// One NVIDIA GPU as an energy domain.
pub struct NvmlSensor {
    nvml: Arc<Nvml>,
    gpu: NvmlGpu,
    domain: Domain,
    use_counter: bool,
    use_power: bool,
    base_mj: Option<u64>,
}

impl std::fmt::Debug for NvmlSensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmlSensor")
            .field("gpu", &self.gpu)
            .finish()
    }
}

impl NvmlSensor {
    /// A sensor for `gpu` in `mode`.
    pub fn new(nvml: Arc<Nvml>, gpu: NvmlGpu, mode: NvmlMode) -> Result<NvmlSensor, GpuError> {
        let (use_counter, use_power) = match mode {
            NvmlMode::CounterAndPower => (gpu.counter, true),
            NvmlMode::PowerOnly => (false, true),
            NvmlMode::CounterOnly if gpu.counter => (true, false),
            NvmlMode::CounterOnly => {
                return Err(GpuError::NoCounter {
                    index: gpu.cuda_index,
                    name: gpu.name,
                });
            }
        };
        Ok(NvmlSensor {
            domain: Domain {
                name: format!("gpu{}", gpu.cuda_index),
                kind: DomainKind::Gpu,
                index: gpu.cuda_index,
                device: format!("{} ({})", gpu.name, gpu.uuid),
            },
            nvml,
            gpu,
            use_counter,
            use_power,
            base_mj: None,
        })
    }
}

impl Sensor for NvmlSensor {
    fn domain(&self) -> &Domain {
        &self.domain
    }

    fn driver_version(&self) -> Option<String> {
        self.nvml.sys_driver_version().ok()
    }

    fn kind(&self) -> SensorKind {
        SensorKind::Nvml
    }

    fn has_counter(&self) -> bool {
        self.use_counter
    }

    fn has_power(&self) -> bool {
        self.use_power
    }

    fn read(&mut self, detail: bool) -> Result<Reading, SensorError> {
        let dev = self
            .nvml
            .device_by_index(self.gpu.nvml_index)
            .map_err(nvml_err)?;
        let mut r = Reading::default();
        if self.use_counter {
            let mj = dev.total_energy_consumption().map_err(nvml_err)?;
            let base = *self.base_mj.get_or_insert(mj);
            r.energy_j = Some(mj.saturating_sub(base) as f64 / 1000.0);
        }
        if self.use_power {
            let (instant, average) = if self.gpu.instant_power {
                field_power_mw(&dev)
            } else {
                (None, None)
            };
            // The averaged reading stands in for either the board does not give.
            let usage = if instant.is_none() || average.is_none() {
                Some(u64::from(dev.power_usage().map_err(nvml_err)?))
            } else {
                None
            };
            let w = |mw: u64| mw as f64 / 1000.0;
            r.power_w = instant.or(usage).map(w);
            r.power_avg_w = average.or(usage).map(w);
        }
        if detail {
            let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
            r.temperature_c = dev.temperature(TemperatureSensor::Gpu).ok().map(f64::from);
            if let Ok(m) = dev.memory_info() {
                r.memory_used_mib = Some(mib(m.used));
                r.memory_total_mib = Some(mib(m.total));
            }
            r.sm_clock_mhz = dev.clock_info(Clock::SM).ok().map(f64::from);
            if let Ok(u) = dev.utilization_rates() {
                r.sm_util_pct = Some(f64::from(u.gpu));
                r.mem_util_pct = Some(f64::from(u.memory));
            }
            r.throttle_reasons = dev.current_throttle_reasons().ok().map(|t| t.bits());
        }
        Ok(r)
    }

    fn notes(&self) -> Vec<String> {
        let mut n = Vec::new();
        if self.gpu.persistence == Some(false) {
            n.push(format!(
                "{}: persistence mode is off; the driver may re-initialise between runs and \
                 early samples lag (enable with `sudo nvidia-smi -pm 1`)",
                self.domain.name
            ));
        }
        if self.use_power && !self.gpu.instant_power {
            n.push(format!(
                "{}: no instantaneous power field; power is NVML's averaged reading, which lags \
                 load changes",
                self.domain.name
            ));
        }
        n
    }
}

/// Opens sensors for every visible GPU.
pub fn discover(
    mode: NvmlMode,
    cuda_visible_devices: Option<&str>,
) -> Result<Vec<NvmlSensor>, GpuError> {
    let nvml = init()?;
    gpus(&nvml, cuda_visible_devices)?
        .into_iter()
        .map(|g| NvmlSensor::new(nvml.clone(), g, mode))
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn fleet() -> Vec<(u32, String)> {
        vec![
            (0, "GPU-aaaa-1111".into()),
            (1, "GPU-bbbb-2222".into()),
            (2, "GPU-bbbc-3333".into()),
        ]
    }

    #[test]
    fn visible_devices_by_index_and_uuid() {
        assert_eq!(visible_devices(None, &fleet()).unwrap(), [0, 1, 2]);
        assert_eq!(
            visible_devices(Some(""), &fleet()).unwrap(),
            Vec::<u32>::new()
        );
        assert_eq!(visible_devices(Some("2,0"), &fleet()).unwrap(), [2, 0]);
        assert_eq!(
            visible_devices(Some("GPU-bbbc, GPU-aaaa"), &fleet()).unwrap(),
            [2, 0]
        );
    }

    #[test]
    fn visible_devices_errors() {
        assert!(
            visible_devices(Some("MIG-1234"), &fleet())
                .unwrap_err()
                .to_string()
                .contains("MIG")
        );
        assert!(
            visible_devices(Some("7"), &fleet())
                .unwrap_err()
                .to_string()
                .contains("sees 3 GPUs")
        );
        assert!(
            visible_devices(Some("GPU-bbb"), &fleet())
                .unwrap_err()
                .to_string()
                .contains("several")
        );
        assert!(
            visible_devices(Some("GPU-zz"), &fleet())
                .unwrap_err()
                .to_string()
                .contains("matches no GPU")
        );
        assert!(
            visible_devices(Some("1,GPU-bbbb"), &fleet())
                .unwrap_err()
                .to_string()
                .contains("twice")
        );
    }

    #[test]
    fn absent_driver_is_reported_not_fatal() {
        // This machine has no NVIDIA driver; on one with a driver this lists its GPUs.
        match init() {
            Err(e) => {
                let reason = e.to_string();
                assert!(
                    reason.contains("NVIDIA") || reason.contains("NVML"),
                    "{reason}"
                );
            }
            Ok(nvml) => {
                let _ = gpus(&nvml, None);
            }
        }
    }
}
