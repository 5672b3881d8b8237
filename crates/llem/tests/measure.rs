//! `llem measure` end to end: real child processes, real signals, sensor trees the tests
//! write (powercap, amdgpu hwmon), the estimate on this machine.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use common::rapl_zone;

use llem_testkit::nvml_standin;

/// A sandbox: empty sensor roots (so results do not depend on the machine's hardware), a
/// home without user config.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let s = Sandbox {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir_all(s.path().join("powercap")).unwrap();
        std::fs::create_dir_all(s.path().join("sys")).unwrap();
        s
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, args: &[&str], vars: &[(&str, &Path)]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_llem"));
        cmd.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("LLEM_CONFIG_PATH", self.path().join("no-user-config.yaml"))
            .env("LLEM_POWERCAP_ROOT", self.path().join("powercap"))
            .env("LLEM_SYSFS_ROOT", self.path().join("sys"))
            .args(args);
        for (k, v) in vars {
            cmd.env(k, v);
        }
        cmd
    }

    fn run(&self, args: &[&str], vars: &[(&str, &Path)]) -> Output {
        self.command(args, vars).output().unwrap()
    }
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}\nstdout: {}\nstderr: {}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn sleep_measured_with_the_estimate_on_this_machine() {
    let _machine = common::shared();
    let s = Sandbox::new();
    let o = s.run(&["measure", "--json", "--", "sleep", "1"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["exit_code"], 0);
    let d = v["duration_s"].as_f64().unwrap();
    assert!((0.95..2.0).contains(&d), "{d}");
    assert!(v["total_energy_j"].as_f64().unwrap() > 0.0);
    assert_eq!(v["energy_source"], "estimate");
    assert_eq!(v["sampler"], "auto");
    assert_eq!(v["interval_ms"], 100.0);
    assert!(v["n_samples"].as_u64().unwrap() >= 9);
    let names: Vec<&str> = v["domains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["package-0", "dram-0"]);
    for d in v["domains"].as_array().unwrap() {
        for k in ["energy_j", "avg_power_w", "peak_power_w"] {
            assert!(d[k].as_f64().is_some(), "{k} in {d}");
        }
        assert_eq!(d["energy_source"], "estimate");
    }
    let warnings = v["warnings"].as_array().unwrap();
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().unwrap().contains("is an estimate")),
        "{warnings:?}"
    );
    let text = stderr(&o);
    assert!(
        text.contains("Energy of 'sleep 1' (exit 0)") && text.contains("package-0"),
        "{text}"
    );
}

/// Busy loops that are not llem's children, killed when dropped.
struct Hogs(Vec<std::process::Child>);

impl Drop for Hogs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn other_processes_load_during_the_window_is_said() {
    let _machine = common::exclusive();
    let s = Sandbox::new();
    // Half of this machine's CPUs kept busy by processes llem did not start.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let n = (cpus / 2).max(1);
    let hogs = Hogs(
        (0..n)
            .map(|_| {
                Command::new("sh")
                    .args(["-c", "while :; do :; done"])
                    .spawn()
                    .unwrap()
            })
            .collect(),
    );
    let o = s.run(&["measure", "--", "sleep", "2"], &[]);
    drop(hogs);
    let text = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("other processes used"))
        .unwrap_or_else(|| panic!("no word of the load: {text}"));
    let share: f64 = line
        .split("other processes used ")
        .nth(1)
        .and_then(|r| r.split(" %").next())
        .and_then(|x| x.trim().parse().ok())
        .unwrap();
    // The hogs' share of the machine, give or take what else ran.
    let hogs_share = 100.0 * n as f64 / cpus as f64;
    assert!(
        share >= hogs_share * 0.6,
        "{share} % < {hogs_share} %: {line}"
    );
    assert!(line.contains("the command and its children"), "{line}");
    assert!(line.contains("a CPU estimate charges all of it"), "{line}");
}

