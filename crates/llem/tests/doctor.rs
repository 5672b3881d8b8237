//! `llem doctor` on real parts: a powercap tree the test writes (its counters unreadable), the
//! NVML stand-in for the driver (two boards with settings that change what energy means), the
//! real SmolLM2 model, and study files that cannot run here.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

use crate::common;

use llem_testkit::nvml_standin;

fn llem(home: &Path, args: &[&str], env: &[(String, String)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_llem"));
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("LLEM_CONFIG_PATH", home.join("no-user-config.yaml"))
        .env("LLEM_ASSETS", common::assets())
        .env("LLEM_POWERCAP_ROOT", home.join("powercap"))
        .env("LLEM_SYSFS_ROOT", home.join("sys"))
        .current_dir(home)
        .args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// The line of `section` whose message contains `text`.
fn line<'a>(report: &'a Value, section: &str, text: &str) -> &'a Value {
    report["sections"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["title"].as_str().unwrap().starts_with(section))
        .flat_map(|s| s["lines"].as_array().unwrap())
        .find(|l| l["message"].as_str().unwrap().contains(text))
        .unwrap_or_else(|| panic!("no `{text}` in {section}: {report:#}"))
}

/// A RAPL package zone whose counter only root may read (as since Linux 5.10).
fn unreadable_rapl(home: &Path) {
    let z = home.join("powercap/intel-rapl:0");
    std::fs::create_dir_all(&z).unwrap();
    std::fs::write(z.join("name"), "package-0\n").unwrap();
    std::fs::write(z.join("max_energy_range_uj"), "262143328850\n").unwrap();
    std::fs::write(z.join("energy_uj"), "1000\n").unwrap();
    std::fs::set_permissions(z.join("energy_uj"), std::fs::Permissions::from_mode(0o000)).unwrap();
}

fn open_to_all(dirs: &[&Path]) {
    for d in dirs {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

#[test]
fn the_host_report_names_each_gpu_setting_and_its_fix() {
    let _machine = common::shared();
    let standin = nvml_standin::StandIn::new(Some(
        "driver 550.54.15
gpu uuid=GPU-aaaa-1111 name=NVIDIA_H100 power_w=300 persistence=0 power_limit_w=300 default_power_limit_w=700 sm_clock_mhz=1410 max_sm_clock_mhz=1980 ecc=1
gpu uuid=GPU-bbbb-2222 name=NVIDIA_H100 power_w=100 mig=1 power_limit_w=700 default_power_limit_w=700 ecc=0
",
    ));
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join("sys")).unwrap();
    unreadable_rapl(home.path());
    let root = home.path().join("powercap");
    let zone = root.join("intel-rapl:0");
    open_to_all(&[home.path(), &root, &zone, standin.dir.path()]);
    let mut cmd = llem(home.path(), &["doctor", "--json"], &standin.env());
    if nix::unistd::Uid::effective().is_root() {
        // Root reads any file: run as nobody, as an unprivileged user would.
        use std::os::unix::process::CommandExt;
        cmd.uid(65534).gid(65534).env_remove("LLEM_ASSETS");
    }
    let o = cmd.output().unwrap();
    let r = json(&o);
    assert_eq!(o.status.code(), Some(0), "warnings only: {r:#}");

    let pm = line(
        &r,
        "GPUs",
        "GPU 0 (NVIDIA H100, GPU-aaaa-1111): persistence mode off",
    );
    assert_eq!(
        (pm["status"].as_str(), pm["fix"].as_str()),
        (Some("warn"), Some("sudo nvidia-smi -i 0 -pm 1"))
    );
    let pl = line(
        &r,
        "GPUs",
        "power limit 300 W, not the board's default 700 W",
    );
    assert_eq!(pl["status"], "warn");
    assert!(
        pl["fix"]
            .as_str()
            .unwrap()
            .starts_with("sudo nvidia-smi -i 0 -pl 700")
    );
    assert_eq!(
        line(&r, "GPUs", "SM clock 1410 MHz now, 1980 MHz at most")["status"],
        "ok"
    );
    assert_eq!(
        line(&r, "GPUs", "GPU 0 (NVIDIA H100, GPU-aaaa-1111): ECC on")["status"],
        "ok"
    );
    let mig = line(
        &r,
        "GPUs",
        "GPU 1 (NVIDIA H100, GPU-bbbb-2222): MIG mode on",
    );
    assert_eq!(
        (mig["status"].as_str(), mig["fix"].as_str()),
        (Some("warn"), Some("sudo nvidia-smi -i 1 -mig 0"))
    );
    assert_eq!(
        line(
            &r,
            "GPUs",
            "GPU 1 (NVIDIA H100, GPU-bbbb-2222): power limit 700 W"
        )["status"],
        "ok"
    );
    // A GPU in MIG mode takes NVML out as a sensor, and the sensors say so.
    let nvml = line(
        &r,
        "Energy sensors",
        "nvml: the GPUs are there but cannot be measured",
    );
    assert_eq!(nvml["status"], "warn");
    assert!(nvml["message"].as_str().unwrap().contains("MIG"), "{nvml}");
    let rapl = line(
        &r,
        "Energy sensors",
        "rapl: the CPU energy counters exist but this user cannot read them",
    );
    assert_eq!(rapl["status"], "warn");
    assert!(
        rapl["fix"]
            .as_str()
            .unwrap()
            .starts_with("sudo chmod o+r /sys/class/powercap/intel-rapl:*/energy_uj")
    );
    assert_eq!(r["status"], "warn");
    assert!(r["summary"]["warn"].as_u64().unwrap() >= 4, "{r:#}");

    // --check grades warnings; the text report says the same with the fixes under each line.
    let mut cmd = llem(home.path(), &["doctor", "--check"], &standin.env());
    if nix::unistd::Uid::effective().is_root() {
        use std::os::unix::process::CommandExt;
        cmd.uid(65534).gid(65534).env_remove("LLEM_ASSETS");
    }
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("  [warn] GPU 0 (NVIDIA H100, GPU-aaaa-1111): persistence mode off")
            && text.contains("         -> sudo nvidia-smi -i 0 -pm 1"),
        "{text}"
    );
}

