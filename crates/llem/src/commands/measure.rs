//! `llem measure -- CMD`: the energy of any command, perf-stat style.
//!
//! The meter starts, the command runs (stdio inherited), the meter stops when it exits; the
//! window is exactly the command's run. llem keeps running through SIGINT/SIGTERM/SIGHUP so
//! it can still report: Ctrl-C reaches the command through the terminal's process group, and
//! SIGTERM/SIGHUP sent to llem are forwarded to it. The exit code is the command's own
//! (128 + signal when a signal ended it).

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Instant;

use llem_config::{EnergySampler, Env, UserSettings, source::SourceMap};
use llem_energy::baseline::{BaselineIdentity, BaselineOrigin, BaselineOutcome};
use llem_energy::{CarbonFactors, EnergyReport, Meter, MeterConfig, SensorEnv};
use serde::Serialize;

use crate::cli::MeasureArgs;
use crate::exit;

/// World-average grid intensity (IEA), used by the `codecarbon` sampler when no intensity is
/// configured, gCO2/kWh.
const DEFAULT_INTENSITY_GCO2_KWH: f64 = 475.0;

/// `measurement.json`.
#[derive(Serialize)]
struct Measurement<'a> {
    llem_version: &'static str,
    command: &'a [String],
    exit_code: i32,
    start_time: String,
    host: String,
    #[serde(flatten)]
    report: &'a EnergyReport,
    notes: &'a [String],
    timeseries: Option<&'static str>,
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(exit::FAILURE)
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

fn text_report(cmd: &[String], code: i32, r: &EnergyReport, notes: &[String]) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "\n Energy of '{}' (exit {code}):\n", cmd.join(" "));
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
    if let Some(co2) = r.co2_g {
        let _ = writeln!(out, "   {co2:>12.4} g   CO2");
    }
    let _ = writeln!(
        out,
        "\n   sampler {}, {} ms interval, {} samples",
        r.sampler, r.interval_ms, r.n_samples
    );
    let all: Vec<&String> = notes.iter().chain(&r.warnings).collect();
    if !all.is_empty() {
        let _ = writeln!(out, "   warnings:");
        for w in all {
            let _ = writeln!(out, "     - {w}");
        }
    }
    out
}

