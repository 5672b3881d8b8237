//! Whole-node power beside the components: a written hwmon ACPI power meter, OpenIPMI's BMC
//! simulator read by the real `ipmitool` over LAN, and a Redfish stand-in, each held at a
//! known power above the written RAPL zone; node energy, the remainder and their bounds in
//! `result.json`, a study, `llem config` and the report.
//!
//! Without `ipmi_sim`/`ipmitool` the IPMI test says so and passes, unless
//! `LLEM_REQUIRE_IPMI=1` (set by `make test`, which installs them) makes that a failure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]

use std::path::Path;
use std::sync::atomic::Ordering;

use llem_testkit::node_power::{self, IpmiSim, REDFISH_PASSWORD, RedfishStandIn};
use serde_json::Value;

use crate::common;

/// The RAPL package's power, W.
const PACKAGE_W: f64 = 20.0;

const EXPERIMENT: &str = "model: SmolLM2-135M-Instruct.Q4_1.gguf\nenergy_sampler: rapl\n\
     llamacpp: {batch_size: 4}\n\
     dataset: {source: synthetic, n_prompts: 12, synthetic: {input_tokens: 32, output_tokens: 48}}\n\
     warmup: {n_warmup: 1, thermal_floor_seconds: 0}\n\
     baseline: {enabled: true, strategy: fresh, duration_seconds: 5}\n";

/// A HOME with a RAPL package at [`PACKAGE_W`], an empty sysfs and `user_config`.
struct Home {
    dir: tempfile::TempDir,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    writer: Option<std::thread::JoinHandle<f64>>,
}

