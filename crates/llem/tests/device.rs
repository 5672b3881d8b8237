//! Device settings end to end, on the NVML stand-in (the one GPU double: its settings live in
//! a state file, as a driver's outlive a process) and on written powercap and cpufreq trees:
//! a sweep over power limits and locked clocks runs, records what bound, and leaves every
//! value as it was; a run killed with its settings changed is put back by the next llem;
//! what the device cannot take is refused before anything changes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use llem_results::ExperimentResult;
use llem_testkit::nvml_standin::StandIn;

use crate::common;

/// One H100 drawing 350 W at its nominal 1980 MHz (60 W of it idle), limit 700 W (200-700).
const H100: &str = "driver 550.54.15
gpu uuid=GPU-aaaa-1111 name=NVIDIA_H100_80GB_HBM3 power_w=350 idle_w=60 sm_clock_mhz=1980 max_sm_clock_mhz=1980 min_sm_clock_mhz=210 power_limit_w=700 default_power_limit_w=700 min_power_limit_w=200 max_power_limit_w=700 mem_clock_mhz=2619 mem_clocks=2619,1593
";

/// What the stand-in draws under a limit and a highest locked clock (its model: the power
/// above idle goes with the clock squared, the limit caps it).
fn modelled_w(limit_w: f64, max_clock_mhz: f64) -> f64 {
    let r = max_clock_mhz.min(1980.0) / 1980.0;
    (60.0 + 290.0 * r * r).min(limit_w)
}

/// The stand-in GPU's settings now: (power limit W, locked min MHz, locked max MHz).
fn gpu_state(standin: &StandIn) -> (f64, u32, u32) {
    try_gpu_state(standin).expect("the stand-in wrote its state")
}

/// [`gpu_state`], `None` before the first process loaded the stand-in.
fn try_gpu_state(standin: &StandIn) -> Option<(f64, u32, u32)> {
    let text = std::fs::read_to_string(standin.dir.path().join("script.state")).ok()?;
    let f: Vec<&str> = text.split_whitespace().collect();
    Some((
        f.get(1)?.parse::<f64>().ok()? / 1000.0,
        f.get(2)?.parse().ok()?,
        f.get(3)?.parse().ok()?,
    ))
}

