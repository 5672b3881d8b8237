//! The energy of any command, perf-stat style (`llem measure -- CMD`).
//!
//! The meter starts, the command runs (stdio inherited), the meter stops when it exits; the
//! window is exactly the command's run. llem keeps running through SIGINT/SIGTERM/SIGHUP so
//! it can still report: Ctrl-C reaches the command through the terminal's process group, and
//! SIGTERM/SIGHUP sent to llem are forwarded to it. The exit code is the command's own
//! (128 + signal when a signal ended it).

use std::fmt::Write as _;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use llem_config::user_config::UserMeasurement;
use llem_config::{BaselineConfig, EnergySampler};
use llem_energy::baseline::{BaselineIdentity, BaselineOrigin, BaselineOutcome};
use llem_energy::host_load;
use llem_energy::{CarbonFactors, EnergyReport, Meter, MeterConfig, SensorEnv, Telemetry};
use serde::Serialize;

/// What to measure and how.
#[derive(Clone, Debug)]
pub struct CommandRequest {
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The energy sampler.
    pub sampler: EnergySampler,
    /// Sensor roots and settings.
    pub sensor_env: SensorEnv,
    /// Telemetry sampling interval.
    pub interval: Duration,
    /// Idle power to subtract, when asked for.
    pub baseline: Option<BaselineConfig>,
    /// Carbon settings of the user config.
    pub measurement: UserMeasurement,
    /// Where the baseline cache lives.
    pub cache_dir: PathBuf,
    /// Write `measurement.json` and `timeseries.parquet` here.
    pub output: Option<PathBuf>,
    /// llem's version, for the record.
    pub llem_version: String,
    /// Where the sampler publishes its running figures for live exports (none: nowhere).
    pub live: Option<llem_energy::LiveBoard>,
}

/// `measurement.json`: the command, how it ended, and the energy report of its run.
#[derive(Clone, Debug, Serialize)]
pub struct CommandMeasurement {
    /// llem's version.
    pub llem_version: String,
    /// The command as run.
    pub command: Vec<String>,
    /// Its exit code (128 + signal when a signal ended it).
    pub exit_code: i32,
    /// When it started, UTC.
    pub start_time: String,
    /// This machine.
    pub host: String,
    /// The energy of its run.
    #[serde(flatten)]
    pub report: EnergyReport,
    /// What the sensors and the baseline said.
    pub notes: Vec<String>,
    /// The timeseries file beside it, when one was written.
    pub timeseries: Option<&'static str>,
}

/// Why a command could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The sensors or the meter cannot work as configured.
    #[error("{0}")]
    Config(String),
    /// The baseline could not be taken.
    #[error("baseline: {0}")]
    Baseline(String),
    /// The energy meter failed while the command ran.
    #[error("energy meter: {0}")]
    Energy(String),
    /// The command could not be started.
    #[error("cannot run `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        source: std::io::Error,
    },
}

/// A measured command, and whether its files were written.
#[derive(Debug)]
pub struct CommandOutcome {
    /// What was measured.
    pub measurement: CommandMeasurement,
    /// Writing `measurement.json` or `timeseries.parquet` failed.
    pub write_error: Option<llem_results::ResultsError>,
}

/// The carbon factors of `m` for `sampler`: the configured intensity, else the world average
/// for `codecarbon` (with a note saying so), else none: a bare command measurement reports
/// CO2 only when asked to.
fn carbon_factors(
    m: &UserMeasurement,
    sampler: EnergySampler,
    notes: &mut Vec<String>,
) -> Option<CarbonFactors> {
    if m.carbon_intensity_gco2_kwh.is_none() && sampler != EnergySampler::Codecarbon {
        return None;
    }
    let (factors, why) = CarbonFactors::resolve(m.carbon_intensity_gco2_kwh, m.datacenter_pue);
    notes.extend(why);
    Some(factors)
}