#[test]
fn the_exit_code_is_the_commands() {
    let _machine = common::shared();
    let s = Sandbox::new();
    assert_eq!(
        s.run(&["measure", "--", "sh", "-c", "exit 3"], &[])
            .status
            .code(),
        Some(3)
    );
    assert_eq!(
        s.run(&["measure", "--", "sh", "-c", "kill -TERM $$"], &[])
            .status
            .code(),
        Some(143)
    );
    let o = s.run(&["measure", "--", "no-such-command-llem"], &[]);
    assert_eq!(o.status.code(), Some(127));
    assert!(stderr(&o).contains("cannot run `no-such-command-llem`"));
}

#[test]
fn sigterm_to_llem_reaches_the_command_and_the_report_is_still_written() {
    let _machine = common::shared();
    let s = Sandbox::new();
    let out = s.path().join("run");
    let child = s
        .command(
            &["measure", "-o", out.to_str().unwrap(), "--", "sleep", "30"],
            &[],
        )
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let t = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        t.elapsed() < Duration::from_secs(5),
        "llem waited for sleep 30"
    );
    assert_eq!(o.status.code(), Some(143), "{}", stderr(&o));
    let m: Value =
        serde_json::from_slice(&std::fs::read(out.join("measurement.json")).unwrap()).unwrap();
    assert_eq!(m["exit_code"], 143);
}

