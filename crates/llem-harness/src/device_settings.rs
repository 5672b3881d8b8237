//! A cell's device settings (`device:`): found on the devices the cell measures, checked
//! against what each allows before the first cell, applied under a journal before the
//! baseline, read back, and put back after the teardown (or when the cell ends any other way:
//! [`Applied`] restores on drop, and a journal its process leaves behind is restored by the
//! next llem).

use std::path::{Path, PathBuf};

use llem_config::{DeviceConfig, ExperimentConfig};
use llem_energy::SensorEnv;
use llem_energy::settings::journal::{self, Entry, EntryOutcome, Held, Journal};
use llem_energy::settings::{self, Devices, Knob, Value};
use llem_results::result::DeviceSettingRecord;

use crate::HarnessError;

/// One setting wanted on one device.
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    /// The device (`gpu0`, `package-0`, `cpu3`).
    pub device: String,
    /// The knob.
    pub knob: Knob,
    /// The value.
    pub value: Value,
}

/// The settings `cfg` asks for, on each device they apply to: every GPU the cell measures
/// (NVML's, in CUDA order), every RAPL package zone, every CPU with cpufreq. A setting whose
/// devices are missing is an error naming the setting.
pub fn wanted(cfg: &ExperimentConfig, env: &SensorEnv) -> Result<Vec<Wanted>, String> {
    let Some(d) = cfg.device.as_deref().filter(|d| d.any()) else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    if d.touches_gpus() {
        gpu_settings(d, env, &mut out)?;
    }
    if let Some(w) = d.cpu_power_limit_w {
        let zones: Vec<_> = llem_energy::sensors::rapl::zones(&env.powercap_root)
            .unwrap_or_default()
            .into_iter()
            .filter(|z| z.subzone.is_none() && z.name.starts_with("package"))
            .collect();
        if zones.is_empty() {
            return Err(format!(
                "device.cpu_power_limit_w: no RAPL package zone under {}",
                env.powercap_root.display()
            ));
        }
        out.extend(zones.into_iter().map(|z| Wanted {
            device: z.name,
            knob: Knob::CpuPowerLimit { zone: z.path },
            value: Value::Watts(w),
        }));
    }
    if d.cpu_max_frequency_mhz.is_some() || d.cpu_governor.is_some() {
        let cpus = cpufreq_dirs(&env.sysfs_root);
        if cpus.is_empty() {
            return Err(format!(
                "device.{}: no CPU with cpufreq under {}",
                if d.cpu_max_frequency_mhz.is_some() {
                    "cpu_max_frequency_mhz"
                } else {
                    "cpu_governor"
                },
                env.sysfs_root.join("devices/system/cpu").display()
            ));
        }
        // The governor first: `performance` or `powersave` may move the frequency the
        // maximum then bounds.
        if let Some(g) = &d.cpu_governor {
            out.extend(cpus.iter().map(|(n, dir)| Wanted {
                device: format!("cpu{n}"),
                knob: Knob::CpuGovernor {
                    cpufreq: dir.clone(),
                },
                value: Value::Governor(g.clone()),
            }));
        }
        if let Some(mhz) = d.cpu_max_frequency_mhz {
            out.extend(cpus.iter().map(|(n, dir)| Wanted {
                device: format!("cpu{n}"),
                knob: Knob::CpuMaxFrequency {
                    cpufreq: dir.clone(),
                },
                value: Value::Khz(u64::from(mhz) * 1000),
            }));
        }
    }
    Ok(out)
}

fn gpu_settings(d: &DeviceConfig, env: &SensorEnv, out: &mut Vec<Wanted>) -> Result<(), String> {
    use llem_energy::sensors::nvml;
    let lib = nvml::init().map_err(|e| format!("device: GPU settings need NVML: {e}"))?;
    let gpus = nvml::gpus(&lib, env.cuda_visible_devices.as_deref())
        .map_err(|e| format!("device: {e}"))?;
    if gpus.is_empty() {
        return Err("device: GPU settings asked for, but no NVIDIA GPU is visible".into());
    }
    for g in gpus {
        let device = format!("gpu{}", g.cuda_index);
        let uuid = g.uuid;
        if let Some(w) = d.gpu_power_limit_w {
            out.push(Wanted {
                device: device.clone(),
                knob: Knob::GpuPowerLimit { uuid: uuid.clone() },
                value: Value::Watts(w),
            });
        }
        if let Some(c) = d.gpu_locked_clocks_mhz {
            out.push(Wanted {
                device: device.clone(),
                knob: Knob::GpuLockedClocks { uuid: uuid.clone() },
                value: Value::ClocksMhz {
                    min: c.min_mhz,
                    max: c.max_mhz,
                },
            });
        }
        if let Some(c) = d.gpu_locked_memory_clocks_mhz {
            out.push(Wanted {
                device,
                knob: Knob::GpuLockedMemoryClocks { uuid },
                value: Value::ClocksMhz {
                    min: c.min_mhz,
                    max: c.max_mhz,
                },
            });
        }
    }
    Ok(())
}