/// Forwards SIGTERM and SIGHUP to the command; swallows SIGINT, which the command already
/// gets from the terminal. Returns the handle that stops the forwarding thread.
fn forward_signals(pid: u32) -> Option<signal_hook::iterator::Handle> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]).ok()?;
    let handle = signals.handle();
    let target = nix::unistd::Pid::from_raw(i32::try_from(pid).ok()?);
    std::thread::spawn(move || {
        for sig in signals.forever() {
            let forward = match sig {
                SIGTERM => Some(nix::sys::signal::Signal::SIGTERM),
                SIGHUP => Some(nix::sys::signal::Signal::SIGHUP),
                _ => None,
            };
            if let Some(s) = forward {
                let _ = nix::sys::signal::kill(target, s);
            }
        }
    });
    Some(handle)
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1)
}

/// The idle power before the command, with a note when it came from the cache.
fn baseline(
    req: &CommandRequest,
    cfg: &BaselineConfig,
    sensors: &mut Vec<Box<dyn llem_energy::Sensor>>,
    meter_cfg: MeterConfig,
    epoch: Instant,
    notes: &mut Vec<String>,
    on_baseline: &mut dyn FnMut(Duration),
) -> Result<BaselineOutcome, CommandError> {
    let identity = BaselineIdentity {
        host: crate::environment::hostname(),
        sampler: req.sampler.to_string(),
        devices: sensors
            .iter()
            .map(|s| format!("{}: {}", s.domain().name, s.domain().device))
            .collect(),
    };
    let (got, back) = llem_energy::baseline::obtain_with_sensors(
        cfg,
        &identity,
        &req.cache_dir,
        std::mem::take(sensors),
        meter_cfg,
        epoch,
        &mut |d| {
            on_baseline(d);
            std::thread::sleep(d);
            Ok(())
        },
    );
    *sensors = back;
    let o = got.map_err(|e| CommandError::Baseline(e.to_string()))?;
    if o.origin != BaselineOrigin::Fresh {
        notes.push(format!(
            "baseline {:.2} W, {} ({:.0} s old)",
            o.record.total_power_w,
            o.origin.describe(),
            o.age_s.unwrap_or(0.0)
        ));
    }
    Ok(o)
}

/// Runs the command under the meter: its exit code, the telemetry and the window. The meter
/// is dropped (its thread stopped) on every way out.
fn run_metered(
    command: &[String],
    meter: Meter,
    epoch: Instant,
    notes: &mut Vec<String>,
) -> Result<(i32, Telemetry, (f64, f64)), CommandError> {
    let Some((program, rest)) = command.split_first() else {
        return Err(CommandError::Config("no command to measure".into()));
    };
    let load0 = host_load::start();
    let t0 = epoch.elapsed().as_secs_f64();
    let mut child =
        Command::new(program)
            .args(rest)
            .spawn()
            .map_err(|source| CommandError::Spawn {
                program: program.clone(),
                source,
            })?;
    let signals = forward_signals(child.id());
    let status = child.wait();
    let t1 = epoch.elapsed().as_secs_f64();
    // The command is reaped: its time is in ours.
    let load = host_load::since(load0);
    notes.extend(
        load.as_ref()
            .and_then(|l| host_load::warning(l, "the command and its children")),
    );
    if let Some(h) = signals {
        h.close();
    }
    // A sampler that died took the window's energy with it: no figure to report.
    let telemetry = meter
        .stop()
        .map_err(|e| CommandError::Energy(e.to_string()))?;
    // The window is still the command's run: report it, with the failure as a note.
    let code = match status {
        Ok(s) => exit_code(s),
        Err(e) => {
            notes.push(format!("lost the command: {e}"));
            1
        }
    };
    Ok((code, telemetry, (t0, t1)))
}

