//! Which sensors an `energy_sampler` uses, and what this machine has (`llem config`).
//!
//! - `auto`: GPUs through NVML (energy counter where the GPU has one, and power) or amdgpu;
//!   CPU packages and DRAM through RAPL; the estimate only when no hardware sensor at all is
//!   readable. A family that is absent is noted with the reason.
//! - `nvml` (power, integrated), `zeus` (NVML energy counter), `amdgpu`, `rapl`: that
//!   family only; unavailable is an error, never a silent fallback.
//! - `estimate`, `codecarbon`: the CPU (TDP x utilisation) and DRAM (per GiB) estimate.

use std::path::PathBuf;

use llem_config::EnergySampler;
use llem_config::user_config::{NodePowerConfig, NodePowerSource};
use serde::Serialize;

use crate::error::Absent;
pub use crate::error::Unavailable;
use crate::sensor::Sensor;
use crate::sensors::estimate::{self, CpuEstimate, DramEstimate};
use crate::sensors::nvml::{self, NvmlMode};
use crate::sensors::{amdgpu, rapl};

/// Where sensors are looked for (overridable so tests can write the trees).
#[derive(Clone, Debug)]
pub struct SensorEnv {
    /// Powercap root (`LLEM_POWERCAP_ROOT`, default `/sys/class/powercap`).
    pub powercap_root: PathBuf,
    /// Sysfs root for amdgpu (`LLEM_SYSFS_ROOT`, default `/sys`).
    pub sysfs_root: PathBuf,
    /// Procfs root for the estimate (default `/proc`).
    pub proc_root: PathBuf,
    /// `CUDA_VISIBLE_DEVICES`.
    pub cuda_visible_devices: Option<String>,
    /// Configured CPU TDP for the estimate.
    pub cpu_tdp_w: Option<f64>,
    /// Whether to look for NVIDIA GPUs at all (off in tests that must not touch a driver).
    pub nvml: bool,
    /// Hwmon root for the node power meter (`LLEM_HWMON_ROOT`, default `/sys/class/hwmon`).
    pub hwmon_root: PathBuf,
    /// Which node power source to read (`measurement.node_power` of the user config).
    pub node: NodePowerConfig,
}

impl SensorEnv {
    /// The real machine, with the `LLEM_*` overrides.
    pub fn from_process(cpu_tdp_w: Option<f64>) -> SensorEnv {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        SensorEnv {
            powercap_root: var("LLEM_POWERCAP_ROOT")
                .unwrap_or_else(|| "/sys/class/powercap".into()),
            sysfs_root: var("LLEM_SYSFS_ROOT").unwrap_or_else(|| "/sys".into()),
            proc_root: "/proc".into(),
            cuda_visible_devices: std::env::var("CUDA_VISIBLE_DEVICES").ok(),
            cpu_tdp_w,
            nvml: true,
            hwmon_root: var("LLEM_HWMON_ROOT").unwrap_or_else(|| "/sys/class/hwmon".into()),
            node: NodePowerConfig::default(),
        }
    }

    /// The same, reading node power as `node` says.
    pub fn with_node(mut self, node: &NodePowerConfig) -> SensorEnv {
        self.node = node.clone();
        self
    }
}

/// The sensors chosen for a sampler.
pub struct Selection {
    /// The sampler asked for.
    pub sampler: EnergySampler,
    /// The sensors, GPUs first.
    pub sensors: Vec<Box<dyn Sensor>>,
    /// What is not measured and why.
    pub notes: Vec<String>,
}

fn boxed<S: Sensor + 'static>(v: Vec<S>) -> Vec<Box<dyn Sensor>> {
    v.into_iter()
        .map(|s| Box::new(s) as Box<dyn Sensor>)
        .collect()
}

fn nvml_sensors(env: &SensorEnv, mode: NvmlMode) -> Result<Vec<Box<dyn Sensor>>, Absent> {
    if !env.nvml {
        return Err(Absent::NvmlDisabled);
    }
    let sensors = nvml::discover(mode, env.cuda_visible_devices.as_deref())?;
    if sensors.is_empty() {
        return Err(Absent::NoVisibleGpus);
    }
    Ok(boxed(sensors))
}

fn amd_sensors(env: &SensorEnv) -> Result<Vec<Box<dyn Sensor>>, Absent> {
    let s = amdgpu::discover(&env.sysfs_root)?;
    if s.is_empty() {
        return Err(Absent::NoAmdgpu(env.sysfs_root.join("class/drm")));
    }
    Ok(boxed(s))
}

fn rapl_sensors(env: &SensorEnv) -> Result<Vec<Box<dyn Sensor>>, Absent> {
    Ok(boxed(rapl::discover(&env.powercap_root)?))
}

fn estimate_sensors(env: &SensorEnv) -> Result<Vec<Box<dyn Sensor>>, Absent> {
    let tdp = estimate::tdp(
        env.cpu_tdp_w,
        &estimate::cpu_model(&env.proc_root),
        estimate::logical_cpus(),
    );
    let cpu = CpuEstimate::open(&env.proc_root, &tdp)?;
    let dram = DramEstimate::open(&env.proc_root)?;
    Ok(vec![Box::new(cpu), Box::new(dram)])
}