fn journals(home: &Path) -> Vec<PathBuf> {
    common::walk(&home.join(".cache/llem/device-journal"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect()
}

/// `llem` in `home` with the stand-in as its NVML (embedded engine: no server).
fn llem(home: &Path, standin: &StandIn) -> Command {
    let mut c = common::llem_with_server(home, Path::new("/nonexistent/llama-server"));
    c.envs(standin.env());
    c
}

const WORKLOAD: &str = "model: SmolLM2-135M-Instruct.Q4_1.gguf
engine: llamacpp
dataset: {source: synthetic, n_prompts: 4, synthetic: {input_tokens: 32, output_tokens: 24, distribution: fixed}}
max_output_tokens: 24
llamacpp: {batch_size: 4, n_threads: 2}
measurement: {methodology: total}
warmup: {n_warmup: 1, thermal_floor_seconds: 0}
";

fn results(out: &Path) -> Vec<ExperimentResult> {
    common::walk(out)
        .into_iter()
        .filter(|p| p.ends_with("result.json"))
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect()
}

#[test]
fn a_sweep_of_power_limits_and_locked_clocks_records_what_bound_and_puts_everything_back() {
    let _machine = common::exclusive();
    let home = tempfile::tempdir().unwrap();
    let standin = StandIn::new(Some(H100));
    let study = home.path().join("device-sweep.yaml");
    std::fs::write(
        &study,
        format!(
            "name: device-sweep\n{WORKLOAD}baseline: {{enabled: false}}\n\
             study_execution: {{n_cycles: 1, experiment_gap_seconds: 0, cycle_gap_seconds: 0}}\n\
             sweep:\n  device.gpu_power_limit_w: [250, 400]\n  \
             device.gpu_locked_clocks_mhz: [\"900-1200\", 1980]\n"
        ),
    )
    .unwrap();
    let out = home.path().join("results");
    let o = llem(home.path(), &standin)
        .args(["run", study.to_str().unwrap(), "-q", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let runs = results(&out);
    assert_eq!(runs.len(), 4, "{stderr}");
    for r in &runs {
        let cfg = r.effective_config.as_ref().unwrap();
        let limit = cfg["device"]["gpu_power_limit_w"].as_f64().unwrap();
        let clocks = &cfg["device"]["gpu_locked_clocks_mhz"];
        let (clocks_text, max_clock) = match clocks.as_u64() {
            Some(c) => (format!("{c} MHz"), c as f64),
            None => ("900-1200 MHz".to_string(), 1200.0),
        };
        let d = r.device_settings.as_ref().expect("device_settings");
        assert!(d.restored);
        // Each cell found the device as the study found it: the cell before put it back.
        let names: Vec<(&str, &str, &str, &str, &str)> = d
            .settings
            .iter()
            .map(|s| {
                (
                    s.device.as_str(),
                    s.setting.as_str(),
                    s.original.as_str(),
                    s.applied.as_str(),
                    s.restored.as_deref().unwrap(),
                )
            })
            .collect();
        let limit_text = format!("{limit} W");
        assert_eq!(
            names,
            [
                (
                    "gpu0",
                    "gpu_power_limit_w",
                    "700 W",
                    limit_text.as_str(),
                    "700 W"
                ),
                (
                    "gpu0",
                    "gpu_locked_clocks_mhz",
                    "driver default (not locked)",
                    clocks_text.as_str(),
                    "driver default (not locked)"
                ),
            ],
            "{d:?}"
        );
        // What bound: the cap where the clocks let the GPU ask for more than it, the clock
        // setting where the clocks were locked below nominal; the power the model draws.
        let b = &d.binding[0];
        assert_eq!(b.domain, "gpu0");
        assert_eq!(b.power_limit_w, Some(limit));
        let want_w = modelled_w(limit, max_clock);
        let mean = b.mean_power_w.unwrap();
        assert!((mean - want_w).abs() / want_w < 0.03, "{b:?} vs {want_w} W");
        let capped = modelled_w(f64::INFINITY, max_clock) > limit;
        let cap_share = b.power_cap_share.unwrap();
        assert_eq!(cap_share > 0.9, capped, "{b:?}");
        assert_eq!(cap_share == 0.0, !capped, "{b:?}");
        let locked = max_clock < 1980.0;
        assert_eq!(b.clock_setting_share.unwrap() > 0.9, locked, "{b:?}");
        assert_eq!(b.binding, capped || locked, "{b:?}");
        let clock = b.mean_sm_clock_mhz.unwrap();
        assert!(clock <= max_clock + 1.0, "{b:?}");
        if capped {
            assert!(clock < max_clock - 50.0, "the cap lowers the clock: {b:?}");
        }
        // A cap that never engaged is said.
        let never = r
            .measurement_warnings
            .iter()
            .any(|w| w.contains("never engaged"));
        assert_eq!(never, !capped, "{:?}", r.measurement_warnings);
    }
    // The machine is as it was found, and no journal is left.
    assert_eq!(gpu_state(&standin), (700.0, 0, 0));
    assert!(journals(home.path()).is_empty());
    // The report's study view puts energy against each setting.
    let page = common::report_page(home.path(), &out);
    assert!(page.contains("id=\"device-settings\""), "no device section");
    assert!(page.contains("250 W") && page.contains("900-1200 MHz"));
    assert!(
        page.contains("device-limit-energy"),
        "no energy-against-limit chart"
    );
}

#[test]
fn a_run_killed_with_its_settings_changed_is_put_back_by_the_next_llem() {
    let _machine = common::exclusive();
    let home = tempfile::tempdir().unwrap();
    let standin = StandIn::new(Some(H100));
    let exp = home.path().join("capped.yaml");
    // The baseline holds the run for a minute under the settings.
    std::fs::write(
        &exp,
        format!(
            "{WORKLOAD}baseline: {{enabled: true, duration_seconds: 60, strategy: fresh}}\n\
             device: {{gpu_power_limit_w: 300, gpu_locked_clocks_mhz: \"900-1200\"}}\n"
        ),
    )
    .unwrap();
    let mut child = llem(home.path(), &standin)
        .args(["run", exp.to_str().unwrap(), "-q", "--output"])
        .arg(home.path().join("results"))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while try_gpu_state(&standin) != Some((300.0, 900, 1200)) {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the settings were never applied"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(journals(home.path()).len(), 1, "the journal comes first");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    // Nothing ran on its way out: the device is still changed, and the doctor says so.
    assert_eq!(gpu_state(&standin), (300.0, 900, 1200));
    let doctor = llem(home.path(), &standin).arg("doctor").output().unwrap();
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("left changed by an llem that died") && text.contains("llem restore"),
        "{text}"
    );
    assert!(!doctor.status.success());
    // The next llem that measures puts it back first, and says so.
    let plain = home.path().join("plain.yaml");
    std::fs::write(&plain, format!("{WORKLOAD}baseline: {{enabled: false}}\n")).unwrap();
    let o = llem(home.path(), &standin)
        .args(["run", plain.to_str().unwrap(), "-q", "--output"])
        .arg(home.path().join("results2"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("restored device settings left by process")
            && stderr.contains("gpu0 gpu_power_limit_w -> 700 W"),
        "{stderr}"
    );
    assert_eq!(gpu_state(&standin), (700.0, 0, 0));
    assert!(journals(home.path()).is_empty());
    // Nothing is left for `llem restore`.
    let o = llem(home.path(), &standin).arg("restore").output().unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no device settings to restore"));
}

#[test]
fn what_a_device_cannot_take_is_refused_before_anything_changes() {
    let _machine = common::shared();
    let home = tempfile::tempdir().unwrap();
    let standin = StandIn::new(Some(
        "gpu uuid=GPU-aaaa-1111 power_w=350 sm_clock_mhz=1980 max_sm_clock_mhz=1980 \
         power_limit_w=700 min_power_limit_w=200 max_power_limit_w=700
gpu uuid=GPU-bbbb-2222 power_w=350 sm_clock_mhz=1980 max_sm_clock_mhz=1980 power_limit_w=700 \
         admin=0
",
    ));
    let run = |name: &str, device: &str, visible: &str| {
        let f = home.path().join(format!("{name}.yaml"));
        std::fs::write(
            &f,
            format!("{WORKLOAD}baseline: {{enabled: false}}\ndevice: {device}\n"),
        )
        .unwrap();
        llem(home.path(), &standin)
            .env("CUDA_VISIBLE_DEVICES", visible)
            .args(["run", f.to_str().unwrap(), "-q", "--output"])
            .arg(home.path().join(name))
            .output()
            .unwrap()
    };
    // Outside the device's range, with the range in the error; before the first cell.
    let o = run("range", "{gpu_power_limit_w: 900}", "0");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains(
            "device.gpu_power_limit_w: 900 W is outside the device's range 200-700 W (gpu0)"
        ),
        "{err}"
    );
    let o = run("clock", "{gpu_locked_clocks_mhz: \"100-5000\"}", "0");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("supported clocks 210-1980 MHz"), "{err}");
    assert!(
        !home.path().join("range").exists() || common::walk(&home.path().join("range")).is_empty()
    );
    // A driver that refuses for want of privileges: the run fails saying how to grant them,
    // and nothing stays changed.
    let o = run("denied", "{gpu_power_limit_w: 300}", "1");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("permission denied") && err.contains("need root"),
        "{err}"
    );
    assert!(journals(home.path()).is_empty());
    // An external server's GPUs are not llem's to set: refused in the plan.
    let f = home.path().join("external.yaml");
    std::fs::write(
        &f,
        "model: m\nengine: openai\nrunners: {openai: \"external:http://127.0.0.1:9\"}\n\
         device: {gpu_power_limit_w: 300}\n",
    )
    .unwrap();
    let o = llem(home.path(), &standin)
        .args(["run", f.to_str().unwrap(), "--dry-run"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("cannot be honoured for an external server"),
        "{err}"
    );
}

/// A package zone whose counter a thread advances at 20 W, or at the zone's long-term limit
/// when that is lower (as RAPL holds a package to it); one CPU with cpufreq. The thread
/// returns how much of the run its stalls could have disturbed, s: a stalled writer leaves
/// the counter flat, then catches up in one step, so each stall skews the 100 ms stretches
/// the cap is judged on that it spans, and the one after.
fn capped_package(
    home: &Path,
) -> (
    Arc<AtomicBool>,
    std::thread::JoinHandle<f64>,
    PathBuf,
    PathBuf,
) {
    let zone = home.join("powercap/intel-rapl:0");
    std::fs::create_dir_all(&zone).unwrap();
    for (f, v) in [
        ("name", "package-0"),
        ("max_energy_range_uj", "262143328850"),
        ("constraint_0_name", "long_term"),
        ("constraint_0_power_limit_uw", "25000000"),
        ("constraint_0_max_power_uw", "95000000"),
        ("energy_uj", "1000"),
    ] {
        std::fs::write(zone.join(f), format!("{v}\n")).unwrap();
    }
    let cpu = home.join("sys/devices/system/cpu/cpu0/cpufreq");
    std::fs::create_dir_all(&cpu).unwrap();
    for (f, v) in [
        ("scaling_max_freq", "3000000"),
        ("cpuinfo_min_freq", "800000"),
        ("cpuinfo_max_freq", "3500000"),
        ("scaling_governor", "performance"),
        ("scaling_available_governors", "performance powersave"),
    ] {
        std::fs::write(cpu.join(f), format!("{v}\n")).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let z = zone.clone();
    let writer = std::thread::spawn(move || {
        let (mut last, mut uj, mut disturbed_s) = (Instant::now(), 1000.0_f64, 0.0);
        while !flag.load(Ordering::Relaxed) {
            let limit_w = std::fs::read_to_string(z.join("constraint_0_power_limit_uw"))
                .ok()
                .and_then(|t| t.trim().parse::<f64>().ok())
                .map_or(20.0, |uw| uw / 1e6);
            let now = Instant::now();
            let gap = (now - last).as_secs_f64();
            if gap > 0.005 {
                disturbed_s += gap + 0.2;
            }
            uj += 20.0_f64.min(limit_w) * gap * 1e6;
            last = now;
            common::write_atomically(&z.join("energy_uj"), &format!("{}\n", uj as u64));
            std::thread::sleep(Duration::from_micros(500));
        }
        disturbed_s
    });
    (stop, writer, zone, cpu)
}

#[test]
fn cpu_power_limits_and_frequencies_are_swept_and_put_back() {
    let _machine = common::exclusive();
    let home = tempfile::tempdir().unwrap();
    let standin = StandIn::new(None);
    let (stop, writer, zone, cpu) = capped_package(home.path());
    let study = home.path().join("cpu.yaml");
    std::fs::write(
        &study,
        format!(
            "name: cpu-settings\n{WORKLOAD}energy_sampler: rapl\nbaseline: {{enabled: false}}\n\
             device: {{cpu_max_frequency_mhz: 2000, cpu_governor: powersave}}\n\
             study_execution: {{n_cycles: 1, experiment_gap_seconds: 0, cycle_gap_seconds: 0}}\n\
             sweep:\n  device.cpu_power_limit_w: [8, 12, 30]\n"
        ),
    )
    .unwrap();
    let out = home.path().join("results");
    let o = llem(home.path(), &standin)
        .args(["run", study.to_str().unwrap(), "-q", "--output"])
        .arg(&out)
        .output()
        .unwrap();
    stop.store(true, Ordering::Relaxed);
    let disturbed_s = writer.join().unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let runs = results(&out);
    assert_eq!(runs.len(), 3);
    for r in &runs {
        let limit = r.effective_config.as_ref().unwrap()["device"]["cpu_power_limit_w"]
            .as_f64()
            .unwrap();
        let d = r.device_settings.as_ref().unwrap();
        assert!(d.restored);
        let settings: Vec<(&str, &str, &str)> = d
            .settings
            .iter()
            .map(|s| (s.device.as_str(), s.setting.as_str(), s.original.as_str()))
            .collect();
        assert_eq!(
            settings,
            [
                ("package-0", "cpu_power_limit_w", "25 W"),
                ("cpu0", "cpu_governor", "performance"),
                ("cpu0", "cpu_max_frequency_mhz", "3000 MHz"),
            ]
        );
        let b = d.binding.iter().find(|b| b.domain == "package-0").unwrap();
        let mean = b.mean_power_w.unwrap();
        let capped = limit < 20.0;
        let want = 20.0_f64.min(limit);
        assert!((mean - want).abs() / want < 0.05, "{b:?}");
        // Held at the limit throughout, or never near it, but for what the writer's stalls
        // could have skewed.
        let [t0, t1] = r.measurement_window_s.unwrap();
        let slack = disturbed_s / (t1 - t0);
        let share = b.power_cap_share.unwrap();
        if capped {
            assert!(share >= 0.9 - slack, "{b:?}, slack {slack}");
        } else {
            assert!(share <= slack, "{b:?}, slack {slack}");
        }
        assert_eq!(b.binding, capped || share > 0.0, "{b:?}");
    }
    let read = |p: PathBuf| std::fs::read_to_string(p).unwrap().trim().to_string();
    assert_eq!(read(zone.join("constraint_0_power_limit_uw")), "25000000");
    assert_eq!(read(cpu.join("scaling_max_freq")), "3000000");
    assert_eq!(read(cpu.join("scaling_governor")), "performance");
    assert!(journals(home.path()).is_empty());
}