#[test]
fn output_dir_holds_measurement_json_and_a_readable_timeseries() {
    let _machine = common::shared();
    let s = Sandbox::new();
    let out = s.path().join("run");
    let o = s.run(
        &[
            "measure",
            "--interval",
            "20ms",
            "-o",
            out.to_str().unwrap(),
            "--",
            "sleep",
            "0.5",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let m: Value =
        serde_json::from_slice(&std::fs::read(out.join("measurement.json")).unwrap()).unwrap();
    assert_eq!(m["command"], serde_json::json!(["sleep", "0.5"]));
    // Only the CPU estimate here: it changes every 100 ms, so the sampler ticks no faster
    // than that, and says so beside what was asked.
    assert_eq!(m["requested_interval_ms"], 20.0);
    assert_eq!(m["interval_ms"], 100.0);
    assert_eq!(m["timeseries"], "timeseries.parquet");
    assert!(m["start_time"].as_str().unwrap().ends_with('Z'));
    let ts = llem_results::read_timeseries(&out.join("timeseries.parquet")).unwrap();
    for domain in ["package-0", "dram-0"] {
        let rows: Vec<usize> = (0..ts.len()).filter(|&i| ts.domain[i] == domain).collect();
        assert!(rows.len() >= 4, "{domain}: {} rows", rows.len());
        assert_eq!(ts.energy_j[rows[0]], Some(0.0), "cumulative from zero");
        assert!(rows.windows(2).all(|w| ts.t_s[w[0]] < ts.t_s[w[1]]));
        assert!(rows.iter().all(|&i| ts.power_w[i].is_some()));
    }
    // The JSON total is the window's share of the recorded energy.
    let recorded: f64 = ["package-0", "dram-0"]
        .iter()
        .map(|d| {
            (0..ts.len())
                .filter(|&i| ts.domain[i] == *d)
                .filter_map(|i| ts.energy_j[i])
                .fold(0.0, f64::max)
        })
        .sum();
    let total = m["total_energy_j"].as_f64().unwrap();
    assert!(
        total <= recorded + 1e-9 && total > 0.8 * recorded,
        "{total} vs {recorded}"
    );
}

#[test]
fn rapl_tree_energy_matches_the_written_rate() {
    let _machine = common::shared();
    // The writer stamps the counter with its own clock: a writer descheduled at a window edge
    // lags the truth by its stall (10 ms is 1 % of this window), which is the machine's error,
    // not llem's; such runs are taken again.
    let mut stalls = Vec::new();
    let (o, writer_stall_s) = loop {
        let s = Sandbox::new();
        let (stop, writer) = rapl_zone(&s.path().join("powercap"), 20.0);
        let o = s.run(
            &[
                "measure",
                "--sampler",
                "rapl",
                "--interval",
                "10ms",
                "--json",
                "--",
                "sleep",
                "1",
            ],
            &[],
        );
        stop.store(true, Ordering::Relaxed);
        let stall_s = writer.join().unwrap();
        if stall_s <= 0.005 || stalls.len() == 4 {
            break (o, stall_s);
        }
        stalls.push(stall_s);
    };
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let d = &v["domains"][0];
    assert_eq!(d["name"], "package-0");
    assert_eq!(d["energy_source"], "counter");
    let truth = 20.0 * v["duration_s"].as_f64().unwrap();
    let got = d["energy_j"].as_f64().unwrap();
    // Under a stall that every attempt had, the bound widens by what the stall explains.
    let tolerance = 0.01 + writer_stall_s / v["duration_s"].as_f64().unwrap();
    assert!(
        (got - truth).abs() / truth < tolerance,
        "{got} J vs {truth} J (writer stalls: {stalls:?}, last {writer_stall_s} s)"
    );
    assert_eq!(v["energy_source"], "counter");
}

#[test]
fn amdgpu_tree_power_is_integrated() {
    let _machine = common::shared();
    let s = Sandbox::new();
    let hw = s.path().join("sys/class/drm/card0/device/hwmon/hwmon0");
    std::fs::create_dir_all(&hw).unwrap();
    std::fs::write(hw.join("name"), "amdgpu\n").unwrap();
    std::fs::write(hw.join("power1_average"), "150000000\n").unwrap();
    std::fs::write(hw.join("temp1_input"), "50000\n").unwrap();
    let o = s.run(
        &[
            "measure",
            "--sampler",
            "amdgpu",
            "--json",
            "--",
            "sleep",
            "0.5",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let d = &v["domains"][0];
    assert_eq!(
        (d["name"].as_str(), d["energy_source"].as_str()),
        (Some("gpu0"), Some("integrated"))
    );
    let truth = 150.0 * v["duration_s"].as_f64().unwrap();
    assert!((d["energy_j"].as_f64().unwrap() - truth).abs() / truth < 1e-6);
}

#[test]
fn nvidia_gpus_through_the_driver_library_by_uuid_with_throttling() {
    let _machine = common::shared();
    // Two boards behind a stand-in libnvidia-ml.so.1; CUDA_VISIBLE_DEVICES picks the second
    // by UUID, which is held at its power cap throughout.
    let standin = nvml_standin::StandIn::new(Some(
        "driver 550.54.15
gpu uuid=GPU-aaaa-1111 name=NVIDIA_H100 power_w=400
gpu uuid=GPU-bbbb-2222 name=NVIDIA_H100 power_w=250 throttle=0x4 throttle_until_s=1000
",
    ));
    let s = Sandbox::new();
    let mut cmd = s.command(
        &["measure", "--sampler", "zeus", "--json", "--", "sleep", "1"],
        &[],
    );
    cmd.envs(standin.env())
        .env("CUDA_VISIBLE_DEVICES", "GPU-bbbb");
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let d = &v["domains"][0];
    assert_eq!(v["domains"].as_array().unwrap().len(), 1);
    assert_eq!(
        (d["name"].as_str(), d["energy_source"].as_str()),
        (Some("gpu0"), Some("counter"))
    );
    let truth = 250.0 * v["duration_s"].as_f64().unwrap();
    let j = d["energy_j"].as_f64().unwrap();
    assert!((j - truth).abs() / truth < 0.01, "{j} J vs {truth} J");
    let th = &v["throttle"][0];
    assert_eq!(th["domain"], "gpu0");
    assert!(th["power_cap_s"].as_f64().unwrap() > 0.9, "{th}");
    let warnings = v["warnings"].to_string();
    assert!(warnings.contains("gpu0 was throttled"), "{warnings}");

    // `llem config` lists both boards with what each offers.
    let mut cmd = s.command(&["config"], &[]);
    cmd.envs(standin.env());
    let out = String::from_utf8_lossy(&cmd.output().unwrap().stdout).into_owned();
    assert!(
        out.contains("GPU-aaaa-1111") && out.contains("GPU-bbbb-2222"),
        "{out}"
    );
}

#[test]
fn rapl_permission_denied_says_how_to_fix_it() {
    let _machine = common::shared();
    let s = Sandbox::new();
    let root = s.path().join("powercap");
    let z = root.join("intel-rapl:0");
    std::fs::create_dir_all(&z).unwrap();
    std::fs::write(z.join("name"), "package-0\n").unwrap();
    std::fs::write(z.join("max_energy_range_uj"), "262143328850\n").unwrap();
    std::fs::write(z.join("energy_uj"), "1000\n").unwrap();
    std::fs::set_permissions(z.join("energy_uj"), std::fs::Permissions::from_mode(0o000)).unwrap();
    for d in [s.path(), root.as_path(), z.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut cmd = s.command(&["measure", "--sampler", "rapl", "--", "true"], &[]);
    if nix::unistd::Uid::effective().is_root() {
        // Root reads any file: run llem as nobody, as an unprivileged user would.
        use std::os::unix::process::CommandExt;
        cmd.uid(65534).gid(65534);
    }
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let e = stderr(&o);
    assert!(e.contains("energy_uj: permission denied"), "{e}");
    assert!(e.contains("chmod o+r") && e.contains("Linux 5.10"), "{e}");
}

#[test]
fn an_unavailable_sampler_is_an_error_not_a_fallback() {
    let _machine = common::shared();
    let s = Sandbox::new();
    for sampler in ["zeus", "nvml", "amdgpu", "rapl"] {
        let o = s.run(&["measure", "--sampler", sampler, "--", "true"], &[]);
        assert_eq!(o.status.code(), Some(2), "{sampler}");
        assert!(
            stderr(&o).contains(&format!("energy sampler `{sampler}` is not available")),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn config_lists_sensors_and_why_others_are_absent() {
    let _machine = common::shared();
    let s = Sandbox::new();
    let (stop, writer) = rapl_zone(&s.path().join("powercap"), 10.0);
    let o = s.run(&["config"], &[]);
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        out.contains("rapl") && out.contains("package-0: ") && out.contains("(energy counter)"),
        "{out}"
    );
    assert!(
        out.contains("amdgpu        absent: no amdgpu hwmon"),
        "{out}"
    );
    if !Path::new("/proc/driver/nvidia").exists() {
        assert!(
            out.contains("nvml          absent: no NVIDIA driver"),
            "{out}"
        );
    }
    assert!(out.contains("estimate      package-0: estimate"), "{out}");
}

#[test]
fn baseline_adjusts_the_energy() {
    let _machine = common::shared();
    let s = Sandbox::new();
    let o = s.run(
        &[
            "measure",
            "--baseline",
            "300ms",
            "--json",
            "--",
            "sleep",
            "0.3",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    let base = v["baseline_power_w"].as_f64().unwrap();
    assert!(base > 0.0);
    let adjusted = v["energy_adjusted_j"].as_f64().unwrap();
    let raw = v["total_energy_j"].as_f64().unwrap();
    let want = (raw - base * v["duration_s"].as_f64().unwrap()).max(0.0);
    assert!((adjusted - want).abs() < 1e-9);
    assert_eq!(v["baseline"]["origin"], "fresh");
}

#[test]
fn a_cached_baseline_is_reused() {
    let _machine = common::shared();
    let s = Sandbox::new();
    let run = || {
        let o = s.run(
            &[
                "measure",
                "--baseline",
                "200ms",
                "--baseline-strategy",
                "cached",
                "--json",
                "--",
                "true",
            ],
            &[],
        );
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        json(&o)
    };
    let first = run();
    let second = run();
    assert_eq!(first["baseline"]["origin"], "fresh");
    assert_eq!(second["baseline"]["origin"], "cached");
    assert_eq!(first["baseline_power_w"], second["baseline_power_w"]);
    let cache = s.path().join(".cache/llem");
    let files: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let record: Value =
        serde_json::from_slice(&std::fs::read(cache.join(&files[0])).unwrap()).unwrap();
    for k in [
        "power_w",
        "total_power_w",
        "measured_at_unix_s",
        "host",
        "devices",
        "n_samples",
    ] {
        assert!(!record[k].is_null(), "{k}");
    }
}

/// Runs `script` with `python`, the file as its argument; the script's asserts are the test's.
fn run_python(python: &Path, script: &str, file: &Path) {
    let r = Command::new(python)
        .args(["-c", script, file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        r.status.success(),
        "{}{}",
        String::from_utf8_lossy(&r.stdout),
        String::from_utf8_lossy(&r.stderr)
    );
}

/// pandas and polars read the Parquet file (make test installs them; see scripts/python-env.sh).
#[test]
fn timeseries_is_readable_by_pandas_and_polars() {
    let _machine = common::shared();
    let Some(python) = common::checks_python() else {
        return;
    };
    let s = Sandbox::new();
    let out: PathBuf = s.path().join("run");
    let o = s.run(
        &[
            "measure",
            "--interval",
            "20ms",
            "-o",
            out.to_str().unwrap(),
            "--",
            "sleep",
            "0.3",
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(0));
    let script = r#"
import sys, pandas as pd, polars as pl
p = sys.argv[1]
df = pd.read_parquet(p)
cols = ["t","domain","gpu_idx","device_index","power_w","energy_j","temperature_c",
        "memory_used_mib","memory_total_mib","sm_clock_mhz","sm_util_pct","mem_util_pct",
        "throttle_reasons","power_avg_w"]
assert list(df.columns) == cols, list(df.columns)
assert set(df["domain"]) == {"package-0", "dram-0"}, set(df["domain"])
assert (df.groupby("domain")["energy_j"].min() == 0).all()
assert df["gpu_idx"].isna().all(), "CPU and DRAM rows have no GPU index"
pf = pl.read_parquet(p)
assert pf.shape == df.shape, (pf.shape, df.shape)
assert pf.schema["throttle_reasons"] == pl.UInt64
print("ok", df.shape)
"#;
    run_python(&python, script, &out.join("timeseries.parquet"));
}

/// A notebook written for seed 001's sidecar (`t`, `gpu_idx`, `power_w`, `temperature_c`,
/// `memory_used_mib`, `sm_clock_mhz`) runs unchanged on llem's, with pandas and polars: two
/// boards behind the NVML stand-in, one row per sample per board.
#[test]
fn a_seed_notebook_reads_the_gpu_timeseries() {
    let _machine = common::shared();
    let Some(python) = common::checks_python() else {
        return;
    };
    let standin = nvml_standin::StandIn::new(Some(
        "driver 550.54.15
gpu uuid=GPU-aaaa-1111 name=NVIDIA_H100 power_w=400 temp_c=55 mem_used_mib=1024 sm_clock_mhz=1980
gpu uuid=GPU-bbbb-2222 name=NVIDIA_H100 power_w=250 temp_c=48 mem_used_mib=2048 sm_clock_mhz=1755
",
    ));
    let s = Sandbox::new();
    let out: PathBuf = s.path().join("run");
    let mut cmd = s.command(
        &[
            "measure",
            "--sampler",
            "nvml",
            "-o",
            out.to_str().unwrap(),
            "--",
            "sleep",
            "0.5",
        ],
        &[],
    );
    cmd.envs(standin.env());
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // The seed's own loading snippet, then the usual per-GPU questions.
    let script = r#"
import sys, pandas as pd, polars as pl
ts = pd.read_parquet(sys.argv[1])
for c in ["t", "gpu_idx", "power_w", "temperature_c", "memory_used_mib", "sm_clock_mhz"]:
    assert c in ts.columns, (c, list(ts.columns))
assert str(ts["t"].dtype) == "float64" and str(ts["gpu_idx"].dtype) == "int32", ts.dtypes
assert sorted(ts["gpu_idx"].unique()) == [0, 1]
mean = ts.groupby("gpu_idx")["power_w"].mean()
assert abs(mean[0] - 400) < 1 and abs(mean[1] - 250) < 1, mean
g0 = ts[ts.gpu_idx == 0].sort_values("t")
assert g0["t"].is_monotonic_increasing and len(g0) >= 5, len(g0)
assert (g0["temperature_c"] == 55).all() and (g0["memory_used_mib"] == 1024).all()
assert (ts[ts.gpu_idx == 1]["sm_clock_mhz"] == 1755).all()
pf = pl.read_parquet(sys.argv[1])
assert pf.filter(pl.col("gpu_idx") == 1).height == (ts.gpu_idx == 1).sum()
print("ok", len(ts))
"#;
    run_python(&python, script, &out.join("timeseries.parquet"));
}