impl Home {
    fn new(user_config: &str) -> Home {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys")).unwrap();
        std::fs::create_dir_all(dir.path().join("hwmon")).unwrap();
        std::fs::write(dir.path().join("user.yaml"), user_config).unwrap();
        let (stop, writer) = common::rapl_zone(&dir.path().join("powercap"), PACKAGE_W);
        Home {
            dir,
            stop,
            writer: Some(writer),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn llem(&self) -> std::process::Command {
        let mut c = common::llem_in(self.path());
        c.env("LLEM_CONFIG_PATH", self.path().join("user.yaml"))
            .env("LLEM_HWMON_ROOT", self.path().join("hwmon"));
        c
    }

    /// Runs `yaml` into `home/<name>`: its exit, stderr and results.
    fn run(
        &self,
        name: &str,
        yaml: &str,
        env: &[(&str, &str)],
    ) -> (Option<i32>, String, Vec<Value>) {
        let file = self.path().join(format!("{name}.yaml"));
        std::fs::write(&file, yaml).unwrap();
        let out = self.path().join(name);
        let o = self
            .llem()
            .envs(env.iter().copied())
            .arg("run")
            .arg(&file)
            .arg("-o")
            .arg(&out)
            .arg("-q")
            .output()
            .unwrap();
        let results = common::walk(&out)
            .into_iter()
            .filter(|p| p.ends_with("result.json"))
            .map(|p| serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap())
            .collect();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
            results,
        )
    }

    /// Stops the RAPL writer: its longest stall, s.
    fn stop(&mut self) -> f64 {
        self.stop.store(true, Ordering::Relaxed);
        self.writer.take().map_or(0.0, |w| w.join().unwrap())
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        self.stop();
    }
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Checks one result measured with the node held at `node_w` over a package at
/// [`PACKAGE_W`]: node energy, the components and the remainder, each within its bound.
fn check_node(r: &Value, sensor: &str, node_w: f64, stall_s: f64) {
    let b = &r["energy_breakdown"]["node"];
    assert_eq!(b["sensor"], sensor, "{b}");
    assert_eq!(r["system_scope"], "node");
    let [t0, t1] = [
        f(&r["measurement_window_s"][0]),
        f(&r["measurement_window_s"][1]),
    ];
    let d = t1 - t0;
    let node_j = f(&r["node_energy_j"]);
    assert_eq!(node_j, f(&b["energy_j"]));
    // The system figure is the node's; the headline (the CPU here) is never the node's.
    assert_eq!(node_j, f(&r["system_energy_j"]));
    let components_j = f(&b["components_j"]);
    let package_j: f64 = r["energy_breakdown"]["domains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| f(&d["energy_j"]))
        .sum();
    assert!(
        (components_j - package_j).abs() < 1e-9,
        "{components_j} vs {package_j}"
    );
    assert!((f(&r["total_energy_j"]) - package_j).abs() < 1e-9);
    let node_bound = f(&b["bound_j"]);
    // Its bound in the form the headline's domains have theirs.
    let u = &b["uncertainty"]["domains"][0];
    assert_eq!(u["name"], "node");
    assert_eq!(f(&u["bound_j"]), node_bound);
    assert!(f(&u["coverage"]) > 0.99, "{u}");
    assert!(
        (node_j - node_w * d).abs() <= node_bound + 0.01 * node_w * d,
        "node {node_j} J vs {} J (bound ±{node_bound} J)",
        node_w * d
    );
    // The bound is an edge of one update period each side, not a blanket.
    let period = f(&b["update_period_s"]);
    assert!(node_bound <= 2.0 * node_w * period * 1.05 + 1e-9, "{b}");
    let rest = f(&r["unattributed_j"]);
    assert!((rest - (node_j - components_j)).abs() < 1e-9);
    let rest_bound = f(&b["unattributed_bound_j"]);
    let want = (node_w - PACKAGE_W) * d;
    assert!(
        (rest - want).abs() <= rest_bound + 0.01 * node_w * d + 2.0 * PACKAGE_W * stall_s,
        "unattributed {rest} J vs {want} J (bound ±{rest_bound} J)"
    );
    // Split like the headline, the node's parts add up to it.
    let parts = f(&b["prefill_j"]) + f(&b["decode_j"]) + f(&b["idle_j"]);
    assert!(
        (parts - node_j).abs() <= 0.01 * node_j,
        "{parts} vs {node_j}"
    );
    // Idle node power from the baseline, and the system CO2 from node energy.
    assert!(
        (f(&b["baseline_power_w"]) - node_w).abs() < 0.05 * node_w,
        "{b}"
    );
    let e = &r["emissions"];
    let co2 = node_j / 3.6e6 * f(&e["carbon_intensity_gco2_kwh"]) * f(&e["datacenter_pue"]);
    assert!((f(&e["system_co2_g"]) - co2).abs() < 1e-9 * co2.max(1.0));
}

#[test]
fn an_acpi_power_meter_gives_node_energy_and_the_remainder_with_their_bounds() {
    let _machine = common::shared();
    let mut home =
        Home::new("measurement:\n  node_power:\n    source: hwmon\n    poll_interval_s: 0.25\n");
    let meter = node_power::hwmon_meter(&home.path().join("hwmon"), 65.0, 250);
    let (code, err, results) = home.run("meter", &format!("name: meter\n{EXPERIMENT}"), &[]);
    let stall_s = home.stop();
    assert_eq!(code, Some(0), "{err}");
    let r = &results[0];
    check_node(r, "hwmon", 65.0, stall_s);
    let b = &r["energy_breakdown"]["node"];
    assert!(b["device"].as_str().unwrap().contains("power_meter"), "{b}");
    assert!(
        r["reproducibility_notes"].to_string().contains("98.5%")
            || r["measurement_warnings"].to_string().contains("98.5%"),
        "the meter's stated accuracy is noted: {r}"
    );
    // The node's readings are in the timeseries beside the package's.
    let file = common::result_file(&home.path().join("meter"));
    let cell = file.parent().unwrap();
    let ts = llem_results::read_timeseries(&cell.join("timeseries.parquet")).unwrap();
    assert!(ts.domain.iter().any(|d| d == "node"));
    // Each request carries its share of the node, and the shares add up to the window's.
    let requests = llem_results::read_requests(&cell.join("requests.parquet")).unwrap();
    let shares: f64 = requests
        .iter()
        .map(|q| q.energy.and_then(|e| e.node_energy_j).unwrap())
        .sum();
    let node_j = f(&r["node_energy_j"]);
    assert!(
        (shares - node_j).abs() <= 0.01 * node_j,
        "{shares} vs {node_j}"
    );
    // Every phase has its node energy (the baseline's from idle node power), and the
    // lifecycle sums them.
    let phases = r["phases"].as_array().unwrap();
    let lifecycle: f64 = phases.iter().map(|p| f(&p["node_energy_j"])).sum();
    assert!((f(&r["lifecycle_node_energy_j"]) - lifecycle).abs() < 1e-6);
    let baseline = phases.iter().find(|p| p["phase"] == "baseline").unwrap();
    let span = f(&baseline["end_s"]) - f(&baseline["start_s"]);
    assert!((f(&baseline["node_energy_j"]) - 65.0 * span).abs() < 0.05 * 65.0 * span);

    // A meter reading below the components is a warning naming the likely cause.
    let mut home =
        Home::new("measurement:\n  node_power:\n    source: hwmon\n    poll_interval_s: 0.25\n");
    node_power::hwmon_meter(&home.path().join("hwmon"), 5.0, 250);
    let (code, err, results) = home.run("low", &format!("name: low\n{EXPERIMENT}"), &[]);
    home.stop();
    assert_eq!(code, Some(0), "{err}");
    let w = results[0]["measurement_warnings"].to_string();
    assert!(w.contains("below the measured components"), "{w}");
    drop(meter);
}

#[test]
fn ipmi_dcmi_over_lan_measures_the_node_in_a_study() {
    let _machine = common::shared();
    if !node_power::ipmi_tools_present() {
        assert!(
            std::env::var("LLEM_REQUIRE_IPMI").as_deref() != Ok("1"),
            "ipmi_sim, ipmitool or OpenIPMI's headers are missing (scripts/install-ipmi.sh)"
        );
        eprintln!(
            "ipmi_sim/ipmitool are not installed (apt-get install openipmi ipmitool \
             libopenipmi-dev); the IPMI test did not run. `make test` installs them and \
             requires it."
        );
        return;
    }
    let mut sim = IpmiSim::start(80.0, 1000);
    let user = format!(
        "measurement:\n  node_power:\n    ipmi:\n      host: 127.0.0.1\n      port: {}\n      \
         user: {}\n      password_env: BMC_PASSWORD\n      cipher_suite: 3\n",
        sim.port, sim.user
    );
    let mut home = Home::new(&user);
    let pw = [("BMC_PASSWORD", sim.password)];
    // `llem config` finds it (auto: a configured BMC).
    let o = home.llem().envs(pw).arg("config").output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("ipmi 127.0.0.1:") && text.contains("DCMI power reading"),
        "{text}"
    );
    let study = format!(
        "name: bmc\n{EXPERIMENT}sweep:\n  llamacpp.batch_size: [1, 4]\n\
         study_execution: {{n_cycles: 1, experiment_gap_seconds: 0, cycle_gap_seconds: 0}}\n"
    );
    let (code, err, results) = home.run("bmc", &study, &pw);
    let stall_s = home.stop();
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(results.len(), 2);
    for r in &results {
        check_node(r, "ipmi", 80.0, stall_s);
        // The BMC's 1 s period is coarse for these windows: said, and bounded.
        assert!(f(&r["energy_breakdown"]["node"]["update_period_s"]) >= 1.0);
    }
    // No credential reaches an artefact.
    for p in common::walk(&home.path().join("bmc")) {
        let bytes = std::fs::read(&p).unwrap();
        assert!(
            !bytes
                .windows(sim.password.len())
                .any(|w| w == sim.password.as_bytes()),
            "{} holds the BMC password",
            p.display()
        );
    }
    // The study's report stacks GPU, CPU, DRAM and the unattributed remainder.
    let page = common::report_page(home.path(), &home.path().join("bmc"));
    assert!(page.contains("node-energy-stack"), "no stacked node view");
    assert!(page.contains("unattributed"));

    // A BMC whose power reading is deactivated: named as a node source, the run fails and
    // says why; with `auto` it is noted and the run goes on without node energy.
    sim.set(80.0, 1000, false);
    let mut home = Home::new(&user.replace("node_power:\n", "node_power:\n    source: ipmi\n"));
    let (code, err, _) = home.run("off", &format!("name: off\n{EXPERIMENT}"), &pw);
    home.stop();
    assert_ne!(code, Some(0));
    assert!(err.contains("deactivated"), "{err}");
    let mut home = Home::new(&user);
    let o = home.llem().envs(pw).arg("doctor").output().unwrap();
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert!(
        text.contains("node: node power not measured") && text.contains("deactivated"),
        "llem doctor warns about the configured BMC: {text}"
    );
    let (code, err, results) = home.run("auto", &format!("name: auto\n{EXPERIMENT}"), &pw);
    home.stop();
    assert_eq!(code, Some(0), "{err}");
    let r = &results[0];
    assert_eq!(r["system_scope"], "components");
    assert!(r["node_energy_j"].is_null());
    assert!(
        r.to_string().contains("node power not measured"),
        "the reason is in the result: {r}"
    );
}

#[test]
fn redfish_chassis_power_measures_the_node() {
    let _machine = common::shared();
    let bmc = RedfishStandIn::start(120.0);
    let user = format!(
        "measurement:\n  node_power:\n    source: redfish\n    redfish:\n      url: {}\n      \
         user: admin\n",
        bmc.url
    );
    let mut home = Home::new(&user);
    let pw = [("LLEM_REDFISH_PASSWORD", REDFISH_PASSWORD)];
    let (code, err, results) = home.run("rf", &format!("name: rf\n{EXPERIMENT}"), &pw);
    let stall_s = home.stop();
    assert_eq!(code, Some(0), "{err}");
    check_node(&results[0], "redfish", 120.0, stall_s);
    assert!(bmc.requests.load(Ordering::Relaxed) > 3);
    for p in common::walk(&home.path().join("rf")) {
        let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
        assert!(!text.contains(REDFISH_PASSWORD), "{}", p.display());
    }
    // A wrong password: the named source fails the run, saying what the BMC answered.
    let mut home = Home::new(&user);
    let (code, err, _) = home.run(
        "bad",
        &format!("name: bad\n{EXPERIMENT}"),
        &[("LLEM_REDFISH_PASSWORD", "Xq7-not-it")],
    );
    home.stop();
    assert_ne!(code, Some(0));
    assert!(err.contains("401") && err.contains("redfish"), "{err}");
    assert!(!err.contains("Xq7-not-it"), "{err}");
    bmc.set_watts(0.0);
}

#[test]
fn llem_measure_reports_the_node_beside_the_domains() {
    let _machine = common::shared();
    let mut home = Home::new("measurement:\n  node_power:\n    poll_interval_s: 0.2\n");
    node_power::hwmon_meter(&home.path().join("hwmon"), 40.0, 200);
    let o = home
        .llem()
        .args([
            "measure",
            "--sampler",
            "rapl",
            "--interval",
            "50ms",
            "--json",
            "--",
            "sleep",
            "2",
        ])
        .output()
        .unwrap();
    home.stop();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(err.contains("node"), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let d = f(&v["duration_s"]);
    let node = f(&v["node_energy_j"]);
    // Two 0.2 s polls of 40 W at the edges at most.
    assert!(
        (node - 40.0 * d).abs() <= 2.0 * 0.2 * 40.0 + 0.01 * 40.0 * d,
        "{v}"
    );
    // The node never enters the domains' total.
    assert!(
        (f(&v["total_energy_j"]) - PACKAGE_W * d).abs() < 0.05 * PACKAGE_W * d,
        "{v}"
    );
    let rest = f(&v["unattributed_j"]);
    assert!((rest - (node - f(&v["total_energy_j"]))).abs() < 1e-9);
    assert_eq!(v["node"][0]["sensor"], "hwmon");
}