/// Measures `req.command`. `on_baseline` hears how long a fresh baseline will take.
pub fn measure_command(
    req: &CommandRequest,
    on_baseline: &mut dyn FnMut(Duration),
) -> Result<CommandOutcome, CommandError> {
    let selection = llem_energy::select(req.sampler, &req.sensor_env)
        .map_err(|e| CommandError::Config(e.to_string()))?;
    let mut notes = selection.notes;
    let carbon = carbon_factors(&req.measurement, req.sampler, &mut notes);
    let meter_cfg = MeterConfig {
        interval: req.interval,
        ..MeterConfig::default()
    };
    let epoch = Instant::now();
    let start_unix = llem_results::time::unix_now_s();
    let mut sensors = selection.sensors;
    let base = match &req.baseline {
        Some(cfg) => Some(baseline(
            req,
            cfg,
            &mut sensors,
            meter_cfg,
            epoch,
            &mut notes,
            on_baseline,
        )?),
        None => None,
    };
    let meter = Meter::start_live(sensors, meter_cfg, epoch, req.live.clone())
        .map_err(|e| CommandError::Config(e.to_string()))?;
    let (code, telemetry, (t0, t1)) = run_metered(&req.command, meter, epoch, &mut notes)?;
    let sampler = req.sampler.as_str();
    let report = llem_energy::summarise(&telemetry, t0, t1, sampler, base, carbon);
    let measurement = CommandMeasurement {
        llem_version: req.llem_version.clone(),
        command: req.command.clone(),
        exit_code: code,
        start_time: llem_results::time::iso8601_utc(start_unix + t0),
        host: crate::environment::hostname(),
        report,
        notes,
        timeseries: req.output.as_ref().map(|_| "timeseries.parquet"),
    };
    let write_error = req
        .output
        .as_ref()
        .and_then(|dir| write(dir, &measurement, &telemetry).err());
    Ok(CommandOutcome {
        measurement,
        write_error,
    })
}

/// `measurement.json` and `timeseries.parquet` in `dir`.
fn write(
    dir: &std::path::Path,
    m: &CommandMeasurement,
    telemetry: &Telemetry,
) -> Result<(), llem_results::ResultsError> {
    llem_results::write_json_atomic(&dir.join("measurement.json"), m)?;
    llem_results::write_timeseries(
        &dir.join("timeseries.parquet"),
        &telemetry.to_columns(),
        &[
            ("llem.version", m.llem_version.clone()),
            ("llem.sampler", m.report.sampler.clone()),
            ("llem.interval_ms", m.report.interval_ms.to_string()),
            ("llem.start_time", m.start_time.clone()),
        ],
    )
}

impl CommandMeasurement {
    /// The perf-stat style summary printed after the command.
    pub fn text(&self) -> String {
        let r = &self.report;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n Energy of '{}' (exit {}):\n",
            self.command.join(" "),
            self.exit_code
        );
        let _ = writeln!(out, "   {:>12.3} s   duration", r.duration_s);
        for d in &r.domains {
            let peak = d
                .peak_power_w
                .map_or_else(|| "-".to_string(), |p| format!("{p:.2} W"));
            let _ = writeln!(
                out,
                "   {:>12.3} J   {:<10} {:>9.2} W avg  {:>10} peak   {}",
                d.energy_j,
                d.name,
                d.avg_power_w,
                peak,
                d.energy_source.as_str()
            );
        }
        let avg = if r.duration_s > 0.0 {
            r.total_energy_j / r.duration_s
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "   {:>12.3} J   {:<10} {:>9.2} W avg  {:>10}        {}",
            r.total_energy_j,
            "total",
            avg,
            "",
            r.energy_source.unwrap_or("none")
        );
        if let (Some(adj), Some(b)) = (r.energy_adjusted_j, r.baseline_power_w) {
            let _ = writeln!(out, "   {adj:>12.3} J   above the {b:.2} W baseline");
        }
        for n in &r.node {
            let _ = writeln!(
                out,
                "   {:>12.3} J   {:<10} {:>9.2} W avg  {:>10}        {} ({})",
                n.energy_j,
                "node",
                n.avg_power_w,
                "",
                n.energy_source.as_str(),
                n.sensor.as_str()
            );
        }
        if let Some(u) = r.unattributed_j {
            let _ = writeln!(out, "   {u:>12.3} J   of the node beside the domains above");
        }
        if let Some(co2) = r.co2_g {
            let _ = writeln!(out, "   {co2:>12.4} g   CO2");
        }
        let _ = writeln!(
            out,
            "\n   sampler {}, {} ms interval, {} samples",
            r.sampler, r.interval_ms, r.n_samples
        );
        let all: Vec<&String> = self.notes.iter().chain(&r.warnings).collect();
        if !all.is_empty() {
            let _ = writeln!(out, "   warnings:");
            for w in all {
                let _ = writeln!(out, "     - {w}");
            }
        }
        out
    }
}
