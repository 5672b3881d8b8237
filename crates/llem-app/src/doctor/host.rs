//! The host: energy sensors, the GPUs' settings, free disk, clock sync.

use std::path::Path;
use std::time::Duration;

use llem_energy::sensors::gpu_state::{GpuState, gpu_states};

use super::{Line, probe};

/// What the sensors and the driver say, gathered once for every section that needs it.
pub struct Facts {
    /// Per sensor family: what it found, or why it found nothing.
    pub families: Vec<llem_energy::select::FamilyReport>,
    /// The NVIDIA GPUs, or why there are none.
    pub gpus: Result<Vec<GpuState>, llem_energy::GpuError>,
}

impl Facts {
    /// Probes the sensors and the driver.
    pub fn gather(env: &llem_energy::SensorEnv) -> Facts {
        let gpus = llem_energy::sensors::nvml::init().and_then(|n| gpu_states(&n));
        Facts {
            families: llem_energy::select::inventory(env),
            gpus,
        }
    }

    /// The family `sampler` (`nvml`, `amdgpu`, `rapl`, `estimate`).
    pub fn family(&self, sampler: &str) -> Option<&llem_energy::select::FamilyReport> {
        self.families.iter().find(|f| f.sampler == sampler)
    }

    /// Whether RAPL is unreadable for want of permission.
    pub fn rapl_denied(&self) -> bool {
        self.family("rapl")
            .and_then(|f| f.unavailable.as_deref())
            .is_some_and(|why| why.contains("readable by root"))
    }
}

/// The command that opens RAPL's counters to every user until the next boot.
pub const RAPL_FIX: &str = "sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj \
    /sys/class/powercap/intel-rapl:*:*/energy_uj (until reboot; a udev rule makes it \
    permanent), or run llem as root";

/// One line per sensor family.
pub fn sensors(f: &Facts) -> Vec<Line> {
    let mut lines = Vec::new();
    for fam in &f.families {
        match (&fam.unavailable, fam.sampler) {
            (None, "estimate") => lines.push(Line::info(format!(
                "estimate: {} (used only when no hardware sensor is found)",
                fam.found.join("; ")
            ))),
            (None, s) => lines.push(Line::ok(format!("{s}: {}", fam.found.join("; ")))),
            (Some(_), "rapl") if f.rapl_denied() => lines.push(
                Line::warn("rapl: the CPU energy counters exist but this user cannot read them")
                    .fix(RAPL_FIX),
            ),
            (Some(why), "nvml") if f.gpus.as_ref().is_ok_and(|g| !g.is_empty()) => {
                lines.push(Line::warn(format!(
                    "nvml: the GPUs are there but cannot be measured: {why}"
                )))
            }
            (Some(why), "nvml") if why.contains("permission") => lines.push(
                Line::warn(format!("nvml: {why}"))
                    .fix("run llem as a user the NVIDIA driver lets query the GPUs"),
            ),
            // A node source the user configured that cannot be read: every result of this
            // host would lack the node figure it was set up to give.
            (Some(why), "node")
                if !why.starts_with("no node power source") && !why.contains("source is none") =>
            {
                lines.push(Line::warn(format!("node: {why}")).fix(
                    "check measurement.node_power in the user config (BMC address, user, \
                         the password's variable; `ipmitool dcmi power reading` or the Redfish \
                         URL should answer from this host)",
                ));
            }
            (Some(why), s) => lines.push(Line::info(format!("{s}: absent ({why})"))),
        }
    }
    let hardware = ["nvml", "amdgpu", "rapl"]
        .iter()
        .any(|s| f.family(s).is_some_and(|fam| fam.unavailable.is_none()));
    if !hardware {
        lines.push(
            Line::warn(
                "no hardware energy sensor: every energy figure will be the estimate \
                 (TDP x utilisation), not a measurement",
            )
            .fix(if f.rapl_denied() {
                RAPL_FIX
            } else {
                "measure on a host with NVIDIA GPUs (NVML), AMD GPUs (amdgpu hwmon) or Intel/AMD \
                 RAPL (/sys/class/powercap)"
            }),
        );
    }
    lines
}