/// Runs `llem measure` and returns the exit code.
pub fn run(args: &MeasureArgs) -> i32 {
    let env = Env::from_process();
    let mut sources = SourceMap::new();
    let user = match UserSettings::load(&env, &mut sources) {
        Ok(u) => u,
        Err(e) => {
            eprint!("{e}");
            return exit::CONFIG;
        }
    };
    let m = &user.config.measurement;
    let sampler = args
        .sampler
        .or(m.energy_sampler)
        .unwrap_or(EnergySampler::Auto);
    let sensor_env = SensorEnv::from_process(m.cpu_tdp_w);
    let selection = match llem_energy::select(sampler, &sensor_env) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("llem: {e}");
            return exit::CONFIG;
        }
    };
    let mut notes = selection.notes;
    let carbon = match (m.carbon_intensity_gco2_kwh, sampler) {
        (Some(i), _) => Some(CarbonFactors {
            intensity_gco2_kwh: i,
            pue: m.datacenter_pue.unwrap_or(1.0),
        }),
        (None, EnergySampler::Codecarbon) => {
            notes.push(format!(
                "no carbon intensity configured: using the world average, \
                 {DEFAULT_INTENSITY_GCO2_KWH} gCO2/kWh (set measurement.carbon_intensity_gco2_kwh)"
            ));
            Some(CarbonFactors {
                intensity_gco2_kwh: DEFAULT_INTENSITY_GCO2_KWH,
                pue: m.datacenter_pue.unwrap_or(1.0),
            })
        }
        (None, _) => None,
    };
    let config = MeterConfig {
        interval: args.interval,
        ..MeterConfig::default()
    };
    let epoch = Instant::now();
    let start_unix = llem_results::time::unix_now_s();
    let mut sensors = selection.sensors;
    let host = llem_harness::environment::hostname();

    let mut baseline: Option<BaselineOutcome> = None;
    if let Some(d) = args.baseline {
        let identity = BaselineIdentity {
            host: host.clone(),
            sampler: sampler.to_string(),
            devices: sensors
                .iter()
                .map(|s| format!("{}: {}", s.domain().name, s.domain().device))
                .collect(),
        };
        let cfg = llem_config::BaselineConfig {
            duration_seconds: d.as_secs_f64(),
            strategy: args.baseline_strategy,
            ..llem_config::BaselineConfig::default()
        };
        let (got, back) = llem_energy::baseline::obtain_with_sensors(
            &cfg,
            &identity,
            &crate::paths::cache_dir(),
            sensors,
            config,
            epoch,
            &mut |d| {
                eprintln!(
                    "llem: measuring idle power for {:.1} s ...",
                    d.as_secs_f64()
                )
            },
        );
        sensors = back;
        match got {
            Ok(o) => {
                if o.origin != BaselineOrigin::Fresh {
                    notes.push(format!(
                        "baseline {:.2} W {:?} ({:.0} s old)",
                        o.record.total_power_w,
                        o.origin,
                        o.age_s.unwrap_or(0.0)
                    ));
                }
                baseline = Some(o);
            }
            Err(e) => {
                eprintln!("llem: baseline: {e}");
                return exit::FAILURE;
            }
        }
    }

    let meter = match Meter::start(sensors, config, epoch) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("llem: {e}");
            return exit::CONFIG;
        }
    };
    let Some((program, rest)) = args.command.split_first() else {
        return exit::CONFIG;
    };
    let t0 = epoch.elapsed().as_secs_f64();
    let mut child = match Command::new(program).args(rest).spawn() {
        Ok(c) => c,
        Err(e) => {
            drop(meter);
            eprintln!("llem: cannot run `{program}`: {e}");
            return if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
        }
    };
    let signals = forward_signals(child.id());
    let status = child.wait();
    let t1 = epoch.elapsed().as_secs_f64();
    if let Some(h) = signals {
        h.close();
    }
    let telemetry = meter.stop();
    let code = match status {
        Ok(s) => exit_code(s),
        Err(e) => {
            eprintln!("llem: lost the command: {e}");
            exit::FAILURE
        }
    };

    let report = llem_energy::report(&telemetry, t0, t1, sampler.as_str(), baseline, carbon);
    let measurement = Measurement {
        llem_version: env!("CARGO_PKG_VERSION"),
        command: &args.command,
        exit_code: code,
        start_time: llem_results::time::iso8601_utc(start_unix + t0),
        host,
        report: &report,
        notes: &notes,
        timeseries: args.output.as_ref().map(|_| "timeseries.parquet"),
    };
    if let Some(dir) = &args.output {
        let written = llem_results::write_json_atomic(&dir.join("measurement.json"), &measurement)
            .and_then(|()| {
                llem_results::write_timeseries(
                    &dir.join("timeseries.parquet"),
                    &telemetry.to_columns(),
                    &[
                        ("llem.version", env!("CARGO_PKG_VERSION").to_string()),
                        ("llem.sampler", sampler.to_string()),
                        ("llem.interval_ms", report.interval_ms.to_string()),
                        ("llem.start_time", measurement.start_time.clone()),
                    ],
                )
            });
        if let Err(e) = written {
            eprintln!("llem: {e}");
            return if code == 0 { exit::FAILURE } else { code };
        }
    }
    eprint!("{}", text_report(&args.command, code, &report, &notes));
    if args.json {
        match serde_json::to_string_pretty(&measurement) {
            Ok(s) => println!("{s}"),
            Err(e) => eprintln!("llem: {e}"),
        }
    }
    code
}