/// `(index, cpufreq dir)` of every CPU under `sysfs` with cpufreq, by index.
fn cpufreq_dirs(sysfs: &Path) -> Vec<(u32, PathBuf)> {
    let base = sysfs.join("devices/system/cpu");
    let mut out: Vec<(u32, PathBuf)> = std::fs::read_dir(&base)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n: u32 = name.strip_prefix("cpu")?.parse().ok()?;
            let dir = e.path().join("cpufreq");
            dir.join("scaling_max_freq").is_file().then_some((n, dir))
        })
        .collect();
    out.sort_by_key(|(n, _)| *n);
    out
}

/// Before the first cell: the settings' devices exist, each value is inside what its device
/// allows (the range in the error), and this process may change them. One line per problem.
pub fn check(cfg: &ExperimentConfig, env: &SensorEnv) -> Result<(), Vec<String>> {
    let wanted = wanted(cfg, env).map_err(|e| vec![e])?;
    if wanted.is_empty() {
        return Ok(());
    }
    let mut problems = Vec::new();
    let mut devices = Devices::new();
    for w in &wanted {
        let key = w.knob.setting();
        let knob = match devices.open(&w.knob) {
            Ok(k) => k,
            Err(e) => {
                problems.push(format!("device.{key}: {e} ({})", w.device));
                continue;
            }
        };
        if !knob.may_change() {
            problems.push(format!(
                "device.{key}: this process may not change it on {} ({})",
                w.device,
                settings::error::PRIVILEGE_HINT
            ));
        }
        match knob.allowed() {
            Ok(a) => {
                if let Some(why) = a.refuses(&w.value) {
                    problems.push(format!("device.{key}: {why} ({})", w.device));
                }
            }
            Err(e) => problems.push(format!("device.{key}: {e} ({})", w.device)),
        }
    }
    problems.dedup();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// Settings in force for a cell, with their journal; put back by [`Applied::restore`], or
/// when dropped.
pub struct Applied {
    devices: Devices,
    held: Option<Held>,
    entries: Vec<Entry>,
    applied: Vec<Value>,
    notes: Vec<String>,
}

/// What putting the settings back came to.
#[derive(Clone, Debug)]
pub struct Restored {
    /// Each setting, as `result.json` records it.
    pub records: Vec<DeviceSettingRecord>,
    /// Every value is back and the journal is gone.
    pub ok: bool,
    /// What did not go back, and where its journal is.
    pub problems: Vec<String>,
    /// Read-back differences and other notes, for the result's warnings.
    pub notes: Vec<String>,
    /// Each device's power limit in force during the run, W.
    pub limits_w: Vec<(String, f64)>,
}

/// Applies the settings `cfg` asks for: reads each original value, writes the journal, sets
/// and reads back each value. A failure puts back whatever was set before it is returned.
/// `None` when `cfg` asks for none.
pub fn apply(
    cfg: &ExperimentConfig,
    env: &SensorEnv,
    journal_dir: &Path,
    owner: &str,
) -> Result<Option<Applied>, HarnessError> {
    let wanted = wanted(cfg, env).map_err(HarnessError::Device)?;
    if wanted.is_empty() {
        return Ok(None);
    }
    let mut devices = Devices::new();
    let mut entries = Vec::with_capacity(wanted.len());
    for w in wanted {
        let knob = devices
            .open(&w.knob)
            .map_err(|e| HarnessError::Device(e.to_string()))?;
        let original = knob
            .read()
            .map_err(|e| {
                HarnessError::Device(format!("reading {} of {}: {e}", w.knob.setting(), w.device))
            })?
            .unwrap_or(Value::DriverDefault);
        entries.push(Entry {
            device: w.device,
            knob: w.knob,
            original,
            requested: w.value,
        });
    }
    let journal = Journal {
        version: journal::VERSION,
        pid: std::process::id(),
        host: crate::environment::hostname(),
        written_unix_s: llem_results::time::unix_now_s(),
        owner: owner.to_string(),
        entries: entries.clone(),
    };
    let held = journal::begin(journal_dir, &journal)
        .map_err(|e| HarnessError::Device(format!("{e}; nothing was changed")))?;
    let mut out = Applied {
        devices,
        held: Some(held),
        entries,
        applied: Vec::new(),
        notes: Vec::new(),
    };
    for i in 0..out.entries.len() {
        let Some(e) = out.entries.get(i).cloned() else {
            break;
        };
        match set_and_read(&mut out.devices, &e) {
            Ok((v, note)) => {
                out.applied.push(v);
                out.notes.extend(note);
            }
            Err(why) => {
                let failed = format!("{} on {}: {why}", e.knob.setting(), e.device);
                let r = out.restore_now();
                return Err(if r.ok {
                    HarnessError::Device(format!("{failed}; every setting was put back"))
                } else {
                    HarnessError::DeviceRestore(format!(
                        "{failed}; and putting the others back failed: {}",
                        r.problems.join("; ")
                    ))
                });
            }
        }
    }
    Ok(Some(out))
}

fn set_and_read(devices: &mut Devices, e: &Entry) -> Result<(Value, Option<String>), String> {
    let knob = devices.open(&e.knob).map_err(|x| x.to_string())?;
    knob.apply(&e.requested).map_err(|x| x.to_string())?;
    match knob.read().map_err(|x| x.to_string())? {
        Some(v) if !v.matches(&e.requested) => {
            let note = format!(
                "device: {} of {} asked {} but reads back {v}",
                e.knob.setting(),
                e.device,
                e.requested
            );
            Ok((v, Some(note)))
        }
        Some(v) => Ok((v, None)),
        // NVML cannot read locks back; the setter's success is the confirmation.
        None => Ok((e.requested.clone(), None)),
    }
}

impl Applied {
    /// `device=setting=value` of each setting, for cache keys that must tell runs under
    /// different settings apart (the idle baseline).
    pub fn labels(&self) -> Vec<String> {
        self.entries
            .iter()
            .map(|e| format!("{}={}={}", e.device, e.knob.setting(), e.requested))
            .collect()
    }

    /// Puts every value back, verifies it, and removes the journal.
    pub fn restore(mut self) -> Restored {
        self.restore_now()
    }

    fn restore_now(&mut self) -> Restored {
        // Only what was set goes back: a setter that failed changed nothing, and writing
        // the original to it would fail the same way (no permission) for nothing.
        let set = self.entries.get(..self.applied.len()).unwrap_or_default();
        let outcomes = journal::restore(set, &mut self.devices);
        let mut ok = outcomes.iter().all(EntryOutcome::ok);
        let mut problems: Vec<String> = outcomes
            .iter()
            .filter_map(|o| {
                o.result.as_ref().err().map(|e| {
                    format!(
                        "{} of {} not put back to {}: {e}",
                        o.setting, o.device, o.original
                    )
                })
            })
            .collect();
        if let Some(held) = self.held.take() {
            let path = held.path().to_path_buf();
            if ok {
                if let Err(e) = held.close() {
                    ok = false;
                    problems.push(e.to_string());
                }
            } else {
                problems.push(format!(
                    "the journal {} is kept: `llem restore` retries it",
                    path.display()
                ));
                // Dropping the lock makes it a leftover for the next llem.
                drop(held);
            }
        }
        let limits_w = self
            .entries
            .iter()
            .zip(&self.applied)
            .filter_map(|(e, v)| match (&e.knob, v) {
                (Knob::GpuPowerLimit { .. } | Knob::CpuPowerLimit { .. }, Value::Watts(w)) => {
                    Some((e.device.clone(), *w))
                }
                _ => None,
            })
            .collect();
        let records = self
            .entries
            .iter()
            .enumerate()
            .map(|(i, e)| {
                // Outcomes come last change first, one per setting that was set.
                let o = (i < outcomes.len())
                    .then(|| outcomes.get(outcomes.len() - 1 - i))
                    .flatten();
                DeviceSettingRecord {
                    device: e.device.clone(),
                    setting: e.knob.setting().to_string(),
                    original: e.original.to_string(),
                    requested: e.requested.to_string(),
                    applied: self
                        .applied
                        .get(i)
                        .map_or_else(|| "not applied".into(), ToString::to_string),
                    restored: o
                        .and_then(|o| o.result.as_ref().ok())
                        .map(|v| v.as_ref().unwrap_or(&e.original).to_string()),
                    restore_error: o.and_then(|o| o.result.as_ref().err().cloned()),
                }
            })
            .collect();
        self.entries.clear();
        Restored {
            records,
            ok,
            problems,
            notes: std::mem::take(&mut self.notes),
            limits_w,
        }
    }
}

impl Drop for Applied {
    /// A cell that ends by an error, a panic or a cancel still puts its settings back.
    fn drop(&mut self) {
        if !self.entries.is_empty() {
            let r = self.restore_now();
            if !r.ok {
                // Nothing else is left to tell; the journal stays for the next llem.
                tracing::error!("device settings NOT restored: {}", r.problems.join("; "));
            }
        }
    }
}