/// One line per GPU setting that changes what its energy figures mean.
pub fn gpus(f: &Facts) -> Vec<Line> {
    let gpus = match &f.gpus {
        Err(why) => return vec![Line::info(format!("no NVIDIA GPU: {why}"))],
        Ok(g) if g.is_empty() => return vec![Line::info("the NVIDIA driver sees no GPU")],
        Ok(g) => g,
    };
    let mut lines = Vec::new();
    for g in gpus {
        let id = format!("GPU {} ({}, {})", g.nvml_index, g.name, g.uuid);
        let i = g.nvml_index;
        match g.persistence {
            Some(true) => lines.push(Line::ok(format!("{id}: persistence mode on"))),
            Some(false) => lines.push(
                Line::warn(format!(
                    "{id}: persistence mode off: the driver may re-initialise the GPU between \
                     runs, adding its start-up to the first measurements"
                ))
                .fix(format!("sudo nvidia-smi -i {i} -pm 1")),
            ),
            None => lines.push(Line::info(format!("{id}: persistence mode unknown"))),
        }
        match (g.power_limit_w, g.default_power_limit_w) {
            (Some(l), Some(d)) if (l - d).abs() > 0.5 => lines.push(
                Line::warn(format!(
                    "{id}: power limit {l:.0} W, not the board's default {d:.0} W: energy and \
                     throughput hold for this cap only (the result records it)"
                ))
                .fix(format!(
                    "sudo nvidia-smi -i {i} -pl {d:.0}  (if the cap is not intended)"
                )),
            ),
            (Some(l), _) => lines.push(Line::ok(format!("{id}: power limit {l:.0} W"))),
            (None, _) => lines.push(Line::info(format!("{id}: power limit not reported"))),
        }
        match (g.sm_clock_mhz, g.max_sm_clock_mhz) {
            (Some(c), Some(m)) => lines.push(Line::ok(format!(
                "{id}: SM clock {c} MHz now, {m} MHz at most"
            ))),
            (Some(c), None) => lines.push(Line::ok(format!("{id}: SM clock {c} MHz now"))),
            _ => lines.push(Line::info(format!("{id}: clocks not reported"))),
        }
        if g.mig == Some(true) {
            lines.push(
                Line::warn(format!(
                    "{id}: MIG mode on: NVML reports energy for the whole GPU, not per \
                     instance, so llem refuses to measure it"
                ))
                .fix(format!("sudo nvidia-smi -i {i} -mig 0")),
            );
        }
        match g.ecc {
            Some(on) => lines.push(Line::ok(format!(
                "{id}: ECC {} (record it: it changes memory bandwidth and power)",
                if on { "on" } else { "off" }
            ))),
            None => lines.push(Line::info(format!("{id}: ECC not reported"))),
        }
        if !g.energy_counter {
            lines.push(Line::warn(format!(
                "{id}: no cumulative energy counter (pre-Volta or a virtual GPU): energy is \
                 integrated from sampled power, less exact for short runs"
            )));
        }
    }
    lines
}

/// Free space where results go (the nearest existing directory up from it).
pub fn disk(results: &Path) -> Line {
    let mut at = results.to_path_buf();
    while !at.exists() {
        match at.parent() {
            Some(p) if !p.as_os_str().is_empty() => at = p.to_path_buf(),
            _ => {
                at = Path::new(".").to_path_buf();
                break;
            }
        }
    }
    let stat = match nix::sys::statvfs::statvfs(&at) {
        Ok(s) => s,
        Err(e) => {
            return Line::warn(format!(
                "cannot tell the free space under {}: {e}",
                results.display()
            ));
        }
    };
    let free_gib =
        stat.blocks_available() as f64 * stat.fragment_size() as f64 / f64::from(1u32 << 30);
    let what = format!(
        "{free_gib:.1} GiB free under {} (results: {})",
        at.display(),
        results.display()
    );
    if free_gib < 1.0 {
        Line::fail(what).fix("free space, or point -o / output_dir elsewhere")
    } else if free_gib < 10.0 {
        Line::warn(format!(
            "{what}: a study with telemetry and server logs can fill this"
        ))
        .fix("free space, or point -o / output_dir elsewhere")
    } else {
        Line::ok(what)
    }
}

/// Whether the system clock is synchronised: result times and a cluster's cells from several
/// hosts are compared by wall clock.
pub fn clock() -> Line {
    let limit = Duration::from_secs(5);
    if let Ok(p) = probe::run(
        "timedatectl",
        &["show", "-p", "NTPSynchronized", "--value"],
        limit,
    ) && p.success
    {
        return match probe::first_line(&p.stdout) {
            "yes" => Line::ok("clock synchronised (timedatectl: NTPSynchronized=yes)"),
            other => Line::warn(format!(
                "clock not synchronised (timedatectl: NTPSynchronized={other}): start times \
                 across hosts may disagree"
            ))
            .fix("sudo timedatectl set-ntp true"),
        };
    }
    if let Ok(p) = probe::run("chronyc", &["tracking"], limit)
        && p.success
    {
        let leap = p
            .stdout
            .lines()
            .find_map(|l| l.strip_prefix("Leap status"))
            .map(|l| l.trim_start_matches([' ', ':']).trim().to_string())
            .unwrap_or_default();
        return if leap == "Normal" {
            Line::ok("clock synchronised (chronyc: leap status Normal)")
        } else {
            Line::warn(format!(
                "clock not synchronised (chronyc: leap status {leap})"
            ))
            .fix("check chronyd's sources: chronyc sources")
        };
    }
    Line::info("clock sync unknown: neither timedatectl nor chronyc answered")
}
