//! The settings of each NVIDIA GPU that change what an energy measurement means (`llem
//! doctor`): persistence mode, power limit, clocks, MIG and ECC. Each is `None` when the driver
//! does not say.

use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::Clock;

/// One GPU's energy-relevant settings.
#[derive(Clone, Debug, PartialEq)]
pub struct GpuState {
    /// NVML index.
    pub nvml_index: u32,
    /// `GPU-...` UUID.
    pub uuid: String,
    /// Board name.
    pub name: String,
    /// Persistence mode on.
    pub persistence: Option<bool>,
    /// The power limit in force, W.
    pub power_limit_w: Option<f64>,
    /// The board's default power limit, W.
    pub default_power_limit_w: Option<f64>,
    /// Current SM clock, MHz.
    pub sm_clock_mhz: Option<u32>,
    /// Highest SM clock, MHz.
    pub max_sm_clock_mhz: Option<u32>,
    /// MIG mode on.
    pub mig: Option<bool>,
    /// ECC on.
    pub ecc: Option<bool>,
    /// The cumulative energy counter answers.
    pub energy_counter: bool,
}

/// Every GPU NVML sees (not narrowed by `CUDA_VISIBLE_DEVICES`: the doctor looks at the host).
pub fn gpu_states(nvml: &Nvml) -> Result<Vec<GpuState>, crate::GpuError> {
    let count = nvml.device_count().map_err(crate::GpuError::Nvml)?;
    let mut out = Vec::new();
    for i in 0..count {
        let dev = nvml.device_by_index(i).map_err(crate::GpuError::Nvml)?;
        let watts = |mw: Result<u32, _>| mw.ok().map(|v: u32| f64::from(v) / 1000.0);
        out.push(GpuState {
            nvml_index: i,
            uuid: dev.uuid().unwrap_or_default(),
            name: dev.name().unwrap_or_else(|_| "NVIDIA GPU".into()),
            persistence: dev.is_in_persistent_mode().ok(),
            power_limit_w: watts(dev.enforced_power_limit()),
            default_power_limit_w: watts(dev.power_management_limit_default()),
            sm_clock_mhz: dev.clock_info(Clock::SM).ok(),
            max_sm_clock_mhz: dev.max_clock_info(Clock::SM).ok(),
            mig: dev.mig_mode().ok().map(|m| m.current == 1),
            ecc: dev.is_ecc_enabled().ok().map(|e| e.currently_enabled),
            energy_counter: dev.total_energy_consumption().is_ok(),
        });
    }
    Ok(out)
}