#[test]
fn a_study_that_cannot_run_here_fails_before_it_starts() {
    let _machine = common::shared();
    let home = tempfile::tempdir().unwrap();
    for d in ["powercap", "sys"] {
        std::fs::create_dir_all(home.path().join(d)).unwrap();
    }
    let model = common::assets().join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    std::fs::write(
        home.path().join("study.yaml"),
        format!(
            "name: night\nenergy_sampler: rapl\nsweep:\n  model: [missing.gguf, {}]\n",
            model.display()
        ),
    )
    .unwrap();
    let o = llem(home.path(), &["doctor", "study.yaml", "--json"], &[])
        .output()
        .unwrap();
    let r = json(&o);
    assert_eq!(o.status.code(), Some(1), "{r:#}");
    let missing = line(
        &r,
        "Study night (2 configurations)",
        "#1: model `missing.gguf` not found",
    );
    assert_eq!(missing["status"], "fail");
    let rapl = line(
        &r,
        "Study night",
        "every configuration: energy_sampler rapl, but there is no RAPL",
    );
    assert_eq!(rapl["status"], "fail");
    // Everything else about the existing model checks out: no other failure.
    let fails = r["summary"]["fail"].as_u64().unwrap();
    assert_eq!(fails, 2, "{r:#}");

    // The same study on the estimate: the second configuration can run here.
    std::fs::write(
        home.path().join("ok.yaml"),
        format!(
            "name: ok\nenergy_sampler: estimate\nmodel: {}\n",
            model.display()
        ),
    )
    .unwrap();
    let o = llem(home.path(), &["doctor", "ok.yaml", "--json"], &[])
        .output()
        .unwrap();
    let r = json(&o);
    assert_eq!(o.status.code(), Some(0), "{r:#}");
    assert_eq!(
        line(
            &r,
            "Study ok (1 configuration)",
            "#1: llamacpp can run here (runner embedded)"
        )["status"],
        "ok"
    );

    // A file that does not plan is a configuration error, as for `llem run`.
    std::fs::write(
        home.path().join("bad.yaml"),
        "model: x.gguf\ndecoder: {temprature: 1}\n",
    )
    .unwrap();
    let o = llem(home.path(), &["doctor", "bad.yaml"], &[])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("did you mean `temperature`?"));
}

/// A loopback server answering every request with 200 (a healthy OpenAI-compatible server,
/// as far as a readiness probe can tell); returns its port.
fn healthy_server() -> u16 {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().take(16).flatten() {
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut line = String::new();
            while r.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                line.clear();
            }
            let mut w = conn;
            let _ = w.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}",
            );
        }
    });
    port
}

/// Every endpoint a study names is asked: one that refuses connections fails the check
/// (its credentials redacted), a live one is fine; the two are two configurations, not one.
#[test]
fn the_doctor_asks_every_endpoint_a_study_names() {
    let _machine = common::shared();
    let home = tempfile::tempdir().unwrap();
    for d in ["powercap", "sys"] {
        std::fs::create_dir_all(home.path().join(d)).unwrap();
    }
    let live = healthy_server();
    let dead = common::free_port();
    std::fs::write(
        home.path().join("ends.yaml"),
        format!(
            "name: ends\nenergy_sampler: estimate\nexperiments:\n\
             \x20 - {{model: m, engine: openai, runners: {{openai: \"external:http://127.0.0.1:{live}\"}}}}\n\
             \x20 - {{model: m, engine: openai, runners: {{openai: \"external:http://u:s3cr3t-pw@127.0.0.1:{dead}\"}}}}\n"
        ),
    )
    .unwrap();
    let o = llem(
        home.path(),
        &["doctor", "ends.yaml", "--json", "--check"],
        &[],
    )
    .output()
    .unwrap();
    let r = json(&o);
    assert_eq!(o.status.code(), Some(2), "--check: 2 on a failure; {r:#}");
    let refused = line(
        &r,
        "Study ends (2 configurations)",
        &format!("#2: nothing answers at http://u:[REDACTED]@127.0.0.1:{dead}"),
    );
    assert_eq!(refused["status"], "fail");
    let ok = line(
        &r,
        "Study ends",
        &format!("#1: openai can run here (runner external:http://127.0.0.1:{live})"),
    );
    assert_eq!(ok["status"], "ok");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("s3cr3t-pw"));
}