/// Opens the sensors of `sampler`.
pub fn select(sampler: EnergySampler, env: &SensorEnv) -> Result<Selection, Unavailable> {
    let fail = |reason: Absent| Unavailable {
        sampler,
        reason: reason.to_string(),
    };
    let mut notes = Vec::new();
    let mut sensors = match sampler {
        EnergySampler::Nvml => nvml_sensors(env, NvmlMode::PowerOnly).map_err(fail)?,
        EnergySampler::Zeus => nvml_sensors(env, NvmlMode::CounterOnly).map_err(fail)?,
        EnergySampler::Amdgpu => amd_sensors(env).map_err(fail)?,
        EnergySampler::Rapl => rapl_sensors(env).map_err(fail)?,
        EnergySampler::Estimate | EnergySampler::Codecarbon => {
            estimate_sensors(env).map_err(fail)?
        }
        EnergySampler::Auto => {
            let mut sensors = match nvml_sensors(env, NvmlMode::CounterAndPower) {
                Ok(s) => s,
                Err(nv) => match amd_sensors(env) {
                    Ok(s) => s,
                    Err(amd) => {
                        notes.push(format!("GPU energy not measured: {nv}; {amd}"));
                        Vec::new()
                    }
                },
            };
            let rapl = rapl_sensors(env);
            let rapl_missing = rapl.as_ref().err().map(ToString::to_string);
            sensors.extend(rapl.unwrap_or_default());
            // One line for the CPU: why RAPL is not read and, with nothing else readable,
            // that the estimate stands in (the result then says once that it is one).
            let fallback = sensors.is_empty();
            let stands_in =
                "no hardware energy sensor is readable, so the CPU/DRAM estimate stands in";
            match (rapl_missing, fallback) {
                (Some(reason), true) => notes.push(format!(
                    "CPU energy not measured by RAPL: {reason}; {stands_in}"
                )),
                (Some(reason), false) => {
                    notes.push(format!("CPU energy not measured by RAPL: {reason}"));
                }
                (None, true) => notes.push(stands_in.to_string()),
                (None, false) => {}
            }
            if fallback {
                sensors = estimate_sensors(env).map_err(fail)?;
            }
            sensors
        }
    };
    match crate::sensors::node::open(&env.node, &env.hwmon_root) {
        Ok((node, note)) => {
            sensors.extend(node);
            notes.extend(note);
        }
        Err(e) => {
            return Err(Unavailable {
                sampler,
                reason: format!("node power (measurement.node_power): {e}"),
            });
        }
    }
    Ok(Selection {
        sampler,
        sensors,
        notes,
    })
}

/// What one sensor family finds on this machine.
#[derive(Clone, Debug, Serialize)]
pub struct FamilyReport {
    /// Sampler name.
    pub sampler: &'static str,
    /// Domains found (`gpu0: NVIDIA H100 ... (counter, power)`), empty when unavailable.
    pub found: Vec<String>,
    /// Why it is unavailable.
    pub unavailable: Option<String>,
}

/// Probes every family (for `llem config`).
pub fn inventory(env: &SensorEnv) -> Vec<FamilyReport> {
    let describe = |r: Result<Vec<Box<dyn Sensor>>, Absent>, sampler: &'static str| match r {
        Ok(sensors) => FamilyReport {
            sampler,
            found: sensors
                .iter()
                .map(|s| {
                    let mut what = Vec::new();
                    if s.has_counter() {
                        what.push("energy counter");
                    }
                    if s.has_power() {
                        what.push("power");
                    }
                    format!(
                        "{}: {} ({})",
                        s.domain().name,
                        s.domain().device,
                        what.join(", ")
                    )
                })
                .collect(),
            unavailable: None,
        },
        Err(reason) => FamilyReport {
            sampler,
            found: Vec::new(),
            unavailable: Some(reason.to_string()),
        },
    };
    let node = match crate::sensors::node::open(&env.node, &env.hwmon_root) {
        Ok((Some(s), _)) => Ok(vec![s]),
        Ok((None, Some(note))) => Err(note),
        Ok((None, None)) if env.node.source == Some(NodePowerSource::Off) => {
            Err("measurement.node_power.source is none".into())
        }
        Ok((None, None)) => {
            Err(crate::NodeUnavailable::NoneFound(env.hwmon_root.clone()).to_string())
        }
        Err(e) => Err(e.to_string()),
    };
    let node = match node {
        Ok(s) => describe(Ok(s), "node"),
        Err(why) => FamilyReport {
            sampler: "node",
            found: Vec::new(),
            unavailable: Some(why),
        },
    };
    vec![
        describe(nvml_sensors(env, NvmlMode::CounterAndPower), "nvml"),
        describe(amd_sensors(env), "amdgpu"),
        describe(rapl_sensors(env), "rapl"),
        describe(estimate_sensors(env), "estimate"),
        node,
    ]
}
