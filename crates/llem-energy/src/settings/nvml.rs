//! A GPU's power limit and locked clocks through NVML. NVML reads the power limit back but has
//! no call that reads locked clocks: a lock is confirmed by the setter's success (and seen in
//! the window's mean SM clock), and restored by a reset to the driver's default.

use std::sync::Arc;

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::Clock;
use nvml_wrapper::enums::device::GpuLockedClocksSetting;
use nvml_wrapper::error::NvmlError;

use super::error::PRIVILEGE_HINT;
use super::{Allowed, DeviceSetting, Knob, SettingError, Value};

/// One NVML knob of one GPU.
pub struct GpuKnob {
    nvml: Arc<Nvml>,
    knob: Knob,
    uuid: String,
}

impl GpuKnob {
    /// The knob `knob` of the GPU `uuid`.
    pub fn new(nvml: Arc<Nvml>, knob: Knob, uuid: String) -> GpuKnob {
        GpuKnob { nvml, knob, uuid }
    }

    fn err(&self, what: &str, e: NvmlError) -> SettingError {
        match e {
            NvmlError::NoPermission => SettingError::Permission {
                what: format!("{what} of {}", self.uuid),
                hint: PRIVILEGE_HINT.into(),
            },
            NvmlError::NotSupported => {
                SettingError::Unsupported(format!("{what} of {}", self.uuid))
            }
            e => SettingError::Nvml(format!("{what} of {}: {e}", self.uuid)),
        }
    }

    fn device(&self) -> Result<nvml_wrapper::Device<'_>, SettingError> {
        self.nvml
            .device_by_uuid(self.uuid.as_str())
            .map_err(|_| SettingError::NoGpu(self.uuid.clone()))
    }

    fn wrong(&self, v: &Value) -> SettingError {
        SettingError::WrongValue {
            knob: self.knob.setting(),
            value: v.to_string(),
        }
    }
}

impl DeviceSetting for GpuKnob {
    fn read(&self) -> Result<Option<Value>, SettingError> {
        let dev = self.device()?;
        match self.knob {
            Knob::GpuPowerLimit { .. } => dev
                .power_management_limit()
                .map(|mw| Some(Value::Watts(f64::from(mw) / 1000.0)))
                .map_err(|e| self.err("the power limit", e)),
            _ => Ok(None),
        }
    }

    fn allowed(&self) -> Result<Allowed, SettingError> {
        let dev = self.device()?;
        match self.knob {
            Knob::GpuPowerLimit { .. } => {
                let c = dev
                    .power_management_limit_constraints()
                    .map_err(|e| self.err("the power limit's range", e))?;
                Ok(Allowed::Watts(
                    f64::from(c.min_limit) / 1000.0,
                    f64::from(c.max_limit) / 1000.0,
                ))
            }
            Knob::GpuLockedClocks { .. } => {
                let mem = dev
                    .max_clock_info(Clock::Memory)
                    .map_err(|e| self.err("the memory clock", e))?;
                let clocks = dev
                    .supported_graphics_clocks(mem)
                    .map_err(|e| self.err("the supported graphics clocks", e))?;
                match (clocks.iter().min(), clocks.iter().max()) {
                    (Some(lo), Some(hi)) => Ok(Allowed::ClockRange(*lo, *hi)),
                    _ => Ok(Allowed::Unknown),
                }
            }
            Knob::GpuLockedMemoryClocks { .. } => {
                let mut clocks = dev
                    .supported_memory_clocks()
                    .map_err(|e| self.err("the supported memory clocks", e))?;
                clocks.sort_unstable();
                Ok(Allowed::Clocks(clocks))
            }
            _ => Ok(Allowed::Unknown),
        }
    }

    fn may_change(&self) -> bool {
        super::privileged()
    }

    fn apply(&self, v: &Value) -> Result<(), SettingError> {
        let mut dev = self.device()?;
        match (&self.knob, v) {
            (Knob::GpuPowerLimit { .. }, Value::Watts(w)) => dev
                .set_power_management_limit((w * 1000.0).round() as u32)
                .map_err(|e| self.err("setting the power limit", e)),
            (Knob::GpuLockedClocks { .. }, Value::ClocksMhz { min, max }) => dev
                .set_gpu_locked_clocks(GpuLockedClocksSetting::Numeric {
                    min_clock_mhz: *min,
                    max_clock_mhz: *max,
                })
                .map_err(|e| self.err("locking the graphics clocks", e)),
            (Knob::GpuLockedClocks { .. }, Value::DriverDefault) => dev
                .reset_gpu_locked_clocks()
                .map_err(|e| self.err("resetting the graphics clocks", e)),
            (Knob::GpuLockedMemoryClocks { .. }, Value::ClocksMhz { min, max }) => dev
                .set_mem_locked_clocks(*min, *max)
                .map_err(|e| self.err("locking the memory clocks", e)),
            (Knob::GpuLockedMemoryClocks { .. }, Value::DriverDefault) => dev
                .reset_mem_locked_clocks()
                .map_err(|e| self.err("resetting the memory clocks", e)),
            _ => Err(self.wrong(v)),
        }
    }
}
